// SPDX-License-Identifier: MIT
/*
 * parallel_maps.c - the BPF side's largest maps, made by a thread while
 * mt-trace forks the command and opens the BPF object, for the load to use
 * (bpf_map__reuse_fd) instead of making them itself, one after the other,
 * on the start-up's critical path.
 *
 * The kernel allocates and initialises a hash table's buckets when it is
 * made, 16 bytes a slot, and a ring's pages: the three process tables
 * (then pid_max slots, 32,768 here), code_files (16,384) and the two rings
 * (1 MiB each) took 0.26-0.5 ms each, 2.1 of the load's 3.0 ms of
 * BPF_MAP_CREATE (strace -T, medians of six `mt-trace -- true`).  (The
 * tables are smaller since: mt_probe.h, MT_PROCESS_SLOTS.)  A map
 * made here is used only when it is exactly the one the object asks for
 * (type, key and value sizes, slots, flags); otherwise libbpf makes its
 * own, as it always did.  They carry no BTF: none holds a field the
 * kernel would need it for (locks, timers, kernel pointers).
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt_log.h"
#include "mt_xalloc.h"
#include "mt_trace.skel.h"
#include "tracer_int.h"

/* The sizes mt_trace.bpf.c gives (a difference costs only the head
 * start: see maps_match()): the process tables before pid_max bounds
 * them, code_files (mt_probe.h), the lifecycle ring. */
#define LIFECYCLE_BYTES (1u << 20)

struct parallel_map {
	const char *name;
	enum bpf_map_type type;
	__u32 key_size, value_size, max_entries, flags;
	int fd; /* -1: not made */
};

enum { PARALLEL_MAPS_MAX = 6 };

struct mt_parallel_maps {
	struct parallel_map maps[PARALLEL_MAPS_MAX];
	size_t n;
	pthread_t thread;
	bool threaded;
};

static void parallel_map_add(struct mt_parallel_maps *p, const char *name,
			     enum bpf_map_type type, __u32 key_size,
			     __u32 value_size, __u32 max_entries, __u32 flags)
{
	p->maps[p->n++] = (struct parallel_map){
	    .name = name,
	    .type = type,
	    .key_size = key_size,
	    .value_size = value_size,
	    .max_entries = max_entries,
	    .flags = flags,
	    .fd = -1,
	};
}

/* /proc/sys/kernel/pid_max, or 0 */
static unsigned long read_pid_max(void)
{
	FILE *f = fopen("/proc/sys/kernel/pid_max", "re");
	unsigned long n = 0;

	if (f) {
		if (fscanf(f, "%lu", &n) != 1)
			n = 0;
		fclose(f);
	}
	return n;
}

__u32 mt_tracer_process_slots(__u32 max)
{
	unsigned long pid_max = read_pid_max();

	return pid_max >= 1024 && pid_max < max ? (__u32)pid_max : max;
}

static void *make_maps(void *arg)
{
	struct mt_parallel_maps *p = arg;

	for (size_t i = 0; i < p->n; i++) {
		struct parallel_map *m = &p->maps[i];
		LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = m->flags);

		m->fd = bpf_map_create(m->type, m->name, m->key_size,
				       m->value_size, m->max_entries, &opts);
		if (m->fd < 0)
			m->fd = -1; /* libbpf makes it, and says what failed */
	}
	return NULL;
}

void mt_tracer_parallel_maps_begin(struct tracer *t)
{
	struct mt_parallel_maps *p = mt_xcalloc(1, sizeof(*p));
	__u32 slots;

	slots = mt_tracer_process_slots(MT_PROCESS_SLOTS);
	parallel_map_add(p, "traced", BPF_MAP_TYPE_HASH, sizeof(__u32),
			 sizeof(struct mt_traced), slots, BPF_F_NO_PREALLOC);
	parallel_map_add(p, "resumed", BPF_MAP_TYPE_HASH, sizeof(__u32),
			 sizeof(__u64), slots, BPF_F_NO_PREALLOC);
	parallel_map_add(p, "unthrottled", BPF_MAP_TYPE_HASH, sizeof(__u32),
			 sizeof(__u64), slots, BPF_F_NO_PREALLOC);
	parallel_map_add(
	    p, "code_files", BPF_MAP_TYPE_HASH, sizeof(struct mt_code_key),
	    sizeof(struct mt_code_seen), MT_CODE_FILE_SLOTS, BPF_F_NO_PREALLOC);
	parallel_map_add(p, "events", BPF_MAP_TYPE_RINGBUF, 0, 0,
			 t->opts->ring_bytes, 0);
	parallel_map_add(p, "lifecycle", BPF_MAP_TYPE_RINGBUF, 0, 0,
			 LIFECYCLE_BYTES, 0);
	p->threaded = pthread_create(&p->thread, NULL, make_maps, p) == 0;
	if (!p->threaded) { /* the load makes them */
		free(p);
		return;
	}
	t->parallel.maps = p;
}

/* Is map exactly what m is? */
static bool maps_match(const struct bpf_map *map, const struct parallel_map *m)
{
	return bpf_map__type(map) == m->type &&
	       bpf_map__key_size(map) == m->key_size &&
	       bpf_map__value_size(map) == m->value_size &&
	       bpf_map__max_entries(map) == m->max_entries &&
	       bpf_map__map_flags(map) == m->flags;
}

static struct mt_parallel_maps *parallel_maps_done(struct tracer *t)
{
	struct mt_parallel_maps *p = t->parallel.maps;

	if (p && p->threaded) {
		pthread_join(p->thread, NULL);
		p->threaded = false;
	}
	return p;
}

int mt_tracer_parallel_maps_await(struct tracer *t)
{
	parallel_maps_done(t);
	return 0;
}

void mt_tracer_parallel_maps_use(struct tracer *t, struct mt_trace *skel)
{
	struct mt_parallel_maps *p = parallel_maps_done(t);

	for (size_t i = 0; p && i < p->n; i++) {
		struct parallel_map *m = &p->maps[i];
		struct bpf_map *map =
		    bpf_object__find_map_by_name(skel->obj, m->name);

		if (m->fd < 0 || !map || !maps_match(map, m))
			continue;
		if (bpf_map__reuse_fd(map, m->fd) && t->opts->verbose)
			mt_verbose("map %s made again", m->name);
	}
}

void mt_tracer_parallel_maps_end(struct tracer *t)
{
	struct mt_parallel_maps *p = parallel_maps_done(t);

	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		if (p->maps[i].fd >= 0)
			close(p->maps[i].fd);
	free(p);
	t->parallel.maps = NULL;
}
