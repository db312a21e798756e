/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/probes.c - the lock_name probe (locks/probes.h): the one probe guarded by a
 * semaphore, because its argument costs a lookup. A tracer that attaches
 * to klock:lock_name raises klock_lock_name_semaphore (the kernel's uprobe reference
 * counter, or the tool writing the process's memory); while it is raised, each contention
 * episode on a lock klock can name first reports the name: its kl_lock_set_name() name,
 * a lock group member's "<owner> stripe 3", else - as klock-stat names the locks of an
 * unmodified program - the data symbol that holds it ("table_lock", "locks+0x40").
 * Looking a name up costs a hash lookup or a symbol-table search (a file mapped: about a
 * millisecond), so each thread remembers the last PROBE_CACHE locks it named and names
 * one again only PROBE_RENAME_NS after it last did (a tracer that attaches later still
 * learns the name within that time).
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

/* A thread names a lock it named already again only this long after (1 s). */
#define PROBE_RENAME_NS 1000000000ull
/* Locks each thread remembers having named (direct-mapped by address; power of two). */
#define PROBE_CACHE_BITS 4
#define PROBE_CACHE (1u << PROBE_CACHE_BITS)
/* Fibonacci hashing multiplier (2^64 / golden ratio), for the cache's slot. */
#define PROBE_FIB_MULT 0x9e3779b97f4a7c15ull
/* Longest name the probe carries (bpftrace reads strings of up to 64 bytes by default). */
#define PROBE_NAME_MAX 64

/* Raised by tracers: in .probes, where the probe's note points (sys/sdt.h convention). */
__attribute__((section(".probes"), visibility("hidden")))
volatile unsigned short klock_lock_name_semaphore;

/* The locks this thread named lately, and when. */
struct probe_named {
	const void *lock;
	uint64_t at;   /* kli_now_ns() of the naming */
};
static __thread struct probe_named probe_cache[PROBE_CACHE]
	__attribute__((tls_model("initial-exec")));

/* Fills @buf with @lock's name, or a group member's "owner-name stripe N"; false if none. */
static bool probe_name_of(const void *lock, char *buf, size_t len)
{
	struct kli_lock_member m;
	char owner[PROBE_NAME_MAX];

	uintptr_t off;
	size_t size;

	if (kl_lock_get_name(lock, buf, len) > 0)
		return true;
	if (!kli_lock_group_find(lock, &m)) {
		if (!kli_symtab_data(lock, owner, sizeof(owner), &off, &size))
			return false;
		if (off == 0)
			return snprintf(buf, len, "%s", owner) > 0;
		return snprintf(buf, len, "%s+0x%lx", owner, (unsigned long)off) > 0;
	}
	if (kl_lock_get_name(m.owner, owner, sizeof(owner)) == 0)
		snprintf(owner, sizeof(owner), "%p", m.owner);
	/* A long owner name is cut short: the probe carries at most PROBE_NAME_MAX bytes. */
	return snprintf(buf, len, "%s %s %zu", owner, m.member, m.index) > 0;
}

KLI_SDT_QUIET_BEGIN
void kli_probe_lock_name(const void *lock)
{
	struct probe_named *c = &probe_cache[((uint64_t)(uintptr_t)lock * PROBE_FIB_MULT) >>
					     (64 - PROBE_CACHE_BITS)];
	char name[PROBE_NAME_MAX];
	uint64_t now = kli_now_ns();

	if (c->lock == lock && now - c->at < PROBE_RENAME_NS)
		return;
	c->lock = lock;
	c->at = now;
	if (probe_name_of(lock, name, sizeof(name)))
		STAP_PROBE2(klock, lock_name, lock, name);
}
KLI_SDT_QUIET_END
#else
typedef int kli_probes_none; /* ISO C: a translation unit may not be empty */
#endif /* KLOCK_PROBES */
