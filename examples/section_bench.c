/*
 * section_bench.c - a benchmark that measures only its benchmark: start-up
 * allocations happen outside the "bench" section.
 *
 *   cc -O2 -Iexamples examples/section_bench.c -o section_bench
 *   mt-trace --control /tmp/mt.ctl --start-disabled -- ./section_bench \
 *       | mt-encode > bench.msgpack
 *   mt-report --section bench bench.msgpack
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_section.h"

static void *volatile sink;

int main(void)
{
	/* set-up: not part of the benchmark */
	char *table = malloc(1 << 20);

	memset(table, 0, 1 << 20);
	sink = table;

	mt_enable();
	mt_marker("bench");
	for (int i = 0; i < 3; i++) {
		char *block = malloc(1 << 20); /* 3 MiB inside the section */

		memset(block, i, 1 << 20);
		sink = block;
	}
	mt_marker("bench-end");
	mt_disable();
	free(table);
	return 0;
}
