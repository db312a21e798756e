/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/harness.c - what every scenario shares: printing (to stdout and to
 * NAME.txt when --out is given), the CSV/JSON/raw/SVG files of a sweep, finding locks
 * ("needed": the scenario refuses to run, exit status 4; "wanted": a stand-in is named,
 * or the missing row is), sweeps sized to the scenario's time budget, looking runs up in
 * the results, ministat comparisons and the reader-bias table. scenario.h declares them.
 */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "ministat.h"
#include "scenario.h"

/* ---- printing and files -------------------------------------------------------------- */

void scn_say(struct scn_ctx *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (x->txt != NULL) {
		va_start(ap, fmt);
		vfprintf(x->txt, fmt, ap);
		va_end(ap);
	}
}

void scn_say_table(struct scn_ctx *x, const struct kb_results *rs)
{
	kb_print_table(stdout, rs);
	if (x->txt != NULL)
		kb_print_table(x->txt, rs);
}

static void say_ministat(struct scn_ctx *x, struct ms_set *const *sets, int n)
{
	ms_report(stdout, sets, n, 74, MS_DEFAULT_LEVEL, 0);
	if (x->txt != NULL)
		ms_report(x->txt, sets, n, 74, MS_DEFAULT_LEVEL, 0);
}

static void path_of(const struct scn_ctx *x, char *buf, size_t len, const char *suffix,
		    const char *ext)
{
	snprintf(buf, len, "%s/%s%s%s", x->outdir, x->name, suffix, ext);
}

/* CSV, JSON, raw files and plots of one sweep, when the scenario writes files. */
void scn_write_files(struct scn_ctx *x, const struct kb_results *rs, const char *suffix,
			bool plot)
{
	char csv[4096], json[4096], raw[4096], svg[4096], title[256];
	struct kb_output o = { .csv = csv, .json = json, .raw = raw, .title = title };

	if (x->outdir == NULL || rs->n == 0)
		return;
	path_of(x, csv, sizeof(csv), suffix, ".csv");
	path_of(x, json, sizeof(json), suffix, ".json");
	snprintf(raw, sizeof(raw), "%s/raw/%s%s", x->outdir, x->name, suffix);
	path_of(x, svg, sizeof(svg), suffix, ".svg");
	snprintf(title, sizeof(title), "klbench scenario %s%s", x->name, suffix);
	o.plot = plot ? svg : NULL;
	if (kb_emit(&o, rs, x->name) < 0)
		x->status = x->status ? x->status : 1;
}

/* ---- locks ---------------------------------------------------------------------------- */

const struct lockops *scn_need(struct scn_ctx *x, const char *name)
{
	const struct lockops *o = lockops_find(name);

	if (o == NULL) {
		scn_say(x, "scenario %s needs %s, not built in (`klbench list` shows what is)\n",
		    x->name, name);
		x->status = KB_EXIT_UNAVAILABLE;
	}
	return o;
}

/* `name`, or `fallback` with a note saying it stands in. */
const struct lockops *scn_want(struct scn_ctx *x, const char *name, const char *fallback)
{
	const struct lockops *o = lockops_find(name);

	if (o != NULL || fallback == NULL)
		return o;
	o = lockops_find(fallback);
	if (o != NULL)
		scn_say(x, "note: %s is not built in; %s stands in for it\n", name, fallback);
	return o;
}

void scn_add_if_built(struct kb_sweep *s, const char *name)
{
	const struct lockops *o = lockops_find(name);

	for (unsigned i = 0; i < s->nlocks; i++)
		if (s->locks[i] == o)
			return;
	if (o != NULL && s->nlocks < KB_MAX_LOCKS)
		s->locks[s->nlocks++] = o;
}

void scn_note_missing(struct scn_ctx *x, const char *const *names, size_t n)
{
	bool any = false;

	for (size_t i = 0; i < n; i++) {
		if (lockops_find(names[i]) != NULL)
			continue;
		scn_say(x, "%s%s", any ? ", " : "note: not built in (rows missing): ", names[i]);
		any = true;
	}
	if (any)
		scn_say(x, "\n");
}

/* The locks the user gave with -l (true), else leaves the sweep's as they are (false). */
bool scn_user_locks(struct scn_ctx *x, struct kb_sweep *s)
{
	if (!x->cli->set_locks)
		return false;
	memcpy(s->locks, x->cli->sweep.locks, sizeof(s->locks));
	s->nlocks = x->cli->sweep.nlocks;
	return true;
}

/* The locks the user gave with -l, else those of `names` built in (a note names the rest). */
void scn_pick_locks(struct scn_ctx *x, struct kb_sweep *s, const char *const *names, size_t n)
{
	if (scn_user_locks(x, s))
		return;
	for (size_t i = 0; i < n; i++)
		scn_add_if_built(s, names[i]);
	scn_note_missing(x, names, n);
}

/* ---- sweeps ---------------------------------------------------------------------------- */

/* Defaults, then what the user set on the command line that a scenario may take. */
void scn_sweep_init(struct scn_ctx *x, struct kb_sweep *s)
{
	const struct kb_cli *c = x->cli;

	kb_sweep_defaults(s);
	s->base.warmup = c->set_warmup ? c->sweep.base.warmup : SCN_WARMUP;
	s->progress = c->sweep.progress;
	s->base.sample_shift = c->sweep.base.sample_shift;
	s->base.lockstat = c->sweep.base.lockstat;
	if (c->set_place) {
		memcpy(s->place, c->sweep.place, sizeof(s->place));
		s->nplace = c->sweep.nplace;
	}
}

/* Runs a sweep within the scenario's share of the budget (unless -d fixed the duration). */
unsigned scn_sweep_go(struct scn_ctx *x, struct kb_sweep *s, struct kb_results *rs,
			 double share)
{
	size_t runs;
	unsigned failed;

	if (x->cli->set_repeats)
		s->repeats = x->cli->sweep.repeats;
	runs = kb_sweep_size(s);
	if (x->cli->set_duration)
		s->base.duration = x->cli->sweep.base.duration;
	else if (runs > 0)
		s->base.duration = fmax(SCN_MIN_DURATION, x->budget * share / (double)runs -
						  s->base.warmup - SCN_RUN_OVERHEAD);
	failed = kb_sweep_run(s, rs);
	if (failed) {
		scn_say(x, "FAILED: %u run(s) did not verify (see the messages above)\n", failed);
		x->status = KB_EXIT_VERIFY;
	}
	return failed;
}

/* The run of `ops` in `rs` closest to the given threads/write%/stripes (first match). */
const struct kb_config *scn_find_cfg(const struct kb_results *rs, const struct lockops *ops,
					unsigned threads, double write, int stripes)
{
	for (size_t i = 0; i < rs->n; i++) {
		const struct kb_config *c = &rs->v[i].cfg;

		if (c->ops == ops && c->threads == threads && c->write_pct == write &&
		    (stripes < 0 || c->stripes == (unsigned)stripes))
			return c;
	}
	return NULL;
}

/* ministat over the repeats of two (or more) configurations. */
void scn_compare_cfgs(struct scn_ctx *x, const struct kb_results *rs,
			 const struct kb_config *const *cfgs, int n, const char *what)
{
	struct ms_set sets[MS_MAX_SETS], *ptr[MS_MAX_SETS];
	char name[128];
	bool ok = n >= 2;

	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s (%s)", cfgs[i]->ops->name, what);
		ms_set_init(&sets[i], name);
		ptr[i] = &sets[i];
		for (size_t k = 0; k < rs->n; k++)
			if (kb_config_same(&rs->v[k].cfg, cfgs[i]))
				ms_set_add(&sets[i], rs->v[k].ops_per_s);
		ms_set_finish(&sets[i]);
		ok &= sets[i].n >= 3;
	}
	if (ok)
		say_ministat(x, ptr, n);
	else
		scn_say(x, "(ministat needs at least 3 repeats of each: use -r 3 or more)\n");
	for (int i = 0; i < n; i++)
		ms_set_free(&sets[i]);
}

const char *scn_met(bool ok)
{
	return ok ? "met" : "NOT met";
}
double scn_ops_at(const struct kb_results *rs, const struct lockops *o, unsigned t, double w)
{
	const struct kb_config *c = o ? scn_find_cfg(rs, o, t, w, -1) : NULL;

	return c ? kb_median_ops(rs, c) : NAN;
}

double scn_g_vcsw_s(const struct kb_result *r)
{
	return (double)r->vcsw / r->elapsed;
}

double scn_g_fair(const struct kb_result *r)
{
	return r->fair_ratio;
}

double scn_g_lkst(const struct kb_result *r)
{
	return r->lockstat_wait_pct;
}

double scn_g_lkct(const struct kb_result *r)
{
	return r->lockstat_contended_pct;
}

static double g_revs(const struct kb_result *r)
{
	return r->revocations_per_s;
}

static double g_unbiased(const struct kb_result *r)
{
	return r->unbiased_pct;
}

/* For locks with a reader-bias policy (lockops.bias): revocations per second and the
 * share of the interval spent unbiased, per write share - why the throughput is what it
 * is (medians over the repeats). */
void scn_bias_table(struct scn_ctx *x, const struct kb_results *rs,
		       const struct kb_sweep *s, unsigned t)
{
	for (unsigned i = 0; i < s->nlocks; i++) {
		const struct lockops *o = s->locks[i];

		if (o->bias == NULL)
			continue;
		scn_say(x, "\n%s bias policy (revocations/s | %% of the time unbiased):\n",
			o->name);
		for (int k = 0; k < 2; k++) {
			scn_say(x, "%-24s", k ? "  % unbiased" : "  revocations/s");
			for (unsigned w = 0; w < s->nwrite; w++) {
				const struct kb_config *c = scn_find_cfg(rs, o, t, s->write[w], -1);
				double v = c ? kb_metric_median(rs, c, k ? g_unbiased : g_revs) : NAN;

				if (isnan(v))
					scn_say(x, " %8s", "-");
				else
					scn_say(x, " %8.*f", k ? 1 : 0, v);
			}
			scn_say(x, "\n");
		}
	}
}
