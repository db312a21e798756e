/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/lockops/klock_readmostly.c - klock's read-mostly locks as adapters:
 *   kl_rmlock            FreeBSD rmlock: per-thread read slots, membarrier rendezvous
 *                        while biased, fenced readers after a write (BRAVO policy);
 *                        waiters spin (then yield). ts = struct kl_rm_tracker.
 *   kl_rmlock_sleepable  the same with KL_RM_SLEEPABLE: a revoking writer sleeps for biased readers.
 *   kl_pcpu_rwsem        Linux percpu-rwsem: rseq per-CPU counters, rcu_sync; no token.
 *   kl_seqlock           sequence lock: readers hold nothing and retry
 *                        (LOCKOPS_READ_RETRY); ts = the sequence read_lock saw.
 * Built against the public headers, so the read fast paths are the inline ones users get.
 */
#include <klock/pcpu_rwsem.h>
#include <klock/rmlock.h>
#include <klock/seqlock.h>

#include "lockops.h"

/* ---- kl_rmlock --------------------------------------------------------------------------- */

static int rm_init(void *l)
{
	return kl_rmlock_init(l, 0);
}

static int rm_init_sleepable(void *l)
{
	return kl_rmlock_init(l, KL_RM_SLEEPABLE);
}

static void rm_destroy(void *l)
{
	kl_rmlock_destroy(l);
}

static void rm_wlock(void *l, void *ts)
{
	(void)ts;
	kl_rmlock_write_lock(l);
}

static void rm_wunlock(void *l, void *ts)
{
	(void)ts;
	kl_rmlock_write_unlock(l);
}

static bool rm_wtrylock(void *l, void *ts)
{
	(void)ts;
	return kl_rmlock_write_trylock(l);
}

static void rm_rlock(void *l, void *ts)
{
	kl_rmlock_read_lock(l, ts);
}

static void rm_runlock(void *l, void *ts)
{
	kl_rmlock_read_unlock(l, ts);
}

static bool rm_rtrylock(void *l, void *ts)
{
	return kl_rmlock_read_trylock(l, ts);
}

LOCKOPS_PAIR_LOOP(rm_rloop, struct kl_rmlock, kl_rmlock_read_lock(L, T), kl_rmlock_read_unlock(L, T))

static void rm_bias(const void *l, uint64_t *revocations, uint64_t *unbiased_ns)
{
	struct kl_rmlock_bias b;

	kl_rmlock_bias_stats(l, &b);
	*revocations = b.revocations;
	*unbiased_ns = b.unbiased_ns;
}

static const struct lockops kl_rmlock_ops = {
	.name = "kl_rmlock",
	.family = "klock",
	.summary = "FreeBSD rmlock + BRAVO bias: fence-free readers until writes come, then kl_rwlock",
	.flags = LOCKOPS_RW | LOCKOPS_READ_BIASED | LOCKOPS_NO_RECURSE_READ,
	.size = sizeof(struct kl_rmlock),
	.tsize = sizeof(struct kl_rm_tracker),
	.init = rm_init,
	.destroy = rm_destroy,
	.write_lock = rm_wlock,
	.write_unlock = rm_wunlock,
	.write_trylock = rm_wtrylock,
	.read_lock = rm_rlock,
	.read_unlock = rm_runlock,
	.read_trylock = rm_rtrylock,
	.read_pair_loop = rm_rloop,
	.bias = rm_bias,
};
LOCKOPS_REGISTER(kl_rmlock_ops)

static const struct lockops kl_rmlock_sleepable_ops = {
	.name = "kl_rmlock_sleepable",
	.family = "klock",
	.summary = "kl_rmlock with KL_RM_SLEEPABLE: a revoking writer sleeps for biased readers",
	.flags = LOCKOPS_RW | LOCKOPS_READ_BIASED | LOCKOPS_NO_RECURSE_READ,
	.size = sizeof(struct kl_rmlock),
	.tsize = sizeof(struct kl_rm_tracker),
	.init = rm_init_sleepable,
	.destroy = rm_destroy,
	.write_lock = rm_wlock,
	.write_unlock = rm_wunlock,
	.write_trylock = rm_wtrylock,
	.read_lock = rm_rlock,
	.read_unlock = rm_runlock,
	.read_trylock = rm_rtrylock,
	.bias = rm_bias,
};
LOCKOPS_REGISTER(kl_rmlock_sleepable_ops)

/* ---- kl_pcpu_rwsem ------------------------------------------------------------------------ */

static int ps_init(void *l)
{
	return kl_pcpu_rwsem_init(l);
}

static void ps_destroy(void *l)
{
	kl_pcpu_rwsem_destroy(l);
}

static void ps_wlock(void *l, void *ts)
{
	(void)ts;
	kl_pcpu_rwsem_write_lock(l);
}

static void ps_wunlock(void *l, void *ts)
{
	(void)ts;
	kl_pcpu_rwsem_write_unlock(l);
}

static void ps_rlock(void *l, void *ts)
{
	(void)ts;
	kl_pcpu_rwsem_read_lock(l);
}

static void ps_runlock(void *l, void *ts)
{
	(void)ts;
	kl_pcpu_rwsem_read_unlock(l);
}

static bool ps_rtrylock(void *l, void *ts)
{
	(void)ts;
	return kl_pcpu_rwsem_read_trylock(l);
}

LOCKOPS_PAIR_LOOP(ps_rloop, struct kl_pcpu_rwsem, kl_pcpu_rwsem_read_lock(L), kl_pcpu_rwsem_read_unlock(L))

static const struct lockops kl_pcpu_rwsem_ops = {
	.name = "kl_pcpu_rwsem",
	.family = "klock",
	.summary = "Linux percpu-rwsem: rseq per-CPU counters, rcu_sync bursts, FIFO sleepers",
	.flags = LOCKOPS_RW | LOCKOPS_READ_BIASED | LOCKOPS_NO_RECURSE_READ,
	.size = sizeof(struct kl_pcpu_rwsem),
	.init = ps_init,
	.destroy = ps_destroy,
	.write_lock = ps_wlock,
	.write_unlock = ps_wunlock,
	.read_lock = ps_rlock,
	.read_unlock = ps_runlock,
	.read_trylock = ps_rtrylock,
	.read_pair_loop = ps_rloop,
};
LOCKOPS_REGISTER(kl_pcpu_rwsem_ops)

/* ---- kl_seqlock --------------------------------------------------------------------------- */

static int sq_init(void *l)
{
	return kl_seqlock_init(l);
}

static void sq_destroy(void *l)
{
	kl_seqlock_destroy(l);
}

static void sq_wlock(void *l, void *ts)
{
	(void)ts;
	kl_seqlock_write_lock(l);
}

static void sq_wunlock(void *l, void *ts)
{
	(void)ts;
	kl_seqlock_write_unlock(l);
}

static bool sq_wtrylock(void *l, void *ts)
{
	(void)ts;
	return kl_seqlock_write_trylock(l);
}

/* read_lock: take the snapshot (waits out a write in progress). */
static void sq_rbegin(void *l, void *ts)
{
	*(uint32_t *)ts = kl_seqlock_read_begin(l);
}

static bool sq_rretry(void *l, void *ts)
{
	return kl_seqlock_read_retry(l, *(const uint32_t *)ts);
}

/* read_unlock: nothing to release. */
static void sq_rend(void *l, void *ts)
{
	(void)l, (void)ts;
}

static const struct lockops kl_seqlock_ops = {
	.name = "kl_seqlock",
	.family = "klock",
	.summary = "sequence lock: readers write nothing and retry; writers take a mutex",
	.flags = LOCKOPS_RW | LOCKOPS_READ_BIASED | LOCKOPS_READ_RETRY,
	.size = sizeof(struct kl_seqlock),
	.tsize = sizeof(uint32_t),
	.init = sq_init,
	.destroy = sq_destroy,
	.write_lock = sq_wlock,
	.write_unlock = sq_wunlock,
	.write_trylock = sq_wtrylock,
	.read_lock = sq_rbegin,
	.read_unlock = sq_rend,
	.read_retry = sq_rretry,
};
LOCKOPS_REGISTER(kl_seqlock_ops)
