/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/stat_exit_shim.c - stands in for an allocator that flushes a per-thread cache
 * under its own pthread mutex when a thread exits (jemalloc's tcache/arena unbinding):
 * a thread-specific-data destructor that locks shim_lock. At that point the stack is
 * libc's start_thread -> TSD destructors -> this library: no program frame at all.
 * klock_stat_checks.py preloads it with KLOCK_LOCKSTAT_SKIP naming it (so klock-stat
 * treats it as an allocator) and checks that the contended wait is charged to libc's
 * thread-exit code, never to this library.
 *
 *   shim_exit_hold(1)  the calling thread locks shim_lock (the "allocator" is busy)
 *   shim_exit_hold(0)  unlocks it
 *   shim_exit_arm()    the calling thread will lock and unlock shim_lock when it exits
 */
#include <pthread.h>

#define SHIM_API __attribute__((visibility("default")))

SHIM_API void shim_exit_hold(int on);
SHIM_API void shim_exit_arm(void);

static pthread_mutex_t shim_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t shim_key;
static pthread_once_t shim_once = PTHREAD_ONCE_INIT;

static void shim_flush(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&shim_lock);
	pthread_mutex_unlock(&shim_lock);
}

static void shim_key_init(void)
{
	pthread_key_create(&shim_key, shim_flush);
}

SHIM_API void shim_exit_hold(int on)
{
	if (on)
		pthread_mutex_lock(&shim_lock);
	else
		pthread_mutex_unlock(&shim_lock);
}

SHIM_API void shim_exit_arm(void)
{
	static char armed; /* any non-NULL value runs the destructor */

	pthread_once(&shim_once, shim_key_init);
	pthread_setspecific(shim_key, &armed);
}
