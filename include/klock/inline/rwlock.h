/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/inline/rwlock.h - the machinery behind <klock/rwlock.h>: the word's private
 * encoding, the write and biased-read helpers the library shares, and the fast paths that
 * header inlines when the build allows it (KL_INLINE_FAST_PATHS_ in <klock/compiler.h>,
 * and no KLOCK_NO_INLINE). Included by <klock/rwlock.h> only; nothing here is API: the
 * contract (struct, initializer, every exported function) is there.
 */
#ifndef KLOCK_INLINE_RWLOCK_H
#define KLOCK_INLINE_RWLOCK_H

#ifndef KLOCK_RWLOCK_H
#error "include <klock/rwlock.h>, not <klock/inline/rwlock.h>"
#endif

/* The word's encoding (private; locks/primitives/rwlock.c's RW_*): the write-held bit (a writer's
 * word is its owner id, kl_mutex_self_, whose low bits are 0, with this bit set), the bit
 * that says a writer waits, the destroyed bit, the reader-bias bit, the bit that says a
 * revoking writer sleeps, the bits that keep a new reader out (write-held, a writer
 * waits, destroyed), all flag bits, and one read hold. */
#define KL_RWLOCK_WRLOCK_ 0x1u
#define KL_RWLOCK_WRWANT_ 0x2u
#define KL_RWLOCK_DESTROYED_ 0x4u
#define KL_RWLOCK_BIAS_ 0x8u
#define KL_RWLOCK_BIAS_WAIT_ 0x10u
#define KL_RWLOCK_RD_BLOCK_ 0x7u
#define KL_RWLOCK_FLAGS_ 0x7fu
#define KL_RWLOCK_RD_ONE_ 0x80u

#ifndef __cplusplus
/* Private (locks/primitives/rwlock.c and the inline unlock below). After a write release while one
 * writer spins alone: count the release in wpasses, the spinner's sign of progress, and
 * once the count reaches KL_MUTEX_PASS_MAX_ (the spinner's claim sets it there) leave it
 * the turn. A relaxed hint. */
static inline void kl_rwlock_count_pass_(struct kl_rwlock *rw)
{
	uint32_t p = atomic_load_explicit(&rw->wpasses, memory_order_relaxed) + 1;

	atomic_store_explicit(&rw->wpasses, p, memory_order_relaxed);
	if (__builtin_expect((int32_t)p >= KL_MUTEX_PASS_MAX_, 0))
		kl_rwlock_write_polite_(rw);
}

/* Private (locks/primitives/rwlock.c's write fast paths and the inline lock below). The write take
 * W1 by @me (acquire, pairs with W2 and R2): from a free word, or from a free word whose
 * only flag is WRWANT (writers asleep), keeping the flag - writers barge, as the slow
 * path's first try (rw_write_try) does. Without the second CAS a writer that releases and
 * relocks while others sleep went down the slow path at every lock (write-only, 2 CPUs,
 * 8 threads: writers asleep 99% of the time). True if taken; a failed CAS changed
 * nothing. */
static inline bool kl_rwlock_write_take_(struct kl_rwlock *rw, uintptr_t me)
{
	uintptr_t v = 0;

	/* W1 */
	return atomic_compare_exchange_strong_explicit(&rw->word, &v, me | KL_RWLOCK_WRLOCK_,
						       memory_order_acquire,
						       memory_order_relaxed) ||
	       (v == KL_RWLOCK_WRWANT_ &&
		atomic_compare_exchange_strong_explicit(
			&rw->word, &v, me | KL_RWLOCK_WRLOCK_ | KL_RWLOCK_WRWANT_,
			memory_order_acquire, memory_order_relaxed));
}

/* Private (locks/primitives/rwlock.c's kl_rwlock_write_unlock() and the inline unlock below). The
 * write release W2 by @me (seq_cst: store-buffering with S1/S2, then the counts are read):
 * a word with WRWANT (writers asleep, most likely) is released keeping the flag, as the
 * slow path would while they sleep. Returns the word released, or 0 when this is not
 * ours to do (readers asleep: the slow path may hand them the lock; misuse). The first
 * CAS expects the held word itself, a value known without reading memory: a look at the
 * word first, for the CAS's expected value, put a load the CAS had to wait for on the
 * uncontended pair's path (3.6 ns a pair on a 2026-12-06 VM; docs/design-adaptive.md,
 * "The write release's expected value"). A CAS that fails on WRWANT costs a second one,
 * only then. */
static inline uintptr_t kl_rwlock_write_release_(struct kl_rwlock *rw, uintptr_t me)
{
	uintptr_t held = me | KL_RWLOCK_WRLOCK_, v = held;

	if (me == 0 || atomic_load_explicit(&rw->rwait, memory_order_relaxed) != 0)
		return 0;
	/* W2 */
	if (__builtin_expect(atomic_compare_exchange_strong_explicit(&rw->word, &v, 0,
								     memory_order_seq_cst,
								     memory_order_relaxed),
			     1))
		return held;
	/* W2, keeping the WRWANT a sleeping writer set while we held the word */
	if (v == (held | KL_RWLOCK_WRWANT_) &&
	    atomic_compare_exchange_strong_explicit(&rw->word, &v, KL_RWLOCK_WRWANT_,
						    memory_order_seq_cst, memory_order_relaxed))
		return v;
	return 0;
}

/* Private. After kl_rwlock_write_release_() released @v: did a sleeper count itself
 * before our W2 (the S1/S2 pair) - a reader, or a writer with no wake-up on its way to it
 * (wwait: writers asleep in the low half, wake-ups on their way in the high half, at most
 * the low half; locks/primitives/rwlock.c's W3)? Then it must be woken (kl_rwlock_write_unlocked_()).
 * If no writer is counted at all, a WRWANT kept is stale and is dropped from the free
 * word, or every lock and unlock after it would take a second CAS. */
#define KL_RWLOCK_WW_WOKEN_ 0x10000u
static inline bool kl_rwlock_write_sleepers_(struct kl_rwlock *rw, uintptr_t v)
{
	uintptr_t want = KL_RWLOCK_WRWANT_;
	uint32_t ww;

	if (atomic_load_explicit(&rw->rwait, memory_order_seq_cst) != 0)
		return true;
	ww = atomic_load_explicit(&rw->wwait, memory_order_seq_cst);
	if (ww / KL_RWLOCK_WW_WOKEN_ < ww % KL_RWLOCK_WW_WOKEN_)
		return true;
	if ((v & KL_RWLOCK_WRWANT_) && ww == 0)
		atomic_compare_exchange_strong_explicit(&rw->word, &want, 0, memory_order_relaxed,
							memory_order_relaxed);
	return false;
}
#endif

/*
 * Reader bias (private; locks/primitives/rwlock_bias.c's theory block). While the word
 * has BIAS, a reader may publish its hold in its own thread's row of KL_RWLOCK_BIAS_SLOTS_
 * slots (the column a hash of the lock's address) instead of counting itself in the
 * shared word; a writer clears the bias and waits for the published holds to go.
 * kl_rwlock_bias_ is the calling thread's row, or a shared always-full row (no slot is
 * ever 0) until its first library read lock and after it exits. Initial-exec TLS:
 * libklock is loaded at start-up.
 */
#define KL_RWLOCK_BIAS_SLOTS_ 16u
#ifndef __cplusplus
/* @rw's column in every thread's row: address bits above a struct's size, folded. */
static inline unsigned kl_rwlock_bias_col_(const struct kl_rwlock *rw)
{
	uintptr_t a = (uintptr_t)rw;

	return (unsigned)((a >> 6) ^ (a >> 10)) & (KL_RWLOCK_BIAS_SLOTS_ - 1u);
}

/* Releases a biased hold in slot @s (B5, release), then - light half of the fence pair,
 * B7 - looks for a revoking writer asleep (BIAS_WAIT, set before its heavy half). */
static inline void kl_rwlock_bias_leave_(struct kl_rwlock *rw, _Atomic uintptr_t *s)
{
	atomic_store_explicit(s, 0, memory_order_release); /* B5: pairs with B4 */
	kl_fence_light_inline_();                          /* B7: pairs with B8 */
	if (__builtin_expect(atomic_load_explicit(&rw->word, memory_order_relaxed) &
				     KL_RWLOCK_BIAS_WAIT_,
			     0))
		kl_rwlock_bias_released_(rw);
}

/* A biased read entry (B1/B2 of locks/primitives/rwlock.c): publish @rw in our row's free slot, then
 * look at the word; BIAS with no blocking bit admits us, else the slot is taken back. */
static inline bool kl_rwlock_bias_enter_(struct kl_rwlock *rw)
{
	_Atomic uintptr_t *s = kl_rwlock_bias_ + kl_rwlock_bias_col_(rw);

	if (atomic_load_explicit(s, memory_order_relaxed) != 0)
		return false;
	/* B1: seq_cst publish (an exchange: a full barrier), SB with a writer's B3. */
	atomic_exchange_explicit(s, (uintptr_t)rw, memory_order_seq_cst);
	/* B2: seq_cst look (acquire: pairs with the last writer's W2 through the word's
	 * release sequence, which the BIAS-setting RMW continues). */
	if (__builtin_expect((atomic_load_explicit(&rw->word, memory_order_seq_cst) &
			      (KL_RWLOCK_BIAS_ | KL_RWLOCK_RD_BLOCK_)) == KL_RWLOCK_BIAS_,
			     1))
		return true;
	kl_rwlock_bias_leave_(rw, s); /* a revoking writer may sleep on our publish */
	return false;
}

/* A counted read entry (R1 of locks/primitives/rwlock.c) from @v, the word just loaded
 * (without BIAS): one more read hold CASed into a word with no blocking bit. True if
 * taken; a failed CAS changed nothing. Shared by the inline read lock below and
 * kl_rmlock's unbiased read (klock/inline/rmlock.h), which then knows its hold is
 * counted. */
static inline bool kl_rwlock_read_count_(struct kl_rwlock *rw, uintptr_t v)
{
	/* R1: acquire, pairs with the last writer's W2/G3 (locks/primitives/rwlock.c) */
	return !(v & KL_RWLOCK_RD_BLOCK_) &&
	       atomic_compare_exchange_strong_explicit(&rw->word, &v, v + KL_RWLOCK_RD_ONE_,
						       memory_order_acquire, memory_order_relaxed);
}

/* Releases a counted read hold: R2, the seq_cst fetch-sub (store-buffering with S2, then
 * wwait is read), and the library's rest, kl_rwlock_read_released_(), only if this was
 * the last read hold and a writer counted itself asleep, or the word held no read hold
 * or a writer (misuse). Shared like kl_rwlock_read_count_(). */
static inline void kl_rwlock_read_uncount_(struct kl_rwlock *rw)
{
	/* R2 */
	uintptr_t old = atomic_fetch_sub_explicit(&rw->word, KL_RWLOCK_RD_ONE_,
						  memory_order_seq_cst);

	if (__builtin_expect((old & (KL_RWLOCK_WRLOCK_ | KL_RWLOCK_DESTROYED_)) != 0 ||
				     old < KL_RWLOCK_RD_ONE_ ||
				     ((old & ~(uintptr_t)KL_RWLOCK_FLAGS_) == KL_RWLOCK_RD_ONE_ &&
				      atomic_load_explicit(&rw->wwait, memory_order_seq_cst) != 0),
			     0))
		kl_rwlock_read_released_(rw, old);
}
#endif

/*
 * ---- inline fast paths ---------------------------------------------------------------
 * As klock/mutex.h's (the same build conditions; KLOCK_NO_INLINE forces the calls).
 * Write: the uncontended lock CASes the word from 0 to the caller's owner id | WRLOCK (W1
 * of locks/primitives/rwlock.c, acquire), and the unlock, while no reader sleeps, CASes it back to 0
 * (W2, seq_cst) and then loads the two sleeper counts (seq_cst: the store-buffering pair
 * with each sleeper's S1/S2 count-then-look). A sleeper counted calls the library's wake
 * half, kl_rwlock_write_unlocked_(); else a writer spinning alone gets the release
 * counted (kl_rwlock_count_pass_). Anything else - an unregistered thread (id 0),
 * readers or a writer in the word, a flag, sleeping readers to hand the lock to, misuse -
 * calls the library, which starts afresh: a failed CAS changed nothing.
 * Read: with BIAS in the word, the lock publishes the hold in the thread's own slot for
 * @rw (B1) and keeps it if a second look finds BIAS and no blocking bit (B2); without
 * BIAS it CASes one more read hold into a word with no blocking bit (R1, acquire). Either
 * failing calls the library (kl_rwlock_read_contended_). The unlock clears the thread's
 * slot if it holds @rw (B5, release); else it is the library's whole: the seq_cst
 * fetch-sub (R2), then, only if the word before was the last read hold and a writer
 * counted itself asleep (the S2 pair), or was no read hold at all (misuse), the library's
 * rest, kl_rwlock_read_released_().
 */
#if defined(KL_INLINE_FAST_PATHS_) && !defined(KLOCK_NO_INLINE)
#define KL_RWLOCK_INLINE 1

static inline void kl_rwlock_write_lock_inline(struct kl_rwlock *rw)
{
	uintptr_t me = kl_mutex_self_;

	/* W1 (kl_rwlock_write_take_(), the library's fast path too) */
	if (__builtin_expect(me != 0 && kl_rwlock_write_take_(rw, me), 1))
		return;
	(kl_rwlock_write_lock)(rw);
}

static inline void kl_rwlock_write_unlock_inline(struct kl_rwlock *rw)
{
	uintptr_t v = kl_rwlock_write_release_(rw, kl_mutex_self_);

	if (__builtin_expect(v != 0, 1)) {
		if (__builtin_expect(kl_rwlock_write_sleepers_(rw, v), 0))
			kl_rwlock_write_unlocked_(rw);
		else if (__builtin_expect(atomic_load_explicit(&rw->wspin,
							       memory_order_relaxed) == 1,
					  0))
			kl_rwlock_count_pass_(rw);
		return;
	}
	(kl_rwlock_write_unlock)(rw);
}

static inline void kl_rwlock_read_lock_inline(struct kl_rwlock *rw)
{
	uintptr_t v = atomic_load_explicit(&rw->word, memory_order_relaxed);

	if (v & KL_RWLOCK_BIAS_) {
		if (__builtin_expect(kl_rwlock_bias_enter_(rw), 1))
			return;
	} else if (__builtin_expect(kl_rwlock_read_count_(rw, v), 1)) {
		return;
	}
	kl_rwlock_read_contended_(rw);
}

static inline void kl_rwlock_read_unlock_inline(struct kl_rwlock *rw)
{
	_Atomic uintptr_t *s = kl_rwlock_bias_ + kl_rwlock_bias_col_(rw);

	if (atomic_load_explicit(s, memory_order_relaxed) == (uintptr_t)rw) {
		kl_rwlock_bias_leave_(rw, s);
		return;
	}
	kl_rwlock_read_uncount_(rw);
}

#define kl_rwlock_write_lock(rw) kl_rwlock_write_lock_inline(rw)
#define kl_rwlock_write_unlock(rw) kl_rwlock_write_unlock_inline(rw)
#define kl_rwlock_read_lock(rw) kl_rwlock_read_lock_inline(rw)
#define kl_rwlock_read_unlock(rw) kl_rwlock_read_unlock_inline(rw)
#else
#define KL_RWLOCK_INLINE 0
#endif

#endif /* KLOCK_INLINE_RWLOCK_H */
