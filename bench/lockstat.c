/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/lockstat.c - the --lockstat knob. klock's lockstat (klock/lockstat.h) counts
 * slow-path episodes per lock; klbench resets and starts it before a run's workers
 * start, stops it after they stop, and reports the share of the workers' time spent
 * waiting for locks, the figure NetBSD's lockstat summarises as "X% of CPU time was
 * spent waiting for locks". Built only when klock's lockstat is (meson defines
 * KLBENCH_HAVE_LOCKSTAT); otherwise the knob says so.
 */
#include <math.h>

#include "klbench.h"

#if KLBENCH_HAVE_LOCKSTAT
#error "lockstat glue: write it against klock/lockstat.h"
#else

bool kb_lockstat_available(void)
{
	return false;
}

const char *kb_lockstat_why(void)
{
	return "lockstat not built: this klock has no klock/lockstat.h yet";
}

void kb_lockstat_begin(void)
{
}

double kb_lockstat_end(double thread_seconds)
{
	(void)thread_seconds;
	return NAN;
}

#endif
