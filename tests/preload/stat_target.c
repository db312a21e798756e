/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/stat_target.c - a scripted pthread program for klock-stat's checks
 * (tests/preload/klock_stat_checks.py). Not linked with -rdynamic: its functions are static, so
 * only the executable's own symbol table can name them.
 *
 *   stat-target [--title] [--serve] [--malloc] [--exit] [--array] [--heap] [--late]
 *               [--holder] [--heap-static]
 *
 * Always: the main thread holds `target_lock` while a worker blocks on it in
 * target_wait_static() (the main thread waits until the worker sleeps in the kernel, then
 * lets it in): one contended acquisition charged to target_wait_static.
 *   --malloc  workers then churn malloc/free in target_alloc_loop(); with an allocator
 *             that guards its arenas with pthread mutexes (jemalloc, thread cache off,
 *             one arena) those mutexes are contended from inside the allocator.
 *   --exit    (with tests/preload/stat_exit_shim.c preloaded) then a worker exits while the main
 *             thread holds the shim's mutex: the worker's wait happens in the shim's TSD
 *             destructor, on a stack with no program frame (libc's thread exit).
 *   --title   then rewrites argv[] in place, as setproctitle() does.
 *   --array   then CHURN_THREADS threads lock random elements of target_locks[64] (and,
 *             every so often, the mutex inside target_obj) in target_array_loop().
 *   --heap    the same on 64 mutexes calloc()ed and initialised in target_heap_init().
 *   --heap-static  the same on 64 mutexes calloc()ed and never initialised by a call (zero
 *             fill is PTHREAD_MUTEX_INITIALIZER), each first locked in target_first_use().
 *   --holder  then the main thread takes target_holder_lock in target_hold_site() after
 *             waiting for a first holder (so that lockstat sees that acquisition: only
 *             contended ones are recorded in default builds) and holds it while a worker
 *             waits in target_holder_wait(): that wait's holder is target_hold_site.
 *   --late    (with klock-stat -d) then waits until the window closed (its snapshot reached
 *             KLOCK_LOCKSTAT_FD), and contends target_late_lock in target_after_window().
 *   --serve   then prints "ready <pid>" and waits for a signal (SIGTERM ends it, as a
 *             server that never installed a handler).
 *   --_exit, --_Exit  then leaves by _exit(0) / _Exit(0) (no atexit handlers) while a
 *             thread still runs, blocked for ever holding target_parked_lock.
 * Without --serve it prints "target: done" and returns from main().
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Polls (1 ms apart) for the worker to fall asleep before giving up. */
#define POLL_MAX 20000
/* Threads and rounds of the malloc churn. */
#define CHURN_THREADS 8
#define CHURN_ROUNDS 20000
/* Sizes the churn allocates: small enough for one arena bin. */
#define CHURN_SIZE 48
/* Longest /proc/.../stat line read. */
#define STAT_LINE 512

static pthread_mutex_t target_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t target_late_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t *contended = &target_lock;
static pthread_mutex_t target_holder_lock = PTHREAD_MUTEX_INITIALIZER;
/* --holder: the first holder has the lock; the main thread is about to lock it. */
static atomic_int primer_locked, main_locking;
static atomic_long main_tid;
/* Static locks named from the symbol table: an array, and a lock inside an object. */
#define ARRAY_LOCKS 64
#define ARRAY_ROUNDS 4000
/* Work inside an array lock's critical section, so that threads collide there. */
#define ARRAY_HOLD 400
static pthread_mutex_t target_locks[ARRAY_LOCKS];
static pthread_mutex_t *array_in_use = target_locks;
static struct {
	long hits;
	pthread_mutex_t lock;
} target_obj = { 0, PTHREAD_MUTEX_INITIALIZER };
static atomic_long worker_tid;

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Whether thread @tid sleeps in the kernel (state S in /proc/self/task/<tid>/stat). */
static int thread_sleeps(long tid)
{
	char path[64], line[STAT_LINE], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/stat", tid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	p = p != NULL ? strrchr(line, ')') : NULL;
	return p != NULL && p[1] == ' ' && p[2] == 'S';
}

static __attribute__((noinline)) void target_wait_static(void)
{
	atomic_store(&worker_tid, (long)syscall(SYS_gettid));
	pthread_mutex_lock(&target_lock);
	pthread_mutex_unlock(&target_lock);
}

static __attribute__((noinline)) void target_after_window(void)
{
	atomic_store(&worker_tid, (long)syscall(SYS_gettid));
	pthread_mutex_lock(&target_late_lock);
	pthread_mutex_unlock(&target_late_lock);
}

static void *waiter(void *arg)
{
	(void)arg;
	if (contended == &target_lock)
		target_wait_static();
	else
		target_after_window();
	return NULL;
}

/* Waits (bounded) until the report descriptor klock-stat passed holds a record. */
static int wait_window_closed(void)
{
	const char *v = getenv("KLOCK_LOCKSTAT_FD");
	struct stat st;

	for (int polls = 0; v != NULL && polls < POLL_MAX; polls++) {
		if (fstat(atoi(v), &st) == 0 && st.st_size > 0)
			return 0;
		sleep_ms(1);
	}
	return 1;
}

/* One contended acquisition of target_lock in target_wait_static(). */
static int contend_once(void)
{
	pthread_t t;
	int polls = 0;

	atomic_store(&worker_tid, 0);
	pthread_mutex_lock(contended);
	if (pthread_create(&t, NULL, waiter, NULL) != 0)
		return 1;
	while ((atomic_load(&worker_tid) == 0 || !thread_sleeps(atomic_load(&worker_tid))) &&
	       polls++ < POLL_MAX)
		sleep_ms(1);
	sleep_ms(2);
	pthread_mutex_unlock(contended);
	pthread_join(t, NULL);
	return polls < POLL_MAX ? 0 : 1;
}

/* Polls until thread @tid sleeps in the kernel (after *@armed is set); 0, or 1 on timeout. */
static int wait_sleeping(atomic_long *tid, atomic_int *armed)
{
	int polls = 0;

	while ((atomic_load(tid) == 0 || (armed != NULL && !atomic_load(armed)) ||
		!thread_sleeps(atomic_load(tid))) && polls++ < POLL_MAX)
		sleep_ms(1);
	sleep_ms(2);
	return polls < POLL_MAX ? 0 : 1;
}

/* --holder: the first holder, uncontended; lets the main thread in once it sleeps on it. */
static void *holder_primer(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&target_holder_lock);
	atomic_store(&primer_locked, 1);
	wait_sleeping(&main_tid, &main_locking);
	pthread_mutex_unlock(&target_holder_lock);
	return NULL;
}

static __attribute__((noinline)) void target_holder_wait(void)
{
	atomic_store(&worker_tid, (long)syscall(SYS_gettid));
	pthread_mutex_lock(&target_holder_lock);
	pthread_mutex_unlock(&target_holder_lock);
}

static void *holder_waiter(void *arg)
{
	(void)arg;
	target_holder_wait();
	return NULL;
}

/* Takes target_holder_lock (contended: the primer has it) and holds it until a worker
 * sleeps on it: the worker's wait is charged to this function as the holder's site. */
static __attribute__((noinline)) int target_hold_site(void)
{
	pthread_t t;
	int err;

	atomic_store(&main_locking, 1);
	pthread_mutex_lock(&target_holder_lock);
	atomic_store(&worker_tid, 0);
	if (pthread_create(&t, NULL, holder_waiter, NULL) != 0) {
		pthread_mutex_unlock(&target_holder_lock);
		return 1;
	}
	err = wait_sleeping(&worker_tid, NULL);
	pthread_mutex_unlock(&target_holder_lock);
	pthread_join(t, NULL);
	return err;
}

static int contend_holder(void)
{
	pthread_t p;
	int polls = 0, err;

	atomic_store(&main_tid, (long)syscall(SYS_gettid));
	if (pthread_create(&p, NULL, holder_primer, NULL) != 0)
		return 1;
	while (!atomic_load(&primer_locked) && polls++ < POLL_MAX)
		sleep_ms(1);
	err = target_hold_site();
	pthread_join(p, NULL);
	return err || polls >= POLL_MAX;
}

static __attribute__((noinline)) void target_alloc_loop(void)
{
	void *keep[8] = { 0 };

	for (int i = 0; i < CHURN_ROUNDS; i++) {
		free(keep[i & 7]);
		keep[i & 7] = malloc(CHURN_SIZE + (size_t)(i & 15));
	}
	for (int i = 0; i < 8; i++)
		free(keep[i]);
}

/* jemalloc: no thread cache, every thread on arena 0, so that its mutexes meet. */
static void *churn(void *arg)
{
	int (*mallctl)(const char *, void *, size_t *, void *, size_t);
	void *sym = dlsym(RTLD_DEFAULT, "mallctl");
	_Bool off = 0;
	unsigned arena = 0;

	(void)arg;
	memcpy(&mallctl, &sym, sizeof(sym));   /* object to function pointer, as POSIX means */
	if (mallctl != NULL) {
		mallctl("thread.tcache.enabled", NULL, NULL, &off, sizeof(off));
		mallctl("thread.arena", NULL, NULL, &arena, sizeof(arena));
	}
	target_alloc_loop();
	return NULL;
}

static __attribute__((noinline)) void target_array_loop(unsigned seed)
{
	for (int i = 0; i < ARRAY_ROUNDS; i++) {
		pthread_mutex_t *m;

		seed = seed * 1103515245u + 12345u;
		m = (i & 63) == 0 ? &target_obj.lock : &array_in_use[(seed >> 16) % ARRAY_LOCKS];
		pthread_mutex_lock(m);
		for (volatile int k = 0; k < ARRAY_HOLD; k++)
			;
		target_obj.hits += m == &target_obj.lock;
		pthread_mutex_unlock(m);
	}
}

static __attribute__((noinline)) pthread_mutex_t *target_heap_init(void)
{
	pthread_mutex_t *m = calloc(ARRAY_LOCKS, sizeof(*m));

	for (int i = 0; m != NULL && i < ARRAY_LOCKS; i++)
		pthread_mutex_init(&m[i], NULL);
	return m;
}

/* The first lock call on each of the ARRAY_LOCKS zeroed mutexes at @m: where the
 * interposer adopts them. */
static __attribute__((noinline)) void target_first_use(pthread_mutex_t *m)
{
	for (int i = 0; i < ARRAY_LOCKS; i++) {
		pthread_mutex_lock(&m[i]);
		pthread_mutex_unlock(&m[i]);
	}
}

/* --heap-static: heap mutexes set up by calloc() alone, no pthread_mutex_init(). */
static pthread_mutex_t *target_heap_static(void)
{
	pthread_mutex_t *m = calloc(ARRAY_LOCKS, sizeof(*m));

	if (m != NULL)
		target_first_use(m);
	return m;
}

static void *array_worker(void *arg)
{
	target_array_loop((unsigned)(uintptr_t)arg);
	return NULL;
}

/* The shim's entry points (tests/preload/stat_exit_shim.c), looked up at run time. */
struct exit_shim {
	void (*hold)(int on);
	void (*arm)(void);
};
static struct exit_shim exit_shim;

static void *exit_worker(void *arg)
{
	(void)arg;
	atomic_store(&worker_tid, (long)syscall(SYS_gettid));
	exit_shim.arm();
	return NULL;   /* the shim's destructor now blocks on its mutex */
}

/* A wait with no program frame on its stack: the worker blocks in the shim's TSD
 * destructor at thread exit while the main thread holds the shim's mutex. */
static int contend_at_exit(void)
{
	void *hold = dlsym(RTLD_DEFAULT, "shim_exit_hold"), *arm = dlsym(RTLD_DEFAULT,
									  "shim_exit_arm");
	pthread_t t;
	int polls = 0;

	if (hold == NULL || arm == NULL) {
		fputs("target: --exit needs libstat-exit-shim preloaded\n", stderr);
		return 1;
	}
	memcpy(&exit_shim.hold, &hold, sizeof(hold));
	memcpy(&exit_shim.arm, &arm, sizeof(arm));
	atomic_store(&worker_tid, 0);
	exit_shim.hold(1);
	if (pthread_create(&t, NULL, exit_worker, NULL) != 0)
		return 1;
	while ((atomic_load(&worker_tid) == 0 || !thread_sleeps(atomic_load(&worker_tid))) &&
	       polls++ < POLL_MAX)
		sleep_ms(1);
	sleep_ms(2);
	exit_shim.hold(0);
	pthread_join(t, NULL);
	return polls < POLL_MAX ? 0 : 1;
}

static int run_threads(void *(*fn)(void *))
{
	pthread_t t[CHURN_THREADS];

	for (int i = 0; i < CHURN_THREADS; i++)
		if (pthread_create(&t[i], NULL, fn, (void *)(uintptr_t)(i + 1)) != 0)
			return 1;
	for (int i = 0; i < CHURN_THREADS; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/* setproctitle(): the argv strings are overwritten in place. */
static void retitle(int argc, char **argv)
{
	char *end = argv[argc - 1] + strlen(argv[argc - 1]);

	memset(argv[0], 0, (size_t)(end - argv[0]));
	snprintf(argv[0], (size_t)(end - argv[0]) + 1, "x: %s", "retitled");
}

static pthread_mutex_t target_parked_lock = PTHREAD_MUTEX_INITIALIZER;

/* Holds target_parked_lock until the process ends. */
static void *parked(void *arg)
{
	pthread_mutex_lock(&target_parked_lock);
	atomic_store((_Atomic int *)arg, 1);
	for (;;)
		pause();
	return NULL;
}

/* Leaves by _exit() (@upper: _Exit()) while a thread holds a lock, skipping atexit. */
static int leave_fast(int upper)
{
	static _Atomic int holding;
	pthread_t t;

	if (pthread_create(&t, NULL, parked, &holding) != 0)
		return 1;
	while (!atomic_load(&holding))
		sched_yield();
	puts("target: leaving");
	fflush(stdout);
	if (upper)
		_Exit(0);
	_exit(0);
}

int main(int argc, char **argv)
{
	int title = 0, serve = 0, alloc = 0, array = 0, heap = 0, late = 0, at_exit = 0;
	int holder = 0, heap_static = 0;

	for (int i = 1; i < argc; i++) {
		title |= strcmp(argv[i], "--title") == 0;
		serve |= strcmp(argv[i], "--serve") == 0;
		alloc |= strcmp(argv[i], "--malloc") == 0;
		array |= strcmp(argv[i], "--array") == 0;
		heap |= strcmp(argv[i], "--heap") == 0;
		late |= strcmp(argv[i], "--late") == 0;
		at_exit |= strcmp(argv[i], "--exit") == 0;
		holder |= strcmp(argv[i], "--holder") == 0;
		heap_static |= strcmp(argv[i], "--heap-static") == 0;
	}
	for (int i = 0; i < ARRAY_LOCKS; i++)
		pthread_mutex_init(&target_locks[i], NULL);
	if (contend_once() != 0) {
		fputs("target: the worker never slept on target_lock\n", stderr);
		return 1;
	}
	if (alloc && run_threads(churn) != 0)
		return 1;
	if (holder && contend_holder() != 0) {
		fputs("target: target_holder_lock was not contended as scripted\n", stderr);
		return 1;
	}
	if (at_exit && contend_at_exit() != 0)
		return 1;
	if (heap && (array_in_use = target_heap_init()) == NULL)
		return 1;
	if (heap_static && (array_in_use = target_heap_static()) == NULL)
		return 1;
	if ((array || heap || heap_static) && run_threads(array_worker) != 0)
		return 1;
	if (late) {
		if (wait_window_closed() != 0)
			return 1;
		contended = &target_late_lock;
		if (contend_once() != 0)
			return 1;
	}
	if (title)
		retitle(argc, argv);
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--_exit") == 0 || strcmp(argv[i], "--_Exit") == 0)
			return leave_fast(argv[i][3] == 'E');
	if (serve) {
		printf("ready %ld\n", (long)getpid());
		fflush(stdout);
		for (;;)
			pause();
	}
	puts("target: done");
	return 0;
}
