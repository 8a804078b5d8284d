/* SPDX-License-Identifier: MIT */
/*
 * report_int.h - what report.c shares with compare.c (the gates and the
 * comparison of two runs): a timelines document's keys and its checks.
 */
#ifndef MT_REPORT_INT_H
#define MT_REPORT_INT_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#define NOT_FREED_BYTES	 "not_freed.bytes"
#define NOT_FREED_BLOCKS "not_freed.count"
#define NOT_FREED_LIST	 "tree.not_freed.blocks"

/* false only when the document says allocators were not traced */
bool mt_report_allocators_tracked(json_t *doc);
/* the input ended with its trailer (nothing cut short) */
bool mt_report_is_complete(json_t *doc);
/* lost events and an incomplete input, first, before any figure; run
 * names the document in a comparison ("base", "head"), NULL otherwise */
void mt_report_print_warnings(FILE *out, json_t *doc, const char *run);

#endif
