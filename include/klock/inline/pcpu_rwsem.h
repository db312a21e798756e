/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/inline/pcpu_rwsem.h - the machinery behind <klock/pcpu_rwsem.h>: private constants
 * and the fast paths that header inlines when the build allows it (KL_INLINE_FAST_PATHS_
 * in <klock/compiler.h>, and no KLOCK_NO_INLINE). Included by <klock/pcpu_rwsem.h> only;
 * nothing here is API: the contract (struct, initializer, every exported function) is
 * there.
 */
#ifndef KLOCK_INLINE_PCPU_RWSEM_H
#define KLOCK_INLINE_PCPU_RWSEM_H

#ifndef KLOCK_PCPU_RWSEM_H
#error "include <klock/pcpu_rwsem.h>, not <klock/inline/pcpu_rwsem.h>"
#endif

/*
 * ---- inline read fast path -----------------------------------------------------------
 * A call and return cost about as much as an uncontended RCU read section on the
 * machines measured, so the fast path is inline (C builds without instruments, as
 * klock/rmlock.h): one rseq section that loads sem->gp, checks KL_PCPU_FAST and bumps
 * this CPU's lock (or unlock) counter. The writer's partner is G, its membarrier
 * (PRIVATE_EXPEDITED_RSEQ) after clearing KL_PCPU_FAST: a section in flight restarts and
 * sees the bit clear, a finished one is visible. If the bit is clear (a writer is about,
 * no counters yet, no rseq) nothing was counted and the library takes over.
 */
#if KL_ARCH_HAVE_RSEQ && defined(KL_INLINE_FAST_PATHS_) && !defined(KLOCK_NO_INLINE)
#define KL_PCPU_RWSEM_INLINE 1

static inline void kl_pcpu_rwsem_read_lock_inline(struct kl_pcpu_rwsem *sem)
{
	if (!__builtin_expect(kl_arch_rseq_inc(kl_pcpu_rseq_off, &sem->gp, 0), 1))
		(kl_pcpu_rwsem_read_lock)(sem);
}

static inline void kl_pcpu_rwsem_read_unlock_inline(struct kl_pcpu_rwsem *sem)
{
	if (!__builtin_expect(kl_arch_rseq_inc(kl_pcpu_rseq_off, &sem->gp,
					       KL_PCPU_UNLOCK_OFF), 1))
		(kl_pcpu_rwsem_read_unlock)(sem);
}

#define kl_pcpu_rwsem_read_lock(sem) kl_pcpu_rwsem_read_lock_inline(sem)
#define kl_pcpu_rwsem_read_unlock(sem) kl_pcpu_rwsem_read_unlock_inline(sem)
#else
#define KL_PCPU_RWSEM_INLINE 0
#endif

#endif /* KLOCK_INLINE_PCPU_RWSEM_H */
