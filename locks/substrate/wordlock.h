/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/wordlock.h - the library's own internal lock: a 32-bit futex mutex (Drepper's
 * "mutex 3"), used for bookkeeping inside klock (parking-lot buckets, the thread registry,
 * name and statistics tables) where taking a kl_mutex would recurse into the code being
 * protected, and where pthread_mutex cannot be used because libklock-preload replaces it.
 *
 * State word:
 *   0  unlocked
 *   1  locked, nobody sleeping
 *   2  locked, maybe sleepers (unlock must kl_wake one)
 * Invariant: a thread sleeps in kl_wait() only after storing 2, so an unlock that swaps
 * out 2 always wakes someone, and one that swaps out 1 has no one to wake.
 * Ordering: the acquiring CAS/xchg is acquire, the releasing xchg is release (W1/W2).
 * Not fair, not instrumented, never recursive. Sections under it are short and leaf-only.
 */
#ifndef KL_WORDLOCK_H
#define KL_WORDLOCK_H

#include <klock/wait.h>
#include "kl_internal.h"

/* Polls of a held wordlock before sleeping: sections under it are a few hundred ns. */
#define KLI_WORDLOCK_SPINS 100

struct kli_wordlock {
	_Atomic uint32_t v;
};

#define KLI_WORDLOCK_INIT { 0 }

static KL_NOINLINE void kli_wordlock_lock_slow(struct kli_wordlock *l)
{
	uint32_t c;

	for (int i = 0; i < KLI_WORDLOCK_SPINS; i++) {
		c = 0;
		if (atomic_load_explicit(&l->v, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_weak_explicit(&l->v, &c, 1, memory_order_acquire,
							  memory_order_relaxed))
			return; /* W1: acquire, pairs with W2 */
		kl_arch_relax();
	}
	/* Sleeping: mark the word contended; whoever we swap out 0 from, we own it. */
	while (atomic_exchange_explicit(&l->v, 2, memory_order_acquire) != 0) /* W1 */
		kl_wait(&l->v, 2, NULL);
}

static inline void kli_wordlock_lock(struct kli_wordlock *l)
{
	uint32_t c = 0;

	if (kl_likely(atomic_compare_exchange_strong_explicit(&l->v, &c, 1, memory_order_acquire,
							       memory_order_relaxed)))
		return; /* W1: acquire, pairs with W2 in kli_wordlock_unlock() */
	kli_wordlock_lock_slow(l);
}

static inline bool kli_wordlock_trylock(struct kli_wordlock *l)
{
	uint32_t c = 0;

	return atomic_compare_exchange_strong_explicit(&l->v, &c, 1, memory_order_acquire,
						       memory_order_relaxed); /* W1 */
}

static inline void kli_wordlock_unlock(struct kli_wordlock *l)
{
	/* W2: release, pairs with W1 in the next locker. */
	if (kl_unlikely(atomic_exchange_explicit(&l->v, 0, memory_order_release) == 2))
		kl_wake(&l->v, 1);
}

#endif /* KL_WORDLOCK_H */
