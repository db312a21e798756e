/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/engine.c - one run: N workers hammer the shared buckets through one adapter for
 * a warm-up and a measured interval; the main thread samples the workers' counters at
 * the interval's edges, then verifies the shared counters (workload in klbench.h).
 *
 * Measurement choices (docs/klbench.md explains them to users):
 * - throughput is counted, not timed: each worker bumps its own counters (own cache
 *   line, plain stores); the main thread reads them at the start and end of the interval;
 * - latency is the time spent inside the lock call, measured with two CLOCK_MONOTONIC
 *   reads on one operation in 2^sample_shift chosen at random (timing every operation
 *   would add ~2 clock reads, tens of ns, to a lock that costs ten), minus the clock's
 *   own back-to-back cost;
 * - CPU time and context switches come from getrusage(RUSAGE_THREAD) in each worker at
 *   the moment it sees the interval begin and end;
 * - wake-ups per acquisition = the workers' voluntary context switches / operations: in
 *   the loop nothing blocks except the lock, so each voluntary switch is one sleep that
 *   ended in a wake-up (futex wake, or a timeout). It needs no tracing privileges and
 *   costs nothing while the run lasts;
 * - the memory the threads share (the locks, the counters, the thread states an adapter
 *   may link into a queue) lies at addresses chosen by the repeat's number, the same for
 *   every lock (see "memory slots" below).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <klock/lockstat.h>
#include "klbench.h"

/* Cache line padding for per-worker and per-lock memory (adjacent-line prefetch pairs). */
#define KB_PAD 128
/* Bits of a 64-bit random number used for the write decision (a double's mantissa). */
#define KB_RAND_BITS 53
/* Multiplier/increment of the private think-time LCG (Knuth MMIX). */
#define KB_LCG_MUL 6364136223846793005ull
#define KB_LCG_ADD 1442695040888963407ull
/* Worker stack size: the loop needs little, and 4096 default 8 MiB stacks add up. */
#define KB_STACK (256 * 1024)
/* Output multiplier of xorshift64* (Vigna), the workers' random numbers. */
#define KB_XORSHIFT_MUL 2685821657736338717ull
/* Fibonacci hashing constant (2^64 / golden ratio) to spread keys over stripes. */
#define KB_FIB 11400714819323198485ull
/* Bytes of one slot: the engine, the counters, the locks, the thread states and the
 * workers of one run (16 KiB a worker: 1000 fit; mapped, so only the pages a run touches
 * cost). */
#define KB_SLOT_BYTES ((size_t)16 << 20)
/* Page size for the slots' 4 KiB-alias arithmetic (the x86 and arm64 base page). */
#define KB_PAGE 4096u
/* Where each region starts within its first page: the lines one worker touches at every
 * operation never share their address bits 0-11 (a load after a store to an address
 * equal in those bits waits for it: "4K aliasing"). Each worker is page-aligned (its
 * counters at offset 0). */
#define KB_AT_ENGINE 0x200u
#define KB_AT_DATA 0x400u
#define KB_AT_LOCKS 0x800u
#define KB_AT_TS 0xc00u

enum { KB_PH_WARMUP, KB_PH_MEASURE, KB_PH_STOP };

struct kb_worker {
	_Atomic uint64_t nread;        /* written by this worker only; read by main */
	_Atomic uint64_t nwrite;
	char pad0[KB_PAD - 2 * sizeof(uint64_t)];
	struct kb_engine *e;
	unsigned index;
	uint64_t rng;
	unsigned char *ts;             /* nlocks thread-state buffers, ts_stride apart */
	void *cpuset;
	uint64_t viol;
	uint64_t retries;              /* optimistic reads repeated in the interval */
	struct rusage ru0, ru1;
	bool measured;                 /* saw the measured interval begin */
	int error;
	pthread_t tid;
	struct kb_hist rh, wh;
} __attribute__((aligned(KB_PAGE))); /* counters at a page's start: see KB_AT_ENGINE */

struct kb_engine {
	const struct kb_config *cfg;
	const struct lockops *ops;
	void (*rlock)(void *, void *);
	void (*runlock)(void *, void *);
	bool keyed, check_readers;
	unsigned char *locks;          /* nlocks instances, lock_stride apart */
	size_t lock_stride, ts_stride;
	unsigned char *ts;             /* each worker's nlocks thread states, ts_each apart, or
	                                * NULL: each worker allocates its own */
	size_t ts_each;                /* a whole number of pages */
	bool own_locks, own_data, own_ts, own_w; /* from malloc (free them), not the arena */
	unsigned nlocks, nbuckets, stride;   /* stride: words per bucket (owner + cs) */
	_Atomic uint64_t *data;
	uint64_t write_thresh;         /* write when (rand >> 11) < write_thresh */
	uint64_t sample_mask;
	uint64_t timer_ns;
	void **cpusets;                /* one per worker, or NULL (unbound) */
	pthread_barrier_t start;
	_Alignas(KB_PAD) _Atomic int phase;
	char pad1[KB_PAD - sizeof(int)];
	struct kb_worker *w;
};

static size_t round_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

static uint64_t next_rand(uint64_t *s)  /* xorshift64* */
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * KB_XORSHIFT_MUL;
}

static void think(unsigned steps, uint64_t *x)
{
	uint64_t v = *x;

	for (unsigned i = 0; i < steps; i++) {
		v = v * KB_LCG_MUL + KB_LCG_ADD;
		__asm__ volatile("" : "+r"(v));
	}
	*x = v;
}

/* ---- memory slots (where the shared memory lies; -p places the threads) ------------- */

/*
 * What a cache line's trip between two cores costs depends on its physical address on a
 * big server chip (which slice of the last-level cache is its home, how far that is from
 * both cores). On the development VM (2 vCPUs of a Xeon with a 260 MiB L3) kl_mutex at 2
 * threads ran at 37-40 M ops/s with its counters on one line and 43-45 M on the seven
 * others tried, every repeat, every process. malloc put each run's lock and counters
 * wherever the previous runs' frees left room, so which lock got a slow line depended on
 * its place in the interleaving: in a mixed run the same lock dipped at the same repeats,
 * run after run, and never when it ran alone (docs/results.md, "Run to run").
 *
 * So the memory the threads share comes from an arena mapped once and never unmapped:
 * repeat r of every configuration uses slot r % KB_SLOTS, at the same offsets. Within a
 * repeat every lock sees the same physical lines, and a configuration's median spans
 * several slots. A run that needs more than a slot (a large table) takes malloc's
 * memory for what does not fit, as before.
 */
/* KB_SLOTS slots; the main thread maps it at the first run */
static unsigned char *kb_arena;

struct kb_slot {
	unsigned char *next, *end;
};

static void slot_open(struct kb_slot *s, unsigned repeat)
{
	if (kb_arena == NULL) {
		void *p = mmap(NULL, KB_SLOTS * KB_SLOT_BYTES, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		kb_arena = p == MAP_FAILED ? NULL : p;
	}
	s->next = s->end = NULL;
	if (kb_arena != NULL) {
		s->next = kb_arena + (size_t)(repeat % KB_SLOTS) * KB_SLOT_BYTES;
		s->end = s->next + KB_SLOT_BYTES;
	}
}

/* @bytes (a multiple of KB_PAD) from the slot, starting @at bytes into a fresh page; else
 * from malloc, aligned to @align (*@owned: free it). */
static void *slot_take(struct kb_slot *s, size_t bytes, size_t at, size_t align,
		       bool *owned)
{
	unsigned char *p = NULL;

	if (s->next != NULL)
		p = kb_arena + round_up((size_t)(s->next - kb_arena), KB_PAGE) + at;
	*owned = p == NULL || p >= s->end || bytes > (size_t)(s->end - p);
	if (*owned)
		return aligned_alloc(align, bytes);
	s->next = p + bytes;
	return p;
}

/* ---- the critical sections --------------------------------------------------------- */

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)
#define ST(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)

static uint64_t section_write(_Atomic uint64_t *b, unsigned cs, uint64_t me)
{
	uint64_t viol = LD(&b[0]) != 0, base = LD(&b[1]);

	ST(&b[0], me);
	for (unsigned i = 1; i <= cs; i++) {
		uint64_t v = LD(&b[i]);

		viol += v != base;
		ST(&b[i], v + 1);
	}
	viol += LD(&b[0]) != me;
	ST(&b[0], 0);
	return viol != 0;   /* one failed section, however many words it saw torn */
}

static uint64_t section_read(_Atomic uint64_t *b, unsigned cs, bool check)
{
	uint64_t viol = LD(&b[0]) != 0, base = LD(&b[1]);

	for (unsigned i = 2; i <= cs; i++)
		viol += LD(&b[i]) != base;
	return check && viol != 0;
}

/* ---- one operation -------------------------------------------------------------------- */

struct kb_target {
	void *lock, *ts;
	_Atomic uint64_t *bucket;
};

static void pick(const struct kb_engine *e, const struct kb_worker *w, uint64_t *rng,
		 struct kb_target *t)
{
	unsigned key = 0, stripe = 0;

	if (e->nbuckets > 1)
		key = (unsigned)((next_rand(rng) >> 32) % e->nbuckets);
	if (e->nlocks > 1)
		stripe = (unsigned)(((key + 1) * KB_FIB >> 32) % e->nlocks);
	t->bucket = e->data + (size_t)key * e->stride;
	t->lock = e->locks + (size_t)stripe * e->lock_stride;
	t->ts = w->ts + (size_t)stripe * e->ts_stride;
}

static void acquire(const struct kb_engine *e, const struct kb_target *t, bool write)
{
	if (e->keyed)
		e->ops->key_lock(t->lock, t->ts, t->bucket);
	else if (write)
		e->ops->write_lock(t->lock, t->ts);
	else
		e->rlock(t->lock, t->ts);
}

static void release(const struct kb_engine *e, const struct kb_target *t, bool write)
{
	if (e->keyed)
		e->ops->key_unlock(t->lock, t->ts, t->bucket);
	else if (write)
		e->ops->write_unlock(t->lock, t->ts);
	else
		e->runlock(t->lock, t->ts);
}

/* One sampled acquisition that began at t0, net of the clock's own cost. */
static void record(const struct kb_engine *e, struct kb_hist *h, uint64_t t0)
{
	uint64_t dt = kb_now_ns() - t0;

	kb_hist_record(h, dt > e->timer_ns ? dt - e->timer_ns : 0);
}

/*
 * A seqlock-style read (LOCKOPS_READ_RETRY, the protocol in lockops.h): run the section
 * until the lock says no writer intervened; only the validated copy is judged, and the
 * attempts that had to be repeated are the price (retries per read).
 */
static void read_optimistic(const struct kb_engine *e, const struct kb_target *t,
			    struct kb_worker *w, bool measuring, bool timed)
{
	uint64_t viol, t0 = timed ? kb_now_ns() : 0;

	for (;;) {
		e->rlock(t->lock, t->ts);
		if (timed) {   /* the first read_lock: it waits while a writer is inside */
			record(e, &w->rh, t0);
			timed = false;
		}
		viol = section_read(t->bucket, e->cfg->cs, e->check_readers);
		if (!e->ops->read_retry(t->lock, t->ts))
			break;
		w->retries += measuring;
	}
	e->runlock(t->lock, t->ts);
	w->viol += viol;
}

static void op(struct kb_engine *e, struct kb_worker *w, bool measuring)
{
	uint64_t r = next_rand(&w->rng), t0 = 0;
	bool write = (r >> (64 - KB_RAND_BITS)) < e->write_thresh;
	bool timed = measuring && (r & e->sample_mask) == 0;
	struct kb_target t;

	pick(e, w, &w->rng, &t);
	if (!write && e->ops->read_retry != NULL) {
		read_optimistic(e, &t, w, measuring, timed);   /* takes, validates, releases */
		ST(&w->nread, LD(&w->nread) + 1);
		return;
	}
	if (timed)
		t0 = kb_now_ns();
	acquire(e, &t, write);
	if (timed)
		record(e, write ? &w->wh : &w->rh, t0);
	if (write)
		w->viol += section_write(t.bucket, e->cfg->cs, w->index + 1);
	else
		w->viol += section_read(t.bucket, e->cfg->cs, e->check_readers);
	release(e, &t, write);
	if (write)
		ST(&w->nwrite, LD(&w->nwrite) + 1);
	else
		ST(&w->nread, LD(&w->nread) + 1);
}

/* ---- workers ------------------------------------------------------------------------- */

static int worker_enter(struct kb_worker *w)
{
	struct kb_engine *e = w->e;

	if (w->cpuset != NULL && kb_bind_self(w->cpuset) < 0)
		w->error = errno;
	if (e->ts != NULL)
		w->ts = e->ts + (size_t)w->index * e->ts_each;
	else
		w->ts = aligned_alloc(KB_PAD, (size_t)e->nlocks * e->ts_stride);
	if (w->ts == NULL)
		return -1;
	memset(w->ts, 0, (size_t)e->nlocks * e->ts_stride);
	if (e->ops->thread_enter != NULL)
		for (unsigned i = 0; i < e->nlocks; i++)
			e->ops->thread_enter(e->locks + (size_t)i * e->lock_stride);
	return 0;
}

static void worker_leave(struct kb_worker *w)
{
	struct kb_engine *e = w->e;

	if (e->ops->thread_leave != NULL)
		for (unsigned i = 0; i < e->nlocks; i++)
			e->ops->thread_leave(e->locks + (size_t)i * e->lock_stride);
	if (e->ts == NULL)
		free(w->ts);
}

static void *worker_main(void *arg)
{
	struct kb_worker *w = arg;
	struct kb_engine *e = w->e;
	uint64_t x = w->rng;
	int seen = KB_PH_WARMUP, ph;

	if (worker_enter(w) < 0)
		w->error = ENOMEM;
	pthread_barrier_wait(&e->start);
	if (w->ts == NULL)
		return NULL;
	while ((ph = atomic_load_explicit(&e->phase, memory_order_relaxed)) != KB_PH_STOP) {
		if (ph != seen) {
			seen = ph;
			w->measured = true;
			getrusage(RUSAGE_THREAD, &w->ru0);
		}
		op(e, w, seen == KB_PH_MEASURE);
		if (e->cfg->think)
			think(e->cfg->think, &x);
	}
	getrusage(RUSAGE_THREAD, &w->ru1);
	if (!w->measured)
		w->ru0 = w->ru1;
	worker_leave(w);
	return NULL;
}

/* ---- setup and teardown --------------------------------------------------------------- */

static void engine_free(struct kb_engine *e)
{
	if (e->locks != NULL) {
		for (unsigned i = 0; i < e->nlocks; i++)
			e->ops->destroy(e->locks + (size_t)i * e->lock_stride);
		if (e->own_locks)
			free(e->locks);
	}
	kb_place_free(e->cpusets, e->cfg->threads);
	if (e->own_data)
		free(e->data);
	if (e->own_ts)
		free(e->ts);
	if (e->own_w)
		free(e->w);
}

static int engine_locks(struct kb_engine *e, struct kb_slot *slot)
{
	const struct kb_config *c = e->cfg;
	size_t ts_all;

	e->keyed = c->workload == KB_WL_TABLE && (e->ops->flags & LOCKOPS_KEYED);
	e->nlocks = c->workload == KB_WL_TABLE && !e->keyed && c->stripes > 1 ? c->stripes : 1;
	e->lock_stride = round_up(e->ops->size ? e->ops->size : 1, KB_PAD);
	e->ts_stride = round_up(e->ops->tsize ? e->ops->tsize : 1, KB_PAD);
	e->locks = slot_take(slot, (size_t)e->nlocks * e->lock_stride, KB_AT_LOCKS, KB_PAD,
			     &e->own_locks);
	if (e->locks == NULL)
		return ENOMEM;
	/* A page per worker: every worker's first states lie at KB_AT_TS in their page. */
	e->ts_each = round_up((size_t)e->nlocks * e->ts_stride, KB_PAGE);
	ts_all = (size_t)c->threads * e->ts_each;
	e->ts = slot_take(slot, ts_all, KB_AT_TS, KB_PAD, &e->own_ts);
	if (e->own_ts) { /* too big for the slot: each worker allocates its own, as before */
		free(e->ts);
		e->ts = NULL;
		e->own_ts = false;
	}
	memset(e->locks, 0, (size_t)e->nlocks * e->lock_stride);
	for (unsigned i = 0; i < e->nlocks; i++) {
		int err = e->ops->init(e->locks + (size_t)i * e->lock_stride);

		if (err != 0) {
			/* destroy only what init succeeded on */
			e->nlocks = i;
			return err;
		}
	}
	return 0;
}

static int engine_setup(struct kb_engine *e, const struct kb_config *c, struct kb_slot *slot)
{
	size_t words;
	int err;
	double frac = c->write_pct / 100.0;

	memset(e, 0, sizeof(*e));
	e->cfg = c;
	e->ops = c->ops;
	e->rlock = c->ops->read_lock ? c->ops->read_lock : c->ops->write_lock;
	e->runlock = c->ops->read_unlock ? c->ops->read_unlock : c->ops->write_unlock;
	e->check_readers = !(c->ops->flags & LOCKOPS_NO_EXCLUSION);
	e->nbuckets = c->workload == KB_WL_TABLE ? c->keys : 1;
	e->stride = c->cs + 1;
	e->write_thresh = frac >= 1.0 ? (uint64_t)1 << KB_RAND_BITS
				      : (uint64_t)(frac * (double)((uint64_t)1 << KB_RAND_BITS));
	e->sample_mask = ((uint64_t)1 << c->sample_shift) - 1;
	e->timer_ns = kb_timer_overhead_ns();
	words = round_up((size_t)e->nbuckets * e->stride, KB_PAD / sizeof(uint64_t));
	atomic_init(&e->phase, KB_PH_WARMUP);
	/* The slot's order: the counters (their size is the configuration's), the locks (the
	 * adapter's), the thread states, the workers (the thread count's). */
	e->data = slot_take(slot, words * sizeof(uint64_t), KB_AT_DATA, KB_PAD, &e->own_data);
	if (e->data == NULL)
		return ENOMEM;
	memset(e->data, 0, words * sizeof(uint64_t));
	err = engine_locks(e, slot);
	if (err != 0)
		return err;
	e->w = slot_take(slot, (size_t)c->threads * sizeof(*e->w), 0, KB_PAGE, &e->own_w);
	if (e->w == NULL)
		return ENOMEM;
	memset(e->w, 0, (size_t)c->threads * sizeof(*e->w));
	return 0;
}

static int engine_start(struct kb_engine *e)
{
	const struct kb_config *c = e->cfg;
	unsigned i;
	int err = 0;

	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, KB_STACK);
	e->cpusets = kb_place_sets(c->placement, c->threads);
	pthread_barrier_init(&e->start, NULL, c->threads + 1);
	for (i = 0; i < c->threads; i++) {
		struct kb_worker *w = &e->w[i];

		w->e = e;
		w->index = i;
		w->rng = (KB_FIB * (i + 1)) ^ kb_now_ns();
		w->rng |= 1;
		w->cpuset = e->cpusets ? e->cpusets[i] : NULL;
		kb_hist_init(&w->rh);
		kb_hist_init(&w->wh);
		err = pthread_create(&w->tid, &attr, worker_main, w);
		if (err != 0)
			break;
	}
	pthread_attr_destroy(&attr);
	if (err != 0) {
		/* the started ones wait at the barrier: nothing to unwind but the process */
		fprintf(stderr, "klbench: cannot start thread %u of %u: %s\n", i + 1,
			c->threads, strerror(err));
		exit(2);
	}
	pthread_barrier_wait(&e->start);
	return 0;
}

static void snapshot(const struct kb_engine *e, uint64_t *reads, uint64_t *writes,
		     uint64_t *per)
{
	*reads = *writes = 0;
	for (unsigned i = 0; i < e->cfg->threads; i++) {
		uint64_t r = atomic_load_explicit(&e->w[i].nread, memory_order_relaxed);
		uint64_t w = atomic_load_explicit(&e->w[i].nwrite, memory_order_relaxed);

		*reads += r;
		*writes += w;
		per[i] = r + w;
	}
}

/* ---- results --------------------------------------------------------------------------- */

static double tv_s(const struct timeval *a, const struct timeval *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_usec - a->tv_usec) / 1e6;
}

static void fairness(struct kb_result *r)
{
	unsigned n = r->cfg.threads;
	double mean = 0, var = 0;

	r->thr_min = UINT64_MAX;
	r->thr_max = 0;
	for (unsigned i = 0; i < n; i++) {
		mean += (double)r->per_thread[i];
		if (r->per_thread[i] < r->thr_min)
			r->thr_min = r->per_thread[i];
		if (r->per_thread[i] > r->thr_max)
			r->thr_max = r->per_thread[i];
	}
	mean /= n;
	for (unsigned i = 0; i < n; i++)
		var += ((double)r->per_thread[i] - mean) * ((double)r->per_thread[i] - mean);
	r->fair_sd_pct = mean > 0 ? 100.0 * sqrt(var / n) / mean : 0;
	r->fair_ratio = r->thr_min ? (double)r->thr_max / (double)r->thr_min : INFINITY;
}

/*
 * Share of the workers' time inside lock calls, estimated from the sampled acquisitions
 * (each stands for 2^sample_shift). Samples are capped at the 99.9th percentile: one
 * sampled call that happened to be preempted (milliseconds, multiplied by the sampling
 * factor) would otherwise decide the figure on a busy machine. Waits longer than p99.9
 * are counted as p99.9, so with heavy-tailed waits this is a lower bound.
 */
static double lock_share(const struct kb_result *r)
{
	struct kb_hist *h = malloc(sizeof(*h));
	double sum, pct;

	if (h == NULL)
		return NAN;
	kb_hist_init(h);
	kb_hist_merge(h, r->rhist);
	kb_hist_merge(h, r->whist);
	sum = kb_hist_capped_sum(h, kb_hist_percentile(h, 99.9));
	free(h);
	pct = 100.0 * sum * (double)((uint64_t)1 << r->cfg.sample_shift) /
	      (r->elapsed * 1e9 * r->cfg.threads);
	return pct > 100 ? 100 : pct;
}

static void collect(struct kb_engine *e, struct kb_result *r, const uint64_t *before)
{
	uint64_t ops;

	for (unsigned i = 0; i < r->cfg.threads; i++) {
		struct kb_worker *w = &e->w[i];

		r->per_thread[i] -= before[i];
		r->user_s += tv_s(&w->ru0.ru_utime, &w->ru1.ru_utime);
		r->sys_s += tv_s(&w->ru0.ru_stime, &w->ru1.ru_stime);
		r->vcsw += (uint64_t)(w->ru1.ru_nvcsw - w->ru0.ru_nvcsw);
		r->ivcsw += (uint64_t)(w->ru1.ru_nivcsw - w->ru0.ru_nivcsw);
		kb_hist_merge(r->rhist, &w->rh);
		kb_hist_merge(r->whist, &w->wh);
		r->violations += w->viol;
		r->retries += w->retries;
		if (w->error != 0 && i == 0)
			fprintf(stderr, "klbench: warning: could not bind threads to CPUs (%s)\n",
				strerror(w->error));
	}
	ops = r->reads + r->writes;
	r->ops_per_s = (double)ops / r->elapsed;
	r->wakes_per_acq = ops ? (double)r->vcsw / (double)ops : 0;
	r->retries_per_read = r->cfg.ops->read_retry && r->reads ? (double)r->retries /
		(double)r->reads : NAN;
	r->lock_pct = lock_share(r);
	fairness(r);
}

/* Every bucket's counters must equal the writes made to it; nobody may own one now. */
static void verify(struct kb_engine *e, struct kb_result *r)
{
	uint64_t expected = 0, found = 0, torn = 0, owned = 0;
	const char *who = r->cfg.ops->name;

	for (unsigned i = 0; i < r->cfg.threads; i++)
		expected += atomic_load(&e->w[i].nwrite);
	for (unsigned b = 0; b < e->nbuckets; b++) {
		_Atomic uint64_t *w = e->data + (size_t)b * e->stride;

		owned += LD(&w[0]) != 0;
		for (unsigned i = 2; i <= r->cfg.cs; i++)
			torn += LD(&w[i]) != LD(&w[1]);
		found += LD(&w[1]);
	}
	r->lost = expected > found ? expected - found : found - expected;
	r->verified = r->lost == 0 && r->violations == 0 && torn == 0 && owned == 0;
	if (r->verified) {
		snprintf(r->verify_msg, sizeof(r->verify_msg), "ok (%llu updates counted)",
			 (unsigned long long)found);
		return;
	}
	snprintf(r->verify_msg, sizeof(r->verify_msg),
		 "%s LOST %llu of %llu updates; %llu in-section check failures; %llu torn "
		 "buckets: the lock let two threads in", who, (unsigned long long)r->lost,
		 (unsigned long long)expected, (unsigned long long)r->violations,
		 (unsigned long long)(torn + owned));
}

/* klock's event counts over the measured interval (@a to @b) per operation; NAN for locks
 * outside klock (@ours false), which count none. */
static void events_per_op(struct kb_result *r, const struct kl_lock_events *a,
			  const struct kl_lock_events *b, bool ours)
{
	double ops = (double)(r->reads + r->writes), cont = (double)(b->contended - a->contended);

	r->fences_per_op = r->sleeps_per_op = r->kwakes_per_op = r->asleep_ho_pct = NAN;
	if (!ours || ops == 0)
		return;
	r->fences_per_op = (double)(b->fences - a->fences) / ops;
	r->sleeps_per_op = (double)(b->sleeps - a->sleeps) / ops;
	r->kwakes_per_op = (double)(b->wakeups - a->wakeups) / ops;
	r->asleep_ho_pct = cont > 0 ? 100.0 * (double)(b->handovers_asleep - a->handovers_asleep) /
					      cont : 0.0;
}

static int run_phases(struct kb_engine *e, struct kb_result *r, uint64_t *before)
{
	const struct kb_config *c = e->cfg;
	struct kb_lockstat ls = { NAN, NAN };
	struct kl_lock_events ev0, ev1;
	uint64_t t0, t1, rd, wr, rv0 = 0, rv1 = 0, ub0 = 0, ub1 = 0;
	/* lockstat sees klock's locks only: for the others it would report a false 0% */
	bool lockstat = c->lockstat && strcmp(c->ops->family, "klock") == 0;

	engine_start(e);
	kb_sleep_until(kb_now_ns() + (uint64_t)(c->warmup * 1e9));
	if (lockstat)
		kb_lockstat_begin();
	snapshot(e, &rd, &wr, before);
	kl_lock_events(&ev0);
	if (c->ops->bias != NULL)
		c->ops->bias(e->locks, &rv0, &ub0);
	t0 = kb_now_ns();
	atomic_store_explicit(&e->phase, KB_PH_MEASURE, memory_order_relaxed);
	kb_sleep_until(t0 + (uint64_t)(c->duration * 1e9));
	snapshot(e, &r->reads, &r->writes, r->per_thread);
	kl_lock_events(&ev1);
	t1 = kb_now_ns();
	if (c->ops->bias != NULL)
		c->ops->bias(e->locks, &rv1, &ub1);
	if (lockstat)
		kb_lockstat_end((double)(t1 - t0) / 1e9 * c->threads,
				r->reads + r->writes - rd - wr, &ls);
	atomic_store_explicit(&e->phase, KB_PH_STOP, memory_order_relaxed);
	for (unsigned i = 0; i < c->threads; i++)
		pthread_join(e->w[i].tid, NULL);
	pthread_barrier_destroy(&e->start);
	r->reads -= rd;
	r->writes -= wr;
	r->elapsed = (double)(t1 - t0) / 1e9;
	r->lockstat_wait_pct = ls.wait_pct;
	r->lockstat_contended_pct = ls.contended_pct;
	events_per_op(r, &ev0, &ev1, strcmp(c->ops->family, "klock") == 0);
	if (c->ops->bias != NULL) {
		r->revocations_per_s = (double)(rv1 - rv0) / r->elapsed;
		r->unbiased_pct = fmin(100, (double)(ub1 - ub0) / (double)(t1 - t0) * 100);
	}
	return 0;
}

/* The engine itself is the first thing in the repeat's slot (the workers read it at every
 * operation). */
static struct kb_engine *engine_new(unsigned repeat, struct kb_slot *slot, bool *owned)
{
	slot_open(slot, repeat);
	return slot_take(slot, round_up(sizeof(struct kb_engine), KB_PAD), KB_AT_ENGINE, KB_PAD,
			 owned);
}

int kb_run(const struct kb_config *c, unsigned repeat, struct kb_result *r)
{
	struct kb_slot slot;
	bool own_e;
	struct kb_engine *e = engine_new(repeat, &slot, &own_e);
	uint64_t *before = calloc(c->threads, sizeof(uint64_t));
	int err;

	memset(r, 0, sizeof(*r));
	r->cfg = *c;
	r->repeat = repeat;
	r->lockstat_wait_pct = r->lockstat_contended_pct = NAN;
	r->revocations_per_s = r->unbiased_pct = NAN;
	r->per_thread = calloc(c->threads, sizeof(uint64_t));
	r->rhist = malloc(sizeof(*r->rhist));
	r->whist = malloc(sizeof(*r->whist));
	if (e == NULL || before == NULL || r->per_thread == NULL || !r->rhist || !r->whist) {
		fprintf(stderr, "klbench: out of memory\n");
		exit(2);
	}
	kb_hist_init(r->rhist);
	kb_hist_init(r->whist);
	err = engine_setup(e, c, &slot);
	if (err != 0) {
		fprintf(stderr, "klbench: %s: cannot set up the run: %s\n", c->ops->name,
			strerror(err));
		engine_free(e);
		if (own_e)
			free(e);
		free(before);
		kb_result_free(r);
		return -1;
	}
	r->slot = e->own_locks || e->own_data ? -1 : (int)(repeat % KB_SLOTS);
	r->lock_addr = (uintptr_t)e->locks;
	r->data_addr = (uintptr_t)e->data;
	run_phases(e, r, before);
	collect(e, r, before);
	verify(e, r);
	engine_free(e);
	if (own_e)
		free(e);
	free(before);
	return 0;
}

void kb_result_free(struct kb_result *r)
{
	free(r->rhist);
	free(r->whist);
	free(r->per_thread);
	r->rhist = r->whist = NULL;
	r->per_thread = NULL;
}

uint64_t kb_hist_p(const struct kb_result *r, double pct)
{
	struct kb_hist h;

	kb_hist_init(&h);
	kb_hist_merge(&h, r->rhist);
	kb_hist_merge(&h, r->whist);
	return kb_hist_percentile(&h, pct);
}

struct kb_result *kb_results_add(struct kb_results *rs)
{
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? 2 * rs->cap : 32;
		struct kb_result *v = realloc(rs->v, cap * sizeof(*v));

		if (v == NULL) {
			fprintf(stderr, "klbench: out of memory\n");
			exit(2);
		}
		rs->v = v;
		rs->cap = cap;
	}
	return &rs->v[rs->n++];
}

void kb_results_free(struct kb_results *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		kb_result_free(&rs->v[i]);
	free(rs->v);
	memset(rs, 0, sizeof(*rs));
}
