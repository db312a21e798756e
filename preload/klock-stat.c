/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * preload/klock-stat.c - `klock-stat [options] -- command [args]`: run a command with
 * klock's locks and lockstat in place of its pthread locks, and print where its threads
 * waited (NetBSD's `lockstat command`, for one unmodified program).
 *
 * How: the command runs with LD_PRELOAD=libklock-preload.so (found next to this program:
 * the build tree, or the installed libdir), KLOCK_LOCKSTAT=<report options>,
 * KLOCK_LOCKSTAT_FD=<an inherited descriptor of <private directory>/records> and, for
 * processes that lost that descriptor, KLOCK_LOCKSTAT_FILE=<private directory>/ls.%p, so
 * every process of the command (a shell script's children too) appends its lockstat
 * report there when it exits - also after it changed its user id. Then
 * klock-stat prints the reports of the processes that waited for a lock (all of them
 * with --all), the command's own first, and exits with the command's status (128 + the
 * signal number if a signal ended it, as shells do). While the command runs, SIGQUIT is
 * left to it, as time(1) does; a SIGTERM, SIGINT or SIGHUP sent to klock-stat (how people
 * stop a server they profile) first makes every process of the command write a snapshot
 * of its report (klock-stat closes the KLOCK_LOCKSTAT_CTL pipe, lockstat's control thread
 * sees end-of-file), then is forwarded to the command (not when the terminal sent it: the
 * command got that one itself); klock-stat then prints the reports as usual and removes
 * its folder (in $TMPDIR, else /tmp). With -d SECONDS the same snapshot closes a window:
 * only the records written by then are reported (the command runs on to its end).
 *
 * A process writes its report from atexit() or from the interposer's _exit()/_Exit(): one
 * that is killed (other than through klock-stat) writes none; setuid and statically linked
 * programs ignore LD_PRELOAD. klock-stat says so (on stderr with -j) when no report came
 * back.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stat_attach.h"

#ifndef KLOCK_STAT_LOCKSTAT
#define KLOCK_STAT_LOCKSTAT 1
#endif
#ifndef KLOCK_STAT_LIBREL
#define KLOCK_STAT_LIBREL "../lib"
#endif
#ifndef KLOCK_STAT_LIBDIR
#define KLOCK_STAT_LIBDIR "/usr/local/lib"
#endif
#define PRELOAD_NAME "libklock-preload.so"
/* Reports klock-stat will collect from one command (one per process). */
#define MAX_REPORTS 4096
/* The most processes' pids listed in the summary line. */
#define REPORT_CHUNK 65536
/* The file every process of the command appends its report record to (its descriptor
 * is inherited: KLOCK_LOCKSTAT_FD), inside the private directory. */
#define RECORDS_NAME "records"
/* Lowest descriptor number for it: above the small numbers programs dup2() onto. */
#define RECORDS_FD_MIN 100
/* How long a stop signal waits for the command's snapshot before it is forwarded, and
 * how often it looks. */
#define SNAPSHOT_WAIT_MS 10000u
#define SNAPSHOT_POLL_MS 10u
/* Longest -L/-F pattern with its NUL (KL_LOCKSTAT_MATCH_MAX in <klock/lockstat.h>:
 * klock-stat does not include the library's headers). */
#define MATCH_MAX 64
/* The attach channel's abstract socket name (locks/instruments/lockstat.c: LS_ATTACH_NAME). */
#define ATTACH_NAME "klock-lockstat.%ld"
/* Deepest -S stack: KL_LOCKSTAT_STACK_MAX of klock/lockstat.h (this tool links no klock). */
#define STACK_MAX 8
/* Longest -d window (a day). */
#define WINDOW_MAX_S 86400.0

struct opts {
	const char *output;      /* -o */
	bool json, count, locks, all, merge, merge_callers, hist;
	double window;           /* -d: seconds; 0: the whole run */
	unsigned top;
	const char *mutex, *rwlock, *preload;
	long attach;             /* --attach PID; 0: run a command */
	bool avg;                /* --sort avg */
	const char *lock_match, *caller_match;   /* -L, -F */
	const char *stacks;      /* -S DEPTH: KLOCK_LOCKSTAT_STACK for the command */
};

/* The command being run, and klock-stat's ends of its channels. */
struct run_ctx {
	pid_t pid;
	int status;
	bool done;             /* status is the command's */
	int ctl_r, ctl_w;      /* the control pipe: the command inherits ctl_r */
	off_t window_end;      /* -d: records up to here count; 0: all */
	off_t snap_end;        /* end of the command's snapshot record in records; 0: none */
	char records[PATH_MAX];
};

struct report {
	long pid;
	char *text;
	bool waited;             /* it recorded a contended or failed acquisition */
};

static void usage(FILE *f)
{
	fputs("usage: klock-stat [options] [--] command [args...]\n"
	      "       klock-stat [options] --attach PID\n"
	      "Runs command with klock's locks in place of its pthread locks (libklock-preload)\n"
	      "and prints klock's lockstat report for every process of it that waited for a\n"
	      "lock. The exit status is the command's.\n"
	      "  -o, --output FILE    write the report to FILE (default: standard error)\n"
	      "  -j, --json           JSON: {\"klock_stat\":1, \"processes\":[{\"pid\":..,\"report\":..}]}\n"
	      "  -s, --sort KEY       rank by total wait time (time, the default), count, or\n"
	      "                       average wait (avg)\n"
	      "  -L, --lock PATTERN   only locks whose name or address matches (fnmatch glob)\n"
	      "  -F, --function PAT   only call sites in functions that match (fnmatch glob)\n"
	      "  -n, --top N          at most N locks per section\n"
	      "  -l, --locks          one row per lock, no per-caller rows\n"
	      "  -M, --merge          one row per array of static locks (name[*])\n"
	      "  -m, --merge-callers  one caller row per function\n"
	      "  -H, --histogram      a log2 histogram of each lock's wait times\n"
	      "  -S, --stacks DEPTH   record call stacks of DEPTH (1-8) frames of contended\n"
	      "                       acquisitions; the report shows each lock's top stacks\n"
	      "  -a, --all            also report processes that never waited\n"
	      "  -d, --duration SECS  report the first SECS seconds only (the command runs on)\n"
	      "      --mutex IMPL     KLOCK_MUTEX for the command: adaptive, ticket, mcs, pthread\n"
	      "  -r, --rwlock IMPL    KLOCK_RWLOCK for the command: rwlock, pcpu_rwsem, pthread\n"
	      "  -p, --preload PATH   the interposer library to use\n"
	      "      --attach PID     profile a running process started under the interposer\n"
	      "                       with KLOCK_LOCKSTAT set, from now for -d SECS or until\n"
	      "                       SIGINT/SIGTERM (its data is reset when klock-stat attaches)\n"
	      "  -h, --help           this text\n", f);
}

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "klock-stat: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(127);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "output", required_argument, NULL, 'o' }, { "json", no_argument, NULL, 'j' },
		{ "sort", required_argument, NULL, 's' }, { "top", required_argument, NULL, 'n' },
		{ "locks", no_argument, NULL, 'l' }, { "all", no_argument, NULL, 'a' },
		{ "mutex", required_argument, NULL, 'X' }, { "merge", no_argument, NULL, 'M' },
		{ "merge-callers", no_argument, NULL, 'm' }, { "histogram", no_argument, NULL, 'H' },
		{ "duration", required_argument, NULL, 'd' }, { "rwlock", required_argument, NULL, 'r' },
		{ "preload", required_argument, NULL, 'p' }, { "help", no_argument, NULL, 'h' },
		{ "attach", required_argument, NULL, 'A' },
		{ "stacks", required_argument, NULL, 'S' },
		{ "lock", required_argument, NULL, 'L' }, { "function", required_argument, NULL, 'F' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	long n;
	int c;

	while ((c = getopt_long(argc, argv, "+o:js:n:laMmHL:F:d:r:p:S:h", lo, NULL)) != -1) {
		switch (c) {
		case 'o': o->output = optarg; break;
		case 'j': o->json = true; break;
		case 'l': o->locks = true; break;
		case 'a': o->all = true; break;
		case 'X': o->mutex = optarg; break;
		case 'M': o->merge = true; break;
		case 'd':
			o->window = strtod(optarg, &end);
			if (*optarg == '\0' || *end != '\0' || !(o->window > 0) ||
			    o->window > WINDOW_MAX_S)
				die("--duration: not a number of seconds: '%s'", optarg);
			break;
		case 'm': o->merge_callers = true; break;
		case 'H': o->hist = true; break;
		case 'S':
			n = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || n < 1 || n > STACK_MAX)
				die("--stacks: expected a depth of 1 to 8 frames, not '%s'", optarg);
			o->stacks = optarg;
			break;
		case 'L':
		case 'F':
			if (strlen(optarg) >= MATCH_MAX || strpbrk(optarg, ", ") != NULL)
				die("--lock/--function: a pattern of at most 63 characters, without "
				    "commas or spaces: '%s'", optarg);
			*(c == 'L' ? &o->lock_match : &o->caller_match) = optarg;
			break;
		case 'r': o->rwlock = optarg; break;
		case 'p': o->preload = optarg; break;
		case 's':
			if (strcmp(optarg, "count") != 0 && strcmp(optarg, "time") != 0 &&
			    strcmp(optarg, "avg") != 0)
				die("--sort: expected time, count or avg, not '%s'", optarg);
			o->count = strcmp(optarg, "count") == 0;
			o->avg = strcmp(optarg, "avg") == 0;
			break;
		case 'n':
			n = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || n < 0 || n > INT_MAX)
				die("--top: not a count: '%s'", optarg);
			o->top = (unsigned)n;
			break;
		case 'A':
			o->attach = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || o->attach <= 0 || o->attach > INT_MAX)
				die("--attach: not a process id: '%s'", optarg);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(127);
		}
	}
	if (o->attach != 0 && optind < argc)
		die("--attach: a command was given too ('%s')", argv[optind]);
	if (o->attach != 0 && o->stacks != NULL)
		die("--stacks: not with --attach (%s): the process records what its "
		    "KLOCK_LOCKSTAT_STACK says", "the depth is set when it starts");
	if (optind >= argc && o->attach == 0) {
		usage(stderr);
		exit(127);
	}
	return optind;
}

/* libklock-preload.so next to this program (build tree), or where it is installed. */
static char *find_preload(const struct opts *o)
{
	char exe[PATH_MAX], cand[PATH_MAX + 64], *slash;
	ssize_t n;
	const char *dirs[3];

	if (o->preload != NULL) {
		if (realpath(o->preload, cand) == NULL)
			die("--preload %s: no such library", o->preload);
		return strdup(cand);
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		die("cannot find my own path (%s)", strerror(errno));
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	*slash = '\0';
	dirs[0] = "";
	dirs[1] = "/" KLOCK_STAT_LIBREL;
	dirs[2] = NULL;
	for (int i = 0; i < 2; i++) {
		snprintf(cand, sizeof(cand), "%s%s/%s", exe, dirs[i], PRELOAD_NAME);
		if (access(cand, R_OK) == 0 && realpath(cand, exe) != NULL)
			return strdup(exe);
	}
	snprintf(cand, sizeof(cand), "%s/%s", KLOCK_STAT_LIBDIR, PRELOAD_NAME);
	if (access(cand, R_OK) == 0)
		return strdup(cand);
	die("cannot find " PRELOAD_NAME " next to klock-stat or in %s (use --preload)",
	    KLOCK_STAT_LIBDIR);
	return NULL;
}

/* The report options in the KLOCK_LOCKSTAT syntax. */
static void report_options(const struct opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%s,%s,%s", o->json ? "json" : "text",
		 o->avg ? "avg" : o->count ? "count" : "time", o->locks ? "locks" : "callers");
	if (o->lock_match != NULL)
		snprintf(buf + strlen(buf), len - strlen(buf), ",lock=%s", o->lock_match);
	if (o->caller_match != NULL)
		snprintf(buf + strlen(buf), len - strlen(buf), ",caller=%s", o->caller_match);
	if (o->top != 0)
		snprintf(buf + strlen(buf), len - strlen(buf), ",top=%u", o->top);
	if (o->merge)
		snprintf(buf + strlen(buf), len - strlen(buf), ",merge");
	if (o->merge_callers)
		snprintf(buf + strlen(buf), len - strlen(buf), ",merge_callers");
	if (o->hist)
		snprintf(buf + strlen(buf), len - strlen(buf), ",hist");
}

static void set_env(const struct opts *o, const char *preload, const char *dir, int fd,
		    int ctl)
{
	char buf[PATH_MAX * 2];
	const char *old = getenv("LD_PRELOAD");

	if (old != NULL && old[0] != '\0')
		snprintf(buf, sizeof(buf), "%s:%s", preload, old);
	else
		snprintf(buf, sizeof(buf), "%s", preload);
	setenv("LD_PRELOAD", buf, 1);
	report_options(o, buf, sizeof(buf));
	setenv("KLOCK_LOCKSTAT", buf, 1);
	snprintf(buf, sizeof(buf), "%s/ls.%%p", dir);
	setenv("KLOCK_LOCKSTAT_FILE", buf, 1);
	snprintf(buf, sizeof(buf), "%d", fd);
	setenv("KLOCK_LOCKSTAT_FD", buf, 1);
	snprintf(buf, sizeof(buf), "%d", ctl);
	setenv("KLOCK_LOCKSTAT_CTL", buf, 1);
	if (o->mutex != NULL)
		setenv("KLOCK_MUTEX", o->mutex, 1);
	if (o->rwlock != NULL)
		setenv("KLOCK_RWLOCK", o->rwlock, 1);
	if (o->stacks != NULL)
		setenv("KLOCK_LOCKSTAT_STACK", o->stacks, 1);
}

/* The signals klock-stat forwards (how people stop a server they profile). */
static const int stop_signals[] = { SIGTERM, SIGINT, SIGHUP };
#define NSTOP (sizeof(stop_signals) / sizeof(stop_signals[0]))

/* Set by on_stop(): the last stop signal, and whether the terminal sent it (then the
 * command, in the same foreground process group, got it too). */
static volatile sig_atomic_t stop_sig, stop_from_tty, window_due;

static void on_window(int sig)
{
	(void)sig;
	window_due = 1;
}

static void on_stop(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	stop_sig = sig;
	stop_from_tty = si != NULL && si->si_code == SI_KERNEL;
}

static char *slurp(const char *path);

/* @a/@b into @buf; a path too long for it ends klock-stat. */
static void path_join(char *buf, size_t len, const char *a, const char *b)
{
	int n = snprintf(buf, len, "%s/%s", a, b);

	if (n < 0 || (size_t)n >= len)
		die("path too long: %s", a);
}

/* Whether the record file holds a record of process @pid (its snapshot arrived). */
/* The offset just past @pid's first complete record in @path, or 0 if it has none. */
static off_t record_end(const char *path, long pid)
{
	char *all = slurp(path), *p = all, *nl;
	unsigned long long len;
	off_t end = 0;
	long who;

	while (p != NULL && end == 0 && (nl = strchr(p, '\n')) != NULL &&
	       sscanf(p, "klock-lockstat pid=%ld bytes=%llu", &who, &len) == 2 &&
	       len <= strlen(nl + 1)) {
		p = nl + 1 + len;
		if (who == pid)
			end = (off_t)(p - all);
	}
	free(all);
	return end;
}

/*
 * A stop signal reached klock-stat: first every process of the command writes a
 * snapshot (klock-stat closes the control pipe: lockstat.c's control thread), then the
 * signal goes to the command - unless the terminal sent it to the command already. A
 * command that the signal kills has reported; one that exits normally reports again.
 * Waits for the command's snapshot at most SNAPSHOT_WAIT_MS (a second signal does not
 * wait).
 */
static void take_snapshot(struct run_ctx *c)
{
	int status;

	if (c->ctl_w < 0)
		return;
	close(c->ctl_w);
	c->ctl_w = -1;
	for (unsigned ms = 0; ms < SNAPSHOT_WAIT_MS &&
			      (c->snap_end = record_end(c->records, c->pid)) == 0;
	     ms += SNAPSHOT_POLL_MS) {
		if (waitpid(c->pid, &status, WNOHANG) == c->pid) {
			c->status = status;
			c->done = true;
			return;
		}
		usleep(SNAPSHOT_POLL_MS * 1000u);
	}
}

static void forward_stop(struct run_ctx *c, int sig, bool tty)
{
	take_snapshot(c);
	if (!c->done && !tty)
		kill(c->pid, sig);
}

/* -d: the window closes - the records up to the command's snapshot are the report;
 * later records (its exit report, written as soon as it saw the snapshot land) are
 * left out. A command that exited before the window closed: everything it wrote. */
static void close_window(struct run_ctx *c)
{
	struct stat st;

	take_snapshot(c);
	if (c->snap_end > 0)
		c->window_end = c->snap_end;
	else
		c->window_end = stat(c->records, &st) == 0 && st.st_size > 0 ? st.st_size : 1;
}

/* Arms the -d timer (SIGALRM, no SA_RESTART: waitpid returns EINTR). */
static void arm_window(double secs)
{
	struct sigaction alrm = { .sa_handler = on_window };
	struct itimerval it = { 0 };

	if (secs <= 0)
		return;
	sigaction(SIGALRM, &alrm, NULL);
	it.it_value.tv_sec = (time_t)secs;
	it.it_value.tv_usec = (suseconds_t)((secs - (double)(time_t)secs) * 1e6);
	setitimer(ITIMER_REAL, &it, NULL);
}

/* Runs the command (its pid and wait status into @c). */
static void run(char **argv, struct run_ctx *c, double window)
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, stop = { .sa_sigaction = on_stop,
								   .sa_flags = SA_SIGINFO };
	struct sigaction oquit, ostop[NSTOP];
	int status;

	sigaction(SIGQUIT, &ign, &oquit);
	for (size_t i = 0; i < NSTOP; i++)
		sigaction(stop_signals[i], &stop, &ostop[i]);   /* no SA_RESTART: EINTR below */
	c->pid = fork();
	if (c->pid < 0)
		die("fork: %s", strerror(errno));
	if (c->pid == 0) {
		sigaction(SIGQUIT, &oquit, NULL);
		for (size_t i = 0; i < NSTOP; i++)
			sigaction(stop_signals[i], &ostop[i], NULL);
		execvp(argv[0], argv);
		fprintf(stderr, "klock-stat: %s: %s\n", argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(c->ctl_r);
	arm_window(window);
	while (!c->done) {
		if (waitpid(c->pid, &status, 0) == c->pid) {
			c->status = status;
			break;
		}
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
		if (window_due && c->window_end == 0) {
			window_due = 0;
			close_window(c);
		}
		if (stop_sig != 0) {
			int sig = stop_sig;

			stop_sig = 0;
			forward_stop(c, sig, stop_from_tty);
		}
	}
	if (c->ctl_w >= 0)
		close(c->ctl_w);
	sigaction(SIGQUIT, &oquit, NULL);
	for (size_t i = 0; i < NSTOP; i++)
		sigaction(stop_signals[i], &ostop[i], NULL);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (f == NULL)
		return NULL;
	do {
		if (cap - len < REPORT_CHUNK) {
			cap += REPORT_CHUNK;
			buf = realloc(buf, cap + 1);
			if (buf == NULL)
				die("%s", "out of memory");
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	buf[len] = '\0';
	return buf;
}

/* Whether a report (text or JSON) recorded any wait. */
static bool report_waited(const char *r)
{
	return strstr(r, "Contended acquisitions: 0, failed attempts: 0,") == NULL &&
	       !(strstr(r, "\"contended\": 0,") != NULL && strstr(r, "\"failed\": 0,") != NULL);
}

static int cmp_report(const void *a, const void *b)
{
	const struct report *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* The report of process @pid in r[0..*n): its slot, a new one, or NULL when full. */
static struct report *report_of(struct report *r, size_t *n, long pid)
{
	for (size_t i = 0; i < *n; i++)
		if (r[i].pid == pid)
			return &r[i];
	if (*n >= MAX_REPORTS)
		return NULL;
	r[*n] = (struct report){ .pid = pid };
	return &r[(*n)++];
}

/* The records of the shared report file (lockstat.c's ls_exit_report_fd(): a header
 * line "klock-lockstat pid=P bytes=N", then N bytes); a later record of a process
 * replaces an earlier one - except with -d (@limit > 0), where a process that lived past
 * the window wrote its snapshot first and may already have added its exit record by the
 * time the window's end was measured: its first record is kept. */
static size_t parse_records(const char *path, struct report *r, size_t n, off_t limit)
{
	char *all = slurp(path), *p = all, *nl;
	unsigned long long len;
	long pid;

	if (all != NULL && limit > 0 && (size_t)limit < strlen(all))
		all[limit] = '\0';   /* -d: the records the window's snapshot wrote */
	while (p != NULL && (nl = strchr(p, '\n')) != NULL) {
		struct report *x;
		int used = 0;

		if (sscanf(p, "klock-lockstat pid=%ld bytes=%llu\n%n", &pid, &len, &used) != 2 ||
		    used == 0 || len > strlen(nl + 1))
			break;   /* a torn or foreign tail: what came before still counts */
		p = nl + 1;
		x = report_of(r, &n, pid);
		if (x != NULL && limit > 0 && x->text != NULL) {
			p += len;   /* -d: a process's first record is its window snapshot */
			continue;
		}
		if (x != NULL) {
			free(x->text);
			x->text = strndup(p, (size_t)len);
			if (x->text == NULL)
				die("%s", "out of memory");
		}
		p += len;
	}
	free(all);
	return n;
}

/* Reads every report (the shared record file, then per-process files of processes that
 * lost the descriptor), removing the files, the command's own first. */
static size_t collect(const char *dir, long first, struct report *r, off_t window_end)
{
	char path[PATH_MAX];
	struct dirent *e;
	size_t n;
	DIR *d;

	path_join(path, sizeof(path), dir, RECORDS_NAME);
	n = parse_records(path, r, 0, window_end);
	unlink(path);
	d = opendir(dir);
	while (d != NULL && (e = readdir(d)) != NULL && n < MAX_REPORTS) {
		if (window_end > 0 && strncmp(e->d_name, "ls.", 3) == 0) {
			path_join(path, sizeof(path), dir, e->d_name);
			unlink(path);   /* exit reports: after the window */
			continue;
		}
		if (strncmp(e->d_name, "ls.", 3) != 0)
			continue;
		path_join(path, sizeof(path), dir, e->d_name);
		r[n].pid = strtol(e->d_name + 3, NULL, 10);
		r[n].text = slurp(path);
		unlink(path);
		if (r[n].text == NULL || report_of(r, &n, r[n].pid) != &r[n]) {
			free(r[n].text);   /* none, or the process also wrote a record */
			continue;
		}
		n++;
	}
	if (d != NULL)
		closedir(d);
	for (size_t i = 0; i < n; i++)
		r[i].waited = report_waited(r[i].text);
	qsort(r, n, sizeof(*r), cmp_report);
	for (size_t i = 0; i < n; i++) {
		if (r[i].pid == first && i > 0) {
			struct report t = r[i];

			memmove(&r[1], &r[0], i * sizeof(*r));
			r[0] = t;
		}
	}
	return n;
}

static void print_text(FILE *f, struct report *r, size_t n, const struct opts *o, long first)
{
	size_t shown = 0, quiet = 0;

	for (size_t i = 0; i < n; i++)
		if (r[i].waited || o->all)
			shown++;
	if (shown == 0 && n > 0) { /* nobody waited: the command's own report says so */
		r[0].waited = true;
		shown = 1;
	}
	for (size_t i = 0; i < n; i++) {
		if (!r[i].waited && !o->all) {
			quiet++;
			continue;
		}
		if (shown > 1)
			fprintf(f, "%s=== process %ld%s ===\n", i > 0 ? "\n" : "", r[i].pid,
				r[i].pid == first ? " (the command)" : "");
		fputs(r[i].text, f);
	}
	if (quiet > 0)
		fprintf(f, "\n(%zu more process%s of the command never waited for a lock)\n",
			quiet, quiet > 1 ? "es" : "");
}

static void print_json(FILE *f, const struct report *r, size_t n, const struct opts *o,
		       char **cmd, int status)
{
	bool comma = false;

	fputs("{\"klock_stat\": 1, \"command\": [", f);
	for (size_t i = 0; cmd[i] != NULL; i++) {
		fputs(i > 0 ? ", \"" : "\"", f);
		for (const char *p = cmd[i]; *p != '\0'; p++) {
			if (*p == '"' || *p == '\\')
				fputc('\\', f);
			if ((unsigned char)*p < 0x20)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
		fputc('"', f);
	}
	fprintf(f, "], \"status\": %d, \"processes\": [",
		WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	for (size_t i = 0; i < n; i++) {
		if (!r[i].waited && !o->all && i > 0)
			continue;
		fprintf(f, "%s\n{\"pid\": %ld, \"report\": ", comma ? "," : "", r[i].pid);
		fputs(r[i].text, f);
		fputc('}', f);
		comma = true;
	}
	fputs("]}\n", f);
}

/*
 * The record file's descriptor, inherited by the command (not close-on-exec). Reports go
 * through it rather than by path: a process that dropped privileges (setpriv, a server
 * that setuid()s to its own user) can no longer create files in this private directory,
 * but an open descriptor needs no permission. A world-writable directory would work too,
 * but would let any local user plant or read "reports"; the descriptor reaches only the
 * command's processes.
 */
static int open_records(const char *dir)
{
	char path[PATH_MAX];
	int fd, hi;

	path_join(path, sizeof(path), dir, RECORDS_NAME);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_APPEND, 0600);
	if (fd < 0)
		die("cannot create the report file: %s", strerror(errno));
	hi = fcntl(fd, F_DUPFD, RECORDS_FD_MIN);
	if (hi >= 0) {
		close(fd);
		fd = hi;
	}
	return fd;
}

/* The control pipe: the command inherits the read end (fd >= RECORDS_FD_MIN, not
 * close-on-exec); klock-stat's write end is close-on-exec, so only klock-stat holds it
 * and closing it is an end-of-file every process of the command sees. */
static void open_ctl(struct run_ctx *c)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) != 0)
		die("cannot make a pipe: %s", strerror(errno));
	c->ctl_r = fcntl(p[0], F_DUPFD, RECORDS_FD_MIN);
	close(p[0]);
	if (c->ctl_r < 0)
		die("cannot make a pipe: %s", strerror(errno));
	c->ctl_w = p[1];
}

/* ---- --attach PID (locks/instruments/lockstat.c: the attach channel) -------------------------- */

static volatile sig_atomic_t attach_stop;

static void on_attach_stop(int sig)
{
	attach_stop = sig;
}

/* Ends klock-stat: --attach @pid does not go on because of @why. */
static void attach_refuse(long pid, const char *why)
{
	fprintf(stderr, "klock-stat: --attach %ld: %s: refusing\n", pid, why);
	exit(127);
}

/* Connects to @pid's attach channel, checks that its server end is @pid running as @uid
 * (else refuses: klock-stat ends), and returns the socket; -1: no channel there. */
static int attach_connect(long pid, uid_t uid)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, ATTACH_NAME, pid);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char why[256];

	if (fd < 0 || connect(fd, (struct sockaddr *)&a,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
					  (size_t)n)) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!ksa_peer_is(fd, pid, uid, why, sizeof(why)))
		attach_refuse(pid, why);
	return fd;
}

/* Sends @req to @pid's attach channel (held by @pid as @uid); its answer (until
 * end-of-file, at most KSA_ANSWER_MAX bytes) into a string, its length into @len
 * (KSA_ANSWER_MAX + 1: longer). */
static char *attach_request(long pid, uid_t uid, const char *req, size_t *len)
{
	int fd = attach_connect(pid, uid);
	char *buf = NULL, chunk[4096];
	size_t got = 0;
	ssize_t r;
	FILE *m;

	if (fd < 0)
		return NULL;
	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req) ||
	    (m = open_memstream(&buf, len)) == NULL) {
		close(fd);
		return NULL;
	}
	while (got <= KSA_ANSWER_MAX &&
	       ((r = read(fd, chunk, sizeof(chunk))) > 0 || (r < 0 && errno == EINTR))) {
		if (r > 0)
			fwrite(chunk, 1, (size_t)r, m);
		got += r > 0 ? (size_t)r : 0;
	}
	fclose(m);
	close(fd);
	if (buf != NULL && *len > KSA_ANSWER_MAX)
		*len = KSA_ANSWER_MAX + 1;   /* the rest was not read */
	return buf;
}

/* Waits -d SECS, or (without -d) until SIGINT/SIGTERM/SIGHUP. */
static void attach_wait(double window)
{
	struct sigaction st = { .sa_handler = on_attach_stop };
	struct timespec ts = { .tv_sec = (time_t)window,
			       .tv_nsec = (long)((window - (double)(time_t)window) * 1e9) };

	sigaction(SIGINT, &st, NULL);
	sigaction(SIGTERM, &st, NULL);
	sigaction(SIGHUP, &st, NULL);
	if (window > 0) {
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR && attach_stop == 0)
			;
		return;
	}
	while (attach_stop == 0)
		pause();
}

static int attach(const struct opts *o)
{
	char req[PATH_MAX], pid[32];
	struct report r = { .pid = o->attach };
	char *cmd[] = { pid, NULL }, *ok, *text;
	const char *why;
	FILE *out = stderr;
	size_t len;
	uid_t uid;

	snprintf(pid, sizeof(pid), "%ld", o->attach);
	if (!ksa_target_uid(o->attach, &uid))
		die("--attach %s: no such process", pid);
	ok = attach_request(o->attach, uid, "reset\n", &len);
	if (ok == NULL || strcmp(ok, "ok\n") != 0)
		die("--attach %s: no lockstat attach channel (a process started under "
		    "libklock-preload with KLOCK_LOCKSTAT set, that has created a thread, "
		    "and of your user?)", pid);
	free(ok);
	attach_wait(o->window);
	memcpy(req, "report ", 7);
	report_options(o, req + 7, sizeof(req) - 8);
	strcat(req, "\n");
	text = attach_request(o->attach, uid, req, &len);
	if (text == NULL || len == 0)
		die("--attach %s: the process did not answer (it ended?)", pid);
	if ((why = ksa_check_report(text, len, o->json)) != NULL)
		attach_refuse(o->attach, why);
	if (o->output != NULL && (out = fopen(o->output, "w")) == NULL)
		die("cannot write %s", o->output);
	r.text = text;
	r.waited = true;
	if (o->json)
		print_json(out, &r, 1, o, cmd, 0);
	else
		fputs(text, out);
	if (out != stderr)
		fclose(out);
	free(text);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	char dir[PATH_MAX];
	const char *tmp = getenv("TMPDIR");
	struct run_ctx c = { .ctl_r = -1, .ctl_w = -1 };
	struct report *r = calloc(MAX_REPORTS, sizeof(*r));
	int first = parse_opts(argc, argv, &o), status;
	char *preload = o.attach != 0 ? NULL : find_preload(&o);
	FILE *out = stderr;
	pid_t child;
	size_t n;
	int rec;

	if (!KLOCK_STAT_LOCKSTAT)
		die("%s", "this klock was built with -Dlockstat=false: there is no lockstat to "
		    "report (rebuild with -Dlockstat=true)");
	if (o.attach != 0) {
		free(r);
		return attach(&o);
	}
	path_join(dir, sizeof(dir), tmp != NULL && tmp[0] == '/' ? tmp : "/tmp",
		  "klock-stat.XXXXXX");
	if (r == NULL || mkdtemp(dir) == NULL)
		die("cannot make a directory for the reports: %s", strerror(errno));
	rec = open_records(dir);
	path_join(c.records, sizeof(c.records), dir, RECORDS_NAME);
	open_ctl(&c);
	set_env(&o, preload, dir, rec, c.ctl_r);
	run(argv + first, &c, o.window);
	status = c.status;
	child = c.pid;
	close(rec);
	n = collect(dir, (long)child, r, c.window_end);
	rmdir(dir);
	if (o.output != NULL && (out = fopen(o.output, "w")) == NULL)
		die("cannot write %s", o.output);
	if (n == 0)   /* JSON readers get an empty list: the note goes to stderr */
		fprintf(o.json ? stderr : out, "klock-stat: %s wrote no lockstat report (a "
			"static or setuid program, or one that a signal ended?)\n", argv[first]);
	if (o.json)
		print_json(out, r, n, &o, argv + first, status);
	else if (n > 0)
		print_text(out, r, n, &o, (long)child);
	if (out != stderr)
		fclose(out);
	for (size_t i = 0; i < n; i++)
		free(r[i].text);
	free(r);
	free(preload);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
