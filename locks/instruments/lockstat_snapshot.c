/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/instruments/lockstat_snapshot.c - lockstat's controls and snapshots: start, stop
 * and reset of the recording window, and kl_lockstat_snapshot(), which merges exited
 * threads' data and every live thread's table (read under each table's seqcount, S4 in
 * lockstat.c's theory block) into rows, folds lock groups into their owner and fills the
 * caller's snapshot. The recorder, which writes the tables, is lockstat.c. Only in
 * -Dlockstat=true builds.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <klock/lockstat.h>
#include <klock/topology.h>
#include "lockstat_impl.h"
#include "lockstat_rec.h"
#include "names_impl.h"
#include "thread.h"
#include "wordlock.h"

#if !KLOCK_LOCKSTAT
#error "lockstat_snapshot.c is the -Dlockstat=true build; meson picks lockstat_off.c otherwise"
#endif

/* ---- control ------------------------------------------------------------------------------ */

static uint64_t ls_elapsed_locked(void)
{
	uint64_t e = kli_ls.elapsed;

	if (atomic_load_explicit(&kli_lockstat.on, memory_order_relaxed))
		e += kli_now_ns() - kli_ls.t_start;
	return e;
}

/* The switch is a plain flag: nothing is published through it (each thread records into
 * its own table), so relaxed stores suffice; a thread that sees the flip late moves the
 * window's edge by one episode. */
int kli_lockstat_start(void)
{
	int err = 0;

	kli_wordlock_lock(&kli_ls.ctl);
	if (atomic_load_explicit(&kli_lockstat.on, memory_order_relaxed)) {
		err = EALREADY;
	} else {
		kli_ls.t_start = kli_now_ns();
		kli_ls_note_threads();
		kli_symtab_init();
		kli_site_skip_init();
		atomic_store_explicit(&kli_lockstat.on, true, memory_order_relaxed);
	}
	kli_wordlock_unlock(&kli_ls.ctl);
	return err;
}

int kl_lockstat_start(void)
{
	kli_init();
	return kli_lockstat_start();
}

int kl_lockstat_stop(void)
{
	int err = 0;

	kli_wordlock_lock(&kli_ls.ctl);
	if (!atomic_load_explicit(&kli_lockstat.on, memory_order_relaxed)) {
		err = EALREADY;
	} else {
		kli_ls_note_threads();
		kli_ls.elapsed += kli_now_ns() - kli_ls.t_start;
		atomic_store_explicit(&kli_lockstat.on, false, memory_order_relaxed);
	}
	kli_wordlock_unlock(&kli_ls.ctl);
	return err;
}

void kl_lockstat_reset(void)
{
	kli_wordlock_lock(&kli_ls.ctl);
	kli_wordlock_lock(&kli_ls.retired_lock);
	atomic_fetch_add_explicit(&kli_lockstat.gen, 1, memory_order_relaxed);
	kli_ls_map_free(&kli_ls.retired);
	kli_ls.retired_dropped = 0;
	atomic_store_explicit(&kli_ls.lost, 0, memory_order_relaxed);
	kli_wordlock_unlock(&kli_ls.retired_lock);
	kli_ls.elapsed = 0;
	kli_ls.t_start = kli_now_ns();
	atomic_store_explicit(&kli_ls.peak, kli_ls_count_threads(), memory_order_relaxed);
	kli_wordlock_unlock(&kli_ls.ctl);
}

bool kl_lockstat_enabled(void)
{
	return atomic_load_explicit(&kli_lockstat.on, memory_order_relaxed);
}

/* Merges retired data and every table into @m; fills the header fields of @s. */
static int ls_collect(struct kl_lockstat_snapshot *s, struct kli_ls_map *m)
{
	uint64_t dropped;
	uint32_t gen;
	int err = 0;

	kli_wordlock_lock(&kli_ls.ctl);
	s->recording = atomic_load_explicit(&kli_lockstat.on, memory_order_relaxed);
	if (s->recording)
		kli_ls_note_threads();
	s->elapsed_ns = ls_elapsed_locked();
	s->threads = atomic_load_explicit(&kli_ls.peak, memory_order_relaxed);
	kli_wordlock_lock(&kli_ls.retired_lock);
	gen = atomic_load_explicit(&kli_lockstat.gen, memory_order_relaxed);
	dropped = kli_ls.retired_dropped + atomic_load_explicit(&kli_ls.lost, memory_order_relaxed);
	for (size_t i = 0; i < kli_ls.retired.cap && err == 0; i++)
		if (kli_ls.retired.rows[i].lock != NULL)
			err = kli_ls_map_add(m, &kli_ls.retired.rows[i]);
	for (struct kli_thread *th = kli_thread_first(); th != NULL && err == 0;
	     th = th->all_next) {
		/* P2: pairs with P1 in ls_table_alloc() */
		struct kli_ls_table *t = atomic_load_explicit(&th->lockstat, memory_order_acquire);

		if (kli_ls_table_valid(t))
			err = kli_ls_scan_table(m, t, gen, &dropped);
	}
	kli_wordlock_unlock(&kli_ls.retired_lock);
	kli_wordlock_unlock(&kli_ls.ctl);
	s->dropped = dropped;
	return err;
}

/*
 * Rows of a lock group's members (kl_hashlock's stripes: each a kl_mutex or kl_ticket that
 * recorded its own episodes) become rows of the owner, in the owner's kind, merged per
 * (owner, site, side): one hashlock row per table and caller, not one mutex row per
 * stripe. At snapshot time only, so recording never looks a group up. Groups destroyed
 * before the snapshot are not folded (their stripes print as mutexes, by address).
 */
static int ls_fold_groups(struct kli_ls_map *m)
{
	struct kli_ls_map folded = { 0 };
	struct kli_lock_member mb;
	int err = 0;

	if (kli_lock_group_count() == 0)
		return 0;
	for (size_t i = 0; i < m->cap && err == 0; i++) {
		struct kli_ls_row r = m->rows[i];

		if (r.lock == NULL)
			continue;
		if (kli_lock_group_find(r.lock, &mb)) {
			r.lock = mb.owner;
			r.kf = (uint32_t)mb.kind | (r.kf & KLI_LS_KF_BITS);
		}
		err = kli_ls_map_add(&folded, &r);
	}
	if (err != 0) {
		kli_ls_map_free(&folded);
		return err;
	}
	kli_ls_map_free(m);
	*m = folded;
	return 0;
}

static const char *ls_kind_name(uint32_t kf)
{
	return kli_kind_name((enum kli_kind)(kf & ~KLI_LS_KF_BITS));
}

/* Holder row @r (KLI_LS_KF_HOLDER) as a public holder; no totals (its wait is the row's). */
static void ls_fill_holder(struct kl_lockstat_holder *o, const struct kli_ls_row *r)
{
	*o = (struct kl_lockstat_holder){
		.lock = r->lock, .holder = r->site, .kind = ls_kind_name(r->kf),
		.read = (r->kf & KLI_LS_KF_READ) != 0,
		.waits = r->v[KLI_LS_CONTENDED] + r->v[KLI_LS_FAILED],
		.wait_ns = r->v[KLI_LS_WAIT_NS],
	};
}

/* Row @r as a public row; adds it to the totals of @s. */
static void ls_fill_row(struct kl_lockstat_snapshot *s, struct kl_lockstat_row *o,
			const struct kli_ls_row *r)
{
	*o = (struct kl_lockstat_row){
		.lock = r->lock, .caller = r->site, .kind = ls_kind_name(r->kf),
		.read = (r->kf & KLI_LS_KF_READ) != 0,
		.acquisitions = r->v[KLI_LS_ACQUIRED], .contended = r->v[KLI_LS_CONTENDED],
		.failed = r->v[KLI_LS_FAILED], .spin_count = r->v[KLI_LS_NSPIN],
		.spin_ns = r->v[KLI_LS_SPIN_NS], .sleep_count = r->v[KLI_LS_NSLEEP],
		.sleep_ns = r->v[KLI_LS_SLEEP_NS], .wait_ns = r->v[KLI_LS_WAIT_NS],
		.wait_max_ns = r->v[KLI_LS_WAIT_MAX], .hold_ns = r->v[KLI_LS_HOLD_NS],
		.hold_max_ns = r->v[KLI_LS_HOLD_MAX],
		.hold_min_ns = r->v[KLI_LS_HOLD_MINV] != 0 ? ~r->v[KLI_LS_HOLD_MINV] : 0,
		.revocations = r->v[KLI_LS_REVOKES], .revoke_ns = r->v[KLI_LS_REVOKE_NS],
		.unbiased_ns = r->v[KLI_LS_UNBIASED_NS], .fences = r->v[KLI_LS_FENCES],
		.wakeups = r->v[KLI_LS_WAKEUPS],
		.asleep_handovers = r->v[KLI_LS_ASLEEP_HANDOVERS],
	};
	memcpy(o->wait_hist, &r->v[KLI_LS_HIST], sizeof(o->wait_hist));
	s->wait_ns += o->wait_ns;
	s->contended += o->contended;
	s->failed += o->failed;
	s->acquisitions += o->acquisitions;
}

/* Stack row @r (KLI_LS_KF_STACK) as a public stack; no totals (its wait is the row's). */
static void ls_fill_stack(struct kl_lockstat_stack *o, const struct kli_ls_row *r)
{
	*o = (struct kl_lockstat_stack){
		.lock = r->lock, .kind = ls_kind_name(r->kf),
		.read = (r->kf & KLI_LS_KF_READ) != 0,
		.contended = r->v[KLI_LS_CONTENDED], .wait_ns = r->v[KLI_LS_WAIT_NS],
	};
	while (o->depth < KL_LOCKSTAT_STACK_MAX && r->v[KLI_LS_HIST + o->depth] != 0) {
		o->frames[o->depth] = (const void *)(uintptr_t)r->v[KLI_LS_HIST + o->depth];
		o->depth++;
	}
}

/* Fills the public rows, holders, stacks and totals of @s from @m. */
static int ls_fill(struct kl_lockstat_snapshot *s, const struct kli_ls_map *m)
{
	size_t k = 0, h = 0, st = 0, nh = 0, ns = 0;

	for (size_t i = 0; i < m->cap; i++) {
		nh += m->rows[i].lock != NULL && (m->rows[i].kf & KLI_LS_KF_HOLDER);
		ns += m->rows[i].lock != NULL && (m->rows[i].kf & KLI_LS_KF_STACK);
	}
	s->rows = m->n > nh + ns ? calloc(m->n - nh - ns, sizeof(*s->rows)) : NULL;
	s->holders = nh != 0 ? calloc(nh, sizeof(*s->holders)) : NULL;
	s->stacks = ns != 0 ? calloc(ns, sizeof(*s->stacks)) : NULL;
	if ((m->n > nh + ns && s->rows == NULL) || (nh != 0 && s->holders == NULL) ||
	    (ns != 0 && s->stacks == NULL))
		return ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		const struct kli_ls_row *r = &m->rows[i];

		if (r->lock == NULL)
			continue;
		if (r->kf & KLI_LS_KF_HOLDER)
			ls_fill_holder(&s->holders[h++], r);
		else if (r->kf & KLI_LS_KF_STACK)
			ls_fill_stack(&s->stacks[st++], r);
		else
			ls_fill_row(s, &s->rows[k++], r);
	}
	s->nrows = k;
	s->nholders = h;
	s->nstacks = st;
	return 0;
}

int kl_lockstat_snapshot(struct kl_lockstat_snapshot *s)
{
	struct kli_ls_map m = { 0 };
	int err;

	memset(s, 0, sizeof(*s));
	err = ls_collect(s, &m);
	if (err == 0)
		err = ls_fold_groups(&m);
	if (err == 0)
		err = ls_fill(s, &m);
	kli_ls_map_free(&m);
	if (err != 0) {
		kl_lockstat_snapshot_free(s);
		return err;
	}
	s->cpus = kl_topology()->online_cpus;
	s->hold_times = KLOCK_LOCKSTAT_HOLD;
	if (s->threads == 0)
		s->threads = 1;
	if (s->elapsed_ns > 0)
		s->wait_pct = 100.0 * (double)s->wait_ns / ((double)s->elapsed_ns * s->threads);
	return 0;
}
