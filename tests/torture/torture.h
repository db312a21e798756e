/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/torture/torture.h - kltorture's internals: one run of one lock.
 *
 * kltorture is Linux locktorture's idea in userspace: many threads take one lock through its
 * adapter (bench/lockops/lockops.h), and every critical section checks that the lock really
 * excludes what it claims to exclude. Around that, perturbations push the lock into its
 * rare paths: random hold and think times, rare long holds, stutter (everyone pauses, then
 * everyone restarts at once), more threads than CPUs, CPU affinity shuffles (also from inside
 * read sections), signal storms (EINTR on every sleep), thread churn, try/timed variants.
 *
 * Files: kltorture.c (options, driver, locktorture-style report), engine.c (workers and the
 * in-section checks), perturb.c (stutter, shuffler, signal storm, churn), watchdog.c (hung
 * runs), selftest.c (the harness proves it catches a broken lock and a hang).
 */
#ifndef KLTORTURE_H
#define KLTORTURE_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lockops.h"

/* Keeps hot shared fields on their own cache lines (adjacent-line prefetch: 128). */
#define KT_LINE 128
#define KT_ALIGNED __attribute__((aligned(KT_LINE)))

#define KT_NSEC_PER_SEC 1000000000ll
#define KT_NSEC_PER_MSEC 1000000ll
#define KT_NSEC_PER_USEC 1000ll

/* Keys a keyed lock (LOCKOPS_KEYED) is tortured with: more than one stripe, few enough
 * that two threads often want the same one. */
#define KT_NKEYS 16
/* Most keys one keys_lock section takes (kl_hashlock_lockn; lock2 for two). */
#define KT_MULTIKEY_MAX 4

/* Perturbations (bits of kt_config.perturb). */
enum {
	KT_P_DELAYS = 1u << 0,    /* random hold and think times (busy and sleeping) */
	KT_P_LONGHOLD = 1u << 1,  /* rare long holds: massive contention */
	KT_P_STUTTER = 1u << 2,   /* all threads pause and restart together */
	KT_P_SHUFFLE = 1u << 3,   /* affinity shuffles, also from inside read sections */
	KT_P_SIGNALS = 1u << 4,   /* signal storm: EINTR on every sleep */
	KT_P_CHURN = 1u << 5,     /* threads exit and new ones start mid-run */
	KT_P_TRY = 1u << 6,       /* trylock variants mixed in (when the adapter has them) */
	KT_P_TIMED = 1u << 7,     /* timed variants mixed in (when the adapter has them) */
	KT_P_PHASES = 1u << 8,    /* write-rate phases: no writes, sparse writes, all writes */
	KT_P_FLIPS = 1u << 9,     /* a phase of short write bursts between quiet stretches */
	KT_P_ALL = (1u << 10) - 1,
};

/* What a thread is doing, for the watchdog's report. */
enum kt_state {
	KT_S_STARTING,
	KT_S_THINK,
	KT_S_LOCKING,     /* inside a lock call (op names which) */
	KT_S_IN_CS,       /* holds the lock */
	KT_S_UNLOCKING,   /* inside an unlock call */
	KT_S_STUTTER,     /* parked by a stutter */
	KT_S_EXITED,
};

enum kt_role { KT_WRITER, KT_READER };

/* Write-rate phases (KT_P_PHASES): the lock sees no writes, rare writes, then the run's
 * full write rate, in turn - a read-mostly lock with an adaptive policy (kl_rmlock's
 * bias) switches modes at every change. KT_PH_FLIP (KT_P_FLIPS): writers write in short
 * bursts between quiet stretches long enough for readers to re-arm such a bias, so the
 * lock switches modes many times a phase, under the readers' load. */
enum kt_phase { KT_PH_FULL, KT_PH_NONE, KT_PH_SPARSE, KT_PH_FLIP, KT_PH_COUNT };

/* Debug knobs for the self-test: break the run on purpose. */
enum kt_inject {
	KT_INJECT_NONE,
	KT_INJECT_HANG,   /* writer 0 never releases the lock after its 100th acquisition */
};

struct kt_config {
	double secs;             /* per lock */
	int nwriters, nreaders;  /* -1: from the CPU count */
	unsigned perturb;        /* KT_P_* */
	double watchdog_secs;    /* no acquisition for this long: the run is hung */
	uint64_t seed;
	enum kt_inject inject;
	bool verbose;
};

/* One worker slot. A slot outlives its threads: churn replaces the thread, counts add up. */
struct kt_slot {
	/* -- written by the worker, read by the watchdog and the report */
	_Atomic long acq KT_ALIGNED;    /* successful acquisitions, all incarnations */
	_Atomic int state;              /* enum kt_state */
	_Atomic(const char *) op;       /* lock op in progress or last done */
	_Atomic int64_t since_ns;       /* when state last changed */
	_Atomic pid_t tid;              /* kernel thread id of the current incarnation */
	long fails;                     /* violations this slot saw */
	long try_attempts, try_fails;   /* trylock calls, and those that failed */
	long timed_attempts, timeouts;  /* timed calls, and those that timed out */
	long long_holds, migrations;    /* rare long holds; affinity moves inside a section */
	long retries;                   /* optimistic read sections a writer spoiled (seqlock) */
	long keyed;                     /* acquisitions by key (keyed locks: kl_hashlock) */
	long multikey;                  /* ... of several keys at once (keys_lock) */
	uint64_t rng;                   /* xorshift state */
	/* -- set by the driver */
	struct kt_run *run;
	enum kt_role role;
	unsigned index;                 /* within its role */
	unsigned incarnations;          /* threads this slot has had */
	long lifetime;                  /* acquisitions until this incarnation exits (churn) */
	void *ts;                       /* the adapter's per-thread state (tsize bytes) */
	pthread_t thread;
	bool joinable;
	_Atomic bool exited;            /* the incarnation returned; the driver joins it */
};

/* State the critical sections check (each on its own line: the lock is what is tested). */
struct kt_shared {
	_Atomic int writers_in KT_ALIGNED;  /* writers inside the lock: 0 or 1 */
	_Atomic int readers_in KT_ALIGNED;  /* readers inside the lock */
	_Atomic long ck KT_ALIGNED;         /* CK-style counter: a writer bumps it N times */
	long plain_seq KT_ALIGNED;          /* plain (non-atomic) data the lock protects: TSan */
	long plain_copy;                    /* and valgrind see a race if the lock leaks */
};

struct kt_run {
	const struct lockops *ops;
	const struct kt_config *cfg;
	void *lock;
	struct kt_shared *sh;
	struct kt_shared *keys;     /* keyed locks: one checked state per key (KT_NKEYS) */
	bool optimistic;            /* readers may overlap writers and retry (read_retry) */
	struct kt_slot *slots;      /* writers first, then readers */
	unsigned nslots, nwriters, nreaders;
	_Atomic bool stop;
	_Atomic long violations;
	_Atomic long printed;       /* violation lines printed (capped) */
	/* stutter: workers park while paused */
	pthread_mutex_t stutter_m;
	pthread_cond_t stutter_c;
	_Atomic bool paused;
	long stutters;
	/* phases: writers hold back (enum kt_phase), switched by the driver */
	_Atomic int phase;
	long phases;
	/* churn: exited incarnations are joined and replaced by the driver */
	pthread_mutex_t exit_m;
	pthread_cond_t exit_c;
	long threads_started;
	/* perturbation threads */
	pthread_t signaller, shuffler, watchdog;
	_Atomic long signals_sent, shuffles;
	cpu_set_t allowed;          /* CPUs this process may use */
	int ncpus_allowed;
	_Atomic bool watchdog_stop;
	uint64_t rng;               /* the driver's random state */
};

/* engine.c */
void kt_slot_set(struct kt_slot *s, enum kt_state st, const char *op);
void *kt_worker(void *arg);
void kt_violation(struct kt_run *r, struct kt_slot *s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
uint64_t kt_xorshift(uint64_t *state);
uint64_t kt_rand(struct kt_slot *s);
int64_t kt_now_ns(void);
void kt_spin_ns(int64_t ns);
void kt_sleep_ns(int64_t ns);
const char *kt_state_name(int st);

/* perturb.c */
void kt_stutter_point(struct kt_run *r, struct kt_slot *s);
void kt_perturb_start(struct kt_run *r);
void kt_perturb_stop(struct kt_run *r);
void kt_driver_tick(struct kt_run *r, int64_t now, int64_t *next_stutter);
void kt_phase_tick(struct kt_run *r, int64_t now, int64_t *next_phase);
void kt_phase_point(struct kt_run *r, struct kt_slot *s);
void kt_migrate_self(struct kt_run *r, struct kt_slot *s);
void kt_restore_affinity(struct kt_run *r);
void kt_signals_install(void);
int kt_spawn(struct kt_slot *s);
long kt_signals_taken(void);
void kt_reap(struct kt_run *r);

/* watchdog.c */
void kt_watchdog_start(struct kt_run *r);
void kt_watchdog_stop(struct kt_run *r);
void kt_dump_threads(struct kt_run *r, const char *why);

/* selftest.c */
int kt_selftest(const char *self);

#endif /* KLTORTURE_H */
