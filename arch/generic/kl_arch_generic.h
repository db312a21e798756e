/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * arch/generic/kl_arch_generic.h - C11 + POSIX fill-ins for whatever an arch header did
 * not define (the musl/urcu "arch first, generic under #ifndef" chain).
 *
 * The contract every backend meets:
 *   kl_arch_relax()        spin-wait hint, at least a compiler barrier
 *   kl_arch_cycles()       a monotonic counter for spin budgets; KL_ARCH_CYCLES_ARE_NS says
 *                          whether it already counts nanoseconds (else locks/ calibrates it)
 *   KL_ARCH_CACHE_LINE     the line size; KL_ARCH_PAD the distance that avoids false sharing
 *   KL_ARCH_HAVE_TP        1 if kl_arch_thread_pointer() exists (needed to find glibc's
 *                          rseq area without __builtin_thread_pointer)
 *   KL_ARCH_HAVE_RSEQ      1 if kl_arch_rseq_inc() exists (a gated rseq per-CPU increment)
 */
#ifndef KL_ARCH_GENERIC_H
#define KL_ARCH_GENERIC_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#ifndef KL_ARCH_CACHE_LINE
#define KL_ARCH_CACHE_LINE 64
#endif

/* Unknown CPUs: pad to 128 bytes, which also covers POWER and 128-byte-line Arm parts. */
#ifndef KL_ARCH_PAD
#define KL_ARCH_PAD 128
#endif

#ifndef kl_arch_relax
/* No portable pause instruction: a compiler barrier keeps the spin loop re-reading memory.
 * Spinners in locks/ bound their spin by time and then yield or sleep. */
static inline void kl_arch_relax(void)
{
	atomic_signal_fence(memory_order_seq_cst);
}
#define kl_arch_relax kl_arch_relax
#endif

#ifndef kl_arch_cycles
/* CLOCK_MONOTONIC in nanoseconds: ~20 ns per call through the vDSO, fine for budgets. */
static inline uint64_t kl_arch_cycles(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#define kl_arch_cycles kl_arch_cycles
#define KL_ARCH_CYCLES_ARE_NS 1
#endif

#ifndef KL_ARCH_CYCLES_ARE_NS
#define KL_ARCH_CYCLES_ARE_NS 0
#endif

/* No rseq sequences: per-CPU counters use C11 atomics. */
#ifndef KL_ARCH_HAVE_RSEQ
#include "kl_rseq.h"
#endif

#ifdef kl_arch_thread_pointer
#define KL_ARCH_HAVE_TP 1
#else
#define KL_ARCH_HAVE_TP 0
#endif

#endif /* KL_ARCH_GENERIC_H */
