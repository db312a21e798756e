/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * preload/klp.h - libklock-preload's internals: how klock's locks sit inside glibc's
 * pthread objects, the per-object tags, the configuration, and the real (glibc) functions.
 * The theory is in preload/preload.c; docs/preload.md has the tables for users.
 */
#ifndef KLP_H
#define KLP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <klock/cond.h>
#include <klock/mcs.h>
#include <klock/mutex.h>
#include <klock/pcpu_rwsem.h>
#include <klock/rwlock.h>
#include <klock/ticket.h>
#include "kl_internal.h"
#include "hooks.h"
#include "thread.h"

/* The interposers are the library's only exports (preload.map); everything else hidden. */
#define KLP_EXPORT __attribute__((visibility("default")))

/* Each interposer's first statement: remember the program's call site (kl_internal.h). */
#define KLP_ENTER() (kli_site_override = KLI_SITE())

/* ---- tags ------------------------------------------------------------------------------ */

/*
 * A klock object carries a 64-bit tag in a word glibc never gives that value:
 *   bits 32-63  KLP_MAGIC ("KLCK"): not the top half of any user-space pointer
 *   bits 0-3    the pthread type (KLP_K_*)
 *   bits 4-7    the implementation (KLP_I_*)
 *   bit 8       DESTROYED: pthread_*_destroy() ran; every later call but init fails EINVAL
 * A zero tag means "not (yet) klock's": a pristine object (static initializer or zero
 * fill, adopted on first use) or glibc's own (forwarded).
 */
#define KLP_MAGIC 0x4b4c434bull
#define KLP_TAG(impl, kind) ((KLP_MAGIC << 32) | ((uint64_t)(impl) << 4) | (uint64_t)(kind))
#define KLP_TAG_DESTROYED 0x100ull
/* A pristine mutex being adopted by another thread (preload/mutex.c): wait for the tag. */
#define KLP_TAG_ADOPTING ((KLP_MAGIC << 32) | 0xffffull)
#define KLP_TAG_OURS(t) (((t) >> 32) == KLP_MAGIC)
#define KLP_TAG_KIND(t) ((unsigned)(t) & 0xfu)
#define KLP_TAG_IMPL(t) (((unsigned)(t) >> 4) & 0xfu)

/* Mutex types (glibc's __kind values for them, so a static initializer's kind is one). */
#define KLP_K_NORMAL 0u      /* PTHREAD_MUTEX_NORMAL == DEFAULT (glibc TIMED_NP) */
#define KLP_K_RECURSIVE 1u
#define KLP_K_ERRORCHECK 2u
#define KLP_K_ADAPTIVE 3u    /* glibc's ADAPTIVE_NP: mapped to NORMAL (kl_mutex adapts) */
/* glibc __kind bits that make a mutex glibc's for good: robust, priority inheritance,
 * priority protection, process-shared. glibc's destroy stores -1, which has them too. */
#define KLP_GLIBC_KIND_FORWARD (16 | 32 | 64 | 128)

/* Mutex implementations (KLOCK_MUTEX). */
enum klp_mutex_impl {
	KLP_I_ADAPTIVE,  /* kl_mutex (default) */
	KLP_I_TICKET,    /* kl_ticket */
	KLP_I_MCS,       /* kl_mcs, node from the thread's pool */
	KLP_I_PTHREAD,   /* glibc's own, forwarded (the interposition-cost baseline) */
};

/* Rwlock implementations (KLOCK_RWLOCK). */
enum klp_rw_impl {
	KLP_R_RWLOCK,    /* kl_rwlock (default) */
	KLP_R_PCPU,      /* kl_pcpu_rwsem */
	KLP_R_PTHREAD,   /* glibc's own, forwarded */
};

/* Rwlock kinds: glibc's __flags values (pthread_rwlockattr_setkind_np). */
#define KLP_RK_PREFER_READER 0u
#define KLP_RK_PREFER_WRITER 1u
#define KLP_RK_NONRECURSIVE 2u   /* PREFER_WRITER_NONRECURSIVE_NP: no read tracking */

/* The fast paths' one check: default implementation, default type. */
#define KLP_TAG_MUTEX_FAST KLP_TAG(KLP_I_ADAPTIVE, KLP_K_NORMAL)
#define KLP_TAG_RW_FAST KLP_TAG(KLP_R_RWLOCK, KLP_RK_PREFER_READER)
#define KLP_TAG_RW_FAST_NR KLP_TAG(KLP_R_RWLOCK, KLP_RK_NONRECURSIVE)
#define KLP_TAG_PCPU_FAST KLP_TAG(KLP_R_PCPU, KLP_RK_PREFER_READER)

/* ---- layouts ------------------------------------------------------------------------------ */

/* pthread_mutex_t: 40 bytes on x86_64, 48 on aarch64; the same offsets on both. */
struct klp_mutex {
	union {
		struct kl_mutex adaptive;         /* [0,24): over __lock..__spins, __kind */
		struct {
			union {
				struct kl_ticket ticket;
				struct kl_mcs mcs;
				uint64_t pad[2];
			} l;                      /* [0,16) */
			/* ticket: the holder's owner id; mcs: the holder's node */
			_Atomic uintptr_t holder; /* [16,24) */
		} fifo;
	} u;
	uint32_t depth;       /* [24,28) recursive: acquisitions beyond the first (owner only) */
	uint32_t spare;       /* [28,32) */
	_Atomic uint64_t tag; /* [32,40): over __list.__next (a pointer or 0 in glibc's use) */
};

/* pthread_cond_t: 48 bytes everywhere. */
struct klp_cond {
	struct kl_cond kc;          /* [0,16) waiters with a kl_mutex (adaptive) */
	_Atomic uint32_t gwaiters;  /* [16,20) waiters with any other mutex, parked on its
	                             * address (the generic path, preload/cond.c) */
	uint32_t spare[4];          /* [20,36) */
	_Atomic uint32_t attr;      /* [36,40) glibc's __wrefs attribute bits, kept meaning
	                             * the same: KLP_COND_PSHARED, KLP_COND_MONOTONIC */
	uint64_t spare2;            /* [40,48) */
};
#define KLP_COND_PSHARED 1u     /* glibc's __PTHREAD_COND_SHARED_MASK: glibc's cond */
#define KLP_COND_MONOTONIC 2u   /* glibc's __PTHREAD_COND_CLOCK_MONOTONIC_MASK */

/* pthread_rwlock_t: 56 bytes everywhere. */
struct klp_rwlock {
	union {
		struct kl_rwlock rw;        /* [0,40): over __readers..__pad1 (and __shared) */
		struct kl_pcpu_rwsem pc;    /* KLOCK_RWLOCK=pcpu_rwsem */
		uint64_t pad[5];
	} u;
	_Atomic uint64_t tag;           /* [40,48): over __pad2, which glibc never writes */
	_Atomic uint32_t kind;          /* [48,52): glibc's __flags, kept meaning the same */
	_Atomic uint32_t writer;        /* [52,56) kl_pcpu_rwsem: its writer's owner id, 32 bits */
};

#define KLP_MUTEX_KIND_OFF offsetof(pthread_mutex_t, __data.__kind)
#define KLP_RW_SHARED_OFF offsetof(pthread_rwlock_t, __data.__shared)

_Static_assert(sizeof(struct klp_mutex) <= sizeof(pthread_mutex_t), "klp_mutex fits");
_Static_assert(_Alignof(struct klp_mutex) <= _Alignof(pthread_mutex_t), "klp_mutex align");
_Static_assert(offsetof(struct klp_mutex, tag) ==
	       offsetof(pthread_mutex_t, __data.__list.__next), "mutex tag over __list.__next");
_Static_assert(sizeof(((pthread_mutex_t *)0)->__data.__list.__next) == 8, "8-byte __next");
_Static_assert(offsetof(struct klp_mutex, depth) >= KLP_MUTEX_KIND_OFF + sizeof(int),
	       "depth clear of __kind");
_Static_assert(sizeof(struct kl_ticket) <= 16 && sizeof(struct kl_mcs) <= 16,
	       "FIFO locks fit the first 16 bytes");
_Static_assert(sizeof(struct klp_cond) == sizeof(pthread_cond_t), "klp_cond fits");
_Static_assert(_Alignof(struct klp_cond) <= _Alignof(pthread_cond_t), "klp_cond align");
_Static_assert(offsetof(struct klp_cond, attr) == offsetof(pthread_cond_t, __data.__wrefs),
	       "cond attribute word is glibc's __wrefs");
_Static_assert(sizeof(struct klp_rwlock) <= sizeof(pthread_rwlock_t), "klp_rwlock fits");
_Static_assert(_Alignof(struct klp_rwlock) <= _Alignof(pthread_rwlock_t), "klp_rwlock align");
_Static_assert(offsetof(struct klp_rwlock, tag) == offsetof(pthread_rwlock_t, __data.__pad2),
	       "rwlock tag over __pad2");
_Static_assert(offsetof(struct klp_rwlock, kind) == offsetof(pthread_rwlock_t, __data.__flags),
	       "rwlock kind is glibc's __flags");
_Static_assert(sizeof(struct kl_rwlock) <= offsetof(struct klp_rwlock, tag) &&
	       sizeof(struct kl_pcpu_rwsem) <= offsetof(struct klp_rwlock, tag),
	       "kl_rwlock and kl_pcpu_rwsem end before the tag");

/* ---- configuration (KLOCK_MUTEX, KLOCK_RWLOCK; preload.c) ------------------------------ */

struct klp_config {
	unsigned mutex_impl;   /* enum klp_mutex_impl */
	unsigned rw_impl;      /* enum klp_rw_impl */
};

extern struct klp_config klp_cfg;
extern _Atomic bool klp_cfg_ready;
void klp_config_load(void);

/* The configuration, read from the environment on first use (constructors need not have
 * run: another library's constructor may lock a mutex before ours). */
static inline const struct klp_config *klp_config(void)
{
	if (kl_unlikely(!atomic_load_explicit(&klp_cfg_ready, memory_order_acquire)))
		klp_config_load();
	return &klp_cfg;
}

/* ---- the real functions (glibc's, dlsym(RTLD_NEXT)) ------------------------------------ */

enum klp_real_id {
	KLP_R_pthread_mutex_init, KLP_R_pthread_mutex_destroy, KLP_R_pthread_mutex_lock,
	KLP_R_pthread_mutex_trylock, KLP_R_pthread_mutex_timedlock,
	KLP_R_pthread_mutex_clocklock, KLP_R_pthread_mutex_unlock,
	KLP_R_pthread_mutex_consistent, KLP_R_pthread_mutex_getprioceiling,
	KLP_R_pthread_mutex_setprioceiling,
	KLP_R_pthread_cond_init, KLP_R_pthread_cond_destroy, KLP_R_pthread_cond_wait,
	KLP_R_pthread_cond_timedwait, KLP_R_pthread_cond_clockwait, KLP_R_pthread_cond_signal,
	KLP_R_pthread_cond_broadcast,
	KLP_R_pthread_rwlock_init, KLP_R_pthread_rwlock_destroy, KLP_R_pthread_rwlock_rdlock,
	KLP_R_pthread_rwlock_tryrdlock, KLP_R_pthread_rwlock_timedrdlock,
	KLP_R_pthread_rwlock_clockrdlock, KLP_R_pthread_rwlock_wrlock,
	KLP_R_pthread_rwlock_trywrlock, KLP_R_pthread_rwlock_timedwrlock,
	KLP_R_pthread_rwlock_clockwrlock, KLP_R_pthread_rwlock_unlock,
	KLP_R_pthread_spin_init, KLP_R_pthread_spin_destroy, KLP_R_pthread_spin_lock,
	KLP_R_pthread_spin_trylock, KLP_R_pthread_spin_unlock,
	KLP_R_pthread_cancel,
	KLP_R_pthread_create,
	KLP_R_COUNT
};

/* A function pointer of no particular type (cast to the right one by KLP_REAL). */
typedef void (*klp_fn)(void);

extern _Atomic(klp_fn) klp_real_fn[KLP_R_COUNT];
klp_fn klp_real_resolve(enum klp_real_id id);

static inline klp_fn klp_real_get(enum klp_real_id id)
{
	klp_fn f = atomic_load_explicit(&klp_real_fn[id], memory_order_relaxed);

	return kl_likely(f != NULL) ? f : klp_real_resolve(id);
}

/* The glibc function behind an interposer, e.g. KLP_REAL(pthread_mutex_lock)(m). */
#define KLP_REAL(name) ((__typeof__(&name))klp_real_get(KLP_R_##name))

/* ---- shared helpers (preload.c) --------------------------------------------------------- */

/* A timed call's deadline on one of the two clocks POSIX timed functions take. */
struct klp_deadline {
	clockid_t clock;               /* CLOCK_REALTIME or CLOCK_MONOTONIC */
	const struct timespec *abs;    /* the caller's absolute deadline on @clock */
};

/*
 * One wait slice's CLOCK_MONOTONIC deadline for @d, into @mono. Returns 0, ETIMEDOUT
 * (@d's deadline has passed on its own clock), or EINVAL (tv_nsec out of range). For
 * CLOCK_REALTIME the slice ends at most KLP_REALTIME_SLICE_NS from now, so a step of the
 * realtime clock is noticed within a slice (preload.c); *@last says the slice reaches the
 * caller's deadline. For the lock calls; a condvar wait parks on the deadline's own clock.
 */
int klp_deadline_slice(const struct klp_deadline *d, struct timespec *mono, bool *last);

/* Whether @d's deadline has passed on its own clock. */
bool klp_deadline_passed(const struct klp_deadline *d);

/* A clock the timed functions accept (glibc: REALTIME and MONOTONIC). */
static inline bool klp_clock_ok(clockid_t c)
{
	return c == CLOCK_REALTIME || c == CLOCK_MONOTONIC;
}

/* Sleeps until @d's deadline (a NORMAL mutex relocked with a timeout: glibc waits it out). */
void klp_sleep_until(const struct klp_deadline *d);

/* A one-line message on stderr: "klock-preload: ..." (no locks, one write(2)). */
void klp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Set once the process is seen running realtime (SCHED_FIFO/SCHED_RR) threads: by
 * pthread_create() with such attributes, or by an rwlock set up on such a thread. From
 * then on KLOCK_RWLOCK=pcpu_rwsem sets up kl_rwlock locks (preload/rwlock.c). Relaxed:
 * it orders nothing (a lock set up while the first such thread starts may get either). */
extern _Atomic bool klp_rt_threads;

/* ---- undefined-behaviour misuse, answered as glibc (preload/misuse.c) ------------------ */

/* A NORMAL mutex relocked by its owner: reported per KLOCK_ON_ERROR, then blocks for ever. */
void klp_misuse_relock(const void *lock, const void *site) __attribute__((noreturn));

/* An unlock of a free (@foreign false) or foreign-held NORMAL mutex or spinlock: reported
 * per KLOCK_ON_ERROR (once per lock by default; abort aborts); the caller then does what
 * glibc does (nothing for a free lock, release a foreign hold). */
void klp_misuse_unlock(const char *kind, const void *lock, bool foreign, const void *site);

/* An rwlock unlock by a thread that holds nothing, of a free lock or one another thread
 * write-holds (@writer): reported per KLOCK_ON_ERROR; the caller leaves the lock as it is
 * and returns 0. */
void klp_misuse_rw_unlock(const void *lock, bool writer, const void *site);

/* pthread_rwlock_destroy() of a lock still held or waited for: reported per KLOCK_ON_ERROR;
 * the caller leaves the lock as it is and returns 0 (glibc's answer). */
void klp_misuse_rw_destroy(const void *lock, const void *site);

/* ---- mutex internals other files use (preload/mutex.c) --------------------------------- */

/* The tag of @m after adoption: a klock tag, or 0 when @m is glibc's (forward it). */
uint64_t klp_mutex_tag(struct klp_mutex *m);

static inline uint64_t klp_mutex_tag_fast(struct klp_mutex *m)
{
	uint64_t t = atomic_load_explicit(&m->tag, memory_order_relaxed);

	return kl_likely(KLP_TAG_OURS(t)) ? t : klp_mutex_tag(m);
}

/* Whether the calling thread holds klock mutex @m (tag @t). */
bool klp_mutex_owned(struct klp_mutex *m, uint64_t t);

/* Lock / unlock a klock mutex for a condvar wait: the full recursion is released and
 * restored by the caller, these take and drop the lock itself. */
void klp_mutex_lock_raw(struct klp_mutex *m, uint64_t t);
void klp_mutex_unlock_raw(struct klp_mutex *m, uint64_t t);

/* fork() child handlers of the preload's own state. */
void klp_mutex_atfork_child(void);
void klp_cond_atfork_child(void);

/* ---- rwlock read tracking (preload/rwlock.c) --------------------------------------------- */
void klp_rwlock_atfork_child(void);

#endif /* KLP_H */
