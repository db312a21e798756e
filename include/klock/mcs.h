/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/mcs.h - the MCS queue spinlock (Mellor-Crummey & Scott, 1991): FIFO, one word,
 * each waiter spinning on its own cache line.
 *
 * A locker brings a queue node (struct kl_mcs_node, usually on its stack), appends it with
 * one atomic exchange and spins on a flag in its own node, which its predecessor sets on
 * unlock. So a release touches one waiter's cache line instead of every waiter's, which is
 * what keeps MCS flat on many-core machines (Linux builds qspinlock's slow path from it).
 * Spinning is time-budgeted (the two waiters nearest the lock stay awake about 1 ms, the
 * others spin 50 us while the queue fits on the CPUs, far less once it is full); then the waiter sleeps on its own node and the hand-over wakes
 * exactly it, so waiters do not burn the CPUs the holder needs when threads outnumber CPUs
 * (FIFO still pays a wake-up per hand-over there: prefer kl_mutex, which barges).
 *
 * The node passed to lock (or a successful trylock) must be passed to the matching unlock
 * and must stay alive and untouched until that unlock returns. One node per acquisition;
 * it may be reused afterwards. Not recursive, not process-shared, not async-signal-safe.
 * Debug builds (-Ddebug_locks=true) add an owner field and report relock, unlock by a
 * non-owner, double unlock and use after destroy.
 */
#ifndef KLOCK_MCS_H
#define KLOCK_MCS_H

#include <stdbool.h>
#include <stdint.h>
#include <klock/compiler.h>
#include <klock/config.h>
#include <klock/fence.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif

KL_BEGIN_DECLS

/* Where a node's second cache line starts (its awake flag's line, which the waiter writes
 * only when the flag changes: see locks/primitives/mcs.c). */
#define KL_MCS_NODE_LINE 64

/* A waiter's queue node (fields private; see locks/primitives/mcs.c): two cache lines (128 bytes,
 * 64-aligned). No initialisation needed. */
struct kl_mcs_node {
	KL_ATOMIC(uintptr_t) next;   /* successor's node (and a flag), once it has linked in */
	KL_ATOMIC(uint32_t) locked;  /* waiting / sleeping / granted by the predecessor */
	/* 1: the waiter runs G2 before it sleeps, so a grant may be a plain store */
	KL_ATOMIC(uint32_t) awake KL_ALIGNED(KL_MCS_NODE_LINE);
};

struct kl_mcs {
	KL_ATOMIC(uintptr_t) tail;   /* last queued node (the holder's when alone), 0 = free */
	KL_ATOMIC(uint32_t) crowd;   /* waiters queued and waiting passive (see locks/primitives/mcs.c) */
#if KLOCK_DEBUG_LOCKS
	KL_ATOMIC(uintptr_t) holder; /* debug builds: holder's thread record, or a poison */
#endif
};

#if KLOCK_DEBUG_LOCKS
#define KL_MCS_INITIALIZER { 0, 0, 0 }
#else
#define KL_MCS_INITIALIZER { 0, 0 }
#endif

/** kl_mcs_init - make @l an unlocked MCS lock. Never blocks. */
KL_API void kl_mcs_init(struct kl_mcs *l) KL_NONNULL(1);

/** kl_mcs_destroy - end @l's life; @l must be unlocked. Poisoned (debug builds report
 * later use). Never blocks. */
KL_API void kl_mcs_destroy(struct kl_mcs *l) KL_NONNULL(1);

/**
 * kl_mcs_lock - acquire @l in arrival order, queueing @node. Spins, then sleeps until its
 * predecessor hands it over. When as many threads hold or wait for @l as the process may
 * use CPUs, a newcomer first waits off the queue until the lock is free or about 1 ms
 * passes (kl_ticket_lock's rule). Not recursive. The same thread must unlock, with the
 * same @node.
 */
KL_API void kl_mcs_lock(struct kl_mcs *l, struct kl_mcs_node *node) KL_NONNULL(1, 2);

/** kl_mcs_trylock - acquire @l with @node if it is free. True if the caller now holds it.
 * Never waits. */
KL_API bool kl_mcs_trylock(struct kl_mcs *l, struct kl_mcs_node *node) KL_NONNULL(1, 2);

/** kl_mcs_unlock - release @l, acquired with @node, to the next queued waiter (waking it if
 * it sleeps). Waits only for a successor that is in the middle of linking itself in. */
KL_API void kl_mcs_unlock(struct kl_mcs *l, struct kl_mcs_node *node) KL_NONNULL(1, 2);

/** kl_mcs_is_locked - true if someone holds @l (a racy snapshot, for assertions). */
KL_API bool kl_mcs_is_locked(const struct kl_mcs *l) KL_NONNULL(1);

/* node.locked of a holder that found the lock free (private; locks/primitives/mcs.c's MCS_HOLDER). */
#define KL_MCS_NODE_HOLDER 3u
/* One passive waiter in crowd (private; locks/primitives/mcs.c's MCS_PASSIVE_ONE): the high half. */
#define KL_MCS_CROWD_PASSIVE_ONE (1u << 16)
/* crowd's counting-on bit (private; locks/primitives/mcs.c's MCS_COUNTING). */
#define KL_MCS_CROWD_COUNTING (1u << 15)

/* The crowd half of kl_mcs_unlock(), for the inline unlock below: the unlock has freed @l
 * and seen counting on or passive waiters in crowd; turns counting off if the crowd has
 * drained, else lets a passive waiter in. Private: crowd is its only state. */
KL_API void kl_mcs_unlocked_crowd_(struct kl_mcs *l) KL_NONNULL(1);

/* The waiting half of kl_mcs_lock(), for the inline lock below: @node (initialised as
 * the inline lock does) has swapped itself into tail behind @prev, uncounted; links in
 * and waits until granted. Private. */
KL_API void kl_mcs_queued_(struct kl_mcs *l, struct kl_mcs_node *node,
			   struct kl_mcs_node *prev) KL_NONNULL(1, 2, 3);

/*
 * ---- inline fast paths ---------------------------------------------------------------
 * As klock/ticket.h's (same build conditions, KLOCK_NO_INLINE to force the call). The
 * lock writes @node as the uncontended holder's (next 0, locked MCS_HOLDER: the hint a
 * successor reads) and, with crowd at 0 (counting off, nobody passive: no gate to
 * check, nobody to count), swaps it into tail: C1 of locks/primitives/mcs.c (acq_rel, pairing with
 * C3, the last holder's release, and publishing the node's initialisation to a
 * successor). An empty tail means we hold the lock; else kl_mcs_queued_() links in
 * behind the old tail and waits, uncounted. The exchange comes without a test read of
 * tail first, as ck's: one atomic on the uncontended path, and at two threads the
 * relocker reaches its link right after its own grant, so every instruction on the way
 * is on the hand-over's critical path (docs/design-adaptive.md). crowd not 0 goes to
 * kl_mcs_lock(), which initialises the node again and takes the gate and the count.
 * The unlock without a successor is the library's, step for step: no link in @node, the
 * CAS of tail from @node to empty (C3, seq_cst: P3) and one seq_cst load of crowd (P4), which
 * calls kl_mcs_unlocked_crowd_() only if counting is on or passive waiters sleep. A
 * successor - linked in, or one that swapped tail and is still linking in (the CAS
 * fails) - is the library's call, which reads @node's link again: the inline part
 * changed nothing.
 */
#if defined(KL_INLINE_FAST_PATHS_) && !defined(KLOCK_NO_INLINE)
#define KL_MCS_INLINE 1

static inline void kl_mcs_lock_inline(struct kl_mcs *l, struct kl_mcs_node *node)
{
	uintptr_t prev;

	atomic_store_explicit(&node->next, 0, memory_order_relaxed);
	atomic_store_explicit(&node->locked, KL_MCS_NODE_HOLDER, memory_order_relaxed);
	if (__builtin_expect(atomic_load_explicit(&l->crowd, memory_order_relaxed) != 0, 0)) {
		(kl_mcs_lock)(l, node); /* counting on, or passive waiters: the gate */
		return;
	}
	/* C1: acq_rel, pairs with C3 in the last holder's unlock (a free lock); publishes the
	 * node's initialisation to a successor. */
	prev = atomic_exchange_explicit(&l->tail, (uintptr_t)node, memory_order_acq_rel);
	if (__builtin_expect(prev != 0, 0))
		kl_mcs_queued_(l, node, (struct kl_mcs_node *)prev);
}

static inline void kl_mcs_unlock_inline(struct kl_mcs *l, struct kl_mcs_node *node)
{
	uintptr_t mine = (uintptr_t)node;

	/* A zero link is only tested, never followed: relaxed (the call's C6 is acquire).
	 * C3 = P3: seq_cst, pairs with C1 of the next locker and with P1/P2 of a passive
	 * waiter (locks/primitives/mcs.c). */
	if (__builtin_expect(atomic_load_explicit(&node->next, memory_order_relaxed) == 0 &&
				     atomic_compare_exchange_strong_explicit(
					     &l->tail, &mine, 0, memory_order_seq_cst,
					     memory_order_relaxed),
			     1)) {
		/* P4 (seq_cst): pairs with P1 in mcs_wait_passive() */
		if (__builtin_expect(atomic_load_explicit(&l->crowd, memory_order_seq_cst) >=
					     KL_MCS_CROWD_COUNTING,
				     0))
			kl_mcs_unlocked_crowd_(l);
		return;
	}
	(kl_mcs_unlock)(l, node);
}

#define kl_mcs_lock(l, node) kl_mcs_lock_inline(l, node)
#define kl_mcs_unlock(l, node) kl_mcs_unlock_inline(l, node)
#else
#define KL_MCS_INLINE 0
#endif

KL_END_DECLS

#endif /* KLOCK_MCS_H */
