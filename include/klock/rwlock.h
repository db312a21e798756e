/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/rwlock.h - the adaptive reader-writer lock (OpenBSD 2025 / FreeBSD rw design).
 *
 * One word holds either the number of readers or the writer's owner id plus a flag; an
 * uncontended read or write lock is one compare-and-swap. Contended lockers spin for a
 * time budget learnt from recent waits, then sleep. Sleepers are COUNTED in separate
 * words (the OpenBSD 2024 rework): an unlock wakes one writer, or all readers, and only
 * when someone sleeps - never the whole herd to re-sleep.
 *
 * Readers that collide on that word turn on a reader bias (BRAVO): each then publishes
 * its hold in a slot of its own thread instead of the shared word, and a writer turns the
 * bias off and waits for those holds, after which it stays off for three times what that
 * took (KLOCK_RW_BIAS). A waiter leaves a thread that releases and retakes the lock at
 * once its streak for a while (a spinning reader up to 32 us, a spinning writer facing
 * readers up to 8 us) instead of taking each momentary opening.
 *
 * Policy: writer preference with a time-bounded hand-off. A new reader defers to a
 * sleeping writer (so readers cannot starve writers); when a writer unlocks while readers
 * sleep and the lock's last hand-off is at least 1 ms old, it hands the lock to all of
 * them at once (they wake already holding it), before any other writer (so writers
 * cannot starve readers either); in between, threads compete (a hand-off at every unlock
 * convoys when threads outnumber CPUs). Bounds: a sleeping writer waits for at most the
 * readers inside when it went to sleep plus the reader batch granted by the writer before
 * it; a sleeping reader waits for about a millisecond of write sections. Writers among
 * themselves are not FIFO. Design and bounds: docs/design-adaptive.md.
 *
 * Not recursive on either side: a thread that read-locks twice can deadlock against a
 * waiting writer (the read-recursion trap of every writer-preferring rwlock), and one that
 * read- or write-locks while holding the write side is reported. Not process-shared, not
 * async-signal-safe. A kl_rwlock fits in a pthread_rwlock_t (tested).
 *
 * Threads: the writer is named by its owner id, which names one thread lifetime (never
 * its recycled klock thread record), so a kl_rwlock left write-held by a thread that
 * exited stays write-held and no later thread is its writer: kl_rwlock_wowned() is
 * false, trylocks fail, timed locks time out, a write unlock is reported as by a
 * non-owner, and destroy answers EBUSY. Memory: a thread's first lock call may need a
 * klock thread record; out of memory and of the static reserve it aborts, as described
 * in <klock/mutex.h>.
 *
 * Misuse detected in every build (at no fast-path cost) and reported, naming the lock and
 * the caller (KLOCK_ON_ERROR=warn|abort): write relock, read lock by the writer, write
 * unlock by a non-owner, unlock of a lock not held in that mode, use after destroy. Calls
 * that return an error code return it instead (debug builds also report). A reader's
 * identity is not tracked, so a read unlock by a thread that holds no read lock is caught
 * only when no one holds one.
 */
#ifndef KLOCK_RWLOCK_H
#define KLOCK_RWLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <klock/compiler.h>
#include <klock/config.h>
#include <klock/fence.h>
#include <klock/mutex.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif

KL_BEGIN_DECLS

/* Fields are private to the library (layout in locks/primitives/rwlock.c's theory block). */
struct kl_rwlock {
	KL_ATOMIC(uintptr_t) word;   /* readers << 7, or writer owner id | WRLOCK; + flags */
	KL_ATOMIC(uint32_t) wwait;   /* writers asleep or about to be (low half) | wake-ups
				      * on their way to them (high half); their futex word */
	KL_ATOMIC(uint32_t) rseq;    /* futex word readers sleep on */
	KL_ATOMIC(uint64_t) rwait;   /* readers asleep (low half) | read locks granted to
				      * them and not yet claimed (high half) */
	KL_ATOMIC(uint32_t) spin_ns; /* average time recent successful spins took */
	KL_ATOMIC(uint16_t) wspin;   /* writers spinning for it */
	KL_ATOMIC(uint16_t) bias_at; /* coarse clock before which readers stay unbiased */
	KL_ATOMIC(uint32_t) granted_at; /* coarse clock of the last hand-off to readers */
	KL_ATOMIC(uint32_t) wpasses; /* write releases while a writer spun, since one won */
};

/* A statically initialised rwlock needs no kl_rwlock_init() and no kl_rwlock_destroy(). */
#define KL_RWLOCK_INITIALIZER { 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/** kl_rwlock_init - make @rw an unlocked rwlock. Never blocks. */
KL_API void kl_rwlock_init(struct kl_rwlock *rw) KL_NONNULL(1);

/**
 * kl_rwlock_destroy - end @rw's life (poisoned: later use is reported).
 * Returns 0, EBUSY if it is held or has waiters (left unchanged), EINVAL if already
 * destroyed. Never blocks.
 */
KL_API int kl_rwlock_destroy(struct kl_rwlock *rw) KL_NONNULL(1);

/**
 * kl_rwlock_read_lock - acquire @rw shared. May block (spins while a writer holds it,
 * then sleeps; defers to sleeping writers). Many threads may hold it shared at once; any
 * one of them releases its hold with kl_rwlock_read_unlock(). Not recursive (see above).
 */
KL_API void kl_rwlock_read_lock(struct kl_rwlock *rw) KL_NONNULL(1);

/** kl_rwlock_read_trylock - acquire @rw shared if no writer holds it or sleeps waiting for
 * it. Returns true on success. Never blocks. */
KL_API bool kl_rwlock_read_trylock(struct kl_rwlock *rw) KL_NONNULL(1);

/**
 * kl_rwlock_read_timedlock - kl_rwlock_read_lock() with an absolute CLOCK_MONOTONIC
 * deadline. Returns 0, ETIMEDOUT (never before @abstime), EINVAL (malformed @abstime -
 * checked even when the lock is free - or @rw destroyed), EDEADLK (the caller holds @rw
 * for writing). May block.
 */
KL_API int kl_rwlock_read_timedlock(struct kl_rwlock *rw, const struct timespec *abstime)
	KL_NONNULL(1, 2);

/** kl_rwlock_read_unlock - release one shared hold of @rw. If it was the last and a writer
 * sleeps, wakes one writer. Never sleeps. */
KL_API void kl_rwlock_read_unlock(struct kl_rwlock *rw) KL_NONNULL(1);

/**
 * kl_rwlock_write_lock - acquire @rw exclusively. May block (spins, then sleeps; while it
 * sleeps new readers wait). Not recursive. Only this thread may write-unlock or downgrade.
 */
KL_API void kl_rwlock_write_lock(struct kl_rwlock *rw) KL_NONNULL(1);

/** kl_rwlock_write_trylock - acquire @rw exclusively if nobody holds it. True on success.
 * Never blocks (it may take the lock ahead of sleeping writers). */
KL_API bool kl_rwlock_write_trylock(struct kl_rwlock *rw) KL_NONNULL(1);

/**
 * kl_rwlock_write_timedlock - kl_rwlock_write_lock() with an absolute CLOCK_MONOTONIC
 * deadline. Returns 0, ETIMEDOUT (never early), EINVAL (malformed @abstime, or destroyed),
 * EDEADLK (the caller already holds @rw for writing). May block.
 */
KL_API int kl_rwlock_write_timedlock(struct kl_rwlock *rw, const struct timespec *abstime)
	KL_NONNULL(1, 2);

/**
 * kl_rwlock_write_unlock - release the exclusive hold (the caller's). Hands the lock to
 * every sleeping reader if there is one and the last hand-off is 1 ms old or more, else
 * wakes one sleeping writer (or the sleeping readers, with no writer waiting). Never
 * sleeps. While one other writer spins waiting for @rw, the first release after that
 * writer has claimed its turn (after about 32 us), or after 4096 releases, leaves it the
 * turn: it waits (spinning, at most a few microseconds) for the free lock to be taken.
 */
KL_API void kl_rwlock_write_unlock(struct kl_rwlock *rw) KL_NONNULL(1);

/**
 * kl_rwlock_write_downgrade - turn the caller's exclusive hold into a shared one, with no
 * window in which another writer could get in; sleeping readers are admitted with it.
 * Release it later with kl_rwlock_read_unlock(). Never sleeps.
 */
KL_API void kl_rwlock_write_downgrade(struct kl_rwlock *rw) KL_NONNULL(1);

/** kl_rwlock_wowned - true if the calling thread holds @rw exclusively. Never blocks. */
KL_API bool kl_rwlock_wowned(const struct kl_rwlock *rw) KL_NONNULL(1);

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

/* The wake-up half of kl_rwlock_write_unlock(), for the inline unlock below: the unlock
 * has released @rw and then seen a sleeper counted in rwait or wwait; wake whoever that
 * concerns. Private; changes no lock state. */
KL_API void kl_rwlock_write_unlocked_(struct kl_rwlock *rw) KL_NONNULL(1);

/* The turn of a writer spinning alone (locks/primitives/rwlock.c): it claimed its turn, or the
 * caller released @rw RW_PASS_MAX times in a row past it; wait a moment for it to take
 * the free lock. Private. */
KL_API void kl_rwlock_write_polite_(struct kl_rwlock *rw) KL_NONNULL(1);

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

/* The read lock for the inline path below once its one try failed: a lost race with
 * another reader (a sign that the reader bias would pay), a blocking bit, or a biased
 * entry refused. Private. */
KL_API void kl_rwlock_read_contended_(struct kl_rwlock *rw) KL_NONNULL(1);

/*
 * Reader bias (private; locks/primitives/rwlock.c's theory block). While the word has BIAS, a reader
 * may publish its hold in its own thread's row of KL_RWLOCK_BIAS_SLOTS_ slots (the column
 * a hash of the lock's address) instead of counting itself in the shared word; a writer
 * clears the bias and waits for the published holds to go. kl_rwlock_bias_ is the calling
 * thread's row, or a shared always-full row (no slot is ever 0) until its first library
 * read lock and after it exits. Initial-exec TLS: libklock is loaded at start-up.
 */
#define KL_RWLOCK_BIAS_SLOTS_ 16u
#ifndef __cplusplus
__attribute__((tls_model("initial-exec"))) KL_API extern __thread _Atomic uintptr_t
	*kl_rwlock_bias_;

/* @rw's column in every thread's row: address bits above a struct's size, folded. */
static inline unsigned kl_rwlock_bias_col_(const struct kl_rwlock *rw)
{
	uintptr_t a = (uintptr_t)rw;

	return (unsigned)((a >> 6) ^ (a >> 10)) & (KL_RWLOCK_BIAS_SLOTS_ - 1u);
}

/* A biased hold's release saw a revoking writer asleep (BIAS_WAIT): wake it. Private. */
KL_API void kl_rwlock_bias_released_(struct kl_rwlock *rw) KL_NONNULL(1);

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
#endif

/* The rest of kl_rwlock_read_unlock(), for the inline unlock below: the unlock dropped a
 * read hold from a word that was @old and found misuse (reported and undone here) or was
 * the last reader out with a writer asleep (woken here). Private. */
KL_API void kl_rwlock_read_released_(struct kl_rwlock *rw, uintptr_t old) KL_NONNULL(1);

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
	} else if (__builtin_expect(!(v & KL_RWLOCK_RD_BLOCK_) &&
					    atomic_compare_exchange_strong_explicit(
						    &rw->word, &v, v + KL_RWLOCK_RD_ONE_,
						    memory_order_acquire, memory_order_relaxed),
				    1)) {
		return; /* R1: acquire, pairs with the last writer's W2/G3 (locks/primitives/rwlock.c) */
	}
	kl_rwlock_read_contended_(rw);
}

static inline void kl_rwlock_read_unlock_inline(struct kl_rwlock *rw)
{
	_Atomic uintptr_t *s = kl_rwlock_bias_ + kl_rwlock_bias_col_(rw);
	uintptr_t old;

	if (atomic_load_explicit(s, memory_order_relaxed) == (uintptr_t)rw) {
		kl_rwlock_bias_leave_(rw, s);
		return;
	}
	/* R2: release (seq_cst: store-buffering with S2, then we read wwait). */
	old = atomic_fetch_sub_explicit(&rw->word, KL_RWLOCK_RD_ONE_, memory_order_seq_cst);
	if (__builtin_expect((old & (KL_RWLOCK_WRLOCK_ | KL_RWLOCK_DESTROYED_)) != 0 ||
				     old < KL_RWLOCK_RD_ONE_ ||
				     ((old & ~(uintptr_t)KL_RWLOCK_FLAGS_) == KL_RWLOCK_RD_ONE_ &&
				      atomic_load_explicit(&rw->wwait, memory_order_seq_cst) != 0),
			     0))
		kl_rwlock_read_released_(rw, old);
}

#define kl_rwlock_write_lock(rw) kl_rwlock_write_lock_inline(rw)
#define kl_rwlock_write_unlock(rw) kl_rwlock_write_unlock_inline(rw)
#define kl_rwlock_read_lock(rw) kl_rwlock_read_lock_inline(rw)
#define kl_rwlock_read_unlock(rw) kl_rwlock_read_unlock_inline(rw)
#else
#define KL_RWLOCK_INLINE 0
#endif

KL_END_DECLS

#endif /* KLOCK_RWLOCK_H */
