/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/plant/sanitizer_plant.c - race detectors still see through klock locks: ThreadSanitizer
 * (-Db_sanitize=thread), helgrind and DRD (-Dvalgrind=enabled).
 *
 * klock's locks synchronise in ways these tools cannot follow on their own (relaxed state
 * words, compiler-barrier read sides paired with membarrier, futex sleeps), so hooks.c tells
 * them what a lock does (__tsan_mutex_*, ANNOTATE_RWLOCK_*). These planted cases check both
 * directions, each in a child process whose report and exit status (66) are checked:
 *   clean            writers under the write lock, readers under the read side, sharing
 *                    plain data: no report (the annotations carry the happens-before)
 *   race             one writer skips the lock: a data race report
 *   race_read_side   a writer skips the lock while readers hold the read side: a race
 *                    (not for seqlocks: their readers hold nothing and copy through
 *                    atomics - their clean case runs the retry loop instead)
 *   try_failed       a failed trylock is not a hold: the access after it races
 *   inversion        A then B in one thread, B then A in another (never deadlocking):
 *                    a lock-order report (TSan, helgrind; DRD has no lock-order checker)
 *   double_unlock    unlock of a lock not held (only locks that tolerate it: the seam lock)
 * Every report in a child must be the expected kind: a stray "double lock" or "unlock of an
 * unlocked mutex" is an annotation bug.
 *
 * Two programs share this file: plant_seam drives a test lock built on the hook seam with
 * relaxed atomics only (so whatever the tool knows, it learnt from hooks.c), and
 * plant_locks drives every registered klock adapter (pthread_mutex as the control).
 *   plant_* [--tool tsan|helgrind|drd] [--valgrind PATH] [--supp FILE]...
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include <klock/config.h>
#include "lockops.h"
#if KLOCK_VALGRIND_ANNOTATE
#include <valgrind/helgrind.h>
#endif

#define CASE_ARG "--case"
#define OUT_MAX (256 * 1024)
/* Exit status of a child whose tool reported something (TSAN_OPTIONS exitcode, valgrind
 * --error-exitcode). */
#define REPORTED_EXIT 66
/* Most --supp files. */
#define MAX_SUPP 4
/* Rounds each planted thread runs (scaled by KLTEST_SCALE, at least MIN_ROUNDS): the tools
 * judge happens-before, not luck, so a few hundred overlapping accesses are plenty. */
#define ROUNDS 2000
#define MIN_ROUNDS 50
/* try_failed: the holder keeps the lock this long; the trier starts this late. */
#define TRY_HOLD_NS (300 * 1000 * 1000)
#define TRY_START_NS (100 * 1000 * 1000)
#define TSAN_OPTS "exitcode=66 detect_deadlocks=1 second_deadlock_stack=1 " \
		  "report_signal_unsafe=0 halt_on_error=0"

/* ---- the seam lock: what a klock primitive tells the hooks, nothing more ------------------- */
#ifdef PLANT_SEAM
#include "hooks.h"

struct seam_rw {
	_Atomic int state; /* -1 writer, n > 0 readers; relaxed only: TSan learns nothing here */
};

static int seam_init(void *l)
{
	atomic_init(&((struct seam_rw *)l)->state, 0);
	kli_hook_created(l, KLI_KIND_RWLOCK, 0);
	return 0;
}

static void seam_destroy(void *l)
{
	kli_hook_destroyed(l, KLI_KIND_RWLOCK);
}

static bool seam_try(struct seam_rw *l, bool rd)
{
	int v = atomic_load_explicit(&l->state, memory_order_relaxed);

	if (rd)
		return v >= 0 && atomic_compare_exchange_weak_explicit(
			&l->state, &v, v + 1, memory_order_relaxed, memory_order_relaxed);
	v = 0;
	return atomic_compare_exchange_weak_explicit(&l->state, &v, -1, memory_order_relaxed,
						     memory_order_relaxed);
}

static void seam_lock(void *l, bool rd, const void *site)
{
	unsigned f = rd ? KLI_HF_READ : 0;

	kli_hook_acquire(l, KLI_KIND_RWLOCK, f, site);
	while (!seam_try(l, rd))
		sched_yield();
	kli_hook_acquired(l, KLI_KIND_RWLOCK, f, site);
}

static bool seam_trylock(void *l, bool rd, const void *site)
{
	unsigned f = (rd ? KLI_HF_READ : 0) | KLI_HF_TRY;
	bool ok;

	kli_hook_acquire(l, KLI_KIND_RWLOCK, f, site);
	ok = seam_try(l, rd);
	kli_hook_acquired(l, KLI_KIND_RWLOCK, ok ? f : f | KLI_HF_FAILED, site);
	return ok;
}

static void seam_unlock(void *l, bool rd, const void *site)
{
	struct seam_rw *s = l;
	unsigned f = rd ? KLI_HF_READ : 0;

	kli_hook_release(l, KLI_KIND_RWLOCK, f, site);
	if (rd)
		atomic_fetch_sub_explicit(&s->state, 1, memory_order_relaxed);
	else
		atomic_store_explicit(&s->state, 0, memory_order_relaxed);
	kli_hook_released(l, KLI_KIND_RWLOCK, f);
}

static void seam_wlock(void *l, void *ts)
{
	(void)ts;
	seam_lock(l, false, __builtin_return_address(0));
}

static void seam_wunlock(void *l, void *ts)
{
	(void)ts;
	seam_unlock(l, false, __builtin_return_address(0));
}

static bool seam_wtry(void *l, void *ts)
{
	(void)ts;
	return seam_trylock(l, false, __builtin_return_address(0));
}

static void seam_rlock(void *l, void *ts)
{
	(void)ts;
	seam_lock(l, true, __builtin_return_address(0));
}

static void seam_runlock(void *l, void *ts)
{
	(void)ts;
	seam_unlock(l, true, __builtin_return_address(0));
}

static const struct lockops seam_ops = {
	.name = "seam_rwlock",
	.family = "test",
	.summary = "relaxed-atomics rwlock annotated only through the hook seam",
	.flags = LOCKOPS_RW,
	.size = sizeof(struct seam_rw),
	.init = seam_init,
	.destroy = seam_destroy,
	.write_lock = seam_wlock,
	.write_unlock = seam_wunlock,
	.write_trylock = seam_wtry,
	.read_lock = seam_rlock,
	.read_unlock = seam_runlock,
};

static size_t adapters(const struct lockops **out, size_t max)
{
	(void)max;
	out[0] = &seam_ops;
	return 1;
}

static const struct lockops *adapter_named(const char *name)
{
	return strcmp(name, seam_ops.name) == 0 ? &seam_ops : NULL;
}

static bool tolerates_bad_unlock(const struct lockops *o)
{
	return o == &seam_ops;
}
#else
/* Every klock adapter that claims exclusion, and the pthread control. */
static size_t adapters(const struct lockops **out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < lockops_count() && n < max; i++) {
		const struct lockops *o = lockops_at(i);

		if (o->flags & (LOCKOPS_BUSTED | LOCKOPS_NO_EXCLUSION))
			continue;
		if (strcmp(o->family, "klock") == 0 || strcmp(o->name, "pthread_mutex") == 0)
			out[n++] = o;
	}
	return n;
}

static const struct lockops *adapter_named(const char *name)
{
	return lockops_find(name);
}

static bool tolerates_bad_unlock(const struct lockops *o)
{
	(void)o;
	return false;
}
#endif

/* ---- planted cases (run in the child) ------------------------------------------------------ */

struct plant {
	const struct lockops *o;
	void *lock, *lock2;
	long plain;           /* the data the lock protects: plain, so TSan checks it */
	long plain_copy;
	_Atomic long snapshot; /* what optimistic readers (seqlock) copy: they race with
	                        * writers by design, so only through atomics */
};

struct worker {
	struct plant *p;
	void *ts;
	int role;             /* 0 locked writer, 1 unlocked writer, 2 reader, 3 try, then read */
	long sum;             /* what a reader read (volatile reads: they must happen) */
};

static void *alloc_lock(size_t n)
{
	size_t sz = (n + LOCKOPS_ALIGN - 1) / LOCKOPS_ALIGN * LOCKOPS_ALIGN;
	void *p = aligned_alloc(LOCKOPS_ALIGN, sz ? sz : LOCKOPS_ALIGN);

	if (p == NULL)
		abort();
	memset(p, 0, sz ? sz : LOCKOPS_ALIGN);
	return p;
}

/* A seqlock reader (lockops.h): copy, retry while a writer intervened, then release. */
static void read_side_optimistic(struct worker *w)
{
	const struct lockops *o = w->p->o;
	long v;

	do {
		o->read_lock(w->p->lock, w->ts);
		v = atomic_load_explicit(&w->p->snapshot, memory_order_relaxed);
	} while (o->read_retry(w->p->lock, w->ts));
	o->read_unlock(w->p->lock, w->ts);
	w->sum += v;
}

static void read_side(struct worker *w)
{
	const struct lockops *o = w->p->o;
	void (*lock)(void *, void *) = o->read_lock ? o->read_lock : o->write_lock;
	void (*unlock)(void *, void *) = o->read_unlock ? o->read_unlock : o->write_unlock;

	if (o->flags & LOCKOPS_READ_RETRY) {
		read_side_optimistic(w);
		return;
	}
	lock(w->p->lock, w->ts);
	w->sum += *(volatile long *)&w->p->plain + *(volatile long *)&w->p->plain_copy;
	unlock(w->p->lock, w->ts);
}

static void write_side(struct worker *w, bool locked)
{
	const struct lockops *o = w->p->o;

	if (locked)
		o->write_lock(w->p->lock, w->ts);
	w->p->plain++;
	w->p->plain_copy = w->p->plain;
	atomic_store_explicit(&w->p->snapshot, w->p->plain, memory_order_relaxed);
	if (locked)
		o->write_unlock(w->p->lock, w->ts);
}

/* A failed trylock must not count as a hold: were it annotated as one, TSan would give the
 * trier the holder's earlier (unlocked) write through the lock's release clock, and the
 * race below would go unreported. */
static void try_then_read(struct worker *w)
{
	const struct lockops *o = w->p->o;

	if (o->write_trylock(w->p->lock, w->ts)) {
		o->write_unlock(w->p->lock, w->ts);
		abort(); /* the holder holds it: a successful try is a broken lock */
	}
	w->sum += *(volatile long *)&w->p->plain_copy; /* after a FAILED try: a race */
}

static long rounds(void)
{
	const char *s = getenv("KLTEST_SCALE");
	long n = (long)(ROUNDS * (s != NULL && atof(s) > 0 ? atof(s) : 1.0));

	return n > MIN_ROUNDS ? n : MIN_ROUNDS;
}

static void *plant_worker(void *arg)
{
	struct worker *w = arg;
	const struct lockops *o = w->p->o;
	long n = rounds();

	if (o->thread_enter != NULL)
		o->thread_enter(w->p->lock);
	for (long i = 0; i < n; i++) {
		if (w->role == 2)
			read_side(w);
		else if (w->role == 3)
			try_then_read(w);
		else
			write_side(w, w->role == 0);
	}
	if (o->thread_leave != NULL)
		o->thread_leave(w->p->lock);
	return NULL;
}

static void run_roles(struct plant *p, const int *roles, int n)
{
	pthread_t t[4];
	struct worker w[4];

	for (int i = 0; i < n; i++) {
		w[i] = (struct worker){ p, alloc_lock(p->o->tsize), roles[i], 0 };
		pthread_create(&t[i], NULL, plant_worker, &w[i]);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		free(w[i].ts);
	}
}

/* Writes without the lock, passes the lock once (its release now covers that write), then
 * holds it while the other thread's trylock fails. */
static void *hold_long(void *arg)
{
	struct worker *w = arg;
	struct timespec ts = { 0, TRY_HOLD_NS };

	w->p->plain_copy = 1;
	w->p->o->write_lock(w->p->lock, w->ts);
	w->p->o->write_unlock(w->p->lock, w->ts);
	w->p->o->write_lock(w->p->lock, w->ts);
	nanosleep(&ts, NULL);
	w->p->o->write_unlock(w->p->lock, w->ts);
	return NULL;
}

static void case_try_failed(struct plant *p)
{
	struct worker holder = { p, alloc_lock(p->o->tsize), 0, 0 };
	struct worker trier = { p, alloc_lock(p->o->tsize), 3, 0 };
	struct timespec ts = { 0, TRY_START_NS };
	pthread_t t;

	/* The trier's first lock call (its thread record) before the holder exists: else the
	 * registry's own, real synchronisation could order the holder's write before it. */
	p->o->write_lock(p->lock, trier.ts);
	p->o->write_unlock(p->lock, trier.ts);
	pthread_create(&t, NULL, hold_long, &holder);
	nanosleep(&ts, NULL);
	try_then_read(&trier);
	pthread_join(t, NULL);
	free(holder.ts);
	free(trier.ts);
}

static void *lock_pair(void *arg)
{
	struct plant *p = arg;
	void *ts = alloc_lock(p->o->tsize), *ts2 = alloc_lock(p->o->tsize);
	static _Atomic int turn;
	bool ab = atomic_fetch_add(&turn, 1) == 0;
	void *first = ab ? p->lock : p->lock2, *second = ab ? p->lock2 : p->lock;

	p->o->write_lock(first, ts);
	p->o->write_lock(second, ts2);
	p->o->write_unlock(second, ts2);
	p->o->write_unlock(first, ts);
	free(ts);
	free(ts2);
	return NULL;
}

static void case_inversion(struct plant *p)
{
	pthread_t t;

	p->lock2 = alloc_lock(p->o->size);
	p->o->init(p->lock2);
	pthread_create(&t, NULL, lock_pair, p);  /* A then B */
	pthread_join(t, NULL);
	pthread_create(&t, NULL, lock_pair, p);  /* B then A, later: never a deadlock */
	pthread_join(t, NULL);
	p->o->destroy(p->lock2);
	free(p->lock2);
}

static void case_double_unlock(struct plant *p)
{
	void *ts = alloc_lock(p->o->tsize);

	p->o->write_lock(p->lock, ts);
	p->o->write_unlock(p->lock, ts);
	p->o->write_unlock(p->lock, ts);
	free(ts);
}

static int run_case_here(const char *adapter, const char *name)
{
	static const int clean[] = { 0, 0, 2, 2 }, race[] = { 0, 1 }, race_rd[] = { 2, 2, 1 };
	static struct plant p; /* not on the stack: DRD skips stack variables by default */

	p.o = adapter_named(adapter);

	if (p.o == NULL)
		return 2;
	p.lock = alloc_lock(p.o->size);
	p.o->init(p.lock);
#if KLOCK_VALGRIND_ANNOTATE
	/* A seqlock reader's copy races with writers by design (atomics, which helgrind and
	 * DRD do not model); only what read_retry validates is used. TSan sees the atomics. */
	ANNOTATE_BENIGN_RACE_SIZED(&p.snapshot, sizeof(p.snapshot), "seqlock reader's copy");
#endif
	if (strcmp(name, "clean") == 0)
		run_roles(&p, clean, p.o->read_lock != NULL ? 4 : 2);
	else if (strcmp(name, "race") == 0)
		run_roles(&p, race, 2);
	else if (strcmp(name, "race_read_side") == 0)
		run_roles(&p, race_rd, 3);
	else if (strcmp(name, "try_failed") == 0)
		case_try_failed(&p);
	else if (strcmp(name, "inversion") == 0)
		case_inversion(&p);
	else if (strcmp(name, "double_unlock") == 0)
		case_double_unlock(&p);
	else
		return 2;
	p.o->destroy(p.lock);
	free(p.lock);
	return 0;
}

/* ---- the parent ---------------------------------------------------------------------------- */

enum tool { TOOL_TSAN, TOOL_HELGRIND, TOOL_DRD };

/* What each tool says, per case (NULL: the tool cannot check that case). */
struct tool_words {
	const char *name;
	const char *report;      /* the start of any report */
	const char *race, *inversion, *bad_unlock;
};

static const struct tool_words words[] = {
	[TOOL_TSAN] = { "tsan", "WARNING: ThreadSanitizer:",
			"WARNING: ThreadSanitizer: data race",
			"WARNING: ThreadSanitizer: lock-order-inversion",
			"WARNING: ThreadSanitizer: unlock of an unlocked mutex" },
	[TOOL_HELGRIND] = { "helgrind", "== Thread #", NULL, NULL, NULL },
	[TOOL_DRD] = { "drd", "ERROR SUMMARY", NULL, NULL, NULL },
};

struct parent {
	enum tool tool;
	const char *valgrind;
	const char *supp[MAX_SUPP];
	int nsupp;
	char self[4096];
};

static void exec_case(const struct parent *pa, const char *adapter, const char *name)
{
	char *argv[16];
	char supp[MAX_SUPP][4200], tool[32];
	int n = 0;

	if (pa->tool == TOOL_TSAN) {
		setenv("TSAN_OPTIONS", TSAN_OPTS, 1);
	} else {
		snprintf(tool, sizeof(tool), "--tool=%s", words[pa->tool].name);
		argv[n++] = (char *)pa->valgrind;
		argv[n++] = tool;
		argv[n++] = "--error-exitcode=66";
		argv[n++] = "-q";
		for (int i = 0; i < pa->nsupp; i++) {
			snprintf(supp[i], sizeof(supp[i]), "--suppressions=%s", pa->supp[i]);
			argv[n++] = supp[i];
		}
	}
	argv[n++] = (char *)pa->self;
	argv[n++] = CASE_ARG;
	argv[n++] = (char *)adapter;
	argv[n++] = (char *)name;
	argv[n] = NULL;
	execv(argv[0], argv);
	_exit(127);
}

static int run_child(const struct parent *pa, const char *adapter, const char *name, char *out)
{
	int fds[2], st;
	size_t len = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(fds) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], STDERR_FILENO);
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		exec_case(pa, adapter, name);
	}
	close(fds[1]);
	while ((n = read(fds[0], out + len, OUT_MAX - 1 - len)) > 0)
		len = len + (size_t)n < OUT_MAX - 1 ? len + (size_t)n : 0; /* keep the tail */
	out[len] = '\0';
	close(fds[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int count_of(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

/* The tool-specific phrases, filled in main() for valgrind tools (helgrind: races and lock
 * order; DRD: conflicting accesses, no lock order). */
static void tool_phrases(enum tool t, struct tool_words *w)
{
	*w = words[t];
	if (t == TOOL_HELGRIND) {
		w->race = "Possible data race";
		w->inversion = "lock order";
		w->bad_unlock = "unlocked a not-locked lock";
	} else if (t == TOOL_DRD) {
		w->race = "Conflicting ";
		w->bad_unlock = "not locked by calling thread";
	}
}

/* Runs one case; @expect NULL means "no report, exit 0". No report of another kind may
 * appear (misuse reports would mean the annotations are wrong). */
static bool check(const struct parent *pa, const struct lockops *o, const char *name,
		  const char *expect)
{
	static char out[OUT_MAX];
	struct tool_words w;
	int st = run_child(pa, o->name, name, out);
	bool ok;

	tool_phrases(pa->tool, &w);
	if (expect == NULL) {
		ok = st == 0 && count_of(out, w.race) == 0 && count_of(out, w.bad_unlock) == 0 &&
		     (w.inversion == NULL || count_of(out, w.inversion) == 0);
	} else {
		ok = st == REPORTED_EXIT && count_of(out, expect) > 0 &&
		     (expect == w.bad_unlock || count_of(out, w.bad_unlock) == 0);
		if (pa->tool == TOOL_TSAN)
			ok = ok && count_of(out, expect) == count_of(out, w.report);
	}
	printf("%s - %s %s %s: %s (exit %d)\n", ok ? "ok" : "not ok", w.name, o->name, name,
	       expect ? expect : "no report", st);
	if (!ok)
		printf("---- child output ----\n%s---- end ----\n", out);
	return ok;
}

static int run_all(const struct parent *pa)
{
	const struct lockops *list[64];
	size_t n = adapters(list, 64);
	struct tool_words w;
	int failed = 0, cases = 0;

	tool_phrases(pa->tool, &w);
	for (size_t i = 0; i < n; i++) {
		const struct lockops *o = list[i];
		bool rd = o->read_lock != NULL, tr = o->write_trylock != NULL;
		bool inv = w.inversion != NULL, bad = tolerates_bad_unlock(o);

		failed += !check(pa, o, "clean", NULL);
		failed += !check(pa, o, "race", w.race);
		if (rd && !(o->flags & LOCKOPS_READ_RETRY)) /* seqlock readers hold nothing */
			failed += !check(pa, o, "race_read_side", w.race);
		if (tr)
			failed += !check(pa, o, "try_failed", w.race);
		if (inv)
			failed += !check(pa, o, "inversion", w.inversion);
		if (bad)
			failed += !check(pa, o, "double_unlock", w.bad_unlock);
		cases += 2 + (rd && !(o->flags & LOCKOPS_READ_RETRY)) + tr + inv + bad;
	}
	printf("%s planted cases: %d run over %zu lock(s), %d failed\n", w.name, cases, n, failed);
	return failed == 0 && n > 0 ? 0 : 1;
}

static int parse(int argc, char **argv, struct parent *pa)
{
	ssize_t k = readlink("/proc/self/exe", pa->self, sizeof(pa->self) - 1);

	if (k <= 0)
		return 2;
	pa->self[k] = '\0';
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--tool") == 0 && strcmp(argv[i + 1], "helgrind") == 0)
			pa->tool = TOOL_HELGRIND;
		else if (strcmp(argv[i], "--tool") == 0 && strcmp(argv[i + 1], "drd") == 0)
			pa->tool = TOOL_DRD;
		else if (strcmp(argv[i], "--tool") == 0 && strcmp(argv[i + 1], "tsan") == 0)
			pa->tool = TOOL_TSAN;
		else if (strcmp(argv[i], "--valgrind") == 0)
			pa->valgrind = argv[i + 1];
		else if (strcmp(argv[i], "--supp") == 0 && pa->nsupp < MAX_SUPP)
			pa->supp[pa->nsupp++] = argv[i + 1];
		else
			return 2;
	}
	return pa->tool != TOOL_TSAN && pa->valgrind == NULL ? 2 : 0;
}

int main(int argc, char **argv)
{
	struct parent pa = { .tool = TOOL_TSAN };

	if (argc > 3 && strcmp(argv[1], CASE_ARG) == 0)
		return run_case_here(argv[2], argv[3]);
	if (parse(argc, argv, &pa) != 0) {
		fprintf(stderr, "usage: %s [--tool tsan|helgrind|drd] [--valgrind PATH] "
			"[--supp FILE]...\n", argv[0]);
		return 2;
	}
	return run_all(&pa);
}
