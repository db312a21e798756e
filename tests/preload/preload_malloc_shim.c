/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/preload_malloc_shim.c - a malloc that takes a pthread mutex around every call, as
 * jemalloc does. Under libklock-preload that mutex is a klock mutex, so klock must never
 * call malloc on a path that a lock call can reach before the calling thread's record
 * exists (the recursion would never end) - tests/preload/preload_programs.py runs programs with
 * this shim preloaded after libklock-preload.so.
 *
 * KLTEST_MALLOC_SHIM_STRICT=1: a malloc() called from inside the heap mutex's own lock or
 * unlock call on the same thread (klock allocating while it attaches the thread, or while
 * it records the holder of a FIFO lock) prints a line and aborts. With jemalloc that
 * nested call is a self-deadlock on the heap mutex (KLOCK_MUTEX=ticket hung there); the
 * check turns the hang, and the luckier orderings that do not hang, into a clear failure.
 */
#include <malloc.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

/* The project builds with -fvisibility=hidden: these must be seen to replace malloc. */
#define SHIM_EXPORT __attribute__((visibility("default")))

static pthread_mutex_t heap = PTHREAD_MUTEX_INITIALIZER;

/* This thread is inside heap_lock() .. heap_unlock(). */
static __thread int in_heap;

static int strict(void)
{
	static int on = -1;

	if (on < 0) {
		const char *v = getenv("KLTEST_MALLOC_SHIM_STRICT");

		on = v != NULL && strcmp(v, "1") == 0;
	}
	return on;
}

static void heap_lock(void)
{
	if (in_heap && strict()) {
		static const char msg[] = "malloc-shim: malloc re-entered from inside the heap "
					  "mutex's lock/unlock on the same thread\n";

		if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
			/* aborting anyway */
		}
		abort();
	}
	in_heap = 1;
	pthread_mutex_lock(&heap);
}

static void heap_unlock(void)
{
	pthread_mutex_unlock(&heap);
	in_heap = 0;
}

SHIM_EXPORT void *malloc(size_t n)
{
	void *p;

	heap_lock();
	p = __libc_malloc(n);
	heap_unlock();
	return p;
}

SHIM_EXPORT void *calloc(size_t n, size_t m)
{
	void *p;

	heap_lock();
	p = __libc_calloc(n, m);
	heap_unlock();
	return p;
}

SHIM_EXPORT void *realloc(void *old, size_t n)
{
	void *p;

	heap_lock();
	p = __libc_realloc(old, n);
	heap_unlock();
	return p;
}

SHIM_EXPORT void *memalign(size_t a, size_t n)
{
	void *p;

	heap_lock();
	p = __libc_memalign(a, n);
	heap_unlock();
	return p;
}

SHIM_EXPORT void *aligned_alloc(size_t a, size_t n)
{
	return memalign(a, n);
}

SHIM_EXPORT int posix_memalign(void **out, size_t a, size_t n)
{
	void *p = memalign(a, n);

	if (p == NULL)
		return 12; /* ENOMEM */
	*out = p;
	return 0;
}

SHIM_EXPORT void free(void *p)
{
	heap_lock();
	__libc_free(p);
	heap_unlock();
}
