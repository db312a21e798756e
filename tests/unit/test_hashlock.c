/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/test_hashlock.c - kl_hashlock and kl_lockobj: the stripe mapping is stable and
 * spreads keys (chi-square), mutual exclusion per key, lock2/lockn never deadlock under
 * random keys from many threads and take a shared stripe once, trylock, EINVAL/EBUSY,
 * misuse reports that name the stripe and its table, lockstat rows folded into one
 * "hashlock" row per table and caller, and lock object lifetimes. Every threaded test
 * runs with both stripe kinds (kl_mutex, kl_ticket).
 *
 * Built with -rdynamic (tests/meson.build), so dladdr names this file's functions.
 */
#include <math.h>

#include "kltest.h"
#include <klock/hashlock.h>
#include <klock/lockstat.h>
#include <klock/names.h>
#include <klock/ticket.h>
#include <klock/topology.h>
#include "hooks.h"

/* Threads of the contention tests (more than the 2 CPUs of CI: preemption inside). */
#define NTHREADS 4
/* Objects the threads lock by address: more than the small table's stripes. */
#define NOBJ 64
/* A small table, so that keys collide on stripes all the time. */
#define SMALL_STRIPES 4u
/* Counter bumps per critical section (CK's regression style: a lost update shows). */
#define BUMPS 4
/* lockn sets: up to this many keys (with duplicates). */
#define SET_MAX 6
/* Seconds without any section completing before a contention test is declared
 * deadlocked (progress restarts the clock; KLTEST_WATCHDOG_SCALE multiplies it). */
#define DEADLOCK_SECS 60
/* Chi-square: significance level 0.001, one-sided; z of the standard normal at 0.999. */
#define CHI_Z_0999 3.090
/* Keys per stripe in the spread test. */
#define SPREAD_KEYS_PER_STRIPE 32
/* Bits of an address a random key may use (a 47-bit user address space). */
#define ADDR_BITS 47
/* Output multiplier of xorshift64* (Vigna). */
#define XS_MUL 2685821657736338717ull

/* An object under the table's protection: the CK-style checked counter. */
struct obj {
	_Atomic int owner;       /* thread index + 1 inside its section, else 0 */
	_Atomic long count;      /* bumped BUMPS times per section (non-atomically: relaxed RMW) */
	char pad[64 - sizeof(int) - sizeof(long)];
} KL_ALIGNED(64);

static struct obj objs[NOBJ];
static const unsigned kinds[] = { 0, KL_HASHLOCK_TICKET };

static uint64_t rnd(uint64_t *s)   /* xorshift64* */
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * XS_MUL;
}

/* Enter/leave one object's section: no other thread may be inside (the exclusion check). */
static bool obj_enter(struct obj *o, int me, long *entered)
{
	int prev = atomic_exchange_explicit(&o->owner, me, memory_order_relaxed);

	(*entered)++;

	for (int i = 0; i < BUMPS; i++)   /* load + store, not an atomic add: races lose */
		atomic_store_explicit(&o->count,
				      atomic_load_explicit(&o->count, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	return prev == 0;
}

static bool obj_leave(struct obj *o, int me)
{
	return atomic_exchange_explicit(&o->owner, 0, memory_order_relaxed) == me;
}

static long objs_total(void)
{
	long t = 0;

	for (int i = 0; i < NOBJ; i++)
		t += atomic_load(&objs[i].count);
	return t;
}

static void objs_reset(void)
{
	memset(objs, 0, sizeof(objs));
}

/* Two distinct objects of @h that share a stripe (a small table always has some). */
static void same_stripe_pair(struct kl_hashlock *h, struct obj **a, struct obj **b)
{
	*a = *b = NULL; /* fail_msg() does not return, but -O3 cannot tell */
	for (int i = 0; i < NOBJ; i++) {
		for (int j = i + 1; j < NOBJ; j++) {
			if (kl_hashlock_index(h, &objs[i]) == kl_hashlock_index(h, &objs[j])) {
				*a = &objs[i];
				*b = &objs[j];
				return;
			}
		}
	}
	fail_msg("no two of %d objects share one of %u stripes", NOBJ, kl_hashlock_nstripes(h));
}

/* ---- the mapping ------------------------------------------------------------------------ */

static void test_hashlock_index_is_stable_and_in_range(void **state)
{
	struct kl_hashlock h, one;
	char *base = (char *)objs;

	(void)state;
	assert_int_equal(kl_hashlock_init(&h, 256), 0);
	assert_int_equal(kl_hashlock_nstripes(&h), 256);
	for (int i = 0; i < 10000; i++) {
		const void *k = base + (size_t)i * 24;
		const void *block = (const void *)((uintptr_t)k & ~(uintptr_t)63);
		unsigned x = kl_hashlock_index(&h, k);

		assert_true(x < 256);
		assert_int_equal(kl_hashlock_index(&h, k), x);
		assert_int_equal(kl_hashlock_index(&h, block), x);   /* keys of one line share */
	}
	assert_int_equal(kl_hashlock_init(&one, 1), 0);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(kl_hashlock_index(&one, base + i * 64), 0);
	assert_int_equal(kl_hashlock_destroy(&one), 0);
	assert_int_equal(kl_hashlock_destroy(&h), 0);
}

/* Upper critical value of chi-square with @df degrees of freedom at significance 0.001
 * (Wilson-Hilferty: within 1% of the exact quantile for df >= 3). */
static double chi2_crit(unsigned df)
{
	double k = 2.0 / (9.0 * df), c = 1.0 - k + CHI_Z_0999 * sqrt(k);

	return df * c * c * c;
}

/* Chi-square statistic of the stripe counts of @n keys from gen(i). */
static double spread_chi2(struct kl_hashlock *h, size_t n, uintptr_t (*gen)(size_t, uint64_t *),
			  uint64_t *seed)
{
	unsigned s = kl_hashlock_nstripes(h);
	size_t *count = calloc(s, sizeof(*count));
	double e = (double)n / s, chi = 0;

	assert_non_null(count);
	for (size_t i = 0; i < n; i++)
		count[kl_hashlock_index(h, (const void *)gen(i, seed))]++;
	for (unsigned i = 0; i < s; i++)
		chi += ((double)count[i] - e) * ((double)count[i] - e) / e;
	free(count);
	return chi;
}

/* Key patterns: arrays of objects of several sizes (one key per cache line at least),
 * page-aligned objects, huge-page strides, and random addresses. */
static uintptr_t key_base(void)
{
	return (uintptr_t)0x7f3a12345000ull;
}

static uintptr_t stride_key(size_t i, uint64_t *seed)
{
	return key_base() + i * (uintptr_t)*seed;   /* the "seed" is the stride here */
}

static uintptr_t random_key(size_t i, uint64_t *seed)
{
	(void)i;
	return (uintptr_t)(rnd(seed) >> (64 - ADDR_BITS));
}

static void test_hashlock_spreads_keys_chi_square(void **state)
{
	static const uint64_t strides[] = { 64, 112, 128, 192, 320, 4096, 65536, 1u << 21 };
	static const unsigned sizes[] = { 8, 64, 1024 };

	(void)state;
	for (size_t z = 0; z < KL_ARRAY_SIZE(sizes); z++) {
		struct kl_hashlock h;
		size_t n = (size_t)SPREAD_KEYS_PER_STRIPE * sizes[z];
		double crit = chi2_crit(sizes[z] - 1), chi;
		uint64_t seed;

		assert_int_equal(kl_hashlock_init(&h, sizes[z]), 0);
		for (size_t k = 0; k < KL_ARRAY_SIZE(strides); k++) {
			seed = strides[k];
			chi = spread_chi2(&h, n, stride_key, &seed);
			if (chi >= crit)
				fail_msg("%zu keys %llu bytes apart over %u stripes: chi2 %.1f >= "
					 "%.1f (p < 0.001)", n, (unsigned long long)strides[k],
					 sizes[z], chi, crit);
		}
		seed = 0x9e3779b97f4a7c15ull;   /* fixed: the test is deterministic */
		chi = spread_chi2(&h, n, random_key, &seed);
		if (chi >= crit)
			fail_msg("%zu random keys over %u stripes: chi2 %.1f >= %.1f (p < 0.001)",
				 n, sizes[z], chi, crit);
		assert_int_equal(kl_hashlock_destroy(&h), 0);
	}
}

/* ---- init and destroy ------------------------------------------------------------------- */

static void test_hashlock_init_rejects_bad_sizes_and_flags(void **state)
{
	static const unsigned bad[] = { 3, 6, 12, 100, 1000, KL_HASHLOCK_MAX_STRIPES * 2u,
					KL_HASHLOCK_MAX_STRIPES + 1u, 0x80000001u };
	struct kl_hashlock h;
	unsigned cpus = kl_topology()->online_cpus, n;

	(void)state;
	for (size_t i = 0; i < KL_ARRAY_SIZE(bad); i++)
		assert_int_equal(kl_hashlock_init(&h, bad[i]), EINVAL);
	assert_int_equal(kl_hashlock_init_flags(&h, 8, 0x2), EINVAL);
	assert_int_equal(kl_hashlock_init_flags(&h, 8, ~0u), EINVAL);
	/* 0: the largest power of two <= 8 stripes per online CPU (more than 4 per CPU) */
	assert_int_equal(kl_hashlock_init(&h, 0), 0);
	n = kl_hashlock_nstripes(&h);
	assert_int_equal(n & (n - 1), 0);
	assert_true(n > 4 * cpus && n <= 8 * cpus);
	assert_int_equal(kl_hashlock_destroy(&h), 0);
	for (size_t k = 0; k < KL_ARRAY_SIZE(kinds); k++) {
		assert_int_equal(kl_hashlock_init_flags(&h, 1, kinds[k]), 0);
		assert_int_equal(kl_hashlock_destroy(&h), 0);
	}
}

static void test_hashlock_destroy_refuses_a_held_table_then_poisons(void **state)
{
	struct kl_hashlock h;
	unsigned long n0 = kli_report_count();

	(void)state;
	setenv("KLOCK_ON_ERROR", "warn", 1);
	for (size_t k = 0; k < KL_ARRAY_SIZE(kinds); k++) {
		assert_int_equal(kl_hashlock_init_flags(&h, 16, kinds[k]), 0);
		kl_hashlock_lock(&h, &objs[3]);
		assert_int_equal(kl_hashlock_destroy(&h), EBUSY);
		kl_hashlock_unlock(&h, &objs[3]);   /* the table is intact after EBUSY */
		assert_true(kl_hashlock_trylock(&h, &objs[3]));
		kl_hashlock_unlock(&h, &objs[3]);
		assert_int_equal(kl_hashlock_destroy(&h), 0);
		assert_int_equal(kl_hashlock_destroy(&h), EINVAL);
		assert_null(h.stripes);
	}
	/* debug builds report destroy of a held table and each second destroy */
	assert_int_equal(kli_report_count(), n0 + 4 * KLOCK_DEBUG_LOCKS);
}

/* ---- mutual exclusion ------------------------------------------------------------------- */

enum op { OP_ONE, OP_PAIR, OP_SET };

struct worker {
	struct kl_hashlock *h;
	enum op op;
	int me;
	long iters;
	uint64_t seed;
	long violations;
	long entered;            /* obj_enter() calls: each bumped BUMPS times */
	_Atomic long done;       /* sections completed (the watchdog reads it) */
	_Atomic bool *finished;
	_Atomic bool *stop;      /* set by a failing run: leave the loop early */
};

static void one_section(struct worker *w)
{
	struct obj *o = &objs[rnd(&w->seed) % NOBJ];

	kl_hashlock_lock(w->h, o);
	w->violations += !obj_enter(o, w->me, &w->entered);
	w->violations += !obj_leave(o, w->me);
	kl_hashlock_unlock(w->h, o);
}

/* Random pairs: distinct objects, the same object, and (often, in a small table) two
 * objects of one stripe. */
static void pair_section(struct worker *w)
{
	struct obj *a = &objs[rnd(&w->seed) % NOBJ], *b = &objs[rnd(&w->seed) % NOBJ];

	kl_hashlock_lock2(w->h, a, b);
	w->violations += !obj_enter(a, w->me, &w->entered);
	if (b != a)
		w->violations += !obj_enter(b, w->me, &w->entered);
	w->violations += !obj_leave(a, w->me);
	if (b != a)
		w->violations += !obj_leave(b, w->me);
	kl_hashlock_unlock2(w->h, b, a);   /* either order */
}

/* A random set with duplicates; each distinct object entered once. */
static void set_section(struct worker *w)
{
	const void *keys[SET_MAX];
	struct obj *set[SET_MAX];
	size_t n = 1 + rnd(&w->seed) % SET_MAX, m = 0;

	for (size_t i = 0; i < n; i++) {
		struct obj *o = &objs[rnd(&w->seed) % (NOBJ / 4)];   /* many duplicates */
		bool dup = false;

		keys[i] = o;
		for (size_t j = 0; j < m; j++)
			dup |= set[j] == o;
		if (!dup)
			set[m++] = o;
	}
	w->violations += kl_hashlock_lockn(w->h, keys, n) != 0;
	for (size_t j = 0; j < m; j++)
		w->violations += !obj_enter(set[j], w->me, &w->entered);
	for (size_t j = 0; j < m; j++)
		w->violations += !obj_leave(set[j], w->me);
	kl_hashlock_unlockn(w->h, keys, n);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (long i = 0; i < w->iters && !atomic_load_explicit(w->stop, memory_order_relaxed);
	     i++) {
		if (w->op == OP_ONE)
			one_section(w);
		else if (w->op == OP_PAIR)
			pair_section(w);
		else
			set_section(w);
		atomic_store_explicit(&w->done, i + 1, memory_order_relaxed);
	}
	atomic_store(w->finished, true);
	return NULL;
}

static long workers_done(struct worker *w)
{
	long sum = 0;

	for (int i = 0; i < NTHREADS; i++)
		sum += atomic_load_explicit(&w[i].done, memory_order_relaxed);
	return sum;
}

static bool workers_finished(_Atomic bool *fin)
{
	for (int i = 0; i < NTHREADS; i++)
		if (!atomic_load(&fin[i]))
			return false;
	return true;
}

/* Waits until every worker finished. A deadlock is no section completing anywhere for
 * the stall time (progress restarts the clock: slow emulated CPUs are not a deadlock);
 * then the workers are told to stop and joined, so none outlives this test's stack. Ones
 * that cannot stop hold a stripe for ever: the process ends there (abort). */
static bool workers_wait(struct worker *w, _Atomic bool *fin, _Atomic bool *stop)
{
	int64_t stall_ns = (int64_t)klt_watchdog_s(DEADLOCK_SECS) * KLT_NSEC_PER_SEC;
	int64_t last = klt_now_ns();
	long seen = -1;

	while (!workers_finished(fin)) {
		long now_done = workers_done(w);

		if (now_done != seen) {
			seen = now_done;
			last = klt_now_ns();
		} else if (klt_now_ns() - last > stall_ns) {
			atomic_store(stop, true);
			for (last = klt_now_ns(); !workers_finished(fin); klt_sleep_ms(1))
				if (klt_now_ns() - last > stall_ns) {
					fprintf(stderr, "deadlock: workers still stuck after a stop request\n");
					abort();
				}
			return false;
		}
		klt_sleep_ms(1);
	}
	return true;
}

/* Runs NTHREADS workers of @op on a fresh table; fails on a lost update, an exclusion
 * violation, or no completion within DEADLOCK_SECS (then reports the progress made). */
static void run_workers(unsigned nstripes, unsigned flags, enum op op, long iters)
{
	struct kl_hashlock h;
	struct worker w[NTHREADS];
	_Atomic bool fin[NTHREADS], stop = false;
	pthread_t t[NTHREADS];
	long entered = 0, viol = 0;
	bool ok;

	objs_reset();
	assert_int_equal(kl_hashlock_init_flags(&h, nstripes, flags), 0);
	for (int i = 0; i < NTHREADS; i++) {
		atomic_init(&fin[i], false);
		w[i] = (struct worker){ .h = &h, .op = op, .me = i + 1, .iters = iters,
					.seed = 0x1234567ull * (uint64_t)(i + 1) | 1,
					.finished = &fin[i], .stop = &stop };
		assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	ok = workers_wait(w, fin, &stop);
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	if (!ok)
		fail_msg("deadlock: no section completed for %u s, %ld of %ld done "
			 "(op %d, %u stripes, flags %#x)", klt_watchdog_s(DEADLOCK_SECS),
			 workers_done(w), (long)NTHREADS * iters, op, nstripes, flags);
	for (int i = 0; i < NTHREADS; i++) {
		viol += w[i].violations;
		entered += w[i].entered;
	}
	assert_int_equal(viol, 0);
	assert_int_equal(objs_total(), entered * BUMPS);   /* no update lost */
	if (op == OP_ONE)
		assert_int_equal(entered, (long)NTHREADS * iters);
	assert_int_equal(kl_hashlock_destroy(&h), 0);
}

static void test_hashlock_excludes_per_key(void **state)
{
	(void)state;
	for (size_t k = 0; k < KL_ARRAY_SIZE(kinds); k++) {
		run_workers(SMALL_STRIPES, kinds[k], OP_ONE, klt_scaled(50000));
		run_workers(0, kinds[k], OP_ONE, klt_scaled(50000));
	}
}

static void test_hashlock_lock2_random_pairs_never_deadlock(void **state)
{
	(void)state;
	for (size_t k = 0; k < KL_ARRAY_SIZE(kinds); k++) {
		run_workers(SMALL_STRIPES, kinds[k], OP_PAIR, klt_scaled(40000));
		run_workers(64, kinds[k], OP_PAIR, klt_scaled(40000));
	}
}

static void test_hashlock_lockn_random_sets_never_deadlock(void **state)
{
	(void)state;
	for (size_t k = 0; k < KL_ARRAY_SIZE(kinds); k++) {
		run_workers(SMALL_STRIPES, kinds[k], OP_SET, klt_scaled(20000));
		run_workers(64, kinds[k], OP_SET, klt_scaled(20000));
	}
}

/* ---- one stripe, two keys --------------------------------------------------------------- */

struct probe {
	struct kl_hashlock *h;
	const void *key;
	bool got;
};

static void *try_from_other_thread(void *arg)
{
	struct probe *p = arg;

	p->got = kl_hashlock_trylock(p->h, p->key);
	if (p->got)
		kl_hashlock_unlock(p->h, p->key);
	return NULL;
}

static bool other_thread_gets(struct kl_hashlock *h, const void *key)
{
	struct probe p = { h, key, false };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, try_from_other_thread, &p), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	return p.got;
}

static void test_hashlock_lock2_takes_a_shared_stripe_once(void **state)
{
	(void)state;
	for (size_t k = 0; k < KL_ARRAY_SIZE(kinds); k++) {
		struct kl_hashlock h;
		struct obj *a, *b;
		const void *keys[] = { &objs[0], &objs[0], &objs[0] };

		assert_int_equal(kl_hashlock_init_flags(&h, SMALL_STRIPES, kinds[k]), 0);
		same_stripe_pair(&h, &a, &b);
		kl_hashlock_lock2(&h, a, b);   /* one stripe: taken once (no self-deadlock) */
		assert_false(other_thread_gets(&h, a));
		assert_false(other_thread_gets(&h, b));
		kl_hashlock_unlock2(&h, a, b); /* released once: free again */
		assert_true(other_thread_gets(&h, a));
		kl_hashlock_lock2(&h, a, a);
		assert_false(other_thread_gets(&h, a));
		kl_hashlock_unlock2(&h, a, a);
		assert_true(other_thread_gets(&h, a));
		assert_int_equal(kl_hashlock_lockn(&h, keys, 3), 0);
		assert_false(other_thread_gets(&h, &objs[0]));
		kl_hashlock_unlockn(&h, keys, 3);
		assert_true(other_thread_gets(&h, &objs[0]));
		assert_int_equal(kl_hashlock_destroy(&h), 0);
	}
}

static void test_hashlock_lock2_locks_both_stripes(void **state)
{
	(void)state;
	for (size_t k = 0; k < KL_ARRAY_SIZE(kinds); k++) {
		struct kl_hashlock h;
		struct obj *a = &objs[0], *b = NULL;

		assert_int_equal(kl_hashlock_init_flags(&h, SMALL_STRIPES, kinds[k]), 0);
		for (int i = 1; i < NOBJ && b == NULL; i++)
			if (kl_hashlock_index(&h, &objs[i]) != kl_hashlock_index(&h, a))
				b = &objs[i];
		assert_non_null(b);
		kl_hashlock_lock2(&h, b, a);
		assert_false(other_thread_gets(&h, a));
		assert_false(other_thread_gets(&h, b));
		kl_hashlock_unlock2(&h, a, b);
		assert_true(other_thread_gets(&h, a));
		assert_true(other_thread_gets(&h, b));
		assert_int_equal(kl_hashlock_destroy(&h), 0);
	}
}

static void test_hashlock_lockn_rejects_too_many_keys(void **state)
{
	struct kl_hashlock h;
	const void *keys[KL_HASHLOCK_LOCKN_MAX + 1];

	(void)state;
	for (size_t i = 0; i < KL_ARRAY_SIZE(keys); i++)
		keys[i] = &objs[i % NOBJ];
	assert_int_equal(kl_hashlock_init(&h, 64), 0);
	assert_int_equal(kl_hashlock_lockn(&h, keys, KL_HASHLOCK_LOCKN_MAX + 1), EINVAL);
	assert_true(other_thread_gets(&h, keys[0]));   /* nothing was locked */
	assert_int_equal(kl_hashlock_lockn(&h, keys, 0), 0);
	kl_hashlock_unlockn(&h, keys, 0);
	assert_int_equal(kl_hashlock_lockn(&h, keys, KL_HASHLOCK_LOCKN_MAX), 0);
	for (size_t i = 0; i < KL_HASHLOCK_LOCKN_MAX; i++)
		assert_false(other_thread_gets(&h, keys[i]));
	kl_hashlock_unlockn(&h, keys, KL_HASHLOCK_LOCKN_MAX);
	for (size_t i = 0; i < KL_HASHLOCK_LOCKN_MAX; i++)
		assert_true(other_thread_gets(&h, keys[i]));
	assert_int_equal(kl_hashlock_destroy(&h), 0);
}

static void test_hashlock_trylock_fails_on_a_held_stripe(void **state)
{
	(void)state;
	for (size_t k = 0; k < KL_ARRAY_SIZE(kinds); k++) {
		struct kl_hashlock h;
		struct obj *a, *b;

		assert_int_equal(kl_hashlock_init_flags(&h, SMALL_STRIPES, kinds[k]), 0);
		same_stripe_pair(&h, &a, &b);
		assert_true(kl_hashlock_trylock(&h, a));
		assert_false(kl_hashlock_trylock(&h, b));   /* ours, through the other key */
		assert_false(other_thread_gets(&h, b));
		kl_hashlock_unlock(&h, b);                  /* same stripe: either key unlocks */
		assert_true(other_thread_gets(&h, a));
		assert_int_equal(kl_hashlock_destroy(&h), 0);
	}
}

/* ---- misuse ----------------------------------------------------------------------------- */

/* Relocking a mutex stripe through a second key is reported in every build (the stripe
 * detects it), naming the stripe and its table; the call returns without locking. */
static void test_hashlock_relock_through_another_key_is_reported(void **state)
{
	struct kl_hashlock h;
	struct obj *a, *b;
	unsigned long n0 = kli_report_count();
	char desc[256], expect[64];
	const void *stripe;

	(void)state;
	/* witness and TSan report the planted relock themselves (test_witness.c plants it) */
	KLT_SKIP_IF_MISUSE_INSTRUMENTED();
	setenv("KLOCK_ON_ERROR", "warn", 1);
	assert_int_equal(kl_hashlock_init(&h, SMALL_STRIPES), 0);
	assert_int_equal(kl_lock_set_name(&h, "objtable"), 0);
	same_stripe_pair(&h, &a, &b);
	kl_hashlock_lock(&h, a);
	kl_hashlock_lock(&h, b);   /* self-deadlock averted: reported */
	assert_int_equal(kli_report_count(), n0 + 1);
	kl_hashlock_unlock(&h, a);
	kl_hashlock_unlock(&h, a); /* double unlock: the stripe reports it */
	assert_int_equal(kli_report_count(), n0 + 2);
	/* what those reports say about the stripe */
	kli_lock_describe((const char *)h.stripes + (size_t)kl_hashlock_index(&h, a) * 128,
			  "mutex", desc, sizeof(desc));
	snprintf(expect, sizeof(expect), "(stripe %u of hashlock \"objtable\"",
		 kl_hashlock_index(&h, a));
	assert_non_null(strstr(desc, expect));
	stripe = (const char *)h.stripes + (size_t)kl_hashlock_index(&h, a) * 128;
	assert_int_equal(kl_hashlock_destroy(&h), 0);
	/* destroy forgot the name and the group */
	kli_lock_describe(stripe, "mutex", desc, sizeof(desc));
	assert_null(strstr(desc, "stripe"));
	assert_int_equal(kl_lock_get_name(&h, desc, sizeof(desc)), 0);
}

#if KLOCK_DEBUG_LOCKS
static void test_hashlock_use_after_destroy_is_reported(void **state)
{
	struct kl_hashlock h, never;
	unsigned long n0 = kli_report_count();

	(void)state;
	setenv("KLOCK_ON_ERROR", "warn", 1);
	assert_int_equal(kl_hashlock_init(&h, 8), 0);
	assert_int_equal(kl_hashlock_destroy(&h), 0);
	kl_hashlock_lock(&h, &objs[0]);
	assert_false(kl_hashlock_trylock(&h, &objs[0]));
	kl_hashlock_unlock(&h, &objs[0]);
	kl_hashlock_lock2(&h, &objs[0], &objs[1]);
	assert_int_equal(kl_hashlock_lockn(&h, (const void *[]){ &objs[0] }, 1), EINVAL);
	assert_int_equal(kli_report_count(), n0 + 5);
	memset(&never, 0, sizeof(never));
	kl_hashlock_lock(&never, &objs[0]);   /* never initialised */
	assert_int_equal(kli_report_count(), n0 + 6);
}
#endif

/* ---- lockstat: one row per table and caller, in a "hashlock" section -------------------- */

#if KLOCK_LOCKSTAT
static struct kl_hashlock ls_table;

/* Whether a thread other than the holder waits for @key's stripe right now: a mutex
 * waiter flags the word (SPINNER while it polls, PARKED once it sleeps) or queues to
 * spin; a ticket waiter has taken the next ticket. */
static bool stripe_has_waiter(struct kl_hashlock *h, const void *key)
{
	const struct kl_mutex *m = (const void *)((const char *)h->stripes +
						  (size_t)kl_hashlock_index(h, key) * 128);
	const struct kl_ticket *t = (const void *)m;

	uint32_t next = atomic_load(&t->next), served = atomic_load(&t->owner);
	uintptr_t word = atomic_load(&m->owner), spinq = atomic_load(&m->spinq);

	if (h->flags & KL_HASHLOCK_TICKET)
		return next - served >= 2;
	return (word & 0x7f) != 0 || spinq != 0;
}

/* The keys of the lockstat test: the held one, and one of a higher stripe (so that a
 * lock2 of both waits on its first, non-tail, acquisition). */
static const void *ls_held, *ls_other;
static bool ls_pair;

/* The call site lockstat must name: this function, not hashlock.c or mutex.c. */
static KL_NOINLINE void *hashlock_stat_waiter(void *arg)
{
	(void)arg;
	if (ls_pair) {
		kl_hashlock_lock2(&ls_table, ls_other, ls_held);
		kl_hashlock_unlock2(&ls_table, ls_other, ls_held);
	} else {
		kl_hashlock_lock(&ls_table, ls_held);
		kl_hashlock_unlock(&ls_table, ls_held);
	}
	return NULL;
}

/* The contended acquisitions lockstat recorded for the table, checking every row. */
static uint64_t table_rows_check(const struct kl_lockstat_snapshot *s)
{
	uint64_t contended = 0;

	for (size_t i = 0; i < s->nrows; i++) {
		const struct kl_lockstat_row *r = &s->rows[i];
		char sym[256];

		/* no row for a stripe: every one folded into the table's */
		assert_true(r->lock < ls_table.stripes ||
			    r->lock >= (void *)((char *)ls_table.stripes + 8 * 128));
		if (r->lock != &ls_table)
			continue;
		assert_string_equal(r->kind, "hashlock");
		if (r->contended == 0)
			continue;   /* the holder's acquisition (hold-time builds count those) */
		kli_symbolize(r->caller, sym, sizeof(sym));
		if (strstr(sym, "hashlock_stat_waiter+0x") == NULL)
			fail_msg("caller %s, not hashlock_stat_waiter", sym);
		contended += r->contended;
	}
	return contended;
}

/* The text report has a hashlock section naming the table and the waiter. */
static void report_mentions_table(const struct kl_lockstat_snapshot *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(kl_lockstat_report_snapshot(f, s, NULL), 0);
	fclose(f);
	if (strstr(buf, "(hashlock)") == NULL || strstr(buf, "stat_table") == NULL ||
	    strstr(buf, "hashlock_stat_waiter+0x") == NULL)
		fail_msg("report without the table's section, name or caller:\n%s", buf);
	free(buf);
}

/* One contended acquisition of @ls_held by the waiter; the profile it leaves. */
static void stat_one_wait(struct kl_lockstat_snapshot *s)
{
	pthread_t t;

	kl_lockstat_stop();
	kl_lockstat_reset();
	assert_int_equal(kl_lockstat_start(), 0);
	kl_hashlock_lock(&ls_table, ls_held);
	assert_int_equal(pthread_create(&t, NULL, hashlock_stat_waiter, NULL), 0);
	while (!stripe_has_waiter(&ls_table, ls_held))
		klt_sleep_ms(1);
	klt_sleep_ms(10);   /* it waits: a mutex waiter goes to sleep meanwhile */
	kl_hashlock_unlock(&ls_table, ls_held);
	assert_int_equal(pthread_join(t, NULL), 0);
	kl_lockstat_stop();
	assert_int_equal(kl_lockstat_snapshot(s), 0);
}

static void test_hashlock_lockstat_rows_name_the_table_and_caller(void **state)
{
	struct kl_lockstat_snapshot s;

	(void)state;
	for (size_t k = 0; k < KL_ARRAY_SIZE(kinds); k++) {
		assert_int_equal(kl_hashlock_init_flags(&ls_table, 8, kinds[k]), 0);
		ls_held = ls_other = NULL;
		for (int i = 0; i < NOBJ && ls_other == NULL; i++) {
			for (int j = 0; j < NOBJ && ls_other == NULL; j++) {
				if (kl_hashlock_index(&ls_table, &objs[i]) <
				    kl_hashlock_index(&ls_table, &objs[j])) {
					ls_held = &objs[i];
					ls_other = &objs[j];
				}
			}
		}
		assert_non_null(ls_other);
		assert_int_equal(kl_lock_set_name(&ls_table, "stat_table"), 0);
		for (int pair = 0; pair < 2; pair++) {
			ls_pair = pair;
			stat_one_wait(&s);
			assert_int_equal(table_rows_check(&s), 1);
			report_mentions_table(&s);
			kl_lockstat_snapshot_free(&s);
		}
		assert_int_equal(kl_hashlock_destroy(&ls_table), 0);
	}
	kl_lockstat_reset();
}
#endif

/* ---- lock objects ----------------------------------------------------------------------- */

static void test_lockobj_lives_until_the_last_reference(void **state)
{
	struct kl_mutex *m = kl_lockobj_alloc();

	(void)state;
	assert_non_null(m);
	assert_int_equal((uintptr_t)m % 128, 0);   /* its own false-sharing unit */
	kl_mutex_lock(m);
	kl_mutex_unlock(m);
	kl_lockobj_hold(m);
	kl_lockobj_hold(m);
	assert_false(kl_lockobj_free(m));
	kl_mutex_lock(m);   /* still a working mutex (ASan would see a use after free) */
	kl_mutex_unlock(m);
	assert_false(kl_lockobj_free(m));
	assert_true(kl_mutex_trylock(m));
	kl_mutex_unlock(m);
	assert_true(kl_lockobj_free(m));
}

/* Objects sharing one lock, released from many threads at once: exactly one frees it. */
struct share {
	struct kl_mutex *m;
	long *counter;
	long iters;
	_Atomic int *freed;
};

static void *share_worker(void *arg)
{
	struct share *s = arg;

	for (long i = 0; i < s->iters; i++) {
		kl_mutex_lock(s->m);
		(*s->counter)++;
		kl_mutex_unlock(s->m);
	}
	if (kl_lockobj_free(s->m))
		atomic_fetch_add(s->freed, 1);
	return NULL;
}

static void test_lockobj_shared_by_threads_is_freed_once(void **state)
{
	struct share sh[NTHREADS];
	_Atomic int freed = 0;
	long counter = 0, iters = klt_scaled(20000);

	(void)state;
	for (int round = 0; round < 20; round++) {
		struct kl_mutex *m = kl_lockobj_alloc();

		assert_non_null(m);
		for (int i = 1; i < NTHREADS; i++)
			kl_lockobj_hold(m);   /* one reference per thread */
		for (int i = 0; i < NTHREADS; i++)
			sh[i] = (struct share){ m, &counter, iters, &freed };
		klt_run_threads(NTHREADS, share_worker, sh, sizeof(sh[0]));
		assert_int_equal(atomic_load(&freed), round + 1);
	}
	assert_int_equal(counter, 20L * NTHREADS * iters);
}

static void test_lockobj_last_free_of_a_locked_object_is_reported(void **state)
{
	struct kl_mutex *m = kl_lockobj_alloc();
	unsigned long n0 = kli_report_count();

	(void)state;
	setenv("KLOCK_ON_ERROR", "warn", 1);
	assert_non_null(m);
	kl_mutex_lock(m);
	assert_false(kl_lockobj_free(m));   /* reported; not freed under its holder */
	assert_int_equal(kli_report_count(), n0 + 1);
	kl_mutex_unlock(m);                 /* still valid memory */
	free(m);                            /* the leaked object (the mutex is its start) */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hashlock_index_is_stable_and_in_range),
		cmocka_unit_test(test_hashlock_spreads_keys_chi_square),
		cmocka_unit_test(test_hashlock_init_rejects_bad_sizes_and_flags),
		cmocka_unit_test(test_hashlock_destroy_refuses_a_held_table_then_poisons),
		cmocka_unit_test(test_hashlock_excludes_per_key),
		cmocka_unit_test(test_hashlock_lock2_random_pairs_never_deadlock),
		cmocka_unit_test(test_hashlock_lockn_random_sets_never_deadlock),
		cmocka_unit_test(test_hashlock_lock2_takes_a_shared_stripe_once),
		cmocka_unit_test(test_hashlock_lock2_locks_both_stripes),
		cmocka_unit_test(test_hashlock_lockn_rejects_too_many_keys),
		cmocka_unit_test(test_hashlock_trylock_fails_on_a_held_stripe),
		cmocka_unit_test(test_hashlock_relock_through_another_key_is_reported),
#if KLOCK_DEBUG_LOCKS
		cmocka_unit_test(test_hashlock_use_after_destroy_is_reported),
#endif
#if KLOCK_LOCKSTAT
		cmocka_unit_test(test_hashlock_lockstat_rows_name_the_table_and_caller),
#endif
		cmocka_unit_test(test_lockobj_lives_until_the_last_reference),
		cmocka_unit_test(test_lockobj_shared_by_threads_is_freed_once),
		cmocka_unit_test(test_lockobj_last_free_of_a_locked_object_is_reported),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
