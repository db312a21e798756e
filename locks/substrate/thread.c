/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/thread.c - the thread registry (see thread.h for the contract).
 *
 * Publication: a new record is fully initialised, then pushed on the registry list with a
 * release CAS (R1); scanners load the head with acquire (R2) and follow all_next, which is
 * written before publication and never changes. Recycling: the exit path clears `live`
 * (release, R3) after the exit hooks ran; reuse sets it again before the record's owner
 * touches any lock. Free-list pushes and pops are under a wordlock (no ABA to argue).
 *
 * Thread exit: a pthread key whose value is the record; its destructor runs the exit
 * hooks and recycles the record. If a later destructor of the program takes a klock lock,
 * kli_self() attaches again and the key is re-armed (POSIX re-runs destructors, up to
 * PTHREAD_DESTRUCTOR_ITERATIONS rounds). The main thread's record is never recycled.
 *
 * Attaching never calls malloc() or anything else that may take a pthread mutex: under
 * libklock-preload pthread mutexes are klock locks, and a thread often attaches in the
 * middle of a lock call - after a FIFO lock was taken (the interposer records the holder),
 * or while it holds an allocator's mutex (jemalloc's constructor locks its init mutex
 * before our constructor ran). A malloc() there re-enters the allocator's mutex on the
 * same thread: a self-deadlock (ticket, MCS) or an endless recursion. So attaching is:
 * a record (free list under a wordlock, else mmap()ed slabs, else the static reserve),
 * gettid(), the TLS pointers, and the pthread key (pthread_once(key_init): glibc's
 * pthread_key_create and pthread_atfork allocate nothing for their first keys/handlers;
 * pthread_setspecific allocates only for keys past the first 32, and our key is made by
 * this file's constructor, normally among a process's first). kli_init() - which reads
 * files, may load hwloc and, with KLOCK_LOCKSTAT, opens its report - is NOT called here:
 * the constructors (this file's, locks/init.c's, the interposer's) run it with no lock
 * held, and until then the substrate runs on its defaults (locks/init.c). kli_tls_self is
 * still set before the key is touched, so a lock taken from inside finds the record.
 *
 * Out of memory (RLIMIT_AS, an exhausted address space): a lock call has no ENOMEM to
 * return (POSIX gives pthread_mutex_lock none; glibc allocates nothing), so when a slab
 * cannot be mapped the record comes from a reserve of RESERVE_RECORDS records in static
 * storage (mapped with the library, so always there), taken one by one like a slab.
 * Records are never freed, so a reserve record is recycled like any other. When the
 * reserve is spent too: the interposer (KLOCK_PRELOAD) prints one line and waits,
 * retrying the free list and mmap() with pauses up to RETRY_MAX_NS, until a thread exits
 * or memory comes back - a lock call that waits rather than aborts a program glibc would
 * run; the native API prints a line and aborts (include/klock/mutex.h, README
 * "Threads and memory").
 *
 * fork(): only the forking thread lives on in the child. The other records stay as they
 * are, marked not live and NEVER recycled: their addresses may still name the owner of a
 * lock that thread held (glibc too leaves such a lock held forever) in a debug holder
 * or an MCS node, or sit in a mutex's spinner queue or a parking-lot queue, and handing
 * them to a new thread would let it meet them there. (Locks that name their holder store
 * its owner id, which no later thread gets: see thread.h.) They are marked `ghost` as
 * well, so that a spin queue can step past one (osq.c). A child leaks one record per
 * thread its parent had; it usually execs.
 *
 * Owner ids: next_owner hands out KLI_OWNER_STEP multiples (relaxed fetch-add: only
 * uniqueness matters), skipping 0 and KLI_OWNER_POISON when a 32-bit counter wraps.
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "thread.h"
#include "wordlock.h"

/* Subsystems that can register exit hooks. */
#define MAX_EXIT_HOOKS 8
/* Records carved from each mmap()ed slab. */
#define SLAB_RECORDS KLI_THREAD_SLAB
/* Records in static storage for when mmap() fails (see the top): one slab's worth. */
#define RESERVE_RECORDS KLI_THREAD_RESERVE
/* First size of a record's rmlock overflow-hold array (entries; doubles when full). */
#define OVF_MIN 64
/* The interposer waiting for a record: first and longest pause between retries. */
#define RETRY_MIN_NS 1000000l
#define RETRY_MAX_NS 100000000l

__thread struct kli_thread *kli_tls_self __attribute__((tls_model("initial-exec")));
__thread kli_owner_t kli_tls_owner __attribute__((tls_model("initial-exec")));
/* The same variable under its public name, for klock/mutex.h's inline fast paths. */
KL_API extern __thread uintptr_t kl_mutex_self_ __attribute__((alias("kli_tls_owner")));

static _Atomic uintptr_t next_owner;
static struct kli_thread reserve[RESERVE_RECORDS];
static unsigned reserve_used; /* under free_lock */

static _Atomic(struct kli_thread *) all_head;
static _Atomic unsigned all_count;
static struct kli_thread *free_head;
static struct kli_wordlock free_lock = KLI_WORDLOCK_INIT;

static kli_thread_exit_fn exit_hooks[MAX_EXIT_HOOKS];
static _Atomic unsigned exit_hook_count;

static pthread_key_t self_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void thread_detach(void *arg);

/* fork() child: only the forking thread survives. The others' records are marked not
 * live, and ghosts, but kept off the free list (see the top of this file), and the
 * free-list lock, which another thread may have held at the fork, is reset. */
static void atfork_child(void)
{
	struct kli_thread *self = kli_tls_self;

	atomic_store_explicit(&free_lock.v, 0, memory_order_relaxed);
	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next) {
		if (t != self && atomic_load_explicit(&t->live, memory_order_relaxed)) {
			t->ghost = true;
			atomic_store_explicit(&t->live, false, memory_order_relaxed);
		}
	}
}

static void key_init(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
	if (pthread_key_create(&self_key, thread_detach) != 0) {
		fputs("klock: pthread_key_create failed\n", stderr);
		abort();
	}
}

/* The unused part of the current slab; under free_lock. */
static struct kli_thread *slab_next;
static unsigned slab_left;

/* LeakSanitizer does not scan mmap()ed memory, and records hold the only pointers to
 * per-thread data (lockstat's tables): sanitizer builds register each slab as a root. */
#if defined(__SANITIZE_ADDRESS__)
#define SLAB_LSAN_ROOT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define SLAB_LSAN_ROOT 1
#endif
#endif
#ifndef SLAB_LSAN_ROOT
#define SLAB_LSAN_ROOT 0
#endif
#if SLAB_LSAN_ROOT
#include <sanitizer/lsan_interface.h>
#endif

/* A zeroed record from a slab (mmap memory is zero and KL_ARCH_PAD-aligned), or from the
 * static reserve when no slab can be mapped; NULL when that is spent too. Caller holds
 * free_lock. */
static struct kli_thread *slab_take(void)
{
	if (slab_left == 0) {
		void *p = mmap(NULL, SLAB_RECORDS * sizeof(struct kli_thread),
			       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return reserve_used < RESERVE_RECORDS ? &reserve[reserve_used++] : NULL;
#if SLAB_LSAN_ROOT
		__lsan_register_root_region(p, SLAB_RECORDS * sizeof(struct kli_thread));
#endif
		slab_next = p;
		slab_left = SLAB_RECORDS;
	}
	slab_left--;
	return slab_next++;
}

static void say(const char *msg, size_t n)
{
	if (write(STDERR_FILENO, msg, n) < 0) {
		/* nothing better to do */
	}
}

/* No record anywhere: the interposer waits for one (a thread exits, or memory frees up);
 * the native API gives up. */
static void out_of_records(long *nap)
{
	static _Atomic bool said;
	struct timespec ts = { 0, *nap };

	if (!KLOCK_PRELOAD) {
		static const char msg[] = "klock: out of memory for a thread record\n";

		say(msg, sizeof(msg) - 1);
		abort();
	}
	if (!atomic_exchange_explicit(&said, true, memory_order_relaxed)) {
		static const char msg[] = "klock: out of memory for a thread record; "
					  "waiting for one to free up\n";

		say(msg, sizeof(msg) - 1);
	}
	nanosleep(&ts, NULL);
	if (*nap < RETRY_MAX_NS)
		*nap *= 2;
}

static struct kli_thread *record_alloc(struct kli_thread *t)
{
	struct kli_thread *head;

	t->index = atomic_fetch_add_explicit(&all_count, 1, memory_order_relaxed);
	head = atomic_load_explicit(&all_head, memory_order_relaxed);
	do {
		t->all_next = head;
	} while (!atomic_compare_exchange_weak_explicit(&all_head, &head, t,
							memory_order_release, /* R1 */
							memory_order_relaxed));
	return t;
}

static struct kli_thread *record_get(void)
{
	struct kli_thread *t, *fresh = NULL;
	long nap = RETRY_MIN_NS;

	for (;;) {
		kli_wordlock_lock(&free_lock);
		t = free_head;
		if (t != NULL)
			free_head = t->free_next;
		else
			fresh = slab_take();
		kli_wordlock_unlock(&free_lock);
		if (t != NULL)
			return t;
		if (fresh != NULL)
			return record_alloc(fresh);
		out_of_records(&nap);
	}
}

/* A new thread's owner id (see the top). */
static kli_owner_t owner_new(void)
{
	kli_owner_t o;

	do {
		o = atomic_fetch_add_explicit(&next_owner, KLI_OWNER_STEP, memory_order_relaxed) +
		    KLI_OWNER_STEP;
	} while (o == 0 || o == KLI_OWNER_POISON);
	return o;
}

struct kli_thread *kli_thread_attach(void)
{
	struct kli_thread *t = record_get();

	if (kli_tls_owner == 0)
		kli_tls_owner = owner_new(); /* kept through exit destructors (thread.h) */
	t->owner = kli_tls_owner;
	t->tid = (pid_t)syscall(SYS_gettid);
	t->free_next = NULL;
	atomic_store_explicit(&t->live, true, memory_order_release);
	kli_tls_self = t;	/* first: what follows may take a klock lock (see the top) */
	pthread_once(&key_once, key_init);
	pthread_setspecific(self_key, t);
	return t;
}

/* Makes the key while no lock is held (see the top), and runs kli_init() in static links
 * that do not pull in locks/init.o's constructor. */
__attribute__((constructor)) static void thread_ctor(void)
{
	pthread_once(&key_once, key_init);
	kli_init();
}

/*
 * A thread exiting inside kl_pcpu_rwsem read sections: its read holds are per-CPU counts,
 * not per-thread state, so they cannot be found and dropped - the count stays raised and
 * every later writer of that semaphore waits for ever (as with a leaked Linux
 * percpu_rw_semaphore read). Debug builds track a thread's holds, so they say so here,
 * and clear the tracking so that the record's next thread starts clean.
 */
static void pcpu_exit_report(struct kli_thread *t)
{
	uint32_t n = t->rdm_pcpu_n;

	if (!KLOCK_DEBUG_LOCKS || n == 0)
		return;
	for (uint32_t i = 0; i < n && i < KLI_RDM_TRACK; i++)
		kli_report("thread exit inside a read section", "pcpu_rwsem", t->rdm_pcpu[i], NULL,
			   "the hold cannot be dropped: writers will wait for ever");
	t->rdm_pcpu_n = 0;
}

static void thread_detach(void *arg)
{
	struct kli_thread *t = arg;
	unsigned n = atomic_load_explicit(&exit_hook_count, memory_order_acquire);

	pcpu_exit_report(t);

	for (unsigned i = 0; i < n; i++)
		exit_hooks[i](t);
	kli_tls_self = NULL;
	atomic_store_explicit(&t->live, false, memory_order_release); /* R3 */
	kli_wordlock_lock(&free_lock);
	t->free_next = free_head;
	free_head = t;
	kli_wordlock_unlock(&free_lock);
}

struct kli_thread *kli_thread_first(void)
{
	return atomic_load_explicit(&all_head, memory_order_acquire); /* R2: pairs with R1 */
}

unsigned kli_thread_count(void)
{
	return atomic_load_explicit(&all_count, memory_order_relaxed);
}

void kli_thread_on_exit(kli_thread_exit_fn fn)
{
	unsigned i;

	kli_wordlock_lock(&free_lock);
	i = atomic_load_explicit(&exit_hook_count, memory_order_relaxed);
	for (unsigned j = 0; j < i; j++) {
		if (exit_hooks[j] == fn) {
			kli_wordlock_unlock(&free_lock);
			return;
		}
	}
	if (i >= MAX_EXIT_HOOKS) {
		fputs("klock: too many thread exit hooks\n", stderr);
		abort();
	}
	exit_hooks[i] = fn;
	atomic_store_explicit(&exit_hook_count, i + 1, memory_order_release);
	kli_wordlock_unlock(&free_lock);
}

/* ---- rmlock overflow holds (kli_thread.rm_ovf) ---------------------------------------- */

bool kli_thread_ovf_push(struct kli_thread *t, uintptr_t lock)
{
	if (t->rm_ovf_n == t->rm_ovf_cap) {
		uint32_t cap = t->rm_ovf_cap != 0 ? 2 * t->rm_ovf_cap : OVF_MIN;
		uintptr_t *a = mmap(NULL, cap * sizeof(*a), PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (a == MAP_FAILED)
			return false;
		if (t->rm_ovf != NULL) {
			memcpy(a, t->rm_ovf, t->rm_ovf_n * sizeof(*a));
			munmap(t->rm_ovf, t->rm_ovf_cap * sizeof(*a));
		}
		t->rm_ovf = a;
		t->rm_ovf_cap = cap;
	}
	t->rm_ovf[t->rm_ovf_n++] = lock;
	return true;
}

void kli_thread_ovf_drop(struct kli_thread *t, uintptr_t lock)
{
	for (uint32_t i = t->rm_ovf_n; i-- > 0;) {
		if (t->rm_ovf[i] == lock) {
			t->rm_ovf[i] = t->rm_ovf[--t->rm_ovf_n];
			return;
		}
	}
}

uintptr_t kli_thread_ovf_any(const struct kli_thread *t)
{
	return t->rm_ovf_n != 0 ? t->rm_ovf[t->rm_ovf_n - 1] : 0;
}
