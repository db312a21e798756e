/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/unit/test_lockops_adaptive.c - the adaptive family's lockops adapters (what klbench and
 * kltorture drive) really lock: every entry point of each, under contention. */
#include <pthread.h>

#include "kltest.h"
#include "lockops.h"

#define NTHREADS 3

static const struct lockops *ops;
static void *lock;
static long counter, iters;
static _Atomic long violations;
static _Atomic int writers_in;

static void *adapter_thread(void *arg)
{
	_Alignas(LOCKOPS_ALIGN) char ts[256];
	unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 3;

	for (long i = 0; i < iters; i++) {
		struct timespec far = klt_deadline_ms(60000);
		bool read;

		seed = seed * 1103515245u + 12345u;
		read = ops->read_lock != NULL && (seed >> 16) % 2;
		switch ((seed >> 20) % 3) {
		case 0:
			if (read)
				ops->read_lock(lock, ts);
			else
				ops->write_lock(lock, ts);
			break;
		case 1:
			while (!(read ? ops->read_trylock : ops->write_trylock)(lock, ts))
				;
			break;
		default:
			if (read && ops->read_timedlock != NULL)
				assert_int_equal(ops->read_timedlock(lock, ts, &far), 0);
			else if (!read && ops->write_timedlock != NULL)
				assert_int_equal(ops->write_timedlock(lock, ts, &far), 0);
			else if (read)
				ops->read_lock(lock, ts);
			else
				ops->write_lock(lock, ts);
		}
		if (read) {
			if (atomic_load(&writers_in) != 0)
				atomic_fetch_add(&violations, 1);
			ops->read_unlock(lock, ts);
		} else {
			if (atomic_fetch_add(&writers_in, 1) != 0)
				atomic_fetch_add(&violations, 1);
			counter++;
			atomic_fetch_sub(&writers_in, 1);
			ops->write_unlock(lock, ts);
		}
	}
	return NULL;
}

static void run_adapter(const char *name)
{
	int ids[NTHREADS] = { 1, 2, 3 };

	ops = lockops_find(name);
	assert_non_null(ops);
	assert_string_equal(ops->family, "klock");
	assert_true(ops->tsize <= 256);
	lock = aligned_alloc(LOCKOPS_ALIGN, (ops->size + LOCKOPS_ALIGN - 1) / LOCKOPS_ALIGN *
					    LOCKOPS_ALIGN);
	assert_int_equal(ops->init(lock), 0);
	counter = 0;
	atomic_store(&violations, 0);
	iters = klt_scaled(5000);
	klt_run_threads(NTHREADS, adapter_thread, ids, sizeof(ids[0]));
	assert_int_equal(atomic_load(&violations), 0);
	assert_true(counter > 0);
	ops->destroy(lock);
	free(lock);
}

static void test_lockops_kl_ticket_locks(void **state)
{
	run_adapter("kl_ticket");
}

static void test_lockops_kl_mcs_locks(void **state)
{
	run_adapter("kl_mcs");
}

static void test_lockops_kl_mutex_locks(void **state)
{
	run_adapter("kl_mutex");
}

static void test_lockops_kl_rwlock_locks(void **state)
{
	run_adapter("kl_rwlock");
	assert_true(ops->flags & LOCKOPS_RW);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lockops_kl_ticket_locks),
		cmocka_unit_test(test_lockops_kl_mcs_locks),
		cmocka_unit_test(test_lockops_kl_mutex_locks),
		cmocka_unit_test(test_lockops_kl_rwlock_locks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
