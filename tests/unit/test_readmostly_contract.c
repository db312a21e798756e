/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/test_readmostly_contract.c - the contract every read-mostly lock keeps, written
 * once and driven through the lockops adapter table (bench/lockops/, what klbench and
 * kltorture drive): readers share, trylock answers, a writer excludes readers and writers
 * (read-mostly, write-heavy, readers hopping CPUs, oversubscribed), a writer waits for the
 * last reader (also one that migrated inside its section), threads come and go during
 * writes. One cmocka group per lock, and every test's name ends in [lock], so a failure
 * names the lock.
 *
 * Locks: kl_rmlock, kl_rmlock_sleepable, kl_pcpu_rwsem and kl_rwlock from the table, and
 * two test-only copies of the rmlock adapters initialised with KL_RM_RECURSE (their
 * readers nest a second read hold in the stress). kl_seqlock is not driven: its readers
 * hold nothing (LOCKOPS_READ_RETRY), so "readers share", "a writer waits for readers" and
 * a failing read trylock do not apply; tests/unit/test_seqlock.c and kltorture cover it.
 *
 * What only one lock has stays in its own file: tests/unit/test_rmlock.c (trackers, recursion
 * rules, slot overflow, bias policy, FIFO hand-off, thread exit, fork, misuse) and
 * tests/unit/test_pcpu_rwsem.c (rseq fast path, rcu_sync bursts, write_trylock, FIFO, misuse).
 * Run also with KLOCK_NO_MEMBARRIER=1 / KLOCK_NO_RSEQ=1 and in every CI build.
 */
#include <sched.h>

#include <klock/rmlock.h>

#include "kltest.h"
#include "lockops.h"

/* Every test must finish well inside this (a deadlock fails fast instead of hanging). */
#define WATCHDOG_S 60
/* Bytes of per-thread lock state a test thread offers (asserted >= ops->tsize). */
#define TS_MAX 256
/* Readers that must be inside together in the sharing test. */
#define SHARERS 4
/* Seconds of writer heavy fences one stress run may spend (sizes shrink to fit where a
 * membarrier is slow: ~1 s in a 64-vCPU emulated guest) and the fewest iterations kept. */
#define FENCE_BUDGET_S 5.0
#define MIN_STRESS_ITERS 200
/* A "long" hold: well past the spin budgets, so waiting writers really sleep. */
#define LONG_HOLD_MS 60
/* Threads that create and join reader threads in the churn test. */
#define SPAWNERS 2
/* Read sections each short-lived churn thread runs. */
#define CHURN_READS 50
/* The churn writer pauses every CHURN_PAUSE_EVERY writes for CHURN_PAUSE_MS, so readers
 * also run on a lock back on its fast read path (pcpu_rwsem's lazy window is 100 us). */
#define CHURN_PAUSE_EVERY 64
#define CHURN_PAUSE_MS 2
/* Most locks one run drives (table entries plus test-only copies). */
#define MAX_LOCKS 8

/* Per-thread, per-lock state as lockops.h asks for: aligned, zero-filled, unmoved. */
struct tstate {
	_Alignas(LOCKOPS_ALIGN) char b[TS_MAX];
};

static int setup(void **state)
{
	(void)state;
	alarm(klt_watchdog_s(WATCHDOG_S));
	return 0;
}

/* ---- driving an adapter ---------------------------------------------------------------- */

static void enter(const struct lockops *o, void *l, struct tstate *ts)
{
	memset(ts, 0, sizeof(*ts));
	if (o->thread_enter != NULL)
		o->thread_enter(l);
}

static void leave(const struct lockops *o, void *l)
{
	if (o->thread_leave != NULL)
		o->thread_leave(l);
}

static void *lk_new(const struct lockops *o)
{
	size_t size = (o->size + LOCKOPS_ALIGN - 1) / LOCKOPS_ALIGN * LOCKOPS_ALIGN;
	void *l = aligned_alloc(LOCKOPS_ALIGN, size);

	assert_non_null(l);
	assert_true(o->tsize <= TS_MAX);
	memset(l, 0, size);
	assert_int_equal(o->init(l), 0);
	return l;
}

struct peer {
	const struct lockops *o;
	void *l;
	bool write, ok;
};

static void *peer_try(void *arg)
{
	struct peer *p = arg;
	struct tstate ts;

	enter(p->o, p->l, &ts);
	p->ok = (p->write ? p->o->write_trylock : p->o->read_trylock)(p->l, &ts);
	if (p->ok)
		(p->write ? p->o->write_unlock : p->o->read_unlock)(p->l, &ts);
	leave(p->o, p->l);
	return NULL;
}

static bool try_from_other_thread(const struct lockops *o, void *l, bool write)
{
	struct peer p = { .o = o, .l = l, .write = write };

	klt_run_threads(1, peer_try, &p, 0);
	return p.ok;
}

static void *peer_write(void *arg)
{
	struct peer *p = arg;
	struct tstate ts;

	enter(p->o, p->l, &ts);
	p->o->write_lock(p->l, &ts);
	p->o->write_unlock(p->l, &ts);
	p->ok = true;
	leave(p->o, p->l);
	return NULL;
}

/* The end of every test: the lock is free again - a reader and a writer from another
 * thread get in (a leaked hold fails the write try, or hangs the writer until the
 * watchdog fires where the adapter has no write_trylock) - and is destroyed. */
static void lk_free(const struct lockops *o, void *l)
{
	struct peer p = { .o = o, .l = l };

	assert_true(try_from_other_thread(o, l, false));
	if (o->write_trylock != NULL)
		assert_true(try_from_other_thread(o, l, true));
	klt_run_threads(1, peer_write, &p, 0);
	assert_true(p.ok);
	o->destroy(l);
	free(l);
}

static void wait_state(_Atomic int *st, int v)
{
	int64_t end = klt_now_ns() + 10 * KLT_NSEC_PER_SEC;

	while (atomic_load(st) < v) {
		assert_true(klt_now_ns() < end);
		klt_sleep_ms(1);
	}
}

static bool pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) == 0;
}

/* ---- readers share --------------------------------------------------------------------- */

struct share {
	const struct lockops *o;
	void *l;
	_Atomic int inside;
	_Atomic bool all_met;
};

static void *sharer(void *arg)
{
	struct share *s = arg;
	struct tstate ts;
	int64_t end = klt_now_ns() + 5 * KLT_NSEC_PER_SEC;
	int n;

	enter(s->o, s->l, &ts);
	s->o->read_lock(s->l, &ts);
	n = atomic_fetch_add(&s->inside, 1) + 1;
	while (n < SHARERS && klt_now_ns() < end) {
		klt_sleep_ms(1);
		n = atomic_load(&s->inside);
	}
	if (n >= SHARERS)
		atomic_store(&s->all_met, true);
	s->o->read_unlock(s->l, &ts);
	leave(s->o, s->l);
	return NULL;
}

/* All SHARERS readers are inside at the same moment: readers do not exclude each other. */
static void test_contract_readers_share(void **state)
{
	const struct lockops *o = *state;
	struct share s = { .o = o, .l = lk_new(o) };

	klt_run_threads(SHARERS, sharer, &s, 0);
	assert_true(atomic_load(&s.all_met));
	lk_free(o, s.l);
}

/* ---- trylock --------------------------------------------------------------------------- */

/* Free: both tries succeed; read-held: readers share, a writer fails; write-held: every
 * try fails; failed tries leave nothing behind. (Write tries where the adapter has one.) */
static void test_contract_trylock_semantics(void **state)
{
	const struct lockops *o = *state;
	bool wtry = o->write_trylock != NULL;
	void *l = lk_new(o);
	struct tstate ts;

	assert_non_null(o->read_trylock);
	enter(o, l, &ts);
	assert_true(try_from_other_thread(o, l, false));
	if (wtry)
		assert_true(try_from_other_thread(o, l, true));
	assert_true(o->read_trylock(l, &ts));
	assert_true(try_from_other_thread(o, l, false));
	if (wtry)
		assert_false(try_from_other_thread(o, l, true));
	o->read_unlock(l, &ts);
	if (wtry)
		assert_true(o->write_trylock(l, &ts));
	else
		o->write_lock(l, &ts);
	assert_false(try_from_other_thread(o, l, false));
	if (wtry)
		assert_false(try_from_other_thread(o, l, true));
	o->write_unlock(l, &ts);
	if (wtry)
		assert_true(try_from_other_thread(o, l, true));
	assert_true(try_from_other_thread(o, l, false));
	leave(o, l);
	lk_free(o, l);
}

/* ---- exclusion under stress ------------------------------------------------------------ */

struct stress {
	const struct lockops *o;
	void *l;
	volatile long a, b;      /* a == b outside write sections */
	_Atomic long writes, reads, torn, overlap;
	_Atomic int writers_in;
	long iters;
	int write_one_in;        /* 1 operation in N is a write */
	bool nest;               /* readers sometimes nest a second read hold */
	bool migrate;            /* readers hop between CPUs inside their sections */
};

static void hop_cpu(unsigned r)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	pin_to((int)(r % (unsigned)n));
}

static void stress_write(struct stress *s, struct tstate *ts)
{
	s->o->write_lock(s->l, ts);
	if (atomic_fetch_add(&s->writers_in, 1) != 0)
		atomic_fetch_add(&s->overlap, 1);
	s->a++;
	for (volatile int k = 0; k < 20; k++)
		;
	s->b++;
	atomic_fetch_sub(&s->writers_in, 1);
	s->o->write_unlock(s->l, ts);
	atomic_fetch_add(&s->writes, 1);
}

static void stress_read(struct stress *s, struct tstate *ts, struct tstate *ts2, unsigned r)
{
	bool nest = s->nest && (r & 4);

	s->o->read_lock(s->l, ts);
	if (nest)
		s->o->read_lock(s->l, ts2);
	if (s->migrate && (r & 0x700) == 0)
		hop_cpu(r >> 12);
	if (s->a != s->b || atomic_load(&s->writers_in) != 0)
		atomic_fetch_add(&s->torn, 1);
	if (nest)
		s->o->read_unlock(s->l, ts2);
	s->o->read_unlock(s->l, ts);
	atomic_fetch_add_explicit(&s->reads, 1, memory_order_relaxed);
}

static void *stress_thread(void *arg)
{
	struct stress *s = arg;
	struct tstate ts, ts2;
	unsigned r = (unsigned)(uintptr_t)pthread_self();

	enter(s->o, s->l, &ts);
	memset(&ts2, 0, sizeof(ts2));
	for (long i = 0; i < s->iters; i++) {
		r = r * 1103515245u + 12345u;
		if ((r >> 8) % (unsigned)s->write_one_in == 0)
			stress_write(s, &ts);
		else
			stress_read(s, &ts, &ts2, r);
	}
	leave(s->o, s->l);
	return NULL;
}

static void run_stress(const struct lockops *o, int nthreads, int write_one_in, long iters,
		       bool migrate)
{
	static struct stress s;

	memset(&s, 0, sizeof(s));
	s.o = o;
	s.l = lk_new(o);
	s.iters = iters;
	s.write_one_in = write_one_in;
	s.nest = !(o->flags & LOCKOPS_NO_RECURSE_READ);
	s.migrate = migrate;
	klt_run_threads(nthreads, stress_thread, &s, 0);
	assert_int_equal(atomic_load(&s.torn), 0);
	assert_int_equal(atomic_load(&s.overlap), 0);
	assert_int_equal(s.a, atomic_load(&s.writes));
	assert_int_equal(s.b, s.a);
	assert_int_equal(atomic_load(&s.writes) + atomic_load(&s.reads), (long)nthreads * iters);
	lk_free(o, s.l); /* fails if a count leaked */
}

/* run_stress()'s iterations: @n scaled, then cut to FENCE_BUDGET_S of writer fences
 * (@nthreads threads, one operation in @write_one_in a write). */
static long stress_iters(long n, int nthreads, int write_one_in)
{
	return klt_fence_budgeted(klt_scaled(n), (double)nthreads / write_one_in, FENCE_BUDGET_S,
				  MIN_STRESS_ITERS);
}

static void test_contract_writer_excludes_readers_and_writers(void **state)
{
	run_stress(*state, 3, 50, stress_iters(20000, 3, 50), false); /* read-mostly */
	run_stress(*state, 3, 2, stress_iters(3000, 3, 2), false); /* write-heavy */
}

/* Readers move between CPUs inside their sections (a per-CPU count taken on one CPU,
 * dropped on another): the sums stay exact and writers still exclude them. */
static void test_contract_readers_hopping_cpus_keep_exclusion(void **state)
{
	run_stress(*state, 3, 10, stress_iters(5000, 3, 10), true);
}

/* More threads than CPUs: preempted readers and writers must not stall anyone for long. */
static void test_contract_survives_oversubscription(void **state)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	int n = (int)(cpus * 4 > 16 ? 16 : cpus * 4);

	run_stress(*state, n, 20, stress_iters(3000, n, 20), false);
}

/* ---- a writer waits for the last reader -------------------------------------------------- */

struct wctx {
	const struct lockops *o;
	void *l;
	_Atomic int state; /* 1 started, 2 acquired, 3 done */
};

static void *writer_thread(void *arg)
{
	struct wctx *w = arg;
	struct tstate ts;

	enter(w->o, w->l, &ts);
	atomic_store(&w->state, 1);
	w->o->write_lock(w->l, &ts);
	atomic_store(&w->state, 2);
	w->o->write_unlock(w->l, &ts);
	atomic_store(&w->state, 3);
	leave(w->o, w->l);
	return NULL;
}

struct holder {
	const struct lockops *o;
	void *l;
	_Atomic int in, release;
};

static void *holder_thread(void *arg)
{
	struct holder *h = arg;
	struct tstate ts;

	enter(h->o, h->l, &ts);
	h->o->read_lock(h->l, &ts);
	atomic_store(&h->in, 1);
	while (!atomic_load(&h->release))
		klt_sleep_ms(1);
	h->o->read_unlock(h->l, &ts);
	leave(h->o, h->l);
	return NULL;
}

/* Two readers hold the lock past every spin budget: the writer (spinning or sleeping)
 * stays out while either is inside, and gets in after the last one leaves. */
static void test_contract_writer_waits_for_the_last_reader(void **state)
{
	const struct lockops *o = *state;
	void *l = lk_new(o);
	struct holder h[2] = { { .o = o, .l = l }, { .o = o, .l = l } };
	struct wctx w = { .o = o, .l = l };
	pthread_t th[2], tw;

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
	lk_free(o, l);
}

/* A reader that takes the lock on CPU 0 and releases it on CPU 1 (per-CPU locks: lock
 * counted in slot 0, unlock in slot 1) is still counted until it leaves. */
static void test_contract_reader_migrated_inside_section_is_still_counted(void **state)
{
	const struct lockops *o = *state;
	cpu_set_t orig;
	struct tstate ts;
	struct wctx w = { .o = o };
	pthread_t t;

	sched_getaffinity(0, sizeof(orig), &orig);
	if (CPU_COUNT(&orig) < 2 || !pin_to(0)) {
		skip();
		return;
	}
	w.l = lk_new(o);
	enter(o, w.l, &ts);
	o->read_lock(w.l, &ts);
	assert_int_equal(sched_getcpu(), 0);
	assert_true(pin_to(1));
	assert_int_equal(sched_getcpu(), 1);
	assert_int_equal(pthread_create(&t, NULL, writer_thread, &w), 0);
	wait_state(&w.state, 1);
	klt_sleep_ms(LONG_HOLD_MS);
	assert_int_equal(atomic_load(&w.state), 1);
	o->read_unlock(w.l, &ts);
	pthread_join(t, NULL);
	assert_int_equal(atomic_load(&w.state), 3);
	leave(o, w.l);
	sched_setaffinity(0, sizeof(orig), &orig);
	lk_free(o, w.l);
}

/* ---- threads coming and going ------------------------------------------------------------ */

struct churn {
	const struct lockops *o;
	void *l;
	volatile long a, b;
	_Atomic long torn;
	_Atomic int stop;
};

static void *churn_child(void *arg)
{
	struct churn *c = arg;
	struct tstate ts;

	enter(c->o, c->l, &ts);
	for (int i = 0; i < CHURN_READS; i++) {
		c->o->read_lock(c->l, &ts);
		if (c->a != c->b)
			atomic_fetch_add(&c->torn, 1);
		c->o->read_unlock(c->l, &ts);
	}
	leave(c->o, c->l);
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

/* Writes run while reader threads are created and exit: every write still excludes every
 * read, and no writer waits for a thread that is gone. */
static void test_contract_thread_churn_during_writes(void **state)
{
	const struct lockops *o = *state;
	static struct churn c;
	struct tstate ts;
	pthread_t sp[SPAWNERS];
	long writes = klt_scaled(2000);

	memset(&c, 0, sizeof(c));
	c.o = o;
	c.l = lk_new(o);
	enter(o, c.l, &ts);
	for (int i = 0; i < SPAWNERS; i++)
		assert_int_equal(pthread_create(&sp[i], NULL, churn_spawner, &c), 0);
	for (long i = 0; i < writes; i++) {
		o->write_lock(c.l, &ts);
		c.a++;
		c.b++;
		o->write_unlock(c.l, &ts);
		if (i % CHURN_PAUSE_EVERY == 0)
			klt_sleep_ms(CHURN_PAUSE_MS);
	}
	atomic_store(&c.stop, 1);
	for (int i = 0; i < SPAWNERS; i++)
		pthread_join(sp[i], NULL);
	assert_int_equal(atomic_load(&c.torn), 0);
	assert_int_equal(c.a, writes);
	leave(o, c.l);
	lk_free(o, c.l);
}

/* ---- the locks --------------------------------------------------------------------------- */

/* Read-mostly locks from the table. */
static const char *const table_locks[] = { "kl_rmlock", "kl_rmlock_sleepable",
					   "kl_pcpu_rwsem", "kl_rwlock" };

static int rm_init_recurse(void *l)
{
	return kl_rmlock_init(l, KL_RM_RECURSE);
}

static int rm_init_sleepable_recurse(void *l)
{
	return kl_rmlock_init(l, KL_RM_SLEEPABLE | KL_RM_RECURSE);
}

/* Test-only copy of table entry @base: initialised by @init, named @name, and nesting
 * read holds allowed (KL_RM_RECURSE). */
static const struct lockops *recurse_copy(struct lockops *copy, const char *base,
					  const char *name, int (*init)(void *))
{
	const struct lockops *o = lockops_find(base);

	assert_non_null(o);
	*copy = *o;
	copy->name = name;
	copy->init = init;
	copy->flags &= ~LOCKOPS_NO_RECURSE_READ;
	copy->read_pair_loop = NULL;
	return copy;
}

struct contract_case {
	const char *name;
	CMUnitTestFunction fn;
};

#define C(f) { #f, f }
static const struct contract_case cases[] = {
	C(test_contract_readers_share),
	C(test_contract_trylock_semantics),
	C(test_contract_writer_excludes_readers_and_writers),
	C(test_contract_readers_hopping_cpus_keep_exclusion),
	C(test_contract_survives_oversubscription),
	C(test_contract_writer_waits_for_the_last_reader),
	C(test_contract_reader_migrated_inside_section_is_still_counted),
	C(test_contract_thread_churn_during_writes),
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))
/* Room for "<case>[<lock>]". */
#define NAME_MAX_LEN 128

/* One cmocka group per lock, named by it; each test named "<case>[<lock>]". */
static int run_lock(const struct lockops *o)
{
	static char names[NCASES][NAME_MAX_LEN];
	struct CMUnitTest tests[NCASES];

	assert_non_null(o);
	for (size_t i = 0; i < NCASES; i++) {
		snprintf(names[i], sizeof(names[i]), "%s[%s]", cases[i].name, o->name);
		tests[i] = (struct CMUnitTest){ .name = names[i], .test_func = cases[i].fn,
						.setup_func = setup,
						.initial_state = (void *)o };
	}
	return _cmocka_run_group_tests(o->name, tests, NCASES, NULL, NULL);
}

int main(void)
{
	static struct lockops copies[2];
	const struct lockops *locks[MAX_LOCKS];
	size_t n = 0;
	int failed = 0;

	for (size_t i = 0; i < sizeof(table_locks) / sizeof(table_locks[0]); i++) {
		locks[n] = lockops_find(table_locks[i]);
		if (locks[n] == NULL) {
			fprintf(stderr, "lock %s is not in the lockops table\n", table_locks[i]);
			return 1;
		}
		n++;
	}
	locks[n++] = recurse_copy(&copies[0], "kl_rmlock", "kl_rmlock+recurse",
				  rm_init_recurse);
	locks[n++] = recurse_copy(&copies[1], "kl_rmlock_sleepable",
				  "kl_rmlock_sleepable+recurse", rm_init_sleepable_recurse);
	for (size_t i = 0; i < n; i++)
		failed += run_lock(locks[i]);
	return failed;
}
