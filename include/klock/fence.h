/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/fence.h - the asymmetric fence pair (urcu's smp_mb_slave/smp_mb_master, FreeBSD's
 * interrupt fence + IPI rendezvous).
 *
 * A "publish mine, then read yours" exchange between a frequent side (readers) and a rare
 * side (writers) needs a full fence on both sides, or a light fence on the frequent side
 * paired with a heavy fence on the rare side:
 *
 *   frequent side                      rare side
 *   store my flag                      store its flag
 *   kl_fence_light()  <--- pairs --->  kl_fence_heavy()
 *   load its flag                      load my flag
 *
 * With membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) (registered at library load) the light
 * fence is a compiler barrier and the heavy fence is the syscall, which runs a full barrier
 * on every CPU currently running one of our threads. Without it (ENOSYS, EPERM, a seccomp
 * filter, or KLOCK_NO_MEMBARRIER=1), both are full seq_cst fences: still correct, slower
 * readers. The mode is fixed at library load and never changes afterwards.
 */
#ifndef KLOCK_FENCE_H
#define KLOCK_FENCE_H

#include <stdbool.h>
#include <klock/compiler.h>

KL_BEGIN_DECLS

/* The frequent side's half. A compiler barrier when membarrier is in use. */
KL_API void kl_fence_light(void);

/* The rare side's half: membarrier(PRIVATE_EXPEDITED), or a full fence in fallback mode.
 * May take microseconds (IPIs to the CPUs running this process). Never blocks. */
KL_API void kl_fence_heavy(void);

/* True when the pair is asymmetric (membarrier registered); false in fallback mode. */
KL_API bool kl_fence_asymmetric(void);

/* kl_fence_asymmetric()'s answer as a variable, set at library load (false until then,
 * which only makes the light half a full fence). Private: for the light half the headers'
 * inline unlocks take (klock/ticket.h, klock/mcs.h). Written through its exported name,
 * so a program's copy of it (a copy relocation) is the one the library sets. */
KL_API extern bool kl_fence_asym_;

#ifndef __cplusplus
/* kl_fence_light() without the call. Private to the headers' inline paths. */
static inline void kl_fence_light_inline_(void)
{
	if (__builtin_expect(kl_fence_asym_, 1))
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	else
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
}
#endif

KL_END_DECLS

#endif /* KLOCK_FENCE_H */
