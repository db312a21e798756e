/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/test_scale.c - what klock sizes from the CPU count matches this machine's count:
 * the topology's three counts against the OS, the hashed table's automatic size, the
 * FIFO spinlocks' crowding threshold, and the percpu-rwsem's per-CPU reader slots (a
 * reader pinned on each CPU in turn, whatever its id, is seen by a writer). On the 2-CPU
 * development box this is a small check; scripts/vm-test runs it with 16, 64 and 255
 * vCPUs, where CPU ids reach the top of the arrays.
 */
#include <sched.h>

#include <klock/hashlock.h>
#include <klock/pcpu_rwsem.h>
#include <klock/klock.h>
#include "kltest.h"
#include "spin.h"

/* Watchdog base for the per-CPU walk (plus a few heavy fences per CPU, measured). */
#define WATCHDOG_S 60
/* Heavy fences one step of the per-CPU walk may pay (two trylocks, the burst's end). */
#define FENCES_PER_CPU 4
/* The hashed table's automatic size per online CPU (locks/primitives/hashlock.c HL_AUTO_PER_CPU). */
#define HL_STRIPES_PER_CPU 8u
/* The crowding threshold's floor (locks/substrate/spin.c KLI_CROWD_MIN). */
#define CROWD_MIN 2u

static unsigned sysfs_possible(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
	char buf[256];
	unsigned last = 0;

	if (f == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) != NULL) {
		char *p = strrchr(buf, '-'), *q = strrchr(buf, ',');

		p = p != NULL && (q == NULL || p > q) ? p + 1 : q != NULL ? q + 1 : buf;
		last = (unsigned)strtoul(p, NULL, 10);
	}
	fclose(f);
	return last + 1;
}

static unsigned affinity_count(void)
{
	cpu_set_t set;

	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	return (unsigned)CPU_COUNT(&set);
}

static void test_scale_topology_counts_match_the_os(void **state)
{
	const struct kl_topology *t = kl_topology();
	unsigned sp = sysfs_possible();

	(void)state;
	printf("possible %u, online %u, allowed %u CPUs; cpu index: %s\n", t->possible_cpus,
	       t->online_cpus, t->allowed_cpus, kl_cpu_source());
	assert_int_equal(t->online_cpus, (unsigned)sysconf(_SC_NPROCESSORS_ONLN));
	assert_int_equal(t->allowed_cpus, affinity_count());
	if (sp > 0)
		assert_true(t->possible_cpus >= sp);
	assert_true(t->possible_cpus >= t->online_cpus);
}

static void test_scale_hashlock_auto_size_follows_online_cpus(void **state)
{
	struct kl_hashlock h;
	unsigned want = HL_STRIPES_PER_CPU * kl_topology()->online_cpus, n;

	(void)state;
	assert_int_equal(kl_hashlock_init(&h, 0), 0);
	n = kl_hashlock_nstripes(&h);
	printf("hashlock auto size: %u stripes for %u online CPUs\n", n, kl_topology()->online_cpus);
	assert_int_equal(n & (n - 1), 0);                       /* a power of two */
	assert_true(n <= want || n == 1);                       /* the largest one <= want */
	assert_true(2 * n > want || n == KL_HASHLOCK_MAX_STRIPES);
	for (uintptr_t k = 0; k < 4096; k++)                    /* every index in range */
		assert_true(kl_hashlock_index(&h, (const void *)(k * 64)) < n);
	assert_int_equal(kl_hashlock_destroy(&h), 0);
}

static void test_scale_crowding_threshold_is_the_affinity_count(void **state)
{
	unsigned a = affinity_count();

	(void)state;
	printf("crowding threshold: %u (affinity %u CPUs)\n", kli_crowd_max, a);
	assert_int_equal(kli_crowd_max, a > CROWD_MIN ? a : CROWD_MIN);
}

/* The walk: main pins itself to each CPU and read-holds; a writer thread must fail its
 * trylock while the hold is in that CPU's slot and succeed once it is gone. */
struct walk {
	struct kl_pcpu_rwsem sem;
	struct klt_barrier bar;
	int ncpu;
	_Atomic int missed, blocked;   /* trylock success under a read hold / failure after */
};

static void *walk_writer(void *arg)
{
	struct walk *w = arg;

	for (int i = 0; i < w->ncpu; i++) {
		klt_barrier_wait(&w->bar);           /* the reader holds */
		if (kl_pcpu_rwsem_write_trylock(&w->sem)) {
			atomic_fetch_add(&w->missed, 1);
			kl_pcpu_rwsem_write_unlock(&w->sem);
		}
		klt_barrier_wait(&w->bar);           /* the reader released */
		klt_barrier_wait(&w->bar);
		if (kl_pcpu_rwsem_write_trylock(&w->sem))
			kl_pcpu_rwsem_write_unlock(&w->sem);
		else
			atomic_fetch_add(&w->blocked, 1);
		klt_barrier_wait(&w->bar);
	}
	return NULL;
}

static void test_scale_pcpu_rwsem_reader_on_every_cpu_is_seen(void **state)
{
	static struct walk w;
	cpu_set_t orig, one;
	pthread_t t;
	int cpus[CPU_SETSIZE];

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(orig), &orig), 0);
	memset(&w, 0, sizeof(w));
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &orig))
			cpus[w.ncpu++] = c;
	alarm(klt_watchdog_s(WATCHDOG_S) +
	      (unsigned)(klt_fence_heavy_ns() * FENCES_PER_CPU * w.ncpu / KLT_NSEC_PER_SEC));
	assert_int_equal(kl_pcpu_rwsem_init(&w.sem), 0);
	klt_barrier_init(&w.bar, 2);
	assert_int_equal(pthread_create(&t, NULL, walk_writer, &w), 0);
	for (int i = 0; i < w.ncpu; i++) {
		CPU_ZERO(&one);
		CPU_SET(cpus[i], &one);
		assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
		kl_pcpu_rwsem_read_lock(&w.sem);
		assert_true(kl_cpu_slot() < kl_topology()->possible_cpus);
		klt_barrier_wait(&w.bar);
		klt_barrier_wait(&w.bar);
		kl_pcpu_rwsem_read_unlock(&w.sem);
		klt_barrier_wait(&w.bar);
		klt_barrier_wait(&w.bar);
	}
	pthread_join(t, NULL);
	assert_int_equal(sched_setaffinity(0, sizeof(orig), &orig), 0);
	printf("pcpu_rwsem: a read hold on each of %d CPUs (up to CPU %d) was seen\n", w.ncpu,
	       cpus[w.ncpu - 1]);
	assert_int_equal(atomic_load(&w.missed), 0);
	assert_int_equal(atomic_load(&w.blocked), 0);
	assert_int_equal(kl_pcpu_rwsem_destroy(&w.sem), 0);
	alarm(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scale_topology_counts_match_the_os),
		cmocka_unit_test(test_scale_hashlock_auto_size_follows_online_cpus),
		cmocka_unit_test(test_scale_crowding_threshold_is_the_affinity_count),
		cmocka_unit_test(test_scale_pcpu_rwsem_reader_on_every_cpu_is_seen),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
