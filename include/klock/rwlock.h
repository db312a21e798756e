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

/* The wake-up half of kl_rwlock_write_unlock(), for the inline unlock
 * (<klock/inline/rwlock.h>): the unlock has released @rw and then seen a sleeper counted in
 * rwait or wwait; wake whoever that concerns. Private; changes no lock state. */
KL_API void kl_rwlock_write_unlocked_(struct kl_rwlock *rw) KL_NONNULL(1);

/* The turn of a writer spinning alone (locks/primitives/rwlock.c): it claimed its turn, or the
 * caller released @rw RW_PASS_MAX times in a row past it; wait a moment for it to take
 * the free lock. Private. */
KL_API void kl_rwlock_write_polite_(struct kl_rwlock *rw) KL_NONNULL(1);

/* The read lock for the inline path (<klock/inline/rwlock.h>) once its one try failed: a
 * lost race with another reader (a sign that the reader bias would pay), a blocking bit, or
 * a biased entry refused. Private. */
KL_API void kl_rwlock_read_contended_(struct kl_rwlock *rw) KL_NONNULL(1);

/* The calling thread's row of biased read slots (<klock/inline/rwlock.h>, "Reader
 * bias"). Private. */
#ifndef __cplusplus
__attribute__((tls_model("initial-exec"))) KL_API extern __thread _Atomic uintptr_t
	*kl_rwlock_bias_;

/* A biased hold's release saw a revoking writer asleep (BIAS_WAIT): wake it. Private. */
KL_API void kl_rwlock_bias_released_(struct kl_rwlock *rw) KL_NONNULL(1);
#endif

/* The rest of kl_rwlock_read_unlock(), for the inline unlock (<klock/inline/rwlock.h>): the
 * unlock dropped a read hold from a word that was @old and found misuse (reported and
 * undone here) or was the last reader out with a writer asleep (woken here). Private. */
KL_API void kl_rwlock_read_released_(struct kl_rwlock *rw, uintptr_t old) KL_NONNULL(1);

#include <klock/inline/rwlock.h>

KL_END_DECLS

#endif /* KLOCK_RWLOCK_H */
