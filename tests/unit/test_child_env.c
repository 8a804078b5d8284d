// SPDX-License-Identifier: MIT
/*
 * test_child_env.c - the traced command's environment, made before the
 * fork (lib/capture/session/mt_child_env.h): mt-trace's own variables kept in
 * order, a set variable replaced in place (one NAME= only: a second one
 * would leave which one the program reads to its libc), new ones added,
 * NULL-terminated after every change, and mt-trace's own environment
 * untouched.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats_test.h"
#include "mt_child_env.h"

static size_t count(char **vars, const char *name)
{
	size_t n = 0, len = strlen(name);

	for (; *vars; vars++)
		n += !strncmp(*vars, name, len) && (*vars)[len] == '=';
	return n;
}

static void builds(void)
{
	struct mt_child_env e;
	size_t before;

	setenv("MT_TEST_KEEP", "kept", 1);
	setenv("LD_PRELOAD", "/usr/lib/their.so", 1);
	mt_child_env_init(&e);
	before = e.n;
	CHECK_STR(mt_child_env_get(&e, "MT_TEST_KEEP"), "kept");
	CHECK(mt_child_env_get(&e, "MT_TEST_KEE") == NULL);
	mt_child_env_set(&e, "LD_PRELOAD", "/mt.so:/usr/lib/their.so");
	CHECK_INT(e.n, before); /* replaced, not added */
	CHECK_INT(count(e.vars, "LD_PRELOAD"), 1);
	CHECK_STR(mt_child_env_get(&e, "LD_PRELOAD"),
		  "/mt.so:/usr/lib/their.so");
	/* many new ones: the array grows, still NULL-terminated */
	for (int i = 0; i < 100; i++) {
		char name[32];

		snprintf(name, sizeof(name), "MT_TEST_%d", i);
		mt_child_env_set(&e, name, "v");
	}
	CHECK_INT(e.n, before + 100);
	CHECK(e.vars[e.n] == NULL);
	CHECK_STR(mt_child_env_get(&e, "MT_TEST_99"), "v");
	CHECK_STR(mt_child_env_get(&e, "MT_TEST_KEEP"), "kept");
	/* mt-trace's own environment is not the command's */
	CHECK_STR(getenv("LD_PRELOAD"), "/usr/lib/their.so");
	CHECK(getenv("MT_TEST_99") == NULL);
	mt_child_env_free(&e);
}

int main(void)
{
	builds();
	return test_summary("test_child_env");
}
