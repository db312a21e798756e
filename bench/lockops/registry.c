/* SPDX-License-Identifier: BSD-2-Clause */
/* bench/lockops/registry.c - the adapter registry (filled by constructors). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lockops.h"

/* More adapters than klock and its peers will ever have. */
#define LOCKOPS_MAX 128

static const struct lockops *table[LOCKOPS_MAX];
static size_t count;
static bool sorted;

void lockops_register(const struct lockops *ops)
{
	if (count == LOCKOPS_MAX) {
		fprintf(stderr, "lockops: too many adapters (raise LOCKOPS_MAX)\n");
		abort();
	}
	table[count++] = ops;
	sorted = false;
}

static int family_rank(const char *f)
{
	static const char *const order[] = { "klock", "pthread", "ck", "urcu", "absl", "std",
		"tbb", "test" };

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (strcmp(f, order[i]) == 0)
			return (int)i;
	return (int)(sizeof(order) / sizeof(order[0]));
}

static int cmp(const void *a, const void *b)
{
	const struct lockops *x = *(const struct lockops *const *)a;
	const struct lockops *y = *(const struct lockops *const *)b;
	int d = family_rank(x->family) - family_rank(y->family);

	return d != 0 ? d : strcmp(x->name, y->name);
}

static void sort_once(void)
{
	if (!sorted) {
		qsort(table, count, sizeof(table[0]), cmp);
		sorted = true;
	}
}

size_t lockops_count(void)
{
	return count;
}

const struct lockops *lockops_at(size_t i)
{
	sort_once();
	return i < count ? table[i] : NULL;
}

const struct lockops *lockops_find(const char *name)
{
	for (size_t i = 0; i < count; i++)
		if (strcmp(table[i]->name, name) == 0)
			return table[i];
	return NULL;
}
