// SPDX-License-Identifier: MIT
/*
 * child_env.c - the traced command's environment, made before the fork
 * (mt_child_env.h says why).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt_child_env.h"
#include "mt_xalloc.h"

void mt_child_env_init(struct mt_child_env *e)
{
	size_t n = 0;

	memset(e, 0, sizeof(*e));
	while (environ && environ[n])
		n++;
	e->cap = n + 8;
	e->vars = mt_xcalloc(e->cap, sizeof(*e->vars));
	memcpy(e->vars, environ ? environ : e->vars, n * sizeof(*e->vars));
	e->n = n;
}

/* NAME's index in e->vars, or e->n */
static size_t find(const struct mt_child_env *e, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < e->n; i++)
		if (!strncmp(e->vars[i], name, len) && e->vars[i][len] == '=')
			return i;
	return e->n;
}

const char *mt_child_env_get(const struct mt_child_env *e, const char *name)
{
	size_t i = find(e, name);

	return i < e->n ? e->vars[i] + strlen(name) + 1 : NULL;
}

/* room for one more variable and its terminating NULL, and one more
 * owned string */
static void grow(struct mt_child_env *e)
{
	if (e->n + 2 > e->cap) {
		e->cap *= 2;
		e->vars = mt_xreallocarray(e->vars, e->cap, sizeof(*e->vars));
	}
	e->owned = mt_xreallocarray(e->owned, e->nowned + 1, sizeof(*e->owned));
}

void mt_child_env_set(struct mt_child_env *e, const char *name,
		      const char *value)
{
	size_t i = find(e, name), len = strlen(name) + 1 + strlen(value) + 1;
	char *var;

	grow(e);
	var = mt_xmalloc(len);
	strcpy(var, name);
	strcat(var, "=");
	strcat(var, value);
	e->owned[e->nowned++] = var;
	e->vars[i] = var;
	if (i == e->n)
		e->n++;
	e->vars[e->n] = NULL;
}

void mt_child_env_free(struct mt_child_env *e)
{
	for (size_t i = 0; i < e->nowned; i++)
		free(e->owned[i]);
	free(e->owned);
	free(e->vars);
	memset(e, 0, sizeof(*e));
}
