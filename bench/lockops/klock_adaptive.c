/* SPDX-License-Identifier: BSD-2-Clause */
/* bench/lockops/klock_adaptive.c - klock's adaptive family: ticket and MCS spinlocks, the
 * adaptive mutex and the adaptive rwlock (locks/{ticket,mcs,mutex,rwlock}.c). */
#include <errno.h>

#include <klock/klock.h>
#include "lockops.h"

/* ---- kl_ticket ---- */
static int ticket_init(void *l)
{
	kl_ticket_init(l);
	return 0;
}

static void ticket_destroy(void *l)
{
	kl_ticket_destroy(l);
}

static void ticket_lock(void *l, void *ts)
{
	(void)ts;
	kl_ticket_lock(l);
}

static void ticket_unlock(void *l, void *ts)
{
	(void)ts;
	kl_ticket_unlock(l);
}

static bool ticket_trylock(void *l, void *ts)
{
	(void)ts;
	return kl_ticket_trylock(l);
}

static const struct lockops kl_ticket_ops = {
	.name = "kl_ticket",
	.family = "klock",
	.summary = "FIFO ticket spinlock, time-budgeted spin then yield (locks/primitives/ticket.c)",
	.flags = LOCKOPS_SPIN,
	.size = sizeof(struct kl_ticket),
	.init = ticket_init,
	.destroy = ticket_destroy,
	.write_lock = ticket_lock,
	.write_unlock = ticket_unlock,
	.write_trylock = ticket_trylock,
};
LOCKOPS_REGISTER(kl_ticket_ops)

/* ---- kl_mcs: the per-acquisition state is the queue node ---- */
static int mcs_init(void *l)
{
	kl_mcs_init(l);
	return 0;
}

static void mcs_destroy(void *l)
{
	kl_mcs_destroy(l);
}

static void mcs_lock(void *l, void *ts)
{
	kl_mcs_lock(l, ts);
}

static void mcs_unlock(void *l, void *ts)
{
	kl_mcs_unlock(l, ts);
}

static bool mcs_trylock(void *l, void *ts)
{
	return kl_mcs_trylock(l, ts);
}

static const struct lockops kl_mcs_ops = {
	.name = "kl_mcs",
	.family = "klock",
	.summary = "MCS queue spinlock, caller-owned node, spin then yield (locks/primitives/mcs.c)",
	.flags = LOCKOPS_SPIN,
	.size = sizeof(struct kl_mcs),
	.tsize = sizeof(struct kl_mcs_node),
	.init = mcs_init,
	.destroy = mcs_destroy,
	.write_lock = mcs_lock,
	.write_unlock = mcs_unlock,
	.write_trylock = mcs_trylock,
};
LOCKOPS_REGISTER(kl_mcs_ops)

/* ---- kl_mutex ---- */
static int mutex_init(void *l)
{
	kl_mutex_init(l);
	return 0;
}

static void mutex_destroy(void *l)
{
	kl_mutex_destroy(l);
}

static void mutex_lock(void *l, void *ts)
{
	(void)ts;
	kl_mutex_lock(l);
}

static void mutex_unlock(void *l, void *ts)
{
	(void)ts;
	kl_mutex_unlock(l);
}

static bool mutex_trylock(void *l, void *ts)
{
	(void)ts;
	return kl_mutex_trylock(l);
}

static int mutex_timedlock(void *l, void *ts, const struct timespec *abs)
{
	(void)ts;
	return kl_mutex_timedlock(l, abs);
}

LOCKOPS_PAIR_LOOP(mutex_wloop, struct kl_mutex, kl_mutex_lock(L), kl_mutex_unlock(L))

static const struct lockops kl_mutex_ops = {
	.name = "kl_mutex",
	.family = "klock",
	.summary = "adaptive mutex: OSQ spin (learnt budget), park, hand-off (locks/primitives/mutex.c)",
	.size = sizeof(struct kl_mutex),
	.init = mutex_init,
	.destroy = mutex_destroy,
	.write_lock = mutex_lock,
	.write_unlock = mutex_unlock,
	.write_trylock = mutex_trylock,
	.write_timedlock = mutex_timedlock,
	.write_pair_loop = mutex_wloop,
};
LOCKOPS_REGISTER(kl_mutex_ops)

/* ---- kl_rwlock ---- */
static int rwlock_init(void *l)
{
	kl_rwlock_init(l);
	return 0;
}

static void rwlock_destroy(void *l)
{
	kl_rwlock_destroy(l);
}

static void rwlock_wlock(void *l, void *ts)
{
	(void)ts;
	kl_rwlock_write_lock(l);
}

static void rwlock_wunlock(void *l, void *ts)
{
	(void)ts;
	kl_rwlock_write_unlock(l);
}

static bool rwlock_wtrylock(void *l, void *ts)
{
	(void)ts;
	return kl_rwlock_write_trylock(l);
}

static int rwlock_wtimedlock(void *l, void *ts, const struct timespec *abs)
{
	(void)ts;
	return kl_rwlock_write_timedlock(l, abs);
}

static void rwlock_rlock(void *l, void *ts)
{
	(void)ts;
	kl_rwlock_read_lock(l);
}

static void rwlock_runlock(void *l, void *ts)
{
	(void)ts;
	kl_rwlock_read_unlock(l);
}

static bool rwlock_rtrylock(void *l, void *ts)
{
	(void)ts;
	return kl_rwlock_read_trylock(l);
}

static int rwlock_rtimedlock(void *l, void *ts, const struct timespec *abs)
{
	(void)ts;
	return kl_rwlock_read_timedlock(l, abs);
}

LOCKOPS_PAIR_LOOP(rwlock_rloop, struct kl_rwlock, kl_rwlock_read_lock(L), kl_rwlock_read_unlock(L))
LOCKOPS_PAIR_LOOP(rwlock_wloop, struct kl_rwlock, kl_rwlock_write_lock(L), kl_rwlock_write_unlock(L))

static const struct lockops kl_rwlock_ops = {
	.name = "kl_rwlock",
	.family = "klock",
	.summary = "adaptive rwlock: counted sleepers, writer preference, reader hand-off "
		   "(locks/primitives/rwlock.c)",
	.flags = LOCKOPS_RW | LOCKOPS_NO_RECURSE_READ,
	.size = sizeof(struct kl_rwlock),
	.init = rwlock_init,
	.destroy = rwlock_destroy,
	.write_lock = rwlock_wlock,
	.write_unlock = rwlock_wunlock,
	.write_trylock = rwlock_wtrylock,
	.write_timedlock = rwlock_wtimedlock,
	.read_lock = rwlock_rlock,
	.read_unlock = rwlock_runlock,
	.read_trylock = rwlock_rtrylock,
	.read_timedlock = rwlock_rtimedlock,
	.read_pair_loop = rwlock_rloop,
	.write_pair_loop = rwlock_wloop,
};
LOCKOPS_REGISTER(kl_rwlock_ops)
