/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/ticket.c - kl_ticket, the FIFO ticket spinlock.
 *
 * WHAT. The classic ticket lock (Linux x86 spinlocks 2008-2014, before qspinlock;
 * ck_spinlock_ticket): two 32-bit counters. A locker takes `next` with one fetch-add and
 * waits until `owner` equals its ticket; unlock advances `owner`. Waiters all poll the
 * same word, so a release costs one cache-line transfer per waiter: fine for a few CPUs
 * and short sections, which is its job (a leaf lock, the hashed-lock stripe kind); MCS or
 * kl_mutex scale further.
 *
 * Oversubscription. FIFO is a trap when threads outnumber CPUs: if the next ticket's
 * thread is preempted, everyone waits for it to be scheduled, and spinning waiters burn
 * the CPU it needs. So the next in line spins on a time budget and then yields (kli_yield)
 * to the preempted thread - for TICKET_NEXT_AWAKE_NS in all, then it sleeps until served
 * (a lock held for seconds costs its waiters no CPU; what the yielding cost before it
 * slept: docs/results.md, "Figures behind the theory blocks"); the others spin
 * (TICKET_SPIN_NS while the queue fits on the CPUs, the budget starting again each time
 * the queue moves, so a waiter sleeps only when the queue has stalled that long;
 * TICKET_QUEUE_SPIN_NS beyond) and then
 * sleep in the parking lot until their turn is next (TWA, Dice & Kogan
 * 2019, with the parking lot as the waiting array).
 * That alone still pays a wake-up per hand-over once more threads queue than there are
 * CPUs (each sleeper's turn comes while it sleeps: measured 20-80 k ops/s at 8 threads on
 * 2 CPUs, against millions at 2). So the queue is also kept short - concurrency
 * restriction (Dice & Kogan's GCR, 2019; Dice's Malthusian locks, 2017): a newcomer that
 * finds kli_crowd_max tickets outstanding (holder + waiters = the CPUs we may run on, so
 * threads now outnumber CPUs) takes no ticket; it parks passive on &sleepers and takes one
 * when woken - by the unlock that leaves the queue empty - or after TICKET_ROTATE_NS
 * asleep. The running threads keep the lock among themselves at full speed; the timeout
 * rotates the passive ones back in (each admission lengthens the queue, so some running
 * thread is culled on its next lock): nobody waits more than about a rotation period plus
 * a queue. FIFO holds among ticket holders, not among passive waiters.
 *
 * STATE.
 *   next      ticket the next locker gets (wraps mod 2^32)
 *   owner     ticket being served; owner == next: unlocked; next - owner: holder + waiters
 *   sleepers  bits 0-13: ticket holders parked (or about to park) on the lock's key
 *             further back in the queue, each tagged with its ticket (the park cookie);
 *             bits 14-15: the same for the next in line, asleep after its awake budget
 *             (at most 2 at once: the ticket just served, woken but not yet running, and
 *             the new next - a third can only become next once the first has unlocked);
 *             bits 16-30: passive waiters (no ticket yet) parked on &sleepers - one word,
 *             so the uncontended unlock asks "anyone asleep?" with one load;
 *             bit 31 TICKET_FENCED: the fenced mode (below): a sleeper needs no heavy
 *             fence, and every unlock takes the library's fence and second look (W1)
 *   holder    debug builds only: the holder's record (locks/primitives/lockdebug.h)
 *
 * INVARIANTS. owner <= next (mod 2^32, fewer than 2^32 threads); only the holder writes
 * owner. A waiter further back parks only while its ticket is at least two places from
 * being served (my - owner >= 2, checked under the bucket lock); the next in line parks
 * only after TICKET_NEXT_AWAKE_NS awake, and only while not served (my - owner >= 1). Each
 * unlock that finds sleepers wakes exactly the ticket it has just served (if a next in
 * line sleeps: bits 14-15) and the one that has just become next (if one sleeps further
 * back: bits 0-13). No waiter sleeps past its turn, none spins or yields without bound.
 *
 * ORDERING.
 *   T1  fetch-add on next (relaxed): only picks the ticket; RMW atomicity makes it unique.
 *   T2  acquire load of owner that sees our ticket   pairs with T3
 *   T3  release store of owner + 1 in unlock         pairs with T2 of the next ticket
 *   S1/S2 asymmetric pair: the parker counts itself (sleepers++) and issues the heavy fence
 *       (membarrier, S1) before its validate looks at owner; the unlocker stores owner (T3),
 *       takes the light fence (compiler barrier, S2) and loads sleepers. Either it sees the
 *       sleeper (and unparks under the bucket lock, where validate and unpark serialise) or
 *       the parker sees the new owner and does not sleep. The same pair covers the next
 *       in line's sleep (its count in bits 14-15, its validate my - owner >= 1): the
 *       unlock that serves it sees the count, or it sees itself served. The light side is
 *       what keeps the uncontended unlock a plain store plus two loads.
 *   P0 passive waiters take no fence: the passive count in sleepers, then the gate's
 *       validate reads owner and next; the unlock that empties the queue (owner == next
 *       after T3) usually sees the count and unparks one, or the waiter sees the room.
 *       Without a fence both can miss (store buffering), and the waiter then sleeps to
 *       its timeout, TICKET_ROTATE_NS, the rotation period it would wait anyway when the
 *       queue stays crowded: nothing rests on it but latency, so a passive wait never
 *       costs a membarrier (one per passive wait made the heavy fence a cost per
 *       acquisition once threads outnumber the CPUs).
 *   F1/F2 the fenced mode: one heavy fence per contention episode, not one per sleep. A
 *       membarrier interrupts every CPU that runs one of our threads, so S1 per sleep cost
 *       a contended lock more with each CPU (on 16 CPUs, 8-11 CPUs of system time). The
 *       first sleeper that finds TICKET_FENCED clear issues S1, then sets TICKET_FENCED
 *       (F1: release fetch-or). A later sleeper's count RMW (acq_rel) that returns
 *       TICKET_FENCED (F2: acquire, pairs with F1) skips S1: the membarrier it would have
 *       issued has already run, after the first sleeper's count was in the word, so every
 *       unlock either stored owner before that membarrier's barrier on its CPU (then every
 *       validate after it sees the new owner) or loads sleepers after it and finds it
 *       non-zero (a count is in from before the membarrier until TICKET_FENCED is set,
 *       and TICKET_FENCED stays until the word holds nothing else). A non-zero word sends
 *       the unlock to ticket_wake(), whose first step is a seq_cst fence and a second
 *       load of sleepers (W1); a sleeper that skips S1 issues a seq_cst fence after its
 *       count (W2) before its validate. Two seq_cst fences: whichever comes first in
 *       their single order, the other side's load sees its partner's store (W1 first:
 *       the sleeper's validate sees T3 and it does not sleep; W2 first: W1's load sees
 *       the count and the unlock wakes it, under the bucket lock against its validate).
 *       A fence, not an RMW: the unlock writes nothing more to the line its successor
 *       spins on. The mode ends when the unlocking thread has done TICKET_FENCED_QUIET
 *       fenced-mode unlocks in a row that found nothing but the flag (a per-thread count:
 *       approximate, nothing but the mode's end rests on it): a CAS from exactly
 *       TICKET_FENCED to the word without it, which fails if a sleeper counted itself in or
 *       out meanwhile; a sleeper whose RMW comes after the CAS finds the flag clear and
 *       issues S1 itself. Passive waiters (P0) neither need nor keep the mode.
 *   Trylock: T2 (acquire load of owner), then a CAS next: owner -> owner + 1, which
 *   succeeds only if no ticket was taken since, so the owner value read is current.
 *
 * COSTS. Pros: 12 bytes, FIFO, trylock, static initializer, cheap uncontended (one RMW,
 * one store, two loads); one heavy fence per contention episode (F1/F2), not one per
 * sleep, so no cost per acquisition grows with the CPUs - more only for sleepers that
 * count themselves in while the first one's membarrier is still running (each then
 * issues its own, at most one per thread: a thread sets the mode after its S1). Cons: for TICKET_FENCED_QUIET unlocks
 * after a sleep, every unlock calls into the library for a full fence and a second load;
 * every awake waiter polls one line (O(waiters) traffic per release); a preempted holder
 * or next-in-line still stalls the queue (FIFO cannot barge past it); waking a sleeper
 * costs a system call in the unlock that makes it next (and a hold longer than
 * TICKET_NEXT_AWAKE_NS one more, in the unlock that serves it); the crowding check adds
 * two loads of the lock's own line and a compare to the uncontended lock; oversubscribed,
 * fairness is long-term (rotation period), not per acquisition (among ticket holders it is
 * strict FIFO: nobody is passed).
 *
 * Inline fast paths. klock/ticket.h tries the lock inline first (C builds without
 * instruments): T2, then the trylock's CAS of next from owner to owner + 1. It takes the
 * lock only when no ticket is out, where the crowding check below would pass anyway, so it
 * skips that check; anything else calls kl_ticket_lock(), which starts afresh (a failed
 * CAS took no ticket). The unlock is inline whole: T3, S2 (the light half read from
 * kl_fence_asym_, the library's mode exported) and the load of sleepers, the same steps
 * as ticket_unlock(); only a non-zero sleepers calls the library (kl_ticket_wake_(), i.e.
 * ticket_wake()). klbench latency, a pair: 7.9 ns through the library, 5.3 ns with the
 * lock inline, 4.0-4.5 ns with both inline; ck's ticket 7.4-8.0 ns.
 *
 * LIMITS. Fewer than 2^14 ticket holders asleep further back and 2^15 passive waiters per
 * lock.
 */
#include "ticket_impl.h"
#include "fence_impl.h"
#include "hooks.h"
#include "lockdebug.h"
#include "park.h"
#include "spin.h"

#define TICKET_KIND KLI_KIND_TICKET
/* Next in line: spin this long, then yield (a section + hand-over is far shorter; yielding
 * sooner hands the CPU to other processes for a whole time slice). */
#define TICKET_SPIN_NS 50000u
/* Next in line: stay awake (spin, yield) this long in all, then sleep until served. A
 * preempted holder gets a CPU back within a few ms anyway once we sleep (sleeping frees
 * our CPU as a yield does); the budget only bounds what a waiter behind a long hold
 * burns: at most this per acquisition, and a hold that outlasts it pays one wake-up
 * (~10 us) on top of >= 1 ms, under 1%. The rotation period's length, so the passive
 * waiters and the next in line live on one time scale. */
#define TICKET_NEXT_AWAKE_NS 1000000u
/* Further back than the CPUs hold (kli_crowd_max tickets or more from being served): poll
 * this long (the queue may move fast), then sleep until next. Nearer, a waiter spins
 * TICKET_SPIN_NS: until 2026-12-04 every waiter past next slept after this, and on 16
 * CPUs the queue then paid a wake-up per hand-over at 4-16 threads (15-189 k ops/s
 * against ck's ticket lock at 1.4-2.6 M). */
#define TICKET_QUEUE_SPIN_NS 2000u
/* A newcomer to a crowded queue polls this long for room before it waits passive (a
 * sleep and a wake-up cost more than this; about a membarrier's time in a VM). */
#define TICKET_PASSIVE_POLL_NS 20000u
/* A passive waiter's longest sleep before it takes a ticket anyway: the rotation period,
 * about kl_mutex's hand-off threshold (no thread starves longer than that plus a queue). */
#define TICKET_ROTATE_NS 1000000u
/* sleepers: one passive waiter (the high half); the ticket holders asleep further back
 * (bits 0-13) and asleep next in line (bits 14-15: at most 2 at once, see the top). */
#define TICKET_PASSIVE_ONE (1u << 16)
#define TICKET_NEXT_ONE (1u << 14)
#define TICKET_FENCED (1u << 31)
#define TICKET_FAR_MASK (TICKET_NEXT_ONE - 1u)
#define TICKET_NEXT_MASK (TICKET_PASSIVE_ONE - TICKET_NEXT_ONE)
/* Fenced mode: a thread's unlocks in a row without a sleeper before it ends the mode. The
 * mode costs each unlock one call and one fence; ending it costs the next sleeper a
 * membarrier: so at most one membarrier per this many unlocks once contention stops. */
#define TICKET_FENCED_QUIET 4096u

/* This thread's fenced-mode unlocks in a row that found no sleeper (TICKET_FENCED_QUIET). */
static __thread uint32_t ticket_quiet __attribute__((tls_model("initial-exec")));
/* What kl_ticket_destroy() leaves in both counters. */
#define TICKET_POISON 0xdead0000u

struct ticket_park {
	struct kl_ticket *t;
	uint32_t my;
	uint32_t dist; /* sleep only while our turn is at least this many places away */
};

/* Tickets outstanding: holder + waiters (0 when free). */
static inline uint32_t ticket_queued(const struct kl_ticket *t)
{
	return atomic_load_explicit(&t->next, memory_order_relaxed) -
	       atomic_load_explicit(&t->owner, memory_order_relaxed);
}

/* Under the bucket lock: sleep only while our turn is still tp->dist or more away (2
 * further back: the unlock that makes us next wakes us; 1 next in line: the unlock that
 * serves us does). */
static bool ticket_validate(void *arg)
{
	struct ticket_park *tp = arg;

	return tp->my - atomic_load_explicit(&tp->t->owner, memory_order_relaxed) >= tp->dist;
}

/* Counts a sleeper in (@one: its unit in sleepers) and orders the count before its
 * validate's look at owner against every unlock: by the fenced mode's RMW chain (F2) if
 * the mode is on, else by a heavy fence (S1) that turns the mode on (F1). */
static void ticket_count_in(struct kl_ticket *t, uint32_t one, struct kli_wait *w)
{
	/* F2: acquire, pairs with F1 of the sleeper that set TICKET_FENCED. */
	uint32_t old = atomic_fetch_add_explicit(&t->sleepers, one, memory_order_acq_rel);

	if (old & TICKET_FENCED) {
		atomic_thread_fence(memory_order_seq_cst); /* W2: pairs with W1 in ticket_wake() */
		return;
	}
	kli_fence_heavy(); /* S1: pairs with S2 in kl_ticket_unlock() and its inline copy */
	if (kli_fence_asym) /* a membarrier, not the fallback's plain fence */
		kli_wait_fenced(w);
	/* F1: release, pairs with F2 in the later sleepers: our S1 happens-before them. */
	atomic_fetch_or_explicit(&t->sleepers, TICKET_FENCED, memory_order_release);
}

/* Sleeps until our ticket is next (@next false) or served (@next true: we were next in
 * line and spent TICKET_NEXT_AWAKE_NS awake), or became so meanwhile. */
static void ticket_sleep(struct kl_ticket *t, uint32_t my, bool next, struct kli_wait *w)
{
	struct ticket_park tp = { t, my, next ? 1u : 2u };
	struct kli_park_req req = { .key = t, .validate = ticket_validate, .arg = &tp,
				    .cookie = my };
	uint32_t one = next ? TICKET_NEXT_ONE : 1u;
	uintptr_t token;

	ticket_count_in(t, one, w);
	kli_wait_sleep(w);
	if (kli_park(&req, &token) != KLI_PARK_INVALID &&
	    atomic_load_explicit(&t->owner, memory_order_relaxed) == my)
		kli_wait_handover_asleep(w); /* served while asleep: the hand-over waited */
	atomic_fetch_sub_explicit(&t->sleepers, one, memory_order_relaxed);
	kli_wait_spin(w);
}

/* How long a waiter @dist tickets from being served spins before it sleeps (when not
 * next): long while the queue fits on the CPUs (nobody is short of a CPU for the holder),
 * a short poll further back. */
static uint64_t ticket_spin_budget(uint32_t dist)
{
	return dist < kli_crowd_max ? TICKET_SPIN_NS : TICKET_QUEUE_SPIN_NS;
}

/* Waits, with ticket @my, until it is served. */
static void ticket_wait_turn(struct kl_ticket *t, uint32_t my, struct kli_wait *w)
{
	struct kli_spin s, awake = { 0 }; /* awake: set when our turn is next, read only then */
	uint32_t owner = atomic_load_explicit(&t->owner, memory_order_relaxed), seen = owner;
	bool next = false;

	kli_wait_spin(w);
	kli_spin_start(&s, ticket_spin_budget(my - owner));
	while ((owner = atomic_load_explicit(&t->owner, memory_order_acquire)) != my) { /* T2 */
		if (!next && my - owner == 1) { /* our turn is next: the spin budget restarts */
			next = true;
			kli_spin_start(&s, TICKET_SPIN_NS);
			kli_spin_start(&awake, TICKET_NEXT_AWAKE_NS);
		} else if (!next && owner != seen && my - owner < kli_crowd_max) {
			/* the queue moved and fits on the CPUs: keep spinning (a far waiter
			 * sleeps only when the queue stalls, so a running queue pays no
			 * wake-up per hand-over however many CPUs it spans) */
			kli_spin_start(&s, TICKET_SPIN_NS);
		}
		seen = owner;
		if (kli_spin_poll(&s))
			continue;
		if (next && !kli_spin_expired(&awake))
			kli_yield(); /* the holder may be preempted: give it our CPU */
		else
			ticket_sleep(t, my, next, w); /* a long hold, or far back */
		kli_spin_start(&s, next ? TICKET_SPIN_NS :
				   ticket_spin_budget(my - atomic_load_explicit(
					   &t->owner, memory_order_relaxed)));
	}
}

static KL_NOINLINE void ticket_wait(struct kl_ticket *t, uint32_t my, const void *site)
{
	struct kli_wait w;

	kli_wait_begin(&w, t, TICKET_KIND, KLI_HF_SPIN, site);
	ticket_wait_turn(t, my, &w);
	kli_wait_end(&w, t, TICKET_KIND, KLI_HF_SPIN, site);
}

/* Under the bucket lock: wait passive only while the queue is still crowded. */
static bool ticket_gate_validate(void *arg)
{
	return ticket_queued(arg) >= kli_crowd_max;
}

/* Polls for TICKET_PASSIVE_POLL_NS: does the crowd persist? A queue at the CPU count
 * empties for a moment now and then; a newcomer that catches that moment queues at once
 * instead of paying a sleep and a wake-up. */
static bool ticket_stays_crowded(struct kl_ticket *t, struct kli_wait *w)
{
	struct kli_spin s;

	kli_wait_spin(w);
	kli_spin_start(&s, TICKET_PASSIVE_POLL_NS);
	while (kli_spin_poll(&s))
		if (ticket_queued(t) < kli_crowd_max)
			return false;
	return true;
}

/* The queue is crowded (threads outnumber CPUs): wait passive, without a ticket, until an
 * unlock empties the queue or the rotation period passes; then queue like anyone. */
static KL_NOINLINE void ticket_lock_crowded(struct kl_ticket *t, const void *site)
{
	struct timespec until;
	struct kli_park_req req = { .key = &t->sleepers, .validate = ticket_gate_validate,
				    .arg = t, .abstime = &until };
	struct kli_wait w;
	uintptr_t token;
	uint32_t my;

	kli_wait_begin(&w, t, TICKET_KIND, KLI_HF_SPIN, site);
	if (ticket_stays_crowded(t, &w)) {
		kli_wait_sleep(&w);
		kli_deadline_after(&until, TICKET_ROTATE_NS);
		/* P0: no fence (the timeout bounds a missed wake-up, see the top) */
		atomic_fetch_add_explicit(&t->sleepers, TICKET_PASSIVE_ONE, memory_order_relaxed);
		kli_park(&req, &token);
		atomic_fetch_sub_explicit(&t->sleepers, TICKET_PASSIVE_ONE, memory_order_relaxed);
	}
	my = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed); /* T1 */
	if (atomic_load_explicit(&t->owner, memory_order_acquire) != my) /* T2 */
		ticket_wait_turn(t, my, &w);
	kli_wait_end(&w, t, TICKET_KIND, KLI_HF_SPIN, site);
}

/* Fenced mode, an unlock whose W1 read @sleepers: counts this thread's unlocks in a row
 * that found nothing but the flag, and ends the mode after TICKET_FENCED_QUIET of them. */
static void ticket_fenced_quiet(struct kl_ticket *t, uint32_t sleepers)
{
	if (sleepers & (TICKET_FAR_MASK | TICKET_NEXT_MASK)) { /* the episode goes on */
		ticket_quiet = 0;
		return;
	}
	if (++ticket_quiet < TICKET_FENCED_QUIET)
		return;
	ticket_quiet = 0;
	/* fails if anyone counted itself in or out meanwhile: the mode then goes on */
	atomic_compare_exchange_strong_explicit(&t->sleepers, &sleepers, sleepers & ~TICKET_FENCED,
						memory_order_relaxed, memory_order_relaxed);
}

/* Wakes @key's ticket holder with @cookie if one sleeps there (a lockstat event). */
static void ticket_wake_cookie(struct kl_ticket *t, uint32_t cookie)
{
	if (kli_unpark_cookie(t, cookie, 0))
		kli_hook_woke(t, TICKET_KIND);
}

/* The unlock saw sleepers or the fenced mode (@owner now served). Looks at the word again
 * after W1, then wakes the ticket holder served now if it slept next in line, the one that
 * is now next if it slept further back (either may not have parked yet, or not at all:
 * then nothing happens and it finds out by itself), and, if the queue is now empty, one
 * passive waiter. */
static KL_NOINLINE void ticket_wake(struct kl_ticket *t, uint32_t owner)
{
	uint32_t sleepers;

	atomic_thread_fence(memory_order_seq_cst); /* W1: pairs with W2 in ticket_count_in() */
	sleepers = atomic_load_explicit(&t->sleepers, memory_order_relaxed);

	if (sleepers & TICKET_FENCED)
		ticket_fenced_quiet(t, sleepers);
	if (sleepers & TICKET_NEXT_MASK)
		ticket_wake_cookie(t, owner);
	if (sleepers & TICKET_FAR_MASK)
		ticket_wake_cookie(t, owner + 1);
	if ((sleepers & ~TICKET_FENCED) >= TICKET_PASSIVE_ONE &&
	    atomic_load_explicit(&t->next, memory_order_relaxed) == owner &&
	    kli_unpark_one(&t->sleepers, NULL, NULL))
		kli_hook_woke(t, TICKET_KIND);
}

void kl_ticket_init(struct kl_ticket *t)
{
	atomic_store_explicit(&t->next, 0, memory_order_relaxed);
	atomic_store_explicit(&t->owner, 0, memory_order_relaxed);
	atomic_store_explicit(&t->sleepers, 0, memory_order_relaxed);
#if KLOCK_DEBUG_LOCKS
	atomic_store_explicit(&t->holder, 0, memory_order_relaxed);
#endif
	kli_hook_created(t, TICKET_KIND, KLI_HF_SPIN);
}

void kl_ticket_destroy(struct kl_ticket *t)
{
#if KLOCK_DEBUG_LOCKS
	kli_dbg_destroy(&t->holder, t, TICKET_KIND, KLI_SITE());
#endif
	atomic_store_explicit(&t->next, TICKET_POISON, memory_order_relaxed);
	atomic_store_explicit(&t->owner, TICKET_POISON, memory_order_relaxed);
	kli_hook_destroyed(t, TICKET_KIND);
}

void (kl_ticket_lock)(struct kl_ticket *t)
{
	uint32_t my, owner;

	kli_hook_acquire(t, TICKET_KIND, KLI_HF_SPIN, KLI_SITE());
#if KLOCK_DEBUG_LOCKS
	if (!kli_dbg_lock_ok(&t->holder, t, TICKET_KIND, KLI_SITE()))
		return;
#endif
	if (kl_unlikely(ticket_queued(t) >= kli_crowd_max)) {
		ticket_lock_crowded(t, KLI_SITE());
	} else {
		my = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed); /* T1 */
		owner = atomic_load_explicit(&t->owner, memory_order_acquire); /* T2: pairs with T3 */
		if (kl_unlikely(owner != my))
			ticket_wait(t, my, KLI_SITE());
	}
#if KLOCK_DEBUG_LOCKS
	kli_dbg_locked(&t->holder);
#endif
	kli_hook_acquired(t, TICKET_KIND, KLI_HF_SPIN, KLI_SITE());
}

/* The trylock, its hooks and reports naming @site (kl_ticket_trylock's caller, or the
 * caller of a lock built on kl_ticket: kli_ticket_trylock_at). */
static KL_ALWAYS_INLINE bool ticket_trylock(struct kl_ticket *t, const void *site)
{
	uint32_t owner;
	bool ok;

	kli_hook_acquire(t, TICKET_KIND, KLI_HF_SPIN | KLI_HF_TRY, site);
	owner = atomic_load_explicit(&t->owner, memory_order_acquire); /* T2: pairs with T3 */
	ok = atomic_compare_exchange_strong_explicit(&t->next, &owner, owner + 1,
						     memory_order_relaxed, memory_order_relaxed);
#if KLOCK_DEBUG_LOCKS
	if (ok)
		kli_dbg_locked(&t->holder);
	else if (atomic_load_explicit(&t->holder, memory_order_relaxed) == KLI_DBG_POISON)
		kli_dbg_report("use after destroy", t, TICKET_KIND, site);
#endif
	kli_hook_acquired(t, TICKET_KIND, KLI_HF_SPIN | KLI_HF_TRY | (ok ? 0 : KLI_HF_FAILED),
			  site);
	return ok;
}

/* The unlock, naming @site (as ticket_trylock). */
static KL_ALWAYS_INLINE void ticket_unlock(struct kl_ticket *t, const void *site)
{
	uint32_t owner, sleepers;

	kli_hook_release(t, TICKET_KIND, KLI_HF_SPIN, site);
#if KLOCK_DEBUG_LOCKS
	if (!kli_dbg_unlock_ok(&t->holder, t, TICKET_KIND, site))
		return;
#endif
	owner = atomic_load_explicit(&t->owner, memory_order_relaxed) + 1; /* only we write it */
	atomic_store_explicit(&t->owner, owner, memory_order_release); /* T3 */
	kli_fence_light(); /* S2: pairs with S1 in ticket_sleep() */
	sleepers = atomic_load_explicit(&t->sleepers, memory_order_relaxed);
	if (kl_unlikely(sleepers != 0))
		ticket_wake(t, owner);
	kli_hook_released(t, TICKET_KIND, KLI_HF_SPIN);
}

bool kl_ticket_trylock(struct kl_ticket *t)
{
	return ticket_trylock(t, KLI_SITE());
}

void (kl_ticket_unlock)(struct kl_ticket *t)
{
	ticket_unlock(t, KLI_SITE());
}

/* klock/ticket.h's inline unlock did T3, S2 and the load; it found sleepers. */
void kl_ticket_wake_(struct kl_ticket *t, uint32_t owner, uint32_t sleepers)
{
	(void)sleepers; /* W1 reads the word again */
	ticket_wake(t, owner);
}

bool kl_ticket_is_locked(const struct kl_ticket *t)
{
	return atomic_load_explicit(&t->owner, memory_order_relaxed) !=
	       atomic_load_explicit(&t->next, memory_order_relaxed);
}

/* ---- on behalf of a lock built on kl_ticket (kl_hashlock's ticket stripes) ------------ */

/*
 * kl_ticket_lock() with the hooks, reports and lockstat rows naming @site. A copy of
 * kl_ticket_lock() rather than a shared inline body: passing KLI_SITE() into one as a
 * parameter makes the compiler load the return address before the fetch-add, one more
 * instruction on kl_ticket_lock()'s uncontended path (hooks.h, KLI_SITE()).
 */
void kli_ticket_lock_at(struct kl_ticket *t, const void *site)
{
	uint32_t my, owner;

	kli_hook_acquire(t, TICKET_KIND, KLI_HF_SPIN, site);
#if KLOCK_DEBUG_LOCKS
	if (!kli_dbg_lock_ok(&t->holder, t, TICKET_KIND, site))
		return;
#endif
	if (kl_unlikely(ticket_queued(t) >= kli_crowd_max)) {
		ticket_lock_crowded(t, site);
	} else {
		my = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed); /* T1 */
		owner = atomic_load_explicit(&t->owner, memory_order_acquire); /* T2: pairs with T3 */
		if (kl_unlikely(owner != my))
			ticket_wait(t, my, site);
	}
#if KLOCK_DEBUG_LOCKS
	kli_dbg_locked(&t->holder);
#endif
	kli_hook_acquired(t, TICKET_KIND, KLI_HF_SPIN, site);
}

bool kli_ticket_trylock_at(struct kl_ticket *t, const void *site)
{
	return ticket_trylock(t, site);
}

void kli_ticket_unlock_at(struct kl_ticket *t, const void *site)
{
	ticket_unlock(t, site);
}
