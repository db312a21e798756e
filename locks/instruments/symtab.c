/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/instruments/symtab.c - names for code addresses that dladdr(3) cannot name.
 *
 * dladdr only sees the dynamic symbol table: exported functions of shared libraries, and
 * of executables linked with -rdynamic. The callers that reports most need to name -
 * static functions, an executable's own functions - are only in the object's full ELF
 * symbol table (.symtab), which the loader does not map. Like addr2line, this finds the
 * object that contains the address (dl_iterate_phdr: its path and load bias), maps the
 * file read-only, and looks for the STT_FUNC symbol whose [value, value + size) contains
 * the address. Stripped objects have no .symtab: the lookup fails and callers fall back
 * to "object+offset".
 *
 * Report-time only (reports, lockstat): it opens and maps a file per lookup. Thread-safe;
 * allocates nothing; not async-signal-safe (dl_iterate_phdr takes the loader lock).
 *
 * DATA. kli_symtab_data() names a static lock the same way (STT_OBJECT: exported data
 * from dladdr1, else .symtab) with the symbol's size, so reports can print an array
 * element as name[index].
 *
 * THE EXECUTABLE'S FILE. The loader names the main program "" and dladdr(3) reports its
 * file as argv[0], which setproctitle()-style programs overwrite. kli_symtab_init() (at
 * lockstat start) reads /proc/self/exe once into exe_path; lookups and labels use that,
 * so they hold after argv[0] was rewritten and after the process dropped privileges (a
 * process whose uid changed loses access to its /proc/self/exe link).
 *
 * CALL SITES THAT BELONG TO THE PROGRAM (record time, slow paths only). An allocator that
 * guards its arenas with pthread mutexes (jemalloc, tcmalloc) makes every contended
 * arena lock look like the allocator's own call site. kli_site_program() charges such an
 * episode to the first frame outside the "skipped" objects instead: the allocators and
 * runtime libraries named in skip_default[], klock's own shared object (the interposer),
 * and the prefixes listed
 * in KLOCK_LOCKSTAT_SKIP (comma-separated basenames, e.g. "libmywrap"). The skipped code
 * ranges (executable PT_LOAD segments) are collected once by kli_site_skip_init() at
 * lockstat start, into a fixed table (no allocation; an object loaded later is not
 * known). Only an episode whose site lies in a skipped range pays anything: one
 * _Unwind_Backtrace (libgcc's unwinder: .eh_frame, no frame pointers needed, no malloc;
 * glibc >= 2.35 finds FDEs lock-free) of at most SITE_DEPTH frames; a site that does not
 * show up in the walk stays as it was. Some stacks hold no program frame at all: an
 * allocator's lock taken at thread exit (libc's start_thread -> TSD destructors -> the
 * allocator's cache flush) or in a constructor the loader runs. Such an episode is
 * charged to the first frame past the allocator that is in no ALLOCATOR-class range
 * (libc's thread-exit code, ld.so's constructor loop): the allocator is never named as
 * the caller, and the row says which runtime path made the allocator wait.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kl_internal.h"

#if defined(__has_include)
#if __has_include(<elf.h>) && __has_include(<link.h>)
#define HAVE_ELF_SYMTAB 1
#endif
#endif

#if defined(__has_include)
#if __has_include(<unwind.h>)
#define HAVE_UNWIND 1
#endif
#endif

/* Longest path kept for the executable. */
#define EXE_PATH_MAX 4096

/* The executable's file, from /proc/self/exe at kli_symtab_init(); "" until then. */
static char exe_path[EXE_PATH_MAX];

void kli_symtab_init(void)
{
	char buf[EXE_PATH_MAX];
	ssize_t n;

	if (exe_path[0] != '\0')
		return;
	n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0 || n >= (ssize_t)sizeof(buf) - 1)
		return;
	buf[n] = '\0';
	memcpy(exe_path, buf, (size_t)n + 1);
}

#ifdef HAVE_ELF_SYMTAB
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

static const char *exe_file(void)
{
	return exe_path[0] != '\0' ? exe_path : "/proc/self/exe";
}

/* The object holding an address: its file and load bias. */
struct obj_find {
	uintptr_t addr;
	uintptr_t bias;
	const char *name;
	bool found;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct obj_find *o = arg;

	(void)size;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && o->addr >= start && o->addr < start + ph->p_memsz) {
			o->bias = info->dlpi_addr;
			o->name = info->dlpi_name;
			o->found = true;
			return 1;
		}
	}
	return 0;
}

/* Scans the mapped ELF image for the symbol of @type (STT_FUNC, STT_OBJECT) containing
 * @target (a link-time address); its size into *@symsize when not NULL. */
static bool scan_symtab(const unsigned char *img, size_t size, uintptr_t target, char *name,
			size_t len, uintptr_t *off, unsigned type, size_t *symsize)
{
	const ElfW(Ehdr) *eh = (const void *)img;
	const ElfW(Shdr) *sh;

	if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_shoff == 0 || eh->e_shoff + (size_t)eh->e_shnum * sizeof(*sh) > size)
		return false;
	sh = (const void *)(img + eh->e_shoff);
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		const ElfW(Shdr) *st = &sh[i], *str;
		const ElfW(Sym) *sym;
		size_t n;

		if (st->sh_type != SHT_SYMTAB || st->sh_link >= eh->e_shnum)
			continue;
		str = &sh[st->sh_link];
		if (st->sh_offset + st->sh_size > size || str->sh_offset + str->sh_size > size)
			return false;
		sym = (const void *)(img + st->sh_offset);
		n = st->sh_size / sizeof(*sym);
		for (size_t k = 0; k < n; k++) {
			const ElfW(Sym) *y = &sym[k];

			if (ELF64_ST_TYPE(y->st_info) != type || y->st_size == 0 ||
			    target < y->st_value || target >= y->st_value + y->st_size ||
			    y->st_name >= str->sh_size)
				continue;
			snprintf(name, len, "%.*s", (int)(str->sh_size - y->st_name),
				 (const char *)img + str->sh_offset + y->st_name);
			*off = target - y->st_value;
			if (symsize != NULL)
				*symsize = y->st_size;
			return true;
		}
	}
	return false;
}

static bool symtab_find(const void *addr, char *name, size_t len, uintptr_t *off,
			unsigned type, size_t *symsize)
{
	struct obj_find o = { .addr = (uintptr_t)addr };
	struct stat stb;
	void *img;
	bool ok = false;
	int fd;

	if (addr == NULL || len == 0 || dl_iterate_phdr(find_object, &o) == 0 || !o.found)
		return false;
	/* The main program has no name here: its file is exe_file(). */
	fd = open(o.name != NULL && o.name[0] != '\0' ? o.name : exe_file(),
		  O_RDONLY | O_CLOEXEC);
	if (fd < 0 && (o.name == NULL || o.name[0] == '\0'))
		fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (fstat(fd, &stb) == 0 && stb.st_size > 0) {
		img = mmap(NULL, (size_t)stb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (img != MAP_FAILED) {
			ok = scan_symtab(img, (size_t)stb.st_size, (uintptr_t)addr - o.bias, name,
					 len, off, type, symsize);
			munmap(img, (size_t)stb.st_size);
		}
	}
	close(fd);
	return ok;
}

bool kli_symtab_lookup(const void *addr, char *name, size_t len, uintptr_t *off)
{
	return symtab_find(addr, name, len, off, STT_FUNC, NULL);
}

bool kli_symtab_data(const void *addr, char *name, size_t len, uintptr_t *off, size_t *size)
{
	Dl_info info;
	const ElfW(Sym) *sym = NULL;

	/* exported data first (dladdr1 also gives its size), then the full .symtab */
	if (dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT) != 0 && sym != NULL &&
	    info.dli_sname != NULL && ELF64_ST_TYPE(sym->st_info) == STT_OBJECT &&
	    (uintptr_t)addr < (uintptr_t)info.dli_saddr + sym->st_size) {
		snprintf(name, len, "%s", info.dli_sname);
		*off = (uintptr_t)addr - (uintptr_t)info.dli_saddr;
		*size = sym->st_size;
		return true;
	}
	return symtab_find(addr, name, len, off, STT_OBJECT, size);
}

static int find_code(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct obj_find *o = arg;

	(void)size;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && o->addr >= start &&
		    o->addr < start + ph->p_memsz) {
			o->found = true;
			return 1;
		}
	}
	return 0;
}

bool kli_symtab_is_code(const void *addr)
{
	struct obj_find o = { .addr = (uintptr_t)addr };

	return addr != NULL && dl_iterate_phdr(find_code, &o) != 0 && o.found;
}

const char *kli_symtab_object(const void *addr, const char *dli_fname)
{
	struct obj_find o = { .addr = (uintptr_t)addr };

	if (addr != NULL && dl_iterate_phdr(find_object, &o) != 0 && o.found &&
	    (o.name == NULL || o.name[0] == '\0'))
		return exe_path[0] != '\0' ? exe_path : dli_fname;
	return dli_fname;
}

/* ---- call sites that belong to the program -------------------------------------------- */

/* Most skipped code ranges (an object usually has one executable segment). */
#define SKIP_MAX 32
/* Frames walked looking for the program's frame. */
#define SITE_DEPTH 64
/* Longest KLOCK_LOCKSTAT_SKIP value used. */
#define SKIP_ENV_MAX 512

/* Allocators known to take pthread mutexes inside malloc/free, and the runtime libraries
 * between the program and its allocator (fopen -> malloc, operator new -> malloc, the
 * unwinder's own mutex) - basename prefixes. */
static const char *const skip_alloc[] = {
	"libjemalloc", "libtcmalloc", "libmimalloc", "libhoard", "libtbbmalloc", NULL,
};
static const char *const skip_runtime[] = { "libc.so", "libstdc++", "libgcc_s", NULL };

/* What a skipped range is: a walk that finds no program frame falls back to the first
 * frame outside the ALLOCATOR class (allocators, klock itself, KLOCK_LOCKSTAT_SKIP). */
enum skip_class { SKIP_NONE, SKIP_RUNTIME, SKIP_ALLOCATOR };

static struct { uintptr_t lo, hi; enum skip_class cls; } skip[SKIP_MAX];
static _Atomic unsigned nskip;   /* release after skip[] is filled; acquire to read */

/* Whether @base (a basename) starts with one of the comma-separated prefixes in @list. */
static bool prefix_listed(const char *base, const char *list)
{
	while (list != NULL && *list != '\0') {
		size_t n = strcspn(list, ",");

		if (n > 0 && strncmp(base, list, n) == 0)
			return true;
		list += n + (list[n] == ',');
	}
	return false;
}

static bool name_listed(const char *base, const char *const *names)
{
	for (unsigned i = 0; names[i] != NULL; i++)
		if (strncmp(base, names[i], strlen(names[i])) == 0)
			return true;
	return false;
}

static enum skip_class skipped_object(const char *name, const char *env)
{
	const char *base = strrchr(name, '/');

	base = base != NULL ? base + 1 : name;
	if (name_listed(base, skip_alloc) || prefix_listed(base, env))
		return SKIP_ALLOCATOR;
	return name_listed(base, skip_runtime) ? SKIP_RUNTIME : SKIP_NONE;
}

struct skip_scan {
	const char *env;
	uintptr_t self;   /* an address in klock's own object */
	unsigned n;
};

static int add_skipped(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct skip_scan *sc = arg;
	struct obj_find me = { .addr = sc->self };
	enum skip_class cls;

	(void)size;
	if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0')
		return 0;   /* the program itself is never skipped */
	cls = find_object(info, size, &me) != 0 ? SKIP_ALLOCATOR :
		skipped_object(info->dlpi_name, sc->env);
	if (cls == SKIP_NONE)
		return 0;
	for (unsigned i = 0; i < info->dlpi_phnum && sc->n < SKIP_MAX; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		skip[sc->n].lo = info->dlpi_addr + ph->p_vaddr;
		skip[sc->n].hi = skip[sc->n].lo + ph->p_memsz;
		skip[sc->n].cls = cls;
		sc->n++;
	}
	return 0;
}

void kli_site_skip_init(void)
{
	char env[SKIP_ENV_MAX] = "";
	const char *e = getenv("KLOCK_LOCKSTAT_SKIP");
	struct skip_scan sc = { .env = env, .self = (uintptr_t)&nskip };

	if (atomic_load_explicit(&nskip, memory_order_relaxed) != 0)
		return;
	if (e != NULL)
		snprintf(env, sizeof(env), "%s", e);
	dl_iterate_phdr(add_skipped, &sc);
	/* K1: pairs with K2 in site_class() */
	atomic_store_explicit(&nskip, sc.n, memory_order_release);
}

static enum skip_class site_class(uintptr_t pc)
{
	unsigned n = atomic_load_explicit(&nskip, memory_order_acquire); /* K2: pairs with K1 */

	for (unsigned i = 0; i < n; i++)
		if (pc >= skip[i].lo && pc < skip[i].hi)
			return skip[i].cls;
	return SKIP_NONE;
}

#ifdef HAVE_UNWIND
#include <unwind.h>

struct site_walk {
	uintptr_t site;    /* the recorded site (a return address into a skipped object) */
	uintptr_t found;   /* the first frame outside the skipped objects past it */
	uintptr_t runtime; /* the first frame past it outside the ALLOCATOR class */
	bool passed;       /* the walk reached the recorded site */
	unsigned depth;
};

static _Unwind_Reason_Code site_frame(struct _Unwind_Context *ctx, void *arg)
{
	struct site_walk *w = arg;
	uintptr_t pc = (uintptr_t)_Unwind_GetIP(ctx);

	if (pc == 0 || ++w->depth > SITE_DEPTH)
		return _URC_END_OF_STACK;
	if (!w->passed) {
		w->passed = pc == w->site;
		return _URC_NO_REASON;
	}
	switch (site_class(pc)) {
	case SKIP_ALLOCATOR:
		return _URC_NO_REASON;
	case SKIP_RUNTIME:
		if (w->runtime == 0)
			w->runtime = pc;
		return _URC_NO_REASON;
	case SKIP_NONE:
		break;
	}
	w->found = pc;
	return _URC_END_OF_STACK;
}

const void *kli_site_program(const void *site)
{
	struct site_walk w = { .site = (uintptr_t)site };

	if (site == NULL || site_class((uintptr_t)site) == SKIP_NONE)
		return site;
	_Unwind_Backtrace(site_frame, &w);
	if (w.found != 0)
		return (const void *)w.found;
	return w.runtime != 0 ? (const void *)w.runtime : site;
}
struct stack_walk {
	uintptr_t site;    /* the frame to start at */
	const void **pcs;
	unsigned max, n, depth;
};

static _Unwind_Reason_Code stack_frame(struct _Unwind_Context *ctx, void *arg)
{
	struct stack_walk *w = arg;
	uintptr_t pc = (uintptr_t)_Unwind_GetIP(ctx);

	if (pc == 0 || ++w->depth > SITE_DEPTH)
		return _URC_END_OF_STACK;
	if (w->n == 0 && pc != w->site)
		return _URC_NO_REASON;   /* lockstat's, the lock's and the interposer's frames */
	w->pcs[w->n++] = (const void *)pc;
	return w->n < w->max ? _URC_NO_REASON : _URC_END_OF_STACK;
}

unsigned kli_stack_from(const void *site, const void **pcs, unsigned max)
{
	struct stack_walk w = { .site = (uintptr_t)site, .pcs = pcs, .max = max };

	if (site == NULL || max == 0)
		return 0;
	_Unwind_Backtrace(stack_frame, &w);
	return w.n;
}
#else
const void *kli_site_program(const void *site)
{
	return site;
}

unsigned kli_stack_from(const void *site, const void **pcs, unsigned max)
{
	(void)site, (void)pcs, (void)max;
	return 0;
}
#endif

#else /* no ELF: dladdr is all there is */

bool kli_symtab_lookup(const void *addr, char *name, size_t len, uintptr_t *off)
{
	(void)addr, (void)name, (void)len, (void)off;
	return false;
}

const char *kli_symtab_object(const void *addr, const char *dli_fname)
{
	(void)addr;
	return dli_fname;
}

bool kli_symtab_data(const void *addr, char *name, size_t len, uintptr_t *off, size_t *size)
{
	(void)addr, (void)name, (void)len, (void)off, (void)size;
	return false;
}

bool kli_symtab_is_code(const void *addr)
{
	(void)addr;
	return false;
}

void kli_site_skip_init(void)
{
}

const void *kli_site_program(const void *site)
{
	return site;
}

unsigned kli_stack_from(const void *site, const void **pcs, unsigned max)
{
	(void)site, (void)pcs, (void)max;
	return 0;
}
#endif
