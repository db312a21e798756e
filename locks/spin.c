/* SPDX-License-Identifier: BSD-2-Clause */
/* locks/spin.c - the machine-dependent part of spin.h: the backoff cap, the crowding
 * threshold. */
#include <sched.h>

#include "spin.h"
#include "topology_impl.h"

/* The smallest crowding threshold: a holder and the one waiter next in line. */
#define KLI_CROWD_MIN 2u

uint32_t kli_backoff_cap = KLI_BACKOFF_PER_CPU;
uint32_t kli_crowd_max = UINT32_MAX;

/* CPUs in this process's affinity mask (the possible CPUs if it cannot be read). */
static unsigned allowed_cpus(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return kli_possible_cpus();
	n = CPU_COUNT(&set);
	return n > 0 ? (unsigned)n : kli_possible_cpus();
}

void kli_spin_init(void)
{
	unsigned n = kli_possible_cpus(), p2 = 1;
	uint64_t cap;

	while (p2 < n)
		p2 <<= 1;
	cap = (uint64_t)p2 * KLI_BACKOFF_PER_CPU;
	kli_backoff_cap = cap > KLI_BACKOFF_CAP_MAX ? KLI_BACKOFF_CAP_MAX : (uint32_t)cap;
	n = allowed_cpus();
	kli_crowd_max = n > KLI_CROWD_MIN ? n : KLI_CROWD_MIN;
}
