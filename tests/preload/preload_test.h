/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/preload_test.h - what the libklock-preload tests share.
 *
 * The preload tests are plain pthread programs (they link no klock). meson runs each
 * twice: without the preload, where the expectations are checked against glibc itself
 * (so the table cannot drift from what glibc does), and with LD_PRELOAD and
 * KLTEST_PRELOAD=1, where they must hold for klock. Helpers here use semaphores and
 * sleeps for their hand-shakes, never the pthread locks under test.
 */
#ifndef PRELOAD_TEST_H
#define PRELOAD_TEST_H

#include <dlfcn.h>
#include <semaphore.h>
#include <sys/syscall.h>

#include "kltest.h"

/* The tag klock writes into its objects ("KLCK" in the top half; preload/klp.h). */
#define PT_MAGIC 0x4b4c434bu
#define PT_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Whether this run is under the preload: KLTEST_PRELOAD=1 says it should be, and then
 * the interposer must really be the one answering (a test that could not fail otherwise). */
static inline bool pt_preloaded(void)
{
	const char *v = getenv("KLTEST_PRELOAD");
	bool want = v != NULL && strcmp(v, "1") == 0;
	Dl_info info;
	void *fn;

	if (!want)
		return false;
	fn = dlsym(RTLD_DEFAULT, "pthread_mutex_lock");
	if (fn == NULL || dladdr(fn, &info) == 0 || info.dli_fname == NULL ||
	    strstr(info.dli_fname, "libklock-preload") == NULL) {
		fprintf(stderr, "KLTEST_PRELOAD=1 but pthread_mutex_lock comes from %s\n",
			fn != NULL && dladdr(fn, &info) != 0 ? info.dli_fname : "?");
		abort();
	}
	return true;
}

/* Whether the kernel tracks robust mutexes for us: qemu-user answers ENOSYS to the
 * robust-list system calls (it cannot walk a guest's list at thread death), so a robust
 * mutex's owner death is never noticed there and those tests are skipped. */
static inline bool pt_robust_supported(void)
{
	void *head;
	size_t len;

	return syscall(SYS_get_robust_list, 0, &head, &len) == 0;
}

/* Whether environment variable @name is set to @value. */
static inline bool getenv_is(const char *name, const char *value)
{
	const char *v = getenv(name);

	return v != NULL && strcmp(v, value) == 0;
}

/* The klock tag of a pthread object whose tag lives at byte offset @off (0 if none). */
static inline uint32_t pt_tag_magic(const void *obj, size_t off)
{
	uint64_t t;

	memcpy(&t, (const char *)obj + off, sizeof(t));
	return (uint32_t)(t >> 32);
}

/* Absolute deadline @ms from now on @clock (negative: in the past). */
static inline struct timespec pt_deadline(clockid_t clock, int64_t ms)
{
	struct timespec ts;
	int64_t t;

	clock_gettime(clock, &ts);
	t = (int64_t)ts.tv_sec * KLT_NSEC_PER_SEC + ts.tv_nsec + ms * 1000000ll;
	ts.tv_sec = t / KLT_NSEC_PER_SEC;
	ts.tv_nsec = t % KLT_NSEC_PER_SEC;
	return ts;
}

static inline int64_t pt_clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * KLT_NSEC_PER_SEC + ts.tv_nsec;
}

/* A thread that runs @fn(@arg) once told to, then waits to be told to finish: the
 * "another thread holds it" state of the tables. */
struct pt_helper {
	pthread_t t;
	sem_t go, done, quit;
	int (*fn)(void *);
	void *arg;
	int ret;
	int (*fin)(void *);   /* run when told to quit (the unlock), may be NULL */
	int fin_ret;
};

static void *pt_helper_main(void *p)
{
	struct pt_helper *h = p;

	while (sem_wait(&h->go) != 0)
		;
	h->ret = h->fn(h->arg);
	sem_post(&h->done);
	while (sem_wait(&h->quit) != 0)
		;
	h->fin_ret = h->fin != NULL ? h->fin(h->arg) : 0;
	return NULL;
}

/* Starts a helper that runs @fn(@arg) now and @fin(@arg) at pt_helper_finish(). */
static inline void pt_helper_start(struct pt_helper *h, int (*fn)(void *), int (*fin)(void *),
				   void *arg)
{
	memset(h, 0, sizeof(*h));
	h->fn = fn;
	h->fin = fin;
	h->arg = arg;
	sem_init(&h->go, 0, 0);
	sem_init(&h->done, 0, 0);
	sem_init(&h->quit, 0, 0);
	assert_int_equal(pthread_create(&h->t, NULL, pt_helper_main, h), 0);
	sem_post(&h->go);
	while (sem_wait(&h->done) != 0)
		;
}

static inline int pt_helper_finish(struct pt_helper *h)
{
	sem_post(&h->quit);
	assert_int_equal(pthread_join(h->t, NULL), 0);
	sem_destroy(&h->go);
	sem_destroy(&h->done);
	sem_destroy(&h->quit);
	return h->fin_ret;
}

#endif /* PRELOAD_TEST_H */
