/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/hashlock.h - hashed lock tables (lock striping) and shared lock objects.
 *
 * A kl_hashlock is for "one lock per object is too much memory, one global lock is too
 * much contention": a fixed table of stripe locks, each on its own cache line, and a
 * hash that maps an object's address (the key) to one stripe. Locking a key locks its
 * stripe, so threads working on different objects mostly take different locks. Two keys
 * may share a stripe: that costs some false contention, never correctness - as long as
 * a thread that needs several keys at once takes them with kl_hashlock_lock2() or
 * kl_hashlock_lockn(), which take each stripe once, in stripe order. FreeBSD's mtx_pool,
 * NetBSD's pmap pv_hash_locks and turnstile chains. Design: docs/design-hashlock.md.
 *
 *     static struct kl_hashlock objlocks;
 *     kl_hashlock_init(&objlocks, 0);               // auto size: 4-8 stripes per CPU
 *     kl_hashlock_lock(&objlocks, obj);       ... obj's fields ...
 *     kl_hashlock_unlock(&objlocks, obj);
 *     kl_hashlock_lock2(&objlocks, src, dst); ... move from src to dst ...
 *     kl_hashlock_unlock2(&objlocks, src, dst);
 *
 * RULES (the price of sharing):
 *  - Leaf locks: a stripe may be shared with any other object, so a thread that holds a
 *    key must not take a second key of the same table with another kl_hashlock_lock()
 *    call (it may be the same stripe: self-deadlock; or a lower stripe: an ABBA deadlock
 *    with a thread doing the opposite). Use lock2/lockn for several keys; take no other
 *    table's keys and no lock that some other path takes before this table's keys.
 *  - The key is an address and only an address: it is hashed, never dereferenced. Keys
 *    in one 64-byte block (one cache line) always share a stripe.
 *  - A stripe is a kl_mutex (default: may block, sleeps when it waits long) or, with
 *    KL_HASHLOCK_TICKET, a kl_ticket spinlock (FIFO; for short sections that never block).
 *
 * Not process-shared. No kl_hashlock_* function may be called from a signal handler.
 * Misuse of a stripe (unlock of a key not locked, relock) is reported by the stripe's
 * lock, naming the table, the stripe and the caller; debug builds (-Ddebug_locks=true)
 * also report use of an uninitialised or destroyed table.
 *
 * Shared lock objects (NetBSD mutex_obj): kl_lockobj_alloc() returns a kl_mutex in its own
 * cache line with a reference count, for objects that share one lock and are freed
 * independently (the last kl_lockobj_free() frees the lock).
 */
#ifndef KLOCK_HASHLOCK_H
#define KLOCK_HASHLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <klock/compiler.h>
#include <klock/mutex.h>

KL_BEGIN_DECLS

/* kl_hashlock_init_flags() flags. */
#define KL_HASHLOCK_TICKET 0x1u   /* stripes are kl_ticket spinlocks (default: kl_mutex) */

/* Most stripes a table may have (2^20 stripes of 128 bytes: 128 MiB). */
#define KL_HASHLOCK_MAX_STRIPES (1u << 20)
/* Most keys kl_hashlock_lockn() takes at once. */
#define KL_HASHLOCK_LOCKN_MAX 32

/* A hashed lock table. Fields are private to the library (locks/primitives/hashlock.c). */
struct kl_hashlock {
	void *stripes;       /* nstripes padded stripe locks, allocated by init */
	uint32_t shift;      /* 63 - log2(nstripes): the hash keeps its top log2 bits */
	uint32_t nstripes;
	uint32_t flags;      /* KL_HASHLOCK_* */
	uint32_t magic;      /* live table, or destroyed (checked by debug builds) */
};

/**
 * kl_hashlock_init - make @h a table of @nstripes kl_mutex stripes, all unlocked.
 * @nstripes: a power of two up to KL_HASHLOCK_MAX_STRIPES, or 0 for the automatic size:
 * the largest power of two <= 8 x the online CPUs (so more than 4 and at most 8 stripes
 * per CPU; 16 on a 2-CPU machine, 2048 on 256 CPUs), which keeps the chance that two running threads
 * collide on a stripe low (docs/design-hashlock.md, "Sizing").
 * Returns 0, EINVAL (@nstripes is not 0 and not a power of two, or too large) or ENOMEM.
 * Allocates; may not be called from a signal handler. @h must not be in use.
 */
KL_API int kl_hashlock_init(struct kl_hashlock *h, unsigned nstripes) KL_NONNULL(1);

/**
 * kl_hashlock_init_flags - kl_hashlock_init() with @flags: KL_HASHLOCK_TICKET makes the
 * stripes kl_ticket spinlocks - cheaper to hand over, strictly FIFO, but waiters spin (then
 * yield or sleep in line), so only for short sections that never block and take no other
 * lock. Returns EINVAL also for an unknown flag.
 */
KL_API int kl_hashlock_init_flags(struct kl_hashlock *h, unsigned nstripes, unsigned flags)
	KL_NONNULL(1);

/**
 * kl_hashlock_destroy - free @h's stripes. Returns 0, EBUSY if some stripe is locked (then
 * nothing changes), or EINVAL if @h was already destroyed. Never blocks. The caller must
 * ensure no thread uses @h any more (a thread that just unlocked a key may still be inside
 * kl_hashlock_unlock(): wait until it has returned).
 */
KL_API int kl_hashlock_destroy(struct kl_hashlock *h) KL_NONNULL(1);

/**
 * kl_hashlock_index - the stripe that protects @key: an index < kl_hashlock_nstripes(@h),
 * the same for the same key for the table's whole life (a Fibonacci hash of the address
 * with the low 6 bits dropped). Never blocks; async-signal-safe.
 */
KL_API unsigned kl_hashlock_index(const struct kl_hashlock *h, const void *key) KL_NONNULL(1);

/** kl_hashlock_nstripes - how many stripes @h has (the automatic size, if init got 0). */
KL_API unsigned kl_hashlock_nstripes(const struct kl_hashlock *h) KL_NONNULL(1);

/**
 * kl_hashlock_lock - lock @key's stripe, waiting as long as it takes.
 * May block (mutex stripes spin, then sleep; ticket stripes spin, yield, sleep in line).
 * Not recursive, and the caller must hold no other key of @h (see RULES above): relocking
 * a held mutex stripe is reported in every build (and the call returns without locking
 * if KLOCK_ON_ERROR=warn). Only the locking thread may unlock. @h must stay alive until
 * the matching kl_hashlock_unlock() has returned.
 */
KL_API void kl_hashlock_lock(struct kl_hashlock *h, const void *key) KL_NONNULL(1);

/**
 * kl_hashlock_trylock - lock @key's stripe if it is free right now. Returns true if the
 * caller now holds it; false if anyone holds it - including the caller, through another
 * key that shares the stripe. Never blocks. Safe to use while holding other keys of @h
 * (a trylock cannot deadlock): on false, back off and take them in order.
 */
KL_API bool kl_hashlock_trylock(struct kl_hashlock *h, const void *key) KL_NONNULL(1);

/**
 * kl_hashlock_unlock - unlock @key's stripe, locked by the calling thread with
 * kl_hashlock_lock() or a successful kl_hashlock_trylock() of a key with the same stripe.
 * Never sleeps (may make one wake-up system call). Unlocking a mutex stripe the caller
 * does not hold is reported and changes nothing.
 */
KL_API void kl_hashlock_unlock(struct kl_hashlock *h, const void *key) KL_NONNULL(1);

/**
 * kl_hashlock_lock2 - lock the stripes of @a and @b: the lower stripe index first, and a
 * stripe they share only once (the double-lock rule: uvm_pagelock2, double_rq_lock). Any
 * two threads locking any pairs this way cannot deadlock with each other. @a == @b is
 * fine. Blocks like kl_hashlock_lock(); the caller must hold no key of @h.
 */
KL_API void kl_hashlock_lock2(struct kl_hashlock *h, const void *a, const void *b)
	KL_NONNULL(1);

/** kl_hashlock_unlock2 - undo kl_hashlock_lock2(@h, @a, @b) (same keys, either order). */
KL_API void kl_hashlock_unlock2(struct kl_hashlock *h, const void *a, const void *b)
	KL_NONNULL(1);

/**
 * kl_hashlock_lockn - lock the stripes of @n keys (@keys[0..n-1], duplicates allowed):
 * each distinct stripe once, in increasing stripe order, so it cannot deadlock with other
 * lockn/lock2 callers. Returns 0, or EINVAL if @n > KL_HASHLOCK_LOCKN_MAX (nothing is
 * locked). @n == 0 locks nothing. Blocks like kl_hashlock_lock(); the caller must hold
 * no key of @h.
 */
KL_API int kl_hashlock_lockn(struct kl_hashlock *h, const void *const *keys, size_t n)
	KL_NONNULL(1);

/**
 * kl_hashlock_unlockn - undo a successful kl_hashlock_lockn(@h, @keys, @n): the same keys
 * (in any order). Does nothing if @n > KL_HASHLOCK_LOCKN_MAX (the lockn failed).
 */
KL_API void kl_hashlock_unlockn(struct kl_hashlock *h, const void *const *keys, size_t n)
	KL_NONNULL(1);

/* ---- shared lock objects (NetBSD mutex_obj_alloc / mutex_obj_hold / mutex_obj_free) ---- */

/**
 * kl_lockobj_alloc - a new, unlocked kl_mutex in its own cache-line-aligned allocation,
 * with one reference (the caller's). Lock it with kl_mutex_lock() like any kl_mutex; name
 * it with kl_lock_set_name(). Several objects may point at one lock object and each hold
 * a reference: the lock then lives until the last of them lets go. Returns NULL (errno
 * ENOMEM) if memory runs out. Never blocks on a lock; not async-signal-safe.
 */
KL_API struct kl_mutex *kl_lockobj_alloc(void) KL_WARN_UNUSED;

/**
 * kl_lockobj_hold - take one more reference to @m, which came from kl_lockobj_alloc() and
 * on which the caller already holds a reference (so it cannot be freed meanwhile). Never
 * blocks; async-signal-safe. Debug builds report a pointer that is not a live lock object.
 */
KL_API void kl_lockobj_hold(struct kl_mutex *m) KL_NONNULL(1);

/**
 * kl_lockobj_free - drop one reference to @m; the last one destroys and frees the mutex.
 * Returns true when this call freed it (then @m must not be used again by anyone), false
 * when references remain. The last reference must not be dropped while @m is locked or
 * waited on: that is reported in every build, and the object is then not freed (leaked
 * rather than freed under a thread that still uses it). Never blocks.
 */
KL_API bool kl_lockobj_free(struct kl_mutex *m) KL_NONNULL(1);

KL_END_DECLS

#endif /* KLOCK_HASHLOCK_H */
