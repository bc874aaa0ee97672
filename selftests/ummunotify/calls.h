/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The device's calls as the tests make them, returning 0 or -errno so that
 * one comparison checks the documented error, and the numbers the module
 * shows in fdinfo and sysfs.
 */
#ifndef UMMUNOTIFY_SELFTESTS_CALLS_H
#define UMMUNOTIFY_SELFTESTS_CALLS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#define DEVICE		"/dev/ummunotify"
#define SYSFS_DIR	"/sys/class/misc/ummunotify/"

static inline int uioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

/* EXCHANGE_FEATURES: the features granted, or -errno. */
static inline long exchange(int fd, __u32 wanted)
{
	__u32 features = wanted;
	int ret = uioctl(fd, UMMUNOTIFY_EXCHANGE_FEATURES, &features);

	return ret ?: (long)features;
}

static inline int setup(int fd, struct ummunotify_params *p, __u32 slots,
			__u32 ring_entries)
{
	*p = (struct ummunotify_params) {
		.slots = slots,
		.ring_entries = ring_entries,
	};
	return uioctl(fd, UMMUNOTIFY_SETUP, p);
}

/* The number on the line "KEY:" of /proc/PID/fdinfo/FD, -1 if none. */
static inline long long fdinfo_of(pid_t pid, int fd, const char *key)
{
	size_t keylen = strlen(key);
	long long value = -1;
	char path[64], line[128];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", (int)pid, fd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, keylen) && line[keylen] == ':') {
			value = strtoll(line + keylen + 1, NULL, 0);
			break;
		}
	}
	fclose(f);
	return value;
}

static inline long long fdinfo(int fd, const char *key)
{
	return fdinfo_of(getpid(), fd, key);
}

static inline long long read_number(const char *path)
{
	long long value = -1;
	FILE *f = fopen(path, "re");

	if (!f)
		return -1;
	if (fscanf(f, "%lld", &value) != 1)
		value = -1;
	fclose(f);
	return value;
}

/* A module-wide count of /sys/class/misc/ummunotify/, -1 if unreadable. */
static inline long long sysfs(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), SYSFS_DIR "%s", name);
	return read_number(path);
}

#endif
