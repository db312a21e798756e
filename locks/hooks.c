/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/hooks.c - the consumers behind the seam in hooks.h.
 *
 * Instruments plug in here, never into a primitive:
 *   ThreadSanitizer  __tsan_mutex_* (built with -Db_sanitize=thread): TSan then knows which
 *                    locks a thread holds, so it checks accesses for races through klock
 *                    locks, reports lock-order inversions and misuse - including the
 *                    reader-biased read sides, whose real ordering (compiler barrier +
 *                    membarrier) TSan could not follow on its own.
 *   valgrind         helgrind/DRD ANNOTATE_RWLOCK_* (-Dvalgrind=enabled).
 *   witness          lock-order checker (-Dwitness=true), locks/witness.c.
 *   lockstat         slow-path episodes (kli_lockstat_record, called from kli_wait_end),
 *                    and with -Dlockstat_hold=true every acquisition and hold time
 *                    (kli_lockstat_acquired/release below), locks/lockstat.c.
 */
#include "hooks.h"
#include "lockstat_impl.h"
#include "witness_impl.h"
#include "thread.h"

#if KLOCK_TSAN
#include <sanitizer/tsan_interface.h>
#endif
#if KLOCK_VALGRIND_ANNOTATE
#include <valgrind/helgrind.h>
#endif

static const char *const kind_names[KLI_KIND_COUNT] = {
	[KLI_KIND_MUTEX] = "mutex",
	[KLI_KIND_RWLOCK] = "rwlock",
	[KLI_KIND_RMLOCK] = "rmlock",
	[KLI_KIND_PCPU_RWSEM] = "pcpu_rwsem",
	[KLI_KIND_SEQLOCK] = "seqlock",
	[KLI_KIND_TICKET] = "ticket",
	[KLI_KIND_MCS] = "mcs",
	[KLI_KIND_HASHLOCK] = "hashlock",
	[KLI_KIND_COND] = "cond",
};

const char *kli_kind_name(enum kli_kind kind)
{
	return (unsigned)kind < KLI_KIND_COUNT ? kind_names[kind] : "lock";
}

#if KLOCK_TSAN
static unsigned tsan_op_flags(unsigned flags)
{
	unsigned f = 0;

	if (flags & KLI_HF_READ)
		f |= __tsan_mutex_read_lock;
	if (flags & KLI_HF_TRY)
		f |= __tsan_mutex_try_lock;
	if (flags & KLI_HF_FAILED)
		f |= __tsan_mutex_try_lock_failed;
	return f;
}
#endif

#if KLI_HOOKS_FAST
void kli_instr_acquire(const void *lock, enum kli_kind kind, unsigned flags, const void *site)
{
	(void)kind, (void)site;
#if KLOCK_TSAN
	/* Between pre_lock and post_lock TSan ignores synchronisation. A thread's first lock
	 * call attaches its thread record - possibly one recycled from an exited thread,
	 * handed over under the registry's wordlock - so attach it here, outside the
	 * window, or TSan loses that hand-over and reports the record's reuse as a race. */
	(void)kli_self();
	__tsan_mutex_pre_lock((void *)lock, tsan_op_flags(flags & ~KLI_HF_FAILED));
#endif
#if KLOCK_WITNESS
	kli_witness_acquire(lock, kind, flags, site);
#endif
	(void)lock, (void)flags;
}

void kli_instr_acquired(const void *lock, enum kli_kind kind, unsigned flags, const void *site)
{
	(void)kind, (void)site;
#if KLOCK_TSAN
	__tsan_mutex_post_lock((void *)lock, tsan_op_flags(flags), 0);
#endif
#if KLOCK_VALGRIND_ANNOTATE
	if (!(flags & KLI_HF_FAILED))
		ANNOTATE_RWLOCK_ACQUIRED(lock, !(flags & KLI_HF_READ));
#endif
#if KLOCK_WITNESS
	if (!(flags & KLI_HF_FAILED))
		kli_witness_acquired(lock, kind, flags, site);
#endif
#if KLOCK_LOCKSTAT_HOLD
	kli_lockstat_acquired(lock, kind, flags, site);
#endif
	(void)lock, (void)flags;
}

void kli_instr_release(const void *lock, enum kli_kind kind, unsigned flags, const void *site)
{
	(void)kind, (void)site;
#if KLOCK_WITNESS
	kli_witness_release(lock, kind, flags, site);
#endif
#if KLOCK_VALGRIND_ANNOTATE
	ANNOTATE_RWLOCK_RELEASED(lock, !(flags & KLI_HF_READ));
#endif
#if KLOCK_TSAN
	__tsan_mutex_pre_unlock((void *)lock, (flags & KLI_HF_READ) ? __tsan_mutex_read_lock : 0);
#endif
#if KLOCK_LOCKSTAT_HOLD
	kli_lockstat_release(lock, kind, flags);
#endif
	(void)lock, (void)flags;
}

void kli_instr_released(const void *lock, enum kli_kind kind, unsigned flags)
{
	(void)kind;
#if KLOCK_TSAN
	__tsan_mutex_post_unlock((void *)lock, (flags & KLI_HF_READ) ? __tsan_mutex_read_lock : 0);
#endif
	(void)lock, (void)flags;
}
#endif /* KLI_HOOKS_FAST */

#if KLOCK_WITNESS
void kli_instr_nest_ordered(void)
{
	kli_witness_nest_ordered();
}
#endif

void kli_instr_created(const void *lock, enum kli_kind kind, unsigned flags)
{
#if KLOCK_TSAN
	__tsan_mutex_create((void *)lock, ((flags & KLI_HF_STATIC) ? __tsan_mutex_linker_init : 0) |
				  (kind == KLI_KIND_MUTEX ? 0 : __tsan_mutex_read_reentrant));
#endif
#if KLOCK_VALGRIND_ANNOTATE
	ANNOTATE_RWLOCK_CREATE(lock);
#endif
#if KLOCK_WITNESS
	kli_witness_created(lock, kind, flags);
#endif
#if KLOCK_LOCKSTAT
	if (!(flags & KLI_HF_STATIC))
		kli_lockstat_created(lock);   /* its init call site, for reports */
#endif
	(void)lock, (void)kind, (void)flags;
}

void kli_instr_destroyed(const void *lock, enum kli_kind kind)
{
	(void)kind;
#if KLOCK_WITNESS
	kli_witness_destroyed(lock, kind); /* before the name is forgotten: reports use it */
#endif
#if KLOCK_TSAN
	__tsan_mutex_destroy((void *)lock, 0);
#endif
#if KLOCK_VALGRIND_ANNOTATE
	ANNOTATE_RWLOCK_DESTROY(lock);
#endif
	kli_lock_forget(lock);
}
