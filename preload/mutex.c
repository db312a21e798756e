/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * preload/mutex.c - the pthread_mutex_* interposers (the design is in preload/preload.c).
 *
 * Dispatch. The fast paths of lock and unlock compare the tag with one constant (klock's
 * default implementation, NORMAL type) and call kl_mutex; everything else - the other
 * types, KLOCK_MUTEX=ticket|mcs, adoption of a pristine object, glibc's forwarded
 * mutexes, destroyed ones - goes through mutex_tag() and a switch, out of line.
 *
 * Adoption (T1/T2). A pristine object's tag is 0 and its bytes are a static initializer
 * (zero except __kind). An adopter that finds no forward bit in __kind CASes the tag from
 * 0 to ADOPTING; only the first CAS in the tag's modification order succeeds, and the
 * others wait for the final tag. The winner reads __kind, zeroes bytes [16,24) (where
 * __kind was: kl_mutex's spin_ns/passes, the FIFO locks' holder - zero in an initialised
 * lock), and stores the final tag (T1, release). Lock operations touch the lock bytes
 * only after an acquire load of a final klock tag (T2: every fast path, klp_mutex_tag()),
 * so they see the zeroed bytes, and the winner's read saw the initializer's type. The
 * winner then hands lockstat the program's call site (the lock's "first@" label:
 * kli_lockstat_first_used(), once per lock; rwlocks' winner does the same).
 *
 * The recursion depth ([24,28)) is read and written only by the thread holding the mutex
 * (the lock's own acquire/release orders it between holders); it is 0 whenever the mutex
 * is free.
 *
 * MCS nodes. kl_mcs needs a queue node per acquisition that stays untouched until the
 * unlock. Each thread owns a pool of KLP_MCS_POOL nodes (found through its thread
 * record's dense index, so a recycled record brings its pool to the next thread); lock
 * takes a free one, stores it in the mutex ([16,24)), and unlock gives it back. Pools
 * come from mmap, not malloc: a malloc that locks a pthread mutex would otherwise recurse
 * here. A thread holding more MCS mutexes at once than its pool has nodes takes spare
 * nodes from a shared free list. Nodes are never freed: an errorcheck lock may read the
 * holder's node (its owner) while the holder unlocks. Out of memory (mmap fails: RLIMIT_AS)
 * a thread without a pool uses spare nodes, and spare nodes come from a reserve in static
 * storage (KLP_MCS_RESERVE); when that is spent too the lock call waits for a node to be
 * given back (lock has no ENOMEM to return), it never aborts.
 *
 * Holders. ERRORCHECK and RECURSIVE need "does the caller hold it": kl_mutex's word names
 * its holder; the FIFO locks record one in `holder` - the holder's owner id (ticket) or
 * its queue node, which carries the owner id of the acquisition (MCS). Owner ids, not
 * thread records: records are recycled when threads exit, so a record pointer left by a
 * thread that exited holding the mutex would make the record's next thread its owner
 * (allowed to relock a RECURSIVE mutex, to unlock it, EDEADLK instead of ETIMEDOUT).
 * An owner id names one thread lifetime (locks/substrate/thread.h), so such a mutex stays locked
 * and owned by nobody alive, as in glibc: EPERM on unlock, ETIMEDOUT on timedlock.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "klp.h"
#include "lockstat_impl.h"
#include "wordlock.h"

/* Nodes per thread pool: MCS mutexes one thread may hold at once before nodes are mapped
 * one by one. */
#define KLP_MCS_POOL 64
/* Pool directory: 2^(8+8) thread records. */
#define POOL_DIR_PAGES 256u
#define POOL_PAGE_SLOTS 256u
/* Spare nodes in static storage, for when no memory can be mapped. */
#define KLP_MCS_RESERVE 64
/* Waiting for a spare node when even the reserve is spent: the pause between retries. */
#define MCS_NODE_RETRY_NS 1000000l
/* A FIFO mutex's timedlock polls trylock, sleeping this long at first ... */
#define FIFO_POLL_MIN_NS 1000ll
/* ... doubling up to this. */
#define FIFO_POLL_MAX_NS 1000000ll

struct klp_mcs_pool;

struct klp_mcs_node {
	struct kl_mcs_node n;
	_Atomic kli_owner_t owner;  /* the owner id of the acquisition holding it (read by
	                             * other threads' ownership checks) */
	struct klp_mcs_pool *pool;  /* NULL: a spare node (spare_head's list) */
	struct klp_mcs_node *next;  /* spare list link */
	uint32_t slot;
};

struct klp_mcs_pool {
	struct kli_thread *owner;   /* the record whose threads use this pool */
	_Atomic uint64_t busy;      /* bit i: node[i] is in a queue or held */
	struct klp_mcs_node node[KLP_MCS_POOL];
};

static struct klp_mcs_pool **_Atomic pool_dir[POOL_DIR_PAGES];
static struct klp_mcs_node *spare_head;     /* under pool_lock */
static struct klp_mcs_node spare_reserve[KLP_MCS_RESERVE];
static unsigned spare_reserve_used;         /* under pool_lock */
static struct kli_wordlock pool_lock = KLI_WORDLOCK_INIT;
static __thread struct klp_mcs_pool *tls_pool __attribute__((tls_model("initial-exec")));

static inline struct klp_mutex *M(pthread_mutex_t *m)
{
	return (struct klp_mutex *)(void *)m;
}

/* Zeroed memory, or NULL when none can be mapped. */
static void *map_zeroed(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p != MAP_FAILED ? p : NULL;
}

void klp_mutex_atfork_child(void)
{
	atomic_store_explicit(&pool_lock.v, 0, memory_order_relaxed);
}

/* ---- MCS node pools -------------------------------------------------------------------- */

static KL_NOINLINE struct klp_mcs_pool *mcs_pool_slow(void)
{
	struct kli_thread *self = kli_self();
	unsigned pg = (self->index / POOL_PAGE_SLOTS) % POOL_DIR_PAGES;
	struct klp_mcs_pool **page, *p = NULL;

	kli_wordlock_lock(&pool_lock);
	page = atomic_load_explicit(&pool_dir[pg], memory_order_relaxed);
	if (page == NULL) {
		page = map_zeroed(POOL_PAGE_SLOTS * sizeof(*page));
		if (page == NULL)
			goto out; /* out of memory: spare nodes serve us (see the top) */
		atomic_store_explicit(&pool_dir[pg], page, memory_order_relaxed);
	}
	p = page[self->index % POOL_PAGE_SLOTS];
	if (p == NULL || p->owner != self) {
		/* new, or (past 65536 records) a slot shared with another record: a pool of our
		 * own, the old one stays with its users */
		p = map_zeroed(sizeof(*p));
		if (p == NULL)
			goto out;
		p->owner = self;
		for (unsigned i = 0; i < KLP_MCS_POOL; i++) {
			p->node[i].pool = p;
			p->node[i].slot = i;
		}
		page[self->index % POOL_PAGE_SLOTS] = p;
	}
out:
	kli_wordlock_unlock(&pool_lock);
	tls_pool = p;
	return p;
}

/* The pool is full: a spare node (from the list, or a new one). */
static KL_NOINLINE struct klp_mcs_node *mcs_spare_get(void)
{
	struct timespec nap = { 0, MCS_NODE_RETRY_NS };
	struct klp_mcs_node *n;

	for (;;) {
		kli_wordlock_lock(&pool_lock);
		n = spare_head;
		if (n != NULL)
			spare_head = n->next;
		kli_wordlock_unlock(&pool_lock);
		if (n == NULL)
			n = map_zeroed(sizeof(*n));
		if (n == NULL) {
			kli_wordlock_lock(&pool_lock);
			if (spare_reserve_used < KLP_MCS_RESERVE)
				n = &spare_reserve[spare_reserve_used++];
			kli_wordlock_unlock(&pool_lock);
		}
		if (n != NULL)
			break;
		nanosleep(&nap, NULL); /* everything spent: wait for a node to come back */
	}
	n->pool = NULL;
	return n;
}

static struct klp_mcs_node *mcs_node_get(void)
{
	struct klp_mcs_pool *p = tls_pool;
	uint64_t busy;
	unsigned i;

	if (kl_unlikely(p == NULL))
		p = mcs_pool_slow();
	if (kl_unlikely(p == NULL))
		return mcs_spare_get(); /* no memory for a pool */
	busy = atomic_load_explicit(&p->busy, memory_order_relaxed);
	if (kl_unlikely(busy == UINT64_MAX))
		return mcs_spare_get();
	i = (unsigned)__builtin_ctzll(~busy);
	/* Only this thread sets bits; an unlock (maybe on another thread) clears them. */
	atomic_fetch_or_explicit(&p->busy, 1ull << i, memory_order_relaxed);
	return &p->node[i];
}

static void mcs_node_put(struct klp_mcs_node *n)
{
	if (n->pool == NULL) {
		kli_wordlock_lock(&pool_lock);
		n->next = spare_head;
		spare_head = n;
		kli_wordlock_unlock(&pool_lock);
		return;
	}
	atomic_fetch_and_explicit(&n->pool->busy, ~(1ull << n->slot), memory_order_relaxed);
}

/* ---- the lock itself, per implementation ---------------------------------------------- */

bool klp_mutex_owned(struct klp_mutex *m, uint64_t t)
{
	kli_owner_t me = kli_tls_owner;
	uintptr_t h;

	if (KLP_TAG_IMPL(t) == KLP_I_ADAPTIVE)
		return kl_mutex_owned(&m->u.adaptive);
	h = atomic_load_explicit(&m->u.fifo.holder, memory_order_relaxed);
	if (me == 0 || h == 0)
		return false;
	if (KLP_TAG_IMPL(t) == KLP_I_TICKET)
		return h == me;
	/* nodes are never freed */
	return atomic_load_explicit(&((struct klp_mcs_node *)h)->owner, memory_order_relaxed) == me;
}

/* The FIFO locks record their holder (after acquiring; cleared before releasing). */
static void fifo_hold(struct klp_mutex *m, uintptr_t holder)
{
	atomic_store_explicit(&m->u.fifo.holder, holder, memory_order_relaxed);
}

void klp_mutex_lock_raw(struct klp_mutex *m, uint64_t t)
{
	struct klp_mcs_node *n;

	switch (KLP_TAG_IMPL(t)) {
	case KLP_I_ADAPTIVE:
		kl_mutex_lock(&m->u.adaptive);
		break;
	case KLP_I_TICKET:
		kl_ticket_lock(&m->u.fifo.l.ticket);
		fifo_hold(m, kli_owner());
		break;
	default:
		n = mcs_node_get();
		kl_mcs_lock(&m->u.fifo.l.mcs, &n->n);
		atomic_store_explicit(&n->owner, kli_owner(), memory_order_relaxed);
		fifo_hold(m, (uintptr_t)n);
		break;
	}
}

static bool mutex_trylock_raw(struct klp_mutex *m, uint64_t t)
{
	struct klp_mcs_node *n;

	switch (KLP_TAG_IMPL(t)) {
	case KLP_I_ADAPTIVE:
		return kl_mutex_trylock(&m->u.adaptive);
	case KLP_I_TICKET:
		if (!kl_ticket_trylock(&m->u.fifo.l.ticket))
			return false;
		fifo_hold(m, kli_owner());
		return true;
	default:
		n = mcs_node_get();
		if (!kl_mcs_trylock(&m->u.fifo.l.mcs, &n->n)) {
			mcs_node_put(n);
			return false;
		}
		atomic_store_explicit(&n->owner, kli_owner(), memory_order_relaxed);
		fifo_hold(m, (uintptr_t)n);
		return true;
	}
}

/* Whether FIFO holder word @h names the calling thread. */
static bool fifo_holder_is_self(uint64_t t, uintptr_t h)
{
	kli_owner_t me = kli_tls_owner;

	if (me == 0 || h == 0)
		return false;
	if (KLP_TAG_IMPL(t) == KLP_I_TICKET)
		return h == me;
	/* nodes are never freed */
	return atomic_load_explicit(&((struct klp_mcs_node *)h)->owner, memory_order_relaxed) == me;
}

void klp_mutex_unlock_raw(struct klp_mutex *m, uint64_t t)
{
	uintptr_t h;

	if (KLP_TAG_IMPL(t) == KLP_I_ADAPTIVE) {
		kl_mutex_unlock(&m->u.adaptive);
		return;
	}
	h = atomic_exchange_explicit(&m->u.fifo.holder, 0, memory_order_relaxed);
	if (h == 0) { /* a free NORMAL mutex: glibc's answer, nothing changes (misuse.c) */
		klp_misuse_unlock("mutex", m, false, KLI_SITE());
		return;
	}
	if (kl_unlikely(!fifo_holder_is_self(t, h))) /* glibc releases a foreign hold too */
		klp_misuse_unlock("mutex", m, true, KLI_SITE());
	if (KLP_TAG_IMPL(t) == KLP_I_TICKET) {
		kl_ticket_unlock(&m->u.fifo.l.ticket);
	} else {
		kl_mcs_unlock(&m->u.fifo.l.mcs, &((struct klp_mcs_node *)h)->n);
		mcs_node_put((struct klp_mcs_node *)h);
	}
}

/* A FIFO lock cannot leave its queue, so a timed acquisition polls trylock. */
static int fifo_timedlock(struct klp_mutex *m, uint64_t t, const struct timespec *mono)
{
	int64_t nap = FIFO_POLL_MIN_NS;

	while (!mutex_trylock_raw(m, t)) {
		struct timespec ts = { 0, (long)nap };

		if (kli_deadline_passed(mono))
			return ETIMEDOUT;
		nanosleep(&ts, NULL);
		if (nap < FIFO_POLL_MAX_NS)
			nap *= 2;
	}
	return 0;
}

static int mutex_timedlock_raw(struct klp_mutex *m, uint64_t t, const struct timespec *mono)
{
	if (KLP_TAG_IMPL(t) == KLP_I_ADAPTIVE)
		return kl_mutex_timedlock(&m->u.adaptive, mono);
	return fifo_timedlock(m, t, mono);
}

/* ---- tags and adoption ---------------------------------------------------------------- */

static int glibc_kind(struct klp_mutex *m)
{
	return atomic_load_explicit((_Atomic int *)(void *)((char *)m + KLP_MUTEX_KIND_OFF),
				    memory_order_relaxed);
}

/* Another thread is adopting @m: its tag is about to be final. */
static KL_NOINLINE uint64_t tag_wait_adopted(struct klp_mutex *m)
{
	uint64_t t;

	while ((t = atomic_load_explicit(&m->tag, memory_order_acquire)) == /* T2 */
	       KLP_TAG_ADOPTING)
		kl_arch_relax();
	return t;
}

uint64_t klp_mutex_tag(struct klp_mutex *m)
{
	uint64_t t = atomic_load_explicit(&m->tag, memory_order_acquire); /* T2 */
	unsigned impl = klp_config()->mutex_impl;
	int kind;

	if (KLP_TAG_OURS(t))
		return t != KLP_TAG_ADOPTING ? t : tag_wait_adopted(m);
	if (t != 0 || impl == KLP_I_PTHREAD)
		return 0;
	kind = glibc_kind(m);
	if ((kind & KLP_GLIBC_KIND_FORWARD) || kind < 0 || kind > (int)KLP_K_ADAPTIVE)
		return 0;
	if (!atomic_compare_exchange_strong_explicit(&m->tag, &t, KLP_TAG_ADOPTING,
						     memory_order_acquire, memory_order_acquire))
		return !KLP_TAG_OURS(t) ? 0 : t != KLP_TAG_ADOPTING ? t : tag_wait_adopted(m);
	/* Ours to finish: the type is the initializer's (nobody has touched the lock bytes:
	 * users wait for the final tag), then the bytes that held __kind become what an
	 * initialised lock has there, zero. */
	kind = glibc_kind(m);
	if (kind == (int)KLP_K_ADAPTIVE)
		kind = KLP_K_NORMAL;
	atomic_store_explicit(&m->u.fifo.holder, 0, memory_order_relaxed);
	t = KLP_TAG(impl, kind);
	atomic_store_explicit(&m->tag, t, memory_order_release); /* T1: pairs with T2 */
	kli_lockstat_first_used(m);   /* once per lock: its label's first-use site */
	return t;
}

/* ---- the operations, for any tag ------------------------------------------------------ */

static int mutex_lock_tagged(struct klp_mutex *m, uint64_t t)
{
	unsigned kind = KLP_TAG_KIND(t);

	if (t & KLP_TAG_DESTROYED)
		return EINVAL;
	if (kind == KLP_K_NORMAL && KLP_TAG_IMPL(t) != KLP_I_ADAPTIVE && klp_mutex_owned(m, t))
		klp_misuse_relock(m, KLI_SITE()); /* POSIX: deadlock (kl_mutex's: misuse.c) */
	if (kind != KLP_K_NORMAL && klp_mutex_owned(m, t)) {
		if (kind == KLP_K_ERRORCHECK)
			return EDEADLK;
		if (m->depth == UINT32_MAX)
			return EAGAIN;
		m->depth++;
		return 0;
	}
	klp_mutex_lock_raw(m, t);
	return 0;
}

static int mutex_trylock_tagged(struct klp_mutex *m, uint64_t t)
{
	if (t & KLP_TAG_DESTROYED)
		return EINVAL;
	if (KLP_TAG_KIND(t) == KLP_K_RECURSIVE && klp_mutex_owned(m, t)) {
		if (m->depth == UINT32_MAX)
			return EAGAIN;
		m->depth++;
		return 0;
	}
	return mutex_trylock_raw(m, t) ? 0 : EBUSY;
}

static int mutex_timedlock_tagged(struct klp_mutex *m, uint64_t t, const struct klp_deadline *d)
{
	struct timespec mono;
	bool last;
	int err = mutex_trylock_tagged(m, t);

	if (err != EBUSY)
		return err; /* taken (even with a bad deadline, as glibc), or misuse */
	if (klp_mutex_owned(m, t)) {
		if (KLP_TAG_KIND(t) == KLP_K_ERRORCHECK)
			return EDEADLK;
		/* NORMAL relock: glibc's waits for the deadline, and so do we */
		err = klp_deadline_slice(d, &mono, &last);
		if (err != 0)
			return err;
		klp_sleep_until(d);
		return ETIMEDOUT;
	}
	for (;;) {
		err = klp_deadline_slice(d, &mono, &last);
		if (err != 0)
			return err;
		err = mutex_timedlock_raw(m, t, &mono);
		if (err != ETIMEDOUT)
			return err;
		/* the slice is over: the next klp_deadline_slice() says whether the deadline is */
	}
}

static int mutex_unlock_tagged(struct klp_mutex *m, uint64_t t)
{
	if (t & KLP_TAG_DESTROYED)
		return EINVAL;
	if (KLP_TAG_KIND(t) != KLP_K_NORMAL) {
		if (!klp_mutex_owned(m, t))
			return EPERM;
		if (m->depth > 0) {
			m->depth--;
			return 0;
		}
	}
	klp_mutex_unlock_raw(m, t);
	return 0;
}

static int mutex_destroy_tagged(struct klp_mutex *m, uint64_t t)
{
	int err = 0;

	if (t & KLP_TAG_DESTROYED)
		return 0; /* as glibc: destroying twice is harmless */
	switch (KLP_TAG_IMPL(t)) {
	case KLP_I_ADAPTIVE:
		err = kl_mutex_destroy(&m->u.adaptive);
		break;
	case KLP_I_TICKET:
		if (kl_ticket_is_locked(&m->u.fifo.l.ticket))
			return EBUSY;
		kl_ticket_destroy(&m->u.fifo.l.ticket);
		break;
	default:
		if (kl_mcs_is_locked(&m->u.fifo.l.mcs))
			return EBUSY;
		kl_mcs_destroy(&m->u.fifo.l.mcs);
		break;
	}
	if (err == 0)
		atomic_store_explicit(&m->tag, t | KLP_TAG_DESTROYED, memory_order_relaxed);
	return err;
}

/* ---- the interposers -------------------------------------------------------------------- */

static KL_NOINLINE int mutex_lock_slow(pthread_mutex_t *pm)
{
	uint64_t t = klp_mutex_tag(M(pm));

	return t == 0 ? KLP_REAL(pthread_mutex_lock)(pm) : mutex_lock_tagged(M(pm), t);
}

KLP_EXPORT int pthread_mutex_lock(pthread_mutex_t *pm)
{
	struct klp_mutex *m = M(pm);

	KLP_ENTER();
	if (kl_likely(atomic_load_explicit(&m->tag, memory_order_acquire) == /* T2 */
		      KLP_TAG_MUTEX_FAST)) {
		kl_mutex_lock(&m->u.adaptive);
		return 0;
	}
	return mutex_lock_slow(pm);
}

static KL_NOINLINE int mutex_unlock_slow(pthread_mutex_t *pm)
{
	uint64_t t = klp_mutex_tag(M(pm));

	return t == 0 ? KLP_REAL(pthread_mutex_unlock)(pm) : mutex_unlock_tagged(M(pm), t);
}

KLP_EXPORT int pthread_mutex_unlock(pthread_mutex_t *pm)
{
	struct klp_mutex *m = M(pm);

	KLP_ENTER();
	if (kl_likely(atomic_load_explicit(&m->tag, memory_order_acquire) == /* T2 */
		      KLP_TAG_MUTEX_FAST)) {
		kl_mutex_unlock(&m->u.adaptive);
		return 0;
	}
	return mutex_unlock_slow(pm);
}

KLP_EXPORT int pthread_mutex_trylock(pthread_mutex_t *pm)
{
	struct klp_mutex *m = M(pm);
	uint64_t t;

	KLP_ENTER();
	t = klp_mutex_tag_fast(m);
	if (kl_likely(t == KLP_TAG_MUTEX_FAST))
		return kl_mutex_trylock(&m->u.adaptive) ? 0 : EBUSY;
	return t == 0 ? KLP_REAL(pthread_mutex_trylock)(pm) : mutex_trylock_tagged(m, t);
}

KLP_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *pm, const struct timespec *abstime)
{
	struct klp_deadline d = { CLOCK_REALTIME, abstime };
	uint64_t t;

	KLP_ENTER();
	t = klp_mutex_tag_fast(M(pm));
	if (t == 0)
		return KLP_REAL(pthread_mutex_timedlock)(pm, abstime);
	return mutex_timedlock_tagged(M(pm), t, &d);
}

KLP_EXPORT int pthread_mutex_clocklock(pthread_mutex_t *pm, clockid_t clock,
				       const struct timespec *abstime)
{
	struct klp_deadline d = { clock, abstime };
	uint64_t t;

	KLP_ENTER();
	t = klp_mutex_tag_fast(M(pm));
	if (t == 0)
		return KLP_REAL(pthread_mutex_clocklock)(pm, clock, abstime);
	if (!klp_clock_ok(clock))
		return EINVAL;
	return mutex_timedlock_tagged(M(pm), t, &d);
}

/* Process-shared, robust and priority mutexes stay glibc's (preload.c); so does every
 * mutex under KLOCK_MUTEX=pthread. */
static bool attr_wants_glibc(const pthread_mutexattr_t *attr)
{
	int pshared = PTHREAD_PROCESS_PRIVATE, robust = PTHREAD_MUTEX_STALLED;
	int proto = PTHREAD_PRIO_NONE;

	if (attr == NULL)
		return false;
	pthread_mutexattr_getpshared(attr, &pshared);
	pthread_mutexattr_getrobust(attr, &robust);
	pthread_mutexattr_getprotocol(attr, &proto);
	return pshared != PTHREAD_PROCESS_PRIVATE || robust != PTHREAD_MUTEX_STALLED ||
	       proto != PTHREAD_PRIO_NONE;
}

KLP_EXPORT int pthread_mutex_init(pthread_mutex_t *pm, const pthread_mutexattr_t *attr)
{
	const struct klp_config *cfg = klp_config();
	struct klp_mutex *m = M(pm);
	int type = PTHREAD_MUTEX_DEFAULT;
	unsigned kind;

	KLP_ENTER();
	if (cfg->mutex_impl == KLP_I_PTHREAD || attr_wants_glibc(attr))
		return KLP_REAL(pthread_mutex_init)(pm, attr);
	if (attr != NULL && pthread_mutexattr_gettype(attr, &type) != 0)
		return EINVAL;
	switch (type) {
	case PTHREAD_MUTEX_RECURSIVE:
		kind = KLP_K_RECURSIVE;
		break;
	case PTHREAD_MUTEX_ERRORCHECK:
		kind = KLP_K_ERRORCHECK;
		break;
	default: /* NORMAL (== DEFAULT in glibc), ADAPTIVE_NP */
		kind = KLP_K_NORMAL;
		break;
	}
	memset(pm, 0, sizeof(*pm));
	if (cfg->mutex_impl == KLP_I_ADAPTIVE)
		kl_mutex_init(&m->u.adaptive);
	else if (cfg->mutex_impl == KLP_I_TICKET)
		kl_ticket_init(&m->u.fifo.l.ticket);
	else
		kl_mcs_init(&m->u.fifo.l.mcs);
	/* The program publishes the mutex to other threads after init returns. */
	atomic_store_explicit(&m->tag, KLP_TAG(cfg->mutex_impl, kind), memory_order_release);
	return 0;
}

KLP_EXPORT int pthread_mutex_destroy(pthread_mutex_t *pm)
{
	uint64_t t;

	KLP_ENTER();
	t = klp_mutex_tag(M(pm));
	return t == 0 ? KLP_REAL(pthread_mutex_destroy)(pm) : mutex_destroy_tagged(M(pm), t);
}

/* Robustness and priority ceilings exist only on glibc's mutexes; on ours these fail the
 * way glibc's do on a mutex without the attribute. */
KLP_EXPORT int pthread_mutex_consistent(pthread_mutex_t *pm)
{
	KLP_ENTER();
	if (klp_mutex_tag(M(pm)) == 0)
		return KLP_REAL(pthread_mutex_consistent)(pm);
	return EINVAL;
}

KLP_EXPORT int pthread_mutex_getprioceiling(const pthread_mutex_t *pm, int *ceiling)
{
	pthread_mutex_t *w = (pthread_mutex_t *)(uintptr_t)pm; /* adoption may write the tag */

	KLP_ENTER();
	if (klp_mutex_tag(M(w)) == 0)
		return KLP_REAL(pthread_mutex_getprioceiling)(pm, ceiling);
	return EINVAL;
}

KLP_EXPORT int pthread_mutex_setprioceiling(pthread_mutex_t *pm, int ceiling, int *old)
{
	KLP_ENTER();
	if (klp_mutex_tag(M(pm)) == 0)
		return KLP_REAL(pthread_mutex_setprioceiling)(pm, ceiling, old);
	return EINVAL;
}
