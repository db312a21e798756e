/* SPDX-License-Identifier: BSD-2-Clause */
/* locks/substrate/spin.c - the machine-dependent part of spin.h: the backoff cap, the crowding
 * threshold. */
#include "spin.h"
#include "topology_impl.h"

/* The smallest crowding threshold: a holder and the one waiter next in line. */
#define KLI_CROWD_MIN 2u

uint32_t kli_backoff_cap = KLI_BACKOFF_PER_CPU;
uint32_t kli_crowd_max = UINT32_MAX;

void kli_spin_init(void)
{
	unsigned n = kli_possible_cpus(), p2 = 1;
	uint64_t cap;

	while (p2 < n)
		p2 <<= 1;
	cap = (uint64_t)p2 * KLI_BACKOFF_PER_CPU;
	kli_backoff_cap = cap > KLI_BACKOFF_CAP_MAX ? KLI_BACKOFF_CAP_MAX : (uint32_t)cap;
	n = kli_allowed_cpus();
	if (n == 0) /* affinity unreadable */
		n = kli_possible_cpus();
	kli_crowd_max = n > KLI_CROWD_MIN ? n : KLI_CROWD_MIN;
}
