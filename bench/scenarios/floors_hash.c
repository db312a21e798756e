/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/floors_hash.c - the [hashed] floors: kl_hashlock against one global
 * kl_mutex over the same table (throughput, and with lockstat the contended fraction,
 * also for the FIFO pair kl_ticket / kl_hashlock_ticket), and what lockstat's recording
 * costs an uncontended kl_mutex pair.
 */
#include <math.h>

#include "floors.h"

/* An uncontended kl_mutex loop with lockstat recording vs not (hold times off). */
static void floors_lockstat_cost(struct scn_ctx *x, unsigned reps)
{
	const struct lockops *m = scn_lk("kl_mutex");
	double on[SCN_REPEATS * 4], off[SCN_REPEATS * 4], a, b;

	if (m == NULL) {
		scn_floor_line(x, "hashed",
			       "lockstat recording: uncontended pair / not recording <= 1.3", NAN,
			       false, "x");
		return;
	}
	for (unsigned i = 0; i < reps; i++) {
		off[i] = kb_pair_ns(m, false, 1u << 20);
		kb_lockstat_begin();
		on[i] = kb_pair_ns(m, false, 1u << 20);
		kb_lockstat_end(0, 0, &(struct kb_lockstat){ 0 });
	}
	a = scn_median_d(on, reps);
	b = scn_median_d(off, reps);
	scn_floor_line(x, "hashed",
		       "lockstat recording: uncontended kl_mutex pair / not recording <= 1.3",
		       a / b, a / b <= 1.3, "x");
}

/* Global lock @g's contended acquisitions (lockstat %) over striped @h's (NAN if either
 * row is missing or lockstat was off). */
static double contended_drop(const struct kb_results *rs, const struct lockops *g,
			     const struct lockops *h)
{
	const struct kb_config *cg = g ? scn_find_cfg(rs, g, 2, 100, 1) : NULL;
	const struct kb_config *ch = h ? scn_find_cfg(rs, h, 2, 100, 0) : NULL;

	if (cg == NULL || ch == NULL || !cg->lockstat)
		return NAN;
	return kb_metric_median(rs, cg, scn_g_lkct) /
	       fmax(1e-9, kb_metric_median(rs, ch, scn_g_lkct));
}

void scn_floors_hash(struct scn_ctx *x, unsigned reps)
{
	const struct lockops *mx = scn_lk("kl_mutex"), *hl = scn_lk("kl_hashlock");
	const struct lockops *tk = scn_lk("kl_ticket"), *hlt = scn_lk("kl_hashlock_ticket");
	struct kb_sweep s;
	struct kb_results rs = { 0 };
	const struct kb_config *g, *h;
	double r = NAN, c = NAN, cf = NAN;

	if (mx != NULL && hl != NULL) {
		scn_sweep_init(x, &s);
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
		scn_sweep_go(x, &s, &rs, 0.1);
		g = scn_find_cfg(&rs, mx, 2, 100, 1);
		h = scn_find_cfg(&rs, hl, 2, 100, 0);
		if (g && h)
			r = kb_median_ops(&rs, h) / kb_median_ops(&rs, g);
		if (g && h && g->lockstat)
			scn_say(x, "       lockstat %% time waiting: global %.2f%%, "
				"hashed %.2f%%\n", kb_metric_median(&rs, g, scn_g_lkst),
				kb_metric_median(&rs, h, scn_g_lkst));
		c = contended_drop(&rs, mx, hl);
		cf = contended_drop(&rs, tk, hlt);
	}
	scn_floor_line(x, "hashed", "2 threads, random keys: kl_hashlock / one global kl_mutex >= 1.8",
		       r, r >= 1.8, "x");
	if (!kb_lockstat_available()) {
		scn_say(x, "  [5] contended-fraction drop and lockstat overhead: %s\n",
		    kb_lockstat_why());
	} else {
		scn_floor_line(x, "hashed", "contended fraction: global kl_mutex / kl_hashlock >= 10", c,
			   c >= 10, "x");
		scn_say(x, "       (a barging global mutex turns contention into few, long "
		    "waits: its\n"
		    "       re-locking holder rarely finds the lock taken; the %% time waiting\n"
		    "       above is the drop it shows. FIFO locks count every wait:)\n");
		scn_floor_line(x, "hashed",
			       "contended fraction: global kl_ticket / kl_hashlock_ticket >= 10",
			       cf, cf >= 10, "x");
		floors_lockstat_cost(x, reps);
	}
	kb_results_free(&rs);
}
