/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/park.h - the queueing parking lot (WebKit ParkingLot, NetBSD turnstile hash,
 * dgwynne's parking mutex): threads queue FIFO on an address and sleep on their own
 * record's futex word, so a lock stays one word and its unlocker can pick WHICH waiter
 * wakes and hand it a token (direct hand-off), learn whether more waiters remain (to clear
 * a "parked" bit at the right moment), and move waiters between addresses (condvar requeue).
 *
 * Layer: on top of kl_wait()/kl_wake() and the thread registry; used by kl_mutex, kl_cond,
 * the rwlocks' FIFO paths. Keys are addresses (usually the lock's); any number of keys
 * share the fixed table of buckets. Each bucket: a wordlock + a singly linked FIFO of
 * kli_thread records (park_next).
 *
 * Ordering: the unparker writes park_token, then stores park_state = IDLE with release
 * (K1), under the bucket lock; the parked thread reads park_state with acquire (K2) before
 * reading the token and before touching whatever the unparker published (a hand-off).
 * The validate callback runs under the bucket lock, and unpark callbacks run under the
 * same lock, so "check the lock word, then queue" cannot interleave with "dequeue, then
 * clear the parked bit": that is what makes a lost wake-up impossible.
 *
 * Callbacks run with a bucket lock held: they must be short and must not park, unpark or
 * take any lock that a parked thread's validate might need.
 */
#ifndef KL_PARK_H
#define KL_PARK_H

#include "thread.h"

enum kli_park_result {
	KLI_PARK_UNPARKED,   /* woken by an unpark; *token holds the unparker's token */
	KLI_PARK_INVALID,    /* validate() said no: never queued */
	KLI_PARK_TIMEDOUT,   /* deadline passed while queued; dequeued, no token */
};

struct kli_park_req {
	const void *key;                 /* address to queue on */
	bool (*validate)(void *arg);     /* under the bucket lock; false: do not park (NULL ok) */
	void (*before_sleep)(void *arg); /* after queueing, bucket unlocked (NULL ok) */
	void *arg;
	uint64_t since_ns;               /* when this acquisition started waiting (0 = now) */
	const struct timespec *abstime;  /* absolute CLOCK_MONOTONIC deadline or NULL */
	bool realtime;                   /* abstime is on CLOCK_REALTIME instead and follows
	                                  * its steps (kli_wait_realtime()) */
	uintptr_t cookie;                /* what this waiter waits for, for kli_unpark_cookie()
	                                  * (a ticket number, say); 0 when unused */
};

/* Queue the calling thread on req->key (if validate agrees) and sleep until unparked or the
 * deadline passes. Signals do not interrupt it. After KLI_PARK_TIMEDOUT the caller's
 * record says which queue it left: self->park_key (req->key, unless a requeue moved it). */
enum kli_park_result kli_park(const struct kli_park_req *req, uintptr_t *token);

struct kli_unpark_result {
	bool unparked;       /* a thread was dequeued and will wake */
	bool more;           /* other threads remain queued on the key */
	uint64_t waited_ns;  /* how long the dequeued thread has waited (since its since_ns) */
	struct kli_thread *thread; /* the dequeued thread's record (NULL when none): a hand-off
	                            * can name the new owner before it wakes; fields that thread
	                            * wrote before parking are visible (bucket lock) */
};

/* Runs under the bucket lock once the dequeue is decided; returns the token to hand over. */
typedef uintptr_t (*kli_unpark_fn)(const struct kli_unpark_result *r, void *arg);

/* Wake the longest-queued thread on @key (if any). @fn (NULL ok) runs under the bucket lock
 * in every case, also when nobody was queued. Returns true if a thread was woken. */
bool kli_unpark_one(const void *key, kli_unpark_fn fn, void *arg);

/* Wake the longest-queued thread on @key whose request carried @cookie (a directed wake-up:
 * the ticket lock wakes exactly the ticket that is next). Returns true if one was woken. */
bool kli_unpark_cookie(const void *key, uintptr_t cookie, uintptr_t token);

/* Wake every thread queued on @key, handing each @token. Returns how many. */
unsigned kli_unpark_all(const void *key, uintptr_t token);

/* Runs under both bucket locks after a requeue, before any woken thread is released (so
 * what it publishes is visible to them): how many were woken and moved. */
typedef void (*kli_requeue_fn)(unsigned woken, unsigned moved, void *arg);

/* Wake up to @nwake threads queued on @from (handing them @token) and move the rest, in
 * order, to the tail of @to's queue without waking them. A moved thread's wait clock
 * restarts (waited_ns on @to counts from the move: time spent on a condvar is not time
 * spent starving on its mutex). @fn (NULL ok) runs under both bucket locks. Returns the
 * number woken. @from != @to. */
unsigned kli_unpark_requeue(const void *from, const void *to, unsigned nwake, uintptr_t token,
			    kli_requeue_fn fn, void *arg);

/* Threads queued on @key right now (a racy snapshot, for tests and reports). */
unsigned kli_park_queued(const void *key);

#endif /* KL_PARK_H */
