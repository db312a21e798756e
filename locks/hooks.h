/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/hooks.h - the instrumentation seam. Every primitive reports the same few events
 * here and nowhere else; lockstat, witness, ThreadSanitizer and valgrind are consumers.
 * No primitive includes an instrument's header or tests an instrument's build option.
 *
 * Two kinds of events:
 *
 * FAST-PATH events (every acquisition and release) - compiled to nothing unless an
 * instrument that needs every acquisition is built in (KLI_HOOKS_FAST: witness, TSan,
 * valgrind annotations, lockstat hold times). In a default build the uncontended fast
 * path of every lock is byte-for-byte what it would be without this file.
 *   kli_hook_acquire(lock, kind, flags, site)   before trying   (witness order check,
 *                                               TSan pre_lock)
 *   kli_hook_acquired(lock, kind, flags, site)  after success, or after a failed try/timed
 *                                               attempt with KLI_HF_FAILED (TSan post_lock,
 *                                               witness push, valgrind ACQUIRED)
 *   kli_hook_release(lock, kind, flags, site)   before releasing (witness pop, TSan
 *                                               pre_unlock, valgrind RELEASED)
 *   kli_hook_released(lock, kind, flags)        after releasing (TSan post_unlock)
 *
 * SLOW-PATH events (only once the fast path failed) - compiled unless -Dlockstat=false
 * (KLOCK_LOCKSTAT 0: empty); with lockstat compiled in but not recording, each costs one
 * load of a read-mostly flag and a predicted branch. A slow path brackets
 * its episode with a struct kli_wait on its stack:
 *   kli_wait_begin(&w, lock, kind, flags, site)   the fast path failed (lockstat: start
 *                             the wait clock; probe contention_begin)
 *   kli_wait_spin(&w)         entering a spin phase
 *   kli_wait_sleep(&w)        about to sleep (park / kl_wait)
 *   kli_wait_handoff(&w)      the lock was handed to this waiter: it woke up owning it
 *                             (probe handoff; kli_wait_handover_asleep() for FIFO locks
 *                             also counts it in the process's events)
 *   kli_wait_end(&w, lock, kind, flags, site)   acquired (or gave up: KLI_HF_FAILED);
 *                             lockstat records one contended acquisition with its spin
 *                             and sleep time, keyed by (lock, site); probe contention_end
 *
 * POLICY events - compiled like the slow-path events, reported only from a lock's rare
 * paths (never an uncontended acquisition's):
 *   kli_hook_revoke_begin(lock, kind)   a writer starts revoking the readers' bias
 *                             (kl_rmlock, kl_rwlock; probe revoke_begin)
 *   kli_hook_revoke_end(lock, kind, cost_ns, result)   it ended (0, or the errno a writer
 *                             that gave up returns; probe revoke_end only)
 *   kli_hook_revoked(lock, kind, cost_ns, site)   a read-mostly lock's writer revoked the
 *                             readers' bias (kl_rmlock: membarrier + scan + drain, under the
 *                             write hold); cost_ns is how long that took. lockstat counts
 *                             it in the (lock, site) write row; also revoke_end.
 *   kli_hook_rearmed(lock, kind, unbiased_ns)   a reader re-armed the bias (kl_rmlock: the
 *                             winning CAS UNBIASED -> 0, once per window); unbiased_ns is
 *                             the stretch it closes (revocation to re-arm). The reader has
 *                             no call site of its own: lockstat adds it to the lock's row
 *                             with a NULL site. A stretch still open is not reported.
 *
 * LIFETIME events - always compiled: kli_hook_created(lock, kind, flags) in init (and on
 * first use of a statically initialised lock, where the primitive can tell), and
 * kli_hook_destroyed(lock, kind) in destroy (also forgets the lock's name). A lock built
 * from member locks (kl_hashlock's stripes, each a kl_mutex or kl_ticket that reports its
 * own events) announces the members' address range with kli_hook_group(&node) after
 * creating them and kli_hook_ungroup(&node) before destroying them (names_impl.h): reports
 * then name a member as "stripe i of <the table>", and lockstat folds the members' rows
 * into the owner's. The members' events are the only events: nothing is counted twice.
 *
 * PROBES. The slow-path and policy events also fire the static probes of locks/probes.h
 * (provider klock: contention_begin/end, handoff, revoke_begin/end, lock_name), unless
 * built with -Dprobes=disabled. They are compiled in whether or not lockstat is, and cost
 * a nop each on the slow path: no fast path carries one.
 *
 * `site` is the caller of the public API function: pass KLI_SITE() (the return address)
 * from the exported function (the fast path) down to the slow path. It keys lockstat's
 * rows and names the culprit in witness and debug reports. Write KLI_SITE() at each use -
 * in the slow-path call's arguments and in each hook call - not into a variable at the top
 * of the function: the compiler will not sink that stack load past the fast path's atomic,
 * so the uncontended path would execute one more instruction whenever a slow path uses
 * the site (measured: tests/lockstat_callgrind.sh, docs/lockstat.md).
 */
#ifndef KL_HOOKS_H
#define KL_HOOKS_H

#include "kl_internal.h"
#include "names_impl.h"
#include "events.h"
#include "probes.h"

/* The call site for hooks: the return address into the caller of the function that
 * expands it (use it only in the exported entry point; evaluate it where it is used). */
#define KLI_SITE() ((const void *)__builtin_return_address(0))

/* What kind of lock an event is about (report sections, witness rules). */
enum kli_kind {
	KLI_KIND_MUTEX,
	KLI_KIND_RWLOCK,
	KLI_KIND_RMLOCK,
	KLI_KIND_PCPU_RWSEM,
	KLI_KIND_SEQLOCK,
	KLI_KIND_TICKET,
	KLI_KIND_MCS,
	KLI_KIND_HASHLOCK,
	KLI_KIND_COND,
	KLI_KIND_COUNT
};

/* Event flags. */
#define KLI_HF_READ (1u << 0)     /* the shared (read) side */
#define KLI_HF_TRY (1u << 1)      /* a try or timed attempt: may fail */
#define KLI_HF_FAILED (1u << 2)   /* the attempt failed; nothing was acquired */
#define KLI_HF_SPIN (1u << 3)     /* the lock never sleeps (a spinlock) */
#define KLI_HF_RECURSE (1u << 4)  /* a permitted recursive acquisition; in created: the
                                   * lock permits recursion (witness stays quiet) */
#define KLI_HF_STATIC (1u << 5)   /* created: statically initialised, seen on first use */

/* The probes' flag bits are these seam bits (a stable interface: locks/probes.h). */
_Static_assert(KLI_PROBE_F_READ == KLI_HF_READ && KLI_PROBE_F_TRY == KLI_HF_TRY &&
	       KLI_PROBE_F_SPIN == KLI_HF_SPIN, "probe flag bits are the seam's");
/* ... and the probes' kind numbers are enum kli_kind's (docs/lockstat.md lists them). */
_Static_assert(KLI_KIND_MUTEX == 0 && KLI_KIND_RWLOCK == 1 && KLI_KIND_RMLOCK == 2 &&
	       KLI_KIND_PCPU_RWSEM == 3 && KLI_KIND_SEQLOCK == 4 && KLI_KIND_TICKET == 5 &&
	       KLI_KIND_MCS == 6 && KLI_KIND_HASHLOCK == 7 && KLI_KIND_COND == 8,
	       "probe kind numbers are stable");

/* Kind names as reports print them ("mutex", "rwlock", ...). */
const char *kli_kind_name(enum kli_kind kind);

/* Build-time instrument selection (klock/config.h). */
#define KLI_HOOKS_FAST (KLOCK_WITNESS || KLOCK_TSAN || KLOCK_VALGRIND_ANNOTATE || \
			KLOCK_LOCKSTAT_HOLD)

/* ---- consumers' entry points (each compiled only with its instrument) ----------- */
#if KLI_HOOKS_FAST
void kli_instr_acquire(const void *lock, enum kli_kind kind, unsigned flags, const void *site);
void kli_instr_acquired(const void *lock, enum kli_kind kind, unsigned flags, const void *site);
void kli_instr_release(const void *lock, enum kli_kind kind, unsigned flags, const void *site);
void kli_instr_released(const void *lock, enum kli_kind kind, unsigned flags);
#endif
void kli_instr_created(const void *lock, enum kli_kind kind, unsigned flags);
#if KLOCK_WITNESS
void kli_instr_nest_ordered(void);
#endif
void kli_instr_destroyed(const void *lock, enum kli_kind kind);

/* ---- fast-path events ------------------------------------------------------------ */
static KL_ALWAYS_INLINE void kli_hook_acquire(const void *lock, enum kli_kind kind,
					      unsigned flags, const void *site)
{
#if KLI_HOOKS_FAST
	kli_instr_acquire(lock, kind, flags, site);
#else
	(void)lock, (void)kind, (void)flags, (void)site;
#endif
}

static KL_ALWAYS_INLINE void kli_hook_acquired(const void *lock, enum kli_kind kind,
					       unsigned flags, const void *site)
{
#if KLI_HOOKS_FAST
	kli_instr_acquired(lock, kind, flags, site);
#else
	(void)lock, (void)kind, (void)flags, (void)site;
#endif
}

static KL_ALWAYS_INLINE void kli_hook_release(const void *lock, enum kli_kind kind,
					      unsigned flags, const void *site)
{
#if KLI_HOOKS_FAST
	kli_instr_release(lock, kind, flags, site);
#else
	(void)lock, (void)kind, (void)flags, (void)site;
#endif
}

static KL_ALWAYS_INLINE void kli_hook_released(const void *lock, enum kli_kind kind,
					       unsigned flags)
{
#if KLI_HOOKS_FAST
	kli_instr_released(lock, kind, flags);
#else
	(void)lock, (void)kind, (void)flags;
#endif
}

/* ---- lifetime events --------------------------------------------------------------- */
static inline void kli_hook_created(const void *lock, enum kli_kind kind, unsigned flags)
{
	kli_instr_created(lock, kind, flags);
}

static inline void kli_hook_destroyed(const void *lock, enum kli_kind kind)
{
	kli_instr_destroyed(lock, kind);
}

/* @g (owner, kind, member range, member noun filled in; storage owned by the lock) */
static inline void kli_hook_group(struct kli_lock_group *g)
{
	kli_lock_group_add(g);
}

static inline void kli_hook_ungroup(struct kli_lock_group *g)
{
	kli_lock_group_remove(g);
}

/*
 * The calling thread's next acquisition is one more member of a lock group, taken in the
 * group's own deadlock-free order (kl_hashlock_lock2/lockn: increasing stripe index, each
 * stripe once). Group members share their owner's witness class; this says the same-class
 * nesting is intended (lockdep's nest_lock). Compiled to nothing without witness.
 */
static KL_ALWAYS_INLINE void kli_hook_nest_ordered(void)
{
#if KLOCK_WITNESS
	kli_instr_nest_ordered();
#endif
}

/* ---- slow-path episodes -------------------------------------------------------------- */

/*
 * One slow-path episode, on the waiter's stack. Times are kl_arch_cycles() ticks (rdtsc,
 * cntvct_el0, or CLOCK_MONOTONIC ns on the generic backend: 2-3x cheaper than a
 * clock_gettime), converted to nanoseconds once, when lockstat records the episode (as
 * NetBSD lockstat converts cycle counts). The first phase starts at t_begin without a
 * second clock read, so an episode costs two reads plus one per further phase change.
 */
struct kli_wait {
	uint64_t t_begin;     /* ticks at kli_wait_begin(); 0 when lockstat was off */
	uint64_t t_mark;      /* start of the current phase (ticks) */
	uint64_t spin_ticks;  /* time spent in spin phases */
	uint64_t sleep_ticks; /* time spent asleep */
	uint32_t nspin;       /* spin phases entered */
	uint32_t nsleep;      /* sleeps */
	uint32_t nfence;      /* heavy fences this waiter issued (lockstat on: the
	                       * process's count at begin until kli_wait_end) */
	bool asleep_handover; /* a FIFO lock was handed to us while we slept */
	uint8_t phase;        /* KLI_PHASE_* */
#if KLOCK_PROBES
	const void *lock;     /* what kli_wait_begin() was told, for the handoff probe */
	const void *site;
	unsigned flags;
	int kind;
#endif
};

KLI_SDT_QUIET_BEGIN
/* Probe side of kli_wait_begin(): remember the episode's lock, fire contention_begin. */
static inline void kli_wait_probe_begin(struct kli_wait *w, const void *lock,
					enum kli_kind kind, unsigned flags, const void *site)
{
#if KLOCK_PROBES
	w->lock = lock;
	w->site = kli_site(site);
	w->flags = flags & KLI_PROBE_F_MASK;
	w->kind = (int)kind;
	KLI_PROBE_NAME(lock);
	KLI_PROBE4(contention_begin, lock, w->kind, w->flags, w->site);
#else
	(void)w, (void)lock, (void)kind, (void)flags, (void)site;
#endif
}

/* The lock was handed to this waiter (it woke up owning it): probe handoff. */
static inline void kli_wait_handoff(struct kli_wait *w)
{
#if KLOCK_PROBES
	KLI_PROBE4(handoff, w->lock, w->kind, w->flags, w->site);
#else
	(void)w;
#endif
}

/* Probe side of kli_wait_end(): contention_end with the result (0 acquired, 1 gave up). */
static inline void kli_wait_probe_end(const void *lock, enum kli_kind kind, unsigned flags,
				      const void *site)
{
	KLI_PROBE5(contention_end, lock, (int)kind, flags & KLI_PROBE_F_MASK, kli_site(site),
		   (flags & KLI_HF_FAILED) != 0);
}

/* A writer starts revoking the readers' bias of @lock (probe revoke_begin). */
static inline void kli_hook_revoke_begin(const void *lock, enum kli_kind kind)
{
	KLI_PROBE2(revoke_begin, lock, (int)kind);
}

/* The revocation ended after @cost_ns: @result 0, or the errno of a writer that gave up. */
static inline void kli_hook_revoke_end(const void *lock, enum kli_kind kind, uint64_t cost_ns,
				       int result)
{
	KLI_PROBE4(revoke_end, lock, (int)kind, cost_ns, result);
}
KLI_SDT_QUIET_END

enum { KLI_PHASE_NONE, KLI_PHASE_SPIN, KLI_PHASE_SLEEP };

#if KLOCK_LOCKSTAT
/* lockstat's switch (locks/lockstat.c), read on slow paths only. Read-mostly: written
 * only by kl_lockstat_start/stop/reset, and alone in its false-sharing unit, so reading
 * it never misses on a line that something else writes. */
struct kli_lockstat_switch {
	_Atomic bool on;         /* recording (kl_lockstat_start()) */
	_Atomic uint32_t gen;    /* data generation, bumped by kl_lockstat_reset() */
} KL_PADDED;
extern struct kli_lockstat_switch kli_lockstat;

/* Records a finished episode (locks/lockstat.c; only called when w->t_begin != 0). */
void kli_lockstat_record(const struct kli_wait *w, const void *lock, enum kli_kind kind,
			 unsigned flags, const void *site);

/* Records a bias revocation (locks/lockstat.c; only called while recording). */
void kli_lockstat_revoked(const void *lock, enum kli_kind kind, uint64_t cost_ns,
			  const void *site);

static inline void kli_hook_revoked(const void *lock, enum kli_kind kind, uint64_t cost_ns,
				    const void *site)
{
	kli_hook_revoke_end(lock, kind, cost_ns, 0);
	if (kl_unlikely(atomic_load_explicit(&kli_lockstat.on, memory_order_relaxed)))
		kli_lockstat_revoked(lock, kind, cost_ns, site);
}

/* Records a completed unbiased stretch (locks/lockstat.c; only called while recording). */
void kli_lockstat_rearmed(const void *lock, enum kli_kind kind, uint64_t unbiased_ns);

static inline void kli_hook_rearmed(const void *lock, enum kli_kind kind, uint64_t unbiased_ns)
{
	if (kl_unlikely(atomic_load_explicit(&kli_lockstat.on, memory_order_relaxed)))
		kli_lockstat_rearmed(lock, kind, unbiased_ns);
}

static inline void kli_wait_begin(struct kli_wait *w, const void *lock, enum kli_kind kind,
				  unsigned flags, const void *site)
{
	kli_ev_count(KLI_EV_CONTENDED);
	kli_wait_probe_begin(w, lock, kind, flags, site);
	w->t_begin = 0;
	w->phase = KLI_PHASE_NONE;
	w->nspin = w->nsleep = w->nfence = 0;
	w->asleep_handover = false;
	w->spin_ticks = w->sleep_ticks = 0;
	if (kl_unlikely(atomic_load_explicit(&kli_lockstat.on, memory_order_relaxed)))
		w->t_begin = w->t_mark = kl_arch_cycles();
}

/* Charges the time since the last mark to the phase that is ending. */
static inline void kli_wait_phase(struct kli_wait *w, uint8_t next)
{
	uint64_t now, d;

	if (kl_likely(w->t_begin == 0))
		return;
	w->nspin += next == KLI_PHASE_SPIN;
	w->nsleep += next == KLI_PHASE_SLEEP;
	if (w->phase == KLI_PHASE_NONE && next != KLI_PHASE_NONE) {
		w->phase = next;   /* the first phase starts at t_begin: no clock read */
		return;
	}
	now = kl_arch_cycles();
	d = now > w->t_mark ? now - w->t_mark : 0;   /* a migration may see a lower count */
	if (w->phase == KLI_PHASE_SPIN)
		w->spin_ticks += d;
	else if (w->phase == KLI_PHASE_SLEEP)
		w->sleep_ticks += d;
	w->phase = next;
	w->t_mark = now;
}

static inline void kli_wait_spin(struct kli_wait *w)
{
	if (w->phase != KLI_PHASE_SPIN)
		kli_wait_phase(w, KLI_PHASE_SPIN);
}

static inline void kli_wait_sleep(struct kli_wait *w)
{
	kli_wait_phase(w, KLI_PHASE_SLEEP);
}

/* The waiter issued a heavy fence (counted in the process's events by the fence itself;
 * this charges it to the episode's lockstat row). */
static inline void kli_wait_fenced(struct kli_wait *w)
{
	w->nfence++;
}

/* A FIFO lock was handed to this waiter while it slept: the hand-over waited for our
 * wake-up (the waiter finds it out when it wakes up already the owner). */
static inline void kli_wait_handover_asleep(struct kli_wait *w)
{
	kli_ev_count(KLI_EV_HANDOVER_ASLEEP);
	w->asleep_handover = true;
	kli_wait_handoff(w);
}

/* Records a wake-up that an unlock of @lock issued (locks/lockstat.c; only while
 * recording). */
void kli_lockstat_woke(const void *lock, enum kli_kind kind);

/* An unlock (or a promotion) of @lock issued a wake-up. Counted in the lock's row with no
 * call site, as kli_hook_rearmed(): the waker has no call site of its own worth keeping. */
static inline void kli_hook_woke(const void *lock, enum kli_kind kind)
{
	if (kl_unlikely(atomic_load_explicit(&kli_lockstat.on, memory_order_relaxed)))
		kli_lockstat_woke(lock, kind);
}

static inline void kli_wait_end(struct kli_wait *w, const void *lock, enum kli_kind kind,
				unsigned flags, const void *site)
{
	kli_wait_probe_end(lock, kind, flags, site);
	if (kl_likely(w->t_begin == 0))
		return;
	kli_wait_phase(w, KLI_PHASE_NONE);
	kli_lockstat_record(w, lock, kind, flags, site);
}

#else /* !KLOCK_LOCKSTAT */
/* -Dlockstat=false: the episode brackets compile to nothing, so a slow path is exactly
 * what it would be without the seam (tests/lockstat_callgrind.sh compares the two). */
static inline void kli_hook_revoked(const void *lock, enum kli_kind kind, uint64_t cost_ns,
				    const void *site)
{
	(void)site;
	kli_hook_revoke_end(lock, kind, cost_ns, 0);
}

static inline void kli_hook_rearmed(const void *lock, enum kli_kind kind, uint64_t unbiased_ns)
{
	(void)lock, (void)kind, (void)unbiased_ns;
}

static inline void kli_wait_begin(struct kli_wait *w, const void *lock, enum kli_kind kind,
				  unsigned flags, const void *site)
{
	kli_ev_count(KLI_EV_CONTENDED);
	kli_wait_probe_begin(w, lock, kind, flags, site);
}

static inline void kli_wait_fenced(struct kli_wait *w)
{
	(void)w;
}

static inline void kli_wait_handover_asleep(struct kli_wait *w)
{
	kli_ev_count(KLI_EV_HANDOVER_ASLEEP);
	kli_wait_handoff(w);
}

static inline void kli_hook_woke(const void *lock, enum kli_kind kind)
{
	(void)lock, (void)kind;
}

static inline void kli_wait_spin(struct kli_wait *w)
{
	(void)w;
}

static inline void kli_wait_sleep(struct kli_wait *w)
{
	(void)w;
}

static inline void kli_wait_end(struct kli_wait *w, const void *lock, enum kli_kind kind,
				unsigned flags, const void *site)
{
	(void)w;
	kli_wait_probe_end(lock, kind, flags, site);
}
#endif /* KLOCK_LOCKSTAT */

#endif /* KL_HOOKS_H */
