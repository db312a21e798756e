/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/ticket.c - kl_ticket, the FIFO ticket spinlock.
 *
 * What it is. The classic ticket lock (Linux x86 spinlocks 2008-2014, before qspinlock;
 * ck_spinlock_ticket): two 32-bit counters. A locker takes `next` with one fetch-add and
 * waits until `owner` equals its ticket; unlock advances `owner`. Waiters all poll the
 * same word, so a release costs one cache-line transfer per waiter: fine for a few CPUs
 * and short sections, which is its job (a leaf lock, the hashed-lock stripe kind); MCS or
 * kl_mutex scale further.
 *
 * State:
 *   next   ticket the next locker gets (wraps mod 2^32)
 *   owner  ticket being served; owner == next: unlocked; next - owner: holder + waiters
 *   holder debug builds only: the holder's record (locks/lockdebug.h)
 * Invariant: owner <= next (mod 2^32, with fewer than 2^32 threads); only the holder
 * writes owner.
 *
 * Oversubscription. FIFO is a trap when threads outnumber CPUs: if the next ticket's
 * thread is preempted, everyone waits for it to be scheduled. So waiters spin on a time
 * budget and then yield the CPU (kli_yield), which gives the preempted thread a chance to
 * run; waiters further back in line (they cannot be served before the threads ahead of
 * them) use a shorter budget before yielding.
 *
 * Memory ordering:
 *   T1  fetch-add on next (relaxed): only picks the ticket; RMW atomicity makes it unique.
 *   T2  acquire load of owner that sees our ticket   pairs with T3
 *   T3  release store of owner + 1 in unlock         pairs with T2 of the next ticket
 *   Trylock: T2 (acquire load of owner), then a CAS next: owner -> owner + 1, which
 *   succeeds only if no ticket was taken since, so the owner value read is current.
 *
 * Pros: 8 bytes, FIFO, trylock, static initializer, cheap uncontended (one RMW, one store).
 * Cons: every waiter polls one line (O(waiters) traffic per release); FIFO convoys under
 * preemption (mitigated, not cured, by yielding); never sleeps - not for long sections.
 */
#include <klock/ticket.h>
#include "hooks.h"
#include "lockdebug.h"
#include "spin.h"

#define TICKET_KIND KLI_KIND_TICKET
/* Next in line: spin this long, then yield (a section + hand-over is far shorter). */
#define TICKET_SPIN_NS 20000u
/* Further back: at least one other section must run first; yield sooner. */
#define TICKET_QUEUE_SPIN_NS 0u
/* What kl_ticket_destroy() leaves in both counters. */
#define TICKET_POISON 0xdead0000u

static uint64_t ticket_budget(uint32_t my, uint32_t owner)
{
	return my - owner <= 1 ? TICKET_SPIN_NS : TICKET_QUEUE_SPIN_NS;
}

static KL_NOINLINE void ticket_wait(struct kl_ticket *t, uint32_t my, uint32_t owner,
				    const void *site)
{
	struct kli_wait w;
	struct kli_spin s;

	kli_wait_begin(&w);
	kli_wait_spin(&w);
	kli_spin_start(&s, ticket_budget(my, owner));
	for (;;) {
		owner = atomic_load_explicit(&t->owner, memory_order_acquire); /* T2 */
		if (owner == my)
			break;
		if (!kli_spin_poll(&s)) {
			kli_yield();
			kli_spin_start(&s, ticket_budget(my, owner));
		}
	}
	kli_wait_end(&w, t, TICKET_KIND, KLI_HF_SPIN, site);
}

void kl_ticket_init(struct kl_ticket *t)
{
	atomic_store_explicit(&t->next, 0, memory_order_relaxed);
	atomic_store_explicit(&t->owner, 0, memory_order_relaxed);
#if KLOCK_DEBUG_LOCKS
	atomic_store_explicit(&t->holder, 0, memory_order_relaxed);
#endif
	kli_hook_created(t, TICKET_KIND, KLI_HF_SPIN);
}

void kl_ticket_destroy(struct kl_ticket *t)
{
#if KLOCK_DEBUG_LOCKS
	kli_dbg_destroy(&t->holder, t, TICKET_KIND, __builtin_return_address(0));
#endif
	atomic_store_explicit(&t->next, TICKET_POISON, memory_order_relaxed);
	atomic_store_explicit(&t->owner, TICKET_POISON, memory_order_relaxed);
	kli_hook_destroyed(t, TICKET_KIND);
}

void kl_ticket_lock(struct kl_ticket *t)
{
	const void *site = __builtin_return_address(0);
	uint32_t my, owner;

	kli_hook_acquire(t, TICKET_KIND, KLI_HF_SPIN, site);
#if KLOCK_DEBUG_LOCKS
	if (!kli_dbg_lock_ok(&t->holder, t, TICKET_KIND, site))
		return;
#endif
	my = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed); /* T1 */
	owner = atomic_load_explicit(&t->owner, memory_order_acquire);   /* T2: pairs with T3 */
	if (kl_unlikely(owner != my))
		ticket_wait(t, my, owner, site);
#if KLOCK_DEBUG_LOCKS
	kli_dbg_locked(&t->holder);
#endif
	kli_hook_acquired(t, TICKET_KIND, KLI_HF_SPIN, site);
}

bool kl_ticket_trylock(struct kl_ticket *t)
{
	const void *site = __builtin_return_address(0);
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

void kl_ticket_unlock(struct kl_ticket *t)
{
	const void *site = __builtin_return_address(0);
	uint32_t owner;

	kli_hook_release(t, TICKET_KIND, KLI_HF_SPIN, site);
#if KLOCK_DEBUG_LOCKS
	if (!kli_dbg_unlock_ok(&t->holder, t, TICKET_KIND, site))
		return;
#endif
	owner = atomic_load_explicit(&t->owner, memory_order_relaxed); /* only we write it */
	atomic_store_explicit(&t->owner, owner + 1, memory_order_release); /* T3 */
	kli_hook_released(t, TICKET_KIND, KLI_HF_SPIN);
}

bool kl_ticket_is_locked(const struct kl_ticket *t)
{
	return atomic_load_explicit(&t->owner, memory_order_relaxed) !=
	       atomic_load_explicit(&t->next, memory_order_relaxed);
}
