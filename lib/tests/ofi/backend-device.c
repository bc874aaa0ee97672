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

/* Our /dev/ummunotify descriptor, or -1. */
static int device_fd(void)
{
	char path[300], target[64];
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *d;
	int fd = -1;
	ssize_t len;

	CHECK(dir);
	while (fd < 0 && (d = readdir(dir))) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", d->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len < 0)
			continue;
		target[len] = 0;
		if (!strcmp(target, "/dev/ummunotify"))
			fd = atoi(d->d_name);
	}
	closedir(dir);
	return fd;
}

bool pressure(uint64_t bytes)
{
	(void)bytes;
	return false;
}

unsigned int device_watches(void)
{
	int fd = device_fd();

	CHECK(fd >= 0);
	return fd_watches(fd);
}

bool device_opened(void)
{
	return device_fd() >= 0;
}
