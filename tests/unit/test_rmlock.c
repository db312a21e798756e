/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/test_rmlock.c - what only kl_rmlock has: flags and the static initializer,
 * destroy of a held lock, the bias policy (the unbiased exclusion test, re-arming, the
 * membarrier fallback), writer preference, recursion rules (KL_RM_RECURSE), many locks per
 * thread (slot overflow), hand-off to sleeping readers, unlock racing sleepers, thread
 * exit and fork, misuse reports (debug builds). The contract every read-mostly lock keeps (sharing,
 * trylock, exclusion under stress, writer waits for readers, churn, migration,
 * oversubscription) runs for kl_rmlock with and without KL_RM_SLEEPABLE / KL_RM_RECURSE
 * in tests/unit/test_readmostly_contract.c. Run also with KLOCK_NO_MEMBARRIER=1 and in the
 * -Darch=generic, -Dwait=parking and debug CI builds.
 */
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#include <klock/rmlock.h>
#include <klock/fence.h>
#include "kltest.h"
#include "kl_internal.h"
#include "park.h"

/* Every test must finish well inside this (a deadlock fails fast instead of hanging). */
#define WATCHDOG_S 60
/* Flag combinations every behaviour test runs with. */
static const unsigned flag_sets[] = { 0, KL_RM_SLEEPABLE, KL_RM_RECURSE,
				      KL_RM_SLEEPABLE | KL_RM_RECURSE };
/* Seconds of writer membarriers one stress run may spend (sizes shrink to fit where a
 * membarrier is slow: ~1 s in a 64-vCPU emulated guest) and the fewest iterations kept. */
#define FENCE_BUDGET_S 5.0
#define MIN_STRESS_ITERS 200
/* Locks one thread holds at once in the nesting test (> KL_RM_SLOTS: overflow). */
#define MANY_LOCKS (KL_RM_SLOTS + 6)

static int setup(void **state)
{
	(void)state;
	alarm(klt_watchdog_s(WATCHDOG_S));
	return 0;
}

/* Waits (bounded) until @readers readers and @writers writers sleep on @lk (counted in
 * its kl_rwlock's sleeper words: rwait's low half, wwait's low 16 bits). */
static void wait_asleep(struct kl_rmlock *lk, unsigned readers, unsigned writers)
{
	int64_t end = klt_now_ns() + 10 * KLT_NSEC_PER_SEC;

	while ((uint32_t)atomic_load(&lk->rw.rwait) < readers ||
	       (atomic_load(&lk->rw.wwait) & 0xffffu) < writers) {
		assert_true(klt_now_ns() < end);
		klt_sleep_ms(1);
	}
}

/* ---- basics -------------------------------------------------------------------------- */

static void test_rmlock_init_rejects_unknown_flags(void **state)
{
	struct kl_rmlock lk;

	(void)state;
	assert_int_equal(kl_rmlock_init(&lk, 0x80), EINVAL);
	assert_int_equal(kl_rmlock_init(&lk, KL_RM_RECURSE | KL_RM_SLEEPABLE), 0);
	assert_int_equal(kl_rmlock_destroy(&lk), 0);
}

static void test_rmlock_static_initializer_works(void **state)
{
	static struct kl_rmlock lk = KL_RMLOCK_INITIALIZER(KL_RM_SLEEPABLE);
	struct kl_rm_tracker tr;

	(void)state;
	kl_rmlock_read_lock(&lk, &tr);
	kl_rmlock_read_unlock(&lk, &tr);
	kl_rmlock_write_lock(&lk);
	assert_true(kl_rmlock_wowned(&lk));
	kl_rmlock_write_unlock(&lk);
	assert_false(kl_rmlock_wowned(&lk));
}

/* A thread that exits write-holding an rmlock leaves it write-held by nobody: the next
 * thread, on the exited thread's recycled record, must not pass for the writer (issue 13
 * item 4; the lock names its writer by owner id, not by record). */
struct rm_exited_writer {
	struct kl_rmlock *lk;
	struct kli_thread *rec;      /* the exited writer's record */
	bool recycled, owned, wtry, rtry;
};

static void *rm_write_lock_and_exit(void *arg)
{
	struct rm_exited_writer *x = arg;

	kl_rmlock_write_lock(x->lk);
	x->rec = kli_self();
	return NULL; /* exits holding it */
}

/* Runs on a new thread; the main thread asserts. */
static void *rm_probe_not_writer(void *arg)
{
	struct rm_exited_writer *x = arg;
	struct kl_rm_tracker tr;

	x->recycled = kli_self() == x->rec;
	x->owned = kl_rmlock_wowned(x->lk);
	x->wtry = kl_rmlock_write_trylock(x->lk);
	x->rtry = kl_rmlock_read_trylock(x->lk, &tr);
	if (x->rtry)
		kl_rmlock_read_unlock(x->lk, &tr);
	return NULL;
}

static void test_rmlock_write_held_by_an_exited_thread_has_no_owner(void **state)
{
	struct kl_rmlock lk;
	struct rm_exited_writer x = { .lk = &lk };
	pthread_t t;

	(void)state;
	KLT_SKIP_IF_MISUSE_INSTRUMENTED(); /* witness/TSan report the exit with a lock held */
	assert_int_equal(kl_rmlock_init(&lk, 0), 0);
	assert_int_equal(pthread_create(&t, NULL, rm_write_lock_and_exit, &x), 0);
	pthread_join(t, NULL);
	assert_int_equal(pthread_create(&t, NULL, rm_probe_not_writer, &x), 0);
	pthread_join(t, NULL);
	assert_true(x.recycled); /* the new thread got the exited thread's record */
	assert_false(x.owned);
	assert_false(x.wtry);
	assert_false(x.rtry);
	/* still write-held by nobody alive: this thread cannot take it either */
	assert_false(kl_rmlock_write_trylock(&lk));
}

/* ---- trylock ------------------------------------------------------------------------- */

struct peer {
	struct kl_rmlock *lk;
	bool ok;
	int op; /* 0: read_trylock, 1: write_trylock */
};

static void *peer_try(void *arg)
{
	struct peer *p = arg;
	struct kl_rm_tracker tr;

	if (p->op == 0) {
		p->ok = kl_rmlock_read_trylock(p->lk, &tr);
		if (p->ok)
			kl_rmlock_read_unlock(p->lk, &tr);
	} else {
		p->ok = kl_rmlock_write_trylock(p->lk);
		if (p->ok)
			kl_rmlock_write_unlock(p->lk);
	}
	return NULL;
}

static bool try_from_other_thread(struct kl_rmlock *lk, int op)
{
	struct peer p = { .lk = lk, .op = op };

	klt_run_threads(1, peer_try, &p, 0);
	return p.ok;
}

/* A writer must see a hold above released (zero) slots, and one below a released top
 * slot (holes in the stack of read holds). */
static void test_rmlock_writer_sees_a_hold_next_to_released_slots(void **state)
{
	/* Taken in one order only (below < lk < above): witness and TSan check lock order. */
	struct kl_rmlock below[2], lk, above;
	struct kl_rm_tracker tb[2], tr, ta;

	(void)state;
	for (int i = 0; i < 2; i++)
		assert_int_equal(kl_rmlock_init(&below[i], 0), 0);
	assert_int_equal(kl_rmlock_init(&lk, 0), 0);
	assert_int_equal(kl_rmlock_init(&above, 0), 0);
	for (int i = 0; i < 2; i++)
		kl_rmlock_read_lock(&below[i], &tb[i]);
	kl_rmlock_read_lock(&lk, &tr);            /* slot 3 */
	kl_rmlock_read_unlock(&below[0], &tb[0]); /* holes below it */
	kl_rmlock_read_unlock(&below[1], &tb[1]);
	assert_false(try_from_other_thread(&lk, 1));
	kl_rmlock_read_unlock(&lk, &tr);
	assert_true(try_from_other_thread(&lk, 1));

	kl_rmlock_read_lock(&lk, &tr);    /* slot 1 */
	kl_rmlock_read_lock(&above, &ta); /* slot 2, released: the top drops to 1 */
	kl_rmlock_read_unlock(&above, &ta);
	assert_false(try_from_other_thread(&lk, 1));
	kl_rmlock_read_unlock(&lk, &tr);
	assert_true(try_from_other_thread(&lk, 1));
	for (int i = 0; i < 2; i++)
		assert_int_equal(kl_rmlock_destroy(&below[i]), 0);
	assert_int_equal(kl_rmlock_destroy(&above), 0);
	assert_int_equal(kl_rmlock_destroy(&lk), 0);
}

static void test_rmlock_destroy_refuses_a_held_lock(void **state)
{
	struct kl_rmlock lk;
	struct kl_rm_tracker tr;

	(void)state;
	setenv("KLOCK_ON_ERROR", "warn", 1);
	assert_int_equal(kl_rmlock_init(&lk, 0), 0);
	kl_rmlock_write_lock(&lk);
	assert_int_equal(kl_rmlock_destroy(&lk), EBUSY);
	kl_rmlock_write_unlock(&lk);
	kl_rmlock_read_lock(&lk, &tr);
	assert_int_equal(kl_rmlock_destroy(&lk), EBUSY);
	kl_rmlock_read_unlock(&lk, &tr);
	assert_int_equal(kl_rmlock_destroy(&lk), 0);
	unsetenv("KLOCK_ON_ERROR");
}

/* ---- the bias policy ------------------------------------------------------------------- */

/* A reader and a writer on a lock kept unbiased for the whole run (its inhibit window
 * pushed to infinity): every write skips the membarrier, so only the reader's full fence
 * B' (and the writer's D') keep them apart. The two threads meet at a barrier before
 * every round and then lock at once (a store-buffering litmus test with the lock as the
 * pattern); inside, each announces itself with a seq_cst RMW and then looks for the
 * other, so two sections that overlap are always seen. */
struct unbiased {
	struct kl_rmlock lk;
	_Atomic long arrived;
	_Atomic int readers_in, writers_in;
	volatile long a, b;
	_Atomic long overlap, writes;
	_Atomic bool stop;  /* time is up (slow instrumented builds): leave at the barrier */
	long rounds;
	bool fenced; /* keep the lock fenced: each write finds the last one's window over */
	struct { _Alignas(128) _Atomic long v; } lines[8]; /* see unbiased_fill() */
};

/* Spin iterations inside a section: the other side's look falls inside it. */
#define UNBIASED_SPIN 20
/* Seconds per flag set at most: the rounds are for fast builds; TSan and valgrind stop
 * early (well inside the per-test watchdog). */
#define UNBIASED_BUDGET_S 15
/* Barrier spins before the waiting thread yields (the other may be descheduled). */
#define UNBIASED_BARRIER_SPINS 2000
/* After the barrier each side waits 0..UNBIASED_SKEW-1 iterations, its own sequence, so
 * the offset between the two sweeps the race window (the last to arrive would otherwise
 * always be a cache-line transfer ahead). */
#define UNBIASED_SKEW 64

/* False once the run is stopped (the other side may never arrive). */
static bool unbiased_barrier(struct unbiased *u, long round, unsigned salt)
{
	int spins = 0;

	atomic_fetch_add(&u->arrived, 1);
	while (atomic_load(&u->arrived) < 2 * (round + 1)) {
		if (++spins % UNBIASED_BARRIER_SPINS == 0) {
			if (atomic_load(&u->stop))
				return false;
			sched_yield();
		}
	}
	for (volatile unsigned k = 0; k < ((unsigned)round * salt) % UNBIASED_SKEW; k++)
		;
	return true;
}

/* Stores to lines the other thread wrote last: each needs a cache-line transfer, and on
 * a TSO machine the reader's slot store drains only after them, so its later load of the
 * lock state runs far ahead of it - the reordering B' exists to forbid, made likely. */
static void unbiased_fill(struct unbiased *u, long v)
{
	for (size_t i = 0; i < KL_ARRAY_SIZE(u->lines); i++)
		atomic_store_explicit(&u->lines[i].v, v, memory_order_relaxed);
}

static void unbiased_write(struct unbiased *u)
{
	if (u->fenced) /* the only writer: nobody else writes the window */
		atomic_store_explicit(&u->lk.fenced_until, 0, memory_order_relaxed);
	kl_rmlock_write_lock(&u->lk);
	atomic_fetch_add(&u->writers_in, 1);
	if (atomic_load(&u->readers_in) != 0)
		atomic_fetch_add(&u->overlap, 1);
	u->a++;
	unbiased_fill(u, u->a);
	for (volatile int k = 0; k < UNBIASED_SPIN; k++)
		;
	u->b++;
	atomic_fetch_sub(&u->writers_in, 1);
	kl_rmlock_write_unlock(&u->lk);
	atomic_fetch_add(&u->writes, 1);
}

static void unbiased_read(struct unbiased *u)
{
	struct kl_rm_tracker tr;
	long a;

	(void)atomic_load_explicit(&u->lk.state, memory_order_relaxed); /* cached: fast look */
	unbiased_fill(u, -1);
	kl_rmlock_read_lock(&u->lk, &tr);
	atomic_fetch_add(&u->readers_in, 1);
	a = u->a;
	for (volatile int k = 0; k < UNBIASED_SPIN; k++)
		;
	if (a != u->b || atomic_load(&u->writers_in) != 0)
		atomic_fetch_add(&u->overlap, 1);
	atomic_fetch_sub(&u->readers_in, 1);
	kl_rmlock_read_unlock(&u->lk, &tr);
}

static void *unbiased_writer(void *arg)
{
	struct unbiased *u = arg;

	for (long i = 0; i < u->rounds && unbiased_barrier(u, i, 7); i++)
		unbiased_write(u);
	return NULL;
}

static void *unbiased_reader(void *arg)
{
	struct unbiased *u = arg;

	for (long i = 0; i < u->rounds && unbiased_barrier(u, i, 13); i++)
		unbiased_read(u);
	return NULL;
}

/* Revocations @lk has paid so far. */
static uint64_t revocations(const struct kl_rmlock *lk)
{
	struct kl_rmlock_bias b;

	kl_rmlock_bias_stats(lk, &b);
	return b.revocations;
}

static bool biased(const struct kl_rmlock *lk)
{
	struct kl_rmlock_bias b;

	kl_rmlock_bias_stats(lk, &b);
	return b.biased;
}

/* Writer and reader race in rounds on a lock that the first write made fenced (@fenced:
 * kept so) or that then went unbiased, with its re-arm held off for good. Returns the
 * lock's state after the rounds. */
static uint32_t race_without_membarrier(unsigned flags, bool fenced)
{
	static struct unbiased u;
	pthread_t w, r;
	int64_t end;
	uint32_t st;

	memset(&u, 0, sizeof(u));
	u.rounds = klt_scaled(100000);
	u.fenced = fenced;
	assert_int_equal(kl_rmlock_init(&u.lk, flags), 0);
	kl_rmlock_write_lock(&u.lk); /* revokes the bias (membarrier mode) */
	kl_rmlock_write_unlock(&u.lk);
	atomic_store(&u.lk.rearm_at, UINT64_MAX); /* ... for good */
	if (!fenced)
		atomic_store(&u.lk.state, KL_RM_S_UNBIASED); /* no reader: as a dense write */
	assert_false(biased(&u.lk));
	assert_int_equal(revocations(&u.lk), kl_fence_asymmetric() ? 1 : 0);
	assert_int_equal(pthread_create(&w, NULL, unbiased_writer, &u), 0);
	assert_int_equal(pthread_create(&r, NULL, unbiased_reader, &u), 0);
	end = klt_now_ns() + UNBIASED_BUDGET_S * KLT_NSEC_PER_SEC;
	while (atomic_load(&u.arrived) < 2 * u.rounds && klt_now_ns() < end)
		klt_sleep_ms(10);
	atomic_store(&u.stop, true);
	pthread_join(w, NULL);
	pthread_join(r, NULL);
	assert_int_equal(atomic_load(&u.overlap), 0);
	assert_true(atomic_load(&u.writes) > 0);
	assert_int_equal(u.a, atomic_load(&u.writes));
	assert_int_equal(u.b, u.a);
	/* every one of those writes skipped the membarrier */
	assert_int_equal(revocations(&u.lk), kl_fence_asymmetric() ? 1 : 0);
	st = atomic_load(&u.lk.state);
	assert_int_equal(kl_rmlock_destroy(&u.lk), 0);
	return st;
}

/* A writer on an unbiased lock skips the membarrier and the scan: what excludes the
 * readers is the embedded kl_rwlock they take (before it, the readers' fence B' did; with
 * B' removed the two overlapped in a few rounds in a thousand on x86), and invariant I5
 * (no biased hold outlives a revocation). */
static void test_rmlock_unbiased_reader_excludes_a_writer_that_skipped_the_membarrier(
	void **state)
{
	(void)state;
	assert_int_equal(race_without_membarrier(0, false), KL_RM_S_UNBIASED);
	assert_int_equal(race_without_membarrier(KL_RM_SLEEPABLE, false), KL_RM_S_UNBIASED);
}

/* A revocation leaves the lock fenced: readers publish with a full barrier (B') and
 * writers announce themselves (M3) and scan, with no membarrier; a writer's section keeps
 * fenced readers out until its unlock (M4). Without membarrier the lock is unbiased. */
static void test_rmlock_fenced_reader_excludes_a_writer_that_skipped_the_membarrier(
	void **state)
{
	uint32_t want = kl_fence_asymmetric() ? KL_RM_S_FENCED : KL_RM_S_UNBIASED;

	(void)state;
	assert_int_equal(race_without_membarrier(0, true), want);
	assert_int_equal(race_without_membarrier(KL_RM_SLEEPABLE, true), want);
}

/* Writes with no reader in between revoke once (FreeBSD's tokens kept between writes);
 * once writes stop, readers re-arm the bias after the window, and the next write revokes
 * again. */
static void test_rmlock_bias_returns_after_writes_stop(void **state)
{
	struct kl_rmlock lk;
	struct kl_rm_tracker tr;
	int64_t end;

	(void)state;
	if (!kl_fence_asymmetric())
		skip(); /* no membarrier: never biased (the next test) */
	assert_int_equal(kl_rmlock_init(&lk, 0), 0);
	assert_true(biased(&lk));
	for (int i = 0; i < 10; i++) {
		kl_rmlock_write_lock(&lk);
		kl_rmlock_write_unlock(&lk);
	}
	assert_false(biased(&lk));
	assert_int_equal(revocations(&lk), 1);
	end = klt_now_ns() + 30 * KLT_NSEC_PER_SEC; /* the window is microseconds */
	while (!biased(&lk)) {
		assert_true(klt_now_ns() < end);
		kl_rmlock_read_lock(&lk, &tr);
		kl_rmlock_read_unlock(&lk, &tr);
	}
	kl_rmlock_write_lock(&lk);
	kl_rmlock_write_unlock(&lk);
	assert_false(biased(&lk));
	assert_int_equal(revocations(&lk), 2);
	assert_int_equal(kl_rmlock_destroy(&lk), 0);
}

/* One read whose lock call looks at the re-arm clock: the thread's count of fenced reads
 * before the next look is set to 0 first, so exactly one look happens (a second one, 64
 * reads later, could find a short window already over on a preempted thread: CI's no-rseq
 * stage re-armed inside a round that way). */
static void read_with_one_look(struct kl_rmlock *lk)
{
	struct kl_rm_tracker tr;

	kl_rm_self->unbiased_left = 0;
	kl_rmlock_read_lock(lk, &tr);
	kl_rmlock_read_unlock(lk, &tr);
}

/* The bias comes back only after a whole window without a write: a reader that finds
 * the window expired but writes inside it opens a new window instead of re-arming, so a
 * lock written once per window or more often pays no further revocation. (BRAVO's plain
 * rule re-armed here, and the next write revoked again.) The window is made to expire by
 * hand: no timing in the test. */
static void test_rmlock_writes_inside_the_window_keep_the_lock_unbiased(void **state)
{
	struct kl_rmlock lk;

	(void)state;
	if (!kl_fence_asymmetric())
		skip(); /* no membarrier: never biased */
	assert_int_equal(kl_rmlock_init(&lk, 0), 0);
	kl_rmlock_write_lock(&lk); /* revokes: the window opens */
	kl_rmlock_write_unlock(&lk);
	assert_int_equal(revocations(&lk), 1);
	for (int round = 0; round < 3; round++) {
		atomic_store(&lk.fenced_until, 0); /* not so dense that it goes unbiased */
		kl_rmlock_write_lock(&lk); /* a write inside the window */
		kl_rmlock_write_unlock(&lk);
		atomic_store(&lk.rearm_at, 0); /* the window has passed */
		read_with_one_look(&lk);
		assert_false(biased(&lk));
		assert_true(atomic_load(&lk.rearm_at) > 0); /* a new window was opened */
	}
	atomic_store(&lk.rearm_at, 0); /* a window with no write in it has passed */
	read_with_one_look(&lk);
	assert_true(biased(&lk));
	assert_int_equal(revocations(&lk), 1);
	assert_int_equal(kl_rmlock_destroy(&lk), 0);
}

/* Puts the last fenced write's window 4 ms ahead (the lock's clock is CLOCK_MONOTONIC's,
 * as klt_now_ns()), so that the next fenced write is a close one. */
static void next_write_close(struct kl_rmlock *lk)
{
	atomic_store(&lk->fenced_until,
		     kli_win16_end((uint64_t)klt_now_ns(), 4 * KLT_NSEC_PER_SEC / 1000));
}

/* The ladder: a revocation leaves the lock fenced; a run of writes that each follow the
 * last one closely sends it unbiased (one such write alone does not); a window with no
 * write moves it back up one rung at a time, fenced first, then biased - with no second
 * membarrier. The windows are made to expire by hand. */
static void test_rmlock_modes_step_down_when_written_and_climb_back_when_not(void **state)
{
	struct kl_rmlock lk;
	int w;

	(void)state;
	if (!kl_fence_asymmetric())
		skip(); /* no membarrier: never biased */
	assert_int_equal(kl_rmlock_init(&lk, 0), 0);
	kl_rmlock_write_lock(&lk);
	kl_rmlock_write_unlock(&lk);
	assert_int_equal(atomic_load(&lk.state), KL_RM_S_FENCED);
	assert_int_equal(revocations(&lk), 1);
	atomic_store(&lk.rearm_at, UINT64_MAX); /* the window is open */
	read_with_one_look(&lk); /* a fenced read */
	assert_int_equal(atomic_load(&lk.state), KL_RM_S_FENCED);
	for (w = 0; w < 100 && atomic_load(&lk.state) == KL_RM_S_FENCED; w++) {
		next_write_close(&lk);
		kl_rmlock_write_lock(&lk);
		kl_rmlock_write_unlock(&lk);
	}
	assert_true(w > 1);
	assert_int_equal(atomic_load(&lk.state), KL_RM_S_UNBIASED);
	atomic_store(&lk.rearm_at, 0);
	read_with_one_look(&lk);
	assert_int_equal(atomic_load(&lk.state), KL_RM_S_FENCED);
	assert_true(atomic_load(&lk.rearm_at) > 0); /* the membarrier's window, from here */
	atomic_store(&lk.rearm_at, 0);
	read_with_one_look(&lk);
	assert_true(biased(&lk));
	assert_int_equal(revocations(&lk), 1);
	assert_int_equal(kl_rmlock_destroy(&lk), 0);
}

/* Writes that arrive at random often come in close pairs, at any rate: a fenced lock whose
 * close writes are no more than every other one stays fenced (once, a single close write
 * sent it unbiased, and 1% writes then ran at about kl_rwlock's speed). */
static void test_rmlock_fenced_lock_stays_fenced_while_close_writes_are_half(void **state)
{
	struct kl_rmlock lk;

	(void)state;
	if (!kl_fence_asymmetric())
		skip(); /* no membarrier: never fenced */
	assert_int_equal(kl_rmlock_init(&lk, 0), 0);
	kl_rmlock_write_lock(&lk); /* revokes: fenced */
	kl_rmlock_write_unlock(&lk);
	for (int i = 0; i < 20; i++) {
		next_write_close(&lk);
		kl_rmlock_write_lock(&lk);
		kl_rmlock_write_unlock(&lk);
		assert_int_equal(atomic_load(&lk.state), KL_RM_S_FENCED);
		atomic_store(&lk.fenced_until, 0); /* no window: the next write is not close */
		kl_rmlock_write_lock(&lk);
		kl_rmlock_write_unlock(&lk);
		assert_int_equal(atomic_load(&lk.state), KL_RM_S_FENCED);
	}
	assert_int_equal(revocations(&lk), 1);
	assert_int_equal(kl_rmlock_destroy(&lk), 0);
}

/* Seen at the moment a reader moves the lock up (the test point right after its CAS). */
static struct kl_rmlock *moved_lock;
static _Atomic uint64_t moved_rearm_at;

static void note_rearm_at(const char *point)
{
	if (strcmp(point, "rmlock.rearm.moved") == 0)
		atomic_store(&moved_rearm_at, atomic_load(&moved_lock->rearm_at));
}

/* A move from unbiased to fenced carries the next window (the membarrier's) with it: it is
 * in place when the move is, so a fenced reader that sees the move cannot re-arm the bias
 * on the window of the rung below (the store once came after the move, and a membarrier
 * followed every millisecond at 0.1% writes). */
static void test_rmlock_move_to_fenced_carries_the_next_window(void **state)
{
	static struct kl_rmlock lk;
	int64_t before;

	(void)state;
	if (!kl_fence_asymmetric())
		skip(); /* no membarrier: never fenced */
	assert_int_equal(kl_rmlock_init(&lk, 0), 0);
	kl_rmlock_write_lock(&lk); /* revokes: fenced, with a membarrier's cost on record */
	kl_rmlock_write_unlock(&lk);
	atomic_store(&lk.state, KL_RM_S_UNBIASED); /* no reader: as a dense write */
	atomic_store(&lk.rearm_at, 0);              /* the unbiased window has passed */
	moved_lock = &lk;
	atomic_store(&moved_rearm_at, 0);
	before = klt_now_ns();
	atomic_store(&kli_test_hook, note_rearm_at);
	read_with_one_look(&lk);
	atomic_store(&kli_test_hook, NULL);
	assert_int_equal(atomic_load(&lk.state), KL_RM_S_FENCED);
	assert_true(atomic_load(&moved_rearm_at) > (uint64_t)before);
	assert_int_equal(kl_rmlock_destroy(&lk), 0);
}

/* Without membarrier there is no fence-free read path to return to: the lock is never
 * biased, however long the reads go on, and no write counts as a revocation. */
static void test_rmlock_without_membarrier_stays_unbiased(void **state)
{
	struct kl_rmlock lk;
	struct kl_rm_tracker tr;
	int64_t end;

	(void)state;
	if (kl_fence_asymmetric())
		skip(); /* runs in unit.rmlock.nomembarrier (KLOCK_NO_MEMBARRIER=1) */
	assert_int_equal(kl_rmlock_init(&lk, 0), 0);
	assert_false(biased(&lk));
	kl_rmlock_write_lock(&lk);
	kl_rmlock_write_unlock(&lk);
	end = klt_now_ns() + KLT_NSEC_PER_SEC / 20;
	while (klt_now_ns() < end) { /* far past any inhibit window */
		kl_rmlock_read_lock(&lk, &tr);
		kl_rmlock_read_unlock(&lk, &tr);
	}
	assert_false(biased(&lk));
	assert_int_equal(revocations(&lk), 0);
	assert_int_equal(lk.state & KL_RM_S_UNBIASED, KL_RM_S_UNBIASED);
	assert_int_equal(kl_rmlock_destroy(&lk), 0);
}

/* ---- new readers wait for a waiting writer ---------------------------------------------- */

struct wctx {
	struct kl_rmlock *lk;
	_Atomic int state; /* 1 started, 2 acquired, 3 done */
	int hold_ms;
};

static void *writer_thread(void *arg)
{
	struct wctx *w = arg;

	atomic_store(&w->state, 1);
	kl_rmlock_write_lock(w->lk);
	atomic_store(&w->state, 2);
	if (w->hold_ms)
		klt_sleep_ms(w->hold_ms);
	kl_rmlock_write_unlock(w->lk);
	atomic_store(&w->state, 3);
	return NULL;
}

/* Waits (bounded) until a writer has announced itself on @lk, waiting for readers: in
 * the state while it revokes the bias, in the kl_rwlock's word (WRWANT) while the lock is
 * unbiased. */
static void wait_writer_announced(struct kl_rmlock *lk)
{
	int64_t end = klt_now_ns() + 10 * KLT_NSEC_PER_SEC;

	while (!(atomic_load(&lk->state) & KL_RM_S_WRITER) &&
	       !(atomic_load(&lk->rw.word) & KL_RWLOCK_WRWANT_)) {
		assert_true(klt_now_ns() < end);
		klt_sleep_ms(1);
	}
}

static void wait_state(_Atomic int *st, int v)
{
	int64_t end = klt_now_ns() + 10 * KLT_NSEC_PER_SEC;

	while (atomic_load(st) < v) {
		assert_true(klt_now_ns() < end);
		klt_sleep_ms(1);
	}
}

/* Writer preference: once a writer waits, a new reader cannot get in (try fails) and a
 * blocking reader gets in only after the writer has been. */
struct rctx {
	struct kl_rmlock *lk;
	struct wctx *w;
	int writer_state_seen;
	_Atomic int done;
};

static void *late_reader(void *arg)
{
	struct rctx *r = arg;
	struct kl_rm_tracker tr;

	kl_rmlock_read_lock(r->lk, &tr);
	r->writer_state_seen = atomic_load(&r->w->state);
	kl_rmlock_read_unlock(r->lk, &tr);
	atomic_store(&r->done, 1);
	return NULL;
}

static void test_rmlock_new_readers_wait_behind_a_waiting_writer(void **state)
{
	(void)state;
	for (size_t f = 0; f < KL_ARRAY_SIZE(flag_sets); f++) {
		struct kl_rmlock lk;
		struct kl_rm_tracker tr;
		struct wctx w = { .lk = &lk, .hold_ms = 5 };
		struct rctx r = { .lk = &lk, .w = &w };
		pthread_t tw, tr2;

		assert_int_equal(kl_rmlock_init(&lk, flag_sets[f]), 0);
		kl_rmlock_read_lock(&lk, &tr);
		assert_int_equal(pthread_create(&tw, NULL, writer_thread, &w), 0);
		wait_writer_announced(&lk);
		assert_false(try_from_other_thread(&lk, 0));
		assert_int_equal(pthread_create(&tr2, NULL, late_reader, &r), 0);
		klt_sleep_ms(10);
		assert_int_equal(atomic_load(&r.done), 0);
		kl_rmlock_read_unlock(&lk, &tr);
		pthread_join(tw, NULL);
		pthread_join(tr2, NULL);
		assert_true(r.writer_state_seen >= 2); /* the writer went first */
		assert_int_equal(kl_rmlock_destroy(&lk), 0);
	}
}

/* ---- recursion --------------------------------------------------------------------------- */

/* With a writer waiting, a nested read of a lock the thread already holds gets in only
 * with KL_RM_RECURSE (a blocking nested read would deadlock: try shows the rule). Debug
 * builds report every nested read of a lock without the flag - with a writer waiting
 * (the deadlock itself) and without (the latent one). */
static void test_rmlock_recursion_passes_a_waiting_writer_only_with_the_flag(void **state)
{
	(void)state;
	setenv("KLOCK_ON_ERROR", "warn", 1);
	for (int recurse = 0; recurse <= 1; recurse++) {
		struct kl_rmlock lk;
		struct kl_rm_tracker outer, inner;
		struct wctx w = { .lk = &lk };
		unsigned long reports = kli_report_count();
		pthread_t t;

		if (!recurse && KLOCK_WITNESS)
			continue; /* witness reports the planted nested read itself (and aborts
				   * in CI); tests/unit/test_witness.c plants that case */
		assert_int_equal(kl_rmlock_init(&lk, recurse ? KL_RM_RECURSE : 0), 0);
		kl_rmlock_read_lock(&lk, &outer);
		kl_rmlock_read_lock(&lk, &inner); /* no writer yet: gets in either way */
		kl_rmlock_read_unlock(&lk, &inner);
		assert_int_equal(pthread_create(&t, NULL, writer_thread, &w), 0);
		wait_writer_announced(&lk);
		if (recurse) {
			kl_rmlock_read_lock(&lk, &inner); /* must not deadlock */
			assert_int_equal(atomic_load(&w.state), 1);
			kl_rmlock_read_unlock(&lk, &inner);
		} else {
			assert_false(kl_rmlock_read_trylock(&lk, &inner));
		}
		assert_int_equal(kli_report_count() - reports,
				 (KLOCK_DEBUG_LOCKS && !recurse) ? 2 : 0);
		assert_int_equal(atomic_load(&w.state), 1); /* still waiting for `outer` */
		kl_rmlock_read_unlock(&lk, &outer);
		pthread_join(t, NULL);
		assert_int_equal(kl_rmlock_destroy(&lk), 0);
	}
	unsetenv("KLOCK_ON_ERROR");
}

/* ---- many locks per thread --------------------------------------------------------------- */

/* One thread read-holds more rmlocks than its record has slots (the rest overflow into
 * the locks), releasing them out of order; a writer on every one of them must wait for
 * its hold and get in after it. */
static void test_rmlock_many_locks_held_at_once_out_of_order(void **state)
{
	(void)state;
	for (size_t f = 0; f < KL_ARRAY_SIZE(flag_sets); f++) {
		static struct kl_rmlock lk[MANY_LOCKS];
		static struct kl_rm_tracker tr[MANY_LOCKS];
		static struct wctx w[MANY_LOCKS];
		pthread_t t[MANY_LOCKS];
		int order[MANY_LOCKS];

		for (int i = 0; i < MANY_LOCKS; i++) {
			assert_int_equal(kl_rmlock_init(&lk[i], flag_sets[f]), 0);
			kl_rmlock_read_lock(&lk[i], &tr[i]);
			order[i] = i;
		}
		for (int i = MANY_LOCKS - 1; i > 0; i--) { /* a fixed shuffle */
			int j = (i * 7 + 3) % (i + 1), x = order[i];

			order[i] = order[j];
			order[j] = x;
		}
		for (int i = 0; i < MANY_LOCKS; i++) {
			w[i] = (struct wctx){ .lk = &lk[i] };
			assert_int_equal(pthread_create(&t[i], NULL, writer_thread, &w[i]), 0);
		}
		for (int i = 0; i < MANY_LOCKS; i++)
			wait_state(&w[i].state, 1);
		klt_sleep_ms(20);
		for (int k = 0; k < MANY_LOCKS; k++) {
			int i = order[k];

			assert_int_equal(atomic_load(&w[i].state), 1);
			kl_rmlock_read_unlock(&lk[i], &tr[i]);
			pthread_join(t[i], NULL);
			assert_int_equal(atomic_load(&w[i].state), 3);
		}
		for (int i = 0; i < MANY_LOCKS; i++)
			assert_int_equal(kl_rmlock_destroy(&lk[i]), 0);
	}
}

/* ---- parking races write_unlock ------------------------------------------------------ */

struct race {
	struct kl_rmlock lk;
	_Atomic int stop;
};

static void *race_reader(void *arg)
{
	struct race *r = arg;
	struct kl_rm_tracker tr;

	while (!atomic_load(&r->stop)) {
		kl_rmlock_read_lock(&r->lk, &tr);
		kl_rmlock_read_unlock(&r->lk, &tr);
	}
	return NULL;
}

/* Many short writes against readers that wait and sleep: no wake-up is lost and no state
 * bit is left behind. (It once caught a reader queueing while the unlock took its fast
 * path, leaving a queued bit without a writer; it also caught a revoking writer asleep on
 * a slot that a reader's inline path took back before waiting behind the writer.) */
static void test_rmlock_waiter_queueing_during_unlock_is_not_lost(void **state)
{
	static struct race r;
	pthread_t t[3];
	long writes = klt_fence_budgeted(klt_scaled(3000), 1, FENCE_BUDGET_S, MIN_STRESS_ITERS);

	(void)state;
	memset(&r, 0, sizeof(r));
	assert_int_equal(kl_rmlock_init(&r.lk, KL_RM_SLEEPABLE), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&t[i], NULL, race_reader, &r), 0);
	for (long i = 0; i < writes; i++) {
		kl_rmlock_write_lock(&r.lk);
		if (i % 4 == 0)
			sched_yield(); /* let readers reach the queue */
		kl_rmlock_write_unlock(&r.lk);
	}
	atomic_store(&r.stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&r.lk.state) & ~(KL_RM_S_UNBIASED | KL_RM_S_FENCED),
			 0); /* no stale bit */
	assert_int_equal(kl_rmlock_destroy(&r.lk), 0);
}

/* ---- hand-off to sleeping readers ------------------------------------------------------- */

struct fifo {
	struct kl_rmlock lk;
	_Atomic int ticket;
	int got[4];
};

struct fifo_arg {
	struct fifo *f;
	int id;
	bool writer;
};

static void *fifo_thread(void *arg)
{
	struct fifo_arg *a = arg;
	struct kl_rm_tracker tr;

	if (a->writer) {
		kl_rmlock_write_lock(&a->f->lk);
		a->f->got[a->id] = atomic_fetch_add(&a->f->ticket, 1);
		klt_sleep_ms(5);
		kl_rmlock_write_unlock(&a->f->lk);
	} else {
		kl_rmlock_read_lock(&a->f->lk, &tr);
		a->f->got[a->id] = atomic_fetch_add(&a->f->ticket, 1);
		klt_sleep_ms(5);
		kl_rmlock_read_unlock(&a->f->lk, &tr);
	}
	return NULL;
}

/* Asleep while a writer holds: reader 0, writer 1, reader 2, reader 3. The unlock hands
 * the lock to the three sleeping readers together (kl_rwlock's hand-off), and the
 * sleeping writer gets it after them: neither side starves. */
static void test_rmlock_sleeping_readers_are_handed_the_lock_before_the_next_writer(
	void **state)
{
	static struct fifo f;
	struct fifo_arg a[4] = { { &f, 0, false }, { &f, 1, true }, { &f, 2, false },
				 { &f, 3, false } };
	const unsigned rd[4] = { 1, 1, 2, 3 }, wr[4] = { 0, 1, 1, 1 };
	pthread_t t[4];

	(void)state;
	memset(&f, 0, sizeof(f));
	assert_int_equal(kl_rmlock_init(&f.lk, KL_RM_SLEEPABLE), 0);
	kl_rmlock_write_lock(&f.lk);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_create(&t[i], NULL, fifo_thread, &a[i]), 0);
		wait_asleep(&f.lk, rd[i], wr[i]);
	}
	kl_rmlock_write_unlock(&f.lk);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_true(f.got[0] <= 2 && f.got[2] <= 2 && f.got[3] <= 2);
	assert_int_equal(f.got[1], 3);
	assert_int_equal(kl_rmlock_destroy(&f.lk), 0);
}

/* A thread that exits holding a read lock has the hold dropped (debug builds report it):
 * writers do not wait for a dead thread. */
static void *exit_holding(void *arg)
{
	static struct kl_rm_tracker tr;

	kl_rmlock_read_lock(arg, &tr);
	return NULL;
}

static void test_rmlock_thread_exit_drops_its_read_holds(void **state)
{
	struct kl_rmlock lk;
	unsigned long before = kli_report_count();

	(void)state;
	KLT_SKIP_IF_WITNESS();
	setenv("KLOCK_ON_ERROR", "warn", 1);
	assert_int_equal(kl_rmlock_init(&lk, KL_RM_SLEEPABLE), 0);
	klt_run_threads(1, exit_holding, &lk, 0);
	kl_rmlock_write_lock(&lk); /* would hang if the hold stayed */
	kl_rmlock_write_unlock(&lk);
	assert_int_equal(kli_report_count() - before, KLOCK_DEBUG_LOCKS ? 1 : 0);
	assert_int_equal(kl_rmlock_destroy(&lk), 0);
	unsetenv("KLOCK_ON_ERROR");
}

/* Holds taken while the locks are unbiased (holds of the embedded kl_rwlock, which the
 * inline read tags as counted) on two locks: the first released out of order, the other
 * left to the thread's exit. A read of a third lock first gives the thread its record;
 * its count of unbiased reads before the next look at the re-arm clock is then set so
 * that both holds are taken inline (a recycled record keeps any count). */
struct unbiased_holds {
	struct kl_rmlock lk[3];
	uintptr_t tag[2]; /* each hold's slot, as the thread saw it */
};

static void *exit_holding_unbiased(void *arg)
{
	struct unbiased_holds *h = arg;
	struct kl_rm_tracker tr[3];

	kl_rmlock_read_lock(&h->lk[2], &tr[2]);
	kl_rmlock_read_unlock(&h->lk[2], &tr[2]);
	kl_rm_self->unbiased_left = 2; /* the two reads below */
	for (int i = 0; i < 2; i++) {
		kl_rmlock_read_lock(&h->lk[i], &tr[i]);
		h->tag[i] = atomic_load(&kl_rm_self->slot[kl_rm_self->depth]);
	}
	kl_rmlock_read_unlock(&h->lk[0], &tr[0]); /* not the top of the stack */
	return NULL; /* exits holding lk[1] */
}

static void test_rmlock_unbiased_holds_released_out_of_order_and_at_exit(void **state)
{
	static struct unbiased_holds h;
	unsigned long before = kli_report_count();

	(void)state;
	KLT_SKIP_IF_WITNESS();
	setenv("KLOCK_ON_ERROR", "warn", 1);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(kl_rmlock_init(&h.lk[i], 0), 0);
		for (int w = 0; w < 2; w++) { /* revokes (fenced), then a dense write: unbiased */
			kl_rmlock_write_lock(&h.lk[i]);
			kl_rmlock_write_unlock(&h.lk[i]);
		}
		atomic_store(&h.lk[i].rearm_at, UINT64_MAX); /* held there */
		atomic_store(&h.lk[i].state, KL_RM_S_UNBIASED); /* if that write was not dense */
	}
	klt_run_threads(1, exit_holding_unbiased, &h, 0);
	/* The inline read's counted holds, where it is compiled in and runs (membarrier: else
	 * every read is out of line and the thread's kl_rm_self is not its record). */
	if (KL_RM_INLINE && kl_fence_asymmetric())
		for (int i = 0; i < 2; i++)
			assert_int_equal(h.tag[i], (uintptr_t)&h.lk[i] | KL_RM_TAG_RW |
							   KL_RM_TAG_RWC);
	for (int i = 0; i < 3; i++) {
		assert_true(kl_rmlock_write_trylock(&h.lk[i])); /* fails if a hold stayed */
		kl_rmlock_write_unlock(&h.lk[i]);
		assert_int_equal(kl_rmlock_destroy(&h.lk[i]), 0);
	}
	assert_int_equal(kli_report_count() - before, KLOCK_DEBUG_LOCKS ? 1 : 0);
	unsetenv("KLOCK_ON_ERROR");
}

/* ---- fork -------------------------------------------------------------------------------- */

static void *hold_forever(void *arg)
{
	struct kl_rm_tracker tr;

	kl_rmlock_read_lock(arg, &tr);
	pause();
	return NULL;
}

/* The child of a process whose other threads read-hold a lock can write-lock it (those
 * threads do not exist in the child). */
static void test_rmlock_fork_child_can_write_lock(void **state)
{
	static struct kl_rmlock lk;
	pthread_t t;
	pid_t pid;
	int status;

	(void)state;
	/* The holder is cancelled holding its lock: witness reports that exit, and TSan loses
	 * track of a thread cancelled inside a blocking call. */
	KLT_SKIP_IF_MISUSE_INSTRUMENTED();
	setenv("KLOCK_ON_ERROR", "warn", 1); /* the holder is cancelled holding its lock */
	assert_int_equal(kl_rmlock_init(&lk, 0), 0);
	assert_int_equal(pthread_create(&t, NULL, hold_forever, &lk), 0);
	while (!try_from_other_thread(&lk, 0) || try_from_other_thread(&lk, 1))
		klt_sleep_ms(1); /* until the holder is in */
	pid = fork();
	if (pid == 0) {
		alarm(klt_watchdog_s(10));
		kl_rmlock_write_lock(&lk);
		kl_rmlock_write_unlock(&lk);
		_exit(0);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	pthread_cancel(t);
	pthread_join(t, NULL);
	unsetenv("KLOCK_ON_ERROR");
}

/* ---- misuse (debug builds) ----------------------------------------------------------- */

#if KLOCK_DEBUG_LOCKS
static void *write_unlock_other(void *arg)
{
	kl_rmlock_write_unlock(arg);
	return NULL;
}

static void *read_unlock_other(void *arg)
{
	struct kl_rm_tracker **pp = arg;

	kl_rmlock_read_unlock((struct kl_rmlock *)pp[0], pp[1]);
	return NULL;
}

/* Each planted misuse produces exactly one report (KLOCK_ON_ERROR=warn) and leaves the
 * lock usable. */
static void test_rmlock_debug_build_reports_misuse(void **state)
{
	struct kl_rmlock lk, other;
	struct kl_rm_tracker tr, tr2;
	unsigned long n;
	void *pp[2];

	(void)state;
	setenv("KLOCK_ON_ERROR", "warn", 1);
	assert_int_equal(kl_rmlock_init(&lk, 0), 0);
	assert_int_equal(kl_rmlock_init(&other, 0), 0);

	n = kli_report_count();
	memset(&tr, 0, sizeof(tr));
	kl_rmlock_read_unlock(&lk, &tr); /* unlock without lock */
	assert_int_equal(kli_report_count(), n + 1);

	kl_rmlock_read_lock(&lk, &tr);
	kl_rmlock_read_unlock(&other, &tr); /* the tracker of another lock */
	assert_int_equal(kli_report_count(), n + 2);
	kl_rmlock_read_lock(&lk, &tr2); /* recursion without KL_RM_RECURSE */
	assert_int_equal(kli_report_count(), n + 3);
	kl_rmlock_read_unlock(&lk, &tr2);
	pp[0] = &lk;
	pp[1] = &tr;
	klt_run_threads(1, read_unlock_other, pp, 0); /* unlock by another thread */
	assert_int_equal(kli_report_count(), n + 4);
	assert_int_equal(kl_rmlock_destroy(&lk), EBUSY); /* destroy while read-held */
	assert_int_equal(kli_report_count(), n + 5);
	kl_rmlock_read_unlock(&lk, &tr);
	kl_rmlock_read_unlock(&lk, &tr); /* double unlock */
	assert_int_equal(kli_report_count(), n + 6);

	kl_rmlock_write_lock(&lk);
	klt_run_threads(1, write_unlock_other, &lk, 0); /* write unlock by a non-owner */
	assert_int_equal(kli_report_count(), n + 7);
	assert_true(kl_rmlock_wowned(&lk));
	assert_false(kl_rmlock_read_trylock(&lk, &tr)); /* read while write-held by self */
	assert_int_equal(kli_report_count(), n + 8);
	kl_rmlock_write_unlock(&lk);

	assert_int_equal(kl_rmlock_destroy(&lk), 0);
	kl_rmlock_write_lock(&lk); /* use after destroy */
	assert_true(kli_report_count() >= n + 9);
	assert_int_equal(kl_rmlock_destroy(&other), 0);
	unsetenv("KLOCK_ON_ERROR");
}
#endif

/* Every test runs under the watchdog. */
#define T(f) cmocka_unit_test_setup(f, setup)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_rmlock_init_rejects_unknown_flags),
		T(test_rmlock_static_initializer_works),
		T(test_rmlock_write_held_by_an_exited_thread_has_no_owner),
		T(test_rmlock_destroy_refuses_a_held_lock),
		T(test_rmlock_waiter_queueing_during_unlock_is_not_lost),
		T(test_rmlock_unbiased_reader_excludes_a_writer_that_skipped_the_membarrier),
		T(test_rmlock_fenced_reader_excludes_a_writer_that_skipped_the_membarrier),
		T(test_rmlock_writer_sees_a_hold_next_to_released_slots),
		T(test_rmlock_writes_inside_the_window_keep_the_lock_unbiased),
		T(test_rmlock_bias_returns_after_writes_stop),
		T(test_rmlock_modes_step_down_when_written_and_climb_back_when_not),
		T(test_rmlock_fenced_lock_stays_fenced_while_close_writes_are_half),
		T(test_rmlock_move_to_fenced_carries_the_next_window),
		T(test_rmlock_without_membarrier_stays_unbiased),
		T(test_rmlock_new_readers_wait_behind_a_waiting_writer),
		T(test_rmlock_recursion_passes_a_waiting_writer_only_with_the_flag),
		T(test_rmlock_many_locks_held_at_once_out_of_order),
		T(test_rmlock_sleeping_readers_are_handed_the_lock_before_the_next_writer),
		T(test_rmlock_thread_exit_drops_its_read_holds),
		T(test_rmlock_unbiased_holds_released_out_of_order_and_at_exit),
		T(test_rmlock_fork_child_can_write_lock),
#if KLOCK_DEBUG_LOCKS
		T(test_rmlock_debug_build_reports_misuse),
#endif
	};

	printf("fence: %s, inline fast path: %d\n",
	       kl_fence_asymmetric() ? "membarrier" : "fallback", KL_RM_INLINE);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
