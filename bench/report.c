/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/report.c - klbench's outputs: the aligned table (medians over repeats), CSV and
 * JSON (every run), raw files in ministat's input format, and the progress bar.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "klbench.h"

/* Width of the progress bar, in characters. */
#define KB_BAR 30

/* ---- labels and medians -------------------------------------------------------------- */

static void fmt_pct(char *buf, size_t len, double pct)
{
	snprintf(buf, len, "%g", pct);
}

void kb_config_label(const struct kb_config *c, char *buf, size_t len, bool full)
{
	char w[32];
	int n;

	fmt_pct(w, sizeof(w), c->write_pct);
	n = snprintf(buf, len, "%s t=%u w=%s%% cs=%u", c->ops->name, c->threads, w, c->cs);
	if (n < 0 || (size_t)n >= len || !full)
		return;
	if (c->think)
		n += snprintf(buf + n, len - (size_t)n, " think=%u", c->think);
	if (c->placement != KB_PLACE_NONE && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " %s", kb_placement_name(c->placement));
	if (c->workload == KB_WL_TABLE && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " table keys=%u stripes=%s%u", c->keys,
			 c->stripes ? "" : "own", c->stripes);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double kb_metric_median(const struct kb_results *rs, const struct kb_config *c,
			double (*get)(const struct kb_result *))
{
	double *v = malloc((rs->n + 1) * sizeof(double)), m;
	size_t n = 0;

	for (size_t i = 0; i < rs->n; i++)
		if (kb_config_same(&rs->v[i].cfg, c))
			v[n++] = get(&rs->v[i]);
	if (n == 0) {
		free(v);
		return NAN;
	}
	qsort(v, n, sizeof(double), cmp_double);
	m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	free(v);
	return m;
}

static double get_ops(const struct kb_result *r)
{
	return r->ops_per_s;
}

double kb_median_ops(const struct kb_results *rs, const struct kb_config *c)
{
	return kb_metric_median(rs, c, get_ops);
}

/* Relative stddev of throughput over the repeats (%): how repeatable the number is. */
double kb_ops_sd_pct(const struct kb_results *rs, const struct kb_config *c)
{
	double s = 0, ss = 0;
	unsigned n = 0;

	for (size_t i = 0; i < rs->n; i++) {
		if (!kb_config_same(&rs->v[i].cfg, c))
			continue;
		s += rs->v[i].ops_per_s;
		ss += rs->v[i].ops_per_s * rs->v[i].ops_per_s;
		n++;
	}
	if (n < 2 || s == 0)
		return NAN;
	return 100.0 * sqrt(fmax(0, (ss - s * s / n) / (n - 1))) / (s / n);
}

/* ---- the table ------------------------------------------------------------------------- */

void kb_fmt_ns(char *buf, size_t len, double ns)
{
	if (isnan(ns))
		snprintf(buf, len, "-");
	else if (ns < 10000)
		snprintf(buf, len, "%.0fns", ns);
	else if (ns < 10e6)
		snprintf(buf, len, "%.1fus", ns / 1e3);
	else
		snprintf(buf, len, "%.1fms", ns / 1e6);
}

void kb_fmt_rate(char *buf, size_t len, double v)
{
	if (v >= 100e6)
		snprintf(buf, len, "%.0fM", v / 1e6);
	else if (v >= 1e6)
		snprintf(buf, len, "%.2fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, len, "%.1fk", v / 1e3);
	else
		snprintf(buf, len, "%.0f", v);
}

static double g_p50(const struct kb_result *r) { return (double)kb_hist_p(r, 50); }
static double g_p99(const struct kb_result *r) { return (double)kb_hist_p(r, 99); }
static double g_p999(const struct kb_result *r) { return (double)kb_hist_p(r, 99.9); }
static double g_fair(const struct kb_result *r) { return r->fair_ratio; }
static double g_fsd(const struct kb_result *r) { return r->fair_sd_pct; }
static double g_usr(const struct kb_result *r) { return r->user_s / r->elapsed; }
static double g_sys(const struct kb_result *r) { return r->sys_s / r->elapsed; }
static double g_vcsw(const struct kb_result *r) { return (double)r->vcsw / r->elapsed; }
static double g_wake(const struct kb_result *r) { return r->wakes_per_acq; }
static double g_lock(const struct kb_result *r) { return r->lock_pct; }
static double g_fence(const struct kb_result *r) { return r->fences_per_op; }
static double g_sleep(const struct kb_result *r) { return r->sleeps_per_op; }
static double g_kwake(const struct kb_result *r) { return r->kwakes_per_op; }
static double g_aho(const struct kb_result *r) { return r->asleep_ho_pct; }
static double g_lkst(const struct kb_result *r) { return r->lockstat_wait_pct; }
static double g_lkct(const struct kb_result *r) { return r->lockstat_contended_pct; }
static double g_retry(const struct kb_result *r) { return r->retries_per_read; }

struct kb_cols {
	bool think, place, table, lockstat, retry;
	int lockw;
};

static void table_cols(const struct kb_results *rs, struct kb_cols *k)
{
	memset(k, 0, sizeof(*k));
	k->lockw = 4;
	for (size_t i = 0; i < rs->n; i++) {
		const struct kb_config *c = &rs->v[i].cfg;
		int w = (int)strlen(c->ops->name);

		k->think |= c->think != 0;
		k->place |= c->placement != KB_PLACE_NONE;
		k->table |= c->workload == KB_WL_TABLE;
		k->lockstat |= c->lockstat;
		k->retry |= c->ops->read_retry != NULL;
		if (w > k->lockw)
			k->lockw = w;
	}
}

static void table_head(FILE *f, const struct kb_cols *k)
{
	fprintf(f, "%-*s %5s %6s %4s", k->lockw, "lock", "thr", "wr%", "cs");
	if (k->think)
		fprintf(f, " %6s", "think");
	if (k->place)
		fprintf(f, " %-7s", "place");
	if (k->table)
		fprintf(f, " %7s", "stripes");
	fprintf(f, " %8s %5s %7s %7s %7s %7s %5s %5s %5s %7s %8s %5s %8s %8s %8s %5s", "ops/s",
		"±%", "p50", "p99", "p99.9", "max/min", "sd%", "usr", "sys", "vcsw/s", "wake/op",
		"lock%", "fence/op", "sleep/op", "kwake/op", "aho%");
	if (k->lockstat)
		fprintf(f, " %6s %6s", "wait%", "cont%");
	if (k->retry)
		fprintf(f, " %8s", "retry/rd");
	fprintf(f, " %s\n", "check");
}

static bool config_verified(const struct kb_results *rs, const struct kb_config *c)
{
	for (size_t i = 0; i < rs->n; i++)
		if (kb_config_same(&rs->v[i].cfg, c) && !rs->v[i].verified)
			return false;
	return true;
}

/* klock's own event counts per operation (kl_lock_events()), "-" for other locks: heavy
 * fences, sleeps, wake-ups, and the % of contended acquisitions handed over asleep. */
static void events_cols(FILE *f, const struct kb_results *rs, const struct kb_config *c)
{
	double fence = kb_metric_median(rs, c, g_fence);

	if (isnan(fence)) {
		fprintf(f, " %8s %8s %8s %5s", "-", "-", "-", "-");
		return;
	}
	fprintf(f, " %8.5f %8.4f %8.4f %5.2f", fence, kb_metric_median(rs, c, g_sleep),
		kb_metric_median(rs, c, g_kwake), kb_metric_median(rs, c, g_aho));
}

static void table_row(FILE *f, const struct kb_results *rs, const struct kb_config *c,
		      const struct kb_cols *k)
{
	char wr[16], ops[16], p50[16], p99[16], p999[16], vcsw[16], st[16], sd[16], fair[16];
	double fr = kb_metric_median(rs, c, g_fair), sdp = kb_ops_sd_pct(rs, c);

	fmt_pct(wr, sizeof(wr), c->write_pct);
	kb_fmt_rate(ops, sizeof(ops), kb_median_ops(rs, c));
	kb_fmt_ns(p50, sizeof(p50), kb_metric_median(rs, c, g_p50));
	kb_fmt_ns(p99, sizeof(p99), kb_metric_median(rs, c, g_p99));
	kb_fmt_ns(p999, sizeof(p999), kb_metric_median(rs, c, g_p999));
	kb_fmt_rate(vcsw, sizeof(vcsw), kb_metric_median(rs, c, g_vcsw));
	snprintf(sd, sizeof(sd), isnan(sdp) ? "-" : "%.1f", sdp);
	snprintf(fair, sizeof(fair), isinf(fr) ? "inf" : "%.2f", fr);
	fprintf(f, "%-*s %5u %6s %4u", k->lockw, c->ops->name, c->threads, wr, c->cs);
	if (k->think)
		fprintf(f, " %6u", c->think);
	if (k->place)
		fprintf(f, " %-7s", kb_placement_name(c->placement));
	if (k->table) {
		snprintf(st, sizeof(st), c->stripes ? "%u" : "own", c->stripes);
		fprintf(f, " %7s", c->workload == KB_WL_TABLE ? st : "-");
	}
	fprintf(f, " %8s %5s %7s %7s %7s %7s %5.1f %5.2f %5.2f %7s %8.4f %5.1f", ops, sd, p50,
		p99, p999, fair, kb_metric_median(rs, c, g_fsd), kb_metric_median(rs, c, g_usr),
		kb_metric_median(rs, c, g_sys), vcsw, kb_metric_median(rs, c, g_wake),
		kb_metric_median(rs, c, g_lock));
	events_cols(f, rs, c);
	if (k->lockstat) {
		double w = kb_metric_median(rs, c, g_lkst), ct = kb_metric_median(rs, c, g_lkct);

		if (isnan(w))
			fprintf(f, " %6s %6s", "-", "-");   /* not a klock lock: not instrumented */
		else
			fprintf(f, " %6.2f %6.2f", w, ct);
	}
	if (k->retry && c->ops->read_retry != NULL)
		fprintf(f, " %8.4f", kb_metric_median(rs, c, g_retry));
	else if (k->retry)
		fprintf(f, " %8s", "-");
	fprintf(f, " %s\n", config_verified(rs, c) ? "ok" : "FAILED");
}

/* One row per configuration, in first-run order; medians over its repeats. */
void kb_print_table(FILE *f, const struct kb_results *rs)
{
	struct kb_cols k;

	table_cols(rs, &k);
	table_head(f, &k);
	for (size_t i = 0; i < rs->n; i++) {
		bool first = true;

		for (size_t j = 0; j < i && first; j++)
			first = !kb_config_same(&rs->v[j].cfg, &rs->v[i].cfg);
		if (first)
			table_row(f, rs, &rs->v[i].cfg, &k);
	}
}

/* ---- CSV -------------------------------------------------------------------------------- */

static FILE *open_out(const char *path)
{
	FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");

	if (f == NULL)
		perror(path);
	return f;
}

static int close_out(FILE *f)
{
	if (f == stdout)
		return fflush(f);
	return fclose(f);
}

static void csv_num(FILE *f, double v)
{
	if (isnan(v))
		fputs(",", f);
	else if (isinf(v))
		fputs(",inf", f);
	else
		fprintf(f, ",%.6g", v);
}

#define KB_CSV_HEAD "scenario,lock,family,threads,write_pct,cs,think,placement,workload," \
	"stripes,keys,repeat,elapsed_s,reads,writes,ops_per_s,p50_ns,p99_ns,p999_ns," \
	"max_ns,read_p50_ns,read_p99_ns,read_p999_ns,write_p50_ns,write_p99_ns," \
	"write_p999_ns,samples,thr_min,thr_max,fair_ratio,fair_sd_pct,user_s,sys_s,vcsw," \
	"ivcsw,wakes_per_acq,lock_pct,lockstat_wait_pct,lockstat_contended_pct," \
	"retries_per_read,fences_per_op,sleeps_per_op,kwakes_per_op,asleep_handover_pct," \
	"verified"

static void csv_row(FILE *f, const struct kb_result *r, const char *scenario)
{
	const struct kb_config *c = &r->cfg;
	uint64_t mx = r->rhist->max > r->whist->max || r->whist->count == 0 ? r->rhist->max
									   : r->whist->max;

	fprintf(f, "%s,%s,%s,%u,%g,%u,%u,%s,%s,%u,%u,%u,%.6f,%llu,%llu", scenario,
		c->ops->name, c->ops->family, c->threads, c->write_pct, c->cs, c->think,
		kb_placement_name(c->placement), kb_workload_name(c->workload), c->stripes,
		c->workload == KB_WL_TABLE ? c->keys : 1, r->repeat, r->elapsed,
		(unsigned long long)r->reads, (unsigned long long)r->writes);
	csv_num(f, r->ops_per_s);
	csv_num(f, (double)kb_hist_p(r, 50));
	csv_num(f, (double)kb_hist_p(r, 99));
	csv_num(f, (double)kb_hist_p(r, 99.9));
	csv_num(f, r->rhist->count + r->whist->count ? (double)mx : 0);
	csv_num(f, (double)kb_hist_percentile(r->rhist, 50));
	csv_num(f, (double)kb_hist_percentile(r->rhist, 99));
	csv_num(f, (double)kb_hist_percentile(r->rhist, 99.9));
	csv_num(f, (double)kb_hist_percentile(r->whist, 50));
	csv_num(f, (double)kb_hist_percentile(r->whist, 99));
	csv_num(f, (double)kb_hist_percentile(r->whist, 99.9));
	fprintf(f, ",%llu,%llu,%llu", (unsigned long long)(r->rhist->count + r->whist->count),
		(unsigned long long)r->thr_min, (unsigned long long)r->thr_max);
	csv_num(f, r->fair_ratio);
	csv_num(f, r->fair_sd_pct);
	csv_num(f, r->user_s);
	csv_num(f, r->sys_s);
	fprintf(f, ",%llu,%llu", (unsigned long long)r->vcsw, (unsigned long long)r->ivcsw);
	csv_num(f, r->wakes_per_acq);
	csv_num(f, r->lock_pct);
	csv_num(f, r->lockstat_wait_pct);
	csv_num(f, r->lockstat_contended_pct);
	csv_num(f, r->retries_per_read);
	csv_num(f, r->fences_per_op);
	csv_num(f, r->sleeps_per_op);
	csv_num(f, r->kwakes_per_op);
	csv_num(f, r->asleep_ho_pct);
	fprintf(f, ",%s\n", r->verified ? "ok" : "FAILED");
}

int kb_write_csv(const char *path, const struct kb_results *rs, const char *scenario)
{
	FILE *f = open_out(path);

	if (f == NULL)
		return -1;
	fprintf(f, "%s\n", KB_CSV_HEAD);
	for (size_t i = 0; i < rs->n; i++)
		csv_row(f, &rs->v[i], scenario ? scenario : "run");
	return close_out(f);
}

/* ---- JSON ------------------------------------------------------------------------------- */

void kb_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void json_num(FILE *f, double v)
{
	if (isnan(v) || isinf(v))
		fputs("null", f);
	else
		fprintf(f, "%.6g", v);
}

static void json_hist(FILE *f, const char *name, const struct kb_hist *h)
{
	fprintf(f, ", \"%s\": {\"samples\": %llu, \"mean\": ", name,
		(unsigned long long)h->count);
	json_num(f, kb_hist_mean(h));
	fprintf(f, ", \"p50\": %llu, \"p99\": %llu, \"p999\": %llu, \"max\": %llu, "
		"\"buckets\": [", (unsigned long long)kb_hist_percentile(h, 50),
		(unsigned long long)kb_hist_percentile(h, 99),
		(unsigned long long)kb_hist_percentile(h, 99.9),
		(unsigned long long)(h->count ? h->max : 0));
	for (unsigned i = 0, first = 1; i < KB_HIST_BUCKETS; i++) {
		uint64_t lo, width;

		if (h->bucket[i] == 0)
			continue;
		kb_hist_bucket_range(i, &lo, &width);
		fprintf(f, "%s[%llu, %llu]", first ? "" : ", ", (unsigned long long)lo,
			(unsigned long long)h->bucket[i]);
		first = 0;
	}
	fputs("]}", f);
}

static void json_run(FILE *f, const struct kb_result *r)
{
	const struct kb_config *c = &r->cfg;

	fputs("    {\"lock\": ", f);
	kb_json_str(f, c->ops->name);
	fputs(", \"family\": ", f);
	kb_json_str(f, c->ops->family);
	fprintf(f, ", \"threads\": %u, \"write_pct\": %g, \"cs\": %u, \"think\": %u, "
		"\"placement\": \"%s\", \"workload\": \"%s\", \"stripes\": %u, \"keys\": %u, "
		"\"repeat\": %u, \"elapsed_s\": %.6f, \"reads\": %llu, \"writes\": %llu, "
		"\"ops_per_s\": ", c->threads, c->write_pct, c->cs, c->think,
		kb_placement_name(c->placement), kb_workload_name(c->workload), c->stripes,
		c->workload == KB_WL_TABLE ? c->keys : 1, r->repeat, r->elapsed,
		(unsigned long long)r->reads, (unsigned long long)r->writes);
	json_num(f, r->ops_per_s);
	fprintf(f, ", \"memory\": {\"slot\": %d, \"lock\": \"%#jx\", \"counters\": \"%#jx\"}",
		r->slot, (uintmax_t)r->lock_addr, (uintmax_t)r->data_addr);
	json_hist(f, "read_latency_ns", r->rhist);
	json_hist(f, "write_latency_ns", r->whist);
	fprintf(f, ", \"fairness\": {\"min\": %llu, \"max\": %llu, \"max_min\": ",
		(unsigned long long)r->thr_min, (unsigned long long)r->thr_max);
	json_num(f, r->fair_ratio);
	fputs(", \"sd_pct\": ", f);
	json_num(f, r->fair_sd_pct);
	fputs(", \"per_thread_ops\": [", f);
	for (unsigned i = 0; i < c->threads; i++)
		fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)r->per_thread[i]);
	fprintf(f, "]}, \"user_s\": %.6f, \"sys_s\": %.6f, \"vcsw\": %llu, \"ivcsw\": %llu, "
		"\"wakes_per_acq\": ", r->user_s, r->sys_s, (unsigned long long)r->vcsw,
		(unsigned long long)r->ivcsw);
	json_num(f, r->wakes_per_acq);
	fputs(", \"fences_per_op\": ", f);
	json_num(f, r->fences_per_op);
	fputs(", \"sleeps_per_op\": ", f);
	json_num(f, r->sleeps_per_op);
	fputs(", \"kwakes_per_op\": ", f);
	json_num(f, r->kwakes_per_op);
	fputs(", \"asleep_handover_pct\": ", f);
	json_num(f, r->asleep_ho_pct);
	fputs(", \"lock_pct\": ", f);
	json_num(f, r->lock_pct);
	fputs(", \"lockstat_wait_pct\": ", f);
	json_num(f, r->lockstat_wait_pct);
	fputs(", \"lockstat_contended_pct\": ", f);
	json_num(f, r->lockstat_contended_pct);
	fputs(", \"retries_per_read\": ", f);
	json_num(f, r->retries_per_read);
	fprintf(f, ", \"verified\": %s, \"verify\": ", r->verified ? "true" : "false");
	kb_json_str(f, r->verify_msg);
	fputs("}", f);
}

int kb_write_json(const char *path, const struct kb_results *rs, const char *scenario)
{
	FILE *f = open_out(path);

	if (f == NULL)
		return -1;
	fprintf(f, "{\n  \"klbench\": \"%s\",\n  \"scenario\": ", KB_VERSION);
	kb_json_str(f, scenario ? scenario : "run");
	fputs(",\n  \"command\": ", f);
	kb_json_str(f, kb_cmdline);
	fputs(",\n  \"machine\": ", f);
	kb_machine_json(f);
	fputs(",\n  \"runs\": [\n", f);
	for (size_t i = 0; i < rs->n; i++) {
		json_run(f, &rs->v[i]);
		fputs(i + 1 < rs->n ? ",\n" : "\n", f);
	}
	fputs("  ]\n}\n", f);
	return close_out(f);
}

/* ---- raw files (ministat's input) -------------------------------------------------------- */

static void raw_name(const struct kb_config *c, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s-t%u-w%g-cs%u", c->ops->name, c->threads, c->write_pct,
			 c->cs);

	if (c->think && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, "-think%u", c->think);
	if (c->placement != KB_PLACE_NONE && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, "-%s", kb_placement_name(c->placement));
	if (c->workload == KB_WL_TABLE && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "-table%u-s%u", c->keys, c->stripes);
}

static int raw_file(const char *dir, const char *name, const char *metric,
		    const struct kb_results *rs, const struct kb_config *c,
		    double (*get)(const struct kb_result *))
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.%s", dir, name, metric);
	f = fopen(path, "w");
	if (f == NULL) {
		perror(path);
		return -1;
	}
	for (size_t i = 0; i < rs->n; i++)
		if (kb_config_same(&rs->v[i].cfg, c))
			fprintf(f, "%.10g\n", get(&rs->v[i]));
	return fclose(f);
}

/*
 * One file per configuration and metric, one value per repeat, one per line:
 * DIR/<lock>-t<threads>-w<write%>-cs<cs>[...].ops   throughput, operations/s
 *                                            .p99   99th percentile acquisition, ns
 *                                            .vcsw  voluntary context switches/s
 * so that `klbench compare DIR/a.ops DIR/b.ops` (or ministat) compares two locks.
 */
int kb_write_raw(const char *dir, const struct kb_results *rs)
{
	char name[512];

	if (kb_mkdirs(dir) < 0) {
		perror(dir);
		return -1;
	}
	for (size_t i = 0; i < rs->n; i++) {
		const struct kb_config *c = &rs->v[i].cfg;
		bool first = true;

		for (size_t j = 0; j < i && first; j++)
			first = !kb_config_same(&rs->v[j].cfg, c);
		if (!first)
			continue;
		raw_name(c, name, sizeof(name));
		if (raw_file(dir, name, "ops", rs, c, get_ops) < 0 ||
		    raw_file(dir, name, "p99", rs, c, g_p99) < 0 ||
		    raw_file(dir, name, "vcsw", rs, c, g_vcsw) < 0)
			return -1;
	}
	return 0;
}

/* ---- progress ----------------------------------------------------------------------------- */

static bool kb_progress_shown;

/* A one-line bar on stderr; callers only call it when stderr is a terminal. */
void kb_progress(size_t done, size_t total, const char *what)
{
	int fill = total ? (int)(KB_BAR * done / total) : 0;

	fprintf(stderr, "\r\033[K[%.*s%*s] %zu/%zu %s", fill,
		"##############################", KB_BAR - fill, "", done + 1, total, what);
	fflush(stderr);
	kb_progress_shown = true;
}

void kb_progress_done(void)
{
	if (kb_progress_shown)
		fprintf(stderr, "\r\033[K");
	kb_progress_shown = false;
}

/* Everything the user asked for, after a sweep. Returns -1 if an output failed. */
int kb_emit(const struct kb_output *o, const struct kb_results *rs, const char *scenario)
{
	int rc = 0;

	if (o->table)
		kb_print_table(stdout, rs);
	if (o->csv != NULL)
		rc |= kb_write_csv(o->csv, rs, scenario);
	if (o->json != NULL)
		rc |= kb_write_json(o->json, rs, scenario);
	if (o->raw != NULL)
		rc |= kb_write_raw(o->raw, rs);
	if (o->plot != NULL) {
		char lat[4096];
		size_t n = strlen(o->plot);

		snprintf(lat, sizeof(lat), "%.*s-latency",
			 (int)(n > 4 && strcmp(o->plot + n - 4, ".svg") == 0 ? n - 4 : n), o->plot);
		rc |= kb_plot_throughput(o->plot, rs, o->title);
		rc |= kb_plot_latency(lat, rs, o->title);
	}
	return rc ? -1 : 0;
}
