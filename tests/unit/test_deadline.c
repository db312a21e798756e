/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/test_deadline.c - every native timed call with a deadline far in the future.
 *
 * Any timespec with tv_sec >= 0 and tv_nsec in [0, 1e9) is valid, up to tv_sec = LONG_MAX.
 * A conversion to 64-bit nanoseconds that wraps turns such a deadline into one that has
 * long passed, and the call returns ETIMEDOUT at once. Each test starts the timed call on a
 * held lock (or an unsignalled condvar, an unchanged word) in another thread, checks that
 * it is still waiting after a while, then releases and expects 0.
 */
#include <limits.h>
#include <pthread.h>

#include <klock/cond.h>
#include <klock/mutex.h>
#include <klock/rwlock.h>
#include <klock/wait.h>
#include "kltest.h"

/* How long the timed call must stay blocked before the test releases it. */
#define STILL_BLOCKED_MS 300

/* Far-future deadlines: the largest, the first second whose nanoseconds pass 2^64, and
 * the first that passes 2^63 (a signed conversion's overflow). */
static const struct timespec far[] = {
	{ LONG_MAX, 999999999 },
	{ 18446744074l, 0 },
	{ 9223372037l, 0 },
};
#define FAR_COUNT (sizeof(far) / sizeof(far[0]))

struct timed {
	int (*op)(const struct timespec *abstime);
	const struct timespec *abstime;
	_Atomic bool done;
	int ret;
};

static void *timed_main(void *p)
{
	struct timed *t = p;

	t->ret = t->op(t->abstime);
	atomic_store(&t->done, true);
	return NULL;
}

/* Runs @op(@abstime) in a thread; it must still wait after STILL_BLOCKED_MS; then @release
 * lets it finish, and it must return 0. */
static void expect_blocked_then_0(int (*op)(const struct timespec *), void (*release)(void),
				  const struct timespec *abstime)
{
	struct timed t = { op, abstime, false, -1 };
	pthread_t th;

	assert_int_equal(pthread_create(&th, NULL, timed_main, &t), 0);
	klt_sleep_ms(STILL_BLOCKED_MS);
	if (atomic_load(&t.done))
		fail_msg("deadline { %lld, %ld }: returned %d at once", (long long)abstime->tv_sec,
			 abstime->tv_nsec, t.ret);
	release();
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(t.ret, 0);
}

/* ---- kl_mutex ---------------------------------------------------------------------------- */

static struct kl_mutex mx = KL_MUTEX_INITIALIZER;

static int mutex_timed(const struct timespec *abstime)
{
	int err = kl_mutex_timedlock(&mx, abstime);

	if (err == 0)
		kl_mutex_unlock(&mx);
	return err;
}

static void mutex_release(void)
{
	kl_mutex_unlock(&mx);
}

static void test_mutex_timedlock_far_future_deadline_waits(void **state)
{
	(void)state;
	for (size_t i = 0; i < FAR_COUNT; i++) {
		kl_mutex_lock(&mx);
		expect_blocked_then_0(mutex_timed, mutex_release, &far[i]);
	}
}

/* ---- kl_rwlock --------------------------------------------------------------------------- */

static struct kl_rwlock rw = KL_RWLOCK_INITIALIZER;

static int rw_read_timed(const struct timespec *abstime)
{
	int err = kl_rwlock_read_timedlock(&rw, abstime);

	if (err == 0)
		kl_rwlock_read_unlock(&rw);
	return err;
}

static int rw_write_timed(const struct timespec *abstime)
{
	int err = kl_rwlock_write_timedlock(&rw, abstime);

	if (err == 0)
		kl_rwlock_write_unlock(&rw);
	return err;
}

static void rw_release(void)
{
	kl_rwlock_write_unlock(&rw);
}

static void test_rwlock_timedlock_far_future_deadline_waits(void **state)
{
	(void)state;
	for (size_t i = 0; i < FAR_COUNT; i++) {
		kl_rwlock_write_lock(&rw);
		expect_blocked_then_0(rw_read_timed, rw_release, &far[i]);
		kl_rwlock_write_lock(&rw);
		expect_blocked_then_0(rw_write_timed, rw_release, &far[i]);
	}
}

/* ---- kl_cond ----------------------------------------------------------------------------- */

static struct kl_mutex cm = KL_MUTEX_INITIALIZER;
static struct kl_cond cv = KL_COND_INITIALIZER;
static bool signalled; /* under cm */

static int cond_timed(const struct timespec *abstime)
{
	int err = 0;

	kl_mutex_lock(&cm);
	while (!signalled && err == 0)
		err = kl_cond_timedwait(&cv, &cm, abstime);
	signalled = false;
	kl_mutex_unlock(&cm);
	return err;
}

static void cond_release(void)
{
	kl_mutex_lock(&cm);
	signalled = true;
	kl_cond_signal(&cv);
	kl_mutex_unlock(&cm);
}

static void test_cond_timedwait_far_future_deadline_waits(void **state)
{
	(void)state;
	for (size_t i = 0; i < FAR_COUNT; i++)
		expect_blocked_then_0(cond_timed, cond_release, &far[i]);
}

/* ---- kl_wait ----------------------------------------------------------------------------- */

static _Atomic uint32_t word;

static int wait_timed(const struct timespec *abstime)
{
	int err = 0;

	while (atomic_load(&word) == 0 && err == 0)
		err = kl_wait(&word, 0, abstime);
	atomic_store(&word, 0);
	return err;
}

static void wait_release(void)
{
	atomic_store(&word, 1);
	kl_wake(&word, 1);
}

static void test_wait_far_future_deadline_waits(void **state)
{
	(void)state;
	for (size_t i = 0; i < FAR_COUNT; i++)
		expect_blocked_then_0(wait_timed, wait_release, &far[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mutex_timedlock_far_future_deadline_waits),
		cmocka_unit_test(test_rwlock_timedlock_far_future_deadline_waits),
		cmocka_unit_test(test_cond_timedwait_far_future_deadline_waits),
		cmocka_unit_test(test_wait_far_future_deadline_waits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
