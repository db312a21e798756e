/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/unit/test_wait.c - kl_wait()/kl_wake(): the OS wait layer (either backend). */
#include <signal.h>

#include <klock/wait.h>
#include "kltest.h"

/* How late a timed-out wait may return on a loaded 2-CPU CI machine. */
#define LATE_TOLERANCE_MS 500
#define WAITERS 4

struct waiter {
	_Atomic uint32_t *word;
	_Atomic int *arrived, *woken;
	struct timespec deadline;
	bool timed;
	int ret;
	uint32_t seen;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	atomic_fetch_add(w->arrived, 1);
	w->ret = kl_wait(w->word, 0, w->timed ? &w->deadline : NULL);
	w->seen = atomic_load(w->word);
	atomic_fetch_add(w->woken, 1);
	return NULL;
}

static void test_wait_returns_at_once_when_value_differs(void **state)
{
	_Atomic uint32_t word = 7;
	int64_t t0 = klt_now_ns();

	assert_int_equal(kl_wait(&word, 3, NULL), 0);
	assert_true(klt_now_ns() - t0 < 1000000000ll);
}

static void test_wait_rejects_malformed_deadline(void **state)
{
	_Atomic uint32_t word = 0;
	struct timespec bad_nsec = { .tv_sec = 1, .tv_nsec = 1000000000 };
	struct timespec neg_nsec = { .tv_sec = 1, .tv_nsec = -1 };
	struct timespec neg_sec = { .tv_sec = -1, .tv_nsec = 0 };

	assert_int_equal(kl_wait(&word, 0, &bad_nsec), EINVAL);
	assert_int_equal(kl_wait(&word, 0, &neg_nsec), EINVAL);
	assert_int_equal(kl_wait(&word, 0, &neg_sec), EINVAL);
}

static void test_wait_times_out_never_early(void **state)
{
	_Atomic uint32_t word = 0;
	const int64_t ms = 60;
	int64_t t0 = klt_now_ns();
	struct timespec dl = klt_deadline_ms(ms);

	assert_int_equal(kl_wait(&word, 0, &dl), ETIMEDOUT);
	int64_t el = klt_now_ns() - t0;
	assert_true(el >= ms * 1000000ll);
	assert_true(el < (ms + LATE_TOLERANCE_MS) * 1000000ll);
}

static void test_wait_past_deadline_times_out(void **state)
{
	_Atomic uint32_t word = 0;
	struct timespec dl = { .tv_sec = 0, .tv_nsec = 1 };

	assert_int_equal(kl_wait(&word, 0, &dl), ETIMEDOUT);
}

static void test_wake_without_waiters_wakes_nobody(void **state)
{
	_Atomic uint32_t word = 0;

	assert_int_equal(kl_wake(&word, 1), 0);
	assert_int_equal(kl_wake(&word, KL_WAKE_ALL), 0);
}

/* Starts WAITERS sleepers on *word (== 0) and returns once all have arrived. */
static void start_waiters(pthread_t *t, struct waiter *w, _Atomic uint32_t *word,
			  _Atomic int *arrived, _Atomic int *woken)
{
	for (int i = 0; i < WAITERS; i++) {
		w[i] = (struct waiter){ .word = word, .arrived = arrived, .woken = woken };
		assert_int_equal(pthread_create(&t[i], NULL, wait_thread, &w[i]), 0);
	}
	while (atomic_load(arrived) < WAITERS)
		klt_sleep_ms(1);
	klt_sleep_ms(50); /* let them reach the kernel */
}

static void test_wake_one_wakes_exactly_one(void **state)
{
	_Atomic uint32_t word = 0;
	_Atomic int arrived = 0, woken = 0;
	struct waiter w[WAITERS];
	pthread_t t[WAITERS];

	start_waiters(t, w, &word, &arrived, &woken);
	while (kl_wake(&word, 1) == 0)   /* a waiter may still be on its way in */
		klt_sleep_ms(1);
	klt_sleep_ms(100);
	assert_int_equal(atomic_load(&woken), 1);

	atomic_store(&word, 1);
	int n = kl_wake(&word, KL_WAKE_ALL);
	for (int i = 0; i < WAITERS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&woken), WAITERS);
	assert_true(n <= WAITERS - 1);
}

static void test_wake_all_wakes_every_waiter(void **state)
{
	_Atomic uint32_t word = 0;
	_Atomic int arrived = 0, woken = 0;
	struct waiter w[WAITERS];
	pthread_t t[WAITERS];

	start_waiters(t, w, &word, &arrived, &woken);
	atomic_store(&word, 1);
	assert_int_equal(kl_wake(&word, KL_WAKE_ALL), WAITERS);
	for (int i = 0; i < WAITERS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].ret, 0);
		assert_int_equal(w[i].seen, 1);
	}
}

static void on_signal(int sig)
{
	(void)sig;
}

/* Sends SIGUSR1 to @t every millisecond for @ms. */
static void signal_storm(pthread_t t, int64_t ms)
{
	int64_t end = klt_now_ns() + ms * 1000000ll;

	while (klt_now_ns() < end) {
		pthread_kill(t, SIGUSR1);
		klt_sleep_ms(1);
	}
}

static void install_handler(void)
{
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: EINTR happens */

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
}

static void test_wait_is_not_cut_short_by_signals(void **state)
{
	_Atomic uint32_t word = 0;
	_Atomic int arrived = 0, woken = 0;
	struct waiter w = { .word = &word, .arrived = &arrived, .woken = &woken };
	pthread_t t;

	install_handler();
	assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
	while (atomic_load(&arrived) == 0)
		klt_sleep_ms(1);
	signal_storm(t, 150);
	assert_int_equal(atomic_load(&woken), 0);  /* EINTR did not end the wait */
	atomic_store(&word, 1);
	kl_wake(&word, 1);
	pthread_join(t, NULL);
	assert_int_equal(w.ret, 0);
	assert_int_equal(w.seen, 1);
}

static void test_timed_wait_keeps_deadline_under_signals(void **state)
{
	_Atomic uint32_t word = 0;
	_Atomic int arrived = 0, woken = 0;
	const int64_t ms = 120;
	struct waiter w = { .word = &word, .arrived = &arrived, .woken = &woken, .timed = true };
	int64_t t0 = klt_now_ns();
	pthread_t t;

	install_handler();
	w.deadline = klt_deadline_ms(ms);
	assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
	while (atomic_load(&woken) == 0) {
		pthread_kill(t, SIGUSR1);
		klt_sleep_ms(1);
	}
	pthread_join(t, NULL);
	assert_int_equal(w.ret, ETIMEDOUT);
	assert_true(klt_now_ns() - t0 >= ms * 1000000ll);
	assert_true(klt_now_ns() - t0 < (ms + LATE_TOLERANCE_MS) * 1000000ll);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wait_returns_at_once_when_value_differs),
		cmocka_unit_test(test_wait_rejects_malformed_deadline),
		cmocka_unit_test(test_wait_times_out_never_early),
		cmocka_unit_test(test_wait_past_deadline_times_out),
		cmocka_unit_test(test_wake_without_waiters_wakes_nobody),
		cmocka_unit_test(test_wake_one_wakes_exactly_one),
		cmocka_unit_test(test_wake_all_wakes_every_waiter),
		cmocka_unit_test(test_wait_is_not_cut_short_by_signals),
		cmocka_unit_test(test_timed_wait_keeps_deadline_under_signals),
	};

	printf("wait backend: %s\n", kl_wait_backend());
	return cmocka_run_group_tests(tests, NULL, NULL);
}
