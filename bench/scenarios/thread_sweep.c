/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/thread_sweep.c - `klbench scenario thread-sweep`: the OpenBSD rwlock
 * sweep. The same exclusive workload at 1, 2, 4 ... threads, up to twice the CPUs and at
 * least 8. What it teaches: past the CPU count a lock holder gets preempted; pure
 * spinners (MCS, ticket) then burn their time slices waiting for a thread that is not
 * running and their throughput collapses, sleeping locks lose less, adaptive ones should
 * lose least. usr/sys say where the time goes (the OpenBSD win was a system-time win).
 * The summary gives each lock at 1 thread, at the CPU count and at the top, and whether
 * it holds up oversubscribed; kl_mutex's ratio to
 * pthread_mutex oversubscribed closes it.
 */
#include <math.h>
#include <string.h>

#include "scenario.h"

/* Thread counts 1, 2, 4, ... up to and including `top`. */
static void doubling(struct kb_sweep *s, unsigned top)
{
	s->nthreads = 0;
	for (unsigned t = 1; t < top && s->nthreads < KB_MAX_AXIS - 1; t *= 2)
		s->threads[s->nthreads++] = t;
	s->threads[s->nthreads++] = top;
}

static void sweep_summary(struct scn_ctx *x, const struct kb_results *rs,
			  const struct kb_sweep *s)
{
	unsigned cpus = kb_cpus(), top = s->threads[s->nthreads - 1];

	scn_say(x, "\n%-24s %14s %14s %14s\n", "lock", "1 thread", "at CPUs", "at max threads");
	for (unsigned i = 0; i < s->nlocks; i++) {
		const struct kb_config *c1 = scn_find_cfg(rs, s->locks[i], 1, s->write[0], -1);
		const struct kb_config *cc = scn_find_cfg(rs, s->locks[i], cpus, s->write[0], -1);
		const struct kb_config *ct = scn_find_cfg(rs, s->locks[i], top, s->write[0], -1);
		char a[16] = "-", b[16] = "-", c[16] = "-";
		double peak = 0, keep;

		for (unsigned t = 0; t < s->nthreads; t++) {
			const struct kb_config *k = scn_find_cfg(rs, s->locks[i], s->threads[t],
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
		scn_say(x, "%-24s %14s %14s %14s", s->locks[i]->name, a, b, c);
		if (!isnan(keep) && top > cpus)
			scn_say(x, "  %s (%.0f%% of its peak)",
			    keep < 0.1 ? "COLLAPSES oversubscribed" : "holds up", 100 * keep);
		scn_say(x, "\n");
	}
}

static void sweep_finding(struct scn_ctx *x, const struct kb_results *rs, unsigned top,
			double write)
{
	const struct kb_config *kl = scn_find_cfg(rs, lockops_find("kl_mutex"), top, write, -1);
	const struct kb_config *pt = scn_find_cfg(rs, lockops_find("pthread_mutex"), top, write,
						  -1);
	double r;

	if (kl == NULL || pt == NULL || top <= kb_cpus())
		return;
	r = kb_median_ops(rs, kl) / kb_median_ops(rs, pt);
	scn_say(x, "finding: oversubscribed (%u threads on %u CPUs), kl_mutex does %.2fx the "
	    "throughput of pthread_mutex\n", top, kb_cpus(), r);
}

void scn_thread_sweep(struct scn_ctx *x)
{
	static const char *const names[] = { "kl_mutex", "kl_ticket", "kl_mcs", "kl_rwlock",
		"pthread_mutex", "pthread_mutex_adaptive", "pthread_spin", "pthread_rwlock",
		"ck_spinlock_ticket", "ck_spinlock_mcs", "absl_mutex", "std_mutex",
		"std_shared_mutex", "tbb_spin_mutex", "tbb_queuing_mutex", "tbb_spin_rw_mutex",
		"tbb_queuing_rw_mutex" };   /* absl_mutex_rw: its WriterLock is absl_mutex's Lock */
	unsigned cpus = kb_cpus();
	struct kb_sweep s;
	struct kb_results rs = { 0 };

	scn_sweep_init(x, &s);
	scn_pick_locks(x, &s, names, sizeof(names) / sizeof(names[0]));
	if (x->cli->set_threads) {
		memcpy(s.threads, x->cli->sweep.threads, sizeof(s.threads));
		s.nthreads = x->cli->sweep.nthreads;
	} else {
		doubling(&s, cpus * 2 > 8 ? cpus * 2 : 8);
	}
	s.write[0] = 100;
	scn_sweep_go(x, &s, &rs, 1.0);
	scn_say(x, "\nevery operation writes (exclusive), cs=4 words; %.2fs per point; usr/sys = "
	    "CPU-seconds per second of the workers (real time = the interval)\n",
	    s.base.duration);
	scn_say_table(x, &rs);
	sweep_summary(x, &rs, &s);
	sweep_finding(x, &rs, s.threads[s.nthreads - 1], 100);
	scn_write_files(x, &rs, "", true);
	kb_results_free(&rs);
}
