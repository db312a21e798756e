/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/sweep.c - every combination of the sweep's axes, run `repeats` times with the
 * repeats outermost: A B C A B C ..., never A A A B B B, so that a machine whose speed
 * drifts (another tenant, thermal limits, a noisy neighbour on a shared VM) shifts every
 * configuration alike and medians stay comparable.
 */
#include <stdlib.h>
#include <string.h>

#include "klbench.h"

/* Buckets of the table workload unless --keys says otherwise. */
#define KB_DEFAULT_KEYS 4096
/* Default measured interval and warm-up, seconds. */
#define KB_DEFAULT_DURATION 1.0
#define KB_DEFAULT_WARMUP 0.1
/* Default counter words touched per critical section (one cache line with the owner). */
#define KB_DEFAULT_CS 4
/* Default share of writes, percent. */
#define KB_DEFAULT_WRITE 10.0

void kb_sweep_defaults(struct kb_sweep *s)
{
	memset(s, 0, sizeof(*s));
	s->threads[0] = kb_cpus();
	s->nthreads = 1;
	s->write[0] = KB_DEFAULT_WRITE;
	s->nwrite = 1;
	s->cs[0] = KB_DEFAULT_CS;
	s->ncs = 1;
	s->think[0] = 0;
	s->nthink = 1;
	s->stripes[0] = 1;
	s->nstripes = 1;
	s->place[0] = KB_PLACE_NONE;
	s->nplace = 1;
	s->base.duration = KB_DEFAULT_DURATION;
	s->base.warmup = KB_DEFAULT_WARMUP;
	s->base.workload = KB_WL_LOCK;
	s->base.keys = KB_DEFAULT_KEYS;
	s->base.sample_shift = KB_DEFAULT_SAMPLE_SHIFT;
	s->repeats = 1;
	s->progress = kb_isatty_err();
}

bool kb_config_same(const struct kb_config *a, const struct kb_config *b)
{
	return a->ops == b->ops && a->threads == b->threads && a->write_pct == b->write_pct &&
	       a->cs == b->cs && a->think == b->think && a->placement == b->placement &&
	       a->workload == b->workload && a->stripes == b->stripes && a->keys == b->keys;
}

struct kb_cfglist {
	struct kb_config *v;
	size_t n;
};

static void cfg_push(struct kb_cfglist *l, const struct kb_config *c)
{
	for (size_t i = 0; i < l->n; i++)
		if (kb_config_same(&l->v[i], c))
			return;
	l->v[l->n++] = *c;
}

static size_t axes_product(const struct kb_sweep *s)
{
	return (size_t)s->nlocks * s->nthreads * s->nwrite * s->ncs * s->nthink *
	       s->nstripes * s->nplace;
}

/* Keyed locks bring their own striping: the stripes axis does not apply to them. */
static void expand(const struct kb_sweep *s, struct kb_cfglist *l)
{
	struct kb_config c = s->base;
	bool table = s->base.workload == KB_WL_TABLE;

	for (unsigned p = 0; p < s->nplace; p++)
	for (unsigned k = 0; k < s->nlocks; k++)
	for (unsigned st = 0; st < (table ? s->nstripes : 1); st++)
	for (unsigned cs = 0; cs < s->ncs; cs++)
	for (unsigned th = 0; th < s->nthink; th++)
	for (unsigned w = 0; w < s->nwrite; w++)
	for (unsigned t = 0; t < s->nthreads; t++) {
		c.placement = s->place[p];
		c.ops = s->locks[k];
		c.stripes = !table ? 1 : (c.ops->flags & LOCKOPS_KEYED) ? 0 : s->stripes[st];
		c.cs = s->cs[cs];
		c.think = s->think[th];
		c.write_pct = s->write[w];
		c.threads = s->threads[t];
		cfg_push(l, &c);
	}
}

size_t kb_sweep_size(const struct kb_sweep *s)
{
	struct kb_cfglist l = { calloc(axes_product(s) + 1, sizeof(struct kb_config)), 0 };
	size_t n;

	expand(s, &l);
	n = l.n * s->repeats;
	free(l.v);
	return n;
}

unsigned kb_sweep_run(struct kb_sweep *s, struct kb_results *out)
{
	struct kb_cfglist l = { calloc(axes_product(s) + 1, sizeof(struct kb_config)), 0 };
	size_t total, done = 0;
	unsigned failed = 0;
	char what[160];

	if (l.v == NULL) {
		fprintf(stderr, "klbench: out of memory\n");
		exit(2);
	}
	expand(s, &l);
	total = l.n * s->repeats;
	for (unsigned r = 0; r < s->repeats; r++) {
		for (size_t i = 0; i < l.n; i++, done++) {
			struct kb_result *res = kb_results_add(out);

			if (s->progress) {
				kb_config_label(&l.v[i], what, sizeof(what), false);
				kb_progress(done, total, what);
			}
			if (kb_run(&l.v[i], r, res) < 0) {
				out->n--;
				failed++;
				continue;
			}
			if (!res->verified) {
				kb_progress_done();
				kb_config_label(&l.v[i], what, sizeof(what), true);
				fprintf(stderr, "klbench: FAILED (%s): %s\n", what, res->verify_msg);
				failed++;
			}
		}
	}
	if (s->progress)
		kb_progress_done();
	free(l.v);
	return failed;
}
