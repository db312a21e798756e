/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/unit/test_park.c - the queueing parking lot and the internal wordlock. */
#include "kltest.h"
#include "park.h"
#include "wordlock.h"

#define PARKERS 3

struct parker {
	const void *key;
	struct timespec deadline;
	bool timed;
	enum kli_park_result res;
	uintptr_t token;
	int data_seen;
	const int *data;
};

static void *park_thread(void *arg)
{
	struct parker *p = arg;
	struct kli_park_req req = { .key = p->key, .abstime = p->timed ? &p->deadline : NULL };

	p->res = kli_park(&req, &p->token);
	if (p->data != NULL)
		p->data_seen = *p->data;
	return NULL;
}

/* Parks threads one by one (so their queue order is known) on @key. */
static void park_in_order(pthread_t *t, struct parker *p, int n, const void *key)
{
	for (int i = 0; i < n; i++) {
		p[i] = (struct parker){ .key = key };
		assert_int_equal(pthread_create(&t[i], NULL, park_thread, &p[i]), 0);
		while (kli_park_queued(key) != (unsigned)i + 1)
			klt_sleep_ms(1);
	}
}

static uintptr_t token_seq(const struct kli_unpark_result *r, void *arg)
{
	int *next = arg;

	return r->unparked ? (uintptr_t)(100 + (*next)++) : 0;
}

static void test_park_wakes_in_fifo_order(void **state)
{
	static int key;
	struct parker p[PARKERS];
	pthread_t t[PARKERS];
	int next = 0;

	park_in_order(t, p, PARKERS, &key);
	for (int i = 0; i < PARKERS; i++)
		assert_true(kli_unpark_one(&key, token_seq, &next));
	for (int i = 0; i < PARKERS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(p[i].res, KLI_PARK_UNPARKED);
		assert_int_equal(p[i].token, 100 + i); /* i-th to park got the i-th token */
	}
}

/* Each parker records its own registry record; the unparker's callback must see it. */
struct who {
	struct parker p;
	struct kli_thread *self;
};

static void *park_thread_who(void *arg)
{
	struct who *w = arg;

	w->self = kli_self();
	return park_thread(&w->p);
}

static uintptr_t record_thread(const struct kli_unpark_result *r, void *arg)
{
	*(struct kli_thread **)arg = r->thread;
	return 0;
}

/* The unpark callback learns which thread it dequeued (locks that take a lock on a
 * waiter's behalf - percpu-rwsem's wake function - read its role from its record). */
static void test_unpark_callback_names_the_dequeued_thread(void **state)
{
	static int key;
	struct who w[2];
	pthread_t t[2];
	struct kli_thread *seen = (struct kli_thread *)1;

	for (int i = 0; i < 2; i++) {
		w[i] = (struct who){ .p = { .key = &key } };
		assert_int_equal(pthread_create(&t[i], NULL, park_thread_who, &w[i]), 0);
		while (kli_park_queued(&key) != (unsigned)i + 1)
			klt_sleep_ms(1);
	}
	for (int i = 0; i < 2; i++) {
		assert_true(kli_unpark_one(&key, record_thread, &seen));
		pthread_join(t[i], NULL);
		assert_ptr_equal(seen, w[i].self);
	}
	assert_false(kli_unpark_one(&key, record_thread, &seen));
	assert_null(seen);
}

static bool say_no(void *arg)
{
	(void)arg;
	return false;
}

static void test_park_refused_by_validate_does_not_queue(void **state)
{
	static int key;
	struct kli_park_req req = { .key = &key, .validate = say_no };
	uintptr_t tok = 42;

	assert_int_equal(kli_park(&req, &tok), KLI_PARK_INVALID);
	assert_int_equal(kli_park_queued(&key), 0);
}

static void test_park_timeout_dequeues(void **state)
{
	static int key;
	struct parker p = { .key = &key, .timed = true, .deadline = klt_deadline_ms(40) };
	int64_t t0 = klt_now_ns();
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, park_thread, &p), 0);
	pthread_join(t, NULL);
	assert_int_equal(p.res, KLI_PARK_TIMEDOUT);
	assert_true(klt_now_ns() - t0 >= 40 * 1000000ll);
	assert_int_equal(kli_park_queued(&key), 0);
	assert_false(kli_unpark_one(&key, NULL, NULL));
}

struct seen { bool unparked[3], more[3]; int n; };

static uintptr_t record_result(const struct kli_unpark_result *r, void *arg)
{
	struct seen *s = arg;

	s->unparked[s->n] = r->unparked;
	s->more[s->n] = r->more;
	s->n++;
	return 0;
}

static void test_unpark_reports_whether_more_wait(void **state)
{
	static int key, other;
	struct parker p[3];
	pthread_t t[3];
	struct seen s = { 0 };

	park_in_order(t, p, 2, &key);
	/* A thread on another key in the same table must not count as "more". */
	p[2] = (struct parker){ .key = &other };
	assert_int_equal(pthread_create(&t[2], NULL, park_thread, &p[2]), 0);
	while (kli_park_queued(&other) != 1)
		klt_sleep_ms(1);
	for (int i = 0; i < 3; i++)
		kli_unpark_one(&key, record_result, &s);
	assert_true(s.unparked[0] && s.more[0]);
	assert_true(s.unparked[1] && !s.more[1]);
	assert_true(!s.unparked[2] && !s.more[2]);
	kli_unpark_all(&other, 0);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
}

struct rq { unsigned woken, moved; };

static void note_requeue(unsigned woken, unsigned moved, void *arg)
{
	struct rq *r = arg;

	r->woken = woken;
	r->moved = moved;
}

static void test_requeue_wakes_one_and_moves_the_rest(void **state)
{
	static int from, to;
	struct parker p[PARKERS];
	pthread_t t[PARKERS];
	struct rq r = { 0 };

	park_in_order(t, p, PARKERS, &from);
	assert_int_equal(kli_unpark_requeue(&from, &to, 1, 7, note_requeue, &r), 1);
	assert_int_equal(r.woken, 1);
	assert_int_equal(r.moved, PARKERS - 1);
	pthread_join(t[0], NULL);
	assert_int_equal(p[0].token, 7);
	assert_int_equal(kli_park_queued(&from), 0);
	assert_int_equal(kli_park_queued(&to), PARKERS - 1);
	assert_int_equal(kli_unpark_all(&to, 9), PARKERS - 1);
	for (int i = 1; i < PARKERS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(p[i].res, KLI_PARK_UNPARKED);
		assert_int_equal(p[i].token, 9);
	}
}

static void test_requeued_waiter_can_still_time_out(void **state)
{
	static int from, to;
	struct parker p = { .key = &from, .timed = true, .deadline = klt_deadline_ms(80) };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, park_thread, &p), 0);
	while (kli_park_queued(&from) != 1)
		klt_sleep_ms(1);
	assert_int_equal(kli_unpark_requeue(&from, &to, 0, 0, NULL, NULL), 0);
	pthread_join(t, NULL);
	assert_int_equal(p.res, KLI_PARK_TIMEDOUT);
	assert_int_equal(kli_park_queued(&to), 0);
	assert_int_equal(kli_park_queued(&from), 0);
}

static int handoff_data;

static uintptr_t publish_data(const struct kli_unpark_result *r, void *arg)
{
	handoff_data = 1234; /* written before K1, read by the wakee after K2 */
	return 1;
}

static void test_unpark_publishes_writes_to_the_wakee(void **state)
{
	static int key;
	struct parker p = { .key = &key, .data = &handoff_data };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, park_thread, &p), 0);
	while (kli_park_queued(&key) != 1)
		klt_sleep_ms(1);
	kli_unpark_one(&key, publish_data, NULL);
	pthread_join(t, NULL);
	assert_int_equal(p.data_seen, 1234);
}

static int requeue_data;

static void publish_late(unsigned woken, unsigned moved, void *arg)
{
	klt_sleep_ms(20); /* a wakee released before this would read 0 */
	requeue_data = 4321;
}

static void test_requeue_callback_runs_before_the_wakee_is_released(void **state)
{
	static int from, to;
	struct parker p = { .key = &from, .data = &requeue_data };
	pthread_t t;

	requeue_data = 0;
	assert_int_equal(pthread_create(&t, NULL, park_thread, &p), 0);
	while (kli_park_queued(&from) != 1)
		klt_sleep_ms(1);
	assert_int_equal(kli_unpark_requeue(&from, &to, 1, 0, publish_late, NULL), 1);
	pthread_join(t, NULL);
	assert_int_equal(p.data_seen, 4321);
}

struct whom { struct kli_thread *thread; uint64_t waited_ns; };

static uintptr_t note_whom(const struct kli_unpark_result *r, void *arg)
{
	struct whom *w = arg;

	w->thread = r->thread;
	w->waited_ns = r->waited_ns;
	return 0;
}

struct self_parker { struct parker p; _Atomic(struct kli_thread *) rec; };

static void *park_thread_self(void *arg)
{
	struct self_parker *sp = arg;

	atomic_store(&sp->rec, kli_self());
	return park_thread(&sp->p);
}

static void test_unpark_names_the_thread_and_requeue_restarts_its_clock(void **state)
{
	static int from, to;
	struct self_parker sp = { .p = { .key = &from } };
	struct whom w = { 0 };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, park_thread_self, &sp), 0);
	while (kli_park_queued(&from) != 1)
		klt_sleep_ms(1);
	klt_sleep_ms(30);
	assert_int_equal(kli_unpark_requeue(&from, &to, 0, 0, NULL, NULL), 0);
	assert_true(kli_unpark_one(&to, note_whom, &w));
	pthread_join(t, NULL);
	assert_ptr_equal(w.thread, atomic_load(&sp.rec));
	/* 30 ms on `from`, next to nothing on `to`: the clock restarted at the move. */
	assert_true(w.waited_ns < 30 * 1000000ull);
}

struct cookie_parker { struct parker p; uintptr_t cookie; };

static void *park_thread_cookie(void *arg)
{
	struct cookie_parker *cp = arg;
	struct kli_park_req req = { .key = cp->p.key, .cookie = cp->cookie };

	cp->p.res = kli_park(&req, &cp->p.token);
	return NULL;
}

static void test_unpark_cookie_wakes_exactly_the_matching_waiter(void **state)
{
	static int key;
	struct cookie_parker cp[3];
	pthread_t t[3];

	for (int i = 0; i < 3; i++) {
		cp[i] = (struct cookie_parker){ .p = { .key = &key }, .cookie = 10 + (uintptr_t)i };
		assert_int_equal(pthread_create(&t[i], NULL, park_thread_cookie, &cp[i]), 0);
		while (kli_park_queued(&key) != (unsigned)i + 1)
			klt_sleep_ms(1);
	}
	assert_false(kli_unpark_cookie(&key, 99, 5)); /* nobody waits for 99 */
	assert_true(kli_unpark_cookie(&key, 11, 5));  /* the middle one, not the oldest */
	pthread_join(t[1], NULL);
	assert_int_equal(cp[1].p.token, 5);
	assert_int_equal(kli_park_queued(&key), 2);
	assert_true(kli_unpark_cookie(&key, 10, 6));
	assert_true(kli_unpark_cookie(&key, 12, 7));
	pthread_join(t[0], NULL);
	pthread_join(t[2], NULL);
	assert_int_equal(cp[0].p.token, 6);
	assert_int_equal(cp[2].p.token, 7);
}

/* ---- wordlock: mutual exclusion under contention (CK-style counter) ---- */
#define WL_THREADS 4

static struct kli_wordlock wl = KLI_WORDLOCK_INIT;
static long wl_counter;
static long wl_iters;

static void *wordlock_thread(void *arg)
{
	for (long i = 0; i < wl_iters; i++) {
		kli_wordlock_lock(&wl);
		long v = wl_counter;
		for (int k = 0; k < 5; k++)
			__asm__ __volatile__("" ::: "memory");
		wl_counter = v + 1;
		kli_wordlock_unlock(&wl);
	}
	return NULL;
}

static void test_wordlock_excludes_under_contention(void **state)
{
	int dummy[WL_THREADS];

	wl_iters = klt_scaled(100000);
	wl_counter = 0;
	klt_run_threads(WL_THREADS, wordlock_thread, dummy, sizeof(dummy[0]));
	assert_int_equal(wl_counter, wl_iters * WL_THREADS);
	assert_true(kli_wordlock_trylock(&wl));
	assert_false(kli_wordlock_trylock(&wl));
	kli_wordlock_unlock(&wl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_park_wakes_in_fifo_order),
		cmocka_unit_test(test_park_refused_by_validate_does_not_queue),
		cmocka_unit_test(test_park_timeout_dequeues),
		cmocka_unit_test(test_unpark_reports_whether_more_wait),
		cmocka_unit_test(test_unpark_callback_names_the_dequeued_thread),
		cmocka_unit_test(test_requeue_wakes_one_and_moves_the_rest),
		cmocka_unit_test(test_requeued_waiter_can_still_time_out),
		cmocka_unit_test(test_unpark_publishes_writes_to_the_wakee),
		cmocka_unit_test(test_requeue_callback_runs_before_the_wakee_is_released),
		cmocka_unit_test(test_unpark_cookie_wakes_exactly_the_matching_waiter),
		cmocka_unit_test(test_unpark_names_the_thread_and_requeue_restarts_its_clock),
		cmocka_unit_test(test_wordlock_excludes_under_contention),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
