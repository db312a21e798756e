/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/test_preload_fork.c - fork() with locks held, and with threads waiting on them.
 *
 * A child of a multi-threaded process inherits every lock in the state it had, but only
 * the forking thread. A lock the forking thread held is held by the child's thread, which
 * may unlock it and use it again; a lock another thread held stays held. glibc gives the
 * first only for locks that do not check their owner (NORMAL mutexes, spinlocks, read
 * holds): it records owners by thread id, and the child's thread has a new one, so a
 * recursive or errorcheck mutex, or a write-held rwlock, answers EPERM or is corrupted in
 * the child. klock names owners by owner id (locks/substrate/thread.h: one per thread lifetime, in
 * TLS), which the child's thread keeps - fork() copies it, and the forking thread's
 * record stays live - so all of them work. Threads that were waiting are gone: a child's unlock or signal must not
 * go to one of them (klock's parking lot forgets them in the child). Rows glibc fails run
 * under the preload only.
 *
 * Each child runs under alarm(): a hang kills it, and the parent sees the signal.
 */
#include <signal.h>
#include <sys/wait.h>

#include "preload_test.h"

/* A child that has not finished by then is stuck. */
#define CHILD_ALARM_S 10
/* Long enough for a blocked thread to be asleep (past any spin phase). */
#define SETTLE_MS 50
/* Forks of the stress test. */
#define STRESS_FORKS 60

static bool preloaded;

/* Runs @fn in a child; asserts that it exits 0 within CHILD_ALARM_S. */
static void in_child(void (*fn)(void *), void *arg)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(klt_watchdog_s(CHILD_ALARM_S));
		fn(arg);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("the child died of signal %d (SIGALRM: it hung)", WTERMSIG(status));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* In a child, a failed check exits non-zero (cmocka's longjmp belongs to the parent). */
#define CHILD_CHECK(x)                                                                       \
	do {                                                                                 \
		if (!(x)) {                                                                  \
			fprintf(stderr, "child: %s:%d: %s\n", __FILE__, __LINE__, #x);      \
			_exit(1);                                                            \
		}                                                                            \
	} while (0)

/* ---- held by the forking thread ----------------------------------------------------------- */

static void child_unlocks_relocks(void *p)
{
	pthread_mutex_t *m = p;

	CHILD_CHECK(pthread_mutex_unlock(m) == 0);
	CHILD_CHECK(pthread_mutex_lock(m) == 0);
	CHILD_CHECK(pthread_mutex_unlock(m) == 0);
	CHILD_CHECK(pthread_mutex_destroy(m) == 0);
}

static void child_unlocks_recursive(void *p)
{
	pthread_mutex_t *m = p;

	CHILD_CHECK(pthread_mutex_unlock(m) == 0);
	CHILD_CHECK(pthread_mutex_unlock(m) == 0);
	CHILD_CHECK(pthread_mutex_unlock(m) == EPERM);
	CHILD_CHECK(pthread_mutex_lock(m) == 0);
	CHILD_CHECK(pthread_mutex_unlock(m) == 0);
}

static void *idle_thread(void *p)
{
	sem_t *quit = p;

	while (sem_wait(quit) != 0)
		;
	return NULL;
}

static void test_preload_fork_child_unlocks_what_the_forker_held(void **state)
{
	pthread_mutex_t n = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_t r = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
	pthread_mutex_t e = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
	sem_t quit;
	pthread_t t;

	(void)state;
	sem_init(&quit, 0, 0);
	assert_int_equal(pthread_create(&t, NULL, idle_thread, &quit), 0); /* multi-threaded */
	assert_int_equal(pthread_mutex_lock(&n), 0);
	assert_int_equal(pthread_mutex_lock(&r), 0);
	assert_int_equal(pthread_mutex_lock(&r), 0);
	assert_int_equal(pthread_mutex_lock(&e), 0);
	in_child(child_unlocks_relocks, &n);
	if (preloaded) { /* glibc: EPERM (the owner's thread id changed) */
		in_child(child_unlocks_recursive, &r);
		in_child(child_unlocks_relocks, &e);
	}
	assert_int_equal(pthread_mutex_unlock(&n), 0);
	assert_int_equal(pthread_mutex_unlock(&r), 0);
	assert_int_equal(pthread_mutex_unlock(&r), 0);
	assert_int_equal(pthread_mutex_unlock(&e), 0);
	sem_post(&quit);
	assert_int_equal(pthread_join(t, NULL), 0);
}

static void child_rwlock(void *p)
{
	pthread_rwlock_t *rw = p;

	CHILD_CHECK(pthread_rwlock_unlock(rw) == 0);
	CHILD_CHECK(pthread_rwlock_rdlock(rw) == 0);
	CHILD_CHECK(pthread_rwlock_rdlock(rw) == 0);
	CHILD_CHECK(pthread_rwlock_unlock(rw) == 0);
	CHILD_CHECK(pthread_rwlock_unlock(rw) == 0);
	CHILD_CHECK(pthread_rwlock_wrlock(rw) == 0);
	CHILD_CHECK(pthread_rwlock_unlock(rw) == 0);
}

static void child_spin(void *p)
{
	pthread_spinlock_t *s = p;

	CHILD_CHECK(pthread_spin_unlock(s) == 0);
	CHILD_CHECK(pthread_spin_trylock(s) == 0);
	CHILD_CHECK(pthread_spin_unlock(s) == 0);
}

static void test_preload_fork_child_unlocks_rwlock_and_spinlock(void **state)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	pthread_spinlock_t s;
	sem_t quit;
	pthread_t t;

	(void)state;
	sem_init(&quit, 0, 0);
	assert_int_equal(pthread_create(&t, NULL, idle_thread, &quit), 0);
	assert_int_equal(pthread_rwlock_wrlock(&rw), 0);
	if (preloaded) /* glibc: the child's unlock is taken for a read unlock; it hangs */
		in_child(child_rwlock, &rw);
	assert_int_equal(pthread_rwlock_unlock(&rw), 0);
	assert_int_equal(pthread_rwlock_rdlock(&rw), 0);
	in_child(child_rwlock, &rw);
	assert_int_equal(pthread_rwlock_unlock(&rw), 0);
	assert_int_equal(pthread_spin_init(&s, PTHREAD_PROCESS_PRIVATE), 0);
	assert_int_equal(pthread_spin_lock(&s), 0);
	in_child(child_spin, (void *)(uintptr_t)&s);
	assert_int_equal(pthread_spin_unlock(&s), 0);
	sem_post(&quit);
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* ---- threads that were waiting ------------------------------------------------------------ */

struct blocked {
	pthread_mutex_t m;
	pthread_cond_t c;
	sem_t started;
	int go;
};

static void *block_on_mutex(void *p)
{
	struct blocked *b = p;

	sem_post(&b->started);
	assert_int_equal(pthread_mutex_lock(&b->m), 0);
	assert_int_equal(pthread_mutex_unlock(&b->m), 0);
	return NULL;
}

static void child_mutex_after_waiter(void *p)
{
	struct blocked *b = p;

	/* The waiter is gone: unlock must leave the mutex free, not hand it to the waiter. */
	CHILD_CHECK(pthread_mutex_unlock(&b->m) == 0);
	CHILD_CHECK(pthread_mutex_lock(&b->m) == 0);
	CHILD_CHECK(pthread_mutex_unlock(&b->m) == 0);
	CHILD_CHECK(pthread_mutex_trylock(&b->m) == 0);
	CHILD_CHECK(pthread_mutex_unlock(&b->m) == 0);
}

static void test_preload_fork_mutex_with_a_sleeping_waiter(void **state)
{
	struct blocked b = { .m = PTHREAD_MUTEX_INITIALIZER };
	pthread_t t;

	(void)state;
	sem_init(&b.started, 0, 0);
	assert_int_equal(pthread_mutex_lock(&b.m), 0);
	assert_int_equal(pthread_create(&t, NULL, block_on_mutex, &b), 0);
	while (sem_wait(&b.started) != 0)
		;
	klt_sleep_ms(SETTLE_MS);
	in_child(child_mutex_after_waiter, &b);
	assert_int_equal(pthread_mutex_unlock(&b.m), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

static void *wait_on_cond(void *p)
{
	struct blocked *b = p;

	assert_int_equal(pthread_mutex_lock(&b->m), 0);
	sem_post(&b->started);
	while (!b->go)
		assert_int_equal(pthread_cond_wait(&b->c, &b->m), 0);
	assert_int_equal(pthread_mutex_unlock(&b->m), 0);
	return NULL;
}

/* The child's own waiter must get the child's signal, not a thread that is gone. */
static void child_cond_after_waiter(void *p)
{
	struct blocked *b = p;
	pthread_t t;

	CHILD_CHECK(pthread_create(&t, NULL, wait_on_cond, b) == 0);
	while (sem_wait(&b->started) != 0)
		;
	CHILD_CHECK(pthread_mutex_lock(&b->m) == 0);
	b->go = 1;
	CHILD_CHECK(pthread_cond_signal(&b->c) == 0);
	CHILD_CHECK(pthread_mutex_unlock(&b->m) == 0);
	CHILD_CHECK(pthread_join(t, NULL) == 0);
}

/* Starts @fn, a thread that waits on @b's condvar, and returns once it is queued there. */
static void start_cond_waiter(struct blocked *b, void *(*fn)(void *), pthread_t *t)
{
	sem_init(&b->started, 0, 0);
	assert_int_equal(pthread_create(t, NULL, fn, b), 0);
	while (sem_wait(&b->started) != 0)
		;
	assert_int_equal(pthread_mutex_lock(&b->m), 0); /* the waiter is queued now */
	assert_int_equal(pthread_mutex_unlock(&b->m), 0);
}

static void test_preload_fork_cond_with_a_waiter(void **state)
{
	struct blocked b = { .m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER };
	pthread_t t;

	(void)state;
	if (!klt_fork_threads_ok())
		skip();
	start_cond_waiter(&b, wait_on_cond, &t);
	in_child(child_cond_after_waiter, &b);
	assert_int_equal(pthread_mutex_lock(&b.m), 0);
	b.go = 1;
	assert_int_equal(pthread_cond_broadcast(&b.c), 0);
	assert_int_equal(pthread_mutex_unlock(&b.m), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

static void unlock_cleanup(void *p)
{
	pthread_mutex_unlock(p);
}

/* Waits on @b's condvar until cancelled (never returns normally). */
static void *wait_until_cancelled(void *p)
{
	struct blocked *b = p;

	pthread_mutex_lock(&b->m);
	pthread_cleanup_push(unlock_cleanup, &b->m);
	sem_post(&b->started);
	for (;;)
		pthread_cond_wait(&b->c, &b->m);
	pthread_cleanup_pop(1);
	return NULL;
}

/* A thread the child creates after the fork usually gets the stack, and so the pthread_t,
 * of a thread that was gone: a cancel of it must reach its own wait, not the record of the
 * vanished thread's wait. */
static void child_cancels_cond_waiter(void *p)
{
	struct blocked *b = p;
	pthread_t t;
	void *ret;

	CHILD_CHECK(pthread_mutex_init(&b->m, NULL) == 0);
	CHILD_CHECK(pthread_cond_init(&b->c, NULL) == 0);
	CHILD_CHECK(pthread_create(&t, NULL, wait_until_cancelled, b) == 0);
	while (sem_wait(&b->started) != 0)
		;
	CHILD_CHECK(pthread_mutex_lock(&b->m) == 0); /* the waiter is queued now */
	CHILD_CHECK(pthread_mutex_unlock(&b->m) == 0);
	CHILD_CHECK(pthread_cancel(t) == 0);
	CHILD_CHECK(pthread_join(t, &ret) == 0);
	CHILD_CHECK(ret == PTHREAD_CANCELED);
}

static void test_preload_fork_child_cancels_cond_waiter(void **state)
{
	struct blocked b = { .m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER };
	pthread_t t;

	(void)state;
	if (!klt_fork_threads_ok())
		skip();
	start_cond_waiter(&b, wait_until_cancelled, &t);
	in_child(child_cancels_cond_waiter, &b);
	assert_int_equal(pthread_cancel(t), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* ---- forking while everything is busy ---------------------------------------------------- */

struct storm {
	pthread_mutex_t m;
	pthread_cond_t c;
	long counter;
	_Atomic bool stop;
};

/* Contended lock/unlock with condvar traffic: the parking lot and its bucket locks are
 * busy at every fork. */
static void *storm_thread(void *p)
{
	struct storm *s = p;

	while (!atomic_load(&s->stop)) {
		pthread_mutex_lock(&s->m);
		s->counter++;
		if (s->counter % 7 == 0)
			pthread_cond_broadcast(&s->c);
		else if (s->counter % 5 == 0) {
			struct timespec dl = pt_deadline(CLOCK_REALTIME, 1);

			pthread_cond_timedwait(&s->c, &s->m, &dl);
		}
		pthread_mutex_unlock(&s->m);
	}
	return NULL;
}

/* The child: the same storm on the same addresses (so on the parking-lot buckets that
 * were busy at the fork), with the mutex and condvar made afresh - the vanished threads
 * may have held them. */
static void child_storm(void *p)
{
	struct storm *s = p;
	pthread_t t[2];

	CHILD_CHECK(pthread_mutex_init(&s->m, NULL) == 0);
	CHILD_CHECK(pthread_cond_init(&s->c, NULL) == 0);
	atomic_store(&s->stop, false);
	for (int i = 0; i < 2; i++)
		CHILD_CHECK(pthread_create(&t[i], NULL, storm_thread, s) == 0);
	klt_sleep_ms(5);
	atomic_store(&s->stop, true);
	pthread_mutex_lock(&s->m);
	pthread_cond_broadcast(&s->c);
	pthread_mutex_unlock(&s->m);
	for (int i = 0; i < 2; i++)
		CHILD_CHECK(pthread_join(t[i], NULL) == 0);
}

static void test_preload_fork_while_locks_are_busy(void **state)
{
	struct storm s = { .m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER };
	pthread_t t[3];
	int forks = (int)klt_scaled(STRESS_FORKS);

	(void)state;
	if (!klt_fork_threads_ok())
		skip();
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&t[i], NULL, storm_thread, &s), 0);
	for (int i = 0; i < forks; i++)
		in_child(child_storm, &s);
	atomic_store(&s.stop, true);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_preload_fork_child_unlocks_what_the_forker_held),
		cmocka_unit_test(test_preload_fork_child_unlocks_rwlock_and_spinlock),
		cmocka_unit_test(test_preload_fork_mutex_with_a_sleeping_waiter),
		cmocka_unit_test(test_preload_fork_cond_with_a_waiter),
		cmocka_unit_test(test_preload_fork_child_cancels_cond_waiter),
		cmocka_unit_test(test_preload_fork_while_locks_are_busy),
	};

	preloaded = pt_preloaded();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
