/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Children and the files passed to them, and threads that wake a waiter,
 * as the tests use them.
 */
#ifndef UMMUNOTIFY_SELFTESTS_PROCESS_H
#define UMMUNOTIFY_SELFTESTS_PROCESS_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>

/* waitpid() as the exit status, or 128 + the signal that killed it. */
static inline int wait_child(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status)
				 : 128 + WTERMSIG(status);
}

/* Pass FD over the AF_UNIX socket SOCK; 0 or -errno. */
static inline int send_fd(int sock, int fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u = { 0 };
	char byte = 0;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = u.buf,
		.msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -errno;
}

/* The file descriptor send_fd() passed, or -errno. */
static inline int recv_fd(int sock)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = u.buf,
		.msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *cm;
	int fd;

	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
		return -EPROTO;
	cm = CMSG_FIRSTHDR(&msg);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -EPROTO;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/*
 * A wake-up test must prove that its waiter slept and was woken, not that
 * the event was there before it waited.  start_when_asleep() runs FN(ARG)
 * in another thread once the calling thread sleeps (in the poll(),
 * select(), epoll_wait() or read() it calls next), or after WAKER_MS if
 * it never does; end_when_asleep(), called once the wait returned, says
 * whether it had slept.
 */
#define WAKER_MS	10000

struct when_asleep {
	pthread_t thread;
	pid_t waiter;
	void (*fn)(void *arg);
	void *arg;
	bool returned;		/* the waiter's wait returned */
	bool slept;		/* the waiter slept in it when FN ran */
};

/* The state of thread TID of this process ('R', 'S', 'D'...), or 0. */
static inline char thread_state(pid_t tid)
{
	char path[64], stat[512], *paren;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(stat, 1, sizeof(stat) - 1, f);
	fclose(f);
	stat[n] = '\0';
	paren = strrchr(stat, ')');
	return paren && paren[1] == ' ' ? paren[2] : 0;
}

/* Whether thread TID of this process sleeps within MS milliseconds. */
static inline bool wait_asleep(pid_t tid, int ms)
{
	struct timespec tick = { .tv_nsec = 1000 * 1000 };

	for (; ms > 0; ms--) {
		if (thread_state(tid) == 'S')
			return true;
		nanosleep(&tick, NULL);
	}
	return false;
}

static void *when_asleep_thread(void *arg)
{
	struct when_asleep *w = arg;

	/* Asleep, and not in a later wait (pthread_join()'s). */
	if (wait_asleep(w->waiter, WAKER_MS))
		w->slept = !__atomic_load_n(&w->returned, __ATOMIC_ACQUIRE);
	w->fn(w->arg);
	return NULL;
}

/* 0 or -errno. */
static inline int start_when_asleep(struct when_asleep *w,
				    void (*fn)(void *arg), void *arg)
{
	*w = (struct when_asleep){ .waiter = gettid(), .fn = fn, .arg = arg };
	return -pthread_create(&w->thread, NULL, when_asleep_thread, w);
}

/* 1 if the waiter slept until FN ran, 0 if not, or -errno. */
static inline int end_when_asleep(struct when_asleep *w)
{
	int ret;

	__atomic_store_n(&w->returned, true, __ATOMIC_RELEASE);
	ret = pthread_join(w->thread, NULL);
	return ret ? -ret : w->slept;
}

#endif
