// SPDX-License-Identifier: BSD-2-Clause
/*
 * bench/lockops/tbb.cpp - oneTBB's spinning mutexes (the oneapi/tbb headers). Compiled only
 * when tbb is found (meson option -Dtbb). All four only spin (with exponential pause
 * backoff, then sched_yield), never sleep: LOCKOPS_SPIN.
 *
 * - tbb_spin_mutex: a test-and-set flag; tbb_spin_rw_mutex: writer bit, writer-pending bit
 *   and a reader count in one word (header-inline, like ck's);
 * - tbb_queuing_mutex: an MCS queue, FIFO; tbb_queuing_rw_mutex: the reader/writer MCS
 *   queue (Krieger-Stumm-Unrau), FIFO, whose acquire/release are library calls.
 * The queuing locks take a caller-owned queue node, tbb's scoped_lock: it lives in the
 * driver's per-acquisition thread state (`ts`), constructed in place at each lock and
 * destroyed after its release, so no adapter state outlives the critical section.
 */
#include <new>

#include <oneapi/tbb/queuing_mutex.h>
#include <oneapi/tbb/queuing_rw_mutex.h>
#include <oneapi/tbb/spin_mutex.h>
#include <oneapi/tbb/spin_rw_mutex.h>

extern "C" {
#include "lockops.h"
}

namespace {

using spin_mx = oneapi::tbb::spin_mutex;
using spin_rw = oneapi::tbb::spin_rw_mutex;
using queue_mx = oneapi::tbb::queuing_mutex;
using queue_rw = oneapi::tbb::queuing_rw_mutex;

template <class M> int init(void *l)
{
	new (l) M();
	return 0;
}

template <class M> void destroy(void *l)
{
	static_cast<M *>(l)->~M();
}

/* ---- the header-inline spinners: lock()/unlock() on the object ------------------------ */

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

void srw_rlock(void *l, void *)
{
	static_cast<spin_rw *>(l)->lock_shared();
}

void srw_runlock(void *l, void *)
{
	static_cast<spin_rw *>(l)->unlock_shared();
}

bool srw_rtrylock(void *l, void *)
{
	return static_cast<spin_rw *>(l)->try_lock_shared();
}

LOCKOPS_PAIR_LOOP(smx_wloop, spin_mx, L->lock(), L->unlock())
LOCKOPS_PAIR_LOOP(srw_wloop, spin_rw, L->lock(), L->unlock())
LOCKOPS_PAIR_LOOP(srw_rloop, spin_rw, L->lock_shared(), L->unlock_shared())

const struct lockops tbb_spin_mutex_ops = {
	.name = "tbb_spin_mutex",
	.family = "tbb",
	.summary = "oneTBB spin_mutex: test-and-set flag, pause backoff then yield (unfair)",
	.flags = LOCKOPS_SPIN,
	.size = sizeof(spin_mx),
	.init = init<spin_mx>,
	.destroy = destroy<spin_mx>,
	.write_lock = lock<spin_mx>,
	.write_unlock = unlock<spin_mx>,
	.write_trylock = trylock<spin_mx>,
	.write_pair_loop = smx_wloop,
};
LOCKOPS_REGISTER(tbb_spin_mutex_ops)

const struct lockops tbb_spin_rw_mutex_ops = {
	.name = "tbb_spin_rw_mutex",
	.family = "tbb",
	.summary = "oneTBB spin_rw_mutex: writer/pending bits + reader count in one word",
	.flags = LOCKOPS_RW | LOCKOPS_SPIN,
	.size = sizeof(spin_rw),
	.init = init<spin_rw>,
	.destroy = destroy<spin_rw>,
	.write_lock = lock<spin_rw>,
	.write_unlock = unlock<spin_rw>,
	.write_trylock = trylock<spin_rw>,
	.read_lock = srw_rlock,
	.read_unlock = srw_runlock,
	.read_trylock = srw_rtrylock,
	.read_pair_loop = srw_rloop,
	.write_pair_loop = srw_wloop,
};
LOCKOPS_REGISTER(tbb_spin_rw_mutex_ops)

/* ---- the queuing locks: a scoped_lock (the queue node) in the thread state ------------ */

inline void qmx_acquire(queue_mx *m, void *ts)
{
	(new (ts) queue_mx::scoped_lock())->acquire(*m);
}

inline void qmx_release(void *ts)
{
	auto *s = static_cast<queue_mx::scoped_lock *>(ts);

	s->release();
	s->~scoped_lock();
}

void qmx_lock(void *l, void *ts)
{
	qmx_acquire(static_cast<queue_mx *>(l), ts);
}

void qmx_unlock(void *, void *ts)
{
	qmx_release(ts);
}

bool qmx_trylock(void *l, void *ts)
{
	auto *s = new (ts) queue_mx::scoped_lock();

	if (s->try_acquire(*static_cast<queue_mx *>(l)))
		return true;
	s->~scoped_lock();
	return false;
}

inline void qrw_acquire(queue_rw *m, void *ts, bool write)
{
	(new (ts) queue_rw::scoped_lock())->acquire(*m, write);
}

inline void qrw_release(void *ts)
{
	auto *s = static_cast<queue_rw::scoped_lock *>(ts);

	s->release();
	s->~scoped_lock();
}

bool qrw_try(void *l, void *ts, bool write)
{
	auto *s = new (ts) queue_rw::scoped_lock();

	if (s->try_acquire(*static_cast<queue_rw *>(l), write))
		return true;
	s->~scoped_lock();
	return false;
}

void qrw_wlock(void *l, void *ts)
{
	qrw_acquire(static_cast<queue_rw *>(l), ts, true);
}

void qrw_rlock(void *l, void *ts)
{
	qrw_acquire(static_cast<queue_rw *>(l), ts, false);
}

void qrw_unlock(void *, void *ts)
{
	qrw_release(ts);
}

bool qrw_wtrylock(void *l, void *ts)
{
	return qrw_try(l, ts, true);
}

bool qrw_rtrylock(void *l, void *ts)
{
	return qrw_try(l, ts, false);
}

LOCKOPS_PAIR_LOOP(qmx_wloop, queue_mx, qmx_acquire(L, T), qmx_release(T))
LOCKOPS_PAIR_LOOP(qrw_wloop, queue_rw, qrw_acquire(L, T, true), qrw_release(T))
LOCKOPS_PAIR_LOOP(qrw_rloop, queue_rw, qrw_acquire(L, T, false), qrw_release(T))

const struct lockops tbb_queuing_mutex_ops = {
	.name = "tbb_queuing_mutex",
	.family = "tbb",
	.summary = "oneTBB queuing_mutex: MCS queue (FIFO, each waiter spins on its own node)",
	.flags = LOCKOPS_SPIN,
	.size = sizeof(queue_mx),
	.tsize = sizeof(queue_mx::scoped_lock),
	.init = init<queue_mx>,
	.destroy = destroy<queue_mx>,
	.write_lock = qmx_lock,
	.write_unlock = qmx_unlock,
	.write_trylock = qmx_trylock,
	.write_pair_loop = qmx_wloop,
};
LOCKOPS_REGISTER(tbb_queuing_mutex_ops)

const struct lockops tbb_queuing_rw_mutex_ops = {
	.name = "tbb_queuing_rw_mutex",
	.family = "tbb",
	.summary = "oneTBB queuing_rw_mutex: reader/writer MCS queue (FIFO, library calls)",
	.flags = LOCKOPS_RW | LOCKOPS_SPIN,
	.size = sizeof(queue_rw),
	.tsize = sizeof(queue_rw::scoped_lock),
	.init = init<queue_rw>,
	.destroy = destroy<queue_rw>,
	.write_lock = qrw_wlock,
	.write_unlock = qrw_unlock,
	.write_trylock = qrw_wtrylock,
	.read_lock = qrw_rlock,
	.read_unlock = qrw_unlock,
	.read_trylock = qrw_rtrylock,
	.read_pair_loop = qrw_rloop,
	.write_pair_loop = qrw_wloop,
};
LOCKOPS_REGISTER(tbb_queuing_rw_mutex_ops)

} // namespace
