/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * scripts/vm/init.c - PID 1 of scripts/vm-test's guest (static, in the initramfs).
 *
 * The initramfs holds this program, the 9p/virtio modules in load order (/modules.list,
 * one .ko path a line) and nothing else. It loads the modules, mounts the host's root
 * filesystem read-only (9p tag "hostroot") on /newroot, the host's klock tree read-write
 * (tag "klock") at the same path inside it, fresh proc/sys/dev/tmp/run on top, chroots
 * there and runs the guest script (kernel command line: klock.run=PATH) under /bin/sh.
 * When the script ends, or cannot start, it powers the guest off: qemu exits.
 * The script's exit status goes to PATH.rc (the host reads it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Longest line read from /proc/cmdline or /modules.list. */
#define LINE_MAX_LEN 4096
/* 9p transfer size: larger is fewer round trips through the emulated virtio ring. */
#define P9_OPTS_RO "trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro"
#define P9_OPTS_RW "trans=virtio,version=9p2000.L,msize=512000,cache=none"

static void die(const char *what)
{
	fprintf(stderr, "vm-init: %s: %s\n", what, strerror(errno));
	sync();
	reboot(RB_POWER_OFF);
	_exit(1);
}

static void load_modules(void)
{
	char line[LINE_MAX_LEN];
	FILE *f = fopen("/modules.list", "r");

	if (f == NULL)
		die("/modules.list");
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = 0;
		if (line[0] == 0)
			continue;
		int fd = open(line, O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			die(line);
		if (syscall(SYS_finit_module, fd, "", 0) != 0 && errno != EEXIST)
			die(line);
		close(fd);
	}
	fclose(f);
}

/* The value of klock.@key= on the kernel command line, or NULL. */
static char *cmdline_arg(const char *key)
{
	static char buf[LINE_MAX_LEN];
	char want[64];
	FILE *f = fopen("/proc/cmdline", "r");

	if (f == NULL || fgets(buf, sizeof(buf), f) == NULL)
		die("/proc/cmdline");
	fclose(f);
	snprintf(want, sizeof(want), "klock.%s=", key);
	for (char *tok = strtok(buf, " \n"); tok != NULL; tok = strtok(NULL, " \n"))
		if (strncmp(tok, want, strlen(want)) == 0)
			return tok + strlen(want);
	return NULL;
}

/* mkdir -p @path: a tree under /tmp or /run lies on the guest's fresh tmpfs, where its
 * mount point does not exist yet (a clone in /tmp failed: "vm-init: /tmp/...: No such
 * file or directory"); elsewhere the directories exist on the read-only host root. */
static void mkdir_p(const char *path)
{
	char buf[LINE_MAX_LEN];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(buf, 0755); /* EEXIST or EROFS on the host's own directories: fine */
		*p = '/';
	}
	mkdir(buf, 0755);
}

static void mnt(const char *src, const char *dst, const char *type, unsigned long fl,
		const char *opts)
{
	if (mount(src, dst, type, fl, opts) != 0)
		die(dst);
}

static int run_script(const char *script)
{
	pid_t pid = fork();
	int st = 0;

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		setsid();
		execl("/bin/sh", "sh", script, (char *)NULL);
		die("exec /bin/sh");
	}
	/* PID 1 reaps every orphan; the script's own status is the one that counts. */
	for (;;) {
		int s;
		pid_t w = wait(&s);

		if (w == pid)
			st = s;
		if (w < 0 && errno == ECHILD)
			break;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(void)
{
	mkdir("/proc", 0755);
	mnt("proc", "/proc", "proc", 0, NULL);
	char *script = cmdline_arg("run"), *tree = cmdline_arg("tree");

	if (script == NULL || tree == NULL) {
		errno = EINVAL;
		die("klock.run= / klock.tree= missing on the kernel command line");
	}
	script = strdup(script);
	tree = strdup(tree);
	load_modules();
	mkdir("/newroot", 0755);
	mnt("hostroot", "/newroot", "9p", MS_RDONLY, P9_OPTS_RO);
	if (chdir("/newroot") != 0 || chroot("/newroot") != 0 || chdir("/") != 0)
		die("chroot /newroot");
	mnt("proc", "/proc", "proc", 0, NULL);
	mnt("sysfs", "/sys", "sysfs", 0, NULL);
	mnt("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	mkdir("/dev/shm", 01777);
	mnt("tmpfs", "/dev/shm", "tmpfs", 0, "mode=1777");
	mnt("tmpfs", "/tmp", "tmpfs", 0, "mode=1777");
	mnt("tmpfs", "/run", "tmpfs", 0, "mode=755");
	mkdir_p(tree);
	mnt("klock", tree, "9p", 0, P9_OPTS_RW);
	setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
	setenv("HOME", "/tmp", 1);

	int rc = run_script(script);
	char path[LINE_MAX_LEN];

	snprintf(path, sizeof(path), "%s.rc", script);
	FILE *f = fopen(path, "w");

	if (f != NULL) {
		fprintf(f, "%d\n", rc);
		fclose(f);
	}
	sync();
	reboot(RB_POWER_OFF);
	return 0;
}
