/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/preload/test_stat_answer.c - klock-stat --attach's answer checks (preload/stat_attach.c)
 * fed random and mutated answers: random bytes, random JSON-ish token soup, and real
 * lockstat reports (text and JSON) with bits flipped, bytes replaced, terminal escapes,
 * C1 controls, broken UTF-8 and brackets inserted, ranges cut, repeated or truncated.
 *
 * Each answer lies in a heap block of exactly its length plus the one byte the interface
 * may write (so AddressSanitizer sees any read past it), and goes through the JSON and
 * the text path. What must hold for each:
 *   - an accepted answer has nothing a terminal could act on: decoded as UTF-8 by the C
 *     library (C.UTF-8, an independent decoder), every character is printable, a tab or
 *     a newline;
 *   - a JSON answer accepted is still one JSON object after the cleaning, its brackets
 *     balanced outside strings;
 *   - the text path accepts every non-empty answer; the unmodified reports are accepted
 *     by both paths, unchanged.
 * The PRNG is seeded from KLTEST_SEED (default fixed); a failure prints the seed, the
 * case and the answer's first bytes. At least KSA_FUZZ_CASES answers (KLTEST_SCALE > 1
 * runs more; it never runs fewer).
 */
#include <locale.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#include <wctype.h>

#include "../preload/stat_attach.h"

/* Answers generated per run (the floor: at least ten thousand). */
#define KSA_FUZZ_CASES 12000u
/* Longest generated answer. */
#define KSA_FUZZ_MAX 8192u
/* Most mutations applied to one seed report. */
#define KSA_FUZZ_MUTATIONS 8u
/* Deepest bracket run generated (beyond KSA_JSON_DEPTH, and far beyond for the stack). */
#define KSA_FUZZ_DEEP 6000u
/* Default PRNG seed. */
#define KSA_FUZZ_SEED 0x6b6c6f636b42ull
/* Highest Unicode code point. */
#define KSA_UNICODE_MAX 0x10ffff

static const char seed_text[] =
	"Process: stat-channel (pid 18334). Elapsed time: 1.67 seconds.\n"
	"Threads: 2 at most at once, on 2 CPUs. Contended acquisitions: 1, failed attempts: 0, "
	"events dropped: 0.\n\n-- Sleep (mutex)\n\n"
	"Total%  Count   Time/ms          Lock                       Caller\n"
	"------ ------- --------- ---------------------- ------------------------------\n"
	"100.00       1     13.40 channel_lock           channel_waiter+0x6c\n\n"
	"-- Summary by lock\n\n Contended   Failed    Wait/ms Lock                   Type\n"
	"         1        0      13.45 channel_lock           mutex\n";

static const char seed_json[] =
	"{\"klock_lockstat\": 1, \"lockstat_built\": true, \"recording\": true, \"sort\": "
	"\"time\",\n  \"pid\": 18334, \"command\": \"stat-channel\",\n  \"elapsed_ns\": "
	"1682170258, \"wait_pct\": 0.3999, \"acquisitions\": null, \"contended\": 1,\n"
	"  \"locks\": [\n    {\"lock\": \"0x55a6db0015a0\", \"name\": \"channel_lock\", \"read\": "
	"false, \"wait_ns\": -1.5e+3, \"callers\": [\n      {\"caller\": \"0x55a6daff09dc\", "
	"\"symbol\": \"channel_waiter+0x6c\", \"object\": \"/tmp/b\\u00e9\\\"\\\\ \xc3\xa9\", "
	"\"stacks\": [[1, 2], []]}], \"holders\": []}\n  ]\n}\n";

/* Bytes and snippets mutations insert: escapes, controls, UTF-8 edges, JSON syntax. */
static const char *const tokens[] = {
	"\x1b[2J", "\x1b]0;title\x07", "\xc2\x9b", "\x9b", "\xc2\x85", "\xe2\x80\xa8",
	"\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\x80", "\xe0\x80\x80", "\xf0\x9f\x92\xa9",
	"\xc3", "\r", "\b", "\x7f", "\"", "\\", "\\u", "\\u00", "\\u001b", "{", "}", "[", "]",
	",", ":", "{\"a\":", "[[[[", "]]]]", "1e", "-", "0.", "true", "nul", "\"\":", "\t",
	"\n", " ",
};
#define NTOKENS (sizeof(tokens) / sizeof(tokens[0]))
/* The alphabet of the token soup. */
static const char soup[] = "{}[]\",:\\-+.0123456789eEtruefalsn \t\n\r\x1b\x7f\x80\xc2\xff";

/* What check() requires of an answer: accepted by the text path, the JSON path, and
 * unchanged by the cleaning. */
#define MUST_TEXT 1u
#define MUST_JSON 2u

static uint64_t rng, rng_seed;

static uint64_t next(void)   /* xorshift64* */
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static size_t below(size_t n)
{
	return n == 0 ? 0 : (size_t)(next() % n);
}

/* Inserts @n bytes of @src at @at of @buf (length *@len, capacity KSA_FUZZ_MAX). */
static void insert(char *buf, size_t *len, size_t at, const char *src, size_t n)
{
	if (*len + n > KSA_FUZZ_MAX)
		return;
	memmove(buf + at + n, buf + at, *len - at);
	memcpy(buf + at, src, n);
	*len += n;
}

static void mutate_once(char *buf, size_t *len)
{
	size_t at = below(*len + 1), n = below(*len - at + 1) % 64u;
	const char *t = tokens[below(NTOKENS)];
	char tmp[64];

	switch (below(6)) {
	case 0:   /* flip a bit */
		if (*len > 0)
			buf[below(*len)] ^= (char)(1u << below(8));
		break;
	case 1:   /* a random byte */
		if (*len > 0)
			buf[below(*len)] = (char)next();
		break;
	case 2:   /* a token */
		insert(buf, len, at, t, strlen(t));
		break;
	case 3:   /* cut a range */
		memmove(buf + at, buf + at + n, *len - at - n);
		*len -= n;
		break;
	case 4:   /* repeat a range */
		memcpy(tmp, buf + at, n);
		insert(buf, len, at, tmp, n);
		break;
	default:  /* truncate */
		*len = at;
		break;
	}
}

/* One answer into @buf; its length. */
static size_t generate(char *buf, unsigned i)
{
	size_t len = 0, n;
	const char *seed;

	switch (i % 4u) {
	case 0:   /* random bytes */
		len = below(KSA_FUZZ_MAX / 4u);
		for (size_t k = 0; k < len; k++)
			buf[k] = (char)next();
		return len;
	case 1:   /* token soup, sometimes deep */
		len = below(KSA_FUZZ_MAX / 4u);
		for (size_t k = 0; k < len; k++)
			buf[k] = soup[below(sizeof(soup) - 1)];
		if (i % 64u == 1) {
			n = below(KSA_FUZZ_DEEP);
			len = 0;
			for (size_t k = 0; k < n && len < KSA_FUZZ_MAX; k++)
				buf[len++] = (i / 64u) % 2u ? '[' : '{';
		}
		return len;
	default:  /* a real report, mutated */
		seed = i % 4u == 2 ? seed_text : seed_json;
		len = strlen(seed);
		memcpy(buf, seed, len);
		n = 1 + below(KSA_FUZZ_MUTATIONS);
		for (size_t k = 0; k < n; k++)
			mutate_once(buf, &len);
		return len;
	}
}

static void fail(const char *what, unsigned i, const char *buf, size_t len)
{
	fprintf(stderr, "FAIL: case %u (KLTEST_SEED=%llu): %s; answer (%zu bytes):", i,
		(unsigned long long)rng_seed, what, len);
	for (size_t k = 0; k < len && k < 96; k++)
		fprintf(stderr, " %02x", (unsigned char)buf[k]);
	fputc('\n', stderr);
	exit(1);
}

/* Whether @buf[0..@len) is printable UTF-8 text with tabs and newlines only (mbrtowc). */
static bool terminal_safe(const char *buf, size_t len)
{
	mbstate_t st;
	size_t k = 0;

	memset(&st, 0, sizeof(st));
	while (k < len) {
		wchar_t w;
		size_t r = mbrtowc(&w, buf + k, len - k, &st);

		if (r == 0 || r == (size_t)-1 || r == (size_t)-2 || (unsigned long)w > KSA_UNICODE_MAX)
			return false;
		if (iswcntrl((wint_t)w) && w != L'\n' && w != L'\t')
			return false;
		k += r;
	}
	return true;
}

/* Brackets balance outside strings (a second, cruder look at an accepted JSON answer). */
static bool brackets_balance(const char *buf, size_t len)
{
	long depth = 0;
	bool in_str = false;

	for (size_t k = 0; k < len; k++) {
		char c = buf[k];

		if (in_str && c == '\\')
			k++;
		else if (c == '"')
			in_str = !in_str;
		else if (!in_str && (c == '{' || c == '['))
			depth++;
		else if (!in_str && (c == '}' || c == ']') && --depth < 0)
			return false;
	}
	return depth == 0 && !in_str;
}

/* Runs one answer through both paths, in blocks of exactly its size (+1). */
static unsigned check(const char *src, size_t len, unsigned i, unsigned must)
{
	unsigned accepted = 0;

	for (int json = 0; json < 2; json++) {
		char *b = malloc(len + 1);
		bool must_accept = must & (json ? MUST_JSON : MUST_TEXT);
		const char *why;

		if (b == NULL)
			exit(2);
		memcpy(b, src, len);
		why = ksa_check_report(b, len, json);
		if (why == NULL) {
			accepted++;
			if (b[len] != '\0' || !terminal_safe(b, len))
				fail("a control character or bad UTF-8 would be printed", i, src, len);
			if (json && (!ksa_json_valid(b, len) || !brackets_balance(b, len)))
				fail("the cleaned JSON answer is no longer JSON", i, src, len);
			if (must_accept && memcmp(b, src, len) != 0)
				fail("a clean report was changed", i, src, len);
		} else if (must_accept || (!json && len > 0)) {
			fail(why, i, src, len);
		}
		free(b);
	}
	return accepted;
}

int main(void)
{
	const char *s = getenv("KLTEST_SEED"), *scale = getenv("KLTEST_SCALE");
	double f = scale != NULL ? strtod(scale, NULL) : 1.0;
	unsigned cases = KSA_FUZZ_CASES * (f > 1.0 ? (unsigned)f : 1u), json_ok = 0;
	char *buf = malloc(KSA_FUZZ_MAX);

	if (setlocale(LC_CTYPE, "C.UTF-8") == NULL && setlocale(LC_CTYPE, "en_US.UTF-8") == NULL) {
		puts("SKIP: no UTF-8 locale to check the output with");
		return 77;
	}
	rng_seed = s != NULL ? strtoull(s, NULL, 0) : KSA_FUZZ_SEED;
	rng = rng_seed = rng_seed != 0 ? rng_seed : KSA_FUZZ_SEED;
	if (buf == NULL)
		return 2;
	check(seed_text, strlen(seed_text), 0, MUST_TEXT);
	check(seed_json, strlen(seed_json), 0, MUST_TEXT | MUST_JSON);
	for (unsigned i = 0; i < cases; i++) {
		size_t len = generate(buf, i);

		json_ok += check(buf, len, i, 0) == 2;
	}
	free(buf);
	printf("ok: %u random and mutated answers through the JSON and text paths; "
	       "%u accepted as JSON, none with a control character\n", cases, json_ok);
	return 0;
}
