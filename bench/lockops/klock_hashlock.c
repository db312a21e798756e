/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/lockops/klock_hashlock.c - kl_hashlock (locks/primitives/hashlock.c) as keyed locks.
 *
 * "A lock" here is a whole table: the adapter's object is a struct kl_hashlock with the
 * automatic number of stripes. key_lock(l, ts, key) locks whatever stripe protects `key`
 * (klbench's hashed-queue scenario passes each bucket's address, kltorture its keys);
 * write_lock/write_unlock lock one fixed key - the table object's own address - so a
 * driver that knows nothing of keys still gets a plain exclusive lock (one stripe).
 * Two adapters: mutex stripes (the default) and ticket stripes (leaf-only, short sections);
 * keys_lock takes several keys through lock2/lockn. kl_lockobj (below) is the shared lock
 * object of the same header.
 */
#include <errno.h>
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

/* Several keys: lock2 for two (its own entry point), lockn for more. */
static void hashlock_keys_lock(void *l, void *ts, const void *const *keys, size_t n)
{
	(void)ts;
	if (n == 2)
		kl_hashlock_lock2(l, keys[0], keys[1]);
	else
		(void)kl_hashlock_lockn(l, keys, n);
}

static void hashlock_keys_unlock(void *l, void *ts, const void *const *keys, size_t n)
{
	(void)ts;
	if (n == 2)
		kl_hashlock_unlock2(l, keys[0], keys[1]);
	else
		kl_hashlock_unlockn(l, keys, n);
}

static const struct lockops kl_hashlock_ops = {
	.name = "kl_hashlock",
	.family = "klock",
	.summary = "hashed lock table, kl_mutex stripes, auto size; keyed (locks/primitives/hashlock.c)",
	.flags = LOCKOPS_KEYED,
	.size = sizeof(struct kl_hashlock),
	.init = hashlock_init,
	.destroy = hashlock_destroy,
	.write_lock = hashlock_lock,
	.write_unlock = hashlock_unlock,
	.write_trylock = hashlock_trylock,
	.key_lock = hashlock_key_lock,
	.key_unlock = hashlock_key_unlock,
	.keys_lock = hashlock_keys_lock,
	.keys_unlock = hashlock_keys_unlock,
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
	.keys_lock = hashlock_keys_lock,
	.keys_unlock = hashlock_keys_unlock,
};
LOCKOPS_REGISTER(kl_hashlock_ticket_ops)

/*
 * kl_lockobj: a kl_mutex from kl_lockobj_alloc(), shared by reference. The adapter's object
 * is a pointer to it; each thread holds a reference of its own from thread_enter to
 * thread_leave (as objects sharing one lock object would), so the reference count is
 * exercised concurrently with the lock; destroy drops the creator's, the last one.
 */
struct lockobj_ref {
	struct kl_mutex *m;
};

static int lockobj_init(void *l)
{
	struct lockobj_ref *r = l;

	r->m = kl_lockobj_alloc();
	return r->m != NULL ? 0 : ENOMEM;
}

static void lockobj_destroy(void *l)
{
	(void)kl_lockobj_free(((struct lockobj_ref *)l)->m);
}

static void lockobj_enter(void *l)
{
	kl_lockobj_hold(((struct lockobj_ref *)l)->m);
}

static void lockobj_leave(void *l)
{
	(void)kl_lockobj_free(((struct lockobj_ref *)l)->m);
}

static void lockobj_lock(void *l, void *ts)
{
	(void)ts;
	kl_mutex_lock(((struct lockobj_ref *)l)->m);
}

static void lockobj_unlock(void *l, void *ts)
{
	(void)ts;
	kl_mutex_unlock(((struct lockobj_ref *)l)->m);
}

static bool lockobj_trylock(void *l, void *ts)
{
	(void)ts;
	return kl_mutex_trylock(((struct lockobj_ref *)l)->m);
}

static int lockobj_timedlock(void *l, void *ts, const struct timespec *abs)
{
	(void)ts;
	return kl_mutex_timedlock(((struct lockobj_ref *)l)->m, abs);
}

static const struct lockops kl_lockobj_ops = {
	.name = "kl_lockobj",
	.family = "klock",
	.summary = "shared lock object: refcounted kl_mutex (kl_lockobj_alloc/hold/free)",
	.size = sizeof(struct lockobj_ref),
	.init = lockobj_init,
	.destroy = lockobj_destroy,
	.thread_enter = lockobj_enter,
	.thread_leave = lockobj_leave,
	.write_lock = lockobj_lock,
	.write_unlock = lockobj_unlock,
	.write_trylock = lockobj_trylock,
	.write_timedlock = lockobj_timedlock,
};
LOCKOPS_REGISTER(kl_lockobj_ops)
