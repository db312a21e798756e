/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/instruments/lockstat_report.c - lockstat's reports, built from a snapshot (lockstat.c).
 *
 * Text, in NetBSD lockstat(8)'s form:
 *   Elapsed time: 2.01 seconds.
 *   <what was recorded>, <threads/CPUs/totals>, "X% of CPU time was spent waiting ..."
 *   -- <Event> (<lock type>)        one section per event (Spin, Sleep, Hold) and type
 *   Total%  Count   Time/ms  Lock  Caller
 *   an <all> row per lock, then its callers (symbol+offset), ranked by time or count
 *   -- Summary by lock              FreeBSD LOCK_PROFILING's columns: contended, failed,
 *                                   wait, avg/max wait, (acquired, hold, min/avg/max hold)
 *   -- Wait histograms (-H)         per lock, its waits by log2 of their length in ns
 * JSON: the schema in docs/lockstat.md ("klock_lockstat": KL_LOCKSTAT_SCHEMA).
 *
 * Rows are grouped by (lock type, side, lock): sort the rows by that key, then each group
 * is a contiguous run. Everything here runs at report time; nothing is on a lock path.
 */
#include <dlfcn.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <klock/lockstat.h>
#include <klock/mcs.h>
#include <klock/mutex.h>
#include <klock/names.h>
#include <klock/rwlock.h>
#include <klock/ticket.h>
#include "kl_internal.h"
#include "lockstat_impl.h"

/* Longest lock or caller label printed. */
#define LABEL_MAX 160
/* Room a label keeps for "+0x<offset>" after a symbol name. */
#define SYM_ROOM 24
/* Widths of the lockstat(8) columns. */
#define LOCK_COL 22
#define NS_PER_MS 1e6
#define NS_PER_US 1e3
#define NS_PER_S 1e9
/* Largest top=N accepted. */
#define TOP_MAX 1000000u
/* Width of a -H histogram bar, and the bar itself (at least HIST_BAR characters). */
#define HIST_BAR 40
#define HIST_AT "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@"
/* Call stacks the text report shows per lock (JSON lists them all). */
#define STACKS_TOP 5

/* An event section: which counters of a row it shows. */
enum ls_event { EV_SPIN, EV_SLEEP, EV_HOLD, EV_COUNT };

static const char *const event_names[EV_COUNT] = { "Spin", "Sleep", "Hold" };

static uint64_t ev_count(const struct kl_lockstat_row *r, enum ls_event ev)
{
	return ev == EV_SPIN ? r->spin_count : ev == EV_SLEEP ? r->sleep_count : r->acquisitions;
}

static uint64_t ev_time(const struct kl_lockstat_row *r, enum ls_event ev)
{
	return ev == EV_SPIN ? r->spin_ns : ev == EV_SLEEP ? r->sleep_ns : r->hold_ns;
}

/* How rows are ranked: total time (default), count (KL_LOCKSTAT_BY_COUNT), average time
 * (KL_LOCKSTAT_BY_AVG). */
enum ls_rank { RANK_TIME, RANK_COUNT, RANK_AVG };

static enum ls_rank rank_of(const struct kl_lockstat_options *o)
{
	return (o->flags & KL_LOCKSTAT_BY_AVG) ? RANK_AVG :
	       (o->flags & KL_LOCKSTAT_BY_COUNT) ? RANK_COUNT : RANK_TIME;
}

/* The ranking key of a row in a section. */
static uint64_t ev_key(const struct kl_lockstat_row *r, enum ls_event ev, enum ls_rank rk)
{
	if (rk == RANK_AVG)
		return ev_count(r, ev) != 0 ? ev_time(r, ev) / ev_count(r, ev) : 0;
	return rk == RANK_COUNT ? ev_count(r, ev) : ev_time(r, ev);
}

/* What a section's Total% is a share of: count when ranked by count, else time. */
static uint64_t ev_share(const struct kl_lockstat_row *r, enum ls_event ev, enum ls_rank rk)
{
	return rk == RANK_COUNT ? ev_count(r, ev) : ev_time(r, ev);
}

/* Summary ranking: total wait, contended acquisitions, or average wait. */
static uint64_t wait_key(const struct kl_lockstat_row *r, enum ls_rank rk)
{
	uint64_t waits = r->contended + r->failed;

	if (rk == RANK_AVG)
		return waits != 0 ? r->wait_ns / waits : 0;
	return rk == RANK_COUNT ? waits : r->wait_ns;
}

/* ---- grouping ------------------------------------------------------------------------- */

static int cmp_group(const void *a, const void *b)
{
	const struct kl_lockstat_row *x = *(const struct kl_lockstat_row *const *)a;
	const struct kl_lockstat_row *y = *(const struct kl_lockstat_row *const *)b;
	int c = strcmp(x->kind, y->kind);

	if (c != 0)
		return c;
	if (x->read != y->read)
		return x->read ? 1 : -1;
	if (x->lock != y->lock)
		return (uintptr_t)x->lock < (uintptr_t)y->lock ? -1 : 1;
	if (x->caller != y->caller)
		return (uintptr_t)x->caller < (uintptr_t)y->caller ? -1 : 1;
	return 0;
}

static bool same_group(const struct kl_lockstat_row *x, const struct kl_lockstat_row *y)
{
	return x->lock == y->lock && x->read == y->read && strcmp(x->kind, y->kind) == 0;
}

static bool same_type(const struct kl_lockstat_row *x, const struct kl_lockstat_row *y)
{
	return x->read == y->read && strcmp(x->kind, y->kind) == 0;
}

/* Adds @r into the group total @g (maxima for the *_max fields). */
static void row_add(struct kl_lockstat_row *g, const struct kl_lockstat_row *r)
{
	g->acquisitions += r->acquisitions;
	g->contended += r->contended;
	g->failed += r->failed;
	g->spin_count += r->spin_count;
	g->spin_ns += r->spin_ns;
	g->sleep_count += r->sleep_count;
	g->sleep_ns += r->sleep_ns;
	g->wait_ns += r->wait_ns;
	g->hold_ns += r->hold_ns;
	if (r->wait_max_ns > g->wait_max_ns)
		g->wait_max_ns = r->wait_max_ns;
	if (r->hold_max_ns > g->hold_max_ns)
		g->hold_max_ns = r->hold_max_ns;
	if (r->hold_min_ns != 0 && (g->hold_min_ns == 0 || r->hold_min_ns < g->hold_min_ns))
		g->hold_min_ns = r->hold_min_ns;
	for (unsigned b = 0; b < KL_LOCKSTAT_HIST_BUCKETS; b++)
		g->wait_hist[b] += r->wait_hist[b];
	g->revocations += r->revocations;
	g->revoke_ns += r->revoke_ns;
	g->unbiased_ns += r->unbiased_ns;
	g->fences += r->fences;
	g->wakeups += r->wakeups;
	g->asleep_handovers += r->asleep_handovers;
}

/* A lock's rows: sorted[first .. first + n), with their total. */
struct group {
	size_t first, n;
	struct kl_lockstat_row total;
	uint64_t key;   /* ranking key of the current section */
};

/* Splits sorted[0..n) into groups (one per lock, type and side). Returns the count. */
static size_t make_groups(const struct kl_lockstat_row **sorted, size_t n, struct group *g)
{
	size_t ng = 0;

	for (size_t i = 0; i < n; i++) {
		if (i == 0 || !same_group(sorted[i - 1], sorted[i])) {
			/* the key fields of its first row, counters from zero */
			g[ng] = (struct group){ .first = i };
			g[ng].total.lock = sorted[i]->lock;
			g[ng].total.kind = sorted[i]->kind;
			g[ng].total.read = sorted[i]->read;
			ng++;
		}
		g[ng - 1].n++;
		row_add(&g[ng - 1].total, sorted[i]);
	}
	return ng;
}

static int cmp_group_key(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	return x->first < y->first ? -1 : 1;
}

/* Back to type/lock order (make_groups' order), after a section ranked them. */
static int cmp_group_first(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	return x->first < y->first ? -1 : x->first > y->first;
}

/* A caller row with its ranking key, for qsort. */
struct caller_sort {
	const struct kl_lockstat_row *row;
	uint64_t key;
};

static int cmp_caller(const void *a, const void *b)
{
	const struct caller_sort *x = a, *y = b;

	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	return (uintptr_t)x->row->caller < (uintptr_t)y->row->caller ? -1 : 1;
}

/* ---- labels ------------------------------------------------------------------------------ */

/*
 * The size of one lock of @kind at the addresses rows carry: the pthread object under
 * libklock-preload (rows are keyed by the pthread_mutex_t/pthread_rwlock_t), the klock
 * object otherwise. 0: unknown (the lock prints as symbol+offset, never as an element).
 */
static size_t kind_stride(const char *kind)
{
#if KLOCK_PRELOAD
	if (strcmp(kind, "mutex") == 0 || strcmp(kind, "ticket") == 0 || strcmp(kind, "mcs") == 0)
		return sizeof(pthread_mutex_t);
	if (strcmp(kind, "rwlock") == 0 || strcmp(kind, "pcpu_rwsem") == 0)
		return sizeof(pthread_rwlock_t);
#else
	if (strcmp(kind, "mutex") == 0)
		return sizeof(struct kl_mutex);
	if (strcmp(kind, "rwlock") == 0)
		return sizeof(struct kl_rwlock);
	if (strcmp(kind, "ticket") == 0)
		return sizeof(struct kl_ticket);
	if (strcmp(kind, "mcs") == 0)
		return sizeof(struct kl_mcs);
#endif
	return 0;
}

static void caller_label(const void *addr, char *buf, size_t len, bool *named,
			 const char **obj);

/* ---- C++ names ------------------------------------------------------------------------------ */

/* The C++ runtime's demangler (libstdc++'s or libc++'s __cxa_demangle): taken from the
 * process with dlsym when it is loaded, never linked. */
typedef char *(*cxa_demangle_fn)(const char *mangled, char *out, size_t *len, int *status);

/* Set while a caller wants labels as the symbol tables spell them (JSON's "mangled"). */
static _Thread_local bool label_raw;

static cxa_demangle_fn demangler(void)
{
	void *p = dlsym(RTLD_DEFAULT, "__cxa_demangle");
	cxa_demangle_fn fn;

	memcpy(&fn, &p, sizeof(fn));
	return fn;
}

/*
 * Label @buf ("sym", "sym+0xoff", "sym[N]", "init@sym+0xoff[*]", ...) with its C++ symbol
 * demangled, in place; unchanged when it holds none, the process has no demangler, or the
 * demangler fails. At report time only: __cxa_demangle allocates its result, which a
 * report (itself allocating its snapshot) can afford; without memory it fails, and the
 * mangled name stays. Recording never comes here.
 */
static void label_demangle(char *buf, size_t len)
{
	char *at = strchr(buf, '@'), *name = at != NULL ? at + 1 : buf, *plain, *rest;
	char tail[LABEL_MAX];
	cxa_demangle_fn fn;
	int status = -1;

	if (label_raw || strncmp(name, "_Z", 2) != 0 || (fn = demangler()) == NULL)
		return;
	rest = name + strcspn(name, "+[");   /* a mangled name holds neither */
	snprintf(tail, sizeof(tail), "%s", rest);
	*rest = '\0';
	plain = fn(name, NULL, NULL, &status);
	if (plain != NULL && status == 0)
		snprintf(name, len - (size_t)(name - buf), "%s%s", plain, tail);
	else
		snprintf(rest, len - (size_t)(rest - buf), "%s", tail);
	free(plain);
}

/* A static lock's symbol: name, offset, size, and whether it holds several locks. */
struct lock_sym {
	char name[LABEL_MAX - SYM_ROOM];
	uintptr_t off;
	size_t size, stride;
	bool many;   /* an array of locks (or an object holding several): one row under -M */
};

static bool lock_symbol(const void *lock, const char *kind, struct lock_sym *ls)
{
	if (!kli_symtab_data(lock, ls->name, sizeof(ls->name), &ls->off, &ls->size))
		return false;
	ls->stride = kind_stride(kind);
	ls->many = ls->stride != 0 && ls->size >= 2 * ls->stride;
	return true;
}

/* A heap lock's label: "init@<site>" by its init call site, "first@<site>" by its first
 * use (a statically initialised or zeroed pthread lock), "[*]" appended for the merged
 * row of a site (-M: the row's key is the site itself); else its address. */
static void heap_label(const void *lock, char *buf, size_t len, bool merged)
{
	char site[LABEL_MAX - SYM_ROOM];
	bool first, named;
	const void *init = kli_lockstat_init_site(lock, &first);
	const char *obj;

	if (init == NULL && merged && kli_symtab_is_code(lock)) {
		init = lock;
		first = kli_lockstat_first_site(lock);
	}
	if (init == NULL) {
		snprintf(buf, len, "%p", lock);
		return;
	}
	caller_label(init, site, sizeof(site), &named, &obj);
	snprintf(buf, len, "%s@%s%s", first ? "first" : "init", site,
		 init == lock ? "[*]" : "");
}

/*
 * The lock's label: its kl_lock_set_name() name; else its static symbol - "name",
 * "name[index]" for an element of an array of locks ("name[*]" for the merged array
 * under -M), "name+0xoff" for a lock inside a larger object; else heap_label().
 */
static void lock_label(const struct kl_lockstat_row *r, char *buf, size_t len, bool merged)
{
	struct lock_sym ls;

	if (kl_lock_get_name(r->lock, buf, len) > 0)
		return;
	if (!lock_symbol(r->lock, r->kind, &ls)) {
		heap_label(r->lock, buf, len, merged);
		return;
	}
	if (ls.many && merged)
		snprintf(buf, len, "%s[*]", ls.name);
	else if (ls.many && ls.off % ls.stride == 0 && ls.size % ls.stride == 0)
		snprintf(buf, len, "%s[%lu]", ls.name, (unsigned long)(ls.off / ls.stride));
	else if (ls.off != 0)
		snprintf(buf, len, "%s+0x%lx", ls.name, (unsigned long)ls.off);
	else
		snprintf(buf, len, "%s", ls.name);
	label_demangle(buf, len);
}

/* -M: the address rows of @lock merge under - the start of its array/object. */
static const void *merge_lock(const struct kl_lockstat_row *r)
{
	struct lock_sym ls;
	char name[2];

	const void *init;
	bool first;

	if (kl_lock_get_name(r->lock, name, sizeof(name)) > 0)
		return r->lock;
	if (!lock_symbol(r->lock, r->kind, &ls)) {
		/* heap locks of one init (or first-use) site */
		init = kli_lockstat_init_site(r->lock, &first);
		return init != NULL ? init : r->lock;
	}
	return ls.many ? (const char *)r->lock - ls.off : r->lock;
}

/* -m: the start of the function holding @caller (its address if unknown). */
static const void *merge_caller(const void *caller)
{
	char sym[LABEL_MAX - SYM_ROOM];
	uintptr_t off;
	Dl_info info;

	if (caller == NULL || dladdr(caller, &info) == 0)
		return caller;
	if (info.dli_sname != NULL && info.dli_saddr != NULL)
		return info.dli_saddr;
	if (kli_symtab_lookup(caller, sym, sizeof(sym), &off))
		return (const char *)caller - off;
	return caller;
}

/*
 * "sym+0xoff" (dladdr, else the object's .symtab), else "object+0xoff" (for addr2line),
 * else the address. *named tells whether a symbol was found; *obj is the object's path.
 */
static void caller_label(const void *addr, char *buf, size_t len, bool *named,
			 const char **obj)
{
	char sym[LABEL_MAX - SYM_ROOM];
	uintptr_t off;
	Dl_info info;

	*named = false;
	*obj = NULL;
	if (addr == NULL || dladdr(addr, &info) == 0) {
		snprintf(buf, len, "%p", addr);
		return;
	}
	*obj = kli_symtab_object(addr, info.dli_fname);   /* the real file, not argv[0] */
	*named = true;
	if (info.dli_sname != NULL) {
		snprintf(buf, len, "%s+0x%lx", info.dli_sname,
			 (unsigned long)((const char *)addr - (const char *)info.dli_saddr));
	} else if (kli_symtab_lookup(addr, sym, sizeof(sym), &off)) {
		if (snprintf(buf, len, "%s+0x%lx", sym, (unsigned long)off) >= (int)len)
			buf[len - 1] = '\0'; /* a long symbol is cut: it stays a label */
	} else if (*obj != NULL) {
		const char *base = strrchr(*obj, '/');

		*named = false;
		snprintf(buf, len, "%s+0x%lx", base != NULL ? base + 1 : *obj,
			 (unsigned long)((const char *)addr - (const char *)info.dli_fbase));
	} else {
		*named = false;
		snprintf(buf, len, "%p", addr);
	}
	if (*named)
		label_demangle(buf, len);
}

/* -m: a caller merged to its function's start prints as the function ("sym", not "sym+0x0"). */
static void fold_label(char *label, bool fold)
{
	size_t n = strlen(label);

	if (fold && n > 4 && strcmp(label + n - 4, "+0x0") == 0)
		label[n - 4] = '\0';
}

/* ---- holders ("contending points") ---------------------------------------------------------- */

/* Whether holder row @h belongs to group @g: its lock (merged as the group's under -M),
 * type and side. */
static bool holder_in(const struct kl_lockstat_holder *h, const struct group *g, bool merged)
{
	struct kl_lockstat_row r = { .lock = h->lock, .kind = h->kind };

	if (h->read != g->total.read || strcmp(h->kind, g->total.kind) != 0)
		return false;
	return (merged ? merge_lock(&r) : h->lock) == g->total.lock;
}

static int cmp_holder_site(const void *a, const void *b)
{
	const struct kl_lockstat_holder *x = a, *y = b;

	return x->holder == y->holder ? 0 : (uintptr_t)x->holder < (uintptr_t)y->holder ? -1 : 1;
}

static int cmp_holder_wait(const void *a, const void *b)
{
	const struct kl_lockstat_holder *x = a, *y = b;

	if (x->wait_ns != y->wait_ns)
		return x->wait_ns > y->wait_ns ? -1 : 1;
	return cmp_holder_site(a, b);
}

/* Group @g's holder rows into @out (room for s->nholders), one per holder site (-m: per
 * function), ranked by wait. Returns the count. */
static size_t holders_of(const struct kl_lockstat_snapshot *s, const struct group *g,
			 const struct kl_lockstat_options *o, struct kl_lockstat_holder *out)
{
	size_t n = 0, k = 0;

	for (size_t i = 0; i < s->nholders; i++) {
		if (!holder_in(&s->holders[i], g, (o->flags & KL_LOCKSTAT_MERGE) != 0))
			continue;
		out[n] = s->holders[i];
		if (o->flags & KL_LOCKSTAT_MERGE_CALLERS)
			out[n].holder = merge_caller(out[n].holder);
		n++;
	}
	qsort(out, n, sizeof(*out), cmp_holder_site);
	for (size_t i = 0; i < n; i++) {
		if (k > 0 && out[k - 1].holder == out[i].holder) {
			out[k - 1].waits += out[i].waits;
			out[k - 1].wait_ns += out[i].wait_ns;
			continue;
		}
		out[k++] = out[i];
	}
	qsort(out, k, sizeof(*out), cmp_holder_wait);
	return k;
}

/* ---- call stacks (KLOCK_LOCKSTAT_STACK) ------------------------------------------------------ */

static bool stack_in(const struct kl_lockstat_stack *st, const struct group *g, bool merged)
{
	struct kl_lockstat_row r = { .lock = st->lock, .kind = st->kind };

	if (st->read != g->total.read || strcmp(st->kind, g->total.kind) != 0)
		return false;
	return (merged ? merge_lock(&r) : st->lock) == g->total.lock;
}

static int cmp_stack_frames(const void *a, const void *b)
{
	const struct kl_lockstat_stack *x = a, *y = b;

	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return memcmp(x->frames, y->frames, x->depth * sizeof(x->frames[0]));
}

static int cmp_stack_wait(const void *a, const void *b)
{
	const struct kl_lockstat_stack *x = a, *y = b;

	if (x->wait_ns != y->wait_ns)
		return x->wait_ns > y->wait_ns ? -1 : 1;
	return cmp_stack_frames(a, b);
}

/* Group @g's stacks into @out (room for s->nstacks), equal stacks of merged locks (-M)
 * added together, ranked by wait. Returns the count. */
static size_t stacks_of(const struct kl_lockstat_snapshot *s, const struct group *g,
			const struct kl_lockstat_options *o, struct kl_lockstat_stack *out)
{
	size_t n = 0, k = 0;

	for (size_t i = 0; i < s->nstacks; i++)
		if (stack_in(&s->stacks[i], g, (o->flags & KL_LOCKSTAT_MERGE) != 0))
			out[n++] = s->stacks[i];
	qsort(out, n, sizeof(*out), cmp_stack_frames);
	for (size_t i = 0; i < n; i++) {
		if (k > 0 && cmp_stack_frames(&out[k - 1], &out[i]) == 0) {
			out[k - 1].contended += out[i].contended;
			out[k - 1].wait_ns += out[i].wait_ns;
			continue;
		}
		out[k++] = out[i];
	}
	qsort(out, k, sizeof(*out), cmp_stack_wait);
	return k;
}

/* ---- text ---------------------------------------------------------------------------------- */

/* The process's command name (the kernel's comm: setproctitle() leaves it alone). */
static void process_name(char *buf, size_t len)
{
	FILE *c = fopen("/proc/self/comm", "re");

	buf[0] = '\0';
	if (c != NULL) {
		if (fgets(buf, (int)len, c) == NULL)
			buf[0] = '\0';
		fclose(c);
	}
	buf[strcspn(buf, "\n")] = '\0';
}

static void text_header(FILE *f, const struct kl_lockstat_snapshot *s)
{
	double el = (double)s->elapsed_ns / NS_PER_S;
	char comm[LABEL_MAX];

	process_name(comm, sizeof(comm));
	fprintf(f, "Process: %s (pid %ld). Elapsed time: %.2f seconds.\n",
		comm[0] != '\0' ? comm : "?", kli_lockstat_pid(), el);
	if (s->hold_times)
		fputs("Recorded: every acquisition and its hold time (-Dlockstat_hold=true), "
		      "and each contended acquisition's spin and sleep time.\n", f);
	else
		fputs("Recorded: contended acquisitions only (slow paths), as NetBSD lockstat(8) "
		      "does; build with -Dlockstat_hold=true to count every acquisition and hold "
		      "times.\n", f);
	fprintf(f, "Threads: %u at most at once, on %u CPUs. Contended acquisitions: %llu, "
		"failed attempts: %llu, events dropped: %llu.\n", s->threads, s->cpus,
		(unsigned long long)s->contended, (unsigned long long)s->failed,
		(unsigned long long)s->dropped);
	if (s->hold_times)
		fprintf(f, "Acquisitions: %llu (%.2f%% contended).\n",
			(unsigned long long)s->acquisitions,
			s->acquisitions != 0 ? 100.0 * (double)s->contended /
						       (double)s->acquisitions : 0.0);
	fprintf(f, "%.2f%% of CPU time was spent waiting for locks "
		"(%.3f s of waits / (%.3f s elapsed x %u threads)).\n", s->wait_pct,
		(double)s->wait_ns / NS_PER_S, el, s->threads);
}

static void text_row(FILE *f, double pct, uint64_t count, uint64_t ns, const char *lock,
		     const char *caller)
{
	fprintf(f, "%6.2f %7llu %9.2f %-*s %s\n", pct, (unsigned long long)count,
		(double)ns / NS_PER_MS, LOCK_COL, lock, caller);
}

/* The caller rows of group @g in section @ev, ranked. */
static int text_callers(FILE *f, const struct kl_lockstat_row **sorted, const struct group *g,
			enum ls_event ev, enum ls_rank rk, uint64_t total, const char *lock,
			bool fold)
{
	struct caller_sort *c = calloc(g->n, sizeof(*c));
	char label[LABEL_MAX];
	const char *obj;
	bool named;
	size_t n = 0;

	if (c == NULL)
		return ENOMEM;
	for (size_t i = 0; i < g->n; i++) {
		const struct kl_lockstat_row *r = sorted[g->first + i];

		if (ev_count(r, ev) != 0)
			c[n++] = (struct caller_sort){ r, ev_key(r, ev, rk) };
	}
	qsort(c, n, sizeof(*c), cmp_caller);
	for (size_t i = 0; i < n; i++) {
		caller_label(c[i].row->caller, label, sizeof(label), &named, &obj);
		fold_label(label, fold);
		text_row(f, total != 0 ? 100.0 * (double)ev_share(c[i].row, ev, rk) /
						 (double)total : 0.0,
			 ev_count(c[i].row, ev), ev_time(c[i].row, ev), lock, label);
	}
	free(c);
	return 0;
}

/* One "-- <Event> (<type>)" section over groups g[0..ng) of one lock type. */
static int text_section(FILE *f, const struct kl_lockstat_row **sorted, struct group *g,
			size_t ng, enum ls_event ev, const struct kl_lockstat_options *o)
{
	enum ls_rank rk = rank_of(o);
	char lock[LABEL_MAX];
	uint64_t total = 0;
	size_t shown = 0;
	int err = 0;

	for (size_t i = 0; i < ng; i++) {
		g[i].key = ev_key(&g[i].total, ev, rk);
		total += ev_share(&g[i].total, ev, rk);
		shown += ev_count(&g[i].total, ev) != 0;
	}
	if (shown == 0)
		return 0;
	qsort(g, ng, sizeof(*g), cmp_group_key);
	fprintf(f, "\n-- %s (%s%s)\n\n", event_names[ev], sorted[g[0].first]->kind,
		sorted[g[0].first]->read ? ", read" : "");
	fprintf(f, "Total%%  Count   Time/ms          Lock                       Caller\n");
	fprintf(f, "------ ------- --------- ---------------------- "
		"------------------------------\n");
	for (size_t i = 0, n = 0; i < ng && err == 0; i++) {
		if (ev_count(&g[i].total, ev) == 0 || (o->top != 0 && n++ >= o->top))
			continue;
		lock_label(sorted[g[i].first], lock, sizeof(lock),
			   (o->flags & KL_LOCKSTAT_MERGE) != 0);
		text_row(f, total != 0 ? 100.0 * (double)ev_share(&g[i].total, ev, rk) /
						 (double)total : 0.0,
			 ev_count(&g[i].total, ev), ev_time(&g[i].total, ev), lock, "<all>");
		if (!(o->flags & KL_LOCKSTAT_LOCKS))
			err = text_callers(f, sorted, &g[i], ev, rk, total, lock,
					   (o->flags & KL_LOCKSTAT_MERGE_CALLERS) != 0);
	}
	return err;
}

/* "-- Summary by lock": every group of every type, ranked by wait (or count). */
static void text_summary(FILE *f, const struct kl_lockstat_row **sorted, struct group *g,
			 size_t ng, const struct kl_lockstat_snapshot *s,
			 const struct kl_lockstat_options *o)
{
	char lock[LABEL_MAX], type[LABEL_MAX];

	for (size_t i = 0; i < ng; i++)
		g[i].key = wait_key(&g[i].total, rank_of(o));
	qsort(g, ng, sizeof(*g), cmp_group_key);
	fprintf(f, "\n-- Summary by lock\n\n");
	fprintf(f, " Contended   Failed    Wait/ms AvgWait/us MaxWait/us    Spin/ms   Sleep/ms%s"
		" Lock                   Type\n",
		s->hold_times ? "   Acquired    Hold/ms MinHold/us AvgHold/us MaxHold/us" : "");
	for (size_t i = 0; i < ng && (o->top == 0 || i < o->top); i++) {
		const struct kl_lockstat_row *t = &g[i].total;

		lock_label(sorted[g[i].first], lock, sizeof(lock),
			   (o->flags & KL_LOCKSTAT_MERGE) != 0);
		snprintf(type, sizeof(type), "%s%s", t->kind, t->read ? " (read)" : "");
		uint64_t waits = t->contended + t->failed;

		fprintf(f, "%10llu %8llu %10.2f %10.1f %10.1f %10.2f %10.2f",
			(unsigned long long)t->contended, (unsigned long long)t->failed,
			(double)t->wait_ns / NS_PER_MS,
			waits != 0 ? (double)t->wait_ns / (double)waits / NS_PER_US : 0.0,
			(double)t->wait_max_ns / NS_PER_US, (double)t->spin_ns / NS_PER_MS,
			(double)t->sleep_ns / NS_PER_MS);
		if (s->hold_times)
			fprintf(f, " %10llu %10.2f %10.1f %10.1f %10.1f",
				(unsigned long long)t->acquisitions, (double)t->hold_ns / NS_PER_MS,
				(double)t->hold_min_ns / NS_PER_US,
				t->acquisitions != 0 ? (double)t->hold_ns / (double)t->acquisitions /
							       NS_PER_US : 0.0,
				(double)t->hold_max_ns / NS_PER_US);
		fprintf(f, " %-*s %s\n", LOCK_COL, lock, type);
	}
}

/* "-- Bias revocations": read-mostly locks (kl_rmlock) whose writers revoked the readers'
 * bias or that spent time unbiased (completed stretches), in the summary's order; nothing
 * when there is neither. */
static void text_revocations(FILE *f, const struct kl_lockstat_row **sorted,
			     const struct group *g, size_t ng,
			     const struct kl_lockstat_options *o)
{
	char lock[LABEL_MAX];
	bool any = false;

	for (size_t i = 0; i < ng && (o->top == 0 || i < o->top); i++) {
		const struct kl_lockstat_row *t = &g[i].total;

		if (t->revocations == 0 && t->unbiased_ns == 0)
			continue;
		if (!any)
			fprintf(f, "\n-- Bias revocations (read-mostly locks)\n\n"
				"Revocations  Revoke/us AvgRevoke/us Unbiased/ms "
				"Lock                   Type\n");
		any = true;
		lock_label(sorted[g[i].first], lock, sizeof(lock),
			   (o->flags & KL_LOCKSTAT_MERGE) != 0);
		fprintf(f, "%11llu %10.1f %12.1f %11.3f %-*s %s\n",
			(unsigned long long)t->revocations, (double)t->revoke_ns / NS_PER_US,
			t->revocations != 0 ?
				(double)t->revoke_ns / (double)t->revocations / NS_PER_US : 0.0,
			(double)t->unbiased_ns / NS_PER_MS, LOCK_COL, lock, t->kind);
	}
}

/* "-- Costs that grow with the CPUs": per lock of the summary (in its order), the heavy
 * fences its waiters issued, its sleeps and wake-ups, and its hand-overs to a sleeping
 * waiter (FIFO locks), each per contended acquisition as well; nothing when no lock had
 * any. */
static void text_cpu_costs(FILE *f, const struct kl_lockstat_row **sorted,
			   const struct group *g, size_t ng, const struct kl_lockstat_options *o)
{
	char lock[LABEL_MAX];
	bool any = false;

	for (size_t i = 0; i < ng && (o->top == 0 || i < o->top); i++) {
		const struct kl_lockstat_row *t = &g[i].total;
		double per = t->contended != 0 ? 1.0 / (double)t->contended : 0.0;

		if (t->fences == 0 && t->sleep_count == 0 && t->wakeups == 0 &&
		    t->asleep_handovers == 0)
			continue;
		if (!any)
			fprintf(f, "\n-- Costs that grow with the CPUs (per contended acquisition)"
				"\n\n    Fences    Sleeps   Wakeups AsleepHO  Fence/c Sleep/c  "
				"Wake/c    AHO%% Lock                   Type\n");
		any = true;
		lock_label(sorted[g[i].first], lock, sizeof(lock),
			   (o->flags & KL_LOCKSTAT_MERGE) != 0);
		fprintf(f, "%10llu %9llu %9llu %8llu %8.4f %7.3f %7.3f %7.2f %-*s %s\n",
			(unsigned long long)t->fences, (unsigned long long)t->sleep_count,
			(unsigned long long)t->wakeups, (unsigned long long)t->asleep_handovers,
			(double)t->fences * per, (double)t->sleep_count * per,
			(double)t->wakeups * per, 100.0 * (double)t->asleep_handovers * per,
			LOCK_COL, lock, t->kind);
	}
}

/* "-- Holders": per lock of the summary (in its order), the waits charged to the site
 * where the holder had acquired it (struct kl_lockstat_holder says which holder). */
static int text_holders(FILE *f, const struct kl_lockstat_snapshot *s,
			const struct kl_lockstat_row **sorted, const struct group *g, size_t ng,
			const struct kl_lockstat_options *o)
{
	struct kl_lockstat_holder *h = malloc((s->nholders + 1) * sizeof(*h));
	char lock[LABEL_MAX], label[LABEL_MAX];
	const char *obj;
	bool named;

	if (h == NULL)
		return ENOMEM;
	fprintf(f, "\n-- Holders (contending points: where the lock's holder acquired it)\n\n"
		"     Waits    Wait/ms Lock                   Holder\n");
	for (size_t i = 0; i < ng && (o->top == 0 || i < o->top); i++) {
		size_t n = holders_of(s, &g[i], o, h);

		lock_label(sorted[g[i].first], lock, sizeof(lock),
			   (o->flags & KL_LOCKSTAT_MERGE) != 0);
		for (size_t k = 0; k < n; k++) {
			caller_label(h[k].holder, label, sizeof(label), &named, &obj);
			fold_label(label, (o->flags & KL_LOCKSTAT_MERGE_CALLERS) != 0);
			fprintf(f, "%10llu %10.2f %-*s %s\n", (unsigned long long)h[k].waits,
				(double)h[k].wait_ns / NS_PER_MS, LOCK_COL, lock, label);
		}
	}
	free(h);
	return 0;
}

/* "-- Stacks": per lock of the summary, its STACKS_TOP call stacks with the most wait. */
static int text_stacks(FILE *f, const struct kl_lockstat_snapshot *s,
		       const struct kl_lockstat_row **sorted, const struct group *g, size_t ng,
		       const struct kl_lockstat_options *o)
{
	struct kl_lockstat_stack *st = malloc((s->nstacks + 1) * sizeof(*st));
	char lock[LABEL_MAX], label[LABEL_MAX];
	const char *obj;
	bool named;

	if (st == NULL)
		return ENOMEM;
	fprintf(f, "\n-- Stacks (contended acquisitions, at most %d per lock)\n", STACKS_TOP);
	for (size_t i = 0; i < ng && (o->top == 0 || i < o->top); i++) {
		size_t n = stacks_of(s, &g[i], o, st);

		lock_label(sorted[g[i].first], lock, sizeof(lock),
			   (o->flags & KL_LOCKSTAT_MERGE) != 0);
		for (size_t k = 0; k < n && k < STACKS_TOP; k++) {
			fprintf(f, "\n%s (%s%s): %llu contended, %.2f ms\n", lock, g[i].total.kind,
				g[i].total.read ? ", read" : "",
				(unsigned long long)st[k].contended, (double)st[k].wait_ns / NS_PER_MS);
			for (unsigned d = 0; d < st[k].depth; d++) {
				caller_label(st[k].frames[d], label, sizeof(label), &named, &obj);
				fprintf(f, "    %s\n", label);
			}
		}
	}
	free(st);
	return 0;
}

/* lockstat -H: one lock's waits by log2 of their length, a bar per bucket from the first
 * bucket used to the last (bucket b: 2^b <= ns < 2^(b+1)). */
static void text_hist(FILE *f, const struct kl_lockstat_row *t, const char *lock)
{
	uint64_t most = 0, waits = 0;
	unsigned lo = KL_LOCKSTAT_HIST_BUCKETS, hi = 0;

	for (unsigned b = 0; b < KL_LOCKSTAT_HIST_BUCKETS; b++) {
		waits += t->wait_hist[b];
		most = t->wait_hist[b] > most ? t->wait_hist[b] : most;
		if (t->wait_hist[b] != 0) {
			lo = b < lo ? b : lo;
			hi = b;
		}
	}
	if (waits == 0)
		return;
	fprintf(f, "\n%s (%s%s): %llu waits, max %.1f us\n", lock, t->kind,
		t->read ? ", read" : "", (unsigned long long)waits,
		(double)t->wait_max_ns / NS_PER_US);
	fprintf(f, "%14s %9s  distribution\n", "ns >=", "count");
	for (unsigned b = lo; b <= hi; b++) {
		int bar = (int)((t->wait_hist[b] * HIST_BAR + most - 1) / most);

		fprintf(f, "%14llu %9llu  |%.*s%*s|\n", 1ull << b,
			(unsigned long long)t->wait_hist[b], bar, HIST_AT, HIST_BAR - bar, "");
	}
}

/* "-- Wait histograms (-H)": the summary's locks, in its order. */
static void text_hists(FILE *f, const struct kl_lockstat_row **sorted, const struct group *g,
		       size_t ng, const struct kl_lockstat_options *o)
{
	char lock[LABEL_MAX];

	fprintf(f, "\n-- Wait histograms (log2 ns)\n");
	for (size_t i = 0; i < ng && (o->top == 0 || i < o->top); i++) {
		lock_label(sorted[g[i].first], lock, sizeof(lock),
			   (o->flags & KL_LOCKSTAT_MERGE) != 0);
		text_hist(f, &g[i].total, lock);
	}
}

static int text_report(FILE *f, const struct kl_lockstat_snapshot *s,
		       const struct kl_lockstat_row **sorted, struct group *g, size_t ng,
		       const struct kl_lockstat_options *o)
{
	int err = 0;

	text_header(f, s);
	/* Groups of one lock type are contiguous (sorted by type first). */
	for (size_t a = 0, b; a < ng && err == 0; a = b) {
		for (b = a + 1; b < ng && same_type(sorted[g[a].first], sorted[g[b].first]); b++)
			;
		for (int ev = 0; ev < EV_COUNT && err == 0; ev++) {
			if (ev == EV_HOLD && !s->hold_times)
				continue;
			err = text_section(f, sorted, g + a, b - a, (enum ls_event)ev, o);
			/* text_section reorders g[a..b): restore the type order for the next */
			qsort(g + a, b - a, sizeof(*g), cmp_group_first);
		}
	}
	if (err == 0 && ng > 0)
		text_summary(f, sorted, g, ng, s, o);
	if (err == 0 && ng > 0)
		text_revocations(f, sorted, g, ng, o);   /* in the summary's order */
	if (err == 0 && ng > 0)
		text_cpu_costs(f, sorted, g, ng, o);
	if (err == 0 && ng > 0 && s->nholders > 0)
		err = text_holders(f, s, sorted, g, ng, o);
	if (err == 0 && ng > 0 && s->nstacks > 0)
		err = text_stacks(f, s, sorted, g, ng, o);
	if (err == 0 && ng > 0 && (o->flags & KL_LOCKSTAT_HIST))
		text_hists(f, sorted, g, ng, o);   /* g is still in the summary's order */
	if (err == 0 && atomic_load_explicit(&kli_misuse_print, memory_order_relaxed) != NULL)
		atomic_load_explicit(&kli_misuse_print, memory_order_relaxed)(f); /* preload */
	return err;
}

/* ---- JSON ------------------------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
	if (s == NULL) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* "name": v, or "name": null when the build does not measure it; then @sep. */
static void json_opt_u64(FILE *f, const char *name, uint64_t v, bool valid, const char *sep)
{
	if (valid)
		fprintf(f, "\"%s\": %llu%s", name, (unsigned long long)v, sep);
	else
		fprintf(f, "\"%s\": null%s", name, sep);
}

/* ", "mangled": the C++ symbol that caller label @label (-m: @fold) was demangled from,
 * spelled as the symbol table does, in the same form ("+0xoff"); null when none was. */
static void json_mangled(FILE *f, const void *addr, const char *label, bool fold)
{
	char raw[LABEL_MAX];
	const char *obj;
	bool named;

	label_raw = true;
	caller_label(addr, raw, sizeof(raw), &named, &obj);
	label_raw = false;
	fold_label(raw, fold);
	fputs(", \"mangled\": ", f);
	json_str(f, named && strcmp(raw, label) != 0 ? raw : NULL);
}

/* "object": the file @addr lies in (@obj, caller_label()'s), "offset": @addr's offset in
 * its mapping - what addr2line takes, also when the object is stripped; both null for code
 * in no object (JIT). */
static void json_where(FILE *f, const void *addr, const char *obj)
{
	Dl_info info;

	fputs("\"object\": ", f);
	json_str(f, obj);
	if (obj != NULL && dladdr(addr, &info) != 0)
		fprintf(f, ", \"offset\": \"0x%lx\"",
			(unsigned long)((const char *)addr - (const char *)info.dli_fbase));
	else
		fputs(", \"offset\": null", f);
}

/* The counters every lock and caller object carries (no separator after the last). */
static void json_stats(FILE *f, const struct kl_lockstat_row *r, bool hold, bool hist)
{
	json_opt_u64(f, "acquisitions", r->acquisitions, hold, ", ");
	fprintf(f, "\"contended\": %llu, \"failed\": %llu, \"spin_count\": %llu, "
		"\"spin_ns\": %llu, \"sleep_count\": %llu, \"sleep_ns\": %llu, "
		"\"wait_ns\": %llu, \"wait_max_ns\": %llu, ",
		(unsigned long long)r->contended, (unsigned long long)r->failed,
		(unsigned long long)r->spin_count, (unsigned long long)r->spin_ns,
		(unsigned long long)r->sleep_count, (unsigned long long)r->sleep_ns,
		(unsigned long long)r->wait_ns, (unsigned long long)r->wait_max_ns);
	json_opt_u64(f, "hold_ns", r->hold_ns, hold, ", ");
	json_opt_u64(f, "hold_max_ns", r->hold_max_ns, hold, ", ");
	json_opt_u64(f, "hold_min_ns", r->hold_min_ns, hold, ", ");
	fprintf(f, "\"revocations\": %llu, \"revoke_ns\": %llu, \"unbiased_ns\": %llu, "
		"\"fences\": %llu, \"wakeups\": %llu, \"asleep_handovers\": %llu",
		(unsigned long long)r->revocations, (unsigned long long)r->revoke_ns,
		(unsigned long long)r->unbiased_ns, (unsigned long long)r->fences,
		(unsigned long long)r->wakeups, (unsigned long long)r->asleep_handovers);
	if (!hist)
		return;
	fputs(", \"wait_hist\": [", f);
	for (unsigned b = 0; b < KL_LOCKSTAT_HIST_BUCKETS; b++)
		fprintf(f, "%s%llu", b ? ", " : "", (unsigned long long)r->wait_hist[b]);
	fputc(']', f);
}

/* A row that only carries the wake-ups of the lock's unlocks (no call site, nothing else):
 * counted in its lock's totals, never listed as a caller. */
static bool row_wakeups_only(const struct kl_lockstat_row *r)
{
	return r->caller == NULL && r->contended == 0 && r->failed == 0 &&
	       r->acquisitions == 0 && r->revocations == 0 && r->unbiased_ns == 0;
}

static int json_callers(FILE *f, const struct kl_lockstat_row **sorted, const struct group *g,
			bool hold, enum ls_rank rk, bool fold)
{
	struct caller_sort *c = calloc(g->n, sizeof(*c));
	char label[LABEL_MAX];
	const char *obj;
	bool named;

	if (c == NULL)
		return ENOMEM;
	for (size_t i = 0; i < g->n; i++)
		c[i] = (struct caller_sort){ sorted[g->first + i],
					     wait_key(sorted[g->first + i], rk) };
	qsort(c, g->n, sizeof(*c), cmp_caller);
	for (size_t i = 0, shown = 0; i < g->n; i++) {
		if (row_wakeups_only(c[i].row))
			continue;
		caller_label(c[i].row->caller, label, sizeof(label), &named, &obj);
		fold_label(label, fold);
		fprintf(f, "%s\n        {\"caller\": \"0x%lx\", \"symbol\": ", shown++ ? "," : "",
			(unsigned long)(uintptr_t)c[i].row->caller);
		json_str(f, named ? label : NULL);
		json_mangled(f, c[i].row->caller, label, fold);
		fputs(", ", f);
		json_where(f, c[i].row->caller, obj);
		fputs(", ", f);
		json_stats(f, c[i].row, hold, false);
		fputc('}', f);
	}
	free(c);
	return 0;
}

/* The "holders" array of group @g's lock object. */
static int json_holders(FILE *f, const struct kl_lockstat_snapshot *s, const struct group *g,
			const struct kl_lockstat_options *o)
{
	struct kl_lockstat_holder *h = malloc((s->nholders + 1) * sizeof(*h));
	char label[LABEL_MAX];
	const char *obj;
	bool named;
	size_t n;

	if (h == NULL)
		return ENOMEM;
	n = holders_of(s, g, o, h);
	fputs(", \"holders\": [", f);
	for (size_t k = 0; k < n; k++) {
		caller_label(h[k].holder, label, sizeof(label), &named, &obj);
		fold_label(label, (o->flags & KL_LOCKSTAT_MERGE_CALLERS) != 0);
		fprintf(f, "%s\n        {\"holder\": \"0x%lx\", \"symbol\": ", k ? "," : "",
			(unsigned long)(uintptr_t)h[k].holder);
		json_str(f, named ? label : NULL);
		json_mangled(f, h[k].holder, label, (o->flags & KL_LOCKSTAT_MERGE_CALLERS) != 0);
		fputs(", ", f);
		json_where(f, h[k].holder, obj);
		fprintf(f, ", \"waits\": %llu, \"wait_ns\": %llu}", (unsigned long long)h[k].waits,
			(unsigned long long)h[k].wait_ns);
	}
	fputc(']', f);
	free(h);
	return 0;
}

/* The "stacks" array of group @g's lock object (absent when nothing recorded stacks). */
static int json_stacks(FILE *f, const struct kl_lockstat_snapshot *s, const struct group *g,
		       const struct kl_lockstat_options *o)
{
	struct kl_lockstat_stack *st = malloc((s->nstacks + 1) * sizeof(*st));
	char label[LABEL_MAX];
	const char *obj;
	bool named;
	size_t n;

	if (st == NULL)
		return ENOMEM;
	n = stacks_of(s, g, o, st);
	fputs(", \"stacks\": [", f);
	for (size_t k = 0; k < n; k++) {
		fprintf(f, "%s\n        {\"contended\": %llu, \"wait_ns\": %llu, \"frames\": [",
			k ? "," : "", (unsigned long long)st[k].contended,
			(unsigned long long)st[k].wait_ns);
		for (unsigned d = 0; d < st[k].depth; d++) {
			caller_label(st[k].frames[d], label, sizeof(label), &named, &obj);
			fprintf(f, "%s{\"pc\": \"0x%lx\", \"symbol\": ", d ? ", " : "",
				(unsigned long)(uintptr_t)st[k].frames[d]);
			json_str(f, named ? label : NULL);
			json_mangled(f, st[k].frames[d], label, false);
			fputs(", ", f);
			json_where(f, st[k].frames[d], obj);
			fputc('}', f);
		}
		fputs("]}", f);
	}
	fputc(']', f);
	free(st);
	return 0;
}

static int json_lock(FILE *f, const struct kl_lockstat_row **sorted, const struct group *g,
		     const struct kl_lockstat_snapshot *s, const struct kl_lockstat_options *o)
{
	char name[LABEL_MAX], raw[LABEL_MAX];
	int err = 0;

	fprintf(f, "\n    {\"lock\": \"0x%lx\", \"name\": ",
		(unsigned long)(uintptr_t)g->total.lock);
	lock_label(sorted[g->first], name, sizeof(name), (o->flags & KL_LOCKSTAT_MERGE) != 0);
	json_str(f, strncmp(name, "0x", 2) != 0 ? name : NULL);   /* an address: no name */
	label_raw = true;   /* "mangled": the C++ symbol the name was demangled from */
	lock_label(sorted[g->first], raw, sizeof(raw), (o->flags & KL_LOCKSTAT_MERGE) != 0);
	label_raw = false;
	fputs(", \"mangled\": ", f);
	json_str(f, strcmp(raw, name) != 0 ? raw : NULL);
	fputs(", \"kind\": ", f);
	json_str(f, g->total.kind);
	fprintf(f, ", \"read\": %s, ", g->total.read ? "true" : "false");
	json_stats(f, &g->total, s->hold_times, (o->flags & KL_LOCKSTAT_HIST) != 0);
	fputs(", \"callers\": [", f);
	if (!(o->flags & KL_LOCKSTAT_LOCKS))
		err = json_callers(f, sorted, g, s->hold_times,
				   rank_of(o),
				   (o->flags & KL_LOCKSTAT_MERGE_CALLERS) != 0);
	fputc(']', f);
	if (err == 0)
		err = json_holders(f, s, g, o);
	if (err == 0 && s->nstacks > 0)
		err = json_stacks(f, s, g, o);
	fputc('}', f);
	return err;
}

static int json_report(FILE *f, const struct kl_lockstat_snapshot *s,
		       const struct kl_lockstat_row **sorted, struct group *g, size_t ng,
		       const struct kl_lockstat_options *o)
{
	static const char *const rank_names[] = { "time", "count", "avg" };
	enum ls_rank rk = rank_of(o);
	char comm[LABEL_MAX];
	int err = 0;

	for (size_t i = 0; i < ng; i++)
		g[i].key = wait_key(&g[i].total, rk);
	qsort(g, ng, sizeof(*g), cmp_group_key);
	fprintf(f, "{\"klock_lockstat\": %d, \"lockstat_built\": true, \"recording\": %s, "
		"\"hold_times\": %s, \"sort\": \"%s\",\n", KL_LOCKSTAT_SCHEMA,
		s->recording ? "true" : "false", s->hold_times ? "true" : "false",
		rank_names[rk]);
	process_name(comm, sizeof(comm));
	fprintf(f, "  \"pid\": %ld, \"command\": ", kli_lockstat_pid());
	json_str(f, comm[0] != '\0' ? comm : NULL);
	fputs(",\n", f);
	fprintf(f, "  \"elapsed_ns\": %llu, \"threads\": %u, \"cpus\": %u, \"wait_ns\": %llu, "
		"\"wait_pct\": %.4f,\n", (unsigned long long)s->elapsed_ns, s->threads, s->cpus,
		(unsigned long long)s->wait_ns, s->wait_pct);
	fputs("  ", f);
	json_opt_u64(f, "acquisitions", s->acquisitions, s->hold_times, ", ");
	fprintf(f, "\"contended\": %llu, \"failed\": %llu, \"dropped\": %llu,\n  \"locks\": [",
		(unsigned long long)s->contended, (unsigned long long)s->failed,
		(unsigned long long)s->dropped);
	for (size_t i = 0; i < ng && (o->top == 0 || i < o->top) && err == 0; i++) {
		if (i != 0)
			fputc(',', f);
		err = json_lock(f, sorted, &g[i], s, o);
	}
	fputs("\n  ]\n}\n", f);
	return err;
}

/* ---- entry points ---------------------------------------------------------------------- */

/*
 * -M / -m: a copy of the rows keyed by the merged lock (the start of its array) and the
 * merged caller (its function's start), sorted, with equal keys added together; @sorted
 * points into it, *@n is its length. NULL for ENOMEM.
 */
static struct kl_lockstat_row *merge_rows(const struct kl_lockstat_snapshot *s,
					  const struct kl_lockstat_options *o,
					  const struct kl_lockstat_row **sorted, size_t *n)
{
	struct kl_lockstat_row *m = malloc((s->nrows + 1) * sizeof(*m));
	size_t k = 0;

	if (m == NULL)
		return NULL;
	for (size_t i = 0; i < s->nrows; i++) {
		m[i] = s->rows[i];
		if (o->flags & KL_LOCKSTAT_MERGE)
			m[i].lock = merge_lock(&s->rows[i]);
		if (o->flags & KL_LOCKSTAT_MERGE_CALLERS)
			m[i].caller = merge_caller(s->rows[i].caller);
		sorted[i] = &m[i];
	}
	qsort(sorted, s->nrows, sizeof(*sorted), cmp_group);
	/* adjacent equal keys (type, side, lock, caller) become one row */
	for (size_t i = 0; i < s->nrows; i++) {
		if (k > 0 && cmp_group(&sorted[k - 1], &sorted[i]) == 0) {
			row_add((struct kl_lockstat_row *)sorted[k - 1], sorted[i]);
			continue;
		}
		sorted[k++] = sorted[i];
	}
	*n = k;
	return m;
}

/* -L / -F: whether row @r is shown (its lock's label or address, its caller's label or
 * function, match the patterns). */
static bool row_shown(const struct kl_lockstat_row *r, const struct kl_lockstat_options *o)
{
	char label[LABEL_MAX];
	const char *obj;
	bool named;

	if (o->lock_match[0] != '\0') {
		bool hit = false;

		for (int raw = 0; raw < 2 && !hit; raw++) {   /* demangled, then mangled */
			label_raw = raw;
			lock_label(r, label, sizeof(label), (o->flags & KL_LOCKSTAT_MERGE) != 0);
			hit = fnmatch(o->lock_match, label, 0) == 0;
		}
		label_raw = false;
		snprintf(label, sizeof(label), "0x%lx", (unsigned long)(uintptr_t)r->lock);
		if (!hit && fnmatch(o->lock_match, label, 0) != 0)
			return false;
	}
	if (o->caller_match[0] != '\0') {
		bool hit = false;

		for (int raw = 0; raw < 2 && !hit; raw++) {   /* demangled, then mangled */
			char *off;

			label_raw = raw;
			caller_label(r->caller, label, sizeof(label), &named, &obj);
			hit = fnmatch(o->caller_match, label, 0) == 0;
			if (!hit && (off = strstr(label, "+0x")) != NULL) {
				while (strstr(off + 1, "+0x") != NULL)
					off = strstr(off + 1, "+0x");
				*off = '\0';   /* the function alone */
				hit = fnmatch(o->caller_match, label, 0) == 0;
			}
		}
		label_raw = false;
		return hit;
	}
	return true;
}

/* Keeps the rows of sorted[0..n) that row_shown(); the new count. */
static size_t filter_rows(const struct kl_lockstat_row **sorted, size_t n,
			  const struct kl_lockstat_options *o)
{
	size_t k = 0;

	if (o->lock_match[0] == '\0' && o->caller_match[0] == '\0')
		return n;
	for (size_t i = 0; i < n; i++)
		if (row_shown(sorted[i], o))
			sorted[k++] = sorted[i];
	return k;
}

int kl_lockstat_report_snapshot(FILE *f, const struct kl_lockstat_snapshot *s,
				const struct kl_lockstat_options *opt)
{
	static const struct kl_lockstat_options defaults;
	const struct kl_lockstat_options *o = opt != NULL ? opt : &defaults;
	const struct kl_lockstat_row **sorted = malloc((s->nrows + 1) * sizeof(*sorted));
	struct group *g = malloc((s->nrows + 1) * sizeof(*g));
	bool merge = (o->flags & (KL_LOCKSTAT_MERGE | KL_LOCKSTAT_MERGE_CALLERS)) != 0;
	struct kl_lockstat_row *merged = NULL;
	size_t ng, n = s->nrows;
	int err = ENOMEM;

	if (sorted != NULL && g != NULL && merge)
		merged = merge_rows(s, o, sorted, &n);
	if (sorted != NULL && g != NULL && (merged != NULL || !merge)) {
		if (merged == NULL) {
			for (size_t i = 0; i < n; i++)
				sorted[i] = &s->rows[i];
			qsort(sorted, n, sizeof(*sorted), cmp_group);
		}
		n = filter_rows(sorted, n, o);
		ng = make_groups(sorted, n, g);
		if (o->flags & KL_LOCKSTAT_JSON)
			err = json_report(f, s, sorted, g, ng, o);
		else
			err = text_report(f, s, sorted, g, ng, o);
	}
	free(sorted);
	free(g);
	free(merged);
	if (err == 0 && (fflush(f) != 0 || ferror(f)))
		err = EIO;
	return err;
}

int kl_lockstat_report(FILE *f, const struct kl_lockstat_options *opt)
{
	struct kl_lockstat_snapshot s;
	int err = kl_lockstat_snapshot(&s);

	if (err == ENOTSUP) {
		if (opt != NULL && (opt->flags & KL_LOCKSTAT_JSON))
			fprintf(f, "{\"klock_lockstat\": %d, \"lockstat_built\": false}\n",
				KL_LOCKSTAT_SCHEMA);
		else
			fputs("lockstat: compiled out of this build (-Dlockstat=false); "
			      "nothing recorded.\n", f);
		fflush(f);
		return ENOTSUP;
	}
	if (err != 0)
		return err;
	err = kl_lockstat_report_snapshot(f, &s, opt);
	kl_lockstat_snapshot_free(&s);
	return err;
}

/* One option word into @o; false if unknown. */
static bool parse_word(const char *w, struct kl_lockstat_options *o)
{
	char *end;
	unsigned long n;

	if (strcmp(w, "1") == 0 || strcmp(w, "callers") == 0)
		o->flags &= ~KL_LOCKSTAT_LOCKS;
	else if (strcmp(w, "text") == 0)
		o->flags &= ~KL_LOCKSTAT_JSON;
	else if (strcmp(w, "json") == 0)
		o->flags |= KL_LOCKSTAT_JSON;
	else if (strcmp(w, "time") == 0)
		o->flags &= ~(KL_LOCKSTAT_BY_COUNT | KL_LOCKSTAT_BY_AVG);
	else if (strcmp(w, "count") == 0)
		o->flags = (o->flags & ~KL_LOCKSTAT_BY_AVG) | KL_LOCKSTAT_BY_COUNT;
	else if (strcmp(w, "avg") == 0)
		o->flags = (o->flags & ~KL_LOCKSTAT_BY_COUNT) | KL_LOCKSTAT_BY_AVG;
	else if (strncmp(w, "lock=", 5) == 0 && strlen(w + 5) < sizeof(o->lock_match))
		strcpy(o->lock_match, w + 5);
	else if (strncmp(w, "caller=", 7) == 0 && strlen(w + 7) < sizeof(o->caller_match))
		strcpy(o->caller_match, w + 7);
	else if (strcmp(w, "locks") == 0)
		o->flags |= KL_LOCKSTAT_LOCKS;
	else if (strcmp(w, "merge") == 0)
		o->flags |= KL_LOCKSTAT_MERGE;
	else if (strcmp(w, "merge_callers") == 0)
		o->flags |= KL_LOCKSTAT_MERGE_CALLERS;
	else if (strcmp(w, "hist") == 0)
		o->flags |= KL_LOCKSTAT_HIST;
	else if (strncmp(w, "top=", 4) == 0 && w[4] >= '0' && w[4] <= '9') {
		n = strtoul(w + 4, &end, 10);
		if (*end != '\0' || n > TOP_MAX)
			return false;
		o->top = (unsigned)n;
	} else {
		return false;
	}
	return true;
}

int kl_lockstat_options_parse(const char *s, struct kl_lockstat_options *opt)
{
	struct kl_lockstat_options o = { 0 };
	char word[KL_LOCKSTAT_MATCH_MAX + 16];   /* "caller=" and a pattern */

	*opt = o;
	while (*s != '\0') {
		size_t n = strcspn(s, ", ");

		if (n == 0) {
			s++;
			continue;
		}
		if (n >= sizeof(word))
			return EINVAL;
		memcpy(word, s, n);
		word[n] = '\0';
		s += n;
		if (!parse_word(word, &o))
			return EINVAL;
	}
	*opt = o;
	return 0;
}

/* Both builds: a snapshot of the -Dlockstat=false build is empty and frees nothing. */
void kl_lockstat_snapshot_free(struct kl_lockstat_snapshot *s)
{
	if (s == NULL)
		return;
	free(s->rows);
	s->rows = NULL;
	s->nrows = 0;
	free(s->holders);
	s->holders = NULL;
	s->nholders = 0;
	free(s->stacks);
	s->stacks = NULL;
	s->nstacks = 0;
}
