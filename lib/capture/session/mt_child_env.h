/* SPDX-License-Identifier: MIT */
/*
 * mt_child_env.h - the traced command's environment, made whole in
 * mt-trace before it forks the command.  mt-trace has threads when it
 * forks, and a lock one of them held at the fork stays held in the child
 * for good: the child must not allocate between fork and exec (setenv
 * there hung mt-trace --fast built with AddressSanitizer, whose allocator
 * does not reset its locks at fork as glibc's does).  The child only
 * points environ at this and execs.
 */
#ifndef MT_CHILD_ENV_H
#define MT_CHILD_ENV_H

#include <stddef.h>

struct mt_child_env {
	char **vars;  /* NULL-terminated "NAME=value", as environ */
	char **owned; /* the strings made here, to free */
	size_t n, cap, nowned;
};

/* A copy of the current environment (the strings shared, not copied). */
void mt_child_env_init(struct mt_child_env *e);

/* NAME's value in e, or NULL. */
const char *mt_child_env_get(const struct mt_child_env *e, const char *name);

/* NAME=value in e, replacing NAME's earlier value. */
void mt_child_env_set(struct mt_child_env *e, const char *name,
		      const char *value);

void mt_child_env_free(struct mt_child_env *e);

#endif /* MT_CHILD_ENV_H */
