/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/giant_duel.c - `klbench scenario giant-duel`: Matthew Dillon's "Giant"
 * duel (DragonFly BSD). Two threads fight over one lock with a one-word critical section
 * and no think time: almost nothing but the lock is measured. What it teaches: a spinlock hands the
 * lock over through the cache and never sleeps; a sleeping mutex parks the loser and pays
 * a futex wake-up and two context switches per hand-off; an adaptive mutex spins while
 * the owner runs and sleeps only when spinning does not pay - the design aims at 1.5x
 * the sleeping mutex's calls/s with a tenth of its voluntary switches (vcsw/s, wake/op).
 * Fairness (max/min acquisitions per thread) and repeatability (±sd% over 5 interleaved
 * repeats) are part of the verdict; a finding in those terms and a ministat
 * pthread_mutex vs kl_mutex close it (the floors scenario holds the targets).
 */
#include <math.h>
#include <string.h>

#include "scenario.h"

static const char *lock_kind(const struct lockops *o)
{
	if (o->flags & LOCKOPS_SPIN)
		return "spin";
	if (strstr(o->name, "adaptive") != NULL || strcmp(o->name, "kl_mutex") == 0 ||
	    strncmp(o->name, "absl_mutex", 10) == 0)
		return "adaptive";
	return "sleep";
}

static double g_wake(const struct kb_result *r)
{
	return r->wakes_per_acq;
}

static void duel_table(struct scn_ctx *x, const struct kb_results *rs, const struct kb_sweep *s)
{
	char ops[16], vc[16];

	scn_say(x, "%-24s %-8s %9s %7s %9s %9s %8s\n", "lock", "kind", "calls/s", "±sd%",
	    "vcsw/s", "wake/op", "max/min");
	for (unsigned i = 0; i < s->nlocks; i++) {
		const struct kb_config *c = scn_find_cfg(rs, s->locks[i], 2, 100, -1);
		double sd;

		if (c == NULL)
			continue;
		sd = kb_ops_sd_pct(rs, c);
		kb_fmt_rate(ops, sizeof(ops), kb_median_ops(rs, c));
		kb_fmt_rate(vc, sizeof(vc), kb_metric_median(rs, c, scn_g_vcsw_s));
		scn_say(x, "%-24s %-8s %9s %7.1f %9s %9.4f %8.2f\n", c->ops->name,
			lock_kind(c->ops), ops, sd, vc, kb_metric_median(rs, c, g_wake),
			kb_metric_median(rs, c, scn_g_fair));
	}
}

static void duel_findings(struct scn_ctx *x, const struct kb_results *rs)
{
	const struct kb_config *kl = scn_find_cfg(rs, lockops_find("kl_mutex"), 2, 100, -1);
	const struct kb_config *pt = scn_find_cfg(rs, lockops_find("pthread_mutex"), 2, 100, -1);
	double r, v, f;

	if (kl == NULL || pt == NULL) {
		scn_say(x, "finding: kl_mutex against pthread_mutex needs both in the duel\n");
		return;
	}
	r = kb_median_ops(rs, kl) / kb_median_ops(rs, pt);
	v = kb_metric_median(rs, kl, scn_g_vcsw_s) /
	    fmax(1, kb_metric_median(rs, pt, scn_g_vcsw_s));
	f = kb_metric_median(rs, kl, scn_g_fair);
	scn_say(x, "finding: two threads on one kl_mutex make %.2fx the calls per second of "
	    "pthread_mutex, with %.3fx its voluntary context switches; the busiest thread "
	    "acquired %.2fx as often as the least busy\n", r, v, f);
	scn_compare_cfgs(x, rs, (const struct kb_config *[]){ pt, kl }, 2, "calls/s");
}

void scn_giant_duel(struct scn_ctx *x)
{
	static const char *const names[] = { "pthread_spin", "ck_spinlock_ticket", "kl_ticket",
		"kl_mcs", "tbb_spin_mutex", "tbb_queuing_mutex", "pthread_mutex", "std_mutex",
		"pthread_mutex_adaptive", "absl_mutex", "kl_mutex" };
	struct kb_sweep s;
	struct kb_results rs = { 0 };

	scn_sweep_init(x, &s);
	scn_pick_locks(x, &s, names, sizeof(names) / sizeof(names[0]));
	s.threads[0] = 2;
	s.write[0] = 100;
	s.cs[0] = 1;
	s.repeats = SCN_REPEATS;
	scn_sweep_go(x, &s, &rs, 1.0);
	scn_say(x, "\n2 threads, one lock, a one-word critical section, no think time; medians "
	    "of %u interleaved repeats of %.2fs (±sd%% = how repeatable)\n", s.repeats,
	    s.base.duration);
	duel_table(x, &rs, &s);
	scn_say(x, "\n");
	duel_findings(x, &rs);
	scn_write_files(x, &rs, "", false);
	kb_results_free(&rs);
}
