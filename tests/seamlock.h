/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/seamlock.h - a test-only mutex that calls the hook seam (locks/hooks.h) exactly
 * as klock's locks do: fast path one CAS between kli_hook_acquire/acquired, slow path a
 * bounded spin then sleeps on the word, bracketed by kli_wait_begin/spin/sleep/end, site
 * passed down from the entry point. lockstat's tests, its demo program and the callgrind
 * proof (tests/lockstat_callgrind.sh) use it, so lockstat is exercised through the seam
 * independently of any real lock.
 *
 * State word (Drepper's "mutex 3"): 0 free, 1 locked, 2 locked and maybe sleepers.
 * A thread sleeps only after storing 2, so an unlock that swaps out 2 wakes one.
 * Ordering: acquiring CAS/xchg acquire, releasing xchg release (L1/L2).
 * NOT a product lock: no hand-off, no fairness, no debug checks.
 */
#ifndef SEAMLOCK_H
#define SEAMLOCK_H

#include <klock/wait.h>
#include "hooks.h"

/* Not every includer uses every function. */
#define KL_MAYBE_UNUSED __attribute__((unused))

/* Polls before sleeping. */
#define SEAMLOCK_SPINS 100

struct seamlock {
	_Atomic uint32_t v;
};

#define SEAMLOCK_INIT { 0 }

static KL_NOINLINE KL_MAYBE_UNUSED void seamlock_lock_slow(struct seamlock *l, const void *site)
{
	struct kli_wait w;
	uint32_t c;

	kli_wait_begin(&w, l, KLI_KIND_MUTEX, 0, site);
	kli_wait_spin(&w);
	for (int i = 0; i < SEAMLOCK_SPINS; i++) {
		c = 0;
		if (atomic_load_explicit(&l->v, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_weak_explicit(&l->v, &c, 1, memory_order_acquire,
							  memory_order_relaxed))
			goto out; /* L1: acquire, pairs with L2 */
		kl_arch_relax();
	}
	while (atomic_exchange_explicit(&l->v, 2, memory_order_acquire) != 0) { /* L1 */
		kli_wait_sleep(&w);
		kl_wait(&l->v, 2, NULL);
	}
out:
	kli_wait_end(&w, l, KLI_KIND_MUTEX, 0, site);
}

/* KLI_SITE() is evaluated where it is used, never into a variable at the top: see
 * hooks.h (a hoisted return-address load would cost the uncontended path an instruction). */
static KL_NOINLINE KL_MAYBE_UNUSED void seamlock_lock(struct seamlock *l)
{
	uint32_t c = 0;

	kli_hook_acquire(l, KLI_KIND_MUTEX, 0, KLI_SITE());
	if (kl_unlikely(!atomic_compare_exchange_strong_explicit(&l->v, &c, 1,
								 memory_order_acquire,
								 memory_order_relaxed)))
		seamlock_lock_slow(l, KLI_SITE());
	kli_hook_acquired(l, KLI_KIND_MUTEX, 0, KLI_SITE());
}

static KL_NOINLINE KL_MAYBE_UNUSED void seamlock_unlock(struct seamlock *l)
{
	kli_hook_release(l, KLI_KIND_MUTEX, 0, KLI_SITE());
	if (atomic_exchange_explicit(&l->v, 0, memory_order_release) == 2) /* L2 */
		kl_wake(&l->v, 1);
	kli_hook_released(l, KLI_KIND_MUTEX, 0);
}

/* True once a waiter has announced it sleeps (tests use it to know a wait is under way). */
static inline bool seamlock_has_sleeper(struct seamlock *l)
{
	return atomic_load_explicit(&l->v, memory_order_relaxed) == 2;
}

#endif /* SEAMLOCK_H */
