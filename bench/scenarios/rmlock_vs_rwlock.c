/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/rmlock_vs_rwlock.c - `klbench scenario rmlock-vs-rwlock`: FreeBSD's
 * rmlock(9) thread - readers of a read-mostly lock should touch nothing shared, and the
 * writer pays for it. Part 1: a read-mostly load (0.1% writes) on all CPUs, kl_rmlock
 * against kl_rwlock (pthread_rwlock stands in), 5 interleaved repeats, compared with
 * ministat's Student's t, with kl_rmlock's bias table under it. Part 2: the writer's
 * bill - an isolated write lock+unlock while 0, 1, 2, 4 ... CPUs threads run read loops,
 * next to one bare membarrier (an IPI to every CPU running one of our threads), so the
 * rendezvous' growth with the running readers shows; closes with a kl_rmlock write's cost in membarriers.
 */
#include <string.h>

#include "scenario.h"

/* Part 2: a write lock+unlock while 0..CPUs threads run read loops, against membarrier. */
static void writer_growth(struct scn_ctx *x, const struct lockops *rw, const struct lockops *rm)
{
	unsigned cpus = kb_cpus(), pts[KB_MAX_AXIS], np = 0;
	char a[16], b[16], c[16];

	pts[np++] = 0;
	for (unsigned n = 1; n < cpus && np < KB_MAX_AXIS - 1; n *= 2)
		pts[np++] = n;
	pts[np++] = cpus;
	scn_say(x, "\nwrite side: median of %d isolated write lock+unlock pairs (%.0f ms idle "
	    "before each) while N threads run read loops\n", SCN_WRITER_SAMPLES,
	    SCN_WRITER_GAP * 1e3);
	scn_say(x, "%8s %14s %14s %14s %9s\n", "readers", rw->name, rm->name, "kl_fence_heavy",
	    "rm/fence");
	for (unsigned i = 0; i < np; i++) {
		unsigned n = pts[i];
		double tw = kb_writer_cost(rw, NULL, n, SCN_WRITER_SAMPLES, SCN_WRITER_GAP, NULL);
		double tm = kb_writer_cost(rm, NULL, n, SCN_WRITER_SAMPLES, SCN_WRITER_GAP, NULL);
		double tf = kb_writer_cost(NULL, rm, n, SCN_WRITER_SAMPLES, SCN_WRITER_GAP, NULL);

		kb_fmt_ns(a, sizeof(a), tw);
		kb_fmt_ns(b, sizeof(b), tm);
		kb_fmt_ns(c, sizeof(c), tf);
		scn_say(x, "%8u %14s %14s %14s %9.2f\n", n, a, b, c, tm / tf);
		if (n == 2 && strcmp(rm->name, "kl_rmlock") == 0)
			scn_say(x, "finding: with 2 readers running, a kl_rmlock write costs %.2fx "
			    "one membarrier system call\n", tm / tf);
	}
}

void scn_rmlock_vs_rwlock(struct scn_ctx *x)
{
	const struct lockops *rm = scn_need(x, "kl_rmlock");
	const struct lockops *rw;
	struct kb_sweep s;
	struct kb_results rs = { 0 };

	if (rm == NULL)
		return;
	rw = scn_want(x, "kl_rwlock", "pthread_rwlock");
	if (rw == NULL)
		return;
	scn_sweep_init(x, &s);
	s.locks[0] = rw;
	s.locks[1] = rm;
	s.nlocks = 2;
	s.threads[0] = x->cli->set_threads ? x->cli->sweep.threads[0] : kb_cpus();
	s.write[0] = x->cli->set_write ? x->cli->sweep.write[0] : 0.1;
	s.repeats = SCN_REPEATS;
	scn_sweep_go(x, &s, &rs, 0.7);
	scn_say(x, "\nread side: %u threads, %g%% writes, cs=4, %u interleaved repeats of %.2fs\n",
	    s.threads[0], s.write[0], s.repeats, s.base.duration);
	scn_say_table(x, &rs);
	scn_bias_table(x, &rs, &s, s.threads[0]);
	scn_compare_cfgs(x, &rs, (const struct kb_config *[]){
			     scn_find_cfg(&rs, rw, s.threads[0], s.write[0], -1),
			     scn_find_cfg(&rs, rm, s.threads[0], s.write[0], -1) }, 2, "ops/s");
	writer_growth(x, rw, rm);
	scn_write_files(x, &rs, "", false);
	kb_results_free(&rs);
}
