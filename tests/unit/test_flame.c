// SPDX-License-Identifier: MIT
/*
 * test_flame.c - folded stacks and the flame graph SVG from a "sites"
 * section written by hand: the folded lines exactly (root first, values
 * per metric, sites without a value left out), and the SVG's frames with
 * their widths and hover titles (tests/sites.bats parses a real one with
 * python3's xml.etree and renders it with Chromium).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt_flame.h"
#include "formats_test.h"

static const char *doc_text =
    "{\"sites\": {\"count\": 3, \"sites\": ["
    " {\"stack\": 1, \"peak_bytes\": 300, \"allocated_bytes\": 1000,"
    "  \"allocations\": 10, \"not_freed_bytes\": 0, \"truncated\": false,"
    "  \"frames\": [{\"function\": \"new_cell\"}, {\"function\": "
    "\"fill_row\"},"
    "   {\"function\": \"main\"}]},"
    " {\"stack\": 2, \"peak_bytes\": 100, \"allocated_bytes\": 100,"
    "  \"allocations\": 1, \"not_freed_bytes\": 100, \"truncated\": true,"
    "  \"frames\": [{\"function\": \"a;b<c>\"}, {\"function\": \"main\","
    "   \"object\": \"/usr/lib/libx.so.1\"}]},"
    " {\"stack\": 0, \"peak_bytes\": 0, \"allocated_bytes\": 5,"
    "  \"allocations\": 1, \"not_freed_bytes\": 0, \"frames\": []}"
    "]}}";

static char *capture(json_t *doc, enum mt_site_metric m, bool svg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK_INT(svg ? mt_flame_svg(f, doc, MT_SITES_HEAP, m)
		      : mt_flame_folded(f, doc, MT_SITES_HEAP, m),
		  0);
	fclose(f);
	return buf;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *at = hay; (at = strstr(at, needle)); at++)
		n++;
	return n;
}

/* Long C++ names as the flame graph shows them; operators kept. */
static void short_names(void)
{
	static const char *const cases[][2] = {
	    {"main", "main"},
	    {"f()", "f()"},
	    {"std::vector<int, std::allocator<int> >::_M_realloc_insert<int "
	     "const&>(__gnu_cxx::__normal_iterator<int*, std::vector<int, "
	     "std::allocator<int> > >, int const&)",
	     "std::vector<...>::_M_realloc_insert<...>(...)"},
	    {"operator new(unsigned long)", "operator new(...)"},
	    {"bool std::operator< <char>(std::string const&, char const*)",
	     "bool std::operator< <...>(...)"},
	    {"foo::operator()(int) const", "foo::operator()(...) const"},
	    {"std::ostream::operator<<(int)", "std::ostream::operator<<(...)"},
	    {"(anonymous namespace)::helper(int)",
	     "(anonymous namespace)::helper(...)"},
	    {"unclosed<int", "unclosed<...>"},
	};
	char buf[128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_STR(mt_flame_short_name(cases[i][0], buf, sizeof(buf)),
			  cases[i][1]);
	/* cut to the buffer, never past it */
	CHECK_STR(mt_flame_short_name("abcdefgh", buf, 4), "abc");
}

int main(void)
{
	json_t *doc = json_loads(doc_text, 0, NULL);
	char *text;

	CHECK(doc != NULL);
	text = capture(doc, MT_SITE_PEAK, false);
	/* a truncated stack: in the file of its outermost frame */
	CHECK_STR(text, "main;fill_row;new_cell 300\n"
			"[truncated in libx.so.1];main;a:b<c> 100\n");
	free(text);
	text = capture(doc, MT_SITE_ALLOCATED, false);
	CHECK_STR(text, "main;fill_row;new_cell 1000\n"
			"[truncated in libx.so.1];main;a:b<c> 100\n"
			"[no stack] 5\n");
	free(text);
	text = capture(doc, MT_SITE_LEAKED, false);
	CHECK_STR(text, "[truncated in libx.so.1];main;a:b<c> 100\n");
	/* the name is the report's: the document's sites as they were */
	CHECK(
	    json_object_get(
		json_array_get(
		    json_object_get(json_object_get(doc, "sites"), "sites"), 1),
		"_trunc") == NULL);
	free(text);

	text = capture(doc, MT_SITE_PEAK, true);
	/* all, main, fill_row, new_cell, [truncated], main, a;b<c> */
	CHECK_INT(count(text, "<rect x="), 7);
	CHECK(strstr(text, "<title>all (400 B, 100.00%)</title>") != NULL);
	CHECK(strstr(text, "<title>new_cell (300 B, 75.00%)</title>") != NULL);
	CHECK(strstr(text, "<title>a;b&lt;c&gt; (100 B, 25.00%)</title>") !=
	      NULL);
	CHECK(strstr(text, "<script") == NULL);
	free(text);
	text = capture(doc, MT_SITE_COUNT, true);
	CHECK(strstr(text, "<title>all (12 calls, 100.00%)</title>") != NULL);
	free(text);

	json_decref(doc);
	short_names();
	return test_summary("test_flame");
}
