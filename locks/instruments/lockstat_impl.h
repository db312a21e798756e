/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/instruments/lockstat_impl.h - lockstat's internal side: the per-thread table (locks/instruments/lockstat.c
 * has the theory block), the entry points the seam and library start-up call, and the
 * sizes tests need.
 */
#ifndef KL_LOCKSTAT_IMPL_H
#define KL_LOCKSTAT_IMPL_H

#include <pthread.h>

#include <klock/lockstat.h>

#include "hooks.h"

/* Slots in a thread's table (a power of two). */
#define KLI_LS_SLOTS 512u
/* Keys a thread's table takes before it drops events: 3/4 of the slots keeps linear
 * probe chains short and guarantees a free slot ends every probe. */
#define KLI_LS_MAX_KEYS (KLI_LS_SLOTS / 4u * 3u)
/* Locks a thread may hold at once and still have their hold times measured. */
#define KLI_LS_HELD_MAX 32u

/* The counters of one (lock, site, kind, side) key. Sums, except the *_MAX fields, which
 * merge as maxima (HOLD_MINV too: it holds ~shortest hold, so 0 means none yet). */
enum kli_ls_field {
	KLI_LS_CONTENDED,   /* episodes that ended in an acquisition */
	KLI_LS_FAILED,      /* episodes that ended without one (try/timed gave up) */
	KLI_LS_NSPIN,       /* spin phases */
	KLI_LS_SPIN_NS,
	KLI_LS_NSLEEP,      /* sleeps */
	KLI_LS_SLEEP_NS,
	KLI_LS_WAIT_NS,     /* begin..end of every episode */
	KLI_LS_WAIT_MAX,
	KLI_LS_ACQUIRED,    /* every acquisition (hold builds) */
	KLI_LS_HOLD_NS,
	KLI_LS_HOLD_MAX,
	KLI_LS_HOLD_MINV,   /* ~(shortest hold): the max of ~x is the min of x */
	KLI_LS_REVOKES,     /* bias revocations by this (write) site (kl_rmlock) */
	KLI_LS_REVOKE_NS,   /* their total cost */
	KLI_LS_UNBIASED_NS, /* completed unbiased stretches, re-arm time (NULL-site row) */
	KLI_LS_FENCES,      /* heavy fences the episodes' waiters issued */
	KLI_LS_WAKEUPS,     /* wake-ups issued by unlocks (NULL-site row) */
	KLI_LS_ASLEEP_HANDOVERS, /* episodes whose FIFO hand-over came while asleep */
	KLI_LS_HIST,        /* KL_LOCKSTAT_HIST_BUCKETS wait counts by log2(ns) from here */
	KLI_LS_NFIELDS = KLI_LS_HIST + KL_LOCKSTAT_HIST_BUCKETS
};

/* The key's third part: the lock kind, plus this bit for the shared (read) side. */
#define KLI_LS_KF_READ 0x100u
/* ... and this bit for a holder row: the key's site is where the lock's holder acquired it
 * (locks/instruments/lockstat.c, HOLDERS), and only CONTENDED, FAILED and WAIT_NS are counted. */
#define KLI_LS_KF_HOLDER 0x200u
/* ... and this bit for a stack row: the key's site is a hash of the call stack of a
 * contended acquisition, whose frames are stored in the row's KLI_LS_HIST fields (at
 * most KL_LOCKSTAT_STACK_MAX); only CONTENDED and WAIT_NS are counted. */
#define KLI_LS_KF_STACK 0x400u
/* The bits above the lock kind. */
#define KLI_LS_KF_BITS (KLI_LS_KF_READ | KLI_LS_KF_HOLDER | KLI_LS_KF_STACK)

static inline uint32_t kli_ls_kf(enum kli_kind kind, unsigned flags)
{
	return (uint32_t)kind | ((flags & KLI_HF_READ) ? KLI_LS_KF_READ : 0u);
}

/* A finished episode in nanoseconds (kli_lockstat_record() converts struct kli_wait's
 * ticks into one of these). Tests feed scripted episodes straight to kli_lockstat_episode. */
struct kli_ls_episode {
	uint32_t nspin, nsleep;
	uint32_t nfence;          /* heavy fences the waiter issued */
	bool asleep_handover;     /* a FIFO lock was handed over while the waiter slept */
	uint64_t spin_ns, sleep_ns;
	uint64_t wait_ns;   /* begin to end: the phases plus the bookkeeping between them */
};

void kli_lockstat_episode(const struct kli_ls_episode *ep, const void *lock,
			  enum kli_kind kind, unsigned flags, const void *site);

/* A lock initialised (kli_instr_created): while recording, under libklock-preload,
 * remembers the program's init call site for the report's label (lockstat.c). */
void kli_lockstat_created(const void *lock);

/* A pristine pthread lock adopted on its first lock call (libklock-preload, once per
 * lock): while recording, remembers that call's program site as the lock's first-use
 * site (the report's "first@" label), in the init-site table. */
void kli_lockstat_first_used(const void *lock);

/* The init call site remembered for @lock, or NULL; *@first tells whether it is a
 * first-use site (kli_lockstat_first_used). Report time. */
const void *kli_lockstat_init_site(const void *lock, bool *first);

/* Whether @site is some lock's first-use site (-M labels rows keyed by a site). Report
 * time: scans the table. */
bool kli_lockstat_first_site(const void *site);

/* Frames recorded per contended acquisition (0: no stacks; at most
 * KL_LOCKSTAT_STACK_MAX). KLOCK_LOCKSTAT_STACK sets it at load; tests set it directly. */
void kli_lockstat_set_stack_depth(unsigned depth);

/* Library start-up (locks/init.c): exit hook, fork handler, KLOCK_LOCKSTAT. */
void kli_lockstat_init(void);

/* The process a report is about: getpid(), except in the helper process that writes a
 * report for an _exit()ing parent (kli_lockstat_exit_flush), where it is the parent. */
long kli_lockstat_pid(void);

/* From libklock-preload's _exit()/_Exit(): the exit report atexit would have written
 * (KLOCK_LOCKSTAT set at load; once per process; not in a vfork child). The caller
 * neither allocates nor takes a lock: a copy of the process (a raw clone, no fork
 * handlers) writes the report while the caller waits for it, at most
 * LS_EXIT_FLUSH_WAIT_MS (a copy stuck on a lock another thread held is killed). */
void kli_lockstat_exit_flush(void);

/* pthread_create(), or the C library's behind an interposer. */
typedef int (*kli_thread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
				    void *);

/* Once per process, from libklock-preload's pthread_create() (never a lock call): starts
 * the control thread (with @create) that writes a snapshot report when klock-stat closes
 * KLOCK_LOCKSTAT_CTL (locks/instruments/lockstat.c). Nothing without KLOCK_LOCKSTAT_CTL. */
void kli_lockstat_ctl_start(kli_thread_create_fn create);

/* Between the recorder (lockstat.c) and its process-level control layer (lockstat_ctl.c):
 * start recording without kli_init() (library start-up: EALREADY if already on); register
 * the recorder's thread-exit and fork handlers; the recorder's fork-child handler (also
 * run by the _exit() report's copy of the process); whether klock-stat's control thread
 * runs (it is not one of the program's threads). */
int kli_lockstat_start(void);
void kli_lockstat_recorder_init(void);
void kli_lockstat_recorder_atfork(void);
bool kli_lockstat_ctl_running(void);

#if KLOCK_LOCKSTAT_HOLD
/* Fast-path feeds for hold times (hooks.c: kli_instr_acquired / kli_instr_release). */
void kli_lockstat_acquired(const void *lock, enum kli_kind kind, unsigned flags,
			   const void *site);
void kli_lockstat_release(const void *lock, enum kli_kind kind, unsigned flags);
#endif

#endif /* KL_LOCKSTAT_IMPL_H */
