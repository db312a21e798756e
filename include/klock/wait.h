/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/wait.h - the OS wait/wake layer: sleep on a 32-bit word until someone wakes it.
 *
 * The shape is futex(2)'s: kl_wait() atomically checks that *addr still holds `expected`
 * and sleeps; kl_wake() wakes waiters on the same address. The compare-and-sleep is atomic
 * with respect to kl_wake() on that address, so "check state, then wait for it to change"
 * never loses a wake-up as long as the waker changes *addr before calling kl_wake().
 *
 * Backends (chosen at build time, see `meson configure -Dwait=`):
 *   futex    Linux FUTEX_WAIT_BITSET/FUTEX_WAKE, process-private; absolute CLOCK_MONOTONIC
 *            deadlines.
 *   parking  portable: hashed buckets of waiter queues, each a pthread mutex + condvar.
 *            Only wakes that go through kl_wake() are seen (no cross-process waits).
 */
#ifndef KLOCK_WAIT_H
#define KLOCK_WAIT_H

#include <stdint.h>
#include <time.h>
#include <klock/compiler.h>

KL_BEGIN_DECLS

/**
 * kl_wait - sleep while *addr == expected.
 * @addr:     a 32-bit word, naturally aligned, that the waker changes before waking.
 * @expected: the value the caller last saw.
 * @abstime:  absolute CLOCK_MONOTONIC deadline, or NULL to wait without a deadline.
 *
 * Returns 0 when woken or when *addr no longer equals @expected (this includes spurious
 * returns: the caller must re-check its condition), ETIMEDOUT once @abstime has passed,
 * EINVAL if @abstime is malformed (tv_nsec outside [0, 1e9) or tv_sec < 0).
 * Never returns EINTR: a signal handler that runs during the wait is transparent (the wait
 * resumes with the same deadline). May block; not async-signal-safe with the parking backend.
 */
KL_API int kl_wait(const KL_ATOMIC(uint32_t) *addr, uint32_t expected,
                   const struct timespec *abstime) KL_NONNULL(1);

/**
 * kl_wake - wake up to @n threads sleeping in kl_wait() on @addr.
 * @n: how many to wake; KL_WAKE_ALL for every waiter.
 *
 * Returns the number of threads woken (0 when nobody waited). Never blocks.
 */
KL_API int kl_wake(const KL_ATOMIC(uint32_t) *addr, int n) KL_NONNULL(1);

/* kl_wake()'s "everyone" count. */
#define KL_WAKE_ALL 0x7fffffff

/* Name of the compiled-in backend: "futex" or "parking". */
KL_API const char *kl_wait_backend(void);

KL_END_DECLS

#endif /* KLOCK_WAIT_H */
