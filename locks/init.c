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

static void kli_init_body(void)
{
	kli_fence_init();
	kli_cpu_init();
	kli_spin_init();
	kli_lockstat_init();   /* last: KLOCK_LOCKSTAT=1 starts recording */
}

void kli_init(void)
{
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
