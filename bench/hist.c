/* SPDX-License-Identifier: BSD-2-Clause */
/* bench/hist.c - the log-linear latency histogram (layout in hist.h). */
#include <math.h>
#include <string.h>

#include "hist.h"

void kb_hist_init(struct kb_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

unsigned kb_hist_index(uint64_t v)
{
	unsigned e, sub;

	if (v < KB_HIST_SUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	if (e >= KB_HIST_MAX_LOG)
		return KB_HIST_BUCKETS - 1;
	sub = (unsigned)(v >> (e - KB_HIST_SUB_BITS)) & (KB_HIST_SUB - 1);
	return (e - KB_HIST_SUB_BITS + 1) * KB_HIST_SUB + sub;
}

void kb_hist_bucket_range(unsigned idx, uint64_t *lo, uint64_t *width)
{
	unsigned group = idx / KB_HIST_SUB, sub = idx % KB_HIST_SUB;
	unsigned shift;

	if (group == 0) {
		*lo = sub;
		*width = 1;
		return;
	}
	shift = group - 1;  /* e - SUB_BITS, where e = group + SUB_BITS - 1 */
	*lo = (uint64_t)(KB_HIST_SUB + sub) << shift;
	*width = (uint64_t)1 << shift;
}

void kb_hist_merge(struct kb_hist *dst, const struct kb_hist *src)
{
	if (src->count == 0)
		return;
	for (unsigned i = 0; i < KB_HIST_BUCKETS; i++)
		dst->bucket[i] += src->bucket[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

uint64_t kb_hist_percentile(const struct kb_hist *h, double p)
{
	uint64_t rank, seen = 0, lo, width, v;

	if (h->count == 0)
		return 0;
	rank = (uint64_t)ceil(p / 100.0 * (double)h->count);
	if (rank < 1)
		rank = 1;
	if (rank >= h->count)
		return h->max;   /* the largest sample is known exactly */
	for (unsigned i = 0; i < KB_HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen < rank)
			continue;
		kb_hist_bucket_range(i, &lo, &width);
		v = lo + (width - 1) / 2;
		if (v < h->min)
			v = h->min;
		if (v > h->max)
			v = h->max;
		return v;
	}
	return h->max;
}

double kb_hist_mean(const struct kb_hist *h)
{
	return h->count ? (double)h->sum / (double)h->count : 0.0;
}

double kb_hist_capped_sum(const struct kb_hist *h, uint64_t cap)
{
	double sum = 0;

	for (unsigned i = 0; i < KB_HIST_BUCKETS; i++) {
		uint64_t lo, width, mid;

		if (h->bucket[i] == 0)
			continue;
		kb_hist_bucket_range(i, &lo, &width);
		mid = lo + (width - 1) / 2;
		sum += (double)h->bucket[i] * (double)(mid < cap ? mid : cap);
	}
	return sum;
}
