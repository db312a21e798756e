/* SPDX-License-Identifier: BSD-2-Clause */
/* locks/names_impl.h - the name table's internal side. */
#ifndef KL_NAMES_IMPL_H
#define KL_NAMES_IMPL_H

#include <stddef.h>
#include <stdio.h>

/* Drop @lock's name (called by every destroy). Cheap when no lock was ever named. */
void kli_lock_forget(const void *lock);

/* "<kind> \"<name>\" (<addr>)" or "<kind> <addr>", for reports. */
void kli_lock_describe(const void *lock, const char *kind, char *buf, size_t len);

#endif /* KL_NAMES_IMPL_H */
