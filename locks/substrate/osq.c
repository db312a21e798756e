/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/osq.c - the optimistic spin queue (contract in osq.h).
 *
 * The algorithm is Linux's osq_lock.c (Peter Zijlstra, Waiman Long) with thread records
 * for per-CPU nodes and a thread pointer for the encoded CPU number:
 *
 *   lock:   node = {next 0, locked 0}; prev = xchg(tail, me)          O1
 *           prev == 0: we are the head.  Else me.prev = prev; prev.next = me   O2
 *           poll me.locked until set (head) or the budget ends         O3
 *           (past OSQ_YIELD_NS, yielding the CPU at each poll: Linux's need_resched())
 *   cancel: A) undo prev.next = me with a CAS (if it fails, prev is handing us the head:
 *              wait for locked instead); re-read me.prev, which a predecessor that
 *              cancels concurrently rewrites in its step C
 *           B) osq_wait_next(): if we are the tail, move the tail back to prev (done);
 *              else wait for our successor to link in and detach it
 *           C) next.prev = prev; prev.next = next
 *   unlock: CAS tail me -> 0, else detach next (osq_wait_next) and set next.locked   O5
 *
 * Invariants: a thread's osq_next is written by itself (xchg to 0 when detaching) and by
 * its successor (O2, or C on behalf of a cancelling node); osq_locked is written by its
 * predecessor only. Between the xchg on the tail and O2 the queue is briefly not linked;
 * every reader of a link tolerates that by waiting (osq_wait_next).
 *
 * Ordering: all RMWs on the tail and on links are seq_cst (Linux: full barriers), link
 * stores are release and link loads acquire, so a node's initialisation is visible to
 * whoever finds it through a link. O3 (acquire) pairs with O5 (release); O6, step C's
 * release store of next.prev, with next's acquire loads of its prev. None of this
 * orders the lock's data (see osq.h).
 */
#include "osq.h"

#include <pthread.h>

/* Tails in the shared table (power of two): with k locks that have spinners at the same
 * moment, two share a tail with odds of about k^2 / (2 * OSQ_HASHED) - 3% for k = 4. */
#define OSQ_HASHED 256u
#define OSQ_HASHED_BITS 8
/* Fibonacci hashing multiplier (2^64 / golden ratio). */
#define OSQ_FIB_MULT 0x9e3779b97f4a7c15ull
/* A queued (not head) spinner that has waited this long yields the CPU at every poll:
 * two of the head's polls at its streak cap, so the head is waiting out a holder that
 * keeps relocking and the queue will not move soon (see kli_osq_lock()). */
#define OSQ_YIELD_NS (2 * KLI_STREAK_POLL_NS)

struct osq_tail {
	_Atomic uintptr_t tail;
} KL_PADDED;

static struct osq_tail osq_tails[OSQ_HASHED];

static struct kli_thread *as_rec(uintptr_t v)
{
	return (struct kli_thread *)v;
}

/*
 * Step B, and the slow half of unlock: returns our successor, detached, or NULL after
 * moving the tail from us back to @prev (NULL: the queue becomes empty). The thread that
 * is linking in behind us may be preempted between its xchg and O2: stall, then yield.
 */
static struct kli_thread *osq_wait_next(_Atomic uintptr_t *tail, struct kli_thread *self,
					struct kli_thread *prev)
{
	struct kli_spin s;

	kli_spin_start(&s, KLI_STALL_NS);
	for (;;) {
		uintptr_t cur = (uintptr_t)self;

		/* O4: pairs with O1 of a later joiner; whoever wins the tail decides. */
		if (atomic_load_explicit(tail, memory_order_relaxed) == cur &&
		    atomic_compare_exchange_strong_explicit(tail, &cur, (uintptr_t)prev,
							    memory_order_seq_cst,
							    memory_order_relaxed))
			return NULL;
		if (atomic_load_explicit(&self->osq_next, memory_order_acquire) != NULL) {
			struct kli_thread *next =
				atomic_exchange_explicit(&self->osq_next, NULL, memory_order_seq_cst);

			if (next != NULL)
				return next;
		}
		kli_spin_stall(&s);
	}
}

/* Steps A-C: leave the queue after the budget ran out. True if the head role reached us
 * while we were leaving (the caller is the head after all). */
static bool osq_cancel(_Atomic uintptr_t *tail, struct kli_thread *self, struct kli_thread *prev)
{
	struct kli_thread *next;
	struct kli_spin s;

	kli_spin_start(&s, KLI_STALL_NS);
	for (;;) { /* A: stabilise prev */
		struct kli_thread *expect = self;

		if (atomic_load_explicit(&prev->osq_next, memory_order_relaxed) == self &&
		    atomic_compare_exchange_strong_explicit(&prev->osq_next, &expect, NULL,
							    memory_order_seq_cst,
							    memory_order_relaxed))
			break;
		/* The CAS fails only against prev's unlock, which then sets our flag. */
		if (atomic_load_explicit(&self->osq_locked, memory_order_acquire)) /* O3 */
			return true;
		kli_spin_stall(&s);
		/* O6: acquire, pairs with O6 in a cancelling predecessor's step C. */
		prev = atomic_load_explicit(&self->osq_prev, memory_order_acquire);
	}
	next = osq_wait_next(tail, self, prev); /* B */
	if (next == NULL)
		return false;
	/* C: prev waits for a new prev.next (we cleared it), next waits in its own step A
	 * or for its flag: both links are ours to write. */
	/* O6: release, pairs with next's acquire loads of osq_prev (step A, ghost test). */
	atomic_store_explicit(&next->osq_prev, prev, memory_order_release);
	atomic_store_explicit(&prev->osq_next, next, memory_order_release);
	return false;
}

/*
 * In a fork() child, a lock's own tail may still name a thread that was queued at the
 * fork and is gone (the hashed tails are emptied; a tail inside a lock cannot be found).
 * Behind such a ghost the head role never comes: a spinner whose budget ran out takes it
 * instead of leaving, and its unlock drops the ghost from the queue for good. Only at the
 * end of a budget, so a queue with no ghost pays nothing. `ghost` itself was written by
 * the child's atfork handler before the child had other threads.
 */
static bool osq_behind_ghost(struct kli_thread *self)
{
	/* O6: acquire, pairs with O6 in a cancelling predecessor's step C. */
	return atomic_load_explicit(&self->osq_prev, memory_order_acquire)->ghost;
}

/*
 * A queued spinner waits for the head role, polling only its own record, until @budget
 * runs out (then it leaves the queue). Past OSQ_YIELD_NS it yields the CPU at each poll:
 * the userspace stand-in for Linux's need_resched() test in the same loop. Where threads
 * outnumber CPUs, a queued spinner that keeps its CPU takes it from the holder or the
 * head, the only two threads that move the lock (2 vCPUs, 8 threads: kl_mutex 36 -> 39 M
 * ops/s, kl_rwlock at 10% writes 19 -> 32 M; docs/design-adaptive.md); sched_yield()
 * returns at once when nothing else wants the CPU, so a queue that fits on the CPUs
 * only polls slower - and a wait shorter than OSQ_YIELD_NS, the usual hand-over, never.
 */
static bool osq_wait_head(_Atomic uintptr_t *tail, struct kli_thread *self,
			  struct kli_thread *prev, struct kli_spin *budget)
{
	uint64_t yield_at = kl_arch_cycles() + kli_ns_to_cycles(OSQ_YIELD_NS);

	/* O3: acquire, pairs with O5 in kli_osq_unlock(). */
	while (!atomic_load_explicit(&self->osq_locked, memory_order_acquire)) {
		if (!kli_spin_poll(budget))
			return osq_behind_ghost(self) || osq_cancel(tail, self, prev);
		if (kl_arch_cycles() >= yield_at)
			kli_yield();
	}
	return true;
}

bool kli_osq_lock(_Atomic uintptr_t *tail, struct kli_thread *self, struct kli_spin *budget)
{
	struct kli_thread *prev;

	atomic_store_explicit(&self->osq_locked, 0, memory_order_relaxed);
	atomic_store_explicit(&self->osq_next, NULL, memory_order_relaxed);
	/* O1: seq_cst xchg publishes our initialised node to whoever reads the tail. */
	prev = as_rec(atomic_exchange_explicit(tail, (uintptr_t)self, memory_order_seq_cst));
	if (prev == NULL)
		return true;
	atomic_store_explicit(&self->osq_prev, prev, memory_order_relaxed);
	/* O2: release: prev sees our node initialised before it can pass us the head. */
	atomic_store_explicit(&prev->osq_next, self, memory_order_release);
	return osq_wait_head(tail, self, prev, budget);
}

void kli_osq_unlock(_Atomic uintptr_t *tail, struct kli_thread *self)
{
	uintptr_t cur = (uintptr_t)self;
	struct kli_thread *next;

	if (atomic_compare_exchange_strong_explicit(tail, &cur, 0, memory_order_seq_cst,
						    memory_order_relaxed))
		return; /* nobody queued behind us */
	next = atomic_exchange_explicit(&self->osq_next, NULL, memory_order_seq_cst);
	if (next == NULL)
		next = osq_wait_next(tail, self, NULL);
	if (next != NULL) /* O5: release, pairs with O3 */
		atomic_store_explicit(&next->osq_locked, 1, memory_order_release);
}

_Atomic uintptr_t *kli_osq_hashed(const void *lock)
{
	return &osq_tails[((uint64_t)(uintptr_t)lock * OSQ_FIB_MULT) >> (64 - OSQ_HASHED_BITS)]
			.tail;
}

/* fork() child: the spinners queued in the table were other threads, all gone. */
static void osq_atfork_child(void)
{
	for (unsigned i = 0; i < OSQ_HASHED; i++)
		atomic_store_explicit(&osq_tails[i].tail, 0, memory_order_relaxed);
}

__attribute__((constructor)) static void osq_fork_init(void)
{
	pthread_atfork(NULL, NULL, osq_atfork_child);
}
