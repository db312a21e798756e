/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/mutex_impl.h - kl_mutex internals shared with kl_cond (locks/primitives/cond.c), which
 * requeues its waiters onto a mutex's sleep queue and must speak the mutex's protocol:
 * the state word's bits, the park key, the hand-off token. The theory is in mutex.c.
 */
#ifndef KL_MUTEX_IMPL_H
#define KL_MUTEX_IMPL_H

#include <klock/mutex.h>
#include "kl_internal.h"
#include "thread.h"

/* State word bits (owner ids are multiples of KLI_OWNER_STEP: 7 low bits free). */
#define KLI_MTX_PARKED 0x1ul    /* threads sleep (or are about to) on the mutex's park key */
#define KLI_MTX_SPINNER KL_MUTEX_SPINNER_ /* 0x2: the spin queue's head polls the word */
#define KLI_MTX_DESTROYED 0x4ul /* kl_mutex_destroy() poisoned the word */
#define KLI_MTX_FLAGS 0x7ful    /* every bit that is not owner */
/* What kl_mutex_destroy() stores: a recognisable owner part plus the DESTROYED bit. */
#define KLI_MTX_POISON (KLI_OWNER_POISON | KLI_MTX_DESTROYED)

/* Park tokens an unlocker hands the waiter it wakes. */
#define KLI_MTX_TOKEN_WAKE 0     /* the lock was released: compete for it again */
#define KLI_MTX_TOKEN_HANDOFF 1  /* the lock is yours: the word already has your id */

/* The holder's owner id (thread.h), 0 when free. */
static inline kli_owner_t kli_mtx_owner(uintptr_t v)
{
	return v & ~KLI_MTX_FLAGS;
}

/* The parking-lot key the mutex's sleepers queue on (kl_cond requeues onto it). */
static inline const void *kli_mtx_key(const struct kl_mutex *m)
{
	return m;
}

/* Lock/unlock on behalf of an exported caller (hooks and reports name @site).
 * kli_mutex_lock_at() returns 0, ETIMEDOUT, EINVAL (destroyed) or EDEADLK. */
int kli_mutex_lock_at(struct kl_mutex *m, const struct timespec *abstime, const void *site);
void kli_mutex_unlock_at(struct kl_mutex *m, const void *site);
/* kl_mutex_lock() / kl_mutex_trylock() on behalf of an exported caller (kl_hashlock's
 * stripes): the same fast paths; hooks and reports name @site. */
void kli_mutex_lock_from(struct kl_mutex *m, const void *site);
bool kli_mutex_trylock_at(struct kl_mutex *m, const void *site);

#endif /* KL_MUTEX_IMPL_H */
