/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * klock/compiler.h - the few compiler shims the public headers need.
 *
 * Public structs are meant to be embedded and statically initialised, so they are visible
 * here; their fields are private to the library and are only touched through the kl_* API.
 * Fields the library updates atomically are declared KL_ATOMIC(T): _Atomic T in C, and the
 * plain T in C++ (where _Atomic is not a type qualifier before C++23). gcc and clang give
 * _Atomic T the size and alignment of T for every type used here, so the layout agrees.
 */
#ifndef KLOCK_COMPILER_H
#define KLOCK_COMPILER_H

#include <klock/config.h>

#ifdef __cplusplus
#define KL_BEGIN_DECLS extern "C" {
#define KL_END_DECLS }
#define KL_ATOMIC(T) T
#else
#define KL_BEGIN_DECLS
#define KL_END_DECLS
#define KL_ATOMIC(T) _Atomic T
#endif

/* Exported from libklock; everything not marked KL_API is hidden (-fvisibility=hidden). */
#if defined(__GNUC__) || defined(__clang__)
#define KL_API __attribute__((visibility("default")))
#define KL_NONNULL(...) __attribute__((nonnull(__VA_ARGS__)))
#define KL_WARN_UNUSED __attribute__((warn_unused_result))
#define KL_ALIGNED(n) __attribute__((aligned(n)))
#else
#define KL_API
#define KL_NONNULL(...)
#define KL_WARN_UNUSED
#define KL_ALIGNED(n)
#endif

/*
 * Whether this build lets the public headers inline lock fast paths (defined, or not):
 * C only (C++ calls the library), and no instrument that must see every acquisition from
 * inside the library (debug owner tracking, witness, TSan or valgrind annotations,
 * lockstat hold times). Each header also honours KLOCK_NO_INLINE where it is included:
 *   #if defined(KL_INLINE_FAST_PATHS_) && !defined(KLOCK_NO_INLINE)
 * Private to the headers.
 */
#if !defined(__cplusplus) && !KLOCK_DEBUG_LOCKS && !KLOCK_WITNESS && !KLOCK_TSAN && \
	!KLOCK_VALGRIND_ANNOTATE && !KLOCK_LOCKSTAT_HOLD
#define KL_INLINE_FAST_PATHS_ 1
#endif

#endif /* KLOCK_COMPILER_H */
