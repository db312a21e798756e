/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/inline/seqlock.h - the machinery behind <klock/seqlock.h>: private constants and
 * the fast paths that header inlines when the build allows it (KL_INLINE_FAST_PATHS_ in
 * <klock/compiler.h>, and no KLOCK_NO_INLINE). Included by <klock/seqlock.h> only; nothing
 * here is API: the contract (struct, initializer, every exported function) is there.
 */
#ifndef KLOCK_INLINE_SEQLOCK_H
#define KLOCK_INLINE_SEQLOCK_H

#ifndef KLOCK_SEQLOCK_H
#error "include <klock/seqlock.h>, not <klock/inline/seqlock.h>"
#endif

#if defined(KL_INLINE_FAST_PATHS_) && !defined(KLOCK_NO_INLINE)
/* R1: acquire, pairs with W2 (the writer's release store making the sequence even). */
static inline uint32_t kl_seqlock_read_begin_inline(const struct kl_seqlock *sl)
{
	uint32_t s = atomic_load_explicit(&sl->seq, memory_order_acquire);

	if (__builtin_expect(!(s & 1), 1))
		return s;
	return (kl_seqlock_read_begin)(sl);
}

/* R2: acquire fence, pairs with W1 (the writer's release fence after making the sequence
 * odd): if the section read anything the writer wrote, this load sees the odd value or
 * later. */
static inline bool kl_seqlock_read_retry_inline(const struct kl_seqlock *sl, uint32_t seq)
{
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&sl->seq, memory_order_relaxed) != seq;
}

#define kl_seqlock_read_begin(sl) kl_seqlock_read_begin_inline(sl)
#define kl_seqlock_read_retry(sl, seq) kl_seqlock_read_retry_inline((sl), (seq))
#endif

#endif /* KLOCK_INLINE_SEQLOCK_H */
