/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/instruments/lockstat.c - lockstat: contention profiles recorded on slow paths, per thread,
 * merged when someone asks (NetBSD lockstat(8), FreeBSD LOCK_PROFILING).
 *
 * WHAT IS RECORDED. Every lock brackets a slow-path episode with kli_wait_begin/spin/
 * sleep/end (hooks.h). While recording, kli_wait_end() hands the finished episode here:
 * one contended (or failed) acquisition with its spin phases, sleeps and times, keyed by
 * (lock address, call site, lock kind, read/write side) and counted in the key's log2
 * histogram of wait times (KL_LOCKSTAT_HIST_BUCKETS buckets, for lockstat -H's report).
 * Builds with -Dlockstat_hold=true also feed every acquisition and its hold time (total,
 * longest, shortest) from the fast-path hooks. Uncontended acquisitions never reach this
 * file: the fast path has no lockstat code, and with lockstat compiled in but stopped a
 * slow path pays one relaxed load of kli_lockstat.on.
 *
 * PER-THREAD TABLES. Each thread that records owns a struct kli_ls_table, reached from its
 * registry record (kli_thread.lockstat), mmap()ed on its first recorded episode (never
 * malloc: the recording thread holds the lock it just acquired, which may be the
 * allocator's own mutex under libklock-preload) and kept
 * with the record when the record is recycled. A table is a fixed open-addressed hash:
 * KLI_LS_SLOTS slots, at most KLI_LS_MAX_KEYS keys, Fibonacci hash, linear probing; when
 * it is full, new keys are counted as dropped (lockstat(8)'s buffer overflow). ONLY THE
 * OWNER WRITES ITS TABLE, with plain (relaxed atomic) stores: recording takes no lock,
 * does no atomic read-modify-write and writes no cache line another thread writes, so
 * turning lockstat on adds no contended line. Readers (snapshots) copy a table entry by
 * entry under the table's seqcount:
 *   seq   even: stable; odd: the owner is writing.
 *   S1  owner: seq = odd (relaxed), then a release fence, then the data stores.
 *   S2  owner: seq = even, release store, after the data stores.
 *   S4  reader: seq load, acquire (pairs with S2); then the data, relaxed.
 *   S3  reader: acquire fence (pairs with S1), then seq again; equal and even = a
 *       consistent copy, otherwise retry (bounded: KLI_LS_READ_TRIES).
 *   P1/P2  the table pointer is published with a release store and read with acquire,
 *       so a reader sees the zeroed table, never the bytes before memset.
 *
 * GENERATIONS (reset). kl_lockstat_reset() cannot clear other threads' tables (only
 * owners write them), so it bumps kli_lockstat.gen; every table is tagged with the
 * generation its contents belong to. Readers skip entries of another generation, and the
 * owner clears its table the next time it records. Exited threads' data lives in the
 * `retired` map, which reset clears directly.
 *
 * THREAD EXIT. The registry's exit hook merges the exiting thread's table into `retired`
 * (a growable map under retired_lock) and clears it, so a recycled record starts empty
 * and nothing is lost when threads come and go. Records are type-stable, so a snapshot
 * may read any table at any time.
 *
 * LOCKS. ctl_lock serialises start/stop/reset/snapshot and the elapsed-time clock; it is
 * taken before retired_lock. The exit hook takes retired_lock only; recording takes none.
 * A snapshot holds retired_lock while it scans the tables, so an exiting thread's data is
 * seen exactly once: in its table, or (after the flush) in `retired`.
 *
 * RE-ENTRY. A signal handler (or an allocator taking a klock lock under libklock-preload)
 * may hit a slow path while its thread is inside a table write: `busy` makes the nested
 * record a counted drop instead of a torn update, and a table being allocated is marked
 * by the LS_ALLOCATING pointer.
 *
 * HOLDERS ("contending points", Linux lock_stat). A waiter also charges its wait to the
 * call site where the lock's holder acquired it, in a holder row (kf | KLI_LS_KF_HOLDER).
 * The fast path stores no site, so the holder's site comes from the one place that writes
 * per-lock data on a slow path only: a shared table of (lock, site) pairs (LS_HOLDER_SLOTS,
 * mmap()ed on first use, filled like the init-site table) where every thread that acquired
 * a lock AFTER WAITING stores its site when it records the episode. A recording waiter
 * reads the entry first, then stores its own: it is charged to the site of the last
 * contended acquirer before it - the holder it waited for when that holder had itself
 * waited (the usual case on a contended lock: successive holders are its waiters), an
 * older one when the holder it waited for took the lock uncontended. A lock whose entry is
 * empty (no contended acquisition while recording) gives no holder row. The same in every
 * build: hold builds know each holder's site (held[]), but no owner-id-to-record map lets
 * a waiter read another thread's held[] safely. Writes one shared line per contended
 * acquisition (the entry, next to other locks' entries), never on a fast path.
 *
 * LOCK GROUPS. A lock made of member locks (kl_hashlock's stripes) registers them as a
 * group (hooks.h). Members record their own episodes like any lock; a snapshot then folds
 * every member's rows into rows of the owner, in the owner's kind (ls_fold_groups), so a
 * table reports as one lock in a "hashlock" section. Nothing on the recording side looks
 * groups up.
 *
 * THE CPU-TIME FIGURE. wait_pct = 100 * sum(wait) / (elapsed * threads), where threads is
 * the most threads the process had at once while recording (Linux: num_threads from
 * /proc/self/stat; elsewhere the live registry records), sampled at start, at stop, at
 * each snapshot and whenever a thread klock knows exits. It is the share of the threads'
 * time spent waiting for locks; docs/lockstat.md says why not CPUs.
 *
 * COST (docs/lockstat.md has the figures): stopped: one relaxed load per slow path;
 * recording: two cycle-counter reads per episode (one more per extra phase change), three
 * tick-to-ns conversions and one table update.
 *
 * LIMITS. Keys are addresses: a lock destroyed and another created at the same address
 * share rows, and a destroyed lock's name is gone by report time (it prints by address).
 * An episode that straddles a reset may be lost. A fork child inherits the parent's data.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <klock/lockstat.h>
#include "lockstat_impl.h"
#include "lockstat_rec.h"
#include "names_impl.h"
#include "thread.h"
#include "wordlock.h"

#if !KLOCK_LOCKSTAT
#error "lockstat.c is the -Dlockstat=true build; meson picks lockstat_off.c otherwise"
#endif

/* Fibonacci hashing multiplier (2^64 / golden ratio). */
#define LS_FIB 0x9e3779b97f4a7c15ull
/* log2(KLI_LS_SLOTS): the table index is the top bits of the hash. */
#define LS_SLOT_BITS 9u
/* A retired/snapshot map starts with this many slots and grows at half full. */
#define LS_MAP_MIN 64u
/* Copy attempts of one entry before a reader gives up on it (a writer that never
 * finished: a thread killed inside a write). Far beyond any real write window. */
#define KLI_LS_READ_TRIES 1000000u
/* Longest /proc/self/stat line read (comm is at most 16 bytes; the rest is numbers). */
#define LS_STAT_MAX 1024
/* num_threads is field 20 of /proc/<pid>/stat (proc(5)). */
#define LS_STAT_NUM_THREADS 20

_Static_assert((1u << LS_SLOT_BITS) == KLI_LS_SLOTS, "LS_SLOT_BITS matches KLI_LS_SLOTS");
_Static_assert(KL_LOCKSTAT_STACK_MAX <= KL_LOCKSTAT_HIST_BUCKETS,
	       "a stack row's frames fit in its histogram fields");
/* Holder and stack rows are added only below this many keys: a quarter of a thread's
 * table stays for the episodes' own rows. */
#define LS_AUX_KEYS (KLI_LS_MAX_KEYS / 4u * 3u)


struct kli_lockstat_switch kli_lockstat = { .gen = 1 };
struct kli_ls_state kli_ls = { .ctl = KLI_WORDLOCK_INIT, .retired_lock = KLI_WORDLOCK_INIT };


/* ---- fields and hashing ----------------------------------------------------------- */

static inline bool ls_field_is_max(unsigned f)
{
	return f == KLI_LS_WAIT_MAX || f == KLI_LS_HOLD_MAX || f == KLI_LS_HOLD_MINV;
}

/* The histogram bucket of a wait of @ns: floor(log2(ns)), the last bucket open-ended. */
static inline unsigned ls_hist_bucket(uint64_t ns)
{
	unsigned b = ns != 0 ? 63u - (unsigned)__builtin_clzll(ns) : 0u;

	return b < KL_LOCKSTAT_HIST_BUCKETS ? b : KL_LOCKSTAT_HIST_BUCKETS - 1u;
}

static inline uint64_t ls_hash(const void *lock, const void *site, uint32_t kf)
{
	uint64_t s = (uint64_t)(uintptr_t)site;

	return ((uint64_t)(uintptr_t)lock ^ ((s << 17) | (s >> 47)) ^ kf) * LS_FIB;
}

/* Adds counters @src to @dst; a stack row's frames (its histogram fields) are kept. */
static void ls_row_merge(uint64_t *dst, const uint64_t *src, uint32_t kf)
{
	unsigned nf = (kf & KLI_LS_KF_STACK) ? KLI_LS_HIST : KLI_LS_NFIELDS;

	for (unsigned f = 0; f < nf; f++) {
		if (ls_field_is_max(f))
			dst[f] = src[f] > dst[f] ? src[f] : dst[f];
		else
			dst[f] += src[f];
	}
}

/* ---- growable map (retired data, snapshots) ----------------------------------------- */

static struct kli_ls_row *ls_map_slot(struct kli_ls_row *rows, size_t cap, const void *lock,
				      const void *site, uint32_t kf)
{
	size_t i = (size_t)(ls_hash(lock, site, kf) >> 32) & (cap - 1);

	while (rows[i].lock != NULL &&
	       (rows[i].lock != lock || rows[i].site != site || rows[i].kf != kf))
		i = (i + 1) & (cap - 1);
	return &rows[i];
}

static int ls_map_grow(struct kli_ls_map *m)
{
	size_t cap = m->cap != 0 ? m->cap * 2 : LS_MAP_MIN;
	struct kli_ls_row *rows = calloc(cap, sizeof(*rows));

	if (rows == NULL)
		return ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		const struct kli_ls_row *r = &m->rows[i];

		if (r->lock != NULL)
			*ls_map_slot(rows, cap, r->lock, r->site, r->kf) = *r;
	}
	free(m->rows);
	m->rows = rows;
	m->cap = cap;
	return 0;
}

/* Adds @src's counters to the row of its key. 0 or ENOMEM. */
int kli_ls_map_add(struct kli_ls_map *m, const struct kli_ls_row *src)
{
	struct kli_ls_row *r;

	if ((m->n + 1) * 2 > m->cap && ls_map_grow(m) != 0)
		return ENOMEM;
	r = ls_map_slot(m->rows, m->cap, src->lock, src->site, src->kf);
	if (r->lock == NULL) {
		*r = *src;
		m->n++;
		return 0;
	}
	ls_row_merge(r->v, src->v, src->kf);
	return 0;
}

void kli_ls_map_free(struct kli_ls_map *m)
{
	free(m->rows);
	m->rows = NULL;
	m->cap = m->n = 0;
}

/* ---- the owner's side of a table ----------------------------------------------------- */

static inline void ls_write_begin(struct kli_ls_table *t)
{
	uint32_t s = atomic_load_explicit(&t->seq, memory_order_relaxed);

	atomic_store_explicit(&t->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release); /* S1: pairs with S3 in ls_read_entry() */
}

static inline void ls_write_end(struct kli_ls_table *t)
{
	uint32_t s = atomic_load_explicit(&t->seq, memory_order_relaxed);

	/* S2: pairs with S4 in ls_read_entry() */
	atomic_store_explicit(&t->seq, s + 1, memory_order_release);
}

static inline void ls_add(struct kli_ls_entry *e, unsigned f, uint64_t d)
{
	uint64_t v = atomic_load_explicit(&e->v[f], memory_order_relaxed);

	atomic_store_explicit(&e->v[f], v + d, memory_order_relaxed);
}

static inline void ls_max(struct kli_ls_entry *e, unsigned f, uint64_t x)
{
	if (x > atomic_load_explicit(&e->v[f], memory_order_relaxed))
		atomic_store_explicit(&e->v[f], x, memory_order_relaxed);
}

static void ls_drop(struct kli_ls_table *t)
{
	atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
}

/* Empties the table and tags it @gen; inside a write window. */
static void ls_table_clear(struct kli_ls_table *t, uint32_t gen)
{
	for (unsigned i = 0; i < KLI_LS_SLOTS && t->nkeys > 0; i++) {
		struct kli_ls_entry *e = &t->slot[i];

		if (atomic_load_explicit(&e->lock, memory_order_relaxed) == NULL)
			continue;
		atomic_store_explicit(&e->lock, NULL, memory_order_relaxed);
		atomic_store_explicit(&e->site, NULL, memory_order_relaxed);
		atomic_store_explicit(&e->kf, 0, memory_order_relaxed);
		for (unsigned f = 0; f < KLI_LS_NFIELDS; f++)
			atomic_store_explicit(&e->v[f], 0, memory_order_relaxed);
		t->nkeys--;
	}
	t->nkeys = 0;
	atomic_store_explicit(&t->dropped, 0, memory_order_relaxed);
	atomic_store_explicit(&t->gen, gen, memory_order_relaxed);
}

static KL_NOINLINE struct kli_ls_table *ls_table_alloc(struct kli_thread *self)
{
	struct kli_ls_table *t;

	void *p;

	atomic_store_explicit(&self->lockstat, LS_ALLOCATING, memory_order_relaxed);
	/* mmap, not malloc: this runs on a slow path right after the lock was acquired, and
	 * an allocator that guards its arenas with pthread mutexes (jemalloc) under the
	 * interposer would relock the very mutex this thread now holds. Zeroed, page-aligned. */
	p = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		atomic_store_explicit(&self->lockstat, NULL, memory_order_relaxed);
		return NULL;
	}
	t = p;
	atomic_store_explicit(&t->gen, atomic_load_explicit(&kli_lockstat.gen,
							       memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(&self->lockstat, t, memory_order_release); /* P1: pairs with P2 */
	return t;
}

/*
 * Opens a write window on the calling thread's table (allocating it, and clearing it if
 * a reset made its contents stale). NULL: no table, or a write is already under way on
 * this thread (re-entry from a signal handler); the event is then counted as lost.
 */
static struct kli_ls_table *ls_table_enter(struct kli_thread *self)
{
	struct kli_ls_table *t = atomic_load_explicit(&self->lockstat, memory_order_relaxed);
	uint32_t gen;

	if (kl_unlikely(t == NULL))
		t = ls_table_alloc(self);
	if (kl_unlikely(!kli_ls_table_valid(t))) {
		atomic_fetch_add_explicit(&kli_ls.lost, 1, memory_order_relaxed);
		return NULL;
	}
	if (kl_unlikely(t->busy)) {
		ls_drop(t);
		return NULL;
	}
	t->busy = true;
	kli_barrier();   /* busy is set before the window opens (same-thread signals) */
	ls_write_begin(t);
	gen = atomic_load_explicit(&kli_lockstat.gen, memory_order_relaxed);
	if (kl_unlikely(atomic_load_explicit(&t->gen, memory_order_relaxed) != gen))
		ls_table_clear(t, gen);
	return t;
}

static void ls_table_leave(struct kli_ls_table *t)
{
	ls_write_end(t);
	kli_barrier();
	t->busy = false;
}

/* The entry for the key, inserted if new; NULL (and a drop) when the table is full. */
static struct kli_ls_entry *ls_entry(struct kli_ls_table *t, const void *lock,
				     const void *site, uint32_t kf)
{
	unsigned i = (unsigned)(ls_hash(lock, site, kf) >> (64u - LS_SLOT_BITS));

	for (;; i = (i + 1) & (KLI_LS_SLOTS - 1)) {
		struct kli_ls_entry *e = &t->slot[i];
		const void *l = atomic_load_explicit(&e->lock, memory_order_relaxed);

		if (l == NULL)
			break;
		if (l == lock && atomic_load_explicit(&e->site, memory_order_relaxed) == site &&
		    atomic_load_explicit(&e->kf, memory_order_relaxed) == kf)
			return e;
	}
	if (t->nkeys >= KLI_LS_MAX_KEYS) {
		ls_drop(t);
		return NULL;
	}
	t->nkeys++;
	atomic_store_explicit(&t->slot[i].site, site, memory_order_relaxed);
	atomic_store_explicit(&t->slot[i].kf, kf, memory_order_relaxed);
	atomic_store_explicit(&t->slot[i].lock, lock, memory_order_relaxed);
	return &t->slot[i];
}

static const void *ls_holder_swap(const void *lock, const void *site, bool acquired);

/* Frames per recorded stack (KLOCK_LOCKSTAT_STACK; 0: none). Read-mostly, slow paths. */
static _Atomic unsigned ls_stack_depth;

void kli_lockstat_set_stack_depth(unsigned depth)
{
	atomic_store_explicit(&ls_stack_depth,
			      depth < KL_LOCKSTAT_STACK_MAX ? depth : KL_LOCKSTAT_STACK_MAX,
			      memory_order_relaxed);
}

/* A captured call stack (before the table is entered: the unwinder may take a lock). */
struct ls_stack {
	const void *pcs[KL_LOCKSTAT_STACK_MAX];
	unsigned n;
};

/* The stack row of a contended acquisition: keyed by a hash of its frames, which the row
 * stores when it is created. Loses the stack only when the table is busy with keys. */
static void ls_stack_row(struct kli_ls_table *t, const struct kli_ls_episode *ep,
			 const void *lock, uint32_t kf, const struct ls_stack *st)
{
	struct kli_ls_entry *e;
	uint64_t h = 0;

	if (st->n == 0 || t->nkeys >= LS_AUX_KEYS)
		return;
	for (unsigned i = 0; i < st->n; i++)
		h = (h ^ (uint64_t)(uintptr_t)st->pcs[i]) * LS_FIB;
	e = ls_entry(t, lock, (const void *)(uintptr_t)h, kf | KLI_LS_KF_STACK);
	if (e == NULL)
		return;
	if (atomic_load_explicit(&e->v[KLI_LS_CONTENDED], memory_order_relaxed) == 0)
		for (unsigned i = 0; i < st->n; i++)
			atomic_store_explicit(&e->v[KLI_LS_HIST + i], (uint64_t)(uintptr_t)st->pcs[i],
					      memory_order_relaxed);
	ls_add(e, KLI_LS_CONTENDED, 1);
	ls_add(e, KLI_LS_WAIT_NS, ep->wait_ns);
}

/* The waiter's holder row: its wait charged to the holder's site @holder (HOLDERS). A
 * table too full for the row loses the attribution only: no drop is counted, the episode
 * itself was recorded (or dropped) in its own row. */
static void ls_holder_row(struct kli_ls_table *t, const struct kli_ls_episode *ep,
			  const void *lock, uint32_t kf, unsigned flags, const void *holder)
{
	struct kli_ls_entry *e;

	if (holder == NULL || t->nkeys >= LS_AUX_KEYS)
		return;   /* keys stay for real rows; ls_entry() would count a drop */
	e = ls_entry(t, lock, holder, kf | KLI_LS_KF_HOLDER);
	if (e == NULL)
		return;
	ls_add(e, (flags & KLI_HF_FAILED) ? KLI_LS_FAILED : KLI_LS_CONTENDED, 1);
	ls_add(e, KLI_LS_WAIT_NS, ep->wait_ns);
}

void kli_lockstat_episode(const struct kli_ls_episode *ep, const void *lock,
			  enum kli_kind kind, unsigned flags, const void *site)
{
	/* The site first: allocating the table may run an interposed function (a malloc
	 * that locks), which overwrites the preload's kli_site_override. */
	const void *where = kli_site_program(kli_site(site));
	const void *holder = ls_holder_swap(lock, where, !(flags & KLI_HF_FAILED));
	unsigned depth = atomic_load_explicit(&ls_stack_depth, memory_order_relaxed);
	struct ls_stack st = { .n = 0 };
	struct kli_ls_table *t;
	struct kli_ls_entry *e;

	if (kl_unlikely(depth != 0) && !(flags & KLI_HF_FAILED))
		st.n = kli_stack_from(where, st.pcs, depth);
	t = ls_table_enter(kli_self());
	if (t == NULL)
		return;
	ls_holder_row(t, ep, lock, kli_ls_kf(kind, flags), flags, holder);
	ls_stack_row(t, ep, lock, kli_ls_kf(kind, flags), &st);
	e = ls_entry(t, lock, where, kli_ls_kf(kind, flags));
	if (e != NULL) {
		ls_add(e, (flags & KLI_HF_FAILED) ? KLI_LS_FAILED : KLI_LS_CONTENDED, 1);
		ls_add(e, KLI_LS_NSPIN, ep->nspin);
		ls_add(e, KLI_LS_SPIN_NS, ep->spin_ns);
		ls_add(e, KLI_LS_NSLEEP, ep->nsleep);
		ls_add(e, KLI_LS_SLEEP_NS, ep->sleep_ns);
		ls_add(e, KLI_LS_FENCES, ep->nfence);
		ls_add(e, KLI_LS_ASLEEP_HANDOVERS, ep->asleep_handover);
		ls_add(e, KLI_LS_WAIT_NS, ep->wait_ns);
		ls_max(e, KLI_LS_WAIT_MAX, ep->wait_ns);
		ls_add(e, KLI_LS_HIST + ls_hist_bucket(ep->wait_ns), 1);
	}
	ls_table_leave(t);
}

void kli_lockstat_record(const struct kli_wait *w, const void *lock, enum kli_kind kind,
			 unsigned flags, const void *site)
{
	struct kli_ls_episode ep = {
		.nspin = w->nspin,
		.nsleep = w->nsleep,
		.nfence = w->nfence,
		.asleep_handover = w->asleep_handover,
		.spin_ns = kli_cycles_to_ns(w->spin_ticks),
		.sleep_ns = kli_cycles_to_ns(w->sleep_ticks),
		.wait_ns = kli_cycles_to_ns(w->t_mark > w->t_begin ? w->t_mark - w->t_begin : 0),
	};

	kli_lockstat_episode(&ep, lock, kind, flags, site);
}

void kli_lockstat_revoked(const void *lock, enum kli_kind kind, uint64_t cost_ns,
			  const void *site)
{
	const void *where = kli_site_program(kli_site(site));   /* before the table */
	struct kli_ls_table *t = ls_table_enter(kli_self());
	struct kli_ls_entry *e;

	if (t == NULL)
		return;
	e = ls_entry(t, lock, where, kli_ls_kf(kind, 0));
	if (e != NULL) {
		ls_add(e, KLI_LS_REVOKES, 1);
		ls_add(e, KLI_LS_REVOKE_NS, cost_ns);
	}
	ls_table_leave(t);
}

/* Keyed by (lock, NULL site): the re-arming reader's own site says nothing about why the
 * lock was unbiased. */
void kli_lockstat_rearmed(const void *lock, enum kli_kind kind, uint64_t unbiased_ns)
{
	struct kli_ls_table *t = ls_table_enter(kli_self());
	struct kli_ls_entry *e;

	if (t == NULL)
		return;
	e = ls_entry(t, lock, NULL, kli_ls_kf(kind, 0));
	if (e != NULL)
		ls_add(e, KLI_LS_UNBIASED_NS, unbiased_ns);
	ls_table_leave(t);
}

/* Keyed by (lock, NULL site), as the re-arm: the waker's site is the unlock's caller,
 * which says little about why someone slept. */
void kli_lockstat_woke(const void *lock, enum kli_kind kind)
{
	struct kli_ls_table *t = ls_table_enter(kli_self());
	struct kli_ls_entry *e;

	if (t == NULL)
		return;
	e = ls_entry(t, lock, NULL, kli_ls_kf(kind, 0));
	if (e != NULL)
		ls_add(e, KLI_LS_WAKEUPS, 1);
	ls_table_leave(t);
}

#if KLOCK_LOCKSTAT_HOLD
void kli_lockstat_acquired(const void *lock, enum kli_kind kind, unsigned flags,
			   const void *site)
{
	struct kli_ls_table *t;
	struct kli_ls_entry *e;
	uint32_t kf = kli_ls_kf(kind, flags);

	if (kl_likely(!atomic_load_explicit(&kli_lockstat.on, memory_order_relaxed)) ||
	    (flags & KLI_HF_FAILED))
		return;
	site = kli_site_program(kli_site(site));   /* before the table: see above */
	t = ls_table_enter(kli_self());
	if (t == NULL)
		return;
	e = ls_entry(t, lock, site, kf);
	if (e != NULL)
		ls_add(e, KLI_LS_ACQUIRED, 1);
	if (t->held_n < KLI_LS_HELD_MAX)
		t->held[t->held_n++] = (struct kli_ls_held){ lock, site, kf, kl_arch_cycles() };
	else
		ls_drop(t);
	ls_table_leave(t);
}

/* Index of the most recent held entry for (lock, kf), or -1. */
static int ls_held_find(const struct kli_ls_table *t, const void *lock, uint32_t kf)
{
	for (int i = (int)t->held_n - 1; i >= 0; i--)
		if (t->held[i].lock == lock && t->held[i].kf == kf)
			return i;
	return -1;
}

void kli_lockstat_release(const void *lock, enum kli_kind kind, unsigned flags)
{
	struct kli_thread *self = kli_tls_self;
	struct kli_ls_table *t = self != NULL ?
		atomic_load_explicit(&self->lockstat, memory_order_relaxed) : NULL;
	struct kli_ls_held h;
	struct kli_ls_entry *e;
	int i;

	if (kl_likely(!kli_ls_table_valid(t) || t->held_n == 0))
		return;
	t = ls_table_enter(self);
	if (t == NULL)
		return;
	i = ls_held_find(t, lock, kli_ls_kf(kind, flags));
	if (i >= 0) {
		h = t->held[i];
		memmove(&t->held[i], &t->held[i + 1], (t->held_n - (unsigned)i - 1) * sizeof(h));
		t->held_n--;
		e = atomic_load_explicit(&kli_lockstat.on, memory_order_relaxed) ?
			ls_entry(t, h.lock, h.site, h.kf) : NULL;
		if (e != NULL) {
			uint64_t now = kl_arch_cycles();
			uint64_t held = kli_cycles_to_ns(now > h.t0 ? now - h.t0 : 0);

			ls_add(e, KLI_LS_HOLD_NS, held);
			ls_max(e, KLI_LS_HOLD_MAX, held);
			ls_max(e, KLI_LS_HOLD_MINV, ~held);
		}
	}
	ls_table_leave(t);
}
#endif /* KLOCK_LOCKSTAT_HOLD */

/* ---- init call sites (heap locks' labels) ---------------------------------------------
 * A lock's init call site, for the report: "init@<site>", and -M folds the locks of one
 * init site (a heap array initialised in a loop) into one row. A fixed open-addressed
 * table of LS_INIT_SLOTS (lock, site) pairs, mmap()ed on first use, filled with a CAS on
 * the key - pthread_mutex_init() runs on no lock path, and only while recording under
 * libklock-preload (the interposer knows the program's call site). A full table (or a
 * long probe) drops the label, never the lock. A re-initialised lock gets its new site.
 *
 * First-use sites. A pthread lock that was never initialised by a call (a static
 * initializer or zero fill, in heap memory) has no init site; libklock-preload adopts it
 * once, on its first lock call (preload/mutex.c, T1/T2), and stores that call's program
 * site here, marked `first` ("first@<site>" in the report). Once per lock: the adoption's
 * winner only. A later init (or a later adoption of a new lock at the same address)
 * replaces the entry, mark included.
 */
/* Slots (a power of two): 24 bytes each, 1.5 MiB. */
#define LS_INIT_SLOTS (1u << 16)
/* Probes before a lock goes unlabelled. */
#define LS_INIT_PROBES 64u

struct ls_init_slot {
	_Atomic(const void *) lock;
	_Atomic(const void *) site;
	_Atomic(bool) first;   /* site is the first use's, not an init call's */
};

static _Atomic(void *) ls_init_tab;   /* struct ls_init_slot[LS_INIT_SLOTS] */

/* The table published at *@tab (@bytes of zeroes, mmap()ed by the first caller); NULL when
 * the mapping fails. Shared by the init-site and holder tables. */
static void *ls_shared_table(_Atomic(void *) *tab, size_t bytes)
{
	/* I2: pairs with I1 below (another thread's publication of the table) */
	void *t = atomic_load_explicit(tab, memory_order_acquire), *n;

	if (t != NULL)
		return t;
	n = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (n == MAP_FAILED)
		return NULL;
	/* I1: pairs with I2 (the acquire above): readers see the zeroed table */
	if (!atomic_compare_exchange_strong_explicit(tab, &t, n, memory_order_acq_rel,
						     memory_order_acquire)) {
		munmap(n, bytes);
		return t;
	}
	return n;
}

static struct ls_init_slot *ls_init_table(void)
{
	return ls_shared_table(&ls_init_tab,
			       LS_INIT_SLOTS * sizeof(struct ls_init_slot));
}

static unsigned ls_init_hash(const void *lock)
{
	return (unsigned)(((uint64_t)(uintptr_t)lock * LS_FIB) >> 48) & (LS_INIT_SLOTS - 1);
}

/* While recording: @lock's program site (init call or first use, @first) into the table.
 * The site is read before the table is mapped (see kli_lockstat_episode). */
static void ls_init_record(const void *lock, bool first)
{
	const void *site = kli_site(NULL);
	struct ls_init_slot *t;
	unsigned i = ls_init_hash(lock);

	if (kl_likely(!atomic_load_explicit(&kli_lockstat.on, memory_order_relaxed)) ||
	    site == NULL || (t = ls_init_table()) == NULL)
		return;
	site = kli_site_program(site);
	for (unsigned n = 0; n < LS_INIT_PROBES; n++, i = (i + 1) & (LS_INIT_SLOTS - 1)) {
		const void *k = NULL;

		if (atomic_compare_exchange_strong_explicit(&t[i].lock, &k, lock,
							    memory_order_relaxed,
							    memory_order_relaxed) || k == lock) {
			atomic_store_explicit(&t[i].first, first, memory_order_relaxed);
			atomic_store_explicit(&t[i].site, site, memory_order_relaxed);
			return;
		}
	}
}

void kli_lockstat_created(const void *lock)
{
	ls_init_record(lock, false);
}

void kli_lockstat_first_used(const void *lock)
{
	ls_init_record(lock, true);
}

const void *kli_lockstat_init_site(const void *lock, bool *first)
{
	/* I2: pairs with I1 in ls_shared_table() */
	struct ls_init_slot *t = atomic_load_explicit(&ls_init_tab, memory_order_acquire);
	unsigned i = ls_init_hash(lock);

	*first = false;
	for (unsigned n = 0; t != NULL && n < LS_INIT_PROBES;
	     n++, i = (i + 1) & (LS_INIT_SLOTS - 1)) {
		const void *k = atomic_load_explicit(&t[i].lock, memory_order_relaxed);

		if (k == lock) {
			*first = atomic_load_explicit(&t[i].first, memory_order_relaxed);
			return atomic_load_explicit(&t[i].site, memory_order_relaxed);
		}
		if (k == NULL)
			return NULL;
	}
	return NULL;
}

bool kli_lockstat_first_site(const void *site)
{
	/* I2: pairs with I1 in ls_shared_table() */
	struct ls_init_slot *t = atomic_load_explicit(&ls_init_tab, memory_order_acquire);

	for (unsigned i = 0; t != NULL && i < LS_INIT_SLOTS; i++)
		if (atomic_load_explicit(&t[i].site, memory_order_relaxed) == site &&
		    atomic_load_explicit(&t[i].first, memory_order_relaxed))
			return true;
	return false;
}

/* ---- holders' sites (HOLDERS in the theory block) -----------------------------------
 * Per lock, the program call site of the last thread that acquired it after waiting, and
 * the generation it was stored in (an entry of an older generation reads as empty, so a
 * reset forgets holders too). Open-addressed like the init-site table, filled with a CAS
 * on the key, written only from recorded slow-path episodes. The site and generation are
 * hints read without a seqcount: a racing store can pair one episode's site with the
 * other's generation, which misattributes that one wait at worst.
 */
/* Slots (a power of two): 24 bytes each, 384 KiB, mmap()ed on the first recorded wait. */
#define LS_HOLDER_SLOTS (1u << 14)
/* Probes before a lock goes without holder rows. */
#define LS_HOLDER_PROBES 64u

struct ls_holder_slot {
	_Atomic(const void *) lock;
	_Atomic(const void *) site;
	_Atomic uint32_t gen;
};

static _Atomic(void *) ls_holder_tab;   /* struct ls_holder_slot[LS_HOLDER_SLOTS] */

/* @lock's slot (claimed if new), or NULL: no table, or LS_HOLDER_PROBES taken. */
static struct ls_holder_slot *ls_holder_slot(const void *lock)
{
	struct ls_holder_slot *t = ls_shared_table(&ls_holder_tab,
						   LS_HOLDER_SLOTS * sizeof(*t));
	unsigned i = (unsigned)(((uint64_t)(uintptr_t)lock * LS_FIB) >> 48) &
		     (LS_HOLDER_SLOTS - 1);

	for (unsigned n = 0; t != NULL && n < LS_HOLDER_PROBES;
	     n++, i = (i + 1) & (LS_HOLDER_SLOTS - 1)) {
		const void *k = atomic_load_explicit(&t[i].lock, memory_order_relaxed);

		/* a plain load first: a lock's slot is found without a read-modify-write */
		if (k == lock || (k == NULL && (atomic_compare_exchange_strong_explicit(
							&t[i].lock, &k, lock, memory_order_relaxed,
							memory_order_relaxed) || k == lock)))
			return &t[i];
	}
	return NULL;
}

/* The site stored for @lock in this generation (NULL: none); then, if the episode ended
 * in an acquisition (@acquired), @site becomes the lock's holder site. */
static const void *ls_holder_swap(const void *lock, const void *site, bool acquired)
{
	struct ls_holder_slot *h = ls_holder_slot(lock);
	uint32_t gen = atomic_load_explicit(&kli_lockstat.gen, memory_order_relaxed);
	const void *prev;

	if (h == NULL)
		return NULL;
	prev = atomic_load_explicit(&h->gen, memory_order_relaxed) == gen ?
		atomic_load_explicit(&h->site, memory_order_relaxed) : NULL;
	if (acquired && prev != site) {   /* the same holder again: leave the line clean */
		atomic_store_explicit(&h->site, site, memory_order_relaxed);
		atomic_store_explicit(&h->gen, gen, memory_order_relaxed);
	}
	return prev;
}

/* ---- readers ----------------------------------------------------------------------------- */

/* A consistent copy of slot @i and the table's generation; false if it never settled. */
static bool ls_read_entry(struct kli_ls_table *t, unsigned i, struct kli_ls_row *r,
			  uint32_t *gen)
{
	const struct kli_ls_entry *e = &t->slot[i];

	for (unsigned tries = 0; tries < KLI_LS_READ_TRIES; tries++) {
		uint32_t s1 = atomic_load_explicit(&t->seq, memory_order_acquire); /* S4 */

		if (s1 & 1u) {
			kl_arch_relax();
			continue;
		}
		*gen = atomic_load_explicit(&t->gen, memory_order_relaxed);
		r->lock = atomic_load_explicit(&e->lock, memory_order_relaxed);
		r->site = atomic_load_explicit(&e->site, memory_order_relaxed);
		r->kf = atomic_load_explicit(&e->kf, memory_order_relaxed);
		for (unsigned f = 0; f < KLI_LS_NFIELDS; f++)
			r->v[f] = atomic_load_explicit(&e->v[f], memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire); /* S3: pairs with S1 */
		if (atomic_load_explicit(&t->seq, memory_order_relaxed) == s1)
			return true;
	}
	return false;
}

/* Adds table @t's rows of generation @gen to @m; counts its drops into @dropped. */
int kli_ls_scan_table(struct kli_ls_map *m, struct kli_ls_table *t, uint32_t gen,
			 uint64_t *dropped)
{
	struct kli_ls_row r;
	uint32_t g;

	if (atomic_load_explicit(&t->gen, memory_order_relaxed) == gen)
		*dropped += atomic_load_explicit(&t->dropped, memory_order_relaxed);
	for (unsigned i = 0; i < KLI_LS_SLOTS; i++) {
		if (!ls_read_entry(t, i, &r, &g)) {
			(*dropped)++;   /* a writer that never finishes: skip its whole table */
			return 0;
		}
		if (r.lock != NULL && g == gen && kli_ls_map_add(m, &r) != 0)
			return ENOMEM;
	}
	return 0;
}

/* The process's threads now: Linux's count (/proc/self/stat field 20, num_threads), or
 * where that is unavailable the threads klock knows (live registry records). */
unsigned kli_ls_count_threads(void)
{
	char buf[LS_STAT_MAX], *p;
	unsigned n = 0;
	long os = 0;
	FILE *f;

	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next)
		n += atomic_load_explicit(&t->live, memory_order_relaxed);
	f = fopen("/proc/self/stat", "re");
	if (f == NULL)
		return n;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	/* Fields after "pid (comm)" are space-separated; comm may hold spaces, so count
	 * from its closing parenthesis: field 3 starts after the first space there. */
	p = p != NULL ? strrchr(buf, ')') : NULL;
	for (unsigned i = 2; p != NULL && i < LS_STAT_NUM_THREADS; i++)
		p = strchr(p + 1, ' ');
	if (p != NULL)
		os = strtol(p + 1, NULL, 10);
	if (os > (long)n)
		n = (unsigned)os;
	/* klock-stat's control thread is not one of the program's threads */
	if (n > 1 && kli_lockstat_ctl_running())
		n--;
	return n;
}

/* Most threads at once: sampled at start, stop, snapshots and klock thread exits. */
void kli_ls_note_threads(void)
{
	unsigned n = kli_ls_count_threads(), p;

	p = atomic_load_explicit(&kli_ls.peak, memory_order_relaxed);
	while (n > p && !atomic_compare_exchange_weak_explicit(&kli_ls.peak, &p, n,
							      memory_order_relaxed,
							      memory_order_relaxed))
		;
}

/* ---- thread exit and fork -------------------------------------------------------------- */

static void ls_thread_exit(struct kli_thread *self)
{
	struct kli_ls_table *t = atomic_load_explicit(&self->lockstat, memory_order_relaxed);
	struct kli_ls_row r;
	uint32_t gen, g;

	if (atomic_load_explicit(&kli_lockstat.on, memory_order_relaxed))
		kli_ls_note_threads();
	if (!kli_ls_table_valid(t))
		return;
	t->held_n = 0;
	if (t->nkeys == 0 && atomic_load_explicit(&t->dropped, memory_order_relaxed) == 0)
		return;
	kli_wordlock_lock(&kli_ls.retired_lock);
	gen = atomic_load_explicit(&kli_lockstat.gen, memory_order_relaxed);
	if (atomic_load_explicit(&t->gen, memory_order_relaxed) == gen) {
		kli_ls.retired_dropped += atomic_load_explicit(&t->dropped, memory_order_relaxed);
		for (unsigned i = 0; i < KLI_LS_SLOTS; i++) {
			if (ls_read_entry(t, i, &r, &g) && r.lock != NULL &&
			    kli_ls_map_add(&kli_ls.retired, &r) != 0)
				kli_ls.retired_dropped += r.v[KLI_LS_CONTENDED] + r.v[KLI_LS_FAILED];
		}
	}
	ls_write_begin(t);
	ls_table_clear(t, gen);
	ls_write_end(t);
	kli_wordlock_unlock(&kli_ls.retired_lock);
}

/* fork() child: only the forking thread survives. Internal locks another thread held are
 * free again, and a table another thread was writing is made readable (its last update
 * may be partial; a snapshot would otherwise wait for a writer that no longer exists). */
void kli_lockstat_recorder_atfork(void)
{
	struct kli_thread *self = kli_tls_self;

	atomic_store_explicit(&kli_ls.ctl.v, 0, memory_order_relaxed);
	atomic_store_explicit(&kli_ls.retired_lock.v, 0, memory_order_relaxed);
	for (struct kli_thread *th = kli_thread_first(); th != NULL; th = th->all_next) {
		struct kli_ls_table *t = atomic_load_explicit(&th->lockstat,
							      memory_order_relaxed);

		if (th == self)
			continue;
		if (t == LS_ALLOCATING) {
			atomic_store_explicit(&th->lockstat, NULL, memory_order_relaxed);
			continue;
		}
		if (t == NULL)
			continue;
		if (atomic_load_explicit(&t->seq, memory_order_relaxed) & 1u)
			atomic_fetch_add_explicit(&t->seq, 1, memory_order_relaxed);
		t->busy = false;
		t->held_n = 0;
	}
}

/* Library start-up (kli_lockstat_init(), lockstat_ctl.c): the recorder's exit and fork
 * handlers. */
void kli_lockstat_recorder_init(void)
{
	kli_thread_on_exit(ls_thread_exit);
	pthread_atfork(NULL, NULL, kli_lockstat_recorder_atfork);
}
