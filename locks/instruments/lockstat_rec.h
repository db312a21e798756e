/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/instruments/lockstat_rec.h - what lockstat's recorder (lockstat.c) shares with
 * its snapshots (lockstat_snapshot.c): the per-thread table and the merged rows (the
 * theory block in lockstat.c describes both), the cold state that start/stop/reset and
 * snapshots serialise on, and the helpers both sides call. Private to those two files.
 */
#ifndef KL_LOCKSTAT_REC_H
#define KL_LOCKSTAT_REC_H

#include "lockstat_impl.h"
#include "wordlock.h"

/* The per-thread pointer while its table is being allocated. */
#define LS_ALLOCATING ((struct kli_ls_table *)(uintptr_t)1)

struct kli_ls_entry {
	_Atomic(const void *) lock;   /* NULL: free slot */
	_Atomic(const void *) site;
	_Atomic uint32_t kf;          /* kli_ls_kf() */
	_Atomic uint64_t v[KLI_LS_NFIELDS];
};

/* A lock held by the owner, for its hold time (hold builds). Owner-only. */
struct kli_ls_held {
	const void *lock;
	const void *site;
	uint32_t kf;
	uint64_t t0;   /* kl_arch_cycles() at acquisition */
};

struct kli_ls_table {
	_Atomic uint32_t seq;       /* seqcount: odd while the owner writes (S1/S2) */
	_Atomic uint32_t gen;       /* generation of the contents */
	_Atomic uint64_t dropped;   /* events lost to a full table or re-entry */
	uint32_t nkeys;             /* owner only: keys in slot[] */
	uint32_t held_n;            /* owner only: entries in held[] */
	bool busy;                  /* owner only: inside a write (re-entry guard) */
	struct kli_ls_held held[KLI_LS_HELD_MAX];
	struct kli_ls_entry slot[KLI_LS_SLOTS];
} KL_PADDED;   /* its own lines (mmap()ed: page-aligned) */

/* A merged row (retired map, snapshots): plain, under a lock or private. */
struct kli_ls_row {
	const void *lock;   /* NULL: free slot */
	const void *site;
	uint32_t kf;
	uint64_t v[KLI_LS_NFIELDS];
};

struct kli_ls_map {
	struct kli_ls_row *rows;
	size_t cap;   /* power of two, or 0 */
	size_t n;
};

/* Cold state: control and exited threads' data (the process-level side, exit report and
 * attach channel, is lockstat_ctl.c's). */
struct kli_ls_state {
	struct kli_wordlock ctl;       /* start/stop/reset/snapshot; before retired_lock */
	uint64_t t_start;              /* ctl: start of the open window */
	uint64_t elapsed;              /* ctl: closed windows since the reset */
	_Atomic unsigned peak;         /* most live threads seen while recording */
	_Atomic uint64_t lost;         /* episodes lost before a table existed */
	struct kli_wordlock retired_lock;
	struct kli_ls_map retired;     /* retired_lock: exited threads' data */
	uint64_t retired_dropped;      /* retired_lock */
};
extern struct kli_ls_state kli_ls;

static inline bool kli_ls_table_valid(const struct kli_ls_table *t)
{
	return t != NULL && t != LS_ALLOCATING;
}

/* Adds @src's counters to the row of its key in @m. 0 or ENOMEM. */
int kli_ls_map_add(struct kli_ls_map *m, const struct kli_ls_row *src);
void kli_ls_map_free(struct kli_ls_map *m);
/* Merges @t's entries of generation @gen into @m; *@dropped gains what @t dropped. */
int kli_ls_scan_table(struct kli_ls_map *m, struct kli_ls_table *t, uint32_t gen,
		      uint64_t *dropped);
/* The process's live threads (klock-stat's control thread not counted). */
unsigned kli_ls_count_threads(void);
/* Raises the peak thread count to the current one. */
void kli_ls_note_threads(void);

#endif /* KL_LOCKSTAT_REC_H */
