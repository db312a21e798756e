/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/args.c - klbench's argument grammar: number lists and ranges, thread counts
 * relative to the machine, durations, placements, and lock sets (names, families, kinds).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "klbench.h"

/*
 * Locks a user may name that this binary might not contain: klock's own (each arrives
 * with its lock) and the peers (compiled only when their library is found). Asking for
 * one of these gets "not built in", not "unknown".
 */
static const char *const kb_known[] = {
	"kl_mutex", "kl_rwlock", "kl_ticket", "kl_mcs", "kl_rmlock", "kl_pcpu_rwsem",
	"kl_seqlock", "kl_hashlock", "ck_spinlock_mcs", "ck_spinlock_ticket", "ck_rwlock",
	"ck_brlock", "ck_pflock", "urcu_memb",
};

bool kb_lock_known(const char *name)
{
	for (size_t i = 0; i < sizeof(kb_known) / sizeof(kb_known[0]); i++)
		if (strcmp(kb_known[i], name) == 0)
			return true;
	return lockops_find(name) != NULL;
}

const struct lockops *kb_find_lock(const char *name, const char *who)
{
	const struct lockops *o = lockops_find(name);

	if (o != NULL)
		return o;
	if (kb_lock_known(name))
		fprintf(stderr, "klbench: %s needs %s, not built in (`klbench list` shows the "
			"locks this binary has)\n", who, name);
	else
		fprintf(stderr, "klbench: %s: unknown lock '%s' (`klbench list` shows the "
			"locks)\n", who, name);
	return NULL;
}

/* A non-negative integer, "cpus" (CPUs this process may use) or "<k>x" (k times that). */
static int parse_count(const char *s, unsigned *out)
{
	char *end;
	double v;

	if (strcmp(s, "cpus") == 0) {
		*out = kb_cpus();
		return 0;
	}
	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno != 0 || v < 0)
		return -1;
	if (*end == 'x' && end[1] == '\0')
		v = ceil(v * kb_cpus());
	else if (*end != '\0' || v != floor(v))
		return -1;
	if (v > UINT32_MAX)
		return -1;
	*out = (unsigned)v;
	return 0;
}

static int push(unsigned *out, unsigned max, unsigned *n, unsigned v)
{
	for (unsigned i = 0; i < *n; i++)
		if (out[i] == v)
			return 0;
	if (*n == max)
		return -1;
	out[(*n)++] = v;
	return 0;
}

/* One item: N, A-B, A-B:step (arithmetic) or A-B*factor (geometric); B always included. */
static int parse_range(char *item, unsigned *out, unsigned max, unsigned *n)
{
	char *dash = strchr(item, '-'), *sep;
	unsigned a, b, step = 1;
	bool geometric = false;

	if (dash == NULL)
		return parse_count(item, &a) < 0 ? -1 : push(out, max, n, a);
	*dash = '\0';
	sep = strpbrk(dash + 1, ":*");
	if (sep != NULL) {
		geometric = *sep == '*';
		*sep = '\0';
		if (parse_count(sep + 1, &step) < 0 || step < (geometric ? 2u : 1u))
			return -1;
	}
	if (parse_count(item, &a) < 0 || parse_count(dash + 1, &b) < 0 || a > b)
		return -1;
	if (geometric && a == 0)
		return -1;
	for (unsigned v = a; v < b; v = geometric ? v * step : v + step)
		if (push(out, max, n, v) < 0)
			return -1;
	return push(out, max, n, b);
}

static int parse_list(const char *arg, unsigned *out, unsigned max, unsigned *n)
{
	char *copy = strdup(arg), *save = NULL;
	int rc = 0;

	*n = 0;
	for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save))
		rc = parse_range(t, out, max, n);
	free(copy);
	return rc < 0 || *n == 0 ? -1 : 0;
}

int kb_parse_uint_list(const char *arg, unsigned *out, unsigned max, unsigned *n)
{
	if (parse_list(arg, out, max, n) < 0) {
		fprintf(stderr, "klbench: bad number list '%s' (e.g. 1,2,4 or 1-8 or 1-64*2)\n",
			arg);
		return -1;
	}
	return 0;
}

int kb_parse_threads(const char *arg, unsigned *out, unsigned max, unsigned *n)
{
	if (parse_list(arg, out, max, n) < 0) {
		fprintf(stderr, "klbench: bad thread list '%s' (e.g. 1,2,4 or 1-8 or "
			"1-2x*2 or cpus; 'x' means times the CPUs)\n", arg);
		return -1;
	}
	for (unsigned i = 0; i < *n; i++) {
		if (out[i] < 1 || out[i] > KB_MAX_THREADS) {
			fprintf(stderr, "klbench: thread counts must be 1..%d\n", KB_MAX_THREADS);
			return -1;
		}
	}
	return 0;
}

int kb_parse_double_list(const char *arg, double *out, unsigned max, unsigned *n)
{
	char *copy = strdup(arg), *save = NULL, *end;
	int rc = 0;

	*n = 0;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		double v = strtod(t, &end);

		if (end == t || *end != '\0' || v < 0 || v > 100 || *n == max) {
			rc = -1;
			break;
		}
		out[(*n)++] = v;
	}
	free(copy);
	if (rc < 0 || *n == 0) {
		fprintf(stderr, "klbench: bad percentage list '%s' (numbers 0..100, e.g. "
			"0,0.1,1,10,50)\n", arg);
		return -1;
	}
	return 0;
}

/* "2", "2s", "500ms", "0.5" (seconds). */
int kb_parse_seconds(const char *arg, double *out)
{
	char *end;
	double v = strtod(arg, &end);

	if (end == arg || v < 0)
		goto bad;
	if (strcmp(end, "ms") == 0)
		v /= 1000;
	else if (strcmp(end, "us") == 0)
		v /= 1e6;
	else if (*end != '\0' && strcmp(end, "s") != 0)
		goto bad;
	*out = v;
	return 0;
bad:
	fprintf(stderr, "klbench: bad duration '%s' (e.g. 2, 2s, 500ms)\n", arg);
	return -1;
}

static const char *const kb_place_names[] = { "none", "compact", "scatter" };

const char *kb_placement_name(enum kb_placement p)
{
	return kb_place_names[p];
}

const char *kb_workload_name(enum kb_workload w)
{
	return w == KB_WL_TABLE ? "table" : "lock";
}

int kb_parse_placement(const char *arg, enum kb_placement *out)
{
	for (int i = 0; i < 3; i++) {
		if (strcmp(arg, kb_place_names[i]) == 0) {
			*out = (enum kb_placement)i;
			return 0;
		}
	}
	fprintf(stderr, "klbench: bad placement '%s' (none, compact, scatter)\n", arg);
	return -1;
}

/* ---- lock sets --------------------------------------------------------------------------- */

struct kb_lockset {
	const char *name;
	const char *what;
	unsigned need, refuse;   /* flags an adapter must have / must not have */
};

static const struct kb_lockset kb_sets[] = {
	{ "all", "every adapter but the broken one", 0, LOCKOPS_BUSTED },
	{ "rw", "locks with a shared (read) side", LOCKOPS_RW, LOCKOPS_BUSTED },
	{ "excl", "every lock that excludes (not urcu's read side)", 0,
	  LOCKOPS_BUSTED | LOCKOPS_NO_EXCLUSION },
	{ "mutex", "exclusive-only locks", 0, LOCKOPS_BUSTED | LOCKOPS_RW },
	{ "rwlock", "reader-writer locks that exclude", LOCKOPS_RW,
	  LOCKOPS_BUSTED | LOCKOPS_NO_EXCLUSION },
	{ "spin", "locks that only spin", LOCKOPS_SPIN, LOCKOPS_BUSTED },
	{ "readbiased", "cheap readers, expensive writers", LOCKOPS_READ_BIASED,
	  LOCKOPS_BUSTED },
};

static int add_lock(const struct lockops **out, unsigned max, unsigned *n,
		    const struct lockops *o, bool remove)
{
	for (unsigned i = 0; i < *n; i++) {
		if (out[i] != o)
			continue;
		if (remove)
			out[i] = out[--*n];
		return 0;
	}
	if (remove)
		return 0;
	if (*n == max) {
		fprintf(stderr, "klbench: at most %u locks per run\n", max);
		return -1;
	}
	out[(*n)++] = o;
	return 0;
}

/* Adds (or removes) every adapter a set name or family covers; 1 if `item` named none. */
static int add_group(const char *item, const struct lockops **out, unsigned max,
		     unsigned *n, bool remove)
{
	const struct kb_lockset *set = NULL;
	bool family = false;

	for (size_t i = 0; i < sizeof(kb_sets) / sizeof(kb_sets[0]); i++)
		if (strcmp(kb_sets[i].name, item) == 0)
			set = &kb_sets[i];
	for (size_t i = 0; i < lockops_count(); i++)
		family |= strcmp(lockops_at(i)->family, item) == 0;
	if (set == NULL && !family)
		return 1;
	for (size_t i = 0; i < lockops_count(); i++) {
		const struct lockops *o = lockops_at(i);
		bool in = set ? (o->flags & set->need) == set->need && !(o->flags & set->refuse)
			      : strcmp(o->family, item) == 0;

		if (in && add_lock(out, max, n, o, remove) < 0)
			return -1;
	}
	return 0;
}

int kb_parse_locks(const char *arg, const struct lockops **out, unsigned max, unsigned *n)
{
	char *copy = strdup(arg), *save = NULL;
	int rc = 0;

	*n = 0;
	for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
		bool remove = *t == '-';
		const struct lockops *o;

		t += remove;
		rc = add_group(t, out, max, n, remove);
		if (rc <= 0)
			continue;
		o = kb_find_lock(t, "--locks");
		rc = o ? add_lock(out, max, n, o, remove) : -1;
	}
	free(copy);
	if (rc == 0 && *n == 0) {
		fprintf(stderr, "klbench: '%s' selects no lock\n", arg);
		rc = -1;
	}
	return rc;
}

void kb_print_locksets(FILE *f)
{
	for (size_t i = 0; i < sizeof(kb_sets) / sizeof(kb_sets[0]); i++)
		fprintf(f, "  %-11s %s\n", kb_sets[i].name, kb_sets[i].what);
}
