/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/rmlock.h - read-mostly lock with FreeBSD rmlock(9) semantics that adapts to the
 * write rate. While the lock is BIASED (no write for a while) readers touch no shared
 * cache line and execute no atomic read-modify-write and no fence; the first writer pays
 * for that with a rendezvous (membarrier) and a scan of the threads' read holds, and
 * leaves the lock FENCED: readers then add one full barrier on their own cache line, and
 * each writer announces itself and scans the read holds with no rendezvous. Writes that
 * come closer together than a few scans leave the lock UNBIASED: readers and writers then
 * run kl_rwlock's algorithm on a kl_rwlock embedded in the lock (one compare-and-swap
 * each way, kl_rwlock's spinning, counted sleepers and hand-off), so a lock written often
 * costs what a kl_rwlock costs. Readers move the lock back up one step (unbiased, fenced,
 * biased) once a window with no write has passed: KL_RM_INHIBIT_MULT times the measured
 * revocation cost before the bias (BRAVO, Dice & Kogan 2019), so revocations take a
 * bounded share of the run time whatever the write rate.
 *
 *   struct kl_rmlock lk;                 struct kl_rm_tracker tr;   (caller-owned)
 *   kl_rmlock_init(&lk, 0);              kl_rmlock_read_lock(&lk, &tr);
 *   kl_rmlock_write_lock(&lk);           ... read ...
 *   ... write ...                        kl_rmlock_read_unlock(&lk, &tr);
 *   kl_rmlock_write_unlock(&lk);
 *
 * Use it where reads outnumber writes (configuration, routing tables, module lists): a
 * biased read costs about what an RCU read-side section costs, a fenced one an exchange
 * more, an unbiased one what a kl_rwlock read costs; a revoking write costs a
 * membarrier(PRIVATE_EXPEDITED) plus a walk over every thread that ever used klock, a
 * fenced write the walk alone, a write on an unbiased lock what a kl_rwlock write costs
 * (docs/design-readmostly.md has the figures).
 *
 * Flags (kl_rmlock_init):
 *   KL_RM_RECURSE    a thread that already read-holds the lock may read-lock it again
 *                    even while a writer waits. WITHOUT it, re-entering the read side
 *                    while a writer is waiting DEADLOCKS (the writer waits for the outer
 *                    hold, the inner acquisition waits for the writer) - as with FreeBSD
 *                    rmlocks without RM_RECURSE and Linux percpu-rwsems. Debug builds
 *                    report every nested read acquisition of a lock without the flag.
 *   KL_RM_SLEEPABLE  readers may sleep while they hold the lock: a writer waiting for one
 *                    sleeps as soon as its spin ends. Without it, a writer that needs no
 *                    membarrier (the lock is not biased) first naps in short timed sleeps
 *                    for about a millisecond, so that a reader preempted for a moment
 *                    costs no membarrier; then it sleeps too. Every other wait is
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
#define KL_RM_SLEEPABLE 0x2u  /* readers may sleep inside: writers sleep, never nap */

/* Read holds a thread keeps in its own record (one 128-byte block); more are holds of the
 * lock's embedded kl_rwlock. */
#define KL_RM_SLOTS 14

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
	KL_ATOMIC(uint16_t) fenced_until; /* 256 ns clock: a fenced write before it is dense */
	KL_ATOMIC(uint16_t) fenced_cost;  /* the run of dense fenced writes (low bits), the last
					   * fenced write's announce and scan (64 ns) */
	/* The unbiased mode, and every writer's exclusion: every writer takes it exclusive
	 * (its word names the writer); unbiased readers take it shared (a thread's slot notes
	 * such a hold with KL_RM_TAG_RW). Last, so that the lock's own address names the
	 * kl_rmlock alone to the instruments. */
	struct kl_rwlock rw;
};

/* Static initializer: `struct kl_rmlock lk = KL_RMLOCK_INITIALIZER(KL_RM_SLEEPABLE);` */
#define KL_RMLOCK_INITIALIZER(flags)                                                       \
	{ 0, (flags), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, KL_RWLOCK_INITIALIZER }

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
 * kl_rmlock_read_lock - take @lk shared. Blocks (spins, then sleeps) while a writer
 * holds or waits for the lock: writers are preferred, so readers cannot
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
 * kl_rwlock shared (kl_rwlock's inline read), then, every RM_REARM_READS-th unbiased read,
 * look at the re-arm clock; on a KL_RM_RECURSE lock, undo and take the out-of-line path.
 * Private. */
KL_API void kl_rmlock_read_unbiased_(struct kl_rmlock *lk, struct kl_rm_tracker *tr)
	KL_NONNULL(1, 2);

/* The bias policy's record of one lock (kl_rmlock_bias_stats()). */
struct kl_rmlock_bias {
	uint64_t revocations;  /* writes that paid the membarrier rendezvous */
	uint64_t unbiased_ns;  /* time the lock spent not biased (fenced or unbiased) */
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

#include <klock/inline/rmlock.h>

KL_END_DECLS

#endif /* KLOCK_RMLOCK_H */
