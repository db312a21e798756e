/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/mcs.c - kl_mcs, the MCS queue spinlock with caller-owned nodes.
 *
 * What it is. Mellor-Crummey & Scott (1991), as in ck_spinlock_mcs and the queue half of
 * Linux's qspinlock: the lock is a tail pointer; a locker appends its node with one
 * exchange and, if it had a predecessor, links itself behind it and spins on its OWN
 * node's flag. Unlock passes the lock to the successor by setting that flag, or swings
 * the tail back to empty if there is none. One cache-line transfer per hand-over, however
 * many wait.
 *
 * State:
 *   tail          0 = free; else the last queued node (the holder's, when alone)
 *   node.next     the successor's node, written by the successor once it has linked in
 *   node.locked   MCS_WAITING (far back); MCS_NEAR (second behind the holder: stay
 *                 awake); MCS_NEXT (right behind the holder); MCS_SLEEPING (gave up
 *                 spinning, or next/second in line spent MCS_NEAR_AWAKE_NS awake, and
 *                 sleeps on this word: whoever changes it must kl_wake() it);
 *                 MCS_GRANTED (set by the predecessor: the lock is ours); MCS_HOLDER (we
 *                 took it uncontended). NEAR and NEXT are hints (correctness never rests on
 *                 them): the waiter writes them itself before it links in, from what it
 *                 read in its predecessor's node; afterwards only the predecessor promotes
 *                 it, when it becomes next (-> NEAR) or is granted the lock (-> NEXT)
 *   crowd         bits 0-15: waiters that came in through the crowding check (counted
 *                 from before their exchange until granted); bits 16-31: passive waiters
 *                 parked on &crowd (see Oversubscription)
 *   node.flags    MCS_NODE_COUNTED: this waiter is in crowd's count (written before C2;
 *                 the predecessor reads it after C6 and takes it out of the count before
 *                 the grant, so a holder that unlocks and relocks sees the true count)
 *   holder        debug builds only (locks/lockdebug.h)
 * Invariants: the nodes from the holder's to tail form the FIFO of waiters, except for a
 * successor between its exchange and its link store (C2): the holder's unlock waits for it.
 * A waiter reads its predecessor's node only before C2 (the predecessor cannot hand over,
 * return from unlock and free its node before it sees the link); after C2 it reads and
 * writes only its own node, and the predecessor writes into it. So a node is the caller's
 * again as soon as kl_mcs_unlock() returns (it may be freed at once).
 *
 * Oversubscription. A hand-over to a preempted waiter stalls the lock until that thread
 * runs, and spinning waiters burn the CPU the holder needs. So, as in the ticket lock
 * (TWA): the two waiters right behind the holder stay awake - they spin, then yield, for
 * MCS_NEAR_AWAKE_NS in all, then sleep too (a lock held for seconds costs its waiters no
 * CPU; until 2026-12 they yielded for ever: 2.9 s of CPU in a 3 s wait under the
 * interposer); waiters further back spin briefly, then sleep on their own node's flag (a
 * futex word only they and their predecessor touch). A waiter promoted to NEXT promotes its own
 * successor to NEAR, waking it if it sleeps: the wake-up pipeline runs one place ahead of
 * the lock and mostly off its critical path. The hand-over also wakes a successor that
 * still sleeps. Directed wake-ups only, never a herd; a thread only ever touches its
 * successor's node, which cannot go away before it is granted. The holder's unlock,
 * waiting for a successor to link in, polls, then yields. (Until 2026-11 a waiter polled
 * its predecessor's node to learn that it had become next: a read of a node whose owner
 * may already have unlocked and freed it, which ASan caught in klbench.)
 * That still pays a wake-up per hand-over once more threads queue than there are CPUs
 * (measured 20-80 k ops/s at 8 threads on 2 CPUs). So the queue is also kept short, as in
 * kl_ticket (concurrency restriction: Dice & Kogan's GCR, Dice's Malthusian locks): a
 * locker that finds the lock held goes through mcs_lock_contended(), which counts the
 * waiters it lets in (crowd's low half); with holder + counted waiters at kli_crowd_max
 * (the CPUs we may run on), a newcomer parks passive on &crowd, without a node in the
 * queue, until the unlock that leaves the lock free wakes it, or MCS_ROTATE_NS passes;
 * then it queues like anyone. The count is a heuristic (a locker that saw the lock free
 * but lost the race to the exchange queues uncounted): nothing rests on it but speed.
 *
 * Memory ordering:
 *   C1  exchange on tail (acq_rel): acquire pairs with C3 when the lock was free (we take
 *       it from the last holder's release); release publishes our node's initialisation
 *       to the successor that finds it through tail
 *   C2  release store of prev.next = us    pairs with the predecessor's acquire load (C6)
 *   C3  release CAS tail: us -> 0 (no successor)   pairs with C1 of the next locker
 *   C4  acquire load of our locked flag    pairs with C5
 *   C5  release exchange of the successor's locked flag: our critical section happens-
 *       before the successor's; the old value says whether it sleeps (then kl_wake). The
 *       waiter's CAS WAITING/NEAR/NEXT -> SLEEPING and this exchange are RMWs on one
 *       word, so exactly one of "it sees GRANTED and does not sleep" / "we see SLEEPING
 *       and wake it" happens (mcs_promote's CAS SLEEPING -> NEAR/NEXT, then kl_wake, is
 *       the same argument for a promotion)
 *   C6  acquire load of our next link (unlock, mcs_promote)   pairs with C2
 *   S1/S2 asymmetric pair, passive waiters: the waiter adds itself to crowd and issues
 *       the heavy fence (S1) before its validate reads tail; the unlock that swings tail
 *       to 0 (C3) takes the light fence (S2) and loads crowd. Either it sees the passive
 *       waiter and unparks one, or the waiter sees the lock free and does not sleep (its
 *       timeout would bound the wait anyway). The uncontended unlock stays CAS + one load.
 *
 * Inline fast path. klock/mcs.h tries the lock inline first (C builds without
 * instruments): it writes the node (next 0, locked MCS_HOLDER), and if tail reads 0, a
 * CAS of tail from 0 to the node is C1 (acq_rel, as the exchange). A held lock or a lost
 * race calls kl_mcs_lock(), which initialises the node again: a failed CAS queued nothing.
 * The unlock without a successor is inline too: a relaxed look at the node's link (only
 * tested for zero, never followed), C3 as the CAS, S2 (the light half read from
 * kl_fence_asym_) and the load of crowd, calling kl_mcs_wake_passive_() only for passive
 * waiters; a successor, linked or linking in, is kl_mcs_unlock()'s (it reads the link
 * again, with C6). klbench latency: 7.9 ns a pair through the library, 4.9-5.5 ns inline,
 * as ck's MCS (4.7-6.0 ns).
 *
 * Pros: FIFO, one word, local spinning, O(1) traffic per hand-over, directed wake-ups.
 * Cons: a node per acquisition (caller-owned), a longer uncontended path than a ticket
 * (a load, exchange + CAS, a load), FIFO convoys under preemption: each hand-over to a
 * sleeper (far back, or near after a hold longer than MCS_NEAR_AWAKE_NS) costs a wake-up
 * latency that a barging lock would not pay; oversubscribed,
 * fairness is long-term (the rotation period), not per acquisition. Limits: fewer than
 * 2^16 counted waiters and 2^16 passive waiters per lock.
 */
#include <klock/mcs.h>
#include <klock/wait.h>
#include "fence_impl.h"
#include "hooks.h"
#include "lockdebug.h"
#include "park.h"
#include "spin.h"

#define MCS_KIND KLI_KIND_MCS
/* Next in line: spin this long on our flag, then yield (as the ticket lock). */
#define MCS_SPIN_NS 50000u
/* Next or second in line: stay awake (spin, yield) this long in all, then sleep on our
 * flag until promoted or granted (kl_ticket's TICKET_NEXT_AWAKE_NS, the same reasoning). */
#define MCS_NEAR_AWAKE_NS 1000000u
/* Further back: poll this long (the queue may move fast), then sleep on our flag. */
#define MCS_QUEUE_SPIN_NS 2000u

/* A passive waiter's longest sleep before it queues anyway: the rotation period (as
 * kl_ticket's: about kl_mutex's hand-off threshold). */
#define MCS_ROTATE_NS 1000000u
/* crowd: one passive waiter (the high half), and the counted waiters (low half). */
#define MCS_PASSIVE_ONE KL_MCS_CROWD_PASSIVE_ONE
#define MCS_QUEUED_MASK (MCS_PASSIVE_ONE - 1u)

/* node.flags: the waiter is counted in crowd. */
#define MCS_NODE_COUNTED 1u

/* node.locked values. */
#define MCS_WAITING 0u
#define MCS_GRANTED 1u
#define MCS_SLEEPING 2u
#define MCS_HOLDER KL_MCS_NODE_HOLDER
#define MCS_NEXT 4u
#define MCS_NEAR 5u

/* A node's value seen by the thread queued right behind it: where does that put us? Read
 * only before we link in (see the invariants). */
static uint32_t mcs_rank_behind(uint32_t prev)
{
	if (prev == MCS_GRANTED || prev == MCS_HOLDER)
		return MCS_NEXT;
	return prev == MCS_NEXT ? MCS_NEAR : MCS_WAITING;
}

/* Tells our successor, if it has linked in, that it moved up to @to (MCS_NEAR or
 * MCS_NEXT), waking it if it sleeps. Only our successor's node is ours to touch: it
 * cannot be granted, so cannot leave, before we are done. A successor still linking in
 * reads our own state instead (mcs_rank_behind); one that misses both only loses the hint. */
static void mcs_promote(struct kl_mcs_node *n, uint32_t to)
{
	struct kl_mcs_node *next = (struct kl_mcs_node *)atomic_load_explicit(
		&n->next, memory_order_acquire); /* C6 */
	uint32_t v;

	if (next == NULL)
		return;
	v = atomic_load_explicit(&next->locked, memory_order_relaxed);
	do {
		if (v == to || v == MCS_NEXT || v == MCS_GRANTED)
			return;
	} while (!atomic_compare_exchange_weak_explicit(&next->locked, &v, to,
							memory_order_relaxed, memory_order_relaxed));
	if (v == MCS_SLEEPING)
		kl_wake(&next->locked, 1);
}
/* What kl_mcs_destroy() leaves in tail: not a node address (odd). */
#define MCS_POISON ((uintptr_t)0xdeadbeefu)

static struct kl_mcs_node *as_node(uintptr_t v)
{
	return (struct kl_mcs_node *)v;
}

static void mcs_node_init(struct kl_mcs_node *n)
{
	atomic_store_explicit(&n->next, 0, memory_order_relaxed);
	atomic_store_explicit(&n->locked, 0, memory_order_relaxed);
}

/* Budget spent, not yet granted (our flag read @v): yield if we are near the lock and
 * still @awake, else sleep on our flag (unless a promotion or the grant changed it
 * meanwhile). Returns the flag value the caller has acted on (MCS_SLEEPING if we slept). */
static uint32_t mcs_pause(struct kl_mcs_node *n, uint32_t v, bool awake, struct kli_wait *w)
{
	uint32_t seen = v; /* a failed CAS below leaves the change for the caller to see */

	if (awake) {
		kli_yield(); /* stay awake, give a preempted holder our CPU */
		return seen;
	}
	if (v == MCS_SLEEPING ||
	    atomic_compare_exchange_strong_explicit(&n->locked, &v, MCS_SLEEPING,
						    memory_order_relaxed, memory_order_relaxed)) {
		kli_wait_sleep(w);
		kl_wait(&n->locked, MCS_SLEEPING, NULL);
		kli_wait_spin(w);
		return MCS_SLEEPING;
	}
	return seen;
}

/* Queued behind @prev: link in, then wait until granted. */
static void mcs_wait_granted(struct kl_mcs_node *n, struct kl_mcs_node *prev,
			     struct kli_wait *w)
{
	/* Our last read of @prev: it stays alive until it has seen our link (C2). */
	uint32_t rank = mcs_rank_behind(atomic_load_explicit(&prev->locked, memory_order_relaxed));
	uint32_t v, seen = rank;
	struct kli_spin s, awake;

	kli_wait_spin(w);
	atomic_store_explicit(&n->locked, rank, memory_order_relaxed); /* nobody else writes it yet */
	/* C2: release, pairs with C6 in the predecessor's unlock. */
	atomic_store_explicit(&prev->next, (uintptr_t)n, memory_order_release);
	if (rank == MCS_NEXT)
		mcs_promote(n, MCS_NEAR);
	kli_spin_start(&s, rank != MCS_WAITING ? MCS_SPIN_NS : MCS_QUEUE_SPIN_NS);
	kli_spin_start(&awake, MCS_NEAR_AWAKE_NS);
	/* C4: acquire, pairs with C5 in the predecessor's hand-over. */
	while ((v = atomic_load_explicit(&n->locked, memory_order_acquire)) != MCS_GRANTED) {
		if ((v == MCS_NEXT || v == MCS_NEAR) && v != seen) { /* promoted (or woken so) */
			seen = rank = v;
			if (rank == MCS_NEXT)
				mcs_promote(n, MCS_NEAR);
			kli_spin_start(&s, MCS_SPIN_NS);
			kli_spin_start(&awake, MCS_NEAR_AWAKE_NS);
		}
		if (kli_spin_poll(&s))
			continue;
		seen = mcs_pause(n, v, rank != MCS_WAITING && !kli_spin_expired(&awake), w);
		kli_spin_start(&s, rank != MCS_WAITING ? MCS_SPIN_NS : MCS_QUEUE_SPIN_NS);
	}
	mcs_promote(n, MCS_NEXT); /* we hold the lock: our successor is next */
}

/* Lost the race to a free lock: queued uncounted behind @prev. */
static KL_NOINLINE void mcs_wait(struct kl_mcs *l, struct kl_mcs_node *n,
				 struct kl_mcs_node *prev, const void *site)
{
	struct kli_wait w;

	kli_wait_begin(&w);
	n->flags = 0; /* published by C2 */
	mcs_wait_granted(n, prev, &w);
	kli_wait_end(&w, l, MCS_KIND, KLI_HF_SPIN, site);
}

/* Under the bucket lock (and before it): is the lock held with a full queue? */
static bool mcs_crowded(void *arg)
{
	struct kl_mcs *l = arg;

	return atomic_load_explicit(&l->tail, memory_order_relaxed) != 0 &&
	       (atomic_load_explicit(&l->crowd, memory_order_relaxed) & MCS_QUEUED_MASK) + 1 >=
		       kli_crowd_max;
}

/* Polls for MCS_QUEUE_SPIN_NS: does the crowd persist? (A count can lag the queue by a
 * few instructions - a waiter counted just before it found the lock free - and a passive
 * wait costs a heavy fence, so a glimpse does not send us there.) */
static bool mcs_stays_crowded(struct kl_mcs *l, struct kli_wait *w)
{
	struct kli_spin s;

	kli_wait_spin(w);
	kli_spin_start(&s, MCS_QUEUE_SPIN_NS);
	while (kli_spin_poll(&s))
		if (!mcs_crowded(l))
			return false;
	return true;
}

/* Wait passive, off the queue, until the lock is free or the rotation period passes. */
static void mcs_wait_passive(struct kl_mcs *l, struct kli_wait *w)
{
	struct timespec until;
	struct kli_park_req req = { .key = &l->crowd, .validate = mcs_crowded, .arg = l,
				    .abstime = &until };
	uintptr_t token;

	kli_wait_sleep(w);
	kli_deadline_after(&until, MCS_ROTATE_NS);
	atomic_fetch_add_explicit(&l->crowd, MCS_PASSIVE_ONE, memory_order_relaxed);
	kli_fence_heavy(); /* S1: pairs with S2 in kl_mcs_unlock() and its inline copy */
	kli_park(&req, &token);
	atomic_fetch_sub_explicit(&l->crowd, MCS_PASSIVE_ONE, memory_order_relaxed);
}

/* The lock was held when we looked: wait passive if the queue is full, then queue,
 * counted in crowd until granted. */
static KL_NOINLINE void mcs_lock_contended(struct kl_mcs *l, struct kl_mcs_node *n,
					   const void *site)
{
	struct kl_mcs_node *prev;
	struct kli_wait w;

	kli_wait_begin(&w);
	if (mcs_crowded(l) && mcs_stays_crowded(l, &w))
		mcs_wait_passive(l, &w);
	atomic_fetch_add_explicit(&l->crowd, 1, memory_order_relaxed);
	n->flags = MCS_NODE_COUNTED; /* published by C2; the granter uncounts us */
	/* C1: acq_rel, as in kl_mcs_lock(). */
	prev = as_node(atomic_exchange_explicit(&l->tail, (uintptr_t)n, memory_order_acq_rel));
	if (prev != NULL) {
		mcs_wait_granted(n, prev, &w);
	} else { /* the lock was free after all: nobody grants it, uncount ourselves */
		atomic_store_explicit(&n->locked, MCS_HOLDER, memory_order_relaxed);
		atomic_fetch_sub_explicit(&l->crowd, 1, memory_order_relaxed);
	}
	kli_wait_end(&w, l, MCS_KIND, KLI_HF_SPIN, site);
}

/* The lock is free and passive waiters sleep: let one in. */
static KL_NOINLINE void mcs_wake_passive(struct kl_mcs *l)
{
	kli_unpark_one(&l->crowd, NULL, NULL);
}

/* klock/mcs.h's inline unlock did C3, S2 and the load; it found passive waiters. */
void kl_mcs_wake_passive_(struct kl_mcs *l)
{
	mcs_wake_passive(l);
}

void kl_mcs_init(struct kl_mcs *l)
{
	atomic_store_explicit(&l->tail, 0, memory_order_relaxed);
	atomic_store_explicit(&l->crowd, 0, memory_order_relaxed);
#if KLOCK_DEBUG_LOCKS
	atomic_store_explicit(&l->holder, 0, memory_order_relaxed);
#endif
	kli_hook_created(l, MCS_KIND, KLI_HF_SPIN);
}

void kl_mcs_destroy(struct kl_mcs *l)
{
#if KLOCK_DEBUG_LOCKS
	kli_dbg_destroy(&l->holder, l, MCS_KIND, KLI_SITE());
#endif
	atomic_store_explicit(&l->tail, MCS_POISON, memory_order_relaxed);
	kli_hook_destroyed(l, MCS_KIND);
}

void (kl_mcs_lock)(struct kl_mcs *l, struct kl_mcs_node *n)
{
	struct kl_mcs_node *prev;

	kli_hook_acquire(l, MCS_KIND, KLI_HF_SPIN, KLI_SITE());
#if KLOCK_DEBUG_LOCKS
	if (!kli_dbg_lock_ok(&l->holder, l, MCS_KIND, KLI_SITE()))
		return;
#endif
	mcs_node_init(n);
	if (kl_unlikely(atomic_load_explicit(&l->tail, memory_order_relaxed) != 0)) {
		mcs_lock_contended(l, n, KLI_SITE());
	} else {
		/* C1: acq_rel, pairs with C3 (free lock) and with the successor's view of our
		 * node. */
		prev = as_node(atomic_exchange_explicit(&l->tail, (uintptr_t)n,
							memory_order_acq_rel));
		if (kl_unlikely(prev != NULL))
			mcs_wait(l, n, prev, KLI_SITE());
		else /* tell a successor that links in that it is next (a hint) */
			atomic_store_explicit(&n->locked, MCS_HOLDER, memory_order_relaxed);
	}
#if KLOCK_DEBUG_LOCKS
	kli_dbg_locked(&l->holder);
#endif
	kli_hook_acquired(l, MCS_KIND, KLI_HF_SPIN, KLI_SITE());
}

bool kl_mcs_trylock(struct kl_mcs *l, struct kl_mcs_node *n)
{
	uintptr_t expect = 0;
	bool ok;

	kli_hook_acquire(l, MCS_KIND, KLI_HF_SPIN | KLI_HF_TRY, KLI_SITE());
	mcs_node_init(n);
	/* C1 (try): acq_rel as in lock. */
	ok = atomic_compare_exchange_strong_explicit(&l->tail, &expect, (uintptr_t)n,
						     memory_order_acq_rel, memory_order_relaxed);
	if (ok)
		atomic_store_explicit(&n->locked, MCS_HOLDER, memory_order_relaxed);
#if KLOCK_DEBUG_LOCKS
	if (ok)
		kli_dbg_locked(&l->holder);
	else if (expect == MCS_POISON)
		kli_dbg_report("use after destroy", l, MCS_KIND, KLI_SITE());
#endif
	kli_hook_acquired(l, MCS_KIND, KLI_HF_SPIN | KLI_HF_TRY | (ok ? 0 : KLI_HF_FAILED), KLI_SITE());
	return ok;
}

/* A successor swapped itself into tail but has not linked in yet: wait for C2. */
static struct kl_mcs_node *mcs_wait_next(struct kl_mcs_node *n)
{
	struct kli_spin s;
	uintptr_t next;

	kli_spin_start(&s, KLI_STALL_NS);
	while ((next = atomic_load_explicit(&n->next, memory_order_acquire)) == 0) /* C6 */
		kli_spin_stall(&s);
	return as_node(next);
}

/* Unlock with a successor (@next, or one still linking in when NULL): grant it. */
static KL_NOINLINE void mcs_hand_over(struct kl_mcs *l, struct kl_mcs_node *n,
				      struct kl_mcs_node *next)
{
	if (next == NULL)
		next = mcs_wait_next(n);
	if (next->flags & MCS_NODE_COUNTED) /* read after C6: see mcs_wait_next / the unlock */
		atomic_fetch_sub_explicit(&l->crowd, 1, memory_order_relaxed);
	/* C5: release, pairs with C4. A sleeping successor needs a wake-up (its node may be
	 * gone once it sees GRANTED: a late kl_wake() on it is harmless, as with futexes). */
	if (atomic_exchange_explicit(&next->locked, MCS_GRANTED, memory_order_release) ==
	    MCS_SLEEPING)
		kl_wake(&next->locked, 1);
	kli_hook_released(l, MCS_KIND, KLI_HF_SPIN);
}

void (kl_mcs_unlock)(struct kl_mcs *l, struct kl_mcs_node *n)
{
	struct kl_mcs_node *next;

	kli_hook_release(l, MCS_KIND, KLI_HF_SPIN, KLI_SITE());
#if KLOCK_DEBUG_LOCKS
	if (!kli_dbg_unlock_ok(&l->holder, l, MCS_KIND, KLI_SITE()))
		return;
#endif
	next = as_node(atomic_load_explicit(&n->next, memory_order_acquire)); /* C6 */
	if (next == NULL) {
		uintptr_t expect = (uintptr_t)n;

		/* C3: release, pairs with C1 of the next locker. */
		if (kl_likely(atomic_compare_exchange_strong_explicit(&l->tail, &expect, 0,
								      memory_order_release,
								      memory_order_relaxed))) {
			kli_fence_light(); /* S2: pairs with S1 in mcs_wait_passive() */
			if (kl_unlikely(atomic_load_explicit(&l->crowd, memory_order_relaxed) >=
					MCS_PASSIVE_ONE))
				mcs_wake_passive(l);
			kli_hook_released(l, MCS_KIND, KLI_HF_SPIN);
			return;
		}
	}
	mcs_hand_over(l, n, next);
}

bool kl_mcs_is_locked(const struct kl_mcs *l)
{
	return atomic_load_explicit(&l->tail, memory_order_relaxed) != 0;
}
