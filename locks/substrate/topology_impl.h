/* SPDX-License-Identifier: BSD-2-Clause */
/* locks/substrate/topology_impl.h - the topology's internal side. */
#ifndef KL_TOPOLOGY_IMPL_H
#define KL_TOPOLOGY_IMPL_H

/* Highest possible CPU number + 1, from /sys/devices/system/cpu/possible or sysconf().
 * Cheap (no hwloc), cached; kl_topology()->possible_cpus is never smaller. */
unsigned kli_possible_cpus(void);

/* CPUs in this process's affinity mask now (sched_getaffinity), or 0 if unreadable.
 * Cheap (no hwloc), not cached. */
unsigned kli_allowed_cpus(void);

#endif /* KL_TOPOLOGY_IMPL_H */
