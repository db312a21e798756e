/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/lockops/lockops.h - one adapter per lock, described once, driven by both klbench
 * (bench/) and kltorture (tests/torture/). The Linux locktorture ops table, extended with
 * what a benchmark and a torture test need to know about a lock.
 *
 * An adapter file (one per lock family: klock_<prim>.c, pthread.c, ck.c, urcu.c, busted.c)
 * defines `static const struct lockops` values and registers each with LOCKOPS_REGISTER;
 * registration runs from a constructor, so the drivers link this library whole and find
 * adapters by name. Peers (pthread, ck, urcu, and the C++ peers absl, std, tbb) are
 * compiled only where their library (or a C++ compiler) exists; a C++ adapter file
 * includes this header inside extern "C" and uses the same macros.
 *
 * Calling convention: the driver allocates `size` bytes for the lock (aligned to
 * LOCKOPS_ALIGN) and, per thread and lock, `tsize` bytes of thread state, zero-filled,
 * passed to every lock call and its matching unlock call. A driver allocates it once
 * per (thread, lock) and keeps it valid and unmoved until that thread's thread_leave
 * returns: an adapter may keep per-acquisition state there (an MCS node, an rmlock
 * tracker, a pcpu_rwsem slot token) or a per-thread registration made on first use
 * (ck_brlock's reader record, unregistered in thread_leave). Exclusive-only locks leave
 * the read_* members NULL: drivers then use the write side for readers too.
 *
 * Keyed locks (LOCKOPS_KEYED: kl_hashlock) also lock by key: key_lock(lock, ts, key)
 * takes whatever protects `key` (an address); write_lock/write_unlock take one fixed key,
 * so every driver can still treat them as a plain exclusive lock.
 */
#ifndef LOCKOPS_H
#define LOCKOPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Alignment the drivers give lock objects (two cache lines: no false sharing with data). */
#define LOCKOPS_ALIGN 128

/* Flags. */
#define LOCKOPS_RW (1u << 0)            /* has a real shared (read) side */
#define LOCKOPS_SPIN (1u << 1)          /* never sleeps: waiters spin (or yield) */
#define LOCKOPS_NO_EXCLUSION (1u << 2)  /* readers do not exclude writers (urcu read side:
                                         * a floor, not a lock); torture skips it */
#define LOCKOPS_BUSTED (1u << 3)        /* deliberately broken: drivers must catch it */
#define LOCKOPS_READ_BIASED (1u << 4)   /* cheap readers, expensive writers (rmlock ...) */
#define LOCKOPS_NO_RECURSE_READ (1u << 5) /* a read lock must not be nested */
#define LOCKOPS_READ_RETRY (1u << 6)    /* optimistic readers (seqlock): readers do not
                                         * exclude writers, a read section may have to run
                                         * again - see read_retry */
#define LOCKOPS_KEYED (1u << 7)         /* key_lock/key_unlock exist (hashed lock table) */

struct lockops {
	const char *name;      /* "kl_mutex", "pthread_mutex", "ck_brlock", ... */
	const char *family;    /* "klock", "pthread", "ck", "urcu", "test" */
	const char *summary;   /* one line for `klbench list` */
	unsigned flags;
	size_t size;           /* bytes of lock state */
	size_t tsize;          /* bytes of per-thread, per-acquisition state (0: none) */

	int (*init)(void *lock);                 /* 0 or an errno */
	void (*destroy)(void *lock);
	void (*thread_enter)(void *lock);        /* before a thread's first use (NULL ok) */
	void (*thread_leave)(void *lock);        /* after its last use, before its thread
						  * state is freed (NULL ok) */

	void (*write_lock)(void *lock, void *ts);
	void (*write_unlock)(void *lock, void *ts);
	bool (*write_trylock)(void *lock, void *ts);                    /* NULL: none */
	int (*write_timedlock)(void *lock, void *ts, const struct timespec *abs); /* NULL */

	void (*read_lock)(void *lock, void *ts);                         /* NULL: exclusive */
	void (*read_unlock)(void *lock, void *ts);
	bool (*read_trylock)(void *lock, void *ts);                      /* NULL: none */
	int (*read_timedlock)(void *lock, void *ts, const struct timespec *abs); /* NULL */

	/*
	 * LOCKOPS_READ_RETRY only (NULL otherwise). A seqlock reader holds nothing: it
	 * snapshots a sequence (read_lock), copies the data, and asks whether a writer ran
	 * meanwhile. Drivers run a read section as
	 *     do { read_lock(l, ts); SECTION; } while (read_retry(l, ts));
	 *     read_unlock(l, ts);
	 * where SECTION only copies shared data (relaxed atomics, no side effects), and
	 * judge the copy only after read_retry() returned false: kltorture checks "no
	 * writer inside, counter consistent" on the validated copy (a torn copy that was
	 * accepted is the violation), klbench counts validated reads as throughput and
	 * reports retries per read as the price.
	 */
	bool (*read_retry)(void *lock, void *ts);

	void (*key_lock)(void *lock, void *ts, const void *key);        /* LOCKOPS_KEYED */
	void (*key_unlock)(void *lock, void *ts, const void *key);
	/* LOCKOPS_KEYED, optional (NULL: none): lock n keys at once (duplicates allowed)
	 * without deadlocking against other keys_lock callers - kl_hashlock_lock2 (n == 2)
	 * and kl_hashlock_lockn; keys_unlock undoes it with the same keys. */
	void (*keys_lock)(void *lock, void *ts, const void *const *keys, size_t n);
	void (*keys_unlock)(void *lock, void *ts, const void *const *keys, size_t n);

	/*
	 * Optional (NULL: none): @n uncontended read (write) lock+unlock pairs in a loop
	 * inside the adapter, the lock's calls compiled as an application compiles them
	 * (header-inline fast paths inlined, urcu with _LGPL_SOURCE, library calls as
	 * calls). `klbench latency` times a pair this way too: without the ops table's
	 * indirect call per pair, which costs about as much as the pairs being compared.
	 */
	void (*read_pair_loop)(void *lock, void *ts, unsigned long n);
	void (*write_pair_loop)(void *lock, void *ts, unsigned long n);

	/* Optional (NULL: none): a reader-bias policy's counters since init - revocations
	 * and ns spent unbiased (kl_rmlock_bias_stats). klbench reports their change over
	 * the measured interval. */
	void (*bias)(const void *lock, uint64_t *revocations, uint64_t *unbiased_ns);
};

/* Defines `static void NAME(void *lock, void *ts, unsigned long n)` running n pairs of
 * LOCK_STMT; UNLOCK_STMT; with an empty section (a compiler barrier) between them. The
 * statements see the lock as `L` (a TYPE *) and the thread state as `T` (a void *). */
#define LOCKOPS_PAIR_LOOP(NAME, TYPE, LOCK_STMT, UNLOCK_STMT)                          \
	static void NAME(void *lock_, void *ts_, unsigned long n_)                      \
	{                                                                               \
		TYPE *L = (TYPE *)lock_;                                                \
		void *T = ts_;                                                          \
                                                                                        \
		(void)L;                                                                \
		(void)T;                                                                \
		for (unsigned long i_ = 0; i_ < n_; i_++) {                             \
			LOCK_STMT;                                                      \
			__asm__ __volatile__("" ::: "memory");                          \
			UNLOCK_STMT;                                                    \
		}                                                                       \
	}

void lockops_register(const struct lockops *ops);

/* Registered adapters, sorted by family (klock first) then name. */
size_t lockops_count(void);
const struct lockops *lockops_at(size_t i);
const struct lockops *lockops_find(const char *name);

#define LOCKOPS_REGISTER(ops)                                                        \
	__attribute__((constructor)) static void lockops_reg_##ops(void)             \
	{                                                                            \
		lockops_register(&(ops));                                            \
	}

#endif /* LOCKOPS_H */
