/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/rwlock_impl.h - kl_rwlock for the interposer: the read lock without the writer
 * preference, for a realtime reader that outranks every blocked writer (XSH
 * pthread_rwlock_rdlock with SCHED_FIFO/SCHED_RR threads; the caller decides that, the
 * interposer counts its blocked realtime writers), and a look at who holds the lock; and,
 * for rwlock.c and rwlock_bias.c, the word's encoding, the reader bias's entry points and
 * its hot helpers. The theory is in rwlock.c.
 */
#ifndef KL_RWLOCK_IMPL_H
#define KL_RWLOCK_IMPL_H

#include <pthread.h>
#include <time.h>
#include <klock/rwlock.h>
#include "kl_internal.h"
#include "thread.h"

int kli_rwlock_read_lock_outranking(struct kl_rwlock *rw, const struct timespec *abstime);

/* What the lock holds now (a snapshot, for the interposer's check of an unlock that POSIX
 * leaves undefined: the calling thread neither writes nor tracks a read of it). */
enum kli_rw_held { KLI_RW_FREE, KLI_RW_READERS, KLI_RW_WRITER };
enum kli_rw_held kli_rwlock_held(const struct kl_rwlock *rw);

/* The word's encoding: klock/rwlock.h's private copies are the ones its inline paths use. */
#define RW_WRLOCK ((uintptr_t)KL_RWLOCK_WRLOCK_)
#define RW_WRWANT ((uintptr_t)KL_RWLOCK_WRWANT_)
#define RW_DESTROYED ((uintptr_t)KL_RWLOCK_DESTROYED_)
#define RW_BIAS ((uintptr_t)KL_RWLOCK_BIAS_)
#define RW_BIAS_WAIT ((uintptr_t)KL_RWLOCK_BIAS_WAIT_)
#define RW_FLAGS ((uintptr_t)KL_RWLOCK_FLAGS_)
#define RW_RD_ONE ((uintptr_t)KL_RWLOCK_RD_ONE_)
/* Word bits that keep a new reader out. */
#define RW_RD_BLOCK (RW_WRLOCK | RW_WRWANT | RW_DESTROYED)
_Static_assert(RW_RD_BLOCK == KL_RWLOCK_RD_BLOCK_, "klock/rwlock.h's reader-blocking bits");

/* ---- reader bias (rwlock_bias.c) ------------------------------------------------------- */

extern pthread_once_t kli_rw_bias_once;
void kli_rw_bias_global_init(void);
void kli_rw_bias_arm(struct kl_rwlock *rw);
int kli_rw_bias_revoke(struct kl_rwlock *rw, const struct timespec *abstime, bool wait);
bool kli_rw_bias_held(const struct kl_rwlock *rw);
bool kli_rw_bias_release_other(struct kl_rwlock *rw);

/* The calling thread's row, the inline path's from now on. */
static inline _Atomic uintptr_t *rw_bias_row(void)
{
	struct kli_thread *t = kli_self();

	if (kl_unlikely(kl_rwlock_bias_ != t->rw_bias)) {
		pthread_once(&kli_rw_bias_once, kli_rw_bias_global_init);
		kl_rwlock_bias_ = t->rw_bias;
	}
	return t->rw_bias;
}

static inline unsigned rw_col(const struct kl_rwlock *rw)
{
	return kl_rwlock_bias_col_(rw);
}

/* A biased entry (B1/B2, the inline path's kl_rwlock_bias_enter_ on the caller's row). */
static inline bool rw_bias_enter(struct kl_rwlock *rw)
{
	(void)rw_bias_row();
	return kl_rwlock_bias_enter_(rw);
}

/* Drops the caller's biased hold of @rw, if it has one (B5). */
static inline bool rw_bias_release(struct kl_rwlock *rw)
{
	_Atomic uintptr_t *s = kl_rwlock_bias_ + rw_col(rw);

	if (atomic_load_explicit(s, memory_order_relaxed) != (uintptr_t)rw)
		return false;
	kl_rwlock_bias_leave_(rw, s);
	return true;
}

#endif /* KL_RWLOCK_IMPL_H */
