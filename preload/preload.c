/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * preload/preload.c - libklock-preload.so: klock's locks under an unmodified program.
 *
 * What it is. `LD_PRELOAD=libklock-preload.so program` puts this library first in the
 * symbol search order, so the program's (and its libraries') calls to pthread_mutex_*,
 * pthread_cond_*, pthread_rwlock_* and pthread_spin_* (and pthread_cancel, for the condvar
 * waits' cancellation; _exit and _Exit, for lockstat's exit report) land here. Each object is decided
 * once - a klock lock, or glibc's own and forwarded to the real function found with
 * dlsym(RTLD_NEXT) - and the decision is written INTO the object, so every later call
 * knows it from one load. LiTL (userspace-peers.md section 3) does the same job with a
 * hash table from pthread object to a heap lock, a per-lock array of 2048 MCS nodes, a
 * real pthread mutex paired with every lock for condvars, and readers that serialise;
 * it loses process-shared and robust semantics and asserts on timedlock. Here the klock
 * state lives inside the pthread object, condvars are klock's own, rwlock readers share,
 * and what klock cannot honour exactly is left to glibc.
 *
 * Layout (static assertions in klp.h, checked for each build's architecture; glibc's
 * offsets are the same on x86_64 and aarch64, only pthread_mutex_t's size differs: 40/48):
 *   pthread_mutex_t   [0,24) the lock: kl_mutex, or kl_ticket/kl_mcs in [0,16) + the
 *                     holder (record or MCS node) in [16,24); [24,28) recursion depth;
 *                     [32,40) the tag, over glibc's __list.__next.
 *   pthread_cond_t    [0,16) kl_cond; [16,20) waiters of the generic path; [36,40) glibc's
 *                     attribute word (__wrefs: bit 0 process-shared, bit 1 MONOTONIC),
 *                     kept with glibc's meaning.
 *   pthread_rwlock_t  [0,40) kl_rwlock or kl_pcpu_rwsem (KLOCK_RWLOCK=pcpu_rwsem: its
 *                     per-CPU counters are a heap block it points to); [40,48) the tag,
 *                     over __pad2 (glibc never writes it); [48,52) glibc's __flags (the
 *                     rwlock kind), kept; [52,56) kl_pcpu_rwsem's writer (owner id);
 *                     kl_rwlock kinds: blocked realtime writers (preload/rwlock.c).
 *   pthread_spinlock_t  the int itself: a 15/16-bit ticket lock with a marker bit.
 * The fast path checks the tag against one constant (default implementation, default
 * type) and calls the klock lock; everything else takes one out-of-line dispatch.
 *
 * Why the mutex tag is not glibc's __kind. __kind (offset 16) is the field that tells a
 * static initializer's type (PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP etc. set only it) and
 * marks glibc's robust/PI/PP/process-shared mutexes (bits 16-128). A 24-byte, 8-aligned
 * kl_mutex cannot avoid offset 16 in a 40-byte object (every 8-aligned start, 0, 8 or 16,
 * covers it), and kl_mutex is the lock we want, so __kind is meaningful until klock takes
 * the object and the tag carries the type after that:
 *   tag has KLP_MAGIC         ours: the tag says implementation and type.
 *   tag 0, __kind has a forward bit (or KLOCK_MUTEX=pthread)   glibc's: forwarded.
 *   tag 0, __kind 0..3        pristine (static initializer, zero fill): ADOPTED - the
 *                             type is read from __kind and a tag CASed in from 0.
 *   tag anything else         a robust glibc mutex's list pointer: forwarded.
 * glibc's robust mutexes keep a canonical user pointer (or 0) in __list.__next, never a
 * value with KLP_MAGIC in its top half, and glibc's init zeroes the whole object, so a
 * glibc mutex's tag is never ours. Adoption is race-free: one CAS from 0 wins, the winner
 * reads __kind, zeroes the bytes that held it and publishes the final tag; the others
 * wait for that tag, and nobody touches the lock bytes before it (preload/mutex.c, T1/T2).
 * The rwlock works the same way with __shared (offset 28, inside kl_rwlock) as the
 * forward mark and __flags, outside it, as the static initializer's kind (nothing to
 * zero, so a plain CAS). The condvar needs no tag: its klock state avoids __wrefs, whose
 * bit 0 marks glibc's process-shared condvars.
 *
 * Semantics, per mutex type:
 *   NORMAL, DEFAULT, ADAPTIVE_NP   kl_mutex. Relock by the owner, unlock by a non-owner
 *                        and double unlock are undefined in POSIX; they are answered as
 *                        glibc does - the relock deadlocks, an unlock returns 0 and leaves
 *                        the mutex free (a foreign hold released) - and reported once per
 *                        lock (KLOCK_ON_ERROR=warn: every time; =abort: abort), counted in
 *                        lockstat's report (preload/misuse.c). A timed relock waits out its
 *                        deadline and returns ETIMEDOUT, as glibc does.
 *   ERRORCHECK           kl_mutex + ownership checks: EDEADLK on relock, EPERM on unlock
 *                        by a non-owner (kl_mutex_owned()); trylock by the owner EBUSY.
 *   RECURSIVE            kl_mutex + a depth counter written only by the owner; EAGAIN at
 *                        2^32 - 1 levels; EPERM on unlock by a non-owner.
 *   process-shared, robust, PRIO_INHERIT, PRIO_PROTECT   glibc's, forwarded: decided in
 *                        pthread_mutex_init() from the attributes (which glibc's init
 *                        records in __kind), exact glibc behaviour including EOWNERDEAD,
 *                        pthread_mutex_consistent() and the priority ceiling calls.
 * Timed calls: pthread_*_timedlock/timedwait take CLOCK_REALTIME deadlines (the condvar's
 * clock attribute for timedwait), the *_clock* variants REALTIME or MONOTONIC (others:
 * EINVAL, as glibc). A condvar wait parks once, on the deadline's own clock: a REALTIME
 * deadline arms a realtime kernel timer (FUTEX_CLOCK_REALTIME, kli_park_req.realtime)
 * that follows clock_settime() steps as glibc's does, so it returns ETIMEDOUT exactly
 * when the realtime clock reaches the deadline and 0 only when signalled (or cancelled).
 * The mutex and rwlock timed calls wait on CLOCK_MONOTONIC deadlines, converted per
 * slice of at most KLP_REALTIME_SLICE_NS and retried until the realtime clock reaches
 * the deadline: never early (a backward step just means more slices), a forward step
 * noticed at the end of the current slice (late by at most one slice); a lock, unlike a
 * condvar, loses nothing when its waiter retries. As glibc: a free mutex is taken even
 * when the deadline is malformed or past; tv_nsec out of range on a real wait is EINVAL;
 * a negative tv_sec is a deadline that has passed (ETIMEDOUT); any valid tv_sec, up to
 * LONG_MAX, is a deadline (conversions saturate instead of wrapping).
 *
 * Condvars. glibc's pthread_cond_wait() releases and retakes the mutex with libc-internal
 * functions that this library cannot interpose, so a glibc condvar can only be used with a
 * glibc mutex. Condvars are therefore klock's unless created process-shared:
 *   klock cond + kl_mutex (adaptive types)     kl_cond: waiters queue in the parking lot,
 *                        broadcast requeues them onto the mutex (no herd); a recursive
 *                        mutex's whole depth is released and restored across the wait.
 *   klock cond + any other mutex (glibc's forwarded ones, ticket/mcs)   the generic path:
 *                        the same parking-lot queue keyed by the condvar, the mutex
 *                        released by the queue's before_sleep callback (so a signal cannot
 *                        slip between release and sleep) and retaken after; a robust
 *                        mutex's EOWNERDEAD comes back from the wait, as in glibc.
 *   glibc cond (process-shared) + glibc mutex  forwarded.
 *   glibc cond + klock mutex                   refused: reported (KLOCK_ON_ERROR, abort by
 *                        default) and EINVAL, never corruption. Make both process-shared.
 * Cancellation: the three waits are cancellation points. glibc's deferred cancel only
 * marks the target, and unwinding a waiter asynchronously would tear a parking-lot queue,
 * so pthread_cancel is interposed too: it forwards, then wakes the target if it sleeps in
 * one of our waits; the woken waiter retakes the mutex and acts on the cancel with
 * pthread_testcancel(), so cleanup handlers run holding it (preload/cond.c).
 * LiTL's pairing (release the fast lock, wait on a real cond with a shadow real mutex,
 * retake both) makes every wait and wake-up take two locks and keeps the herd; here a
 * wait is one queue operation and a broadcast one requeue.
 *
 * Rwlocks keep reader concurrency: kl_rwlock (or kl_pcpu_rwsem) shared mode. glibc's kinds:
 * PREFER_READER (default) and PREFER_WRITER_NP (which glibc treats as PREFER_READER) map
 * to kl_rwlock with READ TRACKING: klock's rwlocks prefer a waiting writer, so a thread
 * that read-locks a lock it already reads would wait behind that writer forever, while
 * POSIX requires recursive read locks to work. A small per-thread table counts this
 * thread's read holds; a nested read lock only bumps the count. PREFER_WRITER_NONRECURSIVE
 * _NP promises no recursion: no tracking. EDEADLK for a read or write lock by the writer
 * and (tracked kinds) for a write lock by a reader, where glibc would hang.
 *
 * Spinlocks. pthread_spinlock_t is an int. pthread_spin_init(PRIVATE) makes it a klock
 * ticket lock (bit 15 marks it; glibc's words are only 0 or 1); PROCESS_SHARED and
 * never-initialised zero words keep glibc's protocol and are forwarded, so a spinlock in
 * shared memory works with processes not running under this library. (preload/spin.c)
 *
 * Selection: KLOCK_MUTEX=adaptive|ticket|mcs|pthread and KLOCK_RWLOCK=rwlock|pcpu_rwsem|
 * pthread, read once, on first use; an unknown value is a one-line message and the
 * default. `pthread` forwards every such object (and every condvar with it) to glibc:
 * the interposition-cost baseline. MCS needs a queue node per acquisition that lives until
 * the unlock: each thread has a pool of nodes (preload/mutex.c) and the node in use is
 * stored in the mutex ([16,24)), so the unlock finds it.
 *
 * Recursion and start-up. Nothing here calls an interposed function on its own behalf:
 * the substrate never uses pthread locks on Linux (futex wait backend, kli_wordlock), and
 * this library always builds its copy of klock with the futex backend, whatever -Dwait
 * says (the parking backend is made of pthread mutexes and condvars). Another library's
 * constructor may lock a mutex before ours runs (litl#1): nothing on the lock paths needs
 * our constructor - the configuration is read on first use, glibc's functions are
 * resolved on first use, thread records come from mmap (not malloc, which may itself
 * lock a mutex), and klock's own start-up tolerates being re-entered on one thread
 * (locks/init.c, locks/substrate/thread.c).
 *
 * fork(). A lock the forking thread holds is held by the child's thread, whose thread
 * record is the same memory, so the child can unlock it; a lock another thread held stays
 * held (as in glibc). The substrate's internal locks (parking-lot buckets, the name
 * table, lockstat's maps, the thread registry) reset themselves in the child, and the
 * parking lot forgets the threads that were queued (locks/substrate/park.c); this library resets
 * its node-pool lock and frees the condvars' cancellation slots (preload/cond.c). Tested
 * in tests/preload/test_preload_fork.c.
 *
 * Call sites. klock's lockstat and reports name the caller of the lock function, which
 * here is an interposer. Every interposer first stores its own caller in the thread's
 * kli_site_override (one TLS store), and this library's copy of klock (built with
 * KLOCK_PRELOAD=1) reports that site instead: `klock-stat -- cmd` names the program's
 * functions.
 *
 * Limits: objects must be initialised through the interposed functions or statically (a
 * mutex initialised by a copy of glibc that bypassed this library is unknown here); C11
 * mtx_t/cnd_t are not interposed (glibc implements them with internal calls, so they stay
 * glibc's, consistently); a klock mutex is not async-signal-safe (neither is glibc's);
 * process-private objects only for klock (process-shared ones are glibc's); ASan and
 * other interposers of the same functions cannot be combined with this library.
 */
#include <dlfcn.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "klp.h"
#include "lockstat_impl.h"

/* A CLOCK_REALTIME mutex/rwlock wait sleeps at most this long before re-reading the
 * realtime clock (condvar waits use a realtime timer instead). */
#define KLP_REALTIME_SLICE_NS 1000000000ll
/* Longest message klp_warn() writes. */
#define KLP_MSG_MAX 512

__thread const void *kli_site_override __attribute__((tls_model("initial-exec")));

/* ---- messages ---------------------------------------------------------------------------- */

void klp_warn(const char *fmt, ...)
{
	char buf[KLP_MSG_MAX];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "klock-preload: ");

	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, (size_t)n) < 0) {
		/* nothing better to do with a failing stderr */
	}
}

/* ---- configuration ------------------------------------------------------------------------ */

struct klp_config klp_cfg;
_Atomic bool klp_cfg_ready;
static _Atomic bool klp_cfg_claimed;

static const char *const mutex_impl_names[] = {
	[KLP_I_ADAPTIVE] = "adaptive",
	[KLP_I_TICKET] = "ticket",
	[KLP_I_MCS] = "mcs",
	[KLP_I_PTHREAD] = "pthread",
};

static const char *const rw_impl_names[] = {
	[KLP_R_RWLOCK] = "rwlock",
	[KLP_R_PCPU] = "pcpu_rwsem",
	[KLP_R_PTHREAD] = "pthread",
};

/* The index of $var's value in @names, or @dflt (with a message) when it is unknown. */
static unsigned config_pick(const char *var, const char *const *names, unsigned n,
			    unsigned dflt)
{
	const char *v = getenv(var);
	char list[128] = "";

	if (v == NULL || v[0] == '\0')
		return dflt;
	for (unsigned i = 0; i < n; i++) {
		if (strcmp(v, names[i]) == 0)
			return i;
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
			 i > 0 ? "|" : "", names[i]);
	}
	klp_warn("%s=%s: unknown implementation (expected %s); using %s", var, v, list,
		 names[dflt]);
	return dflt;
}

/* One thread parses; any other that arrives meanwhile waits the few microseconds it takes
 * (getenv and strcmp, no locks). */
void klp_config_load(void)
{
	bool f = false;

	if (!atomic_compare_exchange_strong_explicit(&klp_cfg_claimed, &f, true,
						     memory_order_relaxed, memory_order_relaxed)) {
		while (!atomic_load_explicit(&klp_cfg_ready, memory_order_acquire))
			kl_arch_relax();
		return;
	}
	klp_cfg.mutex_impl = config_pick("KLOCK_MUTEX", mutex_impl_names,
					 KL_ARRAY_SIZE(mutex_impl_names), KLP_I_ADAPTIVE);
	klp_cfg.rw_impl = config_pick("KLOCK_RWLOCK", rw_impl_names,
				      KL_ARRAY_SIZE(rw_impl_names), KLP_R_RWLOCK);
	/* Pairs with the acquire loads in klp_config() and above: the fields are set. */
	atomic_store_explicit(&klp_cfg_ready, true, memory_order_release);
}

/* ---- glibc's functions ------------------------------------------------------------------- */

#define KLP_NAME(f) [KLP_R_##f] = #f
static const char *const real_names[KLP_R_COUNT] = {
	KLP_NAME(pthread_mutex_init), KLP_NAME(pthread_mutex_destroy),
	KLP_NAME(pthread_mutex_lock), KLP_NAME(pthread_mutex_trylock),
	KLP_NAME(pthread_mutex_timedlock), KLP_NAME(pthread_mutex_clocklock),
	KLP_NAME(pthread_mutex_unlock), KLP_NAME(pthread_mutex_consistent),
	KLP_NAME(pthread_mutex_getprioceiling), KLP_NAME(pthread_mutex_setprioceiling),
	KLP_NAME(pthread_cond_init), KLP_NAME(pthread_cond_destroy),
	KLP_NAME(pthread_cond_wait), KLP_NAME(pthread_cond_timedwait),
	KLP_NAME(pthread_cond_clockwait), KLP_NAME(pthread_cond_signal),
	KLP_NAME(pthread_cond_broadcast),
	KLP_NAME(pthread_rwlock_init), KLP_NAME(pthread_rwlock_destroy),
	KLP_NAME(pthread_rwlock_rdlock), KLP_NAME(pthread_rwlock_tryrdlock),
	KLP_NAME(pthread_rwlock_timedrdlock), KLP_NAME(pthread_rwlock_clockrdlock),
	KLP_NAME(pthread_rwlock_wrlock), KLP_NAME(pthread_rwlock_trywrlock),
	KLP_NAME(pthread_rwlock_timedwrlock), KLP_NAME(pthread_rwlock_clockwrlock),
	KLP_NAME(pthread_rwlock_unlock),
	KLP_NAME(pthread_spin_init), KLP_NAME(pthread_spin_destroy),
	KLP_NAME(pthread_spin_lock), KLP_NAME(pthread_spin_trylock),
	KLP_NAME(pthread_spin_unlock),
	KLP_NAME(pthread_cancel),
	KLP_NAME(pthread_create),
};

_Atomic(klp_fn) klp_real_fn[KLP_R_COUNT];

/* dlsym(RTLD_NEXT) gives the next definition after this library: glibc's (for the condvar
 * functions, their default version, GLIBC_2.3.2 - the current condvar ABI). NULL if none.
 * (An object pointer becomes a function pointer through memcpy, as POSIX intends.) */
static klp_fn real_lookup(enum klp_real_id id)
{
	void *p = dlsym(RTLD_NEXT, real_names[id]);
	klp_fn f;

	memcpy(&f, &p, sizeof(f));
	return f;
}

klp_fn klp_real_resolve(enum klp_real_id id)
{
	klp_fn f = real_lookup(id);

	if (f == NULL) {
		klp_warn("cannot find the C library's %s (%s); aborting", real_names[id],
			 dlerror());
		abort();
	}
	atomic_store_explicit(&klp_real_fn[id], f, memory_order_relaxed);
	return f;
}

/* ---- deadlines ------------------------------------------------------------------------------ */

/* @ts in nanoseconds, saturated at INT64_MAX (year 2262): a far-future deadline stays in
 * the future instead of overflowing (tv_sec may be anything up to LONG_MAX). */
static int64_t ts_ns(const struct timespec *ts)
{
	if (ts->tv_sec >= INT64_MAX / (int64_t)KLI_NSEC_PER_SEC)
		return INT64_MAX;
	if (ts->tv_sec <= INT64_MIN / (int64_t)KLI_NSEC_PER_SEC)
		return INT64_MIN;
	return (int64_t)ts->tv_sec * (int64_t)KLI_NSEC_PER_SEC + ts->tv_nsec;
}

static struct timespec ns_ts(int64_t ns)
{
	struct timespec ts = { .tv_sec = ns / (int64_t)KLI_NSEC_PER_SEC,
			       .tv_nsec = ns % (int64_t)KLI_NSEC_PER_SEC };

	return ts;
}

static int64_t clock_now_ns(clockid_t c)
{
	struct timespec now;

	clock_gettime(c, &now);
	return ts_ns(&now);
}

int klp_deadline_slice(const struct klp_deadline *d, struct timespec *mono, bool *last)
{
	int64_t left;

	if (d->abs->tv_nsec < 0 || d->abs->tv_nsec >= (long)KLI_NSEC_PER_SEC)
		return EINVAL;
	if (d->abs->tv_sec < 0)
		return ETIMEDOUT;
	*last = true;
	if (d->clock == CLOCK_MONOTONIC) {
		*mono = *d->abs;
		return kli_deadline_passed(d->abs) ? ETIMEDOUT : 0;
	}
	left = ts_ns(d->abs) - clock_now_ns(CLOCK_REALTIME);
	if (left <= 0)
		return ETIMEDOUT;
	if (left > KLP_REALTIME_SLICE_NS) {
		left = KLP_REALTIME_SLICE_NS;
		*last = false;
	}
	*mono = ns_ts(clock_now_ns(CLOCK_MONOTONIC) + left);
	return 0;
}

bool klp_deadline_passed(const struct klp_deadline *d)
{
	return d->abs->tv_sec < 0 || clock_now_ns(d->clock) >= ts_ns(d->abs);
}

void klp_sleep_until(const struct klp_deadline *d)
{
	if (d->abs->tv_sec < 0 || d->abs->tv_nsec < 0 ||
	    d->abs->tv_nsec >= (long)KLI_NSEC_PER_SEC)
		return;
	while (clock_nanosleep(d->clock, TIMER_ABSTIME, d->abs, NULL) == EINTR)
		;
}

/* ---- start-up and fork ------------------------------------------------------------------ */

/* ---- threads ------------------------------------------------------------------------------- */

_Atomic bool klp_rt_threads;

/* Whether @attr starts a SCHED_FIFO/SCHED_RR thread (its own policy, not inherited). */
static bool klp_attr_realtime(const pthread_attr_t *attr)
{
	int inherit, policy;

	return attr != NULL && pthread_attr_getinheritsched(attr, &inherit) == 0 &&
	       inherit == PTHREAD_EXPLICIT_SCHED &&
	       pthread_attr_getschedpolicy(attr, &policy) == 0 &&
	       (policy == SCHED_FIFO || policy == SCHED_RR);
}

/* glibc's; and with the program's first thread, klock-stat's lockstat control thread
 * (lockstat.c: a single-threaded program must stay single-threaded). A realtime thread
 * started here sets klp_rt_threads (preload/rwlock.c: KLOCK_RWLOCK=pcpu_rwsem). */
KLP_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
			      void *(*fn)(void *), void *arg)
{
	int err = KLP_REAL(pthread_create)(thread, attr, fn, arg);

	if (err == 0 && klp_attr_realtime(attr))
		atomic_store_explicit(&klp_rt_threads, true, memory_order_relaxed);
	if (err == 0)
		kli_lockstat_ctl_start(KLP_REAL(pthread_create));
	return err;
}

/* ---- _exit ------------------------------------------------------------------------------ */

/* A program that leaves by _exit() or _Exit() (to skip its atexit handlers and stdio
 * flushes: ld.lld, fork children, fast exits) runs no atexit, so lockstat's exit report
 * is written here (KLOCK_LOCKSTAT set; lockstat.c: kli_lockstat_exit_flush(), which
 * neither allocates nor locks in this process). Then the process ends as glibc's _exit
 * ends it: exit_group. glibc's own internal calls of _exit (exit(), posix_spawn's child)
 * do not come here. */
static _Noreturn void klp_exit_group(int status)
{
	kli_lockstat_exit_flush();
	for (;;)
		syscall(SYS_exit_group, status);
}

KLP_EXPORT void _exit(int status)
{
	klp_exit_group(status);
}

KLP_EXPORT void _Exit(int status)
{
	klp_exit_group(status);
}

static void klp_atfork_child(void)
{
	klp_mutex_atfork_child();
	klp_cond_atfork_child();
	klp_rwlock_atfork_child();
}

/* Not needed for correctness (everything also happens on first use): it moves the
 * dlsym() calls and klock's start-up out of the program's first lock call, and reads the
 * configuration while the process is single-threaded. */
__attribute__((constructor)) static void klp_ctor(void)
{
	klp_config();
	for (unsigned i = 0; i < KLP_R_COUNT; i++) {
		klp_fn f = real_lookup(i);

		if (f != NULL)
			atomic_store_explicit(&klp_real_fn[i], f, memory_order_relaxed);
	}
	kli_init();
	pthread_atfork(NULL, NULL, klp_atfork_child);
}
