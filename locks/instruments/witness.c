/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/instruments/witness.c - the lock-order checker: FreeBSD WITNESS / Linux lockdep for userspace.
 *
 * What it is. A consumer of the hook seam (hooks.h), built with -Dwitness=true. It never
 * looks inside a lock: it sees acquire (before trying), acquired, release, created and
 * destroyed events with the lock's address, kind, flags and the caller's return address.
 *
 * State.
 *   per thread   struct kli_witness_thread, hung off the thread record (thread.h): the
 *                stack of held locks {lock, class, flags, site}, the subclass set by
 *                kl_witness_nest() for the next acquisition, and two small caches (lock ->
 *                class; class pairs already known to be in order).
 *   per lock     struct wit_lock in an address-keyed side table: kind, spin-ness, the
 *                explicit class name, the resolved class of each subclass.
 *   classes      struct wit_class: a name ("cache", "cache/1" for subclass 1, or
 *                "mutex 0x..." for a lock that is its own class) and its out-edges. A class
 *                id is recycled when a per-instance class dies with its lock; `gen` changes
 *                on every reuse, and every reference (edge, cache, held entry) carries the
 *                gen it saw, so a stale reference simply never matches.
 *   graph        edge A -> B: "B was acquired (blocking) while A was held", with the locks
 *                and sites of the first time it was seen. The graph is kept acyclic: an
 *                acquisition whose edge would close a cycle is reported, not added.
 *
 * Checks, in kli_witness_acquire() (blocking attempts only: a trylock cannot deadlock):
 *   recursion     the lock is on this thread's stack, the attempt lacks KLI_HF_RECURSE and
 *                 the lock was not created with it (a lock that permits recursion, such as
 *                 an rmlock with KL_RM_RECURSE, says so once, in created);
 *   spin context  a sleeping lock while a KLI_HF_SPIN lock is held;
 *   same class    a lock of a class already held (DUPOK and subclasses say "intended");
 *   order         for each held class H: edge H -> B known (cached) or B reaches H in the
 *                 graph (a reversal: report the path with its sites) or add H -> B.
 * release: the lock must be on this thread's stack (else: held by another thread, or by
 * no one). destroyed: no thread may hold it. thread exit: the stack must be empty.
 *
 * Concurrency. One internal wordlock (wit_mutex) guards the side tables and the graph; it is
 * taken only on cache misses, i.e. on a thread's first use of a lock or a class pair, so a
 * steady-state acquisition costs a few cache lookups and no shared write. Stacks are written
 * only by their thread; other threads read them (reports, dump) with relaxed atomics - a
 * snapshot, good enough to name a culprit. wit_zapgen (release/acquire) invalidates every
 * thread's lock cache when any lock is destroyed or re-classed.
 *
 * Reports: one buffer, one write(2) to stderr, then KLOCK_WITNESS=warn (go on) or abort.
 * Reversals and same-class nesting are reported once per class pair; misuse every time.
 *
 * Limits. The seam does not tell a timed attempt from a trylock (both KLI_HF_TRY), so timed
 * attempts get no order or spin-context check. Classes: WIT_MAX_CLASSES (lockdep's 8191);
 * past that, new locks are not order-checked (one message says so). A thread holding more
 * than WIT_MAX_HELD locks at once: the extra ones are not tracked (one message says so) but
 * counted (`untracked`), so releasing them is no "unlock of a lock not held". Out of memory
 * (a lock record, a class's edge array, a thread's held stack): witness cannot go on
 * without false reports (locks it cannot class would all look like one class) or missed
 * ones (an edge it cannot store), so it prints once that checking stopped and turns itself
 * off (wit_stop(): wit_mode becomes WIT_OFF for every thread). Read and write sides are
 * not told apart in the graph (as WITNESS): an rwlock read inside B and B inside its write
 * side is a reversal, and it is one - a waiting writer blocks new readers.
 */
#include <execinfo.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include <klock/names.h>
#include <klock/witness.h>
#include "hooks.h"
#include "names_impl.h"
#include "thread.h"
#include "witness_impl.h"
#include "wordlock.h"

#if !KLOCK_WITNESS
#error "witness.c is the -Dwitness=true build; meson picks witness_off.c otherwise"
#endif

/* Locks one thread may hold at once (lockdep: MAX_LOCK_DEPTH 48). */
#define WIT_MAX_HELD 32
/* Lock classes (lockdep: MAX_LOCKDEP_KEYS 8191). Id 0 means "no class". */
#define WIT_MAX_CLASSES 8192
#define WIT_NAME_MAX 64
/* Chains of the lock side table and slots of the named-class table (powers of two). */
#define WIT_LOCK_BUCKETS 4096u
#define WIT_NAME_SLOTS (2u * WIT_MAX_CLASSES)
/* Per-thread caches (direct mapped, powers of two). */
#define WIT_LCACHE 16u
#define WIT_PCACHE 64u
/* Class pairs remembered as already reported (reversal, same class, spin context). */
#define WIT_REPORTED 1024u
/* One report's text, and the stack depth it shows. */
#define WIT_REPORT_MAX 8192
#define WIT_STACK_DEPTH 24
/* Fibonacci hashing multiplier (2^64 / golden ratio). */
#define FIB_MULT 0x9e3779b97f4a7c15ull

enum wit_mode { WIT_OFF, WIT_WARN, WIT_ABORT };
enum wit_pairkind { PAIR_REVERSAL = 1, PAIR_SAMECLASS, PAIR_SPIN };

struct wit_edge {
	uint32_t to, to_gen;
	const void *held_lock, *held_site;  /* held, and where it had been taken */
	const void *acq_lock, *acq_site;    /* then acquired, and where */
	enum kli_kind held_kind, acq_kind;
	pid_t tid;
};

struct wit_class {
	char name[WIT_NAME_MAX];
	uint32_t gen;             /* changes on every (re)use of the id */
	bool live, named, dupok;
	struct wit_edge *out;
	uint32_t nout, capout;
	uint32_t visit;           /* DFS stamp */
	uint32_t parent, parent_edge; /* DFS back-pointer; parent doubles as free-list link */
};

struct wit_lock {
	struct wit_lock *next;
	const void *lock;
	enum kli_kind kind;
	bool spin, dupok;
	bool recurse;             /* created with KLI_HF_RECURSE: recursion is permitted */
	bool borrowed;            /* a group member (hashlock stripe) in its owner's class */
	char cname[WIT_NAME_MAX]; /* kl_witness_set_class() name, "" if none */
	uint32_t cls[KL_WITNESS_SUBCLASSES], gen[KL_WITNESS_SUBCLASSES];
};

/* What an acquisition resolves to. */
struct wit_ref {
	uint32_t cls, gen;
	bool spin, dupok, recurse;
};

struct wit_held {
	_Atomic(const void *) lock;
	_Atomic(const void *) site;
	struct wit_ref ref;
	unsigned flags;
	enum kli_kind kind;
};

struct kli_witness_thread {
	_Atomic unsigned nheld;
	unsigned nest;            /* subclass for the next acquisition, +1 (0: none) */
	unsigned pending_sub;     /* subclass of the attempt in progress */
	bool ordered;             /* next acquisition: a group member in the group's order */
	bool pending_ordered;     /* ... and the attempt in progress is one */
	bool overflow_reported;
	unsigned untracked;       /* acquisitions past WIT_MAX_HELD not yet released */
	struct wit_held held[WIT_MAX_HELD];
	struct {
		const void *lock;
		unsigned sub, zapgen;
		struct wit_ref ref;
	} lcache[WIT_LCACHE];
	struct {
		uint32_t a, agen, b, bgen;
	} pcache[WIT_PCACHE];
};

static _Atomic(enum wit_mode) wit_mode = WIT_WARN; /* WIT_OFF also after wit_stop() */
static struct kli_wordlock wit_mutex = KLI_WORDLOCK_INIT;
static _Atomic unsigned wit_zapgen;
static _Atomic unsigned long wit_reports;
static struct wit_class classes[WIT_MAX_CLASSES];
static uint32_t class_next = 1, class_free;
static bool classes_full_said;
static uint32_t name_slots[WIT_NAME_SLOTS];
static struct wit_lock *lock_table[WIT_LOCK_BUCKETS];
static struct wit_lock *lock_free;
static uint64_t reported[WIT_REPORTED];
static uint32_t dfs_stack[WIT_MAX_CLASSES], dfs_stamp;

/* ---- reports ------------------------------------------------------------------------ */

struct wbuf {
	size_t n;
	char s[WIT_REPORT_MAX];
};

static void __attribute__((format(printf, 2, 3))) wb_printf(struct wbuf *b, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (b->n >= sizeof(b->s) - 1)
		return;
	va_start(ap, fmt);
	k = vsnprintf(b->s + b->n, sizeof(b->s) - b->n, fmt, ap);
	va_end(ap);
	if (k > 0)
		b->n = b->n + (size_t)k < sizeof(b->s) ? b->n + (size_t)k : sizeof(b->s) - 1;
}

static void wb_lock(struct wbuf *b, const void *lock, enum kli_kind kind)
{
	char d[160];

	kli_lock_describe(lock, kli_kind_name(kind), d, sizeof(d));
	wb_printf(b, "%s", d);
}

static void wb_site(struct wbuf *b, const void *site)
{
	char s[200];

	kli_symbolize(site, s, sizeof(s));
	wb_printf(b, "%s", s);
}

static void wb_class(struct wbuf *b, uint32_t cls)
{
	if (cls == 0)
		wb_printf(b, " [no class]");
	else if (classes[cls].named)
		wb_printf(b, " [class \"%s\"]", classes[cls].name);
	else
		wb_printf(b, " [class: this lock]");
}

/* The reporting thread's stack, skipping witness's own frames. */
static void wb_stack(struct wbuf *b)
{
	void *pc[WIT_STACK_DEPTH];
	int n = backtrace(pc, WIT_STACK_DEPTH);

	wb_printf(b, " stack:\n");
	for (int i = 2; i < n; i++) {
		wb_printf(b, "   #%d ", i - 2);
		wb_site(b, pc[i]);
		wb_printf(b, "\n");
	}
}

static void wb_emit(struct wbuf *b)
{
	wb_stack(b);
	atomic_fetch_add_explicit(&wit_reports, 1, memory_order_relaxed);
	if (write(STDERR_FILENO, b->s, b->n) < 0) {
		/* nothing better to do with a failing stderr */
	}
	if (wit_mode == WIT_ABORT)
		abort();
}

static void wb_begin(struct wbuf *b, const char *what)
{
	b->n = 0;
	wb_printf(b, "klock: witness: %s", what);
}

/* Out of memory for @what: say so once, and stop checking (see the top). */
static KL_COLD KL_NOINLINE void wit_stop(const char *what)
{
	static _Atomic bool said;
	char msg[160];
	int n;

	if (atomic_exchange_explicit(&said, true, memory_order_relaxed))
		return;
	n = snprintf(msg, sizeof(msg), "klock: witness: out of memory for %s; lock-order "
		     "checking stopped\n", what);
	wit_mode = WIT_OFF;
	if (n > 0 && (size_t)n >= sizeof(msg))
		n = (int)sizeof(msg) - 1;
	if (n > 0 && write(STDERR_FILENO, msg, (size_t)n) < 0) {
		/* nothing better to do with a failing stderr */
	}
}

/* True the first time a (kind, class a, class b) triple is reported. Under wit_mutex. */
static bool first_report(enum wit_pairkind k, struct wit_ref a, struct wit_ref b)
{
	uint64_t key = ((uint64_t)a.cls << 40 | (uint64_t)b.cls << 16 | (uint64_t)k) ^
		       ((uint64_t)(a.gen * 31u + b.gen) << 48);
	unsigned i = (unsigned)((key * FIB_MULT) >> 54) & (WIT_REPORTED - 1);

	key |= 1; /* 0 marks an empty slot */
	for (unsigned probe = 0; probe < WIT_REPORTED; probe++, i = (i + 1) & (WIT_REPORTED - 1)) {
		if (reported[i] == key)
			return false;
		if (reported[i] == 0) {
			reported[i] = key;
			return true;
		}
	}
	return true; /* table full: report again rather than stay silent */
}

/* ---- classes -------------------------------------------------------------------------- */

static uint32_t class_alloc(const char *name, bool named)
{
	uint32_t id;
	struct wit_class *c;

	if (class_free != 0) {
		id = class_free;
		class_free = classes[id].parent;
	} else if (class_next < WIT_MAX_CLASSES) {
		id = class_next++;
	} else {
		if (!classes_full_said) {
			classes_full_said = true;
			fprintf(stderr, "klock: witness: out of lock classes (%d): locks created "
				"from now on are not order-checked\n", WIT_MAX_CLASSES);
		}
		return 0;
	}
	c = &classes[id];
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->gen++;
	c->live = true;
	c->named = named;
	c->dupok = false;
	c->nout = 0;
	return id;
}

static void class_zap(uint32_t id)
{
	struct wit_class *c = &classes[id];

	free(c->out);
	c->out = NULL;
	c->nout = c->capout = 0;
	c->live = false;
	c->gen++;
	c->parent = class_free;
	class_free = id;
}

static unsigned name_hash(const char *s)
{
	uint64_t h = 0;

	while (*s)
		h = (h ^ (unsigned char)*s++) * FIB_MULT;
	return (unsigned)(h >> 40) & (WIT_NAME_SLOTS - 1);
}

/* The named class @name, created on first use (named classes live for good). */
static uint32_t class_named(const char *name)
{
	unsigned i = name_hash(name);

	for (unsigned probe = 0; probe < WIT_NAME_SLOTS; probe++) {
		uint32_t id = name_slots[i];

		if (id == 0) {
			id = class_alloc(name, true);
			name_slots[i] = id;
			return id;
		}
		if (strcmp(classes[id].name, name) == 0)
			return id;
		i = (i + 1) & (WIT_NAME_SLOTS - 1);
	}
	return 0;
}

static bool ref_live(struct wit_ref r)
{
	return r.cls != 0 && classes[r.cls].live && classes[r.cls].gen == r.gen;
}

/* ---- the lock side table ----------------------------------------------------------------- */

static unsigned lock_bucket(const void *lock)
{
	return (unsigned)(((uint64_t)(uintptr_t)lock * FIB_MULT) >> 52) & (WIT_LOCK_BUCKETS - 1);
}

static struct wit_lock **lock_slot(const void *lock)
{
	struct wit_lock **pp = &lock_table[lock_bucket(lock)];

	while (*pp != NULL && (*pp)->lock != lock)
		pp = &(*pp)->next;
	return pp;
}

static bool kind_spins(enum kli_kind kind, unsigned flags)
{
	return (flags & KLI_HF_SPIN) || kind == KLI_KIND_TICKET || kind == KLI_KIND_MCS;
}

/* Drops the lock's per-instance classes (its named ones stay). */
static void lock_unclass(struct wit_lock *l)
{
	for (unsigned s = 0; s < KL_WITNESS_SUBCLASSES; s++) {
		if (l->cls[s] != 0 && !l->borrowed && !classes[l->cls[s]].named &&
		    classes[l->cls[s]].gen == l->gen[s])
			class_zap(l->cls[s]);
		l->cls[s] = 0;
	}
	l->borrowed = false; /* the owner's class dies with the owner, not with a member */
}

/* The record for @lock, created if missing. Under wit_mutex. NULL only without memory. */
static struct wit_lock *lock_get(const void *lock, enum kli_kind kind, unsigned flags)
{
	struct wit_lock **pp = lock_slot(lock), *l = *pp;

	if (l != NULL) {
		if (l->kind == KLI_KIND_COUNT && kind != KLI_KIND_COUNT) {
			l->kind = kind; /* classed by kl_witness_set_class() before first use */
			l->spin = kind_spins(kind, flags);
		}
		return l;
	}
	l = lock_free;
	if (l != NULL)
		lock_free = l->next;
	else if ((l = malloc(sizeof(*l))) == NULL)
		return NULL;
	memset(l, 0, sizeof(*l));
	l->lock = lock;
	l->kind = kind;
	l->spin = kind_spins(kind, flags);
	*pp = l;
	return l;
}

static struct wit_ref lock_class(struct wit_lock *l, unsigned sub);

/*
 * A member of a lock group (a kl_hashlock stripe) with no name or class of its own is in
 * its owner's class: all stripes of one table are one class, so a plain second
 * kl_hashlock_lock() while holding a key is "a second lock of the same class", and
 * lock2/lockn say their nesting is intended (kli_witness_nest_ordered). Under wit_mutex.
 */
static bool group_class(struct wit_lock *l, unsigned sub, struct wit_ref *r)
{
	struct kli_lock_member m;
	struct wit_lock *o;
	struct wit_ref orf;

	if (!kli_lock_group_find(l->lock, &m))
		return false;
	o = lock_get(m.owner, (enum kli_kind)m.kind, 0);
	if (o == NULL)
		return false;
	orf = lock_class(o, sub);
	r->cls = orf.cls;
	r->gen = orf.gen;
	r->dupok = r->dupok || orf.dupok;
	l->cls[sub] = r->cls;
	l->gen[sub] = r->gen;
	l->borrowed = true;
	return true;
}

/* Fixes the class of (@l, @sub) on first use. Under wit_mutex. */
static struct wit_ref lock_class(struct wit_lock *l, unsigned sub)
{
	struct wit_ref r = { l->cls[sub], l->gen[sub], l->spin, l->dupok, l->recurse };
	char base[WIT_NAME_MAX], full[WIT_NAME_MAX + 16];
	bool named = true;

	if (ref_live(r)) {
		r.dupok = r.dupok || classes[r.cls].dupok;
		return r;
	}
	if (l->cname[0] != '\0')
		snprintf(base, sizeof(base), "%s", l->cname);
	else if (kl_lock_get_name(l->lock, base, sizeof(base)) == 0) {
		if (group_class(l, sub, &r))
			return r;
		named = false;
		snprintf(base, sizeof(base), "%s %p", kli_kind_name(l->kind), l->lock);
	}
	if (sub != 0)
		snprintf(full, sizeof(full), "%s/%u", base, sub);
	else
		snprintf(full, sizeof(full), "%s", base);
	r.cls = named ? class_named(full) : class_alloc(full, false);
	r.gen = r.cls != 0 ? classes[r.cls].gen : 0;
	r.dupok = r.dupok || (r.cls != 0 && classes[r.cls].dupok);
	l->cls[sub] = r.cls;
	l->gen[sub] = r.gen;
	return r;
}

/* ---- per-thread state and caches --------------------------------------------------------- */

static struct kli_witness_thread *wit_self(void)
{
	struct kli_thread *t = kli_self();
	struct kli_witness_thread *w = atomic_load_explicit(&t->witness, memory_order_relaxed);

	if (kl_likely(w != NULL))
		return w;
	w = calloc(1, sizeof(*w));
	if (w == NULL) {
		static struct kli_witness_thread dummy; /* the calls in flight; then we are off */

		wit_stop("a thread's held-lock stack");
		return &dummy;
	}
	atomic_store_explicit(&t->witness, w, memory_order_release);
	return w;
}

static struct wit_ref lookup(struct kli_witness_thread *w, const void *lock,
			     enum kli_kind kind, unsigned flags, unsigned sub)
{
	unsigned zg = atomic_load_explicit(&wit_zapgen, memory_order_acquire); /* Z2 */
	unsigned i = (unsigned)(((uintptr_t)lock >> 4) + sub) & (WIT_LCACHE - 1);
	struct wit_ref r = { 0, 0, kind_spins(kind, flags), false, false };
	struct wit_lock *l;

	if (w->lcache[i].lock == lock && w->lcache[i].sub == sub && w->lcache[i].zapgen == zg)
		return w->lcache[i].ref;
	kli_wordlock_lock(&wit_mutex);
	l = lock_get(lock, kind, flags);
	if (l != NULL)
		r = lock_class(l, sub);
	kli_wordlock_unlock(&wit_mutex);
	if (l == NULL)
		wit_stop("a lock record");
	w->lcache[i].lock = lock;
	w->lcache[i].sub = sub;
	w->lcache[i].zapgen = zg;
	w->lcache[i].ref = r;
	return r;
}

static unsigned pcache_index(struct wit_ref a, struct wit_ref b)
{
	return (unsigned)(((uint64_t)a.cls * FIB_MULT + b.cls) >> 58) & (WIT_PCACHE - 1);
}

static bool pcache_hit(struct kli_witness_thread *w, struct wit_ref a, struct wit_ref b)
{
	unsigned i = pcache_index(a, b);

	return w->pcache[i].a == a.cls && w->pcache[i].agen == a.gen &&
	       w->pcache[i].b == b.cls && w->pcache[i].bgen == b.gen;
}

static void pcache_add(struct kli_witness_thread *w, struct wit_ref a, struct wit_ref b)
{
	unsigned i = pcache_index(a, b);

	w->pcache[i].a = a.cls;
	w->pcache[i].agen = a.gen;
	w->pcache[i].b = b.cls;
	w->pcache[i].bgen = b.gen;
}

/* ---- the order graph (all under wit_mutex) ----------------------------------------------- */

static bool edge_live(const struct wit_edge *e)
{
	return classes[e->to].live && classes[e->to].gen == e->to_gen;
}

static bool edge_exists(uint32_t from, uint32_t to)
{
	const struct wit_class *c = &classes[from];

	for (uint32_t i = 0; i < c->nout; i++)
		if (c->out[i].to == to && edge_live(&c->out[i]))
			return true;
	return false;
}

/* Depth-first search from @from; on success the parent pointers lead back from @to. */
static bool path_exists(uint32_t from, uint32_t to)
{
	uint32_t sp = 0;

	dfs_stamp++;
	classes[from].visit = dfs_stamp;
	dfs_stack[sp++] = from;
	while (sp > 0) {
		uint32_t c = dfs_stack[--sp];

		for (uint32_t i = 0; i < classes[c].nout; i++) {
			const struct wit_edge *e = &classes[c].out[i];

			if (!edge_live(e) || classes[e->to].visit == dfs_stamp)
				continue;
			classes[e->to].visit = dfs_stamp;
			classes[e->to].parent = c;
			classes[e->to].parent_edge = i;
			if (e->to == to)
				return true;
			dfs_stack[sp++] = e->to;
		}
	}
	return false;
}

/* Drops edges to dead classes, then makes room for one more. */
static bool edges_reserve(struct wit_class *c)
{
	uint32_t k = 0;
	struct wit_edge *n;

	for (uint32_t i = 0; i < c->nout; i++)
		if (edge_live(&c->out[i]))
			c->out[k++] = c->out[i];
	c->nout = k;
	if (c->nout < c->capout)
		return true;
	n = realloc(c->out, sizeof(*n) * (c->capout ? 2 * c->capout : 4));
	if (n == NULL) {
		wit_stop("an order edge");
		return false;
	}
	c->out = n;
	c->capout = c->capout ? 2 * c->capout : 4;
	return true;
}

static void edge_add(const struct wit_held *h, struct wit_ref b, const void *lock,
		     enum kli_kind kind, const void *site)
{
	struct wit_class *c = &classes[h->ref.cls];
	struct wit_edge *e;

	if (!edges_reserve(c))
		return;
	e = &c->out[c->nout++];
	e->to = b.cls;
	e->to_gen = b.gen;
	e->held_lock = atomic_load_explicit(&h->lock, memory_order_relaxed);
	e->held_site = atomic_load_explicit(&h->site, memory_order_relaxed);
	e->held_kind = h->kind;
	e->acq_lock = lock;
	e->acq_site = site;
	e->acq_kind = kind;
	e->tid = kli_self()->tid;
}

/* Prints the path @from -> ... -> @to found by path_exists(), one edge per line. */
static void wb_path(struct wbuf *b, uint32_t from, uint32_t to)
{
	uint32_t chain[WIT_MAX_HELD * 2], n = 0;

	for (uint32_t c = to; c != from && n < KL_ARRAY_SIZE(chain); c = classes[c].parent)
		chain[n++] = c;
	while (n-- > 0) {
		uint32_t c = chain[n];
		const struct wit_edge *e = &classes[classes[c].parent].out[classes[c].parent_edge];

		wb_printf(b, "   ");
		wb_lock(b, e->held_lock, e->held_kind);
		wb_class(b, classes[c].parent);
		wb_printf(b, " held (taken at ");
		wb_site(b, e->held_site);
		wb_printf(b, ")\n     then ");
		wb_lock(b, e->acq_lock, e->acq_kind);
		wb_class(b, c);
		wb_printf(b, " acquired at ");
		wb_site(b, e->acq_site);
		wb_printf(b, " (thread %d)\n", (int)e->tid);
	}
}

static void report_reversal(const struct wit_held *h, struct wit_ref b, const void *lock,
			    enum kli_kind kind, const void *site)
{
	struct wbuf wb;

	wb_begin(&wb, "lock order reversal (possible deadlock):\n 1st ");
	wb_lock(&wb, atomic_load_explicit(&h->lock, memory_order_relaxed), h->kind);
	wb_class(&wb, h->ref.cls);
	wb_printf(&wb, " held, taken at ");
	wb_site(&wb, atomic_load_explicit(&h->site, memory_order_relaxed));
	wb_printf(&wb, "\n 2nd ");
	wb_lock(&wb, lock, kind);
	wb_class(&wb, b.cls);
	wb_printf(&wb, " being acquired at ");
	wb_site(&wb, site);
	wb_printf(&wb, "\n established order (first seen):\n");
	wb_path(&wb, b.cls, h->ref.cls);
	wb_emit(&wb);
}

/* Checks (and records) "@b acquired while @h is held". False: a reversal was found. */
static bool order_check(const struct wit_held *h, struct wit_ref b, const void *lock,
			enum kli_kind kind, const void *site)
{
	bool ok = true;

	kli_wordlock_lock(&wit_mutex);
	if (!ref_live(h->ref) || !ref_live(b) || edge_exists(h->ref.cls, b.cls)) {
		kli_wordlock_unlock(&wit_mutex);
		return true;
	}
	if (path_exists(b.cls, h->ref.cls)) {
		ok = false;
		if (first_report(PAIR_REVERSAL, h->ref, b))
			report_reversal(h, b, lock, kind, site);
	} else {
		edge_add(h, b, lock, kind, site);
	}
	kli_wordlock_unlock(&wit_mutex);
	return ok;
}

/* ---- the checks at acquisition ------------------------------------------------------------- */

static void report_pair(const char *what, const struct wit_held *h, const void *lock,
			enum kli_kind kind, struct wit_ref b, const void *site, const char *hint)
{
	struct wbuf wb;

	wb_begin(&wb, what);
	wb_printf(&wb, ":\n 1st ");
	wb_lock(&wb, atomic_load_explicit(&h->lock, memory_order_relaxed), h->kind);
	wb_class(&wb, h->ref.cls);
	wb_printf(&wb, " held, taken at ");
	wb_site(&wb, atomic_load_explicit(&h->site, memory_order_relaxed));
	wb_printf(&wb, "\n 2nd ");
	wb_lock(&wb, lock, kind);
	wb_class(&wb, b.cls);
	wb_printf(&wb, " being acquired at ");
	wb_site(&wb, site);
	wb_printf(&wb, "\n%s", hint);
	wb_emit(&wb);
}

static bool first_report_locked(enum wit_pairkind k, struct wit_ref a, struct wit_ref b)
{
	bool first;

	kli_wordlock_lock(&wit_mutex);
	first = first_report(k, a, b);
	kli_wordlock_unlock(&wit_mutex);
	return first;
}

static bool held_spins(const struct wit_held *h)
{
	return h->ref.spin || (h->flags & KLI_HF_SPIN);
}

/* A sleeping lock under the first spinlock held (one report per class pair). */
static void check_spin_context(struct kli_witness_thread *w, unsigned n, struct wit_ref b,
			       const void *lock, enum kli_kind kind, unsigned flags,
			       const void *site)
{
	if (b.spin || (flags & KLI_HF_SPIN))
		return;
	for (unsigned i = 0; i < n; i++) {
		const struct wit_held *h = &w->held[i];

		if (!held_spins(h))
			continue;
		if (first_report_locked(PAIR_SPIN, h->ref, b))
			report_pair("sleeping lock acquired while holding a spinlock", h, lock,
				    kind, b, site, " (a spinlock holder must not block: waiters "
				    "spin on it)\n");
		return;
	}
}

static void check_against(const struct wit_held *h, struct wit_ref b, const void *lock,
			  enum kli_kind kind, const void *site, struct kli_witness_thread *w)
{
	if (h->ref.cls == b.cls && h->ref.gen == b.gen) {
		if (!b.dupok && !w->pending_ordered && first_report_locked(PAIR_SAMECLASS, h->ref, b))
			report_pair("acquiring a second lock of the same class", h, lock, kind, b,
				    site, " (kl_witness_nest() or KL_WITNESS_DUPOK say it is "
				    "intended)\n");
		return;
	}
	if (pcache_hit(w, h->ref, b))
		return;
	if (order_check(h, b, lock, kind, site))
		pcache_add(w, h->ref, b);
}

static void report_recursion(const struct wit_held *h, const void *lock, enum kli_kind kind,
			     const void *site)
{
	struct wbuf wb;

	wb_begin(&wb, "recursed on non-recursive lock: ");
	wb_lock(&wb, lock, kind);
	wb_printf(&wb, " at ");
	wb_site(&wb, site);
	wb_printf(&wb, "\n first acquired at ");
	wb_site(&wb, atomic_load_explicit(&h->site, memory_order_relaxed));
	wb_printf(&wb, "%s\n", (h->flags & KLI_HF_READ) ? " (read side)" : "");
	wb_emit(&wb);
}

static unsigned take_nest(struct kli_witness_thread *w)
{
	unsigned sub = w->nest > 0 ? w->nest - 1 : 0;

	w->nest = 0;
	return sub;
}

void kli_witness_acquire(const void *lock, enum kli_kind kind, unsigned flags,
			 const void *site)
{
	struct kli_witness_thread *w;
	struct wit_ref b;
	unsigned n;

	if (wit_mode == WIT_OFF)
		return;
	w = wit_self();
	w->pending_sub = take_nest(w);
	w->pending_ordered = w->ordered;
	w->ordered = false;
	n = atomic_load_explicit(&w->nheld, memory_order_relaxed);
	if ((flags & KLI_HF_TRY) || n == 0)
		return;
	b = lookup(w, lock, kind, flags, w->pending_sub);
	if (wit_mode == WIT_OFF)
		return; /* out of memory: b has no class (see the top) */
	check_spin_context(w, n, b, lock, kind, flags, site);
	for (unsigned i = 0; i < n; i++) {
		const struct wit_held *h = &w->held[i];

		if (atomic_load_explicit(&h->lock, memory_order_relaxed) == lock) {
			if (!(flags & KLI_HF_RECURSE) && !b.recurse)
				report_recursion(h, lock, kind, site);
			continue;
		}
		check_against(h, b, lock, kind, site, w);
	}
}

void kli_witness_acquired(const void *lock, enum kli_kind kind, unsigned flags,
			  const void *site)
{
	struct kli_witness_thread *w;
	struct wit_held *h;
	unsigned n;

	if (wit_mode == WIT_OFF)
		return;
	w = wit_self();
	n = atomic_load_explicit(&w->nheld, memory_order_relaxed);
	if (n == WIT_MAX_HELD) {
		w->untracked++;
		if (!w->overflow_reported) {
			w->overflow_reported = true;
			fprintf(stderr, "klock: witness: a thread holds more than %d locks; "
				"the extra ones are not tracked\n", WIT_MAX_HELD);
		}
		return;
	}
	h = &w->held[n];
	h->ref = lookup(w, lock, kind, flags, w->pending_sub);
	h->flags = flags;
	h->kind = kind;
	atomic_store_explicit(&h->site, site, memory_order_relaxed);
	atomic_store_explicit(&h->lock, lock, memory_order_relaxed);
	atomic_store_explicit(&w->nheld, n + 1, memory_order_release);
	w->pending_sub = 0;
}

/* ---- release, destroy, exit ------------------------------------------------------------------ */

/* Another thread's held entry for @lock, or NULL. Racy by design (see the theory block). */
static const struct wit_held *held_elsewhere(const void *lock, pid_t *tid)
{
	struct kli_thread *self = kli_tls_self;

	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next) {
		struct kli_witness_thread *w = atomic_load(&t->witness);
		unsigned n;

		if (t == self || w == NULL || !atomic_load(&t->live))
			continue;
		n = atomic_load_explicit(&w->nheld, memory_order_acquire);
		for (unsigned i = 0; i < n && i < WIT_MAX_HELD; i++) {
			if (atomic_load_explicit(&w->held[i].lock, memory_order_relaxed) == lock) {
				*tid = t->tid;
				return &w->held[i];
			}
		}
	}
	return NULL;
}

static void report_bad_unlock(const void *lock, enum kli_kind kind, const void *site)
{
	pid_t tid = 0;
	const struct wit_held *other = held_elsewhere(lock, &tid);
	struct wbuf wb;

	wb_begin(&wb, other != NULL ? "unlock of a lock held by another thread: "
				    : "unlock of a lock not held: ");
	wb_lock(&wb, lock, kind);
	wb_printf(&wb, " at ");
	wb_site(&wb, site);
	wb_printf(&wb, "\n");
	if (other != NULL) {
		wb_printf(&wb, " held by thread %d, taken at ", (int)tid);
		wb_site(&wb, atomic_load_explicit(&other->site, memory_order_relaxed));
		wb_printf(&wb, "\n");
	}
	wb_emit(&wb);
}

static void held_remove(struct kli_witness_thread *w, unsigned i)
{
	unsigned n = atomic_load_explicit(&w->nheld, memory_order_relaxed);

	for (; i + 1 < n; i++) {
		struct wit_held *d = &w->held[i];
		const struct wit_held *s = &w->held[i + 1];

		d->ref = s->ref;
		d->flags = s->flags;
		d->kind = s->kind;
		atomic_store_explicit(&d->site, atomic_load_explicit(&s->site, memory_order_relaxed),
				      memory_order_relaxed);
		atomic_store_explicit(&d->lock, atomic_load_explicit(&s->lock, memory_order_relaxed),
				      memory_order_relaxed);
	}
	atomic_store_explicit(&w->nheld, n - 1, memory_order_release);
}

void kli_witness_release(const void *lock, enum kli_kind kind, unsigned flags,
			 const void *site)
{
	struct kli_witness_thread *w;
	unsigned n;

	(void)flags;
	if (wit_mode == WIT_OFF)
		return;
	w = wit_self();
	n = atomic_load_explicit(&w->nheld, memory_order_relaxed);
	for (unsigned i = n; i-- > 0;) {
		if (atomic_load_explicit(&w->held[i].lock, memory_order_relaxed) == lock) {
			held_remove(w, i);
			return;
		}
	}
	if (w->untracked > 0) { /* one taken past WIT_MAX_HELD, not tracked (see the top) */
		w->untracked--;
		return;
	}
	report_bad_unlock(lock, kind, site);
}

void kli_witness_created(const void *lock, enum kli_kind kind, unsigned flags)
{
	struct wit_lock *l;

	if (wit_mode == WIT_OFF)
		return;
	kli_wordlock_lock(&wit_mutex);
	l = lock_get(lock, kind, flags);
	if (l != NULL) {
		/* The address may have held another lock that was freed without destroy. */
		lock_unclass(l);
		l->kind = kind;
		l->spin = kind_spins(kind, flags);
		l->recurse = (flags & KLI_HF_RECURSE) != 0;
	}
	atomic_fetch_add_explicit(&wit_zapgen, 1, memory_order_release); /* Z1: pairs with Z2 */
	kli_wordlock_unlock(&wit_mutex);
}

static void report_destroy_held(const void *lock, enum kli_kind kind,
				const struct wit_held *h, pid_t tid)
{
	struct wbuf wb;

	wb_begin(&wb, "destroy of a held lock: ");
	wb_lock(&wb, lock, kind);
	wb_printf(&wb, "\n held by thread %d%s, taken at ", (int)tid,
		  tid == kli_self()->tid ? " (this thread)" : "");
	wb_site(&wb, atomic_load_explicit(&h->site, memory_order_relaxed));
	wb_printf(&wb, "\n");
	wb_emit(&wb);
}

void kli_witness_destroyed(const void *lock, enum kli_kind kind)
{
	struct kli_witness_thread *w;
	const struct wit_held *h = NULL;
	struct wit_lock **pp, *l;
	pid_t tid = 0;

	if (wit_mode == WIT_OFF)
		return;
	w = wit_self();
	for (unsigned i = 0; i < atomic_load(&w->nheld) && h == NULL; i++)
		if (atomic_load_explicit(&w->held[i].lock, memory_order_relaxed) == lock)
			h = &w->held[i], tid = kli_self()->tid;
	if (h == NULL)
		h = held_elsewhere(lock, &tid);
	if (h != NULL)
		report_destroy_held(lock, kind, h, tid);
	kli_wordlock_lock(&wit_mutex);
	pp = lock_slot(lock);
	if ((l = *pp) != NULL) {
		*pp = l->next;
		lock_unclass(l);
		l->next = lock_free;
		lock_free = l;
	}
	atomic_fetch_add_explicit(&wit_zapgen, 1, memory_order_release); /* Z1 */
	kli_wordlock_unlock(&wit_mutex);
}

static void wb_held_list(struct wbuf *b, struct kli_witness_thread *w)
{
	unsigned n = atomic_load_explicit(&w->nheld, memory_order_acquire);

	for (unsigned i = 0; i < n && i < WIT_MAX_HELD; i++) {
		const struct wit_held *h = &w->held[i];

		wb_printf(b, "   %s", (h->flags & KLI_HF_READ) ? "shared " : "");
		wb_lock(b, atomic_load_explicit(&h->lock, memory_order_relaxed), h->kind);
		wb_printf(b, " taken at ");
		wb_site(b, atomic_load_explicit(&h->site, memory_order_relaxed));
		wb_printf(b, "\n");
	}
}

static void thread_exit_check(struct kli_thread *t)
{
	struct kli_witness_thread *w = atomic_load(&t->witness);
	struct wbuf wb;

	if (w == NULL)
		return;
	if (wit_mode != WIT_OFF && atomic_load(&w->nheld) > 0) {
		wb_begin(&wb, "thread exiting with locks held:");
		wb_printf(&wb, " thread %d\n", (int)t->tid);
		wb_held_list(&wb, w);
		wb_emit(&wb);
	}
	atomic_store(&w->nheld, 0);
	w->nest = 0;
}

/* fork(): only the forking thread lives on; the others' stacks are void, the lock free. */
static void atfork_child(void)
{
	struct kli_thread *self = kli_tls_self;

	atomic_store_explicit(&wit_mutex.v, 0, memory_order_relaxed);
	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next) {
		struct kli_witness_thread *w = atomic_load(&t->witness);

		if (t != self && w != NULL)
			atomic_store(&w->nheld, 0);
	}
}

__attribute__((constructor)) static void witness_init(void)
{
	const char *v = getenv("KLOCK_WITNESS");

	if (v != NULL && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0))
		wit_mode = WIT_OFF;
	else if (v != NULL && strcmp(v, "abort") == 0)
		wit_mode = WIT_ABORT;
	else if (v != NULL && v[0] != '\0' && strcmp(v, "warn") != 0 && strcmp(v, "1") != 0)
		fprintf(stderr, "klock: witness: KLOCK_WITNESS=%s is not off|warn|abort; using "
			"warn\n", v);
	kli_thread_on_exit(thread_exit_check);
	pthread_atfork(NULL, NULL, atfork_child);
}

/* ---- public controls ---------------------------------------------------------------------------- */

bool kl_witness_enabled(void)
{
	return wit_mode != WIT_OFF;
}

int kl_witness_set_class(const void *lock, const char *name, unsigned flags)
{
	struct wit_lock *l;
	uint32_t id;

	if (name == NULL || (flags & ~KL_WITNESS_DUPOK) != 0)
		return EINVAL;
	if (wit_mode == WIT_OFF)
		return 0;
	kli_wordlock_lock(&wit_mutex);
	l = lock_get(lock, KLI_KIND_COUNT, 0);
	if (l == NULL) {
		kli_wordlock_unlock(&wit_mutex);
		return ENOMEM;
	}
	lock_unclass(l);
	snprintf(l->cname, sizeof(l->cname), "%s", name);
	l->dupok = (flags & KL_WITNESS_DUPOK) != 0;
	id = class_named(l->cname);
	if (id != 0 && l->dupok)
		classes[id].dupok = true;
	atomic_fetch_add_explicit(&wit_zapgen, 1, memory_order_release); /* Z1 */
	kli_wordlock_unlock(&wit_mutex);
	return 0;
}

void kli_witness_nest_ordered(void)
{
	if (wit_mode != WIT_OFF)
		wit_self()->ordered = true;
}

void kl_witness_nest(unsigned subclass)
{
	if (wit_mode == WIT_OFF)
		return;
	wit_self()->nest = 1 + (subclass < KL_WITNESS_SUBCLASSES ? subclass
								 : KL_WITNESS_SUBCLASSES - 1);
}

bool kl_witness_held(const void *lock)
{
	struct kli_witness_thread *w;
	unsigned n;

	if (wit_mode == WIT_OFF)
		return true;
	w = wit_self();
	n = atomic_load_explicit(&w->nheld, memory_order_relaxed);
	for (unsigned i = 0; i < n; i++)
		if (atomic_load_explicit(&w->held[i].lock, memory_order_relaxed) == lock)
			return true;
	return false;
}

static void report_assert(const char *what, const void *lock, const void *caller)
{
	struct wbuf wb;

	wb_begin(&wb, what);
	wb_lock(&wb, lock, KLI_KIND_COUNT);
	wb_printf(&wb, " at ");
	wb_site(&wb, caller);
	wb_printf(&wb, "\n");
	wb_emit(&wb);
}

void kl_witness_assert_held(const void *lock)
{
	if (wit_mode != WIT_OFF && !kl_witness_held(lock))
		report_assert("lock not held (kl_witness_assert_held): ", lock,
			      __builtin_return_address(0));
}

void kl_witness_assert_not_held(const void *lock)
{
	if (wit_mode != WIT_OFF && kl_witness_held(lock))
		report_assert("lock held (kl_witness_assert_not_held): ", lock,
			      __builtin_return_address(0));
}

void kl_witness_dump(FILE *f)
{
	struct wbuf wb;

	if (wit_mode == WIT_OFF) {
		fprintf(f, "witness: off\n");
		return;
	}
	fprintf(f, "witness: locks held, per thread:\n");
	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next) {
		struct kli_witness_thread *w = atomic_load(&t->witness);

		if (w == NULL || !atomic_load(&t->live) || atomic_load(&w->nheld) == 0)
			continue;
		wb.n = 0;
		wb_printf(&wb, " thread %d:\n", (int)t->tid);
		wb_held_list(&wb, w);
		fwrite(wb.s, 1, wb.n, f);
	}
	fflush(f);
}

unsigned long kl_witness_reports(void)
{
	return atomic_load_explicit(&wit_reports, memory_order_relaxed);
}
