/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/fence.c - membarrier probe/registration and the heavy fence.
 *
 * At library load (single-threaded, microseconds) we QUERY membarrier and, if
 * PRIVATE_EXPEDITED is offered, REGISTER for it; only then does the light fence become a
 * compiler barrier. Any failure (ENOSYS on old or non-Linux kernels, EPERM from a seccomp
 * filter, KLOCK_NO_MEMBARRIER=1) leaves both halves as full fences. The mode never changes
 * afterwards: a reader that ran with a compiler barrier must be able to count on every
 * later heavy fence. If the syscall fails AFTER registration (a seccomp filter installed
 * later), readers can no longer be ordered, so we report it and abort rather than corrupt.
 *
 * The rseq flavour (PRIVATE_EXPEDITED_RSEQ) is registered alongside when the kernel has it:
 * kli_fence_heavy_rseq() is then the userspace synchronize_rcu() for readers whose "read
 * section" is an rseq critical section (kl_pcpu_rwsem's fast path): each one in flight is
 * restarted, each finished one is visible. Same cost as PRIVATE_EXPEDITED.
 *
 * Why PRIVATE_EXPEDITED: it IPIs only the CPUs currently running this process's threads
 * (sleeping threads passed a full barrier in the context switch) and never blocks: ~0.1 us
 * with nothing else running, ~2 us per IPI'd CPU in a VM. GLOBAL is an RCU grace period.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <klock/fence.h>
#include "fence_impl.h"
#include "events.h"

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>

static long sys_membarrier(int cmd)
{
	return syscall(SYS_membarrier, cmd, 0, 0);
}

static bool membarrier_register(void)
{
	long mask;

	if (kli_env_flag("KLOCK_NO_MEMBARRIER"))
		return false;
	mask = sys_membarrier(MEMBARRIER_CMD_QUERY);
	if (mask < 0 || !(mask & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
		return false;
	return sys_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

static bool membarrier_run(void)
{
	return sys_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

/* The rseq flavour (Linux 5.10): also restarts every rseq critical section that a thread
 * of this process is running. Registered at load too (microseconds while single-threaded,
 * an RCU grace period later). */
/* The uapi header declares these as enum constants (not macros), so old headers cannot be
 * detected with #ifdef: the values are kernel ABI (Linux 5.10). */
#define MB_PRIVATE_EXPEDITED_RSEQ (1 << 7)
#define MB_REGISTER_PRIVATE_EXPEDITED_RSEQ (1 << 8)

static bool membarrier_rseq_register(void)
{
	long mask = sys_membarrier(MEMBARRIER_CMD_QUERY);

	if (mask < 0 || !(mask & MB_PRIVATE_EXPEDITED_RSEQ))
		return false;
	return sys_membarrier(MB_REGISTER_PRIVATE_EXPEDITED_RSEQ) == 0;
}

static bool membarrier_rseq_run(void)
{
	return sys_membarrier(MB_PRIVATE_EXPEDITED_RSEQ) == 0;
}
#else
static bool membarrier_register(void)
{
	return false;
}

static bool membarrier_run(void)
{
	return false;
}

static bool membarrier_rseq_register(void)
{
	return false;
}

static bool membarrier_rseq_run(void)
{
	return false;
}
#endif

bool kli_fence_asym;
bool kli_fence_rseq;
/* The mode again under its public name, for the headers' inline unlocks (klock/fence.h).
 * Not an alias of kli_fence_asym: a program that reads it gets its own copy (a copy
 * relocation), which only a store through this exported name reaches. */
bool kl_fence_asym_;

void kli_fence_init(void)
{
	kli_fence_asym = membarrier_register();
	kli_fence_rseq = kli_fence_asym && membarrier_rseq_register();
	kl_fence_asym_ = kli_fence_asym;
}

static KL_NOINLINE KL_COLD void membarrier_lost(void)
{
	fputs("klock: membarrier(PRIVATE_EXPEDITED) failed after registration (a seccomp "
	      "filter installed after klock loaded?); readers cannot be ordered, aborting\n",
	      stderr);
	abort();
}

void kli_fence_heavy(void)
{
	if (kli_fence_asym) {
		kli_ev_count(KLI_EV_FENCE);
		if (kl_unlikely(!membarrier_run()))
			membarrier_lost();
	} else {
		atomic_thread_fence(memory_order_seq_cst);
	}
}

void kli_fence_heavy_rseq(void)
{
	kli_ev_count(KLI_EV_FENCE);
	if (kl_unlikely(!membarrier_rseq_run()))
		membarrier_lost();
}

void kl_fence_light(void)
{
	kli_fence_light();
}

void kl_fence_heavy(void)
{
	kli_init();
	kli_fence_heavy();
}

bool kl_fence_asymmetric(void)
{
	kli_init();
	return kli_fence_asym;
}
