/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/instruments/witness_off.c - the witness API of a build without the lock-order
 * checker (-Dwitness=false, the default): the controls exist, so programs and the
 * preload link unchanged, and they do nothing. meson compiles this file instead of
 * witness.c (as it picks one wait backend). The seam (hooks.c) calls no kli_witness_*
 * function in this build.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include <klock/witness.h>
#include "kl_internal.h"

#if KLOCK_WITNESS
#error "witness_off.c is the -Dwitness=false build; meson picks witness.c otherwise"
#endif

bool kl_witness_enabled(void)
{
	return false;
}

int kl_witness_set_class(const void *lock, const char *name, unsigned flags)
{
	(void)lock;
	return name == NULL || (flags & ~KL_WITNESS_DUPOK) != 0 ? EINVAL : 0;
}

void kl_witness_nest(unsigned subclass)
{
	(void)subclass;
}

bool kl_witness_held(const void *lock)
{
	(void)lock;
	return true;
}

void kl_witness_assert_held(const void *lock)
{
	(void)lock;
}

void kl_witness_assert_not_held(const void *lock)
{
	(void)lock;
}

void kl_witness_dump(FILE *f)
{
	fprintf(f, "witness: not built in (meson setup -Dwitness=true)\n");
}

unsigned long kl_witness_reports(void)
{
	return 0;
}
