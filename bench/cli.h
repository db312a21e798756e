/* SPDX-License-Identifier: BSD-2-Clause */
/* bench/cli.h - the options every klbench command shares (parsed once, in main.c). */
#ifndef KB_CLI_H
#define KB_CLI_H

#include "klbench.h"

struct kb_cli {
	struct kb_sweep sweep;     /* the knobs (defaults, then what the user gave) */
	struct kb_output out;
	const char *outdir;        /* --out: where scenarios and the tour write */
	double budget;             /* --budget: seconds a sweep should take (0: unset) */
	bool set_locks, set_threads, set_write, set_cs, set_duration, set_repeats;
	bool set_place, set_think, set_stripes, set_warmup;
	int argc;                  /* what is left after the options */
	char **argv;
};

/* Parses argv[1..] (argv[0] is the command). Returns 0, or an exit status (2: usage). */
int kb_cli_parse(struct kb_cli *cli, int argc, char **argv, const char *cmd);
/* Shortens the sweep's duration so that it fits cli->budget (when set). */
void kb_cli_apply_budget(struct kb_cli *cli);
void kb_usage(FILE *f);

#endif /* KB_CLI_H */
