/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * preload/rwlock.c - the pthread_rwlock_* interposers (the design is in preload/preload.c).
 *
 * Readers share: pthread read locks are kl_rwlock read locks, so readers of one lock run
 * in parallel (LiTL turns them into exclusive locks).
 *
 * Read tracking. kl_rwlock prefers writers: a new reader waits for a writer that waits,
 * so a thread that read-locks a lock it already reads, while a writer waits, would wait
 * for that writer, which waits for it. POSIX (and glibc's default PREFER_READER kind)
 * lets a thread hold a read lock several times. So for the PREFER_READER and PREFER_WRITER
 * kinds each thread keeps a small table of the rwlocks it reads and how many times; a read
 * lock of a lock already in the table only counts, and the kl_rwlock read hold is released
 * with the last unlock. The table is thread-local (initial-exec TLS: no allocation). A
 * thread that reads more than KLP_RD_TRACK distinct locks at once holds the extra ones
 * untracked (counted, not named): a recursive read of those is not protected (a one-time
 * message says so). PREFER_WRITER_NONRECURSIVE_NP promises no recursion: not tracked.
 *
 * Which side an unlock releases: a tracked read hold if the table has the lock; else the
 * write side if this thread is the writer (kl_rwlock_wowned()); else a read hold (an
 * untracked one, or - undefined in POSIX, tolerated by glibc - another thread's). An
 * unlock of a free lock, or of one another thread write-holds, is undefined too: it is
 * reported per KLOCK_ON_ERROR (once per lock by default) and answered 0, as glibc
 * answers, leaving the lock as it was (rw_unlock_undefined()).
 *
 * KLOCK_RWLOCK=pcpu_rwsem puts a kl_pcpu_rwsem there instead (readers touch only their
 * CPU's counter; writers pay a grace period per burst). It has no timed locks: the timed
 * variants poll its trylocks, sleeping 1 us doubling to 1 ms between polls (so a timed
 * writer does not queue: steady readers can starve it until its deadline), and each
 * failed write try may cost a grace period. It needs the write unlock on the locking
 * thread (true of any correct program) and allocates per-CPU counters on first use,
 * freed by destroy (a zero-filled rwlock never destroyed keeps them: one cache line per
 * possible CPU).
 *
 * Realtime readers (XSH pthread_rwlock_rdlock): with SCHED_FIFO/SCHED_RR threads a reader
 * gets the lock unless a writer holds it or a writer of higher or equal priority is
 * blocked on it. kl_rwlock prefers writers and knows nothing of priorities, so a kl_rwlock
 * kind keeps, in the spare word `writer` (the kl_pcpu_rwsem kind's, unused here), how many
 * realtime writers are blocked (bits 0-15) and the highest priority among them since the
 * count was last 0 (bits 16-23: conservative - a priority that left stays until the count
 * drains). A writer counts itself there only on its slow path, a reader reads it only on
 * its slow path, and only there is the policy looked up (pthread_getschedparam, cached by
 * glibc for threads whose policy was set through pthread calls). A realtime reader that
 * outranks the recorded writers takes kli_rwlock_read_lock_outranking(): it waits for a
 * write holder, not for waiting writers. Ordering: a snapshot (relaxed); a writer that
 * blocks just after the reader looked is, for POSIX, not yet blocked. kl_pcpu_rwsem keeps
 * its writer preference - its readers are per-CPU counts a blocked writer stops, and a
 * reader let past a draining writer could not tell whether the writer already owns the
 * lock - so under KLOCK_RWLOCK=pcpu_rwsem a process that runs realtime threads gets
 * kl_rwlock instead, for every rwlock it sets up (init, or adoption on first use) from
 * the moment it is seen to: the setting-up thread is SCHED_FIFO/SCHED_RR, or
 * pthread_create() started such a thread (klp_rt_threads). A lock set up before keeps
 * kl_pcpu_rwsem (documented in docs/preload.md).
 *
 * Errors, as glibc: EINVAL for a timed call's tv_nsec out of range (checked first, even
 * when the lock is free), EDEADLK for rdlock/wrlock/timed* by the writer, EBUSY for try* that
 * would wait (the writer's own try* included), EAGAIN at 2^32 - 1 recursive read holds;
 * beyond glibc, EDEADLK for a write lock by a thread that reads it (tracked kinds), where
 * glibc waits forever. Adoption of a pristine (static or zeroed) rwlock is the mutex's
 * T1/T2 protocol, with __shared (offset 28) as the forward mark and __flags as the kind.
 */
#include <sched.h>
#include <string.h>
#include <time.h>

#include <klock/pcpu_rwsem.h>
#include "klp.h"
#include "lockstat_impl.h"
#include "rwlock_impl.h"

/* Distinct rwlocks one thread can hold for reading at once and still read-lock again
 * safely while a writer waits. */
#define KLP_RD_TRACK 16
/* A kl_pcpu_rwsem timed read polls its trylock, sleeping this long at first ... */
#define RW_POLL_MIN_NS 1000ll
/* ... doubling up to this. */
#define RW_POLL_MAX_NS 1000000ll

/* `writer` word of a kl_rwlock kind: one blocked realtime writer (bits 0-15 count them)... */
#define RW_RTW_ONE 1u
#define RW_RTW_COUNT_MASK 0xffffu
/* ... and the highest priority among them (bits 16-23). */
#define RW_RTW_PRIO_SHIFT 16
#define RW_RTW_PRIO_MASK 0xffu

struct rd_hold {
	const void *lock;
	uint32_t count;
};

struct rd_table {
	uint32_t n;           /* entries in use */
	uint32_t untracked;   /* read holds past a full table */
	struct rd_hold e[KLP_RD_TRACK];
};

static __thread struct rd_table tls_rd __attribute__((tls_model("initial-exec")));
static _Atomic bool rd_overflow_said;

static inline struct klp_rwlock *RW(pthread_rwlock_t *rw)
{
	return (struct klp_rwlock *)(void *)rw;
}

void klp_rwlock_atfork_child(void)
{
	/* nothing shared: the tables are per thread and the child's is its parent's thread's */
}

/* ---- read tracking ----------------------------------------------------------------------- */

static inline bool rw_tracked(uint64_t t)
{
	return KLP_TAG_KIND(t) != KLP_RK_NONRECURSIVE;
}

static inline int rd_find(const struct klp_rwlock *rw)
{
	for (int i = (int)tls_rd.n - 1; i >= 0; i--)
		if (tls_rd.e[i].lock == rw)
			return i;
	return -1;
}

static KL_NOINLINE void rd_overflow(void)
{
	bool f = false;

	tls_rd.untracked++;
	if (atomic_compare_exchange_strong_explicit(&rd_overflow_said, &f, true,
						    memory_order_relaxed, memory_order_relaxed))
		klp_warn("a thread holds more than %d rwlocks for reading at once; read locks "
			 "beyond that are not tracked, so recursive read locks on them may wait "
			 "for a waiting writer (pthread_rwlock kind PREFER_READER)", KLP_RD_TRACK);
}

static inline void rd_push(const struct klp_rwlock *rw)
{
	if (kl_unlikely(tls_rd.n == KLP_RD_TRACK)) {
		rd_overflow();
		return;
	}
	tls_rd.e[tls_rd.n++] = (struct rd_hold){ rw, 1 };
}

static inline void rd_remove(int i)
{
	tls_rd.e[i] = tls_rd.e[--tls_rd.n];
}

/* ---- tags and adoption ---------------------------------------------------------------- */

static int rw_rt_prio(void);

/* The implementation a lock set up now gets: KLOCK_RWLOCK's, but kl_rwlock rather than
 * kl_pcpu_rwsem in a process that runs realtime threads (see the top). */
static unsigned rw_impl_now(void)
{
	unsigned impl = klp_config()->rw_impl;

	if (impl != KLP_R_PCPU)
		return impl;
	if (!atomic_load_explicit(&klp_rt_threads, memory_order_relaxed) && rw_rt_prio() == 0)
		return impl;
	atomic_store_explicit(&klp_rt_threads, true, memory_order_relaxed);
	return KLP_R_RWLOCK;
}

static uint64_t rw_tag(struct klp_rwlock *rw)
{
	uint64_t t = atomic_load_explicit(&rw->tag, memory_order_acquire); /* T2 */
	unsigned impl, kind;

	if (KLP_TAG_OURS(t))
		return t;
	if (t != 0 || klp_config()->rw_impl == KLP_R_PTHREAD ||
	    atomic_load_explicit((_Atomic int *)(void *)((char *)rw + KLP_RW_SHARED_OFF),
				 memory_order_relaxed) != 0)
		return 0;
	kind = atomic_load_explicit(&rw->kind, memory_order_relaxed);
	if (kind > KLP_RK_NONRECURSIVE)
		return 0;
	impl = rw_impl_now();
	/* T1: release, pairs with T2 (zero bytes are both locks' static initializers). */
	if (atomic_compare_exchange_strong_explicit(&rw->tag, &t, KLP_TAG(impl, kind),
						    memory_order_acq_rel, memory_order_acquire)) {
		kli_lockstat_first_used(rw);   /* once per lock: its label's first-use site */
		return KLP_TAG(impl, kind);
	}
	return KLP_TAG_OURS(t) ? t : 0;
}

/* ---- the two implementations -------------------------------------------------------------- */

static inline bool rw_pcpu(uint64_t t)
{
	return KLP_TAG_IMPL(t) == KLP_R_PCPU;
}

/* kl_pcpu_rwsem does not name its writer to others: the preload keeps the writer's owner
 * id (locks/substrate/thread.h: one per thread lifetime, never its recycled record) in the 32-bit
 * spare word, written by the writer only, as 1 + (id / KLI_OWNER_STEP - 1) mod (2^32 - 1):
 * 0 stays "no writer". So a thread that reuses the record of a thread that exited
 * write-holding the lock is not its writer. Limit: the compressed ids repeat every
 * 2^32 - 1 thread lifetimes; a thread whose id is that many lifetimes after an exited
 * writer's would pass for it. */
static inline uint32_t rw_id(kli_owner_t o)
{
	return 1u + (uint32_t)((o / KLI_OWNER_STEP - 1u) % UINT32_MAX);
}

static inline uint32_t rw_me(void)
{
	return rw_id(kli_owner());
}

static bool rw_wowned(struct klp_rwlock *rw, uint64_t t)
{
	if (!rw_pcpu(t))
		return kl_rwlock_wowned(&rw->u.rw);
	return kli_tls_owner != 0 &&
	       atomic_load_explicit(&rw->writer, memory_order_relaxed) == rw_id(kli_tls_owner);
}

static bool rw_tryrd(struct klp_rwlock *rw, uint64_t t)
{
	return rw_pcpu(t) ? kl_pcpu_rwsem_read_trylock(&rw->u.pc)
			  : kl_rwlock_read_trylock(&rw->u.rw);
}

static void rw_rd(struct klp_rwlock *rw, uint64_t t)
{
	if (rw_pcpu(t))
		kl_pcpu_rwsem_read_lock(&rw->u.pc);
	else
		kl_rwlock_read_lock(&rw->u.rw);
}

static void rw_rdunlock(struct klp_rwlock *rw, uint64_t t)
{
	if (rw_pcpu(t))
		kl_pcpu_rwsem_read_unlock(&rw->u.pc);
	else
		kl_rwlock_read_unlock(&rw->u.rw);
}

static bool rw_trywr(struct klp_rwlock *rw, uint64_t t)
{
	if (!rw_pcpu(t))
		return kl_rwlock_write_trylock(&rw->u.rw);
	if (!kl_pcpu_rwsem_write_trylock(&rw->u.pc))
		return false;
	atomic_store_explicit(&rw->writer, rw_me(), memory_order_relaxed);
	return true;
}

static void rw_wr(struct klp_rwlock *rw, uint64_t t)
{
	if (!rw_pcpu(t)) {
		kl_rwlock_write_lock(&rw->u.rw);
		return;
	}
	kl_pcpu_rwsem_write_lock(&rw->u.pc);
	atomic_store_explicit(&rw->writer, rw_me(), memory_order_relaxed);
}

static void rw_wrunlock(struct klp_rwlock *rw, uint64_t t)
{
	if (!rw_pcpu(t)) {
		kl_rwlock_write_unlock(&rw->u.rw);
		return;
	}
	atomic_store_explicit(&rw->writer, 0, memory_order_relaxed);
	kl_pcpu_rwsem_write_unlock(&rw->u.pc);
}

/* ---- realtime readers (see the top) ------------------------------------------------------ */

/* The calling thread's SCHED_FIFO/SCHED_RR priority, or 0 under any other policy. Slow
 * paths only. */
static int rw_rt_prio(void)
{
	struct sched_param sp;
	int policy;

	if (pthread_getschedparam(pthread_self(), &policy, &sp) != 0 ||
	    (policy != SCHED_FIFO && policy != SCHED_RR))
		return 0;
	return sp.sched_priority;
}

/* A realtime writer of priority @prio blocks on @rw (a kl_rwlock kind). */
static void rw_rtw_enter(struct klp_rwlock *rw, int prio)
{
	uint32_t v = atomic_load_explicit(&rw->writer, memory_order_relaxed), n, top;

	do {
		top = (v >> RW_RTW_PRIO_SHIFT) & RW_RTW_PRIO_MASK;
		if ((uint32_t)prio > top)
			top = (uint32_t)prio & RW_RTW_PRIO_MASK;
		n = ((v & RW_RTW_COUNT_MASK) + RW_RTW_ONE) | (top << RW_RTW_PRIO_SHIFT);
	} while (!atomic_compare_exchange_weak_explicit(&rw->writer, &v, n, memory_order_relaxed,
							memory_order_relaxed));
}

/* ... and no longer blocks (it got the lock or timed out). */
static void rw_rtw_leave(struct klp_rwlock *rw)
{
	uint32_t v = atomic_load_explicit(&rw->writer, memory_order_relaxed), n;

	do
		n = (v & RW_RTW_COUNT_MASK) == RW_RTW_ONE ? 0 : v - RW_RTW_ONE;
	while (!atomic_compare_exchange_weak_explicit(&rw->writer, &v, n, memory_order_relaxed,
						      memory_order_relaxed));
}

/* Does a reader of realtime priority @prio outrank every blocked (realtime) writer? */
static bool rw_rt_outranks(const struct klp_rwlock *rw, int prio)
{
	uint32_t v = atomic_load_explicit(&rw->writer, memory_order_relaxed);

	return prio > 0 && ((v & RW_RTW_COUNT_MASK) == 0 ||
			    (uint32_t)prio > ((v >> RW_RTW_PRIO_SHIFT) & RW_RTW_PRIO_MASK));
}

/* kl_pcpu_rwsem's timed locks poll its trylocks, sleeping a little more each time. */
static int pcpu_timed(struct klp_rwlock *rw, uint64_t t, bool write,
		      const struct timespec *mono)
{
	int64_t nap = RW_POLL_MIN_NS;

	while (!(write ? rw_trywr(rw, t) : kl_pcpu_rwsem_read_trylock(&rw->u.pc))) {
		struct timespec ts = { 0, (long)nap };

		if (kli_deadline_passed(mono))
			return ETIMEDOUT;
		nanosleep(&ts, NULL);
		if (nap < RW_POLL_MAX_NS)
			nap *= 2;
	}
	return 0;
}

/* A timed acquisition in slices (preload.c); 0, ETIMEDOUT or EINVAL. @outrank: a read by
 * a realtime reader that outranks the blocked writers (kl_rwlock kinds). */
static int rw_timed(struct klp_rwlock *rw, uint64_t t, bool write, bool outrank,
		    const struct klp_deadline *d)
{
	struct timespec mono;
	bool last;
	int err;

	for (;;) {
		err = klp_deadline_slice(d, &mono, &last);
		if (err != 0)
			return err;
		if (rw_pcpu(t))
			err = pcpu_timed(rw, t, write, &mono);
		else if (write)
			err = kl_rwlock_write_timedlock(&rw->u.rw, &mono);
		else
			err = outrank ? kli_rwlock_read_lock_outranking(&rw->u.rw, &mono)
				      : kl_rwlock_read_timedlock(&rw->u.rw, &mono);
		if (err != ETIMEDOUT)
			return err;
	}
}

/* glibc checks a timed rwlock call's tv_nsec before anything else (unlike a mutex's). */
static bool rw_deadline_ok(const struct klp_deadline *d)
{
	return d == NULL || (d->abs->tv_nsec >= 0 && d->abs->tv_nsec < (long)KLI_NSEC_PER_SEC);
}

/* ---- the operations, for any tag ---------------------------------------------------------- */

/* Read lock; @d NULL: wait without a deadline; @try: do not wait. */
static int rw_rdlock_tagged(struct klp_rwlock *rw, uint64_t t, const struct klp_deadline *d,
			    bool try)
{
	int i, err = 0;

	if ((t & KLP_TAG_DESTROYED) || !rw_deadline_ok(d))
		return EINVAL;
	if (rw_tracked(t) && (i = rd_find(rw)) >= 0) {
		if (tls_rd.e[i].count == UINT32_MAX)
			return EAGAIN;
		tls_rd.e[i].count++;
		return 0;
	}
	if (!rw_tryrd(rw, t)) {
		if (try)
			return EBUSY;
		if (rw_wowned(rw, t))
			return EDEADLK;
		if (!rw_pcpu(t) && rw_rt_outranks(rw, rw_rt_prio()))
			err = d == NULL ? kli_rwlock_read_lock_outranking(&rw->u.rw, NULL)
					: rw_timed(rw, t, false, true, d);
		else if (d == NULL)
			rw_rd(rw, t);
		else
			err = rw_timed(rw, t, false, false, d);
		if (err != 0)
			return err;
	}
	if (rw_tracked(t))
		rd_push(rw);
	return 0;
}

/* A write lock that has to wait; a realtime writer of a kl_rwlock kind is counted
 * blocked meanwhile (see the top). */
static int rw_wrlock_wait(struct klp_rwlock *rw, uint64_t t, const struct klp_deadline *d)
{
	int prio = rw_pcpu(t) ? 0 : rw_rt_prio(), err = 0;

	if (prio > 0)
		rw_rtw_enter(rw, prio);
	if (d != NULL)
		err = rw_timed(rw, t, true, false, d);
	else
		rw_wr(rw, t);
	if (prio > 0)
		rw_rtw_leave(rw);
	return err;
}

static int rw_wrlock_tagged(struct klp_rwlock *rw, uint64_t t, const struct klp_deadline *d,
			    bool try)
{
	if ((t & KLP_TAG_DESTROYED) || !rw_deadline_ok(d))
		return EINVAL;
	if (rw_trywr(rw, t))
		return 0;
	if (try)
		return EBUSY;
	if (rw_wowned(rw, t) || (rw_tracked(t) && rd_find(rw) >= 0))
		return EDEADLK;
	return rw_wrlock_wait(rw, t, d);
}

/* An unlock by a thread that neither writes @rw nor tracks a read of it, of a lock that
 * is free or write-held by another thread: undefined in POSIX; glibc returns 0 (and takes
 * it for a read unlock, corrupting its reader count). Reported per KLOCK_ON_ERROR (once
 * per lock by default, abort aborts); the lock is left as it is and the answer is 0.
 * Releasing another thread's read hold stays tolerated (as glibc). The kl_pcpu_rwsem
 * kind can only tell a foreign writer (its readers are per-CPU counts). */
static bool rw_unlock_undefined(struct klp_rwlock *rw, uint64_t t)
{
	enum kli_rw_held h;

	if (rw_pcpu(t))
		h = atomic_load_explicit(&rw->writer, memory_order_relaxed) != 0 ? KLI_RW_WRITER
										  : KLI_RW_READERS;
	else
		h = kli_rwlock_held(&rw->u.rw);
	if (h == KLI_RW_READERS)
		return false;
	klp_misuse_rw_unlock(rw, h == KLI_RW_WRITER, KLI_SITE());
	return true;
}

static int rw_unlock_tagged(struct klp_rwlock *rw, uint64_t t)
{
	int i;

	if (t & KLP_TAG_DESTROYED)
		return EINVAL;
	if (rw_tracked(t) && (i = rd_find(rw)) >= 0) {
		if (--tls_rd.e[i].count == 0) {
			rd_remove(i);
			rw_rdunlock(rw, t);
		}
		return 0;
	}
	if (rw_wowned(rw, t)) {
		rw_wrunlock(rw, t);
		return 0;
	}
	if (rw_unlock_undefined(rw, t))
		return 0;
	if (rw_tracked(t) && tls_rd.untracked > 0)
		tls_rd.untracked--;
	rw_rdunlock(rw, t);
	return 0;
}

/* ---- the interposers ---------------------------------------------------------------------- */

static KL_NOINLINE int rw_rdlock_slow(pthread_rwlock_t *prw)
{
	uint64_t t = rw_tag(RW(prw));

	return t == 0 ? KLP_REAL(pthread_rwlock_rdlock)(prw)
		      : rw_rdlock_tagged(RW(prw), t, NULL, false);
}

KLP_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *prw)
{
	struct klp_rwlock *rw = RW(prw);
	uint64_t t;

	KLP_ENTER();
	t = atomic_load_explicit(&rw->tag, memory_order_acquire); /* T2 */
	/* No read hold of our own (the common case): one CAS (or one rseq section), then
	 * note it. */
	if (kl_likely(tls_rd.n == 0) &&
	    ((kl_likely(t == KLP_TAG_RW_FAST) && kl_likely(kl_rwlock_read_trylock(&rw->u.rw))) ||
	     (t == KLP_TAG_PCPU_FAST && kl_pcpu_rwsem_read_trylock(&rw->u.pc)))) {
		tls_rd.e[0] = (struct rd_hold){ rw, 1 };
		tls_rd.n = 1;
		return 0;
	}
	return rw_rdlock_slow(prw);
}

KLP_EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t *prw)
{
	uint64_t t;

	KLP_ENTER();
	t = rw_tag(RW(prw));
	return t == 0 ? KLP_REAL(pthread_rwlock_tryrdlock)(prw)
		      : rw_rdlock_tagged(RW(prw), t, NULL, true);
}

KLP_EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *prw, const struct timespec *abstime)
{
	struct klp_deadline d = { CLOCK_REALTIME, abstime };
	uint64_t t;

	KLP_ENTER();
	t = rw_tag(RW(prw));
	return t == 0 ? KLP_REAL(pthread_rwlock_timedrdlock)(prw, abstime)
		      : rw_rdlock_tagged(RW(prw), t, &d, false);
}

KLP_EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t *prw, clockid_t clock,
					  const struct timespec *abstime)
{
	struct klp_deadline d = { clock, abstime };
	uint64_t t;

	KLP_ENTER();
	t = rw_tag(RW(prw));
	if (t == 0)
		return KLP_REAL(pthread_rwlock_clockrdlock)(prw, clock, abstime);
	if (!klp_clock_ok(clock))
		return EINVAL;
	return rw_rdlock_tagged(RW(prw), t, &d, false);
}

static KL_NOINLINE int rw_wrlock_slow(pthread_rwlock_t *prw)
{
	uint64_t t = rw_tag(RW(prw));

	return t == 0 ? KLP_REAL(pthread_rwlock_wrlock)(prw)
		      : rw_wrlock_tagged(RW(prw), t, NULL, false);
}

KLP_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *prw)
{
	struct klp_rwlock *rw = RW(prw);
	uint64_t t;

	KLP_ENTER();
	t = atomic_load_explicit(&rw->tag, memory_order_acquire); /* T2 */
	if (kl_likely(t == KLP_TAG_RW_FAST || t == KLP_TAG_RW_FAST_NR) &&
	    kl_likely(kl_rwlock_write_trylock(&rw->u.rw)))
		return 0;
	return rw_wrlock_slow(prw);
}

KLP_EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t *prw)
{
	uint64_t t;

	KLP_ENTER();
	t = rw_tag(RW(prw));
	return t == 0 ? KLP_REAL(pthread_rwlock_trywrlock)(prw)
		      : rw_wrlock_tagged(RW(prw), t, NULL, true);
}

KLP_EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *prw, const struct timespec *abstime)
{
	struct klp_deadline d = { CLOCK_REALTIME, abstime };
	uint64_t t;

	KLP_ENTER();
	t = rw_tag(RW(prw));
	return t == 0 ? KLP_REAL(pthread_rwlock_timedwrlock)(prw, abstime)
		      : rw_wrlock_tagged(RW(prw), t, &d, false);
}

KLP_EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t *prw, clockid_t clock,
					  const struct timespec *abstime)
{
	struct klp_deadline d = { clock, abstime };
	uint64_t t;

	KLP_ENTER();
	t = rw_tag(RW(prw));
	if (t == 0)
		return KLP_REAL(pthread_rwlock_clockwrlock)(prw, clock, abstime);
	if (!klp_clock_ok(clock))
		return EINVAL;
	return rw_wrlock_tagged(RW(prw), t, &d, false);
}

static KL_NOINLINE int rw_unlock_slow(pthread_rwlock_t *prw)
{
	uint64_t t = rw_tag(RW(prw));

	return t == 0 ? KLP_REAL(pthread_rwlock_unlock)(prw) : rw_unlock_tagged(RW(prw), t);
}

KLP_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *prw)
{
	struct klp_rwlock *rw = RW(prw);
	uint64_t t;

	KLP_ENTER();
	t = atomic_load_explicit(&rw->tag, memory_order_acquire); /* T2 */
	/* The one read hold the fast rdlock noted. */
	if (kl_likely((t == KLP_TAG_RW_FAST || t == KLP_TAG_PCPU_FAST) && tls_rd.n == 1 &&
		      tls_rd.e[0].lock == rw && tls_rd.e[0].count == 1)) {
		tls_rd.n = 0;
		rw_rdunlock(rw, t);
		return 0;
	}
	return rw_unlock_slow(prw);
}

KLP_EXPORT int pthread_rwlock_init(pthread_rwlock_t *prw, const pthread_rwlockattr_t *attr)
{
	struct klp_rwlock *rw = RW(prw);
	int pshared = PTHREAD_PROCESS_PRIVATE, kind = PTHREAD_RWLOCK_DEFAULT_NP;
	unsigned impl = rw_impl_now();

	KLP_ENTER();
	if (attr != NULL) {
		pthread_rwlockattr_getpshared(attr, &pshared);
		pthread_rwlockattr_getkind_np(attr, &kind);
	}
	if (pshared != PTHREAD_PROCESS_PRIVATE || impl == KLP_R_PTHREAD ||
	    kind < 0 || kind > (int)KLP_RK_NONRECURSIVE)
		return KLP_REAL(pthread_rwlock_init)(prw, attr);
	memset(prw, 0, sizeof(*prw));
	if (impl == KLP_R_PCPU) {
		if (kl_pcpu_rwsem_init(&rw->u.pc) != 0)
			return ENOMEM;
	} else {
		kl_rwlock_init(&rw->u.rw);
	}
	atomic_store_explicit(&rw->kind, (uint32_t)kind, memory_order_relaxed);
	atomic_store_explicit(&rw->tag, KLP_TAG(impl, kind), memory_order_release);
	return 0;
}

KLP_EXPORT int pthread_rwlock_destroy(pthread_rwlock_t *prw)
{
	struct klp_rwlock *rw = RW(prw);
	uint64_t t;
	int err;

	KLP_ENTER();
	t = rw_tag(rw);
	if (t == 0)
		return KLP_REAL(pthread_rwlock_destroy)(prw);
	if (t & KLP_TAG_DESTROYED)
		return EINVAL;
	err = rw_pcpu(t) ? kl_pcpu_rwsem_destroy(&rw->u.pc) : kl_rwlock_destroy(&rw->u.rw);
	if (err == EBUSY) {   /* held (by a thread that may have exited) or waited for */
		klp_misuse_rw_destroy(rw, KLI_SITE());
		return 0;     /* glibc's answer; the lock stays as it is */
	}
	if (err == 0)
		atomic_store_explicit(&rw->tag, t | KLP_TAG_DESTROYED, memory_order_relaxed);
	return err;
}
