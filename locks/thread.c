/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/thread.c - the thread registry (see thread.h for the contract).
 *
 * Publication: a new record is fully initialised, then pushed on the registry list with a
 * release CAS (R1); scanners load the head with acquire (R2) and follow all_next, which is
 * written before publication and never changes. Recycling: the exit path clears `live`
 * (release, R3) after the exit hooks ran; reuse sets it again before the record's owner
 * touches any lock. Free-list pushes and pops are under a wordlock (no ABA to argue).
 *
 * Thread exit: a pthread key whose value is the record; its destructor runs the exit
 * hooks and recycles the record. If a later destructor of the program takes a klock lock,
 * kli_self() attaches again and the key is re-armed (POSIX re-runs destructors, up to
 * PTHREAD_DESTRUCTOR_ITERATIONS rounds). The main thread's record is never recycled.
 *
 * Attaching calls nothing that could take a pthread mutex before the record is set: under
 * libklock-preload pthread mutexes are klock locks, so a malloc() that locks one (jemalloc
 * does) would re-enter kli_self() on this thread with no record and recurse forever.
 * Records come from mmap()ed slabs (no malloc), kli_tls_self is set first, and only then
 * do kli_init() and the pthread key run; a lock taken from inside them finds the record.
 *
 * fork(): only the forking thread lives on in the child. The other records stay as they
 * are, marked not live and NEVER recycled: their addresses may still name the owner of a
 * lock that thread held (glibc too leaves such a lock held forever), or sit in a mutex's
 * spinner queue, and handing them to a new thread would make it the owner of a lock it
 * never took. A child leaks one record per thread its parent had; it usually execs.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "thread.h"
#include "wordlock.h"

/* Subsystems that can register exit hooks. */
#define MAX_EXIT_HOOKS 8
/* Records carved from each mmap()ed slab. */
#define SLAB_RECORDS 64

__thread struct kli_thread *kli_tls_self __attribute__((tls_model("initial-exec")));

static _Atomic(struct kli_thread *) all_head;
static _Atomic unsigned all_count;
static struct kli_thread *free_head;
static struct kli_wordlock free_lock = KLI_WORDLOCK_INIT;

static kli_thread_exit_fn exit_hooks[MAX_EXIT_HOOKS];
static _Atomic unsigned exit_hook_count;

static pthread_key_t self_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void thread_detach(void *arg);

/* fork() child: only the forking thread survives. The others' records are marked not
 * live but kept off the free list (see the top of this file), and the free-list lock,
 * which another thread may have held at the fork, is reset. */
static void atfork_child(void)
{
	struct kli_thread *self = kli_tls_self;

	atomic_store_explicit(&free_lock.v, 0, memory_order_relaxed);
	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next) {
		if (t != self)
			atomic_store_explicit(&t->live, false, memory_order_relaxed);
	}
}

static void key_init(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
	if (pthread_key_create(&self_key, thread_detach) != 0) {
		fputs("klock: pthread_key_create failed\n", stderr);
		abort();
	}
}

/* The unused part of the current slab; under free_lock. */
static struct kli_thread *slab_next;
static unsigned slab_left;

/* LeakSanitizer does not scan mmap()ed memory, and records hold the only pointers to
 * per-thread data (lockstat's tables): sanitizer builds register each slab as a root. */
#if defined(__SANITIZE_ADDRESS__)
#define SLAB_LSAN_ROOT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define SLAB_LSAN_ROOT 1
#endif
#endif
#ifndef SLAB_LSAN_ROOT
#define SLAB_LSAN_ROOT 0
#endif
#if SLAB_LSAN_ROOT
#include <sanitizer/lsan_interface.h>
#endif

/* A zeroed record from a slab (mmap memory is zero and KL_ARCH_PAD-aligned). Caller holds
 * free_lock. */
static struct kli_thread *slab_take(void)
{
	if (slab_left == 0) {
		void *p = mmap(NULL, SLAB_RECORDS * sizeof(struct kli_thread),
			       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			static const char msg[] = "klock: out of memory for a thread record\n";

			if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
				/* nothing better to do */
			}
			abort();
		}
#if SLAB_LSAN_ROOT
		__lsan_register_root_region(p, SLAB_RECORDS * sizeof(struct kli_thread));
#endif
		slab_next = p;
		slab_left = SLAB_RECORDS;
	}
	slab_left--;
	return slab_next++;
}

static struct kli_thread *record_alloc(struct kli_thread *t)
{
	struct kli_thread *head;

	t->index = atomic_fetch_add_explicit(&all_count, 1, memory_order_relaxed);
	head = atomic_load_explicit(&all_head, memory_order_relaxed);
	do {
		t->all_next = head;
	} while (!atomic_compare_exchange_weak_explicit(&all_head, &head, t,
							memory_order_release, /* R1 */
							memory_order_relaxed));
	return t;
}

static struct kli_thread *record_get(void)
{
	struct kli_thread *t;

	struct kli_thread *fresh = NULL;

	kli_wordlock_lock(&free_lock);
	t = free_head;
	if (t != NULL)
		free_head = t->free_next;
	else
		fresh = slab_take();
	kli_wordlock_unlock(&free_lock);
	return t != NULL ? t : record_alloc(fresh);
}

struct kli_thread *kli_thread_attach(void)
{
	struct kli_thread *t = record_get();

	t->tid = (pid_t)syscall(SYS_gettid);
	t->free_next = NULL;
	atomic_store_explicit(&t->live, true, memory_order_release);
	kli_tls_self = t;	/* first: what follows may take a klock lock (see the top) */
	kli_init();
	pthread_once(&key_once, key_init);
	pthread_setspecific(self_key, t);
	return t;
}

static void thread_detach(void *arg)
{
	struct kli_thread *t = arg;
	unsigned n = atomic_load_explicit(&exit_hook_count, memory_order_acquire);

	for (unsigned i = 0; i < n; i++)
		exit_hooks[i](t);
	kli_tls_self = NULL;
	atomic_store_explicit(&t->live, false, memory_order_release); /* R3 */
	kli_wordlock_lock(&free_lock);
	t->free_next = free_head;
	free_head = t;
	kli_wordlock_unlock(&free_lock);
}

struct kli_thread *kli_thread_first(void)
{
	return atomic_load_explicit(&all_head, memory_order_acquire); /* R2: pairs with R1 */
}

unsigned kli_thread_count(void)
{
	return atomic_load_explicit(&all_count, memory_order_relaxed);
}

void kli_thread_on_exit(kli_thread_exit_fn fn)
{
	unsigned i;

	kli_wordlock_lock(&free_lock);
	i = atomic_load_explicit(&exit_hook_count, memory_order_relaxed);
	for (unsigned j = 0; j < i; j++) {
		if (exit_hooks[j] == fn) {
			kli_wordlock_unlock(&free_lock);
			return;
		}
	}
	if (i >= MAX_EXIT_HOOKS) {
		fputs("klock: too many thread exit hooks\n", stderr);
		abort();
	}
	exit_hooks[i] = fn;
	atomic_store_explicit(&exit_hook_count, i + 1, memory_order_release);
	kli_wordlock_unlock(&free_lock);
}
