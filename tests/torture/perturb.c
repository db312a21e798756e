/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/torture/perturb.c - what kltorture does to a lock besides taking it.
 *
 *   stutter   the driver pauses every worker (each parks at the top of its loop), then
 *             releases them all with one broadcast: a thundering herd on the lock, the way
 *             locktorture's stutter restarts its kthreads together.
 *   shuffle   a thread moves the workers between CPUs every SHUFFLE_NS: all onto one CPU
 *             (heavy oversubscription: spinners must yield), each onto a random CPU, or back
 *             onto every CPU. Readers also move themselves from inside read sections, so a
 *             per-CPU read side sees its reader leave on another CPU.
 *   signals   a thread sends SIGUSR1 to a random worker every SIGNAL_GAP_NS; the handler is
 *             installed without SA_RESTART, so every sleep in the lock (futex wait, parking)
 *             returns EINTR and must go back to sleep correctly.
 *   churn     each worker incarnation exits after a random number of acquisitions and the
 *             driver starts a new thread in its slot: per-thread lock state (rmlock
 *             trackers, thread records) is created and reclaimed mid-run.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "torture.h"

/* Stutter: run for RUN_MIN..RUN_MAX, then pause for PAUSE_MIN..PAUSE_MAX. */
#define STUTTER_RUN_MIN_NS (200 * KT_NSEC_PER_MSEC)
#define STUTTER_RUN_SPAN_NS (400 * KT_NSEC_PER_MSEC)
#define STUTTER_PAUSE_MIN_NS (20 * KT_NSEC_PER_MSEC)
#define STUTTER_PAUSE_SPAN_NS (30 * KT_NSEC_PER_MSEC)
/* Length of one write-rate phase, and a writer's pause before each write in the sparse
 * phase (about 1 write per PHASE_SPARSE_NS per writer: far below the full rate). */
#define PHASE_NS (40 * KT_NSEC_PER_MSEC)
#define PHASE_SPARSE_NS (200 * KT_NSEC_PER_USEC)
/* The flip phase's cycle: writers keep quiet for FLIP_QUIET_NS of every FLIP_PERIOD_NS
 * (room for kl_rmlock's readers to re-arm its bias: a window of 9 revocation costs, a few
 * hundred microseconds here), then write at the full rate (the first write revokes).
 * A quiet writer looks at the clock every FLIP_POLL_NS. */
#define FLIP_PERIOD_NS (4 * KT_NSEC_PER_MSEC)
#define FLIP_QUIET_NS (3 * KT_NSEC_PER_MSEC)
#define FLIP_POLL_NS (100 * KT_NSEC_PER_USEC)
/* A writer in the no-write phase looks for the next phase this often. */
#define PHASE_POLL_NS KT_NSEC_PER_MSEC
/* Time between affinity shuffles. */
#define SHUFFLE_NS (20 * KT_NSEC_PER_MSEC)
/* Time between two signals of the storm. */
#define SIGNAL_GAP_NS (100 * KT_NSEC_PER_USEC)
/* Churn: an incarnation lives for LIFE_MIN..LIFE_MIN+LIFE_SPAN acquisitions. */
#define CHURN_LIFE_MIN 500
#define CHURN_LIFE_SPAN 20000

/* Distinct random streams for the perturbation threads (any odd constants). */
#define SHUFFLER_SEED 0x5bd1e995ull
#define SIGNALLER_SEED 0x27d4eb2full

/* Signals taken by the workers (the handler only counts). */
static _Atomic long signals_taken;
/* This thread moved itself inside a read section; restore its affinity after unlock. */
static __thread bool pinned;

static void on_signal(int sig)
{
	(void)sig;
	atomic_fetch_add_explicit(&signals_taken, 1, memory_order_relaxed);
}

void kt_signals_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: interrupted sleeps return EINTR */
	sigaction(SIGUSR1, &sa, NULL);
}

/* ---- stutter -------------------------------------------------------------------------- */

void kt_stutter_point(struct kt_run *r, struct kt_slot *s)
{
	if (!atomic_load_explicit(&r->paused, memory_order_acquire))
		return;
	kt_slot_set(s, KT_S_STUTTER, NULL);
	pthread_mutex_lock(&r->stutter_m);
	while (atomic_load(&r->paused) && !atomic_load(&r->stop))
		pthread_cond_wait(&r->stutter_c, &r->stutter_m);
	pthread_mutex_unlock(&r->stutter_m);
}

static void set_paused(struct kt_run *r, bool on)
{
	pthread_mutex_lock(&r->stutter_m);
	atomic_store(&r->paused, on);
	if (!on)
		pthread_cond_broadcast(&r->stutter_c);
	pthread_mutex_unlock(&r->stutter_m);
}

void kt_driver_tick(struct kt_run *r, int64_t now, int64_t *next_stutter)
{
	if (!(r->cfg->perturb & KT_P_STUTTER) || now < *next_stutter)
		return;
	if (!atomic_load(&r->paused)) {
		set_paused(r, true);
		r->stutters++;
		*next_stutter = now + STUTTER_PAUSE_MIN_NS +
				(int64_t)(kt_xorshift(&r->rng) % STUTTER_PAUSE_SPAN_NS);
	} else {
		set_paused(r, false);
		*next_stutter = now + STUTTER_RUN_MIN_NS +
				(int64_t)(kt_xorshift(&r->rng) % STUTTER_RUN_SPAN_NS);
	}
}

/* ---- write-rate phases ------------------------------------------------------------------ */

/* The phase after @ph among those the perturbations enabled (@perturb). */
static int next_phase_of(int ph, unsigned perturb)
{
	do
		ph = (ph + 1) % KT_PH_COUNT;
	while ((ph == KT_PH_FLIP && !(perturb & KT_P_FLIPS)) ||
	       ((ph == KT_PH_NONE || ph == KT_PH_SPARSE) && !(perturb & KT_P_PHASES)));
	return ph;
}

/* Inside the flip phase: is this a quiet stretch of its cycle? */
static bool flip_quiet(void)
{
	return kt_now_ns() % FLIP_PERIOD_NS < FLIP_QUIET_NS;
}

void kt_phase_tick(struct kt_run *r, int64_t now, int64_t *next_phase)
{
	if (!(r->cfg->perturb & (KT_P_PHASES | KT_P_FLIPS)) || now < *next_phase)
		return;
	atomic_store(&r->phase, next_phase_of(atomic_load(&r->phase), r->cfg->perturb));
	r->phases++;
	*next_phase = now + PHASE_NS;
}

/* A writer before its next operation: hold back as the phase says. */
void kt_phase_point(struct kt_run *r, struct kt_slot *s)
{
	if (!(r->cfg->perturb & (KT_P_PHASES | KT_P_FLIPS)) || s->role != KT_WRITER)
		return;
	switch (atomic_load_explicit(&r->phase, memory_order_relaxed)) {
	case KT_PH_NONE:
		kt_slot_set(s, KT_S_THINK, NULL);
		while (atomic_load(&r->phase) == KT_PH_NONE && !atomic_load(&r->stop) &&
		       !atomic_load(&r->paused))
			kt_sleep_ns(PHASE_POLL_NS);
		break;
	case KT_PH_SPARSE:
		kt_slot_set(s, KT_S_THINK, NULL);
		kt_sleep_ns((int64_t)(kt_rand(s) % (2 * PHASE_SPARSE_NS)));
		break;
	case KT_PH_FLIP:
		kt_slot_set(s, KT_S_THINK, NULL);
		while (atomic_load(&r->phase) == KT_PH_FLIP && flip_quiet() &&
		       !atomic_load(&r->stop) && !atomic_load(&r->paused))
			kt_sleep_ns(FLIP_POLL_NS);
		break;
	default:
		break;
	}
}

/* ---- affinity --------------------------------------------------------------------------- */

/* The n-th CPU of the allowed set. */
static int allowed_cpu(const struct kt_run *r, int n)
{
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &r->allowed) && n-- == 0)
			return c;
	return 0;
}

static void one_cpu(const struct kt_run *r, uint64_t pick, cpu_set_t *set)
{
	CPU_ZERO(set);
	CPU_SET(allowed_cpu(r, (int)(pick % (uint64_t)r->ncpus_allowed)), set);
}

void kt_migrate_self(struct kt_run *r, struct kt_slot *s)
{
	cpu_set_t set;
	int here = sched_getcpu(), c;

	if (r->ncpus_allowed < 2)
		return;
	do {
		c = allowed_cpu(r, (int)(kt_rand(s) % (uint64_t)r->ncpus_allowed));
	} while (c == here);
	CPU_ZERO(&set);
	CPU_SET(c, &set);
	if (sched_setaffinity(0, sizeof(set), &set) == 0) {
		pinned = true;
		s->migrations++;
	}
}

void kt_restore_affinity(struct kt_run *r)
{
	if (pinned) {
		sched_setaffinity(0, sizeof(r->allowed), &r->allowed);
		pinned = false;
	}
}

/* One shuffle: everyone on one CPU, everyone on a random CPU, or everyone everywhere. */
static void shuffle_once(struct kt_run *r, uint64_t *rng)
{
	uint64_t mode = kt_xorshift(rng) % 3, one = kt_xorshift(rng);
	cpu_set_t set;

	for (unsigned i = 0; i < r->nslots; i++) {
		pid_t tid = atomic_load(&r->slots[i].tid);

		if (tid == 0 || atomic_load(&r->slots[i].state) == KT_S_EXITED)
			continue;
		if (mode == 0)
			one_cpu(r, one, &set);
		else if (mode == 1)
			one_cpu(r, kt_xorshift(rng), &set);
		else
			set = r->allowed;
		sched_setaffinity(tid, sizeof(set), &set); /* ESRCH: it just exited */
	}
	atomic_fetch_add(&r->shuffles, 1);
}

static void *shuffler(void *arg)
{
	struct kt_run *r = arg;
	uint64_t rng = r->cfg->seed ^ SHUFFLER_SEED;

	while (!atomic_load(&r->stop)) {
		shuffle_once(r, &rng);
		kt_sleep_ns(SHUFFLE_NS);
	}
	return NULL;
}

/* ---- signal storm ------------------------------------------------------------------------ */

static void *signaller(void *arg)
{
	struct kt_run *r = arg;
	pid_t pid = getpid();
	uint64_t rng = r->cfg->seed ^ SIGNALLER_SEED;

	while (!atomic_load(&r->stop)) {
		struct kt_slot *s = &r->slots[kt_xorshift(&rng) % r->nslots];
		pid_t tid = atomic_load(&s->tid);

		if (tid != 0 && atomic_load(&s->state) != KT_S_EXITED &&
		    syscall(SYS_tgkill, pid, tid, SIGUSR1) == 0)
			atomic_fetch_add(&r->signals_sent, 1);
		kt_sleep_ns(SIGNAL_GAP_NS);
	}
	return NULL;
}

/* The perturbation threads never take the tested lock and do not get the storm's signal. */
static void start_quiet_thread(pthread_t *t, void *(*fn)(void *), struct kt_run *r)
{
	sigset_t block, old;
	int e;

	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	e = pthread_create(t, NULL, fn, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e != 0) {
		fprintf(stderr, "kltorture: pthread_create: %s\n", strerror(e));
		_exit(2);
	}
}

void kt_perturb_start(struct kt_run *r)
{
	if ((r->cfg->perturb & KT_P_SHUFFLE) && r->ncpus_allowed >= 2)
		start_quiet_thread(&r->shuffler, shuffler, r);
	if (r->cfg->perturb & KT_P_SIGNALS)
		start_quiet_thread(&r->signaller, signaller, r);
}

/* Called with r->stop set: releases a stutter and joins the perturbation threads. */
void kt_perturb_stop(struct kt_run *r)
{
	set_paused(r, false);
	if ((r->cfg->perturb & KT_P_SHUFFLE) && r->ncpus_allowed >= 2)
		pthread_join(r->shuffler, NULL);
	if (r->cfg->perturb & KT_P_SIGNALS)
		pthread_join(r->signaller, NULL);
}

/* ---- churn: starting and reaping worker incarnations --------------------------------------- */

int kt_spawn(struct kt_slot *s)
{
	int e;

	s->lifetime = CHURN_LIFE_MIN + (long)(kt_rand(s) % CHURN_LIFE_SPAN);
	/* A new thread gets fresh, zero-filled adapter state (lockops.h: the previous
	 * incarnation's thread_leave may have retired what it held). */
	memset(s->ts, 0, s->run->ops->tsize);
	atomic_store(&s->exited, false);
	atomic_store(&s->tid, 0);
	kt_slot_set(s, KT_S_STARTING, NULL);
	e = pthread_create(&s->thread, NULL, kt_worker, s);
	if (e != 0)
		return e;
	s->joinable = true;
	s->incarnations++;
	s->run->threads_started++;
	return 0;
}

/* Joins exited incarnations; while the run goes on, starts their replacements. */
void kt_reap(struct kt_run *r)
{
	for (unsigned i = 0; i < r->nslots; i++) {
		struct kt_slot *s = &r->slots[i];
		int e;

		if (s->joinable && atomic_load(&s->exited)) {
			pthread_join(s->thread, NULL);
			s->joinable = false;
		}
		if (s->joinable || atomic_load(&r->stop))
			continue;
		e = kt_spawn(s); /* EAGAIN: out of threads for now, the next tick retries */
		if (e != 0 && e != EAGAIN) {
			fprintf(stderr, "kltorture: pthread_create: %s\n", strerror(e));
			_exit(2);
		}
	}
}

long kt_signals_taken(void)
{
	return atomic_load(&signals_taken);
}
