/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/lockdebug.h - owner tracking for locks whose state word cannot name the owner
 * (the ticket and MCS spinlocks), compiled only into debug builds (-Ddebug_locks=true,
 * KLOCK_DEBUG_LOCKS). Such a lock gets a `holder` word: 0 when free, the holder's owner
 * id while held (locks/substrate/thread.h: never reused, so a lock left held by a thread that
 * exited is nobody's), KLI_DBG_POISON after destroy. Each check reports through kli_report()
 * (naming the lock and the caller) and returns false, and the caller then skips the
 * operation, so a warn-mode run (KLOCK_ON_ERROR=warn) neither corrupts nor deadlocks.
 * Locks whose word names the owner (mutex, rwlock) detect the same misuse on their slow
 * paths in every build instead.
 */
#ifndef KL_LOCKDEBUG_H
#define KL_LOCKDEBUG_H

#include "hooks.h"
#include "thread.h"

#if KLOCK_DEBUG_LOCKS

/* Not an owner id (ids are multiples of KLI_OWNER_STEP). */
#define KLI_DBG_POISON ((uintptr_t)0xdeadbeefu)

static inline bool kli_dbg_report(const char *what, const void *lock, enum kli_kind kind,
				  const void *site)
{
	kli_report(what, kli_kind_name(kind), lock, site, NULL);
	return false;
}

/* Before acquiring: not destroyed, not already ours. */
static inline bool kli_dbg_lock_ok(_Atomic uintptr_t *holder, const void *lock,
				   enum kli_kind kind, const void *site)
{
	uintptr_t h = atomic_load_explicit(holder, memory_order_relaxed);

	if (h == KLI_DBG_POISON)
		return kli_dbg_report("use after destroy", lock, kind, site);
	if (h == kli_owner())
		return kli_dbg_report("relock of a held non-recursive lock", lock, kind, site);
	return true;
}

/* After acquiring (we hold the lock: a plain relaxed store is enough). */
static inline void kli_dbg_locked(_Atomic uintptr_t *holder)
{
	atomic_store_explicit(holder, kli_owner(), memory_order_relaxed);
}

/* Before releasing: held, and by us. Clears the holder. */
static inline bool kli_dbg_unlock_ok(_Atomic uintptr_t *holder, const void *lock,
				     enum kli_kind kind, const void *site)
{
	uintptr_t h = atomic_load_explicit(holder, memory_order_relaxed);

	if (h == KLI_DBG_POISON)
		return kli_dbg_report("use after destroy", lock, kind, site);
	if (h == 0)
		return kli_dbg_report("unlock of a lock not held (double unlock?)", lock, kind,
				      site);
	if (h != kli_owner())
		return kli_dbg_report("unlock by a thread that does not own the lock", lock,
				      kind, site);
	atomic_store_explicit(holder, 0, memory_order_relaxed);
	return true;
}

static inline void kli_dbg_destroy(_Atomic uintptr_t *holder, const void *lock,
				   enum kli_kind kind, const void *site)
{
	uintptr_t h = atomic_load_explicit(holder, memory_order_relaxed);

	if (h == KLI_DBG_POISON)
		kli_dbg_report("use after destroy", lock, kind, site);
	else if (h != 0)
		kli_dbg_report("destroy of a held lock", lock, kind, site);
	atomic_store_explicit(holder, KLI_DBG_POISON, memory_order_relaxed);
}

#endif /* KLOCK_DEBUG_LOCKS */

#endif /* KL_LOCKDEBUG_H */
