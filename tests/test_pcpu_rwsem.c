/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/test_pcpu_rwsem.c - kl_pcpu_rwsem: the rseq fast path is really used where it
 * can be, exclusion, sharing, trylock, writer waits for (migrated) readers and is woken by
 * the last one, FIFO admission, write bursts and the lazy return to the fast path, thread
 * churn, oversubscription, misuse reports (debug builds). Also run with KLOCK_NO_RSEQ=1,
 * KLOCK_NO_MEMBARRIER=1, and in the generic / parking / debug / aarch64 CI builds.
 */
#include <sched.h>
#include <sys/rseq.h>

#include <klock/pcpu_rwsem.h>
#include <klock/fence.h>
#include <klock/topology.h>
#include "kltest.h"
#include "park.h"

#define WATCHDOG_S 60
/* Seconds of writer grace periods (membarrier) one stress run may spend: sizes shrink
 * to fit where a membarrier is slow (~1 s in a 64-vCPU emulated guest); fewest kept. */
#define FENCE_BUDGET_S 5.0
#define MIN_STRESS_ITERS 200
/* Past every spin budget: a waiting writer really sleeps. */
#define LONG_HOLD_MS 60
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

static void wait_state(_Atomic int *st, int v)
{
	int64_t end = klt_now_ns() + 10 * KLT_NSEC_PER_SEC;

	while (atomic_load(st) < v) {
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

static void test_pcpu_rwsem_trylock_semantics(void **state)
{
	struct kl_pcpu_rwsem sem;

	(void)state;
	assert_int_equal(kl_pcpu_rwsem_init(&sem), 0);
	assert_true(try_from_other_thread(&sem));
	assert_true(kl_pcpu_rwsem_read_trylock(&sem));
	assert_true(try_from_other_thread(&sem)); /* readers share */
	kl_pcpu_rwsem_read_unlock(&sem);
	kl_pcpu_rwsem_write_lock(&sem);
	assert_false(try_from_other_thread(&sem)); /* a writer excludes */
	kl_pcpu_rwsem_write_unlock(&sem);
	assert_true(try_from_other_thread(&sem)); /* and leaves nothing behind */
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), 0);
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

/* ---- readers share --------------------------------------------------------------------- */

#define SHARERS 4

struct share {
	struct kl_pcpu_rwsem sem;
	_Atomic int inside;
	_Atomic bool all_met;
};

static void *sharer(void *arg)
{
	struct share *s = arg;
	int64_t end = klt_now_ns() + 5 * KLT_NSEC_PER_SEC;
	int n;

	kl_pcpu_rwsem_read_lock(&s->sem);
	n = atomic_fetch_add(&s->inside, 1) + 1;
	while (n < SHARERS && klt_now_ns() < end) {
		klt_sleep_ms(1);
		n = atomic_load(&s->inside);
	}
	if (n >= SHARERS)
		atomic_store(&s->all_met, true);
	kl_pcpu_rwsem_read_unlock(&s->sem);
	return NULL;
}

static void test_pcpu_rwsem_many_readers_share(void **state)
{
	struct share s = { 0 };
	pthread_t t[SHARERS];

	(void)state;
	assert_int_equal(kl_pcpu_rwsem_init(&s.sem), 0);
	for (int i = 0; i < SHARERS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, sharer, &s), 0);
	for (int i = 0; i < SHARERS; i++)
		pthread_join(t[i], NULL);
	assert_true(atomic_load(&s.all_met));
	assert_int_equal(kl_pcpu_rwsem_destroy(&s.sem), 0);
}

/* ---- exclusion under stress -------------------------------------------------------------- */

struct stress {
	struct kl_pcpu_rwsem sem;
	volatile long a, b;
	_Atomic long writes, reads, torn, overlap;
	_Atomic int writers_in;
	long iters;
	int write_one_in;
	bool migrate;   /* readers hop between CPUs inside their sections */
};

static void hop_cpu(unsigned r)
{
	cpu_set_t set;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	CPU_ZERO(&set);
	CPU_SET((int)(r % (unsigned)n), &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void *stress_thread(void *arg)
{
	struct stress *s = arg;
	unsigned r = (unsigned)(uintptr_t)pthread_self();

	for (long i = 0; i < s->iters; i++) {
		r = r * 1103515245u + 12345u;
		if ((r >> 8) % (unsigned)s->write_one_in == 0) {
			kl_pcpu_rwsem_write_lock(&s->sem);
			if (atomic_fetch_add(&s->writers_in, 1) != 0)
				atomic_fetch_add(&s->overlap, 1);
			s->a++;
			for (volatile int k = 0; k < 20; k++)
				;
			s->b++;
			atomic_fetch_sub(&s->writers_in, 1);
			kl_pcpu_rwsem_write_unlock(&s->sem);
			atomic_fetch_add(&s->writes, 1);
			continue;
		}
		kl_pcpu_rwsem_read_lock(&s->sem);
		if (s->migrate && (r & 0x700) == 0)
			hop_cpu(r >> 12);
		if (s->a != s->b || atomic_load(&s->writers_in) != 0)
			atomic_fetch_add(&s->torn, 1);
		kl_pcpu_rwsem_read_unlock(&s->sem);
		atomic_fetch_add_explicit(&s->reads, 1, memory_order_relaxed);
	}
	return NULL;
}

static void run_stress(int nthreads, int write_one_in, long iters, bool migrate)
{
	static struct stress s;
	pthread_t t[KLT_MAX_THREADS];

	memset(&s, 0, sizeof(s));
	assert_int_equal(kl_pcpu_rwsem_init(&s.sem), 0);
	s.iters = iters;
	s.write_one_in = write_one_in;
	s.migrate = migrate;
	for (int i = 0; i < nthreads; i++)
		assert_int_equal(pthread_create(&t[i], NULL, stress_thread, &s), 0);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&s.torn), 0);
	assert_int_equal(atomic_load(&s.overlap), 0);
	assert_int_equal(s.a, atomic_load(&s.writes));
	assert_int_equal(s.b, s.a);
	assert_int_equal(atomic_load(&s.writes) + atomic_load(&s.reads), (long)nthreads * iters);
	assert_int_equal(kl_pcpu_rwsem_destroy(&s.sem), 0); /* EBUSY if a count leaked */
}

static void test_pcpu_rwsem_writer_excludes_readers_and_writers(void **state)
{
	(void)state;
	run_stress(3, 50, klt_fence_budgeted(klt_scaled(20000), 3.0 / 50, FENCE_BUDGET_S,
					     MIN_STRESS_ITERS), false);  /* read-mostly */
	run_stress(3, 2, klt_fence_budgeted(klt_scaled(3000), 3.0 / 2, FENCE_BUDGET_S,
					    MIN_STRESS_ITERS), false);   /* write-heavy */
}

/* Readers move between CPUs inside their sections (lock counted on one CPU's slot,
 * unlock on another's): the sums stay exact and writers still exclude them. */
static void test_pcpu_rwsem_readers_hopping_cpus_keep_exclusion(void **state)
{
	(void)state;
	run_stress(3, 10, klt_scaled(5000), true);
}

static void test_pcpu_rwsem_survives_oversubscription(void **state)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int n = (int)(cpus * 4 > 16 ? 16 : cpus * 4);

	(void)state;
	run_stress(n, 20, klt_fence_budgeted(klt_scaled(3000), (double)n / 20, FENCE_BUDGET_S,
					     MIN_STRESS_ITERS), false);
}

/* ---- writer waits for readers, is woken once by the last ------------------------------ */

struct wctx {
	struct kl_pcpu_rwsem *sem;
	_Atomic int state; /* 1 started, 2 acquired, 3 done */
	int hold_ms;
};

static void *writer_thread(void *arg)
{
	struct wctx *w = arg;

	atomic_store(&w->state, 1);
	kl_pcpu_rwsem_write_lock(w->sem);
	atomic_store(&w->state, 2);
	if (w->hold_ms)
		klt_sleep_ms(w->hold_ms);
	kl_pcpu_rwsem_write_unlock(w->sem);
	atomic_store(&w->state, 3);
	return NULL;
}

struct holder {
	struct kl_pcpu_rwsem *sem;
	_Atomic int in;
	_Atomic int release;
	int cpu; /* move here before unlocking (-1: stay) */
};

static bool pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) == 0;
}

static void *holder_thread(void *arg)
{
	struct holder *h = arg;

	kl_pcpu_rwsem_read_lock(h->sem);
	atomic_store(&h->in, 1);
	while (!atomic_load(&h->release))
		klt_sleep_ms(1);
	if (h->cpu >= 0)
		pin_to(h->cpu);
	kl_pcpu_rwsem_read_unlock(h->sem);
	return NULL;
}

/* Two readers hold the semaphore past the writer's spin budget: the writer sleeps, stays
 * out while either is inside, and gets in after the last leaves. */
static void test_pcpu_rwsem_writer_sleeps_until_the_last_reader_leaves(void **state)
{
	struct kl_pcpu_rwsem sem;
	struct holder h[2] = { { .sem = &sem, .cpu = -1 }, { .sem = &sem, .cpu = -1 } };
	struct wctx w = { .sem = &sem };
	pthread_t th[2], tw;

	(void)state;
	assert_int_equal(kl_pcpu_rwsem_init(&sem), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_create(&th[i], NULL, holder_thread, &h[i]), 0);
		wait_state(&h[i].in, 1);
	}
	assert_int_equal(pthread_create(&tw, NULL, writer_thread, &w), 0);
	wait_state(&w.state, 1);
	klt_sleep_ms(LONG_HOLD_MS);
	assert_int_equal(atomic_load(&w.state), 1);
	atomic_store(&h[0].release, 1);
	pthread_join(th[0], NULL);
	klt_sleep_ms(20);
	assert_int_equal(atomic_load(&w.state), 1); /* one reader still inside */
	atomic_store(&h[1].release, 1);
	pthread_join(th[1], NULL);
	pthread_join(tw, NULL);
	assert_int_equal(atomic_load(&w.state), 3);
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), 0);
}

/* A reader that takes the lock on CPU 0 and releases it on CPU 1 (its lock counted in
 * slot 0, its unlock in slot 1) is still counted until it leaves. */
static void test_pcpu_rwsem_reader_migrated_inside_section_is_still_counted(void **state)
{
	cpu_set_t orig;
	struct kl_pcpu_rwsem sem;
	struct wctx w = { .sem = &sem };
	pthread_t t;

	(void)state;
	sched_getaffinity(0, sizeof(orig), &orig);
	if (CPU_COUNT(&orig) < 2 || !pin_to(0)) {
		skip();
		return;
	}
	assert_int_equal(kl_pcpu_rwsem_init(&sem), 0);
	kl_pcpu_rwsem_read_lock(&sem);
	assert_int_equal(sched_getcpu(), 0);
	assert_true(pin_to(1));
	assert_int_equal(sched_getcpu(), 1);
	assert_int_equal(pthread_create(&t, NULL, writer_thread, &w), 0);
	wait_state(&w.state, 1);
	klt_sleep_ms(LONG_HOLD_MS);
	assert_int_equal(atomic_load(&w.state), 1);
	kl_pcpu_rwsem_read_unlock(&sem);
	pthread_join(t, NULL);
	assert_int_equal(atomic_load(&w.state), 3);
	sched_setaffinity(0, sizeof(orig), &orig);
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), 0);
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

/* ---- threads coming and going ------------------------------------------------------------ */

struct churn {
	struct kl_pcpu_rwsem sem;
	volatile long a, b;
	_Atomic long torn;
	_Atomic int stop;
};

static void *churn_child(void *arg)
{
	struct churn *c = arg;

	for (int i = 0; i < 50; i++) {
		kl_pcpu_rwsem_read_lock(&c->sem);
		if (c->a != c->b)
			atomic_fetch_add(&c->torn, 1);
		kl_pcpu_rwsem_read_unlock(&c->sem);
	}
	return NULL;
}

static void *churn_spawner(void *arg)
{
	struct churn *c = arg;

	while (!atomic_load(&c->stop)) {
		pthread_t t;

		if (pthread_create(&t, NULL, churn_child, c) == 0)
			pthread_join(t, NULL);
	}
	return NULL;
}

static void test_pcpu_rwsem_thread_churn_during_writes(void **state)
{
	static struct churn c;
	pthread_t sp[2];
	long writes = klt_scaled(2000);

	(void)state;
	memset(&c, 0, sizeof(c));
	assert_int_equal(kl_pcpu_rwsem_init(&c.sem), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&sp[i], NULL, churn_spawner, &c), 0);
	for (long i = 0; i < writes; i++) {
		kl_pcpu_rwsem_write_lock(&c.sem);
		c.a++;
		c.b++;
		kl_pcpu_rwsem_write_unlock(&c.sem);
		if (i % 64 == 0)
			klt_sleep_ms(AFTER_LAZY_MS / 2); /* let readers go fast now and then */
	}
	atomic_store(&c.stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(sp[i], NULL);
	assert_int_equal(atomic_load(&c.torn), 0);
	assert_int_equal(c.a, writes);
	assert_int_equal(kl_pcpu_rwsem_destroy(&c.sem), 0);
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
		T(test_pcpu_rwsem_trylock_semantics),
		T(test_pcpu_rwsem_write_trylock_fails_while_held_and_undoes_itself),
		T(test_pcpu_rwsem_destroy_refuses_a_held_semaphore),
		T(test_pcpu_rwsem_many_readers_share),
		T(test_pcpu_rwsem_writer_excludes_readers_and_writers),
		T(test_pcpu_rwsem_waiter_queueing_during_unlock_is_not_lost),
		T(test_pcpu_rwsem_readers_hopping_cpus_keep_exclusion),
		T(test_pcpu_rwsem_survives_oversubscription),
		T(test_pcpu_rwsem_writer_sleeps_until_the_last_reader_leaves),
		T(test_pcpu_rwsem_reader_migrated_inside_section_is_still_counted),
		T(test_pcpu_rwsem_waiters_are_admitted_in_fifo_order),
		T(test_pcpu_rwsem_readers_return_to_fast_path_after_a_burst),
		T(test_pcpu_rwsem_thread_churn_during_writes),
#if KLOCK_DEBUG_LOCKS
		T(test_pcpu_rwsem_debug_build_reports_misuse),
#endif
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
