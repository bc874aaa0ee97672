/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Whether a function of a loaded library has been patched in memory (as
 * UCM's "bistro" hooks and Open MPI's patcher rewrite libc's first
 * instructions), or a call to it from this program is sent elsewhere (as
 * UCM's "reloc" hooks rewrite GOT entries): the bytes at its address are
 * compared with those in the library's file.
 */
#ifndef UMN_TESTS_PATCHED_H
#define UMN_TESTS_PATCHED_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

struct patched_find {
	uintptr_t addr;
	off_t offset;		/* in the file; -1: not found */
};

static int patched_segment(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct patched_find *f = arg;
	int i;

	(void)size;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && f->addr >= start &&
		    f->addr + 16 <= start + ph->p_filesz) {
			f->offset = (off_t)(ph->p_offset + (f->addr - start));
			return 1;
		}
	}
	return 0;
}

/*
 * 1: NAME in libc differs in memory from its file, or this program's
 * calls to it go elsewhere; 0: neither; -1: cannot tell.
 */
static int libc_patched(const char *name, void *called)
{
	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	unsigned char mem[16], file[16];
	struct patched_find f = { 0, -1 };
	Dl_info info;
	void *sym;
	int fd, ret = -1;

	sym = libc ? dlsym(libc, name) : NULL;
	if (libc)
		dlclose(libc);
	if (!sym || !dladdr(sym, &info))
		return -1;
	if (called != sym)
		return 1;
	f.addr = (uintptr_t)sym;
	dl_iterate_phdr(patched_segment, &f);
	fd = open(info.dli_fname, O_RDONLY | O_CLOEXEC);
	if (f.offset >= 0 && fd >= 0 &&
	    pread(fd, file, sizeof(file), f.offset) == sizeof(file)) {
		memcpy(mem, sym, sizeof(mem));
		ret = memcmp(mem, file, sizeof(mem)) != 0;
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

#endif /* UMN_TESTS_PATCHED_H */
