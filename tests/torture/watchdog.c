/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/torture/watchdog.c - a hung run fails loudly instead of hanging CI.
 *
 * Every POLL_NS the watchdog sums the workers' acquisition counts. If the sum has not moved
 * for cfg->watchdog_secs (10 s by default: far above the longest planned hold, 20 ms), the
 * run is hung - a lost wake-up, a deadlock, a lock that never hands over: it prints every
 * thread's state (what it is doing, which lock op, for how long), the witness's view of held
 * locks when witness is built in, `End of test: FAILURE` and exits the process with status 1.
 * A single thread stuck in a lock op that long while the others progress is starvation: it
 * is reported once with `???` (locktorture's acq_writer_lim warning), not failed.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <klock/klock.h>
#include <klock/witness.h>

#include "torture.h"

/* How often the watchdog looks. */
#define POLL_NS (100 * KT_NSEC_PER_MSEC)

void kt_dump_threads(struct kt_run *r, const char *why)
{
	int64_t now = kt_now_ns();

	flockfile(stdout);
	printf("!!! %s: watchdog: %s; thread states:\n", r->ops->name, why);
	for (unsigned i = 0; i < r->nslots; i++) {
		struct kt_slot *s = &r->slots[i];
		int st = atomic_load(&s->state);
		const char *op = atomic_load(&s->op);
		double for_s = (double)(now - atomic_load(&s->since_ns)) / KT_NSEC_PER_SEC;
		bool with_op = st == KT_S_LOCKING || st == KT_S_IN_CS || st == KT_S_UNLOCKING;

		printf("    %s %2u tid %-7d %s%s%s for %.1f s (%ld acquisitions, thread #%u)\n",
		       s->role == KT_WRITER ? "writer" : "reader", s->index,
		       (int)atomic_load(&s->tid), kt_state_name(st), with_op ? " " : "",
		       with_op && op != NULL ? op : "", for_s, atomic_load(&s->acq),
		       s->incarnations);
	}
	fflush(stdout);
	funlockfile(stdout);
	if (kl_witness_enabled())
		kl_witness_dump(stdout);
}

static long total_acquisitions(struct kt_run *r)
{
	long sum = 0;

	for (unsigned i = 0; i < r->nslots; i++)
		sum += atomic_load_explicit(&r->slots[i].acq, memory_order_relaxed);
	return sum;
}

/* Reports each slot stuck in a lock op past the limit once per run. */
static void check_starvation(struct kt_run *r, int64_t now, int64_t limit, bool *warned)
{
	for (unsigned i = 0; i < r->nslots; i++) {
		struct kt_slot *s = &r->slots[i];

		if (warned[i] || atomic_load(&s->state) != KT_S_LOCKING ||
		    now - atomic_load(&s->since_ns) < limit)
			continue;
		warned[i] = true;
		printf("??? %s: %s %u has waited in %s for more than %.0f s while others progress\n",
		       r->ops->name, s->role == KT_WRITER ? "writer" : "reader", s->index,
		       atomic_load(&s->op), (double)limit / KT_NSEC_PER_SEC);
		fflush(stdout);
	}
}

static void *watchdog(void *arg)
{
	struct kt_run *r = arg;
	int64_t limit = (int64_t)(r->cfg->watchdog_secs * KT_NSEC_PER_SEC);
	int64_t last_change = kt_now_ns();
	long last = -1;
	bool *starved = calloc(r->nslots, sizeof(bool));

	while (!atomic_load(&r->watchdog_stop)) {
		int64_t now;
		long sum;

		kt_sleep_ns(POLL_NS);
		now = kt_now_ns();
		sum = total_acquisitions(r);
		if (sum != last) {
			last = sum;
			last_change = now;
		} else if (now - last_change > limit) {
			char why[128];

			snprintf(why, sizeof(why), "no lock acquired for %.1f s",
				 (double)(now - last_change) / KT_NSEC_PER_SEC);
			kt_dump_threads(r, why);
			printf("End of test: FAILURE (hung)\n");
			fflush(stdout);
			_exit(1);
		}
		if (starved != NULL)
			check_starvation(r, now, limit, starved);
	}
	free(starved);
	return NULL;
}

void kt_watchdog_start(struct kt_run *r)
{
	sigset_t block, old;

	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	atomic_store(&r->watchdog_stop, false);
	if (pthread_create(&r->watchdog, NULL, watchdog, r) != 0) {
		fputs("kltorture: cannot start the watchdog\n", stderr);
		_exit(2);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void kt_watchdog_stop(struct kt_run *r)
{
	atomic_store(&r->watchdog_stop, true);
	pthread_join(r->watchdog, NULL);
}
