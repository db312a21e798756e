/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/ticket.h - the ticket spinlock: FIFO, 12 bytes, for short leaf critical sections.
 *
 * A locker takes a ticket (one atomic add) and waits until the lock serves that ticket;
 * unlock serves the next one (one store). Strict FIFO, so no waiter starves. The waiter
 * whose turn is next spins with the CPU's relax hint for a short time budget, then gives
 * its CPU away (yield) and spins again, for about 1 ms in all; then it sleeps until
 * served. Waiters further back spin (50 us while the queue fits on the CPUs, briefly
 * beyond) and then sleep, and unlock wakes exactly the one whose turn becomes next (a
 * directed wake-up, Dice and Kogan's TWA idea). So a waiter behind a long hold uses no
 * CPU, and with more threads than CPUs the queue does not burn the CPU time the holder
 * and the next thread need. Sections under it should still be short: use
 * kl_mutex for anything that can block or run long.
 *
 * Not recursive, not process-shared, not async-signal-safe. Debug builds
 * (-Ddebug_locks=true) add an owner field and report relock, unlock by a non-owner, double
 * unlock and use after destroy; release builds do not check (the struct is then 12 bytes).
 */
#ifndef KLOCK_TICKET_H
#define KLOCK_TICKET_H

#include <stdbool.h>
#include <stdint.h>
#include <klock/compiler.h>
#include <klock/config.h>
#include <klock/fence.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif

KL_BEGIN_DECLS

/* Fields are private to the library (see locks/primitives/ticket.c). */
struct kl_ticket {
	KL_ATOMIC(uint32_t) next;    /* next ticket to hand out */
	KL_ATOMIC(uint32_t) owner;   /* ticket being served (== next: unlocked) */
	KL_ATOMIC(uint32_t) sleepers; /* waiters asleep, and whether sleepers need no fence */
#if KLOCK_DEBUG_LOCKS
	KL_ATOMIC(uintptr_t) holder; /* debug builds: holder's thread record, or a poison */
#endif
};

/* A statically initialised ticket lock needs no kl_ticket_init() and no destroy. */
#if KLOCK_DEBUG_LOCKS
#define KL_TICKET_INITIALIZER { 0, 0, 0, 0 }
#else
#define KL_TICKET_INITIALIZER { 0, 0, 0 }
#endif

/** kl_ticket_init - make @t an unlocked ticket lock. Never blocks. */
KL_API void kl_ticket_init(struct kl_ticket *t) KL_NONNULL(1);

/** kl_ticket_destroy - end @t's life; @t must be unlocked. The object is poisoned (debug
 * builds report later use). Never blocks. */
KL_API void kl_ticket_destroy(struct kl_ticket *t) KL_NONNULL(1);

/**
 * kl_ticket_lock - acquire @t, in arrival order. The next in line spins (yielding the CPU
 * now and then) for about 1 ms, then sleeps until served; those further back sleep until
 * their turn is next. When as many threads
 * hold or wait for @t as the process may use CPUs, a newcomer first waits without a
 * ticket until the queue empties or about 1 ms passes (so order is by arrival among the
 * queued, and over ~1 ms among the rest). Not recursive. Only the thread that locked @t
 * may unlock it.
 */
KL_API void kl_ticket_lock(struct kl_ticket *t) KL_NONNULL(1);

/** kl_ticket_trylock - acquire @t if nobody holds or waits for it. Returns true if the
 * caller now holds it. Never waits. */
KL_API bool kl_ticket_trylock(struct kl_ticket *t) KL_NONNULL(1);

/** kl_ticket_unlock - release @t (held by the caller) to the next ticket; if waiters sleep,
 * wakes the one whose turn is now next. Never waits. */
KL_API void kl_ticket_unlock(struct kl_ticket *t) KL_NONNULL(1);

/** kl_ticket_is_locked - true if someone holds @t (a racy snapshot, for assertions). */
KL_API bool kl_ticket_is_locked(const struct kl_ticket *t) KL_NONNULL(1);

/* The second half of kl_ticket_unlock(), for the inline unlock
 * (<klock/inline/ticket.h>): @owner is the ticket the unlock has just served and
 * @sleepers the sleepers word it loaded after that (non-zero: sleepers, or the fenced
 * mode). Private; wakes sleepers, and may end the fenced mode; changes nothing else. */
KL_API void kl_ticket_wake_(struct kl_ticket *t, uint32_t owner, uint32_t sleepers)
	KL_NONNULL(1);

#include <klock/inline/ticket.h>

KL_END_DECLS

#endif /* KLOCK_TICKET_H */
