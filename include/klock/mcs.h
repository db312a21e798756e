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

/* The crowd half of kl_mcs_unlock(), for the inline unlock (<klock/inline/mcs.h>): the
 * unlock has freed @l and seen counting on or passive waiters in crowd; turns counting
 * off if the crowd has drained, else lets a passive waiter in. Private: crowd is its
 * only state. */
KL_API void kl_mcs_unlocked_crowd_(struct kl_mcs *l) KL_NONNULL(1);

/* The waiting half of kl_mcs_lock(), for the inline lock (<klock/inline/mcs.h>): @node
 * (initialised as the inline lock does) has swapped itself into tail behind @prev,
 * uncounted; links in and waits until granted. Private. */
KL_API void kl_mcs_queued_(struct kl_mcs *l, struct kl_mcs_node *node,
			   struct kl_mcs_node *prev) KL_NONNULL(1, 2, 3);

#include <klock/inline/mcs.h>

KL_END_DECLS

#endif /* KLOCK_MCS_H */
