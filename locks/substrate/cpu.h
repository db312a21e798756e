/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/cpu.h - the current-CPU index for per-CPU data, inline for lock fast paths.
 *
 * Sources, best first (chosen once in kli_cpu_init(), fixed afterwards):
 *   rseq+mm_cid  glibc's registered rseq area, mm_cid field (Linux 6.3+): a dense id unique
 *                among this process's running threads - slot arrays stay compact.
 *   rseq         the same area's cpu_id: one TLS load, kept current by the kernel.
 *   getcpu       sched_getcpu() (vDSO, a few ns).
 *   thread-hash  the thread record's dense index, when nothing tells the CPU.
 * The rseq area is found at thread pointer + __rseq_offset, so it needs an arch backend
 * that can read the thread pointer (KL_ARCH_HAVE_TP); -Darch=generic uses getcpu.
 * Every value is < kl_topology()->possible_cpus (see kli_cpu_init()).
 *
 * The index is a hint: the thread may migrate right after reading it. Callers that count
 * per slot must only rely on sums across slots (percpu-rwsem, rms), never on the slot.
 */
#ifndef KL_CPU_H
#define KL_CPU_H

#include "kl_internal.h"

enum kli_cpu_mode {
	KLI_CPU_THREAD_HASH,
	KLI_CPU_GETCPU,
	KLI_CPU_RSEQ,
	KLI_CPU_RSEQ_MMCID,
};

/* Offsets in the kernel's struct rseq (include/uapi/linux/rseq.h). */
#define KLI_RSEQ_CPU_ID_OFF 4
#define KLI_RSEQ_MM_CID_OFF 24

extern enum kli_cpu_mode kli_cpu_mode;
extern ptrdiff_t kli_rseq_off;      /* copy of glibc's __rseq_offset */
extern unsigned kli_cpu_limit;      /* possible CPUs: every index is below it */

void kli_cpu_init(void);
unsigned kli_cpu_fallback(void);

static inline uint32_t kli_rseq_field(unsigned off)
{
#if KL_ARCH_HAVE_TP
	const char *area = (const char *)kl_arch_thread_pointer() + kli_rseq_off;

	return *(const volatile uint32_t *)(const void *)(area + off);
#else
	(void)off;
	return 0;
#endif
}

/* The CPU the caller runs on (a hint). */
static inline unsigned kli_cpu_current(void)
{
	if (kl_likely(kli_cpu_mode >= KLI_CPU_RSEQ))
		return kli_rseq_field(KLI_RSEQ_CPU_ID_OFF);
	return kli_cpu_fallback();
}

/* An index for per-CPU slot arrays: mm_cid when available, else the CPU (a hint). */
static inline unsigned kli_cpu_slot(void)
{
	if (kl_likely(kli_cpu_mode == KLI_CPU_RSEQ_MMCID))
		return kli_rseq_field(KLI_RSEQ_MM_CID_OFF);
	return kli_cpu_current();
}

#endif /* KL_CPU_H */
