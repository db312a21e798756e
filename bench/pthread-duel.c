/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/pthread-duel.c - the "giant lock" duel with nothing but pthread calls: N threads
 * take one global pthread_mutex_t for a short critical section, as fast as they can, for
 * a fixed time. It links no klock: run it plain (glibc's mutex) and under
 * LD_PRELOAD=libklock-preload.so (klock's kl_mutex, untouched program) and compare.
 *
 *   pthread-duel [-t threads] [-s seconds] [-w work] [-o outside] [-k kind] [-r repeats]
 *     -t  threads (default 2; more than CPUs is the oversubscribed case)
 *     -s  seconds per run (default 1)
 *     -w  increments of shared data inside the lock (default 4: a tiny section)
 *     -o  private work outside the lock (default 0: the tight duel)
 *     -k  normal | adaptive | errorcheck | recursive | static (default: static,
 *         PTHREAD_MUTEX_INITIALIZER, what most programs use)
 *     -r  runs (default 1); one line each
 * Output, one line per run:
 *   duel threads=2 kind=static work=4 outside=0 secs=1.00 ops=123 mops=0.12 fair=1.03
 * where fair is max/min acquisitions over the threads. The shared counter is checked
 * after every run: a lock that lost an update fails loudly.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
#define NSEC 1000000000ll

struct worker {
	pthread_t t;
	long ops;
	char pad[64];
};

static pthread_mutex_t giant = PTHREAD_MUTEX_INITIALIZER;
static volatile long shared[8];
static long work = 4, outside;
static atomic_bool stop;
static sem_t start;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * NSEC + ts.tv_nsec;
}

static void *duel(void *arg)
{
	struct worker *w = arg;
	volatile long mine = 0;
	long n = 0;

	while (sem_wait(&start) != 0)
		;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		pthread_mutex_lock(&giant);
		for (long i = 0; i < work; i++)
			shared[i & 7]++;
		pthread_mutex_unlock(&giant);
		for (long i = 0; i < outside; i++)
			mine++;
		n++;
	}
	w->ops = n;
	return NULL;
}

static int make_mutex(const char *kind)
{
	pthread_mutexattr_t a;
	int type;

	if (strcmp(kind, "static") == 0)
		return 0;
	if (strcmp(kind, "normal") == 0)
		type = PTHREAD_MUTEX_NORMAL;
	else if (strcmp(kind, "adaptive") == 0)
		type = PTHREAD_MUTEX_ADAPTIVE_NP;
	else if (strcmp(kind, "errorcheck") == 0)
		type = PTHREAD_MUTEX_ERRORCHECK;
	else if (strcmp(kind, "recursive") == 0)
		type = PTHREAD_MUTEX_RECURSIVE;
	else
		return EINVAL;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, type);
	pthread_mutex_init(&giant, &a);
	pthread_mutexattr_destroy(&a);
	return 0;
}

static int one_run(int nt, double secs, const char *kind)
{
	static struct worker w[MAX_THREADS];
	long total = 0, lo = -1, hi = 0, expect;
	int64_t t0, t1;

	memset((void *)shared, 0, sizeof(shared));
	atomic_store(&stop, false);
	sem_init(&start, 0, 0);
	for (int i = 0; i < nt; i++)
		if (pthread_create(&w[i].t, NULL, duel, &w[i]) != 0)
			return 1;
	t0 = now_ns();
	for (int i = 0; i < nt; i++)
		sem_post(&start);
	usleep((useconds_t)(secs * 1e6));
	atomic_store(&stop, true);
	for (int i = 0; i < nt; i++) {
		pthread_join(w[i].t, NULL);
		total += w[i].ops;
		lo = lo < 0 || w[i].ops < lo ? w[i].ops : lo;
		hi = w[i].ops > hi ? w[i].ops : hi;
	}
	t1 = now_ns();
	expect = 0;
	for (int i = 0; i < 8; i++)
		expect += shared[i];
	if (expect != total * work) {
		fprintf(stderr, "pthread-duel: LOST UPDATES: %ld increments, expected %ld\n",
			expect, total * work);
		return 1;
	}
	printf("duel threads=%d kind=%s work=%ld outside=%ld secs=%.2f ops=%ld mops=%.3f "
	       "fair=%.2f\n", nt, kind, work, outside, (double)(t1 - t0) / NSEC, total,
	       (double)total / ((double)(t1 - t0) / NSEC) / 1e6,
	       lo > 0 ? (double)hi / (double)lo : 0.0);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	const char *kind = "static";
	double secs = 1.0;
	int nt = 2, runs = 1, c;

	while ((c = getopt(argc, argv, "t:s:w:o:k:r:")) != -1) {
		switch (c) {
		case 't': nt = atoi(optarg); break;
		case 's': secs = atof(optarg); break;
		case 'w': work = atol(optarg); break;
		case 'o': outside = atol(optarg); break;
		case 'k': kind = optarg; break;
		case 'r': runs = atoi(optarg); break;
		default:
			fputs("usage: pthread-duel [-t threads] [-s seconds] [-w work] [-o outside] "
			      "[-k static|normal|adaptive|errorcheck|recursive] [-r runs]\n", stderr);
			return 2;
		}
	}
	if (nt < 1 || nt > MAX_THREADS || secs <= 0 || work < 0 || outside < 0 || runs < 1 ||
	    make_mutex(kind) != 0) {
		fputs("pthread-duel: bad arguments\n", stderr);
		return 2;
	}
	for (int r = 0; r < runs; r++)
		if (one_run(nt, secs, kind) != 0)
			return 1;
	return 0;
}
