/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/hashlock.c - kl_hashlock, hashed lock tables (lock striping), and kl_lockobj,
 * reference-counted shared lock objects.
 *
 * WHAT. FreeBSD's mtx_pool (kern_mtxpool.c) and NetBSD's hashed locks (pmap's 32
 * pv_hash_locks over 32768 buckets, the turnstile chain locks) as a library object: a
 * power-of-two array of stripe locks, each alone in its false-sharing unit (KL_ARCH_PAD),
 * and a hash from an object's address to a stripe. kl_lockobj is NetBSD's mutex_obj: a
 * kl_mutex in its own cache line with a reference count, so that several objects can
 * share one lock and be freed in any order.
 *
 * The hash (Knuth, TAOCP 6.4, "Fibonacci hashing"): with n = 2^b stripes,
 *     index(key) = ((addr >> 6) * 0x9e3779b97f4a7c15) >> (64 - b)
 * 0x9e37... is 2^64 / phi. Multiplying by it and keeping the TOP b bits spreads any
 * arithmetic progression of addresses (an array of objects) almost evenly (the
 * three-distance theorem), and the top bits depend on every bit of the input. The low 6
 * bits are shifted off first: they are alignment (zero for most objects), and a
 * multiplier shifted left by them would lose its top bits; and keys in one 64-byte line
 * should share a stripe anyway (they share a cache line). Computed as (x >> 1) >> (63 - b)
 * so that b = 0 (one stripe) needs no special case (a shift by 64 is undefined).
 *
 * Instrumentation (hooks.h). The stripes are kl_mutex/kl_ticket and report their own
 * events through the seam, with the caller of kl_hashlock_* as the site (the *_at entry
 * points of mutex_impl.h and ticket_impl.h), so lockstat rows, witness and TSan see the
 * user's call site, never this file. The table reports no acquisition events of its own
 * (they would be counted twice); it announces its stripes as a lock group
 * (kli_hook_group): reports then name a stripe as "stripe i of hashlock <name>", and
 * lockstat folds the stripes' rows into one row per table, in a "hashlock" section. The
 * table itself is created/destroyed through the seam (so kl_lock_set_name(h) works and
 * is forgotten at destroy). Witness puts every stripe in the table's class (group
 * members borrow the owner's), so a second plain kl_hashlock_lock() while holding a key
 * is "a second lock of the same class" (the leaf rule); lock2/lockn announce each stripe
 * after the first with kli_hook_nest_ordered() (I3's order: intended nesting).
 *
 * STATE (struct kl_hashlock, written only by init and destroy):
 *   stripes   nstripes struct hl_stripe (a kl_mutex or a kl_ticket, padded to
 *             KL_ARCH_PAD), preceded in the same allocation by struct hl_head (the lock
 *             group node, below)
 *   shift     63 - log2(nstripes)
 *   flags     KL_HASHLOCK_TICKET or 0: the stripe kind, fixed for the table's life
 *   magic     HL_MAGIC while live, HL_DEAD after destroy (debug builds check it on every
 *             call; destroy checks it in every build)
 *
 * INVARIANTS.
 *   I1 A key's stripe never changes while the table lives (the hash depends on the key
 *      and nstripes only), so lock and unlock of one key always meet the same stripe.
 *   I2 Every key that maps to stripe i is protected by stripe i's lock and only by it.
 *   I3 lock2/lockn take stripes in strictly increasing index order, each stripe once
 *      (the double-lock rule: uvm_pagelock2 orders by address, Linux double_rq_lock by
 *      runqueue). With the leaf rule (a thread holding keys of a table takes no more of
 *      them except through one lock2/lockn call), every thread waiting for a stripe holds
 *      only lower stripes of that table, so the waits-for relation follows the index
 *      order and can have no cycle: no deadlock, whatever keys collide.
 *
 * ORDERING. Nothing of its own. Every acquisition and release is the stripe
 * lock's (kl_mutex M1/M2, kl_ticket T2/T3 - their files have the argument); a key's data
 * is ordered by its stripe exactly as by a lock of its own. The table's fields are
 * written before the table is shared (init) and after it is no longer used (destroy);
 * whatever the program uses to share it (thread creation, a release store) orders them.
 * kl_lockobj's reference count is the usual pattern:
 *   R1 hold: relaxed increment - the caller already owns a reference, so the object
 *      cannot go away, and taking one more publishes nothing.
 *   R2 free: release decrement - this thread's uses of the object happen before ...
 *   R3 ... the acquire load of the count by the thread that dropped the last reference,
 *      which then destroys and frees it (pairs with every R2: each earlier decrement
 *      heads a release sequence that ends in this thread's own RMW, the value R3 reads;
 *      Linux refcount_dec_and_test, NetBSD membar_release/membar_acquire around
 *      mutex_obj_free's decrement). A load rather than an acquire fence: ThreadSanitizer
 *      does not model standalone fences and would report the free as a race.
 *
 * COSTS. Advantages (after kern_mtxpool.c's list):
 *  - memory: nstripes locks, however many objects; nothing per object;
 *  - no lifetime problem: objects may come and go at any time, the locks stay;
 *  - contention spread over nstripes lines instead of one;
 *  - cheap: one multiply and shift in front of the stripe lock's own fast path.
 * Disadvantages:
 *  - false contention: unrelated objects that hash to one stripe wait for each other
 *    (about (threads - 1) / nstripes of acquisitions collide when every thread holds a
 *    stripe all the time);
 *  - leaf only: holding a key makes every other key of the table unsafe to take by
 *    itself (RULES in klock/hashlock.h);
 *  - no per-object state (owner, waiters, name): misuse reports name the stripe;
 *  - a table is sized once; a bad guess means more collisions, not failure.
 *
 * LIMITS. Keys are addresses, hashed as integers: any value works, but keys in one
 * 64-byte block share a stripe. lockn takes at most KL_HASHLOCK_LOCKN_MAX keys. No
 * timed lock and no read side (a table of kl_rwlock stripes would be the next step).
 * Destroy requires quiescence; EBUSY is best effort (a stripe locked concurrently with
 * destroy is a use-after-free bug it may not see).
 */
#include <stdlib.h>
#include <string.h>

#include <klock/hashlock.h>
#include <klock/topology.h>
#include "hooks.h"
#include "mutex_impl.h"
#include "ticket_impl.h"

#define HL_KIND KLI_KIND_HASHLOCK
/* Fibonacci hashing multiplier: 2^64 / golden ratio (Knuth). */
#define HL_FIB 0x9e3779b97f4a7c15ull
/* Key bits dropped before hashing: alignment, and keys in one cache line share a stripe. */
#define HL_KEY_SHIFT 6
/* Automatic size: the largest power of two <= this many stripes per online CPU (so 4-8). */
#define HL_AUTO_PER_CPU 8u
/* struct kl_hashlock.magic of a live table, and of a destroyed one. */
#define HL_MAGIC 0x6b6c686cu   /* "klhl" */
#define HL_DEAD 0xdead4c4bu
/* struct hl_lockobj.magic of a live lock object, and of one being freed. */
#define LOCKOBJ_MAGIC 0x6b6c6f62u   /* "klob" */
#define LOCKOBJ_DEAD 0xdead0b1eu

/* One stripe: a lock alone in its false-sharing unit. */
struct hl_stripe {
	union {
		struct kl_mutex mutex;
		struct kl_ticket ticket;
	} u;
} KL_PADDED;

/* In front of the stripes, in the same allocation: the lock-group node (hooks.h). */
struct hl_head {
	struct kli_lock_group group;
} KL_PADDED;

/* A shared lock object: the mutex the user sees, first. */
struct hl_lockobj {
	struct kl_mutex mutex;
	_Atomic uint32_t refs;
	uint32_t magic;
} KL_PADDED;

_Static_assert(sizeof(struct hl_stripe) == KL_ARCH_PAD, "a stripe is one padding unit");
_Static_assert(offsetof(struct hl_lockobj, mutex) == 0, "a lock object starts with its mutex");

static inline struct hl_stripe *hl_stripe(const struct kl_hashlock *h, unsigned i)
{
	return (struct hl_stripe *)h->stripes + i;
}

static inline struct hl_head *hl_head(const struct kl_hashlock *h)
{
	return (struct hl_head *)h->stripes - 1;
}

static inline unsigned hl_index(const struct kl_hashlock *h, const void *key)
{
	uint64_t x = ((uint64_t)(uintptr_t)key >> HL_KEY_SHIFT) * HL_FIB;

	return (unsigned)((x >> 1) >> h->shift);
}

static inline bool hl_ticket(const struct kl_hashlock *h)
{
	return (h->flags & KL_HASHLOCK_TICKET) != 0;
}

/* ---- reports ---------------------------------------------------------------------------- */

static KL_COLD KL_NOINLINE void hl_report(const void *lock, const char *kind, const char *what,
					  const void *site, const char *detail)
{
	kli_report(what, kind, lock, site, detail);
}

/* Debug builds: is @h a live table? Reports (naming the caller) when it is not. */
static KL_ALWAYS_INLINE bool hl_live(const struct kl_hashlock *h, const void *site)
{
	if (kl_likely(h->magic == HL_MAGIC))
		return true;
	hl_report(h, kli_kind_name(HL_KIND),
		  h->magic == HL_DEAD ? "use after destroy" : "use of an uninitialised table",
		  site, NULL);
	return false;
}

/* ---- one stripe, on behalf of the caller at @site --------------------------------------- */

static KL_ALWAYS_INLINE void hl_lock(struct kl_hashlock *h, unsigned i, const void *site)
{
	struct hl_stripe *s = hl_stripe(h, i);

	/* Misuse (a relock: the caller holds the stripe, maybe through another key) is
	 * reported by the stripe, naming @site and "stripe i of hashlock <table>". */
	if (hl_ticket(h))
		kli_ticket_lock_at(&s->u.ticket, site);
	else
		kli_mutex_lock_from(&s->u.mutex, site);
}

static KL_ALWAYS_INLINE bool hl_trylock(struct kl_hashlock *h, unsigned i, const void *site)
{
	struct hl_stripe *s = hl_stripe(h, i);

	return hl_ticket(h) ? kli_ticket_trylock_at(&s->u.ticket, site)
			    : kli_mutex_trylock_at(&s->u.mutex, site);
}

static KL_ALWAYS_INLINE void hl_unlock(struct kl_hashlock *h, unsigned i, const void *site)
{
	struct hl_stripe *s = hl_stripe(h, i);

	if (hl_ticket(h))
		kli_ticket_unlock_at(&s->u.ticket, site);
	else
		kli_mutex_unlock_at(&s->u.mutex, site);
}

/* Whether stripe @i is locked or waited on right now (destroy's check). */
static bool hl_busy(const struct kl_hashlock *h, unsigned i)
{
	const struct hl_stripe *s = hl_stripe(h, i);

	if (hl_ticket(h))
		return kl_ticket_is_locked(&s->u.ticket);
	return atomic_load_explicit(&s->u.mutex.owner, memory_order_relaxed) != 0 ||
	       atomic_load_explicit(&s->u.mutex.spinq, memory_order_relaxed) != 0;
}

/* The sorted, distinct stripe indices of @keys into @idx; returns how many. */
static unsigned hl_gather(const struct kl_hashlock *h, const void *const *keys, size_t n,
			  unsigned *idx)
{
	unsigned m = 0;

	for (size_t k = 0; k < n; k++) {
		unsigned x = hl_index(h, keys[k]), j = m;

		while (j > 0 && idx[j - 1] > x)   /* insertion sort: n is small */
			j--;
		if (j > 0 && idx[j - 1] == x)
			continue;                  /* a stripe already in the set */
		memmove(&idx[j + 1], &idx[j], (m - j) * sizeof(*idx));
		idx[j] = x;
		m++;
	}
	return m;
}

/* ---- the table -------------------------------------------------------------------------- */

static unsigned hl_auto_stripes(void)
{
	unsigned want = HL_AUTO_PER_CPU * kl_topology()->online_cpus, n = 1;

	while (2 * n <= want && n < KL_HASHLOCK_MAX_STRIPES)
		n <<= 1;
	return n;
}

static unsigned hl_log2(unsigned n)
{
	unsigned b = 0;

	while ((1u << b) < n)
		b++;
	return b;
}

int kl_hashlock_init_flags(struct kl_hashlock *h, unsigned nstripes, unsigned flags)
{
	struct hl_head *head;
	void *mem;

	if (nstripes == 0)
		nstripes = hl_auto_stripes();
	if ((nstripes & (nstripes - 1)) != 0 || nstripes > KL_HASHLOCK_MAX_STRIPES ||
	    (flags & ~KL_HASHLOCK_TICKET) != 0)
		return EINVAL;
	mem = aligned_alloc(KL_ARCH_PAD, sizeof(struct hl_head) +
					 (size_t)nstripes * sizeof(struct hl_stripe));
	if (mem == NULL)
		return ENOMEM;
	head = mem;
	h->stripes = head + 1;
	h->shift = 63 - hl_log2(nstripes);
	h->nstripes = nstripes;
	h->flags = flags;
	for (unsigned i = 0; i < nstripes; i++) {
		if (hl_ticket(h))
			kl_ticket_init(&hl_stripe(h, i)->u.ticket);
		else
			kl_mutex_init(&hl_stripe(h, i)->u.mutex);
	}
	head->group = (struct kli_lock_group){
		.owner = h, .base = h->stripes, .stride = sizeof(struct hl_stripe),
		.count = nstripes, .kind = HL_KIND, .member = "stripe",
	};
	kli_hook_group(&head->group);
	kli_hook_created(h, HL_KIND, 0);
	h->magic = HL_MAGIC;
	return 0;
}

int kl_hashlock_init(struct kl_hashlock *h, unsigned nstripes)
{
	return kl_hashlock_init_flags(h, nstripes, 0);
}

int kl_hashlock_destroy(struct kl_hashlock *h)
{
	unsigned i;

	if (h->magic != HL_MAGIC) {
		if (KLOCK_DEBUG_LOCKS)
			hl_live(h, KLI_SITE());
		return EINVAL;
	}
	for (i = 0; i < h->nstripes; i++) {
		if (hl_busy(h, i)) {
			if (KLOCK_DEBUG_LOCKS)
				hl_report(h, kli_kind_name(HL_KIND), "destroy of a held lock",
					  KLI_SITE(), NULL);
			return EBUSY;
		}
	}
	kli_hook_ungroup(&hl_head(h)->group);
	for (i = 0; i < h->nstripes; i++) {
		if (hl_ticket(h))
			kl_ticket_destroy(&hl_stripe(h, i)->u.ticket);
		else
			kl_mutex_destroy(&hl_stripe(h, i)->u.mutex);
	}
	kli_hook_destroyed(h, HL_KIND);
	free(hl_head(h));
	h->stripes = NULL;
	h->magic = HL_DEAD;
	return 0;
}

unsigned kl_hashlock_index(const struct kl_hashlock *h, const void *key)
{
	return hl_index(h, key);
}

unsigned kl_hashlock_nstripes(const struct kl_hashlock *h)
{
	return h->nstripes;
}

void kl_hashlock_lock(struct kl_hashlock *h, const void *key)
{
	if (KLOCK_DEBUG_LOCKS && !hl_live(h, KLI_SITE()))
		return;
	hl_lock(h, hl_index(h, key), KLI_SITE());
}

bool kl_hashlock_trylock(struct kl_hashlock *h, const void *key)
{
	if (KLOCK_DEBUG_LOCKS && !hl_live(h, KLI_SITE()))
		return false;
	return hl_trylock(h, hl_index(h, key), KLI_SITE());
}

void kl_hashlock_unlock(struct kl_hashlock *h, const void *key)
{
	if (KLOCK_DEBUG_LOCKS && !hl_live(h, KLI_SITE()))
		return;
	hl_unlock(h, hl_index(h, key), KLI_SITE());
}

void kl_hashlock_lock2(struct kl_hashlock *h, const void *a, const void *b)
{
	unsigned ia, ib;

	if (KLOCK_DEBUG_LOCKS && !hl_live(h, KLI_SITE()))
		return;
	ia = hl_index(h, a);
	ib = hl_index(h, b);
	if (ia > ib) {   /* I3: lower stripe first */
		unsigned t = ia;

		ia = ib;
		ib = t;
	}
	hl_lock(h, ia, KLI_SITE());
	if (ib != ia) {  /* I3: a shared stripe once */
		kli_hook_nest_ordered(); /* same class as ia, in I3's order: intended */
		hl_lock(h, ib, KLI_SITE());
	}
}

void kl_hashlock_unlock2(struct kl_hashlock *h, const void *a, const void *b)
{
	unsigned ia, ib;

	if (KLOCK_DEBUG_LOCKS && !hl_live(h, KLI_SITE()))
		return;
	ia = hl_index(h, a);
	ib = hl_index(h, b);
	hl_unlock(h, ia, KLI_SITE());
	if (ib != ia)
		hl_unlock(h, ib, KLI_SITE());
}

int kl_hashlock_lockn(struct kl_hashlock *h, const void *const *keys, size_t n)
{
	unsigned idx[KL_HASHLOCK_LOCKN_MAX], m;

	if (n > KL_HASHLOCK_LOCKN_MAX)
		return EINVAL;
	if (KLOCK_DEBUG_LOCKS && !hl_live(h, KLI_SITE()))
		return EINVAL;
	m = hl_gather(h, keys, n, idx);
	for (unsigned j = 0; j < m; j++) { /* I3: increasing, each once */
		if (j > 0)
			kli_hook_nest_ordered(); /* same class, in I3's order: intended */
		hl_lock(h, idx[j], KLI_SITE());
	}
	return 0;
}

void kl_hashlock_unlockn(struct kl_hashlock *h, const void *const *keys, size_t n)
{
	unsigned idx[KL_HASHLOCK_LOCKN_MAX], m;

	if (n > KL_HASHLOCK_LOCKN_MAX)
		return;
	if (KLOCK_DEBUG_LOCKS && !hl_live(h, KLI_SITE()))
		return;
	m = hl_gather(h, keys, n, idx);
	while (m > 0)
		hl_unlock(h, idx[--m], KLI_SITE());
}

/* ---- shared lock objects ---------------------------------------------------------------- */

static inline struct hl_lockobj *hl_obj(struct kl_mutex *m)
{
	return (struct hl_lockobj *)m;   /* the mutex is the first member */
}

/* Debug builds: is @o a live lock object with a reference? */
static bool hl_obj_ok(struct hl_lockobj *o, const void *site)
{
	if (o->magic != LOCKOBJ_MAGIC) {
		hl_report(o, "lockobj", "not a live lock object (freed, or not from "
			  "kl_lockobj_alloc)", site, NULL);
		return false;
	}
	if (atomic_load_explicit(&o->refs, memory_order_relaxed) == 0) {
		hl_report(o, "lockobj", "use of a lock object with no reference left", site, NULL);
		return false;
	}
	return true;
}

struct kl_mutex *kl_lockobj_alloc(void)
{
	struct hl_lockobj *o = aligned_alloc(KL_ARCH_PAD, sizeof(*o));

	if (o == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	kl_mutex_init(&o->mutex);
	atomic_init(&o->refs, 1);
	o->magic = LOCKOBJ_MAGIC;
	return &o->mutex;
}

void kl_lockobj_hold(struct kl_mutex *m)
{
	struct hl_lockobj *o = hl_obj(m);

	if (KLOCK_DEBUG_LOCKS && !hl_obj_ok(o, KLI_SITE()))
		return;
	atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);   /* R1 */
}

bool kl_lockobj_free(struct kl_mutex *m)
{
	struct hl_lockobj *o = hl_obj(m);

	if (KLOCK_DEBUG_LOCKS && !hl_obj_ok(o, KLI_SITE()))
		return false;
	/* R2: release, pairs with R3 in whichever thread drops the last reference. */
	if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_release) != 1)
		return false;
	(void)atomic_load_explicit(&o->refs, memory_order_acquire); /* R3: pairs with every R2 */
	if (atomic_load_explicit(&m->owner, memory_order_relaxed) != 0 ||
	    atomic_load_explicit(&m->spinq, memory_order_relaxed) != 0) {
		hl_report(m, kli_kind_name(KLI_KIND_MUTEX), "last reference to a lock object "
			  "dropped while it is locked or waited on", KLI_SITE(),
			  "the object is not freed");
		return false;
	}
	kl_mutex_destroy(m);
	o->magic = LOCKOBJ_DEAD;
	free(o);
	return true;
}
