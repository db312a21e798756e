/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/contention_target.c - a pthread program that contends one static mutex on
 * request, for klock-contention's check (tests/preload/klock_contention_check.py).
 *
 *   contention-target
 *
 * Prints "ready <pid>", then waits for SIGUSR1 (a tracer attaches meanwhile). Then
 * WORKERS threads (started together) each take `contention_lock` ROUNDS times in
 * contention_worker_loop(), holding it across a short busy loop and a sched_yield() so
 * that they collide, print "done <acquisitions> <ns>" (the contended phase's wall time:
 * the probes' cost, with and without a tracer attached, docs/lockstat.md), wait for a
 * second SIGUSR1 (a tracer reads its tables meanwhile, naming callers while the process
 * lives) and return from main() (klock-stat's exit report is written then).
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* Threads that contend, and acquisitions each. */
#define WORKERS 4
#define ROUNDS 5000
/* Busy iterations inside the critical section. */
#define HOLD_SPIN 200

static pthread_mutex_t contention_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long contention_counter;
static pthread_barrier_t start_line;   /* the workers start together */

static __attribute__((noinline)) void contention_worker_loop(void)
{
	for (int i = 0; i < ROUNDS; i++) {
		pthread_mutex_lock(&contention_lock);
		for (int k = 0; k < HOLD_SPIN; k++)
			contention_counter++;
		sched_yield();   /* the others run into the held lock, even on one CPU */
		pthread_mutex_unlock(&contention_lock);
	}
}

static void *worker(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&start_line);
	contention_worker_loop();
	return NULL;
}

int main(void)
{
	pthread_t t[WORKERS];
	struct timespec t0, t1;
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* the workers inherit the mask */
	printf("ready %ld\n", (long)getpid());
	fflush(stdout);
	if (sigwait(&set, &sig) != 0)
		return 1;
	pthread_barrier_init(&start_line, NULL, WORKERS);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < WORKERS; i++)
		if (pthread_create(&t[i], NULL, worker, NULL) != 0)
			return 1;
	for (int i = 0; i < WORKERS; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("done %lu %lld\n", (unsigned long)WORKERS * ROUNDS,
	       (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
	fflush(stdout);
	return sigwait(&set, &sig) == 0 ? 0 : 1;
}
