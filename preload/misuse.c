/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * preload/misuse.c - what the interposer answers to the misuse POSIX leaves undefined for
 * NORMAL/DEFAULT mutexes and spinlocks: what glibc does, so a program that runs under
 * glibc is not stopped by this library.
 *
 *   relock by the owner         POSIX: "shall deadlock"; glibc blocks for ever: so do we
 *                               (after the report), in a futex wait nothing wakes.
 *   unlock of a free lock       glibc: returns 0, the lock stays free: so do we.
 *   unlock of a foreign hold    glibc: returns 0 and RELEASES it: so do we (mutexes; a
 *                               spinlock records no owner, its foreign unlock just works).
 *   rwlock unlock by a thread   (a free lock, or one another thread write-holds) glibc:
 *   that holds nothing          returns 0 and takes it for a read unlock, corrupting its
 *                               reader count: we return 0 and leave the lock as it is.
 *   destroy of a held or        glibc: returns 0 and changes nothing (its destroy is a
 *   waited-for rwlock           no-op): so do we - the lock is left as it is, still usable
 *                               or re-initialisable (a pcpu_rwsem keeps its counters).
 *                               No program can rely on EBUSY there: glibc never returns it.
 *
 * KLOCK_ON_ERROR decides the report: unset, each lock is reported once (then counted
 * silently); `warn` reports every time; `abort` reports and aborts (klock's own default:
 * the way to find such bugs). ERRORCHECK and RECURSIVE mutexes keep their error codes, and
 * the native kl_* API (libklock.so) keeps its documented reports: this is the preload's
 * copy only (KLOCK_PRELOAD=1, locks/primitives/mutex.c calls kli_preload_*()).
 *
 * Per-lock counts live in a fixed table (MISUSE_LOCKS entries, inserted by CAS on the
 * address, never removed; a full table reports every time and counts nothing). lockstat's
 * text report (klock-stat) ends with them: kli_misuse_print, set on first misuse.
 * Counts are relaxed: they are statistics, read at exit. U1 (the claiming CAS, release)
 * pairs with U2 (the printer's acquire load): a listed entry's kind is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <klock/wait.h>
#include "klp.h"

/* Distinct locks whose misuse is counted (and reported once). */
#define MISUSE_LOCKS 256u
/* How many of them lockstat's report lists. */
#define MISUSE_SHOWN 32u

enum misuse { MU_RELOCK, MU_UNLOCK_FREE, MU_UNLOCK_FOREIGN, MU_UNLOCK_WRITER, MU_DESTROY_HELD,
	      MU_COUNT };

static const char *const mu_what[MU_COUNT] = {
	[MU_RELOCK] = "relock of a held non-recursive lock (deadlocks, as POSIX and glibc)",
	[MU_UNLOCK_FREE] = "unlock of a lock not held (double unlock?; returns 0, as glibc)",
	[MU_UNLOCK_FOREIGN] = "unlock by a thread that does not own the lock (released, as glibc)",
	[MU_UNLOCK_WRITER] = "unlock by a thread that holds nothing while another thread "
			     "write-holds the lock (returns 0, as glibc; the lock stays "
			     "write-held)",
	/* parenthesised: one message split over two lines, not two elements */
	[MU_DESTROY_HELD] = ("destroy of a held or waited-for lock (returns 0, as glibc; the "
			     "lock is left as it is)"),
};
static const char *const mu_short[MU_COUNT] = { "relock", "unlock-free", "unlock-foreign",
						"unlock-writer", "destroy-held" };

struct misuse_entry {
	_Atomic uintptr_t lock;          /* 0: free entry */
	const char *kind;                /* "mutex", "spinlock" */
	_Atomic uint32_t count[MU_COUNT];
};

static struct misuse_entry misuse_tab[MISUSE_LOCKS];

static void misuse_print(void *file)
{
	FILE *f = file;
	unsigned shown = 0;

	for (unsigned i = 0; i < MISUSE_LOCKS && shown < MISUSE_SHOWN; i++) {
		struct misuse_entry *e = &misuse_tab[i];
		uintptr_t l = atomic_load_explicit(&e->lock, memory_order_acquire); /* U2 */

		if (l == 0)
			continue;
		if (shown++ == 0)
			fprintf(f, "\nundefined-behaviour misuse answered as glibc (POSIX leaves it "
				   "undefined):\n");
		fprintf(f, "  %s %p:", e->kind, (void *)l);
		for (int k = 0; k < MU_COUNT; k++)
			fprintf(f, " %s %u", mu_short[k],
				atomic_load_explicit(&e->count[k], memory_order_relaxed));
		fputc('\n', f);
	}
}

/* Counts one misuse of @lock; true when it is the lock's first (or the table is full). */
static bool misuse_count(const void *lock, const char *kind, enum misuse mu)
{
	uintptr_t key = (uintptr_t)lock;
	unsigned h = (unsigned)((key >> 3) * 0x9e3779b1u) % MISUSE_LOCKS;

	atomic_store_explicit(&kli_misuse_print, misuse_print, memory_order_relaxed);
	for (unsigned i = 0; i < MISUSE_LOCKS; i++) {
		struct misuse_entry *e = &misuse_tab[(h + i) % MISUSE_LOCKS];
		uintptr_t cur = atomic_load_explicit(&e->lock, memory_order_acquire);
		bool first = false;

		if (cur == 0) {
			e->kind = kind; /* racing claimers write the same kind or lose the CAS */
			/* U1: release, pairs with U2 in misuse_print(): the kind is set */
			first = atomic_compare_exchange_strong_explicit(
				&e->lock, &cur, key, memory_order_release, memory_order_acquire);
			if (!first && cur != key)
				continue;
		} else if (cur != key) {
			continue;
		}
		atomic_fetch_add_explicit(&e->count[mu], 1, memory_order_relaxed);
		return first;
	}
	return true;
}

/* Reports per KLOCK_ON_ERROR (see the top); returns only when the answer is glibc's. */
static void klp_misuse(enum misuse mu, const char *kind, const void *lock, const void *site)
{
	const char *v = getenv("KLOCK_ON_ERROR");
	bool first = misuse_count(lock, kind, mu);

	if (v != NULL && strcmp(v, "abort") == 0)
		kli_report(mu_what[mu], kind, lock, site, NULL); /* aborts */
	else if (first || (v != NULL && strcmp(v, "warn") == 0))
		kli_report_msg(mu_what[mu], kind, lock, site,
			       first && v == NULL ? "reported once per lock" : NULL);
}

void kli_preload_relock(const void *lock, const void *site)
{
	static _Atomic uint32_t never; /* nobody ever changes or wakes it */

	klp_misuse(MU_RELOCK, "mutex", lock, site);
	for (;;)
		kl_wait(&never, 0, NULL);
}

bool kli_preload_unlock_misuse(const void *lock, bool foreign, const void *site)
{
	klp_misuse(foreign ? MU_UNLOCK_FOREIGN : MU_UNLOCK_FREE, "mutex", lock, site);
	return foreign;
}

void klp_misuse_relock(const void *lock, const void *site)
{
	kli_preload_relock(lock, site);
}

void klp_misuse_unlock(const char *kind, const void *lock, bool foreign, const void *site)
{
	klp_misuse(foreign ? MU_UNLOCK_FOREIGN : MU_UNLOCK_FREE, kind, lock, site);
}

void klp_misuse_rw_unlock(const void *lock, bool writer, const void *site)
{
	klp_misuse(writer ? MU_UNLOCK_WRITER : MU_UNLOCK_FREE, "rwlock", lock, site);
}

void klp_misuse_rw_destroy(const void *lock, const void *site)
{
	klp_misuse(MU_DESTROY_HELD, "rwlock", lock, site);
}
