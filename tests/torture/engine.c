/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/torture/engine.c - the workers and the checks inside every critical section.
 *
 * Checks (all with relaxed atomics: the lock under test must supply the ordering; RMWs on
 * one variable are totally ordered, so an overlap is always seen by one of the two sides):
 *   writer  writers_in was 0 and readers_in is 0 on entry (locktorture's writer check);
 *           the CK counter goes 0 -> CK_BUMPS under its own increments and back to 0
 *           (ck regressions' validate); plain data stays consistent across the hold.
 *   reader  no writer inside on entry and on exit; the CK counter is 0 (a reader that
 *           overlaps a writer sees it mid-bump); plain data consistent.
 * Any failure is a violation: counted per thread (the `Fail:` column and `!!!`), the first
 * few printed with the lock, the thread and what was seen.
 *
 * Optimistic readers (adapters with read_retry: kl_seqlock) do not exclude writers: a
 * reader records what it saw, asks read_retry whether a writer intervened, and only when
 * none did is what it saw checked - a seqlock promises a consistent snapshot, not
 * exclusion. Such readers do not count themselves in readers_in, and the protected data
 * is then accessed with relaxed atomics on both sides (the reads race by design).
 * Keyed locks (LOCKOPS_KEYED: kl_hashlock) are also taken by key, for one of KT_NKEYS
 * addresses, each with its own checked state: two keys on different stripes may be held
 * at once, two threads on one key never. Where the adapter has keys_lock (lock2/lockn),
 * some sections hold 2..KT_MULTIKEY_MAX keys at once and check each key's state.
 *
 * The plain (non-atomic) fields are there for the sanitizers: under TSan or helgrind, a
 * lock whose annotations or ordering leak shows up as a data race on them.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "torture.h"

/* ck regressions' validate programs bump the shared counter 8 (rwlock) or 10 times. */
#define CK_BUMPS 8
/* Short holds and thinks are busy waits of up to this long. */
#define CS_BUSY_MAX_NS 2000
#define THINK_BUSY_MAX_NS 4000
/* 1 in N holds sleeps instead (sleeping locks only; spinlock holders busy-wait). */
#define CS_SLEEP_ODDS 256
#define CS_SLEEP_MAX_NS (100 * KT_NSEC_PER_USEC)
/* 1 in N thinks sleeps, 1 in N yields the CPU. */
#define THINK_SLEEP_ODDS 128
#define THINK_SLEEP_MAX_NS (200 * KT_NSEC_PER_USEC)
#define YIELD_ODDS 64
/* locktorture's long_hold: 1 in N acquisitions keeps the lock this long. */
#define LONG_HOLD_ODDS 20000
#define LONG_HOLD_NS (20 * KT_NSEC_PER_MSEC)
/* 1 in N read sections moves its thread to another CPU while inside. */
#define MIGRATE_ODDS 64
/* 1 in N acquisitions uses the try variant, 1 in N the timed one (when enabled). */
#define TRY_ODDS 8
#define TIMED_ODDS 8
/* Failed trylocks in a row before the thread falls back to the blocking call. */
#define TRY_SPINS 64
/* Timed attempts wait at most this long. */
#define TIMED_MAX_NS (2 * KT_NSEC_PER_MSEC)
/* Violation lines printed per lock run (all are counted). */
#define MAX_PRINTED 10
/* 1 in N writer acquisitions of a keyed lock go by key. */
#define KEYED_ODDS 2
/* 1 in N of those take several keys at once (keys_lock), where the adapter can. */
#define MULTIKEY_ODDS 4
/* Acquisition after which an injected hang keeps the lock forever. */
#define INJECT_HANG_AT 100

/* One side of the lock (write or read), with the names the watchdog prints. */
struct kt_side {
	void (*lock)(void *, void *);
	void (*unlock)(void *, void *);
	bool (*trylock)(void *, void *);
	int (*timedlock)(void *, void *, const struct timespec *);
	bool (*retry)(void *, void *);  /* optimistic readers only */
	const char *n_lock, *n_unlock, *n_try, *n_timed;
};

/* The protected data: plain accesses, or relaxed atomics where readers race by design. */
static long plain_get(const struct kt_run *r, long *p)
{
	return r->optimistic ? __atomic_load_n(p, __ATOMIC_RELAXED) : *p;
}

static void plain_set(const struct kt_run *r, long *p, long v)
{
	if (r->optimistic)
		__atomic_store_n(p, v, __ATOMIC_RELAXED);
	else
		*p = v;
}

int64_t kt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * KT_NSEC_PER_SEC + ts.tv_nsec;
}

void kt_spin_ns(int64_t ns)
{
	int64_t end = kt_now_ns() + ns;

	while (kt_now_ns() < end)
		;
}

/* Sleeps the whole time even when signals interrupt it (they will: signal storms). */
void kt_sleep_ns(int64_t ns)
{
	int64_t end = kt_now_ns() + ns;

	for (int64_t left = ns; left > 0; left = end - kt_now_ns()) {
		struct timespec ts = { .tv_sec = left / KT_NSEC_PER_SEC,
				       .tv_nsec = left % KT_NSEC_PER_SEC };

		nanosleep(&ts, NULL);
	}
}

/* xorshift64*: one state per thread (seeded from the run seed and the slot). */
uint64_t kt_xorshift(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dull; /* xorshift64* output multiplier */
}

uint64_t kt_rand(struct kt_slot *s)
{
	return kt_xorshift(&s->rng);
}

static bool one_in(struct kt_slot *s, unsigned n)
{
	return kt_rand(s) % n == 0;
}

const char *kt_state_name(int st)
{
	static const char *const names[] = {
		[KT_S_STARTING] = "starting",
		[KT_S_THINK] = "thinking (outside the lock)",
		[KT_S_LOCKING] = "waiting in",
		[KT_S_IN_CS] = "in critical section after",
		[KT_S_UNLOCKING] = "inside",
		[KT_S_STUTTER] = "parked by stutter",
		[KT_S_EXITED] = "exited",
	};

	return st >= 0 && st <= KT_S_EXITED ? names[st] : "?";
}

void kt_slot_set(struct kt_slot *s, enum kt_state st, const char *op)
{
	if (op != NULL)
		atomic_store_explicit(&s->op, op, memory_order_relaxed);
	atomic_store_explicit(&s->since_ns, kt_now_ns(), memory_order_relaxed);
	atomic_store_explicit(&s->state, (int)st, memory_order_release);
}

void kt_violation(struct kt_run *r, struct kt_slot *s, const char *fmt, ...)
{
	va_list ap;

	s->fails++;
	atomic_fetch_add(&r->violations, 1);
	if (atomic_fetch_add(&r->printed, 1) >= MAX_PRINTED)
		return;
	flockfile(stdout);
	printf("!!! %s: %s %u (tid %d): ", r->ops->name,
	       s->role == KT_WRITER ? "writer" : "reader", s->index,
	       (int)atomic_load_explicit(&s->tid, memory_order_relaxed));
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	funlockfile(stdout);
}

/* ---- holding and thinking ------------------------------------------------------------ */

static bool sleeping_lock(const struct kt_run *r)
{
	return !(r->ops->flags & LOCKOPS_SPIN);
}

static void hold(struct kt_run *r, struct kt_slot *s)
{
	unsigned p = r->cfg->perturb;

	if ((p & KT_P_LONGHOLD) && one_in(s, LONG_HOLD_ODDS)) {
		s->long_holds++;
		if (sleeping_lock(r))
			kt_sleep_ns(LONG_HOLD_NS);
		else
			kt_spin_ns(LONG_HOLD_NS);
		return;
	}
	if (!(p & KT_P_DELAYS))
		return;
	if (sleeping_lock(r) && one_in(s, CS_SLEEP_ODDS))
		kt_sleep_ns((int64_t)(kt_rand(s) % CS_SLEEP_MAX_NS));
	else
		kt_spin_ns((int64_t)(kt_rand(s) % CS_BUSY_MAX_NS));
}

static void think(struct kt_run *r, struct kt_slot *s)
{
	kt_slot_set(s, KT_S_THINK, NULL);
	if (!(r->cfg->perturb & KT_P_DELAYS))
		return;
	if (one_in(s, THINK_SLEEP_ODDS))
		kt_sleep_ns((int64_t)(kt_rand(s) % THINK_SLEEP_MAX_NS));
	else if (one_in(s, YIELD_ODDS))
		sched_yield();
	else
		kt_spin_ns((int64_t)(kt_rand(s) % THINK_BUSY_MAX_NS));
}

/* ---- the checked critical sections ---------------------------------------------------- */

static void write_section(struct kt_run *r, struct kt_slot *s, struct kt_shared *sh)
{
	int w = atomic_fetch_add_explicit(&sh->writers_in, 1, memory_order_relaxed);
	int rd = atomic_load_explicit(&sh->readers_in, memory_order_relaxed);
	long c, seq;

	if (w != 0 || rd != 0)
		kt_violation(r, s, "writer entered with %d writer(s) and %d reader(s) inside",
			     w, rd);
	for (int i = 0; i < CK_BUMPS; i++)
		atomic_fetch_add_explicit(&sh->ck, 1, memory_order_relaxed);
	c = atomic_load_explicit(&sh->ck, memory_order_relaxed);
	if (c != CK_BUMPS)
		kt_violation(r, s, "CK counter is %ld after %d bumps from 0", c, CK_BUMPS);
	seq = plain_get(r, &sh->plain_seq) + 1;
	plain_set(r, &sh->plain_seq, seq);
	plain_set(r, &sh->plain_copy, seq);
	hold(r, s);
	if (plain_get(r, &sh->plain_seq) != seq || plain_get(r, &sh->plain_copy) != seq)
		kt_violation(r, s, "protected data changed under the writer (%ld/%ld, wrote %ld)",
			     plain_get(r, &sh->plain_seq), plain_get(r, &sh->plain_copy), seq);
	c = atomic_fetch_sub_explicit(&sh->ck, CK_BUMPS, memory_order_relaxed);
	if (c != CK_BUMPS)
		kt_violation(r, s, "CK counter is %ld at the end of the section", c);
	w = atomic_fetch_sub_explicit(&sh->writers_in, 1, memory_order_relaxed);
	if (w != 1)
		kt_violation(r, s, "writer left with %d writers inside", w);
}

static void read_section(struct kt_run *r, struct kt_slot *s)
{
	struct kt_shared *sh = r->sh;
	int w;
	long c, copy, seq;

	atomic_fetch_add_explicit(&sh->readers_in, 1, memory_order_relaxed);
	w = atomic_load_explicit(&sh->writers_in, memory_order_relaxed);
	if (w != 0)
		kt_violation(r, s, "reader entered with %d writer(s) inside", w);
	c = atomic_load_explicit(&sh->ck, memory_order_relaxed);
	if (c != 0)
		kt_violation(r, s, "reader saw the CK counter at %ld (a writer is inside)", c);
	copy = plain_get(r, &sh->plain_copy);
	seq = plain_get(r, &sh->plain_seq);
	if (copy != seq)
		kt_violation(r, s, "reader saw torn protected data (%ld/%ld)", seq, copy);
	if ((r->cfg->perturb & KT_P_SHUFFLE) && one_in(s, MIGRATE_ODDS))
		kt_migrate_self(r, s);
	hold(r, s);
	w = atomic_load_explicit(&sh->writers_in, memory_order_relaxed);
	if (w != 0)
		kt_violation(r, s, "a writer entered while a reader was inside (%d)", w);
	atomic_fetch_sub_explicit(&sh->readers_in, 1, memory_order_relaxed);
}

/* What an optimistic reader saw; judged only if no writer intervened. */
struct kt_seen {
	int writers, writers_after;
	long ck, seq, copy;
};

static struct kt_seen optimistic_look(struct kt_run *r, struct kt_slot *s)
{
	struct kt_shared *sh = r->sh;
	struct kt_seen v;

	v.writers = atomic_load_explicit(&sh->writers_in, memory_order_relaxed);
	v.ck = atomic_load_explicit(&sh->ck, memory_order_relaxed);
	v.copy = plain_get(r, &sh->plain_copy);
	v.seq = plain_get(r, &sh->plain_seq);
	if ((r->cfg->perturb & KT_P_SHUFFLE) && one_in(s, MIGRATE_ODDS))
		kt_migrate_self(r, s);
	hold(r, s);
	v.writers_after = atomic_load_explicit(&sh->writers_in, memory_order_relaxed);
	return v;
}

static void optimistic_judge(struct kt_run *r, struct kt_slot *s, const struct kt_seen *v)
{
	if (v->writers != 0 || v->writers_after != 0)
		kt_violation(r, s, "read_retry passed a section that overlapped a writer (%d/%d)",
			     v->writers, v->writers_after);
	if (v->ck != 0)
		kt_violation(r, s, "read_retry passed a section that saw the CK counter at %ld",
			     v->ck);
	if (v->copy != v->seq)
		kt_violation(r, s, "read_retry passed a torn snapshot (%ld/%ld)", v->seq, v->copy);
}

/* ---- acquiring: blocking, try, timed ---------------------------------------------------- */

static bool try_acquire(struct kt_run *r, struct kt_slot *s, const struct kt_side *d)
{
	kt_slot_set(s, KT_S_LOCKING, d->n_try);
	for (int i = 0; i < TRY_SPINS; i++) {
		s->try_attempts++;
		if (d->trylock(r->lock, s->ts))
			return true;
		s->try_fails++;
	}
	return false;
}

static bool timed_acquire(struct kt_run *r, struct kt_slot *s, const struct kt_side *d)
{
	int64_t deadline = kt_now_ns() + (int64_t)(kt_rand(s) % TIMED_MAX_NS);
	struct timespec abs = { .tv_sec = deadline / KT_NSEC_PER_SEC,
				.tv_nsec = deadline % KT_NSEC_PER_SEC };
	int64_t back;
	int e;

	kt_slot_set(s, KT_S_LOCKING, d->n_timed);
	s->timed_attempts++;
	e = d->timedlock(r->lock, s->ts, &abs);
	if (e == 0)
		return true;
	back = kt_now_ns();
	if (e != ETIMEDOUT)
		kt_violation(r, s, "%s returned %d (%s)", d->n_timed, e, strerror(e));
	else if (back < deadline)
		kt_violation(r, s, "%s timed out %lld ns before its deadline", d->n_timed,
			     (long long)(deadline - back));
	s->timeouts++;
	return false;
}

static void acquire(struct kt_run *r, struct kt_slot *s, const struct kt_side *d)
{
	unsigned p = r->cfg->perturb;

	if ((p & KT_P_TRY) && d->trylock != NULL && one_in(s, TRY_ODDS) &&
	    try_acquire(r, s, d))
		return;
	if ((p & KT_P_TIMED) && d->timedlock != NULL && one_in(s, TIMED_ODDS) &&
	    timed_acquire(r, s, d))
		return;
	kt_slot_set(s, KT_S_LOCKING, d->n_lock);
	d->lock(r->lock, s->ts);
}

static void side_of(const struct lockops *o, enum kt_role role, struct kt_side *d)
{
	if (role == KT_READER) {
		*d = (struct kt_side){ o->read_lock, o->read_unlock, o->read_trylock,
				       o->read_timedlock, o->read_retry, "read_lock",
				       "read_unlock", "read_trylock", "read_timedlock" };
	} else {
		*d = (struct kt_side){ o->write_lock, o->write_unlock, o->write_trylock,
				       o->write_timedlock, NULL, "write_lock", "write_unlock",
				       "write_trylock", "write_timedlock" };
	}
}

/* Keeps the lock forever: the self-test's hang, which the watchdog must report. */
static void injected_hang(struct kt_run *r, struct kt_slot *s)
{
	if (r->cfg->inject != KT_INJECT_HANG || s->role != KT_WRITER || s->index != 0 ||
	    atomic_load_explicit(&s->acq, memory_order_relaxed) != INJECT_HANG_AT)
		return;
	for (;;)
		kt_sleep_ns(KT_NSEC_PER_SEC);
}

/* A seqlock-style read (lockops.h): do { read_lock; look } while (read_retry);
 * read_unlock - and only the look that read_retry accepted is judged. */
static void optimistic_op(struct kt_run *r, struct kt_slot *s, const struct kt_side *d)
{
	struct kt_seen v;

	for (;;) {
		acquire(r, s, d);
		kt_slot_set(s, KT_S_IN_CS, NULL);
		v = optimistic_look(r, s);
		if (!d->retry(r->lock, s->ts))
			break;
		s->retries++;
	}
	kt_slot_set(s, KT_S_UNLOCKING, d->n_unlock);
	d->unlock(r->lock, s->ts);
	kt_restore_affinity(r);
	optimistic_judge(r, s, &v);
	atomic_fetch_add_explicit(&s->acq, 1, memory_order_relaxed);
}

/* Several keys under keys_lock (kl_hashlock_lock2/lockn): each distinct key's section in
 * turn, all held at once. A wrong stripe order deadlocks (the watchdog reports it); a key
 * left out shows as a violation on its state. */
static void multikey_op(struct kt_run *r, struct kt_slot *s)
{
	const void *keys[KT_MULTIKEY_MAX];
	bool seen[KT_NKEYS] = { false };
	size_t n = 2 + kt_rand(s) % (KT_MULTIKEY_MAX - 1);

	for (size_t i = 0; i < n; i++)
		keys[i] = &r->keys[kt_rand(s) % KT_NKEYS];
	kt_slot_set(s, KT_S_LOCKING, "keys_lock");
	r->ops->keys_lock(r->lock, s->ts, keys, n);
	kt_slot_set(s, KT_S_IN_CS, NULL);
	atomic_fetch_add_explicit(&s->acq, 1, memory_order_relaxed);
	s->multikey++;
	for (size_t i = 0; i < n; i++) {
		struct kt_shared *sh = (struct kt_shared *)keys[i];

		if (!seen[sh - r->keys]) {
			seen[sh - r->keys] = true;
			write_section(r, s, sh);
		}
	}
	kt_slot_set(s, KT_S_UNLOCKING, "keys_unlock");
	r->ops->keys_unlock(r->lock, s->ts, keys, n);
}

/* A writer section under key_lock, on that key's own checked state. */
static void keyed_op(struct kt_run *r, struct kt_slot *s)
{
	struct kt_shared *sh = &r->keys[kt_rand(s) % KT_NKEYS];

	if (r->ops->keys_lock != NULL && r->ops->keys_unlock != NULL &&
	    one_in(s, MULTIKEY_ODDS)) {
		multikey_op(r, s);
		return;
	}

	kt_slot_set(s, KT_S_LOCKING, "key_lock");
	r->ops->key_lock(r->lock, s->ts, sh);
	kt_slot_set(s, KT_S_IN_CS, NULL);
	atomic_fetch_add_explicit(&s->acq, 1, memory_order_relaxed);
	s->keyed++;
	write_section(r, s, sh);
	kt_slot_set(s, KT_S_UNLOCKING, "key_unlock");
	r->ops->key_unlock(r->lock, s->ts, sh);
}

static void one_op(struct kt_run *r, struct kt_slot *s, const struct kt_side *d)
{
	if (r->optimistic && s->role == KT_READER) {
		optimistic_op(r, s, d);
		return;
	}
	if (r->keys != NULL && s->role == KT_WRITER && one_in(s, KEYED_ODDS)) {
		keyed_op(r, s);
		return;
	}
	acquire(r, s, d);
	kt_slot_set(s, KT_S_IN_CS, NULL);
	atomic_fetch_add_explicit(&s->acq, 1, memory_order_relaxed);
	if (s->role == KT_WRITER)
		write_section(r, s, r->sh);
	else
		read_section(r, s);
	injected_hang(r, s);
	kt_slot_set(s, KT_S_UNLOCKING, d->n_unlock);
	d->unlock(r->lock, s->ts);
	kt_restore_affinity(r);
}

static void announce_exit(struct kt_run *r, struct kt_slot *s)
{
	kt_slot_set(s, KT_S_EXITED, NULL);
	pthread_mutex_lock(&r->exit_m);
	atomic_store(&s->exited, true);
	pthread_cond_signal(&r->exit_c);
	pthread_mutex_unlock(&r->exit_m);
}

void *kt_worker(void *arg)
{
	struct kt_slot *s = arg;
	struct kt_run *r = s->run;
	const struct lockops *o = r->ops;
	struct kt_side d;
	long done = 0;

	atomic_store(&s->tid, (pid_t)syscall(SYS_gettid));
	side_of(o, s->role, &d);
	if (o->thread_enter != NULL)
		o->thread_enter(r->lock);
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		kt_stutter_point(r, s);
		if ((r->cfg->perturb & KT_P_CHURN) && done >= s->lifetime)
			break;
		think(r, s);
		kt_phase_point(r, s);
		one_op(r, s, &d);
		done++;
	}
	if (o->thread_leave != NULL)
		o->thread_leave(r->lock);
	announce_exit(r, s);
	return NULL;
}
