/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/lockops/busted.c - a deliberately broken lock (locktorture's lock_busted): lock and
 * unlock do nothing, so critical sections overlap. Drivers must catch it: kltorture reports
 * FAILURE with `!!!`, klbench's counter check fails the run. Never a real choice.
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

static const struct lockops busted_ops = {
	.name = "busted",
	.family = "test",
	.summary = "broken on purpose: lock and unlock do nothing (drivers must catch it)",
	.flags = LOCKOPS_BUSTED,
	.size = 1,
	.init = busted_init,
	.destroy = busted_destroy,
	.write_lock = busted_lock,
	.write_unlock = busted_unlock,
};
LOCKOPS_REGISTER(busted_ops)
