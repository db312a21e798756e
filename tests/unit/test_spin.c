/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/unit/test_spin.c - locks/substrate/spin.h's paced polling: which gaps in a spinner's own clock
 * count against its budget (its relaxing), which do not (time an interrupt or the host
 * took), and which end the spin (the CPU went to another thread). The gaps are given by
 * hand to kli_pace_gap(), the step kli_pace() takes after each clock read. */
#include "kltest.h"
#include "spin.h"

#define BUDGET_NS 10000u   /* a spin budget, as a spinner starts one */
#define UNTIL 12345u       /* the end of the current paced wait, in cycles (any value) */

struct paced {
	struct kli_pace p;
	struct kli_spin s;
	uint64_t deadline, until;
};

static void paced_start(struct paced *x, bool watch)
{
	kli_pace_start(&x->p, watch);
	kli_spin_start(&x->s, BUDGET_NS);
	x->deadline = x->s.deadline;
	x->until = UNTIL;
}

static uint64_t cycles(uint64_t ns)
{
	uint64_t c = kli_ns_to_cycles(ns);

	assert_true(c > 0); /* the clock is calibrated: the gaps below are what they say */
	return c;
}

static void test_spin_pace_counts_its_own_relaxing(void **state)
{
	struct paced x;

	paced_start(&x, true);
	assert_true(kli_pace_gap(&x.p, &x.s, cycles(KLI_POLL_MAX_NS), &x.until));
	assert_int_equal(x.s.deadline, x.deadline);
	assert_int_equal(x.until, UNTIL);
}

static void test_spin_pace_does_not_count_stolen_time(void **state)
{
	uint64_t tick = cycles(40000); /* a guest's timer tick */
	struct paced x;

	paced_start(&x, true);
	assert_true(tick > x.p.stolen);
	assert_true(kli_pace_gap(&x.p, &x.s, tick, &x.until));
	assert_int_equal(x.s.deadline, x.deadline + tick);
	assert_int_equal(x.until, UNTIL + tick);
}

static void test_spin_pace_stops_when_the_cpu_went_to_another_thread(void **state)
{
	struct paced x;

	paced_start(&x, true);
	assert_false(kli_pace_gap(&x.p, &x.s, cycles(2ull * KLI_PREEMPTED_NS), &x.until));
}

/* An unwatched spinner (none today: kl_mutex's and kl_rwlock's spinners both watch) does
 * not end on a lost CPU: a fixed budget bounds its spinning, and time off the CPU is not
 * spinning. */
static void test_spin_pace_unwatched_credits_any_gap(void **state)
{
	uint64_t slice = cycles(2ull * KLI_PREEMPTED_NS);
	struct paced x;

	paced_start(&x, false);
	assert_true(kli_pace_gap(&x.p, &x.s, slice, &x.until));
	assert_int_equal(x.s.deadline, x.deadline + slice);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spin_pace_counts_its_own_relaxing),
		cmocka_unit_test(test_spin_pace_does_not_count_stolen_time),
		cmocka_unit_test(test_spin_pace_stops_when_the_cpu_went_to_another_thread),
		cmocka_unit_test(test_spin_pace_unwatched_credits_any_gap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
