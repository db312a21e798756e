/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/ticket_impl.h - kl_ticket on behalf of another exported function (kl_hashlock's
 * ticket stripes): the same operations as kl_ticket_lock/trylock/unlock, with the hooks,
 * debug reports and lockstat rows naming @site, the caller of that exported function,
 * instead of the library function that called kl_ticket_*. The theory is in ticket.c.
 */
#ifndef KL_TICKET_IMPL_H
#define KL_TICKET_IMPL_H

#include <klock/ticket.h>
#include "kl_internal.h"

void kli_ticket_lock_at(struct kl_ticket *t, const void *site);
bool kli_ticket_trylock_at(struct kl_ticket *t, const void *site);
void kli_ticket_unlock_at(struct kl_ticket *t, const void *site);

#endif /* KL_TICKET_IMPL_H */
