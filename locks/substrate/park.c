/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/park.c - the queueing parking lot (contract and ordering in park.h).
 *
 * Invariant: a record is in a bucket queue iff its park_state is KLI_PARK_WAITING, and
 * both change only under that bucket's lock. So a thread whose wait timed out can tell,
 * under the lock, whether it is still queued (dequeue itself) or was already unparked
 * (accept the token: it may be a hand-off of a lock it now owns).
 *
 * Wake-ups happen after the bucket lock is dropped (unpark_one) so the wakee does not
 * collide with it. The record may have been recycled by then - records are type-stable
 * (thread.h) and a parked thread re-checks park_state after every return from kl_wait(),
 * so a late kl_wake() is at worst spurious.
 *
 * fork(): in the child only the forking thread exists, and it was not parked (it was
 * calling fork()). So every queued record belongs to a thread that is gone, and a bucket
 * lock may be held by one. The child handler empties every queue and frees every bucket
 * lock: an unlock in the child then finds nobody to hand a lock to (a mutex's PARKED bit
 * is cleared by the unpark callback that finds the queue empty), instead of handing it to
 * a thread that will never run. Ghost records are never recycled (thread.c), so nothing
 * else points into the emptied queues.
 */
#include <pthread.h>

#include "park.h"
#include "wordlock.h"

/* Buckets (power of two): ~2 per possible thread on a 256-CPU box before chains grow. */
#define PARK_BUCKETS 512u
#define PARK_BUCKET_BITS 9
/* Fibonacci hashing multiplier (2^64 / golden ratio). */
#define FIB_MULT 0x9e3779b97f4a7c15ull

/* park_state values (the record's futex word). */
#define KLI_PARK_IDLE 0u
#define KLI_PARK_WAITING 1u

struct park_bucket {
	struct kli_wordlock lock;
	struct kli_thread *head, *tail;
} KL_PADDED;

static struct park_bucket buckets[PARK_BUCKETS];

/* fork() child: every queued thread is gone; every bucket lock is free (see the top). */
static void park_atfork_child(void)
{
	for (unsigned i = 0; i < PARK_BUCKETS; i++) {
		atomic_store_explicit(&buckets[i].lock.v, 0, memory_order_relaxed);
		buckets[i].head = NULL;
		buckets[i].tail = NULL;
	}
}

__attribute__((constructor)) static void park_fork_init(void)
{
	pthread_atfork(NULL, NULL, park_atfork_child);
}

static struct park_bucket *bucket_of(const void *key)
{
	return &buckets[((uint64_t)(uintptr_t)key * FIB_MULT) >> (64 - PARK_BUCKET_BITS)];
}

static void queue_append(struct park_bucket *b, struct kli_thread *t)
{
	t->park_next = NULL;
	if (b->tail != NULL)
		b->tail->park_next = t;
	else
		b->head = t;
	b->tail = t;
}

/* Unlinks @t, whose predecessor is @prev (NULL when @t is the head). */
static void queue_unlink(struct park_bucket *b, struct kli_thread *prev, struct kli_thread *t)
{
	if (prev != NULL)
		prev->park_next = t->park_next;
	else
		b->head = t->park_next;
	if (b->tail == t)
		b->tail = prev;
	t->park_next = NULL;
}

static const void *key_of(const struct kli_thread *t)
{
	return atomic_load_explicit(&t->park_key, memory_order_relaxed);
}

/* Locks the bucket @self is queued in; park_key may move under a requeue until we hold
 * the bucket lock of the key we read. */
static struct park_bucket *lock_own_bucket(struct kli_thread *self)
{
	for (;;) {
		const void *k = key_of(self);
		struct park_bucket *b = bucket_of(k);

		kli_wordlock_lock(&b->lock);
		if (key_of(self) == k)
			return b;
		kli_wordlock_unlock(&b->lock);
	}
}

/* Deadline passed: dequeue ourselves unless an unparker got there first. */
static enum kli_park_result park_timeout(struct kli_thread *self, uintptr_t *token)
{
	struct park_bucket *b = lock_own_bucket(self);
	struct kli_thread *prev = NULL, *t;

	if (atomic_load_explicit(&self->park_state, memory_order_acquire) != KLI_PARK_WAITING) {
		kli_wordlock_unlock(&b->lock);
		*token = self->park_token; /* unparked concurrently: K2 above ordered this */
		return KLI_PARK_UNPARKED;
	}
	for (t = b->head; t != self; prev = t, t = t->park_next)
		;
	queue_unlink(b, prev, self);
	atomic_store_explicit(&self->park_state, KLI_PARK_IDLE, memory_order_relaxed);
	kli_wordlock_unlock(&b->lock);
	return KLI_PARK_TIMEDOUT;
}

enum kli_park_result kli_park(const struct kli_park_req *req, uintptr_t *token)
{
	struct kli_thread *self = kli_self();
	struct park_bucket *b = bucket_of(req->key);

	kli_wordlock_lock(&b->lock);
	if (req->validate != NULL && !req->validate(req->arg)) {
		kli_wordlock_unlock(&b->lock);
		return KLI_PARK_INVALID;
	}
	atomic_store_explicit(&self->park_key, req->key, memory_order_relaxed);
	self->park_token = 0;
	self->park_since = req->since_ns != 0 ? req->since_ns : kli_now_ns();
	self->park_cookie = req->cookie;
	atomic_store_explicit(&self->park_state, KLI_PARK_WAITING, memory_order_relaxed);
	queue_append(b, self);
	kli_wordlock_unlock(&b->lock);
	if (req->before_sleep != NULL)
		req->before_sleep(req->arg);

	/* K2: acquire, pairs with K1 in the unparkers. */
	while (atomic_load_explicit(&self->park_state, memory_order_acquire) == KLI_PARK_WAITING) {
		int r = req->realtime && req->abstime != NULL ?
				kli_wait_realtime(&self->park_state, KLI_PARK_WAITING, req->abstime) :
				kl_wait(&self->park_state, KLI_PARK_WAITING, req->abstime);

		if (r == ETIMEDOUT)
			return park_timeout(self, token);
	}
	*token = self->park_token;
	return KLI_PARK_UNPARKED;
}

/* Releases @t with @token; caller holds t's bucket lock and has dequeued it. */
static void release_parked(struct kli_thread *t, uintptr_t token)
{
	t->park_token = token;
	/* K1: release, pairs with K2 in kli_park(): the token and everything the unparker
	 * wrote before (a handed-off lock's state) are visible to the wakee. */
	atomic_store_explicit(&t->park_state, KLI_PARK_IDLE, memory_order_release);
}

bool kli_unpark_one(const void *key, kli_unpark_fn fn, void *arg)
{
	struct park_bucket *b = bucket_of(key);
	struct kli_unpark_result r = { 0 };
	struct kli_thread *prev = NULL, *t, *u;
	uintptr_t token = 0;

	kli_wordlock_lock(&b->lock);
	for (t = b->head; t != NULL && key_of(t) != key; prev = t, t = t->park_next)
		;
	if (t != NULL) {
		queue_unlink(b, prev, t);
		r.unparked = true;
		r.thread = t;
		r.waited_ns = kli_now_ns() - t->park_since;
		for (u = prev != NULL ? prev->park_next : b->head; u != NULL; u = u->park_next)
			if (key_of(u) == key) {
				r.more = true;
				break;
			}
	}
	if (fn != NULL)
		token = fn(&r, arg);
	if (t != NULL)
		release_parked(t, token);
	kli_wordlock_unlock(&b->lock);
	if (t != NULL)
		kl_wake(&t->park_state, 1);
	return t != NULL;
}

bool kli_unpark_cookie(const void *key, uintptr_t cookie, uintptr_t token)
{
	struct park_bucket *b = bucket_of(key);
	struct kli_thread *prev = NULL, *t;

	kli_wordlock_lock(&b->lock);
	for (t = b->head; t != NULL; prev = t, t = t->park_next)
		if (key_of(t) == key && t->park_cookie == cookie)
			break;
	if (t != NULL) {
		queue_unlink(b, prev, t);
		release_parked(t, token);
	}
	kli_wordlock_unlock(&b->lock);
	if (t != NULL)
		kl_wake(&t->park_state, 1); /* a late wake of a recycled record is spurious */
	return t != NULL;
}

unsigned kli_unpark_all(const void *key, uintptr_t token)
{
	struct park_bucket *b = bucket_of(key);
	struct kli_thread *prev = NULL, *t, *next;
	unsigned n = 0;

	kli_wordlock_lock(&b->lock);
	for (t = b->head; t != NULL; t = next) {
		next = t->park_next;
		if (key_of(t) != key) {
			prev = t;
			continue;
		}
		queue_unlink(b, prev, t);
		release_parked(t, token);
		/* Woken under the lock: after K1 the record may be re-queued elsewhere, so
		 * we cannot keep a list of them to wake later. Broadcasts are rare. */
		kl_wake(&t->park_state, 1);
		n++;
	}
	kli_wordlock_unlock(&b->lock);
	return n;
}

static void lock_two(struct park_bucket *a, struct park_bucket *b)
{
	if (a == b) {
		kli_wordlock_lock(&a->lock);
	} else if (a < b) {
		kli_wordlock_lock(&a->lock);
		kli_wordlock_lock(&b->lock);
	} else {
		kli_wordlock_lock(&b->lock);
		kli_wordlock_lock(&a->lock);
	}
}

static void unlock_two(struct park_bucket *a, struct park_bucket *b)
{
	kli_wordlock_unlock(&a->lock);
	if (a != b)
		kli_wordlock_unlock(&b->lock);
}

unsigned kli_unpark_requeue(const void *from, const void *to, unsigned nwake, uintptr_t token,
			    kli_requeue_fn fn, void *arg)
{
	struct park_bucket *bf = bucket_of(from), *bt = bucket_of(to);
	struct kli_thread *prev = NULL, *t, *next, *wake_list = NULL;
	unsigned woken = 0, moved = 0;
	uint64_t now = kli_now_ns();

	lock_two(bf, bt);
	for (t = bf->head; t != NULL; t = next) {
		next = t->park_next;
		if (key_of(t) != from) {
			prev = t;
			continue;
		}
		queue_unlink(bf, prev, t);
		if (woken < nwake) {
			/* Dequeued but still WAITING: collected (park_next is free now) and
			 * released only after fn ran, so what fn publishes is there before
			 * any of them can run (kl_cond sets the mutex's PARKED bit). */
			t->park_next = wake_list;
			wake_list = t;
			woken++;
		} else {
			atomic_store_explicit(&t->park_key, to, memory_order_relaxed);
			t->park_since = now;
			queue_append(bt, t);
			moved++;
		}
	}
	if (fn != NULL)
		fn(woken, moved, arg);
	for (t = wake_list; t != NULL; t = next) {
		next = t->park_next;
		t->park_next = NULL;
		release_parked(t, token);
		kl_wake(&t->park_state, 1); /* under the locks, as in kli_unpark_all() */
	}
	unlock_two(bf, bt);
	return woken;
}

unsigned kli_park_queued(const void *key)
{
	struct park_bucket *b = bucket_of(key);
	unsigned n = 0;

	kli_wordlock_lock(&b->lock);
	for (struct kli_thread *t = b->head; t != NULL; t = t->park_next)
		n += key_of(t) == key;
	kli_wordlock_unlock(&b->lock);
	return n;
}
