/* SPDX-License-Identifier: GPL-2.0 */
/* The small files of /sys, /proc and cgroupfs that the tests read and set. */
#ifndef UMMUNOTIFY_SELFTESTS_SYSFILE_H
#define UMMUNOTIFY_SELFTESTS_SYSFILE_H

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static inline int write_text(const char *path, int flags, const char *text)
{
	int fd = open(path, O_WRONLY | flags | O_CLOEXEC);
	ssize_t n;
	int err;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	err = errno;
	close(fd);
	errno = err;
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* TEXT in one write(), as these files want; 0, or -1 with errno set. */
static inline int write_file(const char *path, const char *text)
{
	return write_text(path, O_TRUNC, text);
}

/* The same, added to what the file has (kprobe_events). */
static inline int append_file(const char *path, const char *text)
{
	return write_text(path, O_APPEND, text);
}

/* The file's start in BUF, NUL-terminated; 0, or -1 with errno set. */
static inline int read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

#endif
