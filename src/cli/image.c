/* image.c - corral image import|ls|rm|inspect: the local image store. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char image_usage[] =
"Usage: corral image import [OPTIONS] FILE|DIR\n"
"       corral image ls [--json] [--state-dir DIR]\n"
"       corral image rm [--state-dir DIR] NAME|DIGEST...\n"
"       corral image inspect [--state-dir DIR] NAME|DIGEST\n"
"\n"
"Keep OCI images on this machine, offline, for sandboxes to run on.  No\n"
"registry is contacted; to fetch an image, let another tool write an\n"
"archive and import that:\n"
"  skopeo copy docker://docker.io/library/debian:12 oci-archive:debian.tar\n"
"  docker save -o app.tar app:1.2     podman save -o app.tar app:1.2\n"
"\n"
"  import FILE|DIR   an OCI image layout directory, an oci-archive tar, or a\n"
"                    `docker save` / `podman save` tarball (plain, gzip or\n"
"                    zstd).  Every blob is checked against its sha256 digest\n"
"                    and every layer against its diff-id; a mismatch refuses\n"
"                    the image.  Layers are unpacked once, into overlay form,\n"
"                    and shared by every image and sandbox that uses them.\n"
"                    Unpacking treats a layer as hostile: absolute names,\n"
"                    \"..\", control bytes in names, and writes through a\n"
"                    symlink refuse the image; device nodes are dropped and\n"
"                    setuid/setgid bits and file capabilities stripped, each\n"
"                    reported.  As root, the unpacking runs as uid 1879049192\n"
"                    (corral's id range, the agent's; 65534 where the range is\n"
"                    in use) under Landlock, never as root; layers an older\n"
"                    corral unpacked as 65534 are given to 1879049192 once.\n"
"  ls                the images: NAME, DIGEST (first 12 hex digits), LAYERS,\n"
"                    SIZE (of the layers' blobs), IMPORTED (UTC).  ls,\n"
"                    inspect and rm make no store: before the first\n"
"                    import there are no images, and they say so.\n"
"  rm REF...         a NAME drops that name (the image goes with its last\n"
"                    name); a DIGEST drops the image and all its names.\n"
"                    Blobs and layers no image uses any more are removed.\n"
"  inspect REF       one image as JSON: digests, names, the unpacked layers,\n"
"                    and the config a run applies (env, entrypoint, cmd,\n"
"                    working_dir, user).\n"
"\n"
"Names are written as archives tag them, with or without a registry:\n"
"\"busybox\", \"busybox:1.36\" and \"docker.io/library/busybox:1.36\" are one\n"
"name (shown in full); an OCI layout's bare tag \"TAG\" names the image\n"
"localhost/BASENAME:TAG.  A DIGEST is sha256:HEX, or 12 or more of its\n"
"first hex digits.\n"
"\n"
"Options:\n"
"  --name NAME       import: also name the (single) image NAME\n"
"  --max-size SIZE   import: refuse more than SIZE of files in all layers,\n"
"                    counted as declared, so a sparse file counts in full\n"
"                    (default 16G)\n"
"  --max-files N     import: refuse more than N entries (default 1000000)\n"
"  --max-ratio N     import: refuse a layer that decompresses to more than\n"
"                    N times its size, once past 32 MiB (default 100)\n"
"  --state-dir DIR   the store is DIR/images (as `corral serve --state-dir`);\n"
"                    default /var/lib/corral/images as root, else\n"
"                    $XDG_DATA_HOME/corral/images (~/.local/share/corral/images)\n"
"  --json            ls: a JSON array, as inspect prints each image; an\n"
"                    error: {\"error\", \"detail\"} on stdout too\n"
"  -h, --help        this text\n"
"\n"
"Exit status: 0 done; 1 refused (a bad archive, a digest mismatch, a budget\n"
"exceeded, no such image); 2 bad usage; 125 the store cannot be made or\n"
"opened (the message names it).\n"
"\n"
"Examples:\n"
"  corral image import busybox.tar\n"
"  corral image ls\n"
"  corral image inspect busybox | jq .config.cmd\n"
"  corral image rm busybox\n";

enum { OPT_NAME = 256, OPT_MAX_SIZE, OPT_MAX_FILES, OPT_MAX_RATIO, OPT_STATE_DIR, OPT_JSON };

struct image_args {
	const char *name, *state_dir;
	struct corral_image_limits lim;
	bool json;
	int first;		/* argv index of the first operand */
};

static int usage_error(const char *what)
{
	cli_error("image: %s; see `corral image --help`", what);
	cli_json_amend("usage", NULL, 0);
	return 2;
}

static int parse_count(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-')
		return -1;
	v = strtoull(s, &end, 10);
	if (*end || v == 0)
		return -1;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct image_args *a)
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, OPT_NAME },
		{ "max-size", required_argument, NULL, OPT_MAX_SIZE },
		{ "max-files", required_argument, NULL, OPT_MAX_FILES },
		{ "max-ratio", required_argument, NULL, OPT_MAX_RATIO },
		{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct corral_err err = { 0 };
	int c, idx = -1;
	const char *prefix;

	corral_image_limits_init(&a->lim);
	/*
	 * Options anywhere, as the daemon's verbs take them: "+" read
	 * `image rm busybox --state-dir DIR` as three names, and removed
	 * busybox from the default store, not DIR's.
	 */
	cli_json_scan(argc, argv, ":h", opts, OPT_JSON);
	optind = 0;	/* 0: glibc takes the parse afresh, permutation and all */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, &idx)) != -1) {
		prefix = option_abbreviated(argv, opts, idx);
		if (prefix) {
			say_abbreviated("image", prefix, opts[idx].name);
			return 2;
		}
		idx = -1;
		switch (c) {
		case OPT_NAME:
			a->name = optarg;
			break;
		case OPT_MAX_SIZE:
			if (corral_parse_size(optarg, &a->lim.max_bytes, &err) < 0 ||
			    a->lim.max_bytes == 0)
				return usage_error("--max-size: not a size > 0");
			break;
		case OPT_MAX_FILES:
			if (parse_count(optarg, &a->lim.max_files) < 0)
				return usage_error("--max-files: not a count > 0");
			break;
		case OPT_MAX_RATIO:
			if (parse_count(optarg, &a->lim.max_ratio) < 0)
				return usage_error("--max-ratio: not a ratio > 0");
			break;
		case OPT_STATE_DIR:
			a->state_dir = optarg;
			break;
		case OPT_JSON:
			a->json = true;
			break;
		case 'h':
			fputs(image_usage, stdout);
			return 1;
		case ':':
			cli_error("image: option \"%s\" needs a value; see `corral image --help`",
				  argv[optind - 1]);
			cli_json_amend("usage", NULL, 0);
			return 2;
		default:
			/* getopt's own said "ls: unrecognized option", as if of ls(1) */
			cli_error("image: unknown option \"%s\"; see `corral image --help`",
				  optopt > 0 && optopt < 256 ? (char[]){ '-', (char)optopt, 0 } :
				  argv[optind - 1]);
			cli_json_amend("usage", NULL, 0);
			return 2;
		}
	}
	a->first = optind;
	return 0;
}

/*
 * ls, inspect and rm read the store: one not made yet holds no image, and
 * a look must not make it (`corral image ls` made the store's directory,
 * its lock and four directories under the caller's home).  1 when there
 * is none at its path; 0 otherwise, and open_store says what is wrong.
 */
static int store_absent(const struct image_args *a, char **dir)
{
	struct stat st;

	*dir = corral_image_store_path(a->state_dir);
	if (!*dir)
		return 0;
	return lstat(*dir, &st) < 0 && errno == ENOENT;
}

static int absent_store_read(const char *verb, int argc, char **argv,
			     const struct image_args *a, const char *dir)
{
	if (!strcmp(verb, "ls")) {
		cli_error("no images: no image store at %s yet (`corral image import` makes it)",
			  dir);
		if (a->json)
			puts("[]");
		else
			printf("%-50s %-12s %6s %10s  %s\n", "NAME", "DIGEST", "LAYERS", "SIZE", "IMPORTED");
		if (fflush(stdout) == EOF || ferror(stdout)) {
			cli_error("writing to standard output: %s", strerror(errno));
			return EXIT_CORRAL;
		}
		if (a->json)
			cli_json_printed();
		return 0;
	}
	if (argc - a->first < 1 || (!strcmp(verb, "inspect") && argc - a->first != 1))
		return usage_error(!strcmp(verb, "rm") ? "rm takes at least one NAME or DIGEST" :
				   "inspect takes one NAME or DIGEST");
	for (int i = a->first; i < argc; i++)
		cli_error("image %s %s: no such image (no image store at %s)", verb,
			  argv[i], dir);
	return 1;
}

static int open_store(const struct image_args *a, struct corral_image_store **s)
{
	struct corral_err err = { 0 };

	if (corral_image_store_open(s, a->state_dir, &err) < 0) {
		cli_error("%s", err.msg);
		return EXIT_CORRAL;
	}
	return 0;
}

static int image_import(int argc, char **argv, struct image_args *a,
			struct corral_image_store *s)
{
	struct corral_image_import_report rep;
	struct corral_err err = { 0 };
	int r;

	if (argc - a->first != 1)
		return usage_error("import takes one FILE or DIR");
	r = corral_image_import(s, argv[a->first], a->name, &a->lim, &rep, &err);
	/*
	 * Escaped as errors are: a note may quote the image (a name its
	 * index or RepoTags gave, refused for its control bytes), and what
	 * an image says reaches the terminal as text, never as a sequence.
	 */
	for (size_t i = 0; i < rep.nnotes; i++)
		cli_error("note: %s", rep.notes[i]);
	if (r < 0) {
		cli_error("import %s: %s", argv[a->first], err.msg);
		corral_image_import_report_free(&rep);
		return 1;
	}
	for (size_t i = 0; i < rep.ndigests; i++)
		printf("imported %s\n", rep.digests[i]);
	for (size_t i = 0; i < rep.nnames; i++)
		printf("named %s\n", rep.names[i]);
	printf("layers: %u unpacked, %u already in the store; blobs: %u new, %u already in the store\n",
	       rep.layers_new, rep.layers_present, rep.blobs_new, rep.blobs_present);
	corral_image_import_report_free(&rep);
	return 0;
}

static int image_ls(struct image_args *a, struct corral_image_store *s)
{
	struct corral_image **imgs;
	struct corral_err err = { 0 };
	size_t n;

	if (corral_image_list(s, &imgs, &n, &err) < 0) {
		cli_error("image ls: %s", err.msg);
		return 1;
	}
	if (a->json)
		fputs("[", stdout);
	else
		printf("%-50s %-12s %6s %10s  %s\n", "NAME", "DIGEST", "LAYERS", "SIZE", "IMPORTED");
	for (size_t i = 0; i < n; i++) {
		char size[32];

		if (a->json) {
			char *j = corral_image_json(imgs[i]);

			printf("%s%s", i ? ",\n" : "\n", j ? j : "null");
			free(j);
			continue;
		}
		corral_format_size(imgs[i]->size, size, sizeof(size));
		for (size_t k = 0; k < (imgs[i]->nnames ? imgs[i]->nnames : 1); k++)
			printf("%-50s %-12.12s %6zu %10s  %s\n",
			       imgs[i]->nnames ? imgs[i]->names[k] : "<none>", imgs[i]->digest + 7,
			       imgs[i]->nlayers, size, imgs[i]->imported ? imgs[i]->imported : "");
	}
	if (a->json)
		puts(n ? "\n]" : "]");
	corral_image_list_free(imgs, n);
	return 0;
}

static int image_rm(int argc, char **argv, struct image_args *a,
		    struct corral_image_store *s)
{
	int rc = 0;

	if (argc - a->first < 1)
		return usage_error("rm takes at least one NAME or DIGEST");
	for (int i = a->first; i < argc; i++) {
		struct corral_err err = { 0 };

		if (corral_image_remove(s, argv[i], &err) < 0) {
			cli_error("image rm %s: %s", argv[i], err.msg);
			rc = 1;
		} else {
			printf("removed %s\n", argv[i]);
		}
	}
	return rc;
}

static int image_inspect(int argc, char **argv, struct image_args *a,
			 struct corral_image_store *s)
{
	struct corral_image *img;
	struct corral_err err = { 0 };
	char *j;

	if (argc - a->first != 1)
		return usage_error("inspect takes one NAME or DIGEST");
	if (corral_image_resolve(s, argv[a->first], &img, &err) < 0) {
		cli_error("image inspect %s: %s", argv[a->first], err.msg);
		return 1;
	}
	j = corral_image_json(img);
	corral_image_free(img);
	if (!j) {
		cli_error("image inspect: out of memory");
		return EXIT_CORRAL;
	}
	puts(j);
	free(j);
	return 0;
}

int cmd_image(int argc, char **argv)
{
	struct image_args a = { 0 };
	struct corral_image_store *s = NULL;
	const char *verb;
	char *dir = NULL;
	int r;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(image_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	verb = argv[1];
	if (strcmp(verb, "import") && strcmp(verb, "ls") && strcmp(verb, "rm") &&
	    strcmp(verb, "inspect")) {
		cli_error("image: unknown verb \"%s\"; see `corral image --help`", verb);
		return 2;
	}
	r = parse_args(argc - 1, argv + 1, &a);
	if (r)
		return r == 1 ? 0 : r;
	if (!strcmp(verb, "ls") && a.first != argc - 1)
		return usage_error("ls takes no operand");
	if (strcmp(verb, "import") && store_absent(&a, &dir)) {
		r = absent_store_read(verb, argc - 1, argv + 1, &a, dir);
		free(dir);
		return r;
	}
	free(dir);
	r = open_store(&a, &s);
	if (r)
		return r;
	if (!strcmp(verb, "import"))
		r = image_import(argc - 1, argv + 1, &a, s);
	else if (!strcmp(verb, "ls"))
		r = image_ls(&a, s);
	else if (!strcmp(verb, "rm"))
		r = image_rm(argc - 1, argv + 1, &a, s);
	else
		r = image_inspect(argc - 1, argv + 1, &a, s);
	corral_image_store_close(s);
	return r;
}
