/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/preload_ctor_shim.c - a library whose constructor uses every kind of pthread lock
 * before libklock-preload's constructor has run (LiTL's litl#1 crash: a lock call before
 * the interposer's constructor). Preloaded after libklock-preload.so, so ld.so runs this
 * constructor first. It prints one line, which the test driver checks.
 *
 * Its first call is malloc(): with tests/preload/preload_malloc_shim.c preloaded too, that is the
 * thread's first lock call, on the heap mutex, made before the interposer's constructor
 * (as jemalloc's constructor locks its init mutex): klock attaches the thread there, in
 * the middle of the heap mutex's lock call, and must not allocate while it does.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t r = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;

__attribute__((constructor)) static void shim_ctor(void)
{
	struct timespec ts;
	pthread_spinlock_t s;
	int ok = 1;
	void *volatile p = malloc(64); /* first (see the top); volatile: not elided */

	ok &= p != NULL;
	free(p);
	ok &= pthread_mutex_lock(&m) == 0;
	clock_gettime(CLOCK_REALTIME, &ts);
	ok &= pthread_cond_timedwait(&c, &m, &ts) == ETIMEDOUT;
	ok &= pthread_cond_signal(&c) == 0;
	ok &= pthread_mutex_unlock(&m) == 0;
	ok &= pthread_mutex_lock(&r) == 0 && pthread_mutex_lock(&r) == 0;
	ok &= pthread_mutex_unlock(&r) == 0 && pthread_mutex_unlock(&r) == 0;
	ok &= pthread_rwlock_rdlock(&rw) == 0 && pthread_rwlock_unlock(&rw) == 0;
	ok &= pthread_spin_init(&s, PTHREAD_PROCESS_PRIVATE) == 0;
	ok &= pthread_spin_lock(&s) == 0 && pthread_spin_unlock(&s) == 0;
	fprintf(stderr, "ctor-shim: %s\n", ok ? "locks ok" : "locks FAILED");
}
