/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/lockops/ck.c - Concurrency Kit's locks (the spinning peers). Compiled only when
 * libck is found. Every ck lock spins (nothing in ck sleeps), so all are LOCKOPS_SPIN.
 *
 * libck 0.7.1 (Debian 12) gotchas this file respects (see userspace-peers.md):
 * - never the CK_ELIDE_* wrappers: without RTM, CK_ELIDE_TRYLOCK returns the *locked*
 *   predicate and acquires nothing; we call the plain lock functions directly;
 * - ck_brlock readers must register a per-thread reader record with the lock before their
 *   first read_lock (and unregister it before it goes away): the record lives in the
 *   driver's thread-state buffer (`ts`, its own cache line), registered on the thread's
 *   first read of that lock and unregistered by thread_leave, which finds it on the
 *   thread's list of registrations;
 * - ck_spinlock_mcs needs a caller-owned queue node alive for the whole critical section:
 *   also the `ts` buffer;
 * - ck_spinlock_ticket's trylock exists only where CK_F_SPINLOCK_TICKET_TRYLOCK is set.
 */
#include <ck_brlock.h>
#include <ck_pflock.h>
#include <ck_rwlock.h>
#include <ck_spinlock.h>

#include "lockops.h"

/* Spin budget for the brlock trylocks (ck counts stall iterations, not time). */
#define BRLOCK_TRY_FACTOR 1

static void ck_nop_destroy(void *l)
{
	(void)l;
}

/* ---- ck_spinlock_mcs ----------------------------------------------------------------- */

static int mcs_init(void *l)
{
	ck_spinlock_mcs_init(l);
	return 0;
}

static void mcs_lock(void *l, void *ts)
{
	ck_spinlock_mcs_lock(l, ts);
}

static void mcs_unlock(void *l, void *ts)
{
	ck_spinlock_mcs_unlock(l, ts);
}

static bool mcs_trylock(void *l, void *ts)
{
	return ck_spinlock_mcs_trylock(l, ts);
}

static const struct lockops ck_mcs_ops = {
	.name = "ck_spinlock_mcs",
	.family = "ck",
	.summary = "ck MCS queue spinlock (FIFO, each waiter spins on its own node)",
	.flags = LOCKOPS_SPIN,
	.size = sizeof(ck_spinlock_mcs_t),
	.tsize = sizeof(ck_spinlock_mcs_context_t),
	.init = mcs_init,
	.destroy = ck_nop_destroy,
	.write_lock = mcs_lock,
	.write_unlock = mcs_unlock,
	.write_trylock = mcs_trylock,
};
LOCKOPS_REGISTER(ck_mcs_ops)

/* ---- ck_spinlock_ticket --------------------------------------------------------------- */

static int ticket_init(void *l)
{
	ck_spinlock_ticket_init(l);
	return 0;
}

static void ticket_lock(void *l, void *ts)
{
	(void)ts;
	ck_spinlock_ticket_lock(l);
}

static void ticket_unlock(void *l, void *ts)
{
	(void)ts;
	ck_spinlock_ticket_unlock(l);
}

#ifdef CK_F_SPINLOCK_TICKET_TRYLOCK
static bool ticket_trylock(void *l, void *ts)
{
	(void)ts;
	return ck_spinlock_ticket_trylock(l);
}
#define TICKET_TRYLOCK ticket_trylock
#else
#define TICKET_TRYLOCK NULL
#endif

static const struct lockops ck_ticket_ops = {
	.name = "ck_spinlock_ticket",
	.family = "ck",
	.summary = "ck ticket spinlock (FIFO, everyone spins on the serving counter)",
	.flags = LOCKOPS_SPIN,
	.size = sizeof(ck_spinlock_ticket_t),
	.init = ticket_init,
	.destroy = ck_nop_destroy,
	.write_lock = ticket_lock,
	.write_unlock = ticket_unlock,
	.write_trylock = TICKET_TRYLOCK,
};
LOCKOPS_REGISTER(ck_ticket_ops)

/* ---- ck_rwlock ------------------------------------------------------------------------- */

static int rw_init(void *l)
{
	ck_rwlock_init(l);
	return 0;
}

static void rw_wlock(void *l, void *ts)
{
	(void)ts;
	ck_rwlock_write_lock(l);
}

static void rw_wunlock(void *l, void *ts)
{
	(void)ts;
	ck_rwlock_write_unlock(l);
}

static bool rw_wtrylock(void *l, void *ts)
{
	(void)ts;
	return ck_rwlock_write_trylock(l);
}

static void rw_rlock(void *l, void *ts)
{
	(void)ts;
	ck_rwlock_read_lock(l);
}

static void rw_runlock(void *l, void *ts)
{
	(void)ts;
	ck_rwlock_read_unlock(l);
}

static bool rw_rtrylock(void *l, void *ts)
{
	(void)ts;
	return ck_rwlock_read_trylock(l);
}

LOCKOPS_PAIR_LOOP(rw_rloop, ck_rwlock_t, ck_rwlock_read_lock(L), ck_rwlock_read_unlock(L))
LOCKOPS_PAIR_LOOP(rw_wloop, ck_rwlock_t, ck_rwlock_write_lock(L), ck_rwlock_write_unlock(L))

static const struct lockops ck_rwlock_ops = {
	.name = "ck_rwlock",
	.family = "ck",
	.summary = "ck rwlock: writer flag + one shared reader count, writer-preferring",
	.flags = LOCKOPS_RW | LOCKOPS_SPIN,
	.size = sizeof(ck_rwlock_t),
	.init = rw_init,
	.destroy = ck_nop_destroy,
	.write_lock = rw_wlock,
	.write_unlock = rw_wunlock,
	.write_trylock = rw_wtrylock,
	.read_lock = rw_rlock,
	.read_unlock = rw_runlock,
	.read_trylock = rw_rtrylock,
	.read_pair_loop = rw_rloop,
	.write_pair_loop = rw_wloop,
};
LOCKOPS_REGISTER(ck_rwlock_ops)

/* ---- ck_brlock ------------------------------------------------------------------------- */

/* A thread's reader record for one ck_brlock, in the driver's per-thread state. */
struct br_ts {
	ck_brlock_reader_t reader;   /* the counter the writer scans */
	struct ck_brlock *lock;      /* registered with; NULL until the first read */
	struct br_ts *next;          /* this thread's other registrations */
};

/* The calling thread's registrations, for thread_leave to find. */
static __thread struct br_ts *br_registered;

static int br_init(void *l)
{
	ck_brlock_init(l);
	return 0;
}

static struct ck_brlock_reader *br_reader(void *l, void *ts)
{
	struct br_ts *t = ts;

	if (CK_CC_UNLIKELY(t->lock == NULL)) {
		ck_brlock_read_register(l, &t->reader);
		t->lock = l;
		t->next = br_registered;
		br_registered = t;
	}
	return &t->reader;
}

static void br_leave(void *l)
{
	for (struct br_ts **p = &br_registered; *p != NULL; p = &(*p)->next) {
		struct br_ts *t = *p;

		if (t->lock != l)
			continue;
		ck_brlock_read_unregister(l, &t->reader);
		t->lock = NULL;
		*p = t->next;
		return;
	}
}

static void br_wlock(void *l, void *ts)
{
	(void)ts;
	ck_brlock_write_lock(l);
}

static void br_wunlock(void *l, void *ts)
{
	(void)ts;
	ck_brlock_write_unlock(l);
}

static bool br_wtrylock(void *l, void *ts)
{
	(void)ts;
	return ck_brlock_write_trylock(l, BRLOCK_TRY_FACTOR);
}

static void br_rlock(void *l, void *ts)
{
	ck_brlock_read_lock(l, br_reader(l, ts));
}

static void br_runlock(void *l, void *ts)
{
	(void)l;
	ck_brlock_read_unlock(&((struct br_ts *)ts)->reader);
}

static bool br_rtrylock(void *l, void *ts)
{
	return ck_brlock_read_trylock(l, br_reader(l, ts), BRLOCK_TRY_FACTOR);
}

static const struct lockops ck_brlock_ops = {
	.name = "ck_brlock",
	.family = "ck",
	.summary = "ck big-reader lock: per-thread reader records (fenced), writer scans them",
	.flags = LOCKOPS_RW | LOCKOPS_SPIN | LOCKOPS_READ_BIASED,
	.size = sizeof(ck_brlock_t),
	.tsize = sizeof(struct br_ts),
	.init = br_init,
	.destroy = ck_nop_destroy,
	.thread_leave = br_leave,
	.write_lock = br_wlock,
	.write_unlock = br_wunlock,
	.write_trylock = br_wtrylock,
	.read_lock = br_rlock,
	.read_unlock = br_runlock,
	.read_trylock = br_rtrylock,
};
LOCKOPS_REGISTER(ck_brlock_ops)

/* ---- ck_pflock ------------------------------------------------------------------------- */

static int pf_init(void *l)
{
	ck_pflock_init(l);
	return 0;
}

static void pf_wlock(void *l, void *ts)
{
	(void)ts;
	ck_pflock_write_lock(l);
}

static void pf_wunlock(void *l, void *ts)
{
	(void)ts;
	ck_pflock_write_unlock(l);
}

static void pf_rlock(void *l, void *ts)
{
	(void)ts;
	ck_pflock_read_lock(l);
}

static void pf_runlock(void *l, void *ts)
{
	(void)ts;
	ck_pflock_read_unlock(l);
}

static const struct lockops ck_pflock_ops = {
	.name = "ck_pflock",
	.family = "ck",
	.summary = "ck phase-fair rwlock (Brandenburg-Anderson): reader/writer phases alternate",
	.flags = LOCKOPS_RW | LOCKOPS_SPIN,
	.size = sizeof(ck_pflock_t),
	.init = pf_init,
	.destroy = ck_nop_destroy,
	.write_lock = pf_wlock,
	.write_unlock = pf_wunlock,
	.read_lock = pf_rlock,
	.read_unlock = pf_runlock,
};
LOCKOPS_REGISTER(ck_pflock_ops)
