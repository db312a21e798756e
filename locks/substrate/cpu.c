/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/cpu.c - picks the CPU-index source once (see cpu.h) and implements the fallbacks.
 *
 * glibc >= 2.35 registers an rseq area for every thread and exports __rseq_offset and
 * __rseq_size; they are referenced weakly so the library also loads on older or other C
 * libraries. Registration may fail (old kernel, qemu-user, glibc.pthread.rseq=0): then
 * cpu_id reads as -1/-2 and __rseq_size is 0, and we fall back to sched_getcpu().
 */
#include <sched.h>
#include <stdio.h>
#include <sys/auxv.h>

#include <klock/topology.h>
#include "cpu.h"
#include "topology_impl.h"
#include "thread.h"

#ifndef AT_RSEQ_FEATURE_SIZE
#define AT_RSEQ_FEATURE_SIZE 27
#endif
/* End of the mm_cid field: the kernel fills it when its feature size reaches this. */
#define RSEQ_FEATURE_MM_CID 28

extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

enum kli_cpu_mode kli_cpu_mode = KLI_CPU_THREAD_HASH;
ptrdiff_t kli_rseq_off;
unsigned kli_cpu_limit = 1;

static const char *const mode_names[] = {
	[KLI_CPU_THREAD_HASH] = "thread-hash",
	[KLI_CPU_GETCPU] = "getcpu",
	[KLI_CPU_RSEQ] = "rseq",
	[KLI_CPU_RSEQ_MMCID] = "rseq+mm_cid",
};

static enum kli_cpu_mode probe_rseq(void)
{
	int32_t cpu;

	if (!KL_ARCH_HAVE_TP || &__rseq_size == NULL || &__rseq_offset == NULL ||
	    __rseq_size == 0 || kli_env_flag("KLOCK_NO_RSEQ"))
		return KLI_CPU_THREAD_HASH;
	kli_rseq_off = __rseq_offset;
	cpu = (int32_t)kli_rseq_field(KLI_RSEQ_CPU_ID_OFF);
	if (cpu < 0 || (unsigned)cpu >= kli_cpu_limit)
		return KLI_CPU_THREAD_HASH;
	if (getauxval(AT_RSEQ_FEATURE_SIZE) >= RSEQ_FEATURE_MM_CID &&
	    kli_rseq_field(KLI_RSEQ_MM_CID_OFF) < kli_cpu_limit)
		return KLI_CPU_RSEQ_MMCID;
	return KLI_CPU_RSEQ;
}

void kli_cpu_init(void)
{
	enum kli_cpu_mode m;

	kli_cpu_limit = kli_possible_cpus();
	m = probe_rseq();
	if (m == KLI_CPU_THREAD_HASH) {
		int c = sched_getcpu();

		if (c >= 0 && (unsigned)c < kli_cpu_limit)
			m = KLI_CPU_GETCPU;
	}
	kli_cpu_mode = m;
}

unsigned kli_cpu_fallback(void)
{
	if (kli_cpu_mode == KLI_CPU_GETCPU) {
		int c = sched_getcpu();

		if (kl_likely(c >= 0 && (unsigned)c < kli_cpu_limit))
			return (unsigned)c;
	}
	return kli_self()->index % kli_cpu_limit;
}

unsigned kl_cpu_current(void)
{
	kli_init();
	return kli_cpu_current();
}

unsigned kl_cpu_slot(void)
{
	kli_init();
	return kli_cpu_slot();
}

const char *kl_cpu_source(void)
{
	kli_init();
	return mode_names[kli_cpu_mode];
}
