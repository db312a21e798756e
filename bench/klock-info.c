/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/klock-info.c - what klock found on this machine, and what its substrate costs here:
 * the topology, the CPU-index source, what is sized from the CPU count, the fence mode,
 * and the price of the operations every lock's slow path is built from (heavy fence, wake
 * with nobody waiting, wait on a changed value, a wait/wake ping-pong between two threads),
 * then how often a running thread loses its CPU for a moment (an interrupt, the host, the
 * scheduler) and for how long: what a spinner's budget must ride out (kl_mutex's
 * MTX_STALL_NS), and whether the two threads' stalls come together (a timer tick) or not.
 *
 *   klock-info            two tables, about two seconds
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <klock/klock.h>

#define NSEC_PER_SEC 1000000000.0
/* Iterations per measured operation (at most: see OP_BUDGET_S). */
#define OPS 20000
#define PINGPONGS 20000
/* Seconds one heavy-fence measurement may take: in an emulated many-vCPU guest one
 * membarrier costs up to a second, and 20000 of them would take hours. */
#define OP_BUDGET_S 0.5

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / NSEC_PER_SEC;
}

static _Atomic int sibling_stop;

static void *spin_sibling(void *arg)
{
	while (!atomic_load_explicit(&sibling_stop, memory_order_relaxed))
		;
	return arg;
}

static double ns_per(double t0, long n)
{
	return (now_s() - t0) * NSEC_PER_SEC / (double)n;
}

static double heavy_fence_ns(void)
{
	double t0 = now_s();
	long n = 0;

	do
		kl_fence_heavy();
	while (++n < OPS && now_s() - t0 < OP_BUDGET_S);
	return ns_per(t0, n);
}

static _Atomic uint32_t ping;

static void *pong(void *arg)
{
	for (uint32_t i = 1; i <= PINGPONGS; i++) {
		while (atomic_load(&ping) != 2 * i - 1)
			kl_wait(&ping, 2 * i - 2, NULL);
		atomic_store(&ping, 2 * i);
		kl_wake(&ping, 1);
	}
	return arg;
}

static double pingpong_ns(void)
{
	pthread_t t;
	double t0 = now_s();

	pthread_create(&t, NULL, pong, NULL);
	for (uint32_t i = 1; i <= PINGPONGS; i++) {
		atomic_store(&ping, 2 * i - 1);
		kl_wake(&ping, 1);
		while (atomic_load(&ping) != 2 * i)
			kl_wait(&ping, 2 * i - 1, NULL);
	}
	pthread_join(t, NULL);
	return ns_per(t0, PINGPONGS);
}

/* CPU stalls: two threads read the clock in a loop; a gap between two reads longer than
 * STALL_MIN_NS is time the thread did not run. */
#define STALL_THREADS 2
#define STALL_WINDOW_NS 1e9     /* how long each thread watches */
#define STALL_MIN_NS 2000.0     /* a clock read takes 20-50 ns: a longer gap is a stall */
#define STALL_MAX 65536         /* gaps recorded per thread (more are not counted) */
#define STALL_BINS 7
/* Upper bounds of the first six bins, us (the last bin is everything longer). */
static const double stall_bound_us[STALL_BINS - 1] = { 5, 10, 20, 50, 100, 1000 };
static const char *const stall_bin_name[STALL_BINS] = {
	"2-5 us", "5-10 us", "10-20 us", "20-50 us", "50-100 us", "100 us-1 ms", "over 1 ms",
};

struct stalls {
	double start[STALL_MAX], end[STALL_MAX]; /* ns, in order */
	unsigned n;
	double until;
};

static struct stalls stall_rec[STALL_THREADS];

static double now_ns(void)
{
	return now_s() * NSEC_PER_SEC;
}

static void *stall_watch(void *arg)
{
	struct stalls *s = arg;
	double prev = now_ns(), now;

	while ((now = now_ns()) < s->until) {
		if (now - prev > STALL_MIN_NS && s->n < STALL_MAX) {
			s->start[s->n] = prev;
			s->end[s->n++] = now;
		}
		prev = now;
	}
	return NULL;
}

static unsigned stall_bin(double ns)
{
	unsigned b = 0;

	while (b < STALL_BINS - 1 && ns >= stall_bound_us[b] * 1000)
		b++;
	return b;
}

/* Counts each thread's gaps by length, and those that overlap a gap of the other thread
 * (both sorted by start, neither overlapping itself: one pass each). */
static void stall_count(unsigned total[STALL_BINS], unsigned shared[STALL_BINS])
{
	for (unsigned t = 0; t < STALL_THREADS; t++) {
		const struct stalls *a = &stall_rec[t], *o = &stall_rec[1 - t];
		unsigned j = 0;

		for (unsigned i = 0; i < a->n; i++) {
			unsigned b = stall_bin(a->end[i] - a->start[i]);

			while (j < o->n && o->end[j] <= a->start[i])
				j++;
			total[b]++;
			shared[b] += j < o->n && o->start[j] < a->end[i];
		}
	}
}

static void print_stalls(void)
{
	unsigned total[STALL_BINS] = { 0 }, shared[STALL_BINS] = { 0 };
	pthread_t t[STALL_THREADS];
	double until = now_ns() + STALL_WINDOW_NS;

	for (unsigned i = 0; i < STALL_THREADS; i++) {
		stall_rec[i].until = until;
		pthread_create(&t[i], NULL, stall_watch, &stall_rec[i]);
	}
	for (unsigned i = 0; i < STALL_THREADS; i++)
		pthread_join(t[i], NULL);
	stall_count(total, shared);
	printf("\n%-30s %14s %22s\n", "a running thread loses its CPU", "times/s/thread",
	       "% while the other did");
	for (unsigned b = 0; b < STALL_BINS; b++)
		printf("%-30s %14.1f %21.0f%%\n", stall_bin_name[b],
		       total[b] / (double)STALL_THREADS / (STALL_WINDOW_NS / NSEC_PER_SEC),
		       total[b] ? 100.0 * shared[b] / total[b] : 0.0);
}

/* What klock sizes from the CPU count (checked against the OS by tests/unit/test_scale.c). */
static void print_sizes(const struct kl_topology *t)
{
	struct kl_hashlock h;

	if (kl_hashlock_init(&h, 0) == 0) {
		printf("sized from the CPUs: hashlock auto size %u stripes (%u online CPUs), "
		       "per-CPU arrays %u slots (possible CPUs), FIFO crowding threshold %u\n",
		       kl_hashlock_nstripes(&h), t->online_cpus, t->possible_cpus,
		       t->allowed_cpus > 2 ? t->allowed_cpus : 2);
		kl_hashlock_destroy(&h);
	}
}

int main(void)
{
	const struct kl_topology *t = kl_topology();
	_Atomic uint32_t word = 0;
	pthread_t sib;
	double t0, fence_alone, fence_busy;

	printf("klock %s  arch=%s  wait=%s\n", kl_version(), KLOCK_ARCH, kl_wait_backend());
	printf("topology (%s): %u possible / %u online / %u allowed CPUs, %u cores, "
	       "%u packages, %u NUMA nodes, %u-byte lines\n", t->source, t->possible_cpus,
	       t->online_cpus, t->allowed_cpus, t->cores, t->packages, t->numa_nodes,
	       t->cache_line);
	printf("cpu index: %s (this thread on CPU %u, slot %u)\n", kl_cpu_source(),
	       kl_cpu_current(), kl_cpu_slot());
	print_sizes(t);
	printf("fence pair: %s\n\n", kl_fence_asymmetric()
	       ? "asymmetric (compiler barrier / membarrier PRIVATE_EXPEDITED)"
	       : "symmetric fallback (full fence on both sides)");

	fence_alone = heavy_fence_ns();
	pthread_create(&sib, NULL, spin_sibling, NULL);
	fence_busy = heavy_fence_ns();
	atomic_store(&sibling_stop, 1);
	pthread_join(sib, NULL);

	printf("%-44s %10s\n", "operation", "ns/op");
	printf("%-44s %10.1f\n", "heavy fence, no other thread running", fence_alone);
	printf("%-44s %10.1f\n", "heavy fence, one sibling thread spinning", fence_busy);
	t0 = now_s();
	for (long i = 0; i < OPS; i++)
		kl_fence_light();
	printf("%-44s %10.1f\n", "light fence", ns_per(t0, OPS));
	t0 = now_s();
	for (long i = 0; i < OPS; i++)
		kl_wake(&word, 1);
	printf("%-44s %10.1f\n", "kl_wake, nobody waiting", ns_per(t0, OPS));
	t0 = now_s();
	for (long i = 0; i < OPS; i++)
		kl_wait(&word, 1, NULL);
	printf("%-44s %10.1f\n", "kl_wait, value already changed", ns_per(t0, OPS));
	printf("%-44s %10.1f\n", "wait/wake ping-pong, one way", pingpong_ns() / 2);
	print_stalls();
	return 0;
}
