/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/spin.h - time-budgeted spinning, the one spin loop every lock builds on.
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
/* Crowding threshold of the FIFO spinlocks (ticket, MCS): holder + waiters at which a
 * newcomer waits passive instead of queueing. The CPUs this process may run on (at least
 * 2): with that many queued, a newcomer proves there are more threads than CPUs, and a
 * FIFO queue longer than that hands the lock to a thread that is not running. Fixed at
 * init; "never" (UINT32_MAX) until then. */
extern uint32_t kli_crowd_max;
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

/* Relax hints for @ns, touching nothing shared (a spinner's pause between two looks). */
static inline void kli_spin_for(uint64_t ns)
{
	struct kli_spin s;

	kli_spin_start(&s, ns);
	while (kli_spin_poll(&s))
		;
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

/*
 * Paced polling, for a spinner that waits on a word another thread keeps taking (kl_mutex's
 * spin-queue head, kl_rwlock's spinning writer): the interval between two reads starts at
 * KLI_POLL_MIN_NS and doubles up to KLI_POLL_MAX_NS. Each read pulls the holder's cache
 * line away from it, so a spinner that polls at every relax hint slows the very thread it
 * waits for (pthread's waiter "polls" through futex calls ~1 us apart, which is why it
 * wins the tight duel against a naive spinner). Time-based, not a count of relax hints:
 * a pause costs 10-140 cycles depending on the CPU.
 */
#define KLI_POLL_MIN_NS 50u
#define KLI_POLL_MAX_NS 1000u
/* The interval's cap once the spinner has seen the holder (or anyone) take the lock back
 * between two of its looks (kli_pace_streak): the lock is not going idle, and each look
 * costs the holder its line. In the 2-thread duel (2 vCPUs) kl_mutex's head made 619 k
 * polls and 599 k confirm looks a second at the 1 us cap, and half of each at this one:
 * 38 -> 41 M ops/s. The price: the end of a streak (a real release) is seen up to this
 * late, once. Waits that never see a retake keep KLI_POLL_MAX_NS. */
#define KLI_STREAK_POLL_NS 4000u
/* A gap this long between two of the spinner's own clock reads is not its relaxing (a
 * relax hint is 10-140 cycles): an interrupt or the host had the CPU. It does not count
 * against the budget. In a KVM guest the timer tick costs 20-100 us and comes to every
 * CPU at about the same moment, so the holder most likely lost that time too. */
#define KLI_STOLEN_NS 2000u
/* A gap this long means the spinner lost its CPU to another thread: threads outnumber
 * CPUs, and spinning only takes time from the holder. Stop and sleep. Longer than the
 * tick and host stalls seen in guests (up to a few hundred us), shorter than the
 * scheduler's slice (0.75-3 ms), which is what a preempting thread runs for. */
#define KLI_PREEMPTED_NS 500000u

struct kli_pace {
	uint64_t interval;  /* cycles to relax after a look */
	uint64_t cap;
	uint64_t stolen;    /* a gap this long between two reads: time we did not spin */
	uint64_t preempted; /* a gap this long between two reads: we lost the CPU */
};

/* @watch: end the spin on a gap in our own clock (a spinner whose budget restarts on
 * progress needs it; one with a fixed budget is bounded by it anyway). */
static inline void kli_pace_start(struct kli_pace *p, bool watch)
{
	p->interval = kli_ns_to_cycles(KLI_POLL_MIN_NS);
	p->cap = kli_ns_to_cycles(KLI_POLL_MAX_NS);
	p->stolen = kli_ns_to_cycles(KLI_STOLEN_NS);
	p->preempted = watch ? kli_ns_to_cycles(KLI_PREEMPTED_NS) : UINT64_MAX;
}

/* One gap between two of the spinner's clock reads: time stolen by an interrupt or the
 * host moves the budget's deadline and the current wait's end (*@until) out by as much.
 * False when the gap is long enough to mean we lost the CPU to another thread. */
static inline bool kli_pace_gap(const struct kli_pace *p, struct kli_spin *s, uint64_t gap,
				uint64_t *until)
{
	if (kl_likely(gap <= p->stolen))
		return true;
	if (gap > p->preempted)
		return false;
	s->deadline += gap;
	*until += gap;
	return true;
}

/* The holder was seen retaking the lock between two looks: poll at most every
 * KLI_STREAK_POLL_NS from now on (kli_pace_start() restores the short cap). */
static inline void kli_pace_streak(struct kli_pace *p)
{
	p->cap = kli_ns_to_cycles(KLI_STREAK_POLL_NS);
}

/* After a look at the word: relaxes for the interval (counted from now, so a look that
 * missed the cache does not shorten the next wait), then doubles it (capped). False once
 * the budget @s is spent, or when we were descheduled while spinning. */
static inline bool kli_pace(struct kli_pace *p, struct kli_spin *s)
{
	uint64_t now = kl_arch_cycles(), before, until = now + p->interval;

	do {
		kl_arch_relax();
		before = now;
		now = kl_arch_cycles();
		if (!kli_pace_gap(p, s, now - before, &until))
			return false;
	} while (now < until && now < s->deadline);
	if (p->interval < p->cap)
		p->interval <<= 1;
	return now < s->deadline;
}

/* Give the CPU away (to a preempted lock holder, typically). */
static inline void kli_yield(void)
{
	sched_yield();
}

/*
 * Waiting for another thread to finish a few instructions (an MCS successor linking
 * itself in, a ticket holder): nothing to give up on, but that thread may have been
 * preempted, so after KLI_STALL_NS of polling give it our CPU and poll again.
 */
#define KLI_STALL_NS 20000u /* about one futex round trip: enough for a running thread */

static inline void kli_spin_stall(struct kli_spin *s)
{
	if (!kli_spin_poll(s)) {
		kli_yield();
		kli_spin_start(s, KLI_STALL_NS);
	}
}

/*
 * Adaptive budgets (kl_mutex, kl_rwlock). A lock keeps, in a 32-bit word, an EWMA of how
 * long its recent spins needed (ns; weight 1/8, the weight glibc's adaptive mutex uses).
 * The next spin gets twice that plus a floor, capped: spin about as long as recent waits
 * needed, never much longer than a sleep/wake round trip would cost (the 2-competitive
 * rule). A spin that succeeded after t ns feeds t; one that gave up feeds the budget it
 * spent (a censored sample: "needed at least that"), as glibc feeds its maximum. So short
 * waits pull the budget down to about twice their length, and waits longer than the budget
 * push it to the cap, never below what the waits need (a decaying rule - failures feed 0 -
 * locks itself into ever shorter budgets, more failures and a sleep per acquisition once a
 * few spins fail; measured in the two-thread duel). Updates are racy by design: a lost
 * update only delays adaptation. Only slow paths read or write it. kl_mutex and
 * kl_rwlock's writers stretch a budget that is under the cap to their stall budget
 * (kli_stall_budget(): short waits, a stalled holder).
 */
#define KLI_SPIN_MIN_NS 1000u    /* floor: shorter than the cheapest park+unpark here */
#define KLI_SPIN_MAX_NS 10000u   /* cap: ~2 futex wait/wake round trips (docs/architecture.md) */
#define KLI_SPIN_EWMA_SHIFT 3    /* newest sample weighs 1/8 */

static inline uint64_t kli_spin_budget(const _Atomic uint32_t *ewma)
{
	uint64_t b = 2 * (uint64_t)atomic_load_explicit(ewma, memory_order_relaxed) +
		     KLI_SPIN_MIN_NS;

	return b < KLI_SPIN_MAX_NS ? b : KLI_SPIN_MAX_NS;
}

/* The no-progress budget of a spin queue's head (kl_mutex, kl_rwlock's writers): @stall_ns
 * while the learnt budget is under the cap - the lock's waits are short, so no progress
 * means a stalled holder, worth riding out - else the cap. */
static inline uint64_t kli_stall_budget(const _Atomic uint32_t *ewma, uint64_t stall_ns)
{
	uint64_t b = kli_spin_budget(ewma);

	return b < KLI_SPIN_MAX_NS ? stall_ns : b;
}

/* Feeds one spin's outcome: the @spent_ns it took (whether it @acquired or gave up). */
static inline void kli_spin_learn(_Atomic uint32_t *ewma, bool acquired, uint64_t spent_ns)
{
	int64_t e = atomic_load_explicit(ewma, memory_order_relaxed);
	int64_t sample = (int64_t)(spent_ns < KLI_SPIN_MAX_NS ? spent_ns : KLI_SPIN_MAX_NS);

	(void)acquired; /* a failure's spent time is a lower bound: the same sample */
	e += (sample - e) / (1 << KLI_SPIN_EWMA_SHIFT);
	atomic_store_explicit(ewma, (uint32_t)e, memory_order_relaxed);
}

#endif /* KL_SPIN_H */
