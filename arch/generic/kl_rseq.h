/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * arch/generic/kl_rseq.h - no rseq sequences on the generic backend: per-CPU counters
 * use C11 atomics. Copied by the build to <klock/arch_rseq.h> when this backend is
 * selected (see arch/x86_64/kl_rseq.h for the contract of kl_arch_rseq_inc()).
 */
#ifndef KL_ARCH_RSEQ_H
#define KL_ARCH_RSEQ_H

#define KL_ARCH_HAVE_RSEQ 0
/* No kl_arch_rseq_store_in(): kl_mcs grants with an atomic exchange. */
#define KL_ARCH_HAVE_RSEQ_STORE 0

#endif /* KL_ARCH_RSEQ_H */
