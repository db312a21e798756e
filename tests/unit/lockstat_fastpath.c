/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/lockstat_fastpath.c - what lockstat costs a lock's uncontended fast path, for the
 * callgrind proof (tests/lockstat_callgrind.sh) and the "enabled <= 1.3x disabled" floor.
 *
 *   lockstat-fastpath list                     adapters it can drive
 *   lockstat-fastpath ADAPTER[:VARIANT] N cg on|off
 *       warm up, then N lock+unlock pairs inside fastpath_loop() (callgrind counts only
 *       that function: --toggle-collect=fastpath_loop), lockstat recording (on) or not
 *   lockstat-fastpath ADAPTER[:VARIANT] N time
 *       median ns per pair over ROUNDS interleaved runs, lockstat off vs on, and the ratio
 *   lockstat-fastpath - N record
 *       ns per slow-path episode bracket (kli_wait_begin/spin/end), off vs on recording
 *
 * VARIANT: read (the shared side), try, timed (the try / timed entry points, uncontended:
 * they always succeed), read-try, read-timed; none: the write side's plain lock.
 *
 * Adapters: the klock locks registered in bench/lockops (linked against the static
 * library here) and "seamlock", the test-only lock of tests/seamlock.h that calls the
 * seam exactly as the real locks do. A second, idle thread runs throughout (glibc and
 * klock both have single-thread shortcuts that would flatter the numbers).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <klock/lockstat.h>
#include "lockops.h"
#include "seamlock.h"

/* Interleaved off/on runs in `time` mode (median taken). */
#define ROUNDS 7
/* Pairs run before measuring (first-use allocations, cache warm-up). */
#define WARMUP 1000

/* ---- the test-only seamlock as an adapter ---------------------------------------------- */

static int seam_init(void *l)
{
	*(struct seamlock *)l = (struct seamlock)SEAMLOCK_INIT;
	return 0;
}

static void seam_destroy(void *l)
{
	(void)l;
}

static void seam_lock(void *l, void *ts)
{
	(void)ts;
	seamlock_lock(l);
}

static void seam_unlock(void *l, void *ts)
{
	(void)ts;
	seamlock_unlock(l);
}

static const struct lockops seamlock_ops = {
	.name = "seamlock",
	.family = "test",
	.summary = "test-only futex mutex calling the hook seam like klock's locks",
	.size = sizeof(struct seamlock),
	.init = seam_init,
	.destroy = seam_destroy,
	.write_lock = seam_lock,
	.write_unlock = seam_unlock,
};
LOCKOPS_REGISTER(seamlock_ops)

/* ---- driving a lock ---------------------------------------------------------------------- */

struct target {
	const struct lockops *ops;
	void *lock, *ts;
	void (*lock_fn)(void *lock, void *ts);
	void (*unlock_fn)(void *lock, void *ts);
};

/* The measured loop: callgrind's --toggle-collect names it. */
__attribute__((noinline)) void fastpath_loop(const struct target *t, long n);
__attribute__((noinline)) void fastpath_loop(const struct target *t, long n)
{
	for (long i = 0; i < n; i++) {
		t->lock_fn(t->lock, t->ts);
		t->unlock_fn(t->lock, t->ts);
	}
}

/* The same, outside the collected function (the compiler barrier keeps its body
 * different, so identical-code folding cannot merge the two loops into one symbol). */
static __attribute__((noinline)) void warm_loop(const struct target *t, long n)
{
	for (long i = 0; i < n; i++) {
		t->lock_fn(t->lock, t->ts);
		kli_barrier();
		t->unlock_fn(t->lock, t->ts);
	}
}

/* The try and timed variants as lock functions (the side and the entry point are the
 * open target's; a try that fails, or a timed lock that does not return 0, is an error:
 * the loop measures uncontended acquisitions only). */
static const struct lockops *cur_ops;
static struct timespec far_deadline;
static bool variant_failed;

static void write_try(void *l, void *ts)
{
	variant_failed |= !cur_ops->write_trylock(l, ts);
}

static void read_try(void *l, void *ts)
{
	variant_failed |= !cur_ops->read_trylock(l, ts);
}

static void write_timed(void *l, void *ts)
{
	variant_failed |= cur_ops->write_timedlock(l, ts, &far_deadline) != 0;
}

static void read_timed(void *l, void *ts)
{
	variant_failed |= cur_ops->read_timedlock(l, ts, &far_deadline) != 0;
}

/* ADAPTER[:read|:try|:timed|:read-try|:read-timed]: which side and which entry point. */
static int target_variant(struct target *t, const char *v)
{
	const struct lockops *o = t->ops;
	bool read = strncmp(v, "read", 4) == 0;
	const char *how = read ? v + 4 : v;

	if (*how == '-')
		how++;
	if (read && o->read_lock == NULL)
		return -1;
	t->unlock_fn = read ? o->read_unlock : o->write_unlock;
	if (*how == '\0')
		t->lock_fn = read ? o->read_lock : o->write_lock;
	else if (strcmp(how, "try") == 0 && (read ? o->read_trylock : o->write_trylock) != NULL)
		t->lock_fn = read ? read_try : write_try;
	else if (strcmp(how, "timed") == 0 &&
		 (read ? o->read_timedlock : o->write_timedlock) != NULL)
		t->lock_fn = read ? read_timed : write_timed;
	else
		return -1;
	return 0;
}

static int target_open(struct target *t, const char *spec)
{
	char name[64];
	const char *colon = strchr(spec, ':');

	snprintf(name, sizeof(name), "%.*s", colon != NULL ? (int)(colon - spec) : 63, spec);
	t->ops = lockops_find(name);
	if (t->ops == NULL || target_variant(t, colon != NULL ? colon + 1 : "") != 0) {
		fprintf(stderr, "lockstat-fastpath: no adapter '%s' (see `list`)\n", spec);
		return -1;
	}
	cur_ops = t->ops;
	clock_gettime(CLOCK_MONOTONIC, &far_deadline);
	far_deadline.tv_sec += 3600;
	t->lock = aligned_alloc(LOCKOPS_ALIGN, (t->ops->size + LOCKOPS_ALIGN - 1) /
						       LOCKOPS_ALIGN * LOCKOPS_ALIGN);
	t->ts = t->ops->tsize != 0 ? calloc(1, t->ops->tsize) : NULL;
	if (t->lock == NULL || t->ops->init(t->lock) != 0)
		return -1;
	if (t->ops->thread_enter != NULL)
		t->ops->thread_enter(t->lock);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double timed_ns(const struct target *t, long n, bool on)
{
	double t0;

	if (on)
		kl_lockstat_start();
	else
		kl_lockstat_stop();
	t0 = now_s();
	fastpath_loop(t, n);
	return (now_s() - t0) * 1e9 / (double)n;
}

static int mode_time(const struct target *t, long n)
{
	double off[ROUNDS], on[ROUNDS];

	for (int r = 0; r < ROUNDS; r++) {
		/* Alternate the order so drift on a shared machine hits both sides. */
		if (r & 1) {
			on[r] = timed_ns(t, n, true);
			off[r] = timed_ns(t, n, false);
		} else {
			off[r] = timed_ns(t, n, false);
			on[r] = timed_ns(t, n, true);
		}
	}
	qsort(off, ROUNDS, sizeof(double), cmp_double);
	qsort(on, ROUNDS, sizeof(double), cmp_double);
	printf("%s: uncontended lock+unlock, median of %d: lockstat off %.2f ns, on %.2f ns, "
	       "ratio %.3f\n", t->ops->name, ROUNDS, off[ROUNDS / 2], on[ROUNDS / 2],
	       on[ROUNDS / 2] / off[ROUNDS / 2]);
	return 0;
}

/* ---- the cost of one recorded episode ------------------------------------------------------ */

static __attribute__((noinline)) void episodes(const void *lock, long n)
{
	for (long i = 0; i < n; i++) {
		struct kli_wait w;

		kli_wait_begin(&w, lock, KLI_KIND_MUTEX, 0, __builtin_return_address(0));
		kli_wait_spin(&w);
		kli_wait_end(&w, lock, KLI_KIND_MUTEX, 0, __builtin_return_address(0));
	}
}

static int mode_record(long n)
{
	static char lock;
	double off[ROUNDS], on[ROUNDS], t0;

	for (int r = 0; r < ROUNDS; r++) {
		kl_lockstat_stop();
		t0 = now_s();
		episodes(&lock, n);
		off[r] = (now_s() - t0) * 1e9 / (double)n;
		kl_lockstat_start();
		t0 = now_s();
		episodes(&lock, n);
		on[r] = (now_s() - t0) * 1e9 / (double)n;
	}
	kl_lockstat_stop();
	qsort(off, ROUNDS, sizeof(double), cmp_double);
	qsort(on, ROUNDS, sizeof(double), cmp_double);
	printf("slow-path episode bracket (begin/spin/end), median of %d: lockstat off %.2f ns, "
	       "recording %.2f ns\n", ROUNDS, off[ROUNDS / 2], on[ROUNDS / 2]);
	return 0;
}

/* ---- main -------------------------------------------------------------------------------- */

static pthread_mutex_t idle_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_c = PTHREAD_COND_INITIALIZER;

static void *idle_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&idle_m);
	for (;;)
		pthread_cond_wait(&idle_c, &idle_m);
	return NULL;
}

static int usage(void)
{
	fputs("usage: lockstat-fastpath list | ADAPTER[:VARIANT] N cg on|off | "
	      "ADAPTER[:VARIANT] N time | - N record\n"
	      "  VARIANT: read, try, timed, read-try, read-timed\n", stderr);
	return 2;
}

int main(int argc, char **argv)
{
	struct target t;
	pthread_t idle;
	long n;

	if (argc == 2 && strcmp(argv[1], "list") == 0) {
		for (size_t i = 0; i < lockops_count(); i++)
			if (strcmp(lockops_at(i)->family, "klock") == 0 ||
			    strcmp(lockops_at(i)->family, "test") == 0)
				printf("%s\n", lockops_at(i)->name);
		return 0;
	}
	if (argc < 4 || (n = atol(argv[2])) <= 0)
		return usage();
	pthread_create(&idle, NULL, idle_thread, NULL);
	if (strcmp(argv[3], "record") == 0)
		return mode_record(n);
	if (target_open(&t, argv[1]) != 0)
		return 1;
	warm_loop(&t, WARMUP);
	if (strcmp(argv[3], "time") == 0)
		return mode_time(&t, n);
	if (strcmp(argv[3], "cg") != 0 || argc != 5)
		return usage();
	if (strcmp(argv[4], "on") == 0 && kl_lockstat_start() != 0)
		fputs("lockstat-fastpath: lockstat cannot start in this build\n", stderr);
	fastpath_loop(&t, n);
	kl_lockstat_stop();
	if (variant_failed) {
		fputs("lockstat-fastpath: an uncontended try/timed acquisition failed\n", stderr);
		return 1;
	}
	return 0;
}
