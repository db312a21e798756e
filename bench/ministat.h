/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/ministat.h - FreeBSD ministat(1)'s statistics, re-implemented for klbench.
 *
 * The figures are meant to equal Debian's `ministat` 20150715 byte for byte on the same
 * input (tests/compare-vs-ministat.sh checks it): the same one-pass sums in file order,
 * the same median (element N/2 of the sorted set, not the mean of the two middle ones
 * that newer FreeBSD prints for even N), the same pooled-variance Student's t with the
 * same table (df <= 100, else the normal quantiles), the percent half-width relative to
 * the baseline mean, the same printf formats, and the same ASCII plot, including its
 * quirk that the plot's height is that of the *last* set drawn.
 */
#ifndef KB_MINISTAT_H
#define KB_MINISTAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Data sets per comparison (symbols x + * % # @ O). */
#define MS_MAX_SETS 7
/* Confidence levels offered (percent); index 2 (95%) is the default. */
#define MS_NLEVELS 6
#define MS_DEFAULT_LEVEL 2
extern const double ms_levels[MS_NLEVELS];

struct ms_set {
	char *name;
	double *v;        /* sorted by ms_set_finish() */
	size_t n, cap;
	double sy, syy;   /* sums in insertion order (ministat's rounding) */
};

void ms_set_init(struct ms_set *s, const char *name);
void ms_set_add(struct ms_set *s, double x);
void ms_set_finish(struct ms_set *s);   /* sorts; call before any statistic */
void ms_set_free(struct ms_set *s);

double ms_min(const struct ms_set *s);
double ms_max(const struct ms_set *s);
double ms_median(const struct ms_set *s);
double ms_avg(const struct ms_set *s);
double ms_var(const struct ms_set *s);
double ms_stddev(const struct ms_set *s);

/* A comparison of set `s` against baseline `b` at confidence index `level`. */
struct ms_diff {
	double d;        /* avg(s) - avg(b) */
	double e;        /* half-width of the confidence interval: t * pooled s * sqrt(1/n1+1/n2) */
	double spool;    /* pooled standard deviation */
	double t;        /* Student's t used */
	double pct_d, pct_e;  /* d and e in percent of avg(b) */
	bool significant;     /* |d| > e */
};
void ms_compare(const struct ms_set *b, const struct ms_set *s, int level, struct ms_diff *out);

/*
 * A floor "avg(s) >= line x avg(b)" (line 0.95: s within 5% below b, or above) judged on
 * the interval of ms_compare(): MS_FLOOR_MET when all of it lies above (line - 1) x
 * avg(b), MS_FLOOR_UNMET when all of it lies below, else MS_FLOOR_UNRESOLVED (these
 * repeats cannot tell). `out` gets the comparison. Each set needs at least 2 values.
 */
enum ms_floor { MS_FLOOR_MET, MS_FLOOR_UNMET, MS_FLOOR_UNRESOLVED };
enum ms_floor ms_floor_verdict(const struct ms_set *b, const struct ms_set *s, int level,
			       double line, struct ms_diff *out);

/* Index of a confidence level in ms_levels, or -1. */
int ms_level_index(double pct);

/* Reads one number per line (column `column`, tokens split on `delims`; '#' starts a
 * comment). Returns 0, or -1 with a message in err. path "-" is stdin. */
int ms_read(struct ms_set *s, const char *path, int column, const char *delims,
	    char *err, size_t errlen);

/* What ms_report prints. */
#define MS_NO_PLOT (1u << 0)     /* -A: statistics and comparisons, no plot */
#define MS_ONLY_STATS (1u << 1)  /* -n: statistics only */
#define MS_SEPARATE (1u << 2)    /* -s: one bar line per set */

/* ministat's whole output for sets[0..n) (sets[0] is the baseline), as ministat prints it. */
void ms_report(FILE *f, struct ms_set *const *sets, int n, int width, int level, unsigned flags);

/* `klbench compare`: ministat's command line. Returns the exit status. */
int ms_main(int argc, char **argv);

#endif /* KB_MINISTAT_H */
