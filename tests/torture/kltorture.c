/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/torture/kltorture.c - locktorture for klock: options, the per-lock driver, and the
 * report in locktorture's form.
 *
 *   kltorture [options] [LOCK...]      torture the named adapters (default: every adapter
 *                                      that claims exclusion, except deliberately broken ones)
 *
 * Per lock it prints a header with the parameters, then
 *   Writes:  Total: N  Max/Min: a/b [???]  Fail: f [!!!]
 *   Reads :  Total: N  Max/Min: a/b [???]  Fail: f [!!!]
 *   End of test: SUCCESS | FAILURE
 * where Max/Min are the largest and smallest per-thread acquisition counts, `???` marks
 * unfairness (max/2 > min, as locktorture) and `!!!` a mutual-exclusion violation. Exit
 * status 0 when every lock passed, 1 when any failed (or hung: see watchdog.c), 2 on usage
 * errors, 77 when no adapter matches or a requested environment (seccomp) cannot be set up.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/filter.h>
#include <linux/membarrier.h>
#include <linux/seccomp.h>

#include <klock/fence.h>

#include "torture.h"

/* Seconds per lock when neither --secs nor KLTORTURE_SECS says. */
#define DEFAULT_SECS 2.0
/* No acquisition for this long: the run is hung (locktorture has no such thing; CI needs it). */
#define DEFAULT_WATCHDOG_SECS 10.0
/* Most worker threads per role: locktorture's 2x CPUs on the 256 CPUs klock is designed
 * for (at 128, a 255-vCPU guest ran its exclusive locks with half as many threads as
 * CPUs: never oversubscribed, and many CPU ids never took a lock). */
#define MAX_PER_ROLE 512
/* How long the driver waits for an exiting thread before its other duties. */
#define DRIVER_TICK_NS (5 * KT_NSEC_PER_MSEC)
/* Exit status meson reads as "skipped". */
#define EXIT_SKIP 77
/* argv[1] of the re-executed child under the seccomp filter. */
#define SECCOMP_CHILD_ARG "--in-seccomp"

static const char *const perturb_names[] = {
	"delays", "longhold", "stutter", "shuffle", "signals", "churn", "try", "timed", "phases",
	"flips",
};

struct selection {
	bool all, busted, list;
	const char *family;
	char **names;
	int nnames;
};

/* ---- setup and teardown of one run ------------------------------------------------------- */

static void *alloc_aligned(size_t n)
{
	size_t sz = (n + KT_LINE - 1) / KT_LINE * KT_LINE;
	void *p = aligned_alloc(LOCKOPS_ALIGN > KT_LINE ? LOCKOPS_ALIGN : KT_LINE,
				sz > 0 ? sz : KT_LINE);

	if (p == NULL) {
		fputs("kltorture: out of memory\n", stderr);
		exit(2);
	}
	memset(p, 0, sz > 0 ? sz : KT_LINE);
	return p;
}

static int role_count(int want, int dflt)
{
	int n = want >= 0 ? want : dflt;

	return n > MAX_PER_ROLE ? MAX_PER_ROLE : n;
}

/* locktorture's defaults: 2x CPUs writers for exclusive locks, CPUs each side otherwise. */
static void size_run(struct kt_run *r)
{
	const struct kt_config *c = r->cfg;
	int n = r->ncpus_allowed;
	bool rw = r->ops->read_lock != NULL;

	r->nwriters = (unsigned)role_count(c->nwriters, rw ? n : 2 * n);
	r->nreaders = rw ? (unsigned)role_count(c->nreaders, n) : 0;
	if (r->nwriters + r->nreaders < 2)
		r->nwriters = 2;
	r->nslots = r->nwriters + r->nreaders;
}

static void setup_slots(struct kt_run *r)
{
	r->slots = alloc_aligned(sizeof(struct kt_slot) * r->nslots);
	for (unsigned i = 0; i < r->nslots; i++) {
		struct kt_slot *s = &r->slots[i];

		s->run = r;
		s->role = i < r->nwriters ? KT_WRITER : KT_READER;
		s->index = s->role == KT_WRITER ? i : i - r->nwriters;
		s->rng = (r->cfg->seed + i + 1) * 0x9e3779b97f4a7c15ull | 1; /* golden-ratio mix */
		s->ts = alloc_aligned(r->ops->tsize);
	}
}

static int setup_run(struct kt_run *r, const struct lockops *o, const struct kt_config *c)
{
	pthread_condattr_t ca;
	int e;

	memset(r, 0, sizeof(*r));
	r->ops = o;
	r->cfg = c;
	r->rng = c->seed | 1;
	sched_getaffinity(0, sizeof(r->allowed), &r->allowed);
	r->ncpus_allowed = CPU_COUNT(&r->allowed) > 0 ? CPU_COUNT(&r->allowed) : 1;
	size_run(r);
	r->sh = alloc_aligned(sizeof(*r->sh));
	if ((o->flags & LOCKOPS_KEYED) && o->key_lock != NULL && o->key_unlock != NULL)
		r->keys = alloc_aligned(sizeof(*r->keys) * KT_NKEYS);
	r->optimistic = (o->flags & LOCKOPS_READ_RETRY) && o->read_retry != NULL;
	r->lock = alloc_aligned(o->size);
	e = o->init(r->lock);
	if (e != 0)
		return e;
	setup_slots(r);
	pthread_mutex_init(&r->stutter_m, NULL);
	pthread_cond_init(&r->stutter_c, NULL);
	pthread_mutex_init(&r->exit_m, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->exit_c, &ca);
	pthread_condattr_destroy(&ca);
	return 0;
}

static void teardown_run(struct kt_run *r)
{
	r->ops->destroy(r->lock);
	for (unsigned i = 0; i < r->nslots; i++)
		free(r->slots[i].ts);
	free(r->slots);
	free(r->lock);
	free(r->sh);
	free(r->keys);
	pthread_mutex_destroy(&r->stutter_m);
	pthread_cond_destroy(&r->stutter_c);
	pthread_mutex_destroy(&r->exit_m);
	pthread_cond_destroy(&r->exit_c);
}

/* ---- the driver ----------------------------------------------------------------------------- */

static void wait_exits(struct kt_run *r, int64_t ns)
{
	int64_t t = kt_now_ns() + ns;
	struct timespec abs = { .tv_sec = t / KT_NSEC_PER_SEC, .tv_nsec = t % KT_NSEC_PER_SEC };

	pthread_mutex_lock(&r->exit_m);
	pthread_cond_timedwait(&r->exit_c, &r->exit_m, &abs);
	kt_reap(r);
	pthread_mutex_unlock(&r->exit_m);
}

static bool all_joined(const struct kt_run *r)
{
	for (unsigned i = 0; i < r->nslots; i++)
		if (r->slots[i].joinable)
			return false;
	return true;
}

static void drive(struct kt_run *r)
{
	int64_t now = kt_now_ns();
	int64_t end = now + (int64_t)(r->cfg->secs * KT_NSEC_PER_SEC);
	int64_t next_stutter = now + (int64_t)(kt_xorshift(&r->rng) % (KT_NSEC_PER_SEC / 2));
	int64_t next_phase = now;

	kt_watchdog_start(r);
	pthread_mutex_lock(&r->exit_m);
	for (unsigned i = 0; i < r->nslots; i++) {
		if (kt_spawn(&r->slots[i]) != 0) {
			fputs("kltorture: cannot start worker threads\n", stderr);
			_exit(2);
		}
	}
	pthread_mutex_unlock(&r->exit_m);
	kt_perturb_start(r);
	while ((now = kt_now_ns()) < end) {
		wait_exits(r, DRIVER_TICK_NS);
		kt_driver_tick(r, now, &next_stutter);
		kt_phase_tick(r, now, &next_phase);
	}
	atomic_store(&r->stop, true);
	kt_perturb_stop(r);
	while (!all_joined(r))
		wait_exits(r, DRIVER_TICK_NS);
	kt_watchdog_stop(r);
}

/* ---- the report ------------------------------------------------------------------------------ */

struct side_stats {
	long total, max, min, fails;
};

static struct side_stats side_stats(const struct kt_run *r, enum kt_role role)
{
	struct side_stats st = { 0, 0, -1, 0 };

	for (unsigned i = 0; i < r->nslots; i++) {
		const struct kt_slot *s = &r->slots[i];
		long a = atomic_load(&s->acq);

		if (s->role != role)
			continue;
		st.total += a;
		st.fails += s->fails;
		if (a > st.max)
			st.max = a;
		if (st.min < 0 || a < st.min)
			st.min = a;
	}
	if (st.min < 0)
		st.min = 0;
	return st;
}

static void print_side(const char *label, struct side_stats st)
{
	printf("%s  Total: %ld  Max/Min: %ld/%ld %s  Fail: %ld %s\n", label, st.total, st.max,
	       st.min, st.max / 2 > st.min ? "???" : "", st.fails, st.fails ? "!!!" : "");
}

static void print_header(const struct kt_run *r)
{
	const struct kt_config *c = r->cfg;

	printf("kltorture: --- %s (%s): writers %u readers %u secs %.1f cpus %d seed %#llx "
	       "watchdog %.0f s perturb", r->ops->name, r->ops->family, r->nwriters, r->nreaders,
	       c->secs, r->ncpus_allowed, (unsigned long long)c->seed, c->watchdog_secs);
	for (unsigned i = 0; i < sizeof(perturb_names) / sizeof(perturb_names[0]); i++)
		if (c->perturb & (1u << i))
			printf(" %s", perturb_names[i]);
	printf("\n");
}

static void print_extras(const struct kt_run *r)
{
	long tries = 0, try_fails = 0, timed = 0, timeouts = 0, holds = 0, moves = 0;
	long retries = 0, keyed = 0, multikey = 0;

	for (unsigned i = 0; i < r->nslots; i++) {
		const struct kt_slot *s = &r->slots[i];

		tries += s->try_attempts;
		try_fails += s->try_fails;
		timed += s->timed_attempts;
		timeouts += s->timeouts;
		holds += s->long_holds;
		moves += s->migrations;
		retries += s->retries;
		keyed += s->keyed;
		multikey += s->multikey;
	}
	printf("kltorture: %s: trylock %ld (failed %ld), timed %ld (timed out %ld), long holds "
	       "%ld, threads started %ld, stutters %ld, shuffles %ld, moves in read sections "
	       "%ld, signals %ld\n", r->ops->name, tries, try_fails, timed, timeouts, holds,
	       r->threads_started, r->stutters, atomic_load(&r->shuffles), moves,
	       atomic_load(&r->signals_sent));
	if (r->ops->bias != NULL) { /* the mode switches the phases caused */
		uint64_t revs = 0, unbiased_ns = 0;

		r->ops->bias(r->lock, &revs, &unbiased_ns);
		printf("kltorture: %s: write-rate phases %ld (flip phases among them), bias revocations %llu, unbiased "
		       "%.2f s\n", r->ops->name, r->phases, (unsigned long long)revs,
		       (double)unbiased_ns / KT_NSEC_PER_SEC);
	}
	if (r->optimistic)
		printf("kltorture: %s: optimistic read sections retried %ld\n", r->ops->name,
		       retries);
	if (r->keys != NULL)
		printf("kltorture: %s: acquisitions by key %ld (%d keys), of several keys at "
		       "once %ld\n", r->ops->name, keyed, KT_NKEYS, multikey);
}

/* KLTORTURE_TALLY=FILE: one line per lock run appended to FILE, for CI's closing tally. */
static void tally(const struct lockops *o, long acq, long v)
{
	const char *path = getenv("KLTORTURE_TALLY");
	FILE *f;

	if (path == NULL || (f = fopen(path, "a")) == NULL)
		return;
	fprintf(f, "lock=%s family=%s acquisitions=%ld violations=%ld result=%s expect=%s\n",
		o->name, o->family, acq, v < 0 ? 0 : v, v == 0 ? "SUCCESS" : "FAILURE",
		(o->flags & LOCKOPS_BUSTED) ? "FAILURE" : "SUCCESS");
	fclose(f);
}

/* Tortures one lock; returns its violations (-1: could not even start). */
static long torture_one(const struct lockops *o, const struct kt_config *c, long *acq)
{
	struct kt_run r;
	struct side_stats w, rd;
	long v;
	int e = setup_run(&r, o, c);

	print_header(&r);
	if (e != 0) {
		printf("!!! %s: init failed: %s\nEnd of test: FAILURE\n", o->name, strerror(e));
		tally(o, 0, -1);
		return -1;
	}
	fflush(stdout);
	drive(&r);
	w = side_stats(&r, KT_WRITER);
	rd = side_stats(&r, KT_READER);
	print_side("Writes:", w);
	if (r.nreaders > 0)
		print_side("Reads :", rd);
	print_extras(&r);
	v = atomic_load(&r.violations);
	printf("End of test: %s\n", v == 0 ? "SUCCESS" : "FAILURE");
	fflush(stdout);
	*acq = w.total + rd.total;
	tally(o, *acq, v);
	teardown_run(&r);
	return v;
}

/* ---- seccomp: membarrier blocked with EPERM, as a sandbox would --------------------------------- */

static int install_membarrier_filter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_membarrier, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* Re-executes this program (the library constructor must see the filter) without
 * --seccomp and with SECCOMP_CHILD_ARG first. Returns only on failure. */
static int reexec_under_seccomp(int argc, char **argv)
{
	char **nargv = calloc((size_t)argc + 2, sizeof(char *));
	int n = 0;

	if (nargv == NULL)
		return 2;
	nargv[n++] = argv[0];
	nargv[n++] = SECCOMP_CHILD_ARG;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--seccomp") != 0)
			nargv[n++] = argv[i];
	if (install_membarrier_filter() != 0) {
		printf("kltorture: cannot install a seccomp filter: skipped\n");
		return EXIT_SKIP;
	}
	execv("/proc/self/exe", nargv);
	perror("kltorture: execv");
	return 2;
}

/* In the child: the filter must be in force and klock must have fallen back. */
static int check_seccomp_child(void)
{
	long m = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

	if (m != -1 || errno != EPERM) {
		printf("kltorture: membarrier is not blocked here (emulator?): skipped\n");
		return EXIT_SKIP;
	}
	if (kl_fence_asymmetric()) {
		printf("!!! kltorture: membarrier is blocked but klock still uses it\n");
		return 1;
	}
	printf("kltorture: membarrier blocked by seccomp (EPERM); klock fence mode: fallback\n");
	return 0;
}

/* ---- options ----------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fputs("usage: kltorture [options] [LOCK...]\n"
	      "  --all             every adapter that claims exclusion (default)\n"
	      "  --family F        only adapters of family F (klock, pthread, ck, test)\n"
	      "  --busted          the deliberately broken adapters (must FAIL)\n"
	      "  --list            list the adapters and exit\n"
	      "  --secs S          seconds per lock (env KLTORTURE_SECS, default 2)\n"
	      "  --writers N       writer threads (default: CPUs, 2x CPUs for exclusive locks)\n"
	      "  --readers N       reader threads (default: CPUs)\n"
	      "  --perturb LIST    all, none, or a comma list; -NAME removes one:\n"
	      "                    delays longhold stutter shuffle signals churn try timed phases\n"
	      "                    flips\n"
	      "  --watchdog S      fail a run with no acquisition for S seconds (default 10,\n"
	      "                    times KLTEST_WATCHDOG_SCALE)\n"
	      "  --seed N          random seed (env KLTORTURE_SEED; default: time)\n"
	      "  --seccomp         run under a seccomp filter that makes membarrier fail (EPERM)\n"
	      "  --selftest        prove the harness catches a broken lock and a hung run\n"
	      "  --inject hang     self-test knob: a writer keeps the lock forever\n"
	      "  --help            this text\n"
	      "LOCK names an adapter of --list; names override --all/--family/--busted.\n"
	      "environment:\n"
	      "  KLTORTURE_SECS    seconds per lock when --secs is not given\n"
	      "  KLTORTURE_SEED    random seed when --seed is not given\n"
	      "  KLTORTURE_TALLY   append one result line per lock to this file\n"
	      "  KLTEST_WATCHDOG_SCALE  multiplies the default --watchdog and --selftest's\n"
	      "                    60 s limit per child run (slow machines, e.g.\n"
	      "                    scripts/vm-test's emulated CPUs)\n"
	      "  KLOCK_NO_MEMBARRIER, KLOCK_NO_RSEQ, KLOCK_NO_HWLOC, KLOCK_WITNESS,\n"
	      "  KLOCK_ON_ERROR, KLOCK_LOCKSTAT   read by libklock itself (klock(7))\n"
	      "exit status: 0 every lock passed, 1 a lock failed or hung, 2 usage error,\n"
	      "  77 nothing selected or the requested environment (seccomp) cannot be set up\n"
	      "A meaningful run on a new machine: a minute per lock or more (--secs 60);\n"
	      "the default 2 s per lock is a smoke test.\n", f);
}

static unsigned parse_perturb(const char *list)
{
	unsigned p = 0;
	char *dup = strdup(list), *save = NULL;

	for (char *t = strtok_r(dup, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		bool neg = t[0] == '-';
		unsigned bit = 0;

		if (neg)
			t++;
		if (strcmp(t, "all") == 0)
			bit = KT_P_ALL;
		else if (strcmp(t, "none") == 0)
			bit = 0;
		for (unsigned i = 0; i < sizeof(perturb_names) / sizeof(perturb_names[0]); i++)
			if (strcmp(t, perturb_names[i]) == 0)
				bit = 1u << i;
		if (bit == 0 && strcmp(t, "none") != 0) {
			fprintf(stderr, "kltorture: unknown perturbation '%s'\n", t);
			exit(2);
		}
		p = neg ? p & ~bit : p | bit;
	}
	free(dup);
	return p;
}

static double env_double(const char *name, double dflt)
{
	const char *v = getenv(name);

	return v != NULL && atof(v) > 0 ? atof(v) : dflt;
}

/* KLTEST_WATCHDOG_SCALE, never below 1: a runner that knows its CPUs are slow (emulated
 * vCPUs in scripts/vm-test) raises the default watchdog with it. There a spinning FIFO
 * lock of 32 threads on 16 emulated vCPUs can go 4-10 s without a hand-over and recover
 * (a peer's queue lock that never sleeps: each hand-over waits for the guest to run the
 * one thread next in line); a lock that is hung stays hung for any limit. */
static double watchdog_scale(void)
{
	double f = env_double("KLTEST_WATCHDOG_SCALE", 1.0);

	return f > 1.0 ? f : 1.0;
}

static void config_defaults(struct kt_config *c)
{
	const char *seed = getenv("KLTORTURE_SEED");

	memset(c, 0, sizeof(*c));
	c->secs = env_double("KLTORTURE_SECS", DEFAULT_SECS);
	c->nwriters = c->nreaders = -1;
	c->perturb = KT_P_ALL;
	c->watchdog_secs = DEFAULT_WATCHDOG_SECS * watchdog_scale();
	c->seed = seed != NULL ? strtoull(seed, NULL, 0) : (uint64_t)kt_now_ns();
}

enum { OPT_ALL = 256, OPT_FAMILY, OPT_BUSTED, OPT_LIST, OPT_SECS, OPT_WRITERS, OPT_READERS,
       OPT_PERTURB, OPT_WATCHDOG, OPT_SEED, OPT_SECCOMP, OPT_SELFTEST, OPT_INJECT, OPT_HELP };

static const struct option long_opts[] = {
	{ "all", no_argument, NULL, OPT_ALL },
	{ "family", required_argument, NULL, OPT_FAMILY },
	{ "busted", no_argument, NULL, OPT_BUSTED },
	{ "list", no_argument, NULL, OPT_LIST },
	{ "secs", required_argument, NULL, OPT_SECS },
	{ "writers", required_argument, NULL, OPT_WRITERS },
	{ "readers", required_argument, NULL, OPT_READERS },
	{ "perturb", required_argument, NULL, OPT_PERTURB },
	{ "watchdog", required_argument, NULL, OPT_WATCHDOG },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "seccomp", no_argument, NULL, OPT_SECCOMP },
	{ "selftest", no_argument, NULL, OPT_SELFTEST },
	{ "inject", required_argument, NULL, OPT_INJECT },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

/* Returns -1 to go on, or an exit status. */
static int parse_one(int opt, struct kt_config *c, struct selection *sel, bool *seccomp,
		     bool *selftest)
{
	switch (opt) {
	case OPT_ALL: sel->all = true; break;
	case OPT_FAMILY: sel->family = optarg; break;
	case OPT_BUSTED: sel->busted = true; break;
	case OPT_LIST: sel->list = true; break;
	case OPT_SECS: c->secs = atof(optarg); break;
	case OPT_WRITERS: c->nwriters = atoi(optarg); break;
	case OPT_READERS: c->nreaders = atoi(optarg); break;
	case OPT_PERTURB: c->perturb = parse_perturb(optarg); break;
	case OPT_WATCHDOG: c->watchdog_secs = atof(optarg); break;
	case OPT_SEED: c->seed = strtoull(optarg, NULL, 0); break;
	case OPT_SECCOMP: *seccomp = true; break;
	case OPT_SELFTEST: *selftest = true; break;
	case OPT_INJECT:
		if (strcmp(optarg, "hang") != 0) {
			fprintf(stderr, "kltorture: unknown --inject '%s' (hang)\n", optarg);
			return 2;
		}
		c->inject = KT_INJECT_HANG;
		break;
	case OPT_HELP: usage(stdout); return 0;
	default: usage(stderr); return 2;
	}
	return -1;
}

/* ---- selection and main ------------------------------------------------------------------------- */

static bool selected(const struct lockops *o, const struct selection *sel)
{
	if (sel->nnames > 0) {
		for (int i = 0; i < sel->nnames; i++)
			if (strcmp(sel->names[i], o->name) == 0)
				return true;
		return false;
	}
	if (sel->busted)
		return (o->flags & LOCKOPS_BUSTED) != 0;
	if (o->flags & (LOCKOPS_BUSTED | LOCKOPS_NO_EXCLUSION))
		return false;
	return sel->family == NULL || strcmp(sel->family, o->family) == 0;
}

static void list_adapters(void)
{
	for (size_t i = 0; i < lockops_count(); i++) {
		const struct lockops *o = lockops_at(i);

		printf("%-26s %-8s %s%s%s\n", o->name, o->family, o->summary,
		       (o->flags & LOCKOPS_NO_EXCLUSION) ? " [not tortured: no exclusion]" : "",
		       (o->flags & LOCKOPS_BUSTED) ? " [broken on purpose: --busted]" : "");
	}
}

static int check_names(const struct selection *sel)
{
	for (int i = 0; i < sel->nnames; i++) {
		if (lockops_find(sel->names[i]) == NULL) {
			fprintf(stderr, "kltorture: no adapter named '%s' (--list shows them)\n",
				sel->names[i]);
			return 2;
		}
	}
	return 0;
}

static int torture_selected(const struct selection *sel, const struct kt_config *c)
{
	long locks = 0, failed = 0, violations = 0, acquisitions = 0;

	kt_signals_install();
	for (size_t i = 0; i < lockops_count(); i++) {
		const struct lockops *o = lockops_at(i);
		long acq = 0, v;

		if (!selected(o, sel))
			continue;
		v = torture_one(o, c, &acq);
		locks++;
		acquisitions += acq;
		failed += v != 0;
		violations += v > 0 ? v : 0;
	}
	if (locks == 0) {
		printf("kltorture: no adapter matches the selection: skipped\n");
		return EXIT_SKIP;
	}
	printf("kltorture: %ld lock(s), %ld acquisitions, %ld violation(s), %ld signal(s) "
	       "taken: %s\n", locks, acquisitions, violations, kt_signals_taken(),
	       failed == 0 ? "SUCCESS" : "FAILURE");
	return failed == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct kt_config c;
	struct selection sel = { 0 };
	bool seccomp = false, selftest = false;
	int opt, st;

	setvbuf(stdout, NULL, _IOLBF, 0);
	config_defaults(&c);
	if (argc > 1 && strcmp(argv[1], SECCOMP_CHILD_ARG) == 0) {
		st = check_seccomp_child();
		if (st != 0)
			return st;
		argv[1] = argv[0];
		argv++;
		argc--;
	}
	while ((opt = getopt_long(argc, argv, "", long_opts, NULL)) != -1)
		if ((st = parse_one(opt, &c, &sel, &seccomp, &selftest)) >= 0)
			return st;
	sel.names = argv + optind;
	sel.nnames = argc - optind;
	if (sel.list) {
		list_adapters();
		return 0;
	}
	if (selftest)
		return kt_selftest(argv[0]);
	if (seccomp)
		return reexec_under_seccomp(argc, argv);
	if ((st = check_names(&sel)) != 0)
		return st;
	return torture_selected(&sel, &c);
}
