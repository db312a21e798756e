/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/plot.c - SVG plots through gnuplot (when installed): throughput against the axis
 * a sweep varied (threads, write %, stripes, critical-section length), one line per
 * lock (and per other varied setting), and the acquisition-latency CDFs: one plot per
 * lock, one curve per configuration of it. The data travels inline (gnuplot 5 data
 * blocks): no temporary files.
 *
 * Readability rules: every plot's title says what it shows and on which machine; a plot
 * grows taller with its legend, so the legend shows every curve it draws; a latency plot
 * has at most KB_MAX_CURVES curves (a lock with more configurations gets several files).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "klbench.h"

/* Curves per latency plot, at most (more is unreadable). */
#define KB_MAX_CURVES 8
/* Plot size in pixels before the legend asks for more height. */
#define KB_PLOT_W 960
#define KB_PLOT_H 560
/* One legend row at the 12-point font, and what the title, axes and margins take. */
#define KB_KEY_ROW_PX 18
#define KB_FRAME_PX 150
/* Latency plots up to this many ns get 1-2-5 ticks (they fit); wider ones decades. */
#define KB_FINE_TICS_MAX_NS 10000

bool kb_have_gnuplot(void)
{
	const char *path = getenv("PATH");
	char *copy, *save = NULL, buf[4096];
	bool found = false;

	if (path == NULL)
		return false;
	copy = strdup(path);
	for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		snprintf(buf, sizeof(buf), "%s/gnuplot", d);
		found = access(buf, X_OK) == 0;
	}
	free(copy);
	return found;
}

/* gnuplot strings are double-quoted here: a double quote in a name becomes a single one. */
static void gp_sanitize(char *s)
{
	for (; *s; s++)
		if (*s == '"' || *s == '\\')
			*s = '\'';
}

/*
 * A plot titled "@title: @what" over a second line naming the machine, tall enough for
 * @curves legend rows.
 */
static FILE *gp_open(const char *svg, const char *title, const char *what, size_t curves)
{
	char head[512], machine[256];
	unsigned height = KB_FRAME_PX + (unsigned)curves * KB_KEY_ROW_PX;
	FILE *g;

	if (!kb_have_gnuplot()) {
		fprintf(stderr, "klbench: cannot plot %s: gnuplot is not installed (Debian: "
			"apt-get install gnuplot-nox); the numbers are in the table/CSV\n", svg);
		return NULL;
	}
	g = popen("gnuplot", "w");
	if (g == NULL) {
		perror("klbench: gnuplot");
		return NULL;
	}
	kb_machine_short(machine, sizeof(machine));
	snprintf(head, sizeof(head), "%s: %s", title ? title : "klbench", what);
	gp_sanitize(head);
	gp_sanitize(machine);
	fprintf(g, "set terminal svg size %u,%u dynamic font 'sans,12' background rgb "
		"'white'\nset termoption noenhanced\nset output '%s'\n"
		"set title \"%s\\n%s\"\nset grid\nset key outside right top\n", KB_PLOT_W,
		height > KB_PLOT_H ? height : KB_PLOT_H, svg, head, machine);
	return g;
}

static int gp_close(FILE *g, const char *svg)
{
	int st = pclose(g);

	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "klbench: gnuplot failed to write %s\n", svg);
		return -1;
	}
	return 0;
}

/* ---- throughput ------------------------------------------------------------------------- */

enum kb_axis { KB_AX_THREADS, KB_AX_WRITE, KB_AX_STRIPES, KB_AX_CS };

static double axis_value(const struct kb_config *c, enum kb_axis a)
{
	switch (a) {
	case KB_AX_THREADS: return c->threads;
	case KB_AX_WRITE: return c->write_pct;
	case KB_AX_STRIPES: return c->stripes;
	default: return c->cs;
	}
}

static enum kb_axis pick_axis(const struct kb_results *rs)
{
	static const enum kb_axis order[] = { KB_AX_THREADS, KB_AX_WRITE, KB_AX_STRIPES,
					      KB_AX_CS };

	for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++)
		for (size_t i = 1; i < rs->n; i++)
			if (axis_value(&rs->v[i].cfg, order[k]) !=
			    axis_value(&rs->v[0].cfg, order[k]))
				return order[k];
	return KB_AX_THREADS;
}

/* Same series: equal in everything but the x axis. */
static bool same_series(const struct kb_config *a, const struct kb_config *b, enum kb_axis x)
{
	struct kb_config c = *b;

	switch (x) {
	case KB_AX_THREADS: c.threads = a->threads; break;
	case KB_AX_WRITE: c.write_pct = a->write_pct; break;
	case KB_AX_STRIPES: c.stripes = a->stripes; break;
	case KB_AX_CS: c.cs = a->cs; break;
	}
	return kb_config_same(a, &c);
}

/* The lock's name, plus whatever else varies between series (never the x axis). */
static void series_title(const struct kb_results *rs, const struct kb_config *c,
			 enum kb_axis x, char *buf, size_t len)
{
	bool place = false, write = false, table = false;

	for (size_t i = 0; i < rs->n; i++) {
		place |= rs->v[i].cfg.placement != c->placement;
		write |= x != KB_AX_WRITE && rs->v[i].cfg.write_pct != c->write_pct;
		table |= x != KB_AX_STRIPES && rs->v[i].cfg.stripes != c->stripes;
	}
	snprintf(buf, len, "%s%s%s", c->ops->name, place ? " " : "",
		 place ? kb_placement_name(c->placement) : "");
	if (write && strlen(buf) + 16 < len)
		snprintf(buf + strlen(buf), len - strlen(buf), " w=%g%%", c->write_pct);
	if (table && strlen(buf) + 16 < len)
		snprintf(buf + strlen(buf), len - strlen(buf), " stripes=%u", c->stripes);
}

/* Index of the first result of each series; returns how many. */
static size_t series_heads(const struct kb_results *rs, enum kb_axis x, size_t *head)
{
	size_t n = 0;

	for (size_t i = 0; i < rs->n; i++) {
		bool seen = false;

		for (size_t k = 0; k < n && !seen; k++)
			seen = same_series(&rs->v[head[k]].cfg, &rs->v[i].cfg, x);
		if (!seen)
			head[n++] = i;
	}
	return n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One data block per series: x, median ops/s (x values sorted, each once). */
static void series_data(FILE *g, const struct kb_results *rs, size_t head, enum kb_axis x,
			size_t idx)
{
	double *xs = malloc(rs->n * sizeof(double));
	size_t n = 0;

	for (size_t i = 0; i < rs->n; i++) {
		double v = axis_value(&rs->v[i].cfg, x);
		bool dup = false;

		if (!same_series(&rs->v[head].cfg, &rs->v[i].cfg, x))
			continue;
		for (size_t k = 0; k < n && !dup; k++)
			dup = xs[k] == v;
		if (!dup)
			xs[n++] = v;
	}
	qsort(xs, n, sizeof(double), cmp_double);
	fprintf(g, "$s%zu << EOD\n", idx);
	for (size_t k = 0; k < n; k++)
		for (size_t i = 0; i < rs->n; i++)
			if (same_series(&rs->v[head].cfg, &rs->v[i].cfg, x) &&
			    axis_value(&rs->v[i].cfg, x) == xs[k]) {
				fprintf(g, "%g %g\n", xs[k], kb_median_ops(rs, &rs->v[i].cfg));
				break;
			}
	fprintf(g, "EOD\n");
	free(xs);
}

/* One colour per lock (placements share it and differ in dash). */
static const char *const kb_palette[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
	"#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000",
	"#aec7e8" };
#define KB_PALETTE (sizeof(kb_palette) / sizeof(kb_palette[0]))
/* Point types cycled against the colours: 13 is prime to the 12 colours, so no two of the
 * first 156 locks share both colour and point. */
#define KB_POINT_TYPES 13
/* gnuplot dash types: klock's locks solid, peers dashed; a second or third placement of
 * the same lock takes the next pair (short dashes, dot-dash). */
#define KB_DT_KLOCK 1
#define KB_DT_PEER 2
#define KB_DT_PER_PLACEMENT 2
/* The y axis turns logarithmic when the medians span this factor (three orders of
 * magnitude): on a linear one the collapsed locks lie flat on zero. */
#define KB_LOG_Y_SPAN 1000.0

/* Dash type of a series: solid for klock, dashed for peers, shifted per placement. */
static int series_dash(const struct kb_config *c)
{
	bool klock = c->ops != NULL && strcmp(c->ops->family, "klock") == 0;

	return (klock ? KB_DT_KLOCK : KB_DT_PEER) + (int)c->placement * KB_DT_PER_PLACEMENT;
}

/* Whether the positive medians of @rs span KB_LOG_Y_SPAN or more. */
static bool wants_log_y(const struct kb_results *rs)
{
	double lo = INFINITY, hi = 0;

	for (size_t i = 0; i < rs->n; i++) {
		double v = kb_median_ops(rs, &rs->v[i].cfg);

		if (v > 0) {
			lo = fmin(lo, v);
			hi = fmax(hi, v);
		}
	}
	return hi > 0 && hi / lo >= KB_LOG_Y_SPAN;
}

/* Index of series s's lock among the distinct locks of the series before it. */
static size_t lock_ordinal(const struct kb_results *rs, const size_t *head, size_t s)
{
	size_t k = 0;

	for (size_t i = 0; i < s; i++) {
		bool seen = false;

		for (size_t j = 0; j < i && !seen; j++)
			seen = rs->v[head[j]].cfg.ops == rs->v[head[i]].cfg.ops;
		if (!seen && rs->v[head[i]].cfg.ops == rs->v[head[s]].cfg.ops)
			return k;
		k += !seen;
	}
	return k;
}

int kb_plot_throughput(const char *svg, const struct kb_results *rs, const char *title)
{
	static const char *const xlabel[] = { "threads", "writes (% of operations)",
					      "stripes (lock instances over the table)",
					      "critical section (counter words)" };
	static const char *const what[] = { "throughput against threads",
					    "throughput against write share",
					    "throughput against stripes",
					    "throughput against critical-section length" };
	enum kb_axis x = pick_axis(rs);
	size_t *head = malloc((rs->n + 1) * sizeof(size_t)), n = series_heads(rs, x, head);
	double lo = INFINITY, hi = 0;
	FILE *g = rs->n ? gp_open(svg, title, what[x], n) : NULL;
	char name[256];

	if (g == NULL) {
		free(head);
		return 0;
	}
	for (size_t i = 0; i < rs->n; i++) {
		lo = fmin(lo, axis_value(&rs->v[i].cfg, x));
		hi = fmax(hi, axis_value(&rs->v[i].cfg, x));
	}
	fprintf(g, "set xlabel '%s'\nset ylabel 'operations/s (median over repeats%s)'\n",
		xlabel[x], wants_log_y(rs) ? ", log scale" : "");
	if (wants_log_y(rs))
		fprintf(g, "set logscale y 10\n");
	else
		fprintf(g, "set yrange [0:*]\n");
	if (lo > 0 && hi / lo >= 16)
		fprintf(g, "set logscale x 2\n");
	else if (x == KB_AX_WRITE && lo == 0 && hi >= 10)
		fprintf(g, "set logscale x 10\nset xlabel 'writes (%% of operations; 0 drawn "
			"at 0.01)'\n");
	for (size_t s = 0; s < n; s++)
		series_data(g, rs, head[s], x, s);
	fprintf(g, "set format y '%%.1s%%c'\nplot ");
	for (size_t s = 0; s < n; s++) {
		const struct kb_config *c = &rs->v[head[s]].cfg;
		size_t k = lock_ordinal(rs, head, s);

		series_title(rs, c, x, name, sizeof(name));
		fprintf(g, "%s$s%zu using ($1 > 0 ? $1 : 0.01):2 with linespoints lw 2 pt %zu "
			"lc rgb '%s' dt %d title '%s'", s ? ", " : "", s, k % KB_POINT_TYPES + 1,
			kb_palette[k % KB_PALETTE], series_dash(c), name);
	}
	fprintf(g, "\n");
	free(head);
	return gp_close(g, svg);
}

/* ---- latency CDF --------------------------------------------------------------------------- */

/* Every acquisition sample of a configuration, all repeats. */
static struct kb_hist *cdf_hist(const struct kb_results *rs, const struct kb_config *c)
{
	struct kb_hist *h = malloc(sizeof(*h));

	if (h == NULL) {
		perror("klbench");
		exit(2);
	}
	kb_hist_init(h);
	for (size_t i = 0; i < rs->n; i++) {
		if (!kb_config_same(&rs->v[i].cfg, c))
			continue;
		kb_hist_merge(h, rs->v[i].rhist);
		kb_hist_merge(h, rs->v[i].whist);
	}
	return h;
}

static void cdf_data(FILE *g, const struct kb_results *rs, const struct kb_config *c,
		     size_t idx)
{
	struct kb_hist *h = cdf_hist(rs, c);
	uint64_t seen = 0, lo, width;

	fprintf(g, "$c%zu << EOD\n", idx);
	for (unsigned b = 0; b < KB_HIST_BUCKETS && h->count; b++) {
		if (h->bucket[b] == 0)
			continue;
		kb_hist_bucket_range(b, &lo, &width);
		/* the curve rises from 0: a configuration with one sample is still drawn */
		if (seen == 0)
			fprintf(g, "%g 0\n", fmax(1, (double)(lo + width / 2)));
		seen += h->bucket[b];
		fprintf(g, "%g %g\n", fmax(1, (double)(lo + width / 2)),
			(double)seen / (double)h->count);
	}
	fprintf(g, "EOD\n");
	free(h);
}

/* A configuration so slow that no acquisition was sampled has no curve. */
static bool has_samples(const struct kb_results *rs, const struct kb_config *c)
{
	struct kb_hist *h = cdf_hist(rs, c);
	bool any = h->count > 0;

	free(h);
	return any;
}

/* The configurations of @ops that have samples, in run order (at most rs->n). */
static size_t lock_configs(const struct kb_results *rs, const struct lockops *ops, size_t *head)
{
	size_t n = 0;

	for (size_t i = 0; i < rs->n; i++) {
		bool seen = rs->v[i].cfg.ops != ops;

		for (size_t k = 0; k < n && !seen; k++)
			seen = kb_config_same(&rs->v[head[k]].cfg, &rs->v[i].cfg);
		if (!seen && has_samples(rs, &rs->v[i].cfg))
			head[n++] = i;
	}
	return n;
}

/* One CDF file: @n configurations (heads), all of one lock. */
static int cdf_plot(const char *svg, const struct kb_results *rs, const size_t *head, size_t n,
		    const char *title)
{
	const char *lock = rs->v[head[0]].cfg.ops->name;
	char what[160], name[256];
	uint64_t max = 1;
	FILE *g;

	for (size_t s = 0; s < n; s++) {
		struct kb_hist *h = cdf_hist(rs, &rs->v[head[s]].cfg);

		max = h->max > max ? h->max : max;
		free(h);
	}
	snprintf(what, sizeof(what), "acquisition latency CDF of %s", lock);
	g = gp_open(svg, title, what, n);
	if (g == NULL)
		return 0;
	fprintf(g, "set xlabel 'lock acquisition latency (ns, sampled; timer cost subtracted; "
		"this clock steps by %llu ns, 0 is drawn at 1)'\n"
		"set ylabel 'fraction of acquisitions'\nset logscale x 10\nset yrange [0:1]\n"
		"set xrange [1:%g]\nset ytics 0.1\n", (unsigned long long)kb_timer_resolution_ns(),
		fmax(10, (double)max * 1.2));
	/* 1-2-5 ticks where they fit, so a p50 of 12 ns and one of 40 ns read apart, not
	 * both "about 10"; decades with minor ticks over a wider range. */
	if (max <= KB_FINE_TICS_MAX_NS)
		fprintf(g, "set xtics ('1' 1, '2' 2, '5' 5, '10' 10, '20' 20, '50' 50, '100' 100, "
			"'200' 200, '500' 500, '1u' 1e3, '2u' 2e3, '5u' 5e3, '10u' 1e4)\n");
	else
		fprintf(g, "set xtics ('1' 1, '10' 10, '100' 100, '1u' 1e3, '10u' 1e4, '100u' 1e5, "
			"'1m' 1e6, '10m' 1e7, '100m' 1e8, '1s' 1e9)\nset mxtics 10\n");
	fprintf(g, "set arrow from graph 0, first 0.5 to graph 1, first 0.5 nohead dt 3 lc rgb '#888888'\n"
		"set arrow from graph 0, first 0.99 to graph 1, first 0.99 nohead dt 3 "
		"lc rgb '#888888'\nset key outside right bottom title 'p50, p99: dotted'\n");
	for (size_t s = 0; s < n; s++)
		cdf_data(g, rs, &rs->v[head[s]].cfg, s);
	fprintf(g, "plot ");
	for (size_t s = 0; s < n; s++) {
		struct kb_hist *h = cdf_hist(rs, &rs->v[head[s]].cfg);

		kb_config_label(&rs->v[head[s]].cfg, name, sizeof(name), true);
		/* the title names the lock: the key shows what differs, and how many samples */
		fprintf(g, "%s$c%zu using 1:2 with steps lw 2 lc rgb '%s' title '%s (%llu samples)'",
			s ? ", " : "", s, kb_palette[s % KB_PALETTE], name + strlen(lock) + 1,
			(unsigned long long)h->count);
		free(h);
	}
	fprintf(g, "\n");
	return gp_close(g, svg);
}

int kb_plot_latency(const char *base, const struct kb_results *rs, const char *title)
{
	size_t *head = malloc((rs->n + 1) * sizeof(size_t));
	int rc = 0;

	for (size_t i = 0; i < rs->n; i++) {
		const struct lockops *ops = rs->v[i].cfg.ops;
		bool done = false;
		size_t n;

		for (size_t k = 0; k < i && !done; k++)
			done = rs->v[k].cfg.ops == ops;
		if (done || (n = lock_configs(rs, ops, head)) == 0)
			continue;
		for (size_t part = 0; part * KB_MAX_CURVES < n; part++) {
			char svg[4096], suffix[32] = "";
			size_t m = n - part * KB_MAX_CURVES;

			if (n > KB_MAX_CURVES)
				snprintf(suffix, sizeof(suffix), "-%zu", part + 1);
			snprintf(svg, sizeof(svg), "%s-%s%s.svg", base, ops->name, suffix);
			rc |= cdf_plot(svg, rs, head + part * KB_MAX_CURVES,
				       m < KB_MAX_CURVES ? m : KB_MAX_CURVES, title);
		}
	}
	free(head);
	return rc;
}
