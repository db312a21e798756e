/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/test_preload_threads.c - pthread mutexes across thread lifetimes and without
 * memory (issue 13 items 4 and 5), as glibc answers them.
 *
 * A thread that exits holding an ERRORCHECK or RECURSIVE mutex, or write-holding an
 * rwlock, leaves it locked, and no later thread is its owner: glibc names owners by thread id; klock by an owner id that
 * no later thread gets, even one that reuses the exited thread's klock record. And a
 * thread's first lock call must not abort when the address space is exhausted (POSIX
 * gives pthread_mutex_lock no ENOMEM; glibc allocates nothing).
 *
 * Run without the preload (the expectations are glibc's) and under it with every
 * KLOCK_MUTEX selection and KLOCK_RWLOCK=pcpu_rwsem.
 */
#include <sys/mman.h>
#include <sys/wait.h>

#include "preload_test.h"

/* A timed lock's wait on a mutex nobody alive holds. */
#define TIMEOUT_MS 20
/* Threads whose first lock call comes after the address space is exhausted: one more
 * than a whole slab of thread records (KLI_THREAD_SLAB in locks/substrate/thread.h), so at least
 * one needs a new one whatever the process used before; no more than the reserve plus
 * the slab. */
#define OOM_WORKERS 64

/* ---- out of memory ---------------------------------------------------------------------- */

struct oom_child {
	sem_t go, done;
	pthread_mutex_t m;
	_Atomic int locked;
};

static void *oom_worker(void *arg)
{
	struct oom_child *c = arg;

	while (sem_wait(&c->go) != 0)
		;
	if (pthread_mutex_lock(&c->m) == 0) {
		atomic_fetch_add(&c->locked, 1);
		pthread_mutex_unlock(&c->m);
	}
	sem_post(&c->done);
	return NULL;
}

/* In the child: threads created first (creating them needs memory), then the address
 * space exhausted, then their first lock calls. */
static int oom_child_run(struct oom_child *c)
{
	pthread_t t;

	for (int i = 0; i < OOM_WORKERS; i++)
		if (pthread_create(&t, NULL, oom_worker, c) != 0)
			return 2;
	if (!klt_limit_address_space(0))
		return 3;
	for (int i = 0; i < OOM_WORKERS; i++)
		sem_post(&c->go);
	for (int i = 0; i < OOM_WORKERS; i++)
		while (sem_wait(&c->done) != 0)
			;
	return atomic_load(&c->locked) == OOM_WORKERS ? 0 : 4;
}

/* First in the file: the process has used few thread records yet. */
static void test_mutex_first_lock_succeeds_with_address_space_exhausted(void **state)
{
	struct oom_child *c;
	int status;
	pid_t pid;

	if (!klt_rlimit_as_ok())
		skip(); /* sanitizers/valgrind need the address space; qemu forks no threads */
	c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(c != MAP_FAILED);
	sem_init(&c->go, 1, 0);
	sem_init(&c->done, 1, 0);
	assert_int_equal(pthread_mutex_init(&c->m, NULL), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(oom_child_run(c));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("child killed by signal %d (aborted for lack of memory?)",
			 WTERMSIG(status));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	munmap(c, sizeof(*c));
}

/* ---- owners that exited ------------------------------------------------------------------ */

struct exited_owner {
	pthread_mutex_t *m;
	int trylock, timed, unlock;
};

static void *lock_and_exit(void *arg)
{
	struct exited_owner *x = arg;

	assert_int_equal(pthread_mutex_lock(x->m), 0);
	return NULL; /* exits holding it */
}

/* On a later thread (under the preload: on the exited thread's recycled record). */
static void *probe(void *arg)
{
	struct exited_owner *x = arg;
	pthread_mutex_t own = PTHREAD_MUTEX_INITIALIZER;
	struct timespec d;

	/* A lock call of our own first: under the preload this thread now has its record. */
	pthread_mutex_lock(&own);
	pthread_mutex_unlock(&own);
	clock_gettime(CLOCK_REALTIME, &d);
	d.tv_nsec += TIMEOUT_MS * 1000000l;
	if (d.tv_nsec >= 1000000000l) {
		d.tv_sec++;
		d.tv_nsec -= 1000000000l;
	}
	x->trylock = pthread_mutex_trylock(x->m);
	x->timed = pthread_mutex_timedlock(x->m, &d);
	x->unlock = pthread_mutex_unlock(x->m);
	return NULL;
}

static void exited_owner_check(int type)
{
	pthread_mutexattr_t a;
	pthread_mutex_t m;
	struct exited_owner x = { .m = &m };
	pthread_t t;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, type);
	assert_int_equal(pthread_mutex_init(&m, &a), 0);
	assert_int_equal(pthread_create(&t, NULL, lock_and_exit, &x), 0);
	pthread_join(t, NULL);
	assert_int_equal(pthread_create(&t, NULL, probe, &x), 0);
	pthread_join(t, NULL);
	assert_int_equal(x.trylock, EBUSY);
	assert_int_equal(x.timed, ETIMEDOUT);
	assert_int_equal(x.unlock, EPERM);
	assert_int_equal(pthread_mutex_trylock(&m), EBUSY); /* still locked */
}

static void test_errorcheck_mutex_of_an_exited_thread_is_nobodys(void **state)
{
	exited_owner_check(PTHREAD_MUTEX_ERRORCHECK);
}

static void test_recursive_mutex_of_an_exited_thread_is_nobodys(void **state)
{
	exited_owner_check(PTHREAD_MUTEX_RECURSIVE);
}

struct exited_writer {
	pthread_rwlock_t *rw;
	int tryrd, trywr, timedrd, timedwr;
};

static void *wrlock_and_exit(void *arg)
{
	struct exited_writer *x = arg;

	assert_int_equal(pthread_rwlock_wrlock(x->rw), 0);
	return NULL; /* exits write-holding it */
}

/* On a later thread (under the preload: on the exited thread's recycled record). The
 * writer's own calls answer EDEADLK (timed ones included); anyone else's wait. No
 * unlock: a non-owner's unlock of a write-held rwlock is undefined, and glibc takes it
 * for a read unlock and returns 0. */
static void *wprobe(void *arg)
{
	struct exited_writer *x = arg;
	pthread_mutex_t own = PTHREAD_MUTEX_INITIALIZER;
	struct timespec d;

	pthread_mutex_lock(&own); /* under the preload this thread now has its record */
	pthread_mutex_unlock(&own);
	clock_gettime(CLOCK_REALTIME, &d);
	d.tv_nsec += TIMEOUT_MS * 1000000l;
	if (d.tv_nsec >= 1000000000l) {
		d.tv_sec++;
		d.tv_nsec -= 1000000000l;
	}
	x->tryrd = pthread_rwlock_tryrdlock(x->rw);
	x->trywr = pthread_rwlock_trywrlock(x->rw);
	x->timedrd = pthread_rwlock_timedrdlock(x->rw, &d);
	x->timedwr = pthread_rwlock_timedwrlock(x->rw, &d);
	return NULL;
}

/* Also run with KLOCK_RWLOCK=pcpu_rwsem, whose writer the interposer names itself. */
static void test_rwlock_write_held_by_an_exited_thread_is_nobodys(void **state)
{
	pthread_rwlock_t rw;
	struct exited_writer x = { .rw = &rw };
	pthread_t t;

	assert_int_equal(pthread_rwlock_init(&rw, NULL), 0);
	assert_int_equal(pthread_create(&t, NULL, wrlock_and_exit, &x), 0);
	pthread_join(t, NULL);
	assert_int_equal(pthread_create(&t, NULL, wprobe, &x), 0);
	pthread_join(t, NULL);
	assert_int_equal(x.tryrd, EBUSY);
	assert_int_equal(x.trywr, EBUSY);
	assert_int_equal(x.timedrd, ETIMEDOUT);
	assert_int_equal(x.timedwr, ETIMEDOUT);
	assert_int_equal(pthread_rwlock_trywrlock(&rw), EBUSY); /* still write-held */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mutex_first_lock_succeeds_with_address_space_exhausted),
		cmocka_unit_test(test_errorcheck_mutex_of_an_exited_thread_is_nobodys),
		cmocka_unit_test(test_recursive_mutex_of_an_exited_thread_is_nobodys),
		cmocka_unit_test(test_rwlock_write_held_by_an_exited_thread_is_nobodys),
	};

	(void)pt_preloaded();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
