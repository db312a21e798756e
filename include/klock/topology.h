/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/topology.h - the machine as klock sizes itself for it, and the current-CPU index.
 *
 * The topology is read once, at first use (thread-safe), from hwloc; if hwloc cannot load
 * a topology, from sysconf() with a one-line warning on stderr. Per-CPU arrays in klock are
 * sized by `possible_cpus`, so every CPU index below is < possible_cpus.
 */
#ifndef KLOCK_TOPOLOGY_H
#define KLOCK_TOPOLOGY_H

#include <klock/compiler.h>

KL_BEGIN_DECLS

struct kl_topology {
	unsigned possible_cpus;  /* highest possible CPU number + 1: size of per-CPU arrays */
	unsigned online_cpus;    /* CPUs the OS runs threads on now */
	unsigned allowed_cpus;   /* CPUs in this process's affinity mask at first use */
	unsigned cores;          /* physical cores */
	unsigned packages;       /* sockets */
	unsigned numa_nodes;     /* NUMA nodes (1 on non-NUMA machines) */
	unsigned cache_line;     /* L1 data cache line size in bytes */
	const char *source;      /* "hwloc" or "sysconf" */
};

/* The machine's topology; never NULL, never changes after the first call. Thread-safe. */
KL_API const struct kl_topology *kl_topology(void);

/*
 * Where the calling thread runs now, as a hint for per-CPU data (it may have moved by the
 * time the caller uses it; klock's per-CPU locks only rely on sums, never on the hint).
 *
 * kl_cpu_current(): the CPU number, < possible_cpus. From glibc's registered rseq area
 *     (one TLS load) when available, else sched_getcpu(), else a per-thread hash.
 * kl_cpu_slot(): an index < possible_cpus for per-CPU slot arrays. The rseq mm_cid
 *     (Linux 6.3+: dense ids, unique among this process's running threads) when the
 *     kernel provides it, else the CPU number.
 *
 * KLOCK_NO_RSEQ=1 in the environment (read at library load) forces the fallbacks.
 */
KL_API unsigned kl_cpu_current(void);
KL_API unsigned kl_cpu_slot(void);

/* Which source kl_cpu_current() uses: "rseq", "rseq+mm_cid", "getcpu" or "thread-hash". */
KL_API const char *kl_cpu_source(void);

KL_END_DECLS

#endif /* KLOCK_TOPOLOGY_H */
