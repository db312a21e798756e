/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/abi/fence_copy_reloc.c - klock/fence.h's kl_fence_asym_ as a non-PIE program sees it.
 *
 * Built without -fpie and linked against the shared libklock, this program reads the
 * variable directly, so the linker gives it its own copy (an R_X86_64_COPY-style copy
 * relocation) initialised from the library's image before the library's constructor
 * runs. The headers' inline unlocks (klock/ticket.h, klock/mcs.h) read that copy: unless
 * the library stores the mode through the exported name, the copy stays false and
 * disagrees with kl_fence_asymmetric(). Exit 0 when they agree.
 */
#include <stdio.h>

#include <klock/fence.h>

int main(void)
{
	bool lib = kl_fence_asymmetric(), seen = kl_fence_asym_;

	printf("kl_fence_asymmetric() = %d, kl_fence_asym_ = %d\n", lib, seen);
	return lib == seen ? 0 : 1;
}
