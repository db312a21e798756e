/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/latency.c - `klbench latency`: what one acquisition costs when nobody contends,
 * and what a writer pays while readers run (the read-mostly locks' bargain).
 *
 *   read pair / write pair   lock+unlock pairs on one thread (a helper thread alive, so
 *                            glibc takes its multi-threaded paths), 4 pairs per loop
 *                            iteration, `--iters` pairs timed together; ns per pair.
 *                            The `busted` adapter (calls that do nothing) is timed too:
 *                            its pair is the cost of reaching any adapter through the
 *                            ops table, and "net" columns subtract it.
 *   inline pairs             the same pairs run by the adapter's own loop
 *                            (read_pair_loop / write_pair_loop): the lock's calls compiled
 *                            as an application compiles them, no indirect call per pair.
 *                            The figure to compare locks by when a pair costs about as
 *                            much as the adapter call (read-biased read sides); busted's
 *                            loop is the empty iteration.
 *   isolated write           with N reader threads looping on the read side: sleep
 *                            `--gap`, then time one write lock+unlock; `--samples` times.
 *   burst write              with the same readers: `--burst` write pairs back to back,
 *                            timed together; mean ns per write.
 *   kl_fence_heavy           the same isolated protocol around one heavy fence
 *                            (membarrier PRIVATE_EXPEDITED): the rendezvous floor.
 * Every figure is measured `--repeats` times with locks interleaved; tables show medians.
 */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <klock/klock.h>

#include "klbench.h"

/* Defaults: pairs per timing, repeats, isolated samples, gap before each, burst size. */
#define LAT_ITERS (1u << 20)
#define LAT_REPEATS 5
#define LAT_SAMPLES 10
#define LAT_GAP_NS 10000000ull
#define LAT_BURST 1000
/* A burst stops after this long (ns), checking the clock every LAT_BURST_CHECK writes. */
#define LAT_BURST_MAX_NS 200000000ull
#define LAT_BURST_CHECK 16
/* Entries in --readers, and reader threads per entry, at most. */
#define LAT_MAX_READERS 16
#define LAT_MAX_READER_THREADS 256
/* Isolated samples per measurement, at most. */
#define LAT_MAX_SAMPLES 1000
#define LAT_PAD 128

enum lat_measure { LM_READ, LM_WRITE, LM_ISOLATED, LM_BURST, LM_FENCE, LM_READ_INL,
		   LM_WRITE_INL, LM_COUNT };
static const char *const lat_names[LM_COUNT] = { "read_pair", "write_pair", "write_isolated",
						  "write_burst", "fence_heavy",
						  "read_pair_inline", "write_pair_inline" };

struct lat_rec {
	const struct lockops *ops;   /* NULL for the fence */
	enum lat_measure m;
	unsigned readers, repeat;
	double ns;
};

struct lat_opts {
	const struct lockops *locks[KB_MAX_LOCKS];
	unsigned nlocks, repeats, samples, burst;
	unsigned readers[LAT_MAX_READERS], nreaders;
	uint64_t iters, gap_ns;
	const char *csv, *json;
	bool progress;
	struct lat_rec *rec;
	size_t nrec, caprec;
};

static void rec_add(struct lat_opts *o, const struct lockops *ops, enum lat_measure m,
		    unsigned readers, unsigned repeat, double ns)
{
	if (o->nrec == o->caprec) {
		o->caprec = o->caprec ? 2 * o->caprec : 256;
		o->rec = realloc(o->rec, o->caprec * sizeof(*o->rec));
		if (o->rec == NULL) {
			fprintf(stderr, "klbench: out of memory\n");
			exit(2);
		}
	}
	o->rec[o->nrec++] = (struct lat_rec){ ops, m, readers, repeat, ns };
}

/* ---- a lock instance with the calling thread's state ----------------------------------- */

struct lat_lock {
	const struct lockops *ops;
	unsigned char *lock, *ts;
};

static int lat_open(struct lat_lock *k, const struct lockops *ops)
{
	size_t ls = (ops->size + LAT_PAD - 1) / LAT_PAD * LAT_PAD;

	k->ops = ops;
	k->lock = aligned_alloc(LAT_PAD, ls ? ls : LAT_PAD);
	if (k->lock == NULL)
		return -1;
	memset(k->lock, 0, ls ? ls : LAT_PAD);
	if (ops->init(k->lock) != 0) {
		free(k->lock);
		return -1;
	}
	return 0;
}

static void lat_close(struct lat_lock *k)
{
	k->ops->destroy(k->lock);
	free(k->lock);
}

static unsigned char *ts_enter(const struct lat_lock *k)
{
	size_t n = (k->ops->tsize + LAT_PAD - 1) / LAT_PAD * LAT_PAD + LAT_PAD;
	unsigned char *ts = aligned_alloc(LAT_PAD, n);

	if (ts == NULL) {
		fprintf(stderr, "klbench: out of memory\n");
		exit(2);
	}
	memset(ts, 0, n);
	if (k->ops->thread_enter)
		k->ops->thread_enter(k->lock);
	return ts;
}

static void ts_leave(const struct lat_lock *k, unsigned char *ts)
{
	if (k->ops->thread_leave)
		k->ops->thread_leave(k->lock);
	free(ts);
}

/* ns per lock+unlock pair over n pairs (n a multiple of 4). */
static double time_pairs(void (*lk)(void *, void *), void (*ul)(void *, void *), void *l,
			 void *ts, uint64_t n)
{
	uint64_t t0 = kb_now_ns();

	for (uint64_t i = 0; i < n; i += 4) {
		lk(l, ts);
		ul(l, ts);
		lk(l, ts);
		ul(l, ts);
		lk(l, ts);
		ul(l, ts);
		lk(l, ts);
		ul(l, ts);
	}
	return (double)(kb_now_ns() - t0) / (double)n;
}

/* ns per pair over n pairs run by the adapter's own loop. */
static double time_loop(void (*loop)(void *, void *, unsigned long), void *l, void *ts,
			uint64_t n)
{
	uint64_t t0 = kb_now_ns();

	loop(l, ts, (unsigned long)n);
	return (double)(kb_now_ns() - t0) / (double)n;
}

/* After the pair loops the lock must be free: a write trylock succeeds (exit status 3,
 * "a lock FAILED verification", if not - a loop that leaks a hold would otherwise show
 * up as a hang or a cheap pair). */
static void check_released(const struct lat_lock *k, void *ts)
{
	const struct lockops *ops = k->ops;

	if (ops->write_trylock == NULL || (ops->flags & LOCKOPS_BUSTED))
		return;
	if (!ops->write_trylock(k->lock, ts)) {
		fprintf(stderr, "klbench: %s: FAILED: held after its lock+unlock pairs\n",
			ops->name);
		exit(3);
	}
	ops->write_unlock(k->lock, ts);
}

static void measure_pairs(struct lat_opts *o, const struct lockops *ops, unsigned rep)
{
	struct lat_lock k;
	unsigned char *ts;

	if (lat_open(&k, ops) < 0) {
		fprintf(stderr, "klbench: %s: init failed\n", ops->name);
		return;
	}
	ts = ts_enter(&k);
	time_pairs(ops->write_lock, ops->write_unlock, k.lock, ts, o->iters / 8);  /* warm */
	rec_add(o, ops, LM_WRITE, 0, rep,
		time_pairs(ops->write_lock, ops->write_unlock, k.lock, ts, o->iters));
	if (ops->read_lock != NULL) {
		time_pairs(ops->read_lock, ops->read_unlock, k.lock, ts, o->iters / 8);  /* warm */
		rec_add(o, ops, LM_READ, 0, rep,
			time_pairs(ops->read_lock, ops->read_unlock, k.lock, ts, o->iters));
	}
	if (ops->write_pair_loop != NULL) {
		time_loop(ops->write_pair_loop, k.lock, ts, o->iters / 8); /* warm */
		rec_add(o, ops, LM_WRITE_INL, 0, rep,
			time_loop(ops->write_pair_loop, k.lock, ts, o->iters));
	}
	if (ops->read_pair_loop != NULL) {
		time_loop(ops->read_pair_loop, k.lock, ts, o->iters / 8); /* warm */
		rec_add(o, ops, LM_READ_INL, 0, rep,
			time_loop(ops->read_pair_loop, k.lock, ts, o->iters));
	}
	check_released(&k, ts);
	ts_leave(&k, ts);
	lat_close(&k);
}

/* ---- writer cost with readers running ---------------------------------------------------- */

struct lat_reader {
	pthread_t tid;
	const struct lat_lock *k;
	_Atomic bool *stop;
	pthread_barrier_t *ready;
};

static void *reader_main(void *arg)
{
	struct lat_reader *r = arg;
	const struct lockops *ops = r->k->ops;
	unsigned char *ts = ts_enter(r->k);

	pthread_barrier_wait(r->ready);
	while (!atomic_load_explicit(r->stop, memory_order_relaxed)) {
		ops->read_lock(r->k->lock, ts);
		ops->read_unlock(r->k->lock, ts);
	}
	ts_leave(r->k, ts);
	return NULL;
}

static double median_of(double *v, unsigned n);

static double isolated(const struct lat_opts *o, const struct lat_lock *k, void *ts)
{
	double s[LAT_MAX_SAMPLES];
	unsigned n = o->samples;

	for (unsigned i = 0; i < n; i++) {
		uint64_t t0;

		kb_sleep_until(kb_now_ns() + o->gap_ns);
		t0 = kb_now_ns();
		if (k != NULL) {
			k->ops->write_lock(k->lock, ts);
			k->ops->write_unlock(k->lock, ts);
		} else {
			kl_fence_heavy();
		}
		s[i] = (double)(kb_now_ns() - t0);
	}
	return median_of(s, n);
}

/* Mean ns per write over a burst; a burst that outlasts LAT_BURST_MAX_NS stops there
 * (spinning writers can starve behind preempted readers on an oversubscribed machine). */
static double burst(const struct lat_opts *o, const struct lat_lock *k, void *ts)
{
	uint64_t t0;
	unsigned i;

	kb_sleep_until(kb_now_ns() + o->gap_ns);
	t0 = kb_now_ns();
	for (i = 0; i < o->burst; i++) {
		k->ops->write_lock(k->lock, ts);
		k->ops->write_unlock(k->lock, ts);
		if ((i & (LAT_BURST_CHECK - 1)) == 0 && kb_now_ns() - t0 > LAT_BURST_MAX_NS) {
			i++;
			break;
		}
	}
	return (double)(kb_now_ns() - t0) / i;
}

/*
 * Starts `nreaders` threads in read loops on a fresh instance of `host` (or of `ops`),
 * then measures `ops`'s isolated and burst write cost on that instance, or, with `ops`
 * NULL, one isolated heavy fence (the rendezvous floor) while the same readers run.
 */
static void writer_probe(const struct lat_opts *o, const struct lockops *ops,
			 const struct lockops *host, unsigned nreaders, double *iso, double *bu)
{
	struct lat_reader r[LAT_MAX_READER_THREADS];
	pthread_barrier_t ready;
	_Atomic bool stop = false;
	struct lat_lock k;
	unsigned char *ts;

	*iso = *bu = NAN;
	if (lat_open(&k, ops ? ops : host) < 0)
		return;
	ts = ts_enter(&k);
	pthread_barrier_init(&ready, NULL, nreaders + 1);
	for (unsigned i = 0; i < nreaders; i++) {
		r[i] = (struct lat_reader){ .k = &k, .stop = &stop, .ready = &ready };
		pthread_create(&r[i].tid, NULL, reader_main, &r[i]);
	}
	pthread_barrier_wait(&ready);
	*iso = isolated(o, ops ? &k : NULL, ts);
	if (ops != NULL)
		*bu = burst(o, &k, ts);
	atomic_store(&stop, true);
	for (unsigned i = 0; i < nreaders; i++)
		pthread_join(r[i].tid, NULL);
	pthread_barrier_destroy(&ready);
	ts_leave(&k, ts);
	lat_close(&k);
}

static void measure_writer(struct lat_opts *o, const struct lockops *ops,
			   const struct lockops *host, unsigned nreaders, unsigned rep)
{
	double iso, bu;

	writer_probe(o, ops, host, nreaders, &iso, &bu);
	if (ops != NULL) {
		rec_add(o, ops, LM_ISOLATED, nreaders, rep, iso);
		rec_add(o, ops, LM_BURST, nreaders, rep, bu);
	} else {
		rec_add(o, NULL, LM_FENCE, nreaders, rep, iso);
	}
}

double kb_writer_cost(const struct lockops *ops, const struct lockops *host,
		      unsigned readers, unsigned samples, double gap_s, double *burst_ns)
{
	struct lat_opts o = { .samples = samples, .gap_ns = (uint64_t)(gap_s * 1e9),
			      .burst = LAT_BURST };
	double iso, bu;

	if (readers > LAT_MAX_READER_THREADS)
		readers = LAT_MAX_READER_THREADS;
	if (o.samples > LAT_MAX_SAMPLES)
		o.samples = LAT_MAX_SAMPLES;
	writer_probe(&o, ops, host, readers, &iso, &bu);
	if (burst_ns != NULL)
		*burst_ns = bu;
	return iso;
}

double kb_pair_inline_ns(const struct lockops *ops, bool read, uint64_t iters)
{
	void (*loop)(void *, void *, unsigned long) = read ? ops->read_pair_loop
							    : ops->write_pair_loop;
	struct lat_lock k;
	unsigned char *ts;
	double ns;

	if (loop == NULL || lat_open(&k, ops) < 0)
		return NAN;
	ts = ts_enter(&k);
	time_loop(loop, k.lock, ts, iters / 8); /* warm */
	ns = time_loop(loop, k.lock, ts, iters);
	ts_leave(&k, ts);
	lat_close(&k);
	return ns;
}

double kb_pair_ns(const struct lockops *ops, bool read, uint64_t iters)
{
	struct lat_lock k;
	unsigned char *ts;
	double ns;

	iters = (iters + 3) / 4 * 4;
	if (lat_open(&k, ops) < 0)
		return NAN;
	ts = ts_enter(&k);
	if (read && ops->read_lock != NULL) {
		time_pairs(ops->read_lock, ops->read_unlock, k.lock, ts, iters / 8);
		ns = time_pairs(ops->read_lock, ops->read_unlock, k.lock, ts, iters);
	} else {
		time_pairs(ops->write_lock, ops->write_unlock, k.lock, ts, iters / 8);
		ns = time_pairs(ops->write_lock, ops->write_unlock, k.lock, ts, iters);
	}
	ts_leave(&k, ts);
	lat_close(&k);
	return ns;
}

/* ---- statistics and output -------------------------------------------------------------- */

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_of(double *v, unsigned n)
{
	if (n == 0)
		return NAN;
	qsort(v, n, sizeof(double), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double rec_median(const struct lat_opts *o, const struct lockops *ops,
			 enum lat_measure m, unsigned readers)
{
	double *v = malloc((o->nrec + 1) * sizeof(double)), r;
	unsigned n = 0;

	for (size_t i = 0; i < o->nrec; i++)
		if (o->rec[i].ops == ops && o->rec[i].m == m && o->rec[i].readers == readers)
			v[n++] = o->rec[i].ns;
	r = median_of(v, n);
	free(v);
	return r;
}

static void cell(double ns)
{
	if (isnan(ns))
		printf(" %10s", "-");
	else if (ns < 1000)
		printf(" %8.1fns", ns);
	else
		printf(" %8.2fus", ns / 1e3);
}

static void print_pairs(const struct lat_opts *o)
{
	const struct lockops *null = lockops_find("busted");
	double call = null ? rec_median(o, null, LM_WRITE, 0) : 0;

	printf("uncontended lock+unlock pairs: 1 thread (+ an idle helper thread), %llu pairs "
	       "per timing, median of %u\n", (unsigned long long)o->iters, o->repeats);
	printf("%-24s %10s %10s %10s %10s %10s %10s\n", "lock", "read", "write", "read net",
	       "write net", "read inl", "write inl");
	if (null != NULL) {
		printf("%-24s", "(adapter call: busted)");
		cell(call);
		cell(call);
		printf(" %10s %10s %10s", "", "", "");
		cell(rec_median(o, null, LM_WRITE_INL, 0));
		printf("  <- empty loop\n");
	}
	for (unsigned i = 0; i < o->nlocks; i++) {
		const struct lockops *ops = o->locks[i];
		double rd = rec_median(o, ops, LM_READ, 0), wr = rec_median(o, ops, LM_WRITE, 0);

		if (ops == null)
			continue;
		printf("%-24s", ops->name);
		cell(rd);
		cell(wr);
		cell(rd - call);
		cell(wr - call);
		cell(rec_median(o, ops, LM_READ_INL, 0));
		cell(rec_median(o, ops, LM_WRITE_INL, 0));
		printf("\n");
	}
}

static void print_writers(const struct lat_opts *o)
{
	printf("\nwriter cost: median of %u isolated write pairs (each after %.0f ms idle) and "
	       "mean of a burst of %u, with N threads in read loops\n", o->samples,
	       (double)o->gap_ns / 1e6, o->burst);
	printf("%-24s %7s %10s %10s %9s %10s\n", "lock", "readers", "isolated", "burst",
	       "iso/burst", "iso/fence");
	for (unsigned n = 0; n < o->nreaders; n++) {
		unsigned nr = o->readers[n];
		double fence = rec_median(o, NULL, LM_FENCE, nr);

		printf("%-24s %7u", "kl_fence_heavy", nr);
		cell(fence);
		printf(" %10s %9s %10s\n", "-", "-", "1.00");
		for (unsigned i = 0; i < o->nlocks; i++) {
			const struct lockops *ops = o->locks[i];
			double iso = rec_median(o, ops, LM_ISOLATED, nr);
			double bu = rec_median(o, ops, LM_BURST, nr);

			if (isnan(iso))
				continue;
			printf("%-24s %7u", ops->name, nr);
			cell(iso);
			cell(bu);
			printf(" %9.2f %10.2f\n", iso / bu, iso / fence);
		}
	}
}

static int write_files(const struct lat_opts *o)
{
	FILE *f;

	if (o->csv != NULL) {
		f = strcmp(o->csv, "-") ? fopen(o->csv, "w") : stdout;
		if (f == NULL)
			return -1;
		fprintf(f, "lock,family,measure,readers,repeat,ns\n");
		for (size_t i = 0; i < o->nrec; i++) {
			const struct lat_rec *r = &o->rec[i];

			fprintf(f, "%s,%s,%s,%u,%u,%.3f\n", r->ops ? r->ops->name : "kl_fence_heavy",
				r->ops ? r->ops->family : "klock", lat_names[r->m], r->readers,
				r->repeat, r->ns);
		}
		if (f != stdout)
			fclose(f);
	}
	if (o->json == NULL)
		return 0;
	f = strcmp(o->json, "-") ? fopen(o->json, "w") : stdout;
	if (f == NULL)
		return -1;
	fprintf(f, "{\n  \"klbench\": \"%s\",\n  \"mode\": \"latency\",\n  \"command\": ",
		KB_VERSION);
	kb_json_str(f, kb_cmdline);
	fprintf(f, ",\n  \"machine\": ");
	kb_machine_json(f);
	fprintf(f, ",\n  \"iters\": %llu, \"samples\": %u, \"gap_ns\": %llu, \"burst\": %u,\n"
		"  \"measurements\": [\n", (unsigned long long)o->iters, o->samples,
		(unsigned long long)o->gap_ns, o->burst);
	for (size_t i = 0; i < o->nrec; i++) {
		const struct lat_rec *r = &o->rec[i];

		fprintf(f, "    {\"lock\": \"%s\", \"measure\": \"%s\", \"readers\": %u, "
			"\"repeat\": %u, \"ns\": %.3f}%s\n", r->ops ? r->ops->name : "kl_fence_heavy",
			lat_names[r->m], r->readers, r->repeat, r->ns, i + 1 < o->nrec ? "," : "");
	}
	fprintf(f, "  ]\n}\n");
	if (f != stdout)
		fclose(f);
	return 0;
}

/* ---- the command -------------------------------------------------------------------------- */

static void lat_usage(FILE *f)
{
	fprintf(f,
"usage: klbench latency [-l LOCKS] [-r N] [--iters N] [--readers LIST] [--samples N]\n"
"                       [--gap T] [--burst N] [--csv FILE] [--json FILE] [-q]\n"
"  -l LOCKS       locks (default: every lock, with the busted call-cost baseline)\n"
"  -r N           repeats, interleaved across locks (default %d)\n"
"  --iters N      pairs per uncontended timing (default %u)\n"
"  --readers LIST reader threads while writers are timed (default 0,2)\n"
"  --samples N    isolated writes per measurement (default %d)\n"
"  --gap T        idle time before each isolated write (default 10ms)\n"
"  --burst N      writes per burst (default %d)\n",
		LAT_REPEATS, LAT_ITERS, LAT_SAMPLES, LAT_BURST);
}

static int lat_parse(struct lat_opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "locks", required_argument, NULL, 'l' }, { "repeats", required_argument, NULL, 'r' },
		{ "iters", required_argument, NULL, 'i' }, { "readers", required_argument, NULL, 'R' },
		{ "samples", required_argument, NULL, 's' }, { "gap", required_argument, NULL, 'g' },
		{ "burst", required_argument, NULL, 'b' }, { "csv", required_argument, NULL, 'C' },
		{ "json", required_argument, NULL, 'J' }, { "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
	unsigned v, n;
	double gap;
	int c, rc = 0;

	optind = 1;
	while (rc == 0 && (c = getopt_long(argc, argv, "l:r:qh", lo, NULL)) != -1) {
		switch (c) {
		case 'l': rc = kb_parse_locks(optarg, o->locks, KB_MAX_LOCKS, &o->nlocks); break;
		case 'r': rc = kb_parse_uint_list(optarg, &o->repeats, 1, &n); break;
		case 'i': rc = kb_parse_uint_list(optarg, &v, 1, &n); o->iters = (v + 3) / 4 * 4; break;
		case 'R': rc = kb_parse_uint_list(optarg, o->readers, LAT_MAX_READERS, &o->nreaders);
			break;
		case 's': rc = kb_parse_uint_list(optarg, &o->samples, 1, &n); break;
		case 'g': rc = kb_parse_seconds(optarg, &gap); o->gap_ns = (uint64_t)(gap * 1e9);
			break;
		case 'b': rc = kb_parse_uint_list(optarg, &o->burst, 1, &n); break;
		case 'C': o->csv = optarg; break;
		case 'J': o->json = optarg; break;
		case 'q': o->progress = false; break;
		case 'h': lat_usage(stdout); exit(0);
		default: lat_usage(stderr); return -1;
		}
	}
	for (unsigned i = 0; i < o->nreaders; i++)
		rc |= o->readers[i] > LAT_MAX_READER_THREADS ? -1 : 0;
	if (rc == 0 && (o->repeats < 1 || o->iters < 4 || o->samples < 1 ||
			o->samples > LAT_MAX_SAMPLES || o->burst < 1))
		rc = -1;
	if (rc != 0)
		fprintf(stderr, "klbench latency: bad arguments (see klbench latency --help)\n");
	return rc;
}

static void lat_defaults(struct lat_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->repeats = LAT_REPEATS;
	o->iters = LAT_ITERS;
	o->samples = LAT_SAMPLES;
	o->gap_ns = LAT_GAP_NS;
	o->burst = LAT_BURST;
	o->readers[0] = 0;
	o->readers[1] = 2;
	o->nreaders = 2;
	o->progress = kb_isatty_err();
}

static void lat_run(struct lat_opts *o)
{
	size_t total = (size_t)o->repeats * o->nlocks * (1 + o->nreaders), done = 0;

	for (unsigned rep = 0; rep < o->repeats; rep++) {
		for (unsigned i = 0; i < o->nlocks; i++, done++) {
			if (o->progress)
				kb_progress(done, total, o->locks[i]->name);
			measure_pairs(o, o->locks[i], rep);
		}
		for (unsigned n = 0; n < o->nreaders; n++) {
			const struct lockops *host = NULL;

			for (unsigned i = 0; i < o->nlocks; i++, done++) {
				const struct lockops *ops = o->locks[i];

				if (ops->read_lock == NULL || (ops->flags & LOCKOPS_BUSTED))
					continue;
				if (o->progress)
					kb_progress(done, total, ops->name);
				host = host ? host : ops;
				measure_writer(o, ops, NULL, o->readers[n], rep);
			}
			if (host != NULL)
				measure_writer(o, NULL, host, o->readers[n], rep);
		}
	}
	if (o->progress)
		kb_progress_done();
}

/* The call-cost baseline (busted) is always measured, first. */
static void add_baseline(struct lat_opts *o)
{
	const struct lockops *null = lockops_find("busted");

	if (null == NULL || o->nlocks == KB_MAX_LOCKS)
		return;
	for (unsigned i = 0; i < o->nlocks; i++)
		if (o->locks[i] == null)
			return;
	memmove(o->locks + 1, o->locks, o->nlocks * sizeof(o->locks[0]));
	o->locks[0] = null;
	o->nlocks++;
}

int kb_latency_main(int argc, char **argv)
{
	struct lat_opts o;

	lat_defaults(&o);
	if (lat_parse(&o, argc, argv) < 0)
		return 2;
	if (o.nlocks == 0 && kb_parse_locks("all", o.locks, KB_MAX_LOCKS, &o.nlocks) < 0)
		return 2;
	add_baseline(&o);
	lat_run(&o);
	print_pairs(&o);
	print_writers(&o);
	if (write_files(&o) < 0) {
		perror("klbench latency");
		return 1;
	}
	free(o.rec);
	return 0;
}
