/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/cond.c - kl_cond, the condition variable for kl_mutex.
 *
 * WHAT. WebKit's WTF::Condition on klock's parking lot, plus requeue: a waiter parks on
 * the condvar's address; signal unparks the longest waiter; broadcast unparks one and
 * requeues the rest onto the mutex's park key (kli_mtx_key), setting the mutex's PARKED
 * bit, so they wake one per mutex unlock instead of stampeding (the thundering herd that
 * FUTEX_CMP_REQUEUE was invented for). A requeued waiter may even be handed the mutex
 * directly by an unlock (the mutex's hand-off token): it then returns owning it.
 *
 * The interposer's entry, kli_cond_wait_ext() (cond_impl.h), adds a CLOCK_REALTIME
 * deadline (the park follows clock steps), a validate step under the bucket lock (the
 * waiter does not sleep when it says no: never queued, so counted out at once and the
 * mutex never released) and a park cookie, by which pthread_cancel wakes one waiter with
 * KLI_COND_TOKEN_KICK. A kicked waiter, like one that timed out on the condvar's queue,
 * counts itself out: the only waiters that touch the condvar after leaving its queue, and
 * neither was woken by a signal or broadcast, so "broadcast, then destroy" stays safe.
 *
 * STATE (three words, no lock of its own):
 *   waiters  threads inside a wait and still queued on the condvar. Incremented by the
 *            waiter while it holds the mutex; decremented by whoever dequeues it: the
 *            signaller or broadcaster (in the unpark callback, under the bucket lock), or
 *            the waiter itself when it times out while still on the condvar's queue. So
 *            a woken waiter never touches the condvar again (safe destroy after wake-up).
 *   state    0 while alive, COND_POISON after kl_cond_destroy().
 *   mutex    the mutex the current waiters use; broadcast requeues onto its key.
 *
 * INVARIANTS.
 *   I1 A waiter is queued on the condvar before it releases the mutex (before_sleep runs
 *      after the enqueue), so a signaller that changed the predicate under the mutex after
 *      the waiter checked it finds the waiter queued: no lost wake-up.
 *   I2 Requeued waiters sit on the mutex's queue with PARKED set (set in the requeue
 *      callback while both bucket locks are held, like the mutex's own validate), and
 *      broadcast always wakes one waiter, which will lock and unlock the mutex: so some
 *      unlock always sees PARKED and pumps the next one, even if the mutex was free.
 *
 * ORDERING.
 *   V1  waiters++ under the mutex (release)          pairs with V2
 *   V2  signal/broadcast's load of waiters (acquire). Visibility comes from the mutex: a
 *       signaller that changed the predicate under it acquired it after the waiter
 *       released it (M2/M1), so it sees the increment; a zero means nobody can be waiting
 *       for this predicate change. The release/acquire pair adds that a broadcaster which
 *       sees the count also sees the `mutex` word stored before it.
 *   P1' the requeue callback's release fetch_or of PARKED into the mutex word: the same
 *       pairing as P1 in mutex.c (the mutex's unlock slow path fences with P2, then takes
 *       the bucket lock and finds the requeued sleepers).
 *   The hand-off of the mutex to a requeued waiter is mutex.c's H1/K2.
 *
 * COSTS. No herd; signal/broadcast with no waiters is one load; waiters never touch the
 * condvar after being woken.
 *
 * LIMITS. One mutex per condvar at a time; CLOCK_MONOTONIC only (kl_cond_timedwait;
 * CLOCK_REALTIME only through the interposer's entry); not process-shared; waiters are
 * woken FIFO, not by priority.
 */
#include <klock/cond.h>
#include "cond_impl.h"
#include "hooks.h"
#include "mutex_impl.h"
#include "park.h"

#define COND_POISON 0xdeadc0dau  /* kl_cond_destroy()'s mark in `state` */
#define COND_KIND KLI_KIND_COND

static KL_COLD KL_NOINLINE void cond_report(const struct kl_cond *c, const char *what,
					    const void *site)
{
	kli_report(what, kli_kind_name(COND_KIND), c, site, NULL);
}

static bool cond_destroyed(const struct kl_cond *c)
{
	return atomic_load_explicit(&c->state, memory_order_relaxed) == COND_POISON;
}

struct cond_sleeper {
	struct kl_mutex *m;
	const void *site;
	const struct kli_cond_wait *w;
};

/* After we are queued on the condvar (I1): release the mutex. */
static void cond_before_sleep(void *arg)
{
	struct cond_sleeper *cs = arg;

	kli_mutex_unlock_at(cs->m, cs->site);
}

/* The mutex came to us as a hand-off while we slept on its key: tell the hooks. */
static void cond_took_handoff(struct kl_mutex *m, const void *site)
{
	kli_hook_acquire(m, KLI_KIND_MUTEX, 0, site);
	kli_hook_acquired(m, KLI_KIND_MUTEX, 0, site);
}

/* The preload's validate step (cond_impl.h), given the sleeper. */
static bool cond_validate(void *arg)
{
	const struct cond_sleeper *cs = arg;

	return cs->w->validate(cs->w->arg);
}

/* Sleeps on @c; returns 0 or ETIMEDOUT, holding @m again either way. @w: the deadline and
 * the preload's extras (cond_impl.h). */
static int cond_sleep(struct kl_cond *c, struct kl_mutex *m, const struct kli_cond_wait *w,
		      const void *site)
{
	struct kli_thread *self = kli_self();
	struct cond_sleeper cs = { m, site, w };
	struct kli_park_req req = { .key = c, .before_sleep = cond_before_sleep, .arg = &cs,
				    .abstime = w->abstime, .realtime = w->realtime,
				    .validate = w->validate != NULL ? cond_validate : NULL,
				    .cookie = w->cookie };
	uintptr_t token = KLI_MTX_TOKEN_WAKE;
	enum kli_park_result r;
	int err = 0;

	atomic_store_explicit(&c->mutex, (uintptr_t)m, memory_order_relaxed);
	/* V1: release: a broadcaster that sees the count (V2, acquire) sees `mutex` too. */
	atomic_fetch_add_explicit(&c->waiters, 1, memory_order_release);
	self->mtx_losses = 0; /* a requeued waiter starts afresh on the mutex */
	r = kli_park(&req, &token);
	if (r == KLI_PARK_INVALID) { /* never queued, @m never released */
		atomic_fetch_sub_explicit(&c->waiters, 1, memory_order_relaxed);
		return 0;
	}
	if (r == KLI_PARK_TIMEDOUT)
		err = ETIMEDOUT;
	/* Left the condvar's own queue by a timeout or a kick: nobody counted us out. */
	if ((r == KLI_PARK_TIMEDOUT &&
	     atomic_load_explicit(&self->park_key, memory_order_relaxed) == c) ||
	    (r == KLI_PARK_UNPARKED && token == KLI_COND_TOKEN_KICK))
		atomic_fetch_sub_explicit(&c->waiters, 1, memory_order_relaxed);
	if (token == KLI_MTX_TOKEN_HANDOFF) {
		cond_took_handoff(m, site);
		return 0;
	}
	kli_mutex_lock_at(m, NULL, site);
	return err;
}

/* The checks every wait makes: EINVAL (destroyed), EPERM (mutex not held). */
static int cond_check(const struct kl_cond *c, const struct kl_mutex *m)
{
	if (cond_destroyed(c))
		return EINVAL;
	if (!kl_mutex_owned(m))
		return EPERM;
	return 0;
}

static const char *cond_misuse(int err)
{
	return err == EPERM ? "wait without holding the mutex" : "use after destroy";
}

void kl_cond_init(struct kl_cond *c)
{
	atomic_store_explicit(&c->waiters, 0, memory_order_relaxed);
	atomic_store_explicit(&c->state, 0, memory_order_relaxed);
	atomic_store_explicit(&c->mutex, 0, memory_order_relaxed);
	kli_hook_created(c, COND_KIND, 0);
}

int kl_cond_destroy(struct kl_cond *c)
{
	int err = 0;

	if (cond_destroyed(c))
		err = EINVAL;
	else if (atomic_load_explicit(&c->waiters, memory_order_relaxed) != 0)
		err = EBUSY;
	if (err != 0) {
		if (KLOCK_DEBUG_LOCKS)
			cond_report(c, err == EBUSY ? "destroy of a condvar with waiters"
						    : "use after destroy",
				    __builtin_return_address(0));
		return err;
	}
	atomic_store_explicit(&c->state, COND_POISON, memory_order_relaxed);
	kli_hook_destroyed(c, COND_KIND);
	return 0;
}

void kl_cond_wait(struct kl_cond *c, struct kl_mutex *m)
{
	const void *site = __builtin_return_address(0);
	int err = cond_check(c, m);

	if (kl_unlikely(err != 0)) { /* every build: the check is one load */
		cond_report(c, cond_misuse(err), site);
		return;
	}
	cond_sleep(c, m, &(struct kli_cond_wait){ 0 }, site);
}

int kl_cond_timedwait(struct kl_cond *c, struct kl_mutex *m, const struct timespec *abstime)
{
	const void *site = __builtin_return_address(0);
	int err;

	if (!kli_timespec_valid(abstime))
		return EINVAL;
	err = cond_check(c, m);
	if (err != 0) {
		if (KLOCK_DEBUG_LOCKS)
			cond_report(c, cond_misuse(err), site);
		return err;
	}
	return cond_sleep(c, m, &(struct kli_cond_wait){ .abstime = abstime }, site);
}

int kli_cond_wait_ext(struct kl_cond *c, struct kl_mutex *m, const struct kli_cond_wait *w,
		      const void *site)
{
	int err;

	if (w->abstime != NULL && !kli_timespec_valid(w->abstime))
		return EINVAL;
	err = cond_check(c, m);
	if (err != 0) {
		if (KLOCK_DEBUG_LOCKS || w->abstime == NULL) /* as kl_cond_wait / timedwait */
			cond_report(c, cond_misuse(err), site);
		return err;
	}
	return cond_sleep(c, m, w, site);
}

/* Under the bucket lock: the signaller counts the woken waiter out (see `waiters`). */
static uintptr_t cond_signal_cb(const struct kli_unpark_result *r, void *arg)
{
	struct kl_cond *c = arg;

	if (r->unparked)
		atomic_fetch_sub_explicit(&c->waiters, 1, memory_order_relaxed);
	return KLI_MTX_TOKEN_WAKE;
}

void kl_cond_signal(struct kl_cond *c)
{
	if (KLOCK_DEBUG_LOCKS && cond_destroyed(c))
		cond_report(c, "use after destroy", __builtin_return_address(0));
	if (atomic_load_explicit(&c->waiters, memory_order_acquire) == 0) /* V2 */
		return;
	kli_unpark_one(c, cond_signal_cb, c);
}

struct cond_requeue {
	struct kl_cond *c;
	struct kl_mutex *m;
};

/* Under both bucket locks (I2). */
static void cond_requeue_cb(unsigned woken, unsigned moved, void *arg)
{
	struct cond_requeue *rq = arg;

	atomic_fetch_sub_explicit(&rq->c->waiters, woken + moved, memory_order_relaxed);
	if (moved != 0) /* P1': release, pairs with P2 in the mutex's unlock slow path */
		atomic_fetch_or_explicit(&rq->m->owner, KLI_MTX_PARKED, memory_order_release);
}

void kl_cond_broadcast(struct kl_cond *c)
{
	struct cond_requeue rq = { c, NULL };

	if (KLOCK_DEBUG_LOCKS && cond_destroyed(c))
		cond_report(c, "use after destroy", __builtin_return_address(0));
	if (atomic_load_explicit(&c->waiters, memory_order_acquire) == 0) /* V2 */
		return;
	rq.m = (struct kl_mutex *)atomic_load_explicit(&c->mutex, memory_order_relaxed);
	kli_unpark_requeue(c, kli_mtx_key(rq.m), 1, KLI_MTX_TOKEN_WAKE, cond_requeue_cb, &rq);
}
