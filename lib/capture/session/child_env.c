// SPDX-License-Identifier: MIT
/*
 * child_env.c - the traced command's environment, made before the fork
 * (mt_child_env.h says why).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt_child_env.h"

int mt_child_env_init(struct mt_child_env *e)
{
	size_t n = 0;

	memset(e, 0, sizeof(*e));
	while (environ && environ[n])
		n++;
	e->cap = n + 8;
	e->vars = calloc(e->cap, sizeof(*e->vars));
	if (!e->vars)
		return -1;
	memcpy(e->vars, environ ? environ : e->vars, n * sizeof(*e->vars));
	e->n = n;
	return 0;
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
static int grow(struct mt_child_env *e)
{
	if (e->n + 2 > e->cap) {
		size_t cap = e->cap * 2;
		char **vars = realloc(e->vars, cap * sizeof(*vars));

		if (!vars)
			return -1;
		e->vars = vars;
		e->cap = cap;
	}
	char **owned = realloc(e->owned, (e->nowned + 1) * sizeof(*owned));

	if (!owned)
		return -1;
	e->owned = owned;
	return 0;
}

int mt_child_env_set(struct mt_child_env *e, const char *name,
		     const char *value)
{
	size_t i = find(e, name), len = strlen(name) + 1 + strlen(value) + 1;
	char *var;

	if (grow(e) || !(var = malloc(len)))
		return -1;
	strcpy(var, name);
	strcat(var, "=");
	strcat(var, value);
	e->owned[e->nowned++] = var;
	e->vars[i] = var;
	if (i == e->n)
		e->n++;
	e->vars[e->n] = NULL;
	return 0;
}

void mt_child_env_free(struct mt_child_env *e)
{
	for (size_t i = 0; i < e->nowned; i++)
		free(e->owned[i]);
	free(e->owned);
	free(e->vars);
	memset(e, 0, sizeof(*e));
}
