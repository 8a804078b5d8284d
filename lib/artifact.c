/* SPDX-License-Identifier: MIT */
/*
 * artifact.c - the artifact writer (mt_artifact.h).  Each map is first
 * described as a short list of key/value pairs; the same list is then
 * packed as MessagePack (msgpack-c) or printed as one JSON line, so the two
 * styles cannot disagree on keys.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <msgpack.h>

#include "mt_allocators.h"
#include "mt_artifact.h"

#define OUT_BUF (256u * 1024)
#define MAX_KV	20

enum kv_type { KV_U64, KV_BOOL, KV_STR, KV_ARGV };

struct kv {
	const char *key;
	size_t klen;
	enum kv_type type;
	uint64_t u;
	const char *s;
	size_t len;
	char *const *argv;
};

struct map {
	struct kv kv[MAX_KV];
	int n;
};

struct mt_artifact {
	int fd;
	enum mt_artifact_style style;
	char *buf;
	size_t len;
	int error;
	uint64_t events;
	uint64_t lost;
	msgpack_packer pk;
};

/* ---- output buffer --------------------------------------------------- */

static int write_out(struct mt_artifact *a, const char *p, size_t n)
{
	while (n > 0 && !a->error) {
		ssize_t w = write(a->fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			a->error = w < 0 ? -errno : -EIO;
		else {
			p += w;
			n -= w;
		}
	}
	return a->error;
}

int mt_artifact_flush(struct mt_artifact *a)
{
	if (a->len && !a->error)
		write_out(a, a->buf, a->len);
	a->len = 0;
	return a->error;
}

static void out(struct mt_artifact *a, const void *p, size_t n)
{
	if (a->len + n > OUT_BUF) {
		mt_artifact_flush(a);
		if (n > OUT_BUF) {
			write_out(a, p, n);
			return;
		}
	}
	if (a->error)
		return;
	memcpy(a->buf + a->len, p, n);
	a->len += n;
}

static int pk_write(void *data, const char *p, size_t n)
{
	struct mt_artifact *a = data;

	/* msgpack-c hands over a few bytes at a time: copy them inline */
	if (n <= 16 && a->len + n <= OUT_BUF) {
		char *to = a->buf + a->len;

		for (size_t i = 0; i < n; i++)
			to[i] = p[i];
		a->len += n;
		return a->error ? -1 : 0;
	}
	out(a, p, n);
	return a->error ? -1 : 0;
}

/* ---- the maps -------------------------------------------------------- */

/* Keys are literals: their lengths are known at compile time, and each
 * put_X(m, "key", ...) below is put_X_k(m, "key", length, ...). */
#define KEY(k) k, sizeof(k "") - 1

static void put_u64_k(struct map *m, const char *key, size_t klen, uint64_t u)
{
	m->kv[m->n++] =
	    (struct kv){.key = key, .klen = klen, .type = KV_U64, .u = u};
}

static void put_bool_k(struct map *m, const char *key, size_t klen, bool b)
{
	m->kv[m->n++] =
	    (struct kv){.key = key, .klen = klen, .type = KV_BOOL, .u = b};
}

static void put_str_k(struct map *m, const char *key, size_t klen,
		      const char *s, size_t len)
{
	m->kv[m->n++] = (struct kv){
	    .key = key, .klen = klen, .type = KV_STR, .s = s, .len = len};
}

static void put_cstr_k(struct map *m, const char *key, size_t klen,
		       const char *s)
{
	put_str_k(m, key, klen, s ? s : "", s ? strlen(s) : 0);
}

#define put_u64(m, k, u)      put_u64_k(m, KEY(k), u)
#define put_bool(m, k, b)     put_bool_k(m, KEY(k), b)
#define put_str(m, k, s, len) put_str_k(m, KEY(k), s, len)
#define put_cstr(m, k, s)     put_cstr_k(m, KEY(k), s)

static const char *const rss_members[] = {"file", "anon", "swap", "shmem"};

static void put_exit_status(struct map *m, uint32_t status)
{
	if (WIFEXITED(status))
		put_u64(m, "exit_code", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		put_u64(m, "signal", WTERMSIG(status));
	else
		put_u64(m, "status", status);
}

/* The kind-specific keys; memtrack's kinds use memtrack's keys. */
static void event_kind_keys(struct map *m, const struct mt_record *rec)
{
	const struct mt_event *ev = &rec->ev;

	switch (ev->kind) {
	case MT_EV_MALLOC:
	case MT_EV_CALLOC:
	case MT_EV_MUNMAP:
		put_u64(m, "addr", ev->addr);
		put_u64(m, "size", ev->size);
		break;
	case MT_EV_FREE:
		put_u64(m, "addr", ev->addr);
		break;
	case MT_EV_REALLOC:
		put_u64(m, "addr", ev->addr);
		put_u64(m, "size", ev->size);
		put_u64(m, "old_addr", ev->old_addr);
		break;
	case MT_EV_ALIGNED_ALLOC:
		put_u64(m, "addr", ev->addr);
		put_u64(m, "size", ev->size);
		put_u64(m, "alignment", ev->old_size);
		break;
	case MT_EV_MMAP:
		put_u64(m, "addr", ev->addr);
		put_u64(m, "size", ev->size);
		put_u64(m, "prot", ev->flags);
		put_u64(m, "flags", ev->aux);
		break;
	case MT_EV_MREMAP:
		put_u64(m, "addr", ev->addr);
		put_u64(m, "size", ev->size);
		put_u64(m, "old_addr", ev->old_addr);
		put_u64(m, "old_size", ev->old_size);
		break;
	case MT_EV_BRK:
		put_u64(m, "addr", ev->addr);
		put_u64(m, "old_addr", ev->old_addr);
		put_u64(m, "size",
			ev->addr > ev->old_addr ? ev->addr - ev->old_addr
						: ev->old_addr - ev->addr);
		break;
	case MT_EV_FORK:
		put_u64(m, "ppid", ev->old_addr);
		break;
	case MT_EV_EXEC:
		put_str(m, "path", rec->str ? rec->str : "", rec->str_len);
		break;
	case MT_EV_MARKER:
		put_str(m, "name", rec->str ? rec->str : "", rec->str_len);
		break;
	case MT_EV_ALLOCATOR:
		put_cstr(m, "kind", mt_alloc_family_name(ev->flags));
		put_str(m, "path", rec->str ? rec->str : "", rec->str_len);
		break;
	case MT_EV_EXIT:
		put_exit_status(m, ev->aux);
		break;
	case MT_EV_RSS:
		if (ev->aux < 4)
			put_cstr(m, "member", rss_members[ev->aux]);
		else
			put_u64(m, "member", ev->aux);
		put_u64(m, "size", ev->size);
		break;
	case MT_EV_PSS:
		put_u64(m, "pss", ev->size);
		put_u64(m, "pss_anon", ev->addr);
		put_u64(m, "pss_file", ev->old_addr);
		put_u64(m, "pss_shmem", ev->old_size);
		break;
	case MT_EV_LOST:
		put_u64(m, "count", ev->size);
		break;
	default:
		break;
	}
}

/* ---- MessagePack ----------------------------------------------------- */

static void mp_str(msgpack_packer *pk, const char *s, size_t len)
{
	/* a path is bytes: one that is not UTF-8 goes out as bin, so that
	 * decoders which check str types still read the stream */
	if (mt_utf8_valid(s, len)) {
		msgpack_pack_str(pk, len);
		msgpack_pack_str_body(pk, s, len);
	} else {
		msgpack_pack_bin(pk, len);
		msgpack_pack_bin_body(pk, s, len);
	}
}

static void mp_map(struct mt_artifact *a, const struct map *m)
{
	msgpack_packer *pk = &a->pk;

	msgpack_pack_map(pk, m->n);
	for (int i = 0; i < m->n; i++) {
		const struct kv *kv = &m->kv[i];

		msgpack_pack_str(pk, kv->klen);
		msgpack_pack_str_body(pk, kv->key, kv->klen);
		switch (kv->type) {
		case KV_U64:
			msgpack_pack_uint64(pk, kv->u);
			break;
		case KV_BOOL:
			if (kv->u)
				msgpack_pack_true(pk);
			else
				msgpack_pack_false(pk);
			break;
		case KV_STR:
			mp_str(pk, kv->s, kv->len);
			break;
		case KV_ARGV:
			msgpack_pack_array(pk, kv->len);
			for (size_t j = 0; j < kv->len; j++)
				mp_str(pk, kv->argv[j], strlen(kv->argv[j]));
			break;
		}
	}
}

/* ---- JSON Lines ------------------------------------------------------ */

static void js_u64(struct mt_artifact *a, uint64_t u)
{
	char digits[24];
	int i = sizeof(digits);

	do {
		digits[--i] = '0' + u % 10;
		u /= 10;
	} while (u);
	out(a, digits + i, sizeof(digits) - i);
}

/* Invalid UTF-8 bytes become U+FFFD: JSON strings hold text only. */
static char *utf8_sanitized(const char *s, size_t len, size_t *out_len)
{
	char *copy = malloc(len * 3 + 1);
	size_t n = 0;

	if (!copy)
		return NULL;
	for (size_t i = 0; i < len;) {
		size_t step = 1;

		while (step <= 4 && i + step <= len &&
		       !mt_utf8_valid(s + i, step))
			step++;
		if (step <= 4 && i + step <= len) {
			memcpy(copy + n, s + i, step);
			n += step;
			i += step;
		} else {
			memcpy(copy + n, "\xef\xbf\xbd", 3);
			n += 3;
			i++;
		}
	}
	*out_len = n;
	return copy;
}

/* Printable ASCII without '"' or '\\' is its own JSON text: type names
 * and most paths take this way, without jansson's allocations. */
static bool js_plain(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\')
			return false;
	return true;
}

static void js_str(struct mt_artifact *a, const char *s, size_t len)
{
	char *fixed = NULL, *text;
	json_t *j;

	if (js_plain(s, len)) {
		out(a, "\"", 1);
		out(a, s, len);
		out(a, "\"", 1);
		return;
	}
	if (!mt_utf8_valid(s, len)) {
		fixed = utf8_sanitized(s, len, &len);
		s = fixed;
	}
	j = s ? json_stringn(s, len) : NULL;
	text = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
	if (text)
		out(a, text, strlen(text));
	else if (!a->error)
		a->error = -ENOMEM;
	free(text);
	json_decref(j);
	free(fixed);
}

static void js_map(struct mt_artifact *a, const struct map *m)
{
	out(a, "{", 1);
	for (int i = 0; i < m->n; i++) {
		const struct kv *kv = &m->kv[i];

		if (i)
			out(a, ",", 1);
		out(a, "\"", 1);
		out(a, kv->key, kv->klen); /* keys need no escaping */
		out(a, "\":", 2);
		switch (kv->type) {
		case KV_U64:
			js_u64(a, kv->u);
			break;
		case KV_BOOL:
			out(a, kv->u ? "true" : "false", kv->u ? 4 : 5);
			break;
		case KV_STR:
			js_str(a, kv->s, kv->len);
			break;
		case KV_ARGV:
			out(a, "[", 1);
			for (size_t j = 0; j < kv->len; j++) {
				if (j)
					out(a, ",", 1);
				js_str(a, kv->argv[j], strlen(kv->argv[j]));
			}
			out(a, "]", 1);
			break;
		}
	}
	out(a, "}\n", 2);
}

static int emit(struct mt_artifact *a, const struct map *m)
{
	if (a->error)
		return a->error;
	if (a->style == MT_ARTIFACT_JSONL)
		js_map(a, m);
	else
		mp_map(a, m);
	return a->error;
}

/* ---- API ------------------------------------------------------------- */

struct mt_artifact *mt_artifact_new(int fd, enum mt_artifact_style style)
{
	struct mt_artifact *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->buf = malloc(OUT_BUF);
	if (!a->buf) {
		free(a);
		return NULL;
	}
	a->fd = fd;
	a->style = style;
	msgpack_packer_init(&a->pk, a, pk_write);
	return a;
}

static const char *clock_name(uint32_t id)
{
	switch (id) {
	case 0:
		return "CLOCK_REALTIME";
	case 4:
		return "CLOCK_MONOTONIC_RAW";
	case 7:
		return "CLOCK_BOOTTIME";
	default:
		return "CLOCK_MONOTONIC";
	}
}

int mt_artifact_header(struct mt_artifact *a, const struct mt_meta *meta)
{
	struct map m = {0};

	put_cstr(&m, "type", "Header");
	put_cstr(&m, "format", "mt");
	put_u64(&m, "version", 1);
	m.kv[m.n++] = (struct kv){.key = "command",
				  .klen = 7,
				  .type = KV_ARGV,
				  .argv = meta->argv,
				  .len = meta->argc > 0 ? meta->argc : 0};
	put_cstr(&m, "host", meta->host);
	put_cstr(&m, "clock", clock_name(meta->clock_id));
	put_u64(&m, "page_size", meta->page_size);
	put_u64(&m, "root_pid", meta->root_pid);
	put_u64(&m, "start_time", meta->start_realtime_ns);
	put_u64(&m, "start_monotonic", meta->start_monotonic_ns);
	put_bool(&m, "allocators_tracked", meta->flags & MT_HDR_ALLOCATORS);
	put_bool(&m, "syscalls_tracked", meta->flags & MT_HDR_SYSCALLS);
	put_bool(&m, "rss_tracked", meta->flags & MT_HDR_RSS);
	put_bool(&m, "physical_tracked", meta->flags & MT_HDR_PHYSICAL);
	return emit(a, &m);
}

int mt_artifact_record(struct mt_artifact *a, const struct mt_record *rec)
{
	const char *name = mt_kind_name(rec->ev.kind);
	struct map m = {0};

	if (!name)
		return a->error ? a->error : -EINVAL;
	put_cstr(&m, "type", name);
	put_u64(&m, "pid", rec->ev.pid);
	put_u64(&m, "tid", rec->ev.tid);
	put_u64(&m, "timestamp", rec->ev.timestamp);
	event_kind_keys(&m, rec);
	a->events++;
	if (rec->ev.kind == MT_EV_LOST)
		a->lost += rec->ev.size;
	return emit(a, &m);
}

int mt_artifact_trailer(struct mt_artifact *a, const struct mt_meta *meta,
			bool complete, const char *error)
{
	struct map m = {0};

	put_cstr(&m, "type", "Trailer");
	put_bool(&m, "complete", complete);
	if (complete) {
		if (meta->exit_kind == MT_EXIT_CODE)
			put_u64(&m, "exit_code", (uint32_t)meta->exit_value);
		else if (meta->exit_kind == MT_EXIT_SIGNAL)
			put_u64(&m, "signal", (uint32_t)meta->exit_value);
		put_u64(&m, "end_monotonic", meta->end_monotonic_ns);
	}
	put_u64(&m, "events", a->events);
	put_u64(&m, "lost_events", a->lost);
	if (complete)
		put_u64(&m, "batches", meta->batches);
	else
		put_cstr(&m, "error", error ? error : "incomplete");
	return emit(a, &m);
}

int mt_artifact_close(struct mt_artifact *a)
{
	int ret;

	if (!a)
		return 0;
	ret = mt_artifact_flush(a);
	free(a->buf);
	free(a);
	return ret;
}

uint64_t mt_artifact_events(const struct mt_artifact *a)
{
	return a->events;
}

bool mt_utf8_valid(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		uint32_t cp;
		size_t n;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (len - i <= n)
			return false;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		/* overlong forms, surrogates, beyond U+10FFFF */
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return false;
		i += n + 1;
	}
	return true;
}
