/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/kl_internal.h - private to libklock: compiler shims, the substrate's internal
 * interfaces (time, environment, reporting), and the naming rule.
 *
 * Naming: public symbols are kl_* (marked KL_API, exported); internal ones are kli_* and
 * stay hidden (-fvisibility=hidden). tests/ link the static library and may call kli_*.
 */
#ifndef KL_INTERNAL_H
#define KL_INTERNAL_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <klock/config.h>
#include <klock/compiler.h>
#include "kl_arch.h"

#define KL_NOINLINE __attribute__((noinline))
#define KL_ALWAYS_INLINE inline __attribute__((always_inline))
#define KL_COLD __attribute__((cold))
#define kl_likely(x) __builtin_expect(!!(x), 1)
#define kl_unlikely(x) __builtin_expect(!!(x), 0)
/* Align (and so pad) a hot object to its own false-sharing unit. */
#define KL_PADDED KL_ALIGNED(KL_ARCH_PAD)
#define KL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Compiler-only barrier: the light half of an asymmetric pair, or a loop re-read. */
#define kli_barrier() atomic_signal_fence(memory_order_seq_cst)

#define KLI_NSEC_PER_SEC 1000000000ull

/* ---- library start-up (locks/init.c) ---------------------------------------------- */

/* Runs the one-time initialisation (environment, rseq probe, membarrier registration).
 * Called from the library constructor and, for static links whose constructor has not
 * run yet, from first use. Idempotent and thread-safe. */
void kli_init(void);

/* True when the environment variable is set to a value other than "" or "0". Only
 * meaningful for the KLOCK_* switches listed in README.md. */
bool kli_env_flag(const char *name);

/* ---- time (locks/substrate/clock.c) ---------------------------------------------------------- */

/* CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t kli_now_ns(void);

/* A timespec that kl_* timed calls accept: tv_sec >= 0 and tv_nsec in [0, 1e9). */
static inline bool kli_timespec_valid(const struct timespec *ts)
{
	return ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < (long)KLI_NSEC_PER_SEC;
}

/* @ts (valid: see above) in nanoseconds, saturated: a deadline past 2^64 ns (year 2554;
 * any tv_sec up to LONG_MAX is a valid timespec) reads UINT64_MAX, "never", instead of
 * wrapping round to a time that has long passed. */
static inline uint64_t kli_timespec_ns(const struct timespec *ts)
{
	uint64_t sec = (uint64_t)ts->tv_sec;

	if (kl_unlikely(sec >= UINT64_MAX / KLI_NSEC_PER_SEC))
		return UINT64_MAX;
	return sec * KLI_NSEC_PER_SEC + (uint64_t)ts->tv_nsec;
}

/* True when the absolute CLOCK_MONOTONIC deadline (may be NULL = never) has passed. */
bool kli_deadline_passed(const struct timespec *abstime);

/* The absolute CLOCK_MONOTONIC deadline @ns from now. */
void kli_deadline_after(struct timespec *abstime, uint64_t ns);

/* kl_wait() with an absolute CLOCK_REALTIME deadline (not NULL) that follows steps of the
 * realtime clock: ETIMEDOUT only once CLOCK_REALTIME has reached @abstime. The futex
 * backend arms a realtime kernel timer (FUTEX_CLOCK_REALTIME); the parking backend
 * converts to CLOCK_MONOTONIC and re-converts after each timeout, so a forward step is
 * noticed only at the converted deadline (wait_parking.c). For the interposer's POSIX
 * timed waits (libklock-preload always uses the futex backend). */
int kli_wait_realtime(const _Atomic uint32_t *addr, uint32_t expected,
		      const struct timespec *abstime);

/* kl_arch_cycles() <-> nanoseconds, calibrated once at init (identity where the arch
 * counter already counts nanoseconds). Used for time-based spin budgets. */
uint64_t kli_ns_to_cycles(uint64_t ns);
uint64_t kli_cycles_to_ns(uint64_t cycles);

/* A window's end kept in 16 bits (kl_rwlock's bias_at, kl_rmlock's fenced_until): the end,
 * on a clock of 256 ns units taken from any monotonic nanosecond count (it wraps every
 * 16.8 ms; only differences matter); 0 = no window. An end more than KLI_WIN16_MAX units
 * ahead is a stale value the clock wrapped past: that window is over. */
#define KLI_WIN16_SHIFT 8
#define KLI_WIN16_MAX 0x7fffu

static inline uint16_t kli_win16_clock(uint64_t now_ns)
{
	return (uint16_t)(now_ns >> KLI_WIN16_SHIFT);
}

/* The end of a window of @len_ns that starts at @now_ns: never 0, at most about 8.4 ms
 * ahead (KLI_WIN16_MAX units, so that a capped window still reads as open). */
static inline uint16_t kli_win16_end(uint64_t now_ns, uint64_t len_ns)
{
	uint64_t units = len_ns >> KLI_WIN16_SHIFT;
	uint16_t at;

	if (units > KLI_WIN16_MAX - 1u)
		units = KLI_WIN16_MAX - 1u;
	at = (uint16_t)(kli_win16_clock(now_ns) + units + 1u);
	return at != 0 ? at : 1u;
}

/* Is the window that ends at @at still open at @now_ns? */
static inline bool kli_win16_open(uint16_t at, uint64_t now_ns)
{
	uint16_t left = (uint16_t)(at - kli_win16_clock(now_ns));

	return at != 0 && left != 0 && left <= KLI_WIN16_MAX;
}

/* ---- reporting (locks/instruments/report.c) ---------------------------------------------------- */

/*
 * Report a contract violation found by a debug build (-Ddebug_locks) or an instrument:
 *   "klock: <what>: <kind> <name or address> from <caller symbol+off> [(<detail>)]"
 * Then warns or aborts: KLOCK_ON_ERROR=abort|warn (default abort in debug builds, so tests
 * that plant errors set warn). Thread-safe; never takes a klock lock.
 */
void kli_report(const char *what, const char *kind, const void *lock, const void *caller,
		const char *detail);

/* kli_report()'s message alone, whatever KLOCK_ON_ERROR says (libklock-preload's "warn
 * once, behave as glibc" answers to NORMAL-mutex and spinlock misuse). */
void kli_report_msg(const char *what, const char *kind, const void *lock, const void *caller,
		    const char *detail);

/* Set by libklock-preload: prints its per-lock misuse counts at the end of lockstat's text
 * report (NULL elsewhere). */
typedef void (*kli_misuse_print_fn)(void *file);
extern _Atomic(kli_misuse_print_fn) kli_misuse_print;

/* Format "sym+0xoff (object)" for a code address into buf (dladdr, then .symtab). */
void kli_symbolize(const void *addr, char *buf, size_t len);

/* The function containing @addr from its object's ELF .symtab (static functions, an
 * executable's own functions: what dladdr cannot name). Name into @name, offset into
 * *@off. False if the object is stripped or not ELF. Report-time only (locks/instruments/symtab.c). */
bool kli_symtab_lookup(const void *addr, char *name, size_t len, uintptr_t *off);

/* The data object (STT_OBJECT) containing @addr - a lock in static storage: its name,
 * the offset of @addr in it and its size. False if none is known. Report-time only. */
bool kli_symtab_data(const void *addr, char *name, size_t len, uintptr_t *off, size_t *size);

/* Whether @addr lies in a loaded object's executable segment. Report-time only. */
bool kli_symtab_is_code(const void *addr);

/* Reads the executable's path (/proc/self/exe) once, for lookups after argv[0] was
 * rewritten or privileges were dropped (lockstat start). */
void kli_symtab_init(void);

/* The file of the object holding @addr: the executable's real path for the main program
 * (dladdr's @dli_fname is argv[0] there), else @dli_fname. Report-time only. */
const char *kli_symtab_object(const void *addr, const char *dli_fname);

/* Collects the code ranges whose call sites are not the program's (allocators, klock's
 * own shared object, KLOCK_LOCKSTAT_SKIP). Lockstat start; not on any lock path. */
void kli_site_skip_init(void);

/* @site, or when it lies in a skipped object, the first caller outside them (one stack
 * walk). Slow paths only (locks/instruments/symtab.c). */
const void *kli_site_program(const void *site);

/* The call stack from @site outwards: stores at most @max return addresses into @pcs, the
 * first being @site itself (found in a walk of the calling thread's stack), and returns
 * how many; 0 when @site is not on the stack or no unwinder is built in. No allocation;
 * slow paths only (locks/instruments/symtab.c). */
unsigned kli_stack_from(const void *site, const void **pcs, unsigned max);

/* Number of reports made so far (tests count them). */
unsigned long kli_report_count(void);

/* ---- call sites seen through an interposer (libklock-preload) ------------------------ */

/*
 * Reports and lockstat key events by the call site a lock's exported function saw
 * (KLI_SITE(): the return address into its caller). Under libklock-preload that caller is
 * the interposer, so every pthread_mutex_lock() in a program would look like one site.
 * The preload's own copy of the library is compiled with KLOCK_PRELOAD=1: each interposed
 * pthread function first stores ITS caller (the program's call site) in the calling
 * thread's kli_site_override, and the consumers (lockstat, reports, witness) name that
 * site instead. Consumers only: no lock and no fast path reads it, and libklock itself
 * (KLOCK_PRELOAD=0) compiles kli_site() to the identity.
 */
#ifndef KLOCK_PRELOAD
#define KLOCK_PRELOAD 0
#endif
#if KLOCK_PRELOAD
extern __thread const void *kli_site_override __attribute__((tls_model("initial-exec")));

static inline const void *kli_site(const void *site)
{
	const void *o = kli_site_override;

	return o != NULL ? o : site;
}
#else
static inline const void *kli_site(const void *site)
{
	return site;
}
#endif

#if KLOCK_PRELOAD
/* libklock-preload (preload/misuse.c): a NORMAL pthread mutex's misuse, answered as glibc
 * does. The owner relocked @lock: reported (KLOCK_ON_ERROR), then blocks for ever - POSIX's
 * deadlock; never returns. */
void kli_preload_relock(const void *lock, const void *site) __attribute__((noreturn));
/* An unlock of @lock by a thread that does not hold it (@foreign: another does): reported;
 * true when the caller must release it all the same (glibc releases a foreign hold). */
bool kli_preload_unlock_misuse(const void *lock, bool foreign, const void *site);
#endif

/* ---- test points (fault injection, locks/instruments/report.c) --------------------------------- */

/* A test sets this to widen a race window at a named place on a slow path (it may sleep
 * there); NULL otherwise. Read with one relaxed load and a predicted branch, on slow paths
 * only. Points: "rwlock.read_sleep.checked" (a counted reader, after its grant check,
 * before its last look at the word); "rwlock.read_sleep.woken" (a counted reader back
 * from its wait, before it marks the futex value again); "rwlock.write_sleep.counted" (a writer counted
 * asleep, before it reads its futex word and takes its last look); "rmlock.rearm.moved" (a
 * reader that just moved a kl_rmlock one step up, from unbiased or fenced). */
typedef void (*kli_test_hook_fn)(const char *point);
extern _Atomic(kli_test_hook_fn) kli_test_hook;

/* kl_rwlock: the shortest time between two hand-offs to sleeping readers (rwlock.c,
 * "Hand-off"), in ns; tests set it (0: every unlock hands off; huge: only the first). */
extern _Atomic uint64_t kli_rw_handoff_every_ns;
/* kl_rwlock: after a revocation of the reader bias that took C ns, readers stay unbiased
 * for this many C (rwlock_bias.c, RW_BIAS_INHIBIT_MULT, or KLOCK_RW_BIAS); tests may set it
 * (0xfffffffe: the bias off; 0xffffffff: read KLOCK_RW_BIAS at the next use). */
extern _Atomic unsigned kli_rw_bias_inhibit_mult;

static inline void kli_test_point(const char *point)
{
	kli_test_hook_fn f = atomic_load_explicit(&kli_test_hook, memory_order_relaxed);

	if (kl_unlikely(f != NULL))
		f(point);
}

#endif /* KL_INTERNAL_H */
