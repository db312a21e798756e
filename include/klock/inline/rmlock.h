/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/inline/rmlock.h - the machinery behind <klock/rmlock.h>: the lock's private state
 * bits and the read fast path that header inlines when the build allows it
 * (KL_INLINE_FAST_PATHS_ in <klock/compiler.h>, and no KLOCK_NO_INLINE). Included by
 * <klock/rmlock.h> only; nothing here is API: the contract (structs, initializer, every
 * exported function) is there.
 */
#ifndef KLOCK_INLINE_RMLOCK_H
#define KLOCK_INLINE_RMLOCK_H

#ifndef KLOCK_RMLOCK_H
#error "include <klock/rmlock.h>, not <klock/inline/rmlock.h>"
#endif

/* Lock state bits (private; here because the inline fast path tests them). */
#define KL_RM_S_WRITER 0x1u   /* a writer is revoking the bias (draining biased readers) */
#define KL_RM_S_WSLEEP 0x2u   /* the draining writer sleeps: read_unlock must look */
/* Fenced: readers publish their slot with a full barrier; writers announce themselves
 * and scan, with no membarrier. A state value, not a bit: bit 2 with UNBIASED, so that
 * inline code built before this mode, which reads UNBIASED as "not biased" and anything
 * but UNBIASED alone as "go out of line", never admits a reader without the barrier. */
#define KL_RM_S_FENCED 0xcu
#define KL_RM_S_UNBIASED 0x8u /* readers and writers run the embedded kl_rwlock alone */
/* A thread's slot naming a lock with this bit set is a hold of the lock's embedded
 * kl_rwlock (taken while the lock was unbiased), not a biased hold (private). */
#define KL_RM_TAG_RW 0x1u
/* With KL_RM_TAG_RW: that hold is known to be counted in the kl_rwlock's word (the inline
 * read took it so), so its release is the counted one alone (private). */
#define KL_RM_TAG_RWC 0x4u

/*
 * ---- inline read fast path ---------------------------------------------------------
 * Compiled in C builds whose instruments do not need to see every acquisition; in
 * builds with witness, TSan, valgrind annotations, lockstat hold times or debug checks
 * (klock/config.h), and in C++, the calls <klock/rmlock.h> declares are made as written. Define
 * KLOCK_NO_INLINE before including to force the calls (e.g. for LD_PRELOAD interposers).
 */
#if defined(KL_INLINE_FAST_PATHS_) && !defined(KLOCK_NO_INLINE)
#define KL_RM_INLINE 1

/* A writer sleeps waiting for this thread's hold: wake it (the out-of-line paths do the
 * same in rmlock.c, rm_wake_writer()). */
static inline void kl_rmlock_wake_writer_inline(struct kl_rmlock *lk, struct kl_rm_reader *r)
{
	if (atomic_load_explicit(&lk->wait_for, memory_order_relaxed) == (uintptr_t)r) {
		/* H2: release, pairs with H1 in rm_sleep_on_slot() */
		atomic_fetch_add_explicit(&lk->wseq, 1, memory_order_release);
		kl_wake(&lk->wseq, 1);
	}
}

/*
 * kl_rmlock_read_unbiased_()'s common case, inline. First the embedded kl_rwlock's
 * counted entry (R1, kl_rwlock_read_count_()): once it succeeds no writer holds the
 * kl_rwlock, so none is revoking and none can sleep on the slot @d that the inline read
 * lock pushed; retag it as a counted hold (KL_RM_TAG_RW | KL_RM_TAG_RWC: its unlock is
 * R2 alone) and be done. Otherwise (a lost race, a blocking bit, the kl_rwlock's own
 * bias) retag it as a kl_rwlock hold (E; C, the light half of C/F, is a compiler barrier
 * here as in the unlock: a thread reaches this with a real record only when membarrier
 * is in use), see no revoking writer asleep, and take the kl_rwlock shared as its inline
 * read would from there. Anything else - the re-arm clock due, KL_RM_RECURSE, a writer to
 * wake - goes out of line, which retags again (idempotent) and takes it from there.
 */
static inline void kl_rmlock_read_unbiased_inline(struct kl_rmlock *lk,
						  struct kl_rm_tracker *tr,
						  struct kl_rm_reader *r, uint32_t d)
{
	if (__builtin_expect(r->unbiased_left != 0 && !(lk->flags & KL_RM_RECURSE), 1)) {
		uintptr_t v = atomic_load_explicit(&lk->rw.word, memory_order_relaxed);

		r->unbiased_left--;
		if (__builtin_expect(!(v & KL_RWLOCK_BIAS_) && kl_rwlock_read_count_(&lk->rw, v),
				     1)) {
			atomic_store_explicit(&r->slot[d],
					      (uintptr_t)lk | KL_RM_TAG_RW | KL_RM_TAG_RWC,
					      memory_order_relaxed);
			return;
		}
		atomic_store_explicit(&r->slot[d], (uintptr_t)lk | KL_RM_TAG_RW,
				      memory_order_release); /* E */
		atomic_signal_fence(memory_order_seq_cst); /* C: light half, pairs with F */
		if (__builtin_expect(!(atomic_load_explicit(&lk->state, memory_order_relaxed) &
				       KL_RM_S_WSLEEP),
				     1)) {
			if (v & KL_RWLOCK_BIAS_)
				kl_rwlock_read_lock(&lk->rw);
			else
				kl_rwlock_read_contended_(&lk->rw);
			return;
		}
		r->unbiased_left++;
	}
	kl_rmlock_read_unbiased_(lk, tr);
}

/*
 * A FENCED lock (KL_RM_S_FENCED alone): the slot @d the inline read lock pushed is
 * published again by an exchange (B': a full barrier, the reader's half of the
 * store-buffering pair with a fenced writer's M3, which is a seq_cst RMW too), then the
 * state is loaded again (acquire: pairs with the release that ended the last write, M4,
 * or with a re-arm, M1). Admitted unless a writer announced itself or the lock went
 * unbiased. Every RM_REARM_READS-th read goes out of line, to look at the re-arm clock.
 */
static inline bool kl_rmlock_read_fenced_inline(struct kl_rmlock *lk, struct kl_rm_reader *r,
						uint32_t d)
{
	if (__builtin_expect(r->unbiased_left == 0, 0))
		return false;
	r->unbiased_left--;
	atomic_exchange_explicit(&r->slot[d], (uintptr_t)lk, memory_order_seq_cst); /* B' */
	uint32_t s = atomic_load_explicit(&lk->state, memory_order_acquire); /* M1, M4 */

	return s == KL_RM_S_FENCED || s == 0;
}

/*
 * Push @lk on the thread's stack of read holds, then look at the state. The compiler
 * barrier between is B, the light half of the asymmetric pair B/D: D is the
 * membarrier(PRIVATE_EXPEDITED) a revoking writer issues after announcing itself (M3)
 * and before scanning the slots, so either the writer sees this slot or this load sees
 * the revocation. The acquire load pairs with M1, the release of the re-arming reader
 * that made the lock biased (after the last writer). A look that finds the lock fenced
 * admits nothing by itself: a fenced writer issues no membarrier, so the slot is published
 * again with B' (kl_rmlock_read_fenced_inline). On an unbiased lock (the state UNBIASED
 * alone) kl_rmlock_read_unbiased_() turns the published slot into a kl_rwlock read hold.
 */
static inline void kl_rmlock_read_lock_inline(struct kl_rmlock *lk, struct kl_rm_tracker *tr)
{
	struct kl_rm_reader *r = kl_rm_self;
	uint32_t d = r->depth, s;

	if (__builtin_expect(d < KL_RM_SLOTS, 1)) {
		r->depth = d + 1;
		atomic_store_explicit(&r->slot[d + 1], (uintptr_t)lk, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst); /* B: light half, pairs with D */
		s = atomic_load_explicit(&lk->state, memory_order_acquire); /* M1 */
		if (__builtin_expect(!(s & (KL_RM_S_WRITER | KL_RM_S_UNBIASED)), 1))
			return;
		if (s == KL_RM_S_UNBIASED) {
			kl_rmlock_read_unbiased_inline(lk, tr, r, d + 1);
			return;
		}
		if (s == KL_RM_S_FENCED && kl_rmlock_read_fenced_inline(lk, r, d + 1))
			return;
		/* A writer under way, or the clock due: undo, go out of line. */
		atomic_store_explicit(&r->slot[d + 1], 0, memory_order_relaxed);
		r->depth = d;
	}
	(kl_rmlock_read_lock)(lk, tr);
}

/*
 * Pop the hold if it is on top of the stack (the usual LIFO case). A biased hold: the
 * store is the release that ends the read section (E: pairs with the writer's acquire
 * scan), then C, the light half of C/F: F is the writer's heavy fence after setting
 * KL_RM_S_WSLEEP, so either the writer sees the slot cleared or this load sees it
 * asleep. A kl_rwlock hold (tagged): clear the slot, release the kl_rwlock (a counted
 * one, KL_RM_TAG_RWC, by R2 alone).
 */
static inline void kl_rmlock_read_unlock_inline(struct kl_rmlock *lk, struct kl_rm_tracker *tr)
{
	struct kl_rm_reader *r = kl_rm_self;
	uint32_t d = r->depth;
	uintptr_t v = atomic_load_explicit(&r->slot[d], memory_order_relaxed);

	if (__builtin_expect(v == (uintptr_t)lk, 1)) {
		atomic_store_explicit(&r->slot[d], 0, memory_order_release); /* E */
		r->depth = d - 1;
		atomic_signal_fence(memory_order_seq_cst); /* C: light half, pairs with F */
		if (__builtin_expect(atomic_load_explicit(&lk->state, memory_order_relaxed) &
				     KL_RM_S_WSLEEP, 0))
			kl_rmlock_wake_writer_inline(lk, r);
		return;
	}
	if (v == ((uintptr_t)lk | KL_RM_TAG_RW | KL_RM_TAG_RWC)) {
		atomic_store_explicit(&r->slot[d], 0, memory_order_relaxed);
		r->depth = d - 1;
		kl_rwlock_read_uncount_(&lk->rw);
		return;
	}
	if (v == ((uintptr_t)lk | KL_RM_TAG_RW)) {
		atomic_store_explicit(&r->slot[d], 0, memory_order_relaxed);
		r->depth = d - 1;
		kl_rwlock_read_unlock(&lk->rw);
		return;
	}
	(kl_rmlock_read_unlock)(lk, tr);
}

#define kl_rmlock_read_lock(lk, tr) kl_rmlock_read_lock_inline((lk), (tr))
#define kl_rmlock_read_unlock(lk, tr) kl_rmlock_read_unlock_inline((lk), (tr))
#else
#define KL_RM_INLINE 0
#endif

#endif /* KLOCK_INLINE_RMLOCK_H */
