/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/main.c - klbench, the contention lab: command dispatch, the shared options, and
 * the `run`, `list` commands. `klbench` alone runs the tour (scenarios/tour.c).
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <klock/klock.h>

#include "cli.h"
#include "ministat.h"

/* Seconds a run needs besides its measured interval: thread start, warm-up, join. */
#define KB_RUN_OVERHEAD 0.02
/* Shortest measured interval --budget may choose, seconds. */
#define KB_MIN_DURATION 0.05

void kb_usage(FILE *f)
{
	fprintf(f,
"usage: klbench                      the tour: key scenarios, tables and plots (~1 min)\n"
"       klbench run [options]        sweep locks x threads x write%% x cs x ...\n"
"       klbench latency [options]    uncontended pairs, writer cost, burst vs isolated\n"
"       klbench scenario list|NAME [options]   the kernel threads' experiments\n"
"       klbench compare [-A|-n|-s] [-c level] [-w width] FILE...   ministat(1)\n"
"       klbench list                 the locks built in\n"
"\n"
"options (run, latency, scenarios):\n"
"  -l, --locks SET     lock names, families (klock pthread ck urcu) or sets (all rw\n"
"                      excl mutex rwlock spin readbiased), comma-separated; -NAME removes\n"
"  -t, --threads LIST  e.g. 1,2,4  1-8  1-64*2 (doubling)  cpus  2x (twice the CPUs)\n"
"  -w, --write LIST    percent of operations that write (default 10)\n"
"  -c, --cs LIST       counter words updated/read inside the lock (default 4)\n"
"      --think LIST    steps of private work between operations (default 0)\n"
"  -d, --duration T    measured seconds per run (default 1; 500ms works)\n"
"      --warmup T      unmeasured seconds before each run (default 0.1)\n"
"  -r, --repeats N     runs per configuration, interleaved A B A B (default 1)\n"
"  -p, --placement L   none, compact, scatter (hwloc), comma-separated (default none)\n"
"      --workload W    lock (one lock, shared counters) or table (random keys)\n"
"      --keys N        table buckets (default 4096)\n"
"      --stripes LIST  table: lock instances over the buckets (1 = one global lock)\n"
"      --sample N      time one acquisition in N (power of two, default 64; 1 = all)\n"
"      --lockstat on|off  klock lockstat's %% time waiting per run\n"
"      --budget SECS   shorten runs so the whole sweep takes about this long\n"
"      --csv FILE      every run as CSV ('-' = stdout)\n"
"      --json FILE     every run as JSON, latency histograms included\n"
"      --raw DIR       one file per configuration, one value per repeat (ministat)\n"
"      --plot FILE.svg throughput plot (+ FILE-latency-LOCK.svg per lock), gnuplot\n"
"      --out DIR       scenarios and the tour: where results go\n"
"      --no-table      no table on stdout\n"
"  -q, --quiet         no progress bar\n"
"\n"
"exit status: 0 ok, 1 an output failed, 2 bad usage, 3 a lock FAILED verification,\n"
"4 a scenario needs a lock that is not built in.  Details: docs/klbench.md\n");
}

enum {
	OPT_THINK = 256, OPT_WARMUP, OPT_WORKLOAD, OPT_KEYS, OPT_STRIPES, OPT_SAMPLE,
	OPT_LOCKSTAT, OPT_BUDGET, OPT_CSV, OPT_JSON, OPT_RAW, OPT_PLOT, OPT_OUT, OPT_NOTABLE,
};

static const struct option kb_long[] = {
	{ "locks", required_argument, NULL, 'l' },
	{ "threads", required_argument, NULL, 't' },
	{ "write", required_argument, NULL, 'w' },
	{ "cs", required_argument, NULL, 'c' },
	{ "think", required_argument, NULL, OPT_THINK },
	{ "duration", required_argument, NULL, 'd' },
	{ "warmup", required_argument, NULL, OPT_WARMUP },
	{ "repeats", required_argument, NULL, 'r' },
	{ "placement", required_argument, NULL, 'p' },
	{ "workload", required_argument, NULL, OPT_WORKLOAD },
	{ "keys", required_argument, NULL, OPT_KEYS },
	{ "stripes", required_argument, NULL, OPT_STRIPES },
	{ "sample", required_argument, NULL, OPT_SAMPLE },
	{ "lockstat", required_argument, NULL, OPT_LOCKSTAT },
	{ "budget", required_argument, NULL, OPT_BUDGET },
	{ "csv", required_argument, NULL, OPT_CSV },
	{ "json", required_argument, NULL, OPT_JSON },
	{ "raw", required_argument, NULL, OPT_RAW },
	{ "plot", required_argument, NULL, OPT_PLOT },
	{ "out", required_argument, NULL, OPT_OUT },
	{ "no-table", no_argument, NULL, OPT_NOTABLE },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int parse_placements(struct kb_sweep *s, const char *arg)
{
	char *copy = strdup(arg), *save = NULL;
	int rc = 0;

	s->nplace = 0;
	for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
		if (s->nplace == 3)
			rc = -1;
		else
			rc = kb_parse_placement(t, &s->place[s->nplace++]);
	}
	free(copy);
	return rc < 0 || s->nplace == 0 ? -1 : 0;
}

static int parse_one(struct kb_cli *c, int opt, const char *arg)
{
	struct kb_sweep *s = &c->sweep;
	unsigned v, n;

	switch (opt) {
	case 'l': c->set_locks = true;
		return kb_parse_locks(arg, s->locks, KB_MAX_LOCKS, &s->nlocks);
	case 't': c->set_threads = true;
		return kb_parse_threads(arg, s->threads, KB_MAX_AXIS, &s->nthreads);
	case 'w': c->set_write = true;
		return kb_parse_double_list(arg, s->write, KB_MAX_AXIS, &s->nwrite);
	case 'c': c->set_cs = true;
		if (kb_parse_uint_list(arg, s->cs, KB_MAX_AXIS, &s->ncs) < 0)
			return -1;
		for (unsigned i = 0; i < s->ncs; i++)
			if (s->cs[i] < 1) {
				fprintf(stderr, "klbench: --cs must be >= 1 (a section that "
					"touches nothing measures nothing)\n");
				return -1;
			}
		return 0;
	case OPT_THINK: c->set_think = true;
		return kb_parse_uint_list(arg, s->think, KB_MAX_AXIS, &s->nthink);
	case 'd': c->set_duration = true;
		return kb_parse_seconds(arg, &s->base.duration);
	case OPT_WARMUP: c->set_warmup = true;
		return kb_parse_seconds(arg, &s->base.warmup);
	case 'r': c->set_repeats = true;
		if (kb_parse_uint_list(arg, &s->repeats, 1, &n) < 0 || s->repeats < 1)
			return -1;
		return 0;
	case 'p': c->set_place = true;
		return parse_placements(s, arg);
	case OPT_STRIPES: c->set_stripes = true;
		return kb_parse_uint_list(arg, s->stripes, KB_MAX_AXIS, &s->nstripes);
	case OPT_KEYS:
		if (kb_parse_uint_list(arg, &s->base.keys, 1, &n) < 0 || s->base.keys < 1)
			return -1;
		return 0;
	case OPT_SAMPLE:
		if (kb_parse_uint_list(arg, &v, 1, &n) < 0 || v == 0 || (v & (v - 1))) {
			fprintf(stderr, "klbench: --sample takes a power of two\n");
			return -1;
		}
		s->base.sample_shift = (unsigned)__builtin_ctz(v);
		return 0;
	default:
		return 1;
	}
}

static int parse_two(struct kb_cli *c, int opt, const char *arg)
{
	switch (opt) {
	case OPT_WORKLOAD:
		if (strcmp(arg, "lock") && strcmp(arg, "table")) {
			fprintf(stderr, "klbench: --workload is lock or table\n");
			return -1;
		}
		c->sweep.base.workload = strcmp(arg, "table") ? KB_WL_LOCK : KB_WL_TABLE;
		return 0;
	case OPT_LOCKSTAT:
		if (strcmp(arg, "on") && strcmp(arg, "off")) {
			fprintf(stderr, "klbench: --lockstat is on or off\n");
			return -1;
		}
		c->sweep.base.lockstat = strcmp(arg, "on") == 0;
		if (c->sweep.base.lockstat && !kb_lockstat_available()) {
			fprintf(stderr, "klbench: --lockstat: %s; running without it\n",
				kb_lockstat_why());
			c->sweep.base.lockstat = false;
		}
		return 0;
	case OPT_BUDGET: return kb_parse_seconds(arg, &c->budget);
	case OPT_CSV: c->out.csv = arg; return 0;
	case OPT_JSON: c->out.json = arg; return 0;
	case OPT_RAW: c->out.raw = arg; return 0;
	case OPT_PLOT: c->out.plot = arg; return 0;
	case OPT_OUT: c->outdir = arg; return 0;
	case OPT_NOTABLE: c->out.table = false; return 0;
	case 'q': c->sweep.progress = false; return 0;
	default: return 1;
	}
}

int kb_cli_parse(struct kb_cli *c, int argc, char **argv, const char *cmd)
{
	int opt, rc;

	memset(c, 0, sizeof(*c));
	kb_sweep_defaults(&c->sweep);
	c->out.table = true;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "l:t:w:c:d:r:p:qh", kb_long, NULL)) != -1) {
		if (opt == 'h') {
			kb_usage(stdout);
			exit(0);
		}
		rc = parse_one(c, opt, optarg);
		if (rc > 0)
			rc = parse_two(c, opt, optarg);
		if (rc != 0) {
			if (rc > 0)
				fprintf(stderr, "klbench %s: see klbench --help\n", cmd);
			return 2;
		}
	}
	c->argc = argc - optind;
	c->argv = argv + optind;
	return 0;
}

void kb_cli_apply_budget(struct kb_cli *c)
{
	struct kb_sweep *s = &c->sweep;
	size_t runs;
	double d;

	if (c->budget <= 0)
		return;
	runs = kb_sweep_size(s);
	if (runs == 0)
		return;
	d = c->budget / (double)runs - s->base.warmup - KB_RUN_OVERHEAD;
	s->base.duration = fmax(KB_MIN_DURATION, d);
}

/* ---- klbench run ------------------------------------------------------------------------- */

static int cmd_run(int argc, char **argv)
{
	struct kb_cli c;
	struct kb_results rs = { 0 };
	unsigned failed;
	int rc = kb_cli_parse(&c, argc, argv, "run");

	if (rc != 0)
		return rc;
	if (c.argc > 0) {
		fprintf(stderr, "klbench run: unexpected argument '%s'\n", c.argv[0]);
		return 2;
	}
	if (!c.set_locks && kb_parse_locks("excl", c.sweep.locks, KB_MAX_LOCKS,
					   &c.sweep.nlocks) < 0)
		return 2;
	kb_cli_apply_budget(&c);
	if (c.out.table) {
		char machine[512];

		kb_machine(machine, sizeof(machine));
		printf("# %s\n# machine: %s\n# %zu runs of %.2fs (+%.2fs warm-up), repeats "
		       "interleaved\n", kb_cmdline, machine, kb_sweep_size(&c.sweep),
		       c.sweep.base.duration, c.sweep.base.warmup);
	}
	failed = kb_sweep_run(&c.sweep, &rs);
	c.out.title = "klbench run";
	rc = kb_emit(&c.out, &rs, "run") < 0 ? 1 : 0;
	kb_results_free(&rs);
	if (failed) {
		fprintf(stderr, "klbench: %u run(s) FAILED: a lock lost updates or let two "
			"threads in (see above)\n", failed);
		return KB_EXIT_VERIFY;
	}
	return rc;
}

/* ---- klbench list ------------------------------------------------------------------------ */

static void flag_words(unsigned fl, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s%s%s%s%s", fl & LOCKOPS_RW ? "rw " : "excl ",
		 fl & LOCKOPS_SPIN ? "spin " : "", fl & LOCKOPS_READ_BIASED ? "read-biased " : "",
		 fl & LOCKOPS_READ_RETRY ? "retry " : "", fl & LOCKOPS_KEYED ? "keyed " : "",
		 fl & LOCKOPS_NO_EXCLUSION ? "no-exclusion " : "", fl & LOCKOPS_BUSTED ? "BUSTED " : "");
}

static int cmd_list(void)
{
	static const char *const expected[] = { "kl_mutex", "kl_rwlock", "kl_ticket", "kl_mcs",
		"kl_rmlock", "kl_pcpu_rwsem", "kl_seqlock", "kl_hashlock", "ck_spinlock_mcs",
		"ck_spinlock_ticket", "ck_rwlock", "ck_brlock", "ck_pflock", "urcu_memb", "absl_mutex",
		"absl_mutex_rw", "std_mutex", "std_shared_mutex", "tbb_spin_mutex",
		"tbb_queuing_mutex", "tbb_spin_rw_mutex", "tbb_queuing_rw_mutex" };
	char fl[96];
	bool missing = false;

	printf("%-24s %-8s %-26s %s\n", "lock", "family", "kind", "what");
	for (size_t i = 0; i < lockops_count(); i++) {
		const struct lockops *o = lockops_at(i);

		flag_words(o->flags, fl, sizeof(fl));
		printf("%-24s %-8s %-26s %s\n", o->name, o->family, fl, o->summary);
	}
	for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
		if (lockops_find(expected[i]) != NULL)
			continue;
		if (!missing)
			printf("\nnot built in:");
		printf(" %s", expected[i]);
		missing = true;
	}
	printf("%s\nlock sets for --locks (besides names and families):\n", missing ? "\n" : "");
	kb_print_locksets(stdout);
	printf("\nlockstat: %s\n", kb_lockstat_available() ? "built in (--lockstat on)"
							   : kb_lockstat_why());
	return 0;
}

char kb_cmdline[1024];

static void save_cmdline(int argc, char **argv)
{
	size_t n = 0;

	for (int i = 0; i < argc && n < sizeof(kb_cmdline); i++)
		n += (size_t)snprintf(kb_cmdline + n, sizeof(kb_cmdline) - n, "%s%s", i ? " " : "",
				      i ? argv[i] : "klbench");
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	save_cmdline(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Before anything is timed: glibc's locks must see a multi-threaded process. */
	kb_helper_start();
	if (cmd == NULL || cmd[0] == '-') {
		if (cmd && (!strcmp(cmd, "-h") || !strcmp(cmd, "--help"))) {
			kb_usage(stdout);
			return 0;
		}
		if (cmd && !strcmp(cmd, "--version")) {
			printf("klbench %s (klock %s)\n", KB_VERSION, kl_version());
			return 0;
		}
		return kb_tour_main(argc, argv);
	}
	if (!strcmp(cmd, "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(cmd, "list"))
		return cmd_list();
	if (!strcmp(cmd, "compare"))
		return ms_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "latency"))
		return kb_latency_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "scenario"))
		return kb_scenario_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "help")) {
		kb_usage(stdout);
		return 0;
	}
	fprintf(stderr, "klbench: unknown command '%s'\n", cmd);
	kb_usage(stderr);
	return 2;
}
