/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/lockops/klock_hashlock.c - kl_hashlock (locks/hashlock.c) as keyed locks.
 *
 * "A lock" here is a whole table: the adapter's object is a struct kl_hashlock with the
 * automatic number of stripes. key_lock(l, ts, key) locks whatever stripe protects `key`
 * (klbench's hashed-queue scenario passes each bucket's address, kltorture its keys);
 * write_lock/write_unlock lock one fixed key - the table object's own address - so a
 * driver that knows nothing of keys still gets a plain exclusive lock (one stripe).
 * Two adapters: mutex stripes (the default) and ticket stripes (leaf-only, short sections).
 */
#include <klock/hashlock.h>
#include "lockops.h"

static int hashlock_init(void *l)
{
	return kl_hashlock_init(l, 0);
}

static int hashlock_ticket_init(void *l)
{
	return kl_hashlock_init_flags(l, 0, KL_HASHLOCK_TICKET);
}

static void hashlock_destroy(void *l)
{
	kl_hashlock_destroy(l);
}

static void hashlock_lock(void *l, void *ts)
{
	(void)ts;
	kl_hashlock_lock(l, l);
}

static void hashlock_unlock(void *l, void *ts)
{
	(void)ts;
	kl_hashlock_unlock(l, l);
}

static bool hashlock_trylock(void *l, void *ts)
{
	(void)ts;
	return kl_hashlock_trylock(l, l);
}

static void hashlock_key_lock(void *l, void *ts, const void *key)
{
	(void)ts;
	kl_hashlock_lock(l, key);
}

static void hashlock_key_unlock(void *l, void *ts, const void *key)
{
	(void)ts;
	kl_hashlock_unlock(l, key);
}

static const struct lockops kl_hashlock_ops = {
	.name = "kl_hashlock",
	.family = "klock",
	.summary = "hashed lock table, kl_mutex stripes, auto size; keyed (locks/hashlock.c)",
	.flags = LOCKOPS_KEYED,
	.size = sizeof(struct kl_hashlock),
	.init = hashlock_init,
	.destroy = hashlock_destroy,
	.write_lock = hashlock_lock,
	.write_unlock = hashlock_unlock,
	.write_trylock = hashlock_trylock,
	.key_lock = hashlock_key_lock,
	.key_unlock = hashlock_key_unlock,
};
LOCKOPS_REGISTER(kl_hashlock_ops)

static const struct lockops kl_hashlock_ticket_ops = {
	.name = "kl_hashlock_ticket",
	.family = "klock",
	.summary = "hashed lock table, kl_ticket stripes (leaf-only short sections); keyed",
	.flags = LOCKOPS_KEYED | LOCKOPS_SPIN,
	.size = sizeof(struct kl_hashlock),
	.init = hashlock_ticket_init,
	.destroy = hashlock_destroy,
	.write_lock = hashlock_lock,
	.write_unlock = hashlock_unlock,
	.write_trylock = hashlock_trylock,
	.key_lock = hashlock_key_lock,
	.key_unlock = hashlock_key_unlock,
};
LOCKOPS_REGISTER(kl_hashlock_ticket_ops)
