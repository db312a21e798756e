/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/seqlock.c - kl_seqlock.
 *
 * WHAT. Linux seqlock_t (seqcount + writer lock), FreeBSD's timehands generation counters.
 *
 * STATE. seq: bit 0 set while a writer is writing; the value counts writes (x2).
 * wlock: the writers' mutex, Drepper's three-state futex mutex (0 free, 1 held, 2 held
 * with possible sleepers; a sleeper stores 2 before sleeping, so an unlock that swaps out
 * 2 wakes one writer, and every reader asleep on seq). owner: the writer's owner id (debug
 * checks, wowned-style queries).
 *
 * INVARIANTS. seq is odd exactly while the wlock holder is between write_lock and
 * write_unlock. Only the wlock holder writes seq.
 *
 * ORDERING.
 *   W1  write_lock: seq = s + 1 (relaxed), then a release fence: the odd value is ordered
 *       before every data store of the write section. Pairs with R2 in read_retry: a
 *       reader that read any of those stores sees seq != its even snapshot.
 *   W2  write_unlock: seq = s + 2 with release: the data stores are ordered before the
 *       even value. Pairs with R1 (acquire load in read_begin): a reader that starts at
 *       the new even value sees the whole write.
 *   M1/M2  wlock acquire (CAS/xchg acquire) and release (xchg release).
 *   Q1/Q2  a reader that waited SEQ_READ_AWAKE_NS on odd @s CASes wlock 1 -> 2 (or finds
 *       2), then futex-waits on seq == s; the unlock stores s + 1 (W2) before its
 *       exchange (M2) and, seeing 2, wakes seq. Both RMWs on wlock: if seq is still s
 *       when the futex compares, the writer of s held wlock all along since our CAS, so
 *       its exchange sees 2 and its wake comes after the store (the futex's own order
 *       does the rest). A CAS that finds 0 or the next writer's 1 with seq moved on only
 *       costs a futex call that returns at once.
 *
 * COSTS. Readers write no memory at all (except a reader that waited 1 ms for a write: it
 * marks wlock and sleeps, so a long write costs readers no CPU), so they scale perfectly
 * and cannot slow the writer; the price is retries (wasted work under write traffic), the
 * copy-only rule for read sections, and readers that can starve under a steady write
 * stream.
 *
 * LIMITS. Readers are not announced to instruments (they hold nothing and block nobody;
 * TSan sees the acquire/release pairs on seq itself). 32-bit sequence: a reader preempted
 * across exactly 2^31 writes would accept a torn copy (as in Linux).
 */
#include <klock/seqlock.h>
#include <klock/wait.h>
#include "hooks.h"
#include "spin.h"
#include "thread.h"

/* Writers spin this long on a held wlock before sleeping (write sections are short). */
#define SEQ_SPIN_NS 5000u
/* Readers spin this long on an odd sequence before yielding to a (preempted) writer. */
#define SEQ_READ_SPIN_NS 20000u
/* ... and spin/yield this long in all before they sleep until the write ends (kl_ticket's
 * TICKET_NEXT_AWAKE_NS reasoning: bounds what a write that runs long costs each reader;
 * a write section that long is a misuse, so the wake-up's cost does not matter). */
#define SEQ_READ_AWAKE_NS 1000000u
/* wlock: held with possible sleepers (writers on wlock, readers on seq). */
#define SEQ_WLOCK_SLEEPERS 2u

int kl_seqlock_init(struct kl_seqlock *sl)
{
	kli_init();
	*sl = (struct kl_seqlock)KL_SEQLOCK_INITIALIZER;
	kli_hook_created(sl, KLI_KIND_SEQLOCK, 0);
	return 0;
}

int kl_seqlock_destroy(struct kl_seqlock *sl)
{
	if (atomic_load_explicit(&sl->wlock, memory_order_acquire) != 0) {
#if KLOCK_DEBUG_LOCKS
		kli_report("destroy of a write-held lock", "seqlock", sl,
			   KLI_SITE(), NULL);
#endif
		return EBUSY;
	}
	kli_hook_destroyed(sl, KLI_KIND_SEQLOCK);
	return 0;
}

static KL_NOINLINE void seq_wlock_slow(struct kl_seqlock *sl, const void *site)
{
	struct kli_wait w;
	struct kli_spin sp;
	uint32_t c;

	kli_wait_begin(&w, sl, KLI_KIND_SEQLOCK, 0, site);
	kli_wait_spin(&w);
	kli_spin_start(&sp, SEQ_SPIN_NS);
	do {
		c = 0;
		if (atomic_load_explicit(&sl->wlock, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_weak_explicit(&sl->wlock, &c, 1,
							  memory_order_acquire, /* M1 */
							  memory_order_relaxed))
			goto out;
	} while (kli_spin_backoff(&sp));
	while (atomic_exchange_explicit(&sl->wlock, 2, memory_order_acquire) != 0) { /* M1 */
		kli_wait_sleep(&w);
		kl_wait(&sl->wlock, 2, NULL);
	}
out:
	kli_wait_end(&w, sl, KLI_KIND_SEQLOCK, 0, site);
}

/* The writer owns wlock: make the sequence odd before any data store (W1). */
static void seq_write_begin(struct kl_seqlock *sl)
{
	uint32_t s = atomic_load_explicit(&sl->seq, memory_order_relaxed);

	atomic_store_explicit(&sl->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release); /* W1: pairs with R2 */
	atomic_store_explicit(&sl->owner, kli_owner(), memory_order_relaxed);
}

void kl_seqlock_write_lock(struct kl_seqlock *sl)
{
	uint32_t c = 0;

#if KLOCK_DEBUG_LOCKS
	if (atomic_load_explicit(&sl->owner, memory_order_relaxed) == kli_owner())
		kli_report("recursive write lock (deadlock)", "seqlock", sl, KLI_SITE(), NULL);
#endif
	kli_hook_acquire(sl, KLI_KIND_SEQLOCK, 0, KLI_SITE());
	if (!atomic_compare_exchange_strong_explicit(&sl->wlock, &c, 1, memory_order_acquire,
						     memory_order_relaxed)) /* M1 */
		seq_wlock_slow(sl, KLI_SITE());
	seq_write_begin(sl);
	kli_hook_acquired(sl, KLI_KIND_SEQLOCK, 0, KLI_SITE());
}

bool kl_seqlock_write_trylock(struct kl_seqlock *sl)
{
	uint32_t c = 0;
	bool ok;

	kli_hook_acquire(sl, KLI_KIND_SEQLOCK, KLI_HF_TRY, KLI_SITE());
	ok = atomic_compare_exchange_strong_explicit(&sl->wlock, &c, 1, memory_order_acquire,
						     memory_order_relaxed); /* M1 */
	if (ok)
		seq_write_begin(sl);
	kli_hook_acquired(sl, KLI_KIND_SEQLOCK, KLI_HF_TRY | (ok ? 0 : KLI_HF_FAILED), KLI_SITE());
	return ok;
}

void kl_seqlock_write_unlock(struct kl_seqlock *sl)
{
	uint32_t s = atomic_load_explicit(&sl->seq, memory_order_relaxed);

#if KLOCK_DEBUG_LOCKS
	if (atomic_load_explicit(&sl->owner, memory_order_relaxed) != kli_owner() ||
	    !(s & 1)) {
		kli_report("write unlock by a thread that does not own the lock", "seqlock", sl,
			   KLI_SITE(), NULL);
		return;
	}
#endif
	kli_hook_release(sl, KLI_KIND_SEQLOCK, 0, KLI_SITE());
	atomic_store_explicit(&sl->owner, 0, memory_order_relaxed);
	atomic_store_explicit(&sl->seq, s + 1, memory_order_release); /* W2: pairs with R1 */
	/* M2; Q2: pairs with Q1 in seq_read_sleep(). */
	if (atomic_exchange_explicit(&sl->wlock, 0, memory_order_release) == SEQ_WLOCK_SLEEPERS) {
		kl_wake(&sl->wlock, 1);
		kl_wake(&sl->seq, KL_WAKE_ALL); /* readers asleep behind a long write (after W2) */
	}
	kli_hook_released(sl, KLI_KIND_SEQLOCK, 0);
}

/* A reader waited SEQ_READ_AWAKE_NS for the write that made the sequence @s: mark wlock
 * (Q1) so that the writer's unlock wakes the sequence's sleepers, and sleep while the
 * sequence is still @s. The only store a reader ever makes, on this slow path alone. */
static void seq_read_sleep(const struct kl_seqlock *csl, uint32_t s, struct kli_wait *w)
{
	struct kl_seqlock *sl = (struct kl_seqlock *)csl; /* writers write it: never const */
	uint32_t v = 1;

	/* Q1: an RMW on wlock, against the unlock's exchange (M2, Q2): see the top. */
	if (atomic_compare_exchange_strong_explicit(&sl->wlock, &v, SEQ_WLOCK_SLEEPERS,
						    memory_order_relaxed, memory_order_relaxed) ||
	    v == SEQ_WLOCK_SLEEPERS) {
		kli_wait_sleep(w);
		kl_wait(&sl->seq, s, NULL); /* returns at once once seq moved on */
		kli_wait_spin(w);
	}
}

/* A write is in progress: wait it out (one slow-path episode for lockstat). */
static KL_NOINLINE uint32_t seq_read_wait(const struct kl_seqlock *sl, const void *site)
{
	struct kli_wait w;
	struct kli_spin sp, awake;
	uint32_t s;

	kli_wait_begin(&w, sl, KLI_KIND_SEQLOCK, KLI_HF_READ, site);
	kli_wait_spin(&w);
	kli_spin_start(&awake, SEQ_READ_AWAKE_NS);
	for (;;) {
		kli_spin_start(&sp, SEQ_READ_SPIN_NS);
		do {
			s = atomic_load_explicit(&sl->seq, memory_order_acquire); /* R1 */
			if (!(s & 1)) {
				kli_wait_end(&w, sl, KLI_KIND_SEQLOCK, KLI_HF_READ, site);
				return s;
			}
		} while (kli_spin_backoff(&sp));
		if (!kli_spin_expired(&awake))
			kli_yield(); /* the writer may be preempted on our CPU */
		else
			seq_read_sleep(sl, s, &w); /* a write that runs long */
	}
}

uint32_t (kl_seqlock_read_begin)(const struct kl_seqlock *sl)
{
	uint32_t s = atomic_load_explicit(&sl->seq, memory_order_acquire); /* R1 */

	if (kl_likely(!(s & 1)))
		return s;
	return seq_read_wait(sl, KLI_SITE());
}

bool (kl_seqlock_read_retry)(const struct kl_seqlock *sl, uint32_t seq)
{
	atomic_thread_fence(memory_order_acquire); /* R2: pairs with W1 */
	return atomic_load_explicit(&sl->seq, memory_order_relaxed) != seq;
}

uint32_t kl_seqlock_sequence(const struct kl_seqlock *sl)
{
	return atomic_load_explicit(&sl->seq, memory_order_acquire);
}
