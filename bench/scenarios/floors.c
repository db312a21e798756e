/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/floors.c - `klbench scenario floors`: the maintainers' gate. Every
 * performance floor klock's designs promise, measured in one run against its baseline,
 * with the ratio and whether it is met; a floor whose lock is not built in says n/a. Each
 * line is tagged with its theme and says what it checks: [adaptive] kl_mutex/kl_rwlock
 * against pthread, [read-mostly] kl_rmlock/kl_pcpu_rwsem, [hashed] kl_hashlock,
 * [reader-bias] kl_rmlock's adaptive reader bias, [peers] the C++ and C peers (read the
 * figures of a shared or small machine as indications: rerun with more -r before quoting
 * one). This file holds the driver and what the themes share (the verdict line, medians,
 * uncontended pairs, the small sweeps); the floors themselves live in floors_core.c
 * (adaptive, read-mostly), floors_hash.c, floors_bias.c and floors_peers.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "floors.h"
#include "ministat.h"

/* One floor's verdict line, tagged with its theme. `value` NAN: a lock it needs is not built in. */
void scn_floor_line(struct scn_ctx *x, const char *theme, const char *what, double value,
		       bool ok, const char *unit)
{
	if (isnan(value))
		scn_say(x, "  [%-11s] %-64s %10s  n/a (lock not built in)\n", theme, what, "-");
	else
		scn_say(x, "  [%-11s] %-64s %9.2f%-1s  %s\n", theme, what, value, unit,
			scn_met(ok));
}

/* The repeats' throughputs of lock `name` at `t` threads, `w`% writes, into `s`. */
static void repeats_of(const struct kb_results *rs, const char *name, unsigned t, double w,
		       struct ms_set *s)
{
	const struct lockops *o = scn_lk(name);
	const struct kb_config *c = o ? scn_find_cfg(rs, o, t, w, -1) : NULL;

	ms_set_init(s, name);
	for (size_t k = 0; c != NULL && k < rs->n; k++)
		if (kb_config_same(&rs->v[k].cfg, c))
			ms_set_add(s, rs->v[k].ops_per_s);
	ms_set_finish(s);
}

void scn_floor_proof(struct scn_ctx *x, const struct kb_results *rs, const char *a,
		     const char *b, unsigned t, double w, double line)
{
	static const char *const said[] = { [MS_FLOOR_MET] = "met, proven",
		[MS_FLOOR_UNMET] = "NOT met, proven",
		[MS_FLOOR_UNRESOLVED] = "unresolved (the interval spans the floor)" };
	struct ms_set sa, sb;
	struct ms_diff d;

	repeats_of(rs, a, t, w, &sa);
	repeats_of(rs, b, t, w, &sb);
	if (sa.n >= 3 && sb.n >= 3) {
		enum ms_floor v = ms_floor_verdict(&sb, &sa, MS_DEFAULT_LEVEL, line, &d);

		scn_say(x, "       ministat %g%%: %s %+.1f%% +/- %.1f%% of %s's mean (floor %+.0f%%): "
			"%s\n", ms_levels[MS_DEFAULT_LEVEL], a, d.pct_d, d.pct_e, b, (line - 1) * 100,
			said[v]);
	}
	ms_set_free(&sa);
	ms_set_free(&sb);
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double scn_median_d(double *v, unsigned n)
{
	qsort(v, n, sizeof(double), cmp_dbl);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

const struct lockops *scn_lk(const char *name)
{
	return lockops_find(name);
}

/* Median ns per uncontended pair of each lock, run by the adapter's own loop (the calls
 * inlined as an application compiles them), or through the ops table where an adapter
 * has no loop (`via_table` set). */
void scn_pairs(const struct lockops *const *locks, const bool *read, unsigned n,
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

/* A small sweep for one floor; `names` NULL-terminated; only built locks run. */
void scn_mini(struct scn_ctx *x, struct kb_results *rs, const char *const *names,
		 const unsigned *threads, unsigned nt, double write, unsigned reps, double share)
{
	struct kb_sweep s;

	scn_sweep_init(x, &s);
	s.nlocks = 0;
	for (; *names; names++)
		scn_add_if_built(&s, *names);
	if (s.nlocks == 0)
		return;
	memcpy(s.threads, threads, nt * sizeof(unsigned));
	s.nthreads = nt;
	s.write[0] = write;
	s.cs[0] = write == 100 && threads[0] == 2 ? 1 : s.cs[0];
	s.repeats = reps;
	scn_sweep_go(x, &s, rs, share);
}

double scn_ratio(const struct kb_results *rs, const char *a, const char *b, unsigned t,
		    double w)
{
	return scn_ops_at(rs, scn_lk(a), t, w) / scn_ops_at(rs, scn_lk(b), t, w);
}

void scn_floors(struct scn_ctx *x)
{
	/* By default one repeat in each memory slot: a lock whose speed depends on where its
	 * line lies (pthread_mutex's duel: 10-29 M calls/s by slot) is then weighed over all
	 * of them, where five repeats would draw five of the eight. */
	unsigned reps = x->cli->set_repeats ? x->cli->sweep.repeats : KB_SLOTS;

	if (reps > SCN_REPEATS * 4)
		reps = SCN_REPEATS * 4;
	scn_say(x, "\nmedians of %u interleaved repeats; ratios within this run\n", reps);
	scn_floors_pairs(x, reps);
	scn_floors_mutex(x, reps);
	scn_floors_rw(x, reps);
	scn_floors_writers(x);
	scn_floors_hash(x, reps);
	scn_floors_peers(x, reps);
	scn_floors_bias_pairs(x, reps);
	scn_floors_bias_crossover(x, reps);
}
