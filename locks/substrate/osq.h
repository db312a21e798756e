/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/substrate/osq.h - the optimistic spin queue (Linux kernel/locking/osq_lock.c): an MCS queue
 * of would-be spinners, so that only the queue's head polls a contended lock word while
 * the others each poll a flag in their own thread record. Without it, N waiters polling
 * one word turn every release into N cache-line transfers.
 *
 * Layer: substrate, on top of the thread registry (the queue nodes live in struct
 * kli_thread: osq_next, osq_prev, osq_locked) and spin.h. Used by kl_mutex; any lock
 * with a spin phase may use it. The queue's tail is one word inside the lock: 0 when
 * nobody spins, else the last queued thread's record (records are type-stable, so a
 * stale pointer is always safe to dereference; the protocol's CASes catch staleness).
 *
 * Cancellable, the feature that makes it fit a spin-THEN-SLEEP lock: a queued spinner
 * whose time budget runs out unlinks itself (Linux's steps A, B, C) and goes on to sleep
 * on the lock. The head leaves with kli_osq_unlock(), passing the head role on.
 *
 * Userspace difference: Linux queues with preemption disabled, so a neighbour that the
 * protocol must wait for is always running. Here it may be preempted between two
 * instructions, so those few mandatory waits poll with kli_spin_stall() (poll, then
 * yield the CPU to the preempted thread) instead of spinning unboundedly. Nor can a
 * queued spinner ask need_resched(), as Linux's loop does: past OSQ_YIELD_NS it yields
 * the CPU at each poll instead, which hands it to the holder or the head where threads
 * outnumber CPUs, and costs only the call where they do not (osq.c).
 *
 * The OSQ orders nothing for the lock's data: the lock word's own acquire/release does.
 * Its atomics only keep the queue links consistent (orders and labels in osq.c).
 * A thread is in at most one OSQ at a time (slow paths do not nest; not for signal
 * handlers).
 */
#ifndef KL_OSQ_H
#define KL_OSQ_H

#include "spin.h"
#include "thread.h"

/* Joins the queue at @tail and waits to become its head. Returns true as the head (the
 * caller may now poll the lock word; it must call kli_osq_unlock() when done), or false
 * if @budget ran out first (the caller is no longer queued). In a fork() child, a
 * spinner whose budget runs out behind a thread that did not survive the fork becomes
 * the head instead (true). */
bool kli_osq_lock(_Atomic uintptr_t *tail, struct kli_thread *self, struct kli_spin *budget);

/* Leaves the head of the queue, passing it to the next queued spinner if there is one. */
void kli_osq_unlock(_Atomic uintptr_t *tail, struct kli_thread *self);

/* A queue's tail for a lock with no room for one of its own (kl_rwlock: its 40 bytes must
 * fit under glibc's pthread_rwlock_t for the interposer): one of a fixed table of tails,
 * chosen by @lock's address. Locks whose addresses share a tail share a queue: a spinner
 * may then wait behind another lock's head until its budget runs out and go on to sleep
 * (correct, only slower; rare while few locks see spinners at once). A fork() child
 * starts with every tail empty. */
_Atomic uintptr_t *kli_osq_hashed(const void *lock);

#endif /* KL_OSQ_H */
