/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/lockstat.h - where does the time go? A contention profile of every klock lock,
 * in the spirit of NetBSD lockstat(8) and FreeBSD LOCK_PROFILING.
 *
 * While recording, every contended acquisition (a lock's slow path) is counted per
 * (lock, call site, lock type, side) with its spin and sleep time; builds configured with
 * -Dlockstat_hold=true also count every acquisition and its hold time. Uncontended
 * acquisitions cost nothing extra: recording lives on slow paths only, in per-thread
 * tables merged when a report or snapshot is taken (docs/lockstat.md).
 *
 * Typical use:
 *     kl_lockstat_reset();
 *     kl_lockstat_start();
 *     run_the_workload();
 *     kl_lockstat_stop();
 *     kl_lockstat_report(stderr, NULL);
 * or, without touching the program: KLOCK_LOCKSTAT=1 ./program (report at exit).
 *
 * Builds configured with -Dlockstat=false keep this API (so programs link unchanged):
 * kl_lockstat_start() and kl_lockstat_snapshot() then return ENOTSUP.
 *
 * None of these functions may be called from a signal handler (they allocate and use
 * stdio). They never block on a klock lock: they take only the library's internal
 * wordlocks for short, bounded sections.
 */
#ifndef KLOCK_LOCKSTAT_H
#define KLOCK_LOCKSTAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <klock/compiler.h>

KL_BEGIN_DECLS

/* Version of the JSON report's schema ("klock_lockstat" member; docs/lockstat.md). */
#define KL_LOCKSTAT_SCHEMA 1

/**
 * kl_lockstat_start - start (or resume) recording. Data and elapsed time accumulate across
 * start/stop windows until kl_lockstat_reset().
 * Returns 0, EALREADY if already recording (nothing changes), or ENOTSUP in a
 * -Dlockstat=false build. Thread-safe; does not block.
 */
KL_API int kl_lockstat_start(void);

/**
 * kl_lockstat_stop - stop recording; what was recorded stays until kl_lockstat_reset().
 * A slow-path episode already under way when recording stops is still recorded when it
 * ends. Returns 0, EALREADY if not recording, or ENOTSUP. Thread-safe; does not block.
 */
KL_API int kl_lockstat_stop(void);

/**
 * kl_lockstat_reset - forget everything recorded and restart the elapsed-time clock (the
 * recording state, on or off, is kept). An episode that straddles the reset may be lost.
 * Thread-safe.
 */
KL_API void kl_lockstat_reset(void);

/* kl_lockstat_enabled - true while recording. Thread-safe, never blocks. */
KL_API bool kl_lockstat_enabled(void);

/* ---- reading the profile as data ----------------------------------------------------- */

/* Buckets of a row's wait histogram (lockstat -H): bucket b counts the waits of w ns with
 * 2^b <= w < 2^(b+1) (bucket 0 also takes w < 1 ns); the last is open-ended: w >= 2^31 ns
 * (about 2.1 s). */
#define KL_LOCKSTAT_HIST_BUCKETS 32

/* One row: a (lock, call site, lock type, side) key and what was recorded for it. */
struct kl_lockstat_row {
	const void *lock;        /* the lock's address */
	const void *caller;      /* the call site: return address into the lock's caller */
	const char *kind;        /* lock type: "mutex", "rwlock", "rmlock", "ticket", ... */
	bool read;               /* the shared (read) side of a reader-writer lock */
	uint64_t acquisitions;   /* every acquisition (hold-time builds only; else 0) */
	uint64_t contended;      /* acquisitions that had to wait (took the slow path) */
	uint64_t failed;         /* try/timed attempts that waited, then gave up */
	uint64_t spin_count;     /* spin phases (an episode may spin more than once) */
	uint64_t spin_ns;        /* time spent spinning */
	uint64_t sleep_count;    /* sleeps */
	uint64_t sleep_ns;       /* time spent asleep */
	uint64_t wait_ns;        /* total wait: slow-path entry to acquisition (or failure) */
	uint64_t wait_max_ns;    /* longest single wait */
	uint64_t hold_ns;        /* time held (hold-time builds only; else 0) */
	uint64_t hold_max_ns;    /* longest hold (hold-time builds only; else 0) */
	uint64_t hold_min_ns;    /* shortest hold (hold-time builds; 0 when none ended) */
	uint64_t wait_hist[KL_LOCKSTAT_HIST_BUCKETS];  /* waits (contended + failed) by
	                          * log2 of their length in ns (KL_LOCKSTAT_HIST_BUCKETS) */
	uint64_t revocations;    /* read-mostly locks (kl_rmlock): writes from this site that
	                          * revoked the readers' bias; else 0 */
	uint64_t revoke_ns;      /* their total cost: membarrier + scan + reader drain */
	uint64_t unbiased_ns;    /* read-mostly locks: time spent unbiased (readers fenced),
	                          * completed stretches only (revocation to re-arm), in the
	                          * row with no call site (caller NULL); else 0 */
	uint64_t fences;         /* heavy fences (membarrier) the waiters issued: a cost that
	                          * grows with the CPUs (struct kl_lock_events) */
	uint64_t wakeups;        /* wake-ups the lock's unlocks issued, in the row with no
	                          * call site (caller NULL) */
	uint64_t asleep_handovers; /* contended acquisitions of a FIFO lock (kl_ticket,
	                          * kl_mcs) handed over while the waiter slept */
};

/*
 * One holder row ("contending points", Linux lock_stat): the waits for a lock (one side)
 * charged to the call site where the lock's holder had acquired it. Which holder: the
 * last thread that acquired the lock after waiting, before the waiter acquired it (or gave
 * up) - the holder it waited for when that holder had itself waited; the fast path stores
 * no site, so a holder that took the lock uncontended is not seen (docs/lockstat.md).
 * Waits of a lock nobody had acquired contended yet (since the reset) are in no holder row.
 */
struct kl_lockstat_holder {
	const void *lock;        /* the lock's address */
	const void *holder;      /* the holder's call site (return address into its caller) */
	const char *kind;        /* lock type, as in struct kl_lockstat_row */
	bool read;               /* the waiters' side: the shared (read) side */
	uint64_t waits;          /* waits (contended + failed) charged to this holder site */
	uint64_t wait_ns;        /* their total wait */
};

/* Most frames of a recorded call stack (KLOCK_LOCKSTAT_STACK=DEPTH, klock-stat -S). */
#define KL_LOCKSTAT_STACK_MAX 8

/*
 * One call stack of contended acquisitions of a lock (one side), recorded when the process
 * runs with KLOCK_LOCKSTAT_STACK=DEPTH (klock-stat -S DEPTH): frames[0] is the call site
 * (the rows' caller), then its callers outwards, at most DEPTH of them.
 */
struct kl_lockstat_stack {
	const void *lock;        /* the lock's address */
	const char *kind;        /* lock type, as in struct kl_lockstat_row */
	bool read;               /* the shared (read) side */
	unsigned depth;          /* frames[0 .. depth) are valid */
	const void *frames[KL_LOCKSTAT_STACK_MAX];   /* return addresses, innermost first */
	uint64_t contended;      /* contended acquisitions with this stack */
	uint64_t wait_ns;        /* their total wait */
};

/* Everything recorded since the last reset, merged over all threads (live and exited). */
struct kl_lockstat_snapshot {
	uint64_t elapsed_ns;     /* time spent recording (sum of start..stop windows) */
	uint64_t wait_ns;        /* sum of rows[].wait_ns */
	uint64_t contended;      /* sum of rows[].contended */
	uint64_t failed;         /* sum of rows[].failed */
	uint64_t acquisitions;   /* sum of rows[].acquisitions (hold-time builds) */
	uint64_t dropped;        /* episodes not recorded (a thread's table was full), plus
				  * one per table this snapshot skipped because its thread
				  * stayed in the middle of a record (preempted there) */
	unsigned threads;        /* most threads known to klock alive at once while recording
	                          * (the denominator of wait_pct; at least 1) */
	unsigned cpus;           /* online CPUs */
	bool hold_times;         /* built with -Dlockstat_hold=true: acquisitions, hold_* valid */
	bool recording;          /* lockstat was recording when the snapshot was taken */
	double wait_pct;         /* 100 * wait_ns / (elapsed_ns * threads): the share of the
	                          * threads' time spent waiting for locks (0 when elapsed is 0) */
	size_t nrows;
	struct kl_lockstat_row *rows;   /* nrows rows, in no particular order */
	size_t nholders;
	struct kl_lockstat_holder *holders;   /* nholders holder rows, in no particular order */
	size_t nstacks;
	struct kl_lockstat_stack *stacks;     /* nstacks stacks, in no particular order (none
	                                       * unless KLOCK_LOCKSTAT_STACK was set) */
};

/**
 * kl_lockstat_snapshot - merge every thread's data into @snap (rows allocated; release
 * with kl_lockstat_snapshot_free()). May run while other threads record.
 * Returns 0, ENOMEM, or ENOTSUP (-Dlockstat=false; @snap is then zeroed).
 */
KL_API int kl_lockstat_snapshot(struct kl_lockstat_snapshot *snap) KL_NONNULL(1);

/* kl_lockstat_snapshot_free - release the rows of a snapshot (NULL or empty ok). */
KL_API void kl_lockstat_snapshot_free(struct kl_lockstat_snapshot *snap);

/* ---- reports --------------------------------------------------------------------------- */

/* Report options (flags). */
#define KL_LOCKSTAT_BY_COUNT (1u << 0)  /* rank by event count, not time (lockstat -c) */
#define KL_LOCKSTAT_LOCKS (1u << 1)     /* one <all> row per lock, no caller rows (-l) */
#define KL_LOCKSTAT_JSON (1u << 2)      /* the JSON form (schema in docs/lockstat.md) */
#define KL_LOCKSTAT_MERGE (1u << 3)     /* one row per array of static locks (-M) */
#define KL_LOCKSTAT_MERGE_CALLERS (1u << 4)  /* one caller row per function (-m) */
#define KL_LOCKSTAT_HIST (1u << 5)      /* a log2 histogram of wait times per lock (-H) */
#define KL_LOCKSTAT_BY_AVG (1u << 6)    /* rank by average wait (or hold), not total time */

/* Longest -L/-F pattern, with its terminating NUL. */
#define KL_LOCKSTAT_MATCH_MAX 64

struct kl_lockstat_options {
	unsigned flags;   /* KL_LOCKSTAT_* */
	unsigned top;     /* show at most this many locks per section (0: all) */
	/* fnmatch(3) patterns, "" for all: only locks whose label (as printed, or the
	 * address "0x...") matches, only call sites whose label or function matches. The
	 * header's totals stay the whole process's. */
	char lock_match[KL_LOCKSTAT_MATCH_MAX];
	char caller_match[KL_LOCKSTAT_MATCH_MAX];
};

/**
 * kl_lockstat_report - write the report for everything recorded since the last reset:
 * text in NetBSD lockstat(8) form (sections per event and lock type, Total% Count Time/ms
 * Lock Caller, an <all> row per lock), or JSON. @opt NULL means defaults (text, by time,
 * callers shown, all locks). Callers are named from dladdr(3), else from the object's ELF
 * symbol table (static functions too); a stripped object prints as object+offset.
 * Returns 0, ENOMEM, EIO (a write failed), or ENOTSUP (-Dlockstat=false: a one-line note
 * is written instead of the report).
 */
KL_API int kl_lockstat_report(FILE *f, const struct kl_lockstat_options *opt) KL_NONNULL(1);

/* kl_lockstat_report_snapshot - the same report from an existing snapshot. */
KL_API int kl_lockstat_report_snapshot(FILE *f, const struct kl_lockstat_snapshot *snap,
				       const struct kl_lockstat_options *opt) KL_NONNULL(1, 2);

/**
 * kl_lockstat_options_parse - parse a comma-separated option list into @opt:
 *   json | text, time | count | avg, locks | callers, merge, merge_callers, hist, top=N,
 *   lock=PATTERN, caller=PATTERN
 * ("1" alone means the defaults). This is the syntax of KLOCK_LOCKSTAT and of klock-stat.
 * Returns 0, or EINVAL for an unknown word, a bad number or a pattern longer than
 * KL_LOCKSTAT_MATCH_MAX - 1 (@opt is then left at its defaults).
 */
KL_API int kl_lockstat_options_parse(const char *s, struct kl_lockstat_options *opt)
	KL_NONNULL(1, 2);

/* ---- event counts: what grows with the CPU count ------------------------------------ */

/*
 * The process's lock events since it started, summed over every klock lock and thread.
 * Counted always, on slow paths only (also in -Dlockstat=false builds, and whether or not
 * lockstat records): these are the costs that grow with the machine. A heavy fence is a
 * membarrier(2), which interrupts every CPU running one of the process's threads; a sleep
 * and a wake-up are each a system call; a hand-over to a sleeper makes the whole queue
 * wait for a wake-up. Divide by the acquisitions of a run (klbench prints them per
 * operation) to compare locks on a small machine by what they will cost on a large one.
 */
struct kl_lock_events {
	uint64_t contended;        /* acquisitions that took a slow path (waited) */
	uint64_t fences;           /* heavy fences issued (membarrier system calls) */
	uint64_t sleeps;           /* sleeps that blocked in the kernel */
	uint64_t wakeups;          /* wake-up calls issued */
	uint64_t handovers_asleep; /* FIFO locks (kl_ticket, kl_mcs): the lock was handed to
	                            * a waiter that was still asleep, so the hand-over waited
	                            * for its wake-up */
};

/**
 * kl_lock_events - fill @ev with the counts so far (monotonic: subtract two readings to
 * count a stretch). A racy sum while threads count; exact once they are quiet.
 * Thread-safe, never blocks, async-signal-safe.
 */
KL_API void kl_lock_events(struct kl_lock_events *ev) KL_NONNULL(1);

KL_END_DECLS

#endif /* KLOCK_LOCKSTAT_H */
