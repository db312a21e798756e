/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/rmlock.h - read-mostly lock with FreeBSD rmlock(9) semantics that adapts to the
 * write rate. While the lock is BIASED (no write for a while) readers touch no shared
 * cache line and execute no atomic read-modify-write and no fence; the first writer pays
 * for that with a rendezvous (membarrier) and a scan of the threads' read holds, and
 * leaves the lock UNBIASED: readers and writers then run kl_rwlock's algorithm on a
 * kl_rwlock embedded in the lock (one compare-and-swap each way, kl_rwlock's spinning,
 * counted sleepers and hand-off), so a lock written often costs what a kl_rwlock costs.
 * Readers re-arm the bias once a window of KL_RM_INHIBIT_MULT times the measured
 * revocation cost has passed with no write (BRAVO, Dice & Kogan 2019), so revocations
 * take a bounded share of the run time whatever the write rate.
 *
 *   struct kl_rmlock lk;                 struct kl_rm_tracker tr;   (caller-owned)
 *   kl_rmlock_init(&lk, 0);              kl_rmlock_read_lock(&lk, &tr);
 *   kl_rmlock_write_lock(&lk);           ... read ...
 *   ... write ...                        kl_rmlock_read_unlock(&lk, &tr);
 *   kl_rmlock_write_unlock(&lk);
 *
 * Use it where reads outnumber writes (configuration, routing tables, module lists): a
 * biased read costs about what an RCU read-side section costs, an unbiased one what a
 * kl_rwlock read costs; a revoking write costs a membarrier(PRIVATE_EXPEDITED) plus a
 * walk over every thread that ever used klock, a write on an unbiased lock what a
 * kl_rwlock write costs (docs/design-readmostly.md has the figures).
 *
 * Flags (kl_rmlock_init):
 *   KL_RM_RECURSE    a thread that already read-holds the lock may read-lock it again
 *                    even while a writer waits. WITHOUT it, re-entering the read side
 *                    while a writer is waiting DEADLOCKS (the writer waits for the outer
 *                    hold, the inner acquisition waits for the writer) - as with FreeBSD
 *                    rmlocks without RM_RECURSE and Linux percpu-rwsems. Debug builds
 *                    report every nested read acquisition of a lock without the flag.
 *   KL_RM_SLEEPABLE  a revoking writer that waits for a biased reader sleeps instead of
 *                    spinning (capped backoff, then sched_yield). Every other wait is
 *                    kl_rwlock's, with or without the flag: spin for a learnt budget,
 *                    then sleep; writer preference with a time-bounded hand-off to the
 *                    sleeping readers, so neither side starves (klock/rwlock.h).
 *
 * Threads need no registration: per-thread state is created on first use and recycled
 * at thread exit. A thread may read-hold up to KL_RM_SLOTS rmlocks in its own record;
 * deeper nesting still works, as holds of the embedded kl_rwlock (slower). A thread that
 * exits holding read locks has every hold dropped, the deeper ones included (debug
 * builds report each); only a deeper hold taken when no memory was left to note it
 * survives its thread.
 *
 * Not async-signal-safe (none of these may be called from a signal handler). Locks are
 * process-private. Fast paths are inline in C builds without instruments (see
 * KL_RM_INLINE); C++ and instrumented builds call the same functions out of line.
 */
#ifndef KLOCK_RMLOCK_H
#define KLOCK_RMLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <klock/config.h>
#include <klock/compiler.h>
#include <klock/rwlock.h>
#include <klock/wait.h>

#ifndef __cplusplus
#include <stdatomic.h>
#endif

KL_BEGIN_DECLS

/* kl_rmlock_init() flags. */
#define KL_RM_RECURSE 0x1u    /* read side may be re-entered while a writer waits */
#define KL_RM_SLEEPABLE 0x2u  /* waiters sleep instead of spinning */

/* Read holds a thread keeps in its own record (one 128-byte block); more are holds of the
 * lock's embedded kl_rwlock. */
#define KL_RM_SLOTS 14

/* Lock state bits (private; here because the inline fast path tests them). */
#define KL_RM_S_WRITER 0x1u   /* a writer is revoking the bias (draining biased readers) */
#define KL_RM_S_WSLEEP 0x2u   /* the draining writer sleeps: read_unlock must look */
#define KL_RM_S_UNBIASED 0x8u /* readers and writers run the embedded kl_rwlock alone */
/* A thread's slot naming a lock with this bit set is a hold of the lock's embedded
 * kl_rwlock (taken while the lock was unbiased), not a biased hold (private). */
#define KL_RM_TAG_RW 0x1u

/* Inhibit window after a revocation: readers re-arm the bias only after this many times
 * the measured revocation cost with no write, so revocations take at most 1/(1+N) of the
 * run time (docs/design-readmostly.md has the sweep that chose it). KLOCK_RM_INHIBIT=N
 * overrides it at run time (for such sweeps). */
#define KL_RM_INHIBIT_MULT 9

struct kl_rmlock {
	/* Read by every biased reader; written by revocations and re-arms (one line): */
	KL_ATOMIC(uint32_t) state;     /* KL_RM_S_* and private bits; read by every reader */
	uint32_t flags;                /* KL_RM_RECURSE | KL_RM_SLEEPABLE */
	KL_ATOMIC(uint32_t) wseq;      /* futex word a draining writer sleeps on */
	KL_ATOMIC(uint32_t) rearm_writes; /* `writes` when a re-arming reader last looked */
	KL_ATOMIC(uintptr_t) wait_for; /* the reader record a sleeping writer waits for */
	KL_ATOMIC(uint64_t) rearm_at;    /* monotonic ns from which readers may re-arm */
	KL_ATOMIC(uint64_t) unbiased_at; /* monotonic ns of the last revocation */
	KL_ATOMIC(uint64_t) unbiased_ns; /* time spent unbiased up to the last re-arm */
	KL_ATOMIC(uint64_t) revocations; /* revocations (membarrier rendezvous) paid */
	KL_ATOMIC(uint64_t) revoke_ns;   /* cost of the last revocation */
	/* Written by every writer: */
	KL_ATOMIC(uint32_t) writes;    /* write acquisitions (wraps), bumped under the hold */
	/* The unbiased mode, and every writer's exclusion: every writer takes it exclusive
	 * (its word names the writer); unbiased readers take it shared (a thread's slot notes
	 * such a hold with KL_RM_TAG_RW). Last, so that the lock's own address names the
	 * kl_rmlock alone to the instruments. */
	struct kl_rwlock rw;
};

/* Static initializer: `struct kl_rmlock lk = KL_RMLOCK_INITIALIZER(KL_RM_SLEEPABLE);` */
#define KL_RMLOCK_INITIALIZER(flags)                                                       \
	{ 0, (flags), 0, 0, 0, 0, 0, 0, 0, 0, 0, KL_RWLOCK_INITIALIZER }

/*
 * Per-acquisition read token, owned by the caller (usually on the stack), passed to the
 * matching kl_rmlock_read_unlock(). It must stay alive until that unlock returns. The
 * inline fast path does not touch it; debug builds use it to check pairing (wrong
 * tracker, unlock from another thread).
 */
struct kl_rm_tracker {
	struct kl_rmlock *lock;
	void *owner;
	uint32_t magic;
	uint32_t idx;
};

/*
 * A thread's read holds (private; embedded in the thread's record, one per thread):
 * slot[1..depth] is a stack of the rmlocks it read-holds (0 where a hold was released out
 * of order); slot[0] is always 0, so an unlock at depth 0 fails the inline test without a
 * bounds check. Only the owning thread writes it; writers read the slots.
 */
struct kl_rm_reader {
	uint32_t depth;
	uint32_t unbiased_left; /* fenced reads left before the next look at the re-arm clock */
	KL_ATOMIC(uintptr_t) slot[KL_RM_SLOTS + 1];
};

/*
 * The calling thread's kl_rm_reader, or a shared always-full dummy until the thread's
 * first out-of-line read lock (and for ever when membarrier is unavailable: then every
 * read takes the out-of-line path, which has real fences). Exported only for the inline
 * fast path. Initial-exec TLS: libklock must be loaded at start-up, not dlopen()ed late.
 */
#define KL_RM_TLS __thread __attribute__((tls_model("initial-exec")))
KL_API extern KL_RM_TLS struct kl_rm_reader *kl_rm_self;

/**
 * kl_rmlock_init - initialise @lk with @flags (KL_RM_RECURSE, KL_RM_SLEEPABLE).
 * Returns 0, or EINVAL for unknown flags. Does not block.
 */
KL_API int kl_rmlock_init(struct kl_rmlock *lk, unsigned flags) KL_NONNULL(1);

/**
 * kl_rmlock_destroy - end @lk's life; nobody may hold it or wait for it. Does not block.
 * Returns 0, or EBUSY when a writer holds it, threads wait, or a thread read-holds it (a
 * snapshot: the caller must know the lock is quiescent); the lock is then left intact and
 * debug builds report the misuse. After destroy the object is poisoned; debug builds
 * report any later use.
 */
KL_API int kl_rmlock_destroy(struct kl_rmlock *lk) KL_NONNULL(1);

/**
 * kl_rmlock_read_lock - take @lk shared. Blocks (spins or, with KL_RM_SLEEPABLE, sleeps)
 * while a writer holds or waits for the lock: writers are preferred, so readers cannot
 * starve them. Recursion: see KL_RM_RECURSE. @tr must stay alive until the unlock. The
 * same thread must unlock. Deadlocks if the caller write-holds @lk (debug builds report).
 */
KL_API void kl_rmlock_read_lock(struct kl_rmlock *lk, struct kl_rm_tracker *tr)
	KL_NONNULL(1, 2);

/**
 * kl_rmlock_read_trylock - take @lk shared if no writer holds or waits for it.
 * Returns true on success. Never blocks. May fail spuriously while a writer is only
 * passing through (as FreeBSD's rm_try_rlock).
 */
KL_API bool kl_rmlock_read_trylock(struct kl_rmlock *lk, struct kl_rm_tracker *tr)
	KL_NONNULL(1, 2) KL_WARN_UNUSED;

/**
 * kl_rmlock_read_unlock - drop a read hold taken with @tr. Never blocks (may wake a
 * writer). Must be called by the thread that took it; holds may be released in any order.
 */
KL_API void kl_rmlock_read_unlock(struct kl_rmlock *lk, struct kl_rm_tracker *tr)
	KL_NONNULL(1, 2);

/**
 * kl_rmlock_write_lock - take @lk exclusive: excludes writers and readers. Blocks: takes
 * the embedded kl_rwlock exclusive (as kl_rwlock_write_lock()); when the lock is biased
 * it then revokes the bias - one heavy fence (membarrier) and a wait for every biased
 * read hold it can see - and leaves the lock unbiased. Not recursive; deadlocks if the caller read-holds
 * @lk (debug builds report both). Unlocked by the same thread.
 */
KL_API void kl_rmlock_write_lock(struct kl_rmlock *lk) KL_NONNULL(1);

/**
 * kl_rmlock_write_trylock - take @lk exclusive if no thread holds it. Returns true on
 * success. Does not sleep; on a biased lock it pays the membarrier and the scan before it
 * can tell (and leaves the lock biased when a biased reader makes it fail).
 */
KL_API bool kl_rmlock_write_trylock(struct kl_rmlock *lk) KL_NONNULL(1) KL_WARN_UNUSED;

/**
 * kl_rmlock_write_unlock - release the write hold. Never blocks; wakes waiters as
 * kl_rwlock_write_unlock() does (the sleeping readers, or one writer). Only the owner may unlock (debug builds report).
 */
KL_API void kl_rmlock_write_unlock(struct kl_rmlock *lk) KL_NONNULL(1);

/* kl_rmlock_wowned - true when the calling thread write-holds @lk. Never blocks. */
KL_API bool kl_rmlock_wowned(const struct kl_rmlock *lk) KL_NONNULL(1);

/* The inline read lock published @lk in the calling thread's top slot and found the lock
 * unbiased with no revocation under way: retag the slot KL_RM_TAG_RW and take the embedded
 * kl_rwlock shared (kl_rwlock's inline read), or undo and take the out-of-line path
 * (every RM_REARM_READS-th unbiased read looks at the re-arm clock; KL_RM_RECURSE locks).
 * Private. */
KL_API void kl_rmlock_read_unbiased_(struct kl_rmlock *lk, struct kl_rm_tracker *tr)
	KL_NONNULL(1, 2);

/* The bias policy's record of one lock (kl_rmlock_bias_stats()). */
struct kl_rmlock_bias {
	uint64_t revocations;  /* writes that paid the membarrier rendezvous */
	uint64_t unbiased_ns;  /* time the lock spent unbiased, up to now */
	uint64_t revoke_ns;    /* cost of the last revocation (0: none yet) */
	bool biased;           /* readers take the fence-free path now */
};

/**
 * kl_rmlock_bias_stats - fill @out with @lk's bias policy record (a relaxed snapshot).
 * Without membarrier (KLOCK_NO_MEMBARRIER, seccomp, non-Linux) a lock is never biased
 * and counts no revocations. Never blocks.
 */
KL_API void kl_rmlock_bias_stats(const struct kl_rmlock *lk, struct kl_rmlock_bias *out)
	KL_NONNULL(1, 2);

/*
 * ---- inline read fast path ---------------------------------------------------------
 * Compiled in C builds whose instruments do not need to see every acquisition; in
 * builds with witness, TSan, valgrind annotations, lockstat hold times or debug checks
 * (klock/config.h), and in C++, the calls above are made as written. Define
 * KLOCK_NO_INLINE before including to force the calls (e.g. for LD_PRELOAD interposers).
 */
#if defined(KL_INLINE_FAST_PATHS_) && !defined(KLOCK_NO_INLINE)
#define KL_RM_INLINE 1

/* A writer sleeps waiting for this thread's hold: wake it (the out-of-line paths do the
 * same in rmlock.c, rm_wake_writer()). */
static inline void kl_rmlock_wake_writer_inline(struct kl_rmlock *lk, struct kl_rm_reader *r)
{
	if (atomic_load_explicit(&lk->wait_for, memory_order_relaxed) == (uintptr_t)r) {
		atomic_fetch_add_explicit(&lk->wseq, 1, memory_order_release);
		kl_wake(&lk->wseq, 1);
	}
}

/*
 * kl_rmlock_read_unbiased_()'s common case, inline: retag the slot @d that the inline
 * read lock pushed (E; C, the light half of C/F, is a compiler barrier here as in the
 * unlock: a thread reaches this with a real record only when membarrier is in use), see
 * no revoking writer asleep, and take the embedded kl_rwlock shared (its inline read).
 * Anything else - the re-arm clock due, KL_RM_RECURSE, a writer to wake - goes out of
 * line, which retags again (idempotent) and takes it from there.
 */
static inline void kl_rmlock_read_unbiased_inline(struct kl_rmlock *lk,
						  struct kl_rm_tracker *tr,
						  struct kl_rm_reader *r, uint32_t d)
{
	if (__builtin_expect(r->unbiased_left != 0 && !(lk->flags & KL_RM_RECURSE), 1)) {
		atomic_store_explicit(&r->slot[d], (uintptr_t)lk | KL_RM_TAG_RW,
				      memory_order_release); /* E */
		atomic_signal_fence(memory_order_seq_cst); /* C: light half, pairs with F */
		if (__builtin_expect(!(atomic_load_explicit(&lk->state, memory_order_relaxed) &
				       KL_RM_S_WSLEEP),
				     1)) {
			r->unbiased_left--;
			kl_rwlock_read_lock(&lk->rw);
			return;
		}
	}
	kl_rmlock_read_unbiased_(lk, tr);
}

/*
 * Push @lk on the thread's stack of read holds, then look at the state. The compiler
 * barrier between is B, the light half of the asymmetric pair B/D: D is the
 * membarrier(PRIVATE_EXPEDITED) a revoking writer issues after setting KL_RM_S_UNBIASED
 * and before scanning the slots, so either the writer sees this slot or this load sees
 * the revocation. The acquire load pairs with M1, the release of the re-arming reader
 * that made the lock biased (after the last writer). On an unbiased lock (no revocation
 * under way: the state is UNBIASED alone) kl_rmlock_read_unbiased_() turns the published
 * slot into a kl_rwlock read hold.
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
		/* A revocation under way: undo, go out of line. */
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
 * asleep. A kl_rwlock hold (tagged): clear the slot, release the kl_rwlock.
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

KL_END_DECLS

#endif /* KLOCK_RMLOCK_H */
