/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/inline/mutex.h - the machinery behind <klock/mutex.h>: private constants and the
 * fast paths that header inlines when the build allows it (KL_INLINE_FAST_PATHS_ in
 * <klock/compiler.h>, and no KLOCK_NO_INLINE). Included by <klock/mutex.h> only; nothing
 * here is API: the contract (struct, initializer, every exported function) is there.
 */
#ifndef KLOCK_INLINE_MUTEX_H
#define KLOCK_INLINE_MUTEX_H

#ifndef KLOCK_MUTEX_H
#error "include <klock/mutex.h>, not <klock/inline/mutex.h>"
#endif

/* Private, shared with locks/primitives/mutex.c: the word's SPINNER bit (the spin queue's head claims
 * its turn: KLI_MTX_SPINNER) and how many times in a row lockers may take the free lock
 * past that claim before one leaves it the turn (MTX_PASS_MAX, invariant I3; a claim
 * uses them up at once, a spinner that did not come when offered the lock grants more;
 * kl_rwlock's count of releases past a writer spinning alone uses the same bound). */
#define KL_MUTEX_SPINNER_ 0x2ul
#define KL_MUTEX_PASS_MAX_ 4096

#ifndef __cplusplus
/* Private (locks/primitives/mutex.c and the inline paths below). Barging past a claimed turn whose
 * spinner did not come when offered the lock (it lost its CPU): the word read @v, exactly
 * SPINNER (free, nobody asleep), and the passes are not used up. True if the caller @me
 * now holds @m. */
static inline bool kl_mutex_barge_(struct kl_mutex *m, uintptr_t me, uintptr_t v)
{
	uint32_t p = atomic_load_explicit(&m->passes, memory_order_relaxed);

	if (v != KL_MUTEX_SPINNER_ || (int32_t)p >= KL_MUTEX_PASS_MAX_)
		return false;
	/* M1: acquire, pairs with M2. */
	if (!atomic_compare_exchange_strong_explicit(&m->owner, &v, me | KL_MUTEX_SPINNER_,
						     memory_order_acquire, memory_order_relaxed))
		return false;
	atomic_store_explicit(&m->passes, p + 1, memory_order_relaxed); /* we own it now */
	return true;
}

/* Private (as above). The holder @me releases @m after a spinner claimed its turn (the
 * word read @v, exactly @me | SPINNER), keeping SPINNER. True if released. */
static inline bool kl_mutex_release_spinner_(struct kl_mutex *m, uintptr_t me, uintptr_t v)
{
	/* M2: release, pairs with M1 in the next holder's lock. */
	return v == (me | KL_MUTEX_SPINNER_) &&
	       atomic_compare_exchange_strong_explicit(&m->owner, &v, KL_MUTEX_SPINNER_,
						       memory_order_release, memory_order_relaxed);
}
#endif

/*
 * ---- inline fast paths ---------------------------------------------------------------
 * The uncontended lock is one CAS and the unlock another; the two calls into the library
 * cost about a third of the pair (docs/design-adaptive.md, "Inline fast paths"). So in C
 * builds without instruments (the conditions of klock/rmlock.h's; define KLOCK_NO_INLINE
 * to force the calls) both are tried here first: the lock CASes the word from 0 (free,
 * nobody waiting) to the caller's owner id with acquire (M1 of locks/primitives/mutex.c, pairing with
 * M2), the unlock from the owner id back to 0 with release (M2). When the CAS failed on a
 * word whose only flag is a spinner's claimed turn, the library's next step is done here
 * from the value the CAS returned: release keeping its bit (M2), or barge past it (M1)
 * while passes are left. Anything else - a thread not yet registered (id 0), a
 * held lock, sleepers, a destroyed or foreign lock - goes to the library, which starts
 * afresh: a failed CAS changed nothing.
 */
#if defined(KL_INLINE_FAST_PATHS_) && !defined(KLOCK_NO_INLINE)
#define KL_MUTEX_INLINE 1

static inline void kl_mutex_lock_inline(struct kl_mutex *m)
{
	uintptr_t me = kl_mutex_self_, v = 0;

	/* M1: acquire, pairs with M2 in the previous holder's unlock (locks/primitives/mutex.c). */
	if (__builtin_expect(me != 0 && atomic_compare_exchange_strong_explicit(
						&m->owner, &v, me, memory_order_acquire,
						memory_order_relaxed),
			     1))
		return;
	if (me != 0 && kl_mutex_barge_(m, me, v)) /* past a claim, without a second try */
		return;
	(kl_mutex_lock)(m);
}

static inline void kl_mutex_unlock_inline(struct kl_mutex *m)
{
	uintptr_t me = kl_mutex_self_, v = me;

	/* M2: release, pairs with M1 in the next holder's lock. */
	if (__builtin_expect(me != 0 && atomic_compare_exchange_strong_explicit(
						&m->owner, &v, 0, memory_order_release,
						memory_order_relaxed),
			     1))
		return;
	if (me != 0 && kl_mutex_release_spinner_(m, me, v))
		return;
	(kl_mutex_unlock)(m);
}

#define kl_mutex_lock(m) kl_mutex_lock_inline(m)
#define kl_mutex_unlock(m) kl_mutex_unlock_inline(m)
#else
#define KL_MUTEX_INLINE 0
#endif

#endif /* KLOCK_INLINE_MUTEX_H */
