/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/test_preload_cond.c - condition variables under the preload, with every kind of
 * mutex they can meet: klock's (normal, recursive, errorcheck; static or initialised) and
 * glibc's (robust, process-shared), which a klock condvar serves on its generic path.
 * Signal, broadcast, timed waits on both clocks, the errors glibc gives, a recursive
 * mutex released whole, "broadcast then destroy", a robust owner's death seen by a
 * waiter, and a producer/consumer stress that would hang on a lost wake-up.
 * Run without the preload too (expectations are glibc's) and with KLOCK_MUTEX=ticket|mcs.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "preload_test.h"

/* A timed wait's timeout in the rows that time out. */
#define TIMEOUT_MS 40
/* Long enough for a CLOCK_REALTIME wait to take more than one of the preload's slices. */
#define LONG_TIMEOUT_MS 1300
/* Threads waiting at once in the broadcast test. */
#define WAITERS 6
/* Stress: producers, consumers, items each producer makes, queue capacity. */
#define PRODUCERS 3
#define CONSUMERS 3
#define ITEMS 20000
#define QCAP 4
/* Seconds before a stuck test is killed (a lost wake-up hangs). */
#define WATCHDOG_S 60
/* The stress re-arms the whole-program watchdog every this many items consumed (a power
 * of two): a lost wake-up stops progress, slow CPUs (an emulated 64-vCPU guest, where a
 * FIFO lock waits for its next owner's vCPU to be scheduled) only slow it. */
#define PROGRESS_ITEMS 1024
/* Seconds of heavy fences the stress may cost. A FIFO lock's waiter that goes to sleep
 * pays one membarrier (ticket.c and mcs.c, S1): ~0.66 per item with KLOCK_MUTEX=ticket
 * (strace -c: 59 k in a 90 k-item run); a membarrier costs ~20 us on 2 real CPUs and up
 * to a second in a 64-vCPU emulated guest, where 90 k of them took hours. */
#define FENCE_BUDGET_S 20
/* Fewest items per producer: the queue still fills and wraps. */
#define MIN_ITEMS (2 * QCAP)

static bool preloaded;

enum mkind { MK_NORMAL_STATIC, MK_NORMAL, MK_RECURSIVE, MK_ERRORCHECK, MK_ROBUST, MK_PSHARED,
	     MK_COUNT };
static const char *const mk_names[] = { "normal(static)", "normal", "recursive", "errorcheck",
					"robust", "process-shared" };

static void mutex_make(pthread_mutex_t *m, enum mkind k)
{
	pthread_mutexattr_t a;

	if (k == MK_NORMAL_STATIC) {
		*m = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
		return;
	}
	pthread_mutexattr_init(&a);
	if (k == MK_RECURSIVE)
		pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	if (k == MK_ERRORCHECK)
		pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	if (k == MK_ROBUST)
		pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (k == MK_PSHARED)
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	assert_int_equal(pthread_mutex_init(m, &a), 0);
	pthread_mutexattr_destroy(&a);
}

/* ---- signal and broadcast ---------------------------------------------------------------- */

struct waitq {
	pthread_mutex_t m;
	pthread_cond_t c;
	int go;          /* the predicate, under m */
	int woken;       /* waiters that saw it, under m */
	sem_t waiting;   /* posted by each waiter right before it waits */
};

static void *waiter(void *p)
{
	struct waitq *q = p;

	assert_int_equal(pthread_mutex_lock(&q->m), 0);
	sem_post(&q->waiting);
	while (q->go == 0)
		assert_int_equal(pthread_cond_wait(&q->c, &q->m), 0);
	q->go--;
	q->woken++;
	assert_int_equal(pthread_mutex_unlock(&q->m), 0);
	return NULL;
}

static void waitq_init(struct waitq *q, enum mkind k)
{
	memset(q, 0, sizeof(*q));
	mutex_make(&q->m, k);
	assert_int_equal(pthread_cond_init(&q->c, NULL), 0);
	sem_init(&q->waiting, 0, 0);
}

/* Signal releases exactly the waiters it is given credit for; broadcast all of them. */
static void signal_then_broadcast(enum mkind k)
{
	struct waitq q;
	pthread_t t[WAITERS];

	waitq_init(&q, k);
	for (int i = 0; i < WAITERS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, waiter, &q), 0);
	for (int i = 0; i < WAITERS; i++)
		while (sem_wait(&q.waiting) != 0)
			;
	assert_int_equal(pthread_mutex_lock(&q.m), 0);
	q.go = 1;
	assert_int_equal(pthread_cond_signal(&q.c), 0);
	assert_int_equal(pthread_mutex_unlock(&q.m), 0);
	for (;;) { /* one waiter takes the credit */
		assert_int_equal(pthread_mutex_lock(&q.m), 0);
		int w = q.woken;

		assert_int_equal(pthread_mutex_unlock(&q.m), 0);
		if (w == 1)
			break;
		klt_sleep_ms(1);
	}
	assert_int_equal(pthread_mutex_lock(&q.m), 0);
	q.go = WAITERS - 1;
	assert_int_equal(pthread_cond_broadcast(&q.c), 0);
	assert_int_equal(pthread_mutex_unlock(&q.m), 0);
	for (int i = 0; i < WAITERS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(q.woken, WAITERS);
	assert_int_equal(pthread_cond_destroy(&q.c), 0);
	assert_int_equal(pthread_mutex_destroy(&q.m), 0);
	sem_destroy(&q.waiting);
}

static void test_preload_cond_signal_and_broadcast_every_mutex_kind(void **state)
{
	(void)state;
	for (int k = 0; k < MK_COUNT; k++) {
		print_message("mutex %s\n", mk_names[k]);
		signal_then_broadcast(k);
	}
}

/* ---- timed waits ----------------------------------------------------------------------- */

/* A timed wait that nobody signals: ETIMEDOUT, not before the deadline on its own clock,
 * mutex held again. Callers loop on spurious wake-ups, and so does this. */
static void timed_out(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock, bool use_clockwait,
		      int64_t ms)
{
	struct timespec dl = pt_deadline(clock, ms);
	int r;

	assert_int_equal(pthread_mutex_lock(m), 0);
	do {
		r = use_clockwait ? pthread_cond_clockwait(c, m, clock, &dl)
				  : pthread_cond_timedwait(c, m, &dl);
	} while (r == 0);
	assert_int_equal(r, ETIMEDOUT);
	assert_true(pt_clock_ns(clock) >= (int64_t)dl.tv_sec * KLT_NSEC_PER_SEC + dl.tv_nsec);
	assert_int_equal(pthread_mutex_trylock(m), EBUSY); /* held again (not recursive) */
	assert_int_equal(pthread_mutex_unlock(m), 0);
}

static void test_preload_cond_timedwait_never_early_on_either_clock(void **state)
{
	pthread_condattr_t a;
	pthread_cond_t rt = PTHREAD_COND_INITIALIZER, mono;
	pthread_mutex_t m;

	(void)state;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	assert_int_equal(pthread_cond_init(&mono, &a), 0);
	pthread_condattr_destroy(&a);
	for (int k = 0; k < MK_COUNT; k++) {
		if (k == MK_RECURSIVE)
			continue; /* timed_out checks the hold with trylock */
		mutex_make(&m, k);
		timed_out(&rt, &m, CLOCK_REALTIME, false, TIMEOUT_MS);
		timed_out(&mono, &m, CLOCK_MONOTONIC, false, TIMEOUT_MS);
		timed_out(&rt, &m, CLOCK_MONOTONIC, true, TIMEOUT_MS);
		timed_out(&mono, &m, CLOCK_REALTIME, true, TIMEOUT_MS);
		timed_out(&rt, &m, CLOCK_REALTIME, false, -TIMEOUT_MS); /* passed already */
		pthread_mutex_destroy(&m);
	}
	mutex_make(&m, MK_NORMAL);
	timed_out(&rt, &m, CLOCK_REALTIME, false, LONG_TIMEOUT_MS);
	pthread_mutex_destroy(&m);
	pthread_cond_destroy(&mono);
}

/* Waits longer than a second that nobody signals: the FIRST return is ETIMEDOUT, at or
 * after the deadline on its own clock (no loop: programs read 0 as "signalled"; the
 * interposer once cut CLOCK_REALTIME waits into 1 s slices and returned 0 at a slice's
 * end). The timed mutex and rwlock calls, on a lock another thread holds, likewise. */
#define LONG_RT_MS 2500
#define LONG_MS 1300

static void long_timed_out(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock,
			   bool use_clockwait, int64_t ms, const char *what)
{
	struct timespec dl = pt_deadline(clock, ms);
	int r;

	assert_int_equal(pthread_mutex_lock(m), 0);
	r = use_clockwait ? pthread_cond_clockwait(c, m, clock, &dl)
			  : pthread_cond_timedwait(c, m, &dl);
	if (r != ETIMEDOUT)
		fail_msg("%s (%lld ms), %s: returned %d, expected ETIMEDOUT", what, (long long)ms,
			 preloaded ? "klock" : "glibc", r);
	assert_true(pt_clock_ns(clock) >= (int64_t)dl.tv_sec * KLT_NSEC_PER_SEC + dl.tv_nsec);
	assert_int_equal(pthread_mutex_unlock(m), 0);
}

static int long_lock_fn(void *m)
{
	return pthread_mutex_lock(m);
}

static int long_unlock_fn(void *m)
{
	return pthread_mutex_unlock(m);
}

static int long_wrlock_fn(void *rw)
{
	return pthread_rwlock_wrlock(rw);
}

static int long_rwunlock_fn(void *rw)
{
	return pthread_rwlock_unlock(rw);
}

static void test_preload_cond_long_timedwait_returns_etimedout_at_the_deadline(void **state)
{
	pthread_condattr_t a;
	pthread_cond_t rt = PTHREAD_COND_INITIALIZER, mono;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	struct pt_helper h;
	struct timespec dl;

	(void)state;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	assert_int_equal(pthread_cond_init(&mono, &a), 0);
	pthread_condattr_destroy(&a);
	long_timed_out(&rt, &m, CLOCK_REALTIME, false, LONG_RT_MS, "timedwait(REALTIME)");
	long_timed_out(&mono, &m, CLOCK_MONOTONIC, false, LONG_MS, "timedwait(MONOTONIC attr)");
	long_timed_out(&rt, &m, CLOCK_REALTIME, true, LONG_MS, "clockwait(REALTIME)");
	long_timed_out(&rt, &m, CLOCK_MONOTONIC, true, LONG_MS, "clockwait(MONOTONIC)");
	pt_helper_start(&h, long_lock_fn, long_unlock_fn, &m);
	dl = pt_deadline(CLOCK_REALTIME, LONG_MS);
	assert_int_equal(pthread_mutex_timedlock(&m, &dl), ETIMEDOUT);
	assert_true(pt_clock_ns(CLOCK_REALTIME) >=
		    (int64_t)dl.tv_sec * KLT_NSEC_PER_SEC + dl.tv_nsec);
	assert_int_equal(pt_helper_finish(&h), 0);
	pt_helper_start(&h, long_wrlock_fn, long_rwunlock_fn, &rw);
	dl = pt_deadline(CLOCK_REALTIME, LONG_MS);
	assert_int_equal(pthread_rwlock_timedrdlock(&rw, &dl), ETIMEDOUT);
	assert_true(pt_clock_ns(CLOCK_REALTIME) >=
		    (int64_t)dl.tv_sec * KLT_NSEC_PER_SEC + dl.tv_nsec);
	assert_int_equal(pt_helper_finish(&h), 0);
	assert_int_equal(pthread_cond_destroy(&mono), 0);
	assert_int_equal(pthread_cond_destroy(&rt), 0);
	assert_int_equal(pthread_rwlock_destroy(&rw), 0);
	assert_int_equal(pthread_mutex_destroy(&m), 0);
}

static void test_preload_cond_timed_errors_keep_the_mutex(void **state)
{
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct timespec bad = { time(NULL) + 1, 1000000000l };
	struct timespec ok = pt_deadline(CLOCK_MONOTONIC, TIMEOUT_MS);

	(void)state;
	assert_int_equal(pthread_mutex_lock(&m), 0);
	assert_int_equal(pthread_cond_timedwait(&c, &m, &bad), EINVAL);
	assert_int_equal(pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &bad), EINVAL);
	assert_int_equal(pthread_cond_clockwait(&c, &m, CLOCK_PROCESS_CPUTIME_ID, &ok), EINVAL);
	assert_int_equal(pthread_mutex_trylock(&m), EBUSY); /* still ours */
	assert_int_equal(pthread_mutex_unlock(&m), 0);
}

/* ---- the mutex side ------------------------------------------------------------------------ */

static void test_preload_cond_wait_without_errorcheck_mutex_is_eperm(void **state)
{
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	pthread_mutex_t m;
	struct timespec dl = pt_deadline(CLOCK_REALTIME, TIMEOUT_MS);

	(void)state;
	mutex_make(&m, MK_ERRORCHECK);
	assert_int_equal(pthread_cond_wait(&c, &m), EPERM);
	assert_int_equal(pthread_cond_timedwait(&c, &m, &dl), EPERM);
	pthread_mutex_destroy(&m);
	mutex_make(&m, MK_ROBUST);
	assert_int_equal(pthread_cond_timedwait(&c, &m, &dl), EPERM);
	pthread_mutex_destroy(&m);
}

struct rec {
	pthread_mutex_t m;
	pthread_cond_t c;
	int stage;
};

static void *rec_other(void *p)
{
	struct rec *r = p;

	/* Possible only if the waiter released every level of its recursive hold. */
	assert_int_equal(pthread_mutex_lock(&r->m), 0);
	r->stage = 1;
	assert_int_equal(pthread_cond_signal(&r->c), 0);
	assert_int_equal(pthread_mutex_unlock(&r->m), 0);
	return NULL;
}

/* glibc releases only one level of a recursive mutex in a wait (its documented hazard:
 * the other thread below would block forever); klock releases the whole hold and
 * restores it. So this test runs under the preload only. */
static void test_preload_cond_wait_releases_a_recursive_mutex_whole(void **state)
{
	struct rec r = { .stage = 0 };
	pthread_t t;

	(void)state;
	if (!preloaded)
		skip();
	mutex_make(&r.m, MK_RECURSIVE);
	assert_int_equal(pthread_cond_init(&r.c, NULL), 0);
	assert_int_equal(pthread_mutex_lock(&r.m), 0);
	assert_int_equal(pthread_mutex_lock(&r.m), 0);
	assert_int_equal(pthread_create(&t, NULL, rec_other, &r), 0);
	while (r.stage == 0)
		assert_int_equal(pthread_cond_wait(&r.c, &r.m), 0);
	assert_int_equal(pthread_mutex_unlock(&r.m), 0);
	assert_int_equal(pthread_mutex_unlock(&r.m), 0);
	assert_int_equal(pthread_mutex_unlock(&r.m), EPERM); /* depth restored, then gone */
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* A robust mutex's owner dies holding it while we wait: the wait returns EOWNERDEAD with
 * the mutex ours, as glibc's. */
static void *robust_signal_and_die(void *p)
{
	struct rec *r = p;

	assert_int_equal(pthread_mutex_lock(&r->m), 0);
	r->stage = 1;
	assert_int_equal(pthread_cond_signal(&r->c), 0);
	return NULL; /* exits holding r->m */
}

static void test_preload_cond_robust_owner_death_reaches_the_waiter(void **state)
{
	struct rec r = { .stage = 0 };
	pthread_t t;
	int err = 0;

	(void)state;
	if (!pt_robust_supported())
		skip();
	mutex_make(&r.m, MK_ROBUST);
	assert_int_equal(pthread_cond_init(&r.c, NULL), 0);
	assert_int_equal(pthread_mutex_lock(&r.m), 0);
	assert_int_equal(pthread_create(&t, NULL, robust_signal_and_die, &r), 0);
	while (r.stage == 0 && err == 0)
		err = pthread_cond_wait(&r.c, &r.m);
	assert_int_equal(err, EOWNERDEAD);
	assert_int_equal(pthread_mutex_consistent(&r.m), 0);
	assert_int_equal(pthread_mutex_unlock(&r.m), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

/* A process-shared (glibc) condvar cannot release a klock mutex: refused with EINVAL (and
 * a report, here set to warn) instead of corrupting it. glibc itself allows it. */
static void test_preload_cond_pshared_cond_with_klock_mutex_is_refused(void **state)
{
	pthread_condattr_t a;
	pthread_cond_t c;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct timespec dl = pt_deadline(CLOCK_REALTIME, TIMEOUT_MS);

	(void)state;
	if (!preloaded || getenv_is("KLOCK_MUTEX", "pthread"))
		skip();
	setenv("KLOCK_ON_ERROR", "warn", 1);
	pthread_condattr_init(&a);
	pthread_condattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	assert_int_equal(pthread_cond_init(&c, &a), 0);
	pthread_condattr_destroy(&a);
	assert_int_equal(pthread_mutex_lock(&m), 0);
	assert_int_equal(pthread_cond_timedwait(&c, &m, &dl), EINVAL);
	assert_int_equal(pthread_cond_wait(&c, &m), EINVAL);
	assert_int_equal(pthread_mutex_unlock(&m), 0); /* unharmed */
	assert_int_equal(pthread_mutex_lock(&m), 0);
	assert_int_equal(pthread_mutex_unlock(&m), 0);
	assert_int_equal(pthread_cond_destroy(&c), 0);
	unsetenv("KLOCK_ON_ERROR");
}

/* A process-shared condvar and mutex, in shared memory, used by a parent and a child. */
static void test_preload_cond_pshared_pair_across_fork(void **state)
{
	struct shared {
		pthread_mutex_t m;
		pthread_cond_t c;
		int ready;
	} *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;
	int status;
	pid_t pid;

	(void)state;
	assert_true(s != MAP_FAILED);
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	assert_int_equal(pthread_mutex_init(&s->m, &ma), 0);
	assert_int_equal(pthread_cond_init(&s->c, &ca), 0);
	pid = fork();
	if (pid == 0) {
		alarm(klt_watchdog_s(WATCHDOG_S));
		pthread_mutex_lock(&s->m);
		s->ready = 1;
		pthread_cond_signal(&s->c);
		pthread_mutex_unlock(&s->m);
		_exit(0);
	}
	assert_int_equal(pthread_mutex_lock(&s->m), 0);
	while (!s->ready)
		assert_int_equal(pthread_cond_wait(&s->c, &s->m), 0);
	assert_int_equal(pthread_mutex_unlock(&s->m), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	munmap(s, sizeof(*s));
}

/* ---- cancellation ------------------------------------------------------------------------ */

/* The waits are cancellation points (XSH 2.9.5): a deferred pthread_cancel of a waiter
 * blocked in one takes effect, the mutex is held again when the cleanup handlers run, and
 * pthread_join gives PTHREAD_CANCELED; a cancel pending at entry acts at entry. Afterwards
 * the condvar has no leftover waiter: a signal reaches the next one, destroy succeeds. */
enum cwait { CW_WAIT, CW_TIMED, CW_CLOCK, CW_COUNT };
static const char *const cw_names[] = { "pthread_cond_wait", "pthread_cond_timedwait",
					"pthread_cond_clockwait" };
/* The timed calls' deadline: far enough that only the cancel can end them. */
#define CANCEL_DEADLINE_MS 600000

struct cx {
	pthread_mutex_t m;
	pthread_cond_t c;
	enum cwait how;
	enum mkind kind;
	bool self_cancel;     /* cancel ourselves before waiting (pending at entry) */
	bool disabled;        /* wait with cancellation disabled */
	int levels;           /* lock levels the waiter holds: 2 for a recursive mutex under
	                       * klock (restored after the wait; glibc releases only one) */
	int go;               /* the predicate, under m */
	int handler_ran, trylock_in_handler, unlock_in_handler, returned;
	sem_t waiting;
};

/* Runs with the mutex held (POSIX): trylock fails, each level unlocks. */
static void cx_handler(void *p)
{
	struct cx *x = p;

	x->handler_ran = 1;
	if (x->kind != MK_RECURSIVE)
		x->trylock_in_handler = pthread_mutex_trylock(&x->m);
	for (int i = 0; i < x->levels && x->unlock_in_handler == 0; i++)
		x->unlock_in_handler = pthread_mutex_unlock(&x->m);
}

static int cx_wait(struct cx *x)
{
	struct timespec rt = pt_deadline(CLOCK_REALTIME, CANCEL_DEADLINE_MS);
	struct timespec mono = pt_deadline(CLOCK_MONOTONIC, CANCEL_DEADLINE_MS);

	switch (x->how) {
	case CW_WAIT: return pthread_cond_wait(&x->c, &x->m);
	case CW_TIMED: return pthread_cond_timedwait(&x->c, &x->m, &rt);
	default: return pthread_cond_clockwait(&x->c, &x->m, CLOCK_MONOTONIC, &mono);
	}
}

static void *cx_waiter(void *p)
{
	struct cx *x = p;

	if (x->disabled)
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	for (int i = 0; i < x->levels; i++)
		assert_int_equal(pthread_mutex_lock(&x->m), 0);
	pthread_cleanup_push(cx_handler, x);
	if (x->self_cancel)
		assert_int_equal(pthread_cancel(pthread_self()), 0);
	sem_post(&x->waiting);
	while (x->go == 0)
		cx_wait(x);
	x->returned = 1;
	pthread_cleanup_pop(0);
	for (int i = 0; i < x->levels; i++)
		pthread_mutex_unlock(&x->m);
	if (x->disabled) { /* was not cancelled in the wait: the cancel is still pending */
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		pthread_testcancel();
	}
	return NULL;
}

/* Another waiter after the cancelled one, signalled normally: nothing was left behind. */
static void cx_still_usable(struct cx *x)
{
	pthread_t t;
	void *ret = &ret;

	x->self_cancel = x->disabled = false;
	x->go = 0;
	assert_int_equal(pthread_create(&t, NULL, cx_waiter, x), 0);
	while (sem_wait(&x->waiting) != 0)
		;
	assert_int_equal(pthread_mutex_lock(&x->m), 0);
	x->go = 1;
	assert_int_equal(pthread_cond_signal(&x->c), 0);
	assert_int_equal(pthread_mutex_unlock(&x->m), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_null(ret);
	assert_int_equal(pthread_cond_broadcast(&x->c), 0);
}

static void cx_run(enum cwait how, enum mkind kind, bool self_cancel, bool disabled)
{
	struct cx *x = calloc(1, sizeof(*x));
	struct timespec dl;
	pthread_t t;
	void *ret = NULL;

	x->how = how;
	x->kind = kind;
	x->self_cancel = self_cancel;
	x->disabled = disabled;
	x->levels = kind == MK_RECURSIVE && preloaded ? 2 : 1;
	mutex_make(&x->m, kind);
	assert_int_equal(pthread_cond_init(&x->c, NULL), 0);
	sem_init(&x->waiting, 0, 0);
	assert_int_equal(pthread_create(&t, NULL, cx_waiter, x), 0);
	while (sem_wait(&x->waiting) != 0)
		;
	if (!self_cancel) {
		/* Ours only once the waiter released it inside the wait: it is blocked. */
		assert_int_equal(pthread_mutex_lock(&x->m), 0);
		assert_int_equal(pthread_mutex_unlock(&x->m), 0);
		assert_int_equal(pthread_cancel(t), 0);
	}
	if (disabled) {
		assert_int_equal(pthread_mutex_lock(&x->m), 0);
		x->go = 1;
		assert_int_equal(pthread_cond_signal(&x->c), 0);
		assert_int_equal(pthread_mutex_unlock(&x->m), 0);
	}
	dl = pt_deadline(CLOCK_REALTIME, WATCHDOG_S * 1000ll);
	if (pthread_timedjoin_np(t, &ret, &dl) != 0)
		fail_msg("%s, mutex %s%s, %s: the waiter was not cancelled within %d s", cw_names[how],
			 mk_names[kind], self_cancel ? ", cancel pending at entry" : "",
			 preloaded ? "klock" : "glibc", WATCHDOG_S);
	if (ret != PTHREAD_CANCELED || x->handler_ran != (disabled ? 0 : 1) ||
	    x->returned != (disabled ? 1 : 0) ||
	    (!disabled && (x->unlock_in_handler != 0 ||
			   (kind != MK_RECURSIVE && x->trylock_in_handler != EBUSY))))
		fail_msg("%s, mutex %s%s%s, %s: join %s, handler ran %d (trylock %d, unlock %d), "
			 "wait returned %d", cw_names[how], mk_names[kind],
			 self_cancel ? ", cancel pending at entry" : "",
			 disabled ? ", cancellation disabled" : "", preloaded ? "klock" : "glibc",
			 ret == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "not cancelled",
			 x->handler_ran, x->trylock_in_handler, x->unlock_in_handler, x->returned);
	cx_still_usable(x);
	assert_int_equal(pthread_cond_destroy(&x->c), 0);
	assert_int_equal(pthread_mutex_destroy(&x->m), 0);
	sem_destroy(&x->waiting);
	free(x);
}

static void test_preload_cond_wait_is_a_cancellation_point(void **state)
{
	static const enum mkind kinds[] = { MK_NORMAL, MK_ERRORCHECK, MK_RECURSIVE, MK_ROBUST };

	(void)state;
	for (int how = 0; how < CW_COUNT; how++)
		for (size_t k = 0; k < PT_ARRAY_SIZE(kinds); k++) {
			cx_run(how, kinds[k], false, false);
			cx_run(how, kinds[k], true, false);
		}
	cx_run(CW_WAIT, MK_NORMAL, false, true);
	cx_run(CW_TIMED, MK_ERRORCHECK, false, true);
}

/* ---- lifetime ------------------------------------------------------------------------------ */

struct bd {
	pthread_mutex_t m;
	pthread_cond_t *c;
	int go;
	sem_t waiting;
};

static void *bd_waiter(void *p)
{
	struct bd *b = p;

	pthread_mutex_lock(&b->m);
	sem_post(&b->waiting);
	while (!b->go)
		pthread_cond_wait(b->c, &b->m);
	pthread_mutex_unlock(&b->m);
	return NULL;
}

/* POSIX: a condvar may be destroyed as soon as no thread is blocked on it, i.e. right
 * after the broadcast; the woken waiters must not touch it again. The memory is then
 * scribbled over, which a waiter that still looked at it would trip on. */
static void test_preload_cond_destroy_right_after_broadcast(void **state)
{
	struct bd b;
	pthread_t t[WAITERS];

	(void)state;
	for (int k = 0; k < MK_COUNT; k++) {
		memset(&b, 0, sizeof(b));
		mutex_make(&b.m, k);
		b.c = malloc(sizeof(*b.c));
		assert_int_equal(pthread_cond_init(b.c, NULL), 0);
		sem_init(&b.waiting, 0, 0);
		for (int i = 0; i < WAITERS; i++)
			assert_int_equal(pthread_create(&t[i], NULL, bd_waiter, &b), 0);
		for (int i = 0; i < WAITERS; i++)
			while (sem_wait(&b.waiting) != 0)
				;
		assert_int_equal(pthread_mutex_lock(&b.m), 0);
		b.go = 1;
		assert_int_equal(pthread_cond_broadcast(b.c), 0);
		assert_int_equal(pthread_mutex_unlock(&b.m), 0);
		assert_int_equal(pthread_cond_destroy(b.c), 0);
		memset(b.c, 0xa5, sizeof(*b.c));
		for (int i = 0; i < WAITERS; i++)
			assert_int_equal(pthread_join(t[i], NULL), 0);
		free(b.c);
		pthread_mutex_destroy(&b.m);
		sem_destroy(&b.waiting);
	}
}

/* ---- stress: a bounded queue, two condvars ------------------------------------------------- */

struct bq {
	pthread_mutex_t m;
	pthread_cond_t not_empty, not_full;
	int items[QCAP];
	int head, n, done_producers;
	long sum, count, per_producer;
};

static void *bq_producer(void *p)
{
	struct bq *q = p;

	for (long i = 1; i <= q->per_producer; i++) {
		pthread_mutex_lock(&q->m);
		while (q->n == QCAP)
			pthread_cond_wait(&q->not_full, &q->m);
		q->items[(q->head + q->n++) % QCAP] = (int)i;
		pthread_cond_signal(&q->not_empty);
		pthread_mutex_unlock(&q->m);
	}
	pthread_mutex_lock(&q->m);
	q->done_producers++;
	pthread_cond_broadcast(&q->not_empty);
	pthread_mutex_unlock(&q->m);
	return NULL;
}

static void *bq_consumer(void *p)
{
	struct bq *q = p;

	pthread_mutex_lock(&q->m);
	for (;;) {
		while (q->n == 0 && q->done_producers < PRODUCERS)
			pthread_cond_wait(&q->not_empty, &q->m);
		if (q->n == 0)
			break;
		q->sum += q->items[q->head];
		if ((++q->count & (PROGRESS_ITEMS - 1)) == 0)
			alarm(klt_watchdog_s(WATCHDOG_S * 4));
		q->head = (q->head + 1) % QCAP;
		q->n--;
		pthread_cond_signal(&q->not_full);
	}
	pthread_mutex_unlock(&q->m);
	return NULL;
}

static void test_preload_cond_bounded_queue_loses_no_wakeup(void **state)
{
	struct bq *q = calloc(1, sizeof(*q));
	pthread_t t[PRODUCERS + CONSUMERS];
	/* One heavy fence per item, rounded up, for every producer and mutex kind. */
	long items = klt_fence_budgeted(klt_scaled(ITEMS), PRODUCERS * MK_COUNT, FENCE_BUDGET_S,
					MIN_ITEMS);

	(void)state;
	for (int k = 0; k < MK_COUNT; k++) {
		memset(q, 0, sizeof(*q));
		q->per_producer = items;
		mutex_make(&q->m, k);
		pthread_cond_init(&q->not_empty, NULL);
		pthread_cond_init(&q->not_full, NULL);
		for (int i = 0; i < PRODUCERS; i++)
			assert_int_equal(pthread_create(&t[i], NULL, bq_producer, q), 0);
		for (int i = 0; i < CONSUMERS; i++)
			assert_int_equal(pthread_create(&t[PRODUCERS + i], NULL, bq_consumer, q), 0);
		for (int i = 0; i < PRODUCERS + CONSUMERS; i++)
			assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(q->count, PRODUCERS * items);
		assert_int_equal(q->sum, PRODUCERS * items * (items + 1) / 2);
		pthread_cond_destroy(&q->not_empty);
		pthread_cond_destroy(&q->not_full);
		pthread_mutex_destroy(&q->m);
	}
	free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_preload_cond_signal_and_broadcast_every_mutex_kind),
		cmocka_unit_test(test_preload_cond_timedwait_never_early_on_either_clock),
		cmocka_unit_test(test_preload_cond_long_timedwait_returns_etimedout_at_the_deadline),
		cmocka_unit_test(test_preload_cond_timed_errors_keep_the_mutex),
		cmocka_unit_test(test_preload_cond_wait_without_errorcheck_mutex_is_eperm),
		cmocka_unit_test(test_preload_cond_wait_releases_a_recursive_mutex_whole),
		cmocka_unit_test(test_preload_cond_robust_owner_death_reaches_the_waiter),
		cmocka_unit_test(test_preload_cond_pshared_cond_with_klock_mutex_is_refused),
		cmocka_unit_test(test_preload_cond_pshared_pair_across_fork),
		cmocka_unit_test(test_preload_cond_wait_is_a_cancellation_point),
		cmocka_unit_test(test_preload_cond_destroy_right_after_broadcast),
		cmocka_unit_test(test_preload_cond_bounded_queue_loses_no_wakeup),
	};

	preloaded = pt_preloaded();
	alarm(klt_watchdog_s(WATCHDOG_S * 4));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
