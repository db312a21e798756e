/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/test_atfork.c - the substrate after fork(): only the forking thread lives on in
 * the child, so every internal lock another thread held and every queue entry of a thread
 * that was waiting must be dealt with by the subsystem's own child handler.
 *   park.c       bucket locks freed, queues emptied (the queued threads are gone)
 *   thread.c     records of vanished threads marked dead and never handed out again
 *   names.c      the name table's lock freed
 *   wait_*.c     (parking backend) bucket mutexes re-initialised, queues emptied
 * lockstat's handler has its own test in test_lockstat.c. Each child runs under alarm():
 * a child that hangs on a lock nobody will release dies of SIGALRM and fails the test.
 */
#include <signal.h>
#include <semaphore.h>
#include <sys/wait.h>

#include <klock/names.h>
#include <klock/wait.h>
#include "kltest.h"
#if KLOCK_VALGRIND_ANNOTATE
#include <valgrind/valgrind.h>
#endif
#include "park.h"

/* A stuck child is killed after this. */
#define CHILD_ALARM_S 10
/* Forks made while another thread hammers a subsystem's lock. */
#define HAMMER_FORKS 200

/* Forks; the child runs @fn(@arg) under alarm() and exits with its result. */
static void in_child(int (*fn)(void *), void *arg)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(klt_watchdog_s(CHILD_ALARM_S));
		_exit(fn(arg));
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("child died of signal %d (SIGALRM: it hung)", WTERMSIG(status));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- park.c ------------------------------------------------------------------------------- */

static int key;
static sem_t in_validate, leave_validate;

/* Holds the bucket lock of &key until told to go (validate runs under it). */
static bool validate_and_stall(void *arg)
{
	(void)arg;
	sem_post(&in_validate);
	while (sem_wait(&leave_validate) != 0)
		;
	return false;
}

static void *stall_in_bucket(void *arg)
{
	struct kli_park_req req = { .key = &key, .validate = validate_and_stall };
	uintptr_t token;

	(void)arg;
	assert_int_equal(kli_park(&req, &token), KLI_PARK_INVALID);
	return NULL;
}

static void *park_on_key(void *arg)
{
	struct kli_park_req req = { .key = &key };
	uintptr_t token;

	(void)arg;
	assert_int_equal(kli_park(&req, &token), KLI_PARK_UNPARKED);
	return NULL;
}

static void *park_on_key_in_child(void *arg)
{
	struct kli_park_req req = { .key = &key };
	uintptr_t token;

	(void)arg;
	if (kli_park(&req, &token) != KLI_PARK_UNPARKED)
		_exit(3);
	return NULL;
}

static int child_park(void *arg)
{
	pthread_t t;

	(void)arg;
	if (kli_park_queued(&key) != 0)   /* the parent's sleeper is gone */
		return 1;
	if (kli_unpark_one(&key, NULL, NULL)) /* ... and not woken: there is nobody */
		return 2;
	if (pthread_create(&t, NULL, park_on_key_in_child, NULL) != 0)
		return 4;
	while (kli_park_queued(&key) != 1)
		klt_sleep_ms(1);
	if (!kli_unpark_one(&key, NULL, NULL)) /* the child's own sleeper is found */
		return 5;
	pthread_join(t, NULL);
	return 0;
}

static void test_atfork_park_child_has_free_buckets_and_no_vanished_sleepers(void **state)
{
	pthread_t sleeper, staller;

	(void)state;
	if (!klt_fork_threads_ok())
		skip();
	sem_init(&in_validate, 0, 0);
	sem_init(&leave_validate, 0, 0);
	assert_int_equal(pthread_create(&sleeper, NULL, park_on_key, NULL), 0);
	while (kli_park_queued(&key) != 1)
		klt_sleep_ms(1);
	assert_int_equal(pthread_create(&staller, NULL, stall_in_bucket, NULL), 0);
	while (sem_wait(&in_validate) != 0)
		;
	in_child(child_park, NULL); /* forks while the bucket lock is held */
	sem_post(&leave_validate);
	assert_int_equal(pthread_join(staller, NULL), 0);
	assert_true(kli_unpark_one(&key, NULL, NULL));
	assert_int_equal(pthread_join(sleeper, NULL), 0);
}

/* ---- thread.c ------------------------------------------------------------------------------ */

static struct kli_thread *vanished;
static sem_t quit;

static void *attach_and_wait(void *arg)
{
	sem_t *attached = arg;

	vanished = kli_self();
	sem_post(attached);
	while (sem_wait(&quit) != 0)
		;
	return NULL;
}

static void *record_of(void *arg)
{
	*(struct kli_thread **)arg = kli_self();
	return NULL;
}

static int child_thread(void *arg)
{
	struct kli_thread *r[4];
	pthread_t t;

	(void)arg;
	if (atomic_load(&vanished->live))
		return 1;
	for (int i = 0; i < 4; i++) { /* sequential threads: recycling would pick it up */
		if (pthread_create(&t, NULL, record_of, &r[i]) != 0)
			return 2;
		pthread_join(t, NULL);
		if (r[i] == vanished)
			return 3;
	}
	return kli_self() == kli_tls_self ? 0 : 4;
}

static void test_atfork_thread_records_of_vanished_threads_are_not_reused(void **state)
{
	sem_t attached;
	pthread_t t;

	(void)state;
	if (!klt_fork_threads_ok())
		skip();
	sem_init(&attached, 0, 0);
	sem_init(&quit, 0, 0);
	kli_self();
	assert_int_equal(pthread_create(&t, NULL, attach_and_wait, &attached), 0);
	while (sem_wait(&attached) != 0)
		;
	in_child(child_thread, NULL);
	sem_post(&quit);
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* ---- names.c and the wait backend: fork while another thread hammers them ---------------- */

static _Atomic bool hammer_stop;
static int named[2];
static _Atomic uint32_t word;

static void *hammer_names(void *arg)
{
	(void)arg;
	while (!atomic_load(&hammer_stop)) {
		kl_lock_set_name(&named[0], "hammered");
		kl_lock_set_name(&named[0], NULL);
	}
	return NULL;
}

static int child_names(void *arg)
{
	char buf[16];

	(void)arg;
	if (kl_lock_set_name(&named[1], "child") != 0)
		return 1;
	return kl_lock_get_name(&named[1], buf, sizeof(buf)) == 5 && strcmp(buf, "child") == 0
		? 0 : 2;
}

static void *hammer_wake(void *arg)
{
	(void)arg;
	while (!atomic_load(&hammer_stop))
		kl_wake(&word, KL_WAKE_ALL);
	return NULL;
}

static int child_wait(void *arg)
{
	struct timespec dl = klt_deadline_ms(5);

	(void)arg;
	return kl_wait(&word, 0, &dl) == ETIMEDOUT ? 0 : 1;
}

static void hammer_and_fork(void *(*hammer)(void *), int (*child)(void *))
{
	pthread_t t;
	long forks = klt_scaled(HAMMER_FORKS);

	atomic_store(&hammer_stop, false);
	assert_int_equal(pthread_create(&t, NULL, hammer, NULL), 0);
	for (long i = 0; i < forks; i++)
		in_child(child, NULL);
	atomic_store(&hammer_stop, true);
	assert_int_equal(pthread_join(t, NULL), 0);
}

static void test_atfork_names_lock_is_free_in_the_child(void **state)
{
	(void)state;
#if KLOCK_VALGRIND_ANNOTATE
	/* memcheck reports the name the hammer thread had just allocated when fork() took
	 * the child's copy of it away (the thread does not exist there) as a leak. */
	if (RUNNING_ON_VALGRIND)
		skip();
#endif
	hammer_and_fork(hammer_names, child_names);
}

/* The futex backend has no lock to lose; the parking backend's bucket mutexes do. */
static void test_atfork_wait_backend_is_usable_in_the_child(void **state)
{
	(void)state;
	hammer_and_fork(hammer_wake, child_wait);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_atfork_park_child_has_free_buckets_and_no_vanished_sleepers),
		cmocka_unit_test(test_atfork_thread_records_of_vanished_threads_are_not_reused),
		cmocka_unit_test(test_atfork_names_lock_is_free_in_the_child),
		cmocka_unit_test(test_atfork_wait_backend_is_usable_in_the_child),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
