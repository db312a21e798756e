/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/tests/test_stats.c - klbench's histogram and ministat statistics on data whose
 * answers are known: exact buckets below 32 ns, percentiles of constant, uniform and
 * exponential distributions within the histogram's stated error (3.1%), merging, the
 * Debian median rule, pooled-variance t comparisons.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "hist.h"
#include "ministat.h"

/* The histogram's promised worst relative error of a percentile (half a bucket). */
#define HIST_MAX_ERR (1.0 / (2 * KB_HIST_SUB))

static struct kb_hist *new_hist(void)
{
	struct kb_hist *h = malloc(sizeof(*h));

	assert_non_null(h);
	kb_hist_init(h);
	return h;
}

/* Exact nearest-rank percentile of sorted values. */
static uint64_t exact_pct(const uint64_t *sorted, size_t n, double p)
{
	size_t rank = (size_t)ceil(p / 100.0 * (double)n);

	return sorted[(rank ? rank : 1) - 1];
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void assert_close(uint64_t got, uint64_t want)
{
	double err = fabs((double)got - (double)want) / (double)(want ? want : 1);

	if (err > HIST_MAX_ERR + 1e-9)
		fail_msg("percentile %llu, exact %llu: error %.4f > %.4f",
			 (unsigned long long)got, (unsigned long long)want, err, HIST_MAX_ERR);
}

static void check_distribution(uint64_t *v, size_t n)
{
	static const double ps[] = { 1, 10, 50, 90, 99, 99.9, 100 };
	struct kb_hist *h = new_hist();

	for (size_t i = 0; i < n; i++)
		kb_hist_record(h, v[i]);
	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
		assert_close(kb_hist_percentile(h, ps[i]), exact_pct(v, n, ps[i]));
	assert_int_equal(kb_hist_percentile(h, 100), v[n - 1]);
	assert_int_equal(h->count, n);
	free(h);
}

static void test_hist_small_values_are_exact(void **state)
{
	struct kb_hist *h = new_hist();

	(void)state;
	for (uint64_t v = 0; v < 2 * KB_HIST_SUB; v++) {
		uint64_t lo, w;

		kb_hist_bucket_range(kb_hist_index(v), &lo, &w);
		assert_int_equal(lo, v);
		assert_int_equal(w, 1);
	}
	for (int i = 0; i < 10; i++)
		kb_hist_record(h, 7);
	kb_hist_record(h, 30);
	assert_int_equal(kb_hist_percentile(h, 50), 7);
	assert_int_equal(kb_hist_percentile(h, 100), 30);
	free(h);
}

static void test_hist_every_value_lands_in_its_bucket(void **state)
{
	(void)state;
	for (uint64_t v = 1; v < ((uint64_t)1 << KB_HIST_MAX_LOG); v = v * 3 / 2 + 1) {
		uint64_t lo, w;
		unsigned idx = kb_hist_index(v);

		assert_true(idx < KB_HIST_BUCKETS);
		kb_hist_bucket_range(idx, &lo, &w);
		assert_true(lo <= v && v < lo + w);
		assert_true((double)w / (double)lo <= 1.0 / KB_HIST_SUB + 1e-12 || lo < 2 * KB_HIST_SUB);
	}
	assert_int_equal(kb_hist_index(UINT64_MAX), KB_HIST_BUCKETS - 1);
}

static void test_hist_constant_distribution_is_exact(void **state)
{
	struct kb_hist *h = new_hist();

	(void)state;
	for (int i = 0; i < 1000; i++)
		kb_hist_record(h, 123456);
	assert_int_equal(kb_hist_percentile(h, 50), 123456);
	assert_int_equal(kb_hist_percentile(h, 99.9), 123456);
	assert_true(fabs(kb_hist_mean(h) - 123456) < 1e-6);
	free(h);
}

static void test_hist_uniform_percentiles_within_error(void **state)
{
	size_t n = 100000;
	uint64_t *v = malloc(n * sizeof(*v));

	(void)state;
	for (size_t i = 0; i < n; i++)
		v[i] = 1 + i * 10;   /* 1 .. 1e6 */
	check_distribution(v, n);
	free(v);
}

static void test_hist_exponential_percentiles_within_error(void **state)
{
	size_t n = 200000;
	uint64_t *v = malloc(n * sizeof(*v)), x = 88172645463325252ull;

	(void)state;
	for (size_t i = 0; i < n; i++) {
		double u;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		u = ((double)(x >> 11) + 0.5) / 9007199254740992.0;
		v[i] = (uint64_t)(-log(u) * 5000.0) + 1;   /* mean 5 us, long tail */
	}
	check_distribution(v, n);
	free(v);
}

static void test_hist_merge_equals_recording_together(void **state)
{
	struct kb_hist *a = new_hist(), *b = new_hist(), *all = new_hist();

	(void)state;
	for (uint64_t i = 1; i <= 5000; i++) {
		kb_hist_record(i % 2 ? a : b, i * 37);
		kb_hist_record(all, i * 37);
	}
	kb_hist_merge(a, b);
	assert_memory_equal(a, all, sizeof(*a));
	free(a);
	free(b);
	free(all);
}

static void test_hist_empty_reports_zero(void **state)
{
	struct kb_hist *h = new_hist();

	(void)state;
	assert_int_equal(kb_hist_percentile(h, 99), 0);
	assert_true(kb_hist_mean(h) == 0);
	free(h);
}

static void fill(struct ms_set *s, const char *name, const double *v, size_t n)
{
	ms_set_init(s, name);
	for (size_t i = 0; i < n; i++)
		ms_set_add(s, v[i]);
	ms_set_finish(s);
}

static void test_ministat_median_is_upper_middle_for_even_n(void **state)
{
	struct ms_set s;

	(void)state;
	fill(&s, "a", (const double[]){ 4, 1, 3, 2 }, 4);
	assert_true(ms_median(&s) == 3);   /* Debian 20150715, not 2.5 */
	assert_true(ms_min(&s) == 1 && ms_max(&s) == 4);
	assert_true(fabs(ms_avg(&s) - 2.5) < 1e-12);
	assert_true(fabs(ms_var(&s) - 5.0 / 3.0) < 1e-12);
	ms_set_free(&s);
}

static void test_ministat_pooled_t_finds_a_clear_difference(void **state)
{
	struct ms_set a, b;
	struct ms_diff d;

	(void)state;
	fill(&a, "a", (const double[]){ 10, 11, 12, 10, 11 }, 5);
	fill(&b, "b", (const double[]){ 20, 21, 22, 20, 21 }, 5);
	ms_compare(&a, &b, MS_DEFAULT_LEVEL, &d);
	assert_true(d.significant);
	assert_true(fabs(d.d - 10) < 1e-12);
	assert_true(fabs(d.t - 2.306) < 1e-12);   /* df = 8, 95% */
	assert_true(fabs(d.spool - sqrt(0.7)) < 1e-12);
	assert_true(fabs(d.e - 2.306 * sqrt(0.7) * sqrt(0.4)) < 1e-12);
	assert_true(fabs(d.pct_d - 10 * 100 / 10.8) < 1e-9);
	ms_set_free(&a);
	ms_set_free(&b);
}

static void test_ministat_overlapping_sets_show_no_difference(void **state)
{
	struct ms_set a, b;
	struct ms_diff d;

	(void)state;
	fill(&a, "a", (const double[]){ 10, 14, 9, 12, 11 }, 5);
	fill(&b, "b", (const double[]){ 11, 13, 10, 12, 9 }, 5);
	ms_compare(&a, &b, MS_DEFAULT_LEVEL, &d);
	assert_false(d.significant);
	ms_set_free(&a);
	ms_set_free(&b);
}

static void test_ministat_large_df_uses_normal_quantile(void **state)
{
	struct ms_set a, b;
	struct ms_diff d;
	double va[60], vb[60];

	(void)state;
	for (int i = 0; i < 60; i++) {
		va[i] = 100 + i % 7;
		vb[i] = 103 + i % 5;
	}
	fill(&a, "a", va, 60);
	fill(&b, "b", vb, 60);
	ms_compare(&a, &b, ms_level_index(99), &d);
	assert_true(d.t == 2.576);   /* df = 118 > 100: the infinity row */
	assert_int_equal(ms_level_index(97), -1);
	ms_set_free(&a);
	ms_set_free(&b);
}

/* b: mean 100, s: mean 100 +/- 10, both sd 0.71 over 5: at 95% (t 2.306) the interval of
 * the difference is +/- 1.03% of b's mean, at 99.5% (t 4.499) +/- 2.01%. */
static void floor_sets(struct ms_set *b, struct ms_set *s, double s_mean)
{
	fill(b, "b", (const double[]){ 99, 100, 101, 100, 100 }, 5);
	fill(s, "s", (const double[]){ s_mean - 1, s_mean, s_mean + 1, s_mean, s_mean }, 5);
}

static void test_ministat_floor_met_only_when_the_whole_interval_clears_it(void **state)
{
	struct ms_set b, s;
	struct ms_diff d;

	(void)state;
	floor_sets(&b, &s, 90);
	assert_int_equal(ms_floor_verdict(&b, &s, MS_DEFAULT_LEVEL, 0.85, &d), MS_FLOOR_MET);
	assert_true(fabs(d.pct_d + 10) < 1e-9);
	/* -10% +/- 1.03%: 0.9 lies inside the interval, 0.95 above all of it */
	assert_int_equal(ms_floor_verdict(&b, &s, MS_DEFAULT_LEVEL, 0.9, &d), MS_FLOOR_UNRESOLVED);
	assert_int_equal(ms_floor_verdict(&b, &s, MS_DEFAULT_LEVEL, 0.95, &d), MS_FLOOR_UNMET);
	/* wider confidence, wider interval: 0.885 (-11.5%) is no longer cleared at 99.5% */
	assert_int_equal(ms_floor_verdict(&b, &s, MS_DEFAULT_LEVEL, 0.885, &d), MS_FLOOR_MET);
	assert_int_equal(ms_floor_verdict(&b, &s, ms_level_index(99.5), 0.885, &d),
			 MS_FLOOR_UNRESOLVED);
	ms_set_free(&b);
	ms_set_free(&s);
}

static void test_ministat_floor_above_the_baseline_is_met_at_line_one(void **state)
{
	struct ms_set b, s;
	struct ms_diff d;

	(void)state;
	floor_sets(&b, &s, 110);
	assert_int_equal(ms_floor_verdict(&b, &s, MS_DEFAULT_LEVEL, 1, &d), MS_FLOOR_MET);
	assert_int_equal(ms_floor_verdict(&b, &s, MS_DEFAULT_LEVEL, 1.2, &d), MS_FLOOR_UNMET);
	ms_set_free(&b);
	ms_set_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hist_small_values_are_exact),
		cmocka_unit_test(test_hist_every_value_lands_in_its_bucket),
		cmocka_unit_test(test_hist_constant_distribution_is_exact),
		cmocka_unit_test(test_hist_uniform_percentiles_within_error),
		cmocka_unit_test(test_hist_exponential_percentiles_within_error),
		cmocka_unit_test(test_hist_merge_equals_recording_together),
		cmocka_unit_test(test_hist_empty_reports_zero),
		cmocka_unit_test(test_ministat_median_is_upper_middle_for_even_n),
		cmocka_unit_test(test_ministat_pooled_t_finds_a_clear_difference),
		cmocka_unit_test(test_ministat_overlapping_sets_show_no_difference),
		cmocka_unit_test(test_ministat_large_df_uses_normal_quantile),
		cmocka_unit_test(test_ministat_floor_met_only_when_the_whole_interval_clears_it),
		cmocka_unit_test(test_ministat_floor_above_the_baseline_is_met_at_line_one),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
