/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/preload_smoke.c - a small multithreaded pthread program for the preload's
 * program tests (tests/preload/preload_programs.py): threads hammer one mutex (with a condvar
 * round every so often), one rwlock and one spinlock, then it prints a checksum that any
 * correct lock implementation reproduces. Its functions are exported (export_dynamic) so
 * klock-stat can name them: smoke_bump() is where the hot mutex is taken.
 *   preload-smoke [threads [iterations]]
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define DEFAULT_THREADS 4
#define DEFAULT_ITERS 200000
#define MAX_THREADS 64
/* A condvar round every this many increments. */
#define COND_EVERY 1024
/* Work inside the hot critical section, so that threads do collide there. */
#define HOLD_SPINS 40

static pthread_mutex_t hot = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tick = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t table = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t spin;
static long counter, rounds, table_value, spun;
static long iters = DEFAULT_ITERS;
static atomic_int arrived, nthreads;

void smoke_bump(void);
void *smoke_worker(void *arg);

/* The hot critical section. */
__attribute__((noinline)) void smoke_bump(void)
{
	pthread_mutex_lock(&hot);
	for (volatile int k = 0; k < HOLD_SPINS; k++)
		;
	if (++counter % COND_EVERY == 0) {
		rounds++;
		pthread_cond_broadcast(&tick);
	}
	pthread_mutex_unlock(&hot);
}

void *smoke_worker(void *arg)
{
	long id = (long)arg, seen = 0;

	/* All start together, so they do collide even on a busy machine: wait (yielding)
	 * until every worker is running. */
	atomic_fetch_add(&arrived, 1);
	while (atomic_load(&arrived) < atomic_load(&nthreads))
		sched_yield();
	for (long i = 0; i < iters; i++) {
		smoke_bump();
		if (i % 64 == 0) {
			pthread_rwlock_rdlock(&table);
			seen += table_value;
			pthread_rwlock_unlock(&table);
		}
		if (i % 256 == id) {
			pthread_rwlock_wrlock(&table);
			table_value++;
			pthread_rwlock_unlock(&table);
		}
		if (i % 16 == 0) {
			pthread_spin_lock(&spin);
			spun++;
			pthread_spin_unlock(&spin);
		}
	}
	return (void *)seen;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : DEFAULT_THREADS;
	pthread_t t[MAX_THREADS];

	if (argc > 2)
		iters = atol(argv[2]);
	if (n < 1 || n > MAX_THREADS || iters < 1) {
		fprintf(stderr, "usage: preload-smoke [threads 1..%d [iterations]]\n", MAX_THREADS);
		return 2;
	}
	pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
	atomic_store(&nthreads, n);
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, smoke_worker, (void *)i) != 0)
			return 1;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("smoke ok counter=%ld rounds=%ld spun=%ld table=%ld\n", counter, rounds, spun,
	       table_value);
	return counter == (long)n * iters ? 0 : 1;
}
