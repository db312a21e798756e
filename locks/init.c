/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/init.c - library start-up: one pthread_once that probes the environment and the
 * kernel before the program creates threads.
 *
 * Why a constructor: membarrier(REGISTER_PRIVATE_EXPEDITED) costs microseconds while the
 * process is single-threaded and an RCU grace period (~15 ms) once it has threads, and the
 * rseq/membarrier modes must be fixed before any lock relies on them. Static links whose
 * constructor did not run (init.o not pulled in) initialise on first use instead.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <klock/klock.h>
#include "kl_internal.h"
#include "cpu.h"
#include "fence_impl.h"
#include "lockstat_impl.h"
#include "spin.h"

static pthread_once_t kli_init_once = PTHREAD_ONCE_INIT;
static _Atomic bool kli_init_done;
/* This thread is inside kli_init_body(). */
static __thread bool kli_init_here __attribute__((tls_model("initial-exec")));

static void kli_init_body(void)
{
	kli_init_here = true;
	kli_fence_init();
	kli_cpu_init();
	kli_spin_init();
	kli_lockstat_init();   /* last: KLOCK_LOCKSTAT=1 starts recording */
	kli_init_here = false;
	atomic_store_explicit(&kli_init_done, true, memory_order_release);
}

/*
 * Re-entry: under libklock-preload, something the body calls (malloc by a replacement
 * allocator, say) may take a pthread mutex, which is a klock lock there and may land back
 * here on the same thread. pthread_once() would deadlock on itself, so a nested call
 * returns at once: until the body finishes, the substrate runs on its defaults (symmetric
 * fences, thread-hash CPU index, uncalibrated spin budgets, lockstat off), all correct.
 */
void kli_init(void)
{
	if (kl_likely(atomic_load_explicit(&kli_init_done, memory_order_acquire)) ||
	    kli_init_here)
		return;
	pthread_once(&kli_init_once, kli_init_body);
}

__attribute__((constructor)) static void kli_ctor(void)
{
	kli_init();
}

bool kli_env_flag(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

const char *kl_version(void)
{
	return KLOCK_VERSION;
}
