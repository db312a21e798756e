/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * arch/generic/kl_arch.h - the backend for every CPU without its own folder (and for
 * -Darch=generic on those that have one): nothing but kl_arch_generic.h's fill-ins.
 */
#ifndef KL_ARCH_H
#define KL_ARCH_H

#define KL_ARCH_NAME "generic"

#include "kl_arch_generic.h"

#endif /* KL_ARCH_H */
