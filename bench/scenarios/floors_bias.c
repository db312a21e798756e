/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/floors_bias.c - the [reader-bias] floors (kl_rmlock's adaptive reader
 * bias): its throughput at every crossover write share against the best of the classic
 * and biased rwlocks, at 2 threads and 4x CPUs, with the bias table; nothing lost at 0%
 * writes (the inline read pair against urcu-memb's); and the write pair with 2 readers
 * running against kl_rwlock's. Since kl_rmlock's unbiased mode is kl_rwlock's
 * algorithm, the mixed-write lines raise the crossover floors where writes come (>= 0.9x
 * at 10% writes and more, >= 0.8x at 0.1% and 1%, each with ministat's verdict on the
 * repeats) and a read-mostly line bounds the write pair with 2 readers by its figure
 * before that change.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "floors.h"

/* kl_rmlock over the best peer where writes come - at 10% writes and more, and
 * below (0.1% and 1%: the bias is re-armed and revoked there, so a little is allowed). */
#define RM_FLOOR_WRITES_PCT 10.0
#define RM_FLOOR_WRITTEN 0.9
#define RM_FLOOR_RARE 0.8
/* The write pair with 2 readers running (burst mean), ns: kl_rmlock's before
 * its unbiased mode became kl_rwlock's, on the 2026-12 2-vCPU VM. */
#define RM_WRITE_PAIR_BEFORE_NS 44.7

/* The mixed-write line for kl_rmlock / best (`who`) = `r` at `t` threads, `w`% writes, with
 * ministat's verdict; none at 0% writes (the inline read pair's floor covers it). */
static void rm_floor_mixed(struct scn_ctx *x, const struct kb_results *rs, const char *who,
			unsigned t, double w, double r)
{
	double line = w >= RM_FLOOR_WRITES_PCT ? RM_FLOOR_WRITTEN : RM_FLOOR_RARE;
	char what[112];

	if (w == 0)
		return;
	snprintf(what, sizeof(what), "%u thr, %g%% writes: kl_rmlock / best (%s) >= %g", t, w,
		 who, line);
	scn_floor_line(x, "read-mostly", what, r, r >= line, "x");
	scn_floor_proof(x, rs, "kl_rmlock", who, t, w, line);
}

/* kl_rmlock's throughput at every crossover write share against the best of
 * the classic and biased rwlocks, at 2 threads and at 4x CPUs (one interleaved sweep). */
void scn_floors_bias_crossover(struct scn_ctx *x, unsigned reps)
{
	static const char *const set[] = { "kl_rmlock", "ck_brlock", "ck_rwlock",
					   "pthread_rwlock", "kl_rwlock", NULL };
	static const double writes[] = { 0, 0.1, 1, 10, 50, 100 };
	unsigned cpus = kb_cpus(), th[2] = { 2, 4 * cpus };
	struct kb_sweep s;
	struct kb_results rs = { 0 };

	scn_sweep_init(x, &s);
	s.nlocks = 0;
	for (const char *const *n = set; *n; n++)
		scn_add_if_built(&s, *n);
	memcpy(s.threads, th, sizeof(th));
	s.nthreads = th[0] == th[1] ? 1 : 2;
	memcpy(s.write, writes, sizeof(writes));
	s.nwrite = sizeof(writes) / sizeof(writes[0]);
	s.repeats = reps;
	scn_sweep_go(x, &s, &rs, 0.25);
	for (unsigned t = 0; t < s.nthreads; t++) {
		for (unsigned w = 0; w < s.nwrite; w++) {
			double best = NAN, r;
			const char *who = "-";
			char what[112];

			for (const char *const *n = set + 1; *n; n++) {
				double v = scn_ops_at(&rs, scn_lk(*n), th[t], writes[w]);

				if (!isnan(v) && (isnan(best) || v > best)) {
					best = v;
					who = *n;
				}
			}
			r = scn_ops_at(&rs, scn_lk("kl_rmlock"), th[t], writes[w]) / best;
			snprintf(what, sizeof(what), "%u thr, %g%% writes: kl_rmlock / best (%s) >= 0.8",
				 th[t], writes[w], who);
			scn_floor_line(x, "reader-bias", what, r, r >= 0.8, "x");
			rm_floor_mixed(x, &rs, who, th[t], writes[w], r);
		}
		scn_bias_table(x, &rs, &s, th[t]);
	}
	kb_results_free(&rs);
}

/* Nothing lost at 0% writes (the inline read pair against urcu-memb's), and the
 * write pair with 2 readers running against kl_rwlock's: the burst mean (back-to-back
 * writes: the write rate at which the policy keeps the lock unbiased) and, for scale,
 * the isolated write after an idle gap (a revocation). */
void scn_floors_bias_pairs(struct scn_ctx *x, unsigned reps)
{
	const struct lockops *l[2] = { scn_lk("kl_rmlock"), scn_lk("urcu_memb") };
	const bool rd[2] = { true, true };
	const struct lockops *rm = scn_lk("kl_rmlock"), *rw = scn_lk("kl_rwlock");
	double ns[2], brm[SCN_REPEATS * 4], brw[SCN_REPEATS * 4], irm = NAN, a, b;
	bool table[2];

	scn_pairs(l, rd, 2, reps, ns, table);
	scn_floor_line(x, "reader-bias", "kl_rmlock inline read pair / urcu-memb's <= 1.2", ns[0] / ns[1],
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
	a = rm && rw ? scn_median_d(brm, reps) : NAN;
	b = rm && rw ? scn_median_d(brw, reps) : NAN;
	scn_say(x, "       write pairs with 2 readers running, burst mean: kl_rmlock %.0f ns, "
	    "kl_rwlock %.0f ns; kl_rmlock after an idle gap (revoking) %.0f ns\n", a, b, irm);
	scn_floor_line(x, "reader-bias", "kl_rmlock write pair (2 readers, burst) / kl_rwlock's <= 2", a / b,
		   a / b <= 2, "x");
	scn_floor_line(x, "read-mostly", "kl_rmlock write pair (2 readers, burst) <= 44.7 ns (before)", a,
		   a <= RM_WRITE_PAIR_BEFORE_NS, "ns");
}
