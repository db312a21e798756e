/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/hist.h - klbench's latency histogram: log-linear buckets (HdrHistogram's layout,
 * reduced), fixed size, no allocation after creation, one per thread and side, merged
 * after the run. Recording is an index computation and one increment, so it can sit in
 * the timed loop.
 *
 * Layout: values below 2^SUB_BITS nanoseconds get one bucket each (exact); above that,
 * every power of two [2^e, 2^(e+1)) is cut into 2^SUB_BITS equal buckets. A bucket's
 * reported value is its midpoint, so a percentile is off by at most half a bucket:
 * 1/2^(SUB_BITS+1) = 3.1% of the value (exact below 32 ns). Values at or above 2^MAX_LOG
 * ns land in the last bucket; min and max are kept exactly.
 */
#ifndef KB_HIST_H
#define KB_HIST_H

#include <stdint.h>

/* Linear sub-buckets per power of two, as a power of two (16: <= 3.1% error). */
#define KB_HIST_SUB_BITS 4
#define KB_HIST_SUB (1u << KB_HIST_SUB_BITS)
/* Largest recorded power of two: 2^40 ns is 18 minutes, longer than any sane wait. */
#define KB_HIST_MAX_LOG 40
#define KB_HIST_BUCKETS ((KB_HIST_MAX_LOG - KB_HIST_SUB_BITS + 1) * KB_HIST_SUB)

struct kb_hist {
	uint64_t count;
	uint64_t sum;   /* of recorded values, for the mean */
	uint64_t min;   /* UINT64_MAX while empty */
	uint64_t max;
	uint64_t bucket[KB_HIST_BUCKETS];
};

void kb_hist_init(struct kb_hist *h);

/* The bucket a value falls in, and a bucket's value range [*lo, *lo + *width). */
unsigned kb_hist_index(uint64_t v);
void kb_hist_bucket_range(unsigned idx, uint64_t *lo, uint64_t *width);

static inline void kb_hist_record(struct kb_hist *h, uint64_t v)
{
	h->bucket[kb_hist_index(v)]++;
	h->count++;
	h->sum += v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

/* dst += src. */
void kb_hist_merge(struct kb_hist *dst, const struct kb_hist *src);

/*
 * The p-th percentile (0 < p <= 100) by nearest rank: the value of the ceil(p/100 * count)-th
 * smallest sample, as its bucket's midpoint clamped to [min, max]; the largest sample
 * exactly. 0 when empty.
 */
uint64_t kb_hist_percentile(const struct kb_hist *h, double p);
double kb_hist_mean(const struct kb_hist *h);

/* Sum of the samples with each one capped at `cap` (bucket midpoints: within 3.1%). */
double kb_hist_capped_sum(const struct kb_hist *h, uint64_t cap);

#endif /* KB_HIST_H */
