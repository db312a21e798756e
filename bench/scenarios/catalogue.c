/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/catalogue.c - the scenario list (`klbench scenario list` prints it in
 * this order; the tour runs the entries with a tour budget, in this order too), and
 * `klbench scenario NAME`: open the output directory, print the title, the story and the
 * machine, run. A new scenario gets a file of its own in bench/scenarios/, its run
 * function in scenario.h and a row here.
 */
#include <string.h>

#include "scenario.h"

const struct scenario kb_scenarios[] = {
	{ "giant-duel", "two threads dueling for one lock",
	  "Matthew Dillon's \"Giant\" duel (DragonFly BSD): two threads fight over one lock\n"
	  "with almost nothing inside it. A spinlock hands the lock back and forth through\n"
	  "the cache; a sleeping mutex puts the loser to sleep and pays a futex wake-up and\n"
	  "two context switches per hand-off; an adaptive mutex spins while the owner runs\n"
	  "and sleeps only when that does not pay. Look at calls/s, voluntary context\n"
	  "switches (vcsw/s, wake/op), fairness (max/min acquisitions per thread) and how\n"
	  "repeatable each lock is (±sd% over repeats).\n",
	  15, 12, scn_giant_duel },
	{ "thread-sweep", "throughput and real/user/sys from 1 thread to oversubscribed",
	  "The OpenBSD rwlock sweep: the same exclusive workload at 1, 2, 4 ... threads, up to\n"
	  "twice the CPUs and at least 8. Past the CPU count a lock holder gets preempted:\n"
	  "pure spinners (MCS, ticket) then burn their time slices waiting for a thread that\n"
	  "is not running, and their throughput collapses; sleeping locks lose less, adaptive\n"
	  "ones should lose least. usr/sys show where the time goes (the OpenBSD win was a\n"
	  "system-time win).\n",
	  30, 16, scn_thread_sweep },
	{ "crossover", "throughput against write share for every rwlock-like lock",
	  "Where do reader-biased locks stop winning? Every lock with a read side runs the\n"
	  "same workload at 0% to 100% writes on all CPUs. Per-CPU and rendezvous readers\n"
	  "(rmlock, percpu-rwsem, brlock, RCU) win big when writes are rare and lose when a\n"
	  "writer's rendezvous (membarrier, a scan of every reader slot, a grace period) comes\n"
	  "too often. The crossover is reported against the classic rwlock.\n",
	  30, 16, scn_crossover },
	{ "rmlock-vs-rwlock", "FreeBSD rmlock(9): read-mostly with rare writes, then the writer's bill",
	  "FreeBSD's rmlock thread: readers of a read-mostly lock should touch nothing shared.\n"
	  "Part 1: a read-mostly load on all CPUs, rmlock against rwlock, 5 interleaved\n"
	  "repeats, compared with ministat's Student's t. Part 2: the writer pays - its\n"
	  "rendezvous (membarrier: an IPI to every CPU running one of our threads) grows with\n"
	  "the number of threads running, shown next to one bare membarrier.\n",
	  25, 10, scn_rmlock_vs_rwlock },
	{ "rwsem-table", "lockperf-style table: mean/variance/sigma/max/min per lock and workload",
	  "The percpu-rwsem / lockperf thread compared kernels with tables of mean, variance,\n"
	  "sigma, max and min over repeated runs. Here: every rwlock that excludes, four\n"
	  "workloads from read-only to 50% writes, 5 repeats each, throughput in Mops/s.\n"
	  "A low sigma is as important as a high mean: it says the number will hold.\n",
	  30, 0, scn_rwsem_table },
	{ "hashed-queue", "one global lock against a hashed lock table over the same work",
	  "The NetBSD page-queue thread: one global lock serialised every CPU's updates; hashing\n"
	  "the lock by object address spreads them. Threads update random buckets of one table\n"
	  "under one global mutex, under that mutex striped over the table, under 64 hashed\n"
	  "glibc mutexes (the table a user would write), and under kl_hashlock (auto stripes)\n"
	  "when built. The share of time spent waiting for locks should drop\n"
	  "with striping (lockstat's \"% of time waiting\" when lockstat is built; klbench's own\n"
	  "time-inside-lock-calls always).\n",
	  15, 8, scn_hashed_queue },
	{ "floors", "the maintainers' gate: every performance floor of klock's designs",
	  "The performance floors klock's designs promise, each tagged with its theme\n"
	  "([adaptive] mutex/rwlock, [read-mostly] rmlock and percpu-rwsem, [hashed] locks,\n"
	  "[reader-bias], [peers]) and measured in this one run against its baseline, with\n"
	  "the ratio and whether it is met. Floors whose lock is not built in\n"
	  "say so. On a shared or small machine read them as indications; rerun with more\n"
	  "repeats (-r) before quoting one.\n",
	  60, 0, scn_floors },
};

const size_t kb_nscenarios = sizeof(kb_scenarios) / sizeof(kb_scenarios[0]);

static int open_outdir(struct scn_ctx *x)
{
	char path[4096];

	if (x->outdir == NULL)
		return 0;
	if (kb_mkdirs(x->outdir) < 0) {
		perror(x->outdir);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s.txt", x->outdir, x->name);
	x->txt = fopen(path, "w");
	return 0;
}

int scn_run(const struct scenario *sc, struct kb_cli *cli, bool tour)
{
	struct scn_ctx x = { .cli = cli, .name = sc->name, .outdir = cli->outdir, .tour = tour,
			     .budget = tour ? sc->tour_budget : sc->budget };
	char machine[512];

	if (cli->budget > 0 && !tour)
		x.budget = cli->budget;
	if (open_outdir(&x) < 0)
		return 1;
	kb_machine(machine, sizeof(machine));
	scn_say(&x, "== %s: %s ==\n%s", sc->name, sc->title, sc->story);
	scn_say(&x, "machine: %s\ncommand: %s\n", machine, kb_cmdline);
	sc->run(&x);
	scn_say(&x, "\n");
	if (x.txt != NULL)
		fclose(x.txt);
	return x.status;
}
static const struct scenario *scenario_find(const char *name)
{
	for (size_t i = 0; i < kb_nscenarios; i++)
		if (strcmp(kb_scenarios[i].name, name) == 0)
			return &kb_scenarios[i];
	return NULL;
}

int kb_scenario_main(int argc, char **argv)
{
	struct kb_cli cli;
	const struct scenario *sc;
	int rc = kb_cli_parse(&cli, argc, argv, "scenario");

	if (rc != 0)
		return rc;
	if (cli.argc != 1 || strcmp(cli.argv[0], "list") == 0) {
		printf("usage: klbench scenario NAME [options]   (options: klbench --help)\n\n");
		for (size_t i = 0; i < kb_nscenarios; i++)
			printf("  %-18s %s\n", kb_scenarios[i].name, kb_scenarios[i].title);
		return cli.argc == 1 ? 0 : 2;
	}
	sc = scenario_find(cli.argv[0]);
	if (sc == NULL) {
		fprintf(stderr, "klbench: unknown scenario '%s' (klbench scenario list)\n",
			cli.argv[0]);
		return 2;
	}
	return scn_run(sc, &cli, false);
}
