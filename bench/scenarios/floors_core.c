/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/floors_core.c - the [adaptive] and [read-mostly] floors: the adaptive
 * kl_mutex against glibc's (the duel's calls/s, voluntary switches and fairness; no collapse of
 * the spinners at 4x CPUs), kl_rwlock against pthread_rwlock, and the read-mostly locks
 * (kl_rmlock, kl_pcpu_rwsem): uncontended read pairs against urcu-memb's and the classic
 * rwlocks', read-only scaling, 5x kl_rwlock at 0-1% writes, and the writer's cost against
 * one membarrier.
 */
#include <math.h>
#include <string.h>

#include "floors.h"

enum { P_LOOP, P_KLM, P_PTM, P_URCU, P_RM, P_PC, P_PTRW, P_CKRW, P_N };

void scn_floors_pairs(struct scn_ctx *x, unsigned reps)
{
	const struct lockops *l[P_N] = { scn_lk("busted"), scn_lk("kl_mutex"),
		scn_lk("pthread_mutex"), scn_lk("urcu_memb"), scn_lk("kl_rmlock"),
		scn_lk("kl_pcpu_rwsem"), scn_lk("pthread_rwlock"), scn_lk("ck_rwlock") };
	const bool rd[P_N] = { false, false, false, true, true, true, true, true };
	double ns[P_N];
	bool table[P_N], any = false;

	scn_pairs(l, rd, P_N, reps, ns, table);
	for (int i = P_KLM; i < P_N; i++)
		any |= table[i];
	scn_say(x, "uncontended pairs, each lock's calls inlined in a loop as an application "
	    "compiles them (ns, median of %u; the empty loop: %.1f): kl_mutex %.1f, "
	    "pthread_mutex %.1f, urcu read %.1f, kl_rmlock read %.1f, kl_pcpu_rwsem read %.1f, "
	    "pthread_rwlock read "
	    "%.1f, ck_rwlock read %.1f%s\n", reps, ns[P_LOOP], ns[P_KLM], ns[P_PTM], ns[P_URCU],
	    ns[P_RM], ns[P_PC], ns[P_PTRW], ns[P_CKRW],
	    any ? " (some through the adapter table: no loop)" : "");
	scn_floor_line(x, "adaptive", "uncontended kl_mutex pair / pthread_mutex pair <= 1",
		   ns[P_KLM] / ns[P_PTM], ns[P_KLM] <= ns[P_PTM], "x");
	for (int i = P_RM; i <= P_PC; i++) {
		const char *name = i == P_RM ? "kl_rmlock" : "kl_pcpu_rwsem";
		double lim = i == P_RM ? 1.5 : 2.5, r = ns[i] / ns[P_URCU];
		char what[96];

		snprintf(what, sizeof(what), "%s read pair / urcu-memb's <= %.1f", name, lim);
		scn_floor_line(x, "read-mostly", what, r, r <= lim, "x");
	}
	for (int i = P_RM; i <= P_PC; i++) {
		const char *name = i == P_RM ? "kl_rmlock" : "kl_pcpu_rwsem";
		double a = ns[P_PTRW] / ns[i], b = ns[P_CKRW] / ns[i];
		char what[96];

		snprintf(what, sizeof(what), "%s read pair: pthread_rwlock's / it >= 5", name);
		scn_floor_line(x, "read-mostly", what, a, a >= 5, "x");
		snprintf(what, sizeof(what), "%s read pair: ck_rwlock's / it >= 5", name);
		scn_floor_line(x, "read-mostly", what, b, b >= 5, "x");
	}
}

void scn_floors_mutex(struct scn_ctx *x, unsigned reps)
{
	static const char *const duel[] = { "kl_mutex", "pthread_mutex", NULL };
	static const char *const over[] = { "kl_mutex", "pthread_mutex", "kl_ticket", "kl_mcs",
					    NULL };
	unsigned cpus = kb_cpus(), two = 2, ov[2] = { cpus, 4 * cpus };
	struct kb_results d = { 0 }, o = { 0 };
	const struct kb_config *kl, *pt;
	double r;

	scn_mini(x, &d, duel, &two, 1, 100, reps, 0.15);
	kl = scn_find_cfg(&d, scn_lk("kl_mutex"), 2, 100, -1);
	pt = scn_find_cfg(&d, scn_lk("pthread_mutex"), 2, 100, -1);
	r = kl && pt ? kb_median_ops(&d, kl) / kb_median_ops(&d, pt) : NAN;
	scn_floor_line(x, "adaptive", "duel (2 threads, cs=1): kl_mutex / pthread_mutex calls/s >= 1.5",
		   r, r >= 1.5, "x");
	r = kl && pt ? kb_metric_median(&d, kl, scn_g_vcsw_s) /
		       fmax(1, kb_metric_median(&d, pt, scn_g_vcsw_s)) : NAN;
	scn_floor_line(x, "adaptive", "duel: kl_mutex / pthread_mutex voluntary switches <= 0.1", r,
		   r <= 0.1, "x");
	r = kl ? kb_metric_median(&d, kl, scn_g_fair) : NAN;
	scn_floor_line(x, "adaptive", "duel: kl_mutex fairness, max/min acquisitions per thread <= 4", r,
		   r <= 4, "");
	scn_mini(x, &o, over, ov, 2, 100, reps, 0.2);
	r = scn_ratio(&o, "kl_mutex", "pthread_mutex", 4 * cpus, 100);
	scn_floor_line(x, "adaptive", "4x CPUs threads: kl_mutex / pthread_mutex throughput >= 1", r,
		   r >= 1, "x");
	for (int i = 0; i < 2; i++) {
		const char *n = i ? "kl_mcs" : "kl_ticket";
		char what[96];

		r = scn_ops_at(&o, scn_lk(n), 4 * cpus, 100) / scn_ops_at(&o, scn_lk(n), cpus, 100);
		snprintf(what, sizeof(what), "%s at 4x CPUs threads / at CPUs threads (no collapse)",
			 n);
		scn_floor_line(x, "adaptive", what, r, r >= 0.1, "x");
	}
	kb_results_free(&d);
	kb_results_free(&o);
}

void scn_floors_rw(struct scn_ctx *x, unsigned reps)
{
	static const char *const rwl[] = { "kl_rwlock", "pthread_rwlock", NULL };
	static const char *const rml[] = { "kl_rmlock", "kl_pcpu_rwsem", "kl_rwlock",
					   "pthread_rwlock", NULL };
	unsigned cpus = kb_cpus(), t12[2] = { 1, 2 };
	struct kb_results a = { 0 }, b = { 0 }, c = { 0 }, e = { 0 };
	double r;

	scn_mini(x, &a, rwl, &cpus, 1, 1, reps, 0.08);
	scn_mini(x, &b, rwl, &cpus, 1, 50, reps, 0.08);
	r = scn_ratio(&a, "kl_rwlock", "pthread_rwlock", cpus, 1);
	scn_floor_line(x, "adaptive", "read-mostly (1% writes): kl_rwlock / pthread_rwlock >= 1", r,
		       r >= 1, "x");
	r = scn_ratio(&b, "kl_rwlock", "pthread_rwlock", cpus, 50);
	scn_floor_line(x, "adaptive", "write-heavy (50% writes): kl_rwlock / pthread_rwlock >= 0.8", r,
		   r >= 0.8, "x");
	scn_mini(x, &c, rml, t12, 2, 0, reps, 0.08);
	for (int i = 0; i < 2; i++) {
		const char *n = i ? "kl_pcpu_rwsem" : "kl_rmlock";
		char what[96];

		r = scn_ops_at(&c, scn_lk(n), 2, 0) / scn_ops_at(&c, scn_lk(n), 1, 0);
		snprintf(what, sizeof(what), "read-only scaling: %s 2 threads / 1 thread >= 1.8", n);
		scn_floor_line(x, "read-mostly", what, r, r >= 1.8, "x");
	}
	scn_say(x, "       (pthread_rwlock, for scale: %.2fx)\n",
	    scn_ops_at(&c, scn_lk("pthread_rwlock"), 2, 0) /
	    scn_ops_at(&c, scn_lk("pthread_rwlock"), 1, 0));
	scn_mini(x, &e, rml, &cpus, 1, 0, reps, 0.06);
	scn_mini(x, &e, rml, &cpus, 1, 1, reps, 0.06);
	scn_mini(x, &e, rml, &cpus, 1, 50, reps, 0.06);
	for (int i = 0; i < 2; i++) {
		const char *n = i ? "kl_pcpu_rwsem" : "kl_rmlock";
		char what[96];

		for (double w = 0; w <= 1; w++) {
			r = scn_ratio(&e, n, "kl_rwlock", cpus, w);
			snprintf(what, sizeof(what), "%s / kl_rwlock at %g%% writes >= 5", n, w);
			scn_floor_line(x, "read-mostly", what, r, r >= 5, "x");
		}
		r = scn_ratio(&e, n, "kl_rwlock", cpus, 50);
		if (!isnan(r))
			scn_say(x, "       %s / kl_rwlock at 50%% writes: %.2fx "
				"(it may lose here)\n", n, r);
	}
	kb_results_free(&a);
	kb_results_free(&b);
	kb_results_free(&c);
	kb_results_free(&e);
}

void scn_floors_writers(struct scn_ctx *x)
{
	const struct lockops *rm = scn_lk("kl_rmlock"), *pc = scn_lk("kl_pcpu_rwsem");
	const struct lockops *host = rm ? rm : scn_lk("pthread_rwlock");
	double fence = host ? kb_writer_cost(NULL, host, 2, SCN_WRITER_SAMPLES, SCN_WRITER_GAP,
					     NULL) : NAN;
	double w = rm ? kb_writer_cost(rm, NULL, 2, SCN_WRITER_SAMPLES, SCN_WRITER_GAP, NULL)
		      : NAN;
	double iso = NAN, bu = NAN;

	if (pc != NULL)
		iso = kb_writer_cost(pc, NULL, 2, SCN_WRITER_SAMPLES, SCN_WRITER_GAP, &bu);
	scn_say(x, "writer cost with 2 reader threads: membarrier %.0f ns, kl_rmlock write %.0f "
	    "ns, kl_pcpu_rwsem isolated %.0f ns / burst mean %.0f ns\n", fence, w, iso, bu);
	scn_floor_line(x, "read-mostly", "kl_rmlock write pair (2 readers) / one membarrier <= 3", w / fence,
		   w / fence <= 3, "x");
	scn_floor_line(x, "read-mostly", "kl_pcpu_rwsem burst-of-1000 mean / isolated write <= 0.2", bu / iso,
		   bu / iso <= 0.2, "x");
}
