/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/rwlock.c - kl_rwlock, the adaptive reader-writer lock.
 *
 * WHAT. The kernel rwlock shape (FreeBSD rw/sx, OpenBSD rwlock): one word holds a
 * reader count or the writer; contended lockers spin for a learnt time budget, then
 * sleep. Writers queue to spin (the OSQ, as kl_mutex's spinners and Linux rwsem's
 * writers; its tail hashed by the lock's address, kli_osq_hashed, as the lock has no room
 * for one), so that only the queue's head polls the word, paced as kl_mutex's spinner,
 * while the lock keeps moving, leaving a relocking writer the lock until its turn after
 * RW_TURN_NS or RW_PASS_MAX releases. A sleeping writer woken and beaten queues to spin
 * again.
 * The sleep side is OpenBSD's 2024-25 rework (dlg): sleepers are COUNTED in words of their
 * own, writers and readers sleep on different futex words, and an unlock wakes one writer
 * or the readers - never a herd that mostly goes back to sleep. Added here: a writer that
 * unlocks while readers sleep HANDS the lock to all of them (they wake holding it), which
 * bounds reader starvation under writer preference - at most once per RW_HANDOFF_EVERY_NS
 * (1 ms, kl_mutex's hand-off bound). Every unlock handing off made a convoy once threads
 * outnumber CPUs: the granted readers hold the lock until the scheduler runs each of them,
 * and everyone else queues behind sleeping threads (docs/results.md, "Figures behind the
 * theory blocks"). Between hand-offs a writer's unlock wakes the next writer (or, with
 * none waiting, the readers) and threads compete, as kl_mutex's barging does.
 *
 * Reader bias (BRAVO): readers that collide publish their holds in slots of their own
 * thread records instead of counting themselves in the word; rwlock_bias.c holds it and
 * its account (its ordering labels, B1-B10, are listed below with the others).
 *
 * Realtime readers (the interposer's, XSH pthread_rwlock_rdlock): the reader slow path
 * has a "bold" mode, kli_rwlock_read_lock_outranking(), for a reader its caller knows to
 * outrank every blocked writer: it defers to a write holder (WRLOCK) but not to WRWANT.
 * It enters as any reader (R1) and leaves as any (R2; the last one out wakes a sleeping
 * writer), and sleeps only behind a holder, whose release grants it (G1-G4): no new
 * ordering. kl_rwlock's own API never uses it (it keeps no priorities).
 *
 * STATE. Word `word` (uintptr_t):
 *   bit 0  WRLOCK     write-held; bits 7..63 are then the writer's owner id (a multiple
 *                     of 128 naming one thread lifetime, locks/thread.h - not its record,
 *                     which a later thread may reuse: a lock write-held by a thread that
 *                     exited stays held by nobody alive, so no later thread may unlock,
 *                     downgrade or wowned() it; the id costs the fast path nothing)
 *   bit 1  WRWANT     a writer waits - asleep (counted in wwait), or spinning (counted
 *                     in wspin; FreeBSD's WRITE_SPINNER) while readers hold the lock (a
 *                     spinner does not set it against a writer): new readers defer, so
 *                     the readers inside drain. A hint for fairness only - every wake-up
 *                     decision reads the counts - so it may be stale: a reader that sees it
 *                     with no writer counted clears it. Writers take a free word that has
 *                     it (they barge) and release keeping it; a release that then sees no
 *                     writer asleep drops it (klock/rwlock.h, kl_rwlock_write_sleepers_).
 *   bit 2  DESTROYED  poisoned by kl_rwlock_destroy()
 *   bit 3  BIAS       readers may hold it through their threads' slots (see above);
 *                     set only while no writer holds it, cleared by a revoking writer
 *   bit 4  BIAS_WAIT  a revoking writer sleeps until a biased hold goes (set and cleared
 *                     only by that writer, which holds WRLOCK)
 *   bits 5-6          always 0
 *   bits 7..63        reader count when WRLOCK is clear (RW_RD_ONE per reader)
 *   0 = free. Read fast path: with BIAS, publish in the thread's slot (B1/B2); else CAS
 *   count+1 if no WRLOCK/WRWANT/DESTROYED. Write fast path: CAS 0 -> id|WRLOCK, or
 *   WRWANT -> id|WRLOCK|WRWANT (a word with BIAS takes the library's W1/B3 and a
 *   revocation).
 * Side words: wwait (the writers' futex word; low 16 bits: writers asleep or about to
 * sleep; high 16 bits: wake-ups sent to them and not yet taken back, at most the low half -
 * one wake-up system call per sleep, not one per release while the woken writer is on its
 * way), wspin (writers spinning), wpasses (write releases since a writer began spinning
 * alone or last won, counted while it spins alone: its sign of progress and its turn, a
 * relaxed hint; as kl_mutex's passes), rwait (low 32 bits: readers asleep or about to; high
 * 32 bits: read holds granted to them by a writer and not yet claimed), rseq (readers'
 * futex word), spin_ns (EWMA of successful spin times, spin.h), granted_at
 * (the coarse clock, ~1 us units, of the last hand-off to sleeping readers; 0: never;
 * written by the writer that hands off, read by the next writers: a hint, relaxed), bias_at
 * (16 bits of a 256 ns clock before which the bias stays off; 0: never revoked; a hint,
 * relaxed). Sleepers
 * and spinners are counted apart so that a wake-up system call is made only for a sleeper.
 *
 * INVARIANTS.
 *   I1 Wake-ups never depend on WRWANT: a sleeper counts itself (S1/S2) before its last
 *      look at the word, and every transition a sleeper waits for (write release, last
 *      reader out, writer giving up) is followed by a look at the counts (SB pairs below).
 *   I2 Grants: a writer leaving the write side (unlock or downgrade) while readers sleep
 *      adds one grant per ungranted sleeping reader (G1) and only then turns the word into
 *      that many read holds (G3). A sleeping reader that finds a grant claims it (G2),
 *      leaving the count and the grant together, and waits for the word to show read
 *      holds (G4) before returning: grants == holds, none leaked, none double-spent.
 *      grants <= sleeping readers always, and every counted reader checks for a grant
 *      before it sleeps and after every wake-up, so every grant is claimed.
 *   I3 Bounds (no starvation either side): a waiting writer sets WRWANT (a spinning one
 *      as soon as it sees readers inside, a sleeping one before it sleeps), so new readers
 *      wait (spinning, then asleep) and the readers inside drain; the last one out wakes a
 *      sleeping writer (a spinning one sees it). The first writer release at least
 *      RW_HANDOFF_EVERY_NS after the last hand-off (and every downgrade) grants every
 *      reader asleep at that moment before the next writer can get in; a release that
 *      does not hand off takes the no-grant path every release took before when all
 *      sleepers were granted (I1 unchanged: the counts decide who is woken).
 *      Writers among themselves barge (not FIFO); a writer woken and beaten queues to
 *      spin again, then sleeps again. The queue's head - the writer spinning alone -
 *      lets one that releases and relocks at once keep the lock (it does not take a
 *      free word less than RW_CONFIRM_NS after a counted release, nor one that closes
 *      again within RW_CONFIRM_LOOKS looks), and is not starved by it: after RW_TURN_NS it claims its turn (wpasses set to RW_PASS_MAX), and after
 *      RW_PASS_MAX releases past it, or a claim, the releaser waits up to RW_POLITE_NS
 *      for the free lock to be taken (kl_mutex's I3). Against readers it waits at most
 *      RW_RIDE_READERS_NS before it sets WRWANT, and the drain bound applies. A spinning
 *      reader leaves a word that closes again within RW_CONFIRM_LOOKS looks to the
 *      writer's thread until RW_TURN_NS has passed, then takes the first opening. Queued
 *      writers, and spinners in a crowd (a moment when the head role passes), sleep when
 *      their budgets run out, and the sleep side's bounds apply.
 *
 * ORDERING (labels at the sites).
 *   R1  read acquire CAS (count+1)              pairs with W2/G3 of the last writer
 *   R2  read release fetch-sub (seq_cst)        pairs with W1 of the next writer;
 *                                               SB with S2 (then reads wwait)
 *   W1  write acquire CAS                       pairs with W2 and R2
 *   W2  write release CAS (seq_cst)             pairs with R1/W1; SB with S1/S2 (then
 *                                               reads rwait/wwait)
 *   S1  reader's seq_cst increment of rwait, then seq_cst load of the word: with W2 this
 *       is the store-buffer pattern, all four seq_cst, so either the releaser sees the
 *       count or the sleeper sees the release. The futex value (rseq) closes the rest:
 *       the sleeper read rseq before its last look, and wakers bump it after theirs.
 *   Q1  a reader's seq_cst fetch-or of RW_RSEQ_ASLEEP into rseq (the value it may sleep
 *       on), then its last look (S1); Q2, a waker's seq_cst load of rseq after its
 *       W2/G3: the store-buffer pattern once more - a waker that sees no mark skips the
 *       wake-up, and then every reader that marks later looks after the release (a
 *       reader asleep on a marked value was either seen or bumped past, and its wait
 *       returns). Q3, the bump (release CAS, odd to even), pairs with Q1's acquire.
 *   S2  the same for writers (wwait, their futex word) against W2 and R2.
 *   W3  seq_cst CAS on wwait: a waker counting a wake-up on its way (it then skips the
 *       system call while every sleeper has one coming), and a sleeper taking one back
 *       before its last look (S2). A releaser that skips read the count before that
 *       take-back in the seq_cst order, so the taker's look comes after the release. A
 *       count added after a sleeper read wwait changes its futex value, so that wait
 *       returns at once and the sleeper takes the count back and looks again.
 *   G1  release CAS adding grants    pairs with G2, the claimer's acquire CAS: the
 *       writer's critical section happens-before the claimer's read section
 *   G3  release CAS word -> n read holds   pairs with G4, the claimer's acquire load
 *   H1  a realtime (bold) reader's granted_at = 0, released by its S1 RMW; pairs with
 *       H2, the releasing writer's acquire load of rwait: a writer that counts it sees
 *       the hand-off due (a hint otherwise: relaxed)
 *   B1  biased reader's seq_cst exchange publishing its slot, then B2, its seq_cst load of
 *       the word; B3, a writer's seq_cst W1 CAS from a word with BIAS, then B4, its seq_cst
 *       loads of every thread's slot: the store-buffering pattern again - either the reader
 *       sees WRLOCK (and takes its slot back) or the writer sees the slot (and waits).
 *       B2 is also the acquire that orders the reader after the last writer: BIAS was set
 *       by an RMW (B6) that continues the release sequence of that writer's W2.
 *   B5  a biased reader's release store clearing its slot   pairs with B4 (acquire)
 *   B6  relaxed CAS setting BIAS, by a counted reader (no writer can hold the lock)
 *   B7  a biased release's light fence (compiler barrier) between B5 and its load of the
 *       word; B8, a revoking writer's heavy fence (membarrier) between setting BIAS_WAIT
 *       and its look at the slot: the asymmetric pair - either the releaser sees
 *       BIAS_WAIT and wakes, or the writer sees the slot cleared and does not sleep.
 *   B9  the waker's release bump of rw_revoke_seq   pairs with B10, the sleeper's acquire
 *       load before its look: a wait on a value read before the bump returns at once.
 *   wspin and wpasses order nothing (relaxed): a count missed or lost only moves a
 *   spinner's restart or turn; whoever takes the lock still does so by W1.
 *
 * COSTS. Pros: one-CAS uncontended paths on both sides; no herd (OpenBSD's sys-time win);
 * bounded starvation both ways; downgrade; timed variants; readers that collide stop
 * sharing a line (the bias). Cons: unbiased readers share one cache line; a biased lock's
 * writer pays a scan of every thread record ever registered (two lines each, the walk
 * prefetching ahead: ~70 ns a record when they miss, 18 µs at 256 threads,
 * bench/rw-revoke -c), and one that sleeps a membarrier.
 *
 * Inline fast paths. klock/inline/rwlock.h copies the two uncontended write steps into the
 * caller (C builds without instruments, as klock/mutex.h): W1 from 0 to the thread's owner
 * id (the exported TLS alias kl_mutex_self_) | WRLOCK, and the unlock's steps in order -
 * rwait read 0 (no readers to hand the lock to), W2 back to 0, the seq_cst loads of rwait
 * and wwait - calling kl_rwlock_write_unlocked_() (rw_wake_after) only if a sleeper
 * counted itself, and kl_rwlock_count_pass_() (rw_pass) while wspin is 1. Any other case
 * calls the exported function, which starts afresh: a failed CAS changed nothing, so
 * misuse is still caught there. The read side likewise: with BIAS the biased entry (B1/B2,
 * kl_rwlock_bias_enter_), else R1 once, into a word with no RW_RD_BLOCK bit (else the
 * library, kl_rwlock_read_contended_), and the whole unlock - the thread's slot cleared if
 * it holds the lock (B5), else R2, then rw_read_released_badly()'s test, and only if it
 * holds the library's rest, kl_rwlock_read_released_() (rw_read_released_slow: undo and
 * report a misuse, or wake the writer that the last reader out found asleep). The encoding
 * the header needs is there as KL_RWLOCK_*_, and rwlock_impl.h's RW_* are defined from it.
 * klbench latency: a write pair 7.3-7.5 ns through the library, 4.8 ns inline (kl_mutex's
 * 4.3-4.6); a read pair 7.1-7.2 ns, 5.1-5.2 ns inline.
 *
 * LIMITS. A thread that exits holding a read lock leaves it held for ever (counted or in
 * its record's slot, which the record's next thread may then release); no read recursion;
 * writers are not FIFO among themselves, and only a lone spinning writer gets kl_mutex's
 * progress-restarted budget and turns (a crowd of spinners is not queued: each keeps a
 * fixed budget); fewer than 2^16 writers asleep or spinning per lock; WRWANT can be lost
 * in a race (it is only a hint: readers then briefly overtake a sleeping writer, which
 * re-sets it on its next look).
 */
#include <klock/rwlock.h>
#include <klock/wait.h>
#include "hooks.h"
#include "osq.h"
#include "rwlock_impl.h"
#include "spin.h"
#include "thread.h"

/* What kl_rwlock_destroy() stores. */
#define RW_POISON (KLI_OWNER_POISON | RW_DESTROYED)
/* rseq bit 0: a reader may be asleep on this value (set by the reader before its last
 * look, cleared by the waker's bump: an odd value + 1). */
#define RW_RSEQ_ASLEEP 1u
/* rwait halves. */
#define RW_SLEEPER 1ull
#define RW_GRANT (1ull << 32)

#define RW_KIND KLI_KIND_RWLOCK
/* Shortest time between two hand-offs to sleeping readers: kl_mutex's hand-off bound. */
#define RW_HANDOFF_EVERY_NS 1000000ull
/* granted_at's clock: kli_now_ns() >> this (~1 us units; 32 bits wrap after ~73 min). */
#define RW_CLOCK_SHIFT 10
/* A spinning writer's budget never goes below this: its paced polls (spin.h) reach their
 * longest interval and look a few times (50 + 100 + ... + 1000 ns, then 1000 ns apart). */
#define RW_WSPIN_FLOOR_NS (4 * KLI_POLL_MAX_NS)
/* A writer spinning alone, while the lock's waits are short, gets this long without
 * progress: kl_mutex's MTX_STALL_NS (a holder stopped by the host or the guest's tick for
 * 5-100 us is ridden out, not slept through). */
#define RW_STALL_NS 40000u
/* Write releases while a writer spins before the releaser leaves it the turn even if the
 * spinner has not claimed it (sections of a few ns): kl_mutex's MTX_PASS_MAX. */
#define RW_PASS_MAX KL_MUTEX_PASS_MAX_
/* How long a releaser leaving the turn waits for the free lock to be taken: more than two
 * of a spinner's longest poll intervals. A turn given after RW_PASS_MAX releases (no
 * claim) finds the spinner polling at the streak cap (kli_pace_streak). */
#define RW_POLITE_NS 10000u
_Static_assert(RW_POLITE_NS > 2 * KLI_STREAK_POLL_NS, "a polite releaser outwaits one poll");
_Static_assert(RW_PASS_MAX == KL_MUTEX_PASS_MAX_, "kl_rwlock_count_pass_ uses the mutex's");
/* After an offered turn nobody took (the spinner lost its CPU): releases before the next
 * offer (kl_mutex's MTX_PASS_CREDIT). */
#define RW_PASS_CREDIT 4096u
/* How long a writer spinning alone lets a writer that keeps relocking keep the lock
 * before it claims its turn (kl_mutex's MTX_TURN_NS). */
#define RW_TURN_NS 32000u
/* A free word this soon after the last counted release is a relocking writer's gap, not
 * a writer gone (kl_mutex's MTX_CONFIRM_NS). */
#define RW_CONFIRM_NS 250u
/* A waiter that finds the word open before its turn takes it only after this many more
 * looks, RW_CONFIRM_NS apart, all find it open (rw_still_open): a thread that releases and
 * retakes the lock at once closes it again within nanoseconds. */
#define RW_CONFIRM_LOOKS 2u
/* How long a writer spinning alone leaves the lock to readers that keep retaking it
 * before it sets WRWANT (a reader streak's turn; a writer's streak gets RW_TURN_NS). Short:
 * readers in long sections lose their parallelism while a writer waits on them -
 * klbench -t 2 -w 1 -c 512: 5.3 M ops/s with no ride, 4.8 M with 8 us, 3.9 M with 32 us;
 * with 4-word sections at 10% writes 22, 47 and 55 M (docs/design-adaptive.md). */
#define RW_RIDE_READERS_NS 8000u

_Atomic uint64_t kli_rw_handoff_every_ns = RW_HANDOFF_EVERY_NS;

/* wwait: writers asleep or about to sleep (low half), wake-ups sent to them that they
 * have not yet taken back (high half; never more than the low half). */
#define RW_WW_WOKEN KL_RWLOCK_WW_WOKEN_
#define RW_WW_ASLEEP_MASK (RW_WW_WOKEN - 1u)

static inline uint32_t rw_ww_asleep(uint32_t w)
{
	return w & RW_WW_ASLEEP_MASK;
}

static inline uint32_t rw_ww_woken(uint32_t w)
{
	return w >> 16;
}

/* The writer's owner id, 0 when not write-held. */
static inline kli_owner_t rw_owner(uintptr_t v)
{
	return (v & RW_WRLOCK) ? v & ~RW_FLAGS : 0;
}

/* Writers waiting, spinning or asleep (relaxed: a hint for readers and for WRWANT). */
static inline uint32_t rw_writers_waiting(const struct kl_rwlock *rw)
{
	return rw_ww_asleep(atomic_load_explicit(&rw->wwait, memory_order_relaxed)) +
	       atomic_load_explicit(&rw->wspin, memory_order_relaxed);
}

static inline uint32_t rw_sleepers(uint64_t s)
{
	return (uint32_t)s;
}

static inline uint32_t rw_grants(uint64_t s)
{
	return (uint32_t)(s >> 32);
}

static KL_COLD KL_NOINLINE void rw_report(const struct kl_rwlock *rw, const char *what,
					  const void *site)
{
	kli_report(what, kli_kind_name(RW_KIND), rw, site, NULL);
}

static const char *rw_lock_misuse(int err)
{
	return err == EDEADLK ? "relock of a held non-recursive lock" : "use after destroy";
}

/*
 * Wakes one sleeping writer, unless every writer counted asleep has a wake-up on its way
 * (wwait's high half). Writers sleep on wwait itself, so the count that says "a wake-up
 * is coming" also makes every wait that has not yet started fail (the futex value moved),
 * and each sleeper takes a wake-up back before its last look (W3). Without this, until
 * the woken writer ran, each of the holder's releases made a wake-up system call of its
 * own. `strace -f -e futex` of `klbench run -l kl_rwlock -t 2 -w 100 -c 1 -r 1 -d 0.1`,
 * 3 runs each: 1373-1576 wake calls and 414-701 waits before, 654-1031 and 180-361 after.
 */
static void rw_wake_writer(struct kl_rwlock *rw)
{
	uint32_t w = atomic_load_explicit(&rw->wwait, memory_order_relaxed);

	do {
		if (rw_ww_woken(w) >= rw_ww_asleep(w))
			return;
		/* W3: seq_cst, pairs with the sleeper's W3 take-back before its last look. */
	} while (!atomic_compare_exchange_weak_explicit(&rw->wwait, &w, w + RW_WW_WOKEN,
							memory_order_seq_cst,
							memory_order_relaxed));
	kl_wake(&rw->wwait, 1);
	kli_hook_woke(rw, RW_KIND);
}

/* A writer stops counting itself asleep; wake-ups on their way stay at most one per
 * writer still asleep (a surplus would make rw_wake_writer skip a sleeper). Returns how
 * many remain asleep. */
static uint32_t rw_write_unsleep(struct kl_rwlock *rw)
{
	uint32_t w = atomic_load_explicit(&rw->wwait, memory_order_relaxed), left, woken;

	do {
		left = rw_ww_asleep(w) - 1;
		woken = rw_ww_woken(w) < left ? rw_ww_woken(w) : left;
	} while (!atomic_compare_exchange_weak_explicit(&rw->wwait, &w,
							woken * RW_WW_WOKEN + left,
							memory_order_seq_cst, memory_order_relaxed));
	return left;
}

/*
 * Wakes every reader asleep on rseq - unless none can be: a reader about to sleep marks
 * the value it will sleep on (RW_RSEQ_ASLEEP, Q1), and a bump clears the mark, so a value
 * without it has had no sleeper since the last wake-up. Readers woken but not yet run
 * (threads outnumber CPUs) then cost the releases that follow no system call; before,
 * each write release woke them again while they stayed counted (8 threads on 2 CPUs,
 * 10% writes: a wake-up call for ~40% of the writes).
 */
static void rw_wake_readers(struct kl_rwlock *rw)
{
	/* Q2: seq_cst, SB with Q1 (after our W2/G3 in the seq_cst order). */
	uint32_t seq = atomic_load_explicit(&rw->rseq, memory_order_seq_cst);

	if (!(seq & RW_RSEQ_ASLEEP))
		return;
	/* Q3: release, pairs with Q1 (our G1 is seen by a reader that reads the bump); a
	 * failed CAS means another waker bumped it, and that one wakes. */
	if (!atomic_compare_exchange_strong_explicit(&rw->rseq, &seq, seq + 1,
						     memory_order_release, memory_order_relaxed))
		return;
	kl_wake(&rw->rseq, KL_WAKE_ALL);
	kli_hook_woke(rw, RW_KIND);
}

/* ---- read side ----------------------------------------------------------------------- */

/* One attempt to enter shared: 0, EAGAIN (a writer holds it or sleeps for it), EDEADLK
 * (we are the writer), EINVAL (destroyed). @order: seq_cst when it is a sleeper's last
 * look (S1). @bold: a realtime reader that outranks every blocked writer (XSH
 * pthread_rwlock_rdlock; kli_rwlock_read_lock_outranking()): it defers to a writer that
 * holds the lock, not to one that waits. */
static int rw_read_try(struct kl_rwlock *rw, kli_owner_t self, memory_order order,
		       bool bold)
{
	uintptr_t v = atomic_load_explicit(&rw->word, order);

	for (;;) {
		if (v & RW_DESTROYED)
			return EINVAL;
		if (v & RW_WRLOCK)
			return rw_owner(v) == self ? EDEADLK : EAGAIN;
		if ((v & RW_WRWANT) && !bold) {
			if (rw_writers_waiting(rw) != 0)
				return EAGAIN; /* defer to the waiting writer (I3) */
			/* Stale (its writer left): clear it and look again. */
			atomic_compare_exchange_weak_explicit(&rw->word, &v, v & ~RW_WRWANT,
							      memory_order_relaxed,
							      memory_order_relaxed);
			continue;
		}
		if ((v & RW_BIAS) && !(v & RW_RD_BLOCK) && rw_bias_enter(rw))
			return 0; /* B1/B2 */
		/* R1: acquire, pairs with the last writer's W2/G3. */
		if (atomic_compare_exchange_weak_explicit(&rw->word, &v, v + RW_RD_ONE,
							  memory_order_acquire,
							  memory_order_relaxed))
			return 0;
	}
}

/* After R2 took away a hold from word @old: misuse, or the last reader out while a
 * writer sleeps. */
static KL_NOINLINE void rw_read_released_slow(struct kl_rwlock *rw, uintptr_t old,
					      const void *site)
{
	if ((old & (RW_WRLOCK | RW_DESTROYED)) || old < RW_RD_ONE) {
		atomic_fetch_add_explicit(&rw->word, RW_RD_ONE, memory_order_relaxed); /* undo */
		if (!(old & (RW_WRLOCK | RW_DESTROYED)) && kli_rw_bias_release_other(rw))
			return; /* another thread's biased hold (see there) */
		rw_report(rw, (old & RW_DESTROYED) ? "use after destroy"
						   : "read unlock of a lock not read-held", site);
		return;
	}
	rw_wake_writer(rw); /* last reader out, a writer sleeps */
}

/* R2: drops one read hold; returns the word before. */
static KL_ALWAYS_INLINE uintptr_t rw_read_sub(struct kl_rwlock *rw)
{
	/* R2: release (seq_cst: SB with S2, then we read wwait). */
	return atomic_fetch_sub_explicit(&rw->word, RW_RD_ONE, memory_order_seq_cst);
}

/* After R2 from @old: misuse, or the last reader out while a writer sleeps? */
static KL_ALWAYS_INLINE bool rw_read_released_badly(struct kl_rwlock *rw, uintptr_t old)
{
	return kl_unlikely((old & (RW_WRLOCK | RW_DESTROYED)) || old < RW_RD_ONE) ||
	       ((old & ~RW_FLAGS) == RW_RD_ONE &&
		kl_unlikely(atomic_load_explicit(&rw->wwait, memory_order_seq_cst) != 0));
}

/* Drops one read hold (internal callers): ours through the slot if we have one (B5). */
static void rw_read_release(struct kl_rwlock *rw, const void *site)
{
	uintptr_t old;

	if (rw_bias_release(rw))
		return;
	old = rw_read_sub(rw);

	if (rw_read_released_badly(rw, old))
		rw_read_released_slow(rw, old, site);
}

/* A counted sleeper leaves the count. Claims a grant if one is pending (then it holds
 * the lock, and drops the hold it may have taken itself). True if it holds the lock. */
static bool rw_read_leave(struct kl_rwlock *rw, bool entered, bool only_if_granted,
			  const void *site)
{
	uint64_t s = atomic_load_explicit(&rw->rwait, memory_order_relaxed);
	struct kli_spin spin;

	for (;;) {
		if (rw_grants(s) != 0) {
			/* G2: acquire, pairs with G1. */
			if (atomic_compare_exchange_weak_explicit(&rw->rwait, &s,
								  s - RW_GRANT - RW_SLEEPER,
								  memory_order_acquire,
								  memory_order_relaxed))
				break;
		} else if (only_if_granted) {
			return false;
		} else if (atomic_compare_exchange_weak_explicit(&rw->rwait, &s, s - RW_SLEEPER,
								 memory_order_relaxed,
								 memory_order_relaxed)) {
			return entered;
		}
	}
	if (entered)
		rw_read_release(rw, site);
	/* G4: acquire, pairs with G3: our hold is in the word before we can drop it. */
	kli_spin_start(&spin, KLI_STALL_NS);
	while (atomic_load_explicit(&rw->word, memory_order_acquire) & RW_WRLOCK)
		kli_spin_stall(&spin);
	return true;
}

/* A writer holds the lock, or waits for it (the drain it needs is short; a @bold reader
 * does not wait for that). */
static bool rw_read_blocked(const struct kl_rwlock *rw, uintptr_t v, bool bold)
{
	return (v & RW_WRLOCK) || (!bold && (v & RW_WRWANT) && rw_writers_waiting(rw) != 0);
}

/*
 * A waiter found the word open (for a @writer: free; for a reader: no writer holds or
 * waits for it) before its turn. A thread that releases the lock and at once takes it
 * again (reads and writes mixed, or reads alone) leaves such gaps every few nanoseconds;
 * taking one only moves the line to us and makes that thread wait for our section -
 * streaks of one section each way, and both threads' slow paths. So look again,
 * RW_CONFIRM_NS apart, RW_CONFIRM_LOOKS times (kl_mutex's mtx_look_again): still open,
 * and that thread has gone. True if it stayed open.
 */
static bool rw_still_open(const struct kl_rwlock *rw, bool writer)
{
	uintptr_t v;

	for (unsigned i = 0; i < RW_CONFIRM_LOOKS; i++) {
		kli_spin_for(RW_CONFIRM_NS);
		v = atomic_load_explicit(&rw->word, memory_order_relaxed);
		if (writer ? (v & ~(RW_WRWANT | RW_BIAS)) != 0 : rw_read_blocked(rw, v, false))
			return false;
	}
	return true;
}

/* Spins while a writer holds or waits for the lock. 0 once entered, or EAGAIN. Before
 * RW_TURN_NS have passed, a reader (not a @bold one) joins an open word only once
 * rw_still_open() says the writer has gone; one that saw the writer come back rides its
 * streak: its budget is stretched to its turn plus the learnt budget, and that wait,
 * chosen rather than needed, is not learnt. */
static int rw_read_spin(struct kl_rwlock *rw, kli_owner_t self, struct kli_wait *w,
			bool bold)
{
	uint64_t t0 = kl_arch_cycles(), turn = t0 + kli_ns_to_cycles(RW_TURN_NS);
	uint64_t budget = kli_spin_budget(&rw->spin_ns);
	bool riding = false;
	struct kli_spin s;
	int err;

	kli_wait_spin(w);
	kli_spin_start(&s, budget);
	do {
		err = EAGAIN;
		if (rw_read_blocked(rw, atomic_load_explicit(&rw->word, memory_order_relaxed),
				    bold))
			continue;
		if (bold || kl_arch_cycles() >= turn || rw_still_open(rw, false)) {
			err = rw_read_try(rw, self, memory_order_relaxed, bold);
			if (err != EAGAIN)
				break;
		} else if (!riding) {
			riding = true; /* the writer came back: leave it its streak */
			kli_spin_start(&s, RW_TURN_NS + budget);
		}
	} while (kli_spin_backoff(&s));
	if (!riding)
		kli_spin_learn(&rw->spin_ns, err == 0,
			       kli_cycles_to_ns(kl_arch_cycles() - t0));
	return err;
}

/* Sleeps until entered, granted, timed out or misused. */
static int rw_read_sleep(struct kl_rwlock *rw, kli_owner_t self, struct kli_wait *w,
			 const struct timespec *abstime, bool bold, const void *site)
{
	uint32_t seq;
	int err;

	/* A realtime reader that outranks the blocked writers must be handed the lock at
	 * the next write release, whenever the last hand-off was (XSH: priority order). */
	if (bold) /* H1: released by S1's RMW; pairs with H2 in rw_write_leave() */
		atomic_store_explicit(&rw->granted_at, 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&rw->rwait, RW_SLEEPER, memory_order_seq_cst); /* S1 */
	for (;;) {
		/* The futex value first, then every condition it guards (a grant, the word):
		 * a grant and its wake-up landing between a grant check and this load would
		 * otherwise leave us asleep on the new value (G1 precedes the bump that
		 * publishes it: the acquire here makes it visible below). */
		/* Q1: seq_cst, marks the value we may sleep on; SB with Q2 (then our last
		 * look); acquire, pairs with Q3. */
		seq = atomic_fetch_or_explicit(&rw->rseq, RW_RSEQ_ASLEEP, memory_order_seq_cst) |
		      RW_RSEQ_ASLEEP;
		if (rw_read_leave(rw, false, true, site)) {
			kli_wait_handoff(w);
			return 0; /* a writer handed us the lock */
		}
		kli_test_point("rwlock.read_sleep.checked");
		err = rw_read_try(rw, self, memory_order_seq_cst, bold); /* S1: last look */
		if (err != EAGAIN)
			break;
		if (kli_deadline_passed(abstime)) {
			err = ETIMEDOUT;
			break;
		}
		kli_wait_sleep(w);
		kl_wait(&rw->rseq, seq, abstime);
		kli_test_point("rwlock.read_sleep.woken");
	}
	/* A grant may have arrived meanwhile: then we hold the lock whatever happened. */
	return rw_read_leave(rw, err == 0, false, site) ? 0 : err;
}

static int rw_read_slow(struct kl_rwlock *rw, const struct timespec *abstime, unsigned flags,
			bool bold, const void *site)
{
	kli_owner_t self = kli_owner();
	struct kli_wait w;
	int err;

	kli_wait_begin(&w, rw, RW_KIND, flags, site);
	err = rw_read_try(rw, self, memory_order_relaxed, bold);
	if (err == EAGAIN)
		err = rw_read_spin(rw, self, &w, bold);
	if (err == EAGAIN)
		err = rw_read_sleep(rw, self, &w, abstime, bold, site);
	kli_wait_end(&w, rw, RW_KIND, flags | (err != 0 ? KLI_HF_FAILED : 0), site);
	return err;
}

/* The read fast path while nothing blocks readers: a biased entry (B1/B2) if the word
 * has BIAS, else CAS count+1 (R1). True if entered; *@raced set if it entered counted
 * after losing the word to another reader (kli_rw_bias_arm's sign). */
static KL_ALWAYS_INLINE bool rw_read_fast(struct kl_rwlock *rw, bool *raced)
{
	uintptr_t v = atomic_load_explicit(&rw->word, memory_order_relaxed);

	if ((v & RW_BIAS) && !(v & RW_RD_BLOCK) && rw_bias_enter(rw)) {
		*raced = false;
		return true;
	}
	while (kl_likely(!(v & RW_RD_BLOCK))) {
		/* R1: acquire, pairs with the last writer's W2/G3. */
		if (kl_likely(atomic_compare_exchange_weak_explicit(&rw->word, &v, v + RW_RD_ONE,
								    memory_order_acquire,
								    memory_order_relaxed)))
			return true;
		*raced = true;
	}
	return false;
}

static int rw_read_lock(struct kl_rwlock *rw, const struct timespec *abstime, bool bold,
			const void *site)
{
	unsigned flags = KLI_HF_READ | (abstime != NULL ? KLI_HF_TRY : 0);
	bool raced = false;
	int err = 0;

	kli_hook_acquire(rw, RW_KIND, flags, site);
	if (!rw_read_fast(rw, &raced))
		err = rw_read_slow(rw, abstime, flags, bold, site);
	else if (raced)
		kli_rw_bias_arm(rw);
	kli_hook_acquired(rw, RW_KIND, flags | (err != 0 ? KLI_HF_FAILED : 0), site);
	return err;
}

/* ---- write side ------------------------------------------------------------------------ */

/* One attempt to take it exclusive: 0, EAGAIN, EDEADLK, EINVAL. */
static int rw_write_try(struct kl_rwlock *rw, kli_owner_t self, memory_order order)
{
	uintptr_t v = atomic_load_explicit(&rw->word, order);

	for (;;) {
		if (v & RW_DESTROYED)
			return EINVAL;
		if (v & ~(RW_WRWANT | RW_BIAS))
			return rw_owner(v) == self ? EDEADLK : EAGAIN;
		/* W1: acquire, pairs with W2 and R2. WRWANT stays for the other sleepers, BIAS
		 * until the caller's rw_revoke(). B3 (from a biased word): seq_cst, SB with
		 * B1/B2 - either that reader sees WRLOCK or our B4 sees its slot. */
		if (atomic_compare_exchange_weak_explicit(&rw->word, &v,
							  self | RW_WRLOCK | v,
							  (v & RW_BIAS) ? memory_order_seq_cst
									: memory_order_acquire,
							  memory_order_relaxed))
			return 0;
	}
}

/* What a spinning writer saw at its last look; a change in either is progress. */
struct rw_seen {
	uintptr_t word;   /* another writer, or fewer readers */
	uint32_t passes;  /* a writer released and relocked between two looks (wpasses) */
	uint64_t since;   /* when passes last moved (cycles) */
};

static bool rw_moved(const struct kl_rwlock *rw, uintptr_t v, struct rw_seen *seen)
{
	uint32_t p = atomic_load_explicit(&rw->wpasses, memory_order_relaxed);
	bool moved = v != seen->word || p != seen->passes;

	if (p != seen->passes)
		seen->since = kl_arch_cycles();
	seen->word = v;
	seen->passes = p;
	return moved;
}

static inline bool rw_alone(const struct kl_rwlock *rw)
{
	return atomic_load_explicit(&rw->wspin, memory_order_relaxed) == 1;
}

/* A writer spinning alone found the lock free: is its holder releasing and relocking it
 * (wpasses moved less than RW_CONFIRM_NS ago), short of our turn? Then the free word is a
 * gap between two of that writer's sections, and taking it would only swap the roles at
 * the price of the line's trips and both writers' slow paths (kl_mutex's mtx_look_again:
 * streaks of 1-16 sections instead of hundreds). */
static bool rw_cycling(const struct kl_rwlock *rw, const struct rw_seen *seen)
{
	return rw_alone(rw) && (int32_t)seen->passes < RW_PASS_MAX &&
	       kl_arch_cycles() - seen->since < kli_ns_to_cycles(RW_CONFIRM_NS);
}

/* A writer spinning alone claims its turn from a writer that kept the lock RW_TURN_NS:
 * its next release leaves us the lock (kl_rwlock_count_pass_). The holder may overwrite
 * the claim with its own count (both relaxed); the next look claims again. */
static void rw_claim_turn(struct kl_rwlock *rw, struct kli_pace *pace)
{
	if ((int32_t)atomic_load_explicit(&rw->wpasses, memory_order_relaxed) < RW_PASS_MAX) {
		atomic_store_explicit(&rw->wpasses, RW_PASS_MAX, memory_order_relaxed);
		kli_pace_start(pace, true); /* the holder will wait for us: look soon */
	}
}

/* The spin queue's head polls the word. Counted in wspin, it sets WRWANT when readers
 * hold the lock so that they drain (FreeBSD's WRITE_SPINNER, counted as OpenBSD counts
 * sleepers) - a writer spinning alone only after RW_RIDE_READERS_NS, leaving readers that
 * keep retaking the lock their streak, and before then it takes a free word only if
 * rw_still_open() confirms it (a reader that releases and retakes it at once has not
 * gone). Against a writer it leaves WRWANT alone: WRLOCK already keeps readers out, and
 * the flag would only send that writer's unlock (which expects self|WRLOCK) and its next
 * lock (which expects 0) down their slow paths. Writer against writer is where a rwlock
 * should cost what a mutex costs, so the head works as kl_mutex's spinner does: polls
 * paced in time (kli_pace: each look pulls the holder's line away; at most every
 * KLI_STREAK_POLL_NS once wpasses has moved between two looks: a writer retakes the
 * lock), a budget that bounds time WITHOUT PROGRESS (RW_STALL_NS while the lock's waits
 * are short), restarted when the word or wpasses moves - while wspin is 1, every write
 * release counts itself there (rw_pass), so a writer that releases and relocks between
 * two looks is seen - a free word left to that writer (rw_cycling), and a turn claimed
 * after RW_TURN_NS (rw_claim_turn) or given after RW_PASS_MAX releases (rw_pass). Only a
 * writer spinning alone gets the restarts and the turn; the queue (rw_write_spin) makes
 * the head alone but for a moment when the head role passes, and a writer that finds
 * another counted keeps a fixed budget of at least RW_WSPIN_FLOOR_NS, then sleeps. Time
 * off the CPU does not spend a budget (kli_pace_gap); losing the CPU ends the spin. 0
 * once taken, or EAGAIN. */
static int rw_write_poll(struct kl_rwlock *rw, kli_owner_t self, uint64_t budget)
{
	uint64_t t0, turn, rturn;
	struct rw_seen seen = { 0, 0, 0 };
	struct kli_spin s;
	struct kli_pace pace;
	uintptr_t v;
	uint32_t passes;
	bool moved;
	int err;
	bool alone = atomic_fetch_add_explicit(&rw->wspin, 1, memory_order_relaxed) == 0;

	if (alone)  /* count the releases past us from now */
		atomic_store_explicit(&rw->wpasses, 0, memory_order_relaxed);
	if (!alone && budget < RW_WSPIN_FLOOR_NS)
		budget = RW_WSPIN_FLOOR_NS;
	kli_spin_start(&s, budget);
	kli_pace_start(&pace, true);
	t0 = kl_arch_cycles();
	seen.since = t0;
	turn = t0 + kli_ns_to_cycles(RW_TURN_NS);
	rturn = t0 + kli_ns_to_cycles(RW_RIDE_READERS_NS);
	do {
		v = atomic_load_explicit(&rw->word, memory_order_relaxed);
		passes = seen.passes;
		moved = rw_moved(rw, v, &seen);
		if (alone && seen.passes != passes && (int32_t)seen.passes < RW_PASS_MAX)
			kli_pace_streak(&pace); /* a writer released and retook it: a streak */
		err = EAGAIN;
		if (!(v & ~(RW_WRWANT | RW_BIAS))) {
			if (!rw_cycling(rw, &seen) &&
			    (!alone || kl_arch_cycles() >= rturn || rw_still_open(rw, true)))
				err = rw_write_try(rw, self, memory_order_relaxed);
			if (err != EAGAIN)
				break;
		} else if (alone && !(v & RW_WRLOCK) && kl_arch_cycles() < rturn) {
			/* readers: leave them their streak until RW_RIDE_READERS_NS */
		} else if (!(v & (RW_WRLOCK | RW_WRWANT | RW_DESTROYED))) {
			atomic_compare_exchange_weak_explicit(&rw->word, &v, v | RW_WRWANT,
							      memory_order_relaxed,
							      memory_order_relaxed);
		} else if ((v & RW_WRLOCK) && alone && kl_arch_cycles() >= turn) {
			rw_claim_turn(rw, &pace);
		}
		if (moved && rw_alone(rw)) {
			kli_spin_start(&s, budget); /* the holder runs: restart the clock */
			t0 = kl_arch_cycles();
		}
	} while (kli_pace(&pace, &s));
	if (err == 0)  /* our turn came: the next spinner's count starts afresh */
		atomic_store_explicit(&rw->wpasses, 0, memory_order_relaxed);
	atomic_fetch_sub_explicit(&rw->wspin, 1, memory_order_relaxed);
	/* Learn the last stretch without progress (what the budget bounds). */
	kli_spin_learn(&rw->spin_ns, err == 0, kli_cycles_to_ns(kl_arch_cycles() - t0));
	return err;
}

/*
 * The spin phase: queue behind this lock's other spinning writers, each polling its own
 * record (the OSQ, locks/osq.h, as kl_mutex's spinners and Linux rwsem's writers queue),
 * then poll the word as the queue's head (rw_write_poll). Until 2026-12-04 (night)
 * every writer polled the word, and a writer that found others counted kept a fixed
 * budget and then slept: write-only, on 2 CPUs at 4-16 threads, 18-6 M ops/s against kl_mutex's 37-34 M;
 * on 16 CPUs, 16 threads, 0.9 M against 13.7 M. The budget (RW_STALL_NS while the lock's
 * waits are short, else the learnt one) bounds the wait in the queue as kl_mutex's does.
 * The queue's tail is hashed by the lock's address (kli_osq_hashed): the lock has no room
 * for one. 0 once taken, or EAGAIN.
 */
static int rw_write_spin(struct kl_rwlock *rw, kli_owner_t self, struct kli_wait *w)
{
	_Atomic uintptr_t *queue = kli_osq_hashed(rw);
	uint64_t budget = kli_stall_budget(&rw->spin_ns, RW_STALL_NS);
	struct kli_thread *me = kli_self();
	struct kli_spin s;
	int err = EAGAIN;

	kli_wait_spin(w);
	kli_spin_start(&s, budget);
	if (kli_osq_lock(queue, me, &s)) {
		err = rw_write_poll(rw, self, budget);
		kli_osq_unlock(queue, me);
	}
	return err;
}

/* The last sleeping writer timed out: nobody is left for readers to defer to. */
static void rw_writer_gave_up(struct kl_rwlock *rw, uint32_t writers_left)
{
	uintptr_t v = atomic_load_explicit(&rw->word, memory_order_relaxed);

	if (writers_left != 0) {
		rw_wake_writer(rw); /* the wake-up we may have absorbed goes to another */
		return;
	}
	if (atomic_load_explicit(&rw->wspin, memory_order_relaxed) != 0)
		return; /* a spinning writer keeps WRWANT; it grants the sleepers later */
	while ((v & RW_WRWANT) &&
	       !atomic_compare_exchange_weak_explicit(&rw->word, &v, v & ~RW_WRWANT,
						      memory_order_seq_cst, memory_order_relaxed))
		;
	if (rw_sleepers(atomic_load_explicit(&rw->rwait, memory_order_seq_cst)) != 0)
		rw_wake_readers(rw);
}

static int rw_write_sleep(struct kl_rwlock *rw, kli_owner_t self, struct kli_wait *w,
			  const struct timespec *abstime)
{
	uint32_t ww, left;
	uintptr_t v;
	bool woken = false;
	int err;

	atomic_fetch_add_explicit(&rw->wwait, 1, memory_order_seq_cst); /* S2 */
	for (;;) {
		kli_test_point("rwlock.write_sleep.counted");
		ww = atomic_load_explicit(&rw->wwait, memory_order_seq_cst);
		/* W3: take back a wake-up on its way before the last look. */
		if (rw_ww_woken(ww) != 0) {
			atomic_compare_exchange_weak_explicit(&rw->wwait, &ww, ww - RW_WW_WOKEN,
							      memory_order_seq_cst,
							      memory_order_relaxed);
			continue;
		}
		err = rw_write_try(rw, self, memory_order_seq_cst); /* S2: last look */
		if (err != EAGAIN || woken)
			break; /* woken and beaten: spin again (rw_write_slow) */
		v = atomic_load_explicit(&rw->word, memory_order_relaxed);
		if (!(v & RW_WRWANT)) { /* make new readers wait for us (I3), then look again */
			atomic_compare_exchange_weak_explicit(&rw->word, &v, v | RW_WRWANT,
							      memory_order_seq_cst,
							      memory_order_relaxed);
			continue;
		}
		if (kli_deadline_passed(abstime)) {
			err = ETIMEDOUT;
			break;
		}
		kli_wait_sleep(w);
		kl_wait(&rw->wwait, ww, abstime); /* no wake-up on its way when we read ww */
		woken = true;
	}
	left = rw_write_unsleep(rw);
	if (err == ETIMEDOUT)
		rw_writer_gave_up(rw, left);
	return err;
}

static void rw_write_leave(struct kl_rwlock *rw, uintptr_t v, uintptr_t holds);

/* The caller took the write hold (W1/B3) from a biased word: revokes the bias
 * (kli_rw_bias_revoke); on failure (@wait false: EAGAIN; the deadline: ETIMEDOUT) releases
 * the write hold, with BIAS kept. */
static KL_NOINLINE int rw_revoke(struct kl_rwlock *rw, const struct timespec *abstime,
				 bool wait)
{
	int err = kli_rw_bias_revoke(rw, abstime, wait);

	if (err != 0)
		rw_write_leave(rw, atomic_load_explicit(&rw->word, memory_order_relaxed), 0);
	return err;
}

static int rw_write_slow(struct kl_rwlock *rw, kli_owner_t self,
			 const struct timespec *abstime, unsigned flags, const void *site)
{
	struct kli_wait w;
	int err;

	kli_wait_begin(&w, rw, RW_KIND, flags, site);
	do {
		err = rw_write_try(rw, self, memory_order_relaxed);
		if (err == EAGAIN)
			err = rw_write_spin(rw, self, &w);
		if (err == EAGAIN)
			err = rw_write_sleep(rw, self, &w, abstime);
	} while (err == EAGAIN);
	if (err == 0 && kl_unlikely(atomic_load_explicit(&rw->word, memory_order_relaxed) &
				    RW_BIAS))
		err = rw_revoke(rw, abstime, true);
	kli_wait_end(&w, rw, RW_KIND, flags | (err != 0 ? KLI_HF_FAILED : 0), site);
	return err;
}

/* G1: grants a read hold to every sleeping reader not granted one yet. Returns how many. */
static uint32_t rw_grant(struct kl_rwlock *rw)
{
	uint64_t s = atomic_load_explicit(&rw->rwait, memory_order_relaxed);
	uint32_t n;

	do {
		n = rw_sleepers(s) - rw_grants(s);
		if (n == 0)
			return 0;
		/* G1: release, pairs with G2 in the claimer. */
	} while (!atomic_compare_exchange_weak_explicit(&rw->rwait, &s, s + n * RW_GRANT,
							memory_order_release, memory_order_relaxed));
	return n;
}

/*
 * After the write side was left (W2/G3, seq_cst) with @granted readers handed the lock
 * and @holds other read holds: wake whoever that transition may concern (I1). A free lock
 * with a sleeping writer wakes the writer (readers would only defer to it); granted
 * readers are woken to claim; ungranted sleepers are woken to look again.
 */
static void rw_wake_after(struct kl_rwlock *rw, uint32_t granted, uintptr_t holds)
{
	uint64_t s = atomic_load_explicit(&rw->rwait, memory_order_seq_cst); /* S1 pair */

	if (granted != 0)
		rw_wake_readers(rw);
	else if (holds == 0 && atomic_load_explicit(&rw->wwait, memory_order_seq_cst) != 0)
		rw_wake_writer(rw); /* S2 pair */
	else if (rw_sleepers(s) > rw_grants(s))
		rw_wake_readers(rw);
}

/* A write release hands the lock to sleeping readers only this often (see the top): true
 * when the last hand-off is at least kli_rw_handoff_every_ns old (or there was none),
 * and then this release is the hand-off. Under the write hold; granted_at is a hint. */
static bool rw_handoff_due(struct kl_rwlock *rw)
{
	uint32_t last = atomic_load_explicit(&rw->granted_at, memory_order_relaxed);
	uint32_t now = (uint32_t)(kli_now_ns() >> RW_CLOCK_SHIFT) | 1u; /* never 0 */
	uint64_t every = atomic_load_explicit(&kli_rw_handoff_every_ns, memory_order_relaxed);

	if (last != 0 && (uint64_t)(uint32_t)(now - last) < (every >> RW_CLOCK_SHIFT))
		return false;
	atomic_store_explicit(&rw->granted_at, now, memory_order_relaxed);
	return true;
}

/*
 * Leaves the write side (unlock: @holds 0; downgrade: 1): the word becomes @holds plus one
 * read hold per granted sleeping reader (a downgrade always grants; an unlock when a
 * hand-off is due), then whoever must wake is woken.
 */
static void rw_write_leave(struct kl_rwlock *rw, uintptr_t v, uintptr_t holds)
{
	/* H2: acquire, pairs with H1: a counted realtime sleeper's granted_at = 0 is seen */
	uint64_t s = atomic_load_explicit(&rw->rwait, memory_order_acquire);
	uint32_t n = 0;

	if (rw_sleepers(s) > rw_grants(s) && (holds != 0 || rw_handoff_due(rw)))
		n = rw_grant(rw);
	uintptr_t keep;

	/* WRWANT only while writers sleep (a stale drop is harmless: I1). Not for a spinning
	 * writer: it sets WRWANT again if readers take the free word, and kept for it the
	 * flag sent every lock and unlock of a relocking writer down the slow paths for as
	 * long as anyone spun (write-only, 2 CPUs, 8 threads: nearly every acquisition). */
	do {
		keep = (rw_ww_asleep(atomic_load_explicit(&rw->wwait, memory_order_relaxed)) != 0
				? (v & RW_WRWANT) : 0) |
		       (v & RW_BIAS); /* BIAS: only a failed revocation leaves it */
		/* W2 / G3: release (seq_cst: SB with S1/S2, then we read the counts). */
	} while (!atomic_compare_exchange_weak_explicit(&rw->word, &v,
							(holds + n) * RW_RD_ONE | keep,
							memory_order_seq_cst, memory_order_relaxed));
	rw_wake_after(rw, n, holds + n);
}

/* Leaves the free lock to a writer spinning alone whose passes are used up
 * (kl_rwlock_count_pass_): waits up to RW_POLITE_NS for anyone to take it. If nobody
 * does (the spinner lost its CPU), RW_PASS_CREDIT more releases go by before the next
 * offer. The counts are relaxed hints (written by the holder and by a spinner that starts
 * or wins): a lost update moves one turn by a few releases. */
void kl_rwlock_write_polite_(struct kl_rwlock *rw)
{
	struct kli_spin s;

	kli_spin_start(&s, RW_POLITE_NS);
	while (!(atomic_load_explicit(&rw->word, memory_order_relaxed) & ~RW_WRWANT)) {
		if (!kli_spin_poll(&s)) {
			atomic_store_explicit(&rw->wpasses, (uint32_t)-RW_PASS_CREDIT,
					      memory_order_relaxed);
			return;
		}
	}
	atomic_store_explicit(&rw->wpasses, 0, memory_order_relaxed); /* taken: a new count */
}

/*
 * After a write release, while one writer spins alone (I3): count the release in wpasses
 * - the spinner sees the count move, so a lock that a writer releases and relocks between
 * two of its looks shows progress - and after RW_PASS_MAX in a row leave it the turn
 * (kl_rwlock_count_pass_, shared with klock/rwlock.h's inline unlock).
 */
static inline void rw_pass(struct kl_rwlock *rw)
{
	/* wspin 0 or a crowd: nothing to count (a crowd's spinners keep fixed budgets) */
	if (kl_unlikely(atomic_load_explicit(&rw->wspin, memory_order_relaxed) == 1))
		kl_rwlock_count_pass_(rw);
}

static KL_NOINLINE void rw_write_unlock_slow(struct kl_rwlock *rw, kli_owner_t self,
					     const void *site)
{
	uintptr_t v = atomic_load_explicit(&rw->word, memory_order_relaxed);

	if (self == 0 || rw_owner(v) != self || (v & RW_DESTROYED)) {
		rw_report(rw, (v & RW_DESTROYED) ? "use after destroy"
			      : (v & RW_WRLOCK) ? "unlock by a thread that does not own the lock"
						: "write unlock of a lock not write-held", site);
		kli_hook_released(rw, RW_KIND, 0);
		return;
	}
	rw_write_leave(rw, v, 0);
	kli_hook_released(rw, RW_KIND, 0);
	rw_pass(rw);
}

/* A sleeper counted itself while we released (S1/S2 pairs): wake whoever it is. */
static KL_NOINLINE void rw_write_unlocked_slow(struct kl_rwlock *rw)
{
	rw_wake_after(rw, 0, 0);
	kli_hook_released(rw, RW_KIND, 0);
}

/* klock/rwlock.h's inline unlock did W2 and saw a sleeper counted. */
void kl_rwlock_write_unlocked_(struct kl_rwlock *rw)
{
	rw_wake_after(rw, 0, 0);
	rw_pass(rw);
}

/* ---- exported ------------------------------------------------------------------------------ */

void kl_rwlock_init(struct kl_rwlock *rw)
{
	atomic_store_explicit(&rw->word, 0, memory_order_relaxed);
	atomic_store_explicit(&rw->wwait, 0, memory_order_relaxed);
	atomic_store_explicit(&rw->rwait, 0, memory_order_relaxed);
	atomic_store_explicit(&rw->rseq, 0, memory_order_relaxed);
	atomic_store_explicit(&rw->spin_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&rw->wspin, 0, memory_order_relaxed);
	atomic_store_explicit(&rw->bias_at, 0, memory_order_relaxed);
	atomic_store_explicit(&rw->granted_at, 0, memory_order_relaxed);
	atomic_store_explicit(&rw->wpasses, 0, memory_order_relaxed);
	kli_hook_created(rw, RW_KIND, 0);
}

/* Destroys a free lock whose word @v has BIAS: as a writer would, write-hold it (W1/B3,
 * with an owner id no thread has) and look for biased holds (B4); none: poison it, else
 * release it as it was (a failed revocation's release) and answer false. */
static bool rw_destroy_biased(struct kl_rwlock *rw, uintptr_t v)
{
	if (!atomic_compare_exchange_strong_explicit(&rw->word, &v,
						     KLI_OWNER_POISON | RW_WRLOCK | v,
						     memory_order_seq_cst, memory_order_relaxed))
		return false;
	if (kli_rw_bias_held(rw)) {
		rw_write_leave(rw, atomic_load_explicit(&rw->word, memory_order_relaxed), 0);
		return false;
	}
	atomic_store_explicit(&rw->word, RW_POISON, memory_order_relaxed);
	return true;
}

int kl_rwlock_destroy(struct kl_rwlock *rw)
{
	uintptr_t v = atomic_load_explicit(&rw->word, memory_order_relaxed);
	int err = 0;

	if (v & RW_DESTROYED)
		err = EINVAL;
	else if ((v & ~(RW_WRWANT | RW_BIAS)) != 0 || rw_writers_waiting(rw) != 0 ||
		 atomic_load_explicit(&rw->rwait, memory_order_relaxed) ||
		 !((v & RW_BIAS) ? rw_destroy_biased(rw, v)
				 : atomic_compare_exchange_strong_explicit(&rw->word, &v, RW_POISON,
									   memory_order_relaxed,
									   memory_order_relaxed)))
		err = EBUSY;
	if (err != 0) {
		/* the interposer answers a busy destroy as glibc and reports it itself */
		if (KLOCK_DEBUG_LOCKS && !(KLOCK_PRELOAD && err == EBUSY))
			rw_report(rw, err == EBUSY ? "destroy of a held lock" : "use after destroy",
				  KLI_SITE());
		return err;
	}
	kli_hook_destroyed(rw, RW_KIND);
	return 0;
}

static KL_NOINLINE void rw_read_lock_contended(struct kl_rwlock *rw, const void *site)
{
	int err = rw_read_slow(rw, NULL, KLI_HF_READ, false, site);

	kli_hook_acquired(rw, RW_KIND, KLI_HF_READ | (err != 0 ? KLI_HF_FAILED : 0), site);
	if (kl_unlikely(err != 0)) /* every build: free to detect, fatal to ignore */
		rw_report(rw, rw_lock_misuse(err), site);
}

/* The read lock's body; @raced: the caller already lost the word to another reader. */
static KL_ALWAYS_INLINE void rw_read_lock_entry(struct kl_rwlock *rw, bool raced,
						const void *site)
{
	kli_hook_acquire(rw, RW_KIND, KLI_HF_READ, site);
	if (kl_likely(rw_read_fast(rw, &raced))) {
		if (raced)
			kli_rw_bias_arm(rw);
		kli_hook_acquired(rw, RW_KIND, KLI_HF_READ, site);
		return;
	}
	rw_read_lock_contended(rw, site);
}

void (kl_rwlock_read_lock)(struct kl_rwlock *rw)
{
	rw_read_lock_entry(rw, false, KLI_SITE());
}

/* klock/rwlock.h's inline read lock failed its one try. A word with nothing that would
 * have refused it means a reader changed it in between: a race lost. */
void kl_rwlock_read_contended_(struct kl_rwlock *rw)
{
	uintptr_t v = atomic_load_explicit(&rw->word, memory_order_relaxed);

	rw_read_lock_entry(rw, !(v & (RW_BIAS | RW_RD_BLOCK)), KLI_SITE());
}

bool kl_rwlock_read_trylock(struct kl_rwlock *rw)
{
	const void *site = KLI_SITE();
	int err;

	bool raced = false;

	kli_hook_acquire(rw, RW_KIND, KLI_HF_READ | KLI_HF_TRY, site);
	if (rw_read_fast(rw, &raced)) { /* the interposer's read lock comes here first */
		err = 0;
		if (raced)
			kli_rw_bias_arm(rw);
	} else {
		err = rw_read_try(rw, kli_owner(), memory_order_relaxed, false);
	}
	if (KLOCK_DEBUG_LOCKS && (err == EINVAL || err == EDEADLK))
		rw_report(rw, rw_lock_misuse(err), site);
	kli_hook_acquired(rw, RW_KIND, KLI_HF_READ | KLI_HF_TRY | (err != 0 ? KLI_HF_FAILED : 0),
			  site);
	return err == 0;
}

int kl_rwlock_read_timedlock(struct kl_rwlock *rw, const struct timespec *abstime)
{
	const void *site = KLI_SITE();
	int err;

	if (!kli_timespec_valid(abstime))
		return EINVAL;
	err = rw_read_lock(rw, abstime, false, site);
	if (KLOCK_DEBUG_LOCKS && (err == EINVAL || err == EDEADLK))
		rw_report(rw, rw_lock_misuse(err), site);
	return err;
}

/* A snapshot of what @rw holds (relaxed: the caller only classifies a misuse). */
enum kli_rw_held kli_rwlock_held(const struct kl_rwlock *rw)
{
	uintptr_t v = atomic_load_explicit(&rw->word, memory_order_relaxed);

	if (v & RW_WRLOCK)
		return KLI_RW_WRITER;
	return v >= RW_RD_ONE || ((v & RW_BIAS) && kli_rw_bias_held(rw)) ? KLI_RW_READERS
								      : KLI_RW_FREE;
}

/*
 * For a realtime reader that outranks every writer blocked on @rw (the interposer knows
 * their priorities; kl_rwlock does not): read-lock @rw, waiting while a writer holds it
 * but not for writers that wait (XSH pthread_rwlock_rdlock with SCHED_FIFO/SCHED_RR).
 * @abstime NULL: no deadline. 0, ETIMEDOUT, EDEADLK (we write-hold it), EINVAL.
 */
int kli_rwlock_read_lock_outranking(struct kl_rwlock *rw, const struct timespec *abstime)
{
	const void *site = KLI_SITE();
	int err;

	if (abstime != NULL && !kli_timespec_valid(abstime))
		return EINVAL;
	err = rw_read_lock(rw, abstime, true, site);
	if (KLOCK_DEBUG_LOCKS && (err == EINVAL || err == EDEADLK))
		rw_report(rw, rw_lock_misuse(err), site);
	return err;
}

void (kl_rwlock_read_unlock)(struct kl_rwlock *rw)
{
	uintptr_t old;

	kli_hook_release(rw, RW_KIND, KLI_HF_READ, KLI_SITE());
	if (rw_bias_release(rw)) {
		kli_hook_released(rw, RW_KIND, KLI_HF_READ);
		return;
	}
	old = rw_read_sub(rw);
	if (kl_unlikely(rw_read_released_badly(rw, old)))
		rw_read_released_slow(rw, old, KLI_SITE());
	kli_hook_released(rw, RW_KIND, KLI_HF_READ);
}

/* klock/rwlock.h's inline unlock did R2 from @old and rw_read_released_badly()'s test. */
void kl_rwlock_read_released_(struct kl_rwlock *rw, uintptr_t old)
{
	rw_read_released_slow(rw, old, KLI_SITE());
}

static KL_NOINLINE void rw_write_lock_contended(struct kl_rwlock *rw, const void *site)
{
	kli_owner_t self = kli_owner();
	int err = 0;

	if (!kl_rwlock_write_take_(rw, self))
		err = rw_write_slow(rw, self, NULL, 0, site);
	kli_hook_acquired(rw, RW_KIND, err != 0 ? KLI_HF_FAILED : 0, site);
	if (kl_unlikely(err != 0)) /* every build: free to detect, fatal to ignore */
		rw_report(rw, rw_lock_misuse(err), site);
}

void (kl_rwlock_write_lock)(struct kl_rwlock *rw)
{
	kli_owner_t self = kli_tls_owner;

	kli_hook_acquire(rw, RW_KIND, 0, KLI_SITE());
	if (kl_likely(self != 0) && kl_likely(kl_rwlock_write_take_(rw, self))) {
		kli_hook_acquired(rw, RW_KIND, 0, KLI_SITE());
		return;
	}
	rw_write_lock_contended(rw, KLI_SITE());
}

bool kl_rwlock_write_trylock(struct kl_rwlock *rw)
{
	const void *site = KLI_SITE();
	int err;

	kli_hook_acquire(rw, RW_KIND, KLI_HF_TRY, site);
	err = rw_write_try(rw, kli_owner(), memory_order_relaxed);
	if (err == 0 && kl_unlikely(atomic_load_explicit(&rw->word, memory_order_relaxed) &
				    RW_BIAS))
		err = rw_revoke(rw, NULL, false);
	if (KLOCK_DEBUG_LOCKS && err == EINVAL)
		rw_report(rw, rw_lock_misuse(err), site);
	kli_hook_acquired(rw, RW_KIND, KLI_HF_TRY | (err != 0 ? KLI_HF_FAILED : 0), site);
	return err == 0;
}

/* The timed write slow path: the site is computed only here (see kl_mutex_timedlock). */
static KL_NOINLINE int rw_write_timedlock_contended(struct kl_rwlock *rw,
						    const struct timespec *abstime,
						    const void *site)
{
	kli_owner_t self = kli_owner();
	int err = 0;

	if (!kl_rwlock_write_take_(rw, self))
		err = rw_write_slow(rw, self, abstime, KLI_HF_TRY, site);
	kli_hook_acquired(rw, RW_KIND, KLI_HF_TRY | (err != 0 ? KLI_HF_FAILED : 0), site);
	if (KLOCK_DEBUG_LOCKS && (err == EINVAL || err == EDEADLK))
		rw_report(rw, rw_lock_misuse(err), site);
	return err;
}

int kl_rwlock_write_timedlock(struct kl_rwlock *rw, const struct timespec *abstime)
{
	kli_owner_t self = kli_tls_owner;

	if (!kli_timespec_valid(abstime))
		return EINVAL;
	kli_hook_acquire(rw, RW_KIND, KLI_HF_TRY, KLI_SITE());
	if (kl_likely(self != 0) && kl_likely(kl_rwlock_write_take_(rw, self))) {
		kli_hook_acquired(rw, RW_KIND, KLI_HF_TRY, KLI_SITE());
		return 0;
	}
	return rw_write_timedlock_contended(rw, abstime, KLI_SITE());
}

void (kl_rwlock_write_unlock)(struct kl_rwlock *rw)
{
	kli_owner_t self = kli_tls_owner;
	uintptr_t v;

	kli_hook_release(rw, RW_KIND, 0, KLI_SITE());
	/* W2 (klock/rwlock.h). With sleeping readers we take the slow path to hand the lock
	 * to them instead of releasing it. A writer that releases and relocks while others
	 * sleep took the slow path at every release before WRWANT was kept here (write-only,
	 * 2 CPUs, 8 threads: 12 M ops/s; 20-25 M after). */
	v = kl_rwlock_write_release_(rw, self);
	if (kl_unlikely(v == 0)) {
		rw_write_unlock_slow(rw, self, KLI_SITE());
		return;
	}
	if (kl_unlikely(kl_rwlock_write_sleepers_(rw, v)))
		rw_write_unlocked_slow(rw);
	else
		kli_hook_released(rw, RW_KIND, 0);
	rw_pass(rw); /* a writer spins alone: count the release (the inline unlock comes here) */
}

void kl_rwlock_write_downgrade(struct kl_rwlock *rw)
{
	const void *site = KLI_SITE();
	kli_owner_t self = kli_owner();
	uintptr_t v = atomic_load_explicit(&rw->word, memory_order_relaxed);

	if (rw_owner(v) != self || (v & RW_DESTROYED)) {
		rw_report(rw, (v & RW_DESTROYED) ? "use after destroy"
						 : "downgrade of a lock not write-held by the caller",
			  site);
		return;
	}
	kli_hook_release(rw, RW_KIND, 0, site);
	kli_hook_acquire(rw, RW_KIND, KLI_HF_READ, site);
	rw_write_leave(rw, v, 1);
	kli_hook_released(rw, RW_KIND, 0);
	kli_hook_acquired(rw, RW_KIND, KLI_HF_READ, site);
}

bool kl_rwlock_wowned(const struct kl_rwlock *rw)
{
	kli_owner_t self = kli_tls_owner;

	return self != 0 &&
	       rw_owner(atomic_load_explicit(&rw->word, memory_order_relaxed)) == self;
}
