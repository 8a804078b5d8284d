/* SPDX-License-Identifier: MIT */
/*
 * The one version of mt, set in the Makefile (MT_VERSION) and stamped with
 * the git revision when built from a git checkout: every tool's --version.
 */
#ifndef MT_VERSION_H
#define MT_VERSION_H

#include <stdio.h>

/* "0.4.0" or "0.4.0 (git 916b5b7-dirty)" */
const char *mt_version(void);

/* prints "PROG (mt) VERSION" and a line on the formats it writes to f */
void mt_print_version(FILE *f, const char *prog);

#endif
