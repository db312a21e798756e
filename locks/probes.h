/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/probes.h - static probes (USDT, <sys/sdt.h>) at the seam's slow-path events, for
 * tools that attach to a running process: bpftrace, perf, systemtap (docs/lockstat.md,
 * klock-contention(1)). Included by hooks.h only; no primitive names a probe.
 *
 * Provider "klock". Probe names and arguments are a stable interface (docs/lockstat.md
 * lists them; kinds and flag bits below are fixed numbers, not the seam's internals):
 *   contention_begin(lock, kind, flags, caller)          the fast path failed
 *   contention_end(lock, kind, flags, caller, result)    acquired (result 0) or gave up (1)
 *   handoff(lock, kind, flags, caller)                   this waiter was handed the lock:
 *                                                        it woke up owning it
 *   revoke_begin(lock, kind)                             a writer starts revoking the
 *                                                        readers' bias
 *   revoke_end(lock, kind, cost_ns, result)              the revocation ended (0: done;
 *                                                        else the errno it gave up with)
 *   lock_name(lock, name)                                just before contention_begin, the
 *                                                        lock's name (only while a tracer
 *                                                        enabled this probe, only named locks)
 *
 * COST. A probe site is one 5-byte nop in the slow path plus a note in .note.stapsdt; the
 * arguments are operands of an empty asm, so the compiler keeps them where they already
 * are (a register or a stack slot). No fast path has a probe: tests/lockstat_callgrind.sh
 * counts the same instructions per uncontended lock+unlock with and without probes.
 * lock_name costs one load of its semaphore (a tracer that attaches raises it) and a
 * predicted branch per contention episode; the name lookup runs only while it is raised.
 *
 * -Dprobes=disabled (or no <sys/sdt.h>): every probe compiles to nothing.
 */
#ifndef KL_PROBES_H
#define KL_PROBES_H

#include <klock/config.h>

/* Flag bits in the probes' flags argument (stable; equal to the seam's KLI_HF_* bits). */
#define KLI_PROBE_F_READ 0x1u   /* the shared (read) side */
#define KLI_PROBE_F_TRY 0x2u    /* a try or timed attempt: may give up */
#define KLI_PROBE_F_SPIN 0x8u   /* the lock never sleeps (a spinlock) */
#define KLI_PROBE_F_MASK (KLI_PROBE_F_READ | KLI_PROBE_F_TRY | KLI_PROBE_F_SPIN)

/* sys/sdt.h's argument macros pass empty variadic arguments, which clang's -Wpedantic
 * reports (-Wgnu-zero-variadic-macro-arguments) at every probe: code that expands probes
 * sits between these two (file scope; a _Pragma inside a macro does not reach a
 * preprocessor warning). */
#if defined(__clang__)
#define KLI_SDT_QUIET_BEGIN                                                             \
	_Pragma("clang diagnostic push")                                                \
	_Pragma("clang diagnostic ignored \"-Wgnu-zero-variadic-macro-arguments\"")
#define KLI_SDT_QUIET_END _Pragma("clang diagnostic pop")
#else
#define KLI_SDT_QUIET_BEGIN
#define KLI_SDT_QUIET_END
#endif

#if KLOCK_PROBES
#include <sys/sdt.h>

/* The lock_name probe's semaphore: a tracer that attaches to lock_name raises it
 * (locks/probes.c defines it in .probes, where tools look for it). */
extern volatile unsigned short klock_lock_name_semaphore;

/* Fires lock_name for @lock when it has a name (locks/probes.c, out of line). */
void kli_probe_lock_name(const void *lock);

#define KLI_PROBE2(name, a, b) STAP_PROBE2(klock, name, a, b)
#define KLI_PROBE4(name, a, b, c, d) STAP_PROBE4(klock, name, a, b, c, d)
#define KLI_PROBE5(name, a, b, c, d, e) STAP_PROBE5(klock, name, a, b, c, d, e)
#define KLI_PROBE_NAME(lock)                                            \
	do {                                                            \
		if (__builtin_expect(klock_lock_name_semaphore != 0, 0)) \
			kli_probe_lock_name(lock);                      \
	} while (0)
#else
#define KLI_PROBE2(name, a, b) ((void)(a), (void)(b))
#define KLI_PROBE4(name, a, b, c, d) ((void)(a), (void)(b), (void)(c), (void)(d))
#define KLI_PROBE5(name, a, b, c, d, e) ((void)(a), (void)(b), (void)(c), (void)(d), (void)(e))
#define KLI_PROBE_NAME(lock) ((void)(lock))
#endif

#endif /* KL_PROBES_H */
