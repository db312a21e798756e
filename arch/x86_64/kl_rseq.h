/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * arch/x86_64/kl_rseq.h - the rseq per-CPU increment for x86_64.
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
 * kl_arch_rseq_inc - Linux's "preempt_disable(); if (flag) this_cpu_inc(x);" in one
 * rseq critical section:
 *     w = *gate;                        (inside the section)
 *     if (!(w & 1)) return false;
 *     *(uint64_t *)((w & ~1) + (cpu << KL_ARCH_PAD_SHIFT) + disp) += 1;   (commit)
 * cpu is the rseq area's cpu_id (glibc's area, at thread pointer + @rseq_off =
 * __rseq_offset). If the thread is preempted, migrated or signalled, or a
 * membarrier(PRIVATE_EXPEDITED_RSEQ) hits it, anywhere between its read of *gate and the
 * commit, the kernel moves it to the abort handler, which restarts the whole sequence:
 * so (1) among threads that update slot `cpu` this way updates never interleave, though
 * the ADD has no LOCK prefix, and (2) a writer that clears bit 0 of *gate and then runs
 * membarrier(PRIVATE_EXPEDITED_RSEQ) knows every later commit saw the cleared bit - the
 * rseq section is the read side of that grace period.
 * Returns false, touching no counter, when bit 0 of *gate is clear, when @rseq_off is 0
 * (not configured yet: nothing is written at all) or when cpu_id is negative (this
 * thread's area is not registered: -1 uninitialised, -2 failed).
 * The kernel keeps cpu_id < nr_cpu_ids (the possible-CPU count): size arrays so. @disp
 * is an immediate after inlining (a register at -O0).
 * Per call only three values come from memory (rseq_off, *gate, cpu_id) and none after
 * the commit: on the machines measured, every extra load queued behind this store's
 * address cost 1-2 ns.
 * Ordering: the *gate load is a plain load (acquire by TSO), the commit a plain store
 * (release by TSO); "memory" clobber.
 * The descriptor lives in section __rseq_cs (32-byte aligned, version 0, flags 0); the
 * 4 bytes before the abort label are RSEQ_SIG, the signature glibc registers (an ud1
 * encoding so the bytes disassemble as an instruction). The store of the descriptor's
 * address is immediately followed by start_ip, so no interruption falls between them.
 */
#define KL_ARCH_HAVE_RSEQ 1
#define KL_ARCH_RSEQ_SIG 0x53053053
/* log2 of the slot stride (KL_ARCH_PAD) of the per-CPU arrays kl_arch_rseq_inc() indexes. */
#define KL_ARCH_PAD_SHIFT 7
/* struct rseq: offsets of rseq_cs and cpu_id. */
#define KL_ARCH_RSEQ_CS_OFF 8
#define KL_ARCH_RSEQ_CPU_ID_OFF 4

/* The frame every section here shares, around its body (operands [off], [cs], [sig] and
 * the asm-goto label bail; clobbers rax): the descriptor (label 3: start 1, length to 2,
 * abort 4), the bail-out when @rseq_off is 0, the store of the descriptor's address
 * (label 0, where an abort restarts) and, after the body's commit, the abort handler with
 * its signature. The body runs from label 1 and ends with its commit. */
#define KL_ARCH_RSEQ_ENTER                                                                 \
	".pushsection __rseq_cs, \"aw\"\n\t"                                                 \
	".balign 32\n\t"                                                                    \
	"3:\n\t"                                                                            \
	".long 0x0, 0x0\n\t"                                                                \
	".quad 1f, (2f - 1f), 4f\n\t"                                                       \
	".popsection\n\t"                                                                   \
	"testq %[off], %[off]\n\t"                                                          \
	"jz %l[bail]\n\t"                                                                   \
	"0:\n\t"                                                                            \
	"leaq 3b(%%rip), %%rax\n\t"                                                         \
	"movq %%rax, %%fs:%c[cs](%[off])\n\t" /* rseq->rseq_cs = &descriptor */             \
	"1:\n\t"                              /* start_ip: right after the store */
#define KL_ARCH_RSEQ_LEAVE                                                                 \
	"2:\n\t"                                                                            \
	".pushsection __rseq_failure, \"ax\"\n\t"                                           \
	".byte 0x0f, 0xb9, 0x3d\n\t"                                                        \
	".long %c[sig]\n\t"                                                                 \
	"4:\n\t"                              /* abort_ip: the kernel cleared rseq_cs */    \
	"jmp 0b\n\t"                                                                        \
	".popsection\n\t"

static inline bool kl_arch_rseq_inc(long rseq_off, const void *gate, long disp)
{
	__asm__ __volatile__ goto(
		KL_ARCH_RSEQ_ENTER
		"movq (%[gate]), %%rdx\n\t"
		"testb $1, %%dl\n\t"
		"jz %l[bail]\n\t"
		"movslq %%fs:%c[cpu](%[off]), %%rax\n\t"
		"testq %%rax, %%rax\n\t"
		"js %l[bail]\n\t"
		"shlq $%c[shift], %%rax\n\t"
		"addq %[disp], %%rax\n\t"
		"addq $1, -1(%%rdx, %%rax)\n\t"     /* commit (the -1 clears bit 0 of w) */
		KL_ARCH_RSEQ_LEAVE
		:
		: [off] "r"(rseq_off), [gate] "r"(gate), [disp] "er"(disp),
		  [shift] "i"(KL_ARCH_PAD_SHIFT), [sig] "i"(KL_ARCH_RSEQ_SIG),
		  [cs] "i"(KL_ARCH_RSEQ_CS_OFF), [cpu] "i"(KL_ARCH_RSEQ_CPU_ID_OFF)
		: "rax", "rdx", "memory", "cc"
		: bail);
	return true;
bail:
	return false;
}

/*
 * kl_arch_rseq_store_in - "if (*cond - lo <= span) *word = val;" as one rseq critical
 * section: a conditional store with no LOCK prefix, and no wait for the store buffer to
 * drain. @cond and @word may be one word or two (kl_mcs reads a flag in another cache
 * line than the word it stores, so the store is the only access to the waiter's spinning
 * line). Returns false, storing nothing, when *cond is outside [lo, lo + span], when
 * @rseq_off is 0 or when this thread's rseq area is not registered (cpu_id < 0): an
 * unregistered thread's section would not be aborted, so it must not run one.
 * A thread that changes *cond to a value outside the range and then runs
 * membarrier(PRIVATE_EXPEDITED_RSEQ) knows that every section which read the old value
 * has either committed (its store is visible once the membarrier returns) or been
 * restarted (and then reads the new value): that pair is what makes a plain store safe
 * against a concurrent change (kl_mcs's grant against a waiter going to sleep). The
 * commit is a plain MOV (a release store by TSO); "memory" clobber. Same descriptor and
 * abort layout as kl_arch_rseq_inc().
 */
#define KL_ARCH_HAVE_RSEQ_STORE 1

static inline bool kl_arch_rseq_store_in(long rseq_off, const uint32_t *cond, uint32_t lo,
					 uint32_t span, uint32_t *word, uint32_t val)
{
	__asm__ __volatile__ goto(
		KL_ARCH_RSEQ_ENTER
		"movl %%fs:%c[cpu](%[off]), %%eax\n\t"
		"testl %%eax, %%eax\n\t"
		"js %l[bail]\n\t"
		"movl (%[cond]), %%eax\n\t"
		"subl %[lo], %%eax\n\t"
		"cmpl %[span], %%eax\n\t"
		"ja %l[bail]\n\t"
		"movl %[val], (%[word])\n\t"         /* commit */
		KL_ARCH_RSEQ_LEAVE
		:
		: [off] "r"(rseq_off), [cond] "r"(cond), [word] "r"(word), [lo] "ri"(lo),
		  [span] "ri"(span),
		  [val] "ri"(val), [sig] "i"(KL_ARCH_RSEQ_SIG), [cs] "i"(KL_ARCH_RSEQ_CS_OFF),
		  [cpu] "i"(KL_ARCH_RSEQ_CPU_ID_OFF)
		: "rax", "memory", "cc"
		: bail);
	return true;
bail:
	return false;
}

#endif /* KL_ARCH_RSEQ_H */
