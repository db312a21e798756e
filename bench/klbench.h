/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/klbench.h - klbench's internals: one harness (engine.c) that runs one
 * configuration through an adapter from bench/lockops, sweeps that interleave
 * configurations across repeats (sweep.c), the outputs (report.c, plot.c), the latency
 * mode (latency.c), the scenarios and the tour (scenarios/), and the system glue
 * (sys.c: clocks, helper thread, hwloc placement, machine description).
 *
 * The workload (docs/klbench.md has the user's view). Shared data is an array of
 * buckets; each bucket is an owner word followed by `cs` counter words. One operation:
 * pick a bucket (the only one, or a random key's), take the lock that protects it (the
 * lock, a stripe of a lock array, or a keyed lock's key_lock), then
 *   write: check nobody owns the bucket, mark it ours, bump each counter word (plain
 *          load + store, so a second writer inside loses updates), check we still own it,
 *          clear the owner;
 *   read:  check nobody owns the bucket and that all its counter words are equal
 *          (seqlock-style locks: on the copy the lock validated; see lockops.h);
 * release, then `think` steps of private work. After the run every bucket's counters must
 * equal the writes made to it and the checks must have seen nothing: otherwise the run
 * FAILS (a lock that lost an update is reported, loudly, and klbench exits non-zero).
 */
#ifndef KB_KLBENCH_H
#define KB_KLBENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hist.h"
#include "lockops.h"

/* Worker threads per run, at most (256 CPUs oversubscribed 16 times). */
#define KB_MAX_THREADS 4096
/* Values per sweep axis, at most. */
#define KB_MAX_AXIS 64
/* Adapters per sweep, at most. */
#define KB_MAX_LOCKS 64
/* Exit status when a run failed verification (a lock lost updates or let two in). */
#define KB_EXIT_VERIFY 3
/* Exit status when a scenario cannot run because a lock it needs is not built in. */
#define KB_EXIT_UNAVAILABLE 4
/* Default latency sampling: time one operation in 2^6 = 64 (see docs/klbench.md). */
#define KB_DEFAULT_SAMPLE_SHIFT 6

enum kb_placement { KB_PLACE_NONE, KB_PLACE_COMPACT, KB_PLACE_SCATTER };
enum kb_workload { KB_WL_LOCK, KB_WL_TABLE };

/* One point of a sweep. */
struct kb_config {
	const struct lockops *ops;
	unsigned threads;
	double write_pct;          /* share of operations that write, 0..100 */
	unsigned cs;               /* counter words per bucket touched inside the lock, >= 1 */
	unsigned think;            /* steps of private work between operations */
	enum kb_placement placement;
	enum kb_workload workload;
	unsigned stripes;          /* table: lock instances (1 = one global lock); keyed
				    * adapters ignore it (0 = "the lock's own") */
	unsigned keys;             /* table: buckets */
	double duration, warmup;   /* seconds */
	unsigned sample_shift;     /* time 1 operation in 2^sample_shift */
	bool lockstat;
};

/* Memory slots the repeats cycle through: repeat r of every run uses slot r % KB_SLOTS
 * (engine.c; docs/klbench.md, "Where the shared memory lies"). */
#define KB_SLOTS 8u

/* What one run measured. */
struct kb_result {
	struct kb_config cfg;
	unsigned repeat;
	int slot;                  /* the memory slot the run used (engine.c), or -1: its
	                            * locks or counters did not fit and came from malloc */
	uintptr_t lock_addr, data_addr;  /* where the (first) lock and the counters were */
	double elapsed;            /* seconds of the measured interval */
	uint64_t reads, writes;    /* operations in the measured interval */
	double ops_per_s;
	struct kb_hist *rhist, *whist;   /* sampled acquisition latency (ns), merged */
	uint64_t thr_min, thr_max; /* per-thread operations: fewest, most */
	double fair_ratio;         /* thr_max / thr_min (INFINITY when a thread starved) */
	double fair_sd_pct;        /* population stddev of per-thread operations, % of mean */
	uint64_t *per_thread;      /* operations per thread (cfg.threads entries) */
	double user_s, sys_s;      /* CPU time of the workers in the interval */
	uint64_t vcsw, ivcsw;      /* voluntary / involuntary context switches of the workers */
	double wakes_per_acq;      /* vcsw / operations: sleeps that ended in a wake-up */
	/* klock's own event counts (kl_lock_events()) per operation; NAN for other locks */
	double fences_per_op;      /* heavy fences (membarrier): cost grows with the CPUs */
	double sleeps_per_op;      /* sleeps that blocked in the kernel */
	double kwakes_per_op;      /* wake-up calls issued */
	double asleep_ho_pct;      /* % of contended acquisitions handed over asleep */
	double lock_pct;           /* % of worker time inside lock calls (sampled) */
	uint64_t retries;          /* optimistic (seqlock) read sections run again */
	double retries_per_read;   /* retries / reads; NAN for locks that never retry */
	double lockstat_wait_pct;  /* lockstat's "% of time waiting"; NAN when not measured */
	double lockstat_contended_pct;  /* lockstat: % of acquisitions contended; NAN */
	double revocations_per_s;  /* reader-bias revocations (lockops.bias); NAN: no policy */
	double unbiased_pct;       /* % of the interval the lock was unbiased; NAN: no policy */
	uint64_t violations;       /* in-section check failures */
	uint64_t lost;             /* updates missing from the counters at the end */
	bool verified;
	char verify_msg[256];
};

/* engine.c */
int kb_run(const struct kb_config *cfg, unsigned repeat, struct kb_result *out);
void kb_result_free(struct kb_result *r);
uint64_t kb_hist_p(const struct kb_result *r, double pct);  /* reads and writes merged */

/* A list of results. */
struct kb_results {
	struct kb_result *v;
	size_t n, cap;
};
struct kb_result *kb_results_add(struct kb_results *rs);
void kb_results_free(struct kb_results *rs);

/* sweep.c: the axes of a sweep; every combination runs `repeats` times, interleaved. */
struct kb_sweep {
	const struct lockops *locks[KB_MAX_LOCKS];
	unsigned nlocks;
	unsigned threads[KB_MAX_AXIS], nthreads;
	double write[KB_MAX_AXIS];
	unsigned nwrite;
	unsigned cs[KB_MAX_AXIS], ncs;
	unsigned think[KB_MAX_AXIS], nthink;
	unsigned stripes[KB_MAX_AXIS], nstripes;
	enum kb_placement place[3];
	unsigned nplace;
	struct kb_config base;     /* duration, warmup, workload, keys, sampling, lockstat */
	unsigned repeats;
	bool progress;             /* progress bar on stderr (only when it is a terminal) */
};
void kb_sweep_defaults(struct kb_sweep *s);
size_t kb_sweep_size(const struct kb_sweep *s);   /* runs, repeats included */
/* Runs it; returns the number of runs that failed verification (results are kept). */
unsigned kb_sweep_run(struct kb_sweep *s, struct kb_results *out);

/* args.c: parsing */
int kb_parse_uint_list(const char *arg, unsigned *out, unsigned max, unsigned *n);
int kb_parse_threads(const char *arg, unsigned *out, unsigned max, unsigned *n);
int kb_parse_double_list(const char *arg, double *out, unsigned max, unsigned *n);
int kb_parse_seconds(const char *arg, double *out);
int kb_parse_placement(const char *arg, enum kb_placement *out);
int kb_parse_locks(const char *arg, const struct lockops **out, unsigned max, unsigned *n);
/* The adapter called `name`, or NULL with a message saying whether it is unknown or a
 * klock/peer lock not built into this binary. */
const struct lockops *kb_find_lock(const char *name, const char *who);
bool kb_lock_known(const char *name);
void kb_print_locksets(FILE *f);
const char *kb_placement_name(enum kb_placement p);
const char *kb_workload_name(enum kb_workload w);

/* report.c: outputs */
struct kb_output {
	const char *csv, *json, *raw, *plot;   /* NULL: not wanted; "-": stdout */
	bool table;                            /* the aligned table on stdout */
	const char *title;
};
void kb_print_table(FILE *f, const struct kb_results *rs);
int kb_write_csv(const char *path, const struct kb_results *rs, const char *scenario);
int kb_write_json(const char *path, const struct kb_results *rs, const char *scenario);
int kb_write_raw(const char *dir, const struct kb_results *rs);
void kb_json_str(FILE *f, const char *s);   /* a JSON string literal, escaped */
int kb_emit(const struct kb_output *o, const struct kb_results *rs, const char *scenario);
void kb_config_label(const struct kb_config *c, char *buf, size_t len, bool full);
void kb_progress(size_t done, size_t total, const char *what);
void kb_progress_done(void);
/* Summaries over the repeats of one configuration (same cfg, any repeat). */
double kb_median_ops(const struct kb_results *rs, const struct kb_config *c);
double kb_metric_median(const struct kb_results *rs, const struct kb_config *c,
			double (*get)(const struct kb_result *));
bool kb_config_same(const struct kb_config *a, const struct kb_config *b);
/* Relative stddev (%) of throughput over a configuration's repeats; NAN below 2. */
double kb_ops_sd_pct(const struct kb_results *rs, const struct kb_config *c);
/* "12.3M", "850k" (rates) and "85ns", "1.2us", "3.4ms" (durations). */
void kb_fmt_rate(char *buf, size_t len, double v);
void kb_fmt_ns(char *buf, size_t len, double ns);

/* plot.c: gnuplot */
bool kb_have_gnuplot(void);
/* Throughput against the axis that varies (threads, write %, cs, stripes). */
int kb_plot_throughput(const char *svg, const struct kb_results *rs, const char *title);
/* Latency CDFs (repeats merged): BASE-<lock>.svg per lock, one curve per configuration
 * (BASE-<lock>-1.svg, -2 ... when a lock has more than fit one plot). */
int kb_plot_latency(const char *base, const struct kb_results *rs, const char *title);

/* latency.c */
int kb_latency_main(int argc, char **argv);
/* ns per lock+unlock pair, one thread, `iters` pairs (read side if `read` and it has one). */
double kb_pair_ns(const struct lockops *ops, bool read, uint64_t iters);
/* The same through the adapter's own loop (inline pairs); NAN when it has none. */
double kb_pair_inline_ns(const struct lockops *ops, bool read, uint64_t iters);
/* Median ns of `samples` isolated write pairs of `ops` (each after `gap_s` idle) while
 * `readers` threads loop on its read side; `burst_ns` (if not NULL) gets the mean of a
 * burst of 1000. With `ops` NULL: one heavy fence, readers on `host`'s read side. */
double kb_writer_cost(const struct lockops *ops, const struct lockops *host,
		      unsigned readers, unsigned samples, double gap_s, double *burst_ns);

/* scenarios/catalogue.c and scenarios/tour.c (scenarios/scenario.h has the rest) */
int kb_scenario_main(int argc, char **argv);
int kb_tour_main(int argc, char **argv);

/* lockstat.c: the --lockstat knob over klock's lockstat, when it is built */
struct kb_lockstat {
	double wait_pct;        /* % of the workers' time in slow-path waits */
	double contended_pct;   /* % of acquisitions that took a slow path */
};
bool kb_lockstat_available(void);
const char *kb_lockstat_why(void);      /* why not, when unavailable */
void kb_lockstat_begin(void);
/* Stops recording; NAN fields when lockstat is not built. */
void kb_lockstat_end(double thread_seconds, uint64_t ops, struct kb_lockstat *out);

/* sys.c */
uint64_t kb_now_ns(void);
uint64_t kb_timer_overhead_ns(void);
/* The smallest step the clock was seen to take (ns): what a sampled latency can resolve
 * (a VM's TSC-scaled clock may step by 10 ns, its TSC too). */
uint64_t kb_timer_resolution_ns(void);
void kb_helper_start(void);
void kb_sleep_until(uint64_t deadline_ns);
unsigned kb_cpus(void);                  /* CPUs this process may run on */
/* The CPU sets (hwloc bitmaps, opaque here) workers 0..n-1 bind to; NULL = unbound. */
void **kb_place_sets(enum kb_placement p, unsigned n);
void kb_place_free(void **sets, unsigned n);
int kb_bind_self(void *set);
void kb_machine(char *buf, size_t len);  /* one line: CPU model, CPUs, kernel, glibc, klock */
void kb_machine_short(char *buf, size_t len);  /* CPU model, CPUs, kernel: plot titles */
void kb_machine_json(FILE *f);
bool kb_isatty_err(void);
int kb_mkdirs(const char *path);

/* The command line klbench was started with (for JSON and scenario reports). */
extern char kb_cmdline[1024];

/* The version printed by --version and written into CSV/JSON. */
#define KB_VERSION "0.1"

#endif /* KB_KLBENCH_H */
