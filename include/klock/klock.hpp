/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/klock.hpp - header-only C++17 wrappers, so that klock locks work with the
 * standard lock types (std::lock_guard, std::unique_lock, std::scoped_lock,
 * std::shared_lock) and with std::condition_variable_any.
 *
 *   kl::mutex       Lockable + TimedLockable               (struct kl_mutex)
 *   kl::rwlock      Lockable + SharedTimedLockable         (struct kl_rwlock)
 *   kl::rmlock      Lockable + SharedLockable              (struct kl_rmlock)
 *   kl::pcpu_rwsem  Lockable + SharedLockable              (struct kl_pcpu_rwsem)
 *   kl::cond        condition variable for std::unique_lock<kl::mutex> (struct kl_cond)
 *   kl::hashlock    hashed lock table; kl::hashlock::guard locks one key, guard2 two
 *
 *     kl::mutex m;  kl::cond c;  bool ready = false;
 *     { std::lock_guard<kl::mutex> g(m); ready = true; }  c.notify_one();
 *     std::unique_lock<kl::mutex> lk(m);  c.wait(lk, [&] { return ready; });
 *
 * Rules, the same as the C API's (the C headers say more): no lock is recursive, a lock is
 * unlocked by the thread that locked it, none may be used from a signal handler, none is
 * process-shared. Lock types are neither copyable nor movable (the C objects must not
 * move while anyone may wait on them). Nothing here throws: lock functions are noexcept,
 * misuse is reported by the library (KLOCK_ON_ERROR, <klock/names.h>), and the few
 * failures a constructor cannot return (bad flags, out of memory) end the process with a
 * message on stderr, as an uncaught exception would under -fno-exceptions.
 *
 * Deadlines: the C API takes absolute CLOCK_MONOTONIC deadlines. try_lock_for(d) waits d
 * from now; try_lock_until(t) converts t of any clock to "now on CLOCK_MONOTONIC plus
 * (t - Clock::now())", so a jump of a non-steady clock (system_clock) during the wait is
 * not followed. Durations beyond about 30 years are clamped to 30 years.
 *
 * kl::rmlock and its trackers: the C read lock takes a struct kl_rm_tracker that must
 * live until the matching read unlock, but std::shared_lock calls lock_shared() and
 * unlock_shared() with no argument. lock_shared() therefore keeps the tracker in a small
 * per-thread stack (KL_CPP_RM_HOLDS entries, shared by all kl::rmlock objects of the
 * thread; a plain thread_local array, no allocation, no TLS destructor), and
 * unlock_shared() takes the most recent entry of the same lock. Limits: a thread may hold
 * at most KL_CPP_RM_HOLDS read locks through lock_shared() at once (one more ends the
 * process with a message: define KL_CPP_RM_HOLDS before including to change it); the
 * unlock must happen on the locking thread (as in C). kl::rmlock::read_guard and the
 * read_lock(kl_rm_tracker &) members keep the tracker on the caller's stack instead and
 * have no such limit.
 *
 * C++ builds call the out-of-line lock functions (the C headers' inline fast paths are
 * C-only), so a kl::rmlock read costs a call more than in C.
 */
#ifndef KLOCK_KLOCK_HPP
#define KLOCK_KLOCK_HPP

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "klock/klock.hpp needs C++17"
#endif

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cerrno>
#include <mutex>

#include <klock/mutex.h>
#include <klock/cond.h>
#include <klock/rwlock.h>
#include <klock/rmlock.h>
#include <klock/pcpu_rwsem.h>
#include <klock/hashlock.h>

/* Read holds one thread may keep through kl::rmlock::lock_shared() at once. */
#ifndef KL_CPP_RM_HOLDS
#define KL_CPP_RM_HOLDS 32
#endif

namespace kl {

namespace detail {

/* The clamp for deadlines: about 30 years, in seconds. */
constexpr double max_wait_secs = 30.0 * 365 * 24 * 3600;
constexpr long nsec_per_sec = 1000000000L;

/* Absolute CLOCK_MONOTONIC deadline @d from now; never earlier than now + @d. */
template <class Rep, class Period>
inline timespec deadline_in(const std::chrono::duration<Rep, Period> &d) noexcept
{
	timespec ts;
	long long ns = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (d > std::chrono::duration<Rep, Period>::zero()) {
		if (std::chrono::duration<double>(d).count() > max_wait_secs)
			ns = static_cast<long long>(max_wait_secs) * nsec_per_sec;
		else
			ns = std::chrono::ceil<std::chrono::nanoseconds>(d).count();
	}
	ts.tv_sec += static_cast<time_t>(ns / nsec_per_sec);
	ts.tv_nsec += static_cast<long>(ns % nsec_per_sec);
	if (ts.tv_nsec >= nsec_per_sec) {
		ts.tv_sec++;
		ts.tv_nsec -= nsec_per_sec;
	}
	return ts;
}

template <class Clock, class Duration>
inline timespec deadline_at(const std::chrono::time_point<Clock, Duration> &t) noexcept
{
	return deadline_in(t - Clock::now());
}

[[noreturn]] inline void fatal(const char *what) noexcept
{
	std::fputs(what, stderr);
	std::fputc('\n', stderr);
	std::abort();
}

/* The read holds a thread took with kl::rmlock::lock_shared(), most recent last. */
struct rm_hold {
	struct kl_rmlock *lock;
	struct kl_rm_tracker tr;
};
struct rm_holds {
	unsigned n;
	rm_hold hold[KL_CPP_RM_HOLDS];
};

/* Zero-initialised thread_local POD: no guard, no constructor, no destructor. */
inline rm_holds &rm_thread_holds() noexcept
{
	static thread_local rm_holds holds;
	return holds;
}

} // namespace detail

/* ---- kl::mutex ------------------------------------------------------------------------ */

/* The adaptive mutex (klock/mutex.h). Lockable and TimedLockable. */
class mutex {
public:
	using native_handle_type = struct kl_mutex *;

	constexpr mutex() noexcept = default;
	~mutex() { kl_mutex_destroy(&m_); }
	mutex(const mutex &) = delete;
	mutex &operator=(const mutex &) = delete;

	void lock() noexcept { kl_mutex_lock(&m_); }
	bool try_lock() noexcept { return kl_mutex_trylock(&m_); }
	void unlock() noexcept { kl_mutex_unlock(&m_); }

	template <class Rep, class Period>
	bool try_lock_for(const std::chrono::duration<Rep, Period> &d) noexcept
	{
		timespec ts = detail::deadline_in(d);
		return kl_mutex_timedlock(&m_, &ts) == 0;
	}
	template <class Clock, class Duration>
	bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t) noexcept
	{
		timespec ts = detail::deadline_at(t);
		return kl_mutex_timedlock(&m_, &ts) == 0;
	}

	/* True if the calling thread holds it (for assertions). */
	bool owned() const noexcept { return kl_mutex_owned(&m_); }
	native_handle_type native_handle() noexcept { return &m_; }

private:
	struct kl_mutex m_ = KL_MUTEX_INITIALIZER;
};

/* ---- kl::cond ------------------------------------------------------------------------- */

/*
 * Condition variable for kl::mutex (klock/cond.h), used like std::condition_variable with
 * std::unique_lock<kl::mutex>. (std::condition_variable_any also works with kl::mutex;
 * kl::cond is cheaper: no internal mutex, and notify_all requeues instead of waking all.)
 */
class cond {
public:
	constexpr cond() noexcept = default;
	~cond() { kl_cond_destroy(&c_); }
	cond(const cond &) = delete;
	cond &operator=(const cond &) = delete;

	void notify_one() noexcept { kl_cond_signal(&c_); }
	void notify_all() noexcept { kl_cond_broadcast(&c_); }

	void wait(std::unique_lock<mutex> &lk) noexcept
	{
		kl_cond_wait(&c_, lk.mutex()->native_handle());
	}
	template <class Predicate>
	void wait(std::unique_lock<mutex> &lk, Predicate pred)
	{
		while (!pred())
			wait(lk);
	}

	template <class Clock, class Duration>
	std::cv_status wait_until(std::unique_lock<mutex> &lk,
				  const std::chrono::time_point<Clock, Duration> &t) noexcept
	{
		timespec ts = detail::deadline_at(t);

		if (kl_cond_timedwait(&c_, lk.mutex()->native_handle(), &ts) != ETIMEDOUT)
			return std::cv_status::no_timeout;
		/* A non-steady clock may lag CLOCK_MONOTONIC: its own deadline decides. */
		return Clock::now() < t ? std::cv_status::no_timeout : std::cv_status::timeout;
	}
	template <class Clock, class Duration, class Predicate>
	bool wait_until(std::unique_lock<mutex> &lk,
			const std::chrono::time_point<Clock, Duration> &t, Predicate pred)
	{
		while (!pred())
			if (wait_until(lk, t) == std::cv_status::timeout)
				return pred();
		return true;
	}

	template <class Rep, class Period>
	std::cv_status wait_for(std::unique_lock<mutex> &lk,
				const std::chrono::duration<Rep, Period> &d) noexcept
	{
		timespec ts = detail::deadline_in(d);

		return kl_cond_timedwait(&c_, lk.mutex()->native_handle(), &ts) == ETIMEDOUT
			       ? std::cv_status::timeout
			       : std::cv_status::no_timeout;
	}
	template <class Rep, class Period, class Predicate>
	bool wait_for(std::unique_lock<mutex> &lk, const std::chrono::duration<Rep, Period> &d,
		      Predicate pred)
	{
		return wait_until(lk, std::chrono::steady_clock::now() + d, std::move(pred));
	}

	struct kl_cond *native_handle() noexcept { return &c_; }

private:
	struct kl_cond c_ = KL_COND_INITIALIZER;
};

/* ---- kl::rwlock ----------------------------------------------------------------------- */

/* The adaptive reader-writer lock (klock/rwlock.h). Lockable, TimedLockable,
 * SharedLockable and SharedTimedLockable: std::shared_lock works, timed too. */
class rwlock {
public:
	using native_handle_type = struct kl_rwlock *;

	constexpr rwlock() noexcept = default;
	~rwlock() { kl_rwlock_destroy(&rw_); }
	rwlock(const rwlock &) = delete;
	rwlock &operator=(const rwlock &) = delete;

	void lock() noexcept { kl_rwlock_write_lock(&rw_); }
	bool try_lock() noexcept { return kl_rwlock_write_trylock(&rw_); }
	void unlock() noexcept { kl_rwlock_write_unlock(&rw_); }
	template <class Rep, class Period>
	bool try_lock_for(const std::chrono::duration<Rep, Period> &d) noexcept
	{
		timespec ts = detail::deadline_in(d);
		return kl_rwlock_write_timedlock(&rw_, &ts) == 0;
	}
	template <class Clock, class Duration>
	bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t) noexcept
	{
		timespec ts = detail::deadline_at(t);
		return kl_rwlock_write_timedlock(&rw_, &ts) == 0;
	}

	void lock_shared() noexcept { kl_rwlock_read_lock(&rw_); }
	bool try_lock_shared() noexcept { return kl_rwlock_read_trylock(&rw_); }
	void unlock_shared() noexcept { kl_rwlock_read_unlock(&rw_); }
	template <class Rep, class Period>
	bool try_lock_shared_for(const std::chrono::duration<Rep, Period> &d) noexcept
	{
		timespec ts = detail::deadline_in(d);
		return kl_rwlock_read_timedlock(&rw_, &ts) == 0;
	}
	template <class Clock, class Duration>
	bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration> &t) noexcept
	{
		timespec ts = detail::deadline_at(t);
		return kl_rwlock_read_timedlock(&rw_, &ts) == 0;
	}

	/* The caller's exclusive hold becomes a shared one (release with unlock_shared()). */
	void downgrade() noexcept { kl_rwlock_write_downgrade(&rw_); }
	bool wowned() const noexcept { return kl_rwlock_wowned(&rw_); }
	native_handle_type native_handle() noexcept { return &rw_; }

private:
	struct kl_rwlock rw_ = KL_RWLOCK_INITIALIZER;
};

/* ---- kl::rmlock ----------------------------------------------------------------------- */

/*
 * The read-mostly lock (klock/rmlock.h). Lockable and SharedLockable (no timed forms: the
 * C API has none). Flags: kl::rmlock::recurse (KL_RM_RECURSE), kl::rmlock::sleepable
 * (KL_RM_SLEEPABLE). lock_shared()/unlock_shared() keep the tracker in the per-thread
 * stack described at the top of this file; read_guard keeps it on the stack.
 */
class rmlock {
public:
	using native_handle_type = struct kl_rmlock *;
	static constexpr unsigned recurse = KL_RM_RECURSE;
	static constexpr unsigned sleepable = KL_RM_SLEEPABLE;

	/* Unknown flags end the process with a message (kl_rmlock_init's EINVAL). */
	explicit rmlock(unsigned flags = 0) noexcept
	{
		if (kl_rmlock_init(&lk_, flags) != 0)
			detail::fatal("kl::rmlock: unknown flags (KL_RM_RECURSE, KL_RM_SLEEPABLE)");
	}
	~rmlock() { kl_rmlock_destroy(&lk_); }
	rmlock(const rmlock &) = delete;
	rmlock &operator=(const rmlock &) = delete;

	void lock() noexcept { kl_rmlock_write_lock(&lk_); }
	bool try_lock() noexcept { return kl_rmlock_write_trylock(&lk_); }
	void unlock() noexcept { kl_rmlock_write_unlock(&lk_); }

	void lock_shared() noexcept
	{
		kl_rmlock_read_lock(&lk_, &push()->tr);
	}
	bool try_lock_shared() noexcept
	{
		detail::rm_hold *h = push();

		if (kl_rmlock_read_trylock(&lk_, &h->tr))
			return true;
		detail::rm_thread_holds().n--;
		return false;
	}
	void unlock_shared() noexcept
	{
		detail::rm_holds &s = detail::rm_thread_holds();
		unsigned i = s.n;

		while (i > 0 && s.hold[i - 1].lock != &lk_)
			i--;
		if (i == 0)
			detail::fatal("kl::rmlock::unlock_shared: this thread holds no read lock of "
				      "this rmlock taken with lock_shared()");
		kl_rmlock_read_unlock(&lk_, &s.hold[i - 1].tr);
		for (; i < s.n; i++) /* released out of order: close the gap */
			s.hold[i - 1] = s.hold[i];
		s.n--;
	}

	/* Read lock with a caller-owned tracker (as in C): no per-thread stack involved. */
	void read_lock(struct kl_rm_tracker &tr) noexcept { kl_rmlock_read_lock(&lk_, &tr); }
	bool read_trylock(struct kl_rm_tracker &tr) noexcept
	{
		return kl_rmlock_read_trylock(&lk_, &tr);
	}
	void read_unlock(struct kl_rm_tracker &tr) noexcept { kl_rmlock_read_unlock(&lk_, &tr); }

	/* Scoped read hold whose tracker lives in the guard (the cheapest C++ read). */
	class read_guard {
	public:
		explicit read_guard(rmlock &l) noexcept : l_(l) { l_.read_lock(tr_); }
		~read_guard() { l_.read_unlock(tr_); }
		read_guard(const read_guard &) = delete;
		read_guard &operator=(const read_guard &) = delete;

	private:
		rmlock &l_;
		struct kl_rm_tracker tr_;
	};

	bool wowned() const noexcept { return kl_rmlock_wowned(&lk_); }
	native_handle_type native_handle() noexcept { return &lk_; }

private:
	detail::rm_hold *push() noexcept
	{
		detail::rm_holds &s = detail::rm_thread_holds();

		if (s.n >= KL_CPP_RM_HOLDS)
			detail::fatal("kl::rmlock::lock_shared: more than KL_CPP_RM_HOLDS read "
				      "holds in this thread (use kl::rmlock::read_guard)");
		detail::rm_hold *h = &s.hold[s.n++];
		h->lock = &lk_;
		return h;
	}

	struct kl_rmlock lk_;
};

/* ---- kl::pcpu_rwsem ------------------------------------------------------------------- */

/* The per-CPU reader-writer semaphore (klock/pcpu_rwsem.h). Lockable and SharedLockable.
 * Its per-CPU counters are allocated by the first lock; if that fails the process ends
 * with a message (the static initializer's rule). */
class pcpu_rwsem {
public:
	using native_handle_type = struct kl_pcpu_rwsem *;

	constexpr pcpu_rwsem() noexcept = default;
	~pcpu_rwsem() { kl_pcpu_rwsem_destroy(&sem_); }
	pcpu_rwsem(const pcpu_rwsem &) = delete;
	pcpu_rwsem &operator=(const pcpu_rwsem &) = delete;

	void lock() noexcept { kl_pcpu_rwsem_write_lock(&sem_); }
	bool try_lock() noexcept { return kl_pcpu_rwsem_write_trylock(&sem_); }
	void unlock() noexcept { kl_pcpu_rwsem_write_unlock(&sem_); }
	void lock_shared() noexcept { kl_pcpu_rwsem_read_lock(&sem_); }
	bool try_lock_shared() noexcept { return kl_pcpu_rwsem_read_trylock(&sem_); }
	void unlock_shared() noexcept { kl_pcpu_rwsem_read_unlock(&sem_); }

	native_handle_type native_handle() noexcept { return &sem_; }

private:
	struct kl_pcpu_rwsem sem_ = KL_PCPU_RWSEM_INITIALIZER;
};

/* ---- kl::hashlock --------------------------------------------------------------------- */

/*
 * A hashed lock table (klock/hashlock.h): lock(key) locks the stripe of an address.
 * guard locks one key for a scope, guard2 two keys (in stripe order, deadlock-free). The
 * table's rules hold: a thread holding a key of a table takes no second key of it except
 * through guard2/lock2/lockn. Construction failure (bad flags, no memory) ends the process
 * with a message.
 */
class hashlock {
public:
	using native_handle_type = struct kl_hashlock *;
	static constexpr unsigned ticket = KL_HASHLOCK_TICKET;

	/* @nstripes 0: the automatic size. @flags: kl::hashlock::ticket or 0. */
	explicit hashlock(unsigned nstripes = 0, unsigned flags = 0) noexcept
	{
		if (kl_hashlock_init_flags(&h_, nstripes, flags) != 0)
			detail::fatal("kl::hashlock: kl_hashlock_init_flags failed (flags, size "
				      "or memory)");
	}
	~hashlock() { kl_hashlock_destroy(&h_); }
	hashlock(const hashlock &) = delete;
	hashlock &operator=(const hashlock &) = delete;

	void lock(const void *key) noexcept { kl_hashlock_lock(&h_, key); }
	bool try_lock(const void *key) noexcept { return kl_hashlock_trylock(&h_, key); }
	void unlock(const void *key) noexcept { kl_hashlock_unlock(&h_, key); }
	void lock2(const void *a, const void *b) noexcept { kl_hashlock_lock2(&h_, a, b); }
	void unlock2(const void *a, const void *b) noexcept { kl_hashlock_unlock2(&h_, a, b); }
	unsigned index(const void *key) const noexcept { return kl_hashlock_index(&h_, key); }
	unsigned nstripes() const noexcept { return kl_hashlock_nstripes(&h_); }
	native_handle_type native_handle() noexcept { return &h_; }

	/* Holds @key's stripe for the guard's scope. */
	class guard {
	public:
		guard(hashlock &h, const void *key) noexcept : h_(h), key_(key) { h_.lock(key_); }
		~guard() { h_.unlock(key_); }
		guard(const guard &) = delete;
		guard &operator=(const guard &) = delete;

	private:
		hashlock &h_;
		const void *key_;
	};

	/* Holds the stripes of @a and @b (each once, lower index first) for its scope. */
	class guard2 {
	public:
		guard2(hashlock &h, const void *a, const void *b) noexcept : h_(h), a_(a), b_(b)
		{
			h_.lock2(a_, b_);
		}
		~guard2() { h_.unlock2(a_, b_); }
		guard2(const guard2 &) = delete;
		guard2 &operator=(const guard2 &) = delete;

	private:
		hashlock &h_;
		const void *a_, *b_;
	};

private:
	struct kl_hashlock h_;
};

} // namespace kl

#endif /* KLOCK_KLOCK_HPP */
