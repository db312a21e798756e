/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/clock.c - monotonic time and the cycle-counter calibration that spin budgets use.
 *
 * Spin budgets are expressed in nanoseconds (a PAUSE costs 10 cycles on one core and 140
 * on the next, so counting iterations means nothing) and checked against kl_arch_cycles(),
 * which is one instruction. The ratio is measured once, lazily, over CALIB_NS of wall time;
 * a benign race may run the calibration twice, both results are equally good.
 */
#include <klock/klock.h>
#include "kl_internal.h"

/* Calibration window: long enough for <0.1% error with a 10 ns clock_gettime. */
#define CALIB_NS 50000u
/* Bracketed samples per calibration endpoint (calib_sample()). */
#define CALIB_TRIES 5
/* Fixed-point shift for the cycles-per-ns ratio. */
#define RATIO_SHIFT 16

static _Atomic uint64_t cycles_per_ns_fp;   /* cycles per ns << RATIO_SHIFT; 0 = unknown */

uint64_t kli_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return kli_timespec_ns(&ts);
}

bool kli_deadline_passed(const struct timespec *abstime)
{
	return abstime != NULL && kli_now_ns() >= kli_timespec_ns(abstime);
}

void kli_deadline_after(struct timespec *abstime, uint64_t ns)
{
	uint64_t t = kli_now_ns() + ns;

	abstime->tv_sec = (time_t)(t / KLI_NSEC_PER_SEC);
	abstime->tv_nsec = (long)(t % KLI_NSEC_PER_SEC);
}

/*
 * A (cycles, ns) pair taken together: the clock read is bracketed by two counter reads and
 * the tightest of CALIB_TRIES brackets wins. An unbracketed pair is skewed by whatever
 * runs between its two reads - a preemption, or under qemu the first translation of the
 * code - and the skew lands in the ratio for the life of the process (lockstat measured
 * 3x too long waits under qemu-aarch64 before this).
 */
static void calib_sample(uint64_t *cycles, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	*cycles = *ns = 0;
	for (int i = 0; i < CALIB_TRIES; i++) {
		uint64_t c0 = kl_arch_cycles(), t = kli_now_ns(), c1 = kl_arch_cycles();

		if (c1 - c0 < best) {
			best = c1 - c0;
			*cycles = c0 + (c1 - c0) / 2;
			*ns = t;
		}
	}
}

static KL_NOINLINE uint64_t calibrate(void)
{
	uint64_t t0, c0, t1, c1, ratio;

	calib_sample(&c0, &t0);
	do {
		t1 = kli_now_ns();
	} while (t1 - t0 < CALIB_NS);
	calib_sample(&c1, &t1);
	ratio = ((c1 - c0) << RATIO_SHIFT) / (t1 - t0);
	if (ratio == 0)
		ratio = 1;
	atomic_store_explicit(&cycles_per_ns_fp, ratio, memory_order_relaxed);
	return ratio;
}

static inline uint64_t ratio_fp(void)
{
	uint64_t r;

	if (KL_ARCH_CYCLES_ARE_NS)
		return (uint64_t)1 << RATIO_SHIFT;
	r = atomic_load_explicit(&cycles_per_ns_fp, memory_order_relaxed);
	return kl_likely(r != 0) ? r : calibrate();
}

uint64_t kli_ns_to_cycles(uint64_t ns)
{
	return (ns * ratio_fp()) >> RATIO_SHIFT;
}

uint64_t kli_cycles_to_ns(uint64_t cycles)
{
	return (cycles << RATIO_SHIFT) / ratio_fp();
}
