/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/floors.h - what the floors scenario's files share (floors.c) and the
 * floors of each theme, called by scn_floors() in this order: floors_core.c ([adaptive],
 * [read-mostly]), floors_hash.c ([hashed]), floors_peers.c ([peers]), floors_bias.c
 * ([reader-bias], and kl_rmlock's mixed-write lines, [read-mostly]).
 * Each takes the number of interleaved repeats; ratios are medians within the one run.
 */
#ifndef KB_SCENARIOS_FLOORS_H
#define KB_SCENARIOS_FLOORS_H

#include "scenario.h"

/* One floor's verdict line, tagged with its theme. `value` NAN: a lock it needs is not
 * built in. */
void scn_floor_line(struct scn_ctx *x, const char *theme, const char *what, double value,
		    bool ok, const char *unit);
/* Under a throughput floor "a / b >= line" at `t` threads, `w`% writes: ministat's verdict
 * on the repeats (the difference of the means with its 95% interval, and whether the
 * floor is proven met, proven unmet or unresolved); nothing with fewer than 3 repeats. */
void scn_floor_proof(struct scn_ctx *x, const struct kb_results *rs, const char *a,
		     const char *b, unsigned t, double w, double line);
/* The median of v[0..n) (sorts v). */
double scn_median_d(double *v, unsigned n);
/* The adapter named `name`, or NULL when not built in. */
const struct lockops *scn_lk(const char *name);
/* Median ns per uncontended pair of each lock over `reps` interleaved repeats (NAN for a
 * NULL lock); `via_table[i]` set where the adapter has no inline loop. */
void scn_pairs(const struct lockops *const *locks, const bool *read, unsigned n,
	       unsigned reps, double *out, bool *via_table);
/* A small sweep for one floor; `names` NULL-terminated; only built locks run. */
void scn_mini(struct scn_ctx *x, struct kb_results *rs, const char *const *names,
	      const unsigned *threads, unsigned nt, double write, unsigned reps, double share);
/* Throughput of lock `a` over lock `b` at `t` threads, `w`% writes (NAN: a row missing). */
double scn_ratio(const struct kb_results *rs, const char *a, const char *b, unsigned t,
		 double w);

void scn_floors_pairs(struct scn_ctx *x, unsigned reps);         /* floors_core.c */
void scn_floors_mutex(struct scn_ctx *x, unsigned reps);
void scn_floors_rw(struct scn_ctx *x, unsigned reps);
void scn_floors_writers(struct scn_ctx *x);
void scn_floors_hash(struct scn_ctx *x, unsigned reps);          /* floors_hash.c */
void scn_floors_peers(struct scn_ctx *x, unsigned reps);         /* floors_peers.c */
void scn_floors_bias_pairs(struct scn_ctx *x, unsigned reps);    /* floors_bias.c */
void scn_floors_bias_crossover(struct scn_ctx *x, unsigned reps);

#endif /* KB_SCENARIOS_FLOORS_H */
