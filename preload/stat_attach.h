/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * preload/stat_attach.h - klock-stat --attach's trust checks (preload/stat_attach.c): who
 * holds the channel's name, and what of its answer reaches the terminal.
 */
#ifndef KLOCK_STAT_ATTACH_H
#define KLOCK_STAT_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Largest answer klock-stat accepts (a report of thousands of locks with stacks is a few
 * MiB): a longer one is refused, not buffered without bound. */
#define KSA_ANSWER_MAX ((size_t)32 << 20)
/* Deepest nesting of arrays and objects a JSON answer may have (lockstat's has 4). */
#define KSA_JSON_DEPTH 32

/* The effective user id of process @pid (/proc/PID/status); false if there is none. */
bool ksa_target_uid(long pid, uid_t *uid);

/* Whether the server end of the connected socket @fd is process @pid running as @uid
 * (SO_PEERCRED: the credentials of the process that called listen()). If not, a
 * sentence saying who holds it into @why. */
bool ksa_peer_is(int fd, long pid, uid_t uid, char *why, size_t len);

/* Whether @buf[0..@len) is one JSON object and nothing else (whitespace: space, tab and
 * newline; no raw control characters; at most KSA_JSON_DEPTH levels). */
bool ksa_json_valid(const char *buf, size_t len);

/* Replaces, in place, every byte a terminal could act on - C0 controls but tab and
 * newline, DEL, C1 controls, U+2028/U+2029, and bytes that are not well-formed UTF-8 -
 * by '?'. The length is unchanged; @buf[@len] must exist and becomes a NUL. */
void ksa_clean(char *buf, size_t len);

/* Checks and cleans the answer to "report" (@buf[0..@len), @buf[@len] writable): NULL
 * if it may be printed (a JSON object when @json, else text; control bytes replaced),
 * else why not. */
const char *ksa_check_report(char *buf, size_t len, bool json);

#endif /* KLOCK_STAT_ATTACH_H */
