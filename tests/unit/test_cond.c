/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/unit/test_cond.c - kl_cond with kl_mutex: signal, broadcast (requeue), timedwait. */
#include <pthread.h>

#include <klock/cond.h>
#include "kltest.h"
#include "kl_internal.h"
#include "park.h"

_Static_assert(sizeof(struct kl_cond) <= sizeof(pthread_cond_t),
	       "kl_cond must fit in a pthread_cond_t (the LD_PRELOAD interposer)");
_Static_assert(_Alignof(struct kl_cond) <= _Alignof(pthread_cond_t),
	       "kl_cond must not need more alignment than a pthread_cond_t");

#define WAITERS 4

static struct kl_mutex m = KL_MUTEX_INITIALIZER;
static struct kl_cond c = KL_COND_INITIALIZER;
static int generation;   /* the predicate: bumped under m */
static _Atomic int woken;

/* Waits (under m) until the generation moves past the one it saw. */
static void *waiter_thread(void *arg)
{
	(void)arg;
	kl_mutex_lock(&m);
	int seen = generation;

	while (generation == seen)
		kl_cond_wait(&c, &m);
	assert_true(kl_mutex_owned(&m));
	atomic_fetch_add(&woken, 1);
	kl_mutex_unlock(&m);
	return NULL;
}

static void start_waiters(pthread_t *t, int n)
{
	atomic_store(&woken, 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(pthread_create(&t[i], NULL, waiter_thread, NULL), 0);
	while (kli_park_queued(&c) != (unsigned)n) /* all asleep on the condvar */
		klt_sleep_ms(1);
}

static void test_cond_signal_wakes_one_waiter(void **state)
{
	pthread_t t[2];

	start_waiters(t, 2);
	kl_mutex_lock(&m);
	generation++;
	kl_cond_signal(&c);
	kl_mutex_unlock(&m);
	while (atomic_load(&woken) != 1)
		klt_sleep_ms(1);
	klt_sleep_ms(20);
	assert_int_equal(atomic_load(&woken), 1); /* exactly one */
	assert_int_equal(kli_park_queued(&c), 1);
	kl_cond_signal(&c); /* the other one (spurious-safe: it re-checks and exits) */
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&woken), 2);
	assert_int_equal(atomic_load(&c.waiters), 0);
}

static void test_cond_broadcast_requeues_instead_of_waking_the_herd(void **state)
{
	pthread_t t[WAITERS];

	start_waiters(t, WAITERS);
	kl_mutex_lock(&m);
	generation++;
	kl_cond_broadcast(&c);
	/* One woken (now blocked on m, which we hold); the rest moved, still asleep, onto
	 * m's own queue: nobody is left on the condvar. */
	assert_int_equal(kli_park_queued(&c), 0);
	assert_true(kli_park_queued(&m) >= WAITERS - 1);
	assert_true(atomic_load(&m.owner) & 1); /* the mutex knows it has sleepers */
	kl_mutex_unlock(&m); /* each unlock now wakes the next waiter */
	for (int i = 0; i < WAITERS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&woken), WAITERS);
	assert_int_equal(kli_park_queued(&m), 0);
}

static void *broadcast_unlocked_thread(void *arg)
{
	(void)arg;
	kl_mutex_lock(&m);
	generation++;
	kl_mutex_unlock(&m);
	kl_cond_broadcast(&c); /* after unlocking: requeued waiters must still all wake */
	return NULL;
}

static void test_cond_broadcast_without_the_mutex_wakes_everyone(void **state)
{
	pthread_t t[WAITERS], b;

	start_waiters(t, WAITERS);
	assert_int_equal(pthread_create(&b, NULL, broadcast_unlocked_thread, NULL), 0);
	pthread_join(b, NULL);
	for (int i = 0; i < WAITERS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&woken), WAITERS);
}

static void test_cond_timedwait_times_out_never_early_holding_the_mutex(void **state)
{
	struct kl_cond lc = KL_COND_INITIALIZER;
	struct timespec d;
	int64_t t0;

	kl_mutex_lock(&m);
	t0 = klt_now_ns();
	d = klt_deadline_ms(30);
	assert_int_equal(kl_cond_timedwait(&lc, &m, &d), ETIMEDOUT);
	assert_true(klt_now_ns() - t0 >= 30 * 1000000ll);
	assert_true(klt_now_ns() - t0 < 30 * 1000000ll + 5 * KLT_NSEC_PER_SEC);
	assert_true(kl_mutex_owned(&m));
	assert_int_equal(atomic_load(&lc.waiters), 0);
	kl_mutex_unlock(&m);
	assert_int_equal(kl_cond_destroy(&lc), 0);
}

struct timed {
	struct kl_cond *c;
	int ret;
	bool flag;
};

static void *timed_waiter(void *arg)
{
	struct timed *tw = arg;
	struct timespec d = klt_deadline_ms(60000);

	kl_mutex_lock(&m);
	while (!tw->flag && tw->ret == 0)
		tw->ret = kl_cond_timedwait(tw->c, &m, &d);
	kl_mutex_unlock(&m);
	return NULL;
}

static void test_cond_timedwait_is_woken_by_signal(void **state)
{
	struct kl_cond lc = KL_COND_INITIALIZER;
	struct timed tw = { &lc, 0, false };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, timed_waiter, &tw), 0);
	while (kli_park_queued(&lc) != 1)
		klt_sleep_ms(1);
	kl_mutex_lock(&m);
	tw.flag = true;
	kl_cond_signal(&lc);
	kl_mutex_unlock(&m);
	pthread_join(t, NULL);
	assert_int_equal(tw.ret, 0);
}

static void test_cond_rejects_bad_timespec_and_unheld_mutex(void **state)
{
	struct kl_cond lc = KL_COND_INITIALIZER;
	struct timespec bad = { 0, 1000000000 }, d = klt_deadline_ms(10);

	setenv("KLOCK_ON_ERROR", "warn", 1);
	kl_mutex_lock(&m);
	assert_int_equal(kl_cond_timedwait(&lc, &m, &bad), EINVAL);
	assert_true(kl_mutex_owned(&m)); /* nothing changed */
	kl_mutex_unlock(&m);
	assert_int_equal(kl_cond_timedwait(&lc, &m, &d), EPERM);
}

/* ---- no lost wake-up: a bounded buffer, producers and consumers ------------------------ */
#define SLOTS 4
#define PAIRS 2
static struct kl_cond not_full = KL_COND_INITIALIZER, not_empty = KL_COND_INITIALIZER;
static long buf_count, items, consumed_sum, produced_sum;

static void *producer(void *arg)
{
	(void)arg;
	for (long i = 1; i <= items; i++) {
		kl_mutex_lock(&m);
		while (buf_count == SLOTS)
			kl_cond_wait(&not_full, &m);
		buf_count++;
		produced_sum += i;
		if (i % 3 == 0)
			kl_cond_broadcast(&not_empty);
		else
			kl_cond_signal(&not_empty);
		kl_mutex_unlock(&m);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	(void)arg;
	for (long i = 1; i <= items; i++) {
		kl_mutex_lock(&m);
		while (buf_count == 0)
			kl_cond_wait(&not_empty, &m);
		buf_count--;
		consumed_sum += i;
		kl_mutex_unlock(&m); /* signal after unlock: also allowed */
		kl_cond_signal(&not_full);
	}
	return NULL;
}

static void test_cond_no_lost_wakeup_under_stress(void **state)
{
	pthread_t t[2 * PAIRS];

	items = klt_scaled(20000);
	buf_count = consumed_sum = produced_sum = 0;
	for (int i = 0; i < PAIRS; i++) {
		assert_int_equal(pthread_create(&t[2 * i], NULL, producer, NULL), 0);
		assert_int_equal(pthread_create(&t[2 * i + 1], NULL, consumer, NULL), 0);
	}
	for (int i = 0; i < 2 * PAIRS; i++)
		pthread_join(t[i], NULL); /* a lost wake-up hangs here (test timeout) */
	assert_int_equal(buf_count, 0);
	assert_int_equal(consumed_sum, produced_sum);
}

static void test_cond_destroy_refuses_waiters_then_poisons(void **state)
{
	struct kl_cond lc;
	struct timed tw = { &lc, 0, false };
	pthread_t t;
	unsigned long n0;

	setenv("KLOCK_ON_ERROR", "warn", 1);
	kl_cond_init(&lc);
	assert_int_equal(pthread_create(&t, NULL, timed_waiter, &tw), 0);
	while (kli_park_queued(&lc) != 1)
		klt_sleep_ms(1);
	assert_int_equal(kl_cond_destroy(&lc), EBUSY);
	kl_mutex_lock(&m);
	tw.flag = true;
	kl_cond_signal(&lc);
	kl_mutex_unlock(&m);
	pthread_join(t, NULL);
	assert_int_equal(kl_cond_destroy(&lc), 0);
	n0 = kli_report_count();
	kl_mutex_lock(&m);
	kl_cond_wait(&lc, &m); /* use after destroy: reported, returns at once */
	assert_int_equal(kli_report_count(), n0 + 1);
	assert_true(kl_mutex_owned(&m));
	kl_mutex_unlock(&m);
	kl_cond_wait(&lc, &m);
	assert_int_equal(kli_report_count(), n0 + 2);
	assert_int_equal(kl_cond_destroy(&lc), EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cond_signal_wakes_one_waiter),
		cmocka_unit_test(test_cond_broadcast_requeues_instead_of_waking_the_herd),
		cmocka_unit_test(test_cond_broadcast_without_the_mutex_wakes_everyone),
		cmocka_unit_test(test_cond_timedwait_times_out_never_early_holding_the_mutex),
		cmocka_unit_test(test_cond_timedwait_is_woken_by_signal),
		cmocka_unit_test(test_cond_rejects_bad_timespec_and_unheld_mutex),
		cmocka_unit_test(test_cond_no_lost_wakeup_under_stress),
		cmocka_unit_test(test_cond_destroy_refuses_waiters_then_poisons),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
