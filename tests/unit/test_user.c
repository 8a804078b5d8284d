// SPDX-License-Identifier: MIT
/*
 * test_user.c - opening as the user mt-trace acts for (mt_user.h), as root:
 *  - the switch of filesystem rights is the calling thread's alone: another
 *    thread keeps root's fsuid and groups meanwhile, and the caller gets
 *    its own back after;
 *  - mt_user_open fails with the user's errno where the user may not go,
 *    and opens as root when acting for nobody;
 *  - mt_user_input opens once: its /proc/self/fd path still reaches that
 *    file after the name is renamed away and a new file put in its place,
 *    and mt_user_input_name gives the user's name back.
 * Needs root (a failure in CI, where it is root, else a note and exit 0).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats_test.h"
#include "mt_user.h"

#define NOBODY 65534
#define EXTRA  4242 /* a supplementary group nobody gets here */

static gid_t user_groups[] = {NOBODY, EXTRA};
static const struct mt_user user = {
    .is_sudo = true,
    .uid = NOBODY,
    .gid = NOBODY,
    .groups = user_groups,
    .ngroups = 2,
};

/* What a thread sees of its own filesystem rights. */
struct rights {
	uid_t fsuid;
	gid_t fsgid;
	int ngroups;
	gid_t groups[64];
};

static void my_rights(struct rights *r)
{
	r->fsuid = setfsuid(-1); /* changes nothing, says what is in force */
	r->fsgid = setfsgid(-1);
	r->ngroups = getgroups(64, r->groups);
}

static bool has_group(const struct rights *r, gid_t g)
{
	for (int i = 0; i < r->ngroups; i++)
		if (r->groups[i] == g)
			return true;
	return false;
}

struct other {
	int go[2], done[2];
	struct rights seen;
};

static void *other_thread(void *arg)
{
	struct other *o = arg;
	char c;

	if (read(o->go[0], &c, 1) != 1)
		return NULL;
	my_rights(&o->seen);
	if (write(o->done[1], "x", 1) != 1)
		return NULL;
	return NULL;
}

static void switch_is_per_thread(void)
{
	struct other o = {0};
	struct rights before, during, after;
	struct mt_user_fs saved;
	pthread_t t;
	char c;

	CHECK(pipe(o.go) == 0 && pipe(o.done) == 0);
	CHECK(pthread_create(&t, NULL, other_thread, &o) == 0);
	my_rights(&before);
	CHECK_INT(before.fsuid, 0);
	CHECK(!has_group(&before, EXTRA));
	CHECK_INT(mt_user_fs_begin(&user, &saved), 0);
	my_rights(&during);
	/* the other thread looks while this one is switched */
	CHECK(write(o.go[1], "x", 1) == 1);
	CHECK(read(o.done[0], &c, 1) == 1);
	mt_user_fs_end(&saved);
	my_rights(&after);
	pthread_join(t, NULL);

	CHECK_INT(during.fsuid, NOBODY);
	CHECK_INT(during.fsgid, NOBODY);
	CHECK_INT(during.ngroups, 2);
	CHECK(has_group(&during, EXTRA));
	CHECK_INT(o.seen.fsuid, 0);
	CHECK_INT(o.seen.fsgid, before.fsgid);
	CHECK_INT(o.seen.ngroups, before.ngroups);
	CHECK(!has_group(&o.seen, EXTRA));
	CHECK_INT(after.fsuid, 0);
	CHECK_INT(after.ngroups, before.ngroups);
	CHECK(!has_group(&after, EXTRA));
	for (int i = 0; i < 4; i++)
		close(i < 2 ? o.go[i] : o.done[i - 2]);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	CHECK(fd >= 0);
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	CHECK(fchmod(fd, mode) == 0);
	close(fd);
}

static void read_file(const char *path, char *out, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, out, len - 1);

	out[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
}

static void opens_as_user(const char *top)
{
	char root_only[256], secret[256], open_dir[256], mine[256], away[256];
	char got[64];
	const char *via;
	int fd;

	snprintf(root_only, sizeof(root_only), "%s/root", top);
	snprintf(secret, sizeof(secret), "%s/root/secret", top);
	snprintf(open_dir, sizeof(open_dir), "%s/open", top);
	snprintf(mine, sizeof(mine), "%s/open/lib", top);
	snprintf(away, sizeof(away), "%s/open/lib.old", top);
	CHECK(mkdir(root_only, 0700) == 0);
	CHECK(mkdir(open_dir, 0755) == 0);
	write_file(secret, "root's", 0644);
	write_file(mine, "first", 0644);

	mt_user_act_for(&user);
	errno = 0;
	fd = mt_user_open(secret, O_RDONLY, 0);
	CHECK_INT(fd, -1);
	CHECK_INT(errno, EACCES);
	errno = 0;
	CHECK(mt_user_input("--scan", secret) == NULL);
	via = mt_user_input("--scan", mine);
	CHECK(via && strncmp(via, "/proc/self/fd/", 14) == 0);
	if (via) {
		CHECK_STR(mt_user_input_name(via), mine);
		/* the name now leads elsewhere: the open file is still used */
		CHECK(rename(mine, away) == 0);
		write_file(mine, "second", 0644);
		read_file(via, got, sizeof(got));
		CHECK_STR(got, "first");
	}
	CHECK_STR(mt_user_input_name("/elsewhere"), "/elsewhere");

	/* acting for nobody else: mt-trace's own rights */
	mt_user_act_for(NULL);
	fd = mt_user_open(secret, O_RDONLY, 0);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK_STR(mt_user_input("--scan", secret), secret);

	unlink(secret);
	unlink(mine);
	unlink(away);
	rmdir(root_only);
	rmdir(open_dir);
}

int main(void)
{
	char top[] = "/tmp/mt-test-user.XXXXXX";

	if (geteuid() != 0) {
		printf("test_user: needs root (setfsuid, setgroups)%s\n",
		       getenv("CI") ? ": a failure in CI" : "; not run");
		return getenv("CI") ? 1 : 0;
	}
	switch_is_per_thread();
	CHECK(mkdtemp(top) != NULL);
	CHECK(chmod(top, 0755) == 0);
	opens_as_user(top);
	rmdir(top);
	return test_summary("test_user");
}
