// SPDX-License-Identifier: MIT
/*
 * mt's version string: MT_VERSION and MT_GIT_REVISION come from the
 * generated mt_version_gen.h (the Makefile rewrites it only when they
 * change, so a build does not relink everything for nothing).
 */
#include "mt_version.h"
#include "mt_version_gen.h"

const char *mt_version(void)
{
	if (MT_GIT_REVISION[0] == '\0')
		return MT_VERSION;
	return MT_VERSION " (git " MT_GIT_REVISION ")";
}

void mt_print_version(FILE *f, const char *prog)
{
	fprintf(f, "%s (mt) %s\n", prog, mt_version());
}
