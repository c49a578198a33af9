/*
 * unit_tripwire.c - the decoys, and the watch on them, tried on files of
 * the test's own: tripwire_start() with our own pid makes /proc/<pid>/root
 * our "/", so the "sandbox paths" are absolute paths in a temp directory.
 * As root the watch is fanotify (the opener's pid, the open denied); as
 * anyone else inotify (after the fact, no pid); the inotify mode is also
 * tried as root.  Every wait is bounded.
 */
#include "internal.h"
#include "tripwire.h"
#include "unit.h"

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_HITS 16
#define WAIT_MS 5000

struct seen {
	struct event_base *base;
	size_t n, want;
	char path[MAX_HITS][PATH_MAX];
	pid_t pid[MAX_HITS];
	char how[MAX_HITS][64];
	struct tripwire **free_me;	/* free the watch from the callback */
};

static void on_hit(void *arg, const char *path, pid_t pid, const char *how,
		   const char *group)
{
	struct seen *s = arg;

	if (!group)	/* never NULL: "" when unknown */
		abort();
	if (s->n < MAX_HITS) {
		snprintf(s->path[s->n], sizeof(s->path[0]), "%s", path);
		s->pid[s->n] = pid;
		snprintf(s->how[s->n], sizeof(s->how[0]), "%s", how);
	}
	s->n++;
	if (s->free_me) {
		tripwire_free(*s->free_me);
		*s->free_me = NULL;
	}
	if (s->n >= s->want)
		event_base_loopbreak(s->base);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

/* Run the loop until want hits in all were seen, or ms passed. */
static void run_until(struct seen *s, size_t want, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	struct event *timer;

	s->want = want;
	if (s->n >= want)
		return;
	timer = evtimer_new(s->base, on_timeout, s->base);
	CHECK(timer != NULL);
	if (!timer)
		return;
	CHECK(evtimer_add(timer, &tv) == 0);
	CHECK(event_base_dispatch(s->base) >= 0);
	event_free(timer);
}

enum action { OPEN_READ, OPEN_WRITE, UNLINK, RENAME, CHMOD, LINK };

/*
 * Do it in a child: under fanotify an open waits for the loop's answer.
 * Returns the child's pid; its exit status is 0 or the errno it got.
 */
static pid_t act(enum action a, const char *path, const char *other)
{
	pid_t pid = fork();
	int fd, r = 0;

	if (pid != 0)
		return pid;
	switch (a) {
	case OPEN_READ:
	case OPEN_WRITE:
		fd = open(path, (a == OPEN_READ ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
		if (fd >= 0) {
			char c;

			if (a == OPEN_READ && read(fd, &c, 1) < 0)
				r = errno;
			close(fd);
		} else {
			r = errno;
		}
		break;
	case UNLINK:
		r = unlink(path) < 0 ? errno : 0;
		break;
	case RENAME:
		r = rename(path, other) < 0 ? errno : 0;
		break;
	case CHMOD:
		r = chmod(path, 0644) < 0 ? errno : 0;
		break;
	case LINK:
		r = link(path, other) < 0 ? errno : 0;
		break;
	}
	_exit(r);
}

/* The child's errno (0: it worked), waiting at most WAIT_MS. */
static int reap(pid_t pid)
{
	struct timespec ms10 = { 0, 10 * 1000 * 1000 };
	int status, i;

	if (pid < 0)
		return -1;
	for (i = 0; i < WAIT_MS / 10; i++) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		if (r < 0)
			return -1;
		nanosleep(&ms10, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	fprintf(stderr, "  child %d did not finish\n", (int)pid);
	return -1;
}

static int make_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -EIO;
}

/* A temp directory with files a, b and c, and their paths. */
struct dir {
	char top[64];
	char a[96], b[96], c[96], other[96];
};

static bool make_dir(struct dir *d)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(d->top, sizeof(d->top), "%s/corral-tw-XXXXXX",
		 tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
	if (!mkdtemp(d->top))
		return false;
	snprintf(d->a, sizeof(d->a), "%s/a", d->top);
	snprintf(d->b, sizeof(d->b), "%s/b", d->top);
	snprintf(d->c, sizeof(d->c), "%s/c", d->top);
	snprintf(d->other, sizeof(d->other), "%s/other", d->top);
	return make_file(d->a, "a\n") == 0 && make_file(d->b, "b\n") == 0 &&
	       make_file(d->c, "c\n") == 0;
}

static void remove_dir(struct dir *d)
{
	unlink(d->a);
	unlink(d->b);
	unlink(d->c);
	unlink(d->other);
	rmdir(d->top);
}

/* A policy naming our files, as the sandbox would name its own. */
static void policy_of(struct corral_policy *p, char **paths, size_t n)
{
	corral_policy_init(p);
	p->abort.tripwires = paths;
	p->abort.ntripwires = n;
}

static bool fanotify_mode(const struct tripwire *t)
{
	return !strcmp(tripwire_mode(t), "fanotify");
}

/* ---- the decoys ------------------------------------------------------ */

static bool all_of(const char *s, size_t n, const char *alphabet)
{
	for (size_t i = 0; i < n; i++)
		if (!s[i] || !strchr(alphabet, s[i]))
			return false;
	return true;
}

static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

TEST(decoy_aws)
{
	char a[TRIPWIRE_DECOY_MAX + 1], b[TRIPWIRE_DECOY_MAX + 1];
	struct corral_err err = { 0 };
	ssize_t n, m;
	const char *id, *secret;

	n = tripwire_decoy("/home/agent/.aws/credentials", a, sizeof(a) - 1, &err);
	m = tripwire_decoy("/home/agent/.aws/credentials", b, sizeof(b) - 1, &err);
	CHECK(n > 0 && m > 0);
	if (n <= 0 || m <= 0)
		return;
	a[n] = b[m] = '\0';
	CHECK(!strncmp(a, "[default]\naws_access_key_id = AKIA", 34));
	id = strstr(a, "AKIA");
	CHECK(id && all_of(id + 4, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") &&
	      id[20] == '\n');
	secret = strstr(a, "aws_secret_access_key = ");
	CHECK(secret && all_of(secret + 24, 40, b64) && secret[64] == '\n');
	CHECK(a[n - 1] == '\n');
	CHECK(strcmp(a, b) != 0);		/* random each time */
}

TEST(decoy_ssh_keys)
{
	static const struct {
		const char *path;
		size_t min, max;
	} t[] = {
		{ "/home/agent/.ssh/id_ed25519", 300, 500 },
		{ "/home/agent/.ssh/id_rsa", 2000, 3000 },
		{ "/tmp/id_ecdsa", 400, 600 },
	};
	char buf[TRIPWIRE_DECOY_MAX + 1];
	struct corral_err err = { 0 };

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		ssize_t n = tripwire_decoy(t[i].path, buf, sizeof(buf) - 1, &err);
		size_t body = 0;
		char *line, *save = NULL;
		int lines = 0;

		CHECK(n > 0);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		CHECK(!strncmp(buf, "-----BEGIN OPENSSH PRIVATE KEY-----\n"
			       "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", 78));
		CHECK_STR_CONTAINS(buf, "\n-----END OPENSSH PRIVATE KEY-----\n");
		for (line = strtok_r(buf, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save), lines++) {
			if (!strncmp(line, "-----", 5))
				continue;
			CHECK(strlen(line) <= 70 && all_of(line, strlen(line), b64));
			body += strlen(line);
		}
		CHECK(body >= t[i].min && body <= t[i].max);
	}
	/* a public key is not a private one */
	CHECK(tripwire_decoy("/tmp/id_rsa.pub", buf, sizeof(buf) - 1, &err) > 0);
	CHECK(strncmp(buf, "-----BEGIN", 10) != 0);
}

TEST(decoy_tokens)
{
	char buf[TRIPWIRE_DECOY_MAX + 1];
	struct corral_err err = { 0 };
	ssize_t n;

	n = tripwire_decoy("/home/agent/.netrc", buf, sizeof(buf) - 1, &err);
	CHECK(n > 0);
	buf[n > 0 ? n : 0] = '\0';
	CHECK(!strncmp(buf, "machine github.com\n  login agent\n  password ghp_", 48));
	n = tripwire_decoy("/workspace/.git-credentials", buf, sizeof(buf) - 1, &err);
	CHECK(n > 0);
	buf[n > 0 ? n : 0] = '\0';
	CHECK(!strncmp(buf, "https://agent:ghp_", 18));
	CHECK_STR_CONTAINS(buf, "@github.com\n");
	n = tripwire_decoy("/workspace/.env", buf, sizeof(buf) - 1, &err);
	CHECK(n > 0);
	buf[n > 0 ? n : 0] = '\0';
	CHECK(!strncmp(buf, "OPENAI_API_KEY=sk-proj-", 23));
	CHECK_STR_CONTAINS(buf, "\nDATABASE_URL=postgres://app:");
	n = tripwire_decoy("/tmp/notes/deploy-token", buf, sizeof(buf) - 1, &err);
	CHECK(n == (ssize_t)strlen("api_token = ") + 40 + 1);
	buf[n > 0 ? n : 0] = '\0';
	CHECK(!strncmp(buf, "api_token = ", 12) && buf[n - 1] == '\n');
	/* too small a buffer is an error, not a cut decoy */
	CHECK(tripwire_decoy("/home/agent/.ssh/id_rsa", buf, 100, &err) == -ENOBUFS);
	CHECK_STR_CONTAINS(err.msg, "decoy larger than 100 bytes");
}

TEST(bind_over)
{
	struct corral_policy p;
	struct corral_err err = { 0 };

	corral_policy_init(&p);
	CHECK(corral_policy_add_bind(&p, "/srv/keys:/home/agent/.aws", false, &err) == 0);
	CHECK(corral_policy_add_bind(&p, "/srv/out:/tmp/out", true, &err) == 0);
	CHECK(tripwire_bind_over(&p, "/home/agent/.aws/credentials") &&
	      !strcmp(tripwire_bind_over(&p, "/home/agent/.aws/credentials"),
		      "/home/agent/.aws"));
	CHECK(tripwire_bind_over(&p, "/tmp/out") != NULL);
	CHECK(tripwire_bind_over(&p, "/home/agent/.awsx") == NULL);
	CHECK(tripwire_bind_over(&p, "/tmp/outside") == NULL);
	CHECK(tripwire_bind_over(&p, "/home/agent/.netrc") == NULL);
	corral_policy_free(&p);
}

/* ---- the watch ------------------------------------------------------- */

TEST(none_without_tripwires)
{
	struct event_base *base = event_base_new();
	struct corral_err err = { 0 };
	struct corral_policy p;
	struct tripwire *t;

	corral_policy_init(&p);
	t = tripwire_start(base, getpid(), &p, on_hit, NULL, &err);
	CHECK(t != NULL);
	CHECK(!strcmp(tripwire_mode(t), "none"));
	tripwire_free(t);
	tripwire_free(NULL);
	CHECK(!strcmp(tripwire_mode(NULL), "none"));
	corral_policy_free(&p);
	event_base_free(base);
}

TEST(start_refuses)
{
	struct event_base *base = event_base_new();
	struct corral_err err = { 0 };
	struct corral_policy p;
	struct dir d;
	char link[128], missing[128], *paths[2];

	CHECK(make_dir(&d));
	snprintf(link, sizeof(link), "%s/link", d.top);
	snprintf(missing, sizeof(missing), "%s/missing", d.top);
	CHECK(symlink(d.a, link) == 0);

	paths[0] = d.a;
	paths[1] = missing;
	policy_of(&p, paths, 2);
	CHECK(tripwire_start(base, getpid(), &p, on_hit, NULL, &err) == NULL);
	CHECK(err.code == -ENOENT);
	CHECK_STR_CONTAINS(err.msg, missing);

	paths[1] = link;		/* no symlink is followed */
	CHECK(tripwire_start(base, getpid(), &p, on_hit, NULL, &err) == NULL);
	CHECK(err.code == -ELOOP);
	CHECK_STR_CONTAINS(err.msg, "symlink");

	paths[1] = d.top;		/* a directory is not a tripwire */
	CHECK(tripwire_start(base, getpid(), &p, on_hit, NULL, &err) == NULL);
	CHECK_STR_CONTAINS(err.msg, "not a regular file");

	paths[1] = "relative";
	CHECK(tripwire_start(base, getpid(), &p, on_hit, NULL, &err) == NULL);
	CHECK_STR_CONTAINS(err.msg, "not an absolute path");

	/* no such sandbox */
	paths[1] = d.b;
	CHECK(tripwire_start(base, -2, &p, on_hit, NULL, &err) == NULL);
	CHECK_STR_CONTAINS(err.msg, "/proc/-2/root");

	/* under a bind: it would be a host file */
	CHECK(corral_policy_add_bind(&p, d.top, false, &err) == 0);
	CHECK(tripwire_start(base, getpid(), &p, on_hit, NULL, &err) == NULL);
	CHECK_STR_CONTAINS(err.msg, "lies under the bind");

	p.abort.tripwires = NULL;
	p.abort.ntripwires = 0;
	corral_policy_free(&p);
	unlink(link);
	remove_dir(&d);
	event_base_free(base);
}

/*
 * The open is reported with the file's sandbox path; as root the opener's
 * pid too, and the open fails.  Our own setup reports nothing.
 */
TEST(open_is_reported)
{
	struct seen s = { 0 };
	struct corral_err err = { 0 };
	struct corral_policy p;
	struct tripwire *t;
	struct dir d;
	char *paths[2];
	pid_t child;
	int e;

	s.base = event_base_new();
	CHECK(make_dir(&d));
	paths[0] = d.a;
	paths[1] = d.b;
	policy_of(&p, paths, 2);
	t = tripwire_start(s.base, getpid(), &p, on_hit, &s, &err);
	if (!t)
		fprintf(stderr, "  %s\n", err.msg);
	CHECK(t != NULL);
	if (!t)
		goto out;
	printf("# mode %s as uid %d\n", tripwire_mode(t), (int)geteuid());
	CHECK(fanotify_mode(t) == (geteuid() == 0));

	run_until(&s, 1, 200);
	CHECK(s.n == 0);		/* marking the files touched nothing */

	/* a file that is not a tripwire is nobody's business */
	e = reap(act(OPEN_READ, d.c, NULL));
	CHECK(e == 0);
	run_until(&s, 1, 200);
	CHECK(s.n == 0);

	child = act(OPEN_READ, d.b, NULL);
	run_until(&s, 1, WAIT_MS);
	e = reap(child);
	CHECK(s.n == 1);
	CHECK(!strcmp(s.path[0], d.b));
	if (fanotify_mode(t)) {
		CHECK(s.pid[0] == child);
		CHECK(!strcmp(s.how[0], "fanotify: open denied"));
		CHECK(e == EPERM);	/* what the kernel returns for FAN_DENY */
	} else {
		CHECK(s.pid[0] == -1);
		CHECK(!strcmp(s.how[0], "inotify: after the open, no pid"));
		CHECK(e == 0);
	}

	/* every open counts, a write as much as a read */
	child = act(OPEN_WRITE, d.a, NULL);
	run_until(&s, 2, WAIT_MS);
	e = reap(child);
	CHECK(s.n == 2 && !strcmp(s.path[1], d.a));
	CHECK(fanotify_mode(t) ? e == EPERM : e == 0);
	if (fanotify_mode(t))
		CHECK(s.pid[1] == child);
	tripwire_free(t);
out:
	p.abort.tripwires = NULL;
	p.abort.ntripwires = 0;
	corral_policy_free(&p);
	remove_dir(&d);
	event_base_free(s.base);
}

/* Removing, renaming or relinking a tripwire is touching it. */
static void tamper(unsigned int flags)
{
	struct seen s = { 0 };
	struct corral_err err = { 0 };
	const char *paths[3];
	struct tripwire *t;
	struct dir d;
	int rootfd;

	s.base = event_base_new();
	CHECK(make_dir(&d));
	paths[0] = d.a;
	paths[1] = d.b;
	paths[2] = d.c;
	rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	t = tripwire_start_at(s.base, rootfd, paths, 3, flags, on_hit, &s, &err);
	close(rootfd);
	if (!t)
		fprintf(stderr, "  %s\n", err.msg);
	CHECK(t != NULL);
	if (!t)
		goto out;

	CHECK(reap(act(UNLINK, d.a, NULL)) == 0);
	run_until(&s, 1, WAIT_MS);
	CHECK(s.n == 1 && !strcmp(s.path[0], d.a) &&
	      !strcmp(s.how[0], "removed: deleted") && s.pid[0] == -1);

	CHECK(reap(act(RENAME, d.b, d.other)) == 0);
	run_until(&s, 2, WAIT_MS);
	CHECK(s.n == 2 && !strcmp(s.path[1], d.b) &&
	      !strcmp(s.how[1], "removed: renamed"));

	CHECK(reap(act(CHMOD, d.c, NULL)) == 0);
	run_until(&s, 3, WAIT_MS);
	CHECK(s.n == 3 && !strcmp(s.path[2], d.c) &&
	      !strcmp(s.how[2], "tampered: attributes or links changed"));

	/* the renamed file is still the tripwire: the mark is on the inode */
	if (!strcmp(tripwire_mode(t), "inotify")) {
		CHECK(reap(act(OPEN_READ, d.other, NULL)) == 0);
		run_until(&s, 4, WAIT_MS);
		CHECK(s.n == 4 && !strcmp(s.path[3], d.b) &&
		      !strcmp(s.how[3], "inotify: after the open, no pid"));
	} else {
		pid_t child = act(OPEN_READ, d.other, NULL);

		run_until(&s, 4, WAIT_MS);
		CHECK(reap(child) == EPERM);
		CHECK(s.n == 4 && !strcmp(s.path[3], d.b) && s.pid[3] == child);
	}
	CHECK(s.n == 4);
	tripwire_free(t);
out:
	remove_dir(&d);
	event_base_free(s.base);
}

TEST(tamper_is_reported)
{
	tamper(0);
}

TEST(tamper_is_reported_by_inotify)
{
	tamper(TRIPWIRE_NO_FANOTIFY);
}

/* A hard link made elsewhere leads to the same mark. */
TEST(hard_link_is_the_same_tripwire)
{
	struct seen s = { 0 };
	struct corral_err err = { 0 };
	const char *paths[1];
	struct tripwire *t;
	struct dir d;
	pid_t child;
	int rootfd, e;

	s.base = event_base_new();
	CHECK(make_dir(&d));
	paths[0] = d.a;
	rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	t = tripwire_start_at(s.base, rootfd, paths, 1, 0, on_hit, &s, &err);
	close(rootfd);
	CHECK(t != NULL);
	if (!t)
		goto out;
	CHECK(reap(act(LINK, d.a, d.other)) == 0);
	run_until(&s, 1, WAIT_MS);
	CHECK(s.n == 1 && !strcmp(s.how[0], "tampered: attributes or links changed"));
	child = act(OPEN_READ, d.other, NULL);
	run_until(&s, 2, WAIT_MS);
	e = reap(child);
	CHECK(s.n == 2 && !strcmp(s.path[1], d.a));
	CHECK(fanotify_mode(t) ? e == EPERM : e == 0);
	tripwire_free(t);
out:
	remove_dir(&d);
	event_base_free(s.base);
}

/* Reads after a seen open are one hit, not one a read(2). */
TEST(reads_are_one_hit)
{
	struct seen s = { 0 };
	struct corral_err err = { 0 };
	const char *paths[1];
	struct tripwire *t;
	struct dir d;
	int rootfd, fd;
	char c;

	s.base = event_base_new();
	CHECK(make_dir(&d));
	paths[0] = d.a;
	rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	t = tripwire_start_at(s.base, rootfd, paths, 1, TRIPWIRE_NO_FANOTIFY,
			      on_hit, &s, &err);
	close(rootfd);
	CHECK(t != NULL && !strcmp(tripwire_mode(t), "inotify"));
	if (!t)
		goto out;
	fd = open(d.a, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	for (int i = 0; fd >= 0 && i < 5; i++) {
		CHECK(pread(fd, &c, 1, 0) == 1);
		run_until(&s, 10, 50);
	}
	if (fd >= 0)
		close(fd);
	run_until(&s, 10, 100);
	CHECK(s.n == 1 && !strcmp(s.how[0], "inotify: after the open, no pid"));
	tripwire_free(t);
out:
	remove_dir(&d);
	event_base_free(s.base);
}

/* The callback may free the watch; no hit comes after. */
TEST(free_from_the_callback)
{
	struct seen s = { 0 };
	struct corral_err err = { 0 };
	const char *paths[2];
	struct tripwire *t;
	struct dir d;
	int rootfd;

	s.base = event_base_new();
	CHECK(make_dir(&d));
	paths[0] = d.a;
	paths[1] = d.b;
	rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	t = tripwire_start_at(s.base, rootfd, paths, 2, TRIPWIRE_NO_FANOTIFY,
			      on_hit, &s, &err);
	close(rootfd);
	CHECK(t != NULL);
	if (!t)
		goto out;
	s.free_me = &t;
	/* two hits in one batch: the second is not delivered */
	CHECK(reap(act(UNLINK, d.a, NULL)) == 0);
	CHECK(reap(act(UNLINK, d.b, NULL)) == 0);
	run_until(&s, 1, WAIT_MS);
	CHECK(s.n == 1 && t == NULL);
	run_until(&s, 2, 200);
	CHECK(s.n == 1);
	tripwire_free(t);
out:
	remove_dir(&d);
	event_base_free(s.base);
}

int main(void)
{
	unit_run_all();
	UNIT_DONE();
}
