/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/probes.c - the lock_name probe (locks/probes.h): the one probe guarded by a
 * semaphore, because its argument costs a lookup in the name table. A tracer that attaches
 * to klock:lock_name raises klock_lock_name_semaphore (the kernel's uprobe reference
 * counter, or the tool writing the process's memory); while it is raised, each contention
 * episode on a named lock (kl_lock_set_name, or a member of a named lock group: "table
 * stripe 3") first reports the name. A thread remembers the last lock it named, so a run
 * of episodes on one lock looks the name up once.
 *
 * Only this file is compiled with _SDT_HAS_SEMAPHORES: the other probes have none (a
 * probe with a semaphore must have its variable defined, and they need no gate), so it
 * does not include hooks.h, whose inline events hold them.
 */
#include <klock/config.h>

#if KLOCK_PROBES
#define _SDT_HAS_SEMAPHORES 1
#include <stdio.h>
#include <sys/sdt.h>

#include <klock/names.h>
#include "kl_internal.h"
#include "names_impl.h"
#include "probes.h"

/* A thread names its last lock again after this many episodes on it (a tracer that
 * attaches later still learns the name of a lock contended without a break). */
#define PROBE_RENAME_EVERY 64u
/* Longest name the probe carries (bpftrace reads strings of up to 64 bytes by default). */
#define PROBE_NAME_MAX 64

/* Raised by tracers: in .probes, where the probe's note points (sys/sdt.h convention). */
__attribute__((section(".probes"), visibility("hidden")))
volatile unsigned short klock_lock_name_semaphore;

/* The last lock this thread named (a run of episodes on one lock looks it up once). */
static __thread const void *probe_last_named __attribute__((tls_model("initial-exec")));
static __thread unsigned probe_repeats __attribute__((tls_model("initial-exec")));

/* Fills @buf with @lock's name, or a group member's "owner-name stripe N"; false if none. */
static bool probe_name_of(const void *lock, char *buf, size_t len)
{
	struct kli_lock_member m;
	char owner[PROBE_NAME_MAX];

	if (kl_lock_get_name(lock, buf, len) > 0)
		return true;
	if (!kli_lock_group_find(lock, &m))
		return false;
	if (kl_lock_get_name(m.owner, owner, sizeof(owner)) == 0)
		snprintf(owner, sizeof(owner), "%p", m.owner);
	/* A long owner name is cut short: the probe carries at most PROBE_NAME_MAX bytes. */
	return snprintf(buf, len, "%s %s %zu", owner, m.member, m.index) > 0;
}

void kli_probe_lock_name(const void *lock)
{
	char name[PROBE_NAME_MAX];

	if (lock == probe_last_named && ++probe_repeats < PROBE_RENAME_EVERY)
		return;
	probe_last_named = lock;
	probe_repeats = 0;
	if (probe_name_of(lock, name, sizeof(name)))
		STAP_PROBE2(klock, lock_name, lock, name);
}
#endif /* KLOCK_PROBES */
