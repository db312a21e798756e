/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * arch/x86_64/kl_arch.h - what x86-64 can say that C11 cannot.
 *
 * Memory model: TSO. Plain loads are acquire and plain stores are release; LOCK-prefixed
 * RMWs are full fences; a seq_cst store compiles to XCHG. C11 atomics already map to the
 * cheapest correct instruction, so nothing about ordering is overridden here.
 */
#ifndef KL_ARCH_H
#define KL_ARCH_H

#include <stdint.h>

#define KL_ARCH_NAME "x86_64"

/* L1 line size on every x86-64 shipped so far. */
#define KL_ARCH_CACHE_LINE 64
/* Padding that stops false sharing: the L2 spatial prefetcher pulls lines in 128-byte
 * pairs, so two hot 64-byte-apart words still interfere (a hypothesis klbench measures). */
#define KL_ARCH_PAD 128

/* PAUSE: frees the sibling hyperthread and avoids the memory-order machine clear when the
 * spun-on line changes. About 10 cycles before Skylake, ~140 after: spin by time, not count. */
static inline void kl_arch_relax(void)
{
	__asm__ __volatile__("pause" ::: "memory");
}
#define kl_arch_relax kl_arch_relax

/* Invariant TSC: constant rate, synchronised across cores on anything this code targets. */
static inline uint64_t kl_arch_cycles(void)
{
	uint32_t lo, hi;

	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}
#define kl_arch_cycles kl_arch_cycles

/* The thread pointer (FS base): glibc's rseq area sits at tp + __rseq_offset. */
static inline void *kl_arch_thread_pointer(void)
{
	void *tp;

	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return tp;
}
#define kl_arch_thread_pointer kl_arch_thread_pointer

/* rseq per-CPU sequences: their own file, also installed as <klock/arch_rseq.h>. */
#include "kl_rseq.h"

#include "kl_arch_generic.h"

#endif /* KL_ARCH_H */
