/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * preload/spin.c - pthread_spin_*: a ticket spinlock in the 4 bytes of pthread_spinlock_t.
 *
 * glibc's spinlock is an int that is 0 (free) or 1 (held), test-and-set: unfair, and every
 * waiter hammers the holder's cache line. kl_ticket does not fit (12 bytes), so this is
 * the same FIFO idea packed into one 32-bit word:
 *   bits 0-14   next: the ticket the next locker takes (mod 2^15)
 *   bit 15      MARK: set - a klock ticket lock
 *   bit 16      GUARD: always 0
 *   bits 17-31  owner: the ticket being served (mod 2^15)
 * Free when owner == next. Lock: CAS next+1, keeping MARK (S1, acquire); the ticket is
 * the old next; wait until owner reaches it (S1', acquire loads). Unlock: add 1 to owner
 * (S2, release fetch-add; the carry out of bit 31 is discarded, so the increment never
 * disturbs the other fields). S2 pairs with S1/S1' of the next ticket. At most 32767
 * threads may wait at once.
 *
 * glibc's words are 0/1 (generic: 0 free), or on x86_64 1 free and 0, -1, -2, ... held
 * (lock decl): never MARK set with GUARD clear, which is how a klock word is told apart.
 *
 * Waiting: the next in line polls with the relax hint and gives its CPU away (sched_yield)
 * every KLI_STALL_NS; waiters further back yield at every poll, so with more threads than
 * CPUs they leave the CPU to the holder and to the next in line instead of burning it.
 * Wait episodes feed lockstat (kind "ticket", spin only).
 *
 * Which words are ours: pthread_spin_init(PTHREAD_PROCESS_PRIVATE) stores MARK. A word
 * initialised PROCESS_SHARED, and one nobody initialised (zero), keep glibc's protocol
 * and go to glibc's functions, so a spinlock in shared memory works with processes that
 * do not run under this library. Unlocking a free klock spinlock changes nothing and
 * returns 0, as glibc's (which stores 0 and says nothing); it is reported once per lock
 * (KLOCK_ON_ERROR=warn: every time, =abort: aborts; preload/misuse.c). A foreign unlock
 * releases the lock, as glibc's: the word records no owner to tell it apart.
 */
#include "klp.h"
#include "spin.h"

#define SPIN_NEXT_MASK 0x7fffu
#define SPIN_MARK 0x8000u
#define SPIN_GUARD 0x10000u
#define SPIN_OWNER_SHIFT 17
#define SPIN_OWNER_ONE (1u << SPIN_OWNER_SHIFT)

/* A klock spinlock's word (see the top). */
static inline bool spin_ours(uint32_t v)
{
	return (v & (SPIN_MARK | SPIN_GUARD)) == SPIN_MARK;
}

static inline _Atomic uint32_t *W(pthread_spinlock_t *l)
{
	return (_Atomic uint32_t *)(void *)l;
}

static inline uint32_t spin_owner(uint32_t v)
{
	return (v >> SPIN_OWNER_SHIFT) & SPIN_NEXT_MASK;
}

static inline uint32_t spin_next(uint32_t v)
{
	return v & SPIN_NEXT_MASK;
}

/* Waits until ticket @my is served. */
static KL_NOINLINE void spin_wait(pthread_spinlock_t *l, uint32_t my)
{
	_Atomic uint32_t *w = W(l);
	struct kli_wait wt;
	struct kli_spin s;
	uint32_t v;

	kli_wait_begin(&wt, (const void *)w, KLI_KIND_TICKET, KLI_HF_SPIN, KLI_SITE());
	kli_wait_spin(&wt);
	kli_spin_start(&s, KLI_STALL_NS);
	for (;;) {
		v = atomic_load_explicit(w, memory_order_acquire); /* S1': pairs with S2 */
		if (spin_owner(v) == my)
			break;
		if (((my - spin_owner(v)) & SPIN_NEXT_MASK) == 1)
			kli_spin_stall(&s);
		else
			kli_yield();
	}
	kli_wait_end(&wt, (const void *)w, KLI_KIND_TICKET, KLI_HF_SPIN, KLI_SITE());
}

KLP_EXPORT int pthread_spin_lock(pthread_spinlock_t *l)
{
	_Atomic uint32_t *w = W(l);
	uint32_t v = atomic_load_explicit(w, memory_order_relaxed);

	KLP_ENTER();
	do {
		if (kl_unlikely(!spin_ours(v)))
			return KLP_REAL(pthread_spin_lock)(l);
		/* S1: acquire, pairs with S2 of the last unlock when the ticket is served. */
	} while (!atomic_compare_exchange_weak_explicit(
		w, &v, (v & ~SPIN_NEXT_MASK) | ((v + 1) & SPIN_NEXT_MASK),
		memory_order_acquire, memory_order_relaxed));
	if (kl_unlikely(spin_owner(v) != spin_next(v)))
		spin_wait(l, spin_next(v));
	return 0;
}

KLP_EXPORT int pthread_spin_trylock(pthread_spinlock_t *l)
{
	_Atomic uint32_t *w = W(l);
	uint32_t v = atomic_load_explicit(w, memory_order_relaxed);

	KLP_ENTER();
	if (kl_unlikely(!spin_ours(v)))
		return KLP_REAL(pthread_spin_trylock)(l);
	if (spin_owner(v) != spin_next(v))
		return EBUSY;
	/* S1 */
	return atomic_compare_exchange_strong_explicit(
		       w, &v, (v & ~SPIN_NEXT_MASK) | ((v + 1) & SPIN_NEXT_MASK),
		       memory_order_acquire, memory_order_relaxed) ? 0 : EBUSY;
}

KLP_EXPORT int pthread_spin_unlock(pthread_spinlock_t *l)
{
	_Atomic uint32_t *w = W(l);
	uint32_t v = atomic_load_explicit(w, memory_order_relaxed);

	KLP_ENTER();
	if (kl_unlikely(!spin_ours(v)))
		return KLP_REAL(pthread_spin_unlock)(l);
	if (kl_unlikely(spin_owner(v) == spin_next(v))) { /* glibc: 0, stays free (misuse.c) */
		klp_misuse_unlock("spinlock", (const void *)w, false, KLI_SITE());
		return 0;
	}
	atomic_fetch_add_explicit(w, SPIN_OWNER_ONE, memory_order_release); /* S2 */
	return 0;
}

KLP_EXPORT int pthread_spin_init(pthread_spinlock_t *l, int pshared)
{
	KLP_ENTER();
	if (pshared != PTHREAD_PROCESS_PRIVATE)
		return KLP_REAL(pthread_spin_init)(l, pshared);
	atomic_store_explicit(W(l), SPIN_MARK, memory_order_relaxed);
	return 0;
}

KLP_EXPORT int pthread_spin_destroy(pthread_spinlock_t *l)
{
	KLP_ENTER();
	if (!spin_ours(atomic_load_explicit(W(l), memory_order_relaxed)))
		return KLP_REAL(pthread_spin_destroy)(l);
	return 0;
}
