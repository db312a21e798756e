// SPDX-License-Identifier: BSD-2-Clause
/*
 * bench/lockops/std.cpp - the C++ standard library's std::mutex and std::shared_mutex
 * (libstdc++: thin wrappers over pthread_mutex_t and pthread_rwlock_t, so these rows show
 * what the wrapper costs over the pthread rows). Compiled wherever a C++ compiler is found.
 * Objects are placement-constructed in the driver's buffer and destroyed in place.
 */
#include <mutex>
#include <new>
#include <shared_mutex>

extern "C" {
#include "lockops.h"
}

namespace {

template <class M> int init(void *l)
{
	new (l) M();
	return 0;
}

template <class M> void destroy(void *l)
{
	static_cast<M *>(l)->~M();
}

template <class M> void lock(void *l, void *)
{
	static_cast<M *>(l)->lock();
}

template <class M> void unlock(void *l, void *)
{
	static_cast<M *>(l)->unlock();
}

template <class M> bool trylock(void *l, void *)
{
	return static_cast<M *>(l)->try_lock();
}

void sh_rlock(void *l, void *)
{
	static_cast<std::shared_mutex *>(l)->lock_shared();
}

void sh_runlock(void *l, void *)
{
	static_cast<std::shared_mutex *>(l)->unlock_shared();
}

bool sh_rtrylock(void *l, void *)
{
	return static_cast<std::shared_mutex *>(l)->try_lock_shared();
}

LOCKOPS_PAIR_LOOP(mx_wloop, std::mutex, L->lock(), L->unlock())
LOCKOPS_PAIR_LOOP(sh_wloop, std::shared_mutex, L->lock(), L->unlock())
LOCKOPS_PAIR_LOOP(sh_rloop, std::shared_mutex, L->lock_shared(), L->unlock_shared())

const struct lockops std_mutex_ops = {
	.name = "std_mutex",
	.family = "std",
	.summary = "C++ std::mutex (libstdc++: a pthread_mutex_t, default type)",
	.flags = 0,
	.size = sizeof(std::mutex),
	.init = init<std::mutex>,
	.destroy = destroy<std::mutex>,
	.write_lock = lock<std::mutex>,
	.write_unlock = unlock<std::mutex>,
	.write_trylock = trylock<std::mutex>,
	.write_pair_loop = mx_wloop,
};
LOCKOPS_REGISTER(std_mutex_ops)

const struct lockops std_shared_mutex_ops = {
	.name = "std_shared_mutex",
	.family = "std",
	.summary = "C++17 std::shared_mutex (libstdc++: a pthread_rwlock_t)",
	.flags = LOCKOPS_RW,
	.size = sizeof(std::shared_mutex),
	.init = init<std::shared_mutex>,
	.destroy = destroy<std::shared_mutex>,
	.write_lock = lock<std::shared_mutex>,
	.write_unlock = unlock<std::shared_mutex>,
	.write_trylock = trylock<std::shared_mutex>,
	.read_lock = sh_rlock,
	.read_unlock = sh_runlock,
	.read_trylock = sh_rtrylock,
	.read_pair_loop = sh_rloop,
	.write_pair_loop = sh_wloop,
};
LOCKOPS_REGISTER(std_shared_mutex_ops)

} // namespace
