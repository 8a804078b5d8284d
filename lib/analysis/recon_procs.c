// SPDX-License-Identifier: MIT
/*
 * recon_procs.c - processes and sections: the table of processes by pid
 * (a new process when a pid is reused after its exit), fork (the child
 * inherits its parent's blocks and mappings, counted in the parent), exec
 * and exit (the end of an address space: what is left is leaked), which
 * ended processes keep their series (the heaviest few), and the --section
 * markers that say which events count.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "recon_int.h"

static struct proc_sum *proc_new(struct mt_recon *r, uint32_t pid, uint64_t t)
{
	struct proc_sum *s = calloc(1, sizeof(*s));
	struct proc *p = calloc(1, sizeof(*p));

	if (!s || !p || leak_top_init(&p->leaks, r->opts.max_proc_leaks) < 0) {
		free(s);
		free(p);
		return NULL;
	}
	p->pid = pid;
	p->sum = s;
	s->pid = pid;
	s->start_t = t;
	s->live = p;
	*r->tail = s;
	r->tail = &s->next;
	r->nprocs++;
	return s;
}

struct pid_slot *pid_slot(struct mt_recon *r, uint32_t pid)
{
	if (!r->pids || (r->pid_used + 1) * 2 > r->pid_mask + 1) {
		size_t n = r->pids ? (r->pid_mask + 1) * 2 : 256;
		struct pid_slot *t = calloc(n, sizeof(*t));

		if (!t)
			return NULL;
		for (size_t i = 0; r->pids && i <= r->pid_mask; i++) {
			if (!r->pids[i].pid)
				continue;
			size_t j = (r->pids[i].pid * 2654435761u) & (n - 1);

			while (t[j].pid)
				j = (j + 1) & (n - 1);
			t[j] = r->pids[i];
		}
		free(r->pids);
		r->pids = t;
		r->pid_mask = n - 1;
	}
	size_t i = (pid * 2654435761u) & r->pid_mask;

	while (r->pids[i].pid && r->pids[i].pid != pid)
		i = (i + 1) & r->pid_mask;
	return &r->pids[i];
}

/*
 * An event of a pid whose process has ended, other than a Fork: a late
 * event of that process (mt-trace reads two rings, and an old trace may
 * hold a process's last Munmap after its Exit), not a new process.  A
 * reused pid starts with the Fork that made it; only when events were
 * lost, and the event comes after the exit, may that Fork be the one
 * missing.
 */
static bool late_event(const struct mt_recon *r, const struct proc_sum *ended,
		       uint64_t t)
{
	return t <= ended->end_t || !r->lost_events;
}

/* proc_get past the recent processes: the pid hash, or a new process
 * (forked: the event is the process's Fork); NULL for a late event of an
 * ended process, counted. */
struct proc *proc_lookup(struct mt_recon *r, uint32_t pid, uint64_t t,
			 bool forked)
{
	struct proc **recent = &r->recent[pid % RECENT];
	struct pid_slot *s = pid_slot(r, pid);

	if (!s)
		return NULL;
	if (s->pid && s->p->ended && !forked && late_event(r, s->p, t)) {
		r->late_events++;
		return NULL;
	}
	if (!s->pid || s->p->ended) {
		struct proc_sum *p = proc_new(r, pid, t);

		if (!p)
			return NULL;
		if (!s->pid)
			r->pid_used++;
		s->pid = pid;
		s->p = p;
	}
	*recent = s->p->live;
	return s->p->live;
}

/* exec or exit: what the process still held is leaked; what it inherited
 * is dropped silently (its parent accounts for it). */
void end_address_space(struct mt_recon *r, struct proc *p, uint64_t t,
		       const char *why)
{
	uint64_t before = p->maps.own_bytes;

	for (size_t i = 0; p->blocks.slot && i <= p->blocks.mask; i++) {
		const struct block *b = &p->blocks.slot[i];

		if (!b->addr || (b->size & NOT_OWN))
			continue;
		struct leak lk = {p->pid, b->addr, b->size, b->t, t, why};

		if (r->sites_on) {
			mt_sites_leak(r->sites, MT_SITES_HEAP, b->stack,
				      b->size);
			mt_sites_lifetime(r->sites, b->stack,
					  t > b->t ? t - b->t : 0);
		}
		leak_add(&p->leaks, &lk);
		leak_add(&r->leaks, &lk);
	}
	blocks_clear(&p->blocks);
	if (p->heap_own) {
		r->tree_heap -= p->heap_own;
		p->heap_own = 0;
		heap_changed(r, p, t);
	}
	p->inherited_bytes = 0;
	for (size_t i = 0; r->sites_on && i < p->maps.n; i++) {
		const struct range *x = &p->maps.v[i];

		if (!x->uncounted)
			mt_sites_leak(r->sites, MT_SITES_MAPPED, x->stack,
				      x->end - x->start);
	}
	ranges_clear(&p->maps);
	mapped_changed(r, p, before, t);
	p->sum->tracer_live = 0;
	memset(p->tracer_rss, 0, sizeof(p->tracer_rss));
	p->brk_cur = 0;
	gauges_reset(r, p, t);
}

/* The parent's live blocks, marked inherited, into the child's table.
 * A child with none of its own yet (the usual case: the fork event comes
 * first) takes a copy of the parent's table as it is, slots in place:
 * same size, same hash, so the same probe sequences hold. */
static void inherit_blocks(struct proc *child, const struct proc *parent)
{
	const struct blocks *pb = &parent->blocks;
	struct blocks *cb = &child->blocks;
	struct block *copy;

	if (!pb->used)
		return;
	if (!cb->used &&
	    (copy = malloc((pb->mask + 1) * sizeof(*copy))) != NULL) {
		memcpy(copy, pb->slot, (pb->mask + 1) * sizeof(*copy));
		free(cb->slot);
		*cb = *pb;
		cb->slot = copy;
		for (size_t i = 0; i <= cb->mask; i++) {
			if (!copy[i].addr)
				continue;
			child->inherited_bytes += copy[i].size & SIZE_MASK;
			copy[i].size |= INHERITED;
		}
		return;
	}
	for (size_t i = 0; i <= pb->mask; i++) {
		const struct block *b = &pb->slot[i];
		struct block *c;

		if (!b->addr || !(c = blocks_slot(cb, b->addr)))
			continue;
		if (c->addr) /* the child's own event came first: keep it */
			continue;
		*c = (struct block){b->addr, b->size | INHERITED, b->t,
				    b->stack};
		cb->used++;
		child->inherited_bytes += b->size & SIZE_MASK;
	}
}

/*
 * The program p runs: its last exec; else what it was forked running; else,
 * for the root process, the command.  NULL when unknown.
 */
const char *proc_program(const struct mt_recon *r, const struct proc_sum *p,
			 size_t *len)
{
	const char *cmd;

	if (p->nexecs) {
		*len = p->execs[p->nexecs - 1].len;
		return p->execs[p->nexecs - 1].path;
	}
	if (p->program) {
		*len = strlen(p->program);
		return p->program;
	}
	cmd = r->meta.root_pid && p->pid == r->meta.root_pid
		  ? json_string_value(json_array_get(
			json_object_get(r->header, "command"), 0))
		  : NULL;
	if (cmd)
		*len = strlen(cmd);
	return cmd;
}

/* The arguments of the program p runs, as proc_program finds it; NULL
 * when not known (a trace without them, or the root process without an
 * exec: its command is the header's). */
const struct cmdline *proc_cmdline(const struct proc_sum *p)
{
	const struct cmdline *c = p->nexecs    ? &p->execs[p->nexecs - 1].cmd
				  : p->program ? &p->program_cmd
					       : NULL;

	return c && c->args ? c : NULL;
}

static struct cmdline cmdline_copy(const struct cmdline *c)
{
	struct cmdline copy = {0};

	if (c && c->args && (copy.args = malloc(c->len))) {
		memcpy(copy.args, c->args, c->len);
		copy.len = c->len;
		copy.cut = c->cut;
	}
	return copy;
}

void on_process_fork(struct mt_recon *r, const struct mt_event *ev, uint64_t t)
{
	uint32_t ppid = (uint32_t)ev->old_addr;
	struct pid_slot *ps = ppid ? pid_slot(r, ppid) : NULL;
	struct proc *parent =
	    ps && ps->pid && !ps->p->ended ? ps->p->live : NULL;
	struct proc_sum *cs;
	struct proc *child;

	r->recent[ev->pid % RECENT] = NULL;
	child = proc_lookup(r, ev->pid, t, true);
	if (!child)
		return;
	cs = child->sum;
	cs->ppid = ppid;
	cs->has_ppid = true;
	if (!parent || parent == child)
		return;
	/* until it execs, it runs its parent's program */
	if (!cs->nexecs && !cs->program) {
		size_t len;
		const char *program = proc_program(r, parent->sum, &len);

		cs->program = program ? strndup(program, len) : NULL;
		cs->program_cmd = cmdline_copy(proc_cmdline(parent->sum));
	}
	/* the child's address space is a copy of the parent's */
	inherit_blocks(child, parent);
	for (size_t i = 0; i < parent->maps.n; i++) {
		const struct range *x = &parent->maps.v[i];
		size_t at = ranges_search(&child->maps, x->start);

		if (at < child->maps.n && child->maps.v[at].start < x->end)
			continue; /* overlaps something the child did */
		ranges_insert_at(
		    &child->maps, at,
		    (struct range){x->start, x->end, true, 0, x->tracer});
	}
	child->brk_cur = parent->brk_cur;
	/* the tracer's mappings too */
	cs->tracer_live = child->maps.tracer_bytes;
	if (cs->tracer_live > cs->tracer_mapped)
		cs->tracer_mapped = cs->tracer_live;
	/* the child's resident pages start as the parent's (shared until
	 * written); PSS is not seeded: it already splits shared pages */
	for (int g = G_RSS_FILE; g <= G_RSS_TOTAL; g++)
		if (parent->gauge[g] && !child->gauge[g])
			gauge_set(r, child, (enum gauge)g, parent->gauge[g], t);
	/* and the tracer's of them */
	if (!child->tracer_rss[G_RSS_ANON])
		memcpy(child->tracer_rss, parent->tracer_rss,
		       sizeof(child->tracer_rss));
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if none:
 * no overlong form, surrogate or code point past U+10FFFF (RFC 3629). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	size_t len = s[0] < 0x80   ? 1
		     : s[0] < 0xc2 ? 0
		     : s[0] < 0xe0 ? 2
		     : s[0] < 0xf0 ? 3
		     : s[0] < 0xf5 ? 4
				   : 0;
	unsigned char lo = 0x80, hi = 0xbf;

	if (!len || len > n)
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	for (size_t i = 1; i < len; i++, lo = 0x80, hi = 0xbf)
		if (s[i] < lo || s[i] > hi)
			return 0;
	return len;
}

/*
 * A path as JSON can hold it: a copy, with each byte that does not start
 * a valid UTF-8 sequence replaced by U+FFFD (a Linux path is any bytes;
 * dropping the exec would lose it).  NULL when out of memory.
 */
static char *exec_path(const char *s, size_t n, size_t *len)
{
	char *out = malloc(3 * n + 1), *o = out, *shrunk;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t k = utf8_seq((const unsigned char *)s + i, n - i);

		if (k) {
			memcpy(o, s + i, k);
			o += k;
			i += k;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	*o = 0;
	*len = o - out;
	/* kept as long as its process: no room for the worst case */
	shrunk = realloc(out, *len + 1);
	return shrunk ? shrunk : out;
}

/*
 * An exec's arguments (mt_exec_args: any bytes, the traced program's) as
 * the document can hold them: each made valid UTF-8 as a path is, and
 * ended by a NUL; none when the record has none or out of memory.
 */
static struct cmdline exec_cmdline(const struct mt_record *rec)
{
	const char *args = mt_exec_args(rec);
	size_t len = args ? rec->ev.size : 0, n = 0;
	struct cmdline c = {0};
	char *out;

	if (!args || !(out = malloc(3 * len + 2)))
		return c;
	for (size_t i = 0; i < len;) {
		size_t one = strnlen(args + i, len - i), k;
		char *fixed = exec_path(args + i, one, &k);

		if (!fixed) {
			free(out);
			return c;
		}
		memcpy(out + n, fixed, k + 1); /* and its NUL */
		n += k + 1;
		free(fixed);
		i += one + 1;
	}
	c.args = out;
	c.len = n;
	c.cut = rec->ev.flags & MT_EXEC_ARGS_CUT;
	return c;
}

void on_process_exec(struct mt_recon *r, struct proc *p,
		     const struct mt_record *rec, uint64_t t)
{
	struct proc_sum *s = p->sum;
	struct exec *v, x = {.t = t};

	end_address_space(r, p, t, "exec");
	x.path = exec_path(rec->str ? rec->str : "",
			   rec->str ? rec->str_len : 0, &x.len);
	v = realloc(s->execs, (s->nexecs + 1) * sizeof(*v));
	if (!x.path || !v) {
		free(x.path);
		return; /* out of memory: the exec goes unlisted */
	}
	x.cmd = exec_cmdline(rec);
	s->execs = v;
	v[s->nexecs++] = x;
	/* the program inherited at fork is never read once there is an
	 * exec (proc_program) */
	free(s->program);
	s->program = NULL;
	free(s->program_cmd.args);
	s->program_cmd = (struct cmdline){0};
}

/* Heavier first: by peak heap, then peak RSS, then peak mapped; a total
 * order, so "the N heaviest" is well defined. */
int proc_cmp(const struct proc_sum *x, const struct proc_sum *y)
{
	uint64_t a[] = {x->heap.peak, x->rss[G_RSS_TOTAL].peak, x->mapped.peak};
	uint64_t b[] = {y->heap.peak, y->rss[G_RSS_TOTAL].peak, y->mapped.peak};

	for (int i = 0; i < 3; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? 1 : -1;
	if (x->start_t != y->start_t)
		return x->start_t < y->start_t ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* The model of a process: its blocks, mappings and series. */
static void proc_live_free(struct proc *p)
{
	blocks_clear(&p->blocks);
	ranges_clear(&p->maps);
	free(p->heap.pts);
	free(p->mapped.pts);
	for (int g = 0; g < NGAUGES; g++)
		if (proc_gauge_s(p, g))
			free(proc_gauge_s(p, g)->pts);
	free(p->pss_s);
	free(p->leaks.v);
	free(p);
}

/* An ended process whose series will not be written: only its summary
 * stays. */
static void proc_drop_series(struct proc_sum *s)
{
	proc_live_free(s->live);
	s->live = NULL;
}

static void proc_keep_series(struct proc *p)
{
	series_shrink(&p->heap);
	series_shrink(&p->mapped);
	for (int g = 0; g < NGAUGES; g++)
		if (proc_gauge_s(p, g))
			series_shrink(proc_gauge_s(p, g));
}

static void kept_sift_down(struct mt_recon *r, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < r->nkept && proc_cmp(r->kept[l], r->kept[m]) > 0)
			m = l;
		if (l + 1 < r->nkept &&
		    proc_cmp(r->kept[l + 1], r->kept[m]) > 0)
			m = l + 1;
		if (m == i)
			return;
		struct proc_sum *tmp = r->kept[i];

		r->kept[i] = r->kept[m];
		r->kept[m] = tmp;
		i = m;
	}
}

/* An ended process keeps its series points only while it is among the
 * series_procs heaviest ended ones: one that drops out has that many
 * heavier processes and can never be written with its series.  So points
 * take memory for live processes and a bounded few, not for every process
 * a long build started. */
static void keep_if_heavy(struct mt_recon *r, struct proc_sum *p)
{
	size_t cap = r->opts.series_procs;

	if (cap == UINT_MAX) {
		proc_keep_series(p->live);
		return;
	}
	if (!r->kept && cap && !(r->kept = calloc(cap, sizeof(*r->kept))))
		cap = 0;
	if (r->nkept < cap) {
		size_t i = r->nkept++;

		r->kept[i] = p;
		while (i > 0 &&
		       proc_cmp(r->kept[(i - 1) / 2], r->kept[i]) < 0) {
			struct proc_sum *tmp = r->kept[i];

			r->kept[i] = r->kept[(i - 1) / 2];
			r->kept[(i - 1) / 2] = tmp;
			i = (i - 1) / 2;
		}
		proc_keep_series(p->live);
	} else if (cap && proc_cmp(p, r->kept[0]) < 0) {
		proc_drop_series(r->kept[0]);
		r->kept[0] = p;
		kept_sift_down(r, 0);
		proc_keep_series(p->live);
	} else {
		proc_drop_series(p);
	}
}

/* A leak top moves to the summary as it is (its array cut to the leaks
 * it holds: no leak_add after). */
static void leaks_move(struct leak_top *to, struct leak_top *from)
{
	leak_top_shrink(from);
	*to = *from;
	from->v = NULL;
	from->n = 0;
}

void proc_summarize(struct proc *p)
{
	struct proc_sum *s = p->sum;

	s->events = p->events;
	s->tot = p->tot;
	s->heap = level_of(&p->heap);
	s->mapped = level_of(&p->mapped);
	for (int g = 0; g < RSS_GAUGES; g++)
		s->rss[g] = level_of(&p->gauge_s[g]);
	if (p->pss_s && !s->pss)
		s->pss = calloc(PSS_GAUGES, sizeof(*s->pss));
	for (int g = 0; s->pss && g < PSS_GAUGES; g++)
		s->pss[g] = level_of(&p->pss_s[g]);
	leaks_move(&s->leaks, &p->leaks);
}

void on_process_exit(struct mt_recon *r, struct proc *p, uint32_t status,
		     uint64_t t)
{
	struct proc_sum *s = p->sum;

	end_address_space(r, p, t, "exit");
	if (r->recent[p->pid % RECENT] == p)
		r->recent[p->pid % RECENT] = NULL;
	p->ended = true;
	s->ended = true;
	s->end_t = t;
	if (WIFEXITED(status)) {
		s->exit_kind = MT_EXIT_CODE;
		s->exit_value = WEXITSTATUS(status);
	} else if (WIFSIGNALED(status)) {
		s->exit_kind = MT_EXIT_SIGNAL;
		s->exit_value = WTERMSIG(status);
	}
	proc_summarize(p);
	keep_if_heavy(r, s); /* may free p */
}

static bool name_is(const char *s, size_t len, const char *name,
		    const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);

	return len == n + k && !memcmp(s, name, n) && !memcmp(s + n, suffix, k);
}

/* The tree's series get a point where the section starts or ends, so the
 * plot shows the level the section started from. */
static void section_edge(struct mt_recon *r, uint64_t t)
{
	series_set(&r->heap, &r->cfg, t, r->tree_heap);
	series_set(&r->mapped, &r->cfg, t, r->tree_mapped);
	for (int g = 0; g < NGAUGES; g++)
		if (r->gauge_s[g].n || r->gauge[g])
			series_set(&r->gauge_s[g], &r->cfg, t, r->gauge[g]);
}

void section_end(struct mt_recon *r, uint64_t t)
{
	if (!r->in_section)
		return;
	section_edge(r, t);
	r->in_section = false;
	r->section_ns += t - r->section_start;
	json_array_append_new(
	    r->sections,
	    json_pack("[I, I]", (json_int_t)r->section_start, (json_int_t)t));
}

/* Markers NAME or NAME-start open the section, NAME-end closes it; it may
 * open and close many times (each iteration of a benchmark). */
static void section_marker(struct mt_recon *r, const char *s, size_t len,
			   uint64_t t)
{
	const char *name = r->opts.section;

	if (name_is(s, len, name, "") || name_is(s, len, name, "-start")) {
		if (r->in_section)
			return;
		r->in_section = true;
		r->section_start = t;
		section_edge(r, t);
	} else if (name_is(s, len, name, "-end")) {
		section_end(r, t);
	}
}

void on_marker(struct mt_recon *r, const struct mt_record *rec, uint64_t t)
{
	const char *kind = rec->ev.kind == MT_EV_MARKER	  ? "marker"
			   : rec->ev.kind == MT_EV_ENABLE ? "enable"
							  : "disable";
	json_t *m = json_pack("{s:s, s:I, s:I}", "kind", kind, "t_ns",
			      (json_int_t)t, "pid", (json_int_t)rec->ev.pid);

	if (m && rec->str)
		json_object_set_new(m, "name",
				    json_stringn(rec->str, rec->str_len));
	if (m)
		json_array_append_new(r->markers, m);
	if (rec->ev.kind == MT_EV_MARKER && r->opts.section && rec->str)
		section_marker(r, rec->str, rec->str_len, t);
}

void proc_free(struct proc_sum *s)
{
	if (s->live)
		proc_live_free(s->live);
	free(s->pss);
	free(s->leaks.v);
	for (size_t i = 0; i < s->nexecs; i++) {
		free(s->execs[i].path);
		free(s->execs[i].cmd.args);
	}
	free(s->execs);
	free(s->program);
	free(s->program_cmd.args);
	free(s);
}
