/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/cond_impl.h - kl_cond's internal entry for libklock-preload's pthread_cond_*: a
 * wait on a realtime deadline, with a validate step under the bucket lock and a cookie by
 * which one waiter can be woken alone (the interposer's pthread_cancel, preload/cond.c).
 */
#ifndef KL_COND_IMPL_H
#define KL_COND_IMPL_H

#include <klock/cond.h>
#include "kl_internal.h"

/* What a kli_cond_wait_ext() adds to kl_cond_timedwait(). */
struct kli_cond_wait {
	const struct timespec *abstime;  /* absolute deadline (valid), or NULL: none */
	bool realtime;                   /* @abstime is on CLOCK_REALTIME (follows steps) */
	bool (*validate)(void *arg);     /* under the bucket lock, once queued would be next:
	                                  * false = do not sleep, return 0 at once (NULL ok) */
	void *arg;
	uintptr_t cookie;                /* park cookie: kli_unpark_cookie(c, cookie,
	                                  * KLI_COND_TOKEN_KICK) wakes this waiter alone */
};

/* The token of a waiter woken by kli_unpark_cookie(): nobody counted it out of the
 * condvar's waiters, so it does so itself (like a waiter that timed out). Distinct from
 * the mutex's KLI_MTX_TOKEN_WAKE/HANDOFF (mutex_impl.h). */
#define KLI_COND_TOKEN_KICK 2

/*
 * kl_cond_timedwait() with @w's extras, reports naming @site. Returns 0 (woken, kicked, or
 * validate said no - then @m was never released), ETIMEDOUT, EINVAL (destroyed) or EPERM
 * (@m not held; nothing changed). The caller holds @m again on 0 and ETIMEDOUT.
 */
int kli_cond_wait_ext(struct kl_cond *c, struct kl_mutex *m, const struct kli_cond_wait *w,
		      const void *site);

#endif /* KL_COND_IMPL_H */
