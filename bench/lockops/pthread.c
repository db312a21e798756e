/* SPDX-License-Identifier: BSD-2-Clause */
/* bench/lockops/pthread.c - glibc's locks: the baselines (and torture's controls). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include <klock/config.h>

#include "lockops.h"

#if KLOCK_TSAN
/*
 * ThreadSanitizer (gcc 12's libtsan, clang 14's runtime) intercepts pthread_*_timedlock but
 * not glibc's pthread_*_clocklock: a lock taken through clocklock is invisible to it, and its
 * unlock is then reported as "unlock of an unlocked mutex". In TSan builds the timed
 * adapters convert the CLOCK_MONOTONIC deadline to CLOCK_REALTIME and use the intercepted
 * calls (a clock step during the wait could move the deadline: fine for a sanitizer run).
 */
static struct timespec realtime_deadline(const struct timespec *mono)
{
	struct timespec now_m, now_r, r;
	long long ns;

	clock_gettime(CLOCK_MONOTONIC, &now_m);
	clock_gettime(CLOCK_REALTIME, &now_r);
	ns = (long long)(mono->tv_sec - now_m.tv_sec) * 1000000000ll +
	     (mono->tv_nsec - now_m.tv_nsec);
	ns = ns > 0 ? ns : 0;
	ns += (long long)now_r.tv_nsec;
	r.tv_sec = now_r.tv_sec + (time_t)(ns / 1000000000ll);
	r.tv_nsec = (long)(ns % 1000000000ll);
	return r;
}

static int tsan_mutex_clocklock(pthread_mutex_t *m, clockid_t clk, const struct timespec *abs)
{
	struct timespec r = realtime_deadline(abs);

	(void)clk;
	return pthread_mutex_timedlock(m, &r);
}

static int tsan_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t clk,
				   const struct timespec *abs)
{
	struct timespec r = realtime_deadline(abs);

	(void)clk;
	return pthread_rwlock_timedwrlock(l, &r);
}

static int tsan_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t clk,
				   const struct timespec *abs)
{
	struct timespec r = realtime_deadline(abs);

	(void)clk;
	return pthread_rwlock_timedrdlock(l, &r);
}

#define pthread_mutex_clocklock tsan_mutex_clocklock
#define pthread_rwlock_clockwrlock tsan_rwlock_clockwrlock
#define pthread_rwlock_clockrdlock tsan_rwlock_clockrdlock
#endif

static int mutex_init(void *l)
{
	return pthread_mutex_init(l, NULL);
}

static int mutex_adaptive_init(void *l)
{
	pthread_mutexattr_t a;
	int r;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
	r = pthread_mutex_init(l, &a);
	pthread_mutexattr_destroy(&a);
	return r;
}

static void mutex_destroy(void *l)
{
	pthread_mutex_destroy(l);
}

static void mutex_lock(void *l, void *ts)
{
	(void)ts;
	pthread_mutex_lock(l);
}

static void mutex_unlock(void *l, void *ts)
{
	(void)ts;
	pthread_mutex_unlock(l);
}

static bool mutex_trylock(void *l, void *ts)
{
	(void)ts;
	return pthread_mutex_trylock(l) == 0;
}

static int mutex_timedlock(void *l, void *ts, const struct timespec *abs)
{
	(void)ts;
	return pthread_mutex_clocklock(l, CLOCK_MONOTONIC, abs);
}

LOCKOPS_PAIR_LOOP(mutex_wloop, pthread_mutex_t, pthread_mutex_lock(L), pthread_mutex_unlock(L))

static const struct lockops pthread_mutex_ops = {
	.name = "pthread_mutex",
	.family = "pthread",
	.summary = "glibc pthread_mutex_t, default type (futex, no spinning)",
	.size = sizeof(pthread_mutex_t),
	.init = mutex_init,
	.destroy = mutex_destroy,
	.write_lock = mutex_lock,
	.write_unlock = mutex_unlock,
	.write_trylock = mutex_trylock,
	.write_timedlock = mutex_timedlock,
	.write_pair_loop = mutex_wloop,
};
LOCKOPS_REGISTER(pthread_mutex_ops)

static const struct lockops pthread_mutex_adaptive_ops = {
	.name = "pthread_mutex_adaptive",
	.family = "pthread",
	.summary = "glibc PTHREAD_MUTEX_ADAPTIVE_NP (bounded spin, then futex)",
	.size = sizeof(pthread_mutex_t),
	.init = mutex_adaptive_init,
	.destroy = mutex_destroy,
	.write_lock = mutex_lock,
	.write_unlock = mutex_unlock,
	.write_trylock = mutex_trylock,
	.write_timedlock = mutex_timedlock,
};
LOCKOPS_REGISTER(pthread_mutex_adaptive_ops)

static int rw_init(void *l)
{
	return pthread_rwlock_init(l, NULL);
}

static void rw_destroy(void *l)
{
	pthread_rwlock_destroy(l);
}

static void rw_wrlock(void *l, void *ts)
{
	(void)ts;
	pthread_rwlock_wrlock(l);
}

static void rw_rdlock(void *l, void *ts)
{
	(void)ts;
	pthread_rwlock_rdlock(l);
}

static void rw_unlock(void *l, void *ts)
{
	(void)ts;
	pthread_rwlock_unlock(l);
}

static bool rw_trywrlock(void *l, void *ts)
{
	(void)ts;
	return pthread_rwlock_trywrlock(l) == 0;
}

static bool rw_tryrdlock(void *l, void *ts)
{
	(void)ts;
	return pthread_rwlock_tryrdlock(l) == 0;
}

static int rw_timedwrlock(void *l, void *ts, const struct timespec *abs)
{
	(void)ts;
	return pthread_rwlock_clockwrlock(l, CLOCK_MONOTONIC, abs);
}

static int rw_timedrdlock(void *l, void *ts, const struct timespec *abs)
{
	(void)ts;
	return pthread_rwlock_clockrdlock(l, CLOCK_MONOTONIC, abs);
}

LOCKOPS_PAIR_LOOP(rw_rloop, pthread_rwlock_t, pthread_rwlock_rdlock(L), pthread_rwlock_unlock(L))
LOCKOPS_PAIR_LOOP(rw_wloop, pthread_rwlock_t, pthread_rwlock_wrlock(L), pthread_rwlock_unlock(L))

static const struct lockops pthread_rwlock_ops = {
	.name = "pthread_rwlock",
	.family = "pthread",
	.summary = "glibc pthread_rwlock_t, default (reader-preferring, one shared counter)",
	.flags = LOCKOPS_RW,
	.size = sizeof(pthread_rwlock_t),
	.init = rw_init,
	.destroy = rw_destroy,
	.write_lock = rw_wrlock,
	.write_unlock = rw_unlock,
	.write_trylock = rw_trywrlock,
	.write_timedlock = rw_timedwrlock,
	.read_lock = rw_rdlock,
	.read_unlock = rw_unlock,
	.read_trylock = rw_tryrdlock,
	.read_timedlock = rw_timedrdlock,
	.read_pair_loop = rw_rloop,
	.write_pair_loop = rw_wloop,
};
LOCKOPS_REGISTER(pthread_rwlock_ops)

static int spin_init(void *l)
{
	return pthread_spin_init(l, PTHREAD_PROCESS_PRIVATE);
}

static void spin_destroy(void *l)
{
	pthread_spin_destroy(l);
}

static void spin_lock(void *l, void *ts)
{
	(void)ts;
	pthread_spin_lock(l);
}

static void spin_unlock(void *l, void *ts)
{
	(void)ts;
	pthread_spin_unlock(l);
}

static bool spin_trylock(void *l, void *ts)
{
	(void)ts;
	return pthread_spin_trylock(l) == 0;
}

static const struct lockops pthread_spin_ops = {
	.name = "pthread_spin",
	.family = "pthread",
	.summary = "glibc pthread_spinlock_t (test-and-set, spins forever)",
	.flags = LOCKOPS_SPIN,
	.size = sizeof(pthread_spinlock_t),
	.init = spin_init,
	.destroy = spin_destroy,
	.write_lock = spin_lock,
	.write_unlock = spin_unlock,
	.write_trylock = spin_trylock,
};
LOCKOPS_REGISTER(pthread_spin_ops)

/*
 * pthread_mutex_table: the hashed lock table a user would write with glibc - a fixed
 * array of mutexes, one chosen by a Fibonacci hash of the key's cache line. The baseline
 * for kl_hashlock (LOCKOPS_KEYED); write_lock/unlock take the stripe of key NULL.
 */
#define PT_TABLE_SHIFT 6                  /* 2^6 = 64 stripes */
#define PT_TABLE_STRIPES (1u << PT_TABLE_SHIFT)
#define PT_LINE_SHIFT 6                   /* keys in one 64-byte line share a stripe */
#define PT_FIB 11400714819323198485ull    /* 2^64 / golden ratio */

struct pt_table {
	pthread_mutex_t m[PT_TABLE_STRIPES];
};

static pthread_mutex_t *pt_stripe(void *l, const void *key)
{
	uint64_t h = ((uint64_t)(uintptr_t)key >> PT_LINE_SHIFT) * PT_FIB;

	return &((struct pt_table *)l)->m[h >> (64 - PT_TABLE_SHIFT)];
}

static int table_init(void *l)
{
	struct pt_table *t = l;

	for (unsigned i = 0; i < PT_TABLE_STRIPES; i++) {
		int r = pthread_mutex_init(&t->m[i], NULL);

		if (r != 0) {
			while (i-- > 0)
				pthread_mutex_destroy(&t->m[i]);
			return r;
		}
	}
	return 0;
}

static void table_destroy(void *l)
{
	struct pt_table *t = l;

	for (unsigned i = 0; i < PT_TABLE_STRIPES; i++)
		pthread_mutex_destroy(&t->m[i]);
}

static void table_key_lock(void *l, void *ts, const void *key)
{
	(void)ts;
	pthread_mutex_lock(pt_stripe(l, key));
}

static void table_key_unlock(void *l, void *ts, const void *key)
{
	(void)ts;
	pthread_mutex_unlock(pt_stripe(l, key));
}

static void table_lock(void *l, void *ts)
{
	table_key_lock(l, ts, NULL);
}

static void table_unlock(void *l, void *ts)
{
	table_key_unlock(l, ts, NULL);
}

static bool table_trylock(void *l, void *ts)
{
	(void)ts;
	return pthread_mutex_trylock(pt_stripe(l, NULL)) == 0;
}

static const struct lockops pthread_mutex_table_ops = {
	.name = "pthread_mutex_table",
	.family = "pthread",
	.summary = "64 glibc mutexes hashed by key address: the lock table you would write",
	.flags = LOCKOPS_KEYED,
	.size = sizeof(struct pt_table),
	.init = table_init,
	.destroy = table_destroy,
	.write_lock = table_lock,
	.write_unlock = table_unlock,
	.write_trylock = table_trylock,
	.key_lock = table_key_lock,
	.key_unlock = table_key_unlock,
};
LOCKOPS_REGISTER(pthread_mutex_table_ops)
