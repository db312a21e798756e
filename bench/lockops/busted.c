/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/lockops/busted.c - a lock that does not lock (Linux locktorture's lock_busted).
 *
 * Every call returns at once and excludes nobody. It exists to prove the drivers' checks
 * work: klbench's counter verification and kltorture's in-section checks must report it
 * as broken, and their tests fail if they do not. It is also the "empty call" baseline
 * for latency measurements: the cost of reaching an adapter through the ops table, and
 * (its pair loop) the cost of an empty loop iteration.
 * Drivers never pick it by default (LOCKOPS_BUSTED).
 */
#include "lockops.h"

static int busted_init(void *l)
{
	(void)l;
	return 0;
}

static void busted_destroy(void *l)
{
	(void)l;
}

static void busted_lock(void *l, void *ts)
{
	(void)l, (void)ts;
}

static void busted_unlock(void *l, void *ts)
{
	(void)l, (void)ts;
}

static bool busted_trylock(void *l, void *ts)
{
	(void)l, (void)ts;
	return true;
}

LOCKOPS_PAIR_LOOP(busted_loop, int, (void)0, (void)0)

static const struct lockops busted_ops = {
	.name = "busted",
	.family = "test",
	.summary = "deliberately broken: lock and unlock do nothing (drivers must catch it)",
	.flags = LOCKOPS_BUSTED,
	.size = sizeof(int),
	.init = busted_init,
	.destroy = busted_destroy,
	.write_lock = busted_lock,
	.write_unlock = busted_unlock,
	.write_trylock = busted_trylock,
	.write_pair_loop = busted_loop,
};
LOCKOPS_REGISTER(busted_ops)
