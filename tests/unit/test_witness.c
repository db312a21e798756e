/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/test_witness.c - the lock-order checker: every report it promises, planted through
 * the hook seam with fake locks (the calls a primitive makes, with the caller's return
 * address as the site), each in a child process whose stderr is checked.
 *
 * The binary re-executes itself: `test_witness --case NAME` runs one planted case; the
 * cmocka tests run those children with KLOCK_WITNESS set and read what they print. Built with
 * export_dynamic, so call sites resolve to function names ("case_order_ab_ba+0x..").
 * Without -Dwitness=true only the no-op API is tested.
 */
#include <signal.h>
#include <sys/wait.h>

#include <klock/hashlock.h>
#include <klock/mutex.h>
#include <klock/names.h>
#include <klock/rwlock.h>
#include <klock/ticket.h>
#include <klock/witness.h>
#include "kltest.h"
#include "hooks.h"

#define CASE_ARG "--case"
/* Functions whose names the reports must show: exported (the project builds with
 * -fvisibility=hidden), never inlined. */
#define PLANT __attribute__((visibility("default"), noinline))
/* Ends a planting function: its last lock call must not become a tail call, or the call
 * site (the return address) would be its caller's. */
#define PLANT_END() __asm__ __volatile__("" ::: "memory")
/* Most of a child's output kept. */
#define OUT_MAX 65536

/* ---- fake locks: the seam calls a primitive makes -------------------------------------- */

struct fake {
	char pad[64];
};

static struct fake lock_a, lock_b, lock_c, lock_s, lock_t, bucket1, bucket2;

static void fake_init(struct fake *l, enum kli_kind kind, const char *name)
{
	kli_hook_created(l, kind, 0);
	if (name != NULL)
		kl_lock_set_name(l, name);
}

static KL_NOINLINE void fake_lock_flags(struct fake *l, enum kli_kind kind, unsigned flags)
{
	const void *site = __builtin_return_address(0);

	kli_hook_acquire(l, kind, flags, site);
	kli_hook_acquired(l, kind, flags, site);
}

static KL_NOINLINE void fake_lock(struct fake *l)
{
	const void *site = __builtin_return_address(0);

	kli_hook_acquire(l, KLI_KIND_MUTEX, 0, site);
	kli_hook_acquired(l, KLI_KIND_MUTEX, 0, site);
}

static KL_NOINLINE bool fake_trylock(struct fake *l)
{
	const void *site = __builtin_return_address(0);

	kli_hook_acquire(l, KLI_KIND_MUTEX, KLI_HF_TRY, site);
	kli_hook_acquired(l, KLI_KIND_MUTEX, KLI_HF_TRY, site);
	return true;
}

static KL_NOINLINE void fake_unlock(struct fake *l)
{
	kli_hook_release(l, KLI_KIND_MUTEX, 0, __builtin_return_address(0));
	kli_hook_released(l, KLI_KIND_MUTEX, 0);
}

static void fake_destroy(struct fake *l)
{
	kli_hook_destroyed(l, KLI_KIND_MUTEX);
}

static void named_abc(void)
{
	fake_init(&lock_a, KLI_KIND_MUTEX, "lock_a");
	fake_init(&lock_b, KLI_KIND_MUTEX, "lock_b");
	fake_init(&lock_c, KLI_KIND_MUTEX, "lock_c");
}

/* ---- planted cases (run in the child) --------------------------------------------------- */

/* Exported so the reports can name them. */
PLANT void case_order_ab_ba(void);
PLANT void case_order_cycle3(void);
PLANT void case_order_threads(void);
PLANT void case_recursion(void);
PLANT void case_recursion_allowed(void);
PLANT void case_unlock_not_held(void);
PLANT void case_unlock_other_thread(void);
PLANT void case_destroy_held(void);
PLANT void case_exit_held(void);
PLANT void case_sleep_in_spin(void);
PLANT void case_same_class(void);
PLANT void case_same_class_nested(void);
PLANT void case_try_no_order(void);
PLANT void case_destroy_forgets_order(void);
PLANT void case_assert_held(void);
PLANT void case_dump(void);

PLANT void case_order_ab_ba(void)
{
	named_abc();
	fake_lock(&lock_a);
	fake_lock(&lock_b);
	fake_unlock(&lock_b);
	fake_unlock(&lock_a);
	for (int i = 0; i < 2; i++) { /* reported once */
		fake_lock(&lock_b);
		fake_lock(&lock_a);
		fake_unlock(&lock_a);
		fake_unlock(&lock_b);
	}
	PLANT_END();
}

PLANT void case_order_cycle3(void)
{
	named_abc();
	fake_lock(&lock_a);
	fake_lock(&lock_b);
	fake_unlock(&lock_b);
	fake_unlock(&lock_a);
	fake_lock(&lock_b);
	fake_lock(&lock_c);
	fake_unlock(&lock_c);
	fake_unlock(&lock_b);
	fake_lock(&lock_c);
	fake_lock(&lock_a); /* A -> B -> C, then C -> A */
	fake_unlock(&lock_a);
	fake_unlock(&lock_c);
	PLANT_END();
}

PLANT void *order_ab_thread(void *arg);
PLANT void *order_ab_thread(void *arg)
{
	fake_lock(&lock_a);
	fake_lock(&lock_b);
	fake_unlock(&lock_b);
	fake_unlock(&lock_a);
	PLANT_END();
	return arg;
}

/* No deadlock ever happens: the threads run one after the other. */
PLANT void case_order_threads(void)
{
	pthread_t t;

	named_abc();
	pthread_create(&t, NULL, order_ab_thread, NULL);
	pthread_join(t, NULL);
	fake_lock(&lock_b);
	fake_lock(&lock_a);
	fake_unlock(&lock_a);
	fake_unlock(&lock_b);
	PLANT_END();
}

PLANT void case_recursion(void)
{
	named_abc();
	fake_lock(&lock_a);
	fake_lock(&lock_a);
	PLANT_END();
}

PLANT void case_recursion_allowed(void)
{
	named_abc();
	fake_lock_flags(&lock_a, KLI_KIND_RMLOCK, KLI_HF_READ);
	fake_lock_flags(&lock_a, KLI_KIND_RMLOCK, KLI_HF_READ | KLI_HF_RECURSE);
	kli_hook_created(&lock_s, KLI_KIND_RMLOCK, KLI_HF_RECURSE); /* the lock permits it */
	fake_lock_flags(&lock_s, KLI_KIND_RMLOCK, KLI_HF_READ);
	fake_lock_flags(&lock_s, KLI_KIND_RMLOCK, KLI_HF_READ);
	PLANT_END();
}

PLANT void case_unlock_not_held(void)
{
	named_abc();
	fake_unlock(&lock_a);
	PLANT_END();
}

static struct klt_barrier holder_bar;

PLANT void *holder_thread(void *arg);
PLANT void *holder_thread(void *arg)
{
	fake_lock(&lock_a);
	klt_barrier_wait(&holder_bar);  /* held */
	klt_barrier_wait(&holder_bar);  /* the main thread has unlocked it */
	PLANT_END();
	return arg;
}

PLANT void case_unlock_other_thread(void)
{
	pthread_t t;

	named_abc();
	klt_barrier_init(&holder_bar, 2);
	pthread_create(&t, NULL, holder_thread, NULL);
	klt_barrier_wait(&holder_bar);
	fake_unlock(&lock_a);
	klt_barrier_wait(&holder_bar);
	_exit(0); /* the holder would report its exit with the lock held */
	PLANT_END();
}

PLANT void case_destroy_held(void)
{
	named_abc();
	fake_lock(&lock_a);
	fake_destroy(&lock_a);
	PLANT_END();
}

PLANT void *exit_holding(void *arg);
PLANT void *exit_holding(void *arg)
{
	fake_lock(&lock_a);
	fake_lock(&lock_b);
	PLANT_END();
	return arg;
}

PLANT void case_exit_held(void)
{
	pthread_t t;

	named_abc();
	pthread_create(&t, NULL, exit_holding, NULL);
	pthread_join(t, NULL);
	PLANT_END();
}

PLANT void case_sleep_in_spin(void)
{
	named_abc();
	fake_init(&lock_s, KLI_KIND_TICKET, "spin_s");
	fake_init(&lock_t, KLI_KIND_TICKET, "spin_t");
	fake_lock_flags(&lock_s, KLI_KIND_TICKET, KLI_HF_SPIN);
	fake_lock_flags(&lock_t, KLI_KIND_TICKET, KLI_HF_SPIN); /* spin in spin: fine */
	fake_lock(&lock_a);                                     /* a mutex: reported */
	PLANT_END();
}

PLANT void case_same_class(void)
{
	fake_init(&bucket1, KLI_KIND_MUTEX, "bucket");
	fake_init(&bucket2, KLI_KIND_MUTEX, "bucket");
	fake_lock(&bucket1);
	fake_lock(&bucket2);
	PLANT_END();
}

PLANT void case_same_class_nested(void)
{
	fake_init(&bucket1, KLI_KIND_MUTEX, "bucket");
	fake_init(&bucket2, KLI_KIND_MUTEX, "bucket");
	fake_init(&lock_a, KLI_KIND_MUTEX, NULL);
	fake_init(&lock_b, KLI_KIND_MUTEX, NULL);
	kl_witness_set_class(&lock_a, "stripe", KL_WITNESS_DUPOK);
	kl_witness_set_class(&lock_b, "stripe", KL_WITNESS_DUPOK);
	fake_lock(&bucket1);
	kl_witness_nest(1);
	fake_lock(&bucket2);    /* subclass 1 under subclass 0: intended */
	fake_unlock(&bucket2);
	fake_unlock(&bucket1);
	fake_lock(&lock_b);
	fake_lock(&lock_a);     /* DUPOK class */
	fake_unlock(&lock_a);
	fake_unlock(&lock_b);
	kl_witness_nest(1);
	fake_lock(&bucket2);
	fake_lock(&bucket1);    /* subclass 0 under subclass 1: a reversal */
	PLANT_END();
}

PLANT void case_try_no_order(void)
{
	named_abc();
	fake_lock(&lock_a);
	fake_lock(&lock_b);
	fake_unlock(&lock_b);
	fake_unlock(&lock_a);
	fake_lock(&lock_b);
	fake_trylock(&lock_a); /* cannot deadlock: no report */
	fake_unlock(&lock_a);
	fake_unlock(&lock_b);
	PLANT_END();
}

/* Unnamed locks are their own classes and die with the lock: new locks at the same
 * addresses start with no recorded order. */
PLANT void case_destroy_forgets_order(void)
{
	for (int round = 0; round < 2; round++) {
		fake_init(&lock_a, KLI_KIND_MUTEX, NULL);
		fake_init(&lock_b, KLI_KIND_MUTEX, NULL);
		fake_lock(round == 0 ? &lock_a : &lock_b);
		fake_lock(round == 0 ? &lock_b : &lock_a);
		fake_unlock(&lock_b);
		fake_unlock(&lock_a);
		fake_destroy(&lock_a);
		fake_destroy(&lock_b);
	}
	PLANT_END();
}

PLANT void case_assert_held(void)
{
	named_abc();
	kl_witness_assert_not_held(&lock_a);
	fake_lock(&lock_a);
	kl_witness_assert_held(&lock_a);
	if (!kl_witness_held(&lock_a) || kl_witness_held(&lock_b))
		_exit(3);
	kl_witness_assert_held(&lock_b); /* reported */
	fake_unlock(&lock_a);
	PLANT_END();
}

PLANT void case_dump(void)
{
	named_abc();
	fake_lock(&lock_a);
	fake_lock_flags(&lock_b, KLI_KIND_RWLOCK, KLI_HF_READ);
	kl_witness_dump(stderr);
	fake_unlock(&lock_b);
	fake_unlock(&lock_a);
	PLANT_END();
}

/* ---- the same through real klock locks ------------------------------------------------ */

static struct kl_mutex real_a, real_b;
static struct kl_ticket real_spin;
static struct kl_rwlock real_rw;

static void real_init(void)
{
	kl_mutex_init(&real_a);
	kl_mutex_init(&real_b);
	kl_ticket_init(&real_spin);
	kl_rwlock_init(&real_rw);
	kl_lock_set_name(&real_a, "real_a");
	kl_lock_set_name(&real_b, "real_b");
	kl_lock_set_name(&real_spin, "real_spin");
	kl_lock_set_name(&real_rw, "real_rw");
}

PLANT void case_real_order(void);
PLANT void case_real_order(void)
{
	real_init();
	kl_mutex_lock(&real_a);
	kl_mutex_lock(&real_b);
	kl_mutex_unlock(&real_b);
	kl_mutex_unlock(&real_a);
	kl_mutex_lock(&real_b);
	kl_mutex_lock(&real_a);
	kl_mutex_unlock(&real_a);
	kl_mutex_unlock(&real_b);
	PLANT_END();
}

/* rwlock read side inside a mutex, and the mutex inside its write side. */
PLANT void case_real_rw_order(void);
PLANT void case_real_rw_order(void)
{
	real_init();
	kl_rwlock_read_lock(&real_rw);
	kl_mutex_lock(&real_a);
	kl_mutex_unlock(&real_a);
	kl_rwlock_read_unlock(&real_rw);
	kl_mutex_lock(&real_a);
	kl_rwlock_write_lock(&real_rw);
	kl_rwlock_write_unlock(&real_rw);
	kl_mutex_unlock(&real_a);
	PLANT_END();
}

PLANT void case_real_spin(void);
PLANT void case_real_spin(void)
{
	real_init();
	kl_ticket_lock(&real_spin);
	kl_mutex_lock(&real_a);
	kl_mutex_unlock(&real_a);
	kl_ticket_unlock(&real_spin);
	PLANT_END();
}

/* A real mutex taken twice would deadlock: witness reports first (run in abort mode). */
PLANT void case_real_recursion(void);
PLANT void case_real_recursion(void)
{
	real_init();
	kl_mutex_lock(&real_a);
	kl_mutex_lock(&real_a);
	PLANT_END();
}

PLANT void *real_exit_holding(void *arg);
PLANT void *real_exit_holding(void *arg)
{
	kl_mutex_lock(&real_a);
	PLANT_END();
	return arg;
}

PLANT void case_real_exit_held(void);
PLANT void case_real_exit_held(void)
{
	pthread_t t;

	real_init();
	pthread_create(&t, NULL, real_exit_holding, NULL);
	pthread_join(t, NULL);
	PLANT_END();
}

/* Correct nesting through real locks: nothing to say. */
PLANT void case_real_clean(void);
PLANT void case_real_clean(void)
{
	real_init();
	for (int i = 0; i < 3; i++) {
		kl_rwlock_read_lock(&real_rw);
		kl_mutex_lock(&real_a);
		kl_mutex_lock(&real_b);
		kl_ticket_lock(&real_spin);
		kl_ticket_unlock(&real_spin);
		kl_mutex_unlock(&real_b);
		kl_mutex_unlock(&real_a);
		kl_rwlock_read_unlock(&real_rw);
	}
	PLANT_END();
}

/* ---- kl_hashlock: stripes are one class; lock2/lockn nest them in stripe order ---------- */

/* Stripes of the planted tables: few, so that random keys collide and both orders occur. */
#define WIT_STRIPES 8
/* Objects whose addresses are the keys (64 bytes apart: one cache line each). */
#define WIT_NOBJ 64
/* lock2/lockn rounds of the ordered case. */
#define WIT_ROUNDS 200

static struct {
	char line[64];
} objs[WIT_NOBJ];

/* Two keys of @h on different stripes, the first on a higher stripe than the second. */
static void two_stripes(struct kl_hashlock *h, const void **hi, const void **lo)
{
	*hi = &objs[0];
	for (int i = 1; i < WIT_NOBJ; i++) {
		if (kl_hashlock_index(h, &objs[i]) < kl_hashlock_index(h, *hi)) {
			*lo = &objs[i];
			return;
		}
		if (kl_hashlock_index(h, &objs[i]) > kl_hashlock_index(h, *hi)) {
			*lo = *hi;
			*hi = &objs[i];
			return;
		}
	}
	fail_msg("all %d objects on one stripe", WIT_NOBJ);
}

/* lock2/lockn in every key order, under and over another lock, named and unnamed tables,
 * tables destroyed and made again: the stripe-ordered nesting is intended - no report. */
PLANT void case_hashlock_ordered(void);
PLANT void case_hashlock_ordered(void)
{
	struct kl_hashlock named, anon;
	const void *keys[4];
	unsigned x = 1;

	real_init();
	kl_hashlock_init(&named, WIT_STRIPES);
	kl_lock_set_name(&named, "objtable");
	for (int r = 0; r < WIT_ROUNDS; r++) {
		for (int k = 0; k < 4; k++) {
			x = x * 1103515245u + 12345u;
			keys[k] = &objs[(x >> 16) % WIT_NOBJ];
		}
		kl_mutex_lock(&real_a);                 /* real_a before the stripes */
		kl_hashlock_lock2(&named, keys[0], keys[1]);
		kl_hashlock_unlock2(&named, keys[1], keys[0]);
		kl_hashlock_lock2(&named, keys[1], keys[0]);
		kl_hashlock_unlock2(&named, keys[0], keys[1]);
		kl_mutex_unlock(&real_a);
		kl_hashlock_lockn(&named, keys, 4);
		kl_hashlock_unlockn(&named, keys, 4);
		kl_hashlock_lock(&named, keys[2]);      /* one key, then a leaf mutex */
		kl_mutex_lock(&real_b);
		kl_mutex_unlock(&real_b);
		kl_hashlock_unlock(&named, keys[2]);
	}
	kl_hashlock_destroy(&named);
	for (int t = 0; t < 3; t++) {                   /* a per-instance class, recycled */
		kl_hashlock_init(&anon, WIT_STRIPES);
		kl_hashlock_lock2(&anon, &objs[t], &objs[WIT_NOBJ - 1 - t]);
		kl_hashlock_unlock2(&anon, &objs[t], &objs[WIT_NOBJ - 1 - t]);
		kl_hashlock_lock2(&anon, &objs[WIT_NOBJ - 1 - t], &objs[t]);
		kl_hashlock_unlock2(&anon, &objs[WIT_NOBJ - 1 - t], &objs[t]);
		kl_hashlock_destroy(&anon);
	}
	PLANT_END();
}

/* Two plain kl_hashlock_lock() calls on two stripes: the leaf rule broken (the next thread
 * doing the opposite deadlocks) - a second lock of the table's class. */
PLANT void case_hashlock_two_keys(void);
PLANT void case_hashlock_two_keys(void)
{
	struct kl_hashlock h;
	const void *hi = NULL, *lo = NULL;

	kl_hashlock_init(&h, WIT_STRIPES);
	kl_lock_set_name(&h, "objtable");
	two_stripes(&h, &hi, &lo);
	kl_hashlock_lock(&h, lo);
	kl_hashlock_lock(&h, hi);   /* in stripe order, still not through lock2: reported */
	kl_hashlock_unlock(&h, hi);
	kl_hashlock_unlock(&h, lo);
	kl_hashlock_destroy(&h);
	PLANT_END();
}

/* ---- limits: many locks held, no memory (issue 13 item 17) -------------------------------- */

/* Stripes of the wide table: enough that 32 keys take 32 distinct stripes. */
#define WIDE_STRIPES 256

/* A correct program: one mutex, then kl_hashlock_lockn() of KL_HASHLOCK_LOCKN_MAX keys on
 * distinct stripes (33 locks held), released in any order. */
PLANT void case_many_held(void);
PLANT void case_many_held(void)
{
	static char wide_objs[KL_HASHLOCK_LOCKN_MAX][64];
	const void *keys[KL_HASHLOCK_LOCKN_MAX];
	struct kl_hashlock wide;

	real_init();
	kl_hashlock_init(&wide, WIDE_STRIPES);
	for (size_t i = 0; i < KL_HASHLOCK_LOCKN_MAX; i++)
		keys[i] = wide_objs[i];
	for (int round = 0; round < 2; round++) {
		kl_mutex_lock(&real_a);
		if (kl_hashlock_lockn(&wide, keys, KL_HASHLOCK_LOCKN_MAX) != 0)
			_exit(3);
		kl_hashlock_unlockn(&wide, keys, KL_HASHLOCK_LOCKN_MAX);
		kl_mutex_unlock(&real_a);
	}
	kl_hashlock_destroy(&wide);
	PLANT_END();
}

/* Order a -> b learnt; then the address space is exhausted (RLIMIT_AS and the heap used
 * up), and two new locks nest (witness cannot record them) and b -> a reverses. */
PLANT void case_out_of_memory(void);
PLANT void case_out_of_memory(void)
{
	static struct fake c, d;
	void **hoard = NULL, **p;

	fake_init(&lock_a, KLI_KIND_MUTEX, "oom_a");
	fake_init(&lock_b, KLI_KIND_MUTEX, "oom_b");
	fake_lock(&lock_a);
	fake_lock(&lock_b);
	fake_unlock(&lock_b);
	fake_unlock(&lock_a);
	if (!klt_limit_address_space(0))
		_exit(3);
	for (size_t sz = 4096; sz >= sizeof(void *); sz /= 2) /* the heap's free space too */
		while ((p = malloc(sz)) != NULL) {
			*p = hoard;
			hoard = p;
		}
	fake_init(&c, KLI_KIND_MUTEX, NULL);
	fake_init(&d, KLI_KIND_MUTEX, NULL);
	fake_lock(&c);
	fake_lock(&d);
	fake_unlock(&d);
	fake_unlock(&c);
	fake_lock(&lock_b);
	fake_lock(&lock_a);
	fake_unlock(&lock_a);
	fake_unlock(&lock_b);
	PLANT_END();
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{ "hashlock_ordered", case_hashlock_ordered },
	{ "hashlock_two_keys", case_hashlock_two_keys },
	{ "real_order", case_real_order },
	{ "real_rw_order", case_real_rw_order },
	{ "real_spin", case_real_spin },
	{ "real_recursion", case_real_recursion },
	{ "real_exit_held", case_real_exit_held },
	{ "real_clean", case_real_clean },
	{ "order_ab_ba", case_order_ab_ba },
	{ "order_cycle3", case_order_cycle3 },
	{ "order_threads", case_order_threads },
	{ "recursion", case_recursion },
	{ "recursion_allowed", case_recursion_allowed },
	{ "unlock_not_held", case_unlock_not_held },
	{ "unlock_other_thread", case_unlock_other_thread },
	{ "destroy_held", case_destroy_held },
	{ "exit_held", case_exit_held },
	{ "sleep_in_spin", case_sleep_in_spin },
	{ "same_class", case_same_class },
	{ "same_class_nested", case_same_class_nested },
	{ "try_no_order", case_try_no_order },
	{ "destroy_forgets_order", case_destroy_forgets_order },
	{ "assert_held", case_assert_held },
	{ "dump", case_dump },
	{ "many_held", case_many_held },
	{ "out_of_memory", case_out_of_memory },
};

static int run_case_here(const char *name)
{
	for (size_t i = 0; i < KL_ARRAY_SIZE(cases); i++) {
		if (strcmp(cases[i].name, name) == 0) {
			cases[i].fn();
			fprintf(stderr, "case done: %lu report(s)\n", kl_witness_reports());
			return 0;
		}
	}
	fprintf(stderr, "no case %s\n", name);
	return 2;
}

/* ---- the parent: run a case in a child, capture what it prints ---------------------------- */

struct outcome {
	int status;     /* exit status, or 128 + signal */
	char out[OUT_MAX];
};

static struct outcome outcome;

static void run_case(const char *name, const char *mode)
{
	int fds[2], st;
	size_t len = 0;
	ssize_t n;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = { "test_witness", CASE_ARG, (char *)name, NULL };
		char self[4096];
		ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);

		dup2(fds[1], STDERR_FILENO);
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		setenv("KLOCK_WITNESS", mode, 1);
		self[k > 0 ? k : 0] = '\0';
		execv(self, argv); /* not "/proc/self/exe": under valgrind that is the tool */
		_exit(127);
	}
	close(fds[1]);
	while (len < OUT_MAX - 1 && (n = read(fds[0], outcome.out + len, OUT_MAX - 1 - len)) > 0)
		len += (size_t)n;
	outcome.out[len] = '\0';
	close(fds[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	outcome.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	printf("---- case %s (KLOCK_WITNESS=%s): status %d\n%s", name, mode, outcome.status,
	       outcome.out);
}

static int occurrences(const char *needle)
{
	int n = 0;

	for (const char *p = outcome.out; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

static void expect_has(const char *needle)
{
	if (strstr(outcome.out, needle) == NULL)
		fail_msg("missing \"%s\" in the report", needle);
}

static void expect_reports(int n)
{
	char line[64];

	snprintf(line, sizeof(line), "case done: %d report(s)", n);
	expect_has(line);
	assert_int_equal(outcome.status, 0);
}

static void skip_unless_witness(void)
{
	if (!KLOCK_WITNESS)
		skip();
}

static void test_witness_reports_ab_ba_reversal_once_with_both_sites(void **state)
{
	skip_unless_witness();
	run_case("order_ab_ba", "warn");
	expect_reports(1);
	assert_int_equal(occurrences("lock order reversal"), 1);
	expect_has("1st mutex \"lock_b\"");
	expect_has("2nd mutex \"lock_a\"");
	expect_has("established order");
	expect_has("case_order_ab_ba+0x");
	assert_int_equal(occurrences("case_order_ab_ba+0x"), 4 + 1); /* 4 sites + the stack */
}

static void test_witness_reports_three_lock_cycle(void **state)
{
	skip_unless_witness();
	run_case("order_cycle3", "warn");
	expect_reports(1);
	expect_has("lock order reversal");
	expect_has("1st mutex \"lock_c\"");
	expect_has("2nd mutex \"lock_a\"");
	expect_has("[class \"lock_b\"]");   /* the path goes through B */
}

static void test_witness_reports_reversal_across_threads_without_deadlock(void **state)
{
	skip_unless_witness();
	run_case("order_threads", "warn");
	expect_reports(1);
	expect_has("lock order reversal");
	expect_has("order_ab_thread+0x");
	expect_has("case_order_threads+0x");
}

static void test_witness_reports_recursion_on_non_recursive_lock(void **state)
{
	skip_unless_witness();
	run_case("recursion", "warn");
	expect_reports(1);
	expect_has("recursed on non-recursive lock: mutex \"lock_a\"");
	expect_has("first acquired at case_recursion+0x");
	run_case("recursion_allowed", "warn");
	expect_reports(0);
}

static void test_witness_reports_unlock_not_held(void **state)
{
	skip_unless_witness();
	run_case("unlock_not_held", "warn");
	expect_reports(1);
	expect_has("unlock of a lock not held: mutex \"lock_a\"");
	expect_has("at case_unlock_not_held+0x");
}

static void test_witness_reports_unlock_by_another_thread(void **state)
{
	skip_unless_witness();
	run_case("unlock_other_thread", "warn");
	assert_int_equal(outcome.status, 0);
	expect_has("unlock of a lock held by another thread: mutex \"lock_a\"");
	expect_has("taken at holder_thread+0x");
}

static void test_witness_reports_destroy_of_held_lock(void **state)
{
	skip_unless_witness();
	run_case("destroy_held", "warn");
	expect_reports(1);
	expect_has("destroy of a held lock: mutex \"lock_a\"");
	expect_has("(this thread), taken at case_destroy_held+0x");
}

static void test_witness_reports_thread_exit_with_locks_held(void **state)
{
	skip_unless_witness();
	run_case("exit_held", "warn");
	expect_reports(1);
	expect_has("thread exiting with locks held");
	expect_has("mutex \"lock_a\"");
	expect_has("mutex \"lock_b\"");
	expect_has("exit_holding+0x");
}

static void test_witness_reports_sleeping_lock_under_spinlock(void **state)
{
	skip_unless_witness();
	run_case("sleep_in_spin", "warn");
	expect_reports(1);
	expect_has("sleeping lock acquired while holding a spinlock");
	expect_has("1st ticket \"spin_s\"");
	expect_has("2nd mutex \"lock_a\"");
}

static void test_witness_reports_same_class_nesting_unless_annotated(void **state)
{
	skip_unless_witness();
	run_case("same_class", "warn");
	expect_reports(1);
	expect_has("acquiring a second lock of the same class");
	expect_has("[class \"bucket\"]");
	run_case("same_class_nested", "warn");
	expect_reports(1); /* only the subclass reversal */
	expect_has("lock order reversal");
	expect_has("[class \"bucket/1\"]");
}

static void test_witness_hashlock_stripes_nest_only_through_lock2_lockn(void **state)
{
	skip_unless_witness();
	run_case("hashlock_ordered", "abort");
	expect_reports(0);
	run_case("hashlock_two_keys", "warn");
	expect_reports(1);
	expect_has("acquiring a second lock of the same class");
	expect_has("of hashlock \"objtable\"");
	expect_has("[class \"objtable\"]");
	expect_has("case_hashlock_two_keys+0x");
}

static void test_witness_trylock_adds_no_reversal(void **state)
{
	skip_unless_witness();
	run_case("try_no_order", "warn");
	expect_reports(0);
}

static void test_witness_forgets_order_of_destroyed_unnamed_locks(void **state)
{
	skip_unless_witness();
	run_case("destroy_forgets_order", "warn");
	expect_reports(0);
}

static void test_witness_assert_held_reports_when_not_held(void **state)
{
	skip_unless_witness();
	run_case("assert_held", "warn");
	expect_reports(1);
	expect_has("lock not held (kl_witness_assert_held): ");
	expect_has("at case_assert_held+0x");
}

static void test_witness_dump_lists_held_locks(void **state)
{
	skip_unless_witness();
	run_case("dump", "warn");
	expect_reports(0);
	expect_has("witness: locks held, per thread:");
	expect_has("   mutex \"lock_a\"");
	expect_has("   shared rwlock \"lock_b\"");
}

static void test_witness_abort_mode_aborts_after_the_report(void **state)
{
	skip_unless_witness();
	run_case("order_ab_ba", "abort");
	assert_int_equal(outcome.status, 128 + SIGABRT);
	expect_has("lock order reversal");
	assert_null(strstr(outcome.out, "case done"));
}

static void test_witness_off_mode_checks_nothing(void **state)
{
	skip_unless_witness();
	run_case("order_ab_ba", "off");
	expect_reports(0);
	run_case("destroy_held", "off");
	expect_reports(0);
}

/* ---- through real locks ---- */

static void test_witness_reports_reversal_through_real_mutexes(void **state)
{
	skip_unless_witness();
	run_case("real_order", "warn");
	expect_reports(1);
	expect_has("lock order reversal");
	expect_has("1st mutex \"real_b\"");
	expect_has("2nd mutex \"real_a\"");
	expect_has("case_real_order+0x");
}

static void test_witness_reports_reversal_between_rwlock_sides_and_mutex(void **state)
{
	skip_unless_witness();
	run_case("real_rw_order", "warn");
	expect_reports(1);
	expect_has("1st mutex \"real_a\"");
	expect_has("2nd rwlock \"real_rw\"");
}

static void test_witness_reports_mutex_under_real_ticket_spinlock(void **state)
{
	skip_unless_witness();
	run_case("real_spin", "warn");
	expect_reports(1);
	expect_has("sleeping lock acquired while holding a spinlock");
	expect_has("1st ticket \"real_spin\"");
}

static void test_witness_reports_real_self_deadlock_before_it_happens(void **state)
{
	skip_unless_witness();
	run_case("real_recursion", "abort");
	assert_int_equal(outcome.status, 128 + SIGABRT);
	expect_has("recursed on non-recursive lock: mutex \"real_a\"");
	expect_has("first acquired at case_real_recursion+0x");
}

static void test_witness_reports_real_thread_exit_with_mutex_held(void **state)
{
	skip_unless_witness();
	run_case("real_exit_held", "warn");
	expect_has("thread exiting with locks held");
	expect_has("real_exit_holding+0x");
}

static void test_witness_is_quiet_on_correct_real_nesting(void **state)
{
	skip_unless_witness();
	run_case("real_clean", "abort");
	expect_reports(0);
}

static void test_witness_is_quiet_with_more_than_32_locks_held(void **state)
{
	skip_unless_witness();
	run_case("many_held", "abort");
	expect_reports(0);
}

static void test_witness_out_of_memory_stops_checking_once_without_false_reports(void **state)
{
	skip_unless_witness();
	if (!klt_rlimit_as_ok())
		skip(); /* sanitizers/valgrind need the address space */
	run_case("out_of_memory", "abort");
	expect_reports(0);
	assert_int_equal(occurrences("lock-order checking stopped"), 1);
}

static void test_witness_api_is_inert_without_witness(void **state)
{
	struct fake f = { { 0 } };

	assert_int_equal(kl_witness_set_class(&f, NULL, 0), EINVAL);
	assert_int_equal(kl_witness_set_class(&f, "x", 0x80), EINVAL);
	if (KLOCK_WITNESS)
		skip();
	assert_false(kl_witness_enabled());
	assert_int_equal(kl_witness_set_class(&f, "x", KL_WITNESS_DUPOK), 0);
	assert_true(kl_witness_held(&f));
	kl_witness_assert_not_held(&f);
	assert_int_equal(kl_witness_reports(), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_witness_reports_ab_ba_reversal_once_with_both_sites),
		cmocka_unit_test(test_witness_reports_three_lock_cycle),
		cmocka_unit_test(test_witness_reports_reversal_across_threads_without_deadlock),
		cmocka_unit_test(test_witness_reports_recursion_on_non_recursive_lock),
		cmocka_unit_test(test_witness_reports_unlock_not_held),
		cmocka_unit_test(test_witness_reports_unlock_by_another_thread),
		cmocka_unit_test(test_witness_reports_destroy_of_held_lock),
		cmocka_unit_test(test_witness_reports_thread_exit_with_locks_held),
		cmocka_unit_test(test_witness_reports_sleeping_lock_under_spinlock),
		cmocka_unit_test(test_witness_reports_same_class_nesting_unless_annotated),
		cmocka_unit_test(test_witness_hashlock_stripes_nest_only_through_lock2_lockn),
		cmocka_unit_test(test_witness_trylock_adds_no_reversal),
		cmocka_unit_test(test_witness_forgets_order_of_destroyed_unnamed_locks),
		cmocka_unit_test(test_witness_assert_held_reports_when_not_held),
		cmocka_unit_test(test_witness_dump_lists_held_locks),
		cmocka_unit_test(test_witness_abort_mode_aborts_after_the_report),
		cmocka_unit_test(test_witness_off_mode_checks_nothing),
		cmocka_unit_test(test_witness_reports_reversal_through_real_mutexes),
		cmocka_unit_test(test_witness_reports_reversal_between_rwlock_sides_and_mutex),
		cmocka_unit_test(test_witness_reports_mutex_under_real_ticket_spinlock),
		cmocka_unit_test(test_witness_reports_real_self_deadlock_before_it_happens),
		cmocka_unit_test(test_witness_reports_real_thread_exit_with_mutex_held),
		cmocka_unit_test(test_witness_is_quiet_on_correct_real_nesting),
		cmocka_unit_test(test_witness_is_quiet_with_more_than_32_locks_held),
		cmocka_unit_test(test_witness_out_of_memory_stops_checking_once_without_false_reports),
		cmocka_unit_test(test_witness_api_is_inert_without_witness),
	};

	if (argc > 2 && strcmp(argv[1], CASE_ARG) == 0)
		return run_case_here(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
