/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/inline/ticket.h - the machinery behind <klock/ticket.h>: private constants and the
 * fast paths that header inlines when the build allows it (KL_INLINE_FAST_PATHS_ in
 * <klock/compiler.h>, and no KLOCK_NO_INLINE). Included by <klock/ticket.h> only; nothing
 * here is API: the contract (struct, initializer, every exported function) is there.
 */
#ifndef KLOCK_INLINE_TICKET_H
#define KLOCK_INLINE_TICKET_H

#ifndef KLOCK_TICKET_H
#error "include <klock/ticket.h>, not <klock/inline/ticket.h>"
#endif

/*
 * ---- inline fast paths ---------------------------------------------------------------
 * An uncontended pair costs a few ns, and the call into the library was a third of it
 * (docs/design-adaptive.md). So in C builds without instruments (the conditions of
 * klock/rmlock.h's inline path; define KLOCK_NO_INLINE to force the calls) the lock is
 * first tried here, as kl_ticket_trylock() does it: if nobody holds or waits for @t, one
 * CAS takes the next ticket. T2 (the acquire load of owner) pairs with T3, the previous
 * holder's release store in kl_ticket_unlock(); the CAS can only succeed while owner
 * still has the value read (owner only moves while a ticket is out, and then next !=
 * owner). Anything else - a holder, waiters, a lost race - is the library's call, which
 * starts from scratch: a failed CAS took nothing.
 * The unlock is the library's, step for step: serve the next ticket (T3), the light
 * fence (S2, whose partner S1 is a sleeper's heavy fence), one load of sleepers; only
 * when someone sleeps, or the lock is in its fenced mode (locks/primitives/ticket.c), does it call
 * the library's second half, kl_ticket_wake_().
 */
#if defined(KL_INLINE_FAST_PATHS_) && !defined(KLOCK_NO_INLINE)
#define KL_TICKET_INLINE 1

static inline void kl_ticket_lock_inline(struct kl_ticket *t)
{
	/* T2: acquire, pairs with T3 in the previous holder's kl_ticket_unlock(). */
	uint32_t owner = atomic_load_explicit(&t->owner, memory_order_acquire);

	if (__builtin_expect(atomic_compare_exchange_strong_explicit(
				     &t->next, &owner, owner + 1, memory_order_relaxed,
				     memory_order_relaxed), 1))
		return;
	(kl_ticket_lock)(t);
}

static inline void kl_ticket_unlock_inline(struct kl_ticket *t)
{
	/* Only the holder moves owner: a relaxed load reads our own ticket. */
	uint32_t owner = atomic_load_explicit(&t->owner, memory_order_relaxed) + 1, sleepers;

	/* T3: release, pairs with T2 in the next holder's lock. */
	atomic_store_explicit(&t->owner, owner, memory_order_release);
	kl_fence_light_inline_(); /* S2: light half, pairs with S1 (membarrier) in ticket_sleep() */
	sleepers = atomic_load_explicit(&t->sleepers, memory_order_relaxed);
	if (__builtin_expect(sleepers != 0, 0))
		kl_ticket_wake_(t, owner, sleepers);
}

#define kl_ticket_lock(t) kl_ticket_lock_inline(t)
#define kl_ticket_unlock(t) kl_ticket_unlock_inline(t)
#else
#define KL_TICKET_INLINE 0
#endif

#endif /* KLOCK_INLINE_TICKET_H */
