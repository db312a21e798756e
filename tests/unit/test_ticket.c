/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/unit/test_ticket.c - kl_ticket: exclusion, FIFO order, trylock, misuse (debug builds). */
#include <klock/fence.h>
#include <klock/lockstat.h>
#include <klock/ticket.h>
#include "kltest.h"
#include "kl_internal.h"
#include "spin.h"

/* More threads than this machine's CPUs: waiters must yield, not collapse. */
#define NTHREADS 4
#define BUMPS 10

static struct kl_ticket tl;
static long counter, iters;
static _Atomic long violations;
static struct klt_barrier start;

static void guarded_bump(void)
{
	klt_guarded_bump(&counter, BUMPS, &violations);
}

static void *bump_thread(void *arg)
{
	bool use_try = *(int *)arg % 2;

	klt_barrier_wait(&start); /* all contend from the first iteration */
	for (long i = 0; i < iters; i++) {
		if (use_try) {
			while (!kl_ticket_trylock(&tl))
				;
		} else {
			kl_ticket_lock(&tl);
		}
		assert_true(kl_ticket_is_locked(&tl));
		guarded_bump();
		kl_ticket_unlock(&tl);
	}
	return NULL;
}

static void test_ticket_excludes_under_contention(void **state)
{
	int ids[NTHREADS] = { 0, 1, 2, 3 };

	kl_ticket_init(&tl);
	counter = 0;
	iters = klt_scaled(20000);
	klt_barrier_init(&start, NTHREADS);
	klt_run_threads(NTHREADS, bump_thread, ids, sizeof(ids[0]));
	assert_int_equal(atomic_load(&violations), 0);
	assert_int_equal(counter, iters * NTHREADS * BUMPS);
	assert_false(kl_ticket_is_locked(&tl));
	kl_ticket_destroy(&tl);
}

/* ---- FIFO: waiters are served in the order they took their tickets ------------------- */
#define FIFO_WAITERS 3
#define SLEEPERS_NEXT_ONE (1u << 14) /* sleepers: one next in line asleep (locks/primitives/ticket.c) */
#define SLEEPERS_FENCED (1u << 31)   /* sleepers: the fenced mode's flag (locks/primitives/ticket.c) */
#define SLEEPERS_COUNTS(w) ((w) & ~SLEEPERS_FENCED)
static int order[FIFO_WAITERS];
static _Atomic int served;

static void *fifo_thread(void *arg)
{
	int id = *(int *)arg;

	kl_ticket_lock(&tl);
	order[atomic_fetch_add(&served, 1)] = id;
	kl_ticket_unlock(&tl);
	return NULL;
}

static void test_ticket_serves_in_arrival_order_waking_sleepers(void **state)
{
	pthread_t t[FIFO_WAITERS];
	int ids[FIFO_WAITERS];

	kl_ticket_init(&tl);
	atomic_store(&served, 0);
	kl_ticket_lock(&tl);
	for (int i = 0; i < FIFO_WAITERS; i++) {
		ids[i] = i;
		assert_int_equal(pthread_create(&t[i], NULL, fifo_thread, &ids[i]), 0);
		/* Wait until thread i has taken its ticket (next moved past it). */
		while (atomic_load(&tl.next) != (uint32_t)i + 2)
			klt_sleep_ms(1);
	}
	/* The two behind the next in line go to sleep at once; the next in line too, once it
	 * has stayed awake ~1 ms (sleepers' bits 14-15, locks/primitives/ticket.c). (Where the queue
	 * is crowded - 3 tickets on 2 CPUs - the third waited passive first, then took its
	 * ticket at its rotation timeout: arrival order still holds here, since each thread
	 * has taken its ticket before the next one starts.) */
	while (SLEEPERS_COUNTS(atomic_load(&tl.sleepers)) != SLEEPERS_NEXT_ONE + FIFO_WAITERS - 1)
		klt_sleep_ms(1);
	kl_ticket_unlock(&tl); /* wakes the one that becomes next, and so on down the line */
	for (int i = 0; i < FIFO_WAITERS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < FIFO_WAITERS; i++)
		assert_int_equal(order[i], i);
}

/* ---- crowding: with kli_crowd_max tickets out, a newcomer waits without one ------------- */
#define CROWD_ATTEMPTS 5      /* tries to catch the newcomer's passive wait (>= 1 ms each) */
#define CROWD_POLL_MS 200     /* longest a try polls for it */
#define SLEEPERS_PASSIVE(w) (SLEEPERS_COUNTS(w) >> 16) /* bits 16-30 (locks/primitives/ticket.c) */

static void *lock_unlock_once(void *arg)
{
	(void)arg;
	kl_ticket_lock(&tl);
	kl_ticket_unlock(&tl);
	return NULL;
}

/* Holds the lock with the queue full (crowd - 1 waiters), starts one more thread and
 * polls, without sleeping, for it to show up as a passive waiter; returns whether it did
 * before it took a ticket (it takes one at its rotation timeout, or at the unlock). */
static bool newcomer_seen_passive(uint32_t crowd)
{
	pthread_t t[KLT_MAX_THREADS];
	int64_t until;
	bool seen = false;

	kl_ticket_init(&tl);
	kl_ticket_lock(&tl);
	for (uint32_t i = 0; i + 1 < crowd; i++) {
		assert_int_equal(pthread_create(&t[i], NULL, lock_unlock_once, NULL), 0);
		while (atomic_load(&tl.next) != i + 2)
			klt_sleep_ms(1);
	}
	assert_int_equal(pthread_create(&t[crowd - 1], NULL, lock_unlock_once, NULL), 0);
	until = klt_now_ns() + CROWD_POLL_MS * 1000000ll;
	while (!seen && atomic_load(&tl.next) == crowd && klt_now_ns() < until)
		seen = SLEEPERS_PASSIVE(atomic_load(&tl.sleepers)) == 1;
	kl_ticket_unlock(&tl);
	for (uint32_t i = 0; i < crowd; i++)
		pthread_join(t[i], NULL);
	assert_false(kl_ticket_is_locked(&tl));
	assert_int_equal(SLEEPERS_COUNTS(atomic_load(&tl.sleepers)), 0);
	return seen;
}

static void test_ticket_newcomer_to_a_crowded_queue_waits_without_a_ticket(void **state)
{
	(void)state;
	if (kli_crowd_max + 1 > KLT_MAX_THREADS)
		skip(); /* more CPUs than the test's thread table */
	assert_true(klt_seen_in_tries(CROWD_ATTEMPTS, newcomer_seen_passive, kli_crowd_max));
}

/* ---- heavy fences: one per contention episode, not one per sleep ---------------------- */
#define EPISODE_THREADS 3     /* more than 2 CPUs: the third waits passive, too */
#define EPISODE_ROUNDS 8      /* acquisitions per thread */
#define EPISODE_HOLD_MS 3     /* long enough for every waiter to sleep (> 1 ms awake) */
/* Sleepers that count themselves in before the first one's membarrier returns and sets
 * the mode each issue their own, at most one per thread (a thread sets the mode after its
 * own): a 16-vCPU guest, where a membarrier is slow, saw all three. One per sleep was 8 or
 * more here. */
#define EPISODE_FENCES_MAX EPISODE_THREADS

static void *hold_long_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < EPISODE_ROUNDS; i++) {
		kl_ticket_lock(&tl);
		klt_sleep_ms(EPISODE_HOLD_MS);
		kl_ticket_unlock(&tl);
	}
	return NULL;
}

/* A membarrier interrupts every CPU that runs one of the process's threads: one per sleep
 * would make a contended lock cost more with every CPU. */
static void test_ticket_sleepers_share_one_heavy_fence_per_episode(void **state)
{
	struct kl_lock_events a, b;

	(void)state;
	kl_ticket_init(&tl);
	kl_lock_events(&a);
	klt_run_threads(EPISODE_THREADS, hold_long_thread, NULL, 0);
	kl_lock_events(&b);
	assert_false(kl_ticket_is_locked(&tl));
	/* the waiters did sleep: the episode exercised the sleep path many times */
	assert_true(b.sleeps - a.sleeps >= EPISODE_ROUNDS);
	if (kl_fence_asymmetric()) /* else kli_fence_heavy() is a plain fence, not counted */
		assert_true(b.fences - a.fences <= EPISODE_FENCES_MAX);
	assert_int_equal(SLEEPERS_COUNTS(atomic_load(&tl.sleepers)), 0);
	kl_ticket_destroy(&tl);
}

/* Tries once; releases what it got. */
static void *trylock_once(void *arg)
{
	*(bool *)arg = kl_ticket_trylock(&tl);
	if (*(bool *)arg)
		kl_ticket_unlock(&tl);
	return NULL;
}

static void test_ticket_trylock_fails_while_held(void **state)
{
	pthread_t t;
	bool got = true;

	kl_ticket_init(&tl);
	assert_true(kl_ticket_trylock(&tl));
	assert_int_equal(pthread_create(&t, NULL, trylock_once, &got), 0);
	pthread_join(t, NULL);
	assert_false(got);
	kl_ticket_unlock(&tl);
	assert_int_equal(pthread_create(&t, NULL, trylock_once, &got), 0);
	pthread_join(t, NULL);
	assert_true(got);
	assert_false(kl_ticket_is_locked(&tl));
}

static void test_ticket_static_initializer_works(void **state)
{
	static struct kl_ticket s = KL_TICKET_INITIALIZER;

	assert_false(kl_ticket_is_locked(&s));
	kl_ticket_lock(&s);
	assert_true(kl_ticket_is_locked(&s));
	assert_false(kl_ticket_trylock(&s));
	kl_ticket_unlock(&s);
	assert_true(kl_ticket_trylock(&s));
	kl_ticket_unlock(&s);
}

/* ---- the header-inline lock (klock/ticket.h): a held lock goes to the library ------- */
static _Atomic int inline_entered;

static void *inline_locker(void *arg)
{
	kl_ticket_lock(arg); /* the inline path in builds without instruments */
	atomic_store(&inline_entered, 1);
	kl_ticket_unlock(arg);
	return NULL;
}

static void test_ticket_inline_lock_waits_for_the_holder(void **state)
{
	struct kl_ticket t = KL_TICKET_INITIALIZER;
	pthread_t th;

	KLT_ASSERT_INLINE_WHERE_EXPECTED(KL_TICKET_INLINE);
	atomic_store(&inline_entered, 0);
	(kl_ticket_lock)(&t); /* the library's entry point takes it as well */
	assert_int_equal(pthread_create(&th, NULL, inline_locker, &t), 0);
	klt_sleep_ms(20);
	assert_int_equal(atomic_load(&inline_entered), 0);
	kl_ticket_unlock(&t);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&inline_entered), 1);
	kl_ticket_lock(&t); /* free again: the inline CAS takes the next ticket */
	assert_true(kl_ticket_is_locked(&t));
	assert_false(kl_ticket_trylock(&t));
	kl_ticket_unlock(&t);
	assert_false(kl_ticket_is_locked(&t));
}

#if KLOCK_DEBUG_LOCKS
static void *unlock_other(void *arg)
{
	kl_ticket_unlock(arg);
	return NULL;
}

static void test_ticket_misuse_is_reported(void **state)
{
	struct kl_ticket t = KL_TICKET_INITIALIZER;
	unsigned long n0 = kli_report_count();
	pthread_t th;

	setenv("KLOCK_ON_ERROR", "warn", 1);
	kl_ticket_lock(&t);
	kl_ticket_lock(&t); /* relock: reported, skipped (no self-deadlock) */
	assert_int_equal(kli_report_count(), n0 + 1);
	assert_int_equal(pthread_create(&th, NULL, unlock_other, &t), 0);
	pthread_join(th, NULL); /* unlock by a non-owner */
	assert_int_equal(kli_report_count(), n0 + 2);
	kl_ticket_unlock(&t);
	kl_ticket_unlock(&t); /* double unlock */
	assert_int_equal(kli_report_count(), n0 + 3);
	kl_ticket_destroy(&t);
	kl_ticket_lock(&t); /* use after destroy */
	assert_int_equal(kli_report_count(), n0 + 4);
	kl_ticket_init(&t);
	kl_ticket_lock(&t);
	kl_ticket_destroy(&t); /* destroy of a held lock */
	assert_int_equal(kli_report_count(), n0 + 5);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ticket_excludes_under_contention),
		cmocka_unit_test(test_ticket_serves_in_arrival_order_waking_sleepers),
		cmocka_unit_test(test_ticket_newcomer_to_a_crowded_queue_waits_without_a_ticket),
		cmocka_unit_test(test_ticket_sleepers_share_one_heavy_fence_per_episode),
		cmocka_unit_test(test_ticket_trylock_fails_while_held),
		cmocka_unit_test(test_ticket_static_initializer_works),
		cmocka_unit_test(test_ticket_inline_lock_waits_for_the_holder),
#if KLOCK_DEBUG_LOCKS
		cmocka_unit_test(test_ticket_misuse_is_reported),
#endif
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
