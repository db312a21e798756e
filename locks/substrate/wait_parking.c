/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/wait_parking.c - kl_wait()/kl_wake() for systems without a futex: a parking lot.
 *
 * Addresses hash to one of PARK_BUCKETS buckets; each bucket is a pthread mutex guarding a
 * doubly linked queue of waiters, and each waiter (on its own stack) has a condvar on
 * CLOCK_MONOTONIC. kl_wait() checks *addr == expected UNDER the bucket mutex and enqueues
 * before releasing it; kl_wake() dequeues under the same mutex. A waker changes *addr before
 * calling kl_wake(), so either the waiter's check sees the new value (it returns at once) or
 * the waiter is already queued when the waker looks: no lost wake-up. The bucket mutex's
 * acquire/release orders the waker's store before the waiter's load (P1/P2).
 *
 * fork(): the child re-initialises every bucket mutex (another thread may have held one)
 * and empties the queues (their waiters were other threads, which are gone).
 *
 * Limits: only wakes that go through kl_wake() are seen, and waits are process-private.
 * Under libklock-preload, pthread_mutex is klock itself, so the preload library needs the
 * futex backend (Linux) - see docs/preload.md.
 */
#include <pthread.h>
#include <stdbool.h>

#include <klock/wait.h>
#include "kl_internal.h"
#include "events.h"

/* Buckets in the table (power of two); collisions only cost a longer queue walk. */
#define PARK_BUCKETS 256u
/* Fibonacci hashing multiplier (2^64 / golden ratio). */
#define FIB_MULT 0x9e3779b97f4a7c15ull

struct park_waiter {
	pthread_cond_t cond;
	const void *addr;
	struct park_waiter *next, *prev;
	bool woken;
};

struct park_bucket {
	pthread_mutex_t lock;
	struct park_waiter *head, *tail;
} KL_PADDED;

static struct park_bucket buckets[PARK_BUCKETS];
static pthread_once_t buckets_once = PTHREAD_ONCE_INIT;

static void buckets_init(void)
{
	for (unsigned i = 0; i < PARK_BUCKETS; i++)
		pthread_mutex_init(&buckets[i].lock, NULL);
}

static void parking_atfork_child(void)
{
	for (unsigned i = 0; i < PARK_BUCKETS; i++) {
		pthread_mutex_init(&buckets[i].lock, NULL);
		buckets[i].head = NULL;
		buckets[i].tail = NULL;
	}
}

__attribute__((constructor)) static void parking_fork_init(void)
{
	pthread_atfork(NULL, NULL, parking_atfork_child);
}

static struct park_bucket *bucket_of(const void *addr)
{
	pthread_once(&buckets_once, buckets_init);
	return &buckets[(((uint64_t)(uintptr_t)addr * FIB_MULT) >> 56) & (PARK_BUCKETS - 1)];
}

static void waiter_unlink(struct park_bucket *b, struct park_waiter *w)
{
	if (w->prev != NULL)
		w->prev->next = w->next;
	else
		b->head = w->next;
	if (w->next != NULL)
		w->next->prev = w->prev;
	else
		b->tail = w->prev;
}

static void waiter_append(struct park_bucket *b, struct park_waiter *w)
{
	w->next = NULL;
	w->prev = b->tail;
	if (b->tail != NULL)
		b->tail->next = w;
	else
		b->head = w;
	b->tail = w;
}

static int park_sleep(struct park_bucket *b, struct park_waiter *w,
		      const struct timespec *abstime)
{
	while (!w->woken) {
		int r = abstime != NULL ? pthread_cond_timedwait(&w->cond, &b->lock, abstime)
					: pthread_cond_wait(&w->cond, &b->lock);

		if (r == ETIMEDOUT && !w->woken) {
			waiter_unlink(b, w);
			return ETIMEDOUT;
		}
	}
	return 0;
}

int kl_wait(const _Atomic uint32_t *addr, uint32_t expected, const struct timespec *abstime)
{
	struct park_bucket *b;
	struct park_waiter w = { .addr = (const void *)addr };
	pthread_condattr_t ca;
	int ret = 0;

	if (abstime != NULL && !kli_timespec_valid(abstime))
		return EINVAL;
	b = bucket_of(addr);
	pthread_mutex_lock(&b->lock); /* P2: pairs with P1 in kl_wake() */
	if (atomic_load_explicit(addr, memory_order_relaxed) != expected) {
		pthread_mutex_unlock(&b->lock);
		return 0;
	}
	if (kli_deadline_passed(abstime)) {
		pthread_mutex_unlock(&b->lock);
		return ETIMEDOUT;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w.cond, &ca);
	pthread_condattr_destroy(&ca);
	waiter_append(b, &w);
	kli_ev_count(KLI_EV_SLEEP);
	ret = park_sleep(b, &w, abstime);
	pthread_mutex_unlock(&b->lock);
	pthread_cond_destroy(&w.cond);
	return ret;
}

/* The parking backend's realtime wait: the deadline converted to CLOCK_MONOTONIC, and
 * converted again after a timeout that the realtime clock does not confirm (a backward
 * step). A forward step is not seen before the converted deadline. */
int kli_wait_realtime(const _Atomic uint32_t *addr, uint32_t expected,
		      const struct timespec *abstime)
{
	struct timespec now, mono;
	uint64_t dl, t;
	int ret;

	if (!kli_timespec_valid(abstime))
		return EINVAL;
	dl = kli_timespec_ns(abstime);
	for (;;) {
		clock_gettime(CLOCK_REALTIME, &now);
		t = kli_timespec_ns(&now);
		if (t >= dl)
			return ETIMEDOUT;
		t = dl - t;
		kli_deadline_after(&mono, t < UINT64_MAX - kli_now_ns() ? t : UINT64_MAX / 2);
		ret = kl_wait(addr, expected, &mono);
		if (ret != ETIMEDOUT)
			return ret;
	}
}

int kl_wake(const _Atomic uint32_t *addr, int n)
{
	struct park_bucket *b = bucket_of(addr);
	struct park_waiter *w, *next;
	int woken = 0;

	kli_ev_count(KLI_EV_WAKE);
	pthread_mutex_lock(&b->lock); /* P1: the caller's store to *addr precedes our unlock */
	for (w = b->head; w != NULL && woken < n; w = next) {
		next = w->next;
		if (w->addr != (const void *)addr)
			continue;
		waiter_unlink(b, w);
		w->woken = true;
		pthread_cond_signal(&w->cond);
		woken++;
	}
	pthread_mutex_unlock(&b->lock);
	return woken;
}

const char *kl_wait_backend(void)
{
	return "parking";
}
