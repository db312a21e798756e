/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/test_blocked_sleep.c - a thread blocked on a lock that another thread holds for a
 * long time sleeps: it burns (almost) no CPU, for every lock kind (issue 13 item 10: the
 * next-in-line waiter of kl_ticket/kl_mcs used to spin, then yield for ever). How it is
 * judged: tests/blocked_sleep.h.
 */
#include <klock/hashlock.h>
#include <klock/mcs.h>
#include <klock/mutex.h>
#include <klock/pcpu_rwsem.h>
#include <klock/rmlock.h>
#include <klock/rwlock.h>
#include <klock/seqlock.h>
#include <klock/ticket.h>
#include "blocked_sleep.h"

/* ---- kl_ticket, kl_mcs (the FIFO spinlocks: next in line spins, yields, then sleeps) -- */

static struct kl_ticket tk;

static void ticket_lock(void *a) { kl_ticket_lock(a); }
static void ticket_unlock(void *a) { kl_ticket_unlock(a); }

static void ticket_case(int waiters)
{
	struct blocked_case c = { .lock = ticket_lock, .unlock = ticket_unlock, .arg = &tk };

	kl_ticket_init(&tk);
	kl_ticket_lock(&tk);
	assert_blocked_waiters_sleep(&c, waiters, ticket_unlock, &tk);
	assert_false(kl_ticket_is_locked(&tk));
	kl_ticket_destroy(&tk);
}

static void test_ticket_next_in_line_behind_a_long_hold_sleeps(void **state)
{
	(void)state;
	ticket_case(1);
}

static void test_ticket_queue_behind_a_long_hold_sleeps(void **state)
{
	(void)state;
	ticket_case(3); /* next in line, one further back, one passive on a 2-CPU machine */
}

static struct kl_mcs mcs;
static struct kl_mcs_node holder_node;

static void mcs_lock_w(void *a)
{
	struct kl_mcs_node *n = malloc(sizeof(*n));

	assert_non_null(n);
	kl_mcs_lock(a, n);
	kl_mcs_unlock(a, n);
	free(n);
}

static void nothing(void *a) { (void)a; }
static void mcs_release(void *a) { kl_mcs_unlock(a, &holder_node); }

static void mcs_case(int waiters)
{
	struct blocked_case c = { .lock = mcs_lock_w, .unlock = nothing, .arg = &mcs };

	kl_mcs_init(&mcs);
	kl_mcs_lock(&mcs, &holder_node);
	assert_blocked_waiters_sleep(&c, waiters, mcs_release, &mcs);
	assert_false(kl_mcs_is_locked(&mcs));
	kl_mcs_destroy(&mcs);
}

static void test_mcs_next_in_line_behind_a_long_hold_sleeps(void **state)
{
	(void)state;
	mcs_case(1);
}

static void test_mcs_queue_behind_a_long_hold_sleeps(void **state)
{
	(void)state;
	mcs_case(3); /* next (MCS_NEXT), second (MCS_NEAR), and a passive or far waiter */
}

/* ---- the hashed lock table's ticket stripes ------------------------------------------ */

static struct kl_hashlock hl;
static int hkey;

static void hash_lock(void *a) { kl_hashlock_lock(a, &hkey); }
static void hash_unlock(void *a) { kl_hashlock_unlock(a, &hkey); }

static void test_hashlock_ticket_stripe_waiter_behind_a_long_hold_sleeps(void **state)
{
	struct blocked_case c = { .lock = hash_lock, .unlock = hash_unlock, .arg = &hl };

	(void)state;
	assert_int_equal(kl_hashlock_init_flags(&hl, 0, KL_HASHLOCK_TICKET), 0);
	kl_hashlock_lock(&hl, &hkey);
	assert_blocked_waiters_sleep(&c, 2, hash_unlock, &hl);
	assert_int_equal(kl_hashlock_destroy(&hl), 0);
}

/* ---- the sleeping kinds (a regression guard: they slept before) ---------------------- */

static struct kl_mutex mx;

static void mutex_lock(void *a) { kl_mutex_lock(a); }
static void mutex_unlock(void *a) { kl_mutex_unlock(a); }

static void test_mutex_waiter_behind_a_long_hold_sleeps(void **state)
{
	struct blocked_case c = { .lock = mutex_lock, .unlock = mutex_unlock, .arg = &mx };

	(void)state;
	kl_mutex_init(&mx);
	kl_mutex_lock(&mx);
	assert_blocked_waiters_sleep(&c, 2, mutex_unlock, &mx);
	assert_int_equal(kl_mutex_destroy(&mx), 0);
}

static struct kl_rwlock rw;

static void rw_rlock(void *a) { kl_rwlock_read_lock(a); }
static void rw_runlock(void *a) { kl_rwlock_read_unlock(a); }
static void rw_wlock(void *a) { kl_rwlock_write_lock(a); }
static void rw_wunlock(void *a) { kl_rwlock_write_unlock(a); }

static void test_rwlock_readers_behind_a_long_write_hold_sleep(void **state)
{
	struct blocked_case c = { .lock = rw_rlock, .unlock = rw_runlock, .arg = &rw };

	(void)state;
	kl_rwlock_init(&rw);
	kl_rwlock_write_lock(&rw);
	assert_blocked_waiters_sleep(&c, 2, rw_wunlock, &rw);
	assert_int_equal(kl_rwlock_destroy(&rw), 0);
}

static void test_rwlock_writer_behind_a_long_read_hold_sleeps(void **state)
{
	struct blocked_case c = { .lock = rw_wlock, .unlock = rw_wunlock, .arg = &rw };

	(void)state;
	kl_rwlock_init(&rw);
	kl_rwlock_read_lock(&rw);
	assert_blocked_waiters_sleep(&c, 1, rw_runlock, &rw);
	assert_int_equal(kl_rwlock_destroy(&rw), 0);
}

static struct kl_pcpu_rwsem sem;

static void sem_rlock(void *a) { kl_pcpu_rwsem_read_lock(a); }
static void sem_runlock(void *a) { kl_pcpu_rwsem_read_unlock(a); }
static void sem_wlock(void *a) { kl_pcpu_rwsem_write_lock(a); }
static void sem_wunlock(void *a) { kl_pcpu_rwsem_write_unlock(a); }

static void test_pcpu_rwsem_writer_behind_a_long_read_hold_sleeps(void **state)
{
	struct blocked_case c = { .lock = sem_wlock, .unlock = sem_wunlock, .arg = &sem };

	(void)state;
	assert_int_equal(kl_pcpu_rwsem_init(&sem), 0);
	kl_pcpu_rwsem_read_lock(&sem);
	assert_blocked_waiters_sleep(&c, 1, sem_runlock, &sem);
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), 0);
}

static void test_pcpu_rwsem_readers_behind_a_long_write_hold_sleep(void **state)
{
	struct blocked_case c = { .lock = sem_rlock, .unlock = sem_runlock, .arg = &sem };

	(void)state;
	assert_int_equal(kl_pcpu_rwsem_init(&sem), 0);
	kl_pcpu_rwsem_write_lock(&sem);
	assert_blocked_waiters_sleep(&c, 2, sem_wunlock, &sem);
	assert_int_equal(kl_pcpu_rwsem_destroy(&sem), 0);
}

/* kl_rmlock, with and without KL_RM_SLEEPABLE: a writer waiting for a reader's hold
 * spins a while, then sleeps until that reader's unlock wakes it. */
static struct kl_rmlock rm;
static struct kl_rm_tracker holder_tr;

static void rm_rlock(void *a)
{
	struct kl_rm_tracker tr;

	kl_rmlock_read_lock(a, &tr);
	kl_rmlock_read_unlock(a, &tr);
}

static void rm_wlock(void *a) { kl_rmlock_write_lock(a); }
static void rm_wunlock(void *a) { kl_rmlock_write_unlock(a); }
static void rm_runlock_holder(void *a) { kl_rmlock_read_unlock(a, &holder_tr); }

/* @fenced: a first write revokes the bias and leaves the lock fenced, held there, so the
 * waiting writer is a fenced one (it naps before it sleeps until woken); else it revokes. */
static void rm_writer_case(unsigned flags, bool fenced)
{
	struct blocked_case c = { .lock = rm_wlock, .unlock = rm_wunlock, .arg = &rm };

	assert_int_equal(kl_rmlock_init(&rm, flags), 0);
	if (fenced) {
		kl_rmlock_write_lock(&rm);
		kl_rmlock_write_unlock(&rm);
		atomic_store(&rm.rearm_at, UINT64_MAX); /* no climb back to biased */
	}
	kl_rmlock_read_lock(&rm, &holder_tr);
	assert_blocked_waiters_sleep(&c, 1, rm_runlock_holder, &rm);
	assert_int_equal(kl_rmlock_destroy(&rm), 0);
}

static void rm_readers_case(unsigned flags)
{
	struct blocked_case c = { .lock = rm_rlock, .unlock = nothing, .arg = &rm };

	assert_int_equal(kl_rmlock_init(&rm, flags), 0);
	kl_rmlock_write_lock(&rm);
	assert_blocked_waiters_sleep(&c, 2, rm_wunlock, &rm);
	assert_int_equal(kl_rmlock_destroy(&rm), 0);
}

static void test_rmlock_writer_behind_a_long_read_hold_sleeps(void **state)
{
	(void)state;
	rm_writer_case(0, false);
}

static void test_rmlock_fenced_writer_behind_a_long_read_hold_sleeps(void **state)
{
	(void)state;
	rm_writer_case(0, true);
}

static void test_rmlock_readers_behind_a_long_write_hold_sleep(void **state)
{
	(void)state;
	rm_readers_case(0);
}

static void test_rmlock_sleepable_writer_behind_a_long_read_hold_sleeps(void **state)
{
	(void)state;
	rm_writer_case(KL_RM_SLEEPABLE, false);
}

static void test_rmlock_sleepable_readers_behind_a_long_write_hold_sleep(void **state)
{
	(void)state;
	rm_readers_case(KL_RM_SLEEPABLE);
}

static struct kl_seqlock sq;

static void seq_wlock(void *a) { kl_seqlock_write_lock(a); }
static void seq_wunlock(void *a) { kl_seqlock_write_unlock(a); }

static void test_seqlock_writer_behind_a_long_write_hold_sleeps(void **state)
{
	struct blocked_case c = { .lock = seq_wlock, .unlock = seq_wunlock, .arg = &sq };

	(void)state;
	kl_seqlock_init(&sq);
	kl_seqlock_write_lock(&sq);
	assert_blocked_waiters_sleep(&c, 1, seq_wunlock, &sq);
	assert_int_equal(kl_seqlock_destroy(&sq), 0);
}

static void seq_read(void *a)
{
	uint32_t s;

	do
		s = kl_seqlock_read_begin(a);
	while (kl_seqlock_read_retry(a, s));
}

static void test_seqlock_readers_behind_a_long_write_sleep(void **state)
{
	struct blocked_case c = { .lock = seq_read, .unlock = nothing, .arg = &sq };

	(void)state;
	kl_seqlock_init(&sq);
	kl_seqlock_write_lock(&sq);
	assert_blocked_waiters_sleep(&c, 2, seq_wunlock, &sq);
	assert_int_equal(kl_seqlock_destroy(&sq), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ticket_next_in_line_behind_a_long_hold_sleeps),
		cmocka_unit_test(test_ticket_queue_behind_a_long_hold_sleeps),
		cmocka_unit_test(test_mcs_next_in_line_behind_a_long_hold_sleeps),
		cmocka_unit_test(test_mcs_queue_behind_a_long_hold_sleeps),
		cmocka_unit_test(test_hashlock_ticket_stripe_waiter_behind_a_long_hold_sleeps),
		cmocka_unit_test(test_mutex_waiter_behind_a_long_hold_sleeps),
		cmocka_unit_test(test_rwlock_readers_behind_a_long_write_hold_sleep),
		cmocka_unit_test(test_rwlock_writer_behind_a_long_read_hold_sleeps),
		cmocka_unit_test(test_pcpu_rwsem_writer_behind_a_long_read_hold_sleeps),
		cmocka_unit_test(test_pcpu_rwsem_readers_behind_a_long_write_hold_sleep),
		cmocka_unit_test(test_rmlock_writer_behind_a_long_read_hold_sleeps),
		cmocka_unit_test(test_rmlock_fenced_writer_behind_a_long_read_hold_sleeps),
		cmocka_unit_test(test_rmlock_readers_behind_a_long_write_hold_sleep),
		cmocka_unit_test(test_rmlock_sleepable_writer_behind_a_long_read_hold_sleeps),
		cmocka_unit_test(test_rmlock_sleepable_readers_behind_a_long_write_hold_sleep),
		cmocka_unit_test(test_seqlock_writer_behind_a_long_write_hold_sleeps),
		cmocka_unit_test(test_seqlock_readers_behind_a_long_write_sleep),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
