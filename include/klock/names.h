/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/names.h - human names for locks, used by every report klock prints (debug-build
 * misuse reports, witness, lockstat). Names live in a side table keyed by the lock's
 * address, so lock structs stay small; a lock without a name is shown by address.
 */
#ifndef KLOCK_NAMES_H
#define KLOCK_NAMES_H

#include <stddef.h>
#include <klock/compiler.h>

KL_BEGIN_DECLS

/**
 * kl_lock_set_name - name the lock at @lock (any klock lock, or any address the caller
 * wants reports to name). The string is copied. Passing NULL removes the name. A lock's
 * destroy call forgets its name.
 * Returns 0, or ENOMEM. Thread-safe; does not block on any klock lock.
 */
KL_API int kl_lock_set_name(const void *lock, const char *name) KL_NONNULL(1);

/**
 * kl_lock_get_name - copy the name of @lock into @buf (NUL-terminated, truncated to @len).
 * Returns the length of the full name, or 0 (with buf = "") when the lock has no name.
 */
KL_API size_t kl_lock_get_name(const void *lock, char *buf, size_t len) KL_NONNULL(1);

KL_END_DECLS

#endif /* KLOCK_NAMES_H */
