/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/pcpu_rwsem.h - per-CPU reader/writer semaphore with Linux percpu-rwsem
 * semantics: while no writer is about, a read lock is one rseq critical section that
 * checks the semaphore's mode and bumps the current CPU's counter (no atomic
 * read-modify-write, no fence); a writer switches readers to a slow path for the
 * duration of a burst of writes (the rcu_sync state machine: one grace period per burst,
 * not per write), blocks new readers, and sleeps until the per-CPU counters drain.
 *
 *   struct kl_pcpu_rwsem sem = KL_PCPU_RWSEM_INITIALIZER;   (or kl_pcpu_rwsem_init())
 *   kl_pcpu_rwsem_read_lock(&sem);   ...   kl_pcpu_rwsem_read_unlock(&sem);
 *   kl_pcpu_rwsem_write_lock(&sem);  ...   kl_pcpu_rwsem_write_unlock(&sem);
 *
 * Compared with kl_rmlock: no per-acquisition token and no per-thread state (a read may
 * be unlocked on another CPU - only the sums matter), readers and writers both sleep and
 * are admitted FIFO, and a burst of writes pays one grace period; but the atomic-free
 * read path needs rseq and membarrier(PRIVATE_EXPEDITED_RSEQ) (Linux 5.10+; otherwise
 * each read is an atomic increment and a fence), and readers stay on their slower path
 * for about 100 us after the last write of a burst.
 *
 * Not recursive: a read lock nested in another read lock of the same semaphore
 * DEADLOCKS if a writer queues between them (the writer blocks new readers and waits for
 * the outer one) - as in Linux. Debug builds report nested read locks. Not
 * async-signal-safe. Process-private.
 */
#ifndef KLOCK_PCPU_RWSEM_H
#define KLOCK_PCPU_RWSEM_H

#include <stdbool.h>
#include <stdint.h>
#include <klock/config.h>
#include <klock/compiler.h>
#include <klock/arch_rseq.h>

#ifndef __cplusplus
#include <stdatomic.h>
#endif

KL_BEGIN_DECLS

struct kl_pcpu_rwsem {
	KL_ATOMIC(uintptr_t) gp;      /* per-CPU counters | rcu_sync state << 1 | KL_PCPU_FAST:
	                               * the one word every reader reads */
	KL_ATOMIC(uint32_t) block;    /* a writer holds or drains; waiters are queued */
	KL_ATOMIC(uint32_t) wsleep;   /* futex word: the draining writer sleeps */
	KL_ATOMIC(uint32_t) gp_lock;  /* writers' lock for gp_count (an internal wordlock) */
	uint32_t gp_count;            /* writers in the current burst */
	KL_ATOMIC(uint64_t) exit_at;  /* cycle count after which readers may go fast again */
	KL_ATOMIC(uintptr_t) owner;   /* the writer's owner id (one thread lifetime) */
};

/* gp bit 0: readers may take the rseq fast path (idle, counters allocated, rseq mode). */
#define KL_PCPU_FAST 1u
/* Byte offset of a per-CPU slot's unlock counter (its lock counter is at 0). */
#define KL_PCPU_UNLOCK_OFF 8

/*
 * Static initializer. The per-CPU counters (one padded line per possible CPU) are then
 * allocated by the first lock call; if that allocation fails the process aborts with a
 * message - use kl_pcpu_rwsem_init() to get ENOMEM instead. A statically initialised
 * semaphore need not be destroyed.
 */
#define KL_PCPU_RWSEM_INITIALIZER { 0, 0, 0, 0, 0, 0, 0 }

/**
 * kl_pcpu_rwsem_init - initialise @sem and allocate its per-CPU counters: one 128-byte
 * line per possible CPU (the kernel's count, which kl_topology()->possible_cpus never
 * undercuts) plus one.
 * Returns 0 or ENOMEM. May allocate; does not block on locks.
 */
KL_API int kl_pcpu_rwsem_init(struct kl_pcpu_rwsem *sem) KL_NONNULL(1);

/**
 * kl_pcpu_rwsem_destroy - free @sem's counters. Nobody may hold or wait for it.
 * Returns 0, or EBUSY when it is held or waited for (a snapshot; debug builds report it).
 */
KL_API int kl_pcpu_rwsem_destroy(struct kl_pcpu_rwsem *sem) KL_NONNULL(1);

/**
 * kl_pcpu_rwsem_read_lock - take @sem shared. May block (sleeps, FIFO with writers)
 * while a writer holds or waits for it. Not recursive (see above). The same thread must
 * unlock (debug builds check it); it may have moved to another CPU meanwhile.
 */
KL_API void kl_pcpu_rwsem_read_lock(struct kl_pcpu_rwsem *sem) KL_NONNULL(1);

/**
 * kl_pcpu_rwsem_read_trylock - take @sem shared unless a writer holds or waits for it.
 * Returns true on success. Never sleeps.
 */
KL_API bool kl_pcpu_rwsem_read_trylock(struct kl_pcpu_rwsem *sem) KL_NONNULL(1)
	KL_WARN_UNUSED;

/**
 * kl_pcpu_rwsem_read_unlock - drop one read hold. Never blocks; the reader whose exit
 * lets a waiting writer in wakes it (once). Called by the thread that took the hold (on
 * whatever CPU it runs now); debug builds report an unlock without a hold.
 * A thread that exits inside a read section never drops its hold (it is a per-CPU count,
 * not per-thread state): the semaphore stays read-held and writers wait for ever. Debug
 * builds report it when the thread exits.
 */
KL_API void kl_pcpu_rwsem_read_unlock(struct kl_pcpu_rwsem *sem) KL_NONNULL(1);

/**
 * kl_pcpu_rwsem_write_lock - take @sem exclusive. Blocks: the first writer of a burst
 * pays a grace period (membarrier), then it waits its turn (FIFO) and sleeps until the
 * readers drain. Not recursive. The same thread must unlock.
 */
KL_API void kl_pcpu_rwsem_write_lock(struct kl_pcpu_rwsem *sem) KL_NONNULL(1);

/**
 * kl_pcpu_rwsem_write_trylock - take @sem exclusive if no writer holds or waits for it and
 * no reader is inside; true on success. Never sleeps, but when readers are on the fast
 * path it pays a grace period (membarrier) first, success or not, and a failure leaves
 * readers on the slow path for a while: do not poll it in a tight loop. Fails (false) on
 * the caller's own write hold; on its own read hold it fails too (never deadlocks). Not
 * from signal handlers.
 */
KL_API bool kl_pcpu_rwsem_write_trylock(struct kl_pcpu_rwsem *sem) KL_NONNULL(1)
	KL_WARN_UNUSED;

/**
 * kl_pcpu_rwsem_write_unlock - release the write hold; hands the semaphore to the next
 * queued waiters in FIFO order (a run of readers, or one writer). Never blocks. Only the
 * owner may unlock (debug builds report otherwise).
 */
KL_API void kl_pcpu_rwsem_write_unlock(struct kl_pcpu_rwsem *sem) KL_NONNULL(1);

/* The offset of glibc's rseq area from the thread pointer (__rseq_offset) once the
 * library has started and rseq is usable, else 0. Private: for the inline fast path. */
KL_API extern long kl_pcpu_rseq_off;

#include <klock/inline/pcpu_rwsem.h>

KL_END_DECLS

#endif /* KLOCK_PCPU_RWSEM_H */
