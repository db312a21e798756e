/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/kltest.h - what every cmocka test file shares: cmocka's includes, thread helpers,
 * a start barrier, deadlines, and scaled iteration counts.
 *
 * Scale: KLTEST_SCALE (env, default 1) multiplies iteration counts, so CI stages under
 * sanitizers/qemu/valgrind can run smaller (KLTEST_SCALE is read as a float: 0.1 works).
 */
#ifndef KLTEST_H
#define KLTEST_H

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>

#include <cmocka.h>

/* klock's build configuration, for the KLT_SKIP_IF_* macros. The preload suite's plain
 * pthread programs link no klock and say so (-DKLTEST_NO_KLOCK): they get 0s, never the
 * headers of a libklock-dev installed on the machine, which describe another build. */
#ifndef KLTEST_NO_KLOCK
#include <klock/config.h>
#endif
#ifndef KLOCK_TSAN
#define KLOCK_TSAN 0
#endif
#ifndef KLOCK_WITNESS
#define KLOCK_WITNESS 0
#endif

#define KLT_NSEC_PER_SEC 1000000000ll
/* Most threads any test starts at once: enough for one more than the CPUs of a 255-vCPU
 * guest (the crowded-queue tests). */
#define KLT_MAX_THREADS 512

static inline int64_t klt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * KLT_NSEC_PER_SEC + ts.tv_nsec;
}

/* Absolute CLOCK_MONOTONIC deadline @ms milliseconds from now. */
static inline struct timespec klt_deadline_ms(int64_t ms)
{
	int64_t t = klt_now_ns() + ms * 1000000ll;
	struct timespec ts = { .tv_sec = t / KLT_NSEC_PER_SEC, .tv_nsec = t % KLT_NSEC_PER_SEC };

	return ts;
}

static inline void klt_sleep_ms(int64_t ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* A header's inline-fast-path flag (KL_MUTEX_INLINE, ...) is 1 exactly in the builds that
 * compile those paths: C without instruments (klock/rmlock.h's conditions). */
#define KLT_ASSERT_INLINE_WHERE_EXPECTED(flag) assert_int_equal((flag), KLT_PLAIN_BUILD)
/* A build without instruments (expanded where the klock headers are included). */
#define KLT_PLAIN_BUILD                                                                  \
	(!KLOCK_DEBUG_LOCKS && !KLOCK_WITNESS && !KLOCK_TSAN && !KLOCK_VALGRIND_ANNOTATE &&  \
	 !KLOCK_LOCKSTAT_HOLD)

/* For tests that plant misuse every build detects (unlock by a non-owner, relock of a held
 * lock): ThreadSanitizer and witness report that misuse themselves - and abort in CI - so
 * those tests skip in such builds; tests/plant/sanitizer_plant.c and tests/unit/test_witness.c plant
 * the same cases for the instruments. */
#define KLT_SKIP_IF_MISUSE_INSTRUMENTED()                                              \
	do {                                                                             \
		if (KLOCK_TSAN || KLOCK_WITNESS)                                          \
			skip();                                                          \
	} while (0)

/* For tests that plant what only witness reports (a nested read without the recursion
 * flag, a thread exiting with a lock held): witness aborts on it in CI. */
#define KLT_SKIP_IF_WITNESS()                                                          \
	do {                                                                             \
		if (KLOCK_WITNESS)                                                        \
			skip();                                                          \
	} while (0)

/* Iteration count scaled by KLTEST_SCALE (never below 1). */
static inline long klt_scaled(long n)
{
	const char *s = getenv("KLTEST_SCALE");
	double f = s != NULL ? atof(s) : 1.0;
	long v = (long)((double)n * (f > 0 ? f : 1.0));

	return v > 0 ? v : 1;
}

/* Watchdog seconds: @base_s times KLTEST_WATCHDOG_SCALE (env, default 1; never below 1).
 * A runner that knows the machine is slow - scripts/vm-test's emulated vCPUs, tens of
 * times slower than the 2 real CPUs these bases were chosen on - raises it; the
 * tests' own sizes do not change with it (a deadlock still fails, only later). */
static inline unsigned klt_watchdog_s(unsigned base_s)
{
	const char *s = getenv("KLTEST_WATCHDOG_SCALE");
	double f = s != NULL ? atof(s) : 1.0;

	return f > 1.0 ? (unsigned)((double)base_s * f) : base_s;
}

#ifndef KLTEST_NO_KLOCK
#include <klock/fence.h>
/* The heavy fence the locks use (membarrier, or a seq_cst fence without it). */
#define klt_heavy_fence() kl_fence_heavy()
#else
/* Tests that do not link libklock (the interposer's, run under LD_PRELOAD) time the
 * system call the library's heavy fence makes: membarrier(PRIVATE_EXPEDITED), registered
 * here (registering twice is harmless); a kernel without it leaves the fence cheap. */
#include <linux/membarrier.h>
#include <sys/syscall.h>
static inline void klt_heavy_fence(void)
{
	static int registered;

	if (!registered)
		registered = syscall(SYS_membarrier,
				     MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : -1;
	if (registered > 0)
		syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
	else
		atomic_thread_fence(memory_order_seq_cst);
}
#endif

/* Heavy fences timed per measurement (fewer if they are slow: KLT_FENCE_PROBE_NS). */
#define KLT_FENCE_PROBES 16
/* The measurement stops after this long (at 64 emulated vCPUs one fence takes ~1 s). */
#define KLT_FENCE_PROBE_NS (200 * 1000000ll)

static _Atomic int klt_fence_sibling_stop;

static inline void *klt_fence_sibling(void *arg)
{
	while (!atomic_load_explicit(&klt_fence_sibling_stop, memory_order_relaxed))
		;
	return arg;
}

/* kl_fence_heavy()'s cost here in ns, measured once per process with a sibling thread
 * spinning on every other online CPU (membarrier interrupts each CPU running one of our
 * threads: the stress tests keep them all busy, a lone thread would measure only the
 * syscall). ~1-5 us on 2 real CPUs; 5 ms to over a second in a TCG guest with 16-64
 * vCPUs, where each interrupt waits for its target vCPU to be emulated. */
static inline double klt_fence_heavy_ns(void)
{
	static double cost;
	pthread_t sib[KLT_MAX_THREADS];
	long nsib = sysconf(_SC_NPROCESSORS_ONLN) - 1, started = 0;
	int64_t t0;
	long n = 0;

	if (cost > 0)
		return cost;
	if (nsib < 1)
		nsib = 1;
	if (nsib > KLT_MAX_THREADS)
		nsib = KLT_MAX_THREADS;
	atomic_store(&klt_fence_sibling_stop, 0);
	while (started < nsib && pthread_create(&sib[started], NULL, klt_fence_sibling, NULL) == 0)
		started++;
	t0 = klt_now_ns();
	do {
		klt_heavy_fence();
		n++;
	} while (n < KLT_FENCE_PROBES && klt_now_ns() - t0 < KLT_FENCE_PROBE_NS);
	cost = (double)(klt_now_ns() - t0) / (double)n;
	atomic_store(&klt_fence_sibling_stop, 1);
	while (started > 0)
		pthread_join(sib[--started], NULL);
	return cost > 0 ? cost : 1.0;
}

/* @n (an iteration count, already scaled) cut so that @fences_per_iter heavy fences per
 * iteration take at most @budget_s seconds at the measured cost; never below @min_n.
 * Tests with one writer-side membarrier per operation size themselves with it, so that
 * they stay inside their watchdog where a membarrier costs a second. */
static inline long klt_fence_budgeted(long n, double fences_per_iter, double budget_s, long min_n)
{
	double fit = budget_s * (double)KLT_NSEC_PER_SEC / (klt_fence_heavy_ns() * fences_per_iter);

	if (fit < (double)n)
		n = (long)fit;
	return n > min_n ? n : min_n;
}

/* False where a forked child of a threaded process cannot start threads of its own: the
 * cross builds' runner, qemu-user, aborts there (KLTEST_NO_FORK_THREADS=1, set by meson),
 * and so does ThreadSanitizer ("starting new threads after multi-threaded fork is not
 * supported"). */
static inline bool klt_fork_threads_ok(void)
{
	const char *v = getenv("KLTEST_NO_FORK_THREADS");

	return !KLOCK_TSAN && (v == NULL || strcmp(v, "1") != 0);
}

/* Whether wall-clock time here is what native code sees: a test that checks what a lock
 * does within a span of microseconds (ride out a stall, rather than sleep) skips where
 * it is not - under ThreadSanitizer, valgrind (one thread at a time) and emulation (the
 * qemu stages run with KLTEST_SCALE below 1). */
static inline bool klt_timing_faithful(void)
{
	const char *pre = getenv("LD_PRELOAD"), *scale = getenv("KLTEST_SCALE");

	return !KLOCK_TSAN && (pre == NULL || strstr(pre, "vgpreload") == NULL) &&
	       (scale == NULL || atof(scale) >= 1.0);
}

/* Pins the calling thread to the first of the CPUs it may run on and makes @attr start
 * threads on the second, for a test of two threads on two CPUs; *@mine keeps the
 * caller's whole set for klt_unpin(). False (the test then skips) with fewer than two. */
static inline bool klt_pin_pair(cpu_set_t *mine, pthread_attr_t *attr)
{
	int cpu[2], n = 0;
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(*mine), mine) != 0)
		return false;
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, mine))
			cpu[n++] = c;
	if (n < 2)
		return false;
	CPU_ZERO(&set);
	CPU_SET(cpu[0], &set);
	assert_int_equal(sched_setaffinity(0, sizeof(set), &set), 0);
	CPU_ZERO(&set);
	CPU_SET(cpu[1], &set);
	assert_int_equal(pthread_attr_init(attr), 0);
	assert_int_equal(pthread_attr_setaffinity_np(attr, sizeof(set), &set), 0);
	return true;
}

/* Undoes klt_pin_pair(). */
static inline void klt_unpin(const cpu_set_t *mine, pthread_attr_t *attr)
{
	pthread_attr_destroy(attr);
	assert_int_equal(sched_setaffinity(0, sizeof(*mine), mine), 0);
}

/*
 * The two-thread duel, for a lock's fairness between a holder that relocks at once and a
 * spinner: two threads pinned to two CPUs each run KLT_DUEL_OPS one-word sections through
 * @lock/@unlock of @lk; returns the mean streak, the sections one thread ran in a row
 * before the other got the lock. A spinner that takes every free gap it catches swaps the
 * threads every few sections; one that leaves a relocking holder its streak until its
 * turn, every few hundred.
 */
#define KLT_DUEL_OPS 200000u

struct klt_duel {
	void (*lock)(void *), (*unlock)(void *);
	void *lk;
	_Atomic int go;
	int last;               /* the thread that ran the last section (in the section) */
	unsigned long switches; /* sections run by the other thread than the one before */
};

struct klt_duelist {
	struct klt_duel *d;
	int id;
};

static inline void *klt_duel_thread(void *arg)
{
	struct klt_duelist *me = arg;
	struct klt_duel *d = me->d;

	atomic_fetch_add(&d->go, 1);
	while (atomic_load(&d->go) < 2)
		sched_yield();
	for (unsigned i = 0; i < KLT_DUEL_OPS; i++) {
		d->lock(d->lk);
		if (d->last != me->id) {
			d->switches++;
			d->last = me->id;
		}
		d->unlock(d->lk);
	}
	return NULL;
}

/* Runs the duel on the CPUs of klt_pin_pair(); the mean streak (sections per switch). */
static inline double klt_duel_streak(void (*lock)(void *), void (*unlock)(void *), void *lk,
				     const pthread_attr_t *attr)
{
	struct klt_duel d = { lock, unlock, lk, 0, -1, 0 };
	struct klt_duelist a = { &d, 0 }, b = { &d, 1 };
	pthread_t t;

	assert_int_equal(pthread_create(&t, attr, klt_duel_thread, &b), 0);
	klt_duel_thread(&a);
	pthread_join(t, NULL);
	return 2.0 * KLT_DUEL_OPS / (double)d.switches;
}

/* The best mean streak of three duels must reach @min (a thread preempted mid-run only
 * lengthens the streaks). A turn comes after a time, so a streak counted in sections
 * needs sections as short as a @plain build's (KLT_PLAIN_BUILD): skips in instrumented
 * builds (a witness or debug check per lock makes each section ten times longer), where
 * timing is not faithful, or with fewer than two CPUs. */
static inline void klt_assert_duel_streak(void (*lock)(void *), void (*unlock)(void *),
					  void *lk, double min, bool plain)
{
	double best = 0, streak;
	pthread_attr_t attr;
	cpu_set_t mine;

	if (!plain || !klt_timing_faithful() || !klt_pin_pair(&mine, &attr))
		skip();
	for (int r = 0; r < 3; r++) {
		streak = klt_duel_streak(lock, unlock, lk, &attr);
		best = streak > best ? streak : best;
	}
	klt_unpin(&mine, &attr);
	print_message("mean streak, best of 3: %.1f sections\n", best);
	assert_true(best >= min);
}

/* Whether a test may exhaust the address space with RLIMIT_AS (in a forked child that
 * starts threads): not under ASan/TSan (their shadow memory needs the address space) or
 * valgrind (its own allocations count against the limit), nor where a forked child of a
 * threaded process cannot start threads (klt_fork_threads_ok()). */
static inline bool klt_rlimit_as_ok(void)
{
	const char *pre = getenv("LD_PRELOAD");
	bool asan = false;

#if defined(__SANITIZE_ADDRESS__)
	asan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
	asan = true;
#endif
#endif
	return !asan && klt_fork_threads_ok() && (pre == NULL || strstr(pre, "vgpreload") == NULL);
}

/* Lowers RLIMIT_AS to the address space in use now (plus @slack_bytes): from here on a
 * new mapping of more than the slack fails. False if it could not be read or set. */
static inline bool klt_limit_address_space(unsigned long slack_bytes)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long pages = 0;
	struct rlimit r;
	int got;

	if (f == NULL)
		return false;
	got = fscanf(f, "%lu", &pages);
	fclose(f);
	if (got != 1)
		return false;
	r.rlim_cur = r.rlim_max = pages * (unsigned long)sysconf(_SC_PAGESIZE) + slack_bytes;
	return setrlimit(RLIMIT_AS, &r) == 0;
}

/* A reusable start line: every thread waits until all have arrived. */
struct klt_barrier {
	pthread_mutex_t m;
	pthread_cond_t c;
	int count, arrived, generation;
};

static inline void klt_barrier_init(struct klt_barrier *b, int count)
{
	pthread_mutex_init(&b->m, NULL);
	pthread_cond_init(&b->c, NULL);
	b->count = count;
	b->arrived = 0;
	b->generation = 0;
}

static inline void klt_barrier_wait(struct klt_barrier *b)
{
	pthread_mutex_lock(&b->m);
	int gen = b->generation;

	if (++b->arrived == b->count) {
		b->arrived = 0;
		b->generation++;
		pthread_cond_broadcast(&b->c);
	} else {
		while (gen == b->generation)
			pthread_cond_wait(&b->c, &b->m);
	}
	pthread_mutex_unlock(&b->m);
}

/* The CK-style critical section: bump *@counter @bumps times, one compiler-ordered
 * increment at a time, and count a violation if another thread changed it meanwhile
 * (only possible if the lock let two threads in). */
static inline void klt_guarded_bump(long *counter, int bumps, _Atomic long *violations)
{
	long v = *counter;

	for (int i = 0; i < bumps; i++) {
		atomic_signal_fence(memory_order_seq_cst); /* compiler barrier: one store each */
		(*counter)++;
	}
	if (*counter != v + bumps)
		atomic_fetch_add(violations, 1);
}

/* For a state that lasts a bounded time (a passive wait with a timeout, say): runs
 * @attempt(@arg) up to @tries times, true as soon as one saw the state. One miss can be a
 * scheduling accident on a loaded machine; a miss in every try is a failure. */
static inline bool klt_seen_in_tries(int tries, bool (*attempt)(uint32_t), uint32_t arg)
{
	for (int i = 0; i < tries; i++)
		if (attempt(arg))
			return true;
	return false;
}

/* Start @n threads running fn(arg_i) where arg_i = (char *)args + i * stride; join them. */
static inline void klt_run_threads(int n, void *(*fn)(void *), void *args, size_t stride)
{
	pthread_t t[KLT_MAX_THREADS];

	assert_true(n <= KLT_MAX_THREADS);
	for (int i = 0; i < n; i++)
		assert_int_equal(pthread_create(&t[i], NULL, fn, (char *)args + (size_t)i * stride), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
}

#endif /* KLTEST_H */
