/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/events.c - the process's lock event counters (locks/substrate/events.h) and their public
 * reader, kl_lock_events().
 */
#include <string.h>
#include <klock/lockstat.h>
#include "events.h"

struct kli_ev_shard kli_ev_shards[KLI_EV_SHARDS];

uint64_t kli_ev_sum(enum kli_ev ev)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < KLI_EV_SHARDS; i++)
		sum += atomic_load_explicit(&kli_ev_shards[i].n[ev], memory_order_relaxed);
	return sum;
}

void kl_lock_events(struct kl_lock_events *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->contended = kli_ev_sum(KLI_EV_CONTENDED);
	ev->fences = kli_ev_sum(KLI_EV_FENCE);
	ev->sleeps = kli_ev_sum(KLI_EV_SLEEP);
	ev->wakeups = kli_ev_sum(KLI_EV_WAKE);
	ev->handovers_asleep = kli_ev_sum(KLI_EV_HANDOVER_ASLEEP);
}
