/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/scenario.h - the scenarios' private harness: the experiments kernel
 * developers ran when they argued about locks, re-run in userspace with klock and its
 * peers, one file per scenario in this directory, and the tour (`klbench` alone) that
 * strings the key ones together. Each scenario first says what it shows, then runs, then
 * prints its tables and what the numbers say (ratios computed in the same run, never
 * against remembered figures). Locks a scenario cannot do without are "needed" (it
 * refuses to run, naming them: exit status 4); others are "wanted" (it says which
 * stand-in it uses, or which row is missing).
 *
 * harness.c holds the helpers below, catalogue.c the scenario list and `klbench scenario`,
 * tour.c the tour; floors.h adds what the floors' files share. Everything here is
 * internal to klbench (hidden, like every non-kl_ symbol).
 */
#ifndef KB_SCENARIO_H
#define KB_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cli.h"

/* Seconds a run costs besides its measured interval (threads, join, verification). */
#define SCN_RUN_OVERHEAD 0.03
/* Shortest measured interval a budget may shrink a run to. */
#define SCN_MIN_DURATION 0.05
/* Warm-up in scenarios (shorter than run's default: budgets are tight). */
#define SCN_WARMUP 0.05
/* Repeats where a scenario compares with ministat (it needs at least 3). */
#define SCN_REPEATS 5
/* Isolated writes per writer-cost point, and the idle gap before each. */
#define SCN_WRITER_SAMPLES 10
#define SCN_WRITER_GAP 0.005

struct scn_ctx {
	struct kb_cli *cli;
	const char *name;
	const char *outdir;   /* NULL: print only */
	FILE *txt;            /* a copy of what is printed, in outdir */
	double budget;        /* seconds this scenario should take */
	bool tour;
	int status;
};

struct scenario {
	const char *name;
	const char *title;
	const char *story;
	double budget;        /* default seconds when run alone */
	double tour_budget;   /* seconds in the tour; 0: not in it */
	void (*run)(struct scn_ctx *x);
};

/* ---- the catalogue (catalogue.c) and the scenarios (one file each) ------------------ */

extern const struct scenario kb_scenarios[];
extern const size_t kb_nscenarios;

/* Runs one scenario (title, story, machine, then its run); returns its exit status. */
int scn_run(const struct scenario *sc, struct kb_cli *cli, bool tour);

void scn_giant_duel(struct scn_ctx *x);       /* giant_duel.c */
void scn_thread_sweep(struct scn_ctx *x);     /* thread_sweep.c */
void scn_crossover(struct scn_ctx *x);        /* crossover.c */
void scn_rmlock_vs_rwlock(struct scn_ctx *x); /* rmlock_vs_rwlock.c */
void scn_rwsem_table(struct scn_ctx *x);      /* rwsem_table.c */
void scn_hashed_queue(struct scn_ctx *x);     /* hashed_queue.c */
void scn_floors(struct scn_ctx *x);           /* floors.c */

/* ---- printing and files (harness.c) ---------------------------------------------------- */

/* printf, and the same into NAME.txt when the scenario writes files. */
void scn_say(struct scn_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void scn_say_table(struct scn_ctx *x, const struct kb_results *rs);
/* CSV, JSON, raw files and plots of one sweep, when the scenario writes files. */
void scn_write_files(struct scn_ctx *x, const struct kb_results *rs, const char *suffix,
		     bool plot);

/* ---- locks -------------------------------------------------------------------------------- */

/* The lock, or NULL after saying it is needed and setting the status to 4. */
const struct lockops *scn_need(struct scn_ctx *x, const char *name);
/* `name`, or `fallback` with a note saying it stands in. */
const struct lockops *scn_want(struct scn_ctx *x, const char *name, const char *fallback);
/* Appends `name` to the sweep's locks when built in and not there yet. */
void scn_add_if_built(struct kb_sweep *s, const char *name);
/* One "note: not built in (rows missing)" line naming those of `names` not built in. */
void scn_note_missing(struct scn_ctx *x, const char *const *names, size_t n);

/* The locks the user gave with -l (true), else leaves the sweep's as they are (false). */
bool scn_user_locks(struct scn_ctx *x, struct kb_sweep *s);
/* The locks the user gave with -l, else those of `names` built in (a note names the rest). */
void scn_pick_locks(struct scn_ctx *x, struct kb_sweep *s, const char *const *names, size_t n);

/* ---- sweeps and results ---------------------------------------------------------------- */

/* Defaults, then what the user set on the command line that a scenario may take. */
void scn_sweep_init(struct scn_ctx *x, struct kb_sweep *s);
/* Runs a sweep within `share` of the scenario's budget (unless -d fixed the duration);
 * returns the runs that failed verification. */
unsigned scn_sweep_go(struct scn_ctx *x, struct kb_sweep *s, struct kb_results *rs,
		      double share);
/* The run of `ops` in `rs` with the given threads/write%/stripes (stripes < 0: any). */
const struct kb_config *scn_find_cfg(const struct kb_results *rs, const struct lockops *ops,
				     unsigned threads, double write, int stripes);
/* Median operations/s of `o` at `t` threads and `w`% writes (NAN: no such run). */
double scn_ops_at(const struct kb_results *rs, const struct lockops *o, unsigned t, double w);
/* ministat over the repeats of two (or more) configurations. */
void scn_compare_cfgs(struct scn_ctx *x, const struct kb_results *rs,
		      const struct kb_config *const *cfgs, int n, const char *what);
/* "met" or "NOT met". */
const char *scn_met(bool ok);
/* Reader-bias policy table (revocations/s, % unbiased per write share) at `t` threads. */
void scn_bias_table(struct scn_ctx *x, const struct kb_results *rs,
		    const struct kb_sweep *s, unsigned t);

/* Per-run metrics for kb_metric_median(). */
double scn_g_vcsw_s(const struct kb_result *r);  /* voluntary context switches per second */
double scn_g_fair(const struct kb_result *r);    /* max/min acquisitions per thread */
double scn_g_lkst(const struct kb_result *r);    /* lockstat: % of the time waiting */
double scn_g_lkct(const struct kb_result *r);    /* lockstat: % of acquisitions contended */

#endif /* KB_SCENARIO_H */
