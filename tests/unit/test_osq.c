/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/unit/test_osq.c - the optimistic spin queue: one head at a time, cancellation. */
#include <pthread.h>
#include <semaphore.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kltest.h"
#include "osq.h"

#define NTHREADS 3
/* Longest extra time the threads go on until one cancellation happened: on a machine
 * that runs one thread at a time (valgrind, a loaded host) the short budgets may not
 * expire in the fixed rounds (CI's valgrind stage: 300 heads, 0 cancelled). */
#define CANCEL_BUDGET_S 20

static _Atomic uintptr_t tail;
static _Atomic int heads;   /* threads that believe they are the head right now */
static _Atomic long entered, cancelled, attempts;
static long iters;
static int64_t cancel_deadline; /* klt_now_ns() until which rounds go on */

static struct klt_barrier start;

static void *osq_thread(void *arg)
{
	struct kli_thread *self = kli_self();
	unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;

	klt_barrier_wait(&start);
	for (long i = 0; i < iters || (atomic_load(&cancelled) == 0 &&
				       klt_now_ns() < cancel_deadline); i++) {
		struct kli_spin s;

		atomic_fetch_add(&attempts, 1);
		seed = seed * 1103515245u + 12345u;
		/* Half wait for the ones ahead (hand-overs), half give up within a few us
		 * (cancellation from the middle of the queue). Spinning long is what a
		 * loaded machine punishes (a preempted head), so "long" stays short. */
		kli_spin_start(&s, (seed >> 16) % 2 == 0 ? 50000 : (seed >> 17) % 3000);
		if (!kli_osq_lock(&tail, self, &s)) {
			/* A cancelled spinner is unlinked: only it could have put itself in
			 * the tail, and its leaving moved the tail off it. */
			assert_true(atomic_load(&tail) != (uintptr_t)self);
			atomic_fetch_add(&cancelled, 1);
			continue;
		}
		assert_int_equal(atomic_fetch_add(&heads, 1), 0);
		/* Stay head ~2 us, longer than the short budgets: they must cancel. */
		for (uint64_t t0 = kli_now_ns(); kli_now_ns() - t0 < 2000;)
			kl_arch_relax();
		assert_int_equal(atomic_fetch_sub(&heads, 1), 1);
		atomic_fetch_add(&entered, 1);
		kli_osq_unlock(&tail, self);
	}
	return NULL;
}

static void test_osq_one_head_at_a_time_with_cancellations(void **state)
{
	int ids[NTHREADS];

	iters = klt_scaled(10000);
	cancel_deadline = klt_now_ns() + CANCEL_BUDGET_S * KLT_NSEC_PER_SEC;
	klt_barrier_init(&start, NTHREADS);
	klt_run_threads(NTHREADS, osq_thread, ids, sizeof(ids[0]));
	print_message("heads %ld, cancelled %ld\n", atomic_load(&entered),
		      atomic_load(&cancelled));
	assert_int_equal(atomic_load(&entered) + atomic_load(&cancelled), atomic_load(&attempts));
	assert_true(atomic_load(&attempts) >= iters * NTHREADS);
	assert_true(atomic_load(&cancelled) > 0); /* the cancel path really ran */
	assert_true(atomic_load(&entered) > 0);
	assert_int_equal(atomic_load(&tail), 0); /* every leaver unlinked itself */
}

static void test_osq_uncontended_head_at_once(void **state)
{
	static _Atomic uintptr_t t;
	struct kli_thread *self = kli_self();
	struct kli_spin s;

	kli_spin_start(&s, 0); /* no budget: an empty queue still makes us the head */
	assert_true(kli_osq_lock(&t, self, &s));
	assert_int_equal(atomic_load(&t), (uintptr_t)self);
	kli_osq_unlock(&t, self);
	assert_int_equal(atomic_load(&t), 0);
}

/* Locks with no tail of their own share a table of tails: the same lock always finds the
 * same tail, each tail has its cache line to itself (the queue's xchg must not move a
 * neighbour's line), and the tails of the array's locks are spread over the table. */
#define HASHED_LOCKS 64   /* consecutive 64-byte locks, as a table of them lies */
#define HASHED_MIN_TAILS 32 /* distinct tails among them, at least */

static void test_osq_hashed_tail_is_stable_and_spread(void **state)
{
	static char locks[HASHED_LOCKS][64];
	_Atomic uintptr_t *seen[HASHED_LOCKS];
	unsigned distinct = 0;

	(void)state;
	for (unsigned i = 0; i < HASHED_LOCKS; i++) {
		seen[i] = kli_osq_hashed(locks[i]);
		assert_ptr_equal(kli_osq_hashed(locks[i]), seen[i]);
		assert_int_equal((uintptr_t)seen[i] % KL_ARCH_PAD, 0);
		unsigned j = 0;

		while (j < i && seen[j] != seen[i])
			j++;
		distinct += j == i;
	}
	assert_true(distinct >= HASHED_MIN_TAILS);
}

/* fork() while a thread is queued: the child has only the forking thread, so a tail left
 * naming the queued one would make the child's first spinner wait behind a thread that
 * does not exist there. The child finds every tail empty. */
static int lock_in_queue;

static void test_osq_hashed_tails_are_empty_in_a_fork_child(void **state)
{
	_Atomic uintptr_t *q = kli_osq_hashed(&lock_in_queue);
	struct kli_thread *self = kli_self();
	struct kli_spin s;
	int status;
	pid_t pid;

	(void)state;
	kli_spin_start(&s, 0);
	assert_true(kli_osq_lock(q, self, &s)); /* we are queued (the head) across the fork */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(atomic_load(q) == 0 ? 0 : 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(atomic_load(q), (uintptr_t)self); /* the parent's queue is untouched */
	kli_osq_unlock(q, self);
	assert_int_equal(atomic_load(q), 0);
}

/* fork() while another thread is the head of a queue whose tail lives in a lock (not in
 * the hashed table, which the child empties): the child's spinner queues behind a thread
 * that does not exist there. It must become the head when its budget runs out, and its
 * unlock must leave the queue empty - not give up, leaving the tail on the ghost, which
 * would make every later spinner on that lock wait out its budget and sleep. */
#define GHOST_BUDGET_NS 200000 /* the child spinner's budget: ends well before the alarm */

static _Atomic uintptr_t lock_tail;   /* a tail inside a lock (kl_mutex's spinq) */

struct ghost_head {
	sem_t queued, quit;
};

static void *head_until_told(void *p)
{
	struct ghost_head *g = p;
	struct kli_thread *self = kli_self();
	struct kli_spin s;

	kli_spin_start(&s, 0);
	assert_true(kli_osq_lock(&lock_tail, self, &s));
	sem_post(&g->queued);
	while (sem_wait(&g->quit) != 0)
		;
	kli_osq_unlock(&lock_tail, self);
	return NULL;
}

static void test_osq_fork_child_takes_the_head_behind_a_vanished_thread(void **state)
{
	struct ghost_head g;
	pthread_t t;
	int status;
	pid_t pid;

	(void)state;
	if (!klt_fork_threads_ok())
		skip();
	sem_init(&g.queued, 0, 0);
	sem_init(&g.quit, 0, 0);
	assert_int_equal(pthread_create(&t, NULL, head_until_told, &g), 0);
	while (sem_wait(&g.queued) != 0)
		;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct kli_thread *self = kli_self();
		struct kli_spin s;

		alarm(klt_watchdog_s(10));
		kli_spin_start(&s, GHOST_BUDGET_NS);
		if (!kli_osq_lock(&lock_tail, self, &s))
			_exit(1);
		kli_osq_unlock(&lock_tail, self);
		_exit(atomic_load(&lock_tail) == 0 ? 0 : 2);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	sem_post(&g.quit);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(atomic_load(&lock_tail), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_osq_uncontended_head_at_once),
		cmocka_unit_test(test_osq_one_head_at_a_time_with_cancellations),
		cmocka_unit_test(test_osq_hashed_tail_is_stable_and_spread),
		cmocka_unit_test(test_osq_hashed_tails_are_empty_in_a_fork_child),
		cmocka_unit_test(test_osq_fork_child_takes_the_head_behind_a_vanished_thread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
