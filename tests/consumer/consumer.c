/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/consumer/consumer.c - a program built the way a user builds one against an
 * installed klock (scripts/deb-check): `cc consumer.c $(pkg-config --cflags --libs klock)`,
 * or CMake's find_package(klock) (CMakeLists.txt here). It counts under a kl_mutex from
 * several threads and checks the total, so a header that disagrees with the library it
 * runs against (the wrong layout, a missing export) shows.
 */
#include <klock/klock.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Threads and increments per thread: enough that the threads meet on the lock. */
#define CONSUMER_THREADS 4
#define CONSUMER_ITERS 100000

static struct kl_mutex consumer_lock = KL_MUTEX_INITIALIZER;
static unsigned long consumer_count;

static void *consumer_worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < CONSUMER_ITERS; i++) {
		kl_mutex_lock(&consumer_lock);
		consumer_count++;
		kl_mutex_unlock(&consumer_lock);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[CONSUMER_THREADS];
	const unsigned long want = (unsigned long)CONSUMER_THREADS * CONSUMER_ITERS;

	for (int i = 0; i < CONSUMER_THREADS; i++)
		if (pthread_create(&t[i], NULL, consumer_worker, NULL) != 0) {
			perror("consumer: pthread_create");
			return 1;
		}
	for (int i = 0; i < CONSUMER_THREADS; i++)
		pthread_join(t[i], NULL);
	if (consumer_count != want) {
		fprintf(stderr, "consumer: count %lu, expected %lu\n", consumer_count, want);
		return 1;
	}
	if (strcmp(kl_version(), KLOCK_VERSION) != 0) {
		fprintf(stderr, "consumer: library %s, headers %s\n", kl_version(), KLOCK_VERSION);
		return 1;
	}
	printf("consumer: klock %s, %lu increments under kl_mutex: ok\n", kl_version(), want);
	return 0;
}
