/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/instruments/witness_impl.h - the witness's side of the hook seam (called only from hooks.c,
 * only in -Dwitness=true builds). Public controls are in klock/witness.h.
 */
#ifndef KL_WITNESS_IMPL_H
#define KL_WITNESS_IMPL_H

#include "hooks.h"

#if KLOCK_WITNESS
/* Before an attempt: order, recursion and spin-context checks (not for try attempts). */
void kli_witness_acquire(const void *lock, enum kli_kind kind, unsigned flags,
			 const void *site);
/* After a successful attempt: push on the thread's held stack. */
void kli_witness_acquired(const void *lock, enum kli_kind kind, unsigned flags,
			  const void *site);
/* Before a release: pop, or report an unlock of a lock this thread does not hold. */
void kli_witness_release(const void *lock, enum kli_kind kind, unsigned flags,
			 const void *site);
void kli_witness_created(const void *lock, enum kli_kind kind, unsigned flags);
/* Before the lock's name is forgotten: reports a destroy of a held lock. */
void kli_witness_destroyed(const void *lock, enum kli_kind kind);
/* The thread's next acquisition is a group member taken in the group's own order. */
void kli_witness_nest_ordered(void);
#endif

#endif /* KL_WITNESS_IMPL_H */
