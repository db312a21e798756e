/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/rwlock_impl.h - kl_rwlock for the interposer's realtime readers: the read lock
 * without the writer preference, for a reader that outranks every blocked writer (XSH
 * pthread_rwlock_rdlock with SCHED_FIFO/SCHED_RR threads). The caller decides that (the
 * interposer counts its blocked realtime writers); the theory is in rwlock.c.
 */
#ifndef KL_RWLOCK_IMPL_H
#define KL_RWLOCK_IMPL_H

#include <time.h>
#include <klock/rwlock.h>
#include "kl_internal.h"

int kli_rwlock_read_lock_outranking(struct kl_rwlock *rw, const struct timespec *abstime);

#endif /* KL_RWLOCK_IMPL_H */
