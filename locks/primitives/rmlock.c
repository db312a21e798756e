/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/rmlock.c - kl_rmlock: FreeBSD rmlock(9) semantics; readers without atomics while
 * the lock is biased, with one fence while it is not (BRAVO's adaptive bias).
 *
 * WHAT. FreeBSD's rmlock lets a reader publish itself on a per-CPU tracker list with
 * plain stores inside a critical section; a writer takes the backing lock, revokes the
 * CPUs' read tokens and runs an IPI rendezvous (smp_rendezvous) so each CPU reports its
 * active readers, then waits for them. Userspace has no critical_enter and no IPI
 * handler, so the two halves become:
 *   - reader: push the lock on a per-thread stack of read holds (struct kl_rm_reader,
 *     embedded in the thread's registry record - type-stable, scannable, created on first
 *     use, recycled at thread exit), compiler barrier, test the writer bit;
 *   - writer: set the writer bit, membarrier(PRIVATE_EXPEDITED) - the userspace
 *     smp_rendezvous: a full barrier on every CPU running one of our threads -, then scan
 *     every thread record for a slot holding this lock and wait for each.
 * That membarrier costs 1-30 us (an IPI per CPU running our threads; a VM exit each in a
 * guest), so a lock written 1% of the time spent most of its time in it. Hence two modes:
 *   BIASED    (KL_RM_S_UNBIASED clear): as above. Readers: compiler barrier B. The first
 *             writer REVOKES the bias: D (membarrier) and the scan, and leaves the lock
 *             unbiased.
 *   UNBIASED  (KL_RM_S_UNBIASED set): readers add B', a full fence (ck_brlock's read
 *             side: a few ns), so a writer needs only D', a full fence, before its scan.
 *             The lock stays unbiased after a write: the next write costs no membarrier
 *             unless a reader re-armed the bias in between (FreeBSD keeps its read tokens
 *             between writes for the same reason).
 * POLICY (BRAVO, Dice & Kogan, USENIX ATC 2019). The revoking writer measures the
 * revocation (membarrier + scan + waiting for the biased readers it found), cost C, and
 * sets rearm_at = end + N*C with N = KL_RM_INHIBIT_MULT (KLOCK_RM_INHIBIT overrides it;
 * capped at RM_INHIBIT_MAX_NS). Every write bumps lk->writes. A reader on an unbiased,
 * writer-free lock looks at the clock every RM_REARM_READS fenced reads; past rearm_at it
 * re-arms (CAS UNBIASED -> 0) only if lk->writes has not moved since the window opened,
 * else it opens a new window of N*C. So the bias comes back only after a whole window
 * without a write: a lock written at least once per window (BRAVO's plain rule re-armed
 * between such writes and revoked again at once - 11 k revocations/s at 1% writes on the
 * 2-CPU VM, each one's IPIs stalling the readers) stays unbiased and pays no revocation.
 * BOUND: every revocation of cost C is followed by at least N*C of unbiased time, so
 * revocations take at most 1/(N+1) of the run time, at any write rate; reads pay the
 * fence instead only while writes keep coming. Without membarrier (fallback mode) the
 * lock never re-arms: every reader already runs the full fence (kl_rm_self stays the
 * dummy, B is a full fence), so nothing is gained by biasing; no write counts as a
 * revocation.
 *
 * STATE. lk->state (32 bits; readers load it on every lock and unlock):
 *   bit 0  KL_RM_S_WRITER   a writer owns the lock or is draining readers; readers back out
 *   bit 1  KL_RM_S_WSLEEP   the draining writer sleeps on lk->wseq waiting for the reader
 *                           record in lk->wait_for (or for lk->ovf when RM_WAIT_OVF)
 *   bit 2  RM_S_QUEUED      threads are parked on the lock (KL_RM_SLEEPABLE): unlock is slow
 *   bit 3  KL_RM_S_UNBIASED readers must run B'; writers skip the membarrier (set by every
 *                           writer's claim, cleared only by a re-arming reader, and only
 *                           from the exact value UNBIASED: never under a writer)
 *   RM_S_POISON             destroyed (has the writer bit, so a late reader waits, not races)
 *   lk->owner   the writer's owner id (locks/thread.h: one thread lifetime, never a
 *   recycled record, so a lock write-held by a thread that exited is nobody's); lk->ovf  read holds kept in the lock (a thread
 *   with all KL_RM_SLOTS slots in use, or a parked reader admitted when its slots were full)
 *   lk->rearm_at, unbiased_at, revoke_ns, revocations: written by the revoking writer under
 *   the write hold; unbiased_ns: added to by the re-arming reader that won the CAS, which
 *   also reports that completed stretch to the seam (kli_hook_rearmed: lockstat);
 *   writes: bumped by every writer under the hold; rearm_writes and rearm_at also by a
 *   reader that found writes inside an expired window (relaxed: a lost update only shifts
 *   the window).
 * Per thread (rm = kli_thread.rm): depth, slot[1..depth] a stack of held rmlocks (0 =
 * released out of order, compacted later), slot[0] == 0 always; unbiased_left counts the
 * fenced reads left before the next look at the re-arm clock.
 *
 * INVARIANTS.
 *   I1 A thread read-holds lk exactly as many times as its slots name lk, plus the
 *      overflow holds it took (counted in lk->ovf).
 *   I2 While KL_RM_S_WRITER is clear, no writer is past its fence (D or D').
 *   I3 A writer leaves rm_rendezvous()/rm_drain() only after one full pass over every
 *      record and lk->ovf found no hold of lk; from its fence until write_unlock every
 *      new reader sees the writer bit and backs out (except KL_RM_RECURSE re-entry, I4).
 *   I4 A KL_RM_RECURSE reader enters past a set writer bit only while it already holds lk
 *      in a lower slot: the draining writer is still waiting for that hold, and the new
 *      hold is published before the old one is released, so the writer's next pass sees it.
 *   I5 QUEUED implies WRITER: waiters queue only while a writer owns the lock, and the
 *      unlocking writer clears both, under the bucket lock, when the queue is empty.
 *   I6 A reader inside lk that passed only B (not B') read a state value without UNBIASED,
 *      i.e. one older in lk->state's modification order than the claim of the last
 *      revoking writer; that writer's D and scan saw its slot and waited for it (B/D). So
 *      once the lock is unbiased, every reader still inside passed B' - which is what a
 *      writer that skips the membarrier relies on. (UNBIASED is set again by every claim
 *      and cleared only by a CAS that finds no writer, so a claim that finds it set
 *      follows the last revocation with no re-arm in between.)
 *   I7 While WRITER is set, UNBIASED is set (claims and hand-offs set both; the release
 *      keeps UNBIASED): a writer handed the lock (K) needs no revocation.
 *
 * ORDERING. Labels are used in klock/rmlock.h (inline fast path) and here.
 *   B/D  asymmetric pair (biased lock): reader stores its slot, B = kli_fence_light() (a
 *        compiler barrier when membarrier is registered, else a seq_cst fence), loads
 *        state; revoking writer sets WRITER, D = kli_fence_heavy() (membarrier, or a seq_cst
 *        fence), loads the slots. Store-buffering: at least one side sees the other's store.
 *   B'/D' pair (unbiased lock): reader stores its slot, sees UNBIASED, B' = seq_cst
 *        fence, loads state again (that load decides); writer: D' = its claim CAS made
 *        seq_cst (a hand-off, which has no CAS, issues a seq_cst fence instead), then the
 *        scan's seq_cst loads of the slots. C11 (fence/seq_cst-operation rules): B' and the
 *        CAS are ordered in S. If the CAS comes first, the reader's load after B' sees
 *        WRITER (or later); if B' comes first, the scan's seq_cst loads, which follow the
 *        CAS in S, see the slot. No fence instruction on the writer: on x86 the CAS is a
 *        locked instruction and seq_cst loads are plain MOVs (an mfence less per write,
 *        uncontended write pair 23.9 -> see docs/design-readmostly.md); on aarch64 LDAR
 *        after the CAS's release store is ordered (RCsc). I6 makes D' enough.
 *   C/F  asymmetric pair: reader clears its slot (E), C = light fence, loads state for
 *        WSLEEP; writer sets wait_for and WSLEEP, F = heavy fence, re-reads the slot before
 *        sleeping. So a sleeping writer is always woken by the reader it waits for. F stays
 *        the membarrier in both modes (readers' unlock does not know the mode; sleeping is
 *        the slow path anyway).
 *   E    release store ending a read section; pairs with the acquire loads of the scan, so
 *        the write section happens after every read section it waited for.
 *   G    release of the write hold (state store / CAS); pairs with the readers' acquire
 *        loads of state and the next writer's acquire CAS: readers see the writer's data,
 *        and a re-arming reader sees the rearm_at/unbiased_at its writer stored.
 *   O    overflow holds: seq_cst RMWs on lk->ovf followed by a seq_cst fence (a full
 *        barrier on the reader side too, so B/D and B'/D' hold whatever the mode).
 *   K    hand-off: the unlocking writer publishes an admitted reader's hold (or passes
 *        WRITER to a writer) under the bucket lock before park.c's K1 release; the wakee
 *        reads it after K2.
 *   The re-arm CAS (UNBIASED -> 0) needs no ordering: a writer that then finds the lock
 *   biased revokes (D), which covers readers on either path.
 *
 * FAIRNESS. Writer preference: a writer's bit turns new readers away, so readers cannot
 * starve writers. With KL_RM_SLEEPABLE, blocked readers and writers queue FIFO on the lock
 * (parking lot); write_unlock admits the readers at the head of the queue on their behalf
 * and passes the lock directly to the first writer behind them (Linux percpu-rwsem's wake
 * function), so neither side starves. Without it, waiters spin (capped backoff, then
 * sched_yield) and a stream of writers can starve spinning readers.
 *
 * COSTS. Biased read lock+unlock: ~10 instructions each inline, all on the thread's own
 * line and the lock's read-mostly state line. Unbiased: plus one full fence and a second
 * load, inline; every RM_REARM_READS-th goes out of line to read the clock. Revoking
 * write: one membarrier (~0.5-30 us; it IPIs the CPUs running our threads), a scan of 14
 * words per thread record ever created, a second pass when readers were found, two clock
 * reads. Write on an unbiased lock: the seq_cst claim CAS and the scan, no fence
 * instruction (like ck_brlock's writer).
 * Policy state adds 40 bytes to the lock, written only at revocations and re-arms.
 *
 * LIMITS. Depth beyond KL_RM_SLOTS uses the shared overflow word (RMW + fence per read)
 * and cannot be admitted as a KL_RM_RECURSE re-entry. Not async-signal-safe. A thread that
 * exits holding a read lock has the hold dropped (debug builds report it): slot holds from
 * its slots, overflow holds from the list its record keeps of them (kli_thread.rm_ovf,
 * noted in rm_push(), forgotten in rm_unpublish()); one taken when no memory was left to
 * note it stays. Records of all
 * threads ever seen are scanned: a process that churned through thousands of threads
 * keeps a longer scan (records are recycled, so the count tracks peak concurrency). The
 * bound on revocation time is in wall time, not per reader: a revocation that waited for
 * a long read section measures that wait and stays unbiased N times longer (capped).
 * Binaries compiled against the pre-bias inline fast path (which ignored UNBIASED) must be
 * rebuilt: the inline path is part of the ABI.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <klock/rmlock.h>
#include "fence_impl.h"
#include "hooks.h"
#include "park.h"
#include "spin.h"
#include "thread.h"

#define RM_S_QUEUED 0x4u
#define RM_S_POISON 0x6b6b6b01u
#define RM_FLAGS_VALID (KL_RM_RECURSE | KL_RM_SLEEPABLE)

/* Spin budget before a waiter yields (spinning mode) or sleeps (KL_RM_SLEEPABLE): longer
 * than a typical read section, shorter than a sleep/wake round trip (~5-10 us). */
#define RM_SPIN_NS 20000u
/* Sleepable waiters spin this long before parking: about two wake-ups' cost. A parked
 * reader is admitted by the next write_unlock, and the writer after that must wait for
 * it to be scheduled; with 4 us the sleepable lock fell 10-100x behind the spinning one
 * at 0.1-50% writes on a 2-CPU host, with 10 us 1-10x (docs/design-readmostly.md). */
#define RM_SLEEP_SPIN_NS 10000u
/* lk->wait_for value: the sleeping writer waits for lk->ovf to reach 0. */
#define RM_WAIT_OVF ((uintptr_t)1)
/* Park tokens handed by write_unlock. */
#define RM_TOKEN_HANDOFF 1u  /* a writer: you own KL_RM_S_WRITER now */
#define RM_TOKEN_ADMIT 2u    /* a reader: a read hold was published on your behalf */
/* kl_rm_tracker.magic while it describes a live hold ("rmtr"). */
#define RM_TRACKER_MAGIC 0x726d7472u
/* Fenced (unbiased) reads a thread makes between two looks at the re-arm clock: a clock
 * read costs about two fenced reads, so this keeps it under 2% of an unbiased read. */
#define RM_REARM_READS 64u
/* Longest inhibit window: a revocation stretched by a preemption must not keep the lock
 * unbiased for seconds (100 ms is 10^4 membarriers on a quiet host). */
#define RM_INHIBIT_MAX_NS 100000000ull
/* KLOCK_RM_INHIBIT accepts multiples up to this. */
#define RM_INHIBIT_MULT_MAX 100000ul

/* Every thread's kl_rm_self until its first out-of-line read (and always without
 * membarrier): depth == KL_RM_SLOTS and slot[KL_RM_SLOTS] == 0 fail both inline tests,
 * so the inline path never writes it. */
static struct kl_rm_reader rm_full = { .depth = KL_RM_SLOTS };

KL_RM_TLS struct kl_rm_reader *kl_rm_self = &rm_full;

static pthread_once_t rm_once = PTHREAD_ONCE_INIT;

/* ---- per-thread read holds ---------------------------------------------------------- */

/* Drops released (zero) slots from the top of the stack. */
static void rm_compact(struct kl_rm_reader *r)
{
	while (r->depth > 0 &&
	       atomic_load_explicit(&r->slot[r->depth], memory_order_relaxed) == 0)
		r->depth--;
}

/* Topmost slot of @r holding @lk, or 0. */
static uint32_t rm_find(const struct kl_rm_reader *r, const struct kl_rmlock *lk)
{
	for (uint32_t i = r->depth; i > 0; i--)
		if (atomic_load_explicit(&r->slot[i], memory_order_relaxed) == (uintptr_t)lk)
			return i;
	return 0;
}

/* A writer's look at another thread's record: the topmost slot holding @lk, or 0. Every
 * slot, not just those up to the owner's depth (depth is the owner's private word, and a
 * depth-bounded scan, tried, made the writer-against-writer case slower: with the scan
 * shorter, a waiting writer took the lock over on every release - 0.67x the 100%-write
 * throughput). seq_cst loads: the writer's half of B'/D' (plain MOVs on x86). */
static uint32_t rm_held(const struct kl_rm_reader *r, const struct kl_rmlock *lk)
{
	for (uint32_t i = KL_RM_SLOTS; i > 0; i--)
		if (atomic_load_explicit(&r->slot[i], memory_order_seq_cst) ==
		    (uintptr_t)lk) /* E; D': pairs with B' */
			return i;
	return 0;
}

/* True when @r holds @lk in a slot below @idx (an outer hold; @idx 0: none). */
static bool rm_holds_below(const struct kl_rm_reader *r, const struct kl_rmlock *lk,
			   uint32_t idx)
{
	while (idx-- > 1)
		if (atomic_load_explicit(&r->slot[idx], memory_order_relaxed) == (uintptr_t)lk)
			return true;
	return false;
}

/* True if some record or the overflow count holds @lk now (one pass, no waiting). The
 * loads are seq_cst: with the claim's seq_cst CAS they are the writer's half of B'/D'
 * (a plain MOV on x86, LDAR on aarch64). */
static bool rm_any_reader(const struct kl_rmlock *lk)
{
	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next)
		if (rm_held(&t->rm, lk) != 0)
			return true;
	return atomic_load_explicit(&lk->ovf, memory_order_seq_cst) != 0; /* E; D'/O */
}

/* The reader's look at the state once its hold is published (B or O before it). On an
 * unbiased lock writers skip the membarrier, so the compiler barrier B is not enough:
 * add B', a full fence, and look again; that look decides. */
static inline uint32_t rm_read_state(const struct kl_rmlock *lk)
{
	uint32_t s = atomic_load_explicit(&lk->state, memory_order_acquire); /* G */

	if ((s & KL_RM_S_UNBIASED) && kli_fence_asym) {
		atomic_thread_fence(memory_order_seq_cst); /* B': pairs with D' in rm_rendezvous() */
		s = atomic_load_explicit(&lk->state, memory_order_acquire); /* G */
	}
	return s;
}

/* The inhibit multiple: KL_RM_INHIBIT_MULT, or KLOCK_RM_INHIBIT (read once; 0 allowed:
 * re-arm at once, FreeBSD's token behaviour alone). Stored plus one, 0 = not read yet. */
static uint64_t rm_inhibit_mult(void)
{
	static _Atomic uint32_t mult1;
	uint32_t m = atomic_load_explicit(&mult1, memory_order_relaxed);

	if (kl_unlikely(m == 0)) {
		const char *e = getenv("KLOCK_RM_INHIBIT");
		char *end = NULL;
		unsigned long v = e != NULL ? strtoul(e, &end, 10) : KL_RM_INHIBIT_MULT;

		if (e != NULL && (end == e || *end != '\0' || v > RM_INHIBIT_MULT_MAX))
			v = KL_RM_INHIBIT_MULT;
		m = (uint32_t)v + 1;
		atomic_store_explicit(&mult1, m, memory_order_relaxed);
	}
	return m - 1;
}

/* The inhibit window: N times the last revocation's cost, capped. */
static uint64_t rm_window(const struct kl_rmlock *lk)
{
	uint64_t win = atomic_load_explicit(&lk->revoke_ns, memory_order_relaxed) *
		       rm_inhibit_mult();

	return win < RM_INHIBIT_MAX_NS ? win : RM_INHIBIT_MAX_NS;
}

/* An unbiased lock with no writer: every RM_REARM_READS-th fenced read of this thread
 * looks at the clock. Once the inhibit window has passed, it re-arms the bias if no write
 * came since the last look; if writes did come, it opens a new window instead (so a lock
 * written every few windows or more often stays unbiased and pays no revocation at all:
 * FreeBSD's tokens kept between writes, as a time rule). The CAS fails harmlessly when a
 * writer or another reader got there first; racing window updates only shift the window.
 * Without membarrier the lock stays unbiased for ever: there is no cheaper read path to
 * return to. */
static void rm_maybe_rearm(struct kl_rmlock *lk, struct kl_rm_reader *r)
{
	uint32_t s = KL_RM_S_UNBIASED, wr;
	uint64_t now;

	if (r->unbiased_left != 0) {
		r->unbiased_left--;
		return;
	}
	r->unbiased_left = RM_REARM_READS;
	if (!kli_fence_asym)
		return;
	now = kli_now_ns();
	if (now < atomic_load_explicit(&lk->rearm_at, memory_order_relaxed))
		return;
	wr = atomic_load_explicit(&lk->writes, memory_order_relaxed);
	if (wr != atomic_load_explicit(&lk->rearm_writes, memory_order_relaxed)) {
		atomic_store_explicit(&lk->rearm_writes, wr, memory_order_relaxed);
		atomic_store_explicit(&lk->rearm_at, now + rm_window(lk), memory_order_relaxed);
		return;
	}
	if (atomic_compare_exchange_strong_explicit(&lk->state, &s, 0, memory_order_relaxed,
						    memory_order_relaxed)) {
		uint64_t stretch =
			now - atomic_load_explicit(&lk->unbiased_at, memory_order_relaxed);

		atomic_fetch_add_explicit(&lk->unbiased_ns, stretch, memory_order_relaxed);
		kli_hook_rearmed(lk, KLI_KIND_RMLOCK, stretch);   /* the stretch it closes */
	}
}

/* Wakes the writer sleeping for @who (a reader record, or RM_WAIT_OVF). */
static void rm_wake_writer(struct kl_rmlock *lk, uintptr_t who)
{
	if (atomic_load_explicit(&lk->wait_for, memory_order_relaxed) == who) {
		atomic_fetch_add_explicit(&lk->wseq, 1, memory_order_release);
		kl_wake(&lk->wseq, 1);
	}
}

/* Records a hold of @lk in @r: a slot if one is free, else the overflow count. Used by
 * the thread itself and, while it is parked, by the writer admitting it (K). Returns the
 * slot, or 0 for an overflow hold. No fence: callers add the one they need. */
static uint32_t rm_push(struct kl_rm_reader *r, struct kl_rmlock *lk)
{
	uint32_t d;

	rm_compact(r);
	d = r->depth;
	if (kl_likely(d < KL_RM_SLOTS)) {
		r->depth = d + 1;
		atomic_store_explicit(&r->slot[d + 1], (uintptr_t)lk, memory_order_relaxed);
		return d + 1;
	}
	atomic_fetch_add_explicit(&lk->ovf, 1, memory_order_seq_cst); /* O */
	kli_thread_ovf_push(kli_thread_of_rm(r), (uintptr_t)lk); /* for rm_thread_exit() */
	return 0;
}

/* Publishes a hold and orders it before the caller's load of lk->state (B or O). */
static uint32_t rm_publish(struct kl_rm_reader *r, struct kl_rmlock *lk)
{
	uint32_t idx = rm_push(r, lk);

	if (kl_likely(idx != 0))
		kli_fence_light(); /* B: light half, pairs with D in rm_rendezvous() */
	else
		atomic_thread_fence(memory_order_seq_cst); /* O: full barrier after the RMW */
	return idx;
}

/* Drops the hold in slot @idx (0: an overflow hold) and wakes a writer sleeping on it. */
static void rm_unpublish(struct kl_rmlock *lk, struct kl_rm_reader *r, uint32_t idx)
{
	if (kl_likely(idx != 0)) {
		atomic_store_explicit(&r->slot[idx], 0, memory_order_release); /* E */
		rm_compact(r);
		kli_fence_light(); /* C: light half, pairs with F in rm_wait_slot() */
		if (atomic_load_explicit(&lk->state, memory_order_relaxed) & KL_RM_S_WSLEEP)
			rm_wake_writer(lk, (uintptr_t)r);
		return;
	}
	kli_thread_ovf_drop(kli_thread_of_rm(r), (uintptr_t)lk);
	/* E + O: the RMW is a release and a full barrier. */
	if (atomic_fetch_sub_explicit(&lk->ovf, 1, memory_order_seq_cst) == 1 &&
	    (atomic_load_explicit(&lk->state, memory_order_seq_cst) & KL_RM_S_WSLEEP))
		rm_wake_writer(lk, RM_WAIT_OVF);
}

/* A thread exits: drop whatever it still read-holds, in its slots and in locks' overflow
 * counts (a leak the debug build reports), so writers do not wait for it for ever, and
 * forget its record in the TLS pointer. */
static void rm_thread_exit(struct kli_thread *t)
{
	struct kl_rm_reader *r = &t->rm;
	uintptr_t ovf;

	for (uint32_t i = r->depth; i > 0; i--) {
		struct kl_rmlock *lk = (struct kl_rmlock *)atomic_load_explicit(
			&r->slot[i], memory_order_relaxed);

		if (lk == NULL)
			continue;
#if KLOCK_DEBUG_LOCKS
		kli_report("thread exit with a read lock held", "rmlock", lk, NULL,
			   "the hold is dropped");
#endif
		rm_unpublish(lk, r, i);
	}
	while ((ovf = kli_thread_ovf_any(t)) != 0) { /* rm_unpublish() forgets it */
#if KLOCK_DEBUG_LOCKS
		kli_report("thread exit with a read lock held", "rmlock", (void *)ovf, NULL,
			   "the hold is dropped");
#endif
		rm_unpublish((struct kl_rmlock *)ovf, r, 0);
	}
	r->depth = 0;
	kl_rm_self = &rm_full;
}

/* fork() child: only the calling thread exists; other records' holds are meaningless. */
static void rm_atfork_child(void)
{
	struct kli_thread *self = kli_tls_self;

	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next) {
		if (t == self)
			continue;
		for (uint32_t i = 0; i <= KL_RM_SLOTS; i++)
			atomic_store_explicit(&t->rm.slot[i], 0, memory_order_relaxed);
		t->rm.depth = 0;
	}
}

static void rm_global_init(void)
{
	kli_thread_on_exit(rm_thread_exit);
	pthread_atfork(NULL, NULL, rm_atfork_child);
}

/* The caller's record, with its inline fast path enabled when the fence pair is
 * asymmetric (without membarrier the inline path's compiler barrier would be wrong). */
static struct kli_thread *rm_attach(void)
{
	struct kli_thread *self = kli_self();

	if (kl_unlikely(kl_rm_self != &self->rm)) {
		pthread_once(&rm_once, rm_global_init);
		if (kli_fence_asym)
			kl_rm_self = &self->rm;
	}
	return self;
}

/* ---- debug-build contract checks ---------------------------------------------------- */
#if KLOCK_DEBUG_LOCKS
static bool rm_check_alive(const struct kl_rmlock *lk, const void *site)
{
	if (atomic_load_explicit(&lk->state, memory_order_relaxed) != RM_S_POISON)
		return true;
	kli_report("use of a destroyed lock", "rmlock", lk, site, NULL);
	return false;
}

/* Returns false (after reporting) when the call must be ignored: a destroyed lock. */
static bool rm_check_read(struct kl_rmlock *lk, struct kli_thread *self, const void *site)
{
	if (!rm_check_alive(lk, site))
		return false;
	if (atomic_load_explicit(&lk->owner, memory_order_relaxed) == self->owner)
		kli_report("read lock of a lock this thread write-holds (deadlock)", "rmlock", lk,
			   site, NULL);
	if (!(lk->flags & KL_RM_RECURSE) && rm_find(&self->rm, lk) != 0)
		kli_report("recursive read lock of a lock without KL_RM_RECURSE", "rmlock", lk,
			   site,
			   (atomic_load_explicit(&lk->state, memory_order_relaxed) &
			    KL_RM_S_WRITER) ? "a writer is waiting: this deadlocks now"
					    : "deadlocks whenever a writer is waiting");
	return true;
}

/* Returns false when the unlock must not proceed. */
static bool rm_check_unlock(struct kl_rmlock *lk, struct kl_rm_tracker *tr,
			    struct kli_thread *self, const void *site)
{
	if (!rm_check_alive(lk, site))
		return false;
	if (tr->magic != RM_TRACKER_MAGIC) {
		kli_report("read unlock without a read lock (tracker not in use)", "rmlock", lk,
			   site, NULL);
		return false;
	}
	if (tr->lock != lk) {
		kli_report("read unlock with the tracker of another lock", "rmlock", lk, site,
			   NULL);
		return false;
	}
	if (tr->owner != self) {
		kli_report("read unlock by a thread that did not take the read lock", "rmlock",
			   lk, site, NULL);
		return false;
	}
	return true;
}

static bool rm_check_write(struct kl_rmlock *lk, struct kli_thread *self, const void *site)
{
	if (!rm_check_alive(lk, site))
		return false;
	if (atomic_load_explicit(&lk->owner, memory_order_relaxed) == self->owner)
		kli_report("recursive write lock (deadlock)", "rmlock", lk, site, NULL);
	if (rm_find(&self->rm, lk) != 0)
		kli_report("write lock of a lock this thread read-holds (deadlock)", "rmlock", lk,
			   site, NULL);
	return true;
}
#else
static inline bool rm_check_read(struct kl_rmlock *lk, struct kli_thread *self,
				 const void *site)
{
	(void)lk, (void)self, (void)site;
	return true;
}

static inline bool rm_check_unlock(struct kl_rmlock *lk, struct kl_rm_tracker *tr,
				   struct kli_thread *self, const void *site)
{
	(void)lk, (void)tr, (void)self, (void)site;
	return true;
}

static inline bool rm_check_write(struct kl_rmlock *lk, struct kli_thread *self,
				  const void *site)
{
	(void)lk, (void)self, (void)site;
	return true;
}
#endif

/* ---- init / destroy ----------------------------------------------------------------- */

int kl_rmlock_init(struct kl_rmlock *lk, unsigned flags)
{
	if (flags & ~RM_FLAGS_VALID)
		return EINVAL;
	kli_init();
	*lk = (struct kl_rmlock)KL_RMLOCK_INITIALIZER(flags);
	kli_hook_created(lk, KLI_KIND_RMLOCK, (flags & KL_RM_RECURSE) ? KLI_HF_RECURSE : 0);
	return 0;
}


int kl_rmlock_destroy(struct kl_rmlock *lk)
{
	uint32_t s = atomic_load_explicit(&lk->state, memory_order_acquire);

	if (s == RM_S_POISON || (s & (KL_RM_S_WRITER | RM_S_QUEUED))) {
#if KLOCK_DEBUG_LOCKS
		kli_report(s == RM_S_POISON ? "destroy of a destroyed lock"
					    : "destroy of a write-held lock",
			   "rmlock", lk, KLI_SITE(), NULL);
#endif
		return EBUSY;
	}
	if (rm_any_reader(lk)) {
#if KLOCK_DEBUG_LOCKS
		kli_report("destroy of a read-held lock", "rmlock", lk,
			   KLI_SITE(), NULL);
#endif
		return EBUSY;
	}
	atomic_store_explicit(&lk->state, RM_S_POISON, memory_order_relaxed);
	kli_hook_destroyed(lk, KLI_KIND_RMLOCK);
	return 0;
}

/* ---- readers -------------------------------------------------------------------------- */

/* Under the bucket lock: park only while a writer owns the lock, and mark the queue (I5).
 * The mark must be a CAS that requires the writer bit: write_unlock's fast CAS
 * (WRITER -> 0) runs outside the bucket lock, and a blind fetch_or after it would leave
 * QUEUED without a writer (no writer could ever get in again). */
static bool rm_park_validate(void *arg)
{
	struct kl_rmlock *lk = arg;
	uint32_t s = atomic_load_explicit(&lk->state, memory_order_relaxed);

	while ((s & KL_RM_S_WRITER) && s != RM_S_POISON) {
		if ((s & RM_S_QUEUED) ||
		    atomic_compare_exchange_weak_explicit(&lk->state, &s, s | RM_S_QUEUED,
							  memory_order_relaxed,
							  memory_order_relaxed))
			return true;
	}
	return false;
}

/* Parks the caller as a @role on @lk's FIFO; returns the token (0: not queued). */
static uintptr_t rm_park(struct kl_rmlock *lk, struct kli_thread *self, uint8_t role,
			 struct kli_wait *w)
{
	struct kli_park_req req = { .key = lk, .validate = rm_park_validate, .arg = lk };
	uintptr_t token = 0;

	self->rdm_role = role;
	kli_wait_sleep(w);
	if (kli_park(&req, &token) != KLI_PARK_UNPARKED)
		token = 0;
	self->rdm_role = KLI_RDM_NONE;
	return token;
}

/* Spins with capped backoff until (state & @mask) == 0. @forever: yield after each
 * budget and keep going (spinning mode); else give up after one budget (pre-sleep spin).
 * Returns true once clear. */
static bool rm_spin_until_clear(struct kl_rmlock *lk, uint32_t mask, bool forever)
{
	struct kli_spin sp;

	for (;;) {
		kli_spin_start(&sp, forever ? RM_SPIN_NS : RM_SLEEP_SPIN_NS);
		do {
			if (!(atomic_load_explicit(&lk->state, memory_order_relaxed) & mask))
				return true;
		} while (kli_spin_backoff(&sp));
		if (!forever)
			return false;
		kli_yield();
	}
}

/* Waits for the writer to go. Returns true if the unlocking writer admitted us (K). */
static bool rm_wait_writer(struct kl_rmlock *lk, struct kli_thread *self, struct kli_wait *w)
{
	bool sleepable = lk->flags & KL_RM_SLEEPABLE;

	kli_wait_spin(w);
	if (rm_spin_until_clear(lk, KL_RM_S_WRITER, !sleepable))
		return false;
	return rm_park(lk, self, KLI_RDM_READER, w) == RM_TOKEN_ADMIT;
}

static void rm_tracker_set(struct kl_rm_tracker *tr, struct kl_rmlock *lk,
			   struct kli_thread *self, uint32_t idx)
{
	tr->lock = lk;
	tr->owner = self;
	tr->magic = RM_TRACKER_MAGIC;
	tr->idx = idx;
}

/* Takes a read hold (the whole protocol, out of line). @try: give up instead of waiting. */
static KL_NOINLINE bool rm_read_slow(struct kl_rmlock *lk, struct kl_rm_tracker *tr, bool try,
				     const void *site)
{
	struct kli_thread *self = rm_attach();
	struct kl_rm_reader *r = &self->rm;
	struct kli_wait w;
	bool waited = false;
	uint32_t idx, s = 0;

	if (!rm_check_read(lk, self, site))
		return false;
	for (;;) {
		idx = rm_publish(r, lk);
		s = rm_read_state(lk);
		if (kl_likely(!(s & KL_RM_S_WRITER)))
			break;
		/* I4: re-entry while the writer still waits for our outer hold. */
		if ((lk->flags & KL_RM_RECURSE) && rm_holds_below(r, lk, idx))
			break;
		rm_unpublish(lk, r, idx);
		if (try)
			return false;
		if (!waited) {
			kli_wait_begin(&w);
			waited = true;
		}
		if (rm_wait_writer(lk, self, &w)) {
			idx = rm_find(r, lk); /* admitted on our behalf; 0 if in lk->ovf */
			s = 0;
			break;
		}
	}
	if (s == KL_RM_S_UNBIASED)
		rm_maybe_rearm(lk, r);
	if (waited)
		kli_wait_end(&w, lk, KLI_KIND_RMLOCK, KLI_HF_READ, site);
	rm_tracker_set(tr, lk, self, idx);
	return true;
}

void (kl_rmlock_read_lock)(struct kl_rmlock *lk, struct kl_rm_tracker *tr)
{

	kli_hook_acquire(lk, KLI_KIND_RMLOCK, KLI_HF_READ, KLI_SITE());
	rm_read_slow(lk, tr, false, KLI_SITE());
	kli_hook_acquired(lk, KLI_KIND_RMLOCK, KLI_HF_READ, KLI_SITE());
}

bool kl_rmlock_read_trylock(struct kl_rmlock *lk, struct kl_rm_tracker *tr)
{
	bool ok;

	kli_hook_acquire(lk, KLI_KIND_RMLOCK, KLI_HF_READ | KLI_HF_TRY, KLI_SITE());
	ok = rm_read_slow(lk, tr, true, KLI_SITE());
	kli_hook_acquired(lk, KLI_KIND_RMLOCK,
			  KLI_HF_READ | KLI_HF_TRY | (ok ? 0 : KLI_HF_FAILED), KLI_SITE());
	return ok;
}

void (kl_rmlock_read_unlock)(struct kl_rmlock *lk, struct kl_rm_tracker *tr)
{
	struct kli_thread *self = kli_self();
	struct kl_rm_reader *r = &self->rm;
	uint32_t idx;

	if (!rm_check_unlock(lk, tr, self, KLI_SITE()))
		return;
	idx = rm_find(r, lk);
#if KLOCK_DEBUG_LOCKS
	if (idx == 0 && atomic_load_explicit(&lk->ovf, memory_order_relaxed) == 0) {
		kli_report("read unlock of a lock not read-held", "rmlock", lk, KLI_SITE(), NULL);
		return;
	}
	tr->magic = 0;
#endif
	kli_hook_release(lk, KLI_KIND_RMLOCK, KLI_HF_READ, KLI_SITE());
	rm_unpublish(lk, r, idx);
	kli_hook_released(lk, KLI_KIND_RMLOCK, KLI_HF_READ);
}

/* ---- writers -------------------------------------------------------------------------- */

/* Claims the writer bit if the lock is free (state 0, or KL_RM_S_UNBIASED alone), and
 * leaves the lock unbiased: the write that follows keeps readers on the fenced path.
 * *@was_unbiased: the bias was already off, so no revocation is due. */
static inline bool rm_claim(struct kl_rmlock *lk, bool *was_unbiased)
{
	uint32_t s = atomic_load_explicit(&lk->state, memory_order_relaxed) & KL_RM_S_UNBIASED;

	do {
		/* G, and D': the seq_cst CAS is the writer's half of B'/D' */
		if (atomic_compare_exchange_strong_explicit(&lk->state, &s,
							    KL_RM_S_WRITER | KL_RM_S_UNBIASED,
							    memory_order_seq_cst,
							    memory_order_relaxed)) {
			*was_unbiased = s != 0;
			return true;
		}
	} while ((s & ~KL_RM_S_UNBIASED) == 0);
	return false;
}

/* Becomes the writer (sets KL_RM_S_WRITER) when the fast CAS failed. */
static KL_NOINLINE void rm_write_acquire_slow(struct kl_rmlock *lk, struct kli_thread *self,
					      struct kli_wait *w, bool *was_unbiased)
{
	bool sleepable = lk->flags & KL_RM_SLEEPABLE;

	for (;;) {
		kli_wait_spin(w);
		rm_spin_until_clear(lk, ~KL_RM_S_UNBIASED, !sleepable);
		if (rm_claim(lk, was_unbiased))
			return;
		if (sleepable && rm_park(lk, self, KLI_RDM_WRITER, w) == RM_TOKEN_HANDOFF) {
			/* K: the previous writer passed KL_RM_S_WRITER to us; the lock has been
			 * unbiased since that writer's claim (no reader re-arms under WRITER).
			 * No CAS of ours: D' as a fence. */
			atomic_thread_fence(memory_order_seq_cst); /* D': pairs with B' */
			*was_unbiased = true;
			return;
		}
	}
}

/* Waits until the reader record @r no longer holds @lk in slot @i. */
static void rm_wait_slot(struct kl_rmlock *lk, struct kl_rm_reader *r, uint32_t i,
			 struct kli_wait *w)
{
	const _Atomic uintptr_t *slot = &r->slot[i];
	struct kli_spin sp;
	uint32_t seq;

	kli_wait_spin(w);
	kli_spin_start(&sp, RM_SPIN_NS);
	while (atomic_load_explicit(slot, memory_order_acquire) == (uintptr_t)lk) { /* E */
		if (kli_spin_backoff(&sp))
			continue;
		if (!(lk->flags & KL_RM_SLEEPABLE)) {
			kli_yield();
			kli_spin_start(&sp, RM_SPIN_NS);
			continue;
		}
		seq = atomic_load_explicit(&lk->wseq, memory_order_acquire);
		atomic_store_explicit(&lk->wait_for, (uintptr_t)r, memory_order_relaxed);
		atomic_fetch_or_explicit(&lk->state, KL_RM_S_WSLEEP, memory_order_relaxed);
		kli_fence_heavy(); /* F: heavy half, pairs with C in the reader's unlock */
		if (atomic_load_explicit(slot, memory_order_acquire) == (uintptr_t)lk) {
			kli_wait_sleep(w);
			kl_wait(&lk->wseq, seq, NULL);
		}
		kli_wait_spin(w);
	}
}

/* Waits until lk->ovf drains (overflow and admitted holds). */
static void rm_wait_ovf(struct kl_rmlock *lk, struct kli_wait *w)
{
	struct kli_spin sp;
	uint32_t seq;

	kli_wait_spin(w);
	kli_spin_start(&sp, RM_SPIN_NS);
	while (atomic_load_explicit(&lk->ovf, memory_order_acquire) != 0) {
		if (kli_spin_backoff(&sp))
			continue;
		if (!(lk->flags & KL_RM_SLEEPABLE)) {
			kli_yield();
			kli_spin_start(&sp, RM_SPIN_NS);
			continue;
		}
		seq = atomic_load_explicit(&lk->wseq, memory_order_acquire);
		atomic_store_explicit(&lk->wait_for, RM_WAIT_OVF, memory_order_relaxed);
		atomic_fetch_or_explicit(&lk->state, KL_RM_S_WSLEEP, memory_order_seq_cst);
		atomic_thread_fence(memory_order_seq_cst); /* O: pairs with the RMW on ovf */
		if (atomic_load_explicit(&lk->ovf, memory_order_acquire) != 0) {
			kli_wait_sleep(w);
			kl_wait(&lk->wseq, seq, NULL);
		}
		kli_wait_spin(w);
	}
}

/* One pass over every record and the overflow count, waiting for each hold of @lk it
 * finds; true if it found any (the caller passes again: I3). */
static bool rm_scan(struct kl_rmlock *lk, struct kli_wait *w)
{
	bool found = false;

	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next) {
		uint32_t i;

		while ((i = rm_held(&t->rm, lk)) != 0) { /* E; D' */
			found = true;
			rm_wait_slot(lk, &t->rm, i, w);
		}
	}
	if (atomic_load_explicit(&lk->ovf, memory_order_seq_cst) != 0) { /* E; D'/O */
		found = true;
		rm_wait_ovf(lk, w);
	}
	return found;
}

/* The rendezvous, first half: after KL_RM_S_WRITER is set, make every reader either
 * visible or turned away, and look once. A biased lock is revoked (D, the membarrier:
 * readers may have used only the compiler barrier B); on an unbiased one every reader
 * that can still be inside passed B', so D' is enough: the claim's seq_cst CAS (or the
 * hand-off's fence) followed by the scan's seq_cst loads - no fence instruction here.
 * Without membarrier every reader's B is a full fence, so the same D' serves. *@t0: when
 * the revocation began (0: none). True when no reader holds the lock: the common case,
 * which never touches a wait episode. */
static inline bool rm_rendezvous(struct kl_rmlock *lk, bool was_unbiased, uint64_t *t0)
{
	*t0 = 0;
	if (!was_unbiased && kli_fence_asym) {
		*t0 = kli_now_ns();
		kli_fence_heavy(); /* D: heavy half (membarrier), pairs with B in every reader */
	}
	return !rm_any_reader(lk); /* D': pairs with B' in the readers */
}

/* The writer holds the lock: count the write (every write, so that re-arming readers see
 * whether the window they close was write-free). Under the write hold: a plain increment. */
static inline void rm_count_write(struct kl_rmlock *lk)
{
	atomic_store_explicit(&lk->writes,
			      atomic_load_explicit(&lk->writes, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/* A revocation that began at @t0 is complete (every reader drained): open the inhibit
 * window, KL_RM_INHIBIT_MULT times its cost, count the revocation and report it to the
 * seam (lockstat). Under the write hold; readers read the policy words only after an
 * acquire load of state saw the release G. Out of line: the common write (an unbiased
 * lock) never comes here, and @site is evaluated only on this call. */
static KL_NOINLINE void rm_revoked(struct kl_rmlock *lk, uint64_t t0, const void *site)
{
	uint64_t now = kli_now_ns();

	atomic_store_explicit(&lk->revoke_ns, now - t0, memory_order_relaxed);
	atomic_store_explicit(&lk->rearm_writes,
			      atomic_load_explicit(&lk->writes, memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(&lk->rearm_at, now + rm_window(lk), memory_order_relaxed);
	atomic_store_explicit(&lk->unbiased_at, t0, memory_order_relaxed);
	atomic_store_explicit(&lk->revocations,
			      atomic_load_explicit(&lk->revocations, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	kli_hook_revoked(lk, KLI_KIND_RMLOCK, now - t0, site);
}

/* Second half: wait for the readers seen until a pass finds none (I3). */
static void rm_drain(struct kl_rmlock *lk, struct kli_wait *w)
{
	while (rm_scan(lk, w))
		;
	if (atomic_load_explicit(&lk->state, memory_order_relaxed) & KL_RM_S_WSLEEP) {
		atomic_store_explicit(&lk->wait_for, 0, memory_order_relaxed);
		atomic_fetch_and_explicit(&lk->state, ~KL_RM_S_WSLEEP, memory_order_relaxed);
	}
}

/* write_lock when the CAS failed (@have_writer false: wait for the writer bit) or the
 * rendezvous saw readers: one wait episode for the whole acquisition. */
static KL_NOINLINE void rm_write_lock_slow(struct kl_rmlock *lk, struct kli_thread *self,
					   bool have_writer, uint64_t *t0, const void *site)
{
	struct kli_wait w;
	bool was_unbiased;

	kli_wait_begin(&w);
	if (!have_writer) {
		rm_write_acquire_slow(lk, self, &w, &was_unbiased);
		(void)rm_rendezvous(lk, was_unbiased, t0); /* D or D' */
	}
	rm_drain(lk, &w);
	kli_wait_end(&w, lk, KLI_KIND_RMLOCK, 0, site);
}

void kl_rmlock_write_lock(struct kl_rmlock *lk)
{
	struct kli_thread *self = kli_self();
	bool have_writer, was_unbiased = false;
	uint64_t t0 = 0;

	if (!rm_check_write(lk, self, KLI_SITE()))
		return;
	kli_hook_acquire(lk, KLI_KIND_RMLOCK, 0, KLI_SITE());
	have_writer = rm_claim(lk, &was_unbiased);
	if (kl_unlikely(!have_writer || !rm_rendezvous(lk, was_unbiased, &t0)))
		rm_write_lock_slow(lk, self, have_writer, &t0, KLI_SITE());
	rm_count_write(lk);
	if (kl_unlikely(t0 != 0))
		rm_revoked(lk, t0, KLI_SITE());
	atomic_store_explicit(&lk->owner, self->owner, memory_order_relaxed);
	kli_hook_acquired(lk, KLI_KIND_RMLOCK, 0, KLI_SITE());
}

/* Under the bucket lock, once write_unlock's dequeue is decided: admit a reader (publish
 * its hold for it) or pass the lock to a writer; clear the state when nobody remains. */
struct rm_unpark_ctx {
	struct kl_rmlock *lk;
	bool again;
};

static uintptr_t rm_unpark_cb(const struct kli_unpark_result *res, void *arg)
{
	struct rm_unpark_ctx *c = arg;
	struct kl_rmlock *lk = c->lk;

	c->again = false;
	if (!res->unparked) {
		atomic_store_explicit(&lk->state, KL_RM_S_UNBIASED, memory_order_release); /* G, I5 */
		return 0;
	}
	if (res->thread->rdm_role == KLI_RDM_WRITER) {
		atomic_store_explicit(&lk->state,
				      KL_RM_S_WRITER | KL_RM_S_UNBIASED |
					      (res->more ? RM_S_QUEUED : 0),
				      memory_order_release);
		return RM_TOKEN_HANDOFF; /* K */
	}
	rm_push(&res->thread->rm, lk); /* K: ordered before the wakee by K1 */
	if (res->more)
		c->again = true;
	else
		atomic_store_explicit(&lk->state, KL_RM_S_UNBIASED, memory_order_release); /* G, I5 */
	return RM_TOKEN_ADMIT;
}

static KL_NOINLINE void rm_unlock_slow(struct kl_rmlock *lk)
{
	struct rm_unpark_ctx c = { .lk = lk };

	do
		kli_unpark_one(lk, rm_unpark_cb, &c);
	while (c.again);
}

/* Releases the write hold: the common tail of write_unlock and a failed write_trylock. */
static void rm_write_release(struct kl_rmlock *lk)
{
	uint32_t w = KL_RM_S_WRITER | KL_RM_S_UNBIASED;

	atomic_store_explicit(&lk->owner, 0, memory_order_relaxed);
	/* The lock stays unbiased: the next write skips the membarrier unless a reader
	 * re-armed the bias in between (FreeBSD's read tokens, kept between writes). */
	if (kl_unlikely(!atomic_compare_exchange_strong_explicit(
		    &lk->state, &w, KL_RM_S_UNBIASED, memory_order_release, /* G */
		    memory_order_relaxed)))
		rm_unlock_slow(lk);
}

bool kl_rmlock_write_trylock(struct kl_rmlock *lk)
{
	struct kli_thread *self = kli_self();
	bool was_unbiased, none;
	uint64_t t0;

	if (!rm_check_write(lk, self, KLI_SITE()))
		return false;
	kli_hook_acquire(lk, KLI_KIND_RMLOCK, KLI_HF_TRY, KLI_SITE());
	if (!rm_claim(lk, &was_unbiased)) {
		kli_hook_acquired(lk, KLI_KIND_RMLOCK, KLI_HF_TRY | KLI_HF_FAILED, KLI_SITE());
		return false;
	}
	none = rm_rendezvous(lk, was_unbiased, &t0);
	rm_count_write(lk);
	if (kl_unlikely(t0 != 0)) /* revoked even when readers make us fail: stays unbiased */
		rm_revoked(lk, t0, KLI_SITE());
	if (!none) {
		rm_write_release(lk);
		kli_hook_acquired(lk, KLI_KIND_RMLOCK, KLI_HF_TRY | KLI_HF_FAILED, KLI_SITE());
		return false;
	}
	atomic_store_explicit(&lk->owner, self->owner, memory_order_relaxed);
	kli_hook_acquired(lk, KLI_KIND_RMLOCK, KLI_HF_TRY, KLI_SITE());
	return true;
}

void kl_rmlock_write_unlock(struct kl_rmlock *lk)
{

#if KLOCK_DEBUG_LOCKS
	if (atomic_load_explicit(&lk->owner, memory_order_relaxed) != kli_tls_owner ||
	    kli_tls_owner == 0) {
		kli_report(atomic_load_explicit(&lk->state, memory_order_relaxed) == RM_S_POISON
				   ? "use of a destroyed lock"
				   : "write unlock by a thread that does not own the lock",
			   "rmlock", lk, KLI_SITE(), NULL);
		return;
	}
#endif
	kli_hook_release(lk, KLI_KIND_RMLOCK, 0, KLI_SITE());
	rm_write_release(lk);
	kli_hook_released(lk, KLI_KIND_RMLOCK, 0);
}

bool kl_rmlock_wowned(const struct kl_rmlock *lk)
{
	kli_owner_t me = kli_tls_owner;

	return me != 0 && atomic_load_explicit(&lk->owner, memory_order_relaxed) == me;
}

void kl_rmlock_bias_stats(const struct kl_rmlock *lk, struct kl_rmlock_bias *out)
{
	uint32_t s = atomic_load_explicit(&lk->state, memory_order_relaxed);
	uint64_t ns = atomic_load_explicit(&lk->unbiased_ns, memory_order_relaxed);
	bool unbiased = (s & KL_RM_S_UNBIASED) && s != RM_S_POISON;

	kli_init();
	if (kli_fence_asym && unbiased)
		ns += kli_now_ns() - atomic_load_explicit(&lk->unbiased_at, memory_order_relaxed);
	out->revocations = atomic_load_explicit(&lk->revocations, memory_order_relaxed);
	out->revoke_ns = atomic_load_explicit(&lk->revoke_ns, memory_order_relaxed);
	out->unbiased_ns = kli_fence_asym ? ns : 0;
	out->biased = kli_fence_asym && !unbiased && s != RM_S_POISON;
}
