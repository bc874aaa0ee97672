// SPDX-License-Identifier: GPL-2.0
/*
 * umnstat: which processes have /dev/ummunotify open, what the kernel says
 * of each open file (/proc/PID/fdinfo/FD) and of the module as a whole
 * (/sys/class/misc/ummunotify/, /sys/module/ummunotify/parameters/).
 * See umnstat(8).
 *
 * Every field is read as the kernel writes it, "key:\tvalue" lines and
 * one-line sysfs files, and shown whatever its name: a field the module
 * gains shows up here without a change.  Only libc is used, so that the
 * tool runs on any node the module runs on.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "ummunotify-ofi.h"

#define DEVICE		"ummunotify"
#define SYS_DEVICE	"/sys/class/misc/" DEVICE
#define SYS_PARAMS	"/sys/module/" DEVICE "/parameters"

/* What every file's fdinfo has, printed by the VFS, not by the module. */
static const char *const vfs_keys[] = { "pos", "flags", "mnt_id", "ino" };
/* The driver core's attributes of every device, not the module's. */
static const char *const core_attrs[] = { "dev", "uevent" };

struct field {
	char *key;
	char *value;
};

struct fields {
	struct field *v;
	size_t n, cap;
};

struct open_file {
	pid_t pid;
	uid_t uid;
	int fd;
	char comm[64];
	struct fields info;
};

struct snapshot {
	time_t time;
	bool loaded;
	char version[64];	/* the loaded module's, "" if it has none */
	struct fields attrs;	/* module-wide, from SYS_DEVICE */
	struct fields params;	/* SYS_PARAMS */
	struct open_file *files;
	size_t nfiles, cap;
	unsigned int unreadable;	/* processes whose fds we may not see */
};

static void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size);
	if (!p) {
		perror("umnstat");
		exit(1);
	}
	return p;
}

static char *xstrdup(const char *s)
{
	return strcpy(xrealloc(NULL, strlen(s) + 1), s);
}

static void fields_add(struct fields *f, const char *key, const char *value)
{
	if (f->n == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 16;
		f->v = xrealloc(f->v, f->cap * sizeof(*f->v));
	}
	f->v[f->n].key = xstrdup(key);
	f->v[f->n].value = xstrdup(value);
	f->n++;
}

static const char *fields_get(const struct fields *f, const char *key)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->v[i].key, key))
			return f->v[i].value;
	return NULL;
}

static void fields_free(struct fields *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->v[i].key);
		free(f->v[i].value);
	}
	free(f->v);
	*f = (struct fields){ 0 };
}

static bool listed(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s, list[i]))
			return true;
	return false;
}

/* The file's contents, NUL-terminated, in buf; false if unreadable. */
static bool read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t n;

	if (fd < 0)
		return false;
	while (len < size - 1 &&
	       (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += n;
	close(fd);
	buf[len] = '\0';
	return true;
}

/*
 * The one-line regular files of dir, by name, but those in skip: what
 * sysfs shows of a device or of a module's parameters.
 */
static void read_sysfs_dir(const char *dir, struct fields *f,
			   const char *const *skip, size_t nskip)
{
	struct dirent **names;
	char path[PATH_MAX], buf[4096];
	int n = scandir(dir, &names, NULL, alphasort);

	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		struct stat st;
		char *nl;

		snprintf(path, sizeof(path), "%s/%s", dir, name);
		if (name[0] != '.' && !listed(name, skip, nskip) &&
		    !stat(path, &st) && S_ISREG(st.st_mode) &&
		    read_file(path, buf, sizeof(buf)) &&
		    (nl = strchr(buf, '\n')) && nl[1] == '\0') {
			*nl = '\0';
			fields_add(f, name, buf);
		}
		free(names[i]);
	}
	if (n >= 0)
		free(names);
}

/* The "key:\tvalue" lines of an fdinfo file, but the VFS's own. */
static void parse_fdinfo(char *text, struct fields *f)
{
	char *line, *save;

	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *colon = strchr(line, ':');
		char *value;

		if (!colon || colon == line)
			continue;
		*colon = '\0';
		for (value = colon + 1; *value == '\t' || *value == ' ';)
			value++;
		if (!listed(line, vfs_keys, sizeof(vfs_keys) / sizeof(*vfs_keys)))
			fields_add(f, line, value);
	}
}

/* The device number of /dev/ummunotify, from sysfs; false if none. */
static bool device_number(dev_t *dev)
{
	char buf[64];
	unsigned int major, minor;

	if (!read_file(SYS_DEVICE "/dev", buf, sizeof(buf)) ||
	    sscanf(buf, "%u:%u", &major, &minor) != 2)
		return false;
	*dev = makedev(major, minor);
	return true;
}

static bool wanted(pid_t pid, const pid_t *pids, size_t npids)
{
	if (!npids)
		return true;
	for (size_t i = 0; i < npids; i++)
		if (pids[i] == pid)
			return true;
	return false;
}

/*
 * The open files of process pid on the device.  An fd is one of them if
 * its path ends in /ummunotify (the name is read without touching the
 * file, which a stat() of another kind of file could block on) and stat()
 * then confirms the device number.
 */
static void scan_process(struct snapshot *s, pid_t pid, dev_t dev)
{
	char dir[64], path[PATH_MAX], target[PATH_MAX], text[16384];
	struct open_file *f;
	struct dirent *d;
	struct stat st;
	DIR *fds;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	fds = opendir(dir);
	if (!fds) {
		if (errno == EACCES)
			s->unreadable++;
		return;
	}
	while ((d = readdir(fds))) {
		ssize_t len;
		char *base;

		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len < 0)
			continue;
		target[len] = '\0';
		base = strrchr(target, '/');
		if (!base || strcmp(base + 1, DEVICE) || stat(path, &st) ||
		    !S_ISCHR(st.st_mode) || st.st_rdev != dev)
			continue;

		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", (int)pid,
			 d->d_name);
		if (!read_file(path, text, sizeof(text)))
			continue;	/* closed meanwhile */
		if (s->nfiles == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 16;
			s->files = xrealloc(s->files, s->cap * sizeof(*s->files));
		}
		f = &s->files[s->nfiles++];
		*f = (struct open_file){ .pid = pid, .fd = atoi(d->d_name) };
		parse_fdinfo(text, &f->info);
		snprintf(path, sizeof(path), "/proc/%d", (int)pid);
		if (!stat(path, &st))
			f->uid = st.st_uid;
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		if (read_file(path, f->comm, sizeof(f->comm)))
			f->comm[strcspn(f->comm, "\n")] = '\0';
	}
	closedir(fds);
}

static int by_pid_fd(const void *a, const void *b)
{
	const struct open_file *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return (x->fd > y->fd) - (x->fd < y->fd);
}

static void take_snapshot(struct snapshot *s, const pid_t *pids, size_t npids)
{
	struct dirent *d;
	dev_t dev;
	DIR *proc;

	*s = (struct snapshot){ .time = time(NULL) };
	s->loaded = !access("/sys/module/" DEVICE, F_OK);
	if (!s->loaded)
		return;
	/* After an upgrade, until a reload, not the one modinfo shows. */
	if (read_file("/sys/module/" DEVICE "/version", s->version,
		      sizeof(s->version)))
		s->version[strcspn(s->version, "\n")] = '\0';
	read_sysfs_dir(SYS_DEVICE, &s->attrs, core_attrs,
		       sizeof(core_attrs) / sizeof(*core_attrs));
	read_sysfs_dir(SYS_PARAMS, &s->params, NULL, 0);
	if (!device_number(&dev))
		return;
	proc = opendir("/proc");
	if (!proc)
		return;
	while ((d = readdir(proc))) {
		char *end;
		long pid = strtol(d->d_name, &end, 10);

		if (*end || pid <= 0 || !wanted(pid, pids, npids))
			continue;
		scan_process(s, pid, dev);
	}
	closedir(proc);
	qsort(s->files, s->nfiles, sizeof(*s->files), by_pid_fd);
}

static void free_snapshot(struct snapshot *s)
{
	fields_free(&s->attrs);
	fields_free(&s->params);
	for (size_t i = 0; i < s->nfiles; i++)
		fields_free(&s->files[i].info);
	free(s->files);
}

/* User names, looked up once each: a directory service may be slow. */
static const char *user_name(uid_t uid)
{
	static struct {
		uid_t uid;
		char *name;
	} *cache;
	static size_t n;
	struct passwd *pw;
	char buf[16];

	for (size_t i = 0; i < n; i++)
		if (cache[i].uid == uid)
			return cache[i].name;
	pw = getpwuid(uid);
	snprintf(buf, sizeof(buf), "%u", (unsigned int)uid);
	cache = xrealloc(cache, (n + 1) * sizeof(*cache));
	cache[n].uid = uid;
	cache[n].name = xstrdup(pw ? pw->pw_name : buf);
	return cache[n++].name;
}

/* Text: the module's line, its parameters, then a table of open files. */
static void print_fields_line(const char *title, const struct fields *f)
{
	printf("%s:", title);
	for (size_t i = 0; i < f->n; i++)
		printf("%s %s %s", i ? "," : "", f->v[i].key, f->v[i].value);
	printf("%s\n", f->n ? "" : " none");
}

static void print_text(const struct snapshot *s)
{
	struct fields cols = { 0 };	/* fdinfo keys, first seen first */
	size_t *width;

	if (!s->loaded) {
		printf("module: not loaded\n");
		return;
	}
	printf("version: %s\n", *s->version ? s->version : "none");
	print_fields_line("module", &s->attrs);
	print_fields_line("parameters", &s->params);
	if (s->unreadable)
		printf("(%u processes not shown: only root sees every process's files)\n",
		       s->unreadable);
	if (!s->nfiles) {
		printf("no process has /dev/" DEVICE " open\n");
		return;
	}

	for (size_t i = 0; i < s->nfiles; i++)
		for (size_t j = 0; j < s->files[i].info.n; j++)
			if (!fields_get(&cols, s->files[i].info.v[j].key))
				fields_add(&cols, s->files[i].info.v[j].key, "");
	width = xrealloc(NULL, (cols.n + 1) * sizeof(*width));
	for (size_t j = 0; j < cols.n; j++) {
		width[j] = strlen(cols.v[j].key);
		for (size_t i = 0; i < s->nfiles; i++) {
			const char *v = fields_get(&s->files[i].info,
						   cols.v[j].key);

			if (v && strlen(v) > width[j])
				width[j] = strlen(v);
		}
	}

	/* A field's header is its key, in capitals. */
	printf("\n%7s %-10s %-16s %4s", "PID", "USER", "COMMAND", "FD");
	for (size_t j = 0; j < cols.n; j++) {
		char up[64];
		size_t k;

		for (k = 0; cols.v[j].key[k] && k < sizeof(up) - 1; k++)
			up[k] = toupper((unsigned char)cols.v[j].key[k]);
		up[k] = '\0';
		printf(" %*s", (int)width[j], up);
	}
	printf("\n");
	for (size_t i = 0; i < s->nfiles; i++) {
		const struct open_file *f = &s->files[i];

		printf("%7d %-10.10s %-16.16s %4d", (int)f->pid,
		       user_name(f->uid), f->comm, f->fd);
		for (size_t j = 0; j < cols.n; j++) {
			const char *v = fields_get(&f->info, cols.v[j].key);

			printf(" %*s", (int)width[j], v ? v : "-");
		}
		printf("\n");
	}
	free(width);
	fields_free(&cols);
}

/* JSON: strings as UTF-8, invalid bytes as U+FFFD. */
static size_t utf8_len(const unsigned char *p)
{
	size_t n = *p >= 0xf0 ? 4 : *p >= 0xe0 ? 3 : 2;
	unsigned char lo = 0x80, hi = 0xbf;

	if (*p < 0xc2 || *p > 0xf4)
		return 0;
	if (*p == 0xe0)
		lo = 0xa0;
	else if (*p == 0xed)
		hi = 0x9f;
	else if (*p == 0xf0)
		lo = 0x90;
	else if (*p == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

static void json_string(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	putchar('"');
	while (*p) {
		size_t n;

		if (*p == '"' || *p == '\\') {
			printf("\\%c", *p++);
		} else if (*p < 0x20 || *p == 0x7f) {
			printf("\\u%04x", *p++);
		} else if (*p < 0x80) {
			putchar(*p++);
		} else if ((n = utf8_len(p))) {
			fwrite(p, 1, n, stdout);
			p += n;
		} else {
			fputs("\\ufffd", stdout);
			p++;
		}
	}
	putchar('"');
}

/*
 * A value as a JSON number if it is an integer, decimal as written or
 * 0x-hexadecimal (converted, JSON has no hexadecimal); else a string.
 */
static void json_value(const char *v)
{
	const char *digits = v + (*v == '-');
	unsigned long long x;
	char *end;

	if (isdigit((unsigned char)*digits) &&
	    (digits[0] != '0' || !digits[1]) &&
	    strspn(digits, "0123456789") == strlen(digits)) {
		fputs(v, stdout);
		return;
	}
	if (v[0] == '0' && v[1] == 'x' && isxdigit((unsigned char)v[2])) {
		errno = 0;
		x = strtoull(v, &end, 16);
		if (!*end && !errno) {
			printf("%llu", x);
			return;
		}
	}
	json_string(v);
}

static void json_fields(const struct fields *f)
{
	putchar('{');
	for (size_t i = 0; i < f->n; i++) {
		if (i)
			putchar(',');
		json_string(f->v[i].key);
		putchar(':');
		json_value(f->v[i].value);
	}
	putchar('}');
}

static void print_json(const struct snapshot *s)
{
	printf("{\"time\":%lld,\"module\":{\"loaded\":%s", (long long)s->time,
	       s->loaded ? "true" : "false");
	if (s->loaded) {
		printf(",\"version\":");
		if (*s->version)
			json_string(s->version);
		else
			printf("null");
		printf(",\"attributes\":");
		json_fields(&s->attrs);
		printf(",\"parameters\":");
		json_fields(&s->params);
	}
	printf("},\"unreadable_processes\":%u,\"files\":[", s->unreadable);
	for (size_t i = 0; i < s->nfiles; i++) {
		const struct open_file *f = &s->files[i];

		printf("%s{\"pid\":%d,\"uid\":%u,\"user\":", i ? "," : "",
		       (int)f->pid, (unsigned int)f->uid);
		json_string(user_name(f->uid));
		printf(",\"command\":");
		json_string(f->comm);
		printf(",\"fd\":%d,\"fdinfo\":", f->fd);
		json_fields(&f->info);
		putchar('}');
	}
	printf("]}\n");
}

/*
 * --check PID: whether the registration caches of the libfabric and the
 * UCX that a process has loaded learn of its memory changes from the
 * device, told from what /proc shows of it: the libraries it maps, the
 * monitor's thread (libfabric), a file of the device with a whole-space
 * watch (libummunotify-ucx), and its environment.
 */
struct process {
	pid_t pid;
	char **maps;		/* the files it maps, each once */
	size_t nmaps;
	char *env;		/* its initial environment, NUL-separated */
	size_t env_len;
	pid_t monitor_tid;	/* the OFI monitor's thread, or 0 */
	bool monitor_failed;	/* ... named so after fi_fini() */
};

/* The mapped files whose name starts with prefix: the first in *first. */
static size_t mapped(const struct process *p, const char *prefix,
		     const char **first)
{
	size_t n = 0;

	*first = NULL;
	for (size_t i = 0; i < p->nmaps; i++) {
		const char *base = strrchr(p->maps[i], '/');

		if (base && !strncmp(base + 1, prefix, strlen(prefix))) {
			if (!n++)
				*first = p->maps[i];
		}
	}
	return n;
}

static const char *proc_getenv(const struct process *p, const char *name)
{
	size_t len = strlen(name);

	for (const char *e = p->env; e < p->env + p->env_len;
	     e += strlen(e) + 1)
		if (!strncmp(e, name, len) && e[len] == '=')
			return e + len + 1;
	return NULL;
}

/* The process's mapped files, environment and threads; false, errno. */
static bool read_process(struct process *p, pid_t pid)
{
	char path[64], comm[64], *line = NULL;
	size_t cap = 0;
	struct dirent *d;
	FILE *f;
	DIR *tasks;

	*p = (struct process){ .pid = pid };
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (getline(&line, &cap, f) > 0) {
		char *name = NULL;
		size_t i;
		int at = 0;

		/* address perms offset dev inode, then the path, if a file */
		if (sscanf(line, "%*s %*s %*s %*s %*s %n", &at) < 0 || !at ||
		    line[at] != '/')
			continue;
		name = line + at;
		name[strcspn(name, "\n")] = '\0';
		for (i = 0; i < p->nmaps && strcmp(p->maps[i], name); i++)
			;
		if (i < p->nmaps)
			continue;
		p->maps = xrealloc(p->maps, (p->nmaps + 1) * sizeof(*p->maps));
		p->maps[p->nmaps++] = xstrdup(name);
	}
	free(line);
	/* A read error (ptrace access refused), or nothing (a kernel thread). */
	if (ferror(f) || !p->nmaps) {
		errno = ferror(f) ? EACCES : ESRCH;
		fclose(f);
		return false;
	}
	fclose(f);

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	f = fopen(path, "re");
	if (f) {
		char buf[4096];
		size_t n;

		while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
			p->env = xrealloc(p->env, p->env_len + n);
			memcpy(p->env + p->env_len, buf, n);
			p->env_len += n;
		}
		fclose(f);
	}

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	tasks = opendir(path);
	while (tasks && (d = readdir(tasks))) {
		char task[PATH_MAX];

		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		snprintf(task, sizeof(task), "%s/%s/comm", path, d->d_name);
		if (!read_file(task, comm, sizeof(comm)))
			continue;
		comm[strcspn(comm, "\n")] = '\0';
		if (!strcmp(comm, UMN_OFI_THREAD_NAME) ||
		    !strcmp(comm, UMN_OFI_FAILED_THREAD_NAME)) {
			p->monitor_tid = atoi(d->d_name);
			p->monitor_failed = strcmp(comm, UMN_OFI_THREAD_NAME);
		}
	}
	if (tasks)
		closedir(tasks);
	return true;
}

static void free_process(struct process *p)
{
	for (size_t i = 0; i < p->nmaps; i++)
		free(p->maps[i]);
	free(p->maps);
	free(p->env);
}

/* What a check finds of one library's caches, worst last. */
enum verdict { USES, NO_CACHE, CANNOT_TELL, DOES_NOT };

/*
 * The process's own files of the device, opened by it (not inherited
 * across fork() nor passed by another process): one with a whole-space
 * watch (libummunotify-ucx's) and one without, each NULL if none.  False
 * if the kernel does not say (a module before 1.2.0, or fdinfo hidden
 * from this user).
 */
static bool own_files(const struct snapshot *s, pid_t pid,
		      const struct open_file **range,
		      const struct open_file **whole)
{
	*range = *whole = NULL;
	for (size_t i = 0; i < s->nfiles; i++) {
		const struct open_file *f = &s->files[i];
		const char *opener = fields_get(&f->info, "opener");
		const char *all = fields_get(&f->info, "whole_space");

		if (!opener || !all)
			return false;
		if (atoi(opener) != pid)
			continue;
		if (strcmp(all, "0"))
			*whole = *whole ?: f;
		else
			*range = *range ?: f;
	}
	return true;
}

/* MR caching off in the initial environment: nothing to watch. */
static const char *no_cache(const struct process *p)
{
	static const char *const knobs[] = { "FI_MR_CACHE_MAX_COUNT",
					     "FI_MR_CACHE_MAX_SIZE" };
	const char *v;

	for (size_t i = 0; i < sizeof(knobs) / sizeof(*knobs); i++)
		if ((v = proc_getenv(p, knobs[i])) && !strcmp(v, "0"))
			return knobs[i];
	return NULL;
}

/* libfabric's verdict. */
static enum verdict check_libfabric(const struct process *p, bool told,
				    const struct open_file *f)
{
	const char *fabric, *provider, *path, *chosen, *off = no_cache(p);
	size_t copies = mapped(p, "libfabric.so", &fabric);

	/* A program that links libfabric statically has only the thread. */
	if (!copies && !p->monitor_tid)
		return USES;
	mapped(p, "libummunotify-ofi.so", &provider);
	path = proc_getenv(p, "FI_PROVIDER_PATH");
	chosen = proc_getenv(p, "FI_MR_CACHE_MONITOR");
	printf("libfabric %s: ", fabric ?: "(linked into the program)");
	if (copies > 1) {
		printf("cannot tell: %zu libfabric libraries are mapped, and an import goes to one of them\n",
		       copies);
		return CANNOT_TELL;
	}
	if (p->monitor_tid && p->monitor_failed) {
		printf("not ummunotify: the monitor failed (fi_fini() ran while a cache used it), and registrations are not cached (thread %d)\n",
		       (int)p->monitor_tid);
		return DOES_NOT;
	}
	if (p->monitor_tid) {
		printf("ummunotify: the monitor runs (thread %d", (int)p->monitor_tid);
		if (f)
			printf(", fd %d", f->fd);
		printf(")\n");
		return USES;
	}
	if (off) {
		printf("no MR cache: %s=0 in its initial environment turns libfabric's cache off\n",
		       off);
		return NO_CACHE;
	}
	printf("not ummunotify: ");
	if (!provider && path)
		printf("libfabric did not load the provider (FI_PROVIDER_PATH=%s in its initial environment)\n",
		       path);
	else if (!provider)
		printf("libfabric did not load the provider (not in its own provider directory; no FI_PROVIDER_PATH in its initial environment)\n");
	else if (chosen && *chosen && strcmp(chosen, "ummunotify"))
		printf("FI_MR_CACHE_MONITOR=%s in its initial environment keeps libfabric's own monitor\n",
		       chosen);
	else if (f || !told)
		printf("the provider is loaded, and no MR cache uses the monitor now: every domain closed, or the monitor's thread stopped on an error (its standard error says so)\n");
	else
		printf("the provider is loaded, but no MR cache uses the monitor (the first verbs domain starts it; FI_LOG_LEVEL=warn says why it could not)\n");
	return DOES_NOT;
}

/* UCX's verdict. */
static enum verdict check_ucx(const struct process *p, bool told,
			      const struct open_file *f)
{
	const char *ucs, *lib;

	if (!mapped(p, "libucs.so", &ucs))
		return USES;
	printf("UCX %s: ", ucs);
	if (!mapped(p, "libummunotify-ucx.so", &lib)) {
		printf("not ummunotify: libummunotify-ucx is not loaded, and UCX's own hooks are in use (see ummunotify-ucx(7))\n");
		return DOES_NOT;
	}
	if (!told) {
		printf("cannot tell: libummunotify-ucx is loaded, but the module does not say which files are its (before 1.2.0, or not to this user)\n");
		return CANNOT_TELL;
	}
	if (!f) {
		printf("not ummunotify: libummunotify-ucx is loaded but not active (it refused this UCX, /dev/" DEVICE " did not open, or no cache was made yet: UCX_LOG_LEVEL=info says which), and UCX's own hooks are in use\n");
		return DOES_NOT;
	}
	printf("ummunotify: libummunotify-ucx feeds UCX's caches (fd %d)\n", f->fd);
	return USES;
}

/* When the process started, from /proc/PID/stat; 0 if it is gone. */
static unsigned long long start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	/* After the command, which may hold spaces: field 22. */
	if (read_file(path, buf, sizeof(buf)) && (p = strrchr(buf, ')')) &&
	    sscanf(p + 2, "%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu",
		   &t) != 1)
		t = 0;
	return t;
}

/*
 * Exit status: 0 if every cache found uses the device (or caching is
 * off), 3 if one does not, 4 if that cannot be told; 1 without the
 * module, 2 if the process cannot be read or changed meanwhile.
 */
static int check(pid_t pid)
{
	const struct open_file *range, *whole;
	unsigned long long started = start_time(pid);
	enum verdict worst = USES, v;
	const char *ignored;
	char comm[64] = "?", path[64];
	struct process p;
	struct snapshot s;
	bool told;
	int ret;

	if (!read_process(&p, pid)) {
		fprintf(stderr, "umnstat: cannot read the mappings of process %d: %s%s\n",
			(int)pid, strerror(errno),
			errno == EACCES ? " (run as its user, or as root)" : "");
		return 2;
	}
	take_snapshot(&s, &pid, 1);
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (read_file(path, comm, sizeof(comm)))
		comm[strcspn(comm, "\n")] = '\0';
	/* An exit, and the pid reused, between the reads. */
	if (!started || start_time(pid) != started) {
		fprintf(stderr, "umnstat: process %d changed while it was read\n",
			(int)pid);
		ret = 2;
		goto out;
	}
	told = own_files(&s, pid, &range, &whole);
	printf("process %d (%s): ", (int)pid, comm);
	if (!s.loaded)
		printf("the module is not loaded\n");
	else if (!s.nfiles)
		printf("no file of /dev/" DEVICE " open\n");
	else
		printf("%zu file%s of /dev/" DEVICE " open\n", s.nfiles,
		       s.nfiles == 1 ? "" : "s");
	v = check_libfabric(&p, told, range);
	worst = v > worst ? v : worst;
	v = check_ucx(&p, told, whole);
	worst = v > worst ? v : worst;
	if (!mapped(&p, "libfabric.so", &ignored) && !p.monitor_tid &&
	    !mapped(&p, "libucs.so", &ignored)) {
		printf("neither libfabric nor UCX is loaded\n");
		worst = DOES_NOT;
	}
	ret = !s.loaded ? 1 : worst == DOES_NOT ? 3 : worst == CANNOT_TELL ? 4 : 0;
out:
	free_snapshot(&s);
	free_process(&p);
	return ret;
}

/*
 * --container PID [--set WATCHES,PAGES]: the budget of PID's container,
 * read or set with UMMUNOTIFY_NS_LIMITS.  Exit status as usage() says.
 */
static int container(pid_t pid, bool set, unsigned long long watches,
		     unsigned long long pages, bool json)
{
	struct ummunotify_ns_limits l = {
		.pid = pid,
		.flags = set ? UMMUNOTIFY_NS_LIMITS_SET : 0,
		.max_watches = watches,
		.max_pages = pages,
	};
	int fd = open("/dev/" DEVICE, O_RDONLY | O_CLOEXEC), err = errno;
	const char *why;

	if (fd < 0) {
		fprintf(stderr, "umnstat: /dev/" DEVICE ": %s\n", strerror(err));
		return err == ENOENT || err == ENXIO || err == ENODEV ? 1 : 2;
	}
	if (ioctl(fd, UMMUNOTIFY_NS_LIMITS, &l)) {
		switch (errno) {
		case EINVAL:
			why = "it is in no container (a user namespace root made): max_user_watches and max_user_pages bound its users";
			break;
		case EPERM:
			why = set ? "setting needs CAP_SYS_RESOURCE" :
				    "reading needs CAP_SYS_RESOURCE, in the container or above it";
			break;
		case ENOTTY:
			why = "the module loaded has no UMMUNOTIFY_NS_LIMITS (older than this umnstat)";
			break;
		default:
			why = strerror(errno);
		}
		fprintf(stderr, "umnstat: the container of process %d: %s\n",
			(int)pid, why);
		close(fd);
		return 2;
	}
	close(fd);
	printf(json ? "{\"pid\": %d, \"watches\": %llu, \"max_watches\": %llu, \"pages\": %llu, \"max_pages\": %llu}\n" :
		      "container of process %d: watches %llu of %llu, pages %llu of %llu\n",
	       (int)pid, (unsigned long long)l.watches,
	       (unsigned long long)l.max_watches, (unsigned long long)l.pages,
	       (unsigned long long)l.max_pages);
	return 0;
}

/* A limit: decimal digits only (strtoull() takes a sign). */
static bool parse_limit(const char *s, unsigned long long *value, char **end)
{
	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	*value = strtoull(s, end, 10);
	return !errno;
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: umnstat [-j] [-w[SECONDS]] [-p PID]...\n"
		"       umnstat -c PID\n"
		"       umnstat [-j] -n PID [-s WATCHES,PAGES]\n"
		"Which processes have /dev/" DEVICE " open, and what the kernel says\n"
		"of each open file and of the module; whether the libfabric and UCX\n"
		"caches of process PID use it; or the budget of PID's container.\n\n"
		"  -j, --json             one JSON object (with -w, one per line)\n"
		"  -w, --watch[=SECONDS]  again every SECONDS (default 2) until killed\n"
		"  -p, --pid=PID          only process PID (repeatable)\n"
		"  -c, --check=PID        whether PID's caches use the device\n"
		"  -n, --container=PID    what PID's container holds, and its limits\n"
		"  -s, --set=WATCHES,PAGES  with -n: set them (0: max_ns_watches,\n"
		"                         max_ns_pages)\n"
		"  -h, --help             this help\n\n"
		"Exit status: 0, 1 if the module is not loaded, 2 on bad usage (or\n"
		"an unreadable PID, or a container refused), 3 if a cache of the\n"
		"checked PID does not use it, 4 if that cannot be told.\n");
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "watch", optional_argument, NULL, 'w' },
		{ "pid", required_argument, NULL, 'p' },
		{ "check", required_argument, NULL, 'c' },
		{ "container", required_argument, NULL, 'n' },
		{ "set", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	bool json = false, watch = false;
	unsigned int interval = 2;
	pid_t *pids = NULL, checked = 0, contained = 0;
	unsigned long long max_watches = 0, max_pages = 0;
	bool set = false;
	size_t npids = 0;
	struct snapshot s;
	char *end;
	long v;
	int c;

	while ((c = getopt_long(argc, argv, "jw::p:c:n:s:h", options,
				NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'w':
			watch = true;
			if (!optarg)
				break;
			v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > 86400) {
				fprintf(stderr, "umnstat: bad interval: %s\n", optarg);
				return 2;
			}
			interval = v;
			break;
		case 's':
			set = true;
			if (!parse_limit(optarg, &max_watches, &end) ||
			    *end != ',' ||
			    !parse_limit(end + 1, &max_pages, &end) || *end) {
				fprintf(stderr, "umnstat: bad limits: %s (WATCHES,PAGES)\n",
					optarg);
				return 2;
			}
			break;
		case 'p':
		case 'c':
		case 'n':
			v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > INT_MAX) {
				fprintf(stderr, "umnstat: bad PID: %s\n", optarg);
				return 2;
			}
			if (c == 'c') {
				checked = v;
				break;
			}
			if (c == 'n') {
				contained = v;
				break;
			}
			pids = xrealloc(pids, (npids + 1) * sizeof(*pids));
			pids[npids++] = v;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc || (checked && (json || watch || npids)) ||
	    (contained && (checked || watch || npids)) || (set && !contained)) {
		usage(stderr);
		return 2;
	}
	if (checked)
		return check(checked);
	if (contained)
		return container(contained, set, max_watches, max_pages, json);

	for (;;) {
		take_snapshot(&s, pids, npids);
		if (json) {
			print_json(&s);
		} else {
			if (watch && isatty(STDOUT_FILENO))
				fputs("\033[H\033[2J", stdout);
			if (watch) {
				char when[64];

				strftime(when, sizeof(when), "%F %T",
					 localtime(&s.time));
				printf("umnstat every %us: %s\n\n", interval, when);
			}
			print_text(&s);
		}
		fflush(stdout);
		free_snapshot(&s);
		if (!watch)
			return s.loaded ? 0 : 1;
		sleep(interval);
	}
}
