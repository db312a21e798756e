/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/crossover.c - `klbench scenario crossover`: where do reader-biased
 * locks stop winning? Every lock with a read side runs the same workload at 0% to 100%
 * writes on all CPUs (6 write shares in the tour, 8 alone). What it teaches: per-CPU and
 * rendezvous readers (rmlock, percpu-rwsem, brlock, RCU) win big when writes are rare
 * and lose once a writer's rendezvous (membarrier, a scan of every reader slot, a grace
 * period) comes too often. The pivot table, the bias policy's revocations/s and % of the
 * time unbiased (the why), the crossover against the classic rwlock (kl_rwlock, else
 * pthread_rwlock, else the first classic rwlock of the set) and the read-mostly locks'
 * ratio to kl_rwlock at 0 and 1% writes.
 */
#include <math.h>
#include <string.h>

#include "scenario.h"

/* Rows: locks; columns: write %; cells: median operations/s. */
static void pivot(struct scn_ctx *x, const struct kb_results *rs, const struct kb_sweep *s,
		  unsigned threads)
{
	char v[16];

	scn_say(x, "%-24s", "ops/s at write%");
	for (unsigned w = 0; w < s->nwrite; w++)
		scn_say(x, " %8g", s->write[w]);
	scn_say(x, "\n");
	for (unsigned i = 0; i < s->nlocks; i++) {
		scn_say(x, "%-24s", s->locks[i]->name);
		for (unsigned w = 0; w < s->nwrite; w++) {
			const struct kb_config *c = scn_find_cfg(rs, s->locks[i], threads,
								 s->write[w], -1);

			snprintf(v, sizeof(v), "-");
			if (c != NULL)
				kb_fmt_rate(v, sizeof(v), kb_median_ops(rs, c));
			scn_say(x, " %8s", v);
		}
		scn_say(x, "\n");
	}
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
		scn_say(x, "no classic rwlock in the set: no crossover to report\n");
		return;
	}
	scn_say(x, "\ncrossover against %s (the classic rwlock):\n", ref->name);
	for (unsigned i = 0; i < s->nlocks; i++) {
		const struct lockops *o = s->locks[i];
		int last = -1;
		bool mixed = false;

		if (o == ref || !(o->flags & (LOCKOPS_READ_BIASED | LOCKOPS_READ_RETRY)))
			continue;
		for (unsigned w = 0; w < s->nwrite; w++)
			if (scn_ops_at(rs, o, t, s->write[w]) > scn_ops_at(rs, ref, t, s->write[w]))
				last = (int)w;
		for (int w = 0; w < last; w++)
			mixed |= !(scn_ops_at(rs, o, t, s->write[w]) >
				   scn_ops_at(rs, ref, t, s->write[w]));
		if (last < 0)
			scn_say(x, "  %-22s never wins (loses already at %g%% writes)", o->name,
			    s->write[0]);
		else if (last == (int)s->nwrite - 1)
			scn_say(x, "  %-22s still wins at %g%% writes", o->name, s->write[last]);
		else
			scn_say(x, "  %-22s wins up to %g%% writes, loses from %g%% on: "
			    "the crossover lies between", o->name, s->write[last],
			    s->write[last + 1]);
		scn_say(x, "%s\n",
			mixed ? " (not monotonic below it: noise; rerun with -r 5)" : "");
	}
}

static void crossover_findings(struct scn_ctx *x, const struct kb_results *rs, unsigned t)
{
	static const char *const fast[] = { "kl_rmlock", "kl_pcpu_rwsem" };
	const struct lockops *rw = lockops_find("kl_rwlock");

	for (size_t i = 0; i < 2; i++) {
		const struct lockops *o = lockops_find(fast[i]);

		if (o == NULL || rw == NULL)
			continue;
		for (double w = 0; w <= 1; w += 1) {
			double r = scn_ops_at(rs, o, t, w) / scn_ops_at(rs, rw, t, w);

			if (!isnan(r))
				scn_say(x, "finding: at %g%% writes, %s does %.2fx the "
					"operations per second of kl_rwlock\n", w, fast[i], r);
		}
	}
}

void scn_crossover(struct scn_ctx *x)
{
	static const double writes[] = { 0, 0.1, 1, 5, 10, 25, 50, 100 };
	static const double tour_writes[] = { 0, 0.1, 1, 10, 50, 100 };
	struct kb_sweep s;
	struct kb_results rs = { 0 };
	unsigned t;

	scn_sweep_init(x, &s);
	if (!scn_user_locks(x, &s))
		kb_parse_locks("rw", s.locks, KB_MAX_LOCKS, &s.nlocks);
	if (x->cli->set_write) {
		memcpy(s.write, x->cli->sweep.write, sizeof(s.write));
		s.nwrite = x->cli->sweep.nwrite;
	} else {
		s.nwrite = x->tour ? 6 : 8;
		memcpy(s.write, x->tour ? tour_writes : writes, s.nwrite * sizeof(double));
	}
	s.threads[0] = x->cli->set_threads ? x->cli->sweep.threads[0] : kb_cpus();
	t = s.threads[0];
	scn_sweep_go(x, &s, &rs, 1.0);
	scn_say(x, "\n%u threads, cs=4 words, %.2fs per point\n", t, s.base.duration);
	pivot(x, &rs, &s, t);
	scn_bias_table(x, &rs, &s, t);
	crossover_points(x, &rs, &s, t);
	crossover_findings(x, &rs, t);
	scn_write_files(x, &rs, "", true);
	kb_results_free(&rs);
}
