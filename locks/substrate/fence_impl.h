/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/fence_impl.h - the asymmetric fence pair for lock code (public contract in
 * klock/fence.h). The light half is inline: one load of a flag that never changes after
 * start-up, then a compiler barrier (membarrier mode) or a full fence (fallback mode).
 */
#ifndef KL_FENCE_IMPL_H
#define KL_FENCE_IMPL_H

#include "kl_internal.h"

/* Set once by kli_fence_init(), before any thread can use a lock; read-only afterwards. */
extern bool kli_fence_asym;
/* ... and true when membarrier(PRIVATE_EXPEDITED_RSEQ) is registered too (implies asym). */
extern bool kli_fence_rseq;

void kli_fence_init(void);

/* Heavy half: membarrier(PRIVATE_EXPEDITED), or a seq_cst fence in fallback mode. */
void kli_fence_heavy(void);

/* Only when kli_fence_rseq: membarrier(PRIVATE_EXPEDITED_RSEQ) - the heavy fence, and
 * every rseq critical section a thread of this process is running is restarted (aborted
 * to its abort handler) before the call returns. The grace period for readers whose
 * read-side "critical section" is an rseq sequence that checks a flag and commits. */
void kli_fence_heavy_rseq(void);

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
