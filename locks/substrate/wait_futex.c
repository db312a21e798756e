/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/wait_futex.c - kl_wait()/kl_wake() on Linux futex(2).
 *
 * FUTEX_WAIT_BITSET with FUTEX_BITSET_MATCH_ANY is FUTEX_WAIT with an ABSOLUTE timeout,
 * measured on CLOCK_MONOTONIC (no FUTEX_CLOCK_REALTIME): exactly kl_wait()'s contract, and
 * a retry after EINTR keeps the same deadline instead of restarting a relative one.
 * kli_wait_realtime() adds FUTEX_CLOCK_REALTIME: the kernel's timer is then an absolute
 * CLOCK_REALTIME one and follows clock_settime() steps (what glibc's condvar uses), for the
 * interposer's POSIX timed waits.
 * Process-private (FUTEX_PRIVATE_FLAG): the kernel hashes by (mm, address), skipping the
 * shared-mapping lookup. The kernel's compare-and-sleep is atomic against FUTEX_WAKE on the
 * same word, which is what makes "load state, decide to sleep, kl_wait(old)" race-free.
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <klock/wait.h>
#include "kl_internal.h"
#include "events.h"

static long sys_futex(const volatile void *addr, int op, uint32_t val,
		      const struct timespec *ts, uint32_t val3)
{
	return syscall(SYS_futex, addr, op, val, ts, NULL, val3);
}

/* kl_wait() with the futex operation @op (the clock flag). */
static int futex_wait_abs(const _Atomic uint32_t *addr, uint32_t expected,
			  const struct timespec *abstime, int op)
{
	int saved = errno, ret = 0;

	if (abstime != NULL && !kli_timespec_valid(abstime))
		return EINVAL;
	for (;;) {
		if (atomic_load_explicit(addr, memory_order_relaxed) != expected)
			break;
		if (sys_futex(addr, op, expected, abstime, FUTEX_BITSET_MATCH_ANY) == 0) {
			kli_ev_count(KLI_EV_SLEEP); /* blocked until woken */
			break;
		}
		if (errno == EINTR)
			continue;       /* a signal handler ran: same deadline, wait again */
		if (errno == ETIMEDOUT) {
			kli_ev_count(KLI_EV_SLEEP); /* blocked until the deadline */
			ret = ETIMEDOUT;
		}
		break;                  /* EAGAIN: *addr != expected when the kernel looked */
	}
	errno = saved;
	return ret;
}

int kl_wait(const _Atomic uint32_t *addr, uint32_t expected, const struct timespec *abstime)
{
	return futex_wait_abs(addr, expected, abstime, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG);
}

int kli_wait_realtime(const _Atomic uint32_t *addr, uint32_t expected,
		      const struct timespec *abstime)
{
	return futex_wait_abs(addr, expected, abstime,
			      FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
}

int kl_wake(const _Atomic uint32_t *addr, int n)
{
	int saved = errno;
	long r;

	kli_ev_count(KLI_EV_WAKE);
	r = sys_futex(addr, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, (uint32_t)n, NULL, 0);

	errno = saved;
	return r < 0 ? 0 : (int)r;
}

const char *kl_wait_backend(void)
{
	return "futex";
}
