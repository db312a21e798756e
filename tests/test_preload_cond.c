/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/test_preload_cond.c - condition variables under the preload, with every kind of
 * mutex they can meet: klock's (normal, recursive, errorcheck; static or initialised) and
 * glibc's (robust, process-shared), which a klock condvar serves on its generic path.
 * Signal, broadcast, timed waits on both clocks, the errors glibc gives, a recursive
 * mutex released whole, "broadcast then destroy", a robust owner's death seen by a
 * waiter, and a producer/consumer stress that would hang on a lost wake-up.
 * Run without the preload too (expectations are glibc's) and with KLOCK_MUTEX=ticket|mcs.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "preload_test.h"

/* A timed wait's timeout in the rows that time out. */
#define TIMEOUT_MS 40
/* Long enough for a CLOCK_REALTIME wait to take more than one of the preload's slices. */
#define LONG_TIMEOUT_MS 1300
/* Threads waiting at once in the broadcast test. */
#define WAITERS 6
/* Stress: producers, consumers, items each producer makes, queue capacity. */
#define PRODUCERS 3
#define CONSUMERS 3
#define ITEMS 20000
#define QCAP 4
/* Seconds before a stuck test is killed (a lost wake-up hangs). */
#define WATCHDOG_S 60
/* The stress re-arms the whole-program watchdog every this many items consumed (a power
 * of two): a lost wake-up stops progress, slow CPUs (an emulated 64-vCPU guest, where a
 * FIFO lock waits for its next owner's vCPU to be scheduled) only slow it. */
#define PROGRESS_ITEMS 1024

static bool preloaded;

enum mkind { MK_NORMAL_STATIC, MK_NORMAL, MK_RECURSIVE, MK_ERRORCHECK, MK_ROBUST, MK_PSHARED,
	     MK_COUNT };
static const char *const mk_names[] = { "normal(static)", "normal", "recursive", "errorcheck",
					"robust", "process-shared" };

static void mutex_make(pthread_mutex_t *m, enum mkind k)
{
	pthread_mutexattr_t a;

	if (k == MK_NORMAL_STATIC) {
		*m = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
		return;
	}
	pthread_mutexattr_init(&a);
	if (k == MK_RECURSIVE)
		pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	if (k == MK_ERRORCHECK)
		pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	if (k == MK_ROBUST)
		pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (k == MK_PSHARED)
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	assert_int_equal(pthread_mutex_init(m, &a), 0);
	pthread_mutexattr_destroy(&a);
}

/* ---- signal and broadcast ---------------------------------------------------------------- */

struct waitq {
	pthread_mutex_t m;
	pthread_cond_t c;
	int go;          /* the predicate, under m */
	int woken;       /* waiters that saw it, under m */
	sem_t waiting;   /* posted by each waiter right before it waits */
};

static void *waiter(void *p)
{
	struct waitq *q = p;

	assert_int_equal(pthread_mutex_lock(&q->m), 0);
	sem_post(&q->waiting);
	while (q->go == 0)
		assert_int_equal(pthread_cond_wait(&q->c, &q->m), 0);
	q->go--;
	q->woken++;
	assert_int_equal(pthread_mutex_unlock(&q->m), 0);
	return NULL;
}

static void waitq_init(struct waitq *q, enum mkind k)
{
	memset(q, 0, sizeof(*q));
	mutex_make(&q->m, k);
	assert_int_equal(pthread_cond_init(&q->c, NULL), 0);
	sem_init(&q->waiting, 0, 0);
}

/* Signal releases exactly the waiters it is given credit for; broadcast all of them. */
static void signal_then_broadcast(enum mkind k)
{
	struct waitq q;
	pthread_t t[WAITERS];

	waitq_init(&q, k);
	for (int i = 0; i < WAITERS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, waiter, &q), 0);
	for (int i = 0; i < WAITERS; i++)
		while (sem_wait(&q.waiting) != 0)
			;
	assert_int_equal(pthread_mutex_lock(&q.m), 0);
	q.go = 1;
	assert_int_equal(pthread_cond_signal(&q.c), 0);
	assert_int_equal(pthread_mutex_unlock(&q.m), 0);
	for (;;) { /* one waiter takes the credit */
		assert_int_equal(pthread_mutex_lock(&q.m), 0);
		int w = q.woken;

		assert_int_equal(pthread_mutex_unlock(&q.m), 0);
		if (w == 1)
			break;
		klt_sleep_ms(1);
	}
	assert_int_equal(pthread_mutex_lock(&q.m), 0);
	q.go = WAITERS - 1;
	assert_int_equal(pthread_cond_broadcast(&q.c), 0);
	assert_int_equal(pthread_mutex_unlock(&q.m), 0);
	for (int i = 0; i < WAITERS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(q.woken, WAITERS);
	assert_int_equal(pthread_cond_destroy(&q.c), 0);
	assert_int_equal(pthread_mutex_destroy(&q.m), 0);
	sem_destroy(&q.waiting);
}

static void test_preload_cond_signal_and_broadcast_every_mutex_kind(void **state)
{
	(void)state;
	for (int k = 0; k < MK_COUNT; k++) {
		print_message("mutex %s\n", mk_names[k]);
		signal_then_broadcast(k);
	}
}

/* ---- timed waits ----------------------------------------------------------------------- */

/* A timed wait that nobody signals: ETIMEDOUT, not before the deadline on its own clock,
 * mutex held again. Callers loop on spurious wake-ups, and so does this. */
static void timed_out(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock, bool use_clockwait,
		      int64_t ms)
{
	struct timespec dl = pt_deadline(clock, ms);
	int r;

	assert_int_equal(pthread_mutex_lock(m), 0);
	do {
		r = use_clockwait ? pthread_cond_clockwait(c, m, clock, &dl)
				  : pthread_cond_timedwait(c, m, &dl);
	} while (r == 0);
	assert_int_equal(r, ETIMEDOUT);
	assert_true(pt_clock_ns(clock) >= (int64_t)dl.tv_sec * KLT_NSEC_PER_SEC + dl.tv_nsec);
	assert_int_equal(pthread_mutex_trylock(m), EBUSY); /* held again (not recursive) */
	assert_int_equal(pthread_mutex_unlock(m), 0);
}

static void test_preload_cond_timedwait_never_early_on_either_clock(void **state)
{
	pthread_condattr_t a;
	pthread_cond_t rt = PTHREAD_COND_INITIALIZER, mono;
	pthread_mutex_t m;

	(void)state;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	assert_int_equal(pthread_cond_init(&mono, &a), 0);
	pthread_condattr_destroy(&a);
	for (int k = 0; k < MK_COUNT; k++) {
		if (k == MK_RECURSIVE)
			continue; /* timed_out checks the hold with trylock */
		mutex_make(&m, k);
		timed_out(&rt, &m, CLOCK_REALTIME, false, TIMEOUT_MS);
		timed_out(&mono, &m, CLOCK_MONOTONIC, false, TIMEOUT_MS);
		timed_out(&rt, &m, CLOCK_MONOTONIC, true, TIMEOUT_MS);
		timed_out(&mono, &m, CLOCK_REALTIME, true, TIMEOUT_MS);
		timed_out(&rt, &m, CLOCK_REALTIME, false, -TIMEOUT_MS); /* passed already */
		pthread_mutex_destroy(&m);
	}
	mutex_make(&m, MK_NORMAL);
	timed_out(&rt, &m, CLOCK_REALTIME, false, LONG_TIMEOUT_MS);
	pthread_mutex_destroy(&m);
	pthread_cond_destroy(&mono);
}

static void test_preload_cond_timed_errors_keep_the_mutex(void **state)
{
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct timespec bad = { time(NULL) + 1, 1000000000l };
	struct timespec ok = pt_deadline(CLOCK_MONOTONIC, TIMEOUT_MS);

	(void)state;
	assert_int_equal(pthread_mutex_lock(&m), 0);
	assert_int_equal(pthread_cond_timedwait(&c, &m, &bad), EINVAL);
	assert_int_equal(pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &bad), EINVAL);
	assert_int_equal(pthread_cond_clockwait(&c, &m, CLOCK_PROCESS_CPUTIME_ID, &ok), EINVAL);
	assert_int_equal(pthread_mutex_trylock(&m), EBUSY); /* still ours */
	assert_int_equal(pthread_mutex_unlock(&m), 0);
}

/* ---- the mutex side ------------------------------------------------------------------------ */

static void test_preload_cond_wait_without_errorcheck_mutex_is_eperm(void **state)
{
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	pthread_mutex_t m;
	struct timespec dl = pt_deadline(CLOCK_REALTIME, TIMEOUT_MS);

	(void)state;
	mutex_make(&m, MK_ERRORCHECK);
	assert_int_equal(pthread_cond_wait(&c, &m), EPERM);
	assert_int_equal(pthread_cond_timedwait(&c, &m, &dl), EPERM);
	pthread_mutex_destroy(&m);
	mutex_make(&m, MK_ROBUST);
	assert_int_equal(pthread_cond_timedwait(&c, &m, &dl), EPERM);
	pthread_mutex_destroy(&m);
}

struct rec {
	pthread_mutex_t m;
	pthread_cond_t c;
	int stage;
};

static void *rec_other(void *p)
{
	struct rec *r = p;

	/* Possible only if the waiter released every level of its recursive hold. */
	assert_int_equal(pthread_mutex_lock(&r->m), 0);
	r->stage = 1;
	assert_int_equal(pthread_cond_signal(&r->c), 0);
	assert_int_equal(pthread_mutex_unlock(&r->m), 0);
	return NULL;
}

/* glibc releases only one level of a recursive mutex in a wait (its documented hazard:
 * the other thread below would block forever); klock releases the whole hold and
 * restores it. So this test runs under the preload only. */
static void test_preload_cond_wait_releases_a_recursive_mutex_whole(void **state)
{
	struct rec r = { .stage = 0 };
	pthread_t t;

	(void)state;
	if (!preloaded)
		skip();
	mutex_make(&r.m, MK_RECURSIVE);
	assert_int_equal(pthread_cond_init(&r.c, NULL), 0);
	assert_int_equal(pthread_mutex_lock(&r.m), 0);
	assert_int_equal(pthread_mutex_lock(&r.m), 0);
	assert_int_equal(pthread_create(&t, NULL, rec_other, &r), 0);
	while (r.stage == 0)
		assert_int_equal(pthread_cond_wait(&r.c, &r.m), 0);
	assert_int_equal(pthread_mutex_unlock(&r.m), 0);
	assert_int_equal(pthread_mutex_unlock(&r.m), 0);
	assert_int_equal(pthread_mutex_unlock(&r.m), EPERM); /* depth restored, then gone */
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* A robust mutex's owner dies holding it while we wait: the wait returns EOWNERDEAD with
 * the mutex ours, as glibc's. */
static void *robust_signal_and_die(void *p)
{
	struct rec *r = p;

	assert_int_equal(pthread_mutex_lock(&r->m), 0);
	r->stage = 1;
	assert_int_equal(pthread_cond_signal(&r->c), 0);
	return NULL; /* exits holding r->m */
}

static void test_preload_cond_robust_owner_death_reaches_the_waiter(void **state)
{
	struct rec r = { .stage = 0 };
	pthread_t t;
	int err = 0;

	(void)state;
	if (!pt_robust_supported())
		skip();
	mutex_make(&r.m, MK_ROBUST);
	assert_int_equal(pthread_cond_init(&r.c, NULL), 0);
	assert_int_equal(pthread_mutex_lock(&r.m), 0);
	assert_int_equal(pthread_create(&t, NULL, robust_signal_and_die, &r), 0);
	while (r.stage == 0 && err == 0)
		err = pthread_cond_wait(&r.c, &r.m);
	assert_int_equal(err, EOWNERDEAD);
	assert_int_equal(pthread_mutex_consistent(&r.m), 0);
	assert_int_equal(pthread_mutex_unlock(&r.m), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* A process-shared (glibc) condvar cannot release a klock mutex: refused with EINVAL (and
 * a report, here set to warn) instead of corrupting it. glibc itself allows it. */
static void test_preload_cond_pshared_cond_with_klock_mutex_is_refused(void **state)
{
	pthread_condattr_t a;
	pthread_cond_t c;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct timespec dl = pt_deadline(CLOCK_REALTIME, TIMEOUT_MS);

	(void)state;
	if (!preloaded || getenv_is("KLOCK_MUTEX", "pthread"))
		skip();
	setenv("KLOCK_ON_ERROR", "warn", 1);
	pthread_condattr_init(&a);
	pthread_condattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	assert_int_equal(pthread_cond_init(&c, &a), 0);
	pthread_condattr_destroy(&a);
	assert_int_equal(pthread_mutex_lock(&m), 0);
	assert_int_equal(pthread_cond_timedwait(&c, &m, &dl), EINVAL);
	assert_int_equal(pthread_cond_wait(&c, &m), EINVAL);
	assert_int_equal(pthread_mutex_unlock(&m), 0); /* unharmed */
	assert_int_equal(pthread_mutex_lock(&m), 0);
	assert_int_equal(pthread_mutex_unlock(&m), 0);
	assert_int_equal(pthread_cond_destroy(&c), 0);
	unsetenv("KLOCK_ON_ERROR");
}

/* A process-shared condvar and mutex, in shared memory, used by a parent and a child. */
static void test_preload_cond_pshared_pair_across_fork(void **state)
{
	struct shared {
		pthread_mutex_t m;
		pthread_cond_t c;
		int ready;
	} *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;
	int status;
	pid_t pid;

	(void)state;
	assert_true(s != MAP_FAILED);
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	assert_int_equal(pthread_mutex_init(&s->m, &ma), 0);
	assert_int_equal(pthread_cond_init(&s->c, &ca), 0);
	pid = fork();
	if (pid == 0) {
		alarm(WATCHDOG_S);
		pthread_mutex_lock(&s->m);
		s->ready = 1;
		pthread_cond_signal(&s->c);
		pthread_mutex_unlock(&s->m);
		_exit(0);
	}
	assert_int_equal(pthread_mutex_lock(&s->m), 0);
	while (!s->ready)
		assert_int_equal(pthread_cond_wait(&s->c, &s->m), 0);
	assert_int_equal(pthread_mutex_unlock(&s->m), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	munmap(s, sizeof(*s));
}

/* ---- lifetime ------------------------------------------------------------------------------ */

struct bd {
	pthread_mutex_t m;
	pthread_cond_t *c;
	int go;
	sem_t waiting;
};

static void *bd_waiter(void *p)
{
	struct bd *b = p;

	pthread_mutex_lock(&b->m);
	sem_post(&b->waiting);
	while (!b->go)
		pthread_cond_wait(b->c, &b->m);
	pthread_mutex_unlock(&b->m);
	return NULL;
}

/* POSIX: a condvar may be destroyed as soon as no thread is blocked on it, i.e. right
 * after the broadcast; the woken waiters must not touch it again. The memory is then
 * scribbled over, which a waiter that still looked at it would trip on. */
static void test_preload_cond_destroy_right_after_broadcast(void **state)
{
	struct bd b;
	pthread_t t[WAITERS];

	(void)state;
	for (int k = 0; k < MK_COUNT; k++) {
		memset(&b, 0, sizeof(b));
		mutex_make(&b.m, k);
		b.c = malloc(sizeof(*b.c));
		assert_int_equal(pthread_cond_init(b.c, NULL), 0);
		sem_init(&b.waiting, 0, 0);
		for (int i = 0; i < WAITERS; i++)
			assert_int_equal(pthread_create(&t[i], NULL, bd_waiter, &b), 0);
		for (int i = 0; i < WAITERS; i++)
			while (sem_wait(&b.waiting) != 0)
				;
		assert_int_equal(pthread_mutex_lock(&b.m), 0);
		b.go = 1;
		assert_int_equal(pthread_cond_broadcast(b.c), 0);
		assert_int_equal(pthread_mutex_unlock(&b.m), 0);
		assert_int_equal(pthread_cond_destroy(b.c), 0);
		memset(b.c, 0xa5, sizeof(*b.c));
		for (int i = 0; i < WAITERS; i++)
			assert_int_equal(pthread_join(t[i], NULL), 0);
		free(b.c);
		pthread_mutex_destroy(&b.m);
		sem_destroy(&b.waiting);
	}
}

/* ---- stress: a bounded queue, two condvars ------------------------------------------------- */

struct bq {
	pthread_mutex_t m;
	pthread_cond_t not_empty, not_full;
	int items[QCAP];
	int head, n, done_producers;
	long sum, count, per_producer;
};

static void *bq_producer(void *p)
{
	struct bq *q = p;

	for (long i = 1; i <= q->per_producer; i++) {
		pthread_mutex_lock(&q->m);
		while (q->n == QCAP)
			pthread_cond_wait(&q->not_full, &q->m);
		q->items[(q->head + q->n++) % QCAP] = (int)i;
		pthread_cond_signal(&q->not_empty);
		pthread_mutex_unlock(&q->m);
	}
	pthread_mutex_lock(&q->m);
	q->done_producers++;
	pthread_cond_broadcast(&q->not_empty);
	pthread_mutex_unlock(&q->m);
	return NULL;
}

static void *bq_consumer(void *p)
{
	struct bq *q = p;

	pthread_mutex_lock(&q->m);
	for (;;) {
		while (q->n == 0 && q->done_producers < PRODUCERS)
			pthread_cond_wait(&q->not_empty, &q->m);
		if (q->n == 0)
			break;
		q->sum += q->items[q->head];
		if ((++q->count & (PROGRESS_ITEMS - 1)) == 0)
			alarm(klt_watchdog_s(WATCHDOG_S * 4));
		q->head = (q->head + 1) % QCAP;
		q->n--;
		pthread_cond_signal(&q->not_full);
	}
	pthread_mutex_unlock(&q->m);
	return NULL;
}

static void test_preload_cond_bounded_queue_loses_no_wakeup(void **state)
{
	struct bq *q = calloc(1, sizeof(*q));
	pthread_t t[PRODUCERS + CONSUMERS];
	long items = klt_scaled(ITEMS);

	(void)state;
	for (int k = 0; k < MK_COUNT; k++) {
		memset(q, 0, sizeof(*q));
		q->per_producer = items;
		mutex_make(&q->m, k);
		pthread_cond_init(&q->not_empty, NULL);
		pthread_cond_init(&q->not_full, NULL);
		for (int i = 0; i < PRODUCERS; i++)
			assert_int_equal(pthread_create(&t[i], NULL, bq_producer, q), 0);
		for (int i = 0; i < CONSUMERS; i++)
			assert_int_equal(pthread_create(&t[PRODUCERS + i], NULL, bq_consumer, q), 0);
		for (int i = 0; i < PRODUCERS + CONSUMERS; i++)
			assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(q->count, PRODUCERS * items);
		assert_int_equal(q->sum, PRODUCERS * items * (items + 1) / 2);
		pthread_cond_destroy(&q->not_empty);
		pthread_cond_destroy(&q->not_full);
		pthread_mutex_destroy(&q->m);
	}
	free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_preload_cond_signal_and_broadcast_every_mutex_kind),
		cmocka_unit_test(test_preload_cond_timedwait_never_early_on_either_clock),
		cmocka_unit_test(test_preload_cond_timed_errors_keep_the_mutex),
		cmocka_unit_test(test_preload_cond_wait_without_errorcheck_mutex_is_eperm),
		cmocka_unit_test(test_preload_cond_wait_releases_a_recursive_mutex_whole),
		cmocka_unit_test(test_preload_cond_robust_owner_death_reaches_the_waiter),
		cmocka_unit_test(test_preload_cond_pshared_cond_with_klock_mutex_is_refused),
		cmocka_unit_test(test_preload_cond_pshared_pair_across_fork),
		cmocka_unit_test(test_preload_cond_destroy_right_after_broadcast),
		cmocka_unit_test(test_preload_cond_bounded_queue_loses_no_wakeup),
	};

	preloaded = pt_preloaded();
	alarm(klt_watchdog_s(WATCHDOG_S * 4));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
