/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/klock.h - the umbrella header: every public klock header.
 */
#ifndef KLOCK_KLOCK_H
#define KLOCK_KLOCK_H

#include <klock/config.h>
#include <klock/compiler.h>
#include <klock/wait.h>
#include <klock/topology.h>
#include <klock/fence.h>
#include <klock/witness.h>
#include <klock/rmlock.h>
#include <klock/pcpu_rwsem.h>
#include <klock/seqlock.h>
#include <klock/lockstat.h>
#include <klock/names.h>
#include <klock/ticket.h>
#include <klock/mcs.h>
#include <klock/mutex.h>
#include <klock/cond.h>
#include <klock/rwlock.h>
#include <klock/hashlock.h>

KL_BEGIN_DECLS

/* The library's version string, e.g. "0.1.0". */
KL_API const char *kl_version(void);

KL_END_DECLS

#endif /* KLOCK_KLOCK_H */
