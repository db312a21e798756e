/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/witness.h - the lock-order checker (lockdep / FreeBSD WITNESS for userspace).
 *
 * Built in with `meson setup -Dwitness=true`; every klock lock then reports its acquisitions
 * to it. It keeps each thread's held locks and a global graph of lock CLASSES ("class A was
 * held while class B was acquired"), and reports, at the first occurrence and whether or not
 * a deadlock actually happens:
 *   - lock order reversal: an acquisition that closes a cycle in the graph (AB/BA, or longer),
 *     with the sites of both orders;
 *   - a second lock of the same class taken while one is held (unless annotated);
 *   - recursion on a non-recursive lock;
 *   - unlock of a lock the thread does not hold (or that another thread holds);
 *   - destroy of a held lock;
 *   - thread exit with locks held;
 *   - a sleeping lock taken while a spinlock (ticket, MCS) is held.
 * Reports go to stderr, name the locks (kl_lock_set_name() names, else kind and address) and
 * the call sites, and end with a stack. KLOCK_WITNESS=warn (default: report and go on, as
 * lockdep and WITNESS do), =abort (report, then abort(): CI), =off (check nothing).
 *
 * Classes: a lock's class is fixed at its first acquisition. It is the name given with
 * kl_witness_set_class(), else the lock's kl_lock_set_name() name (every lock with that name
 * shares the class, as in WITNESS), else the lock itself (an unnamed lock is its own class,
 * forgotten when the lock is destroyed). Name the locks that play one role - "inode",
 * "bucket" - and the checker reasons about roles, not instances.
 *
 * Every function here exists in every build; without -Dwitness=true they do nothing (and
 * kl_witness_enabled() returns false), so annotated code needs no #if.
 */
#ifndef KLOCK_WITNESS_H
#define KLOCK_WITNESS_H

#include <stdbool.h>
#include <stdio.h>
#include <klock/compiler.h>

KL_BEGIN_DECLS

/* kl_witness_set_class() flags. */
#define KL_WITNESS_DUPOK 0x1u  /* locks of this class may be held together, in any order
                                * (FreeBSD's DUPOK): no same-class report */

/* Subclasses kl_witness_nest() accepts: 0 .. KL_WITNESS_SUBCLASSES - 1 (lockdep: 8). */
#define KL_WITNESS_SUBCLASSES 8

/**
 * kl_witness_enabled - true when the checker is built in and KLOCK_WITNESS is not "off".
 * Never blocks; async-signal-safe.
 */
KL_API bool kl_witness_enabled(void);

/**
 * kl_witness_set_class - put @lock in the class called @name (copied; at most 63 bytes are
 * kept), shared by every lock given that name. With KL_WITNESS_DUPOK in @flags, several locks
 * of the class may be held at once in any order. Call it after the lock's init and before its
 * first acquisition (a later call re-classes the lock; orders recorded so far stay with the
 * old class). Returns 0, EINVAL (NULL name or unknown flag) or ENOMEM; 0 and nothing done
 * when witness is not built in. Thread-safe; takes only witness's internal lock.
 */
KL_API int kl_witness_set_class(const void *lock, const char *name, unsigned flags)
	KL_NONNULL(1);

/**
 * kl_witness_nest - the calling thread's NEXT acquisition uses @subclass (lockdep's
 * *_lock_nested()). Use it to hold two locks of one class on purpose, in a fixed order:
 * subclass 0 first, then 1, ... Each subclass is a class of its own in the order graph, so
 * taking them in the opposite order elsewhere is still reported. @subclass is clamped to
 * KL_WITNESS_SUBCLASSES - 1. Async-signal-safe (a per-thread store).
 */
KL_API void kl_witness_nest(unsigned subclass);

/**
 * kl_witness_held - true when the calling thread holds @lock (either side). Always true when
 * witness is not enabled, so it can guard asserts: assert(kl_witness_held(&m)).
 */
KL_API bool kl_witness_held(const void *lock) KL_NONNULL(1);

/**
 * kl_witness_assert_held / kl_witness_assert_not_held - report (warn or abort, as
 * KLOCK_WITNESS says) when the calling thread does not hold / does hold @lock
 * (lockdep_assert_held). No-ops when witness is not enabled.
 */
KL_API void kl_witness_assert_held(const void *lock) KL_NONNULL(1);
KL_API void kl_witness_assert_not_held(const void *lock) KL_NONNULL(1);

/**
 * kl_witness_dump - print every thread's held locks, with the sites that took them, to @f
 * (ddb's "show locks"). Reads other threads' lists without stopping them: a snapshot, exact
 * only for threads that are blocked. Prints one line saying witness is off when it is.
 */
KL_API void kl_witness_dump(FILE *f) KL_NONNULL(1);

/**
 * kl_witness_reports - how many problems witness has reported in this process.
 */
KL_API unsigned long kl_witness_reports(void);

KL_END_DECLS

#endif /* KLOCK_WITNESS_H */
