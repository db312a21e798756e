/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/symtab.c - names for code addresses that dladdr(3) cannot name.
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
 */
#include <fcntl.h>
#include <stdio.h>
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

#ifdef HAVE_ELF_SYMTAB
#include <elf.h>
#include <link.h>

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

/* Scans the mapped ELF image for the function containing @target (a link-time address). */
static bool scan_symtab(const unsigned char *img, size_t size, uintptr_t target, char *name,
			size_t len, uintptr_t *off)
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

			if (ELF64_ST_TYPE(y->st_info) != STT_FUNC || y->st_size == 0 ||
			    target < y->st_value || target >= y->st_value + y->st_size ||
			    y->st_name >= str->sh_size)
				continue;
			snprintf(name, len, "%.*s", (int)(str->sh_size - y->st_name),
				 (const char *)img + str->sh_offset + y->st_name);
			*off = target - y->st_value;
			return true;
		}
	}
	return false;
}

bool kli_symtab_lookup(const void *addr, char *name, size_t len, uintptr_t *off)
{
	struct obj_find o = { .addr = (uintptr_t)addr };
	struct stat stb;
	void *img;
	bool ok = false;
	int fd;

	if (addr == NULL || len == 0 || dl_iterate_phdr(find_object, &o) == 0 || !o.found)
		return false;
	/* The main program has no name here; /proc/self/exe is its file. */
	fd = open(o.name != NULL && o.name[0] != '\0' ? o.name : "/proc/self/exe",
		  O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (fstat(fd, &stb) == 0 && stb.st_size > 0) {
		img = mmap(NULL, (size_t)stb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (img != MAP_FAILED) {
			ok = scan_symtab(img, (size_t)stb.st_size, (uintptr_t)addr - o.bias, name,
					 len, off);
			munmap(img, (size_t)stb.st_size);
		}
	}
	close(fd);
	return ok;
}

#else /* no ELF: dladdr is all there is */

bool kli_symtab_lookup(const void *addr, char *name, size_t len, uintptr_t *off)
{
	(void)addr, (void)name, (void)len, (void)off;
	return false;
}
#endif
