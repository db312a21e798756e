/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/hashed_queue.c - `klbench scenario hashed-queue`: the NetBSD page-queue
 * thread. One global lock serialised every CPU's updates; hashing the lock by object
 * address spreads them. Threads update random buckets of one table under one global
 * mutex, under that mutex striped over the table (kl_hashlock's own stripe count), under
 * 64 hashed glibc mutexes (pthread_mutex_table: the table a user would write) and under
 * kl_hashlock when built. What it teaches: the share of time spent waiting for locks
 * drops with striping - klbench's time inside lock calls always, lockstat's "% of time
 * waiting" and contended acquisitions when lockstat is built; closes with kl_hashlock's
 * ratio to one global kl_mutex at 2 threads.
 */
#include <string.h>

#include <klock/hashlock.h>

#include "scenario.h"

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

static void hashed_summary(struct scn_ctx *x, const struct kb_results *rs,
			   const struct lockops *mx, const struct lockops *hl, unsigned t)
{
	const struct kb_config *g = scn_find_cfg(rs, mx, t, 100, 1);
	const struct kb_config *st = scn_find_cfg(rs, mx, t, 100, (int)auto_stripes());
	const struct kb_config *h = hl ? scn_find_cfg(rs, hl, t, 100, 0) : NULL;
	const struct kb_config *best = h ? h : st;

	if (g == NULL || best == NULL)
		return;
	scn_say(x, "\n%s over one global %s: %.2fx the throughput; time inside lock calls "
	    "%.1f%% -> %.1f%% of the threads' time\n", h ? hl->name : "striping", mx->name,
	    kb_median_ops(rs, best) / kb_median_ops(rs, g), kb_metric_median(rs, g, g_lockpct),
	    kb_metric_median(rs, best, g_lockpct));
	if (g->lockstat && strcmp(mx->family, "klock") != 0)
		scn_say(x, "lockstat: sees klock's locks only (%s is not instrumented)\n",
			mx->name);
	else if (g->lockstat)
		scn_say(x, "lockstat: %.2f%% of the time waiting -> %.2f%%; contended acquisitions "
		    "%.2f%% -> %.2f%%\n", kb_metric_median(rs, g, scn_g_lkst),
		    kb_metric_median(rs, best, scn_g_lkst), kb_metric_median(rs, g, scn_g_lkct),
		    kb_metric_median(rs, best, scn_g_lkct));
	else
		scn_say(x, "lockstat: %s (the %% waiting column needs it)\n", kb_lockstat_why());
	if (h != NULL && t == 2 && strcmp(mx->name, "kl_mutex") == 0) {
		double r = kb_median_ops(rs, h) / kb_median_ops(rs, g);

		scn_say(x, "finding: with 2 threads on random keys, kl_hashlock does %.2fx the "
		    "throughput of one global kl_mutex\n", r);
	}
}

void scn_hashed_queue(struct scn_ctx *x)
{
	const struct lockops *mx = scn_want(x, "kl_mutex", "pthread_mutex");
	const struct lockops *hl = lockops_find("kl_hashlock");
	struct kb_sweep s;
	struct kb_results rs = { 0 };

	if (mx == NULL)
		return;
	if (hl == NULL)
		scn_say(x, "note: kl_hashlock is not built in; klbench stripes %u %s instances "
		    "over the table itself instead\n", auto_stripes(), mx->name);
	scn_sweep_init(x, &s);
	s.locks[0] = mx;
	s.nlocks = 1;
	if (hl != NULL)
		s.locks[s.nlocks++] = hl;
	scn_add_if_built(&s, "pthread_mutex_table");   /* the table a user would write */
	s.base.workload = KB_WL_TABLE;
	s.stripes[0] = 1;
	s.stripes[1] = auto_stripes();
	s.nstripes = 2;
	s.write[0] = 100;
	s.threads[0] = x->cli->set_threads ? x->cli->sweep.threads[0] : kb_cpus();
	s.repeats = 3;
	if (kb_lockstat_available())
		s.base.lockstat = true;
	scn_sweep_go(x, &s, &rs, 1.0);
	scn_say(x, "\n%u threads, random keys over %u buckets, every operation updates its "
	    "bucket (cs=4), %u repeats of %.2fs\n", s.threads[0], s.base.keys, s.repeats,
	    s.base.duration);
	scn_say_table(x, &rs);
	hashed_summary(x, &rs, mx, hl, s.threads[0]);
	scn_write_files(x, &rs, "", false);
	kb_results_free(&rs);
}
