/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * arch/aarch64/kl_arch.h - what AArch64 can say that C11 cannot.
 *
 * Memory model: weak (other-multi-copy-atomic). C11 acquire/release map to LDAR/STLR (or
 * LDAPR), RMWs to LSE CAS/LDADD/SWP with A/L bits when built for ARMv8.1+, else LL/SC
 * loops. Nothing about ordering is overridden here; every pairing in locks/ is argued in
 * C11 terms, which is exactly what the hardware is given.
 */
#ifndef KL_ARCH_H
#define KL_ARCH_H

#include <stdint.h>

#define KL_ARCH_NAME "aarch64"

/* Most Arm server cores (Neoverse, Cortex-A7x) have 64-byte lines; Apple's are 128. */
#define KL_ARCH_CACHE_LINE 64
/* Pad for the 128-byte-line parts too. */
#define KL_ARCH_PAD 128

/* ISB rather than YIELD: YIELD is a no-op on most Arm cores, while ISB stalls for a few
 * tens of cycles, the closest thing to x86 PAUSE (the choice Rust and MySQL made). */
static inline void kl_arch_relax(void)
{
	__asm__ __volatile__("isb" ::: "memory");
}
#define kl_arch_relax kl_arch_relax

/* The generic timer: constant frequency (CNTFRQ_EL0), readable from EL0 on Linux. */
static inline uint64_t kl_arch_cycles(void)
{
	uint64_t v;

	__asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
	return v;
}
#define kl_arch_cycles kl_arch_cycles

/* TPIDR_EL0 is the thread pointer: glibc's rseq area sits at tp + __rseq_offset. */
static inline void *kl_arch_thread_pointer(void)
{
	void *tp;

	__asm__("mrs %0, tpidr_el0" : "=r"(tp));
	return tp;
}
#define kl_arch_thread_pointer kl_arch_thread_pointer

/* rseq per-CPU sequences: their own file, also installed as <klock/arch_rseq.h>. */
#include "kl_rseq.h"

#include "kl_arch_generic.h"

#endif /* KL_ARCH_H */
