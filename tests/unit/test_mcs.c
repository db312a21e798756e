/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/unit/test_mcs.c - kl_mcs: exclusion, FIFO hand-over, trylock, misuse (debug builds). */
#include <klock/fence.h>
#include <klock/lockstat.h>
#include <klock/mcs.h>
#include <string.h>
#include <sys/mman.h>
#include <sched.h>
#include <unistd.h>
#include "kltest.h"
#include "kl_internal.h"
#include "spin.h"

/* More threads than this machine's CPUs: waiters must yield, not collapse. */
#define NTHREADS 4
#define BUMPS 10

static struct kl_mcs ml;
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
	struct kl_mcs_node node; /* one node, reused for every acquisition */

	klt_barrier_wait(&start); /* all contend from the first iteration */
	for (long i = 0; i < iters; i++) {
		if (use_try) {
			while (!kl_mcs_trylock(&ml, &node))
				;
		} else {
			kl_mcs_lock(&ml, &node);
		}
		guarded_bump();
		kl_mcs_unlock(&ml, &node);
	}
	return NULL;
}

static void test_mcs_excludes_under_contention(void **state)
{
	int ids[NTHREADS] = { 0, 1, 2, 3 };

	kl_mcs_init(&ml);
	counter = 0;
	iters = klt_scaled(20000);
	klt_barrier_init(&start, NTHREADS);
	klt_run_threads(NTHREADS, bump_thread, ids, sizeof(ids[0]));
	assert_int_equal(atomic_load(&violations), 0);
	assert_int_equal(counter, iters * NTHREADS * BUMPS);
	assert_false(kl_mcs_is_locked(&ml));
	kl_mcs_destroy(&ml);
}

/* ---- a waiter never touches its predecessor's node once it has linked in ------------- */
/* The caller may free or reuse a node as soon as its unlock returns, so a waiter must not
 * read its predecessor's node after that. The lock gives a stronger guarantee, which is
 * testable without a race: once a waiter has linked in behind the holder's node, only the
 * holder touches that node. The holder's node lives alone in a page made inaccessible
 * while the waiter waits (spinning, then sleeping); a read of it would fault. */
static void *linked_waiter(void *arg)
{
	struct kl_mcs_node node;

	(void)arg;
	kl_mcs_lock(&ml, &node);
	guarded_bump();
	kl_mcs_unlock(&ml, &node);
	return NULL;
}

static void test_mcs_waiter_never_reads_its_predecessors_node(void **state)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct kl_mcs_node *holder = p;
	pthread_t t;

	assert_true(p != MAP_FAILED);
	kl_mcs_init(&ml);
	counter = 0;
	kl_mcs_lock(&ml, holder);
	assert_int_equal(pthread_create(&t, NULL, linked_waiter, NULL), 0);
	while (atomic_load(&holder->next) == 0) /* the waiter has linked in */
		sched_yield();
	assert_int_equal(mprotect(p, page, PROT_NONE), 0);
	klt_sleep_ms(20); /* past its spin budget: it pauses and sleeps */
	assert_int_equal(mprotect(p, page, PROT_READ | PROT_WRITE), 0);
	kl_mcs_unlock(&ml, holder);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(counter, BUMPS);
	kl_mcs_destroy(&ml);
	munmap(p, page);
}

/* ---- FIFO: the queue is served in the order nodes were appended ---------------------- */
#define FIFO_WAITERS 4
static int order[FIFO_WAITERS];
static _Atomic int served;
static struct kl_mcs_node fifo_nodes[FIFO_WAITERS];

static void *fifo_thread(void *arg)
{
	int id = *(int *)arg;

	kl_mcs_lock(&ml, &fifo_nodes[id]);
	order[atomic_fetch_add(&served, 1)] = id;
	kl_mcs_unlock(&ml, &fifo_nodes[id]);
	return NULL;
}

static void test_mcs_serves_in_arrival_order_waking_sleepers(void **state)
{
	struct kl_mcs_node mine;
	pthread_t t[FIFO_WAITERS];
	int ids[FIFO_WAITERS];

	kl_mcs_init(&ml);
	atomic_store(&served, 0);
	kl_mcs_lock(&ml, &mine);
	for (int i = 0; i < FIFO_WAITERS; i++) {
		ids[i] = i;
		assert_int_equal(pthread_create(&t[i], NULL, fifo_thread, &ids[i]), 0);
		/* Wait until thread i's node is the queue's tail. */
		while (atomic_load(&ml.tail) != (uintptr_t)&fifo_nodes[i])
			klt_sleep_ms(1);
	}
	/* The ones further back sleep on their own nodes at once (locked == 2, MCS_SLEEPING in
	 * mcs.c); the two right behind the holder too, once they have stayed awake ~1 ms. */
	for (int i = 0; i < FIFO_WAITERS; i++)
		while (atomic_load(&fifo_nodes[i].locked) != 2)
			klt_sleep_ms(1);
	kl_mcs_unlock(&ml, &mine); /* each hand-over wakes (or pre-wakes) the next one */
	for (int i = 0; i < FIFO_WAITERS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < FIFO_WAITERS; i++)
		assert_int_equal(order[i], i);
}

/* The waiter right behind the holder stays awake ~1 ms, then sleeps. While awake, its
 * node's awake flag (1) lets the grant be a plain store (the rseq grant, G1); before it
 * sleeps it must clear the flag (and run G2), or a grant would store GRANTED without
 * waking it. Without the rseq grant the flag is never set: the node starts zeroed. */
static struct kl_mcs_node near_node; /* static: zeroed, and TSan sees no stack race */

static void *lock_unlock_near(void *arg)
{
	*(int *)arg = 1;
	kl_mcs_lock(&ml, &near_node);
	kl_mcs_unlock(&ml, &near_node);
	*(int *)arg = 2;
	return NULL;
}

static void test_mcs_near_waiter_clears_its_awake_flag_before_it_sleeps(void **state)
{
	struct kl_mcs_node mine;
	pthread_t t;
	int stage = 0;

	(void)state;
	kl_mcs_init(&ml);
	kl_mcs_lock(&ml, &mine);
	assert_int_equal(pthread_create(&t, NULL, lock_unlock_near, &stage), 0);
	while (atomic_load(&near_node.locked) != 2) /* MCS_SLEEPING in mcs.c */
		klt_sleep_ms(1);
	assert_int_not_equal(atomic_load(&near_node.awake), 1); /* MCS_AWAKE */
	kl_mcs_unlock(&ml, &mine); /* the exchange sees SLEEPING and wakes it */
	pthread_join(t, NULL);
	assert_int_equal(stage, 2);
	assert_false(kl_mcs_is_locked(&ml));
	kl_mcs_destroy(&ml);
}

/* ---- crowding: past kli_crowd_max queued, a newcomer waits off the queue ------------ */
#define CROWD_ATTEMPTS 5      /* tries to catch the newcomer's passive wait (>= 1 ms each) */
#define CROWD_POLL_MS 200     /* longest a try polls for it */
#define CROWD_COUNTING KL_MCS_CROWD_COUNTING           /* crowd's bits (locks/primitives/mcs.c): on */
#define CROWD_QUEUED(w) ((w) & (CROWD_COUNTING - 1u))  /* counted waiters */
#define CROWD_PASSIVE(w) ((w) >> 16)                   /* passive ones */
#define LINK_NODE(v) ((struct kl_mcs_node *)((v) & ~(uintptr_t)3)) /* a link's node */

static void *lock_unlock_once(void *arg)
{
	struct kl_mcs_node node;

	(void)arg;
	kl_mcs_lock(&ml, &node);
	kl_mcs_unlock(&ml, &node);
	return NULL;
}

/* Waiters linked in behind @holder (the caller holds the lock: none can leave). The
 * walk reads other threads' stack nodes, which TSan cannot order against those threads'
 * stack set-up (it reports a race): the tests that walk skip under TSan. */
static uint32_t queued_behind(struct kl_mcs_node *holder)
{
	uint32_t n = 0;

	for (uintptr_t v; (v = atomic_load(&holder->next)) != 0; holder = LINK_NODE(v))
		n++;
	return n;
}

/* Starts waiter number @i + 1 and waits until it has linked in. */
static void queue_one_more(pthread_t *t, uint32_t i, struct kl_mcs_node *holder)
{
	assert_int_equal(pthread_create(&t[i], NULL, lock_unlock_once, NULL), 0);
	while (queued_behind(holder) != i + 1)
		klt_sleep_ms(1);
}

/* Holds the lock and queues one waiter: nobody counts until its spin budget runs out
 * (the hold outlasts it), which turns counting on. Later waiters count themselves, until
 * holder + counted waiters fill the CPUs (@crowd). Then one more thread must show up as
 * a passive waiter before it queues (polled without sleeping). */
static bool newcomer_seen_passive(uint32_t crowd)
{
	struct kl_mcs_node mine;
	pthread_t t[KLT_MAX_THREADS];
	uint32_t n = 0, c;
	int64_t until;
	bool seen = false;

	kl_mcs_init(&ml);
	kl_mcs_lock(&ml, &mine);
	queue_one_more(t, n++, &mine);
	while (!(atomic_load(&ml.crowd) & CROWD_COUNTING)) /* its budget runs out */
		klt_sleep_ms(1);
	assert_int_equal(atomic_load(&ml.crowd), CROWD_COUNTING); /* it is not counted */
	while (CROWD_QUEUED(atomic_load(&ml.crowd)) + 1 < crowd)
		queue_one_more(t, n++, &mine);
	assert_int_equal(atomic_load(&ml.crowd), CROWD_COUNTING | (crowd - 1));
	assert_int_equal(pthread_create(&t[n], NULL, lock_unlock_once, NULL), 0);
	until = klt_now_ns() + CROWD_POLL_MS * 1000000ll;
	while (!seen && queued_behind(&mine) == n && klt_now_ns() < until)
		seen = CROWD_PASSIVE(atomic_load(&ml.crowd)) == 1;
	kl_mcs_unlock(&ml, &mine);
	for (uint32_t i = 0; i <= n; i++)
		pthread_join(t[i], NULL);
	assert_false(kl_mcs_is_locked(&ml));
	c = atomic_load(&ml.crowd);
	assert_int_equal(c, 0); /* the last unlock drained the lock: counting off */
	return seen;
}

static void test_mcs_newcomer_to_a_crowded_queue_waits_off_the_queue(void **state)
{
	(void)state;
	if (2 * kli_crowd_max > KLT_MAX_THREADS || KLOCK_TSAN)
		skip(); /* more CPUs than the test's thread table; or TSan (queued_behind) */
	assert_true(klt_seen_in_tries(CROWD_ATTEMPTS, newcomer_seen_passive, kli_crowd_max));
}

/* Counting, once on, stays on while anyone queues - even a queue as short as holder + one
 * counted waiter (until 2026-12-04 that turned it off, and under oversubscription it
 * flipped on and off: 8 threads on 2 CPUs ran 25% slower) - and goes off when an unlock
 * leaves the lock free with nobody counted or passive: the crowd has drained. */
static void test_mcs_counting_stops_when_the_lock_drains(void **state)
{
	struct kl_mcs_node mine;
	pthread_t t;

	(void)state;
	if (KLOCK_TSAN)
		skip(); /* queued_behind */
	kl_mcs_init(&ml);
	kl_mcs_lock(&ml, &mine);
	atomic_store(&ml.crowd, CROWD_COUNTING); /* as a crowd leaves it while the lock is busy */
	queue_one_more(&t, 0, &mine);
	assert_int_equal(atomic_load(&ml.crowd), CROWD_COUNTING | 1u); /* counted, still on */
	kl_mcs_unlock(&ml, &mine); /* the hand-over uncounts it */
	pthread_join(t, NULL);     /* its unlock drains the lock */
	assert_false(kl_mcs_is_locked(&ml));
	assert_int_equal(atomic_load(&ml.crowd), 0);
	kl_mcs_lock(&ml, &mine);   /* and the same with nobody queued at all */
	atomic_store(&ml.crowd, CROWD_COUNTING);
	kl_mcs_unlock(&ml, &mine);
	assert_int_equal(atomic_load(&ml.crowd), 0);
	kl_mcs_destroy(&ml);
}

/* Tries once; releases what it got. */
static void *trylock_once(void *arg)
{
	struct kl_mcs_node node;

	*(bool *)arg = kl_mcs_trylock(&ml, &node);
	if (*(bool *)arg)
		kl_mcs_unlock(&ml, &node);
	return NULL;
}

static void test_mcs_trylock_fails_while_held(void **state)
{
	struct kl_mcs_node mine;
	pthread_t t;
	bool got = true;

	kl_mcs_init(&ml);
	assert_true(kl_mcs_trylock(&ml, &mine));
	assert_int_equal(pthread_create(&t, NULL, trylock_once, &got), 0);
	pthread_join(t, NULL);
	assert_false(got);
	kl_mcs_unlock(&ml, &mine);
	assert_int_equal(pthread_create(&t, NULL, trylock_once, &got), 0);
	pthread_join(t, NULL);
	assert_true(got);
	assert_false(kl_mcs_is_locked(&ml));
}

static void test_mcs_static_initializer_works(void **state)
{
	static struct kl_mcs s = KL_MCS_INITIALIZER;
	struct kl_mcs_node a, b;

	assert_false(kl_mcs_is_locked(&s));
	kl_mcs_lock(&s, &a);
	assert_true(kl_mcs_is_locked(&s));
	assert_false(kl_mcs_trylock(&s, &b));
	kl_mcs_unlock(&s, &a);
	assert_true(kl_mcs_trylock(&s, &b));
	kl_mcs_unlock(&s, &b);
}

/* ---- the header-inline lock (klock/mcs.h): it queues behind a holder itself --------- */
/* Nodes need no initialisation: the inline path writes the node before its exchange (and
 * the library's path, taken while crowd is not 0, writes it again). */
static _Atomic int inline_entered;

static void *inline_locker(void *arg)
{
	struct kl_mcs_node node;

	memset(&node, 0xa5, sizeof(node)); /* whatever the stack held */
	kl_mcs_lock(arg, &node); /* the inline path in builds without instruments */
	atomic_store(&inline_entered, 1);
	kl_mcs_unlock(arg, &node);
	return NULL;
}

static void test_mcs_inline_lock_with_a_dirty_node_waits_for_the_holder(void **state)
{
	struct kl_mcs l = KL_MCS_INITIALIZER;
	struct kl_mcs_node mine, again;
	pthread_t th;

	KLT_ASSERT_INLINE_WHERE_EXPECTED(KL_MCS_INLINE);
	atomic_store(&inline_entered, 0);
	(kl_mcs_lock)(&l, &mine); /* the library's entry point takes it as well */
	assert_int_equal(pthread_create(&th, NULL, inline_locker, &l), 0);
	klt_sleep_ms(20);
	assert_int_equal(atomic_load(&inline_entered), 0);
	kl_mcs_unlock(&l, &mine);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&inline_entered), 1);
	memset(&again, 0xa5, sizeof(again));
	kl_mcs_lock(&l, &again); /* free again: the inline exchange takes it */
	assert_true(kl_mcs_is_locked(&l));
	assert_false(kl_mcs_trylock(&l, &mine));
	kl_mcs_unlock(&l, &again);
	assert_false(kl_mcs_is_locked(&l));
}

#if KLOCK_DEBUG_LOCKS
static struct kl_mcs_node other_node;

static void *unlock_other(void *arg)
{
	kl_mcs_unlock(arg, &other_node);
	return NULL;
}

static void test_mcs_misuse_is_reported(void **state)
{
	struct kl_mcs l = KL_MCS_INITIALIZER;
	struct kl_mcs_node a, b;
	unsigned long n0 = kli_report_count();
	pthread_t th;

	setenv("KLOCK_ON_ERROR", "warn", 1);
	kl_mcs_lock(&l, &a);
	kl_mcs_lock(&l, &b); /* relock: reported, skipped (no self-deadlock) */
	assert_int_equal(kli_report_count(), n0 + 1);
	assert_int_equal(pthread_create(&th, NULL, unlock_other, &l), 0);
	pthread_join(th, NULL); /* unlock by a non-owner */
	assert_int_equal(kli_report_count(), n0 + 2);
	kl_mcs_unlock(&l, &a);
	kl_mcs_unlock(&l, &a); /* double unlock */
	assert_int_equal(kli_report_count(), n0 + 3);
	kl_mcs_destroy(&l);
	kl_mcs_lock(&l, &a); /* use after destroy */
	assert_int_equal(kli_report_count(), n0 + 4);
	kl_mcs_init(&l);
	kl_mcs_lock(&l, &a);
	kl_mcs_destroy(&l); /* destroy of a held lock */
	assert_int_equal(kli_report_count(), n0 + 5);
}
#endif

/* ---- heavy fences: none for a passive wait, at most one per thread for near sleeps ----- */
#define EPISODE_THREADS 4     /* more than 2 CPUs: some wait passive */
#define EPISODE_ROUNDS 8      /* acquisitions per thread */
#define EPISODE_HOLD_MS 3     /* long enough for the nearest waiters to sleep (> 1 ms) */

static void *hold_long_thread(void *arg)
{
	struct kl_mcs_node node;

	(void)arg;
	for (int i = 0; i < EPISODE_ROUNDS; i++) {
		kl_mcs_lock(&ml, &node);
		klt_sleep_ms(EPISODE_HOLD_MS);
		kl_mcs_unlock(&ml, &node);
	}
	return NULL;
}

/* A membarrier interrupts every CPU that runs one of the process's threads: one per sleep
 * or per passive wait would make a contended lock cost more with every CPU. */
static void test_mcs_sleeping_waiters_issue_at_most_one_heavy_fence_per_thread(void **state)
{
	struct kl_lock_events a, b;

	(void)state;
	kl_mcs_init(&ml);
	kl_lock_events(&a);
	klt_run_threads(EPISODE_THREADS, hold_long_thread, NULL, 0);
	kl_lock_events(&b);
	assert_false(kl_mcs_is_locked(&ml));
	assert_true(b.sleeps - a.sleeps >= EPISODE_ROUNDS); /* the waiters did sleep */
	if (kl_fence_asymmetric())
		assert_true(b.fences - a.fences <= EPISODE_THREADS);
	kl_mcs_destroy(&ml);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mcs_excludes_under_contention),
		cmocka_unit_test(test_mcs_waiter_never_reads_its_predecessors_node),
		cmocka_unit_test(test_mcs_serves_in_arrival_order_waking_sleepers),
		cmocka_unit_test(test_mcs_newcomer_to_a_crowded_queue_waits_off_the_queue),
		cmocka_unit_test(test_mcs_counting_stops_when_the_lock_drains),
		cmocka_unit_test(test_mcs_near_waiter_clears_its_awake_flag_before_it_sleeps),
		cmocka_unit_test(test_mcs_sleeping_waiters_issue_at_most_one_heavy_fence_per_thread),
		cmocka_unit_test(test_mcs_trylock_fails_while_held),
		cmocka_unit_test(test_mcs_static_initializer_works),
		cmocka_unit_test(test_mcs_inline_lock_with_a_dirty_node_waits_for_the_holder),
#if KLOCK_DEBUG_LOCKS
		cmocka_unit_test(test_mcs_misuse_is_reported),
#endif
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
