/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/unit/test_thread.c - the thread registry: per-thread records, recycling, scanning. */
#include <semaphore.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <klock/mutex.h>
#include <klock/pcpu_rwsem.h>
#include <klock/rmlock.h>
#include "kltest.h"
#include "thread.h"

#define CHURN_ROUNDS 50
#define CHURN_WIDTH 4

static void *record_of_thread(void *arg)
{
	struct kli_thread **out = arg;

	*out = kli_self();
	assert_ptr_equal(kli_self(), *out);   /* stable within the thread */
	assert_true(atomic_load(&(*out)->live));
	return NULL;
}

static void test_thread_record_is_per_thread(void **state)
{
	struct kli_thread *mine = kli_self(), *theirs = NULL;
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, record_of_thread, &theirs), 0);
	pthread_join(t, NULL);
	assert_non_null(theirs);
	assert_ptr_not_equal(mine, theirs);
	assert_true(((uintptr_t)mine % KL_ARCH_PAD) == 0);  /* owner words use the low bits */
}

static bool registry_contains(const struct kli_thread *r)
{
	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next)
		if (t == r)
			return true;
	return false;
}

static void test_thread_records_are_recycled_after_exit(void **state)
{
	struct kli_thread *seen[CHURN_ROUNDS];
	unsigned before;
	pthread_t t;

	/* Warm up: one record on the free list. */
	assert_int_equal(pthread_create(&t, NULL, record_of_thread, &seen[0]), 0);
	pthread_join(t, NULL);
	before = kli_thread_count();
	for (int i = 0; i < CHURN_ROUNDS; i++) {
		assert_int_equal(pthread_create(&t, NULL, record_of_thread, &seen[i]), 0);
		pthread_join(t, NULL);
		assert_true(registry_contains(seen[i]));
		assert_false(atomic_load(&seen[i]->live));
	}
	/* Sequential threads reuse records instead of allocating new ones. */
	assert_true(kli_thread_count() <= before + 1);
}

static _Atomic bool churn_stop;
static _Atomic long scans;

static void *scanner(void *arg)
{
	(void)arg;
	while (!atomic_load(&churn_stop)) {
		unsigned n = 0, bound = kli_thread_count();

		for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next)
			n++;
		assert_true(n <= bound + CHURN_WIDTH); /* list is finite and well-formed */
		atomic_fetch_add(&scans, 1);
	}
	return NULL;
}

static void *churner(void *arg)
{
	struct kli_thread *r = kli_self();

	assert_true(registry_contains(r));   /* a scanner can always find a live record */
	return arg;
}

static void test_thread_registry_scan_survives_churn(void **state)
{
	pthread_t s, t[CHURN_WIDTH];

	atomic_store(&churn_stop, false);
	assert_int_equal(pthread_create(&s, NULL, scanner, NULL), 0);
	for (int r = 0; r < CHURN_ROUNDS; r++) {
		for (int i = 0; i < CHURN_WIDTH; i++)
			assert_int_equal(pthread_create(&t[i], NULL, churner, NULL), 0);
		for (int i = 0; i < CHURN_WIDTH; i++)
			pthread_join(t[i], NULL);
	}
	atomic_store(&churn_stop, true);
	pthread_join(s, NULL);
	assert_true(atomic_load(&scans) > 0);
}

static _Atomic int exits_seen;
static struct kli_thread *_Atomic exited_record;

static void count_exit(struct kli_thread *self)
{
	atomic_fetch_add(&exits_seen, 1);
	atomic_store(&exited_record, self);
}

static void test_thread_exit_hook_sees_the_exiting_record(void **state)
{
	struct kli_thread *r = NULL;
	pthread_t t;

	kli_thread_on_exit(count_exit);
	kli_thread_on_exit(count_exit); /* registering twice runs it once */
	atomic_store(&exits_seen, 0);
	assert_int_equal(pthread_create(&t, NULL, record_of_thread, &r), 0);
	pthread_join(t, NULL);
	assert_int_equal(atomic_load(&exits_seen), 1);
	assert_ptr_equal(atomic_load(&exited_record), r);
}

/* ---- out of memory (issue 13 item 5) ------------------------------------------------- */

/* Threads that attach after the address space is exhausted: fewer than the reserve. */
#define OOM_WORKERS 8
/* Holders that keep records busy, so that the workers need a new slab: at most this many
 * (the free list plus one slab). */
#define OOM_HOLDERS_MAX (2 * KLI_THREAD_SLAB + KLT_MAX_THREADS)

struct oom_child {
	sem_t attached, go, done;
	struct kl_mutex m;
	_Atomic int locked;
};

/* Attaches (takes a record), then keeps it until the child exits. */
static void *oom_holder(void *arg)
{
	struct oom_child *c = arg;

	(void)kli_self();
	sem_post(&c->attached);
	for (;;)
		pause();
	return NULL;
}

/* Created before the limit, attaches after it: its first lock needs a record. */
static void *oom_worker(void *arg)
{
	struct oom_child *c = arg;

	while (sem_wait(&c->go) != 0)
		;
	kl_mutex_lock(&c->m);
	atomic_fetch_add(&c->locked, 1);
	kl_mutex_unlock(&c->m);
	sem_post(&c->done);
	return NULL;
}

/* In the child: use up the free list and the current slab, start the workers, exhaust the
 * address space, let them lock. Exit status 0 when every worker locked and unlocked. */
static int oom_child_run(struct oom_child *c)
{
	unsigned before = kli_thread_count();
	pthread_t t;
	int holders = 0;

	while (holders < OOM_HOLDERS_MAX &&
	       (kli_thread_count() == before || kli_thread_count() % KLI_THREAD_SLAB != 0)) {
		if (pthread_create(&t, NULL, oom_holder, c) != 0)
			return 2;
		while (sem_wait(&c->attached) != 0)
			;
		holders++;
	}
	if (kli_thread_count() % KLI_THREAD_SLAB != 0)
		return 3; /* could not line up with a slab's end */
	for (int i = 0; i < OOM_WORKERS; i++)
		if (pthread_create(&t, NULL, oom_worker, c) != 0)
			return 4;
	if (!klt_limit_address_space(0))
		return 5;
	for (int i = 0; i < OOM_WORKERS; i++)
		sem_post(&c->go);
	for (int i = 0; i < OOM_WORKERS; i++)
		while (sem_wait(&c->done) != 0)
			;
	return atomic_load(&c->locked) == OOM_WORKERS ? 0 : 6;
}

/* A thread's first lock needs its record; with the address space exhausted it comes
 * from the static reserve instead of aborting ("out of memory for a thread record"). */
static void test_thread_first_lock_succeeds_with_address_space_exhausted(void **state)
{
	struct oom_child *c;
	int status;
	pid_t pid;

	if (!klt_rlimit_as_ok())
		skip(); /* sanitizers/valgrind need the address space; qemu forks no threads */
	c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(c != MAP_FAILED);
	sem_init(&c->attached, 1, 0);
	sem_init(&c->go, 1, 0);
	sem_init(&c->done, 1, 0);
	kl_mutex_init(&c->m);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(oom_child_run(c));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("child killed by signal %d (aborted for lack of a record?)",
			 WTERMSIG(status));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(atomic_load(&c->locked), OOM_WORKERS);
	munmap(c, sizeof(*c));
}

/* ---- read holds at thread exit (issue 13 item 16) --------------------------------------- */

/* rmlocks one thread read-holds at once: two more than its slots, so two holds overflow. */
#define EXIT_RMLOCKS (KL_RM_SLOTS + 2)

static struct kl_rmlock exit_rm[EXIT_RMLOCKS];

static void *read_all_and_exit(void *arg)
{
	static struct kl_rm_tracker tr[EXIT_RMLOCKS];

	(void)arg;
	for (int i = 0; i < EXIT_RMLOCKS; i++)
		kl_rmlock_read_lock(&exit_rm[i], &tr[i]);
	return NULL; /* exits holding them all */
}

/* The header promises that a thread's read holds are dropped when it exits: the holds
 * past KL_RM_SLOTS (kept in the locks' overflow counts) too, or their writers would wait
 * for ever. */
static void test_thread_exit_drops_rmlock_read_holds_past_the_slots(void **state)
{
	unsigned long n0 = kli_report_count();
	pthread_t t;

	KLT_SKIP_IF_WITNESS(); /* witness reports the exit with locks held (abort in CI) */
	setenv("KLOCK_ON_ERROR", "warn", 1); /* debug builds report each dropped hold */
	for (int i = 0; i < EXIT_RMLOCKS; i++)
		assert_int_equal(kl_rmlock_init(&exit_rm[i], 0), 0);
	assert_int_equal(pthread_create(&t, NULL, read_all_and_exit, NULL), 0);
	pthread_join(t, NULL);
	for (int i = 0; i < EXIT_RMLOCKS; i++) {
		if (!kl_rmlock_write_trylock(&exit_rm[i]))
			fail_msg("rmlock %d of %d is still read-held after its reader exited", i + 1,
				 EXIT_RMLOCKS);
		kl_rmlock_write_unlock(&exit_rm[i]);
		assert_int_equal(kl_rmlock_destroy(&exit_rm[i]), 0);
	}
	assert_int_equal(kli_report_count() - n0, KLOCK_DEBUG_LOCKS ? EXIT_RMLOCKS : 0);
}

static struct kl_pcpu_rwsem exit_sem;

static void *pcpu_read_and_exit(void *arg)
{
	(void)arg;
	kl_pcpu_rwsem_read_lock(&exit_sem);
	return NULL; /* exits inside the read section */
}

/* A kl_pcpu_rwsem read hold is a per-CPU count that cannot be dropped at exit (writers
 * then wait for ever: documented); debug builds say so when the thread exits. */
static void test_thread_exit_inside_a_pcpu_rwsem_read_section_is_reported(void **state)
{
	unsigned long n0 = kli_report_count();
	pthread_t t;

	if (!KLOCK_DEBUG_LOCKS)
		skip(); /* only debug builds track a thread's pcpu_rwsem read holds */
	KLT_SKIP_IF_WITNESS();
	setenv("KLOCK_ON_ERROR", "warn", 1);
	assert_int_equal(kl_pcpu_rwsem_init(&exit_sem), 0);
	assert_int_equal(pthread_create(&t, NULL, pcpu_read_and_exit, NULL), 0);
	pthread_join(t, NULL);
	assert_int_equal(kli_report_count() - n0, 1);
	/* The semaphore stays read-held for ever; it is left undestroyed. */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thread_record_is_per_thread),
		cmocka_unit_test(test_thread_records_are_recycled_after_exit),
		cmocka_unit_test(test_thread_registry_scan_survives_churn),
		cmocka_unit_test(test_thread_exit_hook_sees_the_exiting_record),
		cmocka_unit_test(test_thread_first_lock_succeeds_with_address_space_exhausted),
		cmocka_unit_test(test_thread_exit_drops_rmlock_read_holds_past_the_slots),
		cmocka_unit_test(test_thread_exit_inside_a_pcpu_rwsem_read_section_is_reported),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
