// SPDX-License-Identifier: BSD-2-Clause
/*
 * tests/preload/stat_target_cpp.cpp - a C++ program for klock-stat's demangling check
 * (tests/preload/klock_stat_checks.py, check cpp). A worker thread blocks in
 * tpool::thread_pool::set_concurrency(unsigned int) on the static member mutex
 * tpool::thread_pool::lock_ while the main thread holds it (the main thread lets it in
 * once the worker sleeps in the kernel): one contended acquisition, whose lock and caller
 * have mangled symbols (_ZN5tpool11thread_pool5lock_E,
 * _ZN5tpool11thread_pool15set_concurrencyEj). Exits 0 after it, 1 if the worker never
 * slept. It uses std::string, so the C++ runtime (and its demangler) is loaded.
 */
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

namespace {
// Polls (1 ms apart) for the worker to fall asleep before giving up.
constexpr int POLL_MAX = 20000;
// Longest /proc/.../stat line read.
constexpr int STAT_LINE = 512;

std::atomic<long> worker_tid{0};

// Whether thread @tid sleeps in the kernel (state S in /proc/self/task/<tid>/stat).
bool thread_sleeps(long tid)
{
	char path[64], line[STAT_LINE];

	std::snprintf(path, sizeof(path), "/proc/self/task/%ld/stat", tid);
	std::FILE *f = std::fopen(path, "r");
	if (f == nullptr)
		return false;
	char *p = std::fgets(line, sizeof(line), f);
	std::fclose(f);
	p = p != nullptr ? std::strrchr(line, ')') : nullptr;
	return p != nullptr && p[1] == ' ' && p[2] == 'S';
}
} // namespace

namespace tpool {
struct thread_pool {
	static pthread_mutex_t lock_;
	static unsigned concurrency;
	__attribute__((noinline)) static void set_concurrency(unsigned n);
};

pthread_mutex_t thread_pool::lock_ = PTHREAD_MUTEX_INITIALIZER;
unsigned thread_pool::concurrency;

void thread_pool::set_concurrency(unsigned n)
{
	worker_tid.store(static_cast<long>(syscall(SYS_gettid)));
	pthread_mutex_lock(&lock_);
	concurrency = n;
	pthread_mutex_unlock(&lock_);
}
} // namespace tpool

static void *worker(void *)
{
	tpool::thread_pool::set_concurrency(4);
	return nullptr;
}

int main()
{
	pthread_t t;
	int polls = 0;
	struct timespec ms = { 0, 1000000 };

	pthread_mutex_lock(&tpool::thread_pool::lock_);
	if (pthread_create(&t, nullptr, worker, nullptr) != 0)
		return 1;
	while (polls++ < POLL_MAX && (worker_tid.load() == 0 || !thread_sleeps(worker_tid.load())))
		nanosleep(&ms, nullptr);
	pthread_mutex_unlock(&tpool::thread_pool::lock_);
	pthread_join(t, nullptr);
	std::string done(polls < POLL_MAX ? "done" : "the worker never slept"); // libstdc++
	std::printf("target: %s\n", done.c_str());
	return polls < POLL_MAX ? 0 : 1;
}
