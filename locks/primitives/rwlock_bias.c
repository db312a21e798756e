/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * locks/primitives/rwlock_bias.c - kl_rwlock's reader bias: biased read slots in the
 * thread records, arming, revocation.
 *
 * WHAT. The reader bias (BRAVO: Dice and Kogan, "BRAVO - Biased Locking for Reader-Writer
 * Locks", USENIX ATC 2019). Readers counted in one word move its cache line at every lock
 * and unlock: on 2 CPUs at 2 threads, read-only, 11 M ops/s where one thread alone does
 * 70 M. While the word has BIAS, a reader instead publishes the lock's address in a slot of
 * its own thread record (kli_thread.rw_bias: KL_RWLOCK_BIAS_SLOTS_ slots, one cache line,
 * the column a hash of the lock's address; exported as the TLS pointer kl_rwlock_bias_)
 * and then looks at the word (B1/B2): BIAS and no blocking bit admit it, anything else
 * makes it take the slot back and count itself. Its unlock clears the slot (B5). A reader
 * whose slot is taken (another lock in that column, or a second hold) counts itself. The
 * bias is turned on (B6) by a reader that holds the lock counted after losing a race for
 * the word to another reader - the line is moving between readers - unless a revocation
 * inhibits it. A writer that takes a biased word (W1, which keeps BIAS, seq_cst: B3) then
 * revokes: it reads the lock's column in every thread record (B4), waiting for each hold
 * to go (polled for RW_BIAS_SPIN_NS, then asleep: it sets BIAS_WAIT and runs the heavy
 * half of the fence pair, and a biased release, after its light half, wakes it when it
 * sees BIAS_WAIT - so the reader's unlock stays a store, a compiler barrier and a load of
 * a line it already shares), clears BIAS and inhibits it for RW_BIAS_INHIBIT_MULT times
 * what the revocation took (bias_at). A writer that gives up meanwhile (trylock, deadline)
 * releases the word with BIAS kept: holds may remain in slots, and only BIAS makes the
 * next writer look for them. The hot helpers that both files use (a biased entry and
 * release, the slot's column) are static inline in rwlock_impl.h.
 *
 * STATE. The word's BIAS and BIAS_WAIT bits and bias_at (rwlock.c's STATE); each thread
 * record's row of slots (kli_thread.rw_bias, above).
 *
 * INVARIANTS. No thread holds the lock through a slot while the word lacks BIAS, except
 * inside a revocation, whose writer holds WRLOCK.
 *
 * ORDERING. B1-B10, with the rest of the lock's labels in rwlock.c's ORDERING.
 *
 * COSTS, LIMITS. rwlock.c's (the revoking writer's scan of every thread record).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <klock/rwlock.h>
#include <klock/wait.h>
#include "hooks.h"
#include "rwlock_impl.h"
#include "spin.h"
#include "thread.h"

/* Reader bias. After a revocation that took C ns, readers stay unbiased for this many C
 * (BRAVO's N: a writer spends at most about 1/(N+1) of its time revoking; BRAVO's 9 made
 * 33-34 M ops/s at 2 threads and 1% writes here, 3 made 41 M: docs/design-adaptive.md). */
#define RW_BIAS_INHIBIT_MULT 3u
/* kli_rw_bias_inhibit_mult before KLOCK_RW_BIAS was read, and with the bias off. */
#define RW_BIAS_UNSET 0xffffffffu
#define RW_BIAS_OFF 0xfffffffeu
/* KLOCK_RW_BIAS accepts multiples up to this. */
#define RW_BIAS_MULT_MAX 1000ul
/* A revoking writer polls a published hold this long before it sleeps until woken. */
#define RW_BIAS_SPIN_NS KLI_STALL_NS
/* A slot value no lock has (locks are aligned): the shared row is full of it. */
#define RW_BIAS_NONE ((uintptr_t)1)

_Atomic unsigned kli_rw_bias_inhibit_mult = RW_BIAS_UNSET;

/* Every thread's kl_rwlock_bias_ until its first library read lock, and after it exits:
 * no slot is 0, so the inline path never publishes into it. */
static _Atomic uintptr_t rw_bias_full[KL_RWLOCK_BIAS_SLOTS_] = {
	RW_BIAS_NONE, RW_BIAS_NONE, RW_BIAS_NONE, RW_BIAS_NONE, RW_BIAS_NONE, RW_BIAS_NONE,
	RW_BIAS_NONE, RW_BIAS_NONE, RW_BIAS_NONE, RW_BIAS_NONE, RW_BIAS_NONE, RW_BIAS_NONE,
	RW_BIAS_NONE, RW_BIAS_NONE, RW_BIAS_NONE, RW_BIAS_NONE,
};
_Static_assert(KL_RWLOCK_BIAS_SLOTS_ == 16, "rw_bias_full lists every slot");

__attribute__((tls_model("initial-exec"))) __thread _Atomic uintptr_t *kl_rwlock_bias_ =
	rw_bias_full;

/* Revoking writers asleep (any lock's) wait on this; a biased release that sees
 * BIAS_WAIT bumps it (release, B9) and wakes them all: revokers that sleep are rare. */
static _Atomic uint32_t rw_revoke_seq;
pthread_once_t kli_rw_bias_once = PTHREAD_ONCE_INIT;

static void rw_bias_thread_exit(struct kli_thread *t)
{
	(void)t; /* its published holds stay, as a count hold would: see the top */
	kl_rwlock_bias_ = rw_bias_full;
}

void kli_rw_bias_global_init(void)
{
	kli_thread_on_exit(rw_bias_thread_exit);
}

/* bias_at's clock: the cycle counter in nanoseconds (kli_win16_*, kl_internal.h). */
static inline uint64_t rw_bias_now(void)
{
	return kli_cycles_to_ns(kl_arch_cycles());
}

/* The inhibit multiple: RW_BIAS_INHIBIT_MULT, or KLOCK_RW_BIAS=N (read once; "off": no
 * bias, RW_BIAS_OFF; anything else malformed: the default). */
static unsigned rw_bias_mult(void)
{
	unsigned m = atomic_load_explicit(&kli_rw_bias_inhibit_mult, memory_order_relaxed);

	if (kl_unlikely(m == RW_BIAS_UNSET)) {
		const char *e = getenv("KLOCK_RW_BIAS");
		char *end = NULL;
		unsigned long v = e != NULL ? strtoul(e, &end, 10) : RW_BIAS_INHIBIT_MULT;

		if (e != NULL && strcmp(e, "off") == 0)
			v = RW_BIAS_OFF;
		else if (e != NULL && (end == e || *end != '\0' || v > RW_BIAS_MULT_MAX))
			v = RW_BIAS_INHIBIT_MULT;
		m = (unsigned)v;
		atomic_store_explicit(&kli_rw_bias_inhibit_mult, m, memory_order_relaxed);
	}
	return m;
}

/* May readers be biased again? (bias_at: 0 = never revoked; a hint, relaxed.) */
static bool rw_bias_due(const struct kl_rwlock *rw)
{
	return !kli_win16_open(atomic_load_explicit(&rw->bias_at, memory_order_relaxed),
			       rw_bias_now());
}

/* A reader that holds @rw counted, and lost a race for the word to another reader: the
 * shared line is moving between readers, so turn the bias on if no revocation inhibits
 * it. We hold a read hold, so no writer holds the lock; a writer that sets WRWANT
 * meanwhile makes the CAS fail. B6: relaxed - an RMW on the word continues the release
 * sequence of the last writer's W2, which B2's acquire then synchronises with. */
void kli_rw_bias_arm(struct kl_rwlock *rw)
{
	uintptr_t v = atomic_load_explicit(&rw->word, memory_order_relaxed);

	if ((v & (RW_BIAS | RW_RD_BLOCK)) || rw_bias_mult() == RW_BIAS_OFF || !rw_bias_due(rw))
		return;
	atomic_compare_exchange_strong_explicit(&rw->word, &v, v | RW_BIAS, memory_order_relaxed,
						memory_order_relaxed);
}

/* The release half of a revoking writer's sleep: a biased hold went while BIAS_WAIT was
 * set. B9: release, pairs with B10 - a writer that reads the new count sees the slot. */
void kl_rwlock_bias_released_(struct kl_rwlock *rw)
{
	(void)rw;
	atomic_fetch_add_explicit(&rw_revoke_seq, 1, memory_order_release);
	kl_wake(&rw_revoke_seq, KL_WAKE_ALL);
}

/* Sleeps until the hold in @slot goes (woken by its release, kl_rwlock_bias_released_)
 * or @abstime passes. BIAS_WAIT is set first, then B8 - the heavy half of the fence pair,
 * against B7, the releaser's light half: either it sees BIAS_WAIT and wakes us, or our
 * look after B8 sees its slot cleared. 0 or ETIMEDOUT. */
static int rw_bias_sleep(struct kl_rwlock *rw, _Atomic uintptr_t *slot,
			 const struct timespec *abstime)
{
	uint32_t seq;

	atomic_fetch_or_explicit(&rw->word, RW_BIAS_WAIT, memory_order_relaxed);
	kl_fence_heavy(); /* B8: pairs with B7 */
	for (;;) {
		/* B10: acquire, pairs with B9: a bump we read comes after the slot's clearing. */
		seq = atomic_load_explicit(&rw_revoke_seq, memory_order_acquire);
		if (atomic_load_explicit(slot, memory_order_seq_cst) != (uintptr_t)rw)
			return 0; /* B4 */
		if (kli_deadline_passed(abstime))
			return ETIMEDOUT;
		kl_wait(&rw_revoke_seq, seq, abstime);
	}
}

/* Waits for the hold published in @slot, if it is one of @rw, to go: polls for
 * RW_BIAS_SPIN_NS, then sleeps until its release wakes us. @wait false: EAGAIN at once. */
static int rw_bias_drain(struct kl_rwlock *rw, _Atomic uintptr_t *slot,
			 const struct timespec *abstime, bool wait)
{
	struct kli_spin s;

	/* B4: seq_cst, after B3 (SB with B1/B2); acquire: pairs with the holder's B5. */
	if (kl_likely(atomic_load_explicit(slot, memory_order_seq_cst) != (uintptr_t)rw))
		return 0;
	if (!wait)
		return EAGAIN;
	kli_spin_start(&s, RW_BIAS_SPIN_NS);
	while (atomic_load_explicit(slot, memory_order_seq_cst) == (uintptr_t)rw) /* B4 */
		if (!kli_spin_poll(&s))
			return rw_bias_sleep(rw, slot, abstime);
	return 0;
}

/* Inhibits the bias for the multiple of a revocation that took @ns (at most about 8.4 ms). */
static void rw_bias_inhibit(struct kl_rwlock *rw, uint64_t ns)
{
	atomic_store_explicit(&rw->bias_at, kli_win16_end(rw_bias_now(), ns * rw_bias_mult()),
			      memory_order_relaxed);
}

/*
 * The caller took the write hold (W1/B3) from a biased word: wait until no thread's slot
 * holds @rw (new biased readers see WRLOCK at B2 and take their slot back), then clear
 * BIAS and inhibit it for RW_BIAS_INHIBIT_MULT times what this took. The scan reads one
 * slot per thread record ever registered (records are never unlinked; a thread that
 * registers during the scan publishes only after its registration, and then sees WRLOCK).
 * On failure (@wait false: EAGAIN; the deadline: ETIMEDOUT) BIAS is kept - some reader
 * still holds through its slot, and the next writer must find BIAS to look for it - and
 * the caller releases the write hold (rwlock.c, rw_revoke).
 */
int kli_rw_bias_revoke(struct kl_rwlock *rw, const struct timespec *abstime, bool wait)
{
	uint64_t t0 = kl_arch_cycles(), cost_ns;
	unsigned col = rw_col(rw);
	int err = 0;

	kli_hook_revoke_begin(rw, KLI_KIND_RWLOCK);
	for (struct kli_thread *t = kli_thread_first(); t != NULL && err == 0; t = t->all_next) {
		kli_thread_prefetch_ahead(t, offsetof(struct kli_thread, rw_bias[col]));
		err = rw_bias_drain(rw, &t->rw_bias[col], abstime, wait);
	}
	cost_ns = kli_cycles_to_ns(kl_arch_cycles() - t0);
	kli_hook_revoke_end(rw, KLI_KIND_RWLOCK, cost_ns, err);
	if (err != 0)
		return err;
	rw_bias_inhibit(rw, cost_ns);
	/* Under our write hold: only WRWANT may change meanwhile, and this RMW keeps it. */
	atomic_fetch_and_explicit(&rw->word, ~(RW_BIAS | RW_BIAS_WAIT), memory_order_relaxed);
	return 0;
}

/* Does any thread hold @rw through its slot? (A snapshot: destroy, the interposer.) */
bool kli_rw_bias_held(const struct kl_rwlock *rw)
{
	unsigned col = rw_col(rw);

	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next)
		if (atomic_load_explicit(&t->rw_bias[col], memory_order_seq_cst) == (uintptr_t)rw)
			return true;
	return false;
}

/* A read unlock by a thread with no hold of its own found no counted hold either: if
 * another thread holds @rw through its slot, release that hold for it (readers are not
 * tracked: any holder's unlock may release any read hold, as before the bias). */
bool kli_rw_bias_release_other(struct kl_rwlock *rw)
{
	unsigned col = rw_col(rw);

	for (struct kli_thread *t = kli_thread_first(); t != NULL; t = t->all_next) {
		uintptr_t h = (uintptr_t)rw;

		/* B5 for that holder: release, pairs with B4. */
		if (atomic_compare_exchange_strong_explicit(&t->rw_bias[col], &h, 0,
							    memory_order_release,
							    memory_order_relaxed)) {
			/* B7 (the CAS is a full barrier): a revoking writer may sleep on it */
			if (atomic_load_explicit(&rw->word, memory_order_relaxed) & RW_BIAS_WAIT)
				kl_rwlock_bias_released_(rw);
			return true;
		}
	}
	return false;
}
