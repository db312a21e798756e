/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/mutex.c - kl_mutex, the adaptive spin-then-park mutex.
 *
 * WHAT. The kernel adaptive mutex (Linux mutex + OSQ, FreeBSD mtx + lock_delay,
 * NetBSD/Solaris adaptive mutex) in userspace, with WebKit's ParkingLot for the sleep
 * side. Uncontended: one CAS to lock, one CAS to unlock. Contended: spin (one spinner
 * on the word, polling at paced intervals, sparser once it has seen the lock retaken
 * between two looks; the rest queued on their own cache lines) for as long as the lock
 * keeps changing hands, but no longer than a learnt budget without progress
 * (MTX_STALL_NS while the lock's waits are short: a holder stalled by the host or the
 * timer tick is ridden out), then park. A holder that relocks at once keeps the
 * lock for MTX_TURN_NS before the spinner claims its turn (I3). Userspace has no "is the
 * owner on a CPU" test (the rseq sched_state RFC is unmerged): "the lock is still moving"
 * stands in for it.
 *
 * STATE. Word `owner` (uintptr_t; owner ids are multiples of 128, bits 0-6 are flags):
 *   bits 7..63  owner: the holder's owner id (kli_tls_owner, locks/substrate/thread.h), or 0 when
 *               nobody holds it. An id, not the thread record: records are recycled, ids
 *               never, so a mutex left locked by a thread that exited stays locked and
 *               owned by nobody alive (no later thread passes the owner checks: lock
 *               waits, timedlock times out, unlock is "not owner", owned() is false).
 *   bit 0  PARKED     threads sleep on the mutex's park key, or are about to; unlock must
 *                     take the slow path and unpark one. Set by a parker under the bucket
 *                     lock (validate), cleared by the unparker under the same lock when
 *                     no sleeper remains; kept by every other transition.
 *   bit 1  SPINNER    the spin queue's head claims its turn: it has polled a held word for
 *                     MTX_TURN_NS, and a locker that finds the lock free leaves it to the
 *                     spinner (I3). Makes the holder's unlock take one more CAS and its
 *                     next lock the slow path. Set and cleared only by the spinner; kept
 *                     by every other transition.
 *   bit 2  DESTROYED  kl_mutex_destroy() stored KLI_MTX_POISON. Every CAS fails on it,
 *                     so misuse is detected on slow paths only.
 *   bits 3-6          always 0.
 *   0 = unlocked, nobody waiting: the only value the lock fast path accepts.
 * Other fields: `spinq` the OSQ tail (locks/substrate/osq.h); `spin_ns` the EWMA of recent successful
 * spin times (spin.h; written by the spin queue's head only); `passes` how many lockers
 * took the free lock past a claimed turn (SPINNER set): the spinner sets it to
 * MTX_PASS_MAX when it claims (no more barging) and to 0 when it wins, a polite locker
 * whose spinner never came to -MTX_PASS_CREDIT, a barging owner adds one.
 *
 * INVARIANTS.
 *   I1 A thread sleeps on the key only after validate saw the word held (owner != 0) and
 *      PARKED set, under the bucket lock; PARKED is cleared only under that bucket lock
 *      when the queue has no one left. So an unlock that sees PARKED clear has nobody to
 *      wake, and one that sees it set finds the sleeper (no lost wake-up).
 *   I2 Hand-off: the unparker writes the wakee's record as owner (under the bucket lock,
 *      before waking it) and gives it KLI_MTX_TOKEN_HANDOFF; the lock is never free in
 *      between, so no barging thread can take it.
 *   I3 Fairness. Sleepers: each unlock with PARKED dequeues the longest-queued sleeper; one
 *      that waited MTX_HANDOFF_NS or lost MTX_HANDOFF_LOSSES races after waking gets the
 *      lock handed over (Linux HANDOFF, WebKit's ~1 ms fair unlock). Spinner: a holder
 *      that releases and relocks at once (the two-thread duel) keeps the lock - the
 *      spinner does not take the free word until it has seen it free at five looks in a
 *      row (mtx_look_again), as a relocking holder's gaps are nanoseconds long - for
 *      MTX_TURN_NS, or until its no-progress budget is about to run out (mtx_turn_due);
 *      then the spinner claims its turn (SPINNER) and the holder's next lock
 *      leaves it the free lock for up to MTX_POLITE_NS (bounded, so a preempted spinner
 *      cannot stall the lock). The two threads alternate streaks of about MTX_TURN_NS,
 *      each run on one CPU with the line in its cache; swapping at every gap a spinner
 *      catches costs the line's trips and both threads' slow paths each time.
 *
 * ORDERING (labels appear at the sites).
 *   M1  acquire CAS taking the lock (fast path and slow path)   pairs with M2
 *   M2  release CAS releasing it (fast path, slow path, unpark callback)  pairs with M1
 *   H1  the unpark callback's release CAS naming the wakee as owner, then park.c's K1
 *       release of the wakee's park_state: the wakee's K2 acquire sees the word and the
 *       previous holder's critical section (hand-off = giver release, picker acquire).
 *   P1  release CAS setting PARKED in validate (under the bucket lock)   pairs with P2
 *   P2  acquire fence in the unlock slow path after it saw PARKED, before it locks the
 *       bucket: the parker's bucket lock and enqueue happen-before our bucket lock, so
 *       kli_unpark_one() finds the sleeper. Relaxed alone would not promise that.
 *
 * COSTS. One word of state; uncontended cost of a plain spinlock; no system call unless
 * someone really sleeps; herd-free (one wake per unlock); bounded unfairness both ways.
 *
 * Owner ids cost the fast paths nothing: they are read from TLS where the record pointer
 * was (the slow paths, which need the record for the spin queue and the parking lot, read
 * both). The alternative - a per-thread count of held locks, so that the record of a
 * thread that exits holding one is never recycled - adds a read-modify-write to every
 * uncontended lock and unlock and must be kept exact on hand-off, kl_cond's requeue and
 * the interposer's recursive paths (thread.h has the full argument).
 *
 * Inline fast paths. klock/mutex.h does the uncontended lock (M1: CAS 0 -> owner id) and
 * unlock (M2: CAS owner id -> 0) inline in C builds without instruments, reading the owner
 * id through kl_mutex_self_ (an alias of kli_tls_owner). A CAS that failed on a word whose
 * only flag is SPINNER goes on inline from the value it returned: the release keeping
 * SPINNER (kl_mutex_release_spinner_), or the barge past a claim while passes are left
 * (kl_mutex_barge_), static inline in the header and used by this file's fast paths too.
 * Any other case calls kl_mutex_lock() / kl_mutex_unlock() here, which start afresh (a
 * failed CAS changed nothing). The call was a third of the uncontended pair (klbench
 * latency: 7.5 ns through the library, 5.0 inline).
 *
 * LIMITS. No priority inheritance (use a PI futex for that); the spin budget is a guess
 * (EWMA), not an owner-running test, so a preempted owner costs spinners up to the budget
 * (KLI_SPIN_MAX_NS; MTX_STALL_NS while the lock's waits are short); after a hand-off the
 * lock is held by a thread that is still waking up (microseconds). Waiters do not touch
 * the mutex after a hand-off, but a woken waiter without one does (it retries): destroy
 * only a mutex nobody waits on.
 */
#include "mutex_impl.h"
#include "hooks.h"
#include "osq.h"
#include "park.h"
#include "spin.h"

/* A sleeper that has waited this long is handed the lock (WebKit/parking_lot: ~1 ms). */
#define MTX_HANDOFF_NS 1000000u
/* ... or one woken this many times without winning (Linux: once; one more keeps the
 * oversubscribed case from paying a wake-up latency per hand-off). */
#define MTX_HANDOFF_LOSSES 2u
/* Barging acquisitions past a claimed turn before a locker yields it (in klock/mutex.h for
 * the inline lock). A claim sets passes to it at once; it counts only after a credit. */
#define MTX_PASS_MAX KL_MUTEX_PASS_MAX_
/* How long a locker yielding its turn waits for the spinner to take the free lock: more
 * than the spinner's longest poll interval. */
#define MTX_POLITE_NS 4000u
/* The no-progress budget of a spinner whose lock's waits are short (its learnt budget
 * under the cap, KLI_SPIN_MAX_NS). A running holder in a KVM guest stops for 5-100 us,
 * hundreds of times a second, when the host or the timer tick takes its CPU, most of
 * those while the spinner's CPU runs on (docs/design-adaptive.md). Sleeping through one
 * costs the waiter a switch and the holder a wake-up system call; with short waits, no
 * progress means such a stall more often than a long section. A few spins that give up
 * push the learnt budget to the cap, and the 2-competitive budget applies again. */
#define MTX_STALL_NS 40000u
/* A spinner must be at least as patient as a polite locker is with it (a polite wait plus
 * one poll interval); the smallest budget it gets is the cap. */
_Static_assert(KLI_SPIN_MAX_NS >= MTX_POLITE_NS + KLI_POLL_MAX_NS,
	       "the spinner gives up before a polite locker does");
/* After the spinner failed to show up (preempted): barges allowed before the next try
 * (~50-100 us of tiny sections; a resumed spinner notices its preemption and leaves, and
 * a new one's claim uses the passes up again). */
#define MTX_PASS_CREDIT 4096
/* How long the spinner lets a holder that keeps relocking keep the lock before it claims
 * its turn (I3): the duel's throughput lever (each turn costs the line's trips and both
 * threads' slow paths, 1-2 us on the development VM, so 5% of a 32 us streak and 15-20%
 * of an 8 us one) against how long a spinner waits: about one futex wake-up there, and
 * far less than a sleeper waits for its hand-off (MTX_HANDOFF_NS). It may outlast the
 * no-progress budget (the cap, KLI_SPIN_MAX_NS): a spinner whose budget is about to run
 * out claims its turn at once (mtx_turn_due). */
#define MTX_TURN_NS 32000u
/* Before its turn, the spinner takes a free lock only at the fifth look in a row that
 * finds it free, MTX_CONFIRM_NS apart (mtx_look_again): half a microsecond, far longer
 * than a holder's release-to-relock gap and short against a wait. The looks are samples,
 * and a relocking holder's word is free at a good share of them (a look takes the line,
 * so the holder's next access misses, often with the word free): k looks in a row all
 * see it free with the k-th power of that share. Two looks 250 ns apart let ~95 000
 * false "holder gone" swaps a second through in the duel on the development VM, four
 * 125 ns apart 9 000-12 000 (57 -> 60 M calls/s, one run each, klbench -t 2 -c 4). */
#define MTX_CONFIRM_LOOKS 4
#define MTX_CONFIRM_NS 125u

#define MTX_KIND KLI_KIND_MUTEX

static KL_COLD KL_NOINLINE void mtx_report(const struct kl_mutex *m, const char *what,
					   const void *site)
{
	kli_report(what, kli_kind_name(MTX_KIND), m, site, NULL);
}

/* Names the misuse behind a failed unlock (the word does not name the caller). */
static KL_COLD KL_NOINLINE void mtx_report_unlock(const struct kl_mutex *m, uintptr_t v,
						  const void *site)
{
	if (v & KLI_MTX_DESTROYED)
		mtx_report(m, "use after destroy", site);
	else if (kli_mtx_owner(v) == 0)
		mtx_report(m, "unlock of a lock not held (double unlock?)", site);
	else
		mtx_report(m, "unlock by a thread that does not own the lock", site);
}

/* Takes the free mutex whose word is *v (owner 0, not destroyed), keeping PARKED, and
 * SPINNER unless the caller is the spinner. On failure *v is the word's new value. */
static inline bool mtx_take(struct kl_mutex *m, uintptr_t *v, kli_owner_t me, bool spinner)
{
	uintptr_t keep = KLI_MTX_PARKED | (spinner ? 0 : KLI_MTX_SPINNER);

	/* M1 (slow path): acquire, pairs with M2. */
	return atomic_compare_exchange_weak_explicit(&m->owner, v, me | (*v & keep),
						     memory_order_acquire, memory_order_relaxed);
}

/* The owner's bookkeeping after taking the lock from word @v as a non-spinner. */
static inline void mtx_count_pass(struct kl_mutex *m, uintptr_t v)
{
	if (v & KLI_MTX_SPINNER)
		atomic_store_explicit(&m->passes,
				      atomic_load_explicit(&m->passes, memory_order_relaxed) + 1,
				      memory_order_relaxed);
}

/*
 * A spinner claimed its turn (and the passes a credit granted are used up): leave it the
 * free lock. Returns 0 if we took it after all (the spinner never came: it is preempted),
 * EAGAIN when the spinner (or anyone) took it.
 */
static int mtx_polite(struct kl_mutex *m, kli_owner_t me)
{
	struct kli_spin s;
	uintptr_t v;

	kli_spin_start(&s, MTX_POLITE_NS);
	do {
		v = atomic_load_explicit(&m->owner, memory_order_relaxed);
		if (kli_mtx_owner(v) != 0 || !(v & KLI_MTX_SPINNER))
			return EAGAIN;
	} while (kli_spin_poll(&s));
	while (kli_mtx_owner(v) == 0 && !(v & KLI_MTX_DESTROYED)) {
		if (mtx_take(m, &v, me, false)) {
			atomic_store_explicit(&m->passes, (uint32_t)-MTX_PASS_CREDIT,
					      memory_order_relaxed);
			return 0;
		}
	}
	return EAGAIN;
}

/* One attempt to take @m without waiting: 0 (taken), EAGAIN (held), EDEADLK (by us),
 * EINVAL (destroyed). */
static int mtx_try(struct kl_mutex *m, kli_owner_t me)
{
	uintptr_t v = atomic_load_explicit(&m->owner, memory_order_relaxed);

	for (;;) {
		if (v & KLI_MTX_DESTROYED)
			return EINVAL;
		if (kli_mtx_owner(v) == me)
			return EDEADLK;
		if (kli_mtx_owner(v) != 0)
			return EAGAIN;
		if ((v & KLI_MTX_SPINNER) &&
		    (int32_t)atomic_load_explicit(&m->passes, memory_order_relaxed) >= MTX_PASS_MAX)
			return mtx_polite(m, me);
		if (mtx_take(m, &v, me, false)) {
			mtx_count_pass(m, v);
			return 0;
		}
	}
}

/* The spinner leaves: clear SPINNER, or take the lock if it is free meanwhile. */
static bool mtx_unspin(struct kl_mutex *m, kli_owner_t me)
{
	uintptr_t v = atomic_load_explicit(&m->owner, memory_order_relaxed);

	while (v & KLI_MTX_SPINNER) {
		if (kli_mtx_owner(v) == 0 && !(v & KLI_MTX_DESTROYED)) {
			if (mtx_take(m, &v, me, true))
				return true;
		} else if (atomic_compare_exchange_weak_explicit(&m->owner, &v,
								 v & ~KLI_MTX_SPINNER,
								 memory_order_relaxed,
								 memory_order_relaxed)) {
			return false;
		}
	}
	return false;
}

/*
 * The spinner saw the word free before its turn (SPINNER clear). A holder that releases
 * and relocks at once (the duel) leaves such a gap every few nanoseconds; taking it only
 * swaps the two threads' roles, at the price of the line's trips and of both threads'
 * slow paths (streaks of 1-16 acquisitions, a million swaps a second, a third of the
 * throughput on the development VM). So look again, MTX_CONFIRM_NS later (four times:
 * MTX_CONFIRM_LOOKS): still free, and the holder has gone. Returns the word at that look.
 */
static uintptr_t mtx_look_again(struct kl_mutex *m)
{
	kli_spin_for(MTX_CONFIRM_NS);
	return atomic_load_explicit(&m->owner, memory_order_relaxed);
}

/* Our turn is due (the holder kept the lock MTX_TURN_NS): set SPINNER, which sends the
 * holder's next lock to mtx_try(), where it leaves us the free lock (mtx_polite). */
static void mtx_claim_turn(struct kl_mutex *m, uintptr_t *v, struct kli_pace *pace)
{
	if (atomic_compare_exchange_weak_explicit(&m->owner, v, *v | KLI_MTX_SPINNER,
						  memory_order_relaxed, memory_order_relaxed)) {
		atomic_store_explicit(&m->passes, MTX_PASS_MAX, memory_order_relaxed);
		kli_pace_start(pace, true); /* the holder will wait for us: look soon */
	}
}

/* Is our turn due: has the holder kept the lock MTX_TURN_NS since we began polling, or is
 * our no-progress budget @s about to run out (two of @p's longest intervals: the claim's
 * next look comes before the end)? A spinner never gives up on a holder it has not asked
 * to yield. (With the margin fixed at two short intervals, a spinner polling at the streak
 * cap ran out of budget between two looks and slept: 4 threads, 64-word sections, 37 k
 * sleeps a second and 16.0 -> 12.0 M ops/s.) */
static inline bool mtx_turn_due(uint64_t turn, const struct kli_spin *s,
				const struct kli_pace *p)
{
	uint64_t now = kl_arch_cycles();

	return now >= turn || now + 2 * p->cap >= s->deadline;
}

/*
 * Polls the word as the spin queue's head until it is ours or @s runs out. The budget
 * bounds time WITHOUT PROGRESS: while the lock changes hands (another owner, or a release
 * we saw) its holder is evidently running, so the budget restarts - the userspace
 * stand-in for Linux's "spin while the owner is on a CPU". A holder that is preempted or
 * in a long section makes no progress, and we go to sleep. A holder that keeps relocking
 * keeps the lock until our turn (I3); once a look has seen it retaken, we poll at most
 * every KLI_STREAK_POLL_NS (kli_pace_streak), since each look slows that holder.
 */
static bool mtx_poll(struct kl_mutex *m, kli_owner_t me, struct kli_spin *s,
		     uint64_t budget_ns)
{
	uintptr_t v = atomic_load_explicit(&m->owner, memory_order_relaxed), seen = v;
	uint64_t turn = kl_arch_cycles() + kli_ns_to_cycles(MTX_TURN_NS);
	unsigned looks = 0; /* looks in a row that saw the word free */
	struct kli_pace pace;

	kli_pace_start(&pace, true);
	for (;;) {
		if (v & KLI_MTX_DESTROYED)
			return false;
		if (kli_mtx_owner(v) == 0) {
			if (!(v & KLI_MTX_SPINNER) && looks < MTX_CONFIRM_LOOKS) {
				if (looks++ == 0)
					kli_spin_start(s, budget_ns); /* progress: a release */
				v = mtx_look_again(m);
			} else if (mtx_take(m, &v, me, true)) {
				return true;
			}
			continue;
		}
		if (looks != 0) /* free at a look, taken again at the next: a streak */
			kli_pace_streak(&pace);
		looks = 0;
		if (!(v & KLI_MTX_SPINNER) && mtx_turn_due(turn, s, &pace)) {
			mtx_claim_turn(m, &v, &pace);
			continue;
		}
		if (!kli_pace(&pace, s))
			return mtx_unspin(m, me);
		v = atomic_load_explicit(&m->owner, memory_order_relaxed);
		if (kli_mtx_owner(v) != kli_mtx_owner(seen)) {
			seen = v; /* progress: another owner; the no-progress clock restarts */
			kli_spin_start(s, budget_ns);
		}
	}
}

/* The spin phase: queue behind other spinners (OSQ), then poll. True holding @m. */
static bool mtx_spin(struct kl_mutex *m, struct kli_thread *self, struct kli_wait *w)
{
	uint64_t budget = kli_stall_budget(&m->spin_ns, MTX_STALL_NS), now, left;
	struct kli_spin s;
	bool got = false;

	kli_wait_spin(w);
	kli_spin_start(&s, budget);
	if (kli_osq_lock(&m->spinq, self, &s)) {
		got = mtx_poll(m, self->owner, &s, budget);
		if (got)
			atomic_store_explicit(&m->passes, 0, memory_order_relaxed);
		/* Learn the last stretch without progress (what the budget bounds). spin_ns has
		 * one writer: the queue's head (we still are). */
		now = kl_arch_cycles();
		left = now < s.deadline ? kli_cycles_to_ns(s.deadline - now) : 0;
		kli_spin_learn(&m->spin_ns, got, left < budget ? budget - left : 0);
		kli_osq_unlock(&m->spinq, self);
	}
	return got;
}

/* Runs under the bucket lock before we queue: sleep only on a held mutex, with PARKED. */
static bool mtx_validate(void *arg)
{
	struct kl_mutex *m = arg;
	uintptr_t v = atomic_load_explicit(&m->owner, memory_order_relaxed);

	for (;;) {
		if ((v & KLI_MTX_DESTROYED) || kli_mtx_owner(v) == 0)
			return false; /* free (or gone): go back and try again */
		if (v & KLI_MTX_PARKED)
			return true;
		/* P1: release, pairs with P2 in mtx_unlock_slow(). */
		if (atomic_compare_exchange_weak_explicit(&m->owner, &v, v | KLI_MTX_PARKED,
							  memory_order_release,
							  memory_order_relaxed))
			return true;
	}
}

struct mtx_waiter {
	uint64_t since;  /* when this acquisition first parked (hand-off clock) */
	uint32_t losses; /* wake-ups without a hand-off so far */
};

/* The park phase: 0 (handed the lock), EAGAIN (woken or not parked: try again),
 * ETIMEDOUT. */
static int mtx_park(struct kl_mutex *m, struct kli_thread *self, struct kli_wait *w,
		    const struct timespec *abstime, struct mtx_waiter *mw)
{
	struct kli_park_req req = { .key = kli_mtx_key(m), .validate = mtx_validate, .arg = m,
				    .abstime = abstime };
	uintptr_t token;

	if (kli_deadline_passed(abstime))
		return ETIMEDOUT;
	if (mw->since == 0)
		mw->since = kli_now_ns();
	req.since_ns = mw->since;
	self->mtx_losses = mw->losses; /* read by the unparker under the bucket lock */
	kli_wait_sleep(w);
	switch (kli_park(&req, &token)) {
	case KLI_PARK_UNPARKED:
		if (token == KLI_MTX_TOKEN_HANDOFF) {
			kli_wait_handoff(w);
			return 0; /* H1: the word already names us; K2 in kli_park() ordered it */
		}
		mw->losses++;
		return EAGAIN;
	case KLI_PARK_TIMEDOUT:
		return ETIMEDOUT;
	default:
		return EAGAIN;
	}
}

/* Contended lock: try, spin, park, until taken, timed out or misused. */
static KL_NOINLINE int mtx_lock_slow(struct kl_mutex *m, struct kli_thread *self,
				     const struct timespec *abstime, unsigned flags,
				     const void *site)
{
	struct mtx_waiter mw = { 0, 0 };
	struct kli_wait w;
	int err;

	kli_wait_begin(&w, m, MTX_KIND, flags, site);
	for (;;) {
		err = mtx_try(m, self->owner);
		if (err != EAGAIN)
			break;
		if (mtx_spin(m, self, &w)) {
			err = 0;
			break;
		}
		err = mtx_park(m, self, &w, abstime, &mw);
		if (err != EAGAIN)
			break;
	}
	kli_wait_end(&w, m, MTX_KIND, flags | (err != 0 ? KLI_HF_FAILED : 0), site);
	return err;
}

/* The lock fast path shared by every entry point: one CAS, M1. */
static KL_ALWAYS_INLINE int mtx_lock(struct kl_mutex *m, const struct timespec *abstime,
				     const void *site)
{
	kli_owner_t me = kli_owner();
	unsigned flags = abstime != NULL ? KLI_HF_TRY : 0;
	uintptr_t v = 0;
	int err = 0;

	kli_hook_acquire(m, MTX_KIND, flags, site);
	/* M1: acquire, pairs with M2 in the previous holder's unlock. */
	if (kl_unlikely(!atomic_compare_exchange_strong_explicit(&m->owner, &v, me,
								  memory_order_acquire,
								  memory_order_relaxed)))
		err = mtx_lock_slow(m, kli_self(), abstime, flags, site);
	kli_hook_acquired(m, MTX_KIND, flags | (err != 0 ? KLI_HF_FAILED : 0), site);
	return err;
}

/* Unparks one sleeper: releases the lock to it (hand-off) or to everyone. Runs under the
 * bucket lock, so PARKED can change only here or in validate (I1). */
static uintptr_t mtx_unpark_cb(const struct kli_unpark_result *r, void *arg)
{
	struct kl_mutex *m = arg;
	bool handoff = r->unparked && (r->waited_ns >= MTX_HANDOFF_NS ||
				       r->thread->mtx_losses >= MTX_HANDOFF_LOSSES);
	uintptr_t v = atomic_load_explicit(&m->owner, memory_order_relaxed), nv;

	do { /* only SPINNER can change under us (the spinner does not take this lock) */
		nv = (v & KLI_MTX_SPINNER) | (r->more ? KLI_MTX_PARKED : 0);
		if (handoff)
			nv |= r->thread->owner;
		/* M2 (slow path) / H1: release. */
	} while (!atomic_compare_exchange_weak_explicit(&m->owner, &v, nv, memory_order_release,
							memory_order_relaxed));
	return handoff ? KLI_MTX_TOKEN_HANDOFF : KLI_MTX_TOKEN_WAKE;
}

/* An unlock by a non-owner: reported, nothing released (false). libklock-preload's copy
 * answers as glibc's NORMAL mutex does: a foreign hold is released all the same (true). */
static KL_COLD bool mtx_misuse_unlock(struct kl_mutex *m, uintptr_t v, const void *site)
{
#if KLOCK_PRELOAD
	if (!(v & KLI_MTX_DESTROYED))
		return kli_preload_unlock_misuse(m, kli_mtx_owner(v) != 0, site);
#endif
	mtx_report_unlock(m, v, site);
	return false;
}

/* Contended unlock: PARKED or SPINNER is set, or the caller does not own @m. */
static bool mtx_release_slow(struct kl_mutex *m, kli_owner_t me, const void *site)
{
	uintptr_t v = atomic_load_explicit(&m->owner, memory_order_relaxed);
	bool forced = false;

	for (;;) {
		if (!forced &&
		    (me == 0 || kli_mtx_owner(v) != me || (v & KLI_MTX_DESTROYED))) {
			if (!mtx_misuse_unlock(m, v, site))
				return false;
			forced = true;
		}
		if (v & KLI_MTX_PARKED) {
			atomic_thread_fence(memory_order_acquire); /* P2: pairs with P1 */
			if (kli_unpark_one(kli_mtx_key(m), mtx_unpark_cb, m))
				kli_hook_woke(m, MTX_KIND);
			return true;
		}
		/* M2 (slow path): release; only SPINNER is left to keep. */
		if (atomic_compare_exchange_weak_explicit(&m->owner, &v, v & KLI_MTX_SPINNER,
							  memory_order_release,
							  memory_order_relaxed))
			return true;
	}
}

static KL_NOINLINE void mtx_unlock_slow(struct kl_mutex *m, kli_owner_t me, const void *site)
{
	mtx_release_slow(m, me, site);
	kli_hook_released(m, MTX_KIND, 0);
}

/* The unlock fast path: one CAS (M2). A thread without an owner id cannot own the mutex:
 * its unlock goes to the slow path, which reports it. */
static KL_ALWAYS_INLINE bool mtx_release_fast(struct kl_mutex *m, kli_owner_t me)
{
	uintptr_t v = me;

	if (kl_unlikely(me == 0))
		return false;
	/* M2: release, pairs with M1 in the next holder's lock. */
	if (kl_likely(atomic_compare_exchange_strong_explicit(&m->owner, &v, 0,
							      memory_order_release,
							      memory_order_relaxed)))
		return true;
	/* A spinner polls (the duel): release, keeping SPINNER - still one more CAS, not a
	 * slow-path call (klock/mutex.h's kl_mutex_release_spinner_(), as its inline unlock). */
	return kl_mutex_release_spinner_(m, me, v);
}

/* ---- exported ------------------------------------------------------------------------ */

void kl_mutex_init(struct kl_mutex *m)
{
	atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
	atomic_store_explicit(&m->spinq, 0, memory_order_relaxed);
	atomic_store_explicit(&m->spin_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&m->passes, 0, memory_order_relaxed);
	kli_hook_created(m, MTX_KIND, 0);
}

int kl_mutex_destroy(struct kl_mutex *m)
{
	uintptr_t v = 0;

	if (!atomic_compare_exchange_strong_explicit(&m->owner, &v, KLI_MTX_POISON,
						     memory_order_relaxed, memory_order_relaxed)) {
		if (KLOCK_DEBUG_LOCKS)
			mtx_report(m, (v & KLI_MTX_DESTROYED) ? "use after destroy"
							      : "destroy of a held lock",
				   KLI_SITE());
		return (v & KLI_MTX_DESTROYED) ? EINVAL : EBUSY;
	}
	kli_hook_destroyed(m, MTX_KIND);
	return 0;
}

/* kl_mutex_lock() past its first CAS (or for a thread without an owner id yet: @me 0). */
static KL_NOINLINE void mtx_lock_contended(struct kl_mutex *m, kli_owner_t me,
					  const void *site)
{
	struct kli_thread *self = kli_self();
	uintptr_t v = 0;
	int err = 0;

	/* M1: acquire, pairs with M2 (a first use has not tried the fast path yet). */
	if (me != 0 ||
	    !atomic_compare_exchange_strong_explicit(&m->owner, &v, self->owner,
						     memory_order_acquire, memory_order_relaxed))
		err = mtx_lock_slow(m, self, NULL, 0, site);
	kli_hook_acquired(m, MTX_KIND, err != 0 ? KLI_HF_FAILED : 0, site);
	if (kl_unlikely(err != 0)) { /* every build: free to detect, fatal to ignore */
#if KLOCK_PRELOAD
		if (err == EDEADLK) /* a NORMAL pthread mutex: deadlocks, as POSIX says */
			kli_preload_relock(m, site);
#endif
		mtx_report(m, err == EDEADLK ? "relock of a held non-recursive lock"
					     : "use after destroy", site);
	}
}

/* The hottest path in the library: a leaf with one CAS (M1); the rest tail-calls. Barging
 * past a polling spinner (the duel's commonest contended step) is klock/mutex.h's
 * kl_mutex_barge_(), shared with the header's inline lock: in the failure branch, so the
 * uncontended path is unchanged and the duel pays no slow-path call per acquisition. */
void (kl_mutex_lock)(struct kl_mutex *m)
{
	kli_owner_t me = kli_tls_owner;
	uintptr_t v = 0;

	kli_hook_acquire(m, MTX_KIND, 0, KLI_SITE());
	/* M1: acquire, pairs with M2 in the previous holder's unlock. */
	if (kl_likely(me != 0) &&
	    (kl_likely(atomic_compare_exchange_strong_explicit(&m->owner, &v, me,
							       memory_order_acquire,
							       memory_order_relaxed)) ||
	     kl_mutex_barge_(m, me, v))) {
		kli_hook_acquired(m, MTX_KIND, 0, KLI_SITE());
		return;
	}
	mtx_lock_contended(m, me, KLI_SITE());
}

bool kl_mutex_trylock(struct kl_mutex *m)
{
	kli_owner_t me = kli_owner();
	uintptr_t v = 0;
	bool ok;

	kli_hook_acquire(m, MTX_KIND, KLI_HF_TRY, KLI_SITE());
	/* M1: acquire, pairs with M2. */
	ok = atomic_compare_exchange_strong_explicit(&m->owner, &v, me,
						     memory_order_acquire, memory_order_relaxed);
	while (!ok && kli_mtx_owner(v) == 0 && !(v & KLI_MTX_DESTROYED)) {
		ok = mtx_take(m, &v, me, false); /* free but flagged: trylock may barge */
		if (ok)
			mtx_count_pass(m, v);
	}
	if (KLOCK_DEBUG_LOCKS && !ok && (v & KLI_MTX_DESTROYED))
		mtx_report(m, "use after destroy", KLI_SITE());
	kli_hook_acquired(m, MTX_KIND, KLI_HF_TRY | (ok ? 0 : KLI_HF_FAILED), KLI_SITE());
	return ok;
}

/* The timed slow path: the site is computed only here, so the uncontended timed lock runs
 * the same instructions whether lockstat is compiled in or not. */
static KL_NOINLINE int mtx_timedlock_contended(struct kl_mutex *m,
					       const struct timespec *abstime, const void *site)
{
	struct kli_thread *self = kli_self();
	uintptr_t v = 0;
	int err = 0;

	/* M1: acquire, pairs with M2 (a first use has not tried the fast path yet). */
	if (!atomic_compare_exchange_strong_explicit(&m->owner, &v, self->owner,
						     memory_order_acquire, memory_order_relaxed))
		err = mtx_lock_slow(m, self, abstime, KLI_HF_TRY, site);
	kli_hook_acquired(m, MTX_KIND, KLI_HF_TRY | (err != 0 ? KLI_HF_FAILED : 0), site);
	if (KLOCK_DEBUG_LOCKS && (err == EDEADLK || err == EINVAL))
		mtx_report(m, err == EDEADLK ? "relock of a held non-recursive lock"
					     : "use after destroy", site);
	return err;
}

int kl_mutex_timedlock(struct kl_mutex *m, const struct timespec *abstime)
{
	kli_owner_t me = kli_tls_owner;
	uintptr_t v = 0;

	if (!kli_timespec_valid(abstime))
		return EINVAL;
	kli_hook_acquire(m, MTX_KIND, KLI_HF_TRY, KLI_SITE());
	/* M1: acquire, pairs with M2 in the previous holder's unlock. */
	if (kl_likely(me != 0) &&
	    kl_likely(atomic_compare_exchange_strong_explicit(&m->owner, &v, me,
							      memory_order_acquire,
							      memory_order_relaxed))) {
		kli_hook_acquired(m, MTX_KIND, KLI_HF_TRY, KLI_SITE());
		return 0;
	}
	return mtx_timedlock_contended(m, abstime, KLI_SITE());
}

void (kl_mutex_unlock)(struct kl_mutex *m)
{
	kli_owner_t me = kli_tls_owner;

	kli_hook_release(m, MTX_KIND, 0, KLI_SITE());
	if (mtx_release_fast(m, me)) {
		kli_hook_released(m, MTX_KIND, 0);
		return;
	}
	mtx_unlock_slow(m, me, KLI_SITE());
}

bool kl_mutex_owned(const struct kl_mutex *m)
{
	kli_owner_t me = kli_tls_owner;

	return me != 0 && kli_mtx_owner(atomic_load_explicit(&m->owner, memory_order_relaxed)) == me;
}

/* ---- for kl_cond ------------------------------------------------------------------------ */

int kli_mutex_lock_at(struct kl_mutex *m, const struct timespec *abstime, const void *site)
{
	return mtx_lock(m, abstime, site);
}

void kli_mutex_unlock_at(struct kl_mutex *m, const void *site)
{
	kli_owner_t me = kli_tls_owner;

	kli_hook_release(m, MTX_KIND, 0, site);
	if (mtx_release_fast(m, me))
		kli_hook_released(m, MTX_KIND, 0);
	else
		mtx_unlock_slow(m, me, site);
}

/* ---- for kl_hashlock --------------------------------------------------------------------- */

/*
 * kl_mutex_lock() on behalf of an exported caller at @site (kl_hashlock's stripes): the
 * same leaf fast path - one CAS (M1), or a barge past a polling spinner - and the same
 * tail call; misuse is reported naming @site. (kli_mutex_lock_at() would do, but its
 * shared mtx_lock() body computes flags and keeps an abstime for the slow path: three more
 * instructions on the uncontended path when lockstat is compiled in, and no barging.)
 */
void kli_mutex_lock_from(struct kl_mutex *m, const void *site)
{
	kli_owner_t me = kli_tls_owner;
	uintptr_t v = 0;

	kli_hook_acquire(m, MTX_KIND, 0, site);
	/* M1: acquire, pairs with M2 in the previous holder's unlock. */
	if (kl_likely(me != 0) &&
	    (kl_likely(atomic_compare_exchange_strong_explicit(&m->owner, &v, me,
							       memory_order_acquire,
							       memory_order_relaxed)) ||
	     kl_mutex_barge_(m, me, v))) {
		kli_hook_acquired(m, MTX_KIND, 0, site);
		return;
	}
	mtx_lock_contended(m, me, site);
}

/*
 * kl_mutex_trylock() with the hooks and reports naming @site (the caller of kl_hashlock's
 * trylock). A copy rather than a shared inline body: with one, gcc 12 lays out
 * kl_mutex_trylock()'s success path with three more instructions.
 */
bool kli_mutex_trylock_at(struct kl_mutex *m, const void *site)
{
	kli_owner_t me = kli_owner();
	uintptr_t v = 0;
	bool ok;

	kli_hook_acquire(m, MTX_KIND, KLI_HF_TRY, site);
	/* M1: acquire, pairs with M2. */
	ok = atomic_compare_exchange_strong_explicit(&m->owner, &v, me,
						     memory_order_acquire, memory_order_relaxed);
	while (!ok && kli_mtx_owner(v) == 0 && !(v & KLI_MTX_DESTROYED)) {
		ok = mtx_take(m, &v, me, false); /* free but flagged: trylock may barge */
		if (ok && (v & KLI_MTX_SPINNER)) /* mtx_count_pass(), spelt out: a second
						  * caller would make gcc outline it */
			atomic_store_explicit(&m->passes,
					      atomic_load_explicit(&m->passes,
								   memory_order_relaxed) + 1,
					      memory_order_relaxed);
	}
	if (KLOCK_DEBUG_LOCKS && !ok && (v & KLI_MTX_DESTROYED))
		mtx_report(m, "use after destroy", site);
	kli_hook_acquired(m, MTX_KIND, KLI_HF_TRY | (ok ? 0 : KLI_HF_FAILED), site);
	return ok;
}
