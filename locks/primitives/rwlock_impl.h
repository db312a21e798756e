/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/rwlock_impl.h - kl_rwlock for the interposer: the read lock without the writer
 * preference, for a realtime reader that outranks every blocked writer (XSH
 * pthread_rwlock_rdlock with SCHED_FIFO/SCHED_RR threads; the caller decides that, the
 * interposer counts its blocked realtime writers), and a look at who holds the lock. The
 * theory is in rwlock.c.
 */
#ifndef KL_RWLOCK_IMPL_H
#define KL_RWLOCK_IMPL_H

#include <time.h>
#include <klock/rwlock.h>
#include "kl_internal.h"

int kli_rwlock_read_lock_outranking(struct kl_rwlock *rw, const struct timespec *abstime);

/* What the lock holds now (a snapshot, for the interposer's check of an unlock that POSIX
 * leaves undefined: the calling thread neither writes nor tracks a read of it). */
enum kli_rw_held { KLI_RW_FREE, KLI_RW_READERS, KLI_RW_WRITER };
enum kli_rw_held kli_rwlock_held(const struct kl_rwlock *rw);

#endif /* KL_RWLOCK_IMPL_H */
