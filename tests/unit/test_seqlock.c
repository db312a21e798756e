/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/test_seqlock.c - kl_seqlock: writers exclude writers, readers never accept a torn
 * copy, a write between begin and retry is always detected, readers wait out a write in
 * progress, trylock and destroy rules.
 */
#include <klock/seqlock.h>
#include "kltest.h"

#define WATCHDOG_S 60
/* Words of the protected record: a torn copy shows as words that differ. */
#define WORDS 8

static int setup(void **state)
{
	(void)state;
	alarm(klt_watchdog_s(WATCHDOG_S));
	return 0;
}

struct rec {
	struct kl_seqlock sl;
	_Atomic long w[WORDS]; /* all equal outside write sections; relaxed accesses */
	long writes;           /* under the writer lock */
	_Atomic long torn, retries, reads;
	_Atomic int stop;
};

static void rec_write(struct rec *r)
{
	kl_seqlock_write_lock(&r->sl);
	r->writes++;
	for (int i = 0; i < WORDS; i++)
		atomic_store_explicit(&r->w[i], r->writes, memory_order_relaxed);
	kl_seqlock_write_unlock(&r->sl);
}

static void *reader(void *arg)
{
	struct rec *r = arg;
	long copy[WORDS];
	uint32_t s;

	while (!atomic_load(&r->stop)) {
		int tries = 0;

		do {
			s = kl_seqlock_read_begin(&r->sl);
			for (int i = 0; i < WORDS; i++)
				copy[i] = atomic_load_explicit(&r->w[i], memory_order_relaxed);
			tries++;
		} while (kl_seqlock_read_retry(&r->sl, s));
		assert_int_equal(s & 1, 0);
		for (int i = 1; i < WORDS; i++)
			if (copy[i] != copy[0])
				atomic_fetch_add(&r->torn, 1);
		atomic_fetch_add(&r->retries, tries - 1);
		atomic_fetch_add(&r->reads, 1);
	}
	return NULL;
}

static void *writer(void *arg)
{
	struct rec *r = arg;

	for (long i = 0; i < klt_scaled(20000); i++)
		rec_write(r);
	return NULL;
}

/* Two writers and two readers race: every accepted copy is consistent, no write is lost. */
static void test_seqlock_readers_never_accept_a_torn_copy(void **state)
{
	static struct rec r;
	pthread_t rd[2], wr[2];

	(void)state;
	memset(&r, 0, sizeof(r));
	assert_int_equal(kl_seqlock_init(&r.sl), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&rd[i], NULL, reader, &r), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&wr[i], NULL, writer, &r), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(wr[i], NULL);
	while (atomic_load(&r.reads) == 0) /* a loaded host may not have run a reader yet */
		klt_sleep_ms(1);
	atomic_store(&r.stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(rd[i], NULL);
	assert_int_equal(atomic_load(&r.torn), 0);
	assert_int_equal(r.writes, 2 * klt_scaled(20000));
	assert_true(atomic_load(&r.reads) > 0);
	assert_int_equal(kl_seqlock_sequence(&r.sl), (uint32_t)(2 * r.writes));
	printf("reads %ld, retries %ld\n", atomic_load(&r.reads), atomic_load(&r.retries));
	assert_int_equal(kl_seqlock_destroy(&r.sl), 0);
}

static void *one_write(void *arg)
{
	rec_write(arg);
	return NULL;
}

/* A write that completes between read_begin and read_retry is always detected, and a
 * section with no write in between is always accepted. */
static void test_seqlock_retry_detects_an_intervening_write(void **state)
{
	static struct rec r;
	uint32_t s;

	(void)state;
	memset(&r, 0, sizeof(r));
	assert_int_equal(kl_seqlock_init(&r.sl), 0);
	s = kl_seqlock_read_begin(&r.sl);
	assert_false(kl_seqlock_read_retry(&r.sl, s));
	s = kl_seqlock_read_begin(&r.sl);
	klt_run_threads(1, one_write, &r, 0);
	assert_true(kl_seqlock_read_retry(&r.sl, s));
	s = kl_seqlock_read_begin(&r.sl);
	assert_false(kl_seqlock_read_retry(&r.sl, s));
	assert_int_equal(kl_seqlock_destroy(&r.sl), 0);
}

struct waiter {
	struct kl_seqlock *sl;
	_Atomic int started, done;
	uint32_t seen;
};

static void *begin_thread(void *arg)
{
	struct waiter *w = arg;

	atomic_store(&w->started, 1);
	w->seen = kl_seqlock_read_begin(w->sl);
	atomic_store(&w->done, 1);
	return NULL;
}

/* read_begin does not return while a write is in progress, and returns the even
 * sequence the write leaves. */
static void test_seqlock_read_begin_waits_out_a_write(void **state)
{
	struct kl_seqlock sl;
	struct waiter w = { .sl = &sl };
	pthread_t t;

	(void)state;
	assert_int_equal(kl_seqlock_init(&sl), 0);
	kl_seqlock_write_lock(&sl);
	assert_int_equal(kl_seqlock_sequence(&sl) & 1, 1);
	assert_int_equal(pthread_create(&t, NULL, begin_thread, &w), 0);
	while (!atomic_load(&w.started))
		klt_sleep_ms(1);
	klt_sleep_ms(30);
	assert_int_equal(atomic_load(&w.done), 0);
	kl_seqlock_write_unlock(&sl);
	pthread_join(t, NULL);
	assert_int_equal(w.seen, 2);
	assert_int_equal(kl_seqlock_destroy(&sl), 0);
}

static struct kl_seqlock *trylock_target;

static void *try_write(void *arg)
{
	bool *ok = arg;

	*ok = kl_seqlock_write_trylock(trylock_target);
	if (*ok)
		kl_seqlock_write_unlock(trylock_target);
	return NULL;
}

static void test_seqlock_write_trylock_and_destroy_rules(void **state)
{
	struct kl_seqlock sl;
	bool ok = false;

	(void)state;
	setenv("KLOCK_ON_ERROR", "warn", 1);
	assert_int_equal(kl_seqlock_init(&sl), 0);
	trylock_target = &sl;
	klt_run_threads(1, try_write, &ok, 0);
	assert_true(ok);
	kl_seqlock_write_lock(&sl);
	klt_run_threads(1, try_write, &ok, 0);
	assert_false(ok);
	assert_int_equal(kl_seqlock_destroy(&sl), EBUSY);
	kl_seqlock_write_unlock(&sl);
	assert_int_equal(kl_seqlock_destroy(&sl), 0);
	unsetenv("KLOCK_ON_ERROR");
}

/* Writers exclude each other: the unlocked counter bumps inside rec_write add up. */
static void test_seqlock_writers_exclude_each_other(void **state)
{
	static struct rec r;
	pthread_t wr[3];

	(void)state;
	memset(&r, 0, sizeof(r));
	assert_int_equal(kl_seqlock_init(&r.sl), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&wr[i], NULL, writer, &r), 0);
	for (int i = 0; i < 3; i++)
		pthread_join(wr[i], NULL);
	assert_int_equal(r.writes, 3 * klt_scaled(20000));
	assert_int_equal(kl_seqlock_destroy(&r.sl), 0);
}

/* Every test runs under the watchdog. */
#define T(f) cmocka_unit_test_setup(f, setup)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_seqlock_readers_never_accept_a_torn_copy),
		T(test_seqlock_retry_detects_an_intervening_write),
		T(test_seqlock_read_begin_waits_out_a_write),
		T(test_seqlock_write_trylock_and_destroy_rules),
		T(test_seqlock_writers_exclude_each_other),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
