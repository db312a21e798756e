/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/rw-revoke.c - what a kl_rwlock writer pays to revoke the reader bias, against the
 * number of threads that have used klock. A revoking writer reads the lock's column in
 * every thread record ever registered (locks/primitives/rwlock.c, rw_revoke(); records are reused,
 * never unlinked), so the cost grows with the process's thread count - on a 256-CPU
 * machine running a thread per CPU, 256 records at least, each line last written by
 * another CPU.
 *
 *   rw-revoke [-c] [-n reps] THREADS... (THREADS ascending: records are never unlinked,
 *                                        so a run scans as many as the largest before it)
 * For each THREADS, starts that many threads in all (each takes a biased read hold of a
 * lock of its own once, so its record exists and its slot line has been written on its
 * CPU, then waits), and times REPS (default 2001) write lock/unlock pairs of one lock
 * with the bias on (turned on before each pair, as a reader that lost a race would) and
 * REPS without it, interleaved. With -c (cold), REVOKE_EVICT_BYTES are written before
 * each timed pair, so the records come from memory, not from the writer's cache (the
 * case of records whose lines their threads keep writing). One line per THREADS:
 *   revoke threads=256 cold=0 biased_ns=p50 p90 unbiased_ns=p50 p90 per_record_ns=X
 * per_record_ns = (biased p50 - unbiased p50) / records scanned (THREADS + the main one).
 * The idle threads' records sit in caches the writer does not own; on a many-socket box
 * each read is a cross-socket miss. Nothing here is asserted: a measurement.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <klock/rwlock.h>

/* Pairs timed per THREADS and mode, unless -n. Odd, so the median is one sample. */
#define REVOKE_REPS 2001
/* -c: bytes written between pairs, to push the records out of the writer's caches
 * (larger than the last-level cache of most machines). */
#define REVOKE_EVICT_BYTES (256u << 20)
/* The most THREADS one line may start. */
#define REVOKE_MAX_THREADS 65536
/* Nanoseconds per second. */
#define NS_PER_S 1000000000ull

static pthread_barrier_t started;
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static int done;
static unsigned char *evict; /* -c: REVOKE_EVICT_BYTES, else NULL */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Turns @rw's reader bias on, as a reader that lost a race for the word would. */
static void bias_on(struct kl_rwlock *rw)
{
	atomic_fetch_or(&rw->word, (uintptr_t)KL_RWLOCK_BIAS_);
}

/* An idle thread: one biased read hold (its record and slot line now exist), then wait. */
static void *idle_thread(void *arg)
{
	struct kl_rwlock own = KL_RWLOCK_INITIALIZER;

	(void)arg;
	bias_on(&own);
	kl_rwlock_read_lock(&own);
	kl_rwlock_read_unlock(&own);
	pthread_barrier_wait(&started);
	pthread_mutex_lock(&done_mu);
	while (!done)
		pthread_cond_wait(&done_cv, &done_mu);
	pthread_mutex_unlock(&done_mu);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* -c: write the eviction buffer (one store per line is enough to displace it). */
static void chill(void)
{
	if (evict == NULL)
		return;
	for (size_t i = 0; i < REVOKE_EVICT_BYTES; i += 64)
		((volatile unsigned char *)evict)[i]++;
}

/* Times @reps write pairs of @rw, biased and not, interleaved; sorts both. */
static void time_pairs(struct kl_rwlock *rw, unsigned reps, uint64_t *biased, uint64_t *plain)
{
	for (unsigned i = 0; i < reps; i++) {
		uint64_t t0;

		bias_on(rw);
		chill();
		t0 = now_ns();
		kl_rwlock_write_lock(rw);
		kl_rwlock_write_unlock(rw);
		biased[i] = now_ns() - t0;
		chill();
		t0 = now_ns();
		kl_rwlock_write_lock(rw);
		kl_rwlock_write_unlock(rw);
		plain[i] = now_ns() - t0;
	}
	qsort(biased, reps, sizeof(*biased), cmp_u64);
	qsort(plain, reps, sizeof(*plain), cmp_u64);
}

/* One line: @n idle threads started, then the timing. 0, or -1 if a thread failed. */
static int run(unsigned n, unsigned reps)
{
	pthread_t *t = calloc(n, sizeof(*t));
	uint64_t *biased = calloc(reps, sizeof(*biased)), *plain = calloc(reps, sizeof(*plain));
	struct kl_rwlock rw = KL_RWLOCK_INITIALIZER;
	pthread_attr_t attr;
	unsigned made = 0;

	if (t == NULL || biased == NULL || plain == NULL)
		return -1;
	done = 0;
	pthread_barrier_init(&started, NULL, n + 1);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (; made < n; made++)
		if (pthread_create(&t[made], &attr, idle_thread, NULL) != 0)
			break;
	if (made == n)
		pthread_barrier_wait(&started);
	else
		fprintf(stderr, "rw-revoke: only %u of %u threads started\n", made, n);
	if (made == n)
		time_pairs(&rw, reps, biased, plain);
	pthread_mutex_lock(&done_mu);
	done = 1;
	pthread_cond_broadcast(&done_cv);
	pthread_mutex_unlock(&done_mu);
	for (unsigned i = 0; i < made; i++)
		pthread_join(t[i], NULL);
	if (made == n)
		printf("revoke threads=%u cold=%d biased_ns=%llu %llu unbiased_ns=%llu %llu "
		       "per_record_ns=%.1f\n", n, evict != NULL, (unsigned long long)biased[reps / 2],
		       (unsigned long long)biased[reps * 9 / 10],
		       (unsigned long long)plain[reps / 2],
		       (unsigned long long)plain[reps * 9 / 10],
		       ((double)biased[reps / 2] - (double)plain[reps / 2]) / (n + 1));
	pthread_barrier_destroy(&started);
	pthread_attr_destroy(&attr);
	free(t), free(biased), free(plain);
	return made == n ? 0 : -1;
}

int main(int argc, char **argv)
{
	unsigned reps = REVOKE_REPS;
	int i = 1, rc = 0;

	if (i < argc && strcmp(argv[i], "-c") == 0) {
		evict = malloc(REVOKE_EVICT_BYTES);
		if (evict == NULL)
			return 2;
		memset(evict, 0, REVOKE_EVICT_BYTES);
		i++;
	}
	if (i + 1 < argc && strcmp(argv[i], "-n") == 0) {
		reps = (unsigned)strtoul(argv[i + 1], NULL, 10);
		i += 2;
	}
	if (i >= argc || reps == 0) {
		fprintf(stderr, "usage: rw-revoke [-c] [-n reps] THREADS...\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (; i < argc; i++) {
		unsigned long n = strtoul(argv[i], NULL, 10);

		if (n > REVOKE_MAX_THREADS) {
			fprintf(stderr, "rw-revoke: at most %u threads\n", REVOKE_MAX_THREADS);
			return 2;
		}
		rc |= run((unsigned)n, reps);
	}
	return rc ? 1 : 0;
}
