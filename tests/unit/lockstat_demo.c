/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/lockstat_demo.c - a small program for the KLOCK_LOCKSTAT=... test
 * (tests/unit/lockstat_env_check.py): the main thread holds "demo_lock" while demo_worker()
 * waits for it, then the program returns from main(), so lockstat's exit report runs.
 * Prints "demo: done" on stdout.
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include <klock/klock.h>
#include <klock/names.h>
#include "seamlock.h"

/* How long the main thread keeps the worker waiting once it sleeps. */
#define HOLD_MS 5
/* Give up waiting for the worker to sleep after this many 1 ms polls. */
#define POLL_MAX 10000

static struct seamlock demo_lock = SEAMLOCK_INIT;

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

static KL_NOINLINE void *demo_worker(void *arg)
{
	(void)arg;
	seamlock_lock(&demo_lock);
	seamlock_unlock(&demo_lock);
	return NULL;
}

int main(void)
{
	pthread_t t;
	int polls = 0;

	kl_lock_set_name(&demo_lock, "demo_lock");
	seamlock_lock(&demo_lock);
	if (pthread_create(&t, NULL, demo_worker, NULL) != 0)
		return 1;
	while (!seamlock_has_sleeper(&demo_lock) && polls++ < POLL_MAX)
		sleep_ms(1);
	sleep_ms(HOLD_MS);
	seamlock_unlock(&demo_lock);
	pthread_join(t, NULL);
	/* kl_version() also links init.c (the library constructor) into this static link. */
	printf("demo: done (klock %s)\n", kl_version());
	return polls < POLL_MAX ? 0 : 1;
}
