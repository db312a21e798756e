/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenario.c - the experiments kernel developers ran when they argued about locks,
 * re-run in userspace with klock and its peers, and the tour (`klbench` alone) that
 * strings the key ones together. Each scenario first says what it shows, then runs,
 * then prints its tables and what the numbers say (ratios computed in the same run,
 * never against remembered figures). Locks a scenario cannot do without are "needed"
 * (it refuses to run, naming them: exit status 4); others are "wanted" (it says which
 * stand-in it uses, or which row is missing).
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <klock/hashlock.h>

#include "cli.h"
#include "ministat.h"

/* Seconds a run costs besides its measured interval (threads, join, verification). */
#define SCN_RUN_OVERHEAD 0.03
/* Shortest measured interval a budget may shrink a run to. */
#define SCN_MIN_DURATION 0.05
/* Warm-up in scenarios (shorter than run's default: budgets are tight). */
#define SCN_WARMUP 0.05
/* Repeats where a scenario compares with ministat (it needs at least 3). */
#define SCN_REPEATS 5
/* Isolated writes per writer-cost point, and the idle gap before each. */
#define SCN_WRITER_SAMPLES 10
#define SCN_WRITER_GAP 0.005

struct scn_ctx {
	struct kb_cli *cli;
	const char *name;
	const char *outdir;   /* NULL: print only */
	FILE *txt;            /* a copy of what is printed, in outdir */
	double budget;        /* seconds this scenario should take */
	bool tour;
	int status;
};

struct scenario {
	const char *name;
	const char *title;
	const char *story;
	double budget;        /* default seconds when run alone */
	double tour_budget;   /* seconds in the tour; 0: not in it */
	void (*run)(struct scn_ctx *x);
};

/* ---- printing and files -------------------------------------------------------------- */

static void say(struct scn_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(struct scn_ctx *x, const char *fmt, ...)
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

static void say_table(struct scn_ctx *x, const struct kb_results *rs)
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
static void write_files(struct scn_ctx *x, const struct kb_results *rs, const char *suffix,
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

static const struct lockops *need(struct scn_ctx *x, const char *name)
{
	const struct lockops *o = lockops_find(name);

	if (o == NULL) {
		say(x, "scenario %s needs %s, not built in (`klbench list` shows what is)\n",
		    x->name, name);
		x->status = KB_EXIT_UNAVAILABLE;
	}
	return o;
}

/* `name`, or `fallback` with a note saying it stands in. */
static const struct lockops *want(struct scn_ctx *x, const char *name, const char *fallback)
{
	const struct lockops *o = lockops_find(name);

	if (o != NULL || fallback == NULL)
		return o;
	o = lockops_find(fallback);
	if (o != NULL)
		say(x, "note: %s is not built in; %s stands in for it\n", name, fallback);
	return o;
}

static void add_if_built(struct kb_sweep *s, const char *name)
{
	const struct lockops *o = lockops_find(name);

	for (unsigned i = 0; i < s->nlocks; i++)
		if (s->locks[i] == o)
			return;
	if (o != NULL && s->nlocks < KB_MAX_LOCKS)
		s->locks[s->nlocks++] = o;
}

static void note_missing(struct scn_ctx *x, const char *const *names, size_t n)
{
	bool any = false;

	for (size_t i = 0; i < n; i++) {
		if (lockops_find(names[i]) != NULL)
			continue;
		say(x, "%s%s", any ? ", " : "note: not built in (rows missing): ", names[i]);
		any = true;
	}
	if (any)
		say(x, "\n");
}

/* ---- sweeps ---------------------------------------------------------------------------- */

/* Defaults, then what the user set on the command line that a scenario may take. */
static void sweep_init(struct scn_ctx *x, struct kb_sweep *s)
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
static unsigned sweep_go(struct scn_ctx *x, struct kb_sweep *s, struct kb_results *rs,
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
		say(x, "FAILED: %u run(s) did not verify (see the messages above)\n", failed);
		x->status = KB_EXIT_VERIFY;
	}
	return failed;
}

/* The run of `ops` in `rs` closest to the given threads/write%/stripes (first match). */
static const struct kb_config *find_cfg(const struct kb_results *rs, const struct lockops *ops,
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
static void compare_cfgs(struct scn_ctx *x, const struct kb_results *rs,
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
		say(x, "(ministat needs at least 3 repeats of each: use -r 3 or more)\n");
	for (int i = 0; i < n; i++)
		ms_set_free(&sets[i]);
}

static const char *met(bool ok)
{
	return ok ? "met" : "NOT met";
}

/* Thread counts 1, 2, 4, ... up to and including `top`. */
static void doubling(struct kb_sweep *s, unsigned top)
{
	s->nthreads = 0;
	for (unsigned t = 1; t < top && s->nthreads < KB_MAX_AXIS - 1; t *= 2)
		s->threads[s->nthreads++] = t;
	s->threads[s->nthreads++] = top;
}

/* ---- giant-duel ------------------------------------------------------------------------- */

static const char *lock_kind(const struct lockops *o)
{
	if (o->flags & LOCKOPS_SPIN)
		return "spin";
	if (strstr(o->name, "adaptive") != NULL || strcmp(o->name, "kl_mutex") == 0 ||
	    strncmp(o->name, "absl_mutex", 10) == 0)
		return "adaptive";
	return "sleep";
}

static double g_vcsw_s(const struct kb_result *r)
{
	return (double)r->vcsw / r->elapsed;
}

static double g_fair(const struct kb_result *r)
{
	return r->fair_ratio;
}

static double g_wake(const struct kb_result *r)
{
	return r->wakes_per_acq;
}

static void duel_table(struct scn_ctx *x, const struct kb_results *rs, const struct kb_sweep *s)
{
	char ops[16], vc[16];

	say(x, "%-24s %-8s %9s %7s %9s %9s %8s\n", "lock", "kind", "calls/s", "±sd%",
	    "vcsw/s", "wake/op", "max/min");
	for (unsigned i = 0; i < s->nlocks; i++) {
		const struct kb_config *c = find_cfg(rs, s->locks[i], 2, 100, -1);
		double sd;

		if (c == NULL)
			continue;
		sd = kb_ops_sd_pct(rs, c);
		kb_fmt_rate(ops, sizeof(ops), kb_median_ops(rs, c));
		kb_fmt_rate(vc, sizeof(vc), kb_metric_median(rs, c, g_vcsw_s));
		say(x, "%-24s %-8s %9s %7.1f %9s %9.4f %8.2f\n", c->ops->name, lock_kind(c->ops),
		    ops, sd, vc, kb_metric_median(rs, c, g_wake), kb_metric_median(rs, c, g_fair));
	}
}

static void duel_floors(struct scn_ctx *x, const struct kb_results *rs)
{
	const struct kb_config *kl = find_cfg(rs, lockops_find("kl_mutex"), 2, 100, -1);
	const struct kb_config *pt = find_cfg(rs, lockops_find("pthread_mutex"), 2, 100, -1);
	double r, v, f;

	if (kl == NULL || pt == NULL) {
		say(x, "floors (issue 3): need kl_mutex and pthread_mutex in the duel; not "
		    "checked\n");
		return;
	}
	r = kb_median_ops(rs, kl) / kb_median_ops(rs, pt);
	v = kb_metric_median(rs, kl, g_vcsw_s) / fmax(1, kb_metric_median(rs, pt, g_vcsw_s));
	f = kb_metric_median(rs, kl, g_fair);
	say(x, "floor (issue 3): kl_mutex calls/s >= 1.5x pthread_mutex: %.2fx  %s\n", r,
	    met(r >= 1.5));
	say(x, "floor (issue 3): kl_mutex voluntary switches <= 1/10 of pthread_mutex's: "
	    "%.3fx  %s\n", v, met(v <= 0.1));
	say(x, "floor (issue 3): fairness max/min <= 4: %.2f  %s\n", f, met(f <= 4));
	compare_cfgs(x, rs, (const struct kb_config *[]){ pt, kl }, 2, "calls/s");
}

static void scn_giant_duel(struct scn_ctx *x)
{
	static const char *const names[] = { "pthread_spin", "ck_spinlock_ticket", "kl_ticket",
		"kl_mcs", "tbb_spin_mutex", "tbb_queuing_mutex", "pthread_mutex", "std_mutex",
		"pthread_mutex_adaptive", "absl_mutex", "kl_mutex" };
	struct kb_sweep s;
	struct kb_results rs = { 0 };

	sweep_init(x, &s);
	if (x->cli->set_locks) {
		memcpy(s.locks, x->cli->sweep.locks, sizeof(s.locks));
		s.nlocks = x->cli->sweep.nlocks;
	} else {
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			add_if_built(&s, names[i]);
		note_missing(x, names, sizeof(names) / sizeof(names[0]));
	}
	s.threads[0] = 2;
	s.write[0] = 100;
	s.cs[0] = 1;
	s.repeats = SCN_REPEATS;
	sweep_go(x, &s, &rs, 1.0);
	say(x, "\n2 threads, one lock, a one-word critical section, no think time; medians "
	    "of %u interleaved repeats of %.2fs (±sd%% = how repeatable)\n", s.repeats,
	    s.base.duration);
	duel_table(x, &rs, &s);
	say(x, "\n");
	duel_floors(x, &rs);
	write_files(x, &rs, "", false);
	kb_results_free(&rs);
}

/* ---- thread-sweep --------------------------------------------------------------------------- */

static void sweep_summary(struct scn_ctx *x, const struct kb_results *rs,
			  const struct kb_sweep *s)
{
	unsigned cpus = kb_cpus(), top = s->threads[s->nthreads - 1];

	say(x, "\n%-24s %14s %14s %14s\n", "lock", "1 thread", "at CPUs", "at max threads");
	for (unsigned i = 0; i < s->nlocks; i++) {
		const struct kb_config *c1 = find_cfg(rs, s->locks[i], 1, s->write[0], -1);
		const struct kb_config *cc = find_cfg(rs, s->locks[i], cpus, s->write[0], -1);
		const struct kb_config *ct = find_cfg(rs, s->locks[i], top, s->write[0], -1);
		char a[16] = "-", b[16] = "-", c[16] = "-";
		double peak = 0, keep;

		for (unsigned t = 0; t < s->nthreads; t++) {
			const struct kb_config *k = find_cfg(rs, s->locks[i], s->threads[t],
							     s->write[0], -1);

			if (k != NULL)
				peak = fmax(peak, kb_median_ops(rs, k));
		}
		keep = ct && peak > 0 ? kb_median_ops(rs, ct) / peak : NAN;

		if (c1)
			kb_fmt_rate(a, sizeof(a), kb_median_ops(rs, c1));
		if (cc)
			kb_fmt_rate(b, sizeof(b), kb_median_ops(rs, cc));
		if (ct)
			kb_fmt_rate(c, sizeof(c), kb_median_ops(rs, ct));
		say(x, "%-24s %14s %14s %14s", s->locks[i]->name, a, b, c);
		if (!isnan(keep) && top > cpus)
			say(x, "  %s (%.0f%% of its peak)",
			    keep < 0.1 ? "COLLAPSES oversubscribed" : "holds up", 100 * keep);
		say(x, "\n");
	}
}

static void sweep_floor(struct scn_ctx *x, const struct kb_results *rs, unsigned top,
			double write)
{
	const struct kb_config *kl = find_cfg(rs, lockops_find("kl_mutex"), top, write, -1);
	const struct kb_config *pt = find_cfg(rs, lockops_find("pthread_mutex"), top, write, -1);
	double r;

	if (kl == NULL || pt == NULL || top <= kb_cpus())
		return;
	r = kb_median_ops(rs, kl) / kb_median_ops(rs, pt);
	say(x, "floor (issue 3): %u threads on %u CPUs, kl_mutex >= pthread_mutex: %.2fx  %s\n",
	    top, kb_cpus(), r, met(r >= 1));
}

static void scn_thread_sweep(struct scn_ctx *x)
{
	static const char *const names[] = { "kl_mutex", "kl_ticket", "kl_mcs", "kl_rwlock",
		"pthread_mutex", "pthread_mutex_adaptive", "pthread_spin", "pthread_rwlock",
		"ck_spinlock_ticket", "ck_spinlock_mcs", "absl_mutex", "std_mutex",
		"std_shared_mutex", "tbb_spin_mutex", "tbb_queuing_mutex", "tbb_spin_rw_mutex",
		"tbb_queuing_rw_mutex" };   /* absl_mutex_rw: its WriterLock is absl_mutex's Lock */
	unsigned cpus = kb_cpus();
	struct kb_sweep s;
	struct kb_results rs = { 0 };

	sweep_init(x, &s);
	if (x->cli->set_locks) {
		memcpy(s.locks, x->cli->sweep.locks, sizeof(s.locks));
		s.nlocks = x->cli->sweep.nlocks;
	} else {
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			add_if_built(&s, names[i]);
		note_missing(x, names, sizeof(names) / sizeof(names[0]));
	}
	if (x->cli->set_threads) {
		memcpy(s.threads, x->cli->sweep.threads, sizeof(s.threads));
		s.nthreads = x->cli->sweep.nthreads;
	} else {
		doubling(&s, cpus * 2 > 8 ? cpus * 2 : 8);
	}
	s.write[0] = 100;
	sweep_go(x, &s, &rs, 1.0);
	say(x, "\nevery operation writes (exclusive), cs=4 words; %.2fs per point; usr/sys = "
	    "CPU-seconds per second of the workers (real time = the interval)\n",
	    s.base.duration);
	say_table(x, &rs);
	sweep_summary(x, &rs, &s);
	sweep_floor(x, &rs, s.threads[s.nthreads - 1], 100);
	write_files(x, &rs, "", true);
	kb_results_free(&rs);
}

/* ---- crossover -------------------------------------------------------------------------- */

/* Rows: locks; columns: write %; cells: median operations/s. */
static void pivot(struct scn_ctx *x, const struct kb_results *rs, const struct kb_sweep *s,
		  unsigned threads)
{
	char v[16];

	say(x, "%-24s", "ops/s at write%");
	for (unsigned w = 0; w < s->nwrite; w++)
		say(x, " %8g", s->write[w]);
	say(x, "\n");
	for (unsigned i = 0; i < s->nlocks; i++) {
		say(x, "%-24s", s->locks[i]->name);
		for (unsigned w = 0; w < s->nwrite; w++) {
			const struct kb_config *c = find_cfg(rs, s->locks[i], threads, s->write[w], -1);

			snprintf(v, sizeof(v), "-");
			if (c != NULL)
				kb_fmt_rate(v, sizeof(v), kb_median_ops(rs, c));
			say(x, " %8s", v);
		}
		say(x, "\n");
	}
}

static double ops_at(const struct kb_results *rs, const struct lockops *o, unsigned t, double w)
{
	const struct kb_config *c = o ? find_cfg(rs, o, t, w, -1) : NULL;

	return c ? kb_median_ops(rs, c) : NAN;
}

/*
 * The reference "classic rwlock": kl_rwlock when built, else pthread_rwlock (what a user
 * would otherwise pick), else the first classic rwlock of the set.
 */
static const struct lockops *classic_ref(const struct kb_sweep *s)
{
	const struct lockops *first = NULL;

	for (const char *const *n = (const char *const[]){ "kl_rwlock", "pthread_rwlock", NULL };
	     *n; n++)
		for (unsigned i = 0; i < s->nlocks; i++)
			if (strcmp(s->locks[i]->name, *n) == 0)
				return s->locks[i];
	for (unsigned i = 0; i < s->nlocks && first == NULL; i++) {
		const struct lockops *o = s->locks[i];

		if ((o->flags & LOCKOPS_RW) && !(o->flags & (LOCKOPS_READ_BIASED |
			LOCKOPS_NO_EXCLUSION | LOCKOPS_READ_RETRY)))
			first = o;
	}
	return first;
}

static void crossover_points(struct scn_ctx *x, const struct kb_results *rs,
			     const struct kb_sweep *s, unsigned t)
{
	const struct lockops *ref = classic_ref(s);

	if (ref == NULL) {
		say(x, "no classic rwlock in the set: no crossover to report\n");
		return;
	}
	say(x, "\ncrossover against %s (the classic rwlock):\n", ref->name);
	for (unsigned i = 0; i < s->nlocks; i++) {
		const struct lockops *o = s->locks[i];
		int last = -1;
		bool mixed = false;

		if (o == ref || !(o->flags & (LOCKOPS_READ_BIASED | LOCKOPS_READ_RETRY)))
			continue;
		for (unsigned w = 0; w < s->nwrite; w++)
			if (ops_at(rs, o, t, s->write[w]) > ops_at(rs, ref, t, s->write[w]))
				last = (int)w;
		for (int w = 0; w < last; w++)
			mixed |= !(ops_at(rs, o, t, s->write[w]) > ops_at(rs, ref, t, s->write[w]));
		if (last < 0)
			say(x, "  %-22s never wins (loses already at %g%% writes)", o->name,
			    s->write[0]);
		else if (last == (int)s->nwrite - 1)
			say(x, "  %-22s still wins at %g%% writes", o->name, s->write[last]);
		else
			say(x, "  %-22s wins up to %g%% writes, loses from %g%% on: the crossover lies "
			    "between", o->name, s->write[last], s->write[last + 1]);
		say(x, "%s\n", mixed ? " (not monotonic below it: noise; rerun with -r 5)" : "");
	}
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
static void bias_table(struct scn_ctx *x, const struct kb_results *rs,
		       const struct kb_sweep *s, unsigned t)
{
	for (unsigned i = 0; i < s->nlocks; i++) {
		const struct lockops *o = s->locks[i];

		if (o->bias == NULL)
			continue;
		say(x, "\n%s bias policy (revocations/s | %% of the time unbiased):\n", o->name);
		for (int k = 0; k < 2; k++) {
			say(x, "%-24s", k ? "  % unbiased" : "  revocations/s");
			for (unsigned w = 0; w < s->nwrite; w++) {
				const struct kb_config *c = find_cfg(rs, o, t, s->write[w], -1);
				double v = c ? kb_metric_median(rs, c, k ? g_unbiased : g_revs) : NAN;

				if (isnan(v))
					say(x, " %8s", "-");
				else
					say(x, " %8.*f", k ? 1 : 0, v);
			}
			say(x, "\n");
		}
	}
}

static void crossover_floors(struct scn_ctx *x, const struct kb_results *rs, unsigned t)
{
	static const char *const fast[] = { "kl_rmlock", "kl_pcpu_rwsem" };
	const struct lockops *rw = lockops_find("kl_rwlock");

	for (size_t i = 0; i < 2; i++) {
		const struct lockops *o = lockops_find(fast[i]);

		if (o == NULL || rw == NULL)
			continue;
		for (double w = 0; w <= 1; w += 1) {
			double r = ops_at(rs, o, t, w) / ops_at(rs, rw, t, w);

			if (!isnan(r))
				say(x, "floor (issue 4): %s at %g%% writes >= 5x kl_rwlock: %.2fx  %s\n",
				    fast[i], w, r, met(r >= 5));
		}
	}
}

static void scn_crossover(struct scn_ctx *x)
{
	static const double writes[] = { 0, 0.1, 1, 5, 10, 25, 50, 100 };
	static const double tour_writes[] = { 0, 0.1, 1, 10, 50, 100 };
	struct kb_sweep s;
	struct kb_results rs = { 0 };
	unsigned t;

	sweep_init(x, &s);
	if (x->cli->set_locks) {
		memcpy(s.locks, x->cli->sweep.locks, sizeof(s.locks));
		s.nlocks = x->cli->sweep.nlocks;
	} else {
		kb_parse_locks("rw", s.locks, KB_MAX_LOCKS, &s.nlocks);
	}
	if (x->cli->set_write) {
		memcpy(s.write, x->cli->sweep.write, sizeof(s.write));
		s.nwrite = x->cli->sweep.nwrite;
	} else {
		s.nwrite = x->tour ? 6 : 8;
		memcpy(s.write, x->tour ? tour_writes : writes, s.nwrite * sizeof(double));
	}
	s.threads[0] = x->cli->set_threads ? x->cli->sweep.threads[0] : kb_cpus();
	t = s.threads[0];
	sweep_go(x, &s, &rs, 1.0);
	say(x, "\n%u threads, cs=4 words, %.2fs per point\n", t, s.base.duration);
	pivot(x, &rs, &s, t);
	bias_table(x, &rs, &s, t);
	crossover_points(x, &rs, &s, t);
	crossover_floors(x, &rs, t);
	write_files(x, &rs, "", true);
	kb_results_free(&rs);
}

/* ---- rwsem-table -------------------------------------------------------------------------- */

static void scn_rwsem_table(struct scn_ctx *x)
{
	static const double writes[] = { 0, 1, 10, 50 };
	static const char *const wl[] = { "read-only", "1% writes", "10% writes", "50% writes" };
	static const char *const names[] = { "kl_pcpu_rwsem", "kl_rmlock", "kl_rwlock" };
	struct kb_sweep s;
	struct kb_results rs = { 0 };

	sweep_init(x, &s);
	if (x->cli->set_locks) {
		memcpy(s.locks, x->cli->sweep.locks, sizeof(s.locks));
		s.nlocks = x->cli->sweep.nlocks;
	} else {
		note_missing(x, names, 3);
		kb_parse_locks("rwlock", s.locks, KB_MAX_LOCKS, &s.nlocks);
	}
	s.nwrite = 4;
	memcpy(s.write, writes, sizeof(writes));
	s.threads[0] = x->cli->set_threads ? x->cli->sweep.threads[0] : kb_cpus();
	s.repeats = SCN_REPEATS;
	sweep_go(x, &s, &rs, 1.0);
	say(x, "\n%u threads; Mops/s over %u repeats of %.2fs (lockperf's columns)\n",
	    s.threads[0], s.repeats, s.base.duration);
	say(x, "%-24s %-11s %9s %9s %9s %9s %9s\n", "lock", "workload", "mean", "variance",
	    "sigma", "max", "min");
	for (unsigned i = 0; i < s.nlocks; i++) {
		for (unsigned w = 0; w < s.nwrite; w++) {
			const struct kb_config *c = find_cfg(&rs, s.locks[i], s.threads[0],
							     s.write[w], -1);
			struct ms_set set;

			if (c == NULL)
				continue;
			ms_set_init(&set, "");
			for (size_t k = 0; k < rs.n; k++)
				if (kb_config_same(&rs.v[k].cfg, c))
					ms_set_add(&set, rs.v[k].ops_per_s / 1e6);
			ms_set_finish(&set);
			say(x, "%-24s %-11s %9.3f %9.4f %9.3f %9.3f %9.3f\n", s.locks[i]->name, wl[w],
			    ms_avg(&set), set.n > 1 ? ms_var(&set) : 0,
			    set.n > 1 ? ms_stddev(&set) : 0, ms_max(&set), ms_min(&set));
			ms_set_free(&set);
		}
	}
	write_files(x, &rs, "", true);
	kb_results_free(&rs);
}

/* ---- rmlock-vs-rwlock ---------------------------------------------------------------------- */

/* Part 2: a write lock+unlock while 0..CPUs threads run read loops, against membarrier. */
static void writer_growth(struct scn_ctx *x, const struct lockops *rw, const struct lockops *rm)
{
	unsigned cpus = kb_cpus(), pts[KB_MAX_AXIS], np = 0;
	char a[16], b[16], c[16];

	pts[np++] = 0;
	for (unsigned n = 1; n < cpus && np < KB_MAX_AXIS - 1; n *= 2)
		pts[np++] = n;
	pts[np++] = cpus;
	say(x, "\nwrite side: median of %d isolated write lock+unlock pairs (%.0f ms idle "
	    "before each) while N threads run read loops\n", SCN_WRITER_SAMPLES,
	    SCN_WRITER_GAP * 1e3);
	say(x, "%8s %14s %14s %14s %9s\n", "readers", rw->name, rm->name, "kl_fence_heavy",
	    "rm/fence");
	for (unsigned i = 0; i < np; i++) {
		unsigned n = pts[i];
		double tw = kb_writer_cost(rw, NULL, n, SCN_WRITER_SAMPLES, SCN_WRITER_GAP, NULL);
		double tm = kb_writer_cost(rm, NULL, n, SCN_WRITER_SAMPLES, SCN_WRITER_GAP, NULL);
		double tf = kb_writer_cost(NULL, rm, n, SCN_WRITER_SAMPLES, SCN_WRITER_GAP, NULL);

		kb_fmt_ns(a, sizeof(a), tw);
		kb_fmt_ns(b, sizeof(b), tm);
		kb_fmt_ns(c, sizeof(c), tf);
		say(x, "%8u %14s %14s %14s %9.2f\n", n, a, b, c, tm / tf);
		if (n == 2 && strcmp(rm->name, "kl_rmlock") == 0)
			say(x, "floor (issue 4): kl_rmlock write with 2 readers <= 3x one "
			    "membarrier: %.2fx  %s\n", tm / tf, met(tm / tf <= 3));
	}
}

static void scn_rmlock_vs_rwlock(struct scn_ctx *x)
{
	const struct lockops *rm = need(x, "kl_rmlock");
	const struct lockops *rw;
	struct kb_sweep s;
	struct kb_results rs = { 0 };

	if (rm == NULL)
		return;
	rw = want(x, "kl_rwlock", "pthread_rwlock");
	if (rw == NULL)
		return;
	sweep_init(x, &s);
	s.locks[0] = rw;
	s.locks[1] = rm;
	s.nlocks = 2;
	s.threads[0] = x->cli->set_threads ? x->cli->sweep.threads[0] : kb_cpus();
	s.write[0] = x->cli->set_write ? x->cli->sweep.write[0] : 0.1;
	s.repeats = SCN_REPEATS;
	sweep_go(x, &s, &rs, 0.7);
	say(x, "\nread side: %u threads, %g%% writes, cs=4, %u interleaved repeats of %.2fs\n",
	    s.threads[0], s.write[0], s.repeats, s.base.duration);
	say_table(x, &rs);
	bias_table(x, &rs, &s, s.threads[0]);
	compare_cfgs(x, &rs, (const struct kb_config *[]){
			     find_cfg(&rs, rw, s.threads[0], s.write[0], -1),
			     find_cfg(&rs, rm, s.threads[0], s.write[0], -1) }, 2, "ops/s");
	writer_growth(x, rw, rm);
	write_files(x, &rs, "", false);
	kb_results_free(&rs);
}

/* ---- hashed-queue ---------------------------------------------------------------------------- */

/* The stripe count kl_hashlock picks by itself (nstripes 0), so the striped kl_mutex row
 * and kl_hashlock compare like with like. */
static unsigned auto_stripes(void)
{
	struct kl_hashlock h;
	unsigned n = 8 * kb_cpus();

	if (kl_hashlock_init(&h, 0) == 0) {
		n = kl_hashlock_nstripes(&h);
		kl_hashlock_destroy(&h);
	}
	return n;
}

static double g_lockpct(const struct kb_result *r)
{
	return r->lock_pct;
}

static double g_lkst(const struct kb_result *r)
{
	return r->lockstat_wait_pct;
}

static double g_lkct(const struct kb_result *r)
{
	return r->lockstat_contended_pct;
}

static void hashed_summary(struct scn_ctx *x, const struct kb_results *rs,
			   const struct lockops *mx, const struct lockops *hl, unsigned t)
{
	const struct kb_config *g = find_cfg(rs, mx, t, 100, 1);
	const struct kb_config *st = find_cfg(rs, mx, t, 100, (int)auto_stripes());
	const struct kb_config *h = hl ? find_cfg(rs, hl, t, 100, 0) : NULL;
	const struct kb_config *best = h ? h : st;

	if (g == NULL || best == NULL)
		return;
	say(x, "\n%s over one global %s: %.2fx the throughput; time inside lock calls "
	    "%.1f%% -> %.1f%% of the threads' time\n", h ? hl->name : "striping", mx->name,
	    kb_median_ops(rs, best) / kb_median_ops(rs, g), kb_metric_median(rs, g, g_lockpct),
	    kb_metric_median(rs, best, g_lockpct));
	if (g->lockstat && strcmp(mx->family, "klock") != 0)
		say(x, "lockstat: sees klock's locks only (%s is not instrumented)\n", mx->name);
	else if (g->lockstat)
		say(x, "lockstat: %.2f%% of the time waiting -> %.2f%%; contended acquisitions "
		    "%.2f%% -> %.2f%%\n", kb_metric_median(rs, g, g_lkst),
		    kb_metric_median(rs, best, g_lkst), kb_metric_median(rs, g, g_lkct),
		    kb_metric_median(rs, best, g_lkct));
	else
		say(x, "lockstat: %s (the %% waiting column needs it)\n", kb_lockstat_why());
	if (h != NULL && t == 2 && strcmp(mx->name, "kl_mutex") == 0) {
		double r = kb_median_ops(rs, h) / kb_median_ops(rs, g);

		say(x, "floor (issue 5): 2 threads, kl_hashlock >= 1.8x one global kl_mutex: "
		    "%.2fx  %s\n", r, met(r >= 1.8));
	}
}

static void scn_hashed_queue(struct scn_ctx *x)
{
	const struct lockops *mx = want(x, "kl_mutex", "pthread_mutex");
	const struct lockops *hl = lockops_find("kl_hashlock");
	struct kb_sweep s;
	struct kb_results rs = { 0 };

	if (mx == NULL)
		return;
	if (hl == NULL)
		say(x, "note: kl_hashlock is not built in; klbench stripes %u %s instances over "
		    "the table itself instead\n", auto_stripes(), mx->name);
	sweep_init(x, &s);
	s.locks[0] = mx;
	s.nlocks = 1;
	if (hl != NULL)
		s.locks[s.nlocks++] = hl;
	add_if_built(&s, "pthread_mutex_table");   /* the table a user would write */
	s.base.workload = KB_WL_TABLE;
	s.stripes[0] = 1;
	s.stripes[1] = auto_stripes();
	s.nstripes = 2;
	s.write[0] = 100;
	s.threads[0] = x->cli->set_threads ? x->cli->sweep.threads[0] : kb_cpus();
	s.repeats = 3;
	if (kb_lockstat_available())
		s.base.lockstat = true;
	sweep_go(x, &s, &rs, 1.0);
	say(x, "\n%u threads, random keys over %u buckets, every operation updates its "
	    "bucket (cs=4), %u repeats of %.2fs\n", s.threads[0], s.base.keys, s.repeats,
	    s.base.duration);
	say_table(x, &rs);
	hashed_summary(x, &rs, mx, hl, s.threads[0]);
	write_files(x, &rs, "", false);
	kb_results_free(&rs);
}

/* ---- the catalogue ------------------------------------------------------------------------ */

static void scn_floors(struct scn_ctx *x);

static const struct scenario kb_scenarios[] = {
	{ "giant-duel", "two threads dueling for one lock",
	  "Matthew Dillon's \"Giant\" duel (DragonFly BSD): two threads fight over one lock\n"
	  "with almost nothing inside it. A spinlock hands the lock back and forth through\n"
	  "the cache; a sleeping mutex puts the loser to sleep and pays a futex wake-up and\n"
	  "two context switches per hand-off; an adaptive mutex spins while the owner runs\n"
	  "and sleeps only when that does not pay. Look at calls/s, voluntary context\n"
	  "switches (vcsw/s, wake/op), fairness (max/min acquisitions per thread) and how\n"
	  "repeatable each lock is (±sd% over repeats).\n",
	  15, 12, scn_giant_duel },
	{ "thread-sweep", "throughput and real/user/sys from 1 thread to oversubscribed",
	  "The OpenBSD rwlock sweep: the same exclusive workload at 1, 2, 4 ... threads, up to\n"
	  "twice the CPUs and at least 8. Past the CPU count a lock holder gets preempted:\n"
	  "pure spinners (MCS, ticket) then burn their time slices waiting for a thread that\n"
	  "is not running, and their throughput collapses; sleeping locks lose less, adaptive\n"
	  "ones should lose least. usr/sys show where the time goes (the OpenBSD win was a\n"
	  "system-time win).\n",
	  30, 16, scn_thread_sweep },
	{ "crossover", "throughput against write share for every rwlock-like lock",
	  "Where do reader-biased locks stop winning? Every lock with a read side runs the\n"
	  "same workload at 0% to 100% writes on all CPUs. Per-CPU and rendezvous readers\n"
	  "(rmlock, percpu-rwsem, brlock, RCU) win big when writes are rare and lose when a\n"
	  "writer's rendezvous (membarrier, a scan of every reader slot, a grace period) comes\n"
	  "too often. The crossover is reported against the classic rwlock.\n",
	  30, 16, scn_crossover },
	{ "rmlock-vs-rwlock", "FreeBSD rmlock(9): read-mostly with rare writes, then the writer's bill",
	  "FreeBSD's rmlock thread: readers of a read-mostly lock should touch nothing shared.\n"
	  "Part 1: a read-mostly load on all CPUs, rmlock against rwlock, 5 interleaved\n"
	  "repeats, compared with ministat's Student's t. Part 2: the writer pays - its\n"
	  "rendezvous (membarrier: an IPI to every CPU running one of our threads) grows with\n"
	  "the number of threads running, shown next to one bare membarrier.\n",
	  25, 10, scn_rmlock_vs_rwlock },
	{ "rwsem-table", "lockperf-style table: mean/variance/sigma/max/min per lock and workload",
	  "The percpu-rwsem / lockperf thread compared kernels with tables of mean, variance,\n"
	  "sigma, max and min over repeated runs. Here: every rwlock that excludes, four\n"
	  "workloads from read-only to 50% writes, 5 repeats each, throughput in Mops/s.\n"
	  "A low sigma is as important as a high mean: it says the number will hold.\n",
	  30, 0, scn_rwsem_table },
	{ "hashed-queue", "one global lock against a hashed lock table over the same work",
	  "The NetBSD page-queue thread: one global lock serialised every CPU's updates; hashing\n"
	  "the lock by object address spreads them. Threads update random buckets of one table\n"
	  "under one global mutex, under that mutex striped over the table, under 64 hashed\n"
	  "glibc mutexes (the table a user would write), and under kl_hashlock (auto stripes)\n"
	  "when built. The share of time spent waiting for locks should drop\n"
	  "with striping (lockstat's \"% of time waiting\" when lockstat is built; klbench's own\n"
	  "time-inside-lock-calls always).\n",
	  15, 8, scn_hashed_queue },
	{ "floors", "every performance floor of the lock issues, measured side by side",
	  "The performance floors the lock issues set (adaptive mutex/rwlock, rmlock and\n"
	  "percpu-rwsem, hashed locks and lockstat), each measured in this one run against its\n"
	  "baseline, with the ratio and whether it is met. Floors whose lock is not built in\n"
	  "say so. On a shared or small machine read them as indications; rerun with more\n"
	  "repeats (-r) before quoting one.\n",
	  60, 0, scn_floors },
};

#define KB_NSCENARIOS (sizeof(kb_scenarios) / sizeof(kb_scenarios[0]))

static int open_outdir(struct scn_ctx *x)
{
	char path[4096];

	if (x->outdir == NULL)
		return 0;
	if (kb_mkdirs(x->outdir) < 0) {
		perror(x->outdir);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s.txt", x->outdir, x->name);
	x->txt = fopen(path, "w");
	return 0;
}

static int run_scenario(const struct scenario *sc, struct kb_cli *cli, bool tour)
{
	struct scn_ctx x = { .cli = cli, .name = sc->name, .outdir = cli->outdir, .tour = tour,
			     .budget = tour ? sc->tour_budget : sc->budget };
	char machine[512];

	if (cli->budget > 0 && !tour)
		x.budget = cli->budget;
	if (open_outdir(&x) < 0)
		return 1;
	kb_machine(machine, sizeof(machine));
	say(&x, "== %s: %s ==\n%s", sc->name, sc->title, sc->story);
	say(&x, "machine: %s\ncommand: %s\n", machine, kb_cmdline);
	sc->run(&x);
	say(&x, "\n");
	if (x.txt != NULL)
		fclose(x.txt);
	return x.status;
}

static const struct scenario *scenario_find(const char *name)
{
	for (size_t i = 0; i < KB_NSCENARIOS; i++)
		if (strcmp(kb_scenarios[i].name, name) == 0)
			return &kb_scenarios[i];
	return NULL;
}

int kb_scenario_main(int argc, char **argv)
{
	struct kb_cli cli;
	const struct scenario *sc;
	int rc = kb_cli_parse(&cli, argc, argv, "scenario");

	if (rc != 0)
		return rc;
	if (cli.argc != 1 || strcmp(cli.argv[0], "list") == 0) {
		printf("usage: klbench scenario NAME [options]   (options: klbench --help)\n\n");
		for (size_t i = 0; i < KB_NSCENARIOS; i++)
			printf("  %-18s %s\n", kb_scenarios[i].name, kb_scenarios[i].title);
		return cli.argc == 1 ? 0 : 2;
	}
	sc = scenario_find(cli.argv[0]);
	if (sc == NULL) {
		fprintf(stderr, "klbench: unknown scenario '%s' (klbench scenario list)\n",
			cli.argv[0]);
		return 2;
	}
	return run_scenario(sc, &cli, false);
}

/* ---- the tour ------------------------------------------------------------------------------- */

int kb_tour_main(int argc, char **argv)
{
	struct kb_cli cli;
	char dir[256], stamp[32];
	time_t now = time(NULL);
	int rc = kb_cli_parse(&cli, argc, argv, ""), worst = 0;

	if (rc != 0)
		return rc;
	if (cli.outdir == NULL) {
		strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&now));
		snprintf(dir, sizeof(dir), "results/%s", stamp);
		cli.outdir = dir;
	}
	printf("klbench tour: the key scenarios in about a minute; tables below, CSV/JSON/"
	       "plots in %s/\n\n", cli.outdir);
	for (size_t i = 0; i < KB_NSCENARIOS; i++) {
		const struct scenario *sc = &kb_scenarios[i];

		if (sc->tour_budget <= 0)
			continue;
		rc = run_scenario(sc, &cli, true);
		if (rc == KB_EXIT_VERIFY || (rc != 0 && rc != KB_EXIT_UNAVAILABLE))
			worst = rc;
	}
	printf("results: %s/ (per scenario: .txt tables, .csv, .json, .svg plots, raw/ for "
	       "klbench compare)\n", cli.outdir);
	return worst;
}

/* ---- floors ------------------------------------------------------------------------------ */

/* One floor's verdict line. `value` NAN: a lock it needs is not built in. */
static void floor_line(struct scn_ctx *x, const char *issue, const char *what, double value,
		       bool ok, const char *unit)
{
	if (isnan(value))
		say(x, "  [%s] %-64s %10s  n/a (lock not built in)\n", issue, what, "-");
	else
		say(x, "  [%s] %-64s %9.2f%-1s  %s\n", issue, what, value, unit, met(ok));
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_d(double *v, unsigned n)
{
	qsort(v, n, sizeof(double), cmp_dbl);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static const struct lockops *lk(const char *name)
{
	return lockops_find(name);
}

/* Median over `reps` interleaved repeats of each lock's uncontended pair. */
/* Median ns per uncontended pair of each lock, run by the adapter's own loop (the calls
 * inlined as an application compiles them), or through the ops table where an adapter
 * has no loop (`via_table` set). */
static void pairs(const struct lockops *const *locks, const bool *read, unsigned n,
		  unsigned reps, double *out, bool *via_table)
{
	double v[KB_MAX_AXIS][SCN_REPEATS * 4];

	for (unsigned i = 0; i < n; i++)
		via_table[i] = locks[i] != NULL &&
			       (read[i] ? locks[i]->read_pair_loop : locks[i]->write_pair_loop) == NULL;
	for (unsigned r = 0; r < reps; r++)
		for (unsigned i = 0; i < n; i++)
			v[i][r] = locks[i] == NULL ? NAN
				  : via_table[i] ? kb_pair_ns(locks[i], read[i], 1u << 20)
						 : kb_pair_inline_ns(locks[i], read[i], 1u << 20);
	for (unsigned i = 0; i < n; i++) {
		struct ms_set set;

		out[i] = NAN;
		if (locks[i] == NULL)
			continue;
		ms_set_init(&set, "");
		for (unsigned r = 0; r < reps; r++)
			ms_set_add(&set, v[i][r]);
		ms_set_finish(&set);
		out[i] = set.v[set.n / 2];
		ms_set_free(&set);
	}
}

enum { P_LOOP, P_KLM, P_PTM, P_URCU, P_RM, P_PC, P_PTRW, P_CKRW, P_N };

static void floors_pairs(struct scn_ctx *x, unsigned reps)
{
	const struct lockops *l[P_N] = { lk("busted"), lk("kl_mutex"), lk("pthread_mutex"),
		lk("urcu_memb"), lk("kl_rmlock"), lk("kl_pcpu_rwsem"), lk("pthread_rwlock"),
		lk("ck_rwlock") };
	const bool rd[P_N] = { false, false, false, true, true, true, true, true };
	double ns[P_N];
	bool table[P_N], any = false;

	pairs(l, rd, P_N, reps, ns, table);
	for (int i = P_KLM; i < P_N; i++)
		any |= table[i];
	say(x, "uncontended pairs, each lock's calls inlined in a loop as an application compiles "
	    "them (ns, median of %u; the empty loop: %.1f): kl_mutex %.1f, pthread_mutex %.1f, "
	    "urcu read %.1f, kl_rmlock read %.1f, kl_pcpu_rwsem read %.1f, pthread_rwlock read "
	    "%.1f, ck_rwlock read %.1f%s\n", reps, ns[P_LOOP], ns[P_KLM], ns[P_PTM], ns[P_URCU],
	    ns[P_RM], ns[P_PC], ns[P_PTRW], ns[P_CKRW],
	    any ? " (some through the adapter table: no loop)" : "");
	floor_line(x, "3", "uncontended kl_mutex pair / pthread_mutex pair <= 1",
		   ns[P_KLM] / ns[P_PTM], ns[P_KLM] <= ns[P_PTM], "x");
	for (int i = P_RM; i <= P_PC; i++) {
		const char *name = i == P_RM ? "kl_rmlock" : "kl_pcpu_rwsem";
		double lim = i == P_RM ? 1.5 : 2.5, r = ns[i] / ns[P_URCU];
		char what[96];

		snprintf(what, sizeof(what), "%s read pair / urcu-memb's <= %.1f", name, lim);
		floor_line(x, "4", what, r, r <= lim, "x");
	}
	for (int i = P_RM; i <= P_PC; i++) {
		const char *name = i == P_RM ? "kl_rmlock" : "kl_pcpu_rwsem";
		double a = ns[P_PTRW] / ns[i], b = ns[P_CKRW] / ns[i];
		char what[96];

		snprintf(what, sizeof(what), "%s read pair: pthread_rwlock's / it >= 5", name);
		floor_line(x, "4", what, a, a >= 5, "x");
		snprintf(what, sizeof(what), "%s read pair: ck_rwlock's / it >= 5", name);
		floor_line(x, "4", what, b, b >= 5, "x");
	}
}

/* A small sweep for one floor; `names` NULL-terminated; only built locks run. */
static void mini(struct scn_ctx *x, struct kb_results *rs, const char *const *names,
		 const unsigned *threads, unsigned nt, double write, unsigned reps, double share)
{
	struct kb_sweep s;

	sweep_init(x, &s);
	s.nlocks = 0;
	for (; *names; names++)
		add_if_built(&s, *names);
	if (s.nlocks == 0)
		return;
	memcpy(s.threads, threads, nt * sizeof(unsigned));
	s.nthreads = nt;
	s.write[0] = write;
	s.cs[0] = write == 100 && threads[0] == 2 ? 1 : s.cs[0];
	s.repeats = reps;
	sweep_go(x, &s, rs, share);
}

static double ratio(const struct kb_results *rs, const char *a, const char *b, unsigned t,
		    double w)
{
	return ops_at(rs, lk(a), t, w) / ops_at(rs, lk(b), t, w);
}

static void floors_mutex(struct scn_ctx *x, unsigned reps)
{
	static const char *const duel[] = { "kl_mutex", "pthread_mutex", NULL };
	static const char *const over[] = { "kl_mutex", "pthread_mutex", "kl_ticket", "kl_mcs",
					    NULL };
	unsigned cpus = kb_cpus(), two = 2, ov[2] = { cpus, 4 * cpus };
	struct kb_results d = { 0 }, o = { 0 };
	const struct kb_config *kl, *pt;
	double r;

	mini(x, &d, duel, &two, 1, 100, reps, 0.15);
	kl = find_cfg(&d, lk("kl_mutex"), 2, 100, -1);
	pt = find_cfg(&d, lk("pthread_mutex"), 2, 100, -1);
	r = kl && pt ? kb_median_ops(&d, kl) / kb_median_ops(&d, pt) : NAN;
	floor_line(x, "3", "duel (2 threads, cs=1): kl_mutex / pthread_mutex calls/s >= 1.5",
		   r, r >= 1.5, "x");
	r = kl && pt ? kb_metric_median(&d, kl, g_vcsw_s) /
		       fmax(1, kb_metric_median(&d, pt, g_vcsw_s)) : NAN;
	floor_line(x, "3", "duel: kl_mutex / pthread_mutex voluntary switches <= 0.1", r,
		   r <= 0.1, "x");
	r = kl ? kb_metric_median(&d, kl, g_fair) : NAN;
	floor_line(x, "3", "duel: kl_mutex fairness, max/min acquisitions per thread <= 4", r,
		   r <= 4, "");
	mini(x, &o, over, ov, 2, 100, reps, 0.2);
	r = ratio(&o, "kl_mutex", "pthread_mutex", 4 * cpus, 100);
	floor_line(x, "3", "4x CPUs threads: kl_mutex / pthread_mutex throughput >= 1", r,
		   r >= 1, "x");
	for (int i = 0; i < 2; i++) {
		const char *n = i ? "kl_mcs" : "kl_ticket";
		char what[96];

		r = ops_at(&o, lk(n), 4 * cpus, 100) / ops_at(&o, lk(n), cpus, 100);
		snprintf(what, sizeof(what), "%s at 4x CPUs threads / at CPUs threads (no collapse)",
			 n);
		floor_line(x, "3", what, r, r >= 0.1, "x");
	}
	kb_results_free(&d);
	kb_results_free(&o);
}

static void floors_rw(struct scn_ctx *x, unsigned reps)
{
	static const char *const rwl[] = { "kl_rwlock", "pthread_rwlock", NULL };
	static const char *const rml[] = { "kl_rmlock", "kl_pcpu_rwsem", "kl_rwlock",
					   "pthread_rwlock", NULL };
	unsigned cpus = kb_cpus(), t12[2] = { 1, 2 };
	struct kb_results a = { 0 }, b = { 0 }, c = { 0 }, e = { 0 };
	double r;

	mini(x, &a, rwl, &cpus, 1, 1, reps, 0.08);
	mini(x, &b, rwl, &cpus, 1, 50, reps, 0.08);
	r = ratio(&a, "kl_rwlock", "pthread_rwlock", cpus, 1);
	floor_line(x, "3", "read-mostly (1% writes): kl_rwlock / pthread_rwlock >= 1", r, r >= 1,
		   "x");
	r = ratio(&b, "kl_rwlock", "pthread_rwlock", cpus, 50);
	floor_line(x, "3", "write-heavy (50% writes): kl_rwlock / pthread_rwlock >= 0.8", r,
		   r >= 0.8, "x");
	mini(x, &c, rml, t12, 2, 0, reps, 0.08);
	for (int i = 0; i < 2; i++) {
		const char *n = i ? "kl_pcpu_rwsem" : "kl_rmlock";
		char what[96];

		r = ops_at(&c, lk(n), 2, 0) / ops_at(&c, lk(n), 1, 0);
		snprintf(what, sizeof(what), "read-only scaling: %s 2 threads / 1 thread >= 1.8", n);
		floor_line(x, "4", what, r, r >= 1.8, "x");
	}
	say(x, "       (pthread_rwlock, for scale: %.2fx)\n",
	    ops_at(&c, lk("pthread_rwlock"), 2, 0) / ops_at(&c, lk("pthread_rwlock"), 1, 0));
	mini(x, &e, rml, &cpus, 1, 0, reps, 0.06);
	mini(x, &e, rml, &cpus, 1, 1, reps, 0.06);
	mini(x, &e, rml, &cpus, 1, 50, reps, 0.06);
	for (int i = 0; i < 2; i++) {
		const char *n = i ? "kl_pcpu_rwsem" : "kl_rmlock";
		char what[96];

		for (double w = 0; w <= 1; w++) {
			r = ratio(&e, n, "kl_rwlock", cpus, w);
			snprintf(what, sizeof(what), "%s / kl_rwlock at %g%% writes >= 5", n, w);
			floor_line(x, "4", what, r, r >= 5, "x");
		}
		r = ratio(&e, n, "kl_rwlock", cpus, 50);
		if (!isnan(r))
			say(x, "       %s / kl_rwlock at 50%% writes: %.2fx (it may lose here)\n", n, r);
	}
	kb_results_free(&a);
	kb_results_free(&b);
	kb_results_free(&c);
	kb_results_free(&e);
}

static void floors_writers(struct scn_ctx *x)
{
	const struct lockops *rm = lk("kl_rmlock"), *pc = lk("kl_pcpu_rwsem");
	const struct lockops *host = rm ? rm : lk("pthread_rwlock");
	double fence = host ? kb_writer_cost(NULL, host, 2, SCN_WRITER_SAMPLES, SCN_WRITER_GAP,
					     NULL) : NAN;
	double w = rm ? kb_writer_cost(rm, NULL, 2, SCN_WRITER_SAMPLES, SCN_WRITER_GAP, NULL)
		      : NAN;
	double iso = NAN, bu = NAN;

	if (pc != NULL)
		iso = kb_writer_cost(pc, NULL, 2, SCN_WRITER_SAMPLES, SCN_WRITER_GAP, &bu);
	say(x, "writer cost with 2 reader threads: membarrier %.0f ns, kl_rmlock write %.0f ns, "
	    "kl_pcpu_rwsem isolated %.0f ns / burst mean %.0f ns\n", fence, w, iso, bu);
	floor_line(x, "4", "kl_rmlock write pair (2 readers) / one membarrier <= 3", w / fence,
		   w / fence <= 3, "x");
	floor_line(x, "4", "kl_pcpu_rwsem burst-of-1000 mean / isolated write <= 0.2", bu / iso,
		   bu / iso <= 0.2, "x");
}

/* Issue 5: an uncontended kl_mutex loop with lockstat recording vs not (hold times off). */
static void floors_lockstat_cost(struct scn_ctx *x, unsigned reps)
{
	const struct lockops *m = lk("kl_mutex");
	double on[SCN_REPEATS * 4], off[SCN_REPEATS * 4], a, b;

	if (m == NULL) {
		floor_line(x, "5", "lockstat recording: uncontended pair / not recording <= 1.3",
			   NAN, false, "x");
		return;
	}
	for (unsigned i = 0; i < reps; i++) {
		off[i] = kb_pair_ns(m, false, 1u << 20);
		kb_lockstat_begin();
		on[i] = kb_pair_ns(m, false, 1u << 20);
		kb_lockstat_end(0, 0, &(struct kb_lockstat){ 0 });
	}
	a = median_d(on, reps);
	b = median_d(off, reps);
	floor_line(x, "5", "lockstat recording: uncontended kl_mutex pair / not recording <= 1.3",
		   a / b, a / b <= 1.3, "x");
}

/* Global lock @g's contended acquisitions (lockstat %) over striped @h's (NAN if either
 * row is missing or lockstat was off). */
static double contended_drop(const struct kb_results *rs, const struct lockops *g,
			     const struct lockops *h)
{
	const struct kb_config *cg = g ? find_cfg(rs, g, 2, 100, 1) : NULL;
	const struct kb_config *ch = h ? find_cfg(rs, h, 2, 100, 0) : NULL;

	if (cg == NULL || ch == NULL || !cg->lockstat)
		return NAN;
	return kb_metric_median(rs, cg, g_lkct) / fmax(1e-9, kb_metric_median(rs, ch, g_lkct));
}

static void floors_hash(struct scn_ctx *x, unsigned reps)
{
	const struct lockops *mx = lk("kl_mutex"), *hl = lk("kl_hashlock");
	const struct lockops *tk = lk("kl_ticket"), *hlt = lk("kl_hashlock_ticket");
	struct kb_sweep s;
	struct kb_results rs = { 0 };
	const struct kb_config *g, *h;
	double r = NAN, c = NAN, cf = NAN;

	if (mx != NULL && hl != NULL) {
		sweep_init(x, &s);
		s.locks[0] = mx;
		s.locks[1] = hl;
		s.nlocks = 2;
		if (tk != NULL && hlt != NULL) { /* the same pair with FIFO (ticket) locks */
			s.locks[s.nlocks++] = tk;
			s.locks[s.nlocks++] = hlt;
		}
		s.base.workload = KB_WL_TABLE;
		s.threads[0] = 2;
		s.write[0] = 100;
		s.repeats = reps;
		s.base.lockstat = kb_lockstat_available();
		sweep_go(x, &s, &rs, 0.1);
		g = find_cfg(&rs, mx, 2, 100, 1);
		h = find_cfg(&rs, hl, 2, 100, 0);
		if (g && h)
			r = kb_median_ops(&rs, h) / kb_median_ops(&rs, g);
		if (g && h && g->lockstat)
			say(x, "       lockstat %% time waiting: global %.2f%%, hashed %.2f%%\n",
			    kb_metric_median(&rs, g, g_lkst), kb_metric_median(&rs, h, g_lkst));
		c = contended_drop(&rs, mx, hl);
		cf = contended_drop(&rs, tk, hlt);
	}
	floor_line(x, "5", "2 threads, random keys: kl_hashlock / one global kl_mutex >= 1.8", r,
		   r >= 1.8, "x");
	if (!kb_lockstat_available()) {
		say(x, "  [5] contended-fraction drop and lockstat overhead: %s\n",
		    kb_lockstat_why());
	} else {
		floor_line(x, "5", "contended fraction: global kl_mutex / kl_hashlock >= 10", c,
			   c >= 10, "x");
		say(x, "       (a barging global mutex turns contention into few, long waits: its\n"
		       "       re-locking holder rarely finds the lock taken; the %% time waiting\n"
		       "       above is the drop it shows. FIFO locks count every wait:)\n");
		floor_line(x, "5", "contended fraction: global kl_ticket / kl_hashlock_ticket >= 10",
			   cf, cf >= 10, "x");
		floors_lockstat_cost(x, reps);
	}
	kb_results_free(&rs);
}

/* ---- issue 16: the C++ peers (absl, oneTBB, std) --------------------------------------- */

/* The largest of one metric over the repeats of `c` (the worst pass, not the median). */
static double metric_max(const struct kb_results *rs, const struct kb_config *c,
			 double (*get)(const struct kb_result *))
{
	double m = NAN;

	for (size_t k = 0; c != NULL && k < rs->n; k++)
		if (kb_config_same(&rs->v[k].cfg, c))
			m = isnan(m) ? get(&rs->v[k]) : fmax(m, get(&rs->v[k]));
	return m;
}

/* The smallest a/b throughput ratio over thread counts t[0..nt); its thread count in *at. */
static double min_ratio(const struct kb_results *rs, const char *a, const char *b,
			const unsigned *t, unsigned nt, double w, unsigned *at)
{
	double m = NAN;

	for (unsigned i = 0; i < nt; i++) {
		double r = ratio(rs, a, b, t[i], w);

		if (!isnan(r) && (isnan(m) || r < m)) {
			m = r;
			*at = t[i];
		}
	}
	return m;
}

/* The giant duel against absl::Mutex and glibc's mutex: calls/s and voluntary switches. */
static void floors_peer_duel(struct scn_ctx *x, unsigned reps)
{
	static const char *const duel[] = { "kl_mutex", "absl_mutex", "pthread_mutex", NULL };
	unsigned two = 2;
	struct kb_results d = { 0 };
	const struct kb_config *kl, *pt;
	double r, pv;

	mini(x, &d, duel, &two, 1, 100, reps, 0.08);
	kl = find_cfg(&d, lk("kl_mutex"), 2, 100, -1);
	pt = find_cfg(&d, lk("pthread_mutex"), 2, 100, -1);
	r = ratio(&d, "kl_mutex", "absl_mutex", 2, 100);
	floor_line(x, "16", "duel (2 threads, cs=1): kl_mutex / absl_mutex calls/s >= 1.2", r,
		   r >= 1.2, "x");
	r = ratio(&d, "kl_mutex", "pthread_mutex", 2, 100);
	floor_line(x, "16", "duel: kl_mutex / pthread_mutex calls/s >= 2", r, r >= 2, "x");
	pv = pt ? fmax(1, kb_metric_median(&d, pt, g_vcsw_s)) : NAN;
	r = kl ? kb_metric_median(&d, kl, g_vcsw_s) / pv : NAN;
	floor_line(x, "16", "duel: kl_mutex / pthread_mutex voluntary switches <= 0.1", r,
		   r <= 0.1, "x");
	r = metric_max(&d, kl, g_vcsw_s) / pv;
	floor_line(x, "16", "duel: the same, kl_mutex's worst repeat <= 0.1", r, r <= 0.1, "x");
	kb_results_free(&d);
}

/* One exclusive sweep, 1 thread to oversubscribed: kl_mutex against absl and tbb's MCS
 * mutex at every count, kl_rwlock's writers against kl_mutex at 2 threads, kl_mcs and
 * kl_ticket against ck's at <= CPUs threads. */
static void floors_peer_sweep(struct scn_ctx *x, unsigned reps)
{
	static const char *const names[] = { "kl_mutex", "absl_mutex", "tbb_queuing_mutex",
		"kl_rwlock", "kl_mcs", "ck_spinlock_mcs", "kl_ticket", "ck_spinlock_ticket", NULL };
	static const char *const peer[] = { "absl_mutex", "tbb_queuing_mutex" };
	static const char *const mine[] = { "kl_mcs", "kl_ticket" };
	static const char *const ck[] = { "ck_spinlock_mcs", "ck_spinlock_ticket" };
	unsigned cpus = kb_cpus(), top = cpus * 2 > 8 ? cpus * 2 : 8, t[KB_MAX_AXIS], nt = 0;
	unsigned nlow = 0, at = 0;
	struct kb_results rs = { 0 };
	char what[96];
	double r;

	for (unsigned k = 1; k < top && nt < KB_MAX_AXIS - 1; k *= 2)
		t[nt++] = k;
	t[nt++] = top;
	while (nlow < nt && t[nlow] <= cpus)
		nlow++;
	mini(x, &rs, names, t, nt, 100, reps, 0.2);
	for (int i = 0; i < 2; i++) {
		r = min_ratio(&rs, "kl_mutex", peer[i], t, nt, 100, &at);
		snprintf(what, sizeof(what), "thread-sweep, every count: kl_mutex / %s >= 1 (min@%u)",
			 peer[i], at);
		floor_line(x, "16", what, r, r >= 1, "x");
	}
	r = ratio(&rs, "kl_rwlock", "kl_mutex", 2, 100);
	floor_line(x, "16", "write-only, 2 threads: kl_rwlock / kl_mutex >= 0.9", r, r >= 0.9,
		   "x");
	for (int i = 0; i < 2; i++) {
		r = min_ratio(&rs, mine[i], ck[i], t, nlow, 100, &at);
		snprintf(what, sizeof(what), "<= CPUs threads: %s / %s >= 0.95 (min@%u)", mine[i],
			 ck[i], at);
		floor_line(x, "16", what, r, r >= 0.95, "x");
	}
	kb_results_free(&rs);
}

/* kl_rwlock against the C++ reader/writer peers on all CPUs, read-mostly and write-heavy. */
static void floors_peer_rw(struct scn_ctx *x, unsigned reps)
{
	static const char *const names[] = { "kl_rwlock", "absl_mutex_rw", "std_shared_mutex",
					     NULL };
	static const double writes[] = { 1, 50 };
	unsigned cpus = kb_cpus();
	struct kb_results rs = { 0 };
	char what[96];

	for (int w = 0; w < 2; w++)
		mini(x, &rs, names, &cpus, 1, writes[w], reps, 0.05);
	for (int w = 0; w < 2; w++) {
		for (int p = 1; p <= 2; p++) {
			double r = ratio(&rs, "kl_rwlock", names[p], cpus, writes[w]);

			snprintf(what, sizeof(what), "%g%% writes: kl_rwlock / %s >= 1", writes[w],
				 names[p]);
			floor_line(x, "16", what, r, r >= 1, "x");
		}
	}
	kb_results_free(&rs);
}

static void floors_peers(struct scn_ctx *x, unsigned reps)
{
	floors_peer_duel(x, reps);
	floors_peer_sweep(x, reps);
	floors_peer_rw(x, reps);
}

/* Issue 14: kl_rmlock's throughput at every crossover write share against the best of
 * the classic and biased rwlocks, at 2 threads and at 4x CPUs (one interleaved sweep). */
static void floors_bias_crossover(struct scn_ctx *x, unsigned reps)
{
	static const char *const set[] = { "kl_rmlock", "ck_brlock", "ck_rwlock",
					   "pthread_rwlock", "kl_rwlock", NULL };
	static const double writes[] = { 0, 0.1, 1, 10, 50, 100 };
	unsigned cpus = kb_cpus(), th[2] = { 2, 4 * cpus };
	struct kb_sweep s;
	struct kb_results rs = { 0 };

	sweep_init(x, &s);
	s.nlocks = 0;
	for (const char *const *n = set; *n; n++)
		add_if_built(&s, *n);
	memcpy(s.threads, th, sizeof(th));
	s.nthreads = th[0] == th[1] ? 1 : 2;
	memcpy(s.write, writes, sizeof(writes));
	s.nwrite = sizeof(writes) / sizeof(writes[0]);
	s.repeats = reps;
	sweep_go(x, &s, &rs, 0.25);
	for (unsigned t = 0; t < s.nthreads; t++) {
		for (unsigned w = 0; w < s.nwrite; w++) {
			double best = NAN, r;
			const char *who = "-";
			char what[112];

			for (const char *const *n = set + 1; *n; n++) {
				double v = ops_at(&rs, lk(*n), th[t], writes[w]);

				if (!isnan(v) && (isnan(best) || v > best)) {
					best = v;
					who = *n;
				}
			}
			r = ops_at(&rs, lk("kl_rmlock"), th[t], writes[w]) / best;
			snprintf(what, sizeof(what), "%u thr, %g%% writes: kl_rmlock / best (%s) >= 0.8",
				 th[t], writes[w], who);
			floor_line(x, "14", what, r, r >= 0.8, "x");
		}
		bias_table(x, &rs, &s, th[t]);
	}
	kb_results_free(&rs);
}

/* Issue 14: nothing lost at 0% writes (the inline read pair against urcu-memb's), and the
 * write pair with 2 readers running against kl_rwlock's: the burst mean (back-to-back
 * writes: the write rate at which the policy keeps the lock unbiased) and, for scale,
 * the isolated write after an idle gap (a revocation). */
static void floors_bias_pairs(struct scn_ctx *x, unsigned reps)
{
	const struct lockops *l[2] = { lk("kl_rmlock"), lk("urcu_memb") };
	const bool rd[2] = { true, true };
	const struct lockops *rm = lk("kl_rmlock"), *rw = lk("kl_rwlock");
	double ns[2], brm[SCN_REPEATS * 4], brw[SCN_REPEATS * 4], irm = NAN, a, b;
	bool table[2];

	pairs(l, rd, 2, reps, ns, table);
	floor_line(x, "14", "kl_rmlock inline read pair / urcu-memb's <= 1.2", ns[0] / ns[1],
		   ns[0] / ns[1] <= 1.2, "x");
	for (unsigned i = 0; i < reps; i++) {
		brm[i] = brw[i] = NAN;
		if (rm == NULL || rw == NULL)
			continue;
		(void)kb_writer_cost(rm, NULL, 2, 1, SCN_WRITER_GAP, &brm[i]);
		(void)kb_writer_cost(rw, NULL, 2, 1, SCN_WRITER_GAP, &brw[i]);
	}
	if (rm != NULL)
		irm = kb_writer_cost(rm, NULL, 2, SCN_WRITER_SAMPLES, SCN_WRITER_GAP, NULL);
	a = rm && rw ? median_d(brm, reps) : NAN;
	b = rm && rw ? median_d(brw, reps) : NAN;
	say(x, "       write pairs with 2 readers running, burst mean: kl_rmlock %.0f ns, "
	    "kl_rwlock %.0f ns; kl_rmlock after an idle gap (revoking) %.0f ns\n", a, b, irm);
	floor_line(x, "14", "kl_rmlock write pair (2 readers, burst) / kl_rwlock's <= 2", a / b,
		   a / b <= 2, "x");
}

static void scn_floors(struct scn_ctx *x)
{
	unsigned reps = x->cli->set_repeats ? x->cli->sweep.repeats : SCN_REPEATS;

	if (reps > SCN_REPEATS * 4)
		reps = SCN_REPEATS * 4;
	say(x, "\nmedians of %u interleaved repeats; ratios within this run\n", reps);
	floors_pairs(x, reps);
	floors_mutex(x, reps);
	floors_rw(x, reps);
	floors_writers(x);
	floors_hash(x, reps);
	floors_peers(x, reps);
	floors_bias_pairs(x, reps);
	floors_bias_crossover(x, reps);
}
