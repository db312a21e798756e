/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/instruments/lockstat_off.c - the lockstat API of a build without the recorder
 * (-Dlockstat=false): the controls exist, so programs, klbench and the preload link
 * unchanged; starting fails with ENOTSUP, a snapshot is empty, and KLOCK_LOCKSTAT=1 says
 * that lockstat is compiled out. meson compiles this file instead of lockstat.c (as it
 * picks one wait backend); the seam's kli_wait_* brackets are empty in this build.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <klock/lockstat.h>
#include "lockstat_impl.h"

#if KLOCK_LOCKSTAT
#error "lockstat_off.c is the -Dlockstat=false build; meson picks lockstat.c otherwise"
#endif

int kl_lockstat_start(void)
{
	return ENOTSUP;
}

int kl_lockstat_stop(void)
{
	return ENOTSUP;
}

void kl_lockstat_reset(void)
{
}

bool kl_lockstat_enabled(void)
{
	return false;
}

int kl_lockstat_snapshot(struct kl_lockstat_snapshot *s)
{
	memset(s, 0, sizeof(*s));
	return ENOTSUP;
}

void kli_lockstat_ctl_start(kli_thread_create_fn create)
{
	(void)create;
}

void kli_lockstat_created(const void *lock)
{
	(void)lock;
}

void kli_lockstat_first_used(const void *lock)
{
	(void)lock;
}

const void *kli_lockstat_init_site(const void *lock, bool *first)
{
	(void)lock;
	*first = false;
	return NULL;
}

bool kli_lockstat_first_site(const void *site)
{
	(void)site;
	return false;
}

long kli_lockstat_pid(void)
{
	return (long)getpid();
}

void kli_lockstat_exit_flush(void)
{
}

void kli_lockstat_init(void)
{
	if (kli_env_flag("KLOCK_LOCKSTAT"))
		fputs("klock: KLOCK_LOCKSTAT: lockstat is compiled out of this build "
		      "(-Dlockstat=false)\n", stderr);
}
