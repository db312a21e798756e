/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/scenarios/tour.c - `klbench` alone: the key scenarios (those with a tour budget
 * in catalogue.c: giant-duel, thread-sweep, crossover, rmlock-vs-rwlock, hashed-queue) in
 * about a minute, each shortened to its tour budget, everything written to
 * results/<timestamp>/ (or --out DIR). What it teaches is the sum of its parts: spin vs
 * sleep vs adaptive, oversubscription, where read bias stops paying, what a writer pays,
 * and what hashing a global lock buys. The exit status is the worst scenario's, except
 * that a scenario missing a lock it needs (4) does not fail the tour.
 */
#include <time.h>

#include "scenario.h"

int kb_tour_main(int argc, char **argv)
{
	struct kb_cli cli;
	char dir[256], stamp[32];
	time_t now = time(NULL);
	int rc = kb_cli_parse(&cli, argc, argv, ""), worst = 0;

	if (rc != 0)
		return rc;
	if (cli.outdir == NULL) {
		strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&now));
		snprintf(dir, sizeof(dir), "results/%s", stamp);
		cli.outdir = dir;
	}
	printf("klbench tour: the key scenarios in about a minute; tables below, CSV/JSON/"
	       "plots in %s/\n\n", cli.outdir);
	for (size_t i = 0; i < kb_nscenarios; i++) {
		const struct scenario *sc = &kb_scenarios[i];

		if (sc->tour_budget <= 0)
			continue;
		rc = scn_run(sc, &cli, true);
		if (rc == KB_EXIT_VERIFY || (rc != 0 && rc != KB_EXIT_UNAVAILABLE))
			worst = rc;
	}
	printf("results: %s/ (per scenario: .txt tables, .csv, .json, .svg plots, raw/ for "
	       "klbench compare)\n", cli.outdir);
	return worst;
}
