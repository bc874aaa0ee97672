// SPDX-License-Identifier: GPL-2.0
/*
 * umn-bench: every backend on the same work, in one run.
 *
 * Usage: umn-bench [-t TESTS] DIR
 *
 * Runs the measurements (all, or those whose numbers TESTS lists, a
 * character each: "0" is test 10, "a" test 11), prints a table and
 * writes DIR/results.json and the chart's data.  Run it as root in a
 * guest that has the module loaded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "bench.h"
#include "report.h"

#define SHARED_SIZE	(1 << 20)
#define GETPIDS		20000

void *shared;
size_t page;

void fail(const char *msg, int err)
{
	fprintf(stderr, "umn-bench: %s: %s\n", msg, strerror(-err));
	exit(1);
}

void in_child(void (*fn)(const void *arg), const void *arg)
{
	pid_t pid;
	int status;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		fail("fork", -errno);
	if (!pid) {
		fn(arg);
		exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		exit(1);
}

static char *anon(char *addr, size_t len, int prot, int flags)
{
	char *p = mmap(addr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | flags,
		       -1, 0);

	if (p == MAP_FAILED)
		fail("mmap", -errno);
	return p;
}

char *map(size_t len)
{
	return anon(NULL, len, PROT_READ | PROT_WRITE, MAP_NORESERVE);
}

char *reserve(size_t len)
{
	return anon(NULL, len, PROT_NONE, MAP_NORESERVE);
}

void map_fixed(char *p, size_t len)
{
	anon(p, len, PROT_READ | PROT_WRITE, MAP_FIXED);
}

/* A write per page: each gets a page of its own. */
void touch(char *p, size_t len)
{
	size_t off;

	for (off = 0; off < len; off += page)
		((volatile char *)p)[off] = 1;
}

void open_backend(const struct backend *b, unsigned int max_entries)
{
	int ret = b->open(max_entries);

	if (ret)
		fail(b->name, ret);
}

void watch(const struct backend *b, struct region *e, char *addr, size_t len)
{
	int ret;

	*e = (struct region){ .addr = addr, .len = len };
	ret = b->watch(e);
	if (ret)
		fail(b->name, ret);
}

double getpid_ns(void)
{
	uint64_t t = now_ns();
	int i;

	for (i = 0; i < GETPIDS; i++)
		syscall(SYS_getpid);
	return (double)(now_ns() - t) / GETPIDS;
}

FILE *run_with(const char *const *env, const char *cmd)
{
	const char *const *e;
	FILE *f;

	for (e = env; *e; e += 2)
		setenv(e[0], e[1], 1);
	fflush(NULL);
	f = popen(cmd, "r");
	if (!f)
		fail(cmd, -errno);
	for (e = env; *e; e += 2)
		unsetenv(e[0]);
	return f;
}

int read_values(const char *line, const char *name, double *v, int first,
		int max)
{
	size_t n = strlen(name);
	char *end;
	int i;

	if (strncmp(line, name, n) || line[n] != ' ')
		return 0;
	line = strchr(line + n + 1, ' ');
	for (i = first; line && i < max; i++) {
		v[i] = strtod(line, &end);
		if (end == line)
			break;
		line = end;
	}
	return i - first;
}

int main(int argc, char **argv)
{
	static const struct {
		char number;
		void (*run)(void);
	} tests[] = {
		{ '1', measure_check }, { '2', measure_pairs },
		{ '3', measure_loop }, { '4', measure_visible },
		{ '5', measure_ring }, { '6', measure_cache },
		{ '7', measure_whole }, { '8', measure_precision },
		{ '9', measure_ofi }, { '0', measure_ucx },
		{ 'a', measure_imposed },
	};
	const char *only = NULL;
	int opt;
	size_t i;

	while ((opt = getopt(argc, argv, "t:")) != -1) {
		if (opt != 't')
			goto usage;
		only = optarg;
	}
	if (optind != argc - 1)
		goto usage;
	page = sysconf(_SC_PAGESIZE);
	shared = mmap(NULL, SHARED_SIZE, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		fail("mmap", -errno);
	for (i = 0; i < ARRAY_SIZE(tests); i++)
		if (!only || strchr(only, tests[i].number))
			tests[i].run();
	report_finish(argv[optind]);
	return 0;
usage:
	fprintf(stderr, "usage: %s [-t TESTS] DIR\n", argv[0]);
	return 2;
}
