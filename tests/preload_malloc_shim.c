/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload_malloc_shim.c - a malloc that takes a pthread mutex around every call, as
 * jemalloc does. Under libklock-preload that mutex is a klock mutex, so klock must never
 * call malloc on a path that a lock call can reach before the calling thread's record
 * exists (the recursion would never end) - tests/preload_programs.py runs programs with
 * this shim preloaded after libklock-preload.so.
 */
#include <malloc.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static pthread_mutex_t heap = PTHREAD_MUTEX_INITIALIZER;

static void heap_lock(void)
{
	pthread_mutex_lock(&heap);
}

static void heap_unlock(void)
{
	pthread_mutex_unlock(&heap);
}

void *malloc(size_t n)
{
	void *p;

	heap_lock();
	p = __libc_malloc(n);
	heap_unlock();
	return p;
}

void *calloc(size_t n, size_t m)
{
	void *p;

	heap_lock();
	p = __libc_calloc(n, m);
	heap_unlock();
	return p;
}

void *realloc(void *old, size_t n)
{
	void *p;

	heap_lock();
	p = __libc_realloc(old, n);
	heap_unlock();
	return p;
}

void *memalign(size_t a, size_t n)
{
	void *p;

	heap_lock();
	p = __libc_memalign(a, n);
	heap_unlock();
	return p;
}

void *aligned_alloc(size_t a, size_t n)
{
	return memalign(a, n);
}

int posix_memalign(void **out, size_t a, size_t n)
{
	void *p = memalign(a, n);

	if (p == NULL)
		return 12; /* ENOMEM */
	*out = p;
	return 0;
}

void free(void *p)
{
	heap_lock();
	__libc_free(p);
	heap_unlock();
}
