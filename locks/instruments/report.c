/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/instruments/report.c - one place that prints contract violations, so every debug check and
 * instrument speaks the same way:
 *
 *   klock: unlock of a lock not held: mutex "cache" (0x5581...) from worker+0x3a (./app)
 *
 * then warns or aborts (KLOCK_ON_ERROR=warn|abort; abort by default). Messages are built
 * in a stack buffer and written with one write(2), so concurrent reports do not interleave
 * and no lock is taken (reporting may happen while the reporter's locks are in a bad state).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kl_internal.h"
#include "names_impl.h"

/* Longest report line, including the symbolised caller. */
#define REPORT_MAX 512
/* Longest symbol name taken from a .symtab. */
#define REPORT_SYM_MAX 128

static _Atomic unsigned long report_count;

void kli_symbolize(const void *addr, char *buf, size_t len)
{
	char sym[REPORT_SYM_MAX];
	uintptr_t off;
	Dl_info info;

	if (addr == NULL) {
		snprintf(buf, len, "?");
		return;
	}
	if (dladdr(addr, &info) != 0 && info.dli_sname != NULL) {
		snprintf(buf, len, "%s+0x%lx (%s)", info.dli_sname,
			 (unsigned long)((const char *)addr - (const char *)info.dli_saddr),
			 info.dli_fname != NULL ? info.dli_fname : "?");
	} else if (dladdr(addr, &info) != 0 && kli_symtab_lookup(addr, sym, sizeof(sym), &off)) {
		snprintf(buf, len, "%s+0x%lx (%s)", sym, (unsigned long)off,
			 info.dli_fname != NULL ? info.dli_fname : "?");
	} else if (dladdr(addr, &info) != 0 && info.dli_fname != NULL) {
		snprintf(buf, len, "%p (%s+0x%lx)", addr, info.dli_fname,
			 (unsigned long)((const char *)addr - (const char *)info.dli_fbase));
	} else {
		snprintf(buf, len, "%p", addr);
	}
}

static bool report_aborts(void)
{
	const char *v = getenv("KLOCK_ON_ERROR");

	return v == NULL || strcmp(v, "warn") != 0;
}

void kli_report(const char *what, const char *kind, const void *lock, const void *caller,
		const char *detail)
{
	kli_report_msg(what, kind, lock, caller, detail);
	if (report_aborts())
		abort();
}

void kli_report_msg(const char *what, const char *kind, const void *lock, const void *caller,
		    const char *detail)
{
	char desc[160], site[200], line[REPORT_MAX];
	int n;

	atomic_fetch_add_explicit(&report_count, 1, memory_order_relaxed);
	kli_lock_describe(lock, kind, desc, sizeof(desc));
	kli_symbolize(kli_site(caller), site, sizeof(site));
	n = snprintf(line, sizeof(line), "klock: %s: %s from %s%s%s%s\n", what, desc, site,
		     detail != NULL ? " (" : "", detail != NULL ? detail : "",
		     detail != NULL ? ")" : "");
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nothing better to do with a failing stderr */
	}
}

_Atomic(kli_misuse_print_fn) kli_misuse_print;

_Atomic(kli_test_hook_fn) kli_test_hook;

unsigned long kli_report_count(void)
{
	return atomic_load_explicit(&report_count, memory_order_relaxed);
}
