/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/test_lockops_hashlock.c - the kl_hashlock lockops adapters (what klbench's
 * hashed-queue scenario and kltorture drive) really lock: the fixed-key write side
 * excludes writers, key_lock excludes per key, and both mix in one run.
 */
#include <pthread.h>

#include "kltest.h"
#include "lockops.h"

#define NTHREADS 3
/* Keys the threads lock by address (64-byte objects: one per cache line). */
#define NKEYS 32

struct key {
	_Atomic int inside;
	long count;
	char pad[64 - sizeof(int) - sizeof(long)];
} __attribute__((aligned(64)));

static const struct lockops *ops;
static void *lock;
static struct key keys[NKEYS];
static long counter, iters;
static _Atomic int writers_in;
static _Atomic long violations;

static void *adapter_thread(void *arg)
{
	_Alignas(LOCKOPS_ALIGN) char ts[256];
	unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 3;

	for (long i = 0; i < iters; i++) {
		seed = seed * 1103515245u + 12345u;
		if ((seed >> 16) % 4 == 0) {   /* the plain exclusive side: one fixed key */
			if ((seed >> 20) % 2)
				ops->write_lock(lock, ts);
			else
				while (!ops->write_trylock(lock, ts))
					;
			if (atomic_fetch_add(&writers_in, 1) != 0)
				atomic_fetch_add(&violations, 1);
			counter++;
			atomic_fetch_sub(&writers_in, 1);
			ops->write_unlock(lock, ts);
		} else {                        /* by key */
			struct key *k = &keys[(seed >> 8) % NKEYS];

			ops->key_lock(lock, ts, k);
			if (atomic_fetch_add(&k->inside, 1) != 0)
				atomic_fetch_add(&violations, 1);
			k->count++;
			atomic_fetch_sub(&k->inside, 1);
			ops->key_unlock(lock, ts, k);
		}
	}
	return NULL;
}

static void run_adapter(const char *name)
{
	int ids[NTHREADS] = { 1, 2, 3 };
	long total = 0;

	ops = lockops_find(name);
	assert_non_null(ops);
	assert_true(ops->flags & LOCKOPS_KEYED);
	assert_non_null(ops->key_lock);
	assert_non_null(ops->key_unlock);
	lock = aligned_alloc(LOCKOPS_ALIGN, (ops->size + LOCKOPS_ALIGN - 1) / LOCKOPS_ALIGN *
					    LOCKOPS_ALIGN);
	assert_non_null(lock);
	assert_int_equal(ops->init(lock), 0);
	counter = 0;
	memset(keys, 0, sizeof(keys));
	atomic_store(&violations, 0);
	iters = klt_scaled(20000);
	klt_run_threads(NTHREADS, adapter_thread, ids, sizeof(ids[0]));
	assert_int_equal(atomic_load(&violations), 0);
	for (int i = 0; i < NKEYS; i++)
		total += keys[i].count;
	assert_int_equal(total + counter, NTHREADS * iters);   /* no update lost */
	ops->destroy(lock);
	free(lock);
}

static void test_lockops_kl_hashlock_locks_by_key(void **state)
{
	(void)state;
	run_adapter("kl_hashlock");
}

static void test_lockops_kl_hashlock_ticket_locks_by_key(void **state)
{
	(void)state;
	run_adapter("kl_hashlock_ticket");
	assert_true(ops->flags & LOCKOPS_SPIN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lockops_kl_hashlock_locks_by_key),
		cmocka_unit_test(test_lockops_kl_hashlock_ticket_locks_by_key),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
