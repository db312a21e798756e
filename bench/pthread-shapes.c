/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/pthread-shapes.c - three lock shapes real programs have, in plain pthread calls,
 * to compare the interposer's KLOCK_MUTEX selections with glibc. Links
 * no klock: run it plain and under LD_PRELOAD=libklock-preload.so (bench/preload_ab.py).
 *
 *   pthread-shapes -m longhold|convoy|queue [-t threads] [-s seconds]
 *     longhold  one thread holds the mutex for the whole run, -t waiters block on it
 *               (redis' idle I/O threads): prints the waiters' CPU in ms (cpu_ms=) - the
 *               lower the better, glibc: ~0
 *     convoy    -t threads take one mutex; every CONVOY_EVERY-th section sleeps
 *               CONVOY_SLEEP_US inside it (a holder that blocks or is preempted), the
 *               others are tiny: ops/s in mops=
 *     queue     -t/2 producers and -t/2 consumers (at least 1 each) on a bounded queue
 *               under one mutex and two condition variables (a work queue): items/s in
 *               mops=
 * One line per run, e.g. "shape=queue threads=4 secs=1.00 ops=123456 mops=0.123".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define NSEC 1000000000ll
/* convoy: one section in this many sleeps inside the lock... */
#define CONVOY_EVERY 64
/* ... for this long. */
#define CONVOY_SLEEP_US 100
/* queue: capacity of the bounded queue. */
#define QUEUE_CAP 64

static pthread_mutex_t mx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static atomic_bool stop;
static long shared, qlen, consumed;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * NSEC + ts.tv_nsec;
}

static void *waiter(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mx);
	pthread_mutex_unlock(&mx);
	return NULL;
}

static void *convoy(void *arg)
{
	long n = 0;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		pthread_mutex_lock(&mx);
		shared++;
		if (++n % CONVOY_EVERY == 0)
			usleep(CONVOY_SLEEP_US);
		pthread_mutex_unlock(&mx);
	}
	*(long *)arg = n;
	return NULL;
}

static void *producer(void *arg)
{
	long n = 0;

	pthread_mutex_lock(&mx);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		while (qlen == QUEUE_CAP && !atomic_load(&stop))
			pthread_cond_wait(&not_full, &mx);
		qlen++;
		n++;
		pthread_cond_signal(&not_empty);
		pthread_mutex_unlock(&mx);
		pthread_mutex_lock(&mx);
	}
	pthread_mutex_unlock(&mx);
	*(long *)arg = n;
	return NULL;
}

static void *consumer(void *arg)
{
	long n = 0;

	pthread_mutex_lock(&mx);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		while (qlen == 0 && !atomic_load(&stop))
			pthread_cond_wait(&not_empty, &mx);
		if (qlen > 0) {
			qlen--;
			n++;
			consumed++;
			pthread_cond_signal(&not_full);
		}
		pthread_mutex_unlock(&mx);
		pthread_mutex_lock(&mx);
	}
	pthread_mutex_unlock(&mx);
	*(long *)arg = n;
	return NULL;
}

static long long thread_cpu_ns(pthread_t t)
{
	clockid_t id;
	struct timespec ts;

	if (pthread_getcpuclockid(t, &id) != 0 || clock_gettime(id, &ts) != 0)
		return -1;
	return (long long)ts.tv_sec * NSEC + ts.tv_nsec;
}

static void sleep_secs(double secs)
{
	struct timespec ts = { (time_t)secs, (long)((secs - (long)secs) * NSEC) };

	nanosleep(&ts, NULL);
}

static int run_longhold(int n, double secs)
{
	pthread_t t[MAX_THREADS];
	long long cpu = 0;

	pthread_mutex_lock(&mx);
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, waiter, NULL);
	sleep_secs(secs);
	for (int i = 0; i < n; i++)
		cpu += thread_cpu_ns(t[i]);
	pthread_mutex_unlock(&mx);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("shape=longhold threads=%d secs=%.2f cpu_ms=%.1f\n", n, secs, (double)cpu / 1e6);
	return 0;
}

static int run_timed(const char *shape, int n, double secs)
{
	pthread_t t[MAX_THREADS];
	long ops[MAX_THREADS] = { 0 }, total = 0;
	bool queue = strcmp(shape, "queue") == 0;
	long long t0 = now_ns(), t1;

	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, !queue ? convoy : i % 2 ? consumer : producer, &ops[i]);
	sleep_secs(secs);
	atomic_store(&stop, true);
	pthread_mutex_lock(&mx);
	pthread_cond_broadcast(&not_empty);
	pthread_cond_broadcast(&not_full);
	pthread_mutex_unlock(&mx);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	t1 = now_ns();
	for (int i = 0; i < n; i++)
		if (!queue || i % 2)
			total += ops[i];
	if (!queue && total != shared) {
		fprintf(stderr, "pthread-shapes: lost updates (%ld != %ld)\n", total, shared);
		return 1;
	}
	printf("shape=%s threads=%d secs=%.2f ops=%ld mops=%.4f\n", shape, n,
	       (double)(t1 - t0) / NSEC, total, (double)total / ((double)(t1 - t0) / NSEC) / 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	const char *shape = "convoy";
	int n = 4, c;
	double secs = 1;

	while ((c = getopt(argc, argv, "m:t:s:")) != -1) {
		if (c == 'm')
			shape = optarg;
		else if (c == 't')
			n = atoi(optarg);
		else if (c == 's')
			secs = atof(optarg);
		else
			return 2;
	}
	if (n < 2 || n > MAX_THREADS)
		n = n < 2 ? 2 : MAX_THREADS;
	if (strcmp(shape, "longhold") == 0)
		return run_longhold(n, secs);
	if (strcmp(shape, "convoy") == 0 || strcmp(shape, "queue") == 0)
		return run_timed(shape, n, secs);
	fprintf(stderr, "usage: pthread-shapes -m longhold|convoy|queue [-t N] [-s secs]\n");
	return 2;
}
