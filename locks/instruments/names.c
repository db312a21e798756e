/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/instruments/names.c - the lock-name side table (address -> copied string) and the lock-group
 * registry (member address range -> owner lock, names_impl.h).
 *
 * Hashed chains under one wordlock for names; an unordered list for groups (few, and
 * looked up only when something is reported). Names and groups are looked up only when
 * something is reported or printed, so a single lock is plenty; set/forget and group
 * add/remove happen at init/destroy time.
 * fork(): the child frees the wordlock, which another thread may have held (a name or
 * group that thread was changing at that moment may be missing in the child).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <klock/names.h>
#include "kl_internal.h"
#include "hooks.h"
#include "names_impl.h"
#include "wordlock.h"

/* Chains in the table (power of two). */
#define NAME_BUCKETS 256u
/* Fibonacci hashing multiplier (2^64 / golden ratio). */
#define FIB_MULT 0x9e3779b97f4a7c15ull

struct name_entry {
	struct name_entry *next;
	const void *lock;
	char name[];
};

static struct name_entry *name_table[NAME_BUCKETS];
static _Atomic unsigned long name_count;
static struct kli_wordlock name_lock = KLI_WORDLOCK_INIT;
/* Registered lock groups (under name_lock) and how many. */
static struct kli_lock_group *group_list;
static _Atomic unsigned long group_count;

void kli_names_atfork_child(void)
{
	atomic_store_explicit(&name_lock.v, 0, memory_order_relaxed);
}

__attribute__((constructor)) static void names_fork_init(void)
{
	pthread_atfork(NULL, NULL, kli_names_atfork_child);
}

static unsigned name_bucket(const void *lock)
{
	return (unsigned)(((uint64_t)(uintptr_t)lock * FIB_MULT) >> 56) & (NAME_BUCKETS - 1);
}

/* Unlinks and returns the entry for @lock; caller holds name_lock. */
static struct name_entry *name_unlink(const void *lock)
{
	struct name_entry **pp = &name_table[name_bucket(lock)], *e;

	for (; (e = *pp) != NULL; pp = &e->next) {
		if (e->lock == lock) {
			*pp = e->next;
			atomic_fetch_sub_explicit(&name_count, 1, memory_order_relaxed);
			return e;
		}
	}
	return NULL;
}

int kl_lock_set_name(const void *lock, const char *name)
{
	struct name_entry *e = NULL, *old;

	if (name != NULL) {
		size_t n = strlen(name) + 1;

		e = malloc(sizeof(*e) + n);
		if (e == NULL)
			return ENOMEM;
		e->lock = lock;
		memcpy(e->name, name, n);
	}
	kli_wordlock_lock(&name_lock);
	old = name_unlink(lock);
	if (e != NULL) {
		unsigned b = name_bucket(lock);

		e->next = name_table[b];
		name_table[b] = e;
		atomic_fetch_add_explicit(&name_count, 1, memory_order_relaxed);
	}
	kli_wordlock_unlock(&name_lock);
	free(old);
	return 0;
}

size_t kl_lock_get_name(const void *lock, char *buf, size_t len)
{
	const struct name_entry *e;
	size_t n = 0;

	if (buf != NULL && len > 0)
		buf[0] = '\0';
	if (atomic_load_explicit(&name_count, memory_order_relaxed) == 0)
		return 0;
	kli_wordlock_lock(&name_lock);
	for (e = name_table[name_bucket(lock)]; e != NULL; e = e->next) {
		if (e->lock == lock) {
			n = strlen(e->name);
			if (buf != NULL && len > 0) {
				size_t c = n < len - 1 ? n : len - 1;

				memcpy(buf, e->name, c);
				buf[c] = '\0';
			}
			break;
		}
	}
	kli_wordlock_unlock(&name_lock);
	return n;
}

void kli_lock_forget(const void *lock)
{
	struct name_entry *e;

	if (atomic_load_explicit(&name_count, memory_order_relaxed) == 0)
		return;
	kli_wordlock_lock(&name_lock);
	e = name_unlink(lock);
	kli_wordlock_unlock(&name_lock);
	free(e);
}

/* ---- lock groups ---------------------------------------------------------------------- */

void kli_lock_group_add(struct kli_lock_group *g)
{
	kli_wordlock_lock(&name_lock);
	g->next = group_list;
	group_list = g;
	atomic_fetch_add_explicit(&group_count, 1, memory_order_relaxed);
	kli_wordlock_unlock(&name_lock);
}

void kli_lock_group_remove(struct kli_lock_group *g)
{
	kli_wordlock_lock(&name_lock);
	for (struct kli_lock_group **pp = &group_list; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == g) {
			*pp = g->next;
			atomic_fetch_sub_explicit(&group_count, 1, memory_order_relaxed);
			break;
		}
	}
	kli_wordlock_unlock(&name_lock);
}

unsigned long kli_lock_group_count(void)
{
	return atomic_load_explicit(&group_count, memory_order_relaxed);
}

/* The member index of @addr in @g, or -1. */
static long group_member(const struct kli_lock_group *g, const void *addr)
{
	uintptr_t a = (uintptr_t)addr, b = (uintptr_t)g->base;

	if (a < b || g->stride == 0 || (a - b) % g->stride != 0 || (a - b) / g->stride >= g->count)
		return -1;
	return (long)((a - b) / g->stride);
}

bool kli_lock_group_find(const void *addr, struct kli_lock_member *m)
{
	bool found = false;

	if (kli_lock_group_count() == 0)
		return false;
	kli_wordlock_lock(&name_lock);
	for (const struct kli_lock_group *g = group_list; g != NULL && !found; g = g->next) {
		long i = group_member(g, addr);

		if (i >= 0) {
			*m = (struct kli_lock_member){ .owner = g->owner, .kind = g->kind,
						       .index = (size_t)i, .member = g->member };
			found = true;
		}
	}
	kli_wordlock_unlock(&name_lock);
	return found;
}

/* The member's own part: "<kind> \"<name>\" (<addr>)" or "<kind> <addr>". */
static void describe_one(const void *lock, const char *kind, char *buf, size_t len)
{
	char name[96];

	if (kl_lock_get_name(lock, name, sizeof(name)) > 0)
		snprintf(buf, len, "%s \"%s\" (%p)", kind, name, lock);
	else
		snprintf(buf, len, "%s %p", kind, lock);
}

void kli_lock_describe(const void *lock, const char *kind, char *buf, size_t len)
{
	struct kli_lock_member m;
	char whole[128], own[128];

	if (!kli_lock_group_find(lock, &m)) {
		describe_one(lock, kind, buf, len);
		return;
	}
	/* A member: say which one, of what: mutex 0x.. (stripe 3 of hashlock "t" (0x..)). */
	describe_one(m.owner, kli_kind_name((enum kli_kind)m.kind), whole, sizeof(whole));
	describe_one(lock, kind, own, sizeof(own));
	snprintf(buf, len, "%s (%s %zu of %s)", own, m.member, m.index, whole);
}
