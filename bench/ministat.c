/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/ministat.c - ministat's statistics, comparison and ASCII plot (see ministat.h for
 * the exact behaviour reproduced). Written for klbench; the algorithm is FreeBSD
 * ministat(1)'s (Poul-Henning Kamp), the code is ours.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "ministat.h"

/* Largest degrees of freedom with a tabulated t; beyond it the normal quantiles. */
#define MS_TABLE_DF 100
/* Plot width when stdout is not a terminal (ministat's default). */
#define MS_DEFAULT_WIDTH 74
/* Input line buffer (ministat reads with fgets into BUFSIZ). */
#define MS_LINE_MAX 8192

const double ms_levels[MS_NLEVELS] = { 80, 90, 95, 98, 99, 99.5 };

/*
 * Two-sided Student's t quantiles for the six levels above; row 0 is df = infinity (the
 * normal quantiles), row k is k degrees of freedom. Standard published values, to three
 * decimals, as ministat uses them.
 */
static const double t_table[MS_TABLE_DF + 1][MS_NLEVELS] = {
	{ 1.282, 1.645, 1.960, 2.326, 2.576, 3.090 },
	{ 3.078, 6.314, 12.706, 31.821, 63.657, 318.313 },
	{ 1.886, 2.920, 4.303, 6.965, 9.925, 22.327 },
	{ 1.638, 2.353, 3.182, 4.541, 5.841, 10.215 },
	{ 1.533, 2.132, 2.776, 3.747, 4.604, 7.173 },
	{ 1.476, 2.015, 2.571, 3.365, 4.032, 5.893 },
	{ 1.440, 1.943, 2.447, 3.143, 3.707, 5.208 },
	{ 1.415, 1.895, 2.365, 2.998, 3.499, 4.782 },
	{ 1.397, 1.860, 2.306, 2.896, 3.355, 4.499 },
	{ 1.383, 1.833, 2.262, 2.821, 3.250, 4.296 },
	{ 1.372, 1.812, 2.228, 2.764, 3.169, 4.143 },
	{ 1.363, 1.796, 2.201, 2.718, 3.106, 4.024 },
	{ 1.356, 1.782, 2.179, 2.681, 3.055, 3.929 },
	{ 1.350, 1.771, 2.160, 2.650, 3.012, 3.852 },
	{ 1.345, 1.761, 2.145, 2.624, 2.977, 3.787 },
	{ 1.341, 1.753, 2.131, 2.602, 2.947, 3.733 },
	{ 1.337, 1.746, 2.120, 2.583, 2.921, 3.686 },
	{ 1.333, 1.740, 2.110, 2.567, 2.898, 3.646 },
	{ 1.330, 1.734, 2.101, 2.552, 2.878, 3.610 },
	{ 1.328, 1.729, 2.093, 2.539, 2.861, 3.579 },
	{ 1.325, 1.725, 2.086, 2.528, 2.845, 3.552 },
	{ 1.323, 1.721, 2.080, 2.518, 2.831, 3.527 },
	{ 1.321, 1.717, 2.074, 2.508, 2.819, 3.505 },
	{ 1.319, 1.714, 2.069, 2.500, 2.807, 3.485 },
	{ 1.318, 1.711, 2.064, 2.492, 2.797, 3.467 },
	{ 1.316, 1.708, 2.060, 2.485, 2.787, 3.450 },
	{ 1.315, 1.706, 2.056, 2.479, 2.779, 3.435 },
	{ 1.314, 1.703, 2.052, 2.473, 2.771, 3.421 },
	{ 1.313, 1.701, 2.048, 2.467, 2.763, 3.408 },
	{ 1.311, 1.699, 2.045, 2.462, 2.756, 3.396 },
	{ 1.310, 1.697, 2.042, 2.457, 2.750, 3.385 },
	{ 1.309, 1.696, 2.040, 2.453, 2.744, 3.375 },
	{ 1.309, 1.694, 2.037, 2.449, 2.738, 3.365 },
	{ 1.308, 1.692, 2.035, 2.445, 2.733, 3.356 },
	{ 1.307, 1.691, 2.032, 2.441, 2.728, 3.348 },
	{ 1.306, 1.690, 2.030, 2.438, 2.724, 3.340 },
	{ 1.306, 1.688, 2.028, 2.434, 2.719, 3.333 },
	{ 1.305, 1.687, 2.026, 2.431, 2.715, 3.326 },
	{ 1.304, 1.686, 2.024, 2.429, 2.712, 3.319 },
	{ 1.304, 1.685, 2.023, 2.426, 2.708, 3.313 },
	{ 1.303, 1.684, 2.021, 2.423, 2.704, 3.307 },
	{ 1.303, 1.683, 2.020, 2.421, 2.701, 3.301 },
	{ 1.302, 1.682, 2.018, 2.418, 2.698, 3.296 },
	{ 1.302, 1.681, 2.017, 2.416, 2.695, 3.291 },
	{ 1.301, 1.680, 2.015, 2.414, 2.692, 3.286 },
	{ 1.301, 1.679, 2.014, 2.412, 2.690, 3.281 },
	{ 1.300, 1.679, 2.013, 2.410, 2.687, 3.277 },
	{ 1.300, 1.678, 2.012, 2.408, 2.685, 3.273 },
	{ 1.299, 1.677, 2.011, 2.407, 2.682, 3.269 },
	{ 1.299, 1.677, 2.010, 2.405, 2.680, 3.265 },
	{ 1.299, 1.676, 2.009, 2.403, 2.678, 3.261 },
	{ 1.298, 1.675, 2.008, 2.402, 2.676, 3.258 },
	{ 1.298, 1.675, 2.007, 2.400, 2.674, 3.255 },
	{ 1.298, 1.674, 2.006, 2.399, 2.672, 3.251 },
	{ 1.297, 1.674, 2.005, 2.397, 2.670, 3.248 },
	{ 1.297, 1.673, 2.004, 2.396, 2.668, 3.245 },
	{ 1.297, 1.673, 2.003, 2.395, 2.667, 3.242 },
	{ 1.297, 1.672, 2.002, 2.394, 2.665, 3.239 },
	{ 1.296, 1.672, 2.002, 2.392, 2.663, 3.237 },
	{ 1.296, 1.671, 2.001, 2.391, 2.662, 3.234 },
	{ 1.296, 1.671, 2.000, 2.390, 2.660, 3.232 },
	{ 1.296, 1.670, 2.000, 2.389, 2.659, 3.229 },
	{ 1.295, 1.670, 1.999, 2.388, 2.657, 3.227 },
	{ 1.295, 1.669, 1.998, 2.387, 2.656, 3.225 },
	{ 1.295, 1.669, 1.998, 2.386, 2.655, 3.223 },
	{ 1.295, 1.669, 1.997, 2.385, 2.654, 3.220 },
	{ 1.295, 1.668, 1.997, 2.384, 2.652, 3.218 },
	{ 1.294, 1.668, 1.996, 2.383, 2.651, 3.216 },
	{ 1.294, 1.668, 1.995, 2.382, 2.650, 3.214 },
	{ 1.294, 1.667, 1.995, 2.382, 2.649, 3.213 },
	{ 1.294, 1.667, 1.994, 2.381, 2.648, 3.211 },
	{ 1.294, 1.667, 1.994, 2.380, 2.647, 3.209 },
	{ 1.293, 1.666, 1.993, 2.379, 2.646, 3.207 },
	{ 1.293, 1.666, 1.993, 2.379, 2.645, 3.206 },
	{ 1.293, 1.666, 1.993, 2.378, 2.644, 3.204 },
	{ 1.293, 1.665, 1.992, 2.377, 2.643, 3.202 },
	{ 1.293, 1.665, 1.992, 2.376, 2.642, 3.201 },
	{ 1.293, 1.665, 1.991, 2.376, 2.641, 3.199 },
	{ 1.292, 1.665, 1.991, 2.375, 2.640, 3.198 },
	{ 1.292, 1.664, 1.990, 2.374, 2.640, 3.197 },
	{ 1.292, 1.664, 1.990, 2.374, 2.639, 3.195 },
	{ 1.292, 1.664, 1.990, 2.373, 2.638, 3.194 },
	{ 1.292, 1.664, 1.989, 2.373, 2.637, 3.193 },
	{ 1.292, 1.663, 1.989, 2.372, 2.636, 3.191 },
	{ 1.292, 1.663, 1.989, 2.372, 2.636, 3.190 },
	{ 1.292, 1.663, 1.988, 2.371, 2.635, 3.189 },
	{ 1.291, 1.663, 1.988, 2.370, 2.634, 3.188 },
	{ 1.291, 1.663, 1.988, 2.370, 2.634, 3.187 },
	{ 1.291, 1.662, 1.987, 2.369, 2.633, 3.185 },
	{ 1.291, 1.662, 1.987, 2.369, 2.632, 3.184 },
	{ 1.291, 1.662, 1.987, 2.368, 2.632, 3.183 },
	{ 1.291, 1.662, 1.986, 2.368, 2.631, 3.182 },
	{ 1.291, 1.662, 1.986, 2.368, 2.630, 3.181 },
	{ 1.291, 1.661, 1.986, 2.367, 2.630, 3.180 },
	{ 1.291, 1.661, 1.986, 2.367, 2.629, 3.179 },
	{ 1.291, 1.661, 1.985, 2.366, 2.629, 3.178 },
	{ 1.290, 1.661, 1.985, 2.366, 2.628, 3.177 },
	{ 1.290, 1.661, 1.985, 2.365, 2.627, 3.176 },
	{ 1.290, 1.661, 1.984, 2.365, 2.627, 3.175 },
	{ 1.290, 1.660, 1.984, 2.365, 2.626, 3.175 },
	{ 1.290, 1.660, 1.984, 2.364, 2.626, 3.174 },
};

/* Plot symbols: index = OR of the set numbers (1-based) sharing a cell; 0 is empty. */
static const char ms_symbol[MS_MAX_SETS + 1] = { ' ', 'x', '+', '*', '%', '#', '@', 'O' };

/* ---- data sets ----------------------------------------------------------------------- */

void ms_set_init(struct ms_set *s, const char *name)
{
	memset(s, 0, sizeof(*s));
	s->name = strdup(name);
}

void ms_set_add(struct ms_set *s, double x)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		double *v = realloc(s->v, cap * sizeof(*v));

		if (v == NULL) {
			perror("klbench");
			exit(1);
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = x;
	s->sy += x;
	s->syy += x * x;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y ? 1 : 0;
}

void ms_set_finish(struct ms_set *s)
{
	qsort(s->v, s->n, sizeof(*s->v), cmp_double);
}

void ms_set_free(struct ms_set *s)
{
	free(s->name);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

double ms_min(const struct ms_set *s)
{
	return s->v[0];
}

double ms_max(const struct ms_set *s)
{
	return s->v[s->n - 1];
}

double ms_median(const struct ms_set *s)
{
	return s->v[s->n / 2];  /* Debian 20150715: the upper middle element for even N */
}

double ms_avg(const struct ms_set *s)
{
	return s->sy / (double)s->n;
}

double ms_var(const struct ms_set *s)
{
	double n = (double)s->n;

	return (s->syy - s->sy * s->sy / n) / (n - 1.0);
}

double ms_stddev(const struct ms_set *s)
{
	return sqrt(ms_var(s));
}

/* ---- comparison ---------------------------------------------------------------------- */

int ms_level_index(double pct)
{
	for (int i = 0; i < MS_NLEVELS; i++)
		if (pct == ms_levels[i])
			return i;
	return -1;
}

void ms_compare(const struct ms_set *b, const struct ms_set *s, int level, struct ms_diff *out)
{
	size_t df = s->n + b->n - 2;
	double pooled;

	out->t = t_table[df > MS_TABLE_DF ? 0 : df][level];
	pooled = ((double)(s->n - 1) * ms_var(s) + (double)(b->n - 1) * ms_var(b)) / (double)df;
	out->spool = sqrt(pooled);
	out->d = ms_avg(s) - ms_avg(b);
	out->e = out->t * out->spool * sqrt(1.0 / (double)s->n + 1.0 / (double)b->n);
	out->pct_d = out->d * 100 / ms_avg(b);
	out->pct_e = out->e * 100 / ms_avg(b);
	out->significant = fabs(out->d) > out->e;
}

enum ms_floor ms_floor_verdict(const struct ms_set *b, const struct ms_set *s, int level,
			       double line, struct ms_diff *out)
{
	double at = (line - 1) * 100; /* the floor as a difference, in percent of avg(b) */

	ms_compare(b, s, level, out);
	if (out->pct_d - out->pct_e > at)
		return MS_FLOOR_MET;
	if (out->pct_d + out->pct_e < at)
		return MS_FLOOR_UNMET;
	return MS_FLOOR_UNRESOLVED;
}

static void print_vitals_head(FILE *f)
{
	fprintf(f, "    N           Min           Max        Median           Avg        Stddev\n");
}

static void print_vitals(FILE *f, const struct ms_set *s, int setno)
{
	fprintf(f, "%c %3d %13.8g %13.8g %13.8g %13.8g %13.8g\n", ms_symbol[setno], (int)s->n,
		ms_min(s), ms_max(s), ms_median(s), ms_avg(s), ms_stddev(s));
}

static void print_diff(FILE *f, const struct ms_diff *d, int level)
{
	if (!d->significant) {
		fprintf(f, "No difference proven at %.1f%% confidence\n", ms_levels[level]);
		return;
	}
	fprintf(f, "Difference at %.1f%% confidence\n", ms_levels[level]);
	fprintf(f, "\t%g +/- %g\n", d->d, d->e);
	fprintf(f, "\t%g%% +/- %g%%\n", d->pct_d, d->pct_e);
	fprintf(f, "\t(Student's t, pooled s = %g)\n", d->spool);
}

/* ---- the ASCII plot ------------------------------------------------------------------- */

struct ms_plot {
	double min, max, x0, dx;
	int width, height;         /* height: rows of cells, row 0 unused (ministat's layout) */
	unsigned char *cells;      /* height x width, OR of set numbers */
	char *bar[MS_MAX_SETS];    /* avg/median/stddev lines (one, or one per set) */
	bool separate;
};

static void plot_extend(struct ms_plot *p, double x)
{
	if (x < p->min)
		p->min = x;
	if (x > p->max)
		p->max = x;
}

/* The plot covers every set's min and max and avg +/- stddev. */
static void plot_dimension(struct ms_plot *p, struct ms_set *const *sets, int n)
{
	p->min = 999e99;
	p->max = -999e99;
	for (int i = 0; i < n; i++) {
		plot_extend(p, ms_min(sets[i]));
		plot_extend(p, ms_max(sets[i]));
		plot_extend(p, ms_avg(sets[i]) - ms_stddev(sets[i]));
		plot_extend(p, ms_avg(sets[i]) + ms_stddev(sets[i]));
	}
	p->dx = (p->max - p->min) / (p->width - 1.0);
	p->x0 = p->min - .5 * p->dx;
}

static int plot_col(const struct ms_plot *p, double x)
{
	return (int)((x - p->x0) / p->dx);
}

/* Highest stack of equal columns in a sorted set. */
static int plot_stack(const struct ms_plot *p, const struct ms_set *s)
{
	int best = 1, run = 0, last = -1;

	for (size_t i = 0; i < s->n; i++) {
		int c = plot_col(p, s->v[i]);

		run = c == last ? run + 1 : 1;
		last = c;
		if (run > best)
			best = run;
	}
	return best;
}

static void plot_points(struct ms_plot *p, const struct ms_set *s, int setno)
{
	int rows = plot_stack(p, s) + 1, run = 0, last = -1;

	if (rows > p->height) {
		p->cells = realloc(p->cells, (size_t)rows * (size_t)p->width);
		if (p->cells == NULL) {
			perror("klbench");
			exit(1);
		}
		memset(p->cells + (size_t)p->height * (size_t)p->width, 0,
		       (size_t)(rows - p->height) * (size_t)p->width);
	}
	p->height = rows;  /* ministat's quirk: the last set drawn decides the height */
	for (size_t i = 0; i < s->n; i++) {
		int c = plot_col(p, s->v[i]);

		run = c == last ? run + 1 : 1;
		last = c;
		p->cells[(size_t)run * (size_t)p->width + (size_t)c] |= (unsigned char)setno;
	}
}

static void plot_bar(struct ms_plot *p, const struct ms_set *s, int setno)
{
	int b = p->separate ? setno - 1 : 0;
	double avg = ms_avg(s), sd = ms_stddev(s);
	char *bar;

	if (p->bar[b] == NULL)
		p->bar[b] = calloc((size_t)p->width, 1);
	bar = p->bar[b];
	if (!isnan(sd)) {
		int lo = plot_col(p, avg - sd), hi = plot_col(p, avg + sd);

		bar[hi] = '|';
		bar[lo] = '|';
		for (int i = lo + 1; i < hi; i++)
			if (bar[i] == 0)
				bar[i] = '_';
	}
	bar[plot_col(p, ms_median(s))] = 'M';
	bar[plot_col(p, avg)] = 'A';
}

static void plot_rule(FILE *f, int width)
{
	fputc('+', f);
	for (int i = 0; i < width; i++)
		fputc('-', f);
	fputs("+\n", f);
}

static void plot_dump(FILE *f, const struct ms_plot *p)
{
	plot_rule(f, p->width);
	for (int row = p->height - 1; row >= 1; row--) {
		fputc('|', f);
		for (int j = 0; j < p->width; j++) {
			unsigned k = p->cells[(size_t)row * (size_t)p->width + (size_t)j];

			if (k <= MS_MAX_SETS)
				fputc(ms_symbol[k], f);
			else
				fprintf(f, "[%02x]", k);
		}
		fputs("|\n", f);
	}
	for (int i = 0; i < MS_MAX_SETS; i++) {
		if (p->bar[i] == NULL)
			continue;
		fputc('|', f);
		for (int j = 0; j < p->width; j++)
			fputc(p->bar[i][j] ? p->bar[i][j] : ' ', f);
		fputs("|\n", f);
	}
	plot_rule(f, p->width);
}

static void ms_plot(FILE *f, struct ms_set *const *sets, int n, int width, bool separate)
{
	struct ms_plot p = { .width = width, .separate = separate };

	plot_dimension(&p, sets, n);
	if (p.max - p.min == 0) {
		fprintf(f, "[no plot, span is zero width]\n");
		return;
	}
	for (int i = 0; i < n; i++) {
		plot_points(&p, sets[i], i + 1);
		plot_bar(&p, sets[i], i + 1);
	}
	plot_dump(f, &p);
	free(p.cells);
	for (int i = 0; i < MS_MAX_SETS; i++)
		free(p.bar[i]);
}

void ms_report(FILE *f, struct ms_set *const *sets, int n, int width, int level, unsigned flags)
{
	for (int i = 0; i < n; i++)
		fprintf(f, "%c %s\n", ms_symbol[i + 1], sets[i]->name);
	if (!(flags & (MS_NO_PLOT | MS_ONLY_STATS)))
		ms_plot(f, sets, n, width, flags & MS_SEPARATE);
	print_vitals_head(f);
	print_vitals(f, sets[0], 1);
	for (int i = 1; i < n; i++) {
		struct ms_diff d;

		print_vitals(f, sets[i], i + 1);
		if (flags & MS_ONLY_STATS)
			continue;
		ms_compare(sets[0], sets[i], level, &d);
		print_diff(f, &d, level);
	}
}

/* ---- input ----------------------------------------------------------------------------- */

/* The `column`-th token of a line (1-based), or NULL; a token starting with '#' ends it. */
static char *line_token(char *line, int column, const char *delims)
{
	char *save = NULL, *t = strtok_r(line, delims, &save);

	for (int i = 1; t != NULL && *t != '#'; i++, t = strtok_r(NULL, delims, &save))
		if (i == column)
			return t;
	return NULL;
}

int ms_read(struct ms_set *s, const char *path, int column, const char *delims,
	    char *err, size_t errlen)
{
	bool std = strcmp(path, "-") == 0;
	FILE *f = std ? stdin : fopen(path, "r");
	char line[MS_LINE_MAX];
	int lineno = 0;

	ms_set_init(s, std ? "<stdin>" : path);
	if (f == NULL) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		size_t len = strlen(line);
		char *t, *end;
		double d;

		lineno++;
		if (len > 0 && line[len - 1] == '\n')
			line[len - 1] = '\0';
		t = line_token(line, column, delims);
		if (t == NULL)
			continue;
		d = strtod(t, &end);
		if (*end != '\0') {
			snprintf(err, errlen, "invalid data on line %d in %s: '%s'", lineno,
				 s->name, t);
			if (!std)
				fclose(f);
			return -1;
		}
		ms_set_add(s, d);
	}
	if (!std)
		fclose(f);
	if (s->n < 3) {
		snprintf(err, errlen, "data set %s must contain at least 3 data points", s->name);
		return -1;
	}
	ms_set_finish(s);
	return 0;
}

/* ---- `klbench compare` ------------------------------------------------------------------ */

static void ms_usage(FILE *f)
{
	fprintf(f,
		"usage: klbench compare [-A] [-n] [-s] [-C column] [-c level] [-d delims] "
		"[-w width] FILE...\n"
		"  ministat(1)'s statistics on files of one number per line (klbench --raw "
		"writes them).\n"
		"  The first file is the baseline; each other one is compared to it with "
		"Student's t.\n"
		"  -A        statistics and comparisons, no plot\n"
		"  -n        statistics only (no plot, no comparison)\n"
		"  -s        one avg/median/stddev bar per set\n"
		"  -C column take the numbers from this column (1-based, default 1)\n"
		"  -c level  confidence: 80, 90, 95 (default), 98, 99 or 99.5\n"
		"  -d delims column delimiters (default space and tab)\n"
		"  -w width  plot width (default: terminal width - 2, or 74)\n"
		"  At most %d files; each needs at least 3 numbers.\n",
		MS_MAX_SETS);
}

/* ministat's plot width: -w, else COLUMNS or the terminal's width - 2 on a tty, else 74. */
static int default_width(void)
{
	struct winsize ws;
	const char *cols;

	if (!isatty(STDOUT_FILENO))
		return MS_DEFAULT_WIDTH;
	cols = getenv("COLUMNS");
	if (cols != NULL && *cols != '\0')
		return atoi(cols);
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != -1 && ws.ws_col > 2)
		return ws.ws_col - 2;
	return MS_DEFAULT_WIDTH;
}

struct ms_opts {
	unsigned flags;
	int column, level, width;
	const char *delims;
};

static int ms_parse_number(const char *arg, const char *what, double *out)
{
	char *end;

	*out = strtod(arg, &end);
	if (*arg == '\0' || *end != '\0') {
		fprintf(stderr, "klbench compare: %s '%s' is not a number\n", what, arg);
		return -1;
	}
	return 0;
}

static int ms_option(struct ms_opts *o, int c, const char *arg)
{
	double x;

	switch (c) {
	case 'A': o->flags |= MS_NO_PLOT; return 0;
	case 'n': o->flags |= MS_ONLY_STATS; return 0;
	case 's': o->flags |= MS_SEPARATE; return 0;
	case 'd':
		if (*arg == '\0') {
			fprintf(stderr, "klbench compare: empty delimiter string\n");
			return -1;
		}
		o->delims = arg;
		return 0;
	case 'C':
	case 'c':
	case 'w':
		if (ms_parse_number(arg, c == 'C' ? "column" : c == 'c' ? "level" : "width",
				    &x) < 0)
			return -1;
		if (c == 'c' && (o->level = ms_level_index(x)) < 0) {
			fprintf(stderr, "klbench compare: no support for confidence level %s "
				"(80, 90, 95, 98, 99, 99.5)\n", arg);
			return -1;
		}
		if (c == 'C' && (x < 1 || x != (int)x)) {
			fprintf(stderr, "klbench compare: column must be a positive integer\n");
			return -1;
		}
		if (c == 'w' && (x < 2 || x != (int)x)) {
			fprintf(stderr, "klbench compare: width must be an integer >= 2\n");
			return -1;
		}
		if (c == 'C')
			o->column = (int)x;
		else if (c == 'w')
			o->width = (int)x;
		return 0;
	default:
		ms_usage(stderr);
		return -1;
	}
}

int ms_main(int argc, char **argv)
{
	struct ms_opts o = { .column = 1, .level = MS_DEFAULT_LEVEL, .width = -1,
			     .delims = " \t" };
	struct ms_set sets[MS_MAX_SETS], *ptr[MS_MAX_SETS] = { NULL };
	const char *stdin_only[] = { "-" }, *const *paths;
	char err[512];
	int c, n;

	optind = 1;
	while ((c = getopt(argc, argv, "+AC:c:d:hnsw:")) != -1) {
		if (c == 'h') {
			ms_usage(stdout);
			return 0;
		}
		if (ms_option(&o, c, optarg) < 0)
			return 2;
	}
	n = argc - optind;
	paths = n ? (const char *const *)argv + optind : stdin_only;  /* no file: stdin */
	n = n ? n : 1;
	if (n > MS_MAX_SETS) {
		fprintf(stderr, "klbench compare: at most %d data sets\n", MS_MAX_SETS);
		return 2;
	}
	if (o.width < 0)
		o.width = default_width();
	for (int i = 0; i < n; i++) {
		ptr[i] = &sets[i];
		if (ms_read(ptr[i], paths[i], o.column, o.delims, err, sizeof(err)) < 0) {
			fprintf(stderr, "klbench compare: %s\n", err);
			return 2;
		}
	}
	ms_report(stdout, ptr, n, o.width, o.level, o.flags);
	for (int i = 0; i < n; i++)
		ms_set_free(ptr[i]);
	return 0;
}
