/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/instruments/lockstat_ctl.c - lockstat's process-level control layer: what the
 * environment asks for at load (KLOCK_LOCKSTAT, _FILE, _FD, _STACK, _CTL), the report at
 * exit (atexit, or a copy of the process for a program that calls _exit()), the control
 * thread klock-stat talks to, and the attach channel (an abstract Unix socket that
 * answers "report <options>" with a snapshot report). The recorder and the snapshots are
 * lockstat.c's (its theory block); this file only starts recording and reads snapshots
 * through kl_lockstat_snapshot(), like any program. Only in -Dlockstat=true builds.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <klock/lockstat.h>
#include "lockstat_impl.h"
#include "names_impl.h"
#include "thread.h"
#include "wordlock.h"

#if !KLOCK_LOCKSTAT
#error "lockstat_ctl.c is the -Dlockstat=true build; meson picks lockstat_off.c otherwise"
#endif

/* The attach channel: the abstract Unix socket "\0klock-lockstat.<pid>" (klock-stat.c
 * builds the same name). */
#define LS_ATTACH_NAME "klock-lockstat.%ld"
/* Longest attach request line ("report <options>"); a longer one drops the peer. */
#define LS_ATTACH_LINE 256
/* How long a peer has, from its connection, to send its request line (ms). */
#define LS_ATTACH_REQUEST_MS 1000
/* How long a peer has to read the whole answer (ms): klock-stat reads at once; a peer
 * that stops reading is dropped, so it cannot hold the channel. */
#define LS_ATTACH_ANSWER_MS 2000
/* Connections waiting to be accepted while one is served. */
#define LS_ATTACH_BACKLOG 8
/* Milliseconds per second and nanoseconds per millisecond. */
#define LS_MS_PER_S 1000
#define LS_NS_PER_MS 1000000
/* The control thread's stack: a report (stdio, labels, ELF lookups) and no more. */
#define LS_CTL_STACK (256u * 1024u)

/* The process-level state: KLOCK_LOCKSTAT=... at load, the exit report, the control
 * thread and the attach channel. */
static struct {
	struct kl_lockstat_options exit_opt;
	char *exit_path;               /* KLOCK_LOCKSTAT_FILE, absolute; NULL: stderr */
	int exit_fd;                   /* KLOCK_LOCKSTAT_FD, or -1 */
	int ctl_fd;                    /* KLOCK_LOCKSTAT_CTL (control thread), or 0 */
	_Atomic bool ctl_claimed;      /* a control thread was started (or refused) */
	_Atomic bool ctl_running;      /* the control thread exists (not one of T) */
	int attach_fd;                 /* the attach channel's listening socket, or -1 */
	struct kli_wordlock out_lock;  /* one report written at a time */
	dev_t exit_dev;                /* the file exit_fd named at load (fstat) */
	ino_t exit_ino;
	pid_t pid;                     /* the process that started it (fork children skip) */
	_Atomic pid_t forked;          /* the last fork() child's pid (its atfork handler) */
	_Atomic bool exit_done;        /* the exit report was written (atexit or _exit) */
	pid_t report_pid;              /* the _exit report copy: its parent; else 0 */
} lsc = { .exit_fd = -1, .attach_fd = -1, .out_lock = KLI_WORDLOCK_INIT };

/* fork() child: the parent's control thread and attach channel are not the child's (it
 * makes its own), and a report another thread was writing is not being written. */
static void lsc_atfork_child(void)
{
	atomic_store_explicit(&lsc.forked, getpid(), memory_order_relaxed);
	atomic_store_explicit(&lsc.out_lock.v, 0, memory_order_relaxed);
	atomic_store_explicit(&lsc.ctl_running, false, memory_order_relaxed);
	atomic_store_explicit(&lsc.ctl_claimed, false, memory_order_relaxed);
	if (lsc.attach_fd >= 0) {   /* the parent's channel: the child makes its own */
		close(lsc.attach_fd);
		lsc.attach_fd = -1;
	}
}

bool kli_lockstat_ctl_running(void)
{
	return atomic_load_explicit(&lsc.ctl_running, memory_order_relaxed);
}

/* ---- KLOCK_LOCKSTAT: start at load, report at exit -------------------------------------- */

/* KLOCK_LOCKSTAT_FILE with every "%p" replaced by the process id. */
static void ls_exit_path(char *buf, size_t len)
{
	const char *p = lsc.exit_path;
	size_t n = 0;

	while (*p != '\0' && n + 1 < len) {
		if (p[0] == '%' && p[1] == 'p') {
			int w = snprintf(buf + n, len - n, "%ld", kli_lockstat_pid());

			n += w > 0 ? (size_t)w : 0;
			p += 2;
		} else {
			buf[n++] = *p++;
		}
	}
	buf[n < len ? n : len - 1] = '\0';
}

/* Whether KLOCK_LOCKSTAT_FD still names the file it named at load: a program may have
 * closed it and opened something else under that number, which must not be written. */
static bool ls_exit_fd_ok(void)
{
	struct stat st;

	return lsc.exit_fd >= 0 && fstat(lsc.exit_fd, &st) == 0 && S_ISREG(st.st_mode) &&
	       st.st_dev == lsc.exit_dev && st.st_ino == lsc.exit_ino;
}

/* Writes all of @buf[0..n) to @fd; false on an error. */
static bool ls_write_all(int fd, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, buf, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		buf += w;
		n -= (size_t)w;
	}
	return true;
}

/*
 * The report as one record appended to the inherited KLOCK_LOCKSTAT_FD (klock-stat's):
 *   "klock-lockstat pid=<pid> bytes=<n>\n" then n bytes of report.
 * One write() of an O_APPEND file: the processes of a command share the file, and their
 * records do not interleave. An open descriptor needs no permission to write, so this
 * works after the process changed its user id, chrooted or changed directory.
 */
static bool ls_exit_report_fd(void)
{
	char *body = NULL, *rec;
	size_t len = 0;
	FILE *m;
	int hl;
	bool ok;

	if (!ls_exit_fd_ok() || (m = open_memstream(&body, &len)) == NULL)
		return false;
	kl_lockstat_report(m, &lsc.exit_opt);
	if (fclose(m) != 0 || body == NULL) {
		free(body);
		return false;
	}
	hl = snprintf(NULL, 0, "klock-lockstat pid=%ld bytes=%zu\n", kli_lockstat_pid(), len);
	rec = hl > 0 ? malloc((size_t)hl + len + 1) : NULL;
	if (rec == NULL) {
		free(body);
		return false;
	}
	snprintf(rec, (size_t)hl + 1, "klock-lockstat pid=%ld bytes=%zu\n", kli_lockstat_pid(),
		 len);
	memcpy(rec + hl, body, len);
	ok = ls_write_all(lsc.exit_fd, rec, (size_t)hl + len);
	free(rec);
	free(body);
	return ok;
}

/* Writes the report where KLOCK_LOCKSTAT_FD/_FILE say (stderr without either). Reports
 * of one process are serialised (out_lock), so the exit report lands after a snapshot
 * the control thread is writing. */
static void ls_report_out(void)
{
	char path[4096];
	FILE *f = stderr;

	kli_wordlock_lock(&lsc.out_lock);
	if (ls_exit_report_fd()) {
		kli_wordlock_unlock(&lsc.out_lock);
		return;
	}
	if (lsc.exit_path != NULL) {
		ls_exit_path(path, sizeof(path));
		f = fopen(path, "w");
		if (f == NULL) {
			fprintf(stderr, "klock: KLOCK_LOCKSTAT_FILE=%s: cannot open; "
				"report on stderr\n", path);
			f = stderr;
		}
	}
	kl_lockstat_report(f, &lsc.exit_opt);
	if (f != stderr)
		fclose(f);
	else
		fflush(f);
	kli_wordlock_unlock(&lsc.out_lock);
}

long kli_lockstat_pid(void)
{
	return lsc.report_pid != 0 ? (long)lsc.report_pid : (long)getpid();
}

static void ls_exit_report(void)
{
	/* A fork child that exits reports only where it cannot overwrite its parent's file. */
	if (kli_lockstat_pid() != lsc.pid && lsc.exit_fd < 0 &&
	    (lsc.exit_path == NULL || strstr(lsc.exit_path, "%p") == NULL))
		return;
	if (lsc.report_pid == 0 && atomic_exchange_explicit(&lsc.exit_done, true,
							   memory_order_relaxed))
		return;   /* _exit() from an atexit handler after this one, or the reverse */
	kl_lockstat_stop();
	ls_report_out();
}

/* ---- the exit report of a process that calls _exit() ------------------------------------ */

/* How long _exit() waits for the copy that writes its report, and how often it looks. */
#define LS_EXIT_FLUSH_WAIT_MS 10000u
#define LS_EXIT_FLUSH_POLL_NS 1000000l

/* The copy of an _exit()ing process (@parent): only the calling thread was copied, so
 * every lock another thread held stays held; lockstat's and the name table's are reset,
 * as in a fork child, and the report is written as the parent's. A lock we cannot reset
 * (the C library's malloc or loader lock, held by another thread at the copy) stops it:
 * the parent gives up waiting and kills it. */
static KL_NOINLINE void ls_exit_copy(pid_t parent)
{
	lsc.report_pid = parent;
	kli_lockstat_recorder_atfork();
	lsc_atfork_child();
	kli_names_atfork_child();
	ls_exit_report();
	syscall(SYS_exit_group, 0);
}

void kli_lockstat_exit_flush(void)
{
	pid_t me = getpid();
	struct timespec poll = { 0, LS_EXIT_FLUSH_POLL_NS };
	long child;
	int st;

	if (lsc.pid == 0 || (me != lsc.pid && me != atomic_load_explicit(&lsc.forked,
								  memory_order_relaxed)))
		return;   /* no KLOCK_LOCKSTAT, or a vfork child (its parent's memory) */
	if (atomic_exchange_explicit(&lsc.exit_done, true, memory_order_relaxed))
		return;
	/* A raw clone: no fork handlers (the program's could wait for a lock a thread
	 * holds), no exit signal (the program's SIGCHLD handler never sees it). */
	child = syscall(SYS_clone, 0ul, NULL, NULL, NULL, NULL);
	if (child == 0)
		ls_exit_copy(me);
	for (unsigned ms = 0; child > 0 && ms < LS_EXIT_FLUSH_WAIT_MS; ms++) {
		long r = waitpid((pid_t)child, &st, __WALL | WNOHANG);

		if (r != 0 && !(r < 0 && errno == EINTR))
			return;   /* done (or reaped by someone else) */
		nanosleep(&poll, NULL);
	}
	if (child > 0) {
		kill((pid_t)child, SIGKILL);
		waitpid((pid_t)child, &st, __WALL);
	}
}

/*
 * THE CONTROL THREAD (KLOCK_LOCKSTAT_CTL=fd: the read end of a pipe klock-stat holds the
 * other end of). It sleeps in read(); when the pipe reports end-of-file - klock-stat
 * closed its end, for every process of the command at once - it writes a report of
 * what was recorded so far (a snapshot; recording goes on) and ends. klock-stat does
 * this before it forwards a SIGTERM/SIGINT, so a command that the signal kills (no
 * atexit) has still reported; one that exits normally reports again, and klock-stat
 * keeps the later record. Started by libklock-preload's pthread_create() when the
 * program creates its first thread: never from a lock call (pthread_create allocates,
 * and a lock call may come from inside an allocator), and never in a single-threaded
 * program - those may rely on being single-threaded (unshare(CLONE_NEWUSER) refuses a
 * multithreaded caller; setpriv changes per-thread capabilities before setresgid, and
 * glibc aborts when a second thread's setxid result differs). All signals blocked, so it
 * never takes one meant for the program. A fork child starts its own at its first
 * pthread_create(). A single-threaded command killed by the signal reports nothing (it
 * never waited for a lock either).
 */
static void *ls_ctl_main(void *arg)
{
	char buf[64];
	ssize_t n;

	(void)arg;
	do
		n = read(lsc.ctl_fd, buf, sizeof(buf));   /* bytes are reserved: ignored */
	while (n > 0 || (n < 0 && errno == EINTR));
	ls_report_out();
	atomic_store_explicit(&lsc.ctl_running, false, memory_order_relaxed);
	return NULL;
}

/*
 * THE ATTACH CHANNEL (klock-stat --attach PID): a process started with KLOCK_LOCKSTAT set
 * but not by klock-stat (no KLOCK_LOCKSTAT_CTL) listens on the abstract Unix socket
 * "\0klock-lockstat.<pid>" from its control thread (started as above, at the first
 * pthread_create). Abstract: no file to create or clean up, gone with the process. Only
 * a peer of the same effective user id (or root) is served (SO_PEERCRED); one request
 * line per connection, which must arrive within LS_ATTACH_REQUEST_MS and fit in
 * LS_ATTACH_LINE, and whose answer must be read within LS_ATTACH_ANSWER_MS: a peer that
 * is silent, slow or too long is dropped, so one peer delays the next by at most those
 * deadlines. Abstract names belong to nobody: one that is taken when the control thread
 * binds it (a squatter, or a stale process of a reused pid) is said once on stderr, and
 * klock-stat checks the server end's pid and uid before it trusts an answer.
 *   "reset"             kl_lockstat_reset(); answers "ok\n"
 *   "report [OPTIONS]"  the report of what was recorded since (OPTIONS: the
 *                       KLOCK_LOCKSTAT syntax; default: the KLOCK_LOCKSTAT options)
 *   "snapshot [OPTIONS]" the report, then a reset (an interval, with no gap between)
 * No signal handler is installed: the program keeps SIGUSR1/SIGUSR2 to itself.
 */
static int ls_attach_listen(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, LS_ATTACH_NAME,
			 (long)getpid());

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) != 0 ||
	    listen(fd, LS_ATTACH_BACKLOG) != 0) {
		if (errno == EADDRINUSE)
			fputs("klock: lockstat attach channel unavailable: the name is in use\n",
			      stderr);
		close(fd);
		return -1;
	}
	return fd;
}

/* CLOCK_MONOTONIC in milliseconds. */
static int64_t ls_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * LS_MS_PER_S + ts.tv_nsec / LS_NS_PER_MS;
}

/* Waits until @c is ready for @events or the @deadline (ls_now_ms()) passes. */
static bool ls_attach_wait(int c, short events, int64_t deadline)
{
	struct pollfd p = { .fd = c, .events = events };
	int64_t left;
	int r;

	while ((left = deadline - ls_now_ms()) > 0) {
		r = poll(&p, 1, (int)left);
		if (r > 0)
			return true;
		if (r < 0 && errno != EINTR)
			return false;
	}
	return false;
}

/* The request line from the non-blocking connection @c into @line (its newline
 * dropped), within LS_ATTACH_REQUEST_MS; false: silent, slow, too long, or gone. */
static bool ls_attach_read_line(int c, char *line, size_t cap)
{
	int64_t deadline = ls_now_ms() + LS_ATTACH_REQUEST_MS;
	size_t n = 0;
	char *nl;

	while (ls_attach_wait(c, POLLIN, deadline)) {
		ssize_t r = recv(c, line + n, cap - 1 - n, 0);

		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return false;
		n += (size_t)r;
		line[n] = '\0';
		if ((nl = memchr(line, '\n', n)) != NULL) {
			*nl = '\0';
			return true;
		}
		if (n + 1 >= cap)
			return false;
	}
	return false;
}

/* @len bytes of @buf onto the non-blocking connection @c within LS_ATTACH_ANSWER_MS. */
static bool ls_attach_write(int c, const char *buf, size_t len)
{
	int64_t deadline = ls_now_ms() + LS_ATTACH_ANSWER_MS;

	while (len > 0) {
		ssize_t w = send(c, buf, len, MSG_NOSIGNAL);

		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (!ls_attach_wait(c, POLLOUT, deadline))
				return false;
			continue;
		}
		if (w <= 0)
			return false;
		buf += w;
		len -= (size_t)w;
	}
	return true;
}

static bool ls_attach_peer_ok(int c)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	return getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 &&
	       (cr.uid == 0 || cr.uid == geteuid());
}

/* The report with the options of @arg ("" or " OPTIONS") onto the connection @c:
 * written to memory first, then sent with the answer's deadline. */
static void ls_attach_report(int c, const char *arg)
{
	struct kl_lockstat_options o = lsc.exit_opt;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (arg[0] == ' ' && kl_lockstat_options_parse(arg + 1, &o) != 0)
		o = lsc.exit_opt;
	if (f == NULL)
		return;
	kl_lockstat_report(f, &o);
	if (fclose(f) == 0)
		ls_attach_write(c, buf, len);
	free(buf);
}

static void ls_attach_serve(int c)
{
	char line[LS_ATTACH_LINE];

	if (!ls_attach_read_line(c, line, sizeof(line)))
		return;
	if (strcmp(line, "reset") == 0) {
		kl_lockstat_reset();
		ls_attach_write(c, "ok\n", 3);
	} else if (strncmp(line, "report", 6) == 0) {
		ls_attach_report(c, line + 6);
	} else if (strncmp(line, "snapshot", 8) == 0) {
		ls_attach_report(c, line + 8);
		kl_lockstat_reset();
	}
}

static void *ls_attach_main(void *arg)
{
	int l = (int)(intptr_t)arg;

	for (;;) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (c < 0 && (errno == EINTR || errno == ECONNABORTED))
			continue;
		if (c < 0)
			break;
		if (ls_attach_peer_ok(c))
			ls_attach_serve(c);
		close(c);
	}
	atomic_store_explicit(&lsc.ctl_running, false, memory_order_relaxed);
	return NULL;
}

/* KLOCK_LOCKSTAT_CTL's pipe (klock-stat runs the command), or the attach channel
 * (KLOCK_LOCKSTAT set at load without it); NULL: neither. */
static void *(*ls_ctl_choose(void **arg))(void *)
{
	const char *v = getenv("KLOCK_LOCKSTAT_CTL");
	struct stat st;
	char *end;
	long fd;

	if (v == NULL || v[0] == '\0') {
		if (lsc.pid == 0 || (lsc.attach_fd = ls_attach_listen()) < 0)
			return NULL;
		*arg = (void *)(intptr_t)lsc.attach_fd;
		return ls_attach_main;
	}
	fd = strtol(v, &end, 10);
	if (*end != '\0' || fd <= 0 || fd > INT_MAX || fstat((int)fd, &st) != 0 ||
	    !S_ISFIFO(st.st_mode))
		return NULL;
	lsc.ctl_fd = (int)fd;
	*arg = NULL;
	return ls_ctl_main;
}

void kli_lockstat_ctl_start(kli_thread_create_fn create)
{
	void *(*fn)(void *), *arg = NULL;
	sigset_t all, old;
	pthread_attr_t at;
	pthread_t t;

	if (kl_likely(atomic_load_explicit(&lsc.ctl_claimed, memory_order_relaxed)) ||
	    atomic_exchange_explicit(&lsc.ctl_claimed, true, memory_order_relaxed))
		return;
	fn = ls_ctl_choose(&arg);
	if (fn == NULL || pthread_attr_init(&at) != 0)
		return;
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, LS_CTL_STACK);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	atomic_store_explicit(&lsc.ctl_running, true, memory_order_relaxed);
	if (create(&t, &at, fn, arg) != 0)
		atomic_store_explicit(&lsc.ctl_running, false, memory_order_relaxed);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
}

/* Remembers KLOCK_LOCKSTAT_FILE as an absolute path (the program may chdir). */
static void ls_exit_file(void)
{
	const char *file = getenv("KLOCK_LOCKSTAT_FILE");
	char cwd[4096];
	size_t n;

	if (file == NULL || file[0] == '\0')
		return;
	if (file[0] == '/' || getcwd(cwd, sizeof(cwd)) == NULL) {
		lsc.exit_path = strdup(file);
		return;
	}
	n = strlen(cwd) + strlen(file) + 2;
	lsc.exit_path = malloc(n);
	if (lsc.exit_path != NULL)
		snprintf(lsc.exit_path, n, "%s/%s", cwd, file);
}

/* KLOCK_LOCKSTAT_FD=n: an inherited descriptor of a regular file for the exit report. */
static void ls_exit_fd(void)
{
	const char *v = getenv("KLOCK_LOCKSTAT_FD");
	struct stat st;
	char *end;
	long fd;

	if (v == NULL || v[0] == '\0')
		return;
	fd = strtol(v, &end, 10);
	if (*end != '\0' || fd < 0 || fd > INT_MAX || fstat((int)fd, &st) != 0 ||
	    !S_ISREG(st.st_mode)) {
		fprintf(stderr, "klock: KLOCK_LOCKSTAT_FD=%s: not an open file; ignored\n", v);
		return;
	}
	lsc.exit_fd = (int)fd;
	lsc.exit_dev = st.st_dev;
	lsc.exit_ino = st.st_ino;
}

/* KLOCK_LOCKSTAT_STACK=DEPTH: record call stacks of DEPTH frames (1..8). */
static void ls_stack_env(void)
{
	const char *v = getenv("KLOCK_LOCKSTAT_STACK");
	char *end;
	long d;

	if (v == NULL || *v == '\0')
		return;
	d = strtol(v, &end, 10);
	if (*end != '\0' || d < 0 || d > KL_LOCKSTAT_STACK_MAX) {
		fprintf(stderr, "klock: KLOCK_LOCKSTAT_STACK=%s: expected 0..%d frames; no stacks\n",
			v, KL_LOCKSTAT_STACK_MAX);
		return;
	}
	kli_lockstat_set_stack_depth((unsigned)d);
}

void kli_lockstat_init(void)
{
	const char *v = getenv("KLOCK_LOCKSTAT");

	kli_lockstat_recorder_init();
	pthread_atfork(NULL, NULL, lsc_atfork_child);
	ls_stack_env();
	if (!kli_env_flag("KLOCK_LOCKSTAT"))
		return;
	if (strcmp(v, "1") != 0 && kl_lockstat_options_parse(v, &lsc.exit_opt) != 0)
		fprintf(stderr, "klock: KLOCK_LOCKSTAT=%s: expected 1 or a list of "
			"json,text,time,count,avg,locks,callers,merge,merge_callers,hist,top=N,"
			"lock=PAT,caller=PAT; using the defaults\n", v);
	ls_exit_file();
	ls_exit_fd();
	lsc.pid = getpid();
	if (atexit(ls_exit_report) != 0)
		fputs("klock: KLOCK_LOCKSTAT: atexit failed; no report at exit\n", stderr);
	kli_lockstat_start();
}
