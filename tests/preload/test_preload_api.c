/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/test_preload_api.c - the pthread API the preload claims, as tables:
 * every mutex function x mutex type x way of creating it x state x error case, the same
 * for rwlocks (every kind) and spinlocks; then the objects glibc keeps (process-shared,
 * robust, priority inheritance) and the recursive read a waiting writer must not block.
 *
 * Each row's expectation is glibc's: meson runs this file once without the preload (the
 * table is checked against glibc itself) and once under it. Rows POSIX leaves undefined
 * and glibc answers by hanging are not in the tables; where klock answers an undefined
 * case better (EDEADLK instead of waiting forever) the row accepts both. BLOCKS rows check
 * that the call waits for the holder's release (never returns before it) and then
 * succeeds; timed rows check that ETIMEDOUT never comes before the deadline.
 */
#include <limits.h>
#include <signal.h>
#include <sys/wait.h>

#include "preload_test.h"

#define BLOCKS (-1)   /* waits until the other thread releases, then 0 */
#define NONE (-3)     /* no alternative */
/* A timed call's wait in the rows that time out. */
#define TIMEOUT_MS 40
/* How long the holder keeps the lock before releasing it, in BLOCKS rows. */
#define HOLD_MS 40

static bool preloaded;

/* ================================ mutexes ================================================= */

enum mkind { MK_NORMAL, MK_DEFAULT, MK_ADAPTIVE, MK_RECURSIVE, MK_ERRORCHECK, MK_COUNT };
enum mclass { MC_PLAIN, MC_RECURSIVE, MC_ERRORCHECK };
enum mhow { MH_INIT, MH_STATIC, MH_ZERO, MH_COUNT };
enum mstate { MS_FREE, MS_SELF, MS_OTHER, MS_DESTROYED };
enum mop {
	MO_LOCK, MO_TRYLOCK, MO_TIMED, MO_TIMED_PAST, MO_TIMED_BADNS, MO_TIMED_NEGSEC,
	MO_CLOCK_MONO, MO_CLOCK_REAL, MO_CLOCK_BAD, MO_UNLOCK, MO_DESTROY,
};

static const char *const mk_names[] = { "NORMAL", "DEFAULT", "ADAPTIVE_NP", "RECURSIVE",
					"ERRORCHECK" };
static const char *const mh_names[] = { "init", "static", "zero" };
static const char *const ms_names[] = { "free", "self", "other", "destroyed" };
static const char *const mo_names[] = {
	"lock", "trylock", "timedlock", "timedlock(past)", "timedlock(bad nsec)",
	"timedlock(tv_sec<0)", "clocklock(MONOTONIC)", "clocklock(REALTIME)",
	"clocklock(bad clock)", "unlock", "destroy",
};

struct mrow {
	enum mop op;
	enum mclass mc;
	enum mstate st;
	int expect;
};

#define R(op, mc, st, e) { MO_##op, MC_##mc, MS_##st, e }
static const struct mrow mrows[] = {
	/* free: every way of taking it works (a free mutex is taken even when the deadline is
	 * malformed or past); unlocking a free mutex is EPERM where the type checks */
	R(LOCK, PLAIN, FREE, 0), R(LOCK, RECURSIVE, FREE, 0), R(LOCK, ERRORCHECK, FREE, 0),
	R(TRYLOCK, PLAIN, FREE, 0), R(TRYLOCK, RECURSIVE, FREE, 0),
	R(TRYLOCK, ERRORCHECK, FREE, 0),
	R(TIMED, PLAIN, FREE, 0), R(TIMED, RECURSIVE, FREE, 0), R(TIMED, ERRORCHECK, FREE, 0),
	R(TIMED_PAST, PLAIN, FREE, 0), R(TIMED_PAST, RECURSIVE, FREE, 0),
	R(TIMED_PAST, ERRORCHECK, FREE, 0),
	R(TIMED_BADNS, PLAIN, FREE, 0), R(TIMED_BADNS, RECURSIVE, FREE, 0),
	R(TIMED_BADNS, ERRORCHECK, FREE, 0),
	R(TIMED_NEGSEC, PLAIN, FREE, 0), R(TIMED_NEGSEC, RECURSIVE, FREE, 0),
	R(TIMED_NEGSEC, ERRORCHECK, FREE, 0),
	R(CLOCK_MONO, PLAIN, FREE, 0), R(CLOCK_MONO, RECURSIVE, FREE, 0),
	R(CLOCK_MONO, ERRORCHECK, FREE, 0),
	R(CLOCK_REAL, PLAIN, FREE, 0), R(CLOCK_REAL, RECURSIVE, FREE, 0),
	R(CLOCK_REAL, ERRORCHECK, FREE, 0),
	R(CLOCK_BAD, PLAIN, FREE, EINVAL), R(CLOCK_BAD, RECURSIVE, FREE, EINVAL),
	R(CLOCK_BAD, ERRORCHECK, FREE, EINVAL),
	R(UNLOCK, RECURSIVE, FREE, EPERM), R(UNLOCK, ERRORCHECK, FREE, EPERM),
	R(DESTROY, PLAIN, FREE, 0), R(DESTROY, RECURSIVE, FREE, 0),
	R(DESTROY, ERRORCHECK, FREE, 0),
	/* held by the caller: recursive counts, errorcheck refuses, a plain mutex's timed
	 * relock waits out its deadline (its plain relock hangs: not a row) */
	R(LOCK, RECURSIVE, SELF, 0), R(LOCK, ERRORCHECK, SELF, EDEADLK),
	R(TRYLOCK, PLAIN, SELF, EBUSY), R(TRYLOCK, RECURSIVE, SELF, 0),
	R(TRYLOCK, ERRORCHECK, SELF, EBUSY),
	R(TIMED, PLAIN, SELF, ETIMEDOUT), R(TIMED, RECURSIVE, SELF, 0),
	R(TIMED, ERRORCHECK, SELF, EDEADLK),
	R(TIMED_PAST, PLAIN, SELF, ETIMEDOUT), R(TIMED_PAST, RECURSIVE, SELF, 0),
	R(TIMED_PAST, ERRORCHECK, SELF, EDEADLK),
	R(TIMED_BADNS, PLAIN, SELF, EINVAL), R(TIMED_BADNS, RECURSIVE, SELF, 0),
	R(TIMED_BADNS, ERRORCHECK, SELF, EDEADLK),
	R(TIMED_NEGSEC, PLAIN, SELF, ETIMEDOUT), R(TIMED_NEGSEC, RECURSIVE, SELF, 0),
	R(TIMED_NEGSEC, ERRORCHECK, SELF, EDEADLK),
	R(CLOCK_MONO, PLAIN, SELF, ETIMEDOUT), R(CLOCK_MONO, RECURSIVE, SELF, 0),
	R(CLOCK_MONO, ERRORCHECK, SELF, EDEADLK),
	R(CLOCK_REAL, PLAIN, SELF, ETIMEDOUT), R(CLOCK_REAL, RECURSIVE, SELF, 0),
	R(CLOCK_REAL, ERRORCHECK, SELF, EDEADLK),
	R(CLOCK_BAD, PLAIN, SELF, EINVAL), R(CLOCK_BAD, RECURSIVE, SELF, EINVAL),
	R(CLOCK_BAD, ERRORCHECK, SELF, EINVAL),
	R(UNLOCK, PLAIN, SELF, 0), R(UNLOCK, RECURSIVE, SELF, 0), R(UNLOCK, ERRORCHECK, SELF, 0),
	R(DESTROY, PLAIN, SELF, EBUSY), R(DESTROY, RECURSIVE, SELF, EBUSY),
	R(DESTROY, ERRORCHECK, SELF, EBUSY),
	/* held by another thread */
	R(LOCK, PLAIN, OTHER, BLOCKS), R(LOCK, RECURSIVE, OTHER, BLOCKS),
	R(LOCK, ERRORCHECK, OTHER, BLOCKS),
	R(TRYLOCK, PLAIN, OTHER, EBUSY), R(TRYLOCK, RECURSIVE, OTHER, EBUSY),
	R(TRYLOCK, ERRORCHECK, OTHER, EBUSY),
	R(TIMED, PLAIN, OTHER, ETIMEDOUT), R(TIMED, RECURSIVE, OTHER, ETIMEDOUT),
	R(TIMED, ERRORCHECK, OTHER, ETIMEDOUT),
	R(TIMED_PAST, PLAIN, OTHER, ETIMEDOUT), R(TIMED_PAST, RECURSIVE, OTHER, ETIMEDOUT),
	R(TIMED_PAST, ERRORCHECK, OTHER, ETIMEDOUT),
	R(TIMED_BADNS, PLAIN, OTHER, EINVAL), R(TIMED_BADNS, RECURSIVE, OTHER, EINVAL),
	R(TIMED_BADNS, ERRORCHECK, OTHER, EINVAL),
	R(TIMED_NEGSEC, PLAIN, OTHER, ETIMEDOUT), R(TIMED_NEGSEC, RECURSIVE, OTHER, ETIMEDOUT),
	R(TIMED_NEGSEC, ERRORCHECK, OTHER, ETIMEDOUT),
	R(CLOCK_MONO, PLAIN, OTHER, ETIMEDOUT), R(CLOCK_MONO, RECURSIVE, OTHER, ETIMEDOUT),
	R(CLOCK_MONO, ERRORCHECK, OTHER, ETIMEDOUT),
	R(CLOCK_REAL, PLAIN, OTHER, ETIMEDOUT), R(CLOCK_REAL, RECURSIVE, OTHER, ETIMEDOUT),
	R(CLOCK_REAL, ERRORCHECK, OTHER, ETIMEDOUT),
	R(CLOCK_BAD, PLAIN, OTHER, EINVAL), R(CLOCK_BAD, RECURSIVE, OTHER, EINVAL),
	R(CLOCK_BAD, ERRORCHECK, OTHER, EINVAL),
	R(UNLOCK, RECURSIVE, OTHER, EPERM), R(UNLOCK, ERRORCHECK, OTHER, EPERM),
	R(DESTROY, PLAIN, OTHER, EBUSY), R(DESTROY, RECURSIVE, OTHER, EBUSY),
	R(DESTROY, ERRORCHECK, OTHER, EBUSY),
	/* destroyed: EINVAL, until initialised again; destroying twice is harmless */
	R(LOCK, PLAIN, DESTROYED, EINVAL), R(LOCK, RECURSIVE, DESTROYED, EINVAL),
	R(LOCK, ERRORCHECK, DESTROYED, EINVAL),
	R(TRYLOCK, PLAIN, DESTROYED, EINVAL), R(TRYLOCK, RECURSIVE, DESTROYED, EINVAL),
	R(TRYLOCK, ERRORCHECK, DESTROYED, EINVAL),
	R(TIMED, PLAIN, DESTROYED, EINVAL), R(TIMED, ERRORCHECK, DESTROYED, EINVAL),
	R(UNLOCK, PLAIN, DESTROYED, EINVAL), R(UNLOCK, RECURSIVE, DESTROYED, EINVAL),
	R(UNLOCK, ERRORCHECK, DESTROYED, EINVAL),
	R(DESTROY, PLAIN, DESTROYED, 0), R(DESTROY, ERRORCHECK, DESTROYED, 0),
};
#undef R

static enum mclass mk_class(enum mkind k)
{
	return k == MK_RECURSIVE ? MC_RECURSIVE : k == MK_ERRORCHECK ? MC_ERRORCHECK : MC_PLAIN;
}

static int mk_type(enum mkind k)
{
	static const int types[] = { PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_DEFAULT,
				     PTHREAD_MUTEX_ADAPTIVE_NP, PTHREAD_MUTEX_RECURSIVE,
				     PTHREAD_MUTEX_ERRORCHECK };

	return types[k];
}

/* Creates @m of kind @k the way @h says; false if that way does not exist for @k. */
static bool m_create(pthread_mutex_t *m, enum mkind k, enum mhow h)
{
	static const pthread_mutex_t statics[] = {
		PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
		PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP, PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP,
		PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP,
	};
	pthread_mutexattr_t a;

	switch (h) {
	case MH_INIT:
		pthread_mutexattr_init(&a);
		pthread_mutexattr_settype(&a, mk_type(k));
		assert_int_equal(pthread_mutex_init(m, &a), 0);
		pthread_mutexattr_destroy(&a);
		return true;
	case MH_STATIC:
		memcpy(m, &statics[k], sizeof(*m));
		return true;
	default:
		if (k != MK_NORMAL)
			return false;
		memset(m, 0, sizeof(*m));
		return true;
	}
}

static int m_lock_fn(void *m)
{
	return pthread_mutex_lock(m);
}

static int m_unlock_fn(void *m)
{
	return pthread_mutex_unlock(m);
}

static int m_op(pthread_mutex_t *m, enum mop op)
{
	struct timespec bad = { time(NULL) + 1, 1000000000l }, neg = { -1, 0 };
	struct timespec rt = pt_deadline(CLOCK_REALTIME, TIMEOUT_MS);
	struct timespec mono = pt_deadline(CLOCK_MONOTONIC, TIMEOUT_MS);
	struct timespec past = pt_deadline(CLOCK_REALTIME, -TIMEOUT_MS);

	switch (op) {
	case MO_LOCK: return pthread_mutex_lock(m);
	case MO_TRYLOCK: return pthread_mutex_trylock(m);
	case MO_TIMED: return pthread_mutex_timedlock(m, &rt);
	case MO_TIMED_PAST: return pthread_mutex_timedlock(m, &past);
	case MO_TIMED_BADNS: return pthread_mutex_timedlock(m, &bad);
	case MO_TIMED_NEGSEC: return pthread_mutex_timedlock(m, &neg);
	case MO_CLOCK_MONO: return pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &mono);
	case MO_CLOCK_REAL: return pthread_mutex_clocklock(m, CLOCK_REALTIME, &rt);
	case MO_CLOCK_BAD: return pthread_mutex_clocklock(m, CLOCK_PROCESS_CPUTIME_ID, &mono);
	case MO_UNLOCK: return pthread_mutex_unlock(m);
	default: return pthread_mutex_destroy(m);
	}
}

/* The op waits its full deadline in these rows (never early). */
static bool m_op_waits(enum mop op, int got)
{
	return got == ETIMEDOUT &&
	       (op == MO_TIMED || op == MO_CLOCK_MONO || op == MO_CLOCK_REAL);
}

static bool m_op_takes(enum mop op)
{
	return op != MO_UNLOCK && op != MO_DESTROY;
}

struct releaser {
	sem_t *quit;
	_Atomic bool released;
};

static void *release_later(void *p)
{
	struct releaser *r = p;

	klt_sleep_ms(HOLD_MS);
	atomic_store(&r->released, true);
	sem_post(r->quit);
	return NULL;
}

static void m_run(const struct mrow *row, enum mkind k, enum mhow h)
{
	pthread_mutex_t m;
	struct pt_helper holder;
	struct releaser rel = { NULL, false };
	pthread_t rt;
	clockid_t clock = row->op == MO_CLOCK_MONO ? CLOCK_MONOTONIC : CLOCK_REALTIME;
	int64_t t0;
	int got, extra = 0;

	if (!m_create(&m, k, h))
		return;
	if (row->st == MS_SELF)
		assert_int_equal(pthread_mutex_lock(&m), 0);
	if (row->st == MS_OTHER)
		pt_helper_start(&holder, m_lock_fn, m_unlock_fn, &m);
	if (row->st == MS_DESTROYED)
		assert_int_equal(pthread_mutex_destroy(&m), 0);
	if (row->expect == BLOCKS) {
		rel.quit = &holder.quit;
		assert_int_equal(pthread_create(&rt, NULL, release_later, &rel), 0);
	}
	t0 = pt_clock_ns(clock);
	got = m_op(&m, row->op);
	if (got != (row->expect == BLOCKS ? 0 : row->expect) ||
	    (row->expect == BLOCKS && !atomic_load(&rel.released)))
		fail_msg("mutex %s (%s, %s), %s: %s returned %d, expected %d%s", mk_names[k],
			 mh_names[h], ms_names[row->st], preloaded ? "klock" : "glibc",
			 mo_names[row->op], got, row->expect,
			 row->expect == BLOCKS ? " after the holder's release" : "");
	if (m_op_waits(row->op, got))
		assert_true(pt_clock_ns(clock) - t0 >= TIMEOUT_MS * 1000000ll - 1000000ll);
	/* Leave it free and destroyed. */
	if (row->expect == BLOCKS) {
		assert_int_equal(pthread_join(rt, NULL), 0);
		assert_int_equal(pthread_join(holder.t, NULL), 0);
		assert_int_equal(holder.fin_ret, 0);
	} else if (row->st == MS_OTHER) {
		assert_int_equal(pt_helper_finish(&holder), 0);
	}
	if (got == 0 && m_op_takes(row->op))
		extra++;
	if (row->st == MS_SELF && !(row->op == MO_UNLOCK && got == 0))
		extra++;
	if (row->st == MS_SELF && row->op == MO_DESTROY && got == 0)
		extra = 0;
	while (extra-- > 0)
		assert_int_equal(pthread_mutex_unlock(&m), 0);
	if (row->st != MS_DESTROYED && !(row->op == MO_DESTROY && got == 0))
		assert_int_equal(pthread_mutex_destroy(&m), 0);
}

static void test_preload_mutex_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < PT_ARRAY_SIZE(mrows); i++)
		for (int k = 0; k < MK_COUNT; k++)
			if (mk_class(k) == mrows[i].mc)
				for (int h = 0; h < MH_COUNT; h++)
					m_run(&mrows[i], k, h);
}

/* Under the preload, the mutexes of the table are klock's (the tag is in the object),
 * and a static initializer's type survives adoption. */
static void test_preload_mutex_is_klock_and_keeps_static_type(void **state)
{
	pthread_mutex_t r = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
	pthread_mutex_t e = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
	pthread_mutex_t n = PTHREAD_MUTEX_INITIALIZER;

	(void)state;
	assert_int_equal(pthread_mutex_lock(&r), 0);
	assert_int_equal(pthread_mutex_lock(&r), 0);
	assert_int_equal(pthread_mutex_lock(&e), 0);
	assert_int_equal(pthread_mutex_lock(&e), EDEADLK);
	assert_int_equal(pthread_mutex_lock(&n), 0);
	if (preloaded && !getenv_is("KLOCK_MUTEX", "pthread")) {
		assert_int_equal(pt_tag_magic(&r, 32), PT_MAGIC);
		assert_int_equal(pt_tag_magic(&e, 32), PT_MAGIC);
		assert_int_equal(pt_tag_magic(&n, 32), PT_MAGIC);
	}
	assert_int_equal(pthread_mutex_unlock(&n), 0);
	assert_int_equal(pthread_mutex_unlock(&e), 0);
	assert_int_equal(pthread_mutex_unlock(&r), 0);
	assert_int_equal(pthread_mutex_unlock(&r), 0);
	assert_int_equal(pthread_mutex_unlock(&r), EPERM);
}

/* ---- what stays glibc's ----------------------------------------------------------------- */

static int robust_die_holding(void *m)
{
	return pthread_mutex_lock(m); /* the thread then exits without unlocking */
}

static void test_preload_robust_mutex_owner_death_is_glibc(void **state)
{
	pthread_mutexattr_t a;
	pthread_mutex_t m;
	struct pt_helper h;

	(void)state;
	if (!pt_robust_supported())
		skip();
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	assert_int_equal(pthread_mutex_init(&m, &a), 0);
	pthread_mutexattr_destroy(&a);
	pt_helper_start(&h, robust_die_holding, NULL, &m);
	pt_helper_finish(&h);
	assert_int_equal(pthread_mutex_lock(&m), EOWNERDEAD);
	assert_int_equal(pthread_mutex_consistent(&m), 0);
	assert_int_equal(pthread_mutex_unlock(&m), 0);
	assert_int_equal(pthread_mutex_lock(&m), 0);
	if (preloaded)
		assert_int_not_equal(pt_tag_magic(&m, 32), PT_MAGIC);
	assert_int_equal(pthread_mutex_unlock(&m), 0);
	assert_int_equal(pthread_mutex_destroy(&m), 0);
}

static void test_preload_consistent_and_ceiling_fail_on_plain_mutexes(void **state)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	int c;

	(void)state;
	assert_int_equal(pthread_mutex_lock(&m), 0);
	assert_int_equal(pthread_mutex_consistent(&m), EINVAL);
	assert_int_equal(pthread_mutex_getprioceiling(&m, &c), EINVAL);
	assert_int_equal(pthread_mutex_unlock(&m), 0);
}

static void test_preload_pi_mutex_is_glibc(void **state)
{
	pthread_mutexattr_t a;
	pthread_mutex_t m;

	(void)state;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	assert_int_equal(pthread_mutex_init(&m, &a), 0);
	pthread_mutexattr_destroy(&a);
	assert_int_equal(pthread_mutex_lock(&m), 0);
	assert_int_equal(pthread_mutex_lock(&m), EDEADLK);
	if (preloaded)
		assert_int_not_equal(pt_tag_magic(&m, 32), PT_MAGIC);
	assert_int_equal(pthread_mutex_unlock(&m), 0);
	assert_int_equal(pthread_mutex_unlock(&m), EPERM);
	assert_int_equal(pthread_mutex_destroy(&m), 0);
}

/* ================================ rwlocks ================================================= */

enum rkind { RK_READER, RK_WRITER, RK_NONREC, RK_COUNT };
enum rhow { RH_INIT, RH_STATIC, RH_ZERO, RH_COUNT };
enum rstate { RS_FREE, RS_RD_SELF, RS_WR_SELF, RS_RD_OTHER, RS_WR_OTHER };
enum rop {
	RO_RD, RO_TRYRD, RO_TIMEDRD, RO_TIMEDRD_BADNS, RO_CLOCKRD, RO_CLOCKRD_BAD,
	RO_WR, RO_TRYWR, RO_TIMEDWR, RO_TIMEDWR_BADNS, RO_CLOCKWR, RO_CLOCKWR_BAD,
	RO_UNLOCK, RO_DESTROY,
};

static const char *const rk_names[] = { "PREFER_READER", "PREFER_WRITER",
					"PREFER_WRITER_NONRECURSIVE" };
static const char *const rs_names[] = { "free", "read by self", "written by self",
					"read by other", "written by other" };
static const char *const ro_names[] = {
	"rdlock", "tryrdlock", "timedrdlock", "timedrdlock(bad nsec)", "clockrdlock",
	"clockrdlock(bad clock)", "wrlock", "trywrlock", "timedwrlock",
	"timedwrlock(bad nsec)", "clockwrlock", "clockwrlock(bad clock)", "unlock", "destroy",
};

struct rrow {
	enum rop op;
	enum rstate st;
	int expect;
	int alt;   /* a second accepted result (klock's answer to an undefined case), or NONE */
};

#define R(op, st, e, a) { RO_##op, RS_##st, e, a }
static const struct rrow rrows[] = {
	/* free (unlike a mutex's, a malformed deadline is EINVAL even here) */
	R(RD, FREE, 0, NONE), R(TRYRD, FREE, 0, NONE), R(TIMEDRD, FREE, 0, NONE),
	R(TIMEDRD_BADNS, FREE, EINVAL, NONE), R(CLOCKRD, FREE, 0, NONE),
	R(CLOCKRD_BAD, FREE, EINVAL, NONE),
	R(WR, FREE, 0, NONE), R(TRYWR, FREE, 0, NONE), R(TIMEDWR, FREE, 0, NONE),
	R(TIMEDWR_BADNS, FREE, EINVAL, NONE), R(CLOCKWR, FREE, 0, NONE),
	R(CLOCKWR_BAD, FREE, EINVAL, NONE), R(DESTROY, FREE, 0, NONE),
	/* read by self: more read holds are fine; a write lock waits for ourselves (glibc
	 * times out; klock sees the read hold and says EDEADLK) */
	R(RD, RD_SELF, 0, NONE), R(TRYRD, RD_SELF, 0, NONE), R(TIMEDRD, RD_SELF, 0, NONE),
	R(CLOCKRD, RD_SELF, 0, NONE), R(TRYWR, RD_SELF, EBUSY, NONE),
	R(TIMEDWR, RD_SELF, ETIMEDOUT, EDEADLK), R(CLOCKWR, RD_SELF, ETIMEDOUT, EDEADLK),
	R(UNLOCK, RD_SELF, 0, NONE),
	/* written by self */
	R(RD, WR_SELF, EDEADLK, NONE), R(TRYRD, WR_SELF, EBUSY, NONE),
	R(TIMEDRD, WR_SELF, EDEADLK, NONE), R(CLOCKRD, WR_SELF, EDEADLK, NONE),
	R(WR, WR_SELF, EDEADLK, NONE), R(TRYWR, WR_SELF, EBUSY, NONE),
	R(TIMEDWR, WR_SELF, EDEADLK, NONE), R(CLOCKWR, WR_SELF, EDEADLK, NONE),
	R(UNLOCK, WR_SELF, 0, NONE),
	/* read by another thread: readers share, writers wait */
	R(RD, RD_OTHER, 0, NONE), R(TRYRD, RD_OTHER, 0, NONE), R(TIMEDRD, RD_OTHER, 0, NONE),
	R(CLOCKRD, RD_OTHER, 0, NONE),
	R(WR, RD_OTHER, BLOCKS, NONE), R(TRYWR, RD_OTHER, EBUSY, NONE),
	R(TIMEDWR, RD_OTHER, ETIMEDOUT, NONE), R(TIMEDWR_BADNS, RD_OTHER, EINVAL, NONE),
	R(CLOCKWR, RD_OTHER, ETIMEDOUT, NONE), R(CLOCKWR_BAD, RD_OTHER, EINVAL, NONE),
	/* written by another thread */
	R(RD, WR_OTHER, BLOCKS, NONE), R(TRYRD, WR_OTHER, EBUSY, NONE),
	R(TIMEDRD, WR_OTHER, ETIMEDOUT, NONE), R(TIMEDRD_BADNS, WR_OTHER, EINVAL, NONE),
	R(CLOCKRD, WR_OTHER, ETIMEDOUT, NONE), R(CLOCKRD_BAD, WR_OTHER, EINVAL, NONE),
	R(WR, WR_OTHER, BLOCKS, NONE), R(TRYWR, WR_OTHER, EBUSY, NONE),
	R(TIMEDWR, WR_OTHER, ETIMEDOUT, NONE), R(CLOCKWR, WR_OTHER, ETIMEDOUT, NONE),
};
#undef R

static bool r_create(pthread_rwlock_t *rw, enum rkind k, enum rhow h)
{
	static const pthread_rwlock_t nonrec = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
	static const int kinds[] = { PTHREAD_RWLOCK_PREFER_READER_NP,
				     PTHREAD_RWLOCK_PREFER_WRITER_NP,
				     PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP };
	pthread_rwlockattr_t a;

	switch (h) {
	case RH_INIT:
		pthread_rwlockattr_init(&a);
		pthread_rwlockattr_setkind_np(&a, kinds[k]);
		assert_int_equal(pthread_rwlock_init(rw, &a), 0);
		pthread_rwlockattr_destroy(&a);
		return true;
	case RH_STATIC:
		if (k == RK_WRITER)
			return false;
		if (k == RK_NONREC)
			memcpy(rw, &nonrec, sizeof(*rw));
		else
			*rw = (pthread_rwlock_t)PTHREAD_RWLOCK_INITIALIZER;
		return true;
	default:
		if (k != RK_READER)
			return false;
		memset(rw, 0, sizeof(*rw));
		return true;
	}
}

static int r_rd_fn(void *rw)
{
	return pthread_rwlock_rdlock(rw);
}

static int r_wr_fn(void *rw)
{
	return pthread_rwlock_wrlock(rw);
}

static int r_unlock_fn(void *rw)
{
	return pthread_rwlock_unlock(rw);
}

static int r_op(pthread_rwlock_t *rw, enum rop op)
{
	struct timespec bad = { time(NULL) + 1, 1000000000l };
	struct timespec rt = pt_deadline(CLOCK_REALTIME, TIMEOUT_MS);
	struct timespec mono = pt_deadline(CLOCK_MONOTONIC, TIMEOUT_MS);

	switch (op) {
	case RO_RD: return pthread_rwlock_rdlock(rw);
	case RO_TRYRD: return pthread_rwlock_tryrdlock(rw);
	case RO_TIMEDRD: return pthread_rwlock_timedrdlock(rw, &rt);
	case RO_TIMEDRD_BADNS: return pthread_rwlock_timedrdlock(rw, &bad);
	case RO_CLOCKRD: return pthread_rwlock_clockrdlock(rw, CLOCK_MONOTONIC, &mono);
	case RO_CLOCKRD_BAD: return pthread_rwlock_clockrdlock(rw, CLOCK_THREAD_CPUTIME_ID, &mono);
	case RO_WR: return pthread_rwlock_wrlock(rw);
	case RO_TRYWR: return pthread_rwlock_trywrlock(rw);
	case RO_TIMEDWR: return pthread_rwlock_timedwrlock(rw, &rt);
	case RO_TIMEDWR_BADNS: return pthread_rwlock_timedwrlock(rw, &bad);
	case RO_CLOCKWR: return pthread_rwlock_clockwrlock(rw, CLOCK_MONOTONIC, &mono);
	case RO_CLOCKWR_BAD: return pthread_rwlock_clockwrlock(rw, CLOCK_THREAD_CPUTIME_ID, &mono);
	case RO_UNLOCK: return pthread_rwlock_unlock(rw);
	default: return pthread_rwlock_destroy(rw);
	}
}

static void r_run(const struct rrow *row, enum rkind k, enum rhow h)
{
	pthread_rwlock_t rw;
	struct pt_helper holder;
	struct releaser rel = { NULL, false };
	pthread_t rt;
	clockid_t clock = (row->op == RO_CLOCKRD || row->op == RO_CLOCKWR) ? CLOCK_MONOTONIC
									 : CLOCK_REALTIME;
	int64_t t0;
	int got, extra = 0;

	if (!r_create(&rw, k, h))
		return;
	if (row->st == RS_RD_SELF)
		assert_int_equal(pthread_rwlock_rdlock(&rw), 0);
	if (row->st == RS_WR_SELF)
		assert_int_equal(pthread_rwlock_wrlock(&rw), 0);
	if (row->st == RS_RD_OTHER)
		pt_helper_start(&holder, r_rd_fn, r_unlock_fn, &rw);
	if (row->st == RS_WR_OTHER)
		pt_helper_start(&holder, r_wr_fn, r_unlock_fn, &rw);
	if (row->expect == BLOCKS) {
		rel.quit = &holder.quit;
		assert_int_equal(pthread_create(&rt, NULL, release_later, &rel), 0);
	}
	t0 = pt_clock_ns(clock);
	got = r_op(&rw, row->op);
	if ((got != (row->expect == BLOCKS ? 0 : row->expect) && got != row->alt) ||
	    (row->expect == BLOCKS && !atomic_load(&rel.released)))
		fail_msg("rwlock %s (%s, %s), %s: %s returned %d, expected %d", rk_names[k],
			 mh_names[h], rs_names[row->st], preloaded ? "klock" : "glibc",
			 ro_names[row->op], got, row->expect);
	if (got == ETIMEDOUT)
		assert_true(pt_clock_ns(clock) - t0 >= TIMEOUT_MS * 1000000ll - 1000000ll);
	if (row->expect == BLOCKS) {
		assert_int_equal(pthread_join(rt, NULL), 0);
		assert_int_equal(pthread_join(holder.t, NULL), 0);
		assert_int_equal(holder.fin_ret, 0);
	}
	if (got == 0 && row->op != RO_UNLOCK && row->op != RO_DESTROY)
		extra++;
	if ((row->st == RS_RD_SELF || row->st == RS_WR_SELF) && row->op != RO_UNLOCK)
		extra++;
	while (extra-- > 0)
		assert_int_equal(pthread_rwlock_unlock(&rw), 0);
	if (row->st == RS_RD_OTHER || row->st == RS_WR_OTHER) {
		if (row->expect != BLOCKS)
			assert_int_equal(pt_helper_finish(&holder), 0);
	}
	if (row->op != RO_DESTROY)
		assert_int_equal(pthread_rwlock_destroy(&rw), 0);
}

static void test_preload_rwlock_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < PT_ARRAY_SIZE(rrows); i++)
		for (int k = 0; k < RK_COUNT; k++)
			for (int h = 0; h < RH_COUNT; h++)
				r_run(&rrows[i], k, h);
}

/* A thread that reads a lock may read it again while a writer waits for it: POSIX, and
 * glibc's default kind. klock's rwlock prefers the writer; the preload's read tracking is
 * what keeps this from deadlocking. */
static int writer_waits(void *rw)
{
	return pthread_rwlock_wrlock(rw);
}

static void test_preload_rwlock_recursive_read_passes_waiting_writer(void **state)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	struct pt_helper *w = calloc(1, sizeof(*w));
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_rwlock_rdlock(&rw), 0);
	if (preloaded && !getenv_is("KLOCK_RWLOCK", "pthread"))
		assert_int_equal(pt_tag_magic(&rw, 40), PT_MAGIC);
	w->fn = writer_waits;
	w->fin = r_unlock_fn;
	w->arg = &rw;
	sem_init(&w->go, 0, 1);
	sem_init(&w->done, 0, 0);
	sem_init(&w->quit, 0, 1);
	assert_int_equal(pthread_create(&t, NULL, pt_helper_main, w), 0);
	klt_sleep_ms(HOLD_MS); /* the writer is waiting by now (or soon: either way) */
	assert_int_equal(pthread_rwlock_rdlock(&rw), 0);
	assert_int_equal(pthread_rwlock_tryrdlock(&rw), 0);
	assert_int_equal(pthread_rwlock_unlock(&rw), 0);
	assert_int_equal(pthread_rwlock_unlock(&rw), 0);
	assert_int_equal(pthread_rwlock_unlock(&rw), 0);
	assert_int_equal(pthread_join(t, NULL), 0); /* the writer got it, then unlocked */
	assert_int_equal(w->ret, 0);
	assert_int_equal(w->fin_ret, 0);
	free(w);
	assert_int_equal(pthread_rwlock_destroy(&rw), 0);
}

static void test_preload_rwlock_pshared_is_glibc(void **state)
{
	pthread_rwlockattr_t a;
	pthread_rwlock_t rw;

	(void)state;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	assert_int_equal(pthread_rwlock_init(&rw, &a), 0);
	pthread_rwlockattr_destroy(&a);
	assert_int_equal(pthread_rwlock_wrlock(&rw), 0);
	assert_int_equal(pthread_rwlock_tryrdlock(&rw), EBUSY);
	if (preloaded)
		assert_int_not_equal(pt_tag_magic(&rw, 40), PT_MAGIC);
	assert_int_equal(pthread_rwlock_unlock(&rw), 0);
	assert_int_equal(pthread_rwlock_destroy(&rw), 0);
}

/* How many times @needle occurs in the file @fd (read from its start). */
static int count_in_file(int fd, const char *needle)
{
	char buf[8192];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	int count = 0;

	buf[n > 0 ? n : 0] = '\0';
	for (const char *p = buf; (p = strstr(p, needle)) != NULL; p++)
		count++;
	return count;
}

/* A thread exits holding the lock (a read hold, then a write hold), then the lock is
 * destroyed, twice. POSIX leaves it undefined; glibc returns 0 and leaves the lock as it
 * is, and so does the interposer, which reports each lock once (KLOCK_ON_ERROR unset);
 * the lock can be initialised again and used. */
static void test_preload_rwlock_destroy_of_a_lock_a_dead_thread_holds_answers_as_glibc(
	void **state)
{
	static int (*const holds[])(void *) = { r_rd_fn, r_wr_fn };
	bool klock = preloaded && !getenv_is("KLOCK_RWLOCK", "pthread");
	char path[] = "/tmp/klock-test-stderr.XXXXXX";
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	pthread_rwlock_t rws[sizeof(holds) / sizeof(holds[0])]; /* reports are per address */

	(void)state;
	assert_true(fd >= 0 && saved >= 0);
	unlink(path);
	unsetenv("KLOCK_ON_ERROR"); /* the default: report once, answer as glibc */
	for (size_t k = 0; k < sizeof(holds) / sizeof(holds[0]); k++) {
		pthread_rwlock_t *rw = &rws[k];
		struct pt_helper h;
		int err1, err2;

		assert_int_equal(pthread_rwlock_init(rw, NULL), 0);
		pt_helper_start(&h, holds[k], NULL, rw);
		pt_helper_finish(&h); /* exits holding it */
		fflush(stderr);
		dup2(fd, STDERR_FILENO);
		err1 = pthread_rwlock_destroy(rw);
		err2 = pthread_rwlock_destroy(rw);
		fflush(stderr);
		dup2(saved, STDERR_FILENO);
		assert_int_equal(err1, 0);
		assert_int_equal(err2, 0);
		assert_int_equal(pthread_rwlock_init(rw, NULL), 0);
		assert_int_equal(pthread_rwlock_trywrlock(rw), 0);
		assert_int_equal(pthread_rwlock_unlock(rw), 0);
		assert_int_equal(pthread_rwlock_destroy(rw), 0);
	}
	/* one report per lock under the interposer, none from glibc */
	assert_int_equal(count_in_file(fd, "destroy of a held"), klock ? 2 : 0);
	close(fd);
	close(saved);
}

/* ================================ spinlocks ============================================== */

static int s_lock_fn(void *s)
{
	return pthread_spin_lock(s);
}

static int s_unlock_fn(void *s)
{
	return pthread_spin_unlock(s);
}

/* One spinlock through free / held by self / held by another (and released late). */
static void s_cycle(pthread_spinlock_t *s)
{
	struct pt_helper h;
	struct releaser rel = { NULL, false };
	pthread_t rt;

	assert_int_equal(pthread_spin_trylock(s), 0);
	assert_int_equal(pthread_spin_trylock(s), EBUSY);
	assert_int_equal(pthread_spin_unlock(s), 0);
	assert_int_equal(pthread_spin_lock(s), 0);
	assert_int_equal(pthread_spin_unlock(s), 0);
	pt_helper_start(&h, s_lock_fn, s_unlock_fn, (void *)(uintptr_t)s);
	assert_int_equal(pthread_spin_trylock(s), EBUSY);
	rel.quit = &h.quit;
	assert_int_equal(pthread_create(&rt, NULL, release_later, &rel), 0);
	assert_int_equal(pthread_spin_lock(s), 0);
	assert_true(atomic_load(&rel.released));
	assert_int_equal(pthread_spin_unlock(s), 0);
	assert_int_equal(pthread_join(rt, NULL), 0);
	assert_int_equal(pthread_join(h.t, NULL), 0);
	assert_int_equal(pthread_spin_destroy(s), 0);
}

static void test_preload_spinlock_private_and_shared(void **state)
{
	pthread_spinlock_t s;
	uint32_t w;

	(void)state;
	assert_int_equal(pthread_spin_init(&s, PTHREAD_PROCESS_PRIVATE), 0);
	memcpy(&w, (const void *)&s, sizeof(w));
	if (preloaded)
		assert_true(w & 0x8000u); /* a klock ticket lock */
	s_cycle(&s);
	assert_int_equal(pthread_spin_init(&s, PTHREAD_PROCESS_SHARED), 0);
	memcpy(&w, (const void *)&s, sizeof(w));
	assert_true(w <= 1); /* glibc's protocol (x86_64: 1 is free), also under the preload */
	s_cycle(&s);
}

/* ================================ undefined behaviour, as glibc ========================== */

/* POSIX leaves relock and foreign or double unlock of a NORMAL/DEFAULT mutex, and unlock of
 * a free spinlock, undefined. glibc: relock deadlocks; unlock returns 0 and leaves the lock
 * free (a foreign hold is released). A program that runs under glibc must not be stopped
 * by the interposer for them (it reports each lock once; KLOCK_ON_ERROR=abort aborts). */
static void ub_unlock_as_glibc(pthread_mutex_t *m, const char *how)
{
	struct pt_helper h;
	int r1, r2, r3;

	r1 = pthread_mutex_unlock(m);            /* free */
	r2 = pthread_mutex_trylock(m);           /* ... and still free */
	if (r2 == 0)
		pthread_mutex_unlock(m);
	pt_helper_start(&h, m_lock_fn, NULL, m); /* held by another thread */
	r3 = pthread_mutex_unlock(m);            /* released */
	if (r1 != 0 || r2 != 0 || r3 != 0 || pthread_mutex_trylock(m) != 0)
		fail_msg("mutex %s, %s: unlock free %d, then trylock %d, unlock foreign %d "
			 "(expected 0, 0, 0, then free)", how, preloaded ? "klock" : "glibc", r1, r2,
			 r3);
	assert_int_equal(pthread_mutex_unlock(m), 0);
	pt_helper_finish(&h);
	pthread_mutex_destroy(m); /* glibc's counts users: after the extra unlocks, EBUSY */
}

static void test_preload_normal_mutex_and_spinlock_unlock_misuse_answers_as_glibc(void **state)
{
	pthread_spinlock_t s;
	pthread_mutex_t m;
	struct pt_helper h;

	(void)state;
	unsetenv("KLOCK_ON_ERROR"); /* the default: report once, answer as glibc */
	for (int k = MK_NORMAL; k <= MK_DEFAULT; k++)
		for (int how = 0; how < MH_COUNT; how++)
			if (m_create(&m, k, how))
				ub_unlock_as_glibc(&m, mh_names[how]);
	assert_int_equal(pthread_spin_init(&s, PTHREAD_PROCESS_PRIVATE), 0);
	assert_int_equal(pthread_spin_unlock(&s), 0);
	assert_int_equal(pthread_spin_trylock(&s), 0);
	assert_int_equal(pthread_spin_unlock(&s), 0);
	pt_helper_start(&h, s_lock_fn, NULL, (void *)(uintptr_t)&s);
	assert_int_equal(pthread_spin_unlock(&s), 0);
	assert_int_equal(pthread_spin_trylock(&s), 0);
	assert_int_equal(pthread_spin_unlock(&s), 0);
	pt_helper_finish(&h);
	assert_int_equal(pthread_spin_destroy(&s), 0);
}

/* POSIX leaves an rwlock unlock by a thread that holds nothing undefined; glibc returns 0.
 * The interposer answers 0 too, reports the lock once, and leaves it as it was: a free
 * lock stays free, one another thread write-holds stays write-held. (glibc takes both
 * for a read unlock and corrupts its reader count: there only the answer is checked; the
 * pcpu_rwsem kind cannot tell a free lock from a read-held one: its foreign-writer case
 * only.) Before: kl_rwlock reported "read unlock of a lock not read-held" and aborted. */
static void test_preload_rwlock_unlock_by_a_thread_holding_nothing_answers_as_glibc(
	void **state)
{
	static const int kinds[] = { PTHREAD_RWLOCK_PREFER_READER_NP,
				     PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP };
	bool klock = preloaded && !getenv_is("KLOCK_RWLOCK", "pthread");
	bool pcpu = klock && getenv_is("KLOCK_RWLOCK", "pcpu_rwsem");

	(void)state;
	unsetenv("KLOCK_ON_ERROR"); /* the default: report once, answer as glibc */
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		pthread_rwlockattr_t a;
		pthread_rwlock_t free_rw, held_rw;
		struct pt_helper h;

		assert_int_equal(pthread_rwlockattr_init(&a), 0);
		assert_int_equal(pthread_rwlockattr_setkind_np(&a, kinds[k]), 0);
		assert_int_equal(pthread_rwlock_init(&free_rw, &a), 0);
		if (!pcpu) {
			assert_int_equal(pthread_rwlock_unlock(&free_rw), 0);
			if (klock) { /* still free, not corrupted */
				assert_int_equal(pthread_rwlock_trywrlock(&free_rw), 0);
				assert_int_equal(pthread_rwlock_unlock(&free_rw), 0);
				assert_int_equal(pthread_rwlock_destroy(&free_rw), 0);
			}
		}
		if (klock) {
			assert_int_equal(pthread_rwlock_init(&held_rw, &a), 0);
			pt_helper_start(&h, r_wr_fn, r_unlock_fn, &held_rw);
			assert_int_equal(pthread_rwlock_unlock(&held_rw), 0);
			assert_int_equal(pthread_rwlock_tryrdlock(&held_rw), EBUSY); /* still held */
			assert_int_equal(pthread_rwlock_trywrlock(&held_rw), EBUSY);
			assert_int_equal(pt_helper_finish(&h), 0); /* the writer's own unlock */
			assert_int_equal(pthread_rwlock_trywrlock(&held_rw), 0);
			assert_int_equal(pthread_rwlock_unlock(&held_rw), 0);
			assert_int_equal(pthread_rwlock_destroy(&held_rw), 0);
		}
		pthread_rwlockattr_destroy(&a);
	}
}

/* How long a relocking child must stay blocked before the test kills it. */
#define RELOCK_BLOCKED_MS 300

/* A child relocks a mutex of kind @k made the way @how says; it says so on @fd first. */
static void ub_relock_child(enum mkind k, enum mhow how, int fd)
{
	pthread_mutex_t m;

	alarm(klt_watchdog_s(60)); /* never outlive the test */
	if (!m_create(&m, k, how) || pthread_mutex_lock(&m) != 0)
		_exit(2);
	if (write(fd, "r", 1) != 1)
		_exit(3);
	pthread_mutex_lock(&m);
	_exit(4); /* the relock returned */
}

static void test_preload_normal_mutex_relock_deadlocks(void **state)
{
	(void)state;
	unsetenv("KLOCK_ON_ERROR");
	for (int k = MK_NORMAL; k <= MK_DEFAULT; k++)
		for (int how = 0; how < MH_COUNT; how++) {
			int fd[2], status;
			char c;
			pid_t pid;

			if (k != MK_NORMAL && how == MH_ZERO)
				continue;
			assert_int_equal(pipe(fd), 0);
			pid = fork();
			assert_true(pid >= 0);
			if (pid == 0)
				ub_relock_child(k, how, fd[1]);
			assert_int_equal(read(fd[0], &c, 1), 1);
			klt_sleep_ms(RELOCK_BLOCKED_MS);
			if (waitpid(pid, &status, WNOHANG) != 0)
				fail_msg("mutex %s (%s), %s: the relock did not block (child %s %d)",
					 mk_names[k], mh_names[how], preloaded ? "klock" : "glibc",
					 WIFSIGNALED(status) ? "killed by signal" : "exited",
					 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			kill(pid, SIGKILL);
			assert_int_equal(waitpid(pid, &status, 0), pid);
			assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
			close(fd[0]);
			close(fd[1]);
		}
}

/* KLOCK_ON_ERROR=abort still stops at the misuse (klock's way of finding the bug). */
static void test_preload_misuse_aborts_with_klock_on_error_abort(void **state)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	int status;
	pid_t pid;

	(void)state;
	if (!preloaded || getenv_is("KLOCK_MUTEX", "pthread"))
		skip(); /* glibc never aborts here */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("KLOCK_ON_ERROR", "abort", 1);
		pthread_mutex_unlock(&m);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

/* ================================ far-future deadlines ================================== */

/* How long a timed call with a far-future deadline must stay blocked before the test
 * releases it (it returned ETIMEDOUT at once when the deadline's nanoseconds wrapped). */
#define STILL_BLOCKED_MS 300

/* The largest valid deadline, the first past 2^64 ns, the first past 2^63 ns. */
static const struct timespec far_deadlines[] = {
	{ LONG_MAX, 999999999 }, { 18446744074l, 0 }, { 9223372037l, 0 },
};

enum far_op { FO_MUTEX_TIMED, FO_MUTEX_CLOCK_RT, FO_MUTEX_CLOCK_MONO, FO_RW_TIMEDRD,
	      FO_RW_TIMEDWR, FO_RW_CLOCKRD_RT, FO_RW_CLOCKWR_MONO, FO_COND_TIMED_RT,
	      FO_COND_TIMED_MONO, FO_COND_CLOCK_RT, FO_COND_CLOCK_MONO, FO_COUNT };
static const char *const fo_names[] = {
	"pthread_mutex_timedlock", "pthread_mutex_clocklock(REALTIME)",
	"pthread_mutex_clocklock(MONOTONIC)", "pthread_rwlock_timedrdlock",
	"pthread_rwlock_timedwrlock", "pthread_rwlock_clockrdlock(REALTIME)",
	"pthread_rwlock_clockwrlock(MONOTONIC)", "pthread_cond_timedwait(REALTIME)",
	"pthread_cond_timedwait(MONOTONIC attr)", "pthread_cond_clockwait(REALTIME)",
	"pthread_cond_clockwait(MONOTONIC)",
};

struct far {
	enum far_op op;
	const struct timespec *dl;
	pthread_mutex_t m;
	pthread_rwlock_t rw;
	pthread_cond_t c;
	bool go;              /* the condvar's predicate, under m */
	_Atomic bool done;
	int ret;
};

static int far_cond(struct far *f)
{
	int err = 0;

	pthread_mutex_lock(&f->m);
	while (!f->go && err == 0) {
		if (f->op == FO_COND_TIMED_RT || f->op == FO_COND_TIMED_MONO)
			err = pthread_cond_timedwait(&f->c, &f->m, f->dl);
		else
			err = pthread_cond_clockwait(&f->c, &f->m, f->op == FO_COND_CLOCK_RT ?
						     CLOCK_REALTIME : CLOCK_MONOTONIC, f->dl);
	}
	pthread_mutex_unlock(&f->m);
	return err;
}

static int far_call(struct far *f)
{
	int err;

	switch (f->op) {
	case FO_MUTEX_TIMED: err = pthread_mutex_timedlock(&f->m, f->dl); break;
	case FO_MUTEX_CLOCK_RT: err = pthread_mutex_clocklock(&f->m, CLOCK_REALTIME, f->dl); break;
	case FO_MUTEX_CLOCK_MONO:
		err = pthread_mutex_clocklock(&f->m, CLOCK_MONOTONIC, f->dl);
		break;
	case FO_RW_TIMEDRD: err = pthread_rwlock_timedrdlock(&f->rw, f->dl); break;
	case FO_RW_TIMEDWR: err = pthread_rwlock_timedwrlock(&f->rw, f->dl); break;
	case FO_RW_CLOCKRD_RT:
		err = pthread_rwlock_clockrdlock(&f->rw, CLOCK_REALTIME, f->dl);
		break;
	case FO_RW_CLOCKWR_MONO:
		err = pthread_rwlock_clockwrlock(&f->rw, CLOCK_MONOTONIC, f->dl);
		break;
	default: return far_cond(f);
	}
	if (err == 0 && f->op <= FO_MUTEX_CLOCK_MONO)
		pthread_mutex_unlock(&f->m);
	else if (err == 0)
		pthread_rwlock_unlock(&f->rw);
	return err;
}

static void *far_main(void *p)
{
	struct far *f = p;

	f->ret = far_call(f);
	atomic_store(&f->done, true);
	return NULL;
}

static void far_run(enum far_op op, const struct timespec *dl)
{
	struct far *f = calloc(1, sizeof(*f));
	pthread_condattr_t ca;
	pthread_t t;

	f->op = op;
	f->dl = dl;
	assert_int_equal(pthread_mutex_init(&f->m, NULL), 0);
	assert_int_equal(pthread_rwlock_init(&f->rw, NULL), 0);
	pthread_condattr_init(&ca);
	if (op == FO_COND_TIMED_MONO)
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	assert_int_equal(pthread_cond_init(&f->c, &ca), 0);
	pthread_condattr_destroy(&ca);
	if (op <= FO_MUTEX_CLOCK_MONO)
		assert_int_equal(pthread_mutex_lock(&f->m), 0);
	else if (op <= FO_RW_CLOCKWR_MONO)
		assert_int_equal(pthread_rwlock_wrlock(&f->rw), 0);
	assert_int_equal(pthread_create(&t, NULL, far_main, f), 0);
	klt_sleep_ms(STILL_BLOCKED_MS);
	if (atomic_load(&f->done))
		fail_msg("%s, deadline { %lld, %ld }, %s: returned %d at once", fo_names[op],
			 (long long)dl->tv_sec, dl->tv_nsec, preloaded ? "klock" : "glibc", f->ret);
	if (op <= FO_MUTEX_CLOCK_MONO) {
		assert_int_equal(pthread_mutex_unlock(&f->m), 0);
	} else if (op <= FO_RW_CLOCKWR_MONO) {
		assert_int_equal(pthread_rwlock_unlock(&f->rw), 0);
	} else {
		assert_int_equal(pthread_mutex_lock(&f->m), 0);
		f->go = true;
		assert_int_equal(pthread_cond_signal(&f->c), 0);
		assert_int_equal(pthread_mutex_unlock(&f->m), 0);
	}
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(f->ret, 0);
	assert_int_equal(pthread_cond_destroy(&f->c), 0);
	assert_int_equal(pthread_rwlock_destroy(&f->rw), 0);
	assert_int_equal(pthread_mutex_destroy(&f->m), 0);
	free(f);
}

/* Any valid timespec is a deadline: tv_sec up to LONG_MAX waits (practically forever). */
static void test_preload_far_future_deadlines_do_not_time_out_at_once(void **state)
{
	(void)state;
	for (int op = 0; op < FO_COUNT; op++)
		for (size_t i = 0; i < PT_ARRAY_SIZE(far_deadlines); i++)
			far_run(op, &far_deadlines[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_preload_mutex_table),
		cmocka_unit_test(test_preload_mutex_is_klock_and_keeps_static_type),
		cmocka_unit_test(test_preload_robust_mutex_owner_death_is_glibc),
		cmocka_unit_test(test_preload_consistent_and_ceiling_fail_on_plain_mutexes),
		cmocka_unit_test(test_preload_pi_mutex_is_glibc),
		cmocka_unit_test(test_preload_rwlock_table),
		cmocka_unit_test(test_preload_rwlock_recursive_read_passes_waiting_writer),
		cmocka_unit_test(test_preload_rwlock_pshared_is_glibc),
		cmocka_unit_test(
			test_preload_rwlock_destroy_of_a_lock_a_dead_thread_holds_answers_as_glibc),
		cmocka_unit_test(test_preload_spinlock_private_and_shared),
		cmocka_unit_test(test_preload_far_future_deadlines_do_not_time_out_at_once),
		cmocka_unit_test(test_preload_normal_mutex_and_spinlock_unlock_misuse_answers_as_glibc),
		cmocka_unit_test(test_preload_rwlock_unlock_by_a_thread_holding_nothing_answers_as_glibc),
		cmocka_unit_test(test_preload_normal_mutex_relock_deadlocks),
		cmocka_unit_test(test_preload_misuse_aborts_with_klock_on_error_abort),
	};

	preloaded = pt_preloaded();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
