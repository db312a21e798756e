/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/rmlock.c - kl_rmlock: FreeBSD rmlock(9) semantics; readers without atomics while
 * the lock is biased, with one full barrier while it is fenced (ck_brlock's readers), and
 * kl_rwlock's algorithm while it is unbiased (BRAVO's adaptive bias, on three rungs).
 *
 * WHAT. FreeBSD's rmlock lets a reader publish itself on a per-CPU tracker list with
 * plain stores inside a critical section; a writer takes the backing lock, revokes the
 * CPUs' read tokens and runs an IPI rendezvous (smp_rendezvous) so each CPU reports its
 * active readers, then waits for them. Userspace has no critical_enter and no IPI
 * handler, so the two halves become:
 *   - biased reader: push the lock on a per-thread stack of read holds (struct
 *     kl_rm_reader, embedded in the thread's registry record - type-stable, scannable,
 *     created on first use, recycled at thread exit), compiler barrier B, test the state;
 *   - revoking writer: take the backing lock, mark the state, membarrier(PRIVATE_EXPEDITED)
 *     (D, the userspace smp_rendezvous: a full barrier on every CPU running one of our
 *     threads), then scan every thread record for a slot holding this lock, waiting for
 *     each.
 * The backing lock is a kl_rwlock embedded in the lock (lk->rw), and it is the whole of
 * the UNBIASED mode: every writer takes it exclusive; a reader that finds the lock
 * unbiased takes it shared (kl_rwlock's word, writer spinning, counted sleepers, hand-off
 * to sleeping readers and its own reader bias), noting the hold in its slot stack with a
 * tag (lk | KL_RM_TAG_RW) so that unlock, exit and fork find it. So a lock written often
 * costs what a kl_rwlock costs, and a writer on an unbiased lock scans nothing.
 *   BIASED    (state 0): readers publish plain slots (B). The first writer REVOKES: M3
 *             sets WRITER | FENCED, D, drains the plain slots, and leaves the lock
 *             FENCED (FreeBSD keeps its read tokens revoked between writes for the same
 *             reason).
 *   FENCED    (KL_RM_S_FENCED): readers publish their slots with a full barrier (B', an
 *             exchange); a writer takes lk->rw, announces itself (M3: WRITER | FENCED, a
 *             seq_cst RMW: no membarrier), drains the slots, and keeps WRITER until its
 *             unlock (M4). Readers that meet WRITER wait for M4 (up to
 *             RM_FENCED_SPIN_NS), then queue on lk->rw.
 *   UNBIASED  (KL_RM_S_UNBIASED alone): readers and writers are lk->rw's.
 * POLICY (BRAVO, Dice & Kogan, USENIX ATC 2019, applied to each rung). Down: the revoking
 * writer measures the revocation (membarrier + scan + waiting for the biased readers it
 * found), cost C, and sets rearm_at = end + N*C with N = KL_RM_INHIBIT_MULT
 * (KLOCK_RM_INHIBIT overrides it; capped at RM_INHIBIT_MAX_NS). A fenced writer measures
 * its own announce, scan and wait, cost c, and opens fenced_until = end + M*c (M =
 * RM_FENCED_MULT); a fenced write that begins before the last one's fenced_until is dense.
 * Dense writes count a run up, the others count it down (never below 0): when the run
 * reaches RM_FENCED_RUN, dense writes have outnumbered the others by that much, and the
 * lock goes UNBIASED (rearm_at = end + M*c; the run starts again from 0). A single close
 * pair, which random arrival times make common even at a low write rate, moves nothing.
 * Up: every write bumps lk->writes. A reader holding lk->rw shared (an unbiased one, or a
 * fenced one that took it for the purpose, every RM_REARM_READS reads) looks at the
 * clock; past rearm_at it moves the lock one rung up (M1: CAS UNBIASED -> FENCED, or
 * FENCED -> 0) only if lk->writes has not moved since the window opened, else it opens
 * a new window (M*c to fenced, N*C to biased). So each rung comes back only after a whole
 * window without a write. BOUND: every revocation of cost C is followed by at least N*C
 * without one, so membarriers take at most 1/(N+1) of the run time, at any write rate;
 * once most fenced writes come closer together than M times their cost, writes stop
 * scanning, so scans take at most about 1/(M+1) of it. Without membarrier (fallback mode)
 * readers never publish (kl_rm_self stays the dummy; rm_read_biased() refuses), the first
 * write switches the lock to UNBIASED for good, and no write counts as a revocation.
 *
 * Fairness. kl_rwlock's: writer preference (new readers defer to a waiting writer) with a
 * time-bounded hand-off to the sleeping readers, so neither side starves; writers among
 * themselves are not FIFO. A revocation turns new readers away to lk->rw, where they wait
 * behind the revoking writer. A writer waiting for a biased or fenced reader spins
 * RM_SPIN_NS, then sleeps (C/F) until that reader's unlock wakes it, as FreeBSD's writer
 * blocks on a turnstile; a fenced writer, which issues no membarrier, first naps (timed
 * sleeps, no F) for about a millisecond, unless the lock is KL_RM_SLEEPABLE (its readers
 * may sleep inside). Every other wait is kl_rwlock's spin-then-sleep.
 *
 * STATE. lk->state (32 bits; biased readers load it on every lock and unlock):
 *   bit 0  KL_RM_S_WRITER   a writer that found the lock biased or fenced is inside, from
 *                           M3 to M4 (it holds lk->rw): biased and fenced readers back out
 *   bit 1  KL_RM_S_WSLEEP   the draining writer sleeps on lk->wseq waiting for the reader
 *                           record in lk->wait_for
 *   bit 2  (with bit 3: the state KL_RM_S_FENCED) readers publish with B' and writers
 *                           scan without membarrier (set by a revocation or a re-arm,
 *                           cleared by a dense fenced write or a re-arm to biased); never
 *                           without bit 3, so that inline code that predates the mode
 *                           sees a lock that is not biased and goes out of line
 *   bit 3  KL_RM_S_UNBIASED the lock is lk->rw alone (set by a dense fenced write or,
 *                           without membarrier, by the first write; cleared only by a
 *                           re-arming reader that holds lk->rw shared)
 *   RM_S_POISON             destroyed (has the writer bit, so a late reader backs out)
 *   lk->rearm_at, unbiased_at, revoke_ns, revocations: written by the revoking writer under
 *   the write hold; unbiased_ns: added to by the re-arming reader that won the CAS, which
 *   also reports that completed stretch to the seam (kli_hook_rearmed: lockstat);
 *   writes: bumped by every writer under the hold; rearm_writes and rearm_at also by a
 *   reader that found writes inside an expired window, and rearm_at by a re-arm to fenced
 *   before its CAS (relaxed: a lost update only shifts the window); fenced_until (a 16-bit
 *   window end, kli_win16_*) and fenced_cost (the run of dense writes in its low
 *   RM_FENCED_RUN_BITS, the last fenced write's cost in 64 ns units above): by fenced
 *   writers.
 *   lk->rw      the embedded kl_rwlock (locks/primitives/rwlock.c's theory block); its word names the
 *   writer by owner id (one thread lifetime, so a lock write-held by a thread that
 *   exited is nobody's): kl_rmlock_wowned() and the debug checks ask it.
 * Per thread (rm = kli_thread.rm): depth, slot[1..depth] a stack of held rmlocks (0 =
 * released out of order, compacted later): lk (a biased hold), lk | RM_TAG_RW (a hold of
 * lk->rw of its own; with RM_TAG_RWC, counted in lk->rw's word), lk | RM_TAG_RWR
 * (KL_RM_RECURSE locks: the thread's RWR slots of one lock share one hold of lk->rw,
 * so a nested read never queues behind a waiting writer); slot[0] == 0 always;
 * unbiased_left counts the unbiased reads left before the next look at the re-arm clock.
 * Holds past the slots are holds of lk->rw noted in kli_thread.rm_ovf.
 *
 * INVARIANTS.
 *   I1 A thread read-holds lk exactly as many times as its slots name lk (in any form),
 *      plus its rm_ovf entries for lk.
 *   I2 Every writer holds lk->rw exclusive; so does a revocation, from M3 to its end.
 *   I3 A revocation or fenced write leaves rm_drain() only after one full pass over every
 *      record found no slot of lk untagged; from M3 until M4 every new reader sees WRITER
 *      and backs out (except KL_RM_RECURSE re-entry, I4), to wait for M4 or on lk->rw.
 *   I4 A KL_RM_RECURSE reader enters past a set writer bit only while it already holds lk
 *      in a lower slot: the draining writer is still waiting for that hold, and the new
 *      hold is published before the old one is released, so the writer's next pass sees
 *      it. Below an RWR slot it adds an RWR slot (no new lk->rw hold to queue for).
 *   I5 Outside a write that found the lock biased or fenced, no slot names an unbiased
 *      lock untagged: that write drained them, an admission needs its look after B or B'
 *      to see the lock biased or fenced, and the lock leaves UNBIASED only by M1. So a
 *      writer that finds the lock unbiased (M2) needs nothing but lk->rw.
 *   I6 A slot published with B alone is admitted only by a look that sees state 0: a
 *      writer that finds the lock fenced did not issue D, so a reader that sees FENCED
 *      publishes again with B' and looks again.
 *
 * ORDERING. Labels are used in klock/rmlock.h (inline fast path) and here; the mode
 * switch is M1-M3.
 *   B/D  asymmetric pair: reader stores its slot, B = kli_fence_light() (a compiler
 *        barrier when membarrier is registered, else a seq_cst fence), loads state;
 *        revoking writer M3, D = kli_fence_heavy() (membarrier, or a seq_cst fence), loads
 *        the slots. Store-buffering: at least one side sees the other's store.
 *   M1   the re-arm (unbiased -> biased): a release CAS made inside a read section of
 *        lk->rw; the biased readers' acquire loads of state pair with it. A biased reader
 *        synchronises with no writer directly (writers release lk->rw, not state): the
 *        re-arm is ordered after the last write section by lk->rw, and the reader after
 *        the re-arm by M1.
 *   M2   the writer's relaxed load of state after taking lk->rw exclusive. The re-arm's
 *        read section either ends before this write section (lk->rw's release/acquire:
 *        M1 happens-before M2, which then reads it or a later value, and the writer
 *        revokes) or begins after it (no biased reader can have been admitted by that
 *        re-arm yet). So no writer skips a revocation that biased readers need.
 *   M3   the announce: a seq_cst exchange setting WRITER | FENCED; on a biased lock then D
 *        (the revocation). Readers that see it wait for M4 or queue behind the writer on
 *        lk->rw; readers that miss it are seen by the scan (B/D, or B'/M3).
 *   B'/M3 store-buffering pair, symmetric: a fenced reader's exchange republishing its
 *        slot, then its acquire load of state; the writer's M3 (a seq_cst RMW), then its
 *        loads of the slots. At least one sees the other's store.
 *   M4   release store clearing WRITER at the end of a write that found the lock biased
 *        or fenced, before lk->rw is released; pairs with the acquire loads of state that
 *        admit biased and fenced readers, so their sections follow the write section.
 *   M1 (to fenced) is preceded by the store of the next window (rearm_at): a fenced reader
 *        whose acquire load of state sees the move sees that window, and cannot re-arm
 *        to biased on the window the unbiased rung used.
 *   C/F  asymmetric pair: reader clears (or retags) its slot (E), C = light fence, loads
 *        state for WSLEEP; writer sets wait_for and WSLEEP, F = heavy fence, re-reads the
 *        slot before sleeping. The inline path's plain undo of a publish has no C: the
 *        out-of-line read that follows runs C before it can wait behind lk->rw. Nor has
 *        the inline unbiased read's plain retag after its counted entry into lk->rw (R1)
 *        succeeded: a writer scanning slots holds lk->rw exclusive from before its scan
 *        until its drain ends, so R1 succeeds only where no writer waits on the slot.
 *        A fenced writer's nap (rm_nap) sets no WSLEEP and needs no F: nobody is to wake
 *        it, and it reads the slot again when its time is up.
 *   E    release store ending a biased read section; pairs with the acquire loads of the
 *        drain, so the write section happens after every read section it waited for.
 *   H1/H2 the draining writer's futex value: it loads wseq (H1, acquire) before F and its
 *        last look at the slot; a reader that saw WSLEEP bumps wseq (H2, release) after
 *        its E, so a bump between H1 and the wait makes kl_wait() return at once.
 *   Unbiased reads and all writes are ordered by lk->rw's own labels (R1/R2, W1/W2, ...).
 *
 * COSTS. Biased read lock+unlock: ~10 instructions each inline, all on the thread's own
 * line and the lock's read-mostly state line. Fenced: the same plus one exchange on the
 * thread's own line and a second load of state; every RM_REARM_READS-th goes out of line
 * for a clock read. Fenced write: kl_rwlock's write pair, one seq_cst RMW on the state
 * line, two clock reads, and the scan of every thread record - the one cost here that grows
 * with the threads, paid only while most writes are more than RM_FENCED_MULT times a scan
 * apart (so at most about half the time; closer writes go unbiased and scan nothing).
 * Unbiased: the inline slot push and tag plus kl_rwlock's counted entry (one CAS; the
 * unlock one fetch-sub, without the kl_rwlock's look at its own biased slot), or else its
 * inline read; every RM_REARM_READS-th (to look at the clock, holding lk->rw), and every
 * one of a KL_RM_RECURSE lock, goes out of line. Write
 * on an unbiased lock: kl_rwlock's write pair plus a load of state and the write count.
 * Revoking write: one membarrier (~0.5-30 us; it IPIs the CPUs running our threads), a scan
 * of 14 words per thread record ever created, a second pass when readers were found, two
 * clock reads. The lock is 112 bytes on LP64, 40 of them the embedded kl_rwlock, whose word
 * names the writer (its size before: docs/results.md, "Figures behind the theory blocks").
 * Its first 64 bytes are what biased readers read; the write count and the fenced window
 * sit by the kl_rwlock, in what was padding (the size did not change).
 *
 * LIMITS. Depth beyond KL_RM_SLOTS uses holds of lk->rw noted in the thread's rm_ovf list,
 * and cannot be admitted as a KL_RM_RECURSE re-entry. Not async-signal-safe. A thread that
 * exits holding a read lock has the hold dropped (debug builds report it): its slots and
 * its rm_ovf entries; one taken when no memory was left to note it stays. Records of all
 * threads ever seen are scanned by a revocation. The bound on revocation time is in wall
 * time, not per reader: a revocation that waited for a long read section measures that
 * wait and stays unbiased N times longer (capped). The instruments see lk->rw as a
 * kl_rwlock of its own (at lk + offsetof(rw), never lk itself): with lockstat, waits
 * behind the kl_rwlock are counted on that address. Binaries compiled against an earlier
 * inline fast path must be rebuilt: the inline path and the struct are part of the ABI.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <klock/rmlock.h>
#include "fence_impl.h"
#include "hooks.h"
#include "rwlock_impl.h"
#include "spin.h"
#include "thread.h"

#define RM_S_POISON 0x6b6b6b01u
#define RM_FLAGS_VALID (KL_RM_RECURSE | KL_RM_SLEEPABLE)
/* Slot tags (locks are at least 8-byte aligned, so the low bits are free). A slot equal
 * to the lock's address is a biased hold; with RM_TAG_RW it is a hold of the lock's
 * kl_rwlock of its own (with RM_TAG_RWC too when the inline read knows it is counted in
 * the kl_rwlock's word: its inline unlock is R2 alone; every other path releases it as
 * any kl_rwlock read hold); with RM_TAG_RWR (KL_RM_RECURSE locks) the thread's RWR entries
 * of one lock share a single kl_rwlock hold, taken by the first, released by the last. */
#define RM_TAG_RW ((uintptr_t)KL_RM_TAG_RW)
#define RM_TAG_RWR ((uintptr_t)0x2u)
#define RM_TAG_RWC ((uintptr_t)KL_RM_TAG_RWC)
#define RM_TAGS (RM_TAG_RW | RM_TAG_RWR | RM_TAG_RWC)
_Static_assert(_Alignof(struct kl_rmlock) > RM_TAGS, "slot tags fit below the alignment");

/* How long a reader that found a fenced writer inside waits for it before it queues
 * behind the kl_rwlock: a few short write sections. */
#define RM_FENCED_SPIN_NS 2000u
/* Spin budget before a writer waiting for a biased or fenced reader sleeps: longer than a
 * typical read section, about a sleep/wake round trip (~5-10 us) plus the heavy fence F.
 * A reader still inside after this is usually off its CPU, and yielding to it cost
 * milliseconds: the reader ran out its time slice before the yielding writer ran again. */
#define RM_SPIN_NS 20000u
/* A fenced writer's nap while that reader stays inside: the kernel's default timer slack
 * (a shorter sleep lasts this long anyway). */
#define RM_NAP_NS 50000u
/* Naps before the fenced writer sleeps until woken (and issues F, a membarrier): about a
 * millisecond, longer than most preemptions of a reader. */
#define RM_NAPS 20u
/* kl_rm_tracker.magic while it describes a live hold ("rmtr"). */
#define RM_TRACKER_MAGIC 0x726d7472u
/* Fenced or unbiased reads a thread makes between two looks at the re-arm clock: a look
 * costs a clock read and, from the fenced mode, a read out of line, together about ten
 * fenced reads, so this keeps it near 4% of a read. A look that comes this many reads
 * late moves the lock up a few microseconds late; the windows it closes are not shortened. */
#define RM_REARM_READS 256u
/* Longest inhibit window: a revocation stretched by a preemption must not keep the lock
 * unbiased for seconds (100 ms is 10^4 membarriers on a quiet host). */
#define RM_INHIBIT_MAX_NS 100000000ull
/* KLOCK_RM_INHIBIT accepts multiples up to this. */
#define RM_INHIBIT_MULT_MAX 100000ul
/* A fenced write that begins less than this many times the last fenced write's cost (its
 * announce, scan and wait) after that write ended is dense; an unbiased lock goes back to
 * fenced after a write-free window of the same multiple. Writes then spend at most about
 * 1/(N+1) of the time scanning (kl_rwlock's reader bias uses 3). */
#define RM_FENCED_MULT 1u
/* Dense fenced writes, net of the sparse ones, that send the lock unbiased: writes that
 * arrive at random come in close pairs at any rate (one write in 14 at 1% writes, 2
 * threads), so a lone close pair is no sign of density. */
#define RM_FENCED_RUN 3u
/* fenced_cost's low bits hold the run (up to RM_FENCED_RUN). */
#define RM_FENCED_RUN_BITS 2
#define RM_FENCED_RUN_MASK ((1u << RM_FENCED_RUN_BITS) - 1)
/* fenced_cost's cost unit: ns >> this (64 ns; the 14 bits above the run hold up to 1 ms). */
#define RM_FENCED_COST_SHIFT 6
/* The longest cost fenced_cost holds, in its unit. */
#define RM_FENCED_COST_MAX (UINT16_MAX >> RM_FENCED_RUN_BITS)
_Static_assert(RM_FENCED_RUN <= RM_FENCED_RUN_MASK, "the run fits its bits");

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

/* Topmost slot of @r holding @lk in any form (biased or tagged), or 0. */
static uint32_t rm_find(const struct kl_rm_reader *r, const struct kl_rmlock *lk)
{
	for (uint32_t i = r->depth; i > 0; i--)
		if ((atomic_load_explicit(&r->slot[i], memory_order_relaxed) & ~RM_TAGS) ==
		    (uintptr_t)lk)
			return i;
	return 0;
}

/* Topmost slot of @r equal to @v exactly, or 0. */
static uint32_t rm_find_exact(const struct kl_rm_reader *r, uintptr_t v)
{
	for (uint32_t i = r->depth; i > 0; i--)
		if (atomic_load_explicit(&r->slot[i], memory_order_relaxed) == v)
			return i;
	return 0;
}

/* A writer's look at another thread's record: the topmost slot holding @lk biased, or 0
 * (tagged slots name kl_rwlock holds, which the writer's kl_rwlock excluded). Every
 * slot, not just those up to the owner's depth (depth is the owner's private word).
 * seq_cst loads: with the revocation's D they are the store-buffering pair B/D. */
static uint32_t rm_held(const struct kl_rm_reader *r, const struct kl_rmlock *lk)
{
	for (uint32_t i = KL_RM_SLOTS; i > 0; i--)
		if (atomic_load_explicit(&r->slot[i], memory_order_seq_cst) ==
		    (uintptr_t)lk) /* E; D */
			return i;
	return 0;
}

/* True if some record holds @lk biased now (one pass, no waiting). */
static bool rm_any_reader(const struct kl_rmlock *lk)
{
	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next)
		if (rm_held(&t->rm, lk) != 0)
			return true;
	return false;
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

/* The window an unbiased lock waits, write-free, before it goes back to fenced: the
 * fenced multiple of the last fenced write's cost. */
static uint64_t rm_fenced_window(const struct kl_rmlock *lk)
{
	return ((uint64_t)(atomic_load_explicit(&lk->fenced_cost, memory_order_relaxed) >>
			   RM_FENCED_RUN_BITS)
		<< RM_FENCED_COST_SHIFT) * RM_FENCED_MULT;
}

/* The caller holds @lk's kl_rwlock shared, so no writer is inside, and found the lock in
 * state @s, UNBIASED or FENCED: every RM_REARM_READS-th such read of this thread looks at
 * the clock. Once the window has passed, it moves the lock one rung up (unbiased ->
 * fenced -> biased) if no write came since the last look; if writes did come, it opens a
 * new window instead (so a lock written every few windows or more often stays where it
 * is). The windows: to fenced, rm_fenced_window(); to biased, rm_window() (the
 * membarrier's multiple). The CAS fails harmlessly when another reader got there first;
 * racing window updates only shift the window. Without membarrier the lock stays
 * unbiased for ever: readers have no record to publish in. */
static void rm_maybe_rearm(struct kl_rmlock *lk, struct kl_rm_reader *r, uint32_t s)
{
	uint32_t up = s == KL_RM_S_UNBIASED ? KL_RM_S_FENCED : 0, wr;
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
		/* The window of the rung the lock is on now (another reader may have moved
		 * it up since our caller looked). */
		bool to_fenced = atomic_load_explicit(&lk->state, memory_order_relaxed) ==
				 KL_RM_S_UNBIASED;

		atomic_store_explicit(&lk->rearm_writes, wr, memory_order_relaxed);
		atomic_store_explicit(&lk->rearm_at,
				      now + (to_fenced ? rm_fenced_window(lk) : rm_window(lk)),
				      memory_order_relaxed);
		return;
	}
	/* To fenced: the next rung needs a whole membarrier window, set before the move,
	 * so that a fenced reader that sees the move (M1) sees that window too. */
	if (up != 0)
		atomic_store_explicit(&lk->rearm_at, now + rm_window(lk), memory_order_relaxed);
	/* M1: release, inside our kl_rwlock read section; pairs with the readers' acquire
	 * loads of state (they see the last writer's data through it, and a fenced reader
	 * about to re-arm sees the window above), and is seen by every later writer's M2
	 * through the kl_rwlock. */
	if (!atomic_compare_exchange_strong_explicit(&lk->state, &s, up, memory_order_release,
						     memory_order_relaxed))
		return;
	kli_test_point("rmlock.rearm.moved");
	if (up == 0) {
		uint64_t stretch =
			now - atomic_load_explicit(&lk->unbiased_at, memory_order_relaxed);

		atomic_fetch_add_explicit(&lk->unbiased_ns, stretch, memory_order_relaxed);
		kli_hook_rearmed(lk, KLI_KIND_RMLOCK, stretch);   /* the stretch it closes */
	}
}

/* Wakes the writer sleeping for the reader record @who. */
static void rm_wake_writer(struct kl_rmlock *lk, uintptr_t who)
{
	if (atomic_load_explicit(&lk->wait_for, memory_order_relaxed) == who) {
		/* H2: release, pairs with H1 in rm_sleep_on_slot() */
		atomic_fetch_add_explicit(&lk->wseq, 1, memory_order_release);
		kl_wake(&lk->wseq, 1);
	}
}

/* Pushes @v (a lock, maybe tagged) on @r's stack; the slot, or 0 when the stack is full.
 * No fence: callers add the one they need. */
static uint32_t rm_push(struct kl_rm_reader *r, uintptr_t v)
{
	uint32_t d;

	rm_compact(r);
	d = r->depth;
	if (kl_unlikely(d >= KL_RM_SLOTS))
		return 0;
	r->depth = d + 1;
	atomic_store_explicit(&r->slot[d + 1], v, memory_order_relaxed);
	return d + 1;
}

/* Clears slot @idx of @r, a biased hold of @lk, and wakes a writer sleeping on it. */
static void rm_unpublish(struct kl_rmlock *lk, struct kl_rm_reader *r, uint32_t idx)
{
	atomic_store_explicit(&r->slot[idx], 0, memory_order_release); /* E */
	rm_compact(r);
	kli_fence_light(); /* C: light half, pairs with F in rm_sleep_on_slot() */
	if (atomic_load_explicit(&lk->state, memory_order_relaxed) & KL_RM_S_WSLEEP)
		rm_wake_writer(lk, (uintptr_t)r);
}

/* Drops one hold of @lk that @r's thread has: the one in slot @idx (0: a kl_rwlock hold
 * past the slots, noted in the thread's rm_ovf list). A tagged RWR slot releases the
 * kl_rwlock only when it was the thread's last RWR slot of @lk. */
static void rm_release(struct kl_rmlock *lk, struct kl_rm_reader *r, uint32_t idx)
{
	uintptr_t v;

	if (idx == 0) {
		kli_thread_ovf_drop(kli_thread_of_rm(r), (uintptr_t)lk);
		kl_rwlock_read_unlock(&lk->rw);
		return;
	}
	v = atomic_load_explicit(&r->slot[idx], memory_order_relaxed);
	if (v == (uintptr_t)lk) {
		rm_unpublish(lk, r, idx);
		return;
	}
	atomic_store_explicit(&r->slot[idx], 0, memory_order_relaxed);
	rm_compact(r);
	if ((v & RM_TAG_RWR) && rm_find_exact(r, (uintptr_t)lk | RM_TAG_RWR) != 0)
		return; /* another RWR slot of ours shares the kl_rwlock hold */
	kl_rwlock_read_unlock(&lk->rw);
}

/* Drops every hold in @t's record (slots and past them). */
static void rm_release_all(struct kli_thread *t, bool report)
{
	struct kl_rm_reader *r = &t->rm;
	uintptr_t ovf;

	(void)report;
	for (uint32_t i = KL_RM_SLOTS; i > 0; i--) {
		uintptr_t v = atomic_load_explicit(&r->slot[i], memory_order_relaxed);

		if (v == 0)
			continue;
#if KLOCK_DEBUG_LOCKS
		if (report)
			kli_report("thread exit with a read lock held", "rmlock",
				   (void *)(v & ~RM_TAGS), NULL, "the hold is dropped");
#endif
		rm_release((struct kl_rmlock *)(v & ~RM_TAGS), r, i);
	}
	while ((ovf = kli_thread_ovf_any(t)) != 0) { /* rm_release() forgets it */
#if KLOCK_DEBUG_LOCKS
		if (report)
			kli_report("thread exit with a read lock held", "rmlock", (void *)ovf,
				   NULL, "the hold is dropped");
#endif
		rm_release((struct kl_rmlock *)ovf, r, 0);
	}
	r->depth = 0;
}

/* A thread exits: drop whatever it still read-holds (a leak the debug build reports), so
 * writers do not wait for it for ever, and forget its record in the TLS pointer. */
static void rm_thread_exit(struct kli_thread *t)
{
	rm_release_all(t, true);
	kl_rm_self = &rm_full;
}

/* fork() child: only the calling thread exists; other records' holds are dropped. */
static void rm_atfork_child(void)
{
	struct kli_thread *self = kli_tls_self;

	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next)
		if (t != self)
			rm_release_all(t, false);
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
	if (kl_rwlock_wowned(&lk->rw))
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

static bool rm_check_write(struct kl_rmlock *lk, const void *site)
{
	struct kli_thread *self = kli_self();

	if (!rm_check_alive(lk, site))
		return false;
	if (kl_rwlock_wowned(&lk->rw))
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

static inline bool rm_check_write(struct kl_rmlock *lk, const void *site)
{
	(void)lk, (void)site;
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
	/* acquire, pairs with M1/M3: destroy judges the mode the last user left */
	uint32_t s = atomic_load_explicit(&lk->state, memory_order_acquire);
	const char *why = NULL;

	if (s == RM_S_POISON)
		why = "destroy of a destroyed lock";
	else if ((s & KL_RM_S_WRITER) || kli_rwlock_held(&lk->rw) == KLI_RW_WRITER)
		why = "destroy of a write-held lock";
	else if (rm_any_reader(lk) || kli_rwlock_held(&lk->rw) != KLI_RW_FREE)
		why = "destroy of a read-held lock";
	else if (kl_rwlock_destroy(&lk->rw) != 0)
		why = "destroy of a lock with waiters";
	if (why != NULL) {
#if KLOCK_DEBUG_LOCKS
		kli_report(why, "rmlock", lk, KLI_SITE(), NULL);
#endif
		return EBUSY;
	}
	atomic_store_explicit(&lk->state, RM_S_POISON, memory_order_relaxed);
	kli_hook_destroyed(lk, KLI_KIND_RMLOCK);
	return 0;
}

/* ---- readers -------------------------------------------------------------------------- */

static void rm_tracker_set(struct kl_rm_tracker *tr, struct kl_rmlock *lk,
			   struct kli_thread *self, uint32_t idx)
{
	tr->lock = lk;
	tr->owner = self;
	tr->magic = RM_TRACKER_MAGIC;
	tr->idx = idx;
}

/* KL_RM_RECURSE: the thread already holds @lk; add a hold that needs no admission, so a
 * waiting writer cannot block it (I4). Below a biased hold: a biased hold (a revoking
 * writer still waits for the outer one, and its scan passes again until it finds none);
 * below an RWR slot: another RWR slot sharing that kl_rwlock hold. *@idx: the slot. False
 * when the thread holds @lk in no slot, or the stack is full. */
static bool rm_read_reenter(struct kl_rmlock *lk, struct kl_rm_reader *r, uint32_t *idx)
{
	uint32_t i = rm_find(r, lk);
	uintptr_t v;

	if (i == 0)
		return false;
	v = atomic_load_explicit(&r->slot[i], memory_order_relaxed);
	if (v != (uintptr_t)lk && !(v & RM_TAG_RWR))
		return false;
	*idx = rm_push(r, v);
	return *idx != 0;
}

/* A fenced reader's look at the re-arm clock, every RM_REARM_READS-th read: a re-arm
 * needs a read hold of the kl_rwlock (M1), which a fenced reader takes only here, and
 * only if no writer holds it. */
static void rm_fenced_look(struct kl_rmlock *lk, struct kl_rm_reader *r)
{
	if (r->unbiased_left != 0) {
		r->unbiased_left--;
		return;
	}
	/* Hints first: the kl_rwlock's word is on the writers' line. */
	if (kli_now_ns() < atomic_load_explicit(&lk->rearm_at, memory_order_relaxed) ||
	    !kl_rwlock_read_trylock(&lk->rw)) {
		r->unbiased_left = RM_REARM_READS;
		return;
	}
	/* M1: acquire, pairs with the move to fenced (its window comes with it) */
	if (atomic_load_explicit(&lk->state, memory_order_acquire) == KL_RM_S_FENCED)
		rm_maybe_rearm(lk, r, KL_RM_S_FENCED);
	kl_rwlock_read_unlock(&lk->rw);
}

/* A biased or fenced read: publish, B, look (the inline path's steps); on a fenced lock
 * publish again with B' and look again. True if admitted. */
static bool rm_read_biased(struct kl_rmlock *lk, struct kl_rm_reader *r, uint32_t *idx)
{
	uint32_t s;

	if (!kli_fence_asym)
		return false;
	s = atomic_load_explicit(&lk->state, memory_order_relaxed);
	if (s != 0 && s != KL_RM_S_FENCED)
		return false;
	*idx = rm_push(r, (uintptr_t)lk);
	if (*idx == 0)
		return false;
	kli_fence_light(); /* B: light half, pairs with D in rm_revoke() */
	/* M1: acquire, pairs with the re-arming reader's release (M4: the last writer's) */
	s = atomic_load_explicit(&lk->state, memory_order_acquire);
	if (s == KL_RM_S_FENCED) { /* B' (a full barrier): SB with a fenced writer's M3 */
		atomic_exchange_explicit(&r->slot[*idx], (uintptr_t)lk, memory_order_seq_cst);
		s = atomic_load_explicit(&lk->state, memory_order_acquire); /* M1, M4 */
	}
	if (kl_likely(s == 0 || s == KL_RM_S_FENCED)) {
		if (s == KL_RM_S_FENCED)
			rm_fenced_look(lk, r);
		return true;
	}
	rm_unpublish(lk, r, *idx);
	return false;
}

/* An unbiased read: a kl_rwlock read hold, noted in a tagged slot (past the slots, in the
 * thread's rm_ovf list). False only for a failed @try. Holding it, look at the re-arm
 * clock (M1). */
static bool rm_read_rw(struct kl_rmlock *lk, struct kli_thread *self, bool try,
		       uint32_t *idx)
{
	uintptr_t tag = (lk->flags & KL_RM_RECURSE) ? RM_TAG_RWR : RM_TAG_RW;

	/* C: the inline path's undo of a biased publish (a plain store) may have come after
	 * a revoking writer saw the slot and went to sleep on it: wake it before we wait
	 * behind its kl_rwlock. */
	kli_fence_light();
	if (kl_unlikely(atomic_load_explicit(&lk->state, memory_order_relaxed) & KL_RM_S_WSLEEP))
		rm_wake_writer(lk, (uintptr_t)&self->rm);
	if (kl_unlikely(kl_rwlock_wowned(&lk->rw))) { /* misuse: we write-hold it */
		if (!try)
			kl_rwlock_read_lock(&lk->rw); /* reports it in every build, returns */
		return false;
	}
	if (try) {
		if (!kl_rwlock_read_trylock(&lk->rw))
			return false;
	} else {
		kl_rwlock_read_lock(&lk->rw);
	}
	*idx = rm_push(&self->rm, (uintptr_t)lk | tag);
	if (*idx == 0)
		(void)kli_thread_ovf_push(self, (uintptr_t)lk); /* for rm_thread_exit() */
	if (atomic_load_explicit(&lk->state, memory_order_relaxed) == KL_RM_S_UNBIASED)
		rm_maybe_rearm(lk, &self->rm, KL_RM_S_UNBIASED);
	return true;
}

/* A fenced or revoking writer is inside (WRITER | FENCED), and the caller may wait (not a
 * trylock, which goes on to the kl_rwlock's and fails there): rather than queue behind the
 * kl_rwlock, wait up to RM_FENCED_SPIN_NS for the lock to admit fenced or biased readers
 * again (M4), as ck_brlock's readers do, and enter so (*@idx: the slot). First C and a look
 * for the writer asleep on a publish the inline path undid (as rm_read_rw()). False when
 * the lock went unbiased or the budget ran out: the caller queues. */
static bool rm_read_fenced_wait(struct kl_rmlock *lk, struct kli_thread *self, uint32_t *idx)
{
	struct kli_spin sp;
	uint32_t s;

	kli_fence_light(); /* C: pairs with F in rm_sleep_on_slot() */
	s = atomic_load_explicit(&lk->state, memory_order_relaxed);
	if (s & KL_RM_S_WSLEEP)
		rm_wake_writer(lk, (uintptr_t)&self->rm);
	if (!kli_fence_asym)
		return false;
	kli_spin_start(&sp, RM_FENCED_SPIN_NS);
	for (;;) {
		if ((s & ~KL_RM_S_WSLEEP) != (KL_RM_S_WRITER | KL_RM_S_FENCED)) {
			if (s != 0 && s != KL_RM_S_FENCED)
				return false;
			if (rm_read_biased(lk, &self->rm, idx))
				return true;
		}
		if (!kli_spin_backoff(&sp))
			return false;
		s = atomic_load_explicit(&lk->state, memory_order_relaxed);
	}
}

/* Takes a read hold (the whole protocol, out of line). @try: give up instead of waiting. */
static KL_NOINLINE bool rm_read_slow(struct kl_rmlock *lk, struct kl_rm_tracker *tr, bool try,
				     const void *site)
{
	struct kli_thread *self = rm_attach();
	struct kl_rm_reader *r = &self->rm;
	uint32_t idx = 0;

	if (!rm_check_read(lk, self, site))
		return false;
	if (!((lk->flags & KL_RM_RECURSE) && rm_read_reenter(lk, r, &idx)) &&
	    !rm_read_biased(lk, r, &idx) && !(!try && rm_read_fenced_wait(lk, self, &idx)) &&
	    !rm_read_rw(lk, self, try, &idx))
		return false;
	rm_tracker_set(tr, lk, self, idx);
	return true;
}

/* klock/rmlock.h's inline read lock pushed @lk on the caller's stack (the top slot, plain)
 * and then found the state UNBIASED alone, and its own copy of the common case below
 * (kl_rmlock_read_unbiased_inline) did not apply: a look at the re-arm clock is due, the
 * kl_rwlock's word turned it away, or a writer may sleep. Retag the slot (E), C and a look
 * for a revoking writer that may have gone to sleep on it while it named the lock (one
 * that began after our look, once a re-arm made the lock biased again), then kl_rwlock's
 * inline read; holding that, look at the re-arm clock if it is due. KL_RM_RECURSE: undo
 * and take the whole out-of-line path. */
void kl_rmlock_read_unbiased_(struct kl_rmlock *lk, struct kl_rm_tracker *tr)
{
	struct kl_rm_reader *r = kl_rm_self;
	uint32_t d = r->depth;

	if (kl_likely(!(lk->flags & KL_RM_RECURSE))) {
		atomic_store_explicit(&r->slot[d], (uintptr_t)lk | RM_TAG_RW,
				      memory_order_release); /* E */
		kli_fence_light(); /* C: pairs with F in rm_sleep_on_slot() */
		if (kl_unlikely(atomic_load_explicit(&lk->state, memory_order_relaxed) &
				KL_RM_S_WSLEEP))
			rm_wake_writer(lk, (uintptr_t)r);
		kl_rwlock_read_lock(&lk->rw);
		if (atomic_load_explicit(&lk->state, memory_order_relaxed) == KL_RM_S_UNBIASED)
			rm_maybe_rearm(lk, r, KL_RM_S_UNBIASED); /* counts this read down */
		return;
	}
	atomic_store_explicit(&r->slot[d], 0, memory_order_relaxed);
	r->depth = d - 1;
	(kl_rmlock_read_lock)(lk, tr);
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
	if (idx == 0 && kli_rwlock_held(&lk->rw) != KLI_RW_READERS) {
		kli_report("read unlock of a lock not read-held", "rmlock", lk, KLI_SITE(), NULL);
		return;
	}
	tr->magic = 0;
#endif
	kli_hook_release(lk, KLI_KIND_RMLOCK, KLI_HF_READ, KLI_SITE());
	rm_release(lk, r, idx);
	kli_hook_released(lk, KLI_KIND_RMLOCK, KLI_HF_READ);
}

/* ---- writers -------------------------------------------------------------------------- */

/* Sleeps until the reader record @r's unlock of slot @slot wakes it (C/F, H1/H2), unless
 * the slot is released meanwhile. */
static void rm_sleep_on_slot(struct kl_rmlock *lk, struct kl_rm_reader *r,
			     const _Atomic uintptr_t *slot, struct kli_wait *w)
{
	/* H1: acquire, pairs with H2 in rm_wake_writer() and its inline copy */
	uint32_t seq = atomic_load_explicit(&lk->wseq, memory_order_acquire);

	atomic_store_explicit(&lk->wait_for, (uintptr_t)r, memory_order_relaxed);
	atomic_fetch_or_explicit(&lk->state, KL_RM_S_WSLEEP, memory_order_relaxed);
	kli_fence_heavy(); /* F: heavy half, pairs with C in the reader's unlock */
	if (atomic_load_explicit(slot, memory_order_acquire) == (uintptr_t)lk) {
		kli_wait_sleep(w);
		kl_wait(&lk->wseq, seq, NULL);
	}
}

/* Sleeps RM_NAP_NS, asking nobody to wake it: no fence, so no membarrier. */
static void rm_nap(struct kl_rmlock *lk, struct kli_wait *w)
{
	struct timespec at;

	kli_deadline_after(&at, RM_NAP_NS);
	kli_wait_sleep(w);
	kl_wait(&lk->wseq, atomic_load_explicit(&lk->wseq, memory_order_relaxed), &at);
}

/* Waits until the reader record @r no longer holds @lk biased in slot @i: spins
 * RM_SPIN_NS, then sleeps until the reader's unlock wakes it. @nap (a fenced write, which
 * issues no membarrier): first nap up to RM_NAPS times, so that a reader off its CPU for
 * a moment costs no membarrier (F); KL_RM_SLEEPABLE readers may sleep inside, and a
 * revocation already paid one. */
static void rm_wait_slot(struct kl_rmlock *lk, struct kl_rm_reader *r, uint32_t i, bool nap,
			 struct kli_wait *w)
{
	const _Atomic uintptr_t *slot = &r->slot[i];
	uint32_t naps = (nap && !(lk->flags & KL_RM_SLEEPABLE)) ? RM_NAPS : 0;
	struct kli_spin sp;

	kli_wait_spin(w);
	kli_spin_start(&sp, RM_SPIN_NS);
	while (atomic_load_explicit(slot, memory_order_acquire) == (uintptr_t)lk) { /* E */
		if (kli_spin_backoff(&sp))
			continue;
		if (naps > 0) {
			naps--;
			rm_nap(lk, w);
		} else {
			rm_sleep_on_slot(lk, r, slot, w);
		}
		kli_wait_spin(w);
	}
}

/* Waits for every biased hold of @lk: passes over every record until one finds none (I3).
 * @fenced: a fenced write's drain (rm_wait_slot()'s naps). */
static void rm_drain(struct kl_rmlock *lk, bool fenced, const void *site)
{
	struct kli_wait w;
	bool found;

	kli_wait_begin(&w, lk, KLI_KIND_RMLOCK, 0, site);
	do {
		found = false;
		for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next) {
			uint32_t i;

			while ((i = rm_held(&t->rm, lk)) != 0) { /* E; D */
				found = true;
				rm_wait_slot(lk, &t->rm, i, fenced, &w);
			}
		}
	} while (found);
	atomic_store_explicit(&lk->wait_for, 0, memory_order_relaxed);
	kli_wait_end(&w, lk, KLI_KIND_RMLOCK, 0, site);
}

/* The writer holds the lock: count the write (every write, so that re-arming readers see
 * whether the window they close was write-free). Under the write hold: a plain increment. */
static inline void rm_count_write(struct kl_rmlock *lk)
{
	atomic_store_explicit(&lk->writes,
			      atomic_load_explicit(&lk->writes, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/* A revocation that began at @t0 is complete (every biased reader drained): open the
 * inhibit window, KL_RM_INHIBIT_MULT times its cost, count the revocation and report it
 * to the seam (lockstat). Under the write hold; a re-arming reader reads the policy words
 * inside a kl_rwlock read section, after this writer's release. */
static void rm_revoked(struct kl_rmlock *lk, uint64_t t0, const void *site)
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

/* The run of dense fenced writes after one more fenced write, @dense or not (never below
 * 0); RM_FENCED_RUN when the lock is to go unbiased. */
static uint32_t rm_fenced_run(uint32_t run, bool dense)
{
	if (dense)
		return run + 1;
	return run > 0 ? run - 1 : 0;
}

/* A fenced write that began at @t0 has drained the fenced readers: if it began inside
 * the window the last fenced write opened (fenced_until), it is dense, and counts the run
 * up; else down. When the run reaches RM_FENCED_RUN, writes are too dense for scanning,
 * and the lock goes unbiased when this write ends (rearm_at: back to fenced after
 * rm_fenced_window() with no write). Either way this write opens its own window,
 * RM_FENCED_MULT times its cost. Under the write hold; WRITER stays until the unlock. */
static void rm_fenced_done(struct kl_rmlock *lk, uint64_t t0)
{
	uint64_t now = kli_now_ns(), cost = now - t0;
	uint64_t c64 = cost >> RM_FENCED_COST_SHIFT;
	uint32_t run = atomic_load_explicit(&lk->fenced_cost, memory_order_relaxed) &
		       RM_FENCED_RUN_MASK;

	run = rm_fenced_run(run, kli_win16_open(atomic_load_explicit(&lk->fenced_until,
								      memory_order_relaxed),
						 t0));
	atomic_store_explicit(&lk->fenced_until, kli_win16_end(now, cost * RM_FENCED_MULT),
			      memory_order_relaxed);
	if (c64 > RM_FENCED_COST_MAX)
		c64 = RM_FENCED_COST_MAX;
	atomic_store_explicit(&lk->fenced_cost,
			      (uint16_t)(c64 << RM_FENCED_RUN_BITS |
					 (run < RM_FENCED_RUN ? run : 0)),
			      memory_order_relaxed);
	if (run < RM_FENCED_RUN) {
		atomic_store_explicit(&lk->state, KL_RM_S_WRITER | KL_RM_S_FENCED,
				      memory_order_relaxed); /* clears WSLEEP */
		return;
	}
	atomic_store_explicit(&lk->rearm_writes,
			      atomic_load_explicit(&lk->writes, memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(&lk->rearm_at, now + rm_fenced_window(lk), memory_order_relaxed);
	atomic_store_explicit(&lk->state, KL_RM_S_WRITER | KL_RM_S_UNBIASED, memory_order_relaxed);
}

/*
 * The writer holds the kl_rwlock and found the lock in state @s, biased (0) or fenced
 * (M2): announce it (M3: WRITER | FENCED; new readers take the kl_rwlock, and wait
 * behind us), then D on a biased lock only (a fenced lock's readers published with a
 * full barrier, B', and M3 is one too), then wait for the readers that lets us see. A
 * revocation (from biased) leaves the lock fenced; a fenced write leaves it fenced, or
 * unbiased when writes come too often (rm_fenced_done). WRITER stays until the unlock
 * (M4), so that no fenced reader enters the write section. @try: if a reader is inside,
 * give up instead, leaving the state as it was (true: drained). Without membarrier the
 * lock goes unbiased for good (no reader ever published).
 */
static KL_NOINLINE bool rm_revoke(struct kl_rmlock *lk, uint32_t s, bool try, const void *site)
{
	bool fenced = s == KL_RM_S_FENCED;
	uint64_t t0 = kli_fence_asym ? kli_now_ns() : 0;

	if (!fenced)
		kli_hook_revoke_begin(lk, KLI_KIND_RMLOCK);
	/* M3: a seq_cst RMW, then (biased) D */
	atomic_exchange_explicit(&lk->state, KL_RM_S_WRITER | KL_RM_S_FENCED,
				 memory_order_seq_cst);
	if (!fenced)
		kli_fence_heavy(); /* D: heavy half (membarrier), pairs with B in every reader */
	if (try && rm_any_reader(lk)) {
		/* M1 again: back as it was with no write made; release, as the re-arm's CAS */
		atomic_store_explicit(&lk->state, s, memory_order_release);
		if (!fenced)
			kli_hook_revoke_end(lk, KLI_KIND_RMLOCK,
					    t0 != 0 ? kli_now_ns() - t0 : 0, EBUSY);
		return false;
	}
	rm_drain(lk, fenced, site);
	if (fenced) {
		rm_fenced_done(lk, t0);
		return true;
	}
	/* Clears WSLEEP; readers see WRITER (and then the kl_rwlock we hold). */
	atomic_store_explicit(&lk->state,
			      KL_RM_S_WRITER | (t0 != 0 ? KL_RM_S_FENCED : KL_RM_S_UNBIASED),
			      memory_order_relaxed);
	if (t0 != 0)
		rm_revoked(lk, t0, site);   /* also revoke_end */
	else
		kli_hook_revoke_end(lk, KLI_KIND_RMLOCK, 0, 0);
	return true;
}

/* M4: a write section that found the lock biased or fenced ends: clear WRITER (release:
 * pairs with the fenced and biased readers' acquire loads of state, M1/M4, which admit
 * them only without WRITER), before the kl_rwlock is released. */
static inline void rm_write_done(struct kl_rmlock *lk)
{
	uint32_t s = atomic_load_explicit(&lk->state, memory_order_relaxed);

	if (kl_unlikely(s & KL_RM_S_WRITER))
		atomic_store_explicit(&lk->state, s & ~KL_RM_S_WRITER, memory_order_release);
}

void kl_rmlock_write_lock(struct kl_rmlock *lk)
{
	uint32_t s;

	if (!rm_check_write(lk, KLI_SITE()))
		return;
	kli_hook_acquire(lk, KLI_KIND_RMLOCK, 0, KLI_SITE());
	kl_rwlock_write_lock(&lk->rw);
	rm_count_write(lk); /* before a revocation, which starts its window from it */
	/* M2: relaxed; the kl_rwlock orders it after every re-arm (M1) */
	s = atomic_load_explicit(&lk->state, memory_order_relaxed);
	if (kl_unlikely(s != KL_RM_S_UNBIASED))
		(void)rm_revoke(lk, s, false, KLI_SITE());
	kli_hook_acquired(lk, KLI_KIND_RMLOCK, 0, KLI_SITE());
}

bool kl_rmlock_write_trylock(struct kl_rmlock *lk)
{
	uint32_t s;
	bool ok;

	if (!rm_check_write(lk, KLI_SITE()))
		return false;
	kli_hook_acquire(lk, KLI_KIND_RMLOCK, KLI_HF_TRY, KLI_SITE());
	ok = kl_rwlock_write_trylock(&lk->rw);
	if (ok)
		rm_count_write(lk);
	if (ok && (s = atomic_load_explicit(&lk->state, memory_order_relaxed)) !=
		    KL_RM_S_UNBIASED && /* M2 */
	    !rm_revoke(lk, s, true, KLI_SITE())) {
		kl_rwlock_write_unlock(&lk->rw);
		ok = false;
	}
	kli_hook_acquired(lk, KLI_KIND_RMLOCK, KLI_HF_TRY | (ok ? 0 : KLI_HF_FAILED), KLI_SITE());
	return ok;
}

void kl_rmlock_write_unlock(struct kl_rmlock *lk)
{

#if KLOCK_DEBUG_LOCKS
	if (!kl_rwlock_wowned(&lk->rw)) {
		kli_report(atomic_load_explicit(&lk->state, memory_order_relaxed) == RM_S_POISON
				   ? "use of a destroyed lock"
				   : "write unlock by a thread that does not own the lock",
			   "rmlock", lk, KLI_SITE(), NULL);
		return;
	}
#endif
	kli_hook_release(lk, KLI_KIND_RMLOCK, 0, KLI_SITE());
	/* The lock stays fenced or unbiased: the next write skips the membarrier unless a
	 * reader re-armed the bias in between. */
	rm_write_done(lk);
	kl_rwlock_write_unlock(&lk->rw);
	kli_hook_released(lk, KLI_KIND_RMLOCK, 0);
}

bool kl_rmlock_wowned(const struct kl_rmlock *lk)
{
	return kl_rwlock_wowned(&lk->rw);
}

void kl_rmlock_bias_stats(const struct kl_rmlock *lk, struct kl_rmlock_bias *out)
{
	uint32_t s = atomic_load_explicit(&lk->state, memory_order_relaxed);
	uint64_t ns = atomic_load_explicit(&lk->unbiased_ns, memory_order_relaxed);
	bool unbiased = (s & (KL_RM_S_UNBIASED | KL_RM_S_FENCED)) && s != RM_S_POISON;

	kli_init();
	if (kli_fence_asym && unbiased)
		ns += kli_now_ns() - atomic_load_explicit(&lk->unbiased_at, memory_order_relaxed);
	out->revocations = atomic_load_explicit(&lk->revocations, memory_order_relaxed);
	out->revoke_ns = atomic_load_explicit(&lk->revoke_ns, memory_order_relaxed);
	out->unbiased_ns = kli_fence_asym ? ns : 0;
	out->biased = kli_fence_asym && !unbiased && s != RM_S_POISON;
}
