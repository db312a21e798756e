/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/rwsem_table.c - `klbench scenario rwsem-table`: the percpu-rwsem /
 * lockperf table. Jeff Layton's lockperf programs (from his 2013 file-locking scalability
 * series) repeat each test and print mean, variance, sigma, max and min per kernel; the
 * 2015 threads that replaced the file locks' lglock with a percpu-rwsem compared kernels
 * with such tables. Here: every rwlock that excludes, four workloads from read-only to
 * 50% writes, 5 repeats each, Mops/s (our own workload, not lockperf's tests). What it
 * teaches: a low sigma matters as much as a high mean - it says the number will hold.
 */
#include <string.h>

#include "ministat.h"
#include "scenario.h"

void scn_rwsem_table(struct scn_ctx *x)
{
	static const double writes[] = { 0, 1, 10, 50 };
	static const char *const wl[] = { "read-only", "1% writes", "10% writes", "50% writes" };
	static const char *const names[] = { "kl_pcpu_rwsem", "kl_rmlock", "kl_rwlock" };
	struct kb_sweep s;
	struct kb_results rs = { 0 };

	scn_sweep_init(x, &s);
	if (!scn_user_locks(x, &s)) {
		scn_note_missing(x, names, 3);
		kb_parse_locks("rwlock", s.locks, KB_MAX_LOCKS, &s.nlocks);
	}
	s.nwrite = 4;
	memcpy(s.write, writes, sizeof(writes));
	s.threads[0] = x->cli->set_threads ? x->cli->sweep.threads[0] : kb_cpus();
	s.repeats = SCN_REPEATS;
	scn_sweep_go(x, &s, &rs, 1.0);
	scn_say(x, "\n%u threads; Mops/s over %u repeats of %.2fs (lockperf's columns)\n",
	    s.threads[0], s.repeats, s.base.duration);
	scn_say(x, "%-24s %-11s %9s %9s %9s %9s %9s\n", "lock", "workload", "mean", "variance",
	    "sigma", "max", "min");
	for (unsigned i = 0; i < s.nlocks; i++) {
		for (unsigned w = 0; w < s.nwrite; w++) {
			const struct kb_config *c = scn_find_cfg(&rs, s.locks[i], s.threads[0],
							     s.write[w], -1);
			struct ms_set set;

			if (c == NULL)
				continue;
			ms_set_init(&set, "");
			for (size_t k = 0; k < rs.n; k++)
				if (kb_config_same(&rs.v[k].cfg, c))
					ms_set_add(&set, rs.v[k].ops_per_s / 1e6);
			ms_set_finish(&set);
			scn_say(x, "%-24s %-11s %9.3f %9.4f %9.3f %9.3f %9.3f\n",
				s.locks[i]->name, wl[w], ms_avg(&set),
				set.n > 1 ? ms_var(&set) : 0, set.n > 1 ? ms_stddev(&set) : 0,
				ms_max(&set), ms_min(&set));
			ms_set_free(&set);
		}
	}
	scn_write_files(x, &rs, "", true);
	kb_results_free(&rs);
}
