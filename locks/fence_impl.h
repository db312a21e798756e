/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/fence_impl.h - the asymmetric fence pair for lock code (public contract in
 * klock/fence.h). The light half is inline: one load of a flag that never changes after
 * start-up, then a compiler barrier (membarrier mode) or a full fence (fallback mode).
 */
#ifndef KL_FENCE_IMPL_H
#define KL_FENCE_IMPL_H

#include "kl_internal.h"

/* Set once by kli_fence_init(), before any thread can use a lock; read-only afterwards. */
extern bool kli_fence_asym;

void kli_fence_init(void);

/* Heavy half: membarrier(PRIVATE_EXPEDITED), or a seq_cst fence in fallback mode. */
void kli_fence_heavy(void);

/* Light half. In membarrier mode this is only a compiler barrier: it is correct ONLY as
 * the partner of a kli_fence_heavy() on the other side of the exchange. */
static inline void kli_fence_light(void)
{
	if (kl_likely(kli_fence_asym))
		kli_barrier();
	else
		atomic_thread_fence(memory_order_seq_cst);
}

#endif /* KL_FENCE_IMPL_H */
