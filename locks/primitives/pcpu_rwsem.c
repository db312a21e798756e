/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/pcpu_rwsem.c - kl_pcpu_rwsem: Linux percpu-rwsem + rcu_sync in userspace.
 *
 * WHAT. Linux's percpu_rw_semaphore: a reader, with preemption disabled, checks that
 * rcu_sync is idle and does this_cpu_inc(read_count); a writer flips rcu_sync (one RCU
 * grace period, so every reader either sees the flip or has its increment visible), sets
 * `block`, and waits for the per-CPU counts to sum to zero. The userspace substitutions:
 *   - "preempt-off; if idle: this_cpu_inc" -> kl_arch_rseq_inc(): an rseq critical
 *     section that loads sem->gp, tests KL_PCPU_FAST and commits one non-LOCKed ADD to
 *     this CPU's counter (arch/<cpu>/kl_rseq.h). Preemption, migration or a signal
 *     restarts it, like a preempt-off section that cannot be interrupted.
 *   - synchronize_rcu -> membarrier(PRIVATE_EXPEDITED_RSEQ) (kli_fence_heavy_rseq): every
 *     rseq section of ours that is running restarts, every finished one is visible - the
 *     grace period for exactly that read side, µs not ms, never blocks, registered at
 *     library load. Chosen over liburcu's synchronize_rcu: our readers are not RCU readers
 *     (an RCU grace period would not restart rseq sections, so it would need a fence on
 *     the read side), and it needs no registration and no extra dependency.
 *   - without rseq or the rseq membarrier (old kernel, qemu, -Darch=generic,
 *     KLOCK_NO_RSEQ=1, KLOCK_NO_MEMBARRIER=1): "atomic mode" - a C11 fetch_add on the
 *     slot of the CPU hint, kli_fence_light(), then the check; the grace period is
 *     kli_fence_heavy() (membarrier(PRIVATE_EXPEDITED), or a seq_cst fence).
 * Counters are SRCU's split counts: per slot, read locks and read unlocks taken on that
 * CPU in separate words. A pair is then two independent increments - not +1 and -1 on one
 * word, a store-forwarding chain - and an unlock may land on any CPU's slot.
 *
 * Fairness. Readers and writers that must wait queue FIFO on the semaphore (parking lot).
 * write_unlock walks the queue like Linux's percpu_rwsem_wake_function: each reader at the
 * head is counted in (one lock increment on its behalf) and woken; the first writer gets
 * `block` handed over and ends the walk. New readers cannot pass a queued writer (block),
 * a writer cannot pass queued readers (it queues behind them): no starvation.
 *
 * STATE.
 *   gp (one word, loaded by every reader):
 *     bits 7..  the per-CPU counters (KL_ARCH_PAD aligned), 0 until allocated
 *     bit 6     GP_POISON_BIT: destroyed
 *     bits 1-2  rcu_sync state: IDLE 0 / ENTER 1 (first writer of a burst runs the grace
 *               period) / PASSED 2 (readers check `block`) / EXIT 3 (burst over; readers
 *               stay slow until exit_at, PCPU_LAZY_NS = 100 us later, when one of them
 *               flips EXIT -> IDLE; a writer arriving first goes EXIT -> PASSED, no grace
 *               period)
 *     bit 0     KL_PCPU_FAST: IDLE, allocated and rseq mode - the inline fast path's gate
 *   gp_count (under the gp_lock wordlock): writers between rcu_sync_enter and _exit.
 *   block: PCPU_BLOCK (a writer owns the semaphore or drains readers) | PCPU_WAITERS
 *     (threads parked on it: unlock goes through the parking lot).
 *   slots[0..limit]: {lock, unlock} counters, one KL_ARCH_PAD line per possible CPU;
 *     in rseq mode slots[cpu] is only updated by rseq sections running on that cpu and
 *     slots[limit] only atomically (threads whose rseq area is not registered); in atomic
 *     mode every update is atomic. Readers inside = sum(lock) - sum(unlock) mod 2^64.
 *   wsleep: 1 while the draining writer sleeps on it. owner: the writer's owner id
 *   (locks/substrate/thread.h: never a recycled record).
 *
 * INVARIANTS.
 *   I1 KL_PCPU_FAST is set only in state IDLE; the state leaves IDLE only under gp_lock,
 *      and a writer passes its grace period before it looks at the counters.
 *   I2 After that grace period, every reader that committed on the fast path is in the
 *      sums the writer reads, and every other reader checks `block` behind a full fence.
 *   I3 block is cleared only when the wait queue is empty (under the bucket lock), so a
 *      newcomer never overtakes a queued waiter.
 *   I4 A writer owns the semaphore from the moment the sums read 0 with block set until
 *      write_unlock: new readers back out and queue.
 *
 * ORDERING.
 *   R/G  rseq mode: the reader's section [load gp; test FAST; commit] against the writer's
 *        [clear FAST (store ENTER); G = membarrier(PRIVATE_EXPEDITED_RSEQ)]: a section
 *        still running restarts and sees FAST clear; a finished one is visible after G.
 *   A'/G atomic mode: reader increments, A' = kli_fence_light(), loads gp; the writer
 *        stores ENTER, G = kli_fence_heavy(), then reads the sums. Store buffering: the
 *        reader sees ENTER or the writer sees the increment. (B'/G: the same for unlocks.)
 *   A/D  slow-path reader: increment; A = seq_cst fence; load block. Writer: D = seq_cst
 *        CAS setting block; then the sums. Store buffering with full fences.
 *   B/C  slow-path unlock: increment unlock; B = seq_cst fence; load wsleep. Writer:
 *        store wsleep = 1; C = seq_cst fence; re-read the sums before sleeping. So the
 *        writer either sees the reader gone or the reader sees it asleep and wakes it.
 *   X    the sums read EVERY unlock count before ANY lock count (SRCU's order), acquire.
 *        A reader's unlock increment is a release after its lock increment, so seeing the
 *        unlock implies seeing the lock: the sums never undercount, even when the pair hit
 *        two CPUs' slots (a back-out is an unlock, so the same holds for it).
 *   R    every increment is a release (x86 TSO store / STLR / atomic release): a read
 *        section ends before its unlock is counted; the sums' loads are acquire.
 *   H    write_unlock releases block (release); the admitted readers and the next writer
 *        acquire it (CAS acquire, park K1/K2). rcu_sync_exit's EXIT store is a release and
 *        the EXIT -> IDLE flip is acq_rel, so readers that find IDLE see the last write.
 *
 * COSTS. Read pair (rseq mode, inline): two rseq sections of ~9 instructions, loading
 * only __rseq_offset, gp and cpu_id - no load follows the commit. First write of a burst:
 * one membarrier; every write: a CAS, two passes over possible_cpus+1 lines and a release.
 *
 * LIMITS. Summing is O(possible CPUs) per writer check and per slow-path reader exit while
 * a writer sleeps. After a burst readers pay the slow path (an rseq add, a fence and two
 * calls: ~4x an uncontended kl_rwlock read here) for PCPU_LAZY_NS; a steady stream of
 * writes less than that apart keeps them there - use kl_rwlock for such loads.
 * Threads whose rseq registration failed (none in practice) always take the slow path.
 * write_trylock (Linux has none) pays what a first writer pays - a grace period when
 * readers are on the fast path - even when it fails because readers are inside, and
 * leaves readers slow for PCPU_LAZY_NS after: a try loop against long readers is costly.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <klock/pcpu_rwsem.h>
#include "cpu.h"
#include "fence_impl.h"
#include "hooks.h"
#include "park.h"
#include "spin.h"
#include "thread.h"
#include "wordlock.h"

/* gp layout. */
#define GP_FLAGS_MASK ((uintptr_t)KL_ARCH_PAD - 1)
#define GP_STATE_SHIFT 1
#define GP_STATE_MASK ((uintptr_t)3 << GP_STATE_SHIFT)
#define GP_POISON_BIT ((uintptr_t)0x40)
#define GP_IDLE 0u
#define GP_ENTER 1u
#define GP_PASSED 2u
#define GP_EXIT 3u
/* gp of a destroyed semaphore: no counters, readers slow, the poison bit. */
#define GP_POISON (GP_POISON_BIT | ((uintptr_t)GP_PASSED << GP_STATE_SHIFT))

#define PCPU_BLOCK 0x1u
#define PCPU_WAITERS 0x2u

/* How long readers stay on the slow path after the last write of a burst: the window in
 * which another write costs no grace period. Linux's is one RCU grace period (ms); ours
 * costs ~5 us, so ~20 of them: writes 100 us apart pay at most ~5% for their grace
 * period, and readers between them are fast again (1 ms kept them slow in between). */
#define PCPU_LAZY_NS 100000u
/* Spin before sleeping: a drain of short read sections, or a brief write section. */
#define PCPU_SPIN_NS 10000u
/* Park tokens handed by write_unlock. */
#define PCPU_TOKEN_ADMIT 1u    /* a reader: a hold was counted on your behalf */
#define PCPU_TOKEN_HANDOFF 2u  /* a writer: you own `block` now */

/* One CPU's counters (SRCU's split counts): read locks and read unlocks taken on it. */
struct pcpu_slot {
	_Atomic uint64_t lock;
	_Atomic uint64_t unlock;
} KL_PADDED;

/* Which counter of a slot. */
enum { PCPU_LOCK, PCPU_UNLOCK };

_Static_assert(KL_PCPU_UNLOCK_OFF == offsetof(struct pcpu_slot, unlock), "unlock counter");
_Static_assert(sizeof(struct kli_wordlock) == sizeof(uint32_t), "gp_lock is a wordlock");
#if KL_ARCH_HAVE_RSEQ
_Static_assert((1u << KL_ARCH_PAD_SHIFT) == KL_ARCH_PAD, "rseq slot stride is KL_ARCH_PAD");
#endif

/* ---- mode (fixed at library load) ---------------------------------------------------- */

/* rseq mode: kl_arch_rseq_inc() on slots[cpu_id], grace period = membarrier RSEQ. */
static bool pcpu_fast;
/* possible CPUs: slots[pcpu_limit] is the atomic-only slot. */
static uint32_t pcpu_limit = 1;
long kl_pcpu_rseq_off;
static pthread_once_t pcpu_once = PTHREAD_ONCE_INIT;

static void pcpu_mode_init(void)
{
	kli_init();
	pcpu_limit = kli_cpu_limit;
	pcpu_fast = KL_ARCH_HAVE_RSEQ && kli_cpu_mode >= KLI_CPU_RSEQ && kli_fence_rseq;
	if (pcpu_fast)
		kl_pcpu_rseq_off = (long)kli_rseq_off;
}

/* Before main(): the inline fast path reads kl_pcpu_rseq_off (0 = always fall back). */
__attribute__((constructor)) static void pcpu_ctor(void)
{
	pthread_once(&pcpu_once, pcpu_mode_init);
}

/* ---- the gp word -------------------------------------------------------------------- */

static inline struct pcpu_slot *gp_slots(uintptr_t w)
{
	return (struct pcpu_slot *)(w & ~GP_FLAGS_MASK);
}

static inline unsigned gp_state(uintptr_t w)
{
	return (unsigned)((w & GP_STATE_MASK) >> GP_STATE_SHIFT);
}

/* The word for counters @s in state @st (KL_PCPU_FAST when idle in rseq mode: I1). */
static inline uintptr_t gp_word(struct pcpu_slot *s, unsigned st)
{
	uintptr_t w = (uintptr_t)s | ((uintptr_t)st << GP_STATE_SHIFT);

	return st == GP_IDLE && pcpu_fast ? w | KL_PCPU_FAST : w;
}

static inline struct kli_wordlock *gp_lock(struct kl_pcpu_rwsem *sem)
{
	return (struct kli_wordlock *)(void *)&sem->gp_lock;
}

/* ---- per-CPU counters ------------------------------------------------------------------ */

static size_t pcpu_nslots(void)
{
	return (size_t)pcpu_limit + 1; /* + the atomic-only slot */
}

static struct pcpu_slot *pcpu_alloc(void)
{
	struct pcpu_slot *s;
	size_t bytes;

	pthread_once(&pcpu_once, pcpu_mode_init);
	bytes = pcpu_nslots() * sizeof(struct pcpu_slot);
	s = aligned_alloc(KL_ARCH_PAD, bytes);
	if (s != NULL)
		memset(s, 0, bytes);
	return s;
}

/* The counters, allocated on first use for statically initialised semaphores. */
static KL_NOINLINE struct pcpu_slot *pcpu_slots_slow(struct kl_pcpu_rwsem *sem, uintptr_t w)
{
	struct pcpu_slot *mine;

	if (w & GP_POISON_BIT)
		kli_report("use of a destroyed lock", "pcpu_rwsem", sem, NULL, NULL);
	mine = pcpu_alloc();
	if (mine == NULL) {
		fputs("klock: out of memory for a pcpu_rwsem's per-CPU counters\n", stderr);
		abort();
	}
	if (!atomic_compare_exchange_strong_explicit(&sem->gp, &w, gp_word(mine, GP_IDLE),
						     memory_order_acq_rel, memory_order_acquire)) {
		free(mine); /* another thread won */
		return gp_slots(w);
	}
	if (!(w & GP_POISON_BIT))
		kli_hook_created(sem, KLI_KIND_PCPU_RWSEM, KLI_HF_STATIC); /* first use */
	return mine;
}

static inline struct pcpu_slot *pcpu_slots(struct kl_pcpu_rwsem *sem)
{
	uintptr_t w = atomic_load_explicit(&sem->gp, memory_order_acquire);

	return kl_likely(gp_slots(w) != NULL) ? gp_slots(w) : pcpu_slots_slow(sem, w);
}

static KL_ALWAYS_INLINE _Atomic uint64_t *pcpu_ctr(struct pcpu_slot *s, int ctr)
{
	return ctr == PCPU_UNLOCK ? &s->unlock : &s->lock;
}

/* rseq increment of counter @ctr of this CPU's slot if bit 0 of *@gate is set. */
static KL_ALWAYS_INLINE bool pcpu_rseq_inc(const void *gate, int ctr)
{
#if KL_ARCH_HAVE_RSEQ
	return kl_arch_rseq_inc(kl_pcpu_rseq_off, gate,
				ctr == PCPU_UNLOCK ? KL_PCPU_UNLOCK_OFF : 0);
#else
	(void)gate, (void)ctr;
	return false;
#endif
}

/* Unconditionally increments counter @ctr of the caller's current slot (R: a release). */
static void pcpu_inc(struct pcpu_slot *slots, int ctr)
{
	if (kl_likely(pcpu_fast)) {
		uintptr_t gate = (uintptr_t)slots | KL_PCPU_FAST;

		if (kl_likely(pcpu_rseq_inc(&gate, ctr)))
			return;
		atomic_fetch_add_explicit(pcpu_ctr(&slots[pcpu_limit], ctr), 1,
					  memory_order_release);
		return;
	}
	atomic_fetch_add_explicit(pcpu_ctr(&slots[kli_cpu_slot()], ctr), 1, memory_order_release);
}

/* Readers inside: every unlock count first, then every lock count (X), all acquire (R),
 * modulo 2^64. */
static uint64_t pcpu_sum(const struct pcpu_slot *slots)
{
	size_t n = pcpu_nslots();
	uint64_t unlocks = 0, locks = 0;

	for (size_t i = 0; i < n; i++)
		unlocks += atomic_load_explicit(&slots[i].unlock, memory_order_acquire);
	for (size_t i = 0; i < n; i++)
		locks += atomic_load_explicit(&slots[i].lock, memory_order_acquire);
	return locks - unlocks;
}

/* Fast-path outcomes. */
enum { FAST_IN, FAST_OUT, FAST_COUNTED };

/* The read (or unlock, @ctr) fast path: FAST_IN when done; FAST_OUT when nothing was
 * counted; FAST_COUNTED (atomic mode) when counted but rcu_sync is not idle. */
static KL_ALWAYS_INLINE int pcpu_fast_path(struct kl_pcpu_rwsem *sem, int ctr)
{
	uintptr_t w;

	if (kl_likely(pcpu_fast))
		return pcpu_rseq_inc(&sem->gp, ctr) ? FAST_IN : FAST_OUT; /* R/G */
	w = atomic_load_explicit(&sem->gp, memory_order_acquire);
	if (kl_unlikely(gp_slots(w) == NULL))
		return FAST_OUT;
	atomic_fetch_add_explicit(pcpu_ctr(&gp_slots(w)[kli_cpu_slot()], ctr), 1,
				  memory_order_release); /* R */
	kli_fence_light(); /* A' (B' for an unlock): light half, pairs with G */
	w = atomic_load_explicit(&sem->gp, memory_order_acquire);
	return kl_likely((w & GP_FLAGS_MASK & ~(uintptr_t)KL_PCPU_FAST) == 0) ? FAST_IN
									  : FAST_COUNTED;
}

/* ---- rcu_sync ------------------------------------------------------------------------- */

/* The grace period: G. */
static void pcpu_grace_period(void)
{
	if (pcpu_fast)
		kli_fence_heavy_rseq(); /* restarts rseq read sections in flight (R/G) */
	else
		kli_fence_heavy(); /* heavy half of A'/G */
}

/* A writer joins (or starts) a burst; every reader is on the slow path when it returns. */
static void rcu_sync_enter(struct kl_pcpu_rwsem *sem)
{
	uintptr_t w;

	kli_wordlock_lock(gp_lock(sem));
	if (sem->gp_count++ == 0) {
		w = atomic_load_explicit(&sem->gp, memory_order_relaxed);
		for (;;) {
			if (gp_state(w) == GP_EXIT) {
				/* Readers are still slow: no grace period. The CAS races
				 * only with a reader flipping EXIT -> IDLE. */
				if (atomic_compare_exchange_weak_explicit(
					    &sem->gp, &w, gp_word(gp_slots(w), GP_PASSED),
					    memory_order_acquire, memory_order_relaxed))
					break;
				continue;
			}
			atomic_store_explicit(&sem->gp, gp_word(gp_slots(w), GP_ENTER),
					      memory_order_relaxed);
			pcpu_grace_period(); /* G */
			atomic_store_explicit(&sem->gp, gp_word(gp_slots(w), GP_PASSED),
					      memory_order_release);
			break;
		}
	}
	kli_wordlock_unlock(gp_lock(sem));
}

/* A writer leaves the burst; the last one starts the lazy return to IDLE. */
static void rcu_sync_exit(struct kl_pcpu_rwsem *sem)
{
	kli_wordlock_lock(gp_lock(sem));
	if (--sem->gp_count == 0) {
		atomic_store_explicit(&sem->exit_at,
				      kl_arch_cycles() + kli_ns_to_cycles(PCPU_LAZY_NS),
				      memory_order_relaxed);
		atomic_store_explicit(&sem->gp,
				      gp_word(gp_slots(atomic_load_explicit(
						      &sem->gp, memory_order_relaxed)),
					      GP_EXIT),
				      memory_order_release); /* H */
	}
	kli_wordlock_unlock(gp_lock(sem));
}

/* A slow-path reader: after the lazy window, put readers back on the fast path. */
static void rcu_sync_maybe_idle(struct kl_pcpu_rwsem *sem)
{
	uintptr_t w = atomic_load_explicit(&sem->gp, memory_order_acquire);

	if (gp_state(w) == GP_EXIT && !(w & GP_POISON_BIT) &&
	    kl_arch_cycles() >= atomic_load_explicit(&sem->exit_at, memory_order_relaxed))
		atomic_compare_exchange_strong_explicit(&sem->gp, &w,
							gp_word(gp_slots(w), GP_IDLE),
							memory_order_acq_rel, /* H */
							memory_order_relaxed);
}

/* ---- debug-build contract checks ---------------------------------------------------- */
#if KLOCK_DEBUG_LOCKS
static void pcpu_check_alive(const struct kl_pcpu_rwsem *sem, const void *site)
{
	if (atomic_load_explicit(&sem->gp, memory_order_relaxed) & GP_POISON_BIT)
		kli_report("use of a destroyed lock", "pcpu_rwsem", sem, site, NULL);
}

static void pcpu_track_read(struct kl_pcpu_rwsem *sem, const void *site)
{
	struct kli_thread *self = kli_self();
	uint32_t n = self->rdm_pcpu_n;

	pcpu_check_alive(sem, site);
	if (atomic_load_explicit(&sem->owner, memory_order_relaxed) == self->owner)
		kli_report("read lock of a lock this thread write-holds (deadlock)",
			   "pcpu_rwsem", sem, site, NULL);
	for (uint32_t i = 0; i < n && i < KLI_RDM_TRACK; i++)
		if (self->rdm_pcpu[i] == sem)
			kli_report("recursive read lock (deadlocks whenever a writer is waiting)",
				   "pcpu_rwsem", sem, site, NULL);
	if (n < KLI_RDM_TRACK)
		self->rdm_pcpu[n] = sem;
	self->rdm_pcpu_n = n + 1;
}

/* Returns false (and reports) when the caller holds no read lock of @sem. */
static bool pcpu_untrack_read(struct kl_pcpu_rwsem *sem, const void *site)
{
	struct kli_thread *self = kli_self();
	uint32_t n = self->rdm_pcpu_n, lim = n < KLI_RDM_TRACK ? n : KLI_RDM_TRACK;

	pcpu_check_alive(sem, site);
	for (uint32_t i = lim; i-- > 0;) {
		if (self->rdm_pcpu[i] != sem)
			continue;
		self->rdm_pcpu[i] = self->rdm_pcpu[lim - 1];
		self->rdm_pcpu_n = n - 1;
		return true;
	}
	if (n > KLI_RDM_TRACK) { /* untracked holds: cannot tell, trust the caller */
		self->rdm_pcpu_n = n - 1;
		return true;
	}
	kli_report("read unlock without a read lock held by this thread", "pcpu_rwsem", sem,
		   site, NULL);
	return false;
}

static void pcpu_check_write(struct kl_pcpu_rwsem *sem, const void *site)
{
	struct kli_thread *self = kli_self();

	pcpu_check_alive(sem, site);
	if (atomic_load_explicit(&sem->owner, memory_order_relaxed) == self->owner)
		kli_report("recursive write lock (deadlock)", "pcpu_rwsem", sem, site, NULL);
	for (uint32_t i = 0; i < self->rdm_pcpu_n && i < KLI_RDM_TRACK; i++)
		if (self->rdm_pcpu[i] == sem)
			kli_report("write lock of a lock this thread read-holds (deadlock)",
				   "pcpu_rwsem", sem, site, NULL);
}
#else
static inline void pcpu_track_read(struct kl_pcpu_rwsem *sem, const void *site)
{
	(void)sem, (void)site;
}

static inline bool pcpu_untrack_read(struct kl_pcpu_rwsem *sem, const void *site)
{
	(void)sem, (void)site;
	return true;
}

static inline void pcpu_check_write(struct kl_pcpu_rwsem *sem, const void *site)
{
	(void)sem, (void)site;
}
#endif

/* ---- init / destroy ----------------------------------------------------------------- */

int kl_pcpu_rwsem_init(struct kl_pcpu_rwsem *sem)
{
	struct pcpu_slot *slots = pcpu_alloc();

	if (slots == NULL)
		return ENOMEM;
	*sem = (struct kl_pcpu_rwsem)KL_PCPU_RWSEM_INITIALIZER;
	atomic_store_explicit(&sem->gp, gp_word(slots, GP_IDLE), memory_order_release);
	kli_hook_created(sem, KLI_KIND_PCPU_RWSEM, 0);
	return 0;
}

int kl_pcpu_rwsem_destroy(struct kl_pcpu_rwsem *sem)
{
	uintptr_t w = atomic_load_explicit(&sem->gp, memory_order_acquire);
	struct pcpu_slot *slots = gp_slots(w);

	if ((w & GP_POISON_BIT) || sem->gp_count != 0 ||
	    atomic_load_explicit(&sem->block, memory_order_acquire) != 0 ||
	    (slots != NULL && pcpu_sum(slots) != 0)) {
#if KLOCK_DEBUG_LOCKS   /* a busy one under the interposer: it reports glibc's answer */
		if (!KLOCK_PRELOAD || (w & GP_POISON_BIT))
			kli_report((w & GP_POISON_BIT) ? "destroy of a destroyed lock"
						       : "destroy of a held or waited-for lock",
				   "pcpu_rwsem", sem, KLI_SITE(), NULL);
#endif
		return EBUSY;
	}
	/* A late user finds no counters and the poison bit (reported on its slow path). */
	atomic_store_explicit(&sem->block, PCPU_BLOCK, memory_order_relaxed);
	atomic_store_explicit(&sem->gp, GP_POISON, memory_order_relaxed);
	free(slots);
	kli_hook_destroyed(sem, KLI_KIND_PCPU_RWSEM);
	return 0;
}

/* ---- parking ------------------------------------------------------------------------ */

/* Under the bucket lock: queue only while `block` is held, and mark the queue (I3). The
 * mark must be a CAS that requires PCPU_BLOCK: write_unlock's fast CAS(BLOCK -> 0) runs
 * outside the bucket lock, and a blind fetch_or after it would leave WAITERS without an
 * owner to clear it (nobody could ever take the semaphore again). */
static bool pcpu_park_validate(void *arg)
{
	struct kl_pcpu_rwsem *sem = arg;
	uint32_t b = atomic_load_explicit(&sem->block, memory_order_relaxed);

	while (b & PCPU_BLOCK) {
		if ((b & PCPU_WAITERS) ||
		    atomic_compare_exchange_weak_explicit(&sem->block, &b, b | PCPU_WAITERS,
							  memory_order_relaxed,
							  memory_order_relaxed))
			return true;
	}
	return false;
}

/* Queues the caller as a @role; returns the token (0: not queued, retry). */
static uintptr_t pcpu_park(struct kl_pcpu_rwsem *sem, uint8_t role, struct kli_wait *w)
{
	struct kli_thread *self = kli_self();
	struct kli_park_req req = { .key = sem, .validate = pcpu_park_validate, .arg = sem };
	uintptr_t token = 0;

	self->rdm_role = role;
	kli_wait_sleep(w);
	if (kli_park(&req, &token) != KLI_PARK_UNPARKED)
		token = 0;
	self->rdm_role = KLI_RDM_NONE;
	return token;
}

/* A reader left on the slow path: if the writer sleeps and we were the last reader,
 * wake it - exactly once (the CAS), never on other exits. */
static void pcpu_wake_writer(struct kl_pcpu_rwsem *sem, struct pcpu_slot *slots)
{
	uint32_t one = 1;

	if (atomic_load_explicit(&sem->wsleep, memory_order_relaxed) == 1 &&
	    pcpu_sum(slots) == 0 &&
	    atomic_compare_exchange_strong_explicit(&sem->wsleep, &one, 0,
						    memory_order_relaxed,
						    memory_order_relaxed))
		kl_wake(&sem->wsleep, 1);
}

/* ---- readers -------------------------------------------------------------------------- */

/* Spins while a writer holds `block`; true once it is free (then retry), false when the
 * budget is spent (then queue). */
static bool pcpu_spin_while_blocked(struct kl_pcpu_rwsem *sem, struct kli_wait *w)
{
	struct kli_spin sp;

	kli_wait_spin(w);
	kli_spin_start(&sp, PCPU_SPIN_NS);
	do {
		if (!(atomic_load_explicit(&sem->block, memory_order_relaxed) & PCPU_BLOCK))
			return true;
	} while (kli_spin_backoff(&sp));
	return false;
}

/* Not on the fast path (a writer is about, no counters yet, or atomic mode found rcu_sync
 * not idle): Linux's __percpu_down_read + percpu_rwsem_wait. @counted: the caller's lock
 * increment is already done. */
static KL_NOINLINE bool pcpu_read_slow(struct kl_pcpu_rwsem *sem, bool counted, bool try,
				       const void *site)
{
	struct pcpu_slot *slots = pcpu_slots(sem);
	struct kli_wait w;
	bool waited = false;

	if (!counted)
		pcpu_inc(slots, PCPU_LOCK);
	for (;;) {
		atomic_thread_fence(memory_order_seq_cst); /* A: pairs with D (and G) */
		/* Idle again: the fast-path rule covers us (the next writer's G). */
		if (gp_state(atomic_load_explicit(&sem->gp, memory_order_acquire)) == GP_IDLE)
			break;
		if (!(atomic_load_explicit(&sem->block, memory_order_acquire) & PCPU_BLOCK)) {
			rcu_sync_maybe_idle(sem);
			break;
		}
		/* A writer: back out (an unlock count, X) and let it see us gone. */
		pcpu_inc(slots, PCPU_UNLOCK);
		atomic_thread_fence(memory_order_seq_cst); /* B: pairs with C */
		pcpu_wake_writer(sem, slots);
		if (try)
			return false;
		if (!waited) {
			kli_wait_begin(&w, sem, KLI_KIND_PCPU_RWSEM, KLI_HF_READ, site);
			waited = true;
		}
		/* A write section is usually short: spin on `block` before sleeping (a
		 * woken reader costs the next writer a scheduler round trip to drain). */
		if (!pcpu_spin_while_blocked(sem, &w) &&
		    pcpu_park(sem, KLI_RDM_READER, &w) == PCPU_TOKEN_ADMIT)
			break; /* counted on our behalf (H) */
		pcpu_inc(slots, PCPU_LOCK);
	}
	if (waited)
		kli_wait_end(&w, sem, KLI_KIND_PCPU_RWSEM, KLI_HF_READ, site);
	return true;
}

void (kl_pcpu_rwsem_read_lock)(struct kl_pcpu_rwsem *sem)
{
	int r;

	pcpu_track_read(sem, KLI_SITE());
	kli_hook_acquire(sem, KLI_KIND_PCPU_RWSEM, KLI_HF_READ, KLI_SITE());
	r = pcpu_fast_path(sem, PCPU_LOCK);
	if (kl_unlikely(r != FAST_IN))
		pcpu_read_slow(sem, r == FAST_COUNTED, false, KLI_SITE());
	kli_hook_acquired(sem, KLI_KIND_PCPU_RWSEM, KLI_HF_READ, KLI_SITE());
}

bool kl_pcpu_rwsem_read_trylock(struct kl_pcpu_rwsem *sem)
{
	bool ok = true;
	int r;

	kli_hook_acquire(sem, KLI_KIND_PCPU_RWSEM, KLI_HF_READ | KLI_HF_TRY, KLI_SITE());
	r = pcpu_fast_path(sem, PCPU_LOCK);
	if (kl_unlikely(r != FAST_IN))
		ok = pcpu_read_slow(sem, r == FAST_COUNTED, true, KLI_SITE());
	kli_hook_acquired(sem, KLI_KIND_PCPU_RWSEM,
			  KLI_HF_READ | KLI_HF_TRY | (ok ? 0 : KLI_HF_FAILED), KLI_SITE());
	if (ok)
		pcpu_track_read(sem, KLI_SITE());
	return ok;
}

/* The unlock is counted and rcu_sync is not idle: a writer may be waiting for it. */
static KL_NOINLINE void pcpu_read_unlock_slow(struct kl_pcpu_rwsem *sem)
{
	atomic_thread_fence(memory_order_seq_cst); /* B: pairs with C in pcpu_drain() */
	pcpu_wake_writer(sem, pcpu_slots(sem));
	rcu_sync_maybe_idle(sem);
}

void (kl_pcpu_rwsem_read_unlock)(struct kl_pcpu_rwsem *sem)
{
	int r;

	if (!pcpu_untrack_read(sem, KLI_SITE()))
		return;
	kli_hook_release(sem, KLI_KIND_PCPU_RWSEM, KLI_HF_READ, KLI_SITE());
	r = pcpu_fast_path(sem, PCPU_UNLOCK); /* R */
	if (kl_unlikely(r != FAST_IN)) {
		if (r == FAST_OUT)
			pcpu_inc(pcpu_slots(sem), PCPU_UNLOCK);
		pcpu_read_unlock_slow(sem);
	}
	kli_hook_released(sem, KLI_KIND_PCPU_RWSEM, KLI_HF_READ);
}

/* ---- writers -------------------------------------------------------------------------- */

/* Takes `block` when the fast CAS failed: spin a little, then queue FIFO. */
static KL_NOINLINE void pcpu_block_slow(struct kl_pcpu_rwsem *sem, struct kli_wait *w)
{
	struct kli_spin sp;
	uint32_t zero;

	for (;;) {
		kli_wait_spin(w);
		kli_spin_start(&sp, PCPU_SPIN_NS);
		do {
			zero = 0;
			if (atomic_load_explicit(&sem->block, memory_order_relaxed) == 0 &&
			    atomic_compare_exchange_strong_explicit(&sem->block, &zero, PCPU_BLOCK,
								    memory_order_seq_cst, /* D */
								    memory_order_relaxed))
				return;
		} while (kli_spin_backoff(&sp));
		if (pcpu_park(sem, KLI_RDM_WRITER, w) == PCPU_TOKEN_HANDOFF) {
			kli_wait_handoff(w);
			return; /* H: the previous owner passed `block` to us */
		}
	}
}

/* Waits until no reader is inside: spin, then sleep until the last reader wakes us (B/C:
 * it is woken once, by the reader whose exit leaves the sums at 0). */
static void pcpu_drain(struct kl_pcpu_rwsem *sem, struct pcpu_slot *slots,
		       struct kli_wait *w)
{
	struct kli_spin sp;

	kli_wait_spin(w);
	kli_spin_start(&sp, PCPU_SPIN_NS);
	while (pcpu_sum(slots) != 0) {
		if (kli_spin_backoff(&sp))
			continue;
		atomic_store_explicit(&sem->wsleep, 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst); /* C: pairs with B */
		if (pcpu_sum(slots) == 0)
			break;
		kli_wait_sleep(w);
		kl_wait(&sem->wsleep, 1, NULL);
		kli_wait_spin(w);
	}
	atomic_store_explicit(&sem->wsleep, 0, memory_order_relaxed);
}

/* write_lock when `block` was taken (@have_block false: queue for it) but readers are
 * inside: one wait episode for the whole acquisition. */
static KL_NOINLINE void pcpu_write_lock_slow(struct kl_pcpu_rwsem *sem, struct pcpu_slot *slots,
					     bool have_block, const void *site)
{
	struct kli_wait w;

	kli_wait_begin(&w, sem, KLI_KIND_PCPU_RWSEM, 0, site);
	if (!have_block)
		pcpu_block_slow(sem, &w);
	pcpu_drain(sem, slots, &w);
	kli_wait_end(&w, sem, KLI_KIND_PCPU_RWSEM, 0, site);
}

void kl_pcpu_rwsem_write_lock(struct kl_pcpu_rwsem *sem)
{
	struct pcpu_slot *slots = pcpu_slots(sem);
	uint32_t zero = 0;
	bool have_block;

	pcpu_check_write(sem, KLI_SITE());
	kli_hook_acquire(sem, KLI_KIND_PCPU_RWSEM, 0, KLI_SITE());
	rcu_sync_enter(sem);
	have_block = atomic_compare_exchange_strong_explicit(&sem->block, &zero, PCPU_BLOCK,
							     memory_order_seq_cst, /* D */
							     memory_order_relaxed);
	if (kl_unlikely(!have_block || pcpu_sum(slots) != 0))
		pcpu_write_lock_slow(sem, slots, have_block, KLI_SITE());
	atomic_store_explicit(&sem->owner, kli_owner(), memory_order_relaxed);
	kli_hook_acquired(sem, KLI_KIND_PCPU_RWSEM, 0, KLI_SITE());
}

/* Under the bucket lock, once write_unlock's dequeue is decided (Linux's
 * percpu_rwsem_wake_function): count a reader in and keep going, or hand `block` to a
 * writer and stop; clear `block` when the queue is empty (I3). */
struct pcpu_unpark_ctx {
	struct kl_pcpu_rwsem *sem;
	struct pcpu_slot *slots;
	bool again;
};

static uintptr_t pcpu_unpark_cb(const struct kli_unpark_result *res, void *arg)
{
	struct pcpu_unpark_ctx *c = arg;

	c->again = false;
	if (!res->unparked) {
		atomic_store_explicit(&c->sem->block, 0, memory_order_release); /* H */
		return 0;
	}
	if (res->thread->rdm_role == KLI_RDM_WRITER) {
		atomic_store_explicit(&c->sem->block,
				      PCPU_BLOCK | (res->more ? PCPU_WAITERS : 0),
				      memory_order_release);
		return PCPU_TOKEN_HANDOFF;
	}
	pcpu_inc(c->slots, PCPU_LOCK); /* the reader's hold, taken on its behalf (H, K1) */
	if (res->more)
		c->again = true;
	else
		atomic_store_explicit(&c->sem->block, 0, memory_order_release); /* H */
	return PCPU_TOKEN_ADMIT;
}

static KL_NOINLINE void pcpu_unlock_slow(struct kl_pcpu_rwsem *sem)
{
	struct pcpu_unpark_ctx c = { .sem = sem, .slots = pcpu_slots(sem) };

	do
		kli_unpark_one(sem, pcpu_unpark_cb, &c);
	while (c.again);
}

/* Gives `block` up: to the next queued waiters (a run of readers, or one writer), or
 * clears it when nobody waits (H). */
static void pcpu_release_block(struct kl_pcpu_rwsem *sem)
{
	uint32_t b = PCPU_BLOCK;

	if (!atomic_compare_exchange_strong_explicit(&sem->block, &b, 0,
						     memory_order_release, /* H */
						     memory_order_relaxed))
		pcpu_unlock_slow(sem);
}

/* Takes `block` and finds no reader inside, or undoes what it did. */
static bool pcpu_write_try(struct kl_pcpu_rwsem *sem, struct pcpu_slot *slots)
{
	uint32_t zero = 0;

	rcu_sync_enter(sem);
	if (atomic_compare_exchange_strong_explicit(&sem->block, &zero, PCPU_BLOCK,
						    memory_order_seq_cst, /* D */
						    memory_order_relaxed)) {
		if (pcpu_sum(slots) == 0)
			return true;
		/* Readers inside: readers that backed out meanwhile may have queued. */
		pcpu_release_block(sem);
	}
	rcu_sync_exit(sem);
	return false;
}

bool kl_pcpu_rwsem_write_trylock(struct kl_pcpu_rwsem *sem)
{
	bool ok = false;

	kli_hook_acquire(sem, KLI_KIND_PCPU_RWSEM, KLI_HF_TRY, KLI_SITE());
	/* A writer holds or drains it: fail without paying a grace period. */
	if (atomic_load_explicit(&sem->block, memory_order_relaxed) == 0)
		ok = pcpu_write_try(sem, pcpu_slots(sem));
	if (ok)
		atomic_store_explicit(&sem->owner, kli_owner(), memory_order_relaxed);
	kli_hook_acquired(sem, KLI_KIND_PCPU_RWSEM, KLI_HF_TRY | (ok ? 0 : KLI_HF_FAILED),
			  KLI_SITE());
	return ok;
}

void kl_pcpu_rwsem_write_unlock(struct kl_pcpu_rwsem *sem)
{

#if KLOCK_DEBUG_LOCKS
	if (atomic_load_explicit(&sem->owner, memory_order_relaxed) != kli_owner()) {
		kli_report((atomic_load_explicit(&sem->gp, memory_order_relaxed) & GP_POISON_BIT)
				   ? "use of a destroyed lock"
				   : "write unlock by a thread that does not own the lock",
			   "pcpu_rwsem", sem, KLI_SITE(), NULL);
		return;
	}
#endif
	kli_hook_release(sem, KLI_KIND_PCPU_RWSEM, 0, KLI_SITE());
	atomic_store_explicit(&sem->owner, 0, memory_order_relaxed);
	pcpu_release_block(sem);
	rcu_sync_exit(sem);
	kli_hook_released(sem, KLI_KIND_PCPU_RWSEM, 0);
}
