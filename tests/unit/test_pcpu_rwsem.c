/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/test_pcpu_rwsem.c - what only kl_pcpu_rwsem has: the rseq fast path is really
 * used where it can be, the static initializer, write_trylock (not in the lockops table)
 * fails while held and undoes itself, destroy of a held semaphore, parking racing unlock,
 * FIFO admission, write bursts and the lazy return to the fast path (rcu_sync), misuse
 * reports (debug builds). The contract every read-mostly lock keeps (sharing, read
 * trylock, exclusion under stress and with readers hopping CPUs, the writer waits for the
 * last (migrated) reader, churn, oversubscription) runs for kl_pcpu_rwsem in
 * tests/unit/test_readmostly_contract.c. Also run with KLOCK_NO_RSEQ=1, KLOCK_NO_MEMBARRIER=1,
 * and in the generic / parking / debug / aarch64 CI builds.
 */
#include <sched.h>
#include <sys/rseq.h>

#include <klock/pcpu_rwsem.h>
#include <klock/fence.h>
#include <klock/topology.h>
#include "kltest.h"
#include "park.h"

#define WATCHDOG_S 60
/* Longer than the lazy window in which readers stay slow after a burst (100 us). */
#define AFTER_LAZY_MS 5

static int setup(void **state)
{
	(void)state;
	alarm(klt_watchdog_s(WATCHDOG_S));
	return 0;
}

static void wait_parked(const void *key, unsigned n)
{
	int64_t end = klt_now_ns() + 10 * KLT_NSEC_PER_SEC;

	while (kli_park_queued(key) < n) {
		assert_true(klt_now_ns() < end);
		klt_sleep_ms(1);
	}
}

/* True when the semaphore's readers may use the atomic-free rseq fast path now. */
static bool fast_gate_open(struct kl_pcpu_rwsem *sem)
{
	return atomic_load(&sem->gp) & KL_PCPU_FAST;
}

/* ---- the fast path is used where it can be --------------------------------------------- */

/* Where the build and the kernel offer rseq and membarrier(PRIVATE_EXPEDITED_RSEQ) (the
 * default CI build on this kind of machine: KLTEST_EXPECT_RSEQ), an idle semaphore's
 * readers go fast; with KLOCK_NO_RSEQ=1 or KLOCK_NO_MEMBARRIER=1 they never do - so the
 * fallback variants of this suite really test the fallback. */
static void test_pcpu_rwsem_fast_path_mode_follows_environment(void **state)
{
	struct kl_pcpu_rwsem sem;
	bool forced_off = getenv("KLOCK_NO_RSEQ") || getenv("KLOCK_NO_MEMBARRIER");

	(void)state;
	assert_int_equal(kl_pcpu_rwsem_init(&sem), 0);
	if (forced_off)
		assert_false(fast_gate_open(&sem));
	else if (getenv("KLTEST_EXPECT_RSEQ") && __rseq_size > 0) /* valgrind: no rseq */
		assert_true(fast_gate_open(&sem));
	printf("pcpu_rwsem read path: %s (inline %d)\n",
	       fast_gate_open(&sem) ? "rseq" : "atomic", KL_PCPU_RWSEM_INLINE);
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), 0);
}

static void test_pcpu_rwsem_static_initializer_works(void **state)
{
	static struct kl_pcpu_rwsem sem = KL_PCPU_RWSEM_INITIALIZER;

	(void)state;
	kl_pcpu_rwsem_read_lock(&sem);
	kl_pcpu_rwsem_read_unlock(&sem);
	kl_pcpu_rwsem_write_lock(&sem);
	kl_pcpu_rwsem_write_unlock(&sem);
	assert_true(kl_pcpu_rwsem_read_trylock(&sem));
	kl_pcpu_rwsem_read_unlock(&sem);
}

/* ---- trylock / destroy ----------------------------------------------------------------- */

struct peer {
	struct kl_pcpu_rwsem *sem;
	bool ok;
};

static void *peer_try(void *arg)
{
	struct peer *p = arg;

	p->ok = kl_pcpu_rwsem_read_trylock(p->sem);
	if (p->ok)
		kl_pcpu_rwsem_read_unlock(p->sem);
	return NULL;
}

static bool try_from_other_thread(struct kl_pcpu_rwsem *sem)
{
	struct peer p = { .sem = sem };

	klt_run_threads(1, peer_try, &p, 0);
	return p.ok;
}

static void *peer_try_write(void *arg)
{
	struct peer *p = arg;

	p->ok = kl_pcpu_rwsem_write_trylock(p->sem);
	if (p->ok)
		kl_pcpu_rwsem_write_unlock(p->sem);
	return NULL;
}

static bool try_write_from_other_thread(struct kl_pcpu_rwsem *sem)
{
	struct peer p = { .sem = sem };

	klt_run_threads(1, peer_try_write, &p, 0);
	return p.ok;
}

static void test_pcpu_rwsem_write_trylock_fails_while_held_and_undoes_itself(void **state)
{
	struct kl_pcpu_rwsem sem;

	(void)state;
	assert_int_equal(kl_pcpu_rwsem_init(&sem), 0);
	assert_true(kl_pcpu_rwsem_write_trylock(&sem)); /* free: taken */
	assert_false(try_from_other_thread(&sem));      /* and it excludes readers */
	assert_false(try_write_from_other_thread(&sem)); /* and writers */
	assert_false(kl_pcpu_rwsem_write_trylock(&sem)); /* the owner's own try fails */
	kl_pcpu_rwsem_write_unlock(&sem);
	kl_pcpu_rwsem_read_lock(&sem);
	assert_false(try_write_from_other_thread(&sem)); /* a reader is inside */
	assert_false(kl_pcpu_rwsem_write_trylock(&sem)); /* even our own read hold */
	assert_true(try_from_other_thread(&sem));        /* the failed tries left no block */
	kl_pcpu_rwsem_read_unlock(&sem);
	assert_true(try_write_from_other_thread(&sem));
	kl_pcpu_rwsem_write_lock(&sem);                  /* nor a burst count behind */
	kl_pcpu_rwsem_write_unlock(&sem);
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), 0);
}

static void test_pcpu_rwsem_destroy_refuses_a_held_semaphore(void **state)
{
	struct kl_pcpu_rwsem sem;

	(void)state;
	setenv("KLOCK_ON_ERROR", "warn", 1);
	assert_int_equal(kl_pcpu_rwsem_init(&sem), 0);
	kl_pcpu_rwsem_read_lock(&sem);
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), EBUSY);
	kl_pcpu_rwsem_read_unlock(&sem);
	kl_pcpu_rwsem_write_lock(&sem);
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), EBUSY);
	kl_pcpu_rwsem_write_unlock(&sem);
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), 0);
	unsetenv("KLOCK_ON_ERROR");
}

/* ---- parking races write_unlock ------------------------------------------------------ */

struct race {
	struct kl_pcpu_rwsem sem;
	_Atomic int stop;
	_Atomic long reads;
};

static void *race_reader(void *arg)
{
	struct race *r = arg;

	while (!atomic_load(&r->stop)) {
		kl_pcpu_rwsem_read_lock(&r->sem);
		kl_pcpu_rwsem_read_unlock(&r->sem);
		atomic_fetch_add_explicit(&r->reads, 1, memory_order_relaxed);
	}
	return NULL;
}

/* Regression: a reader queueing (validate under the bucket lock) while the writer's
 * unlock takes the fast path (outside it) once left PCPU_WAITERS set with no owner, and
 * every later lock spun for ever. Many short writes against parking readers. */
static void test_pcpu_rwsem_waiter_queueing_during_unlock_is_not_lost(void **state)
{
	static struct race r;
	pthread_t t[3];
	long writes = klt_scaled(5000);

	(void)state;
	memset(&r, 0, sizeof(r));
	assert_int_equal(kl_pcpu_rwsem_init(&r.sem), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&t[i], NULL, race_reader, &r), 0);
	for (long i = 0; i < writes; i++) {
		kl_pcpu_rwsem_write_lock(&r.sem);
		if (i % 16 == 0)
			sched_yield(); /* let readers reach the queue */
		kl_pcpu_rwsem_write_unlock(&r.sem);
	}
	atomic_store(&r.stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&r.sem.block), 0);
	assert_int_equal(kl_pcpu_rwsem_destroy(&r.sem), 0);
}

/* ---- FIFO admission --------------------------------------------------------------------- */

struct fifo {
	struct kl_pcpu_rwsem sem;
	_Atomic int ticket;
	int got[4];
};

struct fifo_arg {
	struct fifo *f;
	int id;
	bool writer;
};

static void *fifo_thread(void *arg)
{
	struct fifo_arg *a = arg;

	if (a->writer)
		kl_pcpu_rwsem_write_lock(&a->f->sem);
	else
		kl_pcpu_rwsem_read_lock(&a->f->sem);
	a->f->got[a->id] = atomic_fetch_add(&a->f->ticket, 1);
	klt_sleep_ms(5);
	if (a->writer)
		kl_pcpu_rwsem_write_unlock(&a->f->sem);
	else
		kl_pcpu_rwsem_read_unlock(&a->f->sem);
	return NULL;
}

/* Queue while a writer holds: reader 0, writer 1, reader 2, reader 3. write_unlock admits
 * reader 0 and hands the semaphore to writer 1 (which then waits for reader 0); readers 2
 * and 3 follow writer 1: FIFO both ways. */
static void test_pcpu_rwsem_waiters_are_admitted_in_fifo_order(void **state)
{
	static struct fifo f;
	struct fifo_arg a[4] = { { &f, 0, false }, { &f, 1, true }, { &f, 2, false },
				 { &f, 3, false } };
	pthread_t t[4];

	(void)state;
	memset(&f, 0, sizeof(f));
	assert_int_equal(kl_pcpu_rwsem_init(&f.sem), 0);
	kl_pcpu_rwsem_write_lock(&f.sem);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_create(&t[i], NULL, fifo_thread, &a[i]), 0);
		wait_parked(&f.sem, (unsigned)i + 1);
	}
	kl_pcpu_rwsem_write_unlock(&f.sem);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(f.got[0], 0);
	assert_int_equal(f.got[1], 1);
	assert_true(f.got[2] >= 2 && f.got[3] >= 2);
	assert_int_equal(kl_pcpu_rwsem_destroy(&f.sem), 0);
}

/* ---- rcu_sync --------------------------------------------------------------------------- */

/* During and right after a write burst readers are on the slow path; after the lazy
 * window a slow reader flips the semaphore back and readers go fast again. */
static void test_pcpu_rwsem_readers_return_to_fast_path_after_a_burst(void **state)
{
	struct kl_pcpu_rwsem sem;
	bool rseq;

	(void)state;
	assert_int_equal(kl_pcpu_rwsem_init(&sem), 0);
	rseq = fast_gate_open(&sem);
	for (int i = 0; i < 100; i++) {
		kl_pcpu_rwsem_write_lock(&sem);
		assert_false(fast_gate_open(&sem));
		kl_pcpu_rwsem_write_unlock(&sem);
	}
	assert_false(fast_gate_open(&sem));
	klt_sleep_ms(AFTER_LAZY_MS);
	kl_pcpu_rwsem_read_lock(&sem); /* a slow reader past the window flips it */
	kl_pcpu_rwsem_read_unlock(&sem);
	assert_int_equal(fast_gate_open(&sem), rseq);
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), 0);
}

/* ---- misuse (debug builds) ----------------------------------------------------------- */

#if KLOCK_DEBUG_LOCKS
static void *write_unlock_other(void *arg)
{
	kl_pcpu_rwsem_write_unlock(arg);
	return NULL;
}

static void test_pcpu_rwsem_debug_build_reports_misuse(void **state)
{
	struct kl_pcpu_rwsem sem;
	unsigned long n;

	(void)state;
	setenv("KLOCK_ON_ERROR", "warn", 1);
	assert_int_equal(kl_pcpu_rwsem_init(&sem), 0);
	n = kli_report_count();
	kl_pcpu_rwsem_read_unlock(&sem); /* unlock without lock (ignored) */
	assert_int_equal(kli_report_count(), n + 1);
	kl_pcpu_rwsem_read_lock(&sem);
	kl_pcpu_rwsem_read_lock(&sem); /* recursion */
	assert_int_equal(kli_report_count(), n + 2);
	kl_pcpu_rwsem_read_unlock(&sem);
	kl_pcpu_rwsem_read_unlock(&sem);
	kl_pcpu_rwsem_write_lock(&sem);
	klt_run_threads(1, write_unlock_other, &sem, 0); /* unlock by a non-owner */
	assert_int_equal(kli_report_count(), n + 3);
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), EBUSY); /* destroy while held */
	assert_int_equal(kli_report_count(), n + 4);
	kl_pcpu_rwsem_write_unlock(&sem);
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), 0);
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), EBUSY); /* double destroy */
	assert_int_equal(kli_report_count(), n + 5);
	unsetenv("KLOCK_ON_ERROR");
}
#endif

/* Every test runs under the watchdog. */
#define T(f) cmocka_unit_test_setup(f, setup)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_pcpu_rwsem_fast_path_mode_follows_environment),
		T(test_pcpu_rwsem_static_initializer_works),
		T(test_pcpu_rwsem_write_trylock_fails_while_held_and_undoes_itself),
		T(test_pcpu_rwsem_destroy_refuses_a_held_semaphore),
		T(test_pcpu_rwsem_waiter_queueing_during_unlock_is_not_lost),
		T(test_pcpu_rwsem_waiters_are_admitted_in_fifo_order),
		T(test_pcpu_rwsem_readers_return_to_fast_path_after_a_burst),
#if KLOCK_DEBUG_LOCKS
		T(test_pcpu_rwsem_debug_build_reports_misuse),
#endif
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
