/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/events.h - the process's lock event counters: the events whose cost grows with
 * the number of CPUs (heavy fences: a membarrier interrupts every CPU that runs one of
 * our threads), the sleeps and wake-ups (system calls), and hand-overs that had to wait
 * for a wake-up. Always counted, on slow paths only: a 2-CPU machine cannot show what
 * these cost on 256, but it can count them (kl_lock_events(), klbench's per-operation
 * columns, lockstat's rows).
 *
 * Storage: KLI_EV_SHARDS padded shards, picked by the CPU the counting thread runs on
 * (a hint: a migration only makes two threads share a shard for a moment). Each event is
 * one relaxed add to a line that threads on other CPUs rarely touch, so counting never
 * adds a shared line to a contended path; a reader sums the shards (a racy sum, exact
 * once the counted threads are quiet).
 */
#ifndef KL_EVENTS_H
#define KL_EVENTS_H

#include "kl_internal.h"
#include "cpu.h"

enum kli_ev {
	KLI_EV_CONTENDED,   /* acquisitions that took a lock's slow path */
	KLI_EV_FENCE,       /* heavy fences issued (membarrier system calls) */
	KLI_EV_SLEEP,       /* sleeps that blocked in the kernel (futex or parking lot) */
	KLI_EV_WAKE,        /* wake-up calls issued (futex wakes, unparks) */
	KLI_EV_HANDOVER_ASLEEP, /* FIFO hand-overs whose receiver was still asleep */
	KLI_EV_COUNT
};

/* Shards of the counters: a power of two; CPUs beyond it share (a contended path still
 * touches one line of its own for each event it counts). */
#define KLI_EV_SHARDS 64u

struct kli_ev_shard {
	_Atomic uint64_t n[KLI_EV_COUNT];
} KL_PADDED;

extern struct kli_ev_shard kli_ev_shards[KLI_EV_SHARDS];

/* Counts one @ev for the calling thread's CPU. Slow paths only. */
static inline void kli_ev_count(enum kli_ev ev)
{
	struct kli_ev_shard *s = &kli_ev_shards[kli_cpu_current() & (KLI_EV_SHARDS - 1u)];

	atomic_fetch_add_explicit(&s->n[ev], 1, memory_order_relaxed);
}

/* The sum of @ev over all shards (racy while threads count). */
uint64_t kli_ev_sum(enum kli_ev ev);

#endif /* KL_EVENTS_H */
