/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/seqlock.h - sequence lock (Linux seqlock_t, FreeBSD's timehands generations):
 * readers write nothing at all - not even their own cache lines - and retry when a writer
 * ran meanwhile; writers serialise on a small internal mutex and bump the sequence to
 * odd while they write and back to even when done.
 *
 *   uint32_t s;                               kl_seqlock_write_lock(&sl);
 *   do {                                      data.a = ...; data.b = ...;
 *           s = kl_seqlock_read_begin(&sl);   kl_seqlock_write_unlock(&sl);
 *           a = data.a; b = data.b;  (copy)
 *   } while (kl_seqlock_read_retry(&sl, s));
 *
 * For data a reader can COPY and then validate: the read section must not follow
 * pointers it read (they may be half-written), must not have side effects, and should
 * read the shared data with relaxed atomics (or memcpy-like plain loads, accepting that
 * C11 calls that a data race - Linux and Concurrency Kit do the same). Readers never
 * block writers, so writers cannot starve; a steady stream of writes can starve readers.
 *
 * A reader inside a write section of the same seqlock spins for ever (self-deadlock).
 * read_begin waits (spins, then yields, then after about 1 ms sleeps until the write
 * ends) while a write is in progress. Not
 * async-signal-safe for writers; readers may run in a signal handler only if the
 * interrupted code is not a writer of the same seqlock.
 */
#ifndef KLOCK_SEQLOCK_H
#define KLOCK_SEQLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <klock/config.h>
#include <klock/compiler.h>

#ifndef __cplusplus
#include <stdatomic.h>
#endif

KL_BEGIN_DECLS

struct kl_seqlock {
	KL_ATOMIC(uint32_t) seq;     /* even: stable; odd: a write is in progress */
	KL_ATOMIC(uint32_t) wlock;   /* writers' mutex: 0 free, 1 held, 2 held + sleepers */
	KL_ATOMIC(uintptr_t) owner;  /* the writer's owner id (one thread lifetime) */
};

#define KL_SEQLOCK_INITIALIZER { 0, 0, 0 }

/* kl_seqlock_init - initialise @sl. Returns 0. Does not block. */
KL_API int kl_seqlock_init(struct kl_seqlock *sl) KL_NONNULL(1);

/* kl_seqlock_destroy - returns 0, or EBUSY if a writer holds or waits for @sl. */
KL_API int kl_seqlock_destroy(struct kl_seqlock *sl) KL_NONNULL(1);

/**
 * kl_seqlock_write_lock - become the writer: exclude other writers (spin, then sleep),
 * then make the sequence odd so readers retry. Not recursive. The same thread unlocks.
 */
KL_API void kl_seqlock_write_lock(struct kl_seqlock *sl) KL_NONNULL(1);

/* kl_seqlock_write_trylock - as write_lock if no writer holds it; true on success. */
KL_API bool kl_seqlock_write_trylock(struct kl_seqlock *sl) KL_NONNULL(1) KL_WARN_UNUSED;

/* kl_seqlock_write_unlock - publish the write (sequence even again) and let the next
 * writer in. Never blocks. Only the writer may call it (debug builds report). */
KL_API void kl_seqlock_write_unlock(struct kl_seqlock *sl) KL_NONNULL(1);

/**
 * kl_seqlock_read_begin - start a read section; returns the sequence to pass to
 * kl_seqlock_read_retry(). Waits (spins, then yields) while a write is in progress.
 * Writes nothing. Never sleeps.
 */
KL_API uint32_t kl_seqlock_read_begin(const struct kl_seqlock *sl) KL_NONNULL(1);

/**
 * kl_seqlock_read_retry - end a read section started with @seq: true if a writer ran
 * meanwhile, so everything read must be discarded and the section repeated.
 */
KL_API bool kl_seqlock_read_retry(const struct kl_seqlock *sl, uint32_t seq) KL_NONNULL(1);

/* The current sequence (even when no write is in progress), e.g. for a cheap
 * "did anything change since?" check. */
KL_API uint32_t kl_seqlock_sequence(const struct kl_seqlock *sl) KL_NONNULL(1);

#include <klock/inline/seqlock.h>

KL_END_DECLS

#endif /* KLOCK_SEQLOCK_H */
