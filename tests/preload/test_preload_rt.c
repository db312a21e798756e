/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/test_preload_rt.c - realtime readers (XSH pthread_rwlock_rdlock): with
 * SCHED_FIFO/SCHED_RR threads, a reader gets the read lock unless a writer holds it or a
 * writer of higher or equal priority is blocked on it. klock's rwlock prefers waiting
 * writers; under the interposer a realtime reader that outranks every blocked writer must
 * not queue behind them (issue 13 item 8).
 *
 * Safety on a small machine: realtime threads here only block (the library spins for
 * microseconds at most, then sleeps), priorities stay at 1-2, every wait has a deadline,
 * and alarm() kills a hung run. Needs permission for SCHED_FIFO (root, or
 * RLIMIT_RTPRIO): each test skips when the realtime thread cannot be created. glibc's
 * default rwlock prefers readers, so without the preload (and with KLOCK_RWLOCK=pthread)
 * the reader always gets the lock. KLOCK_RWLOCK=pcpu_rwsem keeps its writer preference
 * for locks set up before the process ran a realtime thread (docs/preload.md: the first
 * test skips there) and gives kl_rwlock to the locks set up after (the last test).
 */
#include <sched.h>
#include "preload_test.h"

/* Kills the run if anything hangs (seconds, scaled by KLTEST_SCALE up, never down). */
#define WATCHDOG_S 60
/* The writer is given this long to block before the reader comes. */
#define SETTLE_MS 100
/* A reader that must get the lock waits at most this long... */
#define GETS_IT_MS 5000
/* ... and one that must defer tries for this long. */
#define DEFERS_MS 200

static pthread_rwlock_t rw;
static sem_t writer_going;

struct rt_arg {
	int result;
	int ms;
};

static void *writer(void *arg)
{
	(void)arg;
	sem_post(&writer_going);
	assert_int_equal(pthread_rwlock_wrlock(&rw), 0);
	assert_int_equal(pthread_rwlock_unlock(&rw), 0);
	return NULL;
}

static void *timed_reader(void *arg)
{
	struct rt_arg *a = arg;
	struct timespec ts;
	int64_t t;

	clock_gettime(CLOCK_REALTIME, &ts);
	t = (int64_t)ts.tv_sec * KLT_NSEC_PER_SEC + ts.tv_nsec + a->ms * 1000000ll;
	ts.tv_sec = t / KLT_NSEC_PER_SEC;
	ts.tv_nsec = t % KLT_NSEC_PER_SEC;
	a->result = pthread_rwlock_timedrdlock(&rw, &ts);
	if (a->result == 0)
		pthread_rwlock_unlock(&rw);
	return NULL;
}

/* Starts fn(arg) as SCHED_FIFO @prio (0: the default policy); false if not permitted. */
static bool start(pthread_t *t, int prio, void *(*fn)(void *), void *arg)
{
	struct sched_param sp = { .sched_priority = prio };
	pthread_attr_t at;
	int err;

	pthread_attr_init(&at);
	if (prio > 0) {
		pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED);
		pthread_attr_setschedpolicy(&at, SCHED_FIFO);
		pthread_attr_setschedparam(&at, &sp);
	}
	err = pthread_create(t, &at, fn, arg);
	pthread_attr_destroy(&at);
	if (err == EPERM || err == EINVAL || err == ENOTSUP)
		return false;
	assert_int_equal(err, 0);
	return true;
}

static bool rwlock_is(const char *impl)
{
	const char *v = getenv("KLOCK_RWLOCK");

	return v != NULL && strcmp(v, impl) == 0;
}

/* Main read-holds @rw; a writer of @wprio blocks; a reader of @rprio then tries for @ms.
 * Returns the reader's answer, or -1 if realtime threads are not permitted. */
static int reader_vs_blocked_writer(int wprio, int rprio, int ms)
{
	struct rt_arg a = { -1, ms };
	pthread_t w, r;

	assert_int_equal(pthread_rwlock_init(&rw, NULL), 0);
	sem_init(&writer_going, 0, 0);
	assert_int_equal(pthread_rwlock_rdlock(&rw), 0);
	if (!start(&w, wprio, writer, NULL)) {
		pthread_rwlock_unlock(&rw);
		return -1;
	}
	sem_wait(&writer_going);
	klt_sleep_ms(SETTLE_MS); /* the writer blocks behind our read hold */
	if (!start(&r, rprio, timed_reader, &a)) {
		pthread_rwlock_unlock(&rw);
		pthread_join(w, NULL);
		return -1;
	}
	assert_int_equal(pthread_join(r, NULL), 0);
	assert_int_equal(pthread_rwlock_unlock(&rw), 0);
	assert_int_equal(pthread_join(w, NULL), 0);
	assert_int_equal(pthread_rwlock_destroy(&rw), 0);
	return a.result;
}

static void test_realtime_reader_outranking_a_blocked_writer_gets_the_read_lock(void **state)
{
	int r;

	(void)state;
	if (rwlock_is("pcpu_rwsem"))
		skip(); /* no realtime thread ran yet: writer preference kept (docs/preload.md) */
	r = reader_vs_blocked_writer(0, 1, GETS_IT_MS); /* SCHED_OTHER writer, FIFO 1 reader */
	if (r < 0)
		skip();
	assert_int_equal(r, 0);
	r = reader_vs_blocked_writer(1, 2, GETS_IT_MS); /* FIFO 1 writer, FIFO 2 reader */
	assert_int_equal(r, 0);
}

static void test_realtime_reader_defers_to_a_blocked_writer_of_equal_or_higher_priority(
	void **state)
{
	bool prefers_readers = !pt_preloaded() || rwlock_is("pthread"); /* glibc's default */
	int r;

	(void)state;
	r = reader_vs_blocked_writer(2, 1, DEFERS_MS);
	if (r < 0)
		skip();
	if (prefers_readers)
		assert_int_equal(r, 0);
	else
		assert_int_equal(r, ETIMEDOUT);
	r = reader_vs_blocked_writer(1, 1, DEFERS_MS);
	if (prefers_readers)
		assert_int_equal(r, 0);
	else
		assert_int_equal(r, ETIMEDOUT);
}

/* A plain (SCHED_OTHER) reader keeps klock's writer preference. */
static void test_ordinary_reader_defers_to_a_blocked_writer(void **state)
{
	bool prefers_readers = !pt_preloaded() || rwlock_is("pthread");
	int r;

	(void)state;
	r = reader_vs_blocked_writer(0, 0, DEFERS_MS);
	if (prefers_readers)
		assert_int_equal(r, 0);
	else
		assert_int_equal(r, ETIMEDOUT);
}

static void *nothing(void *arg)
{
	return arg;
}

/* Once the process ran a realtime thread, every selection (KLOCK_RWLOCK=pcpu_rwsem
 * included) sets up rwlocks that let an outranking realtime reader past a blocked writer. */
static void test_realtime_reader_outranking_a_blocked_writer_gets_a_lock_set_up_later(
	void **state)
{
	pthread_t t;

	(void)state;
	if (!start(&t, 1, nothing, NULL))
		skip();
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(reader_vs_blocked_writer(1, 2, GETS_IT_MS), 0);
	assert_int_equal(reader_vs_blocked_writer(0, 1, GETS_IT_MS), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_realtime_reader_outranking_a_blocked_writer_gets_the_read_lock),
		cmocka_unit_test(
			test_realtime_reader_defers_to_a_blocked_writer_of_equal_or_higher_priority),
		cmocka_unit_test(test_ordinary_reader_defers_to_a_blocked_writer),
		cmocka_unit_test(
			test_realtime_reader_outranking_a_blocked_writer_gets_a_lock_set_up_later),
	};
	long scale = klt_scaled(1);

	alarm((unsigned)(WATCHDOG_S * (scale > 1 ? scale : 1)));
	pt_preloaded();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
