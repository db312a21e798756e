/* SPDX-License-Identifier: BSD-2-Clause */
/* locks/instruments/names_impl.h - the name table's internal side, and lock groups. */
#ifndef KL_NAMES_IMPL_H
#define KL_NAMES_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Drop @lock's name (called by every destroy). Cheap when no lock was ever named. */
void kli_lock_forget(const void *lock);

/* fork() child (and lockstat's exit-report copy): the name table's lock is free again. */
void kli_names_atfork_child(void);

/* "<kind> \"<name>\" (<addr>)" or "<kind> <addr>", for reports. */
void kli_lock_describe(const void *lock, const char *kind, char *buf, size_t len);

/*
 * Lock groups: one lock a user sees, made of many locks inside (kl_hashlock's stripes).
 * The owner registers the members' address range once, at init, so that reports can name
 * the whole: a member's misuse report says which table and stripe it belongs to, lockstat
 * folds its members' rows into one row for the owner. Lookups happen at report time only
 * (O(groups) each); nothing on a lock or unlock path ever looks here.
 *
 * The node is embedded in the owner's own storage, so registering cannot fail; it must
 * stay where it is until kli_lock_group_remove() returns. Registered through the seam
 * (kli_hook_group / kli_hook_ungroup in hooks.h).
 */
struct kli_lock_group {
	struct kli_lock_group *next;  /* the registry's list (names.c) */
	const void *owner;            /* the lock the user sees (its name names the group) */
	const char *base;             /* first member */
	size_t stride, count;         /* members are base + i * stride, i < count */
	int kind;                     /* the owner's enum kli_kind */
	const char *member;           /* what a member is called in reports ("stripe") */
};

void kli_lock_group_add(struct kli_lock_group *g);
void kli_lock_group_remove(struct kli_lock_group *g);

/* Registered groups right now (one relaxed load: "is there anything to fold?"). */
unsigned long kli_lock_group_count(void);

/* What kli_lock_group_find() found: a copy (the group may go away after the call). */
struct kli_lock_member {
	const void *owner;
	int kind;
	size_t index;
	const char *member;   /* the group's member noun (a string literal) */
};

/* The group @addr is a member of (base + i * stride exactly): fills *@m and returns true;
 * false when @addr belongs to no group. */
bool kli_lock_group_find(const void *addr, struct kli_lock_member *m);

#endif /* KL_NAMES_IMPL_H */
