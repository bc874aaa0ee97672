// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * test-monitor in a guest: the real module, and memory replaced by raw
 * munmap and mmap system calls.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend.h"
#include "../check.h"

static char *base;

void backend_setup(void)
{
	base = mmap(NULL, NR_PAGES * PAGE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(base != MAP_FAILED);
}

void *page(unsigned int n)
{
	return base + n * PAGE;
}

void change(unsigned int first, unsigned int n)
{
	void *p = page(first);

	CHECK(!syscall(SYS_munmap, p, n * PAGE));
	CHECK((void *)syscall(SYS_mmap, p, n * PAGE, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			      0) == p);
}

/*
 * The watches of our /dev/ummunotify descriptors, one per handle of the
 * monitor, in *watches; how many descriptors.
 */
static unsigned int device_fds(unsigned int *watches)
{
	char path[300], target[64];
	DIR *dir = opendir("/proc/self/fd");
	unsigned int n = 0;
	struct dirent *d;
	ssize_t len;

	CHECK(dir);
	*watches = 0;
	while ((d = readdir(dir))) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", d->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len < 0)
			continue;
		target[len] = 0;
		if (strcmp(target, "/dev/ummunotify"))
			continue;
		*watches += fd_watches(atoi(d->d_name));
		n++;
	}
	closedir(dir);
	return n;
}

bool pressure(uint64_t bytes)
{
	(void)bytes;
	return false;
}

unsigned int device_watches(void)
{
	unsigned int watches;

	CHECK(device_fds(&watches) > 0);
	return watches;
}

bool device_opened(void)
{
	unsigned int watches;

	return device_fds(&watches) > 0;
}
