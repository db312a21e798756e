/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/unit/test_topology.c - kl_topology() and the current-CPU index. */
#include <sched.h>
#include <sys/rseq.h>

#include <klock/topology.h>
#include "kltest.h"

#define INDEX_SAMPLES 100000
/* Attempts to observe kl_cpu_current() == sched_getcpu() while pinned (a migration
 * between the two reads is impossible when pinned, but a rare unpin race is not). */
#define PIN_TRIES 100

static bool is_pow2(unsigned v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

static void test_topology_is_sane(void **state)
{
	const struct kl_topology *t = kl_topology();

	assert_non_null(t);
	assert_ptr_equal(t, kl_topology());
	assert_true(t->online_cpus >= 1);
	assert_true(t->possible_cpus >= t->online_cpus);
	assert_true(t->allowed_cpus >= 1 && t->allowed_cpus <= t->possible_cpus);
	assert_true(t->cores >= 1 && t->cores <= t->online_cpus);
	assert_true(t->packages >= 1 && t->packages <= t->cores);
	assert_true(t->numa_nodes >= 1);
	assert_true(is_pow2(t->cache_line) && t->cache_line >= 16 && t->cache_line <= 512);
	assert_true(sysconf(_SC_NPROCESSORS_ONLN) <= (long)t->possible_cpus);
}

static void test_topology_source_follows_environment(void **state)
{
	const char *want = getenv("KLOCK_NO_HWLOC") != NULL ? "sysconf" : "hwloc";

	assert_string_equal(kl_topology()->source, want);
}

static void test_cpu_index_is_in_range(void **state)
{
	unsigned n = kl_topology()->possible_cpus;

	for (int i = 0; i < INDEX_SAMPLES; i++) {
		assert_true(kl_cpu_current() < n);
		assert_true(kl_cpu_slot() < n);
	}
}

static void test_cpu_index_agrees_with_sched_getcpu_when_pinned(void **state)
{
	cpu_set_t orig, one;

	assert_int_equal(sched_getaffinity(0, sizeof(orig), &orig), 0);
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &orig))
			continue;
		CPU_ZERO(&one);
		CPU_SET(c, &one);
		assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
		bool agreed = false;
		for (int k = 0; k < PIN_TRIES && !agreed; k++)
			agreed = kl_cpu_current() == (unsigned)c && sched_getcpu() == c;
		assert_true(agreed);
	}
	assert_int_equal(sched_setaffinity(0, sizeof(orig), &orig), 0);
}

static void test_cpu_source_honours_no_rseq(void **state)
{
	const char *src = kl_cpu_source();

	if (getenv("KLOCK_NO_RSEQ") != NULL) {
		assert_true(strcmp(src, "getcpu") == 0 || strcmp(src, "thread-hash") == 0);
	} else if (getenv("KLTEST_EXPECT_RSEQ") != NULL && __rseq_size > 0) {
		/* set by tests/meson.build where glibc registers rseq (native x86_64/aarch64);
		 * valgrind does not implement rseq, so glibc's registration fails under it */
		assert_true(strncmp(src, "rseq", 4) == 0);
	} else {
		assert_true(strcmp(src, "rseq") == 0 || strcmp(src, "rseq+mm_cid") == 0 ||
			    strcmp(src, "getcpu") == 0 || strcmp(src, "thread-hash") == 0);
	}
	printf("cpu index source: %s\n", src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_topology_is_sane),
		cmocka_unit_test(test_topology_source_follows_environment),
		cmocka_unit_test(test_cpu_index_is_in_range),
		cmocka_unit_test(test_cpu_index_agrees_with_sched_getcpu_when_pinned),
		cmocka_unit_test(test_cpu_source_honours_no_rseq),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
