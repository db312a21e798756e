// SPDX-License-Identifier: BSD-2-Clause
/*
 * bench/lockops/absl.cpp - abseil's absl::Mutex, the C++ peer an application would reach
 * for first: an adaptive reader/writer mutex (a word of state, a short spin, then a
 * per-thread semaphore queue). Compiled only when absl_synchronization is found (meson
 * option -Dabsl); only the adapters are C++, the drivers see the same lockops table.
 *
 * Two rows for the same lock: absl_mutex uses Lock/Unlock only (an exclusive-only adapter:
 * drivers use the write side for readers too), absl_mutex_rw adds ReaderLock/ReaderUnlock.
 * WriterLock() is Lock() (absl's header says so), so the two rows' writer paths are one.
 *
 * Deadlock detection off, as in an optimised (NDEBUG) abseil build: Debian's
 * libabsl-dev 20220623 ships with it on by default (kAbort), which records every
 * acquisition in a lock graph - about 100 ns more per uncontended Lock/Unlock pair here,
 * which would measure the debugging aid rather than the lock. The setting is process-wide
 * and made once, before the drivers run (a constructor of this file).
 *
 * The lock object is placement-constructed in the driver's buffer (sizeof(absl::Mutex) is
 * one word) and destroyed in place. No timed adapter: LockWhenWithDeadline returns with the
 * lock held whether or not the deadline passed, which is not a timedlock.
 */
#include <new>

#include <absl/synchronization/mutex.h>

extern "C" {
#include "lockops.h"
}

namespace {

__attribute__((constructor)) void absl_production_mode()
{
	absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

int mu_init(void *l)
{
	new (l) absl::Mutex();
	return 0;
}

void mu_destroy(void *l)
{
	static_cast<absl::Mutex *>(l)->~Mutex();
}

void mu_lock(void *l, void *)
{
	static_cast<absl::Mutex *>(l)->Lock();
}

void mu_unlock(void *l, void *)
{
	static_cast<absl::Mutex *>(l)->Unlock();
}

bool mu_trylock(void *l, void *)
{
	return static_cast<absl::Mutex *>(l)->TryLock();
}

void mu_rlock(void *l, void *)
{
	static_cast<absl::Mutex *>(l)->ReaderLock();
}

void mu_runlock(void *l, void *)
{
	static_cast<absl::Mutex *>(l)->ReaderUnlock();
}

bool mu_rtrylock(void *l, void *)
{
	return static_cast<absl::Mutex *>(l)->ReaderTryLock();
}

LOCKOPS_PAIR_LOOP(mu_wloop, absl::Mutex, L->Lock(), L->Unlock())
LOCKOPS_PAIR_LOOP(mu_rloop, absl::Mutex, L->ReaderLock(), L->ReaderUnlock())

const struct lockops absl_mutex_ops = {
	.name = "absl_mutex",
	.family = "absl",
	.summary = "abseil absl::Mutex, Lock/Unlock (adaptive: spins briefly, then queues)",
	.flags = 0,
	.size = sizeof(absl::Mutex),
	.init = mu_init,
	.destroy = mu_destroy,
	.write_lock = mu_lock,
	.write_unlock = mu_unlock,
	.write_trylock = mu_trylock,
	.write_pair_loop = mu_wloop,
};
LOCKOPS_REGISTER(absl_mutex_ops)

const struct lockops absl_mutex_rw_ops = {
	.name = "absl_mutex_rw",
	.family = "absl",
	.summary = "abseil absl::Mutex, ReaderLock/WriterLock (the same lock, shared readers)",
	.flags = LOCKOPS_RW,
	.size = sizeof(absl::Mutex),
	.init = mu_init,
	.destroy = mu_destroy,
	.write_lock = mu_lock,
	.write_unlock = mu_unlock,
	.write_trylock = mu_trylock,
	.read_lock = mu_rlock,
	.read_unlock = mu_runlock,
	.read_trylock = mu_rtrylock,
	.read_pair_loop = mu_rloop,
	.write_pair_loop = mu_wloop,
};
LOCKOPS_REGISTER(absl_mutex_rw_ops)

} // namespace
