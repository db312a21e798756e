/* SPDX-License-Identifier: BSD-2-Clause */
/* locks/spin.c - the machine-dependent part of spin.h: the backoff cap. */
#include "spin.h"
#include "topology_impl.h"

uint32_t kli_backoff_cap = KLI_BACKOFF_PER_CPU;

void kli_spin_init(void)
{
	unsigned n = kli_possible_cpus(), p2 = 1;
	uint64_t cap;

	while (p2 < n)
		p2 <<= 1;
	cap = (uint64_t)p2 * KLI_BACKOFF_PER_CPU;
	kli_backoff_cap = cap > KLI_BACKOFF_CAP_MAX ? KLI_BACKOFF_CAP_MAX : (uint32_t)cap;
}
