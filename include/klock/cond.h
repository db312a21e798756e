/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/cond.h - a condition variable for kl_mutex.
 *
 * Waiters sleep in klock's parking lot (WebKit WTF::Condition style): kl_cond_wait()
 * queues the caller on the condvar, then releases the mutex, so a signal sent after the
 * caller released the mutex always finds it queued. kl_cond_broadcast() does not wake the
 * herd: it wakes one waiter and moves the others, still asleep, onto the mutex's own sleep
 * queue, where each unlock of the mutex wakes the next (glibc's old FUTEX_CMP_REQUEUE idea,
 * done without a kernel requeue). Signals and broadcasts with nobody waiting cost one load.
 *
 * Every waiter of one kl_cond must use the same mutex at a time (as POSIX requires).
 * Not process-shared; deadlines are CLOCK_MONOTONIC. Not async-signal-safe. A kl_cond
 * fits in a pthread_cond_t (tested). Spurious wake-ups are possible but rare: always wait
 * in a loop that re-checks the predicate.
 */
#ifndef KLOCK_COND_H
#define KLOCK_COND_H

#include <stdint.h>
#include <time.h>
#include <klock/compiler.h>
#include <klock/mutex.h>

KL_BEGIN_DECLS

/* Fields are private to the library (see locks/primitives/cond.c). */
struct kl_cond {
	KL_ATOMIC(uint32_t) waiters;  /* threads queued in a wait (counted under the mutex) */
	KL_ATOMIC(uint32_t) state;    /* 0, or the poison kl_cond_destroy() leaves */
	KL_ATOMIC(uintptr_t) mutex;   /* the struct kl_mutex the waiters use */
};

/* A statically initialised condvar needs no kl_cond_init() and no kl_cond_destroy(). */
#define KL_COND_INITIALIZER { 0, 0, 0 }

/** kl_cond_init - make @c a condvar with no waiters. Never blocks. */
KL_API void kl_cond_init(struct kl_cond *c) KL_NONNULL(1);

/**
 * kl_cond_destroy - end @c's life (the object is poisoned; later use is reported).
 * Returns 0, EBUSY if threads still wait on @c (it is left unchanged), or EINVAL if it
 * was already destroyed. Never blocks. A thread woken from @c may still be returning from
 * its wait: destroy @c only once its waiters have reacquired the mutex.
 */
KL_API int kl_cond_destroy(struct kl_cond *c) KL_NONNULL(1);

/**
 * kl_cond_wait - atomically release @m and sleep on @c; reacquire @m before returning.
 * The caller must hold @m (a wait without it is reported and returns at once). Blocks.
 * Returns when signalled or broadcast, or (rarely) spuriously. Signals do not interrupt it.
 */
KL_API void kl_cond_wait(struct kl_cond *c, struct kl_mutex *m) KL_NONNULL(1, 2);

/**
 * kl_cond_timedwait - kl_cond_wait() with an absolute CLOCK_MONOTONIC deadline.
 * Returns 0 (woken), ETIMEDOUT (the deadline passed; never returned before @abstime),
 * EINVAL (@abstime malformed, or @c destroyed) or EPERM (the caller does not hold @m).
 * On 0 and ETIMEDOUT the caller holds @m again; on EINVAL and EPERM nothing changed.
 */
KL_API int kl_cond_timedwait(struct kl_cond *c, struct kl_mutex *m,
			     const struct timespec *abstime) KL_NONNULL(1, 2, 3);

/**
 * kl_cond_signal - wake the longest-waiting thread on @c, if any. Never sleeps (it may
 * take a short internal lock and make one wake-up system call). The caller need not hold
 * the mutex, but the predicate must be changed under it.
 */
KL_API void kl_cond_signal(struct kl_cond *c) KL_NONNULL(1);

/**
 * kl_cond_broadcast - wake every thread waiting on @c: one now, the rest one per unlock
 * of their mutex (requeued onto it, still asleep). Never sleeps.
 */
KL_API void kl_cond_broadcast(struct kl_cond *c) KL_NONNULL(1);

KL_END_DECLS

#endif /* KLOCK_COND_H */
