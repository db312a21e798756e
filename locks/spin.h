/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/spin.h - time-budgeted spinning, the one spin loop every lock builds on.
 *
 * Budgets are in nanoseconds, checked against kl_arch_cycles() (one instruction on
 * x86_64/aarch64), because a relax hint costs 10 cycles on one core and 140 on the next.
 * Two ways to spend a budget:
 *   kli_spin_poll(&s)     one relax hint per check - for a waiter spinning on a line only
 *                         it and the releaser touch (MCS node, OSQ node, own flag)
 *   kli_spin_backoff(&s)  capped exponential backoff (FreeBSD lock_delay: 1, 2, 4 ... up to
 *                         min(pow2(ncpu) * 256, 32768) relax hints) - for everyone polling
 *                         one shared word, so the line is not hammered
 * Both return false once the budget is spent; the caller then yields (spinlocks: the
 * holder may be preempted on our CPU - the oversubscription rule) or sleeps (mutexes).
 */
#ifndef KL_SPIN_H
#define KL_SPIN_H

#include <sched.h>

#include "kl_internal.h"

/* FreeBSD lock_delay's cap: relax hints per backoff step, upper bound. */
#define KLI_BACKOFF_CAP_MAX 32768u
/* ... and its per-CPU scale (the cap grows with the machine). */
#define KLI_BACKOFF_PER_CPU 256u

/* Backoff cap for this machine, fixed at init (see kli_spin_init()). */
extern uint32_t kli_backoff_cap;
void kli_spin_init(void);

struct kli_spin {
	uint64_t deadline;   /* kl_arch_cycles() value at which the budget is spent */
	uint32_t delay;      /* relax hints in the next backoff step */
};

static inline void kli_spin_start(struct kli_spin *s, uint64_t budget_ns)
{
	s->deadline = kl_arch_cycles() + kli_ns_to_cycles(budget_ns);
	s->delay = 1;
}

static inline bool kli_spin_expired(const struct kli_spin *s)
{
	return kl_arch_cycles() >= s->deadline;
}

/* One relax hint; false once the budget is spent. */
static inline bool kli_spin_poll(struct kli_spin *s)
{
	kl_arch_relax();
	return !kli_spin_expired(s);
}

/* One backoff step (doubling, capped); false once the budget is spent. */
static inline bool kli_spin_backoff(struct kli_spin *s)
{
	for (uint32_t i = 0; i < s->delay; i++)
		kl_arch_relax();
	if (s->delay < kli_backoff_cap)
		s->delay <<= 1;
	return !kli_spin_expired(s);
}

/* Give the CPU away (to a preempted lock holder, typically). */
static inline void kli_yield(void)
{
	sched_yield();
}

#endif /* KL_SPIN_H */
