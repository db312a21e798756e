/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * preload/stat_attach.c - what klock-stat --attach trusts.
 *
 * The attach channel is an abstract Unix socket, "\0klock-lockstat.<pid>" (lockstat.c).
 * Abstract names belong to nobody: any local user may bind the name of a process that
 * has not bound it yet, or of one that exited and whose pid came back. So before it sends
 * a request, klock-stat asks the kernel who holds the server end (SO_PEERCRED: the pid
 * and effective uid of the process that called listen()) and goes on only if that is the
 * process it was asked to attach to, running as the user /proc says it runs as.
 *
 * Then the answer is data from another process, printed to a terminal that may belong to
 * root: it is bounded (KSA_ANSWER_MAX), a JSON answer must be one well-formed JSON object
 * (-j output stays JSON), and every byte a terminal could act on is replaced before it is
 * printed. tests/preload/test_stat_answer.c feeds these functions random and mutated answers.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "stat_attach.h"

/* Longest /proc/PID/status line read (the Uid: line is four numbers). */
#define KSA_STATUS_LINE 256
/* Byte that replaces one a terminal could act on. */
#define KSA_SUBST '?'
/* The ASCII delete character (a control, not printable). */
#define KSA_DEL 0x7f
/* Lowest byte of a two-byte UTF-8 sequence, and the second byte range that encodes
 * U+0080..U+009F (the C1 controls) after the lead byte 0xC2. */
#define KSA_UTF8_LEAD2 0xc2
#define KSA_C1_LAST 0x9f
/* U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR (E2 80 A8/A9): controls too. */
#define KSA_LSEP_LEAD 0xe2
#define KSA_LSEP_MID 0x80
#define KSA_LSEP_LO 0xa8
#define KSA_LSEP_HI 0xa9

bool ksa_target_uid(long pid, uid_t *uid)
{
	char path[64], line[KSA_STATUS_LINE];
	unsigned real, eff;
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if ((f = fopen(path, "re")) == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = sscanf(line, "Uid: %u %u", &real, &eff) == 2;
	fclose(f);
	if (found)
		*uid = (uid_t)eff;
	return found;
}

bool ksa_peer_is(int fd, long pid, uid_t uid, char *why, size_t len)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
		snprintf(why, len, "the holder of the socket klock-lockstat.%ld cannot be "
			 "identified (%s)", pid, strerror(errno));
		return false;
	}
	if ((long)cr.pid != pid) {
		snprintf(why, len, "the socket klock-lockstat.%ld is held by pid %ld (uid %lu), "
			 "not by %ld", pid, (long)cr.pid, (unsigned long)cr.uid, pid);
		return false;
	}
	if (cr.uid != uid) {
		snprintf(why, len, "the socket klock-lockstat.%ld is held as uid %lu, but "
			 "process %ld runs as uid %lu", pid, (unsigned long)cr.uid, pid,
			 (unsigned long)uid);
		return false;
	}
	return true;
}

/* ---- JSON: a recognizer (RFC 8259 grammar, stricter whitespace), no tree -------------- */

struct ksa_json {
	const unsigned char *p, *end;
	unsigned depth;
};

static int json_peek(const struct ksa_json *j)
{
	return j->p < j->end ? *j->p : -1;
}

static void json_ws(struct ksa_json *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n'))
		j->p++;
}

static bool json_hex4(struct ksa_json *j)
{
	for (int i = 0; i < 4; i++, j->p++) {
		int c = json_peek(j);

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
			return false;
	}
	return true;
}

/* A string; j->p at its opening quote. */
static bool json_string(struct ksa_json *j)
{
	j->p++;
	for (;;) {
		int c = json_peek(j);

		if (c < 0x20)   /* the end (-1), or a raw control character */
			return false;
		j->p++;
		if (c == '"')
			return true;
		if (c != '\\')
			continue;
		c = json_peek(j);
		if (c < 0)
			return false;
		j->p++;
		if (c == 'u') {
			if (!json_hex4(j))
				return false;
		} else if (c == 0 || strchr("\"\\/bfnrt", c) == NULL) {
			return false;
		}
	}
}

static bool json_digits(struct ksa_json *j)
{
	const unsigned char *s = j->p;

	while (json_peek(j) >= '0' && json_peek(j) <= '9')
		j->p++;
	return j->p > s;
}

static bool json_number(struct ksa_json *j)
{
	if (json_peek(j) == '-')
		j->p++;
	if (json_peek(j) == '0')
		j->p++;
	else if (!json_digits(j))
		return false;
	if (json_peek(j) == '.') {
		j->p++;
		if (!json_digits(j))
			return false;
	}
	if (json_peek(j) == 'e' || json_peek(j) == 'E') {
		j->p++;
		if (json_peek(j) == '+' || json_peek(j) == '-')
			j->p++;
		if (!json_digits(j))
			return false;
	}
	return true;
}

static bool json_word(struct ksa_json *j, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
		return false;
	j->p += n;
	return true;
}

static bool json_value(struct ksa_json *j);

/* An array or object (@close: ']' or '}'); j->p at its opening bracket. */
static bool json_container(struct ksa_json *j, int close)
{
	if (++j->depth > KSA_JSON_DEPTH)
		return false;
	j->p++;
	json_ws(j);
	if (json_peek(j) == close) {
		j->p++;
		j->depth--;
		return true;
	}
	for (;;) {
		if (close == '}') {   /* a member: "name": value */
			if (json_peek(j) != '"' || !json_string(j))
				return false;
			json_ws(j);
			if (json_peek(j) != ':')
				return false;
			j->p++;
		}
		if (!json_value(j))
			return false;
		if (json_peek(j) != ',')
			break;
		j->p++;
		json_ws(j);
	}
	if (json_peek(j) != close)
		return false;
	j->p++;
	j->depth--;
	return true;
}

/* A value with the whitespace around it. */
static bool json_value(struct ksa_json *j)
{
	int c;
	bool ok;

	json_ws(j);
	c = json_peek(j);
	if (c == '{' || c == '[')
		ok = json_container(j, c == '{' ? '}' : ']');
	else if (c == '"')
		ok = json_string(j);
	else if (c == '-' || (c >= '0' && c <= '9'))
		ok = json_number(j);
	else
		ok = json_word(j, "true") || json_word(j, "false") || json_word(j, "null");
	json_ws(j);
	return ok;
}

bool ksa_json_valid(const char *buf, size_t len)
{
	struct ksa_json j = { (const unsigned char *)buf, (const unsigned char *)buf + len, 0 };

	json_ws(&j);
	return json_peek(&j) == '{' && json_value(&j) && j.p == j.end;
}

/* ---- what reaches the terminal ----------------------------------------------------- */

/* The length of the well-formed UTF-8 sequence at @p (@left bytes there) that encodes
 * no control (C1, or the line and paragraph separators); 0 if there is none. */
static size_t ksa_utf8_len(const unsigned char *p, size_t left)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (p[0] >= KSA_UTF8_LEAD2 && p[0] <= 0xdf) {
		n = 2;
		if (p[0] == KSA_UTF8_LEAD2)
			lo = KSA_C1_LAST + 1;   /* U+0080..U+009F are the C1 controls */
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
		lo = p[0] == 0xe0 ? 0xa0 : lo;   /* no overlong forms */
		hi = p[0] == 0xed ? 0x9f : hi;   /* no UTF-16 surrogates */
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		lo = p[0] == 0xf0 ? 0x90 : lo;   /* no overlong forms */
		hi = p[0] == 0xf4 ? 0x8f : hi;   /* nothing above U+10FFFF */
	} else {
		return 0;
	}
	if (left < n || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	if (p[0] == KSA_LSEP_LEAD && p[1] == KSA_LSEP_MID && p[2] >= KSA_LSEP_LO &&
	    p[2] <= KSA_LSEP_HI)
		return 0;
	return n;
}

void ksa_clean(char *buf, size_t len)
{
	unsigned char *p = (unsigned char *)buf;
	size_t i = 0, n;

	while (i < len) {
		if (p[i] >= 0x80 && (n = ksa_utf8_len(p + i, len - i)) > 0) {
			i += n;
			continue;
		}
		if ((p[i] < ' ' && p[i] != '\n' && p[i] != '\t') || p[i] >= KSA_DEL)
			p[i] = KSA_SUBST;
		i++;
	}
	buf[len] = '\0';
}

const char *ksa_check_report(char *buf, size_t len, bool json)
{
	if (len == 0)
		return "the answer is empty";
	if (len > KSA_ANSWER_MAX)
		return "the answer is larger than any report";
	if (json && !ksa_json_valid(buf, len))
		return "the answer is not a JSON report";
	ksa_clean(buf, len);
	return NULL;
}
