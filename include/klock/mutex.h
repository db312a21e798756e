/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/mutex.h - the adaptive mutex: spin while it pays, then sleep; fair in the end.
 *
 * The Linux/FreeBSD/NetBSD kernel mutex brought to userspace: one word holds the owner
 * (the thread's owner id, which names that thread's lifetime) and a few flag bits; an
 * uncontended lock is one compare-and-swap and an uncontended unlock another. A contended locker first spins
 * (only one thread at a time polls the word; the others queue behind it, each spinning
 * on its own cache line), for a time budget that follows how long recent waits took,
 * then sleeps in klock's parking lot. Unlock wakes one sleeper, and only when someone
 * sleeps. A sleeper that waited about a millisecond, or lost the race twice after being
 * woken, is handed the lock directly, so no thread starves. Design: docs/design-adaptive.md.
 *
 * Not recursive. Not process-shared. Not async-signal-safe: no kl_mutex_* call may be
 * made from a signal handler. A kl_mutex fits in a pthread_mutex_t (tested).
 *
 * Threads: a mutex (or a write-held kl_rwlock) left locked by a thread that exited stays
 * locked, and no later thread is its owner: kl_mutex_owned() is false, trylock fails,
 * timedlock times out, unlock is reported as by a non-owner. Memory: a thread's first
 * lock call takes a klock thread record, from mmap()ed memory or, when none can be
 * mapped (RLIMIT_AS), from a reserve of 64 in static storage; with that spent too the
 * call prints "klock: out of memory for a thread record" and aborts (libklock-preload
 * waits for a record instead: pthread_mutex_lock has no ENOMEM).
 *
 * Misuse: relocking a mutex the caller holds, unlocking one it does not hold (including
 * a double unlock), and using a destroyed mutex are detected at no cost to the fast path
 * (they all fail its compare-and-swap) and reported in every build, through the report
 * channel of <klock/names.h> (KLOCK_ON_ERROR=warn|abort, abort by default), naming the
 * mutex and the caller. Calls that return an error code return it instead; debug builds
 * (-Ddebug_locks=true) report those too.
 */
#ifndef KLOCK_MUTEX_H
#define KLOCK_MUTEX_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <klock/compiler.h>
#include <klock/config.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif

KL_BEGIN_DECLS

/* Fields are private to the library (layout in locks/primitives/mutex.c's theory block). */
struct kl_mutex {
	KL_ATOMIC(uintptr_t) owner;  /* owner id | flag bits; 0 = unlocked, nobody waits */
	KL_ATOMIC(uintptr_t) spinq;  /* tail of the queue of spinners (0 = nobody spins) */
	KL_ATOMIC(uint32_t) spin_ns; /* average time recent successful spins took */
	KL_ATOMIC(uint32_t) passes;  /* barging acquisitions past a claimed turn */
};

/* A statically initialised mutex needs no kl_mutex_init() and no kl_mutex_destroy(). */
#define KL_MUTEX_INITIALIZER { 0, 0, 0, 0 }

/**
 * kl_mutex_init - make @m an unlocked mutex (same state as KL_MUTEX_INITIALIZER).
 * Never blocks. @m must not be in use.
 */
KL_API void kl_mutex_init(struct kl_mutex *m) KL_NONNULL(1);

/**
 * kl_mutex_destroy - end @m's life; the object is poisoned, so any later use except
 * kl_mutex_init() is reported (use after destroy).
 * Returns 0, EBUSY if @m is locked or has waiters (then @m is left unchanged), or EINVAL
 * if it was already destroyed. Never blocks. The caller must ensure no thread still uses
 * @m: a thread that just unlocked it may still be inside kl_mutex_unlock() (it returns
 * before @m may be freed only when that unlock has returned).
 */
KL_API int kl_mutex_destroy(struct kl_mutex *m) KL_NONNULL(1);

/**
 * kl_mutex_lock - acquire @m, waiting as long as it takes.
 * May block (spins, then sleeps). Not recursive: a thread that relocks a mutex it holds
 * gets a report (with KLOCK_ON_ERROR=warn the call then returns without relocking).
 * Only the thread that locked @m may unlock it. @m must stay alive until the matching
 * kl_mutex_unlock() has returned.
 */
KL_API void kl_mutex_lock(struct kl_mutex *m) KL_NONNULL(1);

/**
 * kl_mutex_trylock - acquire @m if it is free right now.
 * Returns true if the caller now holds @m, false if another thread (or the caller itself)
 * holds it, or @m was destroyed (reported in debug builds). Never blocks or sleeps; it
 * may take @m ahead of sleeping waiters.
 */
KL_API bool kl_mutex_trylock(struct kl_mutex *m) KL_NONNULL(1);

/**
 * kl_mutex_timedlock - acquire @m, waiting at most until @abstime.
 * @abstime: absolute CLOCK_MONOTONIC deadline (clock_gettime(CLOCK_MONOTONIC) + delay).
 * Returns 0 (the caller holds @m), ETIMEDOUT (the deadline passed first; never returned
 * before @abstime), EINVAL (@abstime has tv_nsec outside [0, 1e9) or tv_sec < 0 - checked
 * even when @m is free - or @m was destroyed), or EDEADLK (the caller already holds @m).
 * May block. Debug builds also report EINVAL-for-destroyed and EDEADLK.
 */
KL_API int kl_mutex_timedlock(struct kl_mutex *m, const struct timespec *abstime)
	KL_NONNULL(1, 2);

/**
 * kl_mutex_unlock - release @m, which the calling thread must hold.
 * Wakes one sleeping waiter if there is one (or hands the lock to it directly, see the
 * top of this file). Never sleeps; it may take a short internal lock and make one wake-up
 * system call. Unlocking a mutex the caller does not hold is reported and changes nothing.
 * @m must stay alive until this call returns; then another thread may destroy it.
 */
KL_API void kl_mutex_unlock(struct kl_mutex *m) KL_NONNULL(1);

/**
 * kl_mutex_owned - true if the calling thread holds @m (for assertions). Never blocks.
 */
KL_API bool kl_mutex_owned(const struct kl_mutex *m) KL_NONNULL(1);

/* The calling thread's owner id, 0 until its first contended or misused call has
 * registered it with the library. Private: for the inline fast paths
 * (<klock/inline/mutex.h>; locks/substrate/thread.h: kli_tls_owner, of which it is an
 * alias). */
__attribute__((tls_model("initial-exec"))) KL_API extern __thread uintptr_t kl_mutex_self_;

#include <klock/inline/mutex.h>

KL_END_DECLS

#endif /* KLOCK_MUTEX_H */
