/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/sys.c - what klbench needs from the system: a clock, the helper thread (glibc
 * takes an atomic-free lock path while a process has a single thread, so every
 * measurement happens with a second thread alive), CPU placement through hwloc, and a
 * description of the machine for every output.
 */
#include <errno.h>
#include <gnu/libc-version.h>
#include <hwloc.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <klock/klock.h>

#include "klbench.h"

/* Back-to-back clock reads used to estimate the clock's own cost. */
#define KB_TIMER_CALIBRATION 2001

uint64_t kb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The median cost of one clock read, measured once: subtracted from sampled latencies. */
uint64_t kb_timer_overhead_ns(void)
{
	static uint64_t cached = UINT64_MAX;
	uint64_t d[KB_TIMER_CALIBRATION];

	if (cached != UINT64_MAX)
		return cached;
	for (int i = 0; i < KB_TIMER_CALIBRATION; i++) {
		uint64_t t0 = kb_now_ns();

		d[i] = kb_now_ns() - t0;
	}
	qsort(d, KB_TIMER_CALIBRATION, sizeof(d[0]), cmp_u64);
	cached = d[KB_TIMER_CALIBRATION / 2];
	return cached;
}

/* Deltas of back-to-back reads looked at for the clock's step, in ns. */
#define KB_STEP_RANGE 256
/* A run of this many consecutive delta values means the clock resolves single ns. */
#define KB_STEP_FINE_RUN 4

/* Start of the run of non-empty counts that begins at or after @v (KB_STEP_RANGE: none). */
static unsigned next_run(const unsigned *seen, unsigned v, unsigned *len)
{
	while (v < KB_STEP_RANGE && seen[v] == 0)
		v++;
	*len = 0;
	while (v + *len < KB_STEP_RANGE && seen[v + *len] != 0)
		(*len)++;
	return v;
}

uint64_t kb_timer_resolution_ns(void)
{
	static uint64_t cached;
	unsigned seen[KB_STEP_RANGE] = { 0 }, v, len, prev = KB_STEP_RANGE;
	uint64_t step = UINT64_MAX;

	if (cached != 0)
		return cached;
	/* A quantised clock's back-to-back deltas cluster (20-21, 29-31, 40-41 ns on a VM
	 * whose clock steps by 10 ns, +-1 from its scaling); a fine clock's spread evenly. */
	for (int i = 0; i < KB_TIMER_CALIBRATION; i++) {
		uint64_t t0 = kb_now_ns(), d = kb_now_ns() - t0;

		if (d < KB_STEP_RANGE)
			seen[d]++;
	}
	for (v = next_run(seen, 0, &len); v < KB_STEP_RANGE; v = next_run(seen, v + len, &len)) {
		if (len >= KB_STEP_FINE_RUN) {
			step = 1;
			break;
		}
		unsigned peak = v;   /* the run's most frequent delta stands for it */

		for (unsigned k = v; k < v + len; k++)
			peak = seen[k] > seen[peak] ? k : peak;
		if (prev < KB_STEP_RANGE && peak - prev < step)
			step = peak - prev;
		prev = peak;
	}
	cached = step == UINT64_MAX ? 1 : step;
	return cached;
}

void kb_sleep_until(uint64_t deadline)
{
	struct timespec ts = { (time_t)(deadline / 1000000000ull),
			       (long)(deadline % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void *helper_main(void *arg)
{
	for (;;)
		pause();
	return arg;
}

/* A thread that sleeps until the process exits: from here on, glibc is multi-threaded. */
void kb_helper_start(void)
{
	static bool started;
	pthread_t t;
	int err;

	if (started)
		return;
	err = pthread_create(&t, NULL, helper_main, NULL);
	if (err != 0) {
		fprintf(stderr, "klbench: cannot start the helper thread: %s\n", strerror(err));
		exit(2);
	}
	pthread_detach(t);
	started = true;
}

/* ---- placement --------------------------------------------------------------------- */

static hwloc_topology_t kb_topo;
static pthread_once_t kb_topo_once = PTHREAD_ONCE_INIT;
static bool kb_topo_ok;

static void topo_load(void)
{
	kb_topo_ok = hwloc_topology_init(&kb_topo) == 0 && hwloc_topology_load(kb_topo) == 0;
	if (!kb_topo_ok)
		fprintf(stderr, "klbench: hwloc cannot load the topology: threads stay unbound\n");
}

unsigned kb_cpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		return (unsigned)CPU_COUNT(&set);
	return (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
}

/*
 * compact: worker i on the i-th processing unit in hwloc's logical order (SMT siblings,
 * then cores of a package, then packages: neighbours share caches), wrapping around.
 * scatter: hwloc_distrib() spreads n workers as far apart as the tree allows (packages,
 * then cores, then SMT siblings), one PU each.
 * Returns n CPU sets (hwloc bitmaps, opaque here), or NULL: leave the threads unbound.
 */
void **kb_place_sets(enum kb_placement p, unsigned n)
{
	hwloc_bitmap_t *sets;
	hwloc_obj_t root;
	int npu;

	if (p == KB_PLACE_NONE)
		return NULL;
	pthread_once(&kb_topo_once, topo_load);
	if (!kb_topo_ok || (npu = hwloc_get_nbobjs_by_type(kb_topo, HWLOC_OBJ_PU)) <= 0)
		return NULL;
	sets = calloc(n, sizeof(*sets));
	if (sets == NULL)
		return NULL;
	if (p == KB_PLACE_COMPACT) {
		for (unsigned i = 0; i < n; i++)
			sets[i] = hwloc_bitmap_dup(
				hwloc_get_obj_by_type(kb_topo, HWLOC_OBJ_PU, i % (unsigned)npu)->cpuset);
		return (void **)sets;
	}
	root = hwloc_get_root_obj(kb_topo);
	hwloc_distrib(kb_topo, &root, 1, sets, n, INT_MAX, 0);
	for (unsigned i = 0; i < n; i++)
		hwloc_bitmap_singlify(sets[i]);
	return (void **)sets;
}

void kb_place_free(void **sets, unsigned n)
{
	if (sets == NULL)
		return;
	for (unsigned i = 0; i < n; i++)
		hwloc_bitmap_free(sets[i]);
	free(sets);
}

int kb_bind_self(void *set)
{
	if (set == NULL)
		return 0;
	return hwloc_set_cpubind(kb_topo, set, HWLOC_CPUBIND_THREAD);
}


/* ---- the machine ------------------------------------------------------------------------ */

static void cpu_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];

	snprintf(buf, len, "unknown CPU");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *colon = strchr(line, ':');

		if (colon == NULL || strncmp(line, "model name", 10) != 0)
			continue;
		colon += 2;
		colon[strcspn(colon, "\n")] = '\0';
		snprintf(buf, len, "%s", colon);
		break;
	}
	fclose(f);
}

void kb_machine(char *buf, size_t len)
{
	struct utsname u;
	char model[128];
	const struct kl_topology *t = kl_topology();

	cpu_model(model, sizeof(model));
	uname(&u);
	snprintf(buf, len, "%s; %u CPUs (%u allowed), %u cores, %u packages, %u NUMA nodes; "
		 "Linux %s; glibc %s; klock %s, fence %s, cpu index %s", model, t->online_cpus,
		 kb_cpus(), t->cores, t->packages, t->numa_nodes, u.release,
		 gnu_get_libc_version(), KLOCK_VERSION,
		 kl_fence_asymmetric() ? "membarrier" : "symmetric", kl_cpu_source());
}

void kb_machine_short(char *buf, size_t len)
{
	struct utsname u;
	char model[128];

	cpu_model(model, sizeof(model));
	uname(&u);
	snprintf(buf, len, "%s, %u CPUs (%u allowed), Linux %s", model, kl_topology()->online_cpus,
		 kb_cpus(), u.release);
}

void kb_machine_json(FILE *f)
{
	struct utsname u;
	char model[128];
	const struct kl_topology *t = kl_topology();

	cpu_model(model, sizeof(model));
	uname(&u);
	fprintf(f, "{\"timer_ns\": %llu, \"timer_resolution_ns\": %llu, ",
		(unsigned long long)kb_timer_overhead_ns(),
		(unsigned long long)kb_timer_resolution_ns());
	fprintf(f, "\"cpu\": \"%s\", \"online_cpus\": %u, \"allowed_cpus\": %u, "
		"\"cores\": %u, \"packages\": %u, \"numa_nodes\": %u, \"kernel\": \"%s\", "
		"\"glibc\": \"%s\", \"klock\": \"%s\", \"fence\": \"%s\", \"cpu_index\": \"%s\"}",
		model, t->online_cpus, kb_cpus(), t->cores, t->packages, t->numa_nodes,
		u.release, gnu_get_libc_version(), KLOCK_VERSION,
		kl_fence_asymmetric() ? "membarrier" : "symmetric", kl_cpu_source());
}

bool kb_isatty_err(void)
{
	return isatty(STDERR_FILENO);
}

/* mkdir -p */
int kb_mkdirs(const char *path)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0777) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, 0777) < 0 && errno != EEXIST)
		return -1;
	return 0;
}
