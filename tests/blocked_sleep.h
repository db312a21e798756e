/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/blocked_sleep.h - is a thread blocked behind a long hold asleep? (shared by
 * test_blocked_sleep.c, the native locks, and test_preload_sleep.c, the interposer's).
 *
 * How: the caller takes the lock; assert_blocked_waiters_sleep() starts the waiter(s),
 * which block on it. After a settle period (longer than any spin budget of the library, by
 * orders of magnitude), it reads the waiters' CPU clocks (pthread_getcpuclockid) over a
 * measuring window and samples their scheduler state (/proc/self/task/TID/stat) now and
 * then; then it releases the lock and joins them. A waiter that spins or yields is
 * runnable ('R') at every sample and, on an idle machine, uses the whole window; a
 * sleeping one is 'S' and uses nothing. Both are asserted, each with a wide margin: the
 * CPU share alone cannot fail on a loaded machine (a spinning thread then gets a small
 * share), the state samples alone are blind where the kernel's view is not the program's
 * (no /proc). A behaviour bound, not a speed claim. Plain pthreads only (the preload
 * tests link no klock).
 */
#ifndef BLOCKED_SLEEP_H
#define BLOCKED_SLEEP_H

#include <sys/syscall.h>
#include "kltest.h"

/* Waiters settle this long before measuring: far past every spin/yield budget (~1 ms). */
#define SETTLE_MS 300
/* The measuring window. */
#define WINDOW_MS 1000
/* State samples taken in the window (one every WINDOW_MS / SAMPLES). */
#define SAMPLES 20
/* A blocked waiter may use at most 1/CPU_SHARE_DIV of the window's wall time in CPU... */
#define CPU_SHARE_DIV 4
/* ... and be seen runnable in at most 1/RUNNABLE_DIV of the samples. */
#define RUNNABLE_DIV 4
/* Most waiters one case starts. */
#define MAX_WAITERS 4

struct blocked_case {
	void (*lock)(void *arg);     /* the waiter's blocking acquisition... */
	void (*unlock)(void *arg);   /* ... and its release */
	void *arg;
	_Atomic int tid[MAX_WAITERS];
	_Atomic int started, finished;
};

struct waiter_arg {
	struct blocked_case *c;
	int i;
};

static inline void *blocked_waiter(void *p)
{
	struct waiter_arg *wa = p;
	struct blocked_case *c = wa->c;

	atomic_store(&c->tid[wa->i], (int)syscall(SYS_gettid));
	atomic_fetch_add(&c->started, 1);
	c->lock(c->arg);
	c->unlock(c->arg);
	atomic_fetch_add(&c->finished, 1);
	return NULL;
}

static inline int64_t thread_cpu_ns(pthread_t t)
{
	clockid_t id;
	struct timespec ts;

	assert_int_equal(pthread_getcpuclockid(t, &id), 0);
	assert_int_equal(clock_gettime(id, &ts), 0);
	return (int64_t)ts.tv_sec * KLT_NSEC_PER_SEC + ts.tv_nsec;
}

/* The kernel's scheduler state letter of thread @tid ('R', 'S', ...), or 0 if unreadable. */
static inline char thread_state(int tid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command name may contain anything */
	return p != NULL && p[1] == ' ' ? p[2] : 0;
}

/*
 * The caller holds the lock; @release(@rarg) drops its hold. Starts @n waiters, checks
 * that they sleep while blocked, releases, joins them.
 */
static inline void assert_blocked_waiters_sleep(struct blocked_case *c, int n,
					 void (*release)(void *), void *rarg)
{
	pthread_t t[MAX_WAITERS];
	struct waiter_arg wa[MAX_WAITERS];
	int64_t cpu0 = 0, cpu1 = 0, t0, t1;
	int runnable = 0, seen = 0;

	assert_true(n <= MAX_WAITERS);
	for (int i = 0; i < n; i++) {
		wa[i] = (struct waiter_arg){ c, i };
		assert_int_equal(pthread_create(&t[i], NULL, blocked_waiter, &wa[i]), 0);
	}
	while (atomic_load(&c->started) < n)
		klt_sleep_ms(1);
	klt_sleep_ms(SETTLE_MS);
	t0 = klt_now_ns();
	for (int i = 0; i < n; i++)
		cpu0 += thread_cpu_ns(t[i]);
	for (int s = 0; s < SAMPLES; s++) {
		klt_sleep_ms(WINDOW_MS / SAMPLES);
		for (int i = 0; i < n; i++) {
			char st = thread_state(atomic_load(&c->tid[i]));

			seen += st != 0;
			runnable += st == 'R';
		}
	}
	for (int i = 0; i < n; i++)
		cpu1 += thread_cpu_ns(t[i]);
	t1 = klt_now_ns();
	assert_int_equal(atomic_load(&c->finished), 0); /* the lock still excluded them */
	release(rarg);
	for (int i = 0; i < n; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(atomic_load(&c->finished), n);
	if (cpu1 - cpu0 >= (t1 - t0) * n / CPU_SHARE_DIV || runnable > seen / RUNNABLE_DIV)
		fail_msg("blocked waiters burnt %lld us of CPU in %lld us (x%d waiters); "
			 "runnable in %d of %d samples",
			 (long long)(cpu1 - cpu0) / 1000, (long long)(t1 - t0) / 1000, n,
			 runnable, seen);
}

#endif /* BLOCKED_SLEEP_H */
