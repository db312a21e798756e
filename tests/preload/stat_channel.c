/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/stat_channel.c - a process that serves lockstat's attach channel without the
 * interposer (tests/preload/stat_attach_checks.py): linked with klock itself, so it also runs in
 * sanitizer builds, where libklock-preload cannot be preloaded.
 *
 *   KLOCK_LOCKSTAT=1 stat-channel [--wait-go]
 *
 * Starts lockstat's control thread the way libklock-preload's first pthread_create()
 * does (with KLOCK_LOCKSTAT set and no KLOCK_LOCKSTAT_CTL: the attach channel), contends
 * one kl_mutex once (a report with a row), prints "ready <pid>" and waits until its
 * standard input ends.
 *   --wait-go  first waits for one line on standard input (a test binds the channel's
 *              name before the control thread tries to).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <klock/klock.h>
#include "kl_internal.h"
#include "lockstat_impl.h"

/* Longest "go" line read with --wait-go. */
#define GO_LINE 64

static struct kl_mutex channel_lock = KL_MUTEX_INITIALIZER;

static void *channel_waiter(void *arg)
{
	(void)arg;
	kl_mutex_lock(&channel_lock);
	kl_mutex_unlock(&channel_lock);
	return NULL;
}

/* One contended acquisition of channel_lock (the holder sleeps until the waiter queues:
 * if it does not, the report simply has no row - nothing here depends on one). */
static void contend_once(void)
{
	pthread_t t;

	kl_mutex_lock(&channel_lock);
	if (pthread_create(&t, NULL, channel_waiter, NULL) == 0) {
		usleep(20000);
		kl_mutex_unlock(&channel_lock);
		pthread_join(t, NULL);
		return;
	}
	kl_mutex_unlock(&channel_lock);
}

int main(int argc, char **argv)
{
	char line[GO_LINE];

	kli_init();
	if (argc > 1 && strcmp(argv[1], "--wait-go") == 0 &&
	    fgets(line, sizeof(line), stdin) == NULL)
		return 1;
	kli_lockstat_ctl_start(pthread_create);
	contend_once();
	printf("ready %ld\n", (long)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin) != NULL)
		;
	return 0;
}
