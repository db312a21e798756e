/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/test_fence.c - the asymmetric fence pair: mode selection (membarrier, fallback by
 * environment, fallback under a seccomp filter) and the store-buffering litmus it exists
 * to forbid.
 */
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/membarrier.h>
#include <linux/seccomp.h>

#include <klock/fence.h>
#include "kltest.h"
#include "fence_impl.h"

#define LITMUS_ROUNDS 20000
/* argv[1] that makes this binary run the seccomp child check instead of the suite. */
#define SECCOMP_CHILD_ARG "--seccomp-child"

static bool kernel_offers_private_expedited(void)
{
	long mask = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

	return mask >= 0 && (mask & MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

static void test_fence_mode_follows_kernel_and_environment(void **state)
{
	if (getenv("KLOCK_NO_MEMBARRIER") != NULL)
		assert_false(kl_fence_asymmetric());
	else
		assert_int_equal(kl_fence_asymmetric(), kernel_offers_private_expedited());
	printf("fence mode: %s\n", kl_fence_asymmetric() ? "membarrier" : "fallback");
}

/* The headers' inline unlocks read the mode from kl_fence_asym_: it must be the library's
 * mode, or their light half would not match the sleepers' heavy half. (This test links
 * the static library; abi.fence_copy_reloc checks the same in a non-PIE program, which
 * reads its own copy of the variable.) */
static void test_fence_inline_mode_is_the_library_mode(void **state)
{
	(void)state;
	assert_int_equal(kl_fence_asym_, kl_fence_asymmetric());
}

/* The rseq flavour (membarrier PRIVATE_EXPEDITED_RSEQ, the percpu-rwsem grace period) is
 * registered exactly when the kernel offers it and the fence pair is asymmetric; and the
 * heavy rseq fence then runs (it aborts the process if the syscall fails). */
static void test_fence_rseq_flavour_follows_kernel_and_environment(void **state)
{
	long mask = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	bool offered = mask >= 0 && (mask & (1 << 7)); /* PRIVATE_EXPEDITED_RSEQ */

	(void)state;
	assert_int_equal(kli_fence_rseq, kl_fence_asymmetric() && offered);
	if (kli_fence_rseq)
		kli_fence_heavy_rseq();
	printf("rseq membarrier: %s\n", kli_fence_rseq ? "registered" : "not used");
}

/* ---- store buffering: x = 1; light; r1 = y  ||  y = 1; heavy; r2 = x ----------------
 * r1 == r2 == 0 is forbidden when the pair works. The main thread is the heavy side and
 * starts each round through a counter, so the two sides race closely without a third
 * spinning thread (this machine may have only 2 CPUs). */
static _Atomic int x, y;
static _Atomic long round_go, round_done;
static int r1[LITMUS_ROUNDS];
static long litmus_rounds;

/* Offsets in [0, SKEW) busy-loop steps: one side starts a little later each round, so
 * some rounds overlap within the store-buffer window whatever the wake-up latency. */
#define SKEW 512

static void skew(unsigned n)
{
	for (volatile unsigned i = 0; i < n; i++)
		;
}

static void *side_light(void *arg)
{
	for (long i = 1; i <= litmus_rounds; i++) {
		while (atomic_load_explicit(&round_go, memory_order_acquire) < i)
			;
		skew((unsigned)(i * 7919) % SKEW);
		atomic_store_explicit(&x, 1, memory_order_relaxed);
		kl_fence_light();
		r1[i - 1] = atomic_load_explicit(&y, memory_order_relaxed);
		atomic_store_explicit(&round_done, i, memory_order_release);
	}
	return arg;
}

static long run_litmus(void)
{
	pthread_t a;
	long forbidden = 0;

	litmus_rounds = klt_scaled(LITMUS_ROUNDS);
	if (litmus_rounds > LITMUS_ROUNDS)
		litmus_rounds = LITMUS_ROUNDS;
	atomic_store(&round_go, 0);
	atomic_store(&round_done, 0);
	pthread_create(&a, NULL, side_light, NULL);
	for (long i = 1; i <= litmus_rounds; i++) {
		int r2;

		atomic_store(&x, 0);
		atomic_store(&y, 0);
		atomic_store_explicit(&round_go, i, memory_order_release);
		skew((unsigned)(i * 104729) % SKEW);
		atomic_store_explicit(&y, 1, memory_order_relaxed);
		kl_fence_heavy();
		r2 = atomic_load_explicit(&x, memory_order_relaxed);
		while (atomic_load_explicit(&round_done, memory_order_acquire) < i)
			;
		forbidden += r1[i - 1] == 0 && r2 == 0;
	}
	pthread_join(a, NULL);
	return forbidden;
}

static void test_fence_pair_forbids_store_buffering(void **state)
{
	assert_int_equal(run_litmus(), 0);
}

/* ---- seccomp: membarrier blocked with EPERM before the library loads ----------------- */
static int install_membarrier_filter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_membarrier, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* Runs in the re-executed child: the filter was inherited across execve, so the library
 * constructor already saw EPERM. */
static int seccomp_child(void)
{
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) != -1 || errno != EPERM)
		return 77; /* the filter did not take (emulator): nothing to check */
	if (kl_fence_asymmetric() || kl_fence_asym_)
		return 1;
	kl_fence_heavy(); /* must not abort: it is a plain fence now */
	return run_litmus() == 0 ? 0 : 2;
}

static void test_fence_falls_back_under_seccomp(void **state)
{
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = { "test_fence", SECCOMP_CHILD_ARG, NULL };
		char self[4096];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		/* readlink, not execv("/proc/self/exe"): under valgrind the latter is the tool */
		if (n <= 0 || install_membarrier_filter() != 0)
			_exit(77);
		self[n] = '\0';
		execv(self, argv);
		_exit(3);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fence_mode_follows_kernel_and_environment),
		cmocka_unit_test(test_fence_inline_mode_is_the_library_mode),
		cmocka_unit_test(test_fence_rseq_flavour_follows_kernel_and_environment),
		cmocka_unit_test(test_fence_pair_forbids_store_buffering),
		cmocka_unit_test(test_fence_falls_back_under_seccomp),
	};

	if (argc > 1 && strcmp(argv[1], SECCOMP_CHILD_ARG) == 0)
		return seccomp_child();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
