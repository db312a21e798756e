/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/inline/mcs.h - the machinery behind <klock/mcs.h>: private constants and the fast
 * paths that header inlines when the build allows it (KL_INLINE_FAST_PATHS_ in
 * <klock/compiler.h>, and no KLOCK_NO_INLINE). Included by <klock/mcs.h> only; nothing
 * here is API: the contract (struct, initializer, every exported function) is there.
 */
#ifndef KLOCK_INLINE_MCS_H
#define KLOCK_INLINE_MCS_H

#ifndef KLOCK_MCS_H
#error "include <klock/mcs.h>, not <klock/inline/mcs.h>"
#endif

/* node.locked of a holder that found the lock free (private; locks/primitives/mcs.c's MCS_HOLDER). */
#define KL_MCS_NODE_HOLDER 3u
/* One passive waiter in crowd (private; locks/primitives/mcs.c's MCS_PASSIVE_ONE): the high half. */
#define KL_MCS_CROWD_PASSIVE_ONE (1u << 16)
/* crowd's counting-on bit (private; locks/primitives/mcs.c's MCS_COUNTING). */
#define KL_MCS_CROWD_COUNTING (1u << 15)

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

#endif /* KLOCK_INLINE_MCS_H */
