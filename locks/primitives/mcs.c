/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/mcs.c - kl_mcs, the MCS queue spinlock with caller-owned nodes.
 *
 * WHAT. Mellor-Crummey & Scott (1991), as in ck_spinlock_mcs and the queue half of
 * Linux's qspinlock: the lock is a tail pointer; a locker appends its node with one
 * exchange and, if it had a predecessor, links itself behind it and spins on its OWN
 * node's flag. Unlock passes the lock to the successor by setting that flag, or swings
 * the tail back to empty if there is none. One cache-line transfer per hand-over, however
 * many wait.
 *
 * Oversubscription. A hand-over to a preempted waiter stalls the lock until that thread
 * runs, and spinning waiters burn the CPU the holder needs. So, as in the ticket lock
 * (TWA): the two waiters right behind the holder stay awake - they spin, then yield, for
 * MCS_NEAR_AWAKE_NS in all, then sleep too (a lock held for seconds costs its waiters no
 * CPU; what the yielding cost before they slept: docs/results.md, "Figures behind the
 * theory blocks"); waiters further back do the same while the threads fit on the CPUs
 * (mcs_stays_awake(): a far waiter cannot see the queue move, and asleep in a moving queue
 * its turn would come before its wake-up), and once threads outnumber the CPUs poll only
 * briefly (mcs_spin_budget()), then sleep on their own node's flag (a futex word only they
 * and their predecessor touch). A waiter promoted to NEXT promotes its own successor to
 * NEAR, waking it if it sleeps: the wake-up pipeline runs one place ahead of the lock and
 * mostly off its critical path. The hand-over also wakes a successor that still sleeps.
 * Directed wake-ups only, never a herd; a thread only ever touches its successor's node,
 * which cannot go away before it is granted. The holder's unlock, waiting for a successor
 * to link in, polls, then yields.
 * That still pays a wake-up per hand-over once more threads queue than there are CPUs
 * (measured 20-80 k ops/s at 8 threads on 2 CPUs). So the queue is also kept short, as in
 * kl_ticket (concurrency restriction: Dice & Kogan's GCR, Dice's Malthusian locks): a
 * locker that finds the lock held goes through mcs_lock_contended(); while counting is
 * on it counts the waiters it lets in (crowd's low bits); with holder + counted waiters
 * at kli_crowd_max (the CPUs we may run on), a newcomer parks passive on &crowd, without
 * a node in the queue, until the unlock that leaves the lock free wakes it, or
 * MCS_ROTATE_NS passes; then it queues like anyone.
 * Counting on demand. The count costs the hand-over a trip of the lock's line (the
 * granter's decrement, which must come before the grant: the lock may be freed right after
 * it), where plain MCS moves that line only in the relocker's exchange, off the critical
 * path: kl_mcs ran 0.6-0.8x ck's MCS with two threads on two CPUs while it counted every
 * waiter. A queue that fits on the CPUs needs no count. So counting is off until a
 * waiter's spin budget runs out before its grant (mcs_counting_on(): the holder or the
 * queue is short of a CPU, or the holds are long); newcomers count themselves from then on
 * (earlier switches, and what they cost: docs/results.md, "Figures behind the theory
 * blocks"). It goes off again when the crowd has drained: an unlock leaves the lock free
 * with nobody counted or passive (mcs_unlocked_crowd(); the inline unlock calls it
 * whenever counting is on). Each waiter's link says whether it is counted
 * (MCS_LINK_COUNTED), so the granter uncounts exactly the counted ones, whatever the
 * switch did meanwhile. The gate closes one queue's worth late after counting turns on
 * (the waiters already queued are not in the count). Under continuous contention the lock
 * never drains, so counting, once on, stays on: the far waiters' budget and the gate
 * therefore look at the count (full: holder + counted at kli_crowd_max, mcs_full()), never
 * at the switch alone. All of it is a heuristic (a locker that saw the lock free but lost
 * the race to the exchange queues uncounted): nothing rests on it but speed.
 *
 * STATE.
 *   tail          0 = free; else the last queued node (the holder's, when alone)
 *   node.next     the successor's node, written by the successor once it has linked in,
 *                 with two flags in the low bits (nodes are at least 4-aligned), which the
 *                 holder reads with the link anyway (C6) instead of reading the
 *                 successor's node: bit 0 MCS_LINK_COUNTED, the successor is in crowd's
 *                 count (the granter uncounts it); bit 1 MCS_LINK_NEXT, it found us
 *                 holding the lock and knows it is next (no promotion to make)
 *   node.locked   MCS_WAITING (far back); MCS_NEAR (second behind the holder: stay
 *                 awake); MCS_NEXT (right behind the holder); MCS_SLEEPING (gave up
 *                 spinning, or next/second in line spent MCS_NEAR_AWAKE_NS awake, and
 *                 sleeps on this word: whoever changes it must kl_wake() it);
 *                 MCS_GRANTED (set by the predecessor: the lock is ours); MCS_HOLDER (we
 *                 took it uncontended). NEAR and NEXT are hints (correctness never rests on
 *                 them): the waiter writes them itself before it links in, from what it
 *                 read in its predecessor's node; afterwards only the predecessor promotes
 *                 it, when it becomes next (-> NEAR) or is granted the lock (-> NEXT)
 *   node.awake    in the node's second cache line (KL_MCS_NODE_LINE): 1 while the
 *                 waiter is one of the two nearest the lock, awake, and will run G2
 *                 before it sleeps - then the grant may be a plain store (G1); anything
 *                 else (0, or whatever a fresh node held before it linked in): the grant
 *                 is an exchange. Only the waiter writes it, and only when it changes
 *                 (at link time, at a promotion, before it sleeps), so in a steady
 *                 hand-over the granter reads it from its own cache
 *   crowd         bits 0-14: counted waiters (from before their exchange until granted);
 *                 bit 15 MCS_COUNTING: newcomers count themselves (the queue has run
 *                 deeper than the CPUs); bits 16-31: passive waiters parked on &crowd
 *   holder        debug builds only (locks/primitives/lockdebug.h)
 *
 * INVARIANTS. The nodes from the holder's to tail form the FIFO of waiters, except for a
 * successor between its exchange and its link store (C2): the holder's unlock waits for it.
 * A waiter reads its predecessor's node only before C2 (the predecessor cannot hand over,
 * return from unlock and free its node before it sees the link); after C2 it reads and
 * writes only its own node, and the predecessor writes into it. So a node is the caller's
 * again as soon as kl_mcs_unlock() returns (it may be freed at once).
 *
 * ORDERING.
 *   C1  exchange on tail (acq_rel): acquire pairs with C3 when the lock was free (we take
 *       it from the last holder's release); release publishes our node's initialisation
 *       to the successor that finds it through tail
 *   C2  release store of prev.next = us (| MCS_LINK_COUNTED)   pairs with the
 *       predecessor's acquire load (C6), which also tells it to take us out of the count
 *       before the grant (so a holder that unlocks and relocks sees the true count)
 *   C3  release CAS tail: us -> 0 (no successor)   pairs with C1 of the next locker
 *   C4  acquire load of our locked flag    pairs with C5
 *   C5  release exchange of the successor's locked flag: our critical section happens-
 *       before the successor's; the old value says whether it sleeps (then kl_wake). The
 *       waiter's CAS WAITING/NEAR/NEXT -> SLEEPING and this exchange are RMWs on one
 *       word, so exactly one of "it sees GRANTED and does not sleep" / "we see SLEEPING
 *       and wake it" happens (mcs_promote's CAS SLEEPING -> NEAR/NEXT, then kl_wake, is
 *       the same argument for a promotion). Where rseq can be had (mcs_rseq_off), C5 to
 *       a waiter in NEXT or NEAR is instead a plain store in an rseq section (G1)
 *   G1/G2 asymmetric pair, the grant against a waiter going to sleep: G1 (mcs_grant) reads
 *       the successor's awake flag and, if it is 1, stores GRANTED into its locked word,
 *       as one rseq section (no LOCK prefix: the exchange cost a 2-thread hand-over a
 *       third of its speed); a waiter whose awake flag is 1, once its CAS to SLEEPING
 *       has succeeded, stores 0 there and runs G2, membarrier(PRIVATE_EXPEDITED_RSEQ),
 *       before it sleeps. A G1 that read the flag's 1 has then either committed (its
 *       GRANTED is visible: the futex wait, which expects SLEEPING, returns at once) or
 *       been restarted (it reads 0 and takes the exchange, which sees SLEEPING, and the
 *       wake-up); a G1 that committed before the CAS makes the CAS fail. G2 is a
 *       membarrier, an interrupt to every CPU running one of our threads, so it must
 *       stay rare: only a waiter near the lock with its flag at 1 runs it (after
 *       MCS_NEAR_AWAKE_NS awake), a waiter that slept keeps its flag at 0 for the rest of
 *       its wait, and a thread keeps it at 0 for its first MCS_CALM_WAITS waits and for
 *       as many after each G2 (exchange grants, sleeps without G2): at most one G2 per
 *       MCS_CALM_WAITS waits of a thread. Waiters further back keep the flag at 0 and sleep without
 *       one. The flag has a
 *       cache line of its own because the grant's read of the locked word itself
 *       cost the hand-over a coherence transaction: the granter's read
 *       pulled the spinning waiter's line shared, and its store then had to invalidate
 *       the waiter's copy - two trips where ck's plain store makes one
 *   C6  acquire load of our next link (unlock, mcs_promote)   pairs with C2
 *   P1-P4 store buffering, passive waiters, all seq_cst: the waiter adds itself to crowd
 *       (P1, an RMW) before its validate reads tail (P2); the unlock that swings tail to 0
 *       (C3 as P3, a CAS) then loads crowd (P4). In the single order of seq_cst
 *       operations one of P2/P3 comes first: P3 first and the waiter sees the lock free
 *       and does not sleep; P2 first, so P1 precedes P4, which sees the passive waiter,
 *       and the unlock unparks one (its timeout would bound the wait anyway). No heavy
 *       fence: an asymmetric pair (a membarrier per passive wait against a light fence
 *       in the unlock) would interrupt every CPU running one of our threads each time a
 *       waiter goes passive, a cost that grows with the machine; and the unlock's C3 is an
 *       RMW anyway, a full barrier on x86, where seq_cst costs it nothing (LOCK CMPXCHG
 *       either way, and a plain load).
 *       Turning counting off at the drain is a CAS from exactly MCS_COUNTING: it fails
 *       for a passive waiter that added itself meanwhile (the unlock then unparks one),
 *       and a passive waiter that adds itself after it finds counting off in its
 *       validate (mcs_crowded) and does not sleep.
 *
 * COSTS. Pros: FIFO, one word, local spinning, O(1) traffic per hand-over, directed
 * wake-ups. Cons: a node per acquisition (caller-owned), a longer uncontended path than a
 * ticket (a load, exchange + CAS, a load), FIFO convoys under preemption: each hand-over
 * to a sleeper (far back, or near after a hold longer than MCS_NEAR_AWAKE_NS) costs a
 * wake-up latency that a barging lock would not pay, and a hand-over to a preempted waiter
 * stalls everyone (pigz under the interposer, mutexes held ~1 ms, 4 threads on 2 CPUs: 11%
 * slower than glibc's, docs/preload.md); oversubscribed, fairness is long-term (the
 * rotation period), not per acquisition.
 *
 * Inline fast path. klock/mcs.h locks inline first (C builds without instruments): it
 * writes the node (next 0, locked MCS_HOLDER) and, if crowd reads 0 (counting off, nobody
 * passive), exchanges tail itself (C1), without a test read first, as ck's: an empty tail
 * means it holds the lock, else kl_mcs_queued_() links in at once (mcs_link()) and waits,
 * uncounted, as after a lost race. The link is what the holder's unlock waits for, and at
 * two threads the relocker reaches it right after its own grant, so every instruction on
 * the way is on the hand-over's critical path: 20 ns of delay there cost 15% against ck's
 * MCS, and queueing inline with the link before the wait clock took kl_mcs from 0.93 to
 * 1.0 of ck's at 2 threads (docs/design-adaptive.md). crowd not 0 calls kl_mcs_lock(),
 * which initialises the node again and takes the gate and the count.
 * The unlock without a successor is inline too: a relaxed look at the node's link (only
 * tested for zero, never followed), C3 as the CAS (seq_cst: P3) and the seq_cst load of
 * crowd (P4), calling kl_mcs_unlocked_crowd_() only when
 * counting is on or passive waiters sleep; a successor, linked or linking in, is
 * kl_mcs_unlock()'s (it reads the link again, with C6). klbench latency: 7.9 ns a pair
 * through the library, 4.9-5.5 ns inline, as ck's MCS (4.7-6.0 ns).
 *
 * LIMITS. Fewer than 2^15 counted waiters and 2^16 passive waiters per lock; the rseq
 * grant (G1) is x86_64-only (aarch64 and the generic backend grant with the exchange); at
 * two threads on two CPUs kl_mcs runs about 1.0x ck's MCS (docs/design-adaptive.md); a
 * node is two cache lines (128 bytes). On many CPUs, once counting is on, far waiters that
 * do sleep cost every hand-over a wake-up, and the lock falls far behind ck's MCS from 16
 * threads on (the figures: docs/results.md, "Figures behind the theory blocks"); not
 * solved.
 */
#include <klock/mcs.h>
#include <klock/wait.h>
#include <pthread.h>
#include "cpu.h"
#include "fence_impl.h"
#include "hooks.h"
#include "lockdebug.h"
#include "park.h"
#include "spin.h"

#define MCS_KIND KLI_KIND_MCS
/* Next in line: spin this long on our flag, then yield (as the ticket lock). */
#define MCS_SPIN_NS 50000u
/* Next or second in line: stay awake (spin, yield) this long in all, then sleep on our
 * flag until promoted or granted (kl_ticket's TICKET_NEXT_AWAKE_NS, the same reasoning). */
#define MCS_NEAR_AWAKE_NS 1000000u
/* Further back, with the queue full (mcs_full()): poll this long (the queue may move
 * fast), then sleep on our flag. Otherwise a far waiter spins MCS_SPIN_NS like the two
 * nearest: until 2026-12-04 every waiter past second place slept after this, and on 16
 * CPUs the queue then paid a wake-up per hand-over at 4-16 threads (35-134 k ops/s
 * against ck's MCS at 0.6-3.9 M). */
#define MCS_QUEUE_SPIN_NS 2000u

/* A passive waiter's longest sleep before it queues anyway: the rotation period (as
 * kl_ticket's: about kl_mutex's hand-off threshold). */
#define MCS_ROTATE_NS 1000000u
/* crowd: one passive waiter (the high half); counting on (bit 15); the counted waiters
 * (bits 0-14). */
#define MCS_PASSIVE_ONE KL_MCS_CROWD_PASSIVE_ONE
#define MCS_COUNTING KL_MCS_CROWD_COUNTING
#define MCS_QUEUED_MASK (MCS_COUNTING - 1u)

/* Bit 0 of a node's link: the successor that wrote it is counted in crowd. */
#define MCS_LINK_COUNTED ((uintptr_t)1)
/* Bit 1: the successor that wrote it found us holding the lock, so it knows it is next
 * (its holder-to-be need not read its node to promote it: see mcs_promote()). */
#define MCS_LINK_NEXT ((uintptr_t)2)
#define MCS_LINK_FLAGS (MCS_LINK_COUNTED | MCS_LINK_NEXT)

/* node.locked values. */
#define MCS_WAITING 0u
#define MCS_GRANTED 1u
#define MCS_SLEEPING 2u
#define MCS_HOLDER KL_MCS_NODE_HOLDER
#define MCS_NEXT 4u
#define MCS_NEAR 5u

/* node.awake: the waiter runs G2 before it sleeps (any other value: it may not). */
#define MCS_AWAKE 1u
/* A thread's first waits, and its waits after a G2, keep node.awake at 0 (their grants
 * are exchanges, their sleeps need no G2): a thread whose near wait outlasted
 * MCS_NEAR_AWAKE_NS is in a regime of long holds or preempted holders and will likely
 * sleep again. So a thread issues at most one G2 per this many waits: at most one
 * membarrier per MCS_CALM_WAITS contended acquisitions, whatever the load. */
#define MCS_CALM_WAITS 4096u

/* Waits left before this thread's nodes may set node.awake (0: they may). */
static __thread uint32_t mcs_stirred __attribute__((tls_model("initial-exec"))) =
	MCS_CALM_WAITS;

/* A link's flags need spare low bits in node addresses. */
_Static_assert(_Alignof(struct kl_mcs_node) > MCS_LINK_FLAGS, "a link's flags need aligned nodes");

static struct kl_mcs_node *link_node(uintptr_t link)
{
	return (struct kl_mcs_node *)(link & ~MCS_LINK_FLAGS);
}

/* A node's value seen by the thread queued right behind it: where does that put us? Read
 * only before we link in (see the invariants). */
static uint32_t mcs_rank_behind(uint32_t prev)
{
	if (prev == MCS_GRANTED || prev == MCS_HOLDER)
		return MCS_NEXT;
	return prev == MCS_NEXT ? MCS_NEAR : MCS_WAITING;
}

/* Tells our successor, if it has linked in, that it moved up to @to (MCS_NEAR or
 * MCS_NEXT), waking it if it sleeps. Only our successor's node is ours to touch: it
 * cannot be granted, so cannot leave, before we are done. A successor still linking in
 * reads our own state instead (mcs_rank_behind); one that misses both only loses the hint. */
static void mcs_promote(struct kl_mcs *l, struct kl_mcs_node *n, uint32_t to)
{
	uintptr_t link = atomic_load_explicit(&n->next, memory_order_acquire); /* C6 */
	struct kl_mcs_node *next = link_node(link);
	uint32_t v;

	if (next == NULL || (link & MCS_LINK_NEXT)) /* none, or it knows it is next */
		return;
	v = atomic_load_explicit(&next->locked, memory_order_relaxed);
	do {
		if (v == to || v == MCS_NEXT || v == MCS_GRANTED)
			return;
	} while (!atomic_compare_exchange_weak_explicit(&next->locked, &v, to,
							memory_order_relaxed, memory_order_relaxed));
	if (v == MCS_SLEEPING) {
		kl_wake(&next->locked, 1);
		kli_hook_woke(l, MCS_KIND);
	}
}
/* What kl_mcs_destroy() leaves in tail: not a node address (odd). */
#define MCS_POISON ((uintptr_t)0xdeadbeefu)

static struct kl_mcs_node *as_node(uintptr_t v)
{
	return (struct kl_mcs_node *)v;
}

static void mcs_node_init(struct kl_mcs_node *n)
{
	atomic_store_explicit(&n->next, 0, memory_order_relaxed);
	atomic_store_explicit(&n->locked, 0, memory_order_relaxed);
}

/* The grant's rseq store (G1): glibc's rseq offset when both it and the sleeping
 * waiter's fence (G2) can be had, else 0 (every grant is an exchange). Fixed before
 * main(), so granter and waiter always agree. */
static long mcs_rseq_off;
static pthread_once_t mcs_once = PTHREAD_ONCE_INIT;

static void mcs_mode_init(void)
{
	kli_init();
#if KL_ARCH_HAVE_RSEQ_STORE && !KLOCK_TSAN /* TSan cannot see a grant made in asm */
	if (kli_cpu_mode >= KLI_CPU_RSEQ && kli_fence_rseq && !kli_env_flag("KLOCK_MCS_XCHG"))
		mcs_rseq_off = (long)kli_rseq_off;
#endif
}

__attribute__((constructor)) static void mcs_ctor(void)
{
	pthread_once(&mcs_once, mcs_mode_init);
}

/* Sets our node's awake flag (MCS_AWAKE if @on, else 0), writing only a change: its line
 * stays shared with the granters that read it. Without the rseq grant nobody reads it. */
static void mcs_set_awake(struct kl_mcs_node *n, bool on)
{
	uint32_t v = on ? MCS_AWAKE : 0;

	if (mcs_rseq_off != 0 && atomic_load_explicit(&n->awake, memory_order_relaxed) != v)
		atomic_store_explicit(&n->awake, v, memory_order_relaxed);
}

/* Budget spent, not yet granted (our flag read @v): yield if we are near the lock and
 * still @awake, else sleep on our flag (unless a promotion or the grant changed it
 * meanwhile). Returns the flag value the caller has acted on (MCS_SLEEPING if we slept). */
static uint32_t mcs_pause(struct kl_mcs_node *n, uint32_t v, bool awake, struct kli_wait *w)
{
	uint32_t seen = v; /* a failed CAS below leaves the change for the caller to see */

	if (awake) {
		kli_yield(); /* stay awake, give a preempted holder our CPU */
		return seen;
	}
	if (v == MCS_SLEEPING ||
	    atomic_compare_exchange_strong_explicit(&n->locked, &v, MCS_SLEEPING,
						    memory_order_relaxed, memory_order_relaxed)) {
		if (mcs_rseq_off != 0 &&
		    atomic_load_explicit(&n->awake, memory_order_relaxed) == MCS_AWAKE) {
			mcs_set_awake(n, false);
			kli_fence_heavy_rseq(); /* G2: pairs with G1 in mcs_grant() */
			kli_wait_fenced(w);
			mcs_stirred = MCS_CALM_WAITS;
		}
		kli_wait_sleep(w);
		kl_wait(&n->locked, MCS_SLEEPING, NULL);
		if (atomic_load_explicit(&n->locked, memory_order_relaxed) == MCS_GRANTED)
			kli_wait_handover_asleep(w); /* granted while asleep: it waited for us */
		kli_wait_spin(w);
		return MCS_SLEEPING;
	}
	return seen;
}

/* Does @crowd (a value of l->crowd) say the queue is full: counting on, and holder +
 * counted waiters at least the CPUs we may run on? */
static bool mcs_full(uint32_t crowd)
{
	return (crowd & MCS_COUNTING) && (crowd & MCS_QUEUED_MASK) + 1 >= kli_crowd_max;
}

/* Does @crowd say more threads want the lock than we have CPUs: passive waiters, or more
 * counted than the gate admits? (mcs_full() is one fewer: a queue exactly as long as the
 * CPUs fits on them, and its far waiters should spin, not sleep.) */
static bool mcs_over(uint32_t crowd)
{
	return (crowd & MCS_COUNTING) &&
	       (crowd >= MCS_PASSIVE_ONE || (crowd & MCS_QUEUED_MASK) + 1 > kli_crowd_max);
}

/* How long a waiter of @rank spins before it yields or sleeps: the two nearest the lock
 * MCS_SPIN_NS; one further back the same unless threads outnumber the CPUs (mcs_over():
 * then a short poll, MCS_QUEUE_SPIN_NS). Counting alone does not shorten it: it stays
 * on while the lock never drains, and a far waiter that sleeps costs every hand-over a
 * wake-up (16 CPUs, 4 threads: 140-160 k ops/s against ck's 3.9 M). */
static uint64_t mcs_spin_budget(const struct kl_mcs *l, uint32_t rank)
{
	if (rank != MCS_WAITING)
		return MCS_SPIN_NS;
	return mcs_over(atomic_load_explicit(&l->crowd, memory_order_relaxed)) ?
		       MCS_QUEUE_SPIN_NS : MCS_SPIN_NS;
}

/* Budget spent: does a waiter of @rank stay awake (yield) until MCS_NEAR_AWAKE_NS has
 * passed, rather than sleep now? The two nearest the lock always (the hand-over must not
 * wait for their wake-up); one further back while the threads fit on the CPUs (it has a
 * CPU of its own; asleep, its turn would come before its wake-up does in any queue that
 * moves, and the whole queue would wait). */
static bool mcs_stays_awake(const struct kl_mcs *l, uint32_t rank)
{
	return rank != MCS_WAITING ||
	       !mcs_over(atomic_load_explicit(&l->crowd, memory_order_relaxed));
}

/* Our spin budget ran out before the grant: the holder or the queue is short of CPUs (or
 * the holds are long). Turns counting on, so newcomers count themselves from now on
 * (mcs_lock_contended()); the drain turns it off (mcs_unlocked_crowd()). */
static void mcs_counting_on(struct kl_mcs *l)
{
	if (!(atomic_load_explicit(&l->crowd, memory_order_relaxed) & MCS_COUNTING))
		atomic_fetch_or_explicit(&l->crowd, MCS_COUNTING, memory_order_relaxed);
}

/* Queued behind @prev: work out our rank from @prev's node, then link in (@counted:
 * MCS_LINK_COUNTED if we are in crowd's count, else 0). Nothing else comes first: our
 * predecessor's unlock waits for this link, so every instruction before it is on the
 * hand-over's critical path (2 threads on 2 CPUs: ~20 ns here cost kl_mcs 15% against
 * ck's MCS). Returns our rank. */
static uint32_t mcs_link(struct kl_mcs_node *n, struct kl_mcs_node *prev, uintptr_t counted)
{
	/* Our last read of @prev: it stays alive until it has seen our link (C2). */
	uint32_t rank = mcs_rank_behind(atomic_load_explicit(&prev->locked, memory_order_relaxed));

	/* nobody else writes it yet */
	atomic_store_explicit(&n->locked, rank, memory_order_relaxed);
	mcs_set_awake(n, rank != MCS_WAITING && mcs_stirred == 0);
	/* C2: release, pairs with C6 in the predecessor's unlock. */
	atomic_store_explicit(&prev->next,
			      (uintptr_t)n | counted | (rank == MCS_NEXT ? MCS_LINK_NEXT : 0),
			      memory_order_release);
	return rank;
}

/* Linked in at @rank (mcs_link()): wait until granted. */
static void mcs_wait_granted(struct kl_mcs *l, struct kl_mcs_node *n, uint32_t rank,
			     struct kli_wait *w)
{
	uint32_t v, seen = rank;
	struct kli_spin s, awake;
	bool slept = false; /* once asleep, we keep the exchange grant: one G2 per wait */

	kli_wait_spin(w);
	if (rank == MCS_NEXT)
		mcs_promote(l, n, MCS_NEAR);
	kli_spin_start(&s, mcs_spin_budget(l, rank));
	kli_spin_start(&awake, MCS_NEAR_AWAKE_NS);
	/* C4: acquire, pairs with C5 in the predecessor's hand-over. */
	while ((v = atomic_load_explicit(&n->locked, memory_order_acquire)) != MCS_GRANTED) {
		if ((v == MCS_NEXT || v == MCS_NEAR) && v != seen) { /* promoted (or woken so) */
			seen = rank = v;
			mcs_set_awake(n, !slept && mcs_stirred == 0);
			if (rank == MCS_NEXT)
				mcs_promote(l, n, MCS_NEAR);
			kli_spin_start(&s, MCS_SPIN_NS);
			kli_spin_start(&awake, MCS_NEAR_AWAKE_NS);
		}
		if (kli_spin_poll(&s))
			continue;
		mcs_counting_on(l);
		seen = mcs_pause(n, v, mcs_stays_awake(l, rank) && !kli_spin_expired(&awake), w);
		slept |= seen == MCS_SLEEPING;
		kli_spin_start(&s, mcs_spin_budget(l, rank));
	}
	mcs_promote(l, n, MCS_NEXT); /* we hold the lock: our successor is next */
	if (mcs_stirred != 0)
		mcs_stirred--;
}

/* Queued uncounted behind @prev (lost the race to a free lock, or klock/mcs.h's inline
 * lock queued us with counting off): link in first, then wait. The wait clock (lockstat)
 * starts after the link. */
static KL_NOINLINE void mcs_wait(struct kl_mcs *l, struct kl_mcs_node *n,
				 struct kl_mcs_node *prev, const void *site)
{
	uint32_t rank = mcs_link(n, prev, 0);
	struct kli_wait w;

	kli_wait_begin(&w, l, MCS_KIND, KLI_HF_SPIN, site);
	mcs_wait_granted(l, n, rank, &w);
	kli_wait_end(&w, l, MCS_KIND, KLI_HF_SPIN, site);
}

/* Under the bucket lock (and before it): is the lock held with a full queue? */
static bool mcs_crowded(void *arg)
{
	struct kl_mcs *l = arg;
	uint32_t c;

	/* P2 (seq_cst): pairs with P1 and P3, see the top */
	if (atomic_load_explicit(&l->tail, memory_order_seq_cst) == 0)
		return false;
	c = atomic_load_explicit(&l->crowd, memory_order_relaxed);
	return mcs_full(c);
}

/* Polls for MCS_QUEUE_SPIN_NS: does the crowd persist? (A count can lag the queue by a
 * few instructions - a waiter counted just before it found the lock free - and a passive
 * wait costs a heavy fence, so a glimpse does not send us there.) */
static bool mcs_stays_crowded(struct kl_mcs *l, struct kli_wait *w)
{
	struct kli_spin s;

	kli_wait_spin(w);
	kli_spin_start(&s, MCS_QUEUE_SPIN_NS);
	while (kli_spin_poll(&s))
		if (!mcs_crowded(l))
			return false;
	return true;
}

/* Wait passive, off the queue, until the lock is free or the rotation period passes. */
static void mcs_wait_passive(struct kl_mcs *l, struct kli_wait *w)
{
	struct timespec until;
	struct kli_park_req req = { .key = &l->crowd, .validate = mcs_crowded, .arg = l,
				    .abstime = &until };
	uintptr_t token;

	kli_wait_sleep(w);
	kli_deadline_after(&until, MCS_ROTATE_NS);
	/* P1 (seq_cst): pairs with P3/P4 in kl_mcs_unlock() and its inline copy */
	atomic_fetch_add_explicit(&l->crowd, MCS_PASSIVE_ONE, memory_order_seq_cst);
	kli_park(&req, &token);
	atomic_fetch_sub_explicit(&l->crowd, MCS_PASSIVE_ONE, memory_order_relaxed);
}

/* The lock was held when we looked: wait passive if the queue is full, then queue,
 * counted in crowd until granted if counting is on. */
static KL_NOINLINE void mcs_lock_contended(struct kl_mcs *l, struct kl_mcs_node *n,
					   const void *site)
{
	struct kl_mcs_node *prev;
	struct kli_wait w;
	uintptr_t counted = 0;

	kli_wait_begin(&w, l, MCS_KIND, KLI_HF_SPIN, site);
	if (mcs_crowded(l) && mcs_stays_crowded(l, &w))
		mcs_wait_passive(l, &w);
	if (atomic_load_explicit(&l->crowd, memory_order_relaxed) & MCS_COUNTING) {
		atomic_fetch_add_explicit(&l->crowd, 1, memory_order_relaxed); /* granter uncounts */
		counted = MCS_LINK_COUNTED;
	}
	/* C1: acq_rel, as in kl_mcs_lock(). */
	prev = as_node(atomic_exchange_explicit(&l->tail, (uintptr_t)n, memory_order_acq_rel));
	if (prev != NULL) {
		mcs_wait_granted(l, n, mcs_link(n, prev, counted), &w);
	} else { /* the lock was free after all: nobody grants it, uncount ourselves */
		atomic_store_explicit(&n->locked, MCS_HOLDER, memory_order_relaxed);
		if (counted)
			atomic_fetch_sub_explicit(&l->crowd, 1, memory_order_relaxed);
	}
	kli_wait_end(&w, l, MCS_KIND, KLI_HF_SPIN, site);
}

/* An unlock left the lock free and found counting on or passive waiters: turn counting
 * off if nobody is counted or passive (the crowd has drained), else let a passive waiter
 * in, if one sleeps. */
static KL_NOINLINE void mcs_unlocked_crowd(struct kl_mcs *l)
{
	uint32_t c = MCS_COUNTING;

	if (atomic_compare_exchange_strong_explicit(&l->crowd, &c, 0, memory_order_relaxed,
						    memory_order_relaxed))
		return;
	if (c >= MCS_PASSIVE_ONE && kli_unpark_one(&l->crowd, NULL, NULL))
		kli_hook_woke(l, MCS_KIND);
}

/* klock/mcs.h's inline unlock did C3 and P4; it found counting on or passive
 * waiters. */
void kl_mcs_unlocked_crowd_(struct kl_mcs *l)
{
	mcs_unlocked_crowd(l);
}

/* klock/mcs.h's inline lock exchanged tail with crowd at 0 and found @prev there. */
void kl_mcs_queued_(struct kl_mcs *l, struct kl_mcs_node *n, struct kl_mcs_node *prev)
{
	mcs_wait(l, n, prev, KLI_SITE());
}

void kl_mcs_init(struct kl_mcs *l)
{
	atomic_store_explicit(&l->tail, 0, memory_order_relaxed);
	atomic_store_explicit(&l->crowd, 0, memory_order_relaxed);
#if KLOCK_DEBUG_LOCKS
	atomic_store_explicit(&l->holder, 0, memory_order_relaxed);
#endif
	kli_hook_created(l, MCS_KIND, KLI_HF_SPIN);
}

void kl_mcs_destroy(struct kl_mcs *l)
{
#if KLOCK_DEBUG_LOCKS
	kli_dbg_destroy(&l->holder, l, MCS_KIND, KLI_SITE());
#endif
	atomic_store_explicit(&l->tail, MCS_POISON, memory_order_relaxed);
	kli_hook_destroyed(l, MCS_KIND);
}

void (kl_mcs_lock)(struct kl_mcs *l, struct kl_mcs_node *n)
{
	struct kl_mcs_node *prev;

	kli_hook_acquire(l, MCS_KIND, KLI_HF_SPIN, KLI_SITE());
#if KLOCK_DEBUG_LOCKS
	if (!kli_dbg_lock_ok(&l->holder, l, MCS_KIND, KLI_SITE()))
		return;
#endif
	mcs_node_init(n);
	/* crowd at 0: no gate, no count - exchange at once, as the inline lock */
	if (kl_unlikely(atomic_load_explicit(&l->crowd, memory_order_relaxed) != 0 &&
			atomic_load_explicit(&l->tail, memory_order_relaxed) != 0)) {
		mcs_lock_contended(l, n, KLI_SITE());
	} else {
		/* C1: acq_rel, pairs with C3 (free lock) and with the successor's view of our
		 * node. */
		prev = as_node(atomic_exchange_explicit(&l->tail, (uintptr_t)n,
							memory_order_acq_rel));
		if (kl_unlikely(prev != NULL))
			mcs_wait(l, n, prev, KLI_SITE());
		else /* tell a successor that links in that it is next (a hint) */
			atomic_store_explicit(&n->locked, MCS_HOLDER, memory_order_relaxed);
	}
#if KLOCK_DEBUG_LOCKS
	kli_dbg_locked(&l->holder);
#endif
	kli_hook_acquired(l, MCS_KIND, KLI_HF_SPIN, KLI_SITE());
}

bool kl_mcs_trylock(struct kl_mcs *l, struct kl_mcs_node *n)
{
	uintptr_t expect = 0;
	bool ok;

	kli_hook_acquire(l, MCS_KIND, KLI_HF_SPIN | KLI_HF_TRY, KLI_SITE());
	mcs_node_init(n);
	/* C1 (try): acq_rel as in lock. */
	ok = atomic_compare_exchange_strong_explicit(&l->tail, &expect, (uintptr_t)n,
						     memory_order_acq_rel, memory_order_relaxed);
	if (ok)
		atomic_store_explicit(&n->locked, MCS_HOLDER, memory_order_relaxed);
#if KLOCK_DEBUG_LOCKS
	if (ok)
		kli_dbg_locked(&l->holder);
	else if (expect == MCS_POISON)
		kli_dbg_report("use after destroy", l, MCS_KIND, KLI_SITE());
#endif
	kli_hook_acquired(l, MCS_KIND, KLI_HF_SPIN | KLI_HF_TRY | (ok ? 0 : KLI_HF_FAILED), KLI_SITE());
	return ok;
}

/* A successor swapped itself into tail but has not linked in yet: wait for C2. */
static uintptr_t mcs_wait_next(struct kl_mcs_node *n)
{
	struct kli_spin s;
	uintptr_t link;

	kli_spin_start(&s, KLI_STALL_NS);
	while ((link = atomic_load_explicit(&n->next, memory_order_acquire)) == 0) /* C6 */
		kli_spin_stall(&s);
	return link;
}

/* Hands the lock to @next (C5: release, pairs with C4). A successor whose awake flag says
 * it runs G2 before it sleeps gets a plain store in an rseq section (G1: no LOCK prefix,
 * no store-buffer drain, and no read of the line it spins on); any other, or without
 * rseq, an exchange, whose old value says whether it sleeps (its node may be gone once
 * it sees GRANTED: a late kl_wake() on it is harmless, as with futexes). */
static bool mcs_grant(struct kl_mcs_node *next)
{
#if KL_ARCH_HAVE_RSEQ_STORE
	/* G1: pairs with G2 in mcs_pause() (asymmetric: membarrier RSEQ on the waiter) */
	if (kl_arch_rseq_store_in(mcs_rseq_off, (const uint32_t *)&next->awake, MCS_AWAKE, 0,
				  (uint32_t *)&next->locked, MCS_GRANTED))
		return false;
#endif
	if (atomic_exchange_explicit(&next->locked, MCS_GRANTED, memory_order_release) !=
	    MCS_SLEEPING)
		return false;
	kl_wake(&next->locked, 1);
	return true;
}

/* Unlock with a successor (@link, or one still linking in when 0): grant it. */
static KL_NOINLINE void mcs_hand_over(struct kl_mcs *l, struct kl_mcs_node *n, uintptr_t link)
{
	struct kl_mcs_node *next;

	if (link == 0)
		link = mcs_wait_next(n);
	next = link_node(link);
	if (link & MCS_LINK_COUNTED) /* before the grant: the lock may be gone after it */
		atomic_fetch_sub_explicit(&l->crowd, 1, memory_order_relaxed);
	if (mcs_grant(next))
		kli_hook_woke(l, MCS_KIND); /* @l may be gone: lockstat only keys by address */
	kli_hook_released(l, MCS_KIND, KLI_HF_SPIN);
}

void (kl_mcs_unlock)(struct kl_mcs *l, struct kl_mcs_node *n)
{
	uintptr_t link;

	kli_hook_release(l, MCS_KIND, KLI_HF_SPIN, KLI_SITE());
#if KLOCK_DEBUG_LOCKS
	if (!kli_dbg_unlock_ok(&l->holder, l, MCS_KIND, KLI_SITE()))
		return;
#endif
	link = atomic_load_explicit(&n->next, memory_order_acquire); /* C6 */
	if (link == 0) {
		uintptr_t expect = (uintptr_t)n;

		/* C3 = P3: seq_cst (release half pairs with C1 of the next locker; seq_cst
		 * with P1/P2 of a passive waiter). */
		if (kl_likely(atomic_compare_exchange_strong_explicit(&l->tail, &expect, 0,
								      memory_order_seq_cst,
								      memory_order_relaxed))) {
			/* P4 (seq_cst): pairs with P1 in mcs_wait_passive() */
			if (kl_unlikely(atomic_load_explicit(&l->crowd, memory_order_seq_cst) >=
					MCS_COUNTING))
				mcs_unlocked_crowd(l);
			kli_hook_released(l, MCS_KIND, KLI_HF_SPIN);
			return;
		}
	}
	mcs_hand_over(l, n, link);
}

bool kl_mcs_is_locked(const struct kl_mcs *l)
{
	return atomic_load_explicit(&l->tail, memory_order_relaxed) != 0;
}
