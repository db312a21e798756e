/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/thread.h - the thread registry: one record per thread that has used klock.
 *
 * A record is created on a thread's first use of something that needs it (kli_self()),
 * found through an initial-exec TLS pointer (two instructions), and recycled when the
 * thread exits (pthread key destructor). Records are TYPE-STABLE: once allocated they are
 * never freed, only reused by later threads, and they stay on the registry list for good.
 * So a scanner (an rmlock writer looking for readers, a lockstat report merging per-thread
 * buffers) may walk the list and read any record at any time while threads come and go;
 * it sees `live` false for a recycled record.
 *
 * Owner identity. A lock that names its holder (kl_mutex's word, kl_rwlock's write owner,
 * the interposer's ERRORCHECK/RECURSIVE holder, debug holders) stores the thread's OWNER
 * ID (kli_tls_owner), not its record pointer: records are recycled, so a record pointer
 * left in a lock by a thread that exited holding it would make the record's next thread
 * its owner (kl_mutex_owned true, unlock allowed). An owner id names one thread lifetime:
 * a multiple of KLI_OWNER_STEP (bits 0-6 stay free for the lock words' flags), taken from
 * a global counter when the thread first attaches and never handed out again (2^57 ids
 * on 64-bit; on a 32-bit target the counter wraps after 2^25 thread lifetimes). A thread
 * keeps its id through its exit destructors, so a lock it took before its record was
 * recycled is still its own if a later destructor unlocks it. The live record carries
 * the id too (kli_thread.owner: a mutex unparker hands the lock to a wakee by writing the
 * wakee's id). Nothing maps an id back to a record today (reports name the lock and the
 * caller, not the holder); a report that wants the holder finds it by scanning the
 * registry for `owner`.
 *
 * Why an id rather than keeping records of threads that exit holding locks out of reuse
 * (as fork's are, thread.c): that needs a per-thread count of owner-locks held, an
 * increment and a decrement on every uncontended lock/unlock and exact bookkeeping on
 * every hand-off, requeue and recursive path; one missed path brings the bug back. The id
 * costs nothing on a fast path: it is loaded from TLS exactly where the record pointer
 * was, and compared the same way.
 *
 * Subsystems that need per-thread state keep it in this struct (one section each), so a
 * single scan sees everything and exit hooks find it in one place.
 */
#ifndef KL_THREAD_H
#define KL_THREAD_H

#include <stddef.h>
#include <sys/types.h>

#include <klock/rmlock.h>
#include <klock/rwlock.h>

#include "kl_internal.h"

struct kli_witness_thread;
struct kli_ls_table;   /* locks/instruments/lockstat_impl.h */

/* kli_thread.rdm_role: why a thread is parked on a read-mostly lock. */
enum { KLI_RDM_NONE, KLI_RDM_READER, KLI_RDM_WRITER };
/* pcpu_rwsem read holds a debug build tracks per thread (recursion, unlock checks). */
#define KLI_RDM_TRACK 8

struct kli_thread {
	/* -- parking lot (locks/substrate/park.c); all fields under the bucket lock but park_state */
	_Atomic uint32_t park_state;    /* futex word: KLI_PARK_WAITING while queued */
	uint32_t park_pad;
	struct kli_thread *park_next;   /* FIFO queue link in the bucket */
	_Atomic(const void *) park_key; /* address parked on; changes only under its bucket lock */
	uintptr_t park_token;           /* value handed over by the unparker */
	uint64_t park_since;            /* kli_now_ns() when it parked (fairness) */
	uintptr_t park_cookie;          /* the request's cookie (kli_unpark_cookie) */

	/* -- adaptive locks: the OSQ spinner node (locks/substrate/osq.c) and the mutex waiter's
	 *    hand-off bookkeeping (locks/primitives/mutex.c) */
	_Atomic(struct kli_thread *) osq_next; /* successor queued behind us */
	_Atomic(struct kli_thread *) osq_prev; /* predecessor; rewritten when it unqueues */
	_Atomic uint32_t osq_locked;    /* 1: the predecessor passed us the head of the queue */
	uint32_t mtx_losses;            /* times this waiter was woken without a hand-off and
	                                 * lost the race again; written before kli_park(), read
	                                 * by the unparker under the bucket lock */

	/* -- registry */
	struct kli_thread *all_next;    /* registry list; never unlinked */
	struct kli_thread *free_next;   /* free list link while not live */
	_Atomic bool live;              /* a running thread owns this record */
	bool ghost;                     /* fork() child only: the record of a thread that did
	                                 * not survive the fork; never runs, never recycled */
	unsigned index;                 /* dense, stable id of the record: 0, 1, 2, ... */
	pid_t tid;                      /* kernel thread id of the current owner */
	uintptr_t owner;                /* the current thread's owner id (kli_tls_owner) */

	/* -- witness (locks/instruments/witness.c, -Dwitness=true only): the held-lock stack, allocated
	 *    on the thread's first acquisition and kept with the record when it is recycled
	 *    (the exit hook empties it). Other threads read it only to describe a report. */
	_Atomic(struct kli_witness_thread *) witness;
	/* -- lockstat (locks/instruments/lockstat.c): this thread's contention table, allocated on its
	 * first recorded episode and kept with the record when it is recycled. Only the
	 * owner writes the table; reports read it under the table's seqcount. */
	_Atomic(struct kli_ls_table *) lockstat;

	/* -- read-mostly locks (locks/primitives/rmlock.c, locks/primitives/pcpu_rwsem.c) */
	uint8_t rdm_role;               /* KLI_RDM_READER/WRITER: what this thread is parked
	                                 * for; read by the unparker under the bucket lock */
	uint32_t rdm_pcpu_n;            /* debug builds: pcpu_rwsem read holds outstanding */
	const void *rdm_pcpu[KLI_RDM_TRACK]; /* debug builds: which (the first KLI_RDM_TRACK) */
	/* rmlock read holds past the KL_RM_SLOTS slots (counted in the lock's ovf word): one
	 * entry per hold, so the exit path can drop them too. An mmap()ed array that grows,
	 * kept with the record; written by this thread, or by a writer admitting it while it
	 * is parked (kli_thread_ovf_*() in thread.c). */
	uintptr_t *rm_ovf;
	uint32_t rm_ovf_n, rm_ovf_cap;
	/* kl_rwlock's biased read holds (locks/primitives/rwlock_bias.c): slot i holds the address of a
	 * kl_rwlock in column i that this thread read-holds through its bias, or 0. Its own
	 * KL_ARCH_PAD-aligned block: only this thread writes it, writers revoking a bias
	 * read it (and a release of another thread's hold clears it, see rwlock_bias.c). */
	_Atomic uintptr_t rw_bias[KL_RWLOCK_BIAS_SLOTS_] KL_PADDED;
	/* rmlock read holds (klock/rmlock.h). Its own KL_ARCH_PAD-aligned block, last in the
	 * record: only this thread writes it (and a writer admitting it while it is parked),
	 * writers scanning for readers only read it. */
	struct kl_rm_reader rm KL_PADDED;
} KL_PADDED;

/* The calling thread's record, or NULL before its first kli_self(). */
extern __thread struct kli_thread *kli_tls_self
	__attribute__((tls_model("initial-exec")));

/* The calling thread's owner id (see the top), or 0 before its first kli_self()/
 * kli_owner(). Kept (not cleared) when the thread's record is recycled at exit. Exported
 * under the alias kl_mutex_self_ (thread.c) for klock/mutex.h's inline fast paths. */
typedef uintptr_t kli_owner_t;
extern __thread kli_owner_t kli_tls_owner __attribute__((tls_model("initial-exec")));
/* Owner ids are multiples of this: lock words keep bits 0-6 for flags. */
#define KLI_OWNER_STEP ((uintptr_t)0x80u)
/* The owner part the lock destroyers store (KLI_MTX_POISON, RW_POISON): never an id. */
#define KLI_OWNER_POISON ((uintptr_t)0xdead0000ul)

/* Records per mmap()ed slab, and records in static storage for when mmap() fails. */
#define KLI_THREAD_SLAB 64
#define KLI_THREAD_RESERVE 64

/* Creates and registers the calling thread's record. Never allocates with malloc() and
 * never calls kli_init() (thread.c). Out of memory and reserve: the interposer waits for
 * a record, the native library aborts with a message. */
struct kli_thread *kli_thread_attach(void);

/* The calling thread's record, created on first use. */
static KL_ALWAYS_INLINE struct kli_thread *kli_self(void)
{
	struct kli_thread *t = kli_tls_self;

	if (kl_likely(t != NULL))
		return t;
	return kli_thread_attach();
}

/* The calling thread's owner id, attaching it on first use. */
static KL_ALWAYS_INLINE kli_owner_t kli_owner(void)
{
	kli_owner_t o = kli_tls_owner;

	if (kl_likely(o != 0))
		return o;
	return kli_thread_attach()->owner;
}

/* Head of the registry list (acquire: a record's fields are initialised before it is
 * published). Walk with t->all_next; records are never removed. */
struct kli_thread *kli_thread_first(void);

/* Records ever allocated: an upper bound on kli_thread.index + 1. */
unsigned kli_thread_count(void);

/* How far ahead of a registry walk kli_thread_prefetch_ahead() reaches, in records: a
 * cold walk of 256-1024 records ran 55 ns a record with 16, 76 with 6, 100-104 with none
 * (bench/rw-revoke -c, 2 vCPUs; docs/design-adaptive.md). */
#define KLI_THREAD_PREFETCH_AHEAD 16

/* A walk of the registry is a pointer chase - one cache miss after another, a memory
 * latency per record when the records are cold. But records are carved from slabs in
 * address order and pushed on the list's head, so the walk runs down through each slab:
 * the record KLI_THREAD_PREFETCH_AHEAD steps on from @t is usually that many records
 * below it. Prefetches its link and the field at offset @off there, so the walk's misses
 * overlap. A wrong guess (a slab boundary, the static reserve) wastes a prefetch and
 * nothing else: a prefetch never faults, and nothing is read from the guess. */
static inline void kli_thread_prefetch_ahead(const struct kli_thread *t, size_t off)
{
	uintptr_t ahead = (uintptr_t)t - KLI_THREAD_PREFETCH_AHEAD * sizeof(*t);

	__builtin_prefetch((const void *)(ahead + offsetof(struct kli_thread, all_next)));
	__builtin_prefetch((const void *)(ahead + off));
}

/* rmlock overflow holds of @t (see kli_thread.rm_ovf): note one of @lock (false: no
 * memory to note it, the hold then survives the thread's exit), forget one of @lock, name
 * any one still noted (0 when none is: the exit path drops them one by one). */
bool kli_thread_ovf_push(struct kli_thread *t, uintptr_t lock);
/* The record an rmlock reader block belongs to (a kl_rm_reader other than the shared
 * dummy is always kli_thread.rm). */
static inline struct kli_thread *kli_thread_of_rm(struct kl_rm_reader *r)
{
	return (struct kli_thread *)(void *)((char *)r - offsetof(struct kli_thread, rm));
}
void kli_thread_ovf_drop(struct kli_thread *t, uintptr_t lock);
uintptr_t kli_thread_ovf_any(const struct kli_thread *t);

/* Called in a thread's exit path, before its record is recycled, for every subsystem that
 * registered (witness: locks held at exit; lockstat: flush). Register at init time. */
typedef void (*kli_thread_exit_fn)(struct kli_thread *self);
void kli_thread_on_exit(kli_thread_exit_fn fn);

#endif /* KL_THREAD_H */
