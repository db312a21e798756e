/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/lockops/urcu.c - liburcu's memb flavour: the read-side floor.
 *
 * RCU is not a lock: its readers exclude nobody (LOCKOPS_NO_EXCLUSION), so drivers do not
 * check readers against writers for it, and kltorture skips it. It is here because a
 * read-mostly lock's read side cannot beat an RCU read-side critical section: urcu-memb's
 * read_lock/read_unlock are a per-thread nesting counter and a compiler barrier (the
 * writer's membarrier() supplies the fence), inlined with _LGPL_SOURCE exactly as an
 * application would use them. The only extra cost here is the adapter's indirect call,
 * which every adapter pays equally.
 *
 * Write side: a pthread mutex (writers exclude each other, so update counters verify) and,
 * in write_unlock, one synchronize_rcu() - what an RCU updater pays to retire the old
 * version of what it replaced. That makes "writer cost" comparable with a rendezvous lock.
 *
 * Registration is per thread, not per lock: thread_enter registers the thread on its first
 * use of any urcu adapter instance and thread_leave unregisters it after the last
 * (a per-thread count, since urcu forbids registering twice).
 */
#define _LGPL_SOURCE
#include <pthread.h>
#include <urcu/urcu-memb.h>

#include "lockops.h"

/* How many urcu adapter instances the calling thread has entered and not left. */
static __thread unsigned urcu_entered;

struct urcu_adapter {
	pthread_mutex_t writers;
};

static int ur_init(void *l)
{
	struct urcu_adapter *u = l;

	return pthread_mutex_init(&u->writers, NULL);
}

static void ur_destroy(void *l)
{
	struct urcu_adapter *u = l;

	pthread_mutex_destroy(&u->writers);
}

static void ur_enter(void *l)
{
	(void)l;
	if (urcu_entered++ == 0)
		urcu_memb_register_thread();
}

static void ur_leave(void *l)
{
	(void)l;
	if (--urcu_entered == 0)
		urcu_memb_unregister_thread();
}

static void ur_rlock(void *l, void *ts)
{
	(void)l, (void)ts;
	urcu_memb_read_lock();
}

static void ur_runlock(void *l, void *ts)
{
	(void)l, (void)ts;
	urcu_memb_read_unlock();
}

static void ur_wlock(void *l, void *ts)
{
	struct urcu_adapter *u = l;

	(void)ts;
	pthread_mutex_lock(&u->writers);
}

static void ur_wunlock(void *l, void *ts)
{
	struct urcu_adapter *u = l;

	(void)ts;
	urcu_memb_synchronize_rcu();
	pthread_mutex_unlock(&u->writers);
}

LOCKOPS_PAIR_LOOP(ur_rloop, struct urcu_adapter, urcu_memb_read_lock(), urcu_memb_read_unlock())

static const struct lockops urcu_memb_ops = {
	.name = "urcu_memb",
	.family = "urcu",
	.summary = "liburcu memb read side (inlined): the read-side floor; writers = mutex + "
		   "synchronize_rcu",
	.flags = LOCKOPS_RW | LOCKOPS_NO_EXCLUSION | LOCKOPS_READ_BIASED,
	.size = sizeof(struct urcu_adapter),
	.init = ur_init,
	.destroy = ur_destroy,
	.thread_enter = ur_enter,
	.thread_leave = ur_leave,
	.write_lock = ur_wlock,
	.write_unlock = ur_wunlock,
	.read_lock = ur_rlock,
	.read_unlock = ur_runlock,
	.read_pair_loop = ur_rloop,
};
LOCKOPS_REGISTER(urcu_memb_ops)
