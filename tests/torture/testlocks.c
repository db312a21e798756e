/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/torture/testlocks.c - adapters that exist only inside kltorture, to prove its
 * optimistic-reader and keyed paths judge correctly, independent of klock's own locks:
 *   test_seqlock     a correct seqlock (readers retry)           -> must pass
 *   test_keyed       a correct 4-stripe keyed lock               -> must pass
 *   busted_seqlock   read_retry never reports a writer           -> must fail
 *   busted_keyed     key_lock does nothing                       -> must fail
 *   busted_multikey  keys_lock takes only the first key's stripe -> must fail
 * They are family "test": never tortured by default, only when named (the self-test) or,
 * for the busted ones, by --busted. klbench does not link them.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "lockops.h"

/* Stripes of the keyed test lock (a power of two). */
#define TEST_STRIPES 4u
/* Fibonacci hashing multiplier (2^64 / golden ratio). */
#define FIB_MULT 0x9e3779b97f4a7c15ull

struct test_seq {
	pthread_mutex_t m;        /* writers exclude each other */
	_Atomic unsigned long seq; /* odd while a writer is inside */
};

struct test_seq_ts {
	unsigned long begin;      /* what the reader's section started from */
};

static int seq_init(void *l)
{
	struct test_seq *q = l;

	atomic_init(&q->seq, 0);
	return pthread_mutex_init(&q->m, NULL);
}

static void seq_destroy(void *l)
{
	pthread_mutex_destroy(&((struct test_seq *)l)->m);
}

static void seq_write_lock(void *l, void *ts)
{
	struct test_seq *q = l;

	(void)ts;
	pthread_mutex_lock(&q->m);
	atomic_store_explicit(&q->seq, atomic_load_explicit(&q->seq, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_release); /* S1: odd before the data, pairs with S3 */
}

static void seq_write_unlock(void *l, void *ts)
{
	struct test_seq *q = l;

	(void)ts;
	/* S2: the data before even, pairs with S4 */
	atomic_store_explicit(&q->seq, atomic_load_explicit(&q->seq, memory_order_relaxed) + 1,
			      memory_order_release);
	pthread_mutex_unlock(&q->m);
}

static void seq_read_lock(void *l, void *ts)
{
	struct test_seq *q = l;
	struct test_seq_ts *t = ts;

	do { /* S4: acquire, pairs with S2 */
		t->begin = atomic_load_explicit(&q->seq, memory_order_acquire);
	} while (t->begin & 1);
}

static bool seq_read_retry(void *l, void *ts)
{
	struct test_seq *q = l;
	const struct test_seq_ts *t = ts;

	atomic_thread_fence(memory_order_acquire); /* S3: the data before the re-read */
	return atomic_load_explicit(&q->seq, memory_order_relaxed) != t->begin;
}

static bool busted_read_retry(void *l, void *ts)
{
	(void)l, (void)ts;
	return false;
}

static void seq_read_busted_lock(void *l, void *ts)
{
	(void)l, (void)ts;
}

static void seq_read_unlock(void *l, void *ts)
{
	(void)l, (void)ts;
}

static const struct lockops test_seqlock_ops = {
	.name = "test_seqlock",
	.family = "test",
	.summary = "kltorture's reference seqlock (pthread mutex + sequence): must pass",
	.flags = LOCKOPS_RW | LOCKOPS_READ_RETRY,
	.size = sizeof(struct test_seq),
	.tsize = sizeof(struct test_seq_ts),
	.init = seq_init,
	.destroy = seq_destroy,
	.write_lock = seq_write_lock,
	.write_unlock = seq_write_unlock,
	.read_lock = seq_read_lock,
	.read_unlock = seq_read_unlock,
	.read_retry = seq_read_retry,
};
LOCKOPS_REGISTER(test_seqlock_ops)

static const struct lockops busted_seqlock_ops = {
	.name = "busted_seqlock",
	.family = "test",
	.summary = "broken on purpose: readers never wait and never retry",
	.flags = LOCKOPS_RW | LOCKOPS_READ_RETRY | LOCKOPS_BUSTED,
	.size = sizeof(struct test_seq),
	.tsize = sizeof(struct test_seq_ts),
	.init = seq_init,
	.destroy = seq_destroy,
	.write_lock = seq_write_lock,
	.write_unlock = seq_write_unlock,
	.read_lock = seq_read_busted_lock,
	.read_unlock = seq_read_unlock,
	.read_retry = busted_read_retry,
};
LOCKOPS_REGISTER(busted_seqlock_ops)

/* ---- keyed ---------------------------------------------------------------------------------- */

struct test_keyed {
	pthread_mutex_t stripe[TEST_STRIPES];
};

static unsigned stripe_of(const void *key)
{
	return (unsigned)((((uintptr_t)key >> 6) * FIB_MULT) >> 62) & (TEST_STRIPES - 1);
}

static int keyed_init(void *l)
{
	struct test_keyed *k = l;

	for (unsigned i = 0; i < TEST_STRIPES; i++)
		pthread_mutex_init(&k->stripe[i], NULL);
	return 0;
}

static void keyed_destroy(void *l)
{
	struct test_keyed *k = l;

	for (unsigned i = 0; i < TEST_STRIPES; i++)
		pthread_mutex_destroy(&k->stripe[i]);
}

static void keyed_key_lock(void *l, void *ts, const void *key)
{
	(void)ts;
	pthread_mutex_lock(&((struct test_keyed *)l)->stripe[stripe_of(key)]);
}

static void keyed_key_unlock(void *l, void *ts, const void *key)
{
	(void)ts;
	pthread_mutex_unlock(&((struct test_keyed *)l)->stripe[stripe_of(key)]);
}

/* Several keys: each distinct stripe once, in increasing order (cannot deadlock). */
static void keyed_keys_lock(void *l, void *ts, const void *const *keys, size_t n)
{
	bool want[TEST_STRIPES] = { false };

	(void)ts;
	for (size_t i = 0; i < n; i++)
		want[stripe_of(keys[i])] = true;
	for (unsigned i = 0; i < TEST_STRIPES; i++)
		if (want[i])
			pthread_mutex_lock(&((struct test_keyed *)l)->stripe[i]);
}

static void keyed_keys_unlock(void *l, void *ts, const void *const *keys, size_t n)
{
	bool want[TEST_STRIPES] = { false };

	(void)ts;
	for (size_t i = 0; i < n; i++)
		want[stripe_of(keys[i])] = true;
	for (unsigned i = 0; i < TEST_STRIPES; i++)
		if (want[i])
			pthread_mutex_unlock(&((struct test_keyed *)l)->stripe[i]);
}

/* Broken: only the first key's stripe is taken. */
static void keyed_first_lock(void *l, void *ts, const void *const *keys, size_t n)
{
	(void)n;
	keyed_key_lock(l, ts, keys[0]);
}

static void keyed_first_unlock(void *l, void *ts, const void *const *keys, size_t n)
{
	(void)n;
	keyed_key_unlock(l, ts, keys[0]);
}

static void keyed_nothing(void *l, void *ts, const void *key)
{
	(void)l, (void)ts, (void)key;
}

static void keyed_write_lock(void *l, void *ts)
{
	(void)ts;
	pthread_mutex_lock(&((struct test_keyed *)l)->stripe[0]);
}

static void keyed_write_unlock(void *l, void *ts)
{
	(void)ts;
	pthread_mutex_unlock(&((struct test_keyed *)l)->stripe[0]);
}

static const struct lockops test_keyed_ops = {
	.name = "test_keyed",
	.family = "test",
	.summary = "kltorture's reference keyed lock (4 pthread mutex stripes): must pass",
	.flags = LOCKOPS_KEYED,
	.size = sizeof(struct test_keyed),
	.init = keyed_init,
	.destroy = keyed_destroy,
	.write_lock = keyed_write_lock,
	.write_unlock = keyed_write_unlock,
	.key_lock = keyed_key_lock,
	.key_unlock = keyed_key_unlock,
	.keys_lock = keyed_keys_lock,
	.keys_unlock = keyed_keys_unlock,
};
LOCKOPS_REGISTER(test_keyed_ops)

static const struct lockops busted_multikey_ops = {
	.name = "busted_multikey",
	.family = "test",
	.summary = "broken on purpose: keys_lock takes only the first key's stripe",
	.flags = LOCKOPS_KEYED | LOCKOPS_BUSTED,
	.size = sizeof(struct test_keyed),
	.init = keyed_init,
	.destroy = keyed_destroy,
	.write_lock = keyed_write_lock,
	.write_unlock = keyed_write_unlock,
	.key_lock = keyed_key_lock,
	.key_unlock = keyed_key_unlock,
	.keys_lock = keyed_first_lock,
	.keys_unlock = keyed_first_unlock,
};
LOCKOPS_REGISTER(busted_multikey_ops)

static const struct lockops busted_keyed_ops = {
	.name = "busted_keyed",
	.family = "test",
	.summary = "broken on purpose: key_lock does nothing",
	.flags = LOCKOPS_KEYED | LOCKOPS_BUSTED,
	.size = sizeof(struct test_keyed),
	.init = keyed_init,
	.destroy = keyed_destroy,
	.write_lock = keyed_write_lock,
	.write_unlock = keyed_write_unlock,
	.key_lock = keyed_nothing,
	.key_unlock = keyed_nothing,
};
LOCKOPS_REGISTER(busted_keyed_ops)
