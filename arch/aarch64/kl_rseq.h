/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * arch/aarch64/kl_rseq.h - the rseq per-CPU increment for aarch64.
 *
 * Included by kl_arch.h for the library, and copied by the build to
 * <klock/arch_rseq.h> (the selected backend's copy, like config.h) so that the inline
 * read fast path of <klock/pcpu_rwsem.h> can use it. Self-contained, C and C++.
 */
#ifndef KL_ARCH_RSEQ_H
#define KL_ARCH_RSEQ_H

#include <stdbool.h>
#include <stdint.h>

/*
 * kl_arch_rseq_inc - see arch/x86_64/kl_rseq.h for the contract. The rseq area is at
 * TPIDR_EL0 + @rseq_off. The *gate load is LDAR (acquire: the read section cannot start
 * before it) and the commit is one STLR (release: a read section's accesses are ordered
 * before its unlock count moves). The abort handler is preceded by RSEQ_SIG, the
 * signature glibc registers on aarch64 (0xd428bc00, a BRK encoding), and restarts.
 * Not exercised by CI: qemu-user does not emulate rseq, so glibc's registration fails
 * there, cpu_id reads -2 and locks/substrate/cpu.c selects the getcpu fallback; this returns false.
 */
#define KL_ARCH_HAVE_RSEQ 1
/* No kl_arch_rseq_store_in() yet (x86_64 only: CI cannot run an aarch64 rseq section,
 * see above): kl_mcs grants with an atomic exchange here. */
#define KL_ARCH_HAVE_RSEQ_STORE 0
#define KL_ARCH_RSEQ_SIG 0xd428bc00
/* log2 of the slot stride (KL_ARCH_PAD) of the per-CPU arrays kl_arch_rseq_inc() indexes. */
#define KL_ARCH_PAD_SHIFT 7
/* struct rseq: offsets of rseq_cs and cpu_id. */
#define KL_ARCH_RSEQ_CS_OFF 8
#define KL_ARCH_RSEQ_CPU_ID_OFF 4

static inline bool kl_arch_rseq_inc(long rseq_off, const void *gate, long disp)
{
	char *area;

	if (rseq_off == 0)
		return false;
	__asm__("mrs %0, tpidr_el0" : "=r"(area));
	area += rseq_off;
	__asm__ __volatile__ goto(
		".pushsection __rseq_cs, \"aw\"\n\t"
		".balign 32\n\t"
		"3:\n\t"
		".long 0x0, 0x0\n\t"
		".quad 1f, (2f - 1f), 4f\n\t"
		".popsection\n\t"
		"0:\n\t"
		"adrp x9, 3b\n\t"
		"add x9, x9, :lo12:3b\n\t"
		"str x9, [%[area], #%c[cs]]\n\t"    /* rseq->rseq_cs = &descriptor */
		"1:\n\t"                             /* start_ip: right after the store */
		"ldar x11, [%[gate]]\n\t"
		"tbz x11, #0, %l[bail]\n\t"
		"ldrsw x9, [%[area], #%c[cpu]]\n\t"
		"tbnz x9, #63, %l[bail]\n\t"
		"bic x11, x11, #1\n\t"
		"add x9, x11, x9, lsl #%c[shift]\n\t"
		"add x9, x9, %[disp]\n\t"
		"ldr x10, [x9]\n\t"
		"add x10, x10, #1\n\t"
		"stlr x10, [x9]\n\t"                /* commit */
		"2:\n\t"
		"b 5f\n\t"
		".inst %c[sig]\n\t"
		"4:\n\t"                             /* abort_ip: the kernel cleared rseq_cs */
		"b 0b\n\t"
		"5:\n\t"
		:
		: [area] "r"(area), [gate] "r"(gate), [disp] "rI"(disp),
		  [shift] "i"(KL_ARCH_PAD_SHIFT), [sig] "i"(KL_ARCH_RSEQ_SIG),
		  [cs] "i"(KL_ARCH_RSEQ_CS_OFF), [cpu] "i"(KL_ARCH_RSEQ_CPU_ID_OFF)
		: "x9", "x10", "x11", "memory", "cc"
		: bail);
	return true;
bail:
	return false;
}

#endif /* KL_ARCH_RSEQ_H */
