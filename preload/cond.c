/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * preload/cond.c - the pthread_cond_* interposers (the design is in preload/preload.c).
 *
 * A condvar is glibc's (forwarded) when created process-shared - glibc's __wrefs bit 0,
 * which klock's state never covers - or under KLOCK_MUTEX=pthread; otherwise it is
 * klock's, including every statically initialised or zero-filled one. A klock condvar
 * waits in one of two ways, chosen per wait by the mutex:
 *
 *   kl_cond      the mutex is a kl_mutex (KLOCK_MUTEX=adaptive, any pthread type):
 *                kl_cond_wait()/timedwait(); broadcast requeues onto the mutex.
 *   generic      any other mutex (glibc's forwarded ones; kl_ticket, kl_mcs): the waiter
 *                counts itself in `gwaiters` (holding the mutex: G1), queues on the
 *                parking lot under the key &gwaiters, and releases the mutex in the
 *                queue's before_sleep callback - after it is queued, so a signal sent
 *                once the mutex is free finds it (no lost wake-up). Signal unparks the
 *                longest waiter and counts it out under the bucket lock; broadcast wakes
 *                them all. A woken waiter never touches the condvar again, so the usual
 *                "broadcast, then destroy and free" is safe.
 *
 * Signal and broadcast do both kinds' work: each is one load when that kind has no
 * waiters. Waiters that time out while still queued count themselves out.
 *
 * Ordering: G1 the waiter's release increment of gwaiters, under the mutex, pairs with G2,
 * the signaller's acquire load: a signaller that changed the predicate under the mutex
 * after the waiter released it sees the count (the mutex orders them), as kl_cond's V1/V2.
 */
#include <string.h>

#include "klp.h"
#include "cond_impl.h"
#include "park.h"
#include "wordlock.h"

/* glibc's __kind: the type with its robust/PI/PP bits (without process-shared). */
#define GLIBC_KIND_TYPE 127

static inline struct klp_cond *C(pthread_cond_t *c)
{
	return (struct klp_cond *)(void *)c;
}

/* glibc's: process-shared, or every condvar under KLOCK_MUTEX=pthread. */
static inline bool cond_is_glibc(struct klp_cond *c)
{
	return (atomic_load_explicit(&c->attr, memory_order_relaxed) & KLP_COND_PSHARED) ||
	       klp_config()->mutex_impl == KLP_I_PTHREAD;
}

static clockid_t cond_clock(struct klp_cond *c)
{
	return (atomic_load_explicit(&c->attr, memory_order_relaxed) & KLP_COND_MONOTONIC) ?
		CLOCK_MONOTONIC : CLOCK_REALTIME;
}

/* ---- the generic path ---------------------------------------------------------------- */

struct gen_wait {
	pthread_mutex_t *pm;
	uint64_t tag;       /* the mutex's klock tag, or 0 for glibc's */
	const struct kli_cond_wait *w; /* the deadline and the wait's extras */
};

static void gen_release(struct gen_wait *g)
{
	if (g->tag == 0)
		KLP_REAL(pthread_mutex_unlock)(g->pm);
	else
		klp_mutex_unlock_raw((struct klp_mutex *)(void *)g->pm, g->tag);
}

/* before_sleep: we are queued; now let the signaller in. */
static void gen_before_sleep(void *arg)
{
	gen_release(arg);
}

static int gen_reacquire(struct gen_wait *g)
{
	if (g->tag == 0)
		return KLP_REAL(pthread_mutex_lock)(g->pm); /* EOWNERDEAD comes back, as glibc */
	klp_mutex_lock_raw((struct klp_mutex *)(void *)g->pm, g->tag);
	return 0;
}

/* Whether the caller holds @g's mutex: glibc records the owner's tid in __owner for
 * every type it implements. */
static bool gen_owned(struct gen_wait *g)
{
	if (g->tag != 0)
		return klp_mutex_owned((struct klp_mutex *)(void *)g->pm, g->tag);
	return atomic_load_explicit((_Atomic int *)(void *)&g->pm->__data.__owner,
				    memory_order_relaxed) == kli_self()->tid;
}

/* Counted out by whoever dequeues us (G: under the bucket lock). */
static uintptr_t gen_signal_cb(const struct kli_unpark_result *r, void *arg)
{
	struct klp_cond *c = arg;

	if (r->unparked)
		atomic_fetch_sub_explicit(&c->gwaiters, 1, memory_order_relaxed);
	return 0;
}

/* The wait's validate step (cond_impl.h), given the gen_wait. */
static bool gen_validate(void *arg)
{
	const struct gen_wait *g = arg;

	return g->w->validate(g->w->arg);
}

/* Waits on @c's generic queue with @g->w's deadline and extras (cond_impl.h). 0,
 * ETIMEDOUT, or the relock's error. The caller holds the mutex, held again on return. */
static int gen_wait(struct klp_cond *c, struct gen_wait *g)
{
	struct kli_thread *self = kli_self();
	struct kli_park_req req = { .key = &c->gwaiters, .before_sleep = gen_before_sleep,
				    .arg = g, .abstime = g->w->abstime,
				    .realtime = g->w->realtime,
				    .validate = g->w->validate != NULL ? gen_validate : NULL,
				    .cookie = g->w->cookie };
	uintptr_t token = 0;
	enum kli_park_result pr;
	int err = 0, r;

	/* G1: release, pairs with G2 in the signallers. */
	atomic_fetch_add_explicit(&c->gwaiters, 1, memory_order_release);
	pr = kli_park(&req, &token);
	if (pr == KLI_PARK_INVALID) { /* never queued: the mutex was never released */
		atomic_fetch_sub_explicit(&c->gwaiters, 1, memory_order_relaxed);
		return 0;
	}
	if (pr == KLI_PARK_TIMEDOUT)
		err = ETIMEDOUT;
	/* Left our queue by a timeout or a kick (cond_impl.h): nobody counted us out. */
	if ((pr == KLI_PARK_TIMEDOUT &&
	     atomic_load_explicit(&self->park_key, memory_order_relaxed) == &c->gwaiters) ||
	    (pr == KLI_PARK_UNPARKED && token == KLI_COND_TOKEN_KICK))
		atomic_fetch_sub_explicit(&c->gwaiters, 1, memory_order_relaxed);
	r = gen_reacquire(g);
	return r != 0 ? r : err;
}

static void gen_signal(struct klp_cond *c)
{
	if (atomic_load_explicit(&c->gwaiters, memory_order_acquire) != 0) /* G2 */
		kli_unpark_one(&c->gwaiters, gen_signal_cb, c);
}

static void gen_broadcast(struct klp_cond *c)
{
	unsigned n;

	if (atomic_load_explicit(&c->gwaiters, memory_order_acquire) == 0) /* G2 */
		return;
	n = kli_unpark_all(&c->gwaiters, 0);
	atomic_fetch_sub_explicit(&c->gwaiters, n, memory_order_relaxed);
}

/* ---- cancellation ---------------------------------------------------------------------- */

/*
 * pthread_cond_*wait are cancellation points. glibc's pthread_cancel of a deferred-type
 * thread only marks it; glibc's own waits turn asynchronous cancellation on around the
 * futex call, which here would unwind a thread out of a parking-lot queue. So this
 * library also interposes pthread_cancel: it forwards, then KICKS the target if it sleeps
 * in one of our waits, and the kicked waiter retakes the mutex and calls
 * pthread_testcancel() - cleanup handlers run with the mutex held, as POSIX says.
 *
 * A waiter whose cancellation is enabled claims a slot (owner = its pthread_t, the park
 * key, kicked = 0) for the wait, probing at most CANCEL_PROBE slots from its hash; the
 * canceller looks at the same slots. Race-free both ways:
 *   C1  the waiter's seq_cst fence after claiming, then pthread_testcancel();
 *   C2  the canceller's seq_cst fence after glibc's cancel, then its slot search:
 *       a cancel that the entry test did not see finds the slot (store-buffer pairing).
 *   K   the canceller sets kicked, then wakes the waiter by its park cookie (the slot's
 *       address) under the bucket lock; the waiter's validate reads kicked under that
 *       lock, so a kick that comes before the waiter sleeps stops it sleeping.
 * The canceller holds the slot's lock while it kicks and the waiter takes it to free
 * the slot, so a kick never reaches a later wait. A kicked waiter that was woken by a
 * signal as well passes a signal on (POSIX: a cancelled waiter consumes none).
 * Asynchronous cancellation is switched to deferred for the wait (a wait is not
 * async-cancel-safe; glibc's own does the same switch) and restored after it. With
 * cancellation disabled nothing is claimed and pthread_cancel never wakes the waiter.
 * More waiters than slots probe in vain: their waits act on a cancel only when they
 * return (documented in docs/preload.md).
 *
 * fork(): the child's only thread was not waiting, so every claimed slot belongs to a
 * thread that is gone, and a slot lock may be held by one. The child handler frees them
 * all: a held lock would hang the child's next cancellable wait, and a ghost's slot
 * would catch a cancel meant for a child thread that got the ghost's stack, and with it
 * its pthread_t (glibc reuses the dead threads' stacks in the child).
 */
#define CANCEL_SLOTS 1024u   /* slots of threads in cancellable waits (a power of two) */
#define CANCEL_PROBE 16u     /* slots a waiter and a canceller look at */
#define CANCEL_HASH 0x9e3779b97f4a7c15ull /* Fibonacci hashing of the pthread_t */

struct cancel_slot {
	_Atomic uintptr_t owner;     /* the waiting thread's pthread_t, or 0: free */
	_Atomic uint32_t kicked;     /* a pthread_cancel came for this wait */
	struct kli_wordlock lock;    /* a canceller kicking; the waiter freeing */
	const void *key;             /* the park key the waiter sleeps on */
};

static struct cancel_slot cancel_slots[CANCEL_SLOTS];

void klp_cond_atfork_child(void)
{
	for (unsigned i = 0; i < CANCEL_SLOTS; i++) {
		atomic_store_explicit(&cancel_slots[i].lock.v, 0, memory_order_relaxed);
		atomic_store_explicit(&cancel_slots[i].owner, 0, memory_order_relaxed);
		atomic_store_explicit(&cancel_slots[i].kicked, 0, memory_order_relaxed);
	}
}

static unsigned cancel_hash(pthread_t t)
{
	return (unsigned)(((uint64_t)(uintptr_t)t * CANCEL_HASH) >> 32) & (CANCEL_SLOTS - 1);
}

/* Under the bucket lock (K): do not sleep when kicked. */
static bool cancel_validate(void *arg)
{
	struct cancel_slot *s = arg;

	return atomic_load_explicit(&s->kicked, memory_order_relaxed) == 0;
}

static void cancel_slot_free(void *arg)
{
	struct cancel_slot *s = arg;

	kli_wordlock_lock(&s->lock);
	atomic_store_explicit(&s->owner, 0, memory_order_relaxed);
	kli_wordlock_unlock(&s->lock);
}

/* A slot for a wait on @key, or NULL (cancellation disabled, or no slot free). */
static struct cancel_slot *cancel_claim(const void *key)
{
	uintptr_t self = (uintptr_t)pthread_self();
	unsigned h = cancel_hash(pthread_self());
	int state;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
	if (state != PTHREAD_CANCEL_ENABLE)
		return NULL;
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	for (unsigned i = 0; i < CANCEL_PROBE; i++) {
		struct cancel_slot *s = &cancel_slots[(h + i) & (CANCEL_SLOTS - 1)];
		uintptr_t free = 0;

		if (atomic_load_explicit(&s->owner, memory_order_relaxed) != 0)
			continue;
		kli_wordlock_lock(&s->lock);
		if (atomic_compare_exchange_strong_explicit(&s->owner, &free, self,
							    memory_order_relaxed,
							    memory_order_relaxed)) {
			s->key = key;
			atomic_store_explicit(&s->kicked, 0, memory_order_relaxed);
			kli_wordlock_unlock(&s->lock);
			return s;
		}
		kli_wordlock_unlock(&s->lock);
	}
	return NULL;
}

/* The entry's cancellation point, with the mutex held; @s (claimed) is freed if it acts. */
static void cancel_entry(struct cancel_slot *s)
{
	atomic_thread_fence(memory_order_seq_cst); /* C1: pairs with C2 in pthread_cancel */
	pthread_cleanup_push(cancel_slot_free, s);
	pthread_testcancel();
	pthread_cleanup_pop(0);
}

/* After the wait (mutex held again): frees @s; acts on a kick (does not return then). */
static void cancel_exit(struct klp_cond *c, struct cancel_slot *s, int err)
{
	bool kicked;

	kli_wordlock_lock(&s->lock);
	kicked = atomic_load_explicit(&s->kicked, memory_order_relaxed) != 0;
	atomic_store_explicit(&s->owner, 0, memory_order_relaxed);
	kli_wordlock_unlock(&s->lock);
	if (!kicked)
		return;
	if (err == 0) { /* maybe a signal's wake-up too: pass it on */
		kl_cond_signal(&c->kc);
		gen_signal(c);
	}
	pthread_testcancel();
}

/* pthread_cancel's second half: kick @t out of its wait, if it is in one. */
static void cancel_kick(pthread_t t)
{
	unsigned h = cancel_hash(t);

	atomic_thread_fence(memory_order_seq_cst); /* C2: pairs with C1 in cancel_entry() */
	for (unsigned i = 0; i < CANCEL_PROBE; i++) {
		struct cancel_slot *s = &cancel_slots[(h + i) & (CANCEL_SLOTS - 1)];

		if (atomic_load_explicit(&s->owner, memory_order_relaxed) != (uintptr_t)t)
			continue;
		kli_wordlock_lock(&s->lock);
		if (atomic_load_explicit(&s->owner, memory_order_relaxed) == (uintptr_t)t) {
			atomic_store_explicit(&s->kicked, 1, memory_order_relaxed); /* K */
			kli_unpark_cookie(s->key, (uintptr_t)s, KLI_COND_TOKEN_KICK);
		}
		kli_wordlock_unlock(&s->lock);
		return;
	}
}

/* ---- one wait, any kind ------------------------------------------------------------------ */

/* A glibc condvar with a klock mutex: glibc would release the mutex with its own internal
 * functions and corrupt it. */
static int cond_mismatch(pthread_cond_t *pc, pthread_mutex_t *pm)
{
	char detail[160];

	snprintf(detail, sizeof(detail),
		 "its mutex %p is a klock (process-private) mutex; glibc's condvar cannot "
		 "release it: make both process-shared", (void *)pm);
	kli_report("process-shared condvar used with a process-private mutex", "cond", pc,
		   KLI_SITE(), detail);
	return EINVAL;
}

/* A wait with a kl_mutex: the whole recursion is released and restored. */
static int cond_wait_kl(struct klp_cond *c, struct klp_mutex *m, const struct kli_cond_wait *w)
{
	uint32_t depth = m->depth;
	int err;

	m->depth = 0;
	err = kli_cond_wait_ext(&c->kc, &m->u.adaptive, w, KLI_SITE());
	m->depth = depth;
	if (w->abstime == NULL && (err == EPERM || err == EINVAL))
		return 0; /* as kl_cond_wait(): reported (KLOCK_ON_ERROR=warn goes on) */
	return err;
}

/* One klock condvar wait; 0, ETIMEDOUT (the deadline passed), or an error. */
static int cond_sleep(struct klp_cond *c, pthread_mutex_t *pm, uint64_t t,
		      const struct kli_cond_wait *w)
{
	struct klp_mutex *m = (struct klp_mutex *)(void *)pm;
	struct gen_wait g = { pm, t, w };
	uint32_t depth;
	int err;

	if (t != 0 && KLP_TAG_IMPL(t) == KLP_I_ADAPTIVE)
		return cond_wait_kl(c, m, w);
	depth = t != 0 ? m->depth : 0;
	if (t != 0)
		m->depth = 0;
	err = gen_wait(c, &g);
	if (t != 0)
		m->depth = depth;
	return err;
}

/* The checks glibc makes before it waits: EINVAL, EPERM. */
static int cond_check(pthread_mutex_t *pm, uint64_t t)
{
	struct gen_wait g = { pm, t, NULL };

	if (t & KLP_TAG_DESTROYED)
		return EINVAL;
	if (t != 0 && KLP_TAG_KIND(t) == KLP_K_NORMAL)
		return 0; /* undefined without the mutex: kl_cond reports it */
	if (t == 0 && (atomic_load_explicit((_Atomic int *)(void *)&pm->__data.__kind,
					    memory_order_relaxed) & GLIBC_KIND_TYPE) ==
		      PTHREAD_MUTEX_NORMAL)
		return 0; /* glibc does not check a plain (process-shared) NORMAL mutex either */
	return gen_owned(&g) ? 0 : EPERM;
}

/* cond_sleep() as a cancellation point (see "cancellation"). */
static int cond_wait_cancellable(struct klp_cond *c, pthread_mutex_t *pm, uint64_t t,
				 struct kli_cond_wait *w)
{
	bool kl = t != 0 && KLP_TAG_IMPL(t) == KLP_I_ADAPTIVE;
	struct cancel_slot *s;
	int type, err;

	pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &type);
	s = cancel_claim(kl ? (const void *)&c->kc : (const void *)&c->gwaiters);
	if (s != NULL) {
		cancel_entry(s);
		w->validate = cancel_validate;
		w->arg = s;
		w->cookie = (uintptr_t)s;
	}
	err = cond_sleep(c, pm, t, w);
	if (s != NULL)
		cancel_exit(c, s, err);
	if (type != PTHREAD_CANCEL_DEFERRED)
		pthread_setcanceltype(type, NULL);
	return err;
}

/* A klock condvar's wait with an optional deadline @d (NULL: none). One park, on the
 * deadline's own clock: a CLOCK_REALTIME one is a realtime kernel timer that follows
 * clock_settime() (kli_park_req.realtime), so the wait ends with ETIMEDOUT exactly when
 * the caller's clock reaches the deadline and with 0 only when woken. */
static int cond_wait_klock(struct klp_cond *c, pthread_mutex_t *pm, const struct klp_deadline *d)
{
	static const struct timespec passed = { 0, 0 }; /* a CLOCK_MONOTONIC time gone by */
	uint64_t t = klp_mutex_tag((struct klp_mutex *)(void *)pm);
	struct kli_cond_wait w = { 0 };
	int err = cond_check(pm, t);

	if (err != 0)
		return err;
	if (d != NULL) {
		if (d->abs->tv_nsec < 0 || d->abs->tv_nsec >= (long)KLI_NSEC_PER_SEC)
			return EINVAL;
		w.abstime = d->abs;
		w.realtime = d->clock == CLOCK_REALTIME;
		if (klp_deadline_passed(d)) { /* release and retake the mutex, as glibc does */
			w.abstime = &passed;
			w.realtime = false;
		}
	}
	return cond_wait_cancellable(c, pm, t, &w);
}

/* ---- the interposers ---------------------------------------------------------------------- */

KLP_EXPORT int pthread_cond_init(pthread_cond_t *pc, const pthread_condattr_t *attr)
{
	struct klp_cond *c = C(pc);
	int pshared = PTHREAD_PROCESS_PRIVATE;
	clockid_t clock = CLOCK_REALTIME;

	KLP_ENTER();
	if (attr != NULL) {
		pthread_condattr_getpshared(attr, &pshared);
		pthread_condattr_getclock(attr, &clock);
	}
	if (pshared != PTHREAD_PROCESS_PRIVATE || klp_config()->mutex_impl == KLP_I_PTHREAD)
		return KLP_REAL(pthread_cond_init)(pc, attr);
	memset(pc, 0, sizeof(*pc));
	kl_cond_init(&c->kc);
	atomic_store_explicit(&c->attr, clock == CLOCK_MONOTONIC ? KLP_COND_MONOTONIC : 0,
			      memory_order_relaxed);
	return 0;
}

KLP_EXPORT int pthread_cond_destroy(pthread_cond_t *pc)
{
	struct klp_cond *c = C(pc);

	KLP_ENTER();
	if (cond_is_glibc(c))
		return KLP_REAL(pthread_cond_destroy)(pc);
	if (atomic_load_explicit(&c->gwaiters, memory_order_relaxed) != 0)
		return EBUSY;
	return kl_cond_destroy(&c->kc);
}

KLP_EXPORT int pthread_cond_wait(pthread_cond_t *pc, pthread_mutex_t *pm)
{
	struct klp_cond *c = C(pc);

	KLP_ENTER();
	if (cond_is_glibc(c)) {
		if (klp_mutex_tag((struct klp_mutex *)(void *)pm) != 0)
			return cond_mismatch(pc, pm);
		return KLP_REAL(pthread_cond_wait)(pc, pm);
	}
	return cond_wait_klock(c, pm, NULL);
}

KLP_EXPORT int pthread_cond_timedwait(pthread_cond_t *pc, pthread_mutex_t *pm,
				      const struct timespec *abstime)
{
	struct klp_cond *c = C(pc);
	struct klp_deadline d;

	KLP_ENTER();
	if (cond_is_glibc(c)) {
		if (klp_mutex_tag((struct klp_mutex *)(void *)pm) != 0)
			return cond_mismatch(pc, pm);
		return KLP_REAL(pthread_cond_timedwait)(pc, pm, abstime);
	}
	d = (struct klp_deadline){ cond_clock(c), abstime };
	return cond_wait_klock(c, pm, &d);
}

KLP_EXPORT int pthread_cond_clockwait(pthread_cond_t *pc, pthread_mutex_t *pm, clockid_t clock,
				      const struct timespec *abstime)
{
	struct klp_cond *c = C(pc);
	struct klp_deadline d = { clock, abstime };

	KLP_ENTER();
	if (cond_is_glibc(c)) {
		if (klp_mutex_tag((struct klp_mutex *)(void *)pm) != 0)
			return cond_mismatch(pc, pm);
		return KLP_REAL(pthread_cond_clockwait)(pc, pm, clock, abstime);
	}
	if (!klp_clock_ok(clock))
		return EINVAL;
	return cond_wait_klock(c, pm, &d);
}

/* glibc's cancel, then a kick out of an interposed wait (see "cancellation"). */
KLP_EXPORT int pthread_cancel(pthread_t t)
{
	int err;

	KLP_ENTER();
	err = KLP_REAL(pthread_cancel)(t);
	if (err == 0)
		cancel_kick(t);
	return err;
}

KLP_EXPORT int pthread_cond_signal(pthread_cond_t *pc)
{
	struct klp_cond *c = C(pc);

	KLP_ENTER();
	if (cond_is_glibc(c))
		return KLP_REAL(pthread_cond_signal)(pc);
	kl_cond_signal(&c->kc);
	gen_signal(c);
	return 0;
}

KLP_EXPORT int pthread_cond_broadcast(pthread_cond_t *pc)
{
	struct klp_cond *c = C(pc);

	KLP_ENTER();
	if (cond_is_glibc(c))
		return KLP_REAL(pthread_cond_broadcast)(pc);
	kl_cond_broadcast(&c->kc);
	gen_broadcast(c);
	return 0;
}
