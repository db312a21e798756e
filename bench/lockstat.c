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
#include <errno.h>

#include <klock/lockstat.h>

/* -1 unknown, 0 no (a -Dlockstat=false build), 1 yes. */
static int kb_ls_state = -1;

bool kb_lockstat_available(void)
{
	int r;

	if (kb_ls_state >= 0)
		return kb_ls_state;
	if (kl_lockstat_enabled()) {
		kb_ls_state = 1;   /* KLOCK_LOCKSTAT=1 already records: leave it on */
		return true;
	}
	r = kl_lockstat_start();
	if (r == 0)
		kl_lockstat_stop();
	kb_ls_state = r == 0;
	return kb_ls_state;
}

const char *kb_lockstat_why(void)
{
	return "lockstat not built: this klock was configured with -Dlockstat=false";
}

/* Called as the measured interval begins: only its slow-path waits count. */
void kb_lockstat_begin(void)
{
	kl_lockstat_reset();
	if (!kl_lockstat_enabled())
		kl_lockstat_start();
}

void kb_lockstat_end(double thread_seconds, uint64_t ops, struct kb_lockstat *out)
{
	struct kl_lockstat_snapshot snap;

	out->wait_pct = out->contended_pct = NAN;
	kl_lockstat_stop();
	if (kl_lockstat_snapshot(&snap) != 0)
		return;
	if (thread_seconds > 0)
		out->wait_pct = 100.0 * (double)snap.wait_ns / (thread_seconds * 1e9);
	if (ops > 0)
		out->contended_pct = 100.0 * (double)snap.contended / (double)ops;
	kl_lockstat_snapshot_free(&snap);
}

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

void kb_lockstat_end(double thread_seconds, uint64_t ops, struct kb_lockstat *out)
{
	(void)thread_seconds, (void)ops;
	out->wait_pct = out->contended_pct = NAN;
}

#endif
