/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/topology.c - kl_topology(): hwloc at first use, sysconf() if hwloc fails.
 *
 * Loading an hwloc topology reads sysfs and takes milliseconds, so it happens on the
 * first kl_topology() call (pthread_once), not at library load. What start-up needs
 * (the possible-CPU bound for CPU indices) comes from kli_possible_cpus(), which reads
 * one sysfs file. possible_cpus is the larger of the two sources, so an index the kernel
 * hands out (cpu_id, mm_cid, getcpu) always fits a per-CPU array sized by it.
 * KLOCK_NO_HWLOC=1 takes the sysconf() path (tests use it to exercise the fallback).
 */
#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <klock/topology.h>
#include "kl_internal.h"
#include "topology_impl.h"

/* Where Linux lists the possible CPUs, as a range list ("0-3,8-11"). */
#define POSSIBLE_PATH "/sys/devices/system/cpu/possible"

static struct kl_topology topo;
static pthread_once_t topo_once = PTHREAD_ONCE_INIT;
static _Atomic unsigned possible_cache;

/* Largest number in a Linux cpulist + 1, or 0 if unreadable. */
static unsigned read_cpulist_max(const char *path)
{
	FILE *f = fopen(path, "re");
	unsigned max = 0, v;
	int c = 0;

	if (f == NULL)
		return 0;
	while (c != EOF) {
		if (fscanf(f, "%u", &v) == 1 && v + 1 > max)
			max = v + 1;
		c = fgetc(f); /* ',' '-' '\n' or EOF */
	}
	fclose(f);
	return max;
}

unsigned kli_possible_cpus(void)
{
	unsigned n = atomic_load_explicit(&possible_cache, memory_order_relaxed);
	long conf;

	if (kl_likely(n != 0))
		return n;
	n = read_cpulist_max(POSSIBLE_PATH);
	conf = sysconf(_SC_NPROCESSORS_CONF);
	if (conf > 0 && (unsigned)conf > n)
		n = (unsigned)conf;
	if (n == 0)
		n = 1;
	atomic_store_explicit(&possible_cache, n, memory_order_relaxed);
	return n;
}

unsigned kli_allowed_cpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	return (unsigned)CPU_COUNT(&set);
}

static unsigned count_type(hwloc_topology_t t, hwloc_obj_type_t type)
{
	int n = hwloc_get_nbobjs_by_type(t, type);

	return n > 0 ? (unsigned)n : 1;
}

static unsigned hwloc_line_size(hwloc_topology_t t)
{
	hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_L1CACHE, 0);

	if (o != NULL && o->attr != NULL && o->attr->cache.linesize > 0)
		return o->attr->cache.linesize;
	return KL_ARCH_CACHE_LINE;
}

static bool load_hwloc(void)
{
	hwloc_topology_t t;
	int last;

	if (kli_env_flag("KLOCK_NO_HWLOC") || hwloc_topology_init(&t) != 0)
		return false;
	if (hwloc_topology_load(t) != 0) {
		hwloc_topology_destroy(t);
		return false;
	}
	last = hwloc_bitmap_last(hwloc_topology_get_complete_cpuset(t));
	topo.possible_cpus = last >= 0 ? (unsigned)last + 1 : 1;
	topo.online_cpus = count_type(t, HWLOC_OBJ_PU);
	topo.cores = count_type(t, HWLOC_OBJ_CORE);
	topo.packages = count_type(t, HWLOC_OBJ_PACKAGE);
	topo.numa_nodes = count_type(t, HWLOC_OBJ_NUMANODE);
	topo.cache_line = hwloc_line_size(t);
	topo.source = "hwloc";
	hwloc_topology_destroy(t);
	return true;
}

static void load_sysconf(void)
{
	long on = sysconf(_SC_NPROCESSORS_ONLN);
	long line = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);

	topo.online_cpus = on > 0 ? (unsigned)on : 1;
	topo.cores = topo.online_cpus;
	topo.packages = 1;
	topo.numa_nodes = 1;
	topo.cache_line = line > 0 ? (unsigned)line : KL_ARCH_CACHE_LINE;
	topo.source = "sysconf";
}

static void topo_load(void)
{
	if (!load_hwloc()) {
		fprintf(stderr, "klock: %s; topology from sysconf (one package, no SMT)\n",
			kli_env_flag("KLOCK_NO_HWLOC") ? "hwloc disabled by KLOCK_NO_HWLOC"
						       : "hwloc could not load a topology");
		load_sysconf();
	}
	if (topo.possible_cpus < kli_possible_cpus())
		topo.possible_cpus = kli_possible_cpus();
	topo.allowed_cpus = kli_allowed_cpus();
	if (topo.allowed_cpus == 0)
		topo.allowed_cpus = topo.online_cpus;
}

const struct kl_topology *kl_topology(void)
{
	pthread_once(&topo_once, topo_load);
	return &topo;
}
