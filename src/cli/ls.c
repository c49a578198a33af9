/*
 * ls.c - corral ls: the daemon's sandboxes (GET /v1/sandboxes) as a table,
 * as ids, or as the daemon's JSON.
 */
#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct verb ls_verb = {
	.name = "ls",
	.head =
"Usage: corral ls [--json | -q]\n"
"\n"
"List the daemon's sandboxes, one a line:\n"
"  ID        as `corral create` printed it\n"
"  STATE     running (a call or a process runs), idle, frozen (idle: thawed\n"
"            by the next exec), paused (`corral pause`), halted (refuses\n"
"            every call: `corral ls --json` has its halt_reason); the\n"
"            daemon may also show \"dead\" (it ended by itself; it is\n"
"            kept until `corral rm`, so that its record can be read)\n"
"  AGE       time since it was created (s, m, h, d)\n"
"  CPU       CPU-seconds used so far\n"
"  MEM PEAK  the most memory it used at once\n"
"  LABELS    KEY=VALUE,... from `corral create --label`\n"
"Bytes of a label that a terminal would act on are shown as \\xNN, and so\n"
"are a \",\" or \"=\" in a key or a value (\\x2c, \\x3d): each \",\" and\n"
"\"=\" shown is corral's.\n"
"\n"
"Options:\n"
"  --json               print the daemon's answer, {\"sandboxes\": [...]}, with\n"
"                       every field: meters, halt_reason, limits, ...\n"
"  -q, --quiet          print only the ids, one a line\n",
	.tail =
"Exit status: 0 listed (also when there are none); 2 bad usage; 125 the\n"
"daemon could not be reached, or refused.\n"
"\n"
"Examples:\n"
"  corral ls\n"
"  corral ls --json | jq '.sandboxes[] | select(.state == \"halted\")'\n",
};

static const struct option ls_options[] = {
	CONN_OPTIONS,
	{ "json", no_argument, NULL, OPT_JSON },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct ls_args {
	bool json, quiet;
};

static int ls_option(void *arg, int opt, const char *val)
{
	struct ls_args *a = arg;

	if (opt == OPT_JSON)
		a->json = true;
	else if (opt == 'q')
		a->quiet = true;
	else
		return verb_usage_error(&ls_verb, "option %d is not handled", opt);
	return 0;
}

enum { COL_ID, COL_STATE, COL_AGE, COL_CPU, COL_MEM, COL_LABELS, NCOLS };

static const char *const col_names[NCOLS] = {
	"ID", "STATE", "AGE", "CPU", "MEM PEAK", "LABELS",
};

struct row {
	char *cell[NCOLS];
};

/* "2026-11-30T06:26:17Z", with or without a fraction of a second */
static bool parse_time(const char *s, time_t *t)
{
	struct tm tm = { 0 };
	const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;

	if (!end)
		return false;
	if (*end == '.')
		for (end++; *end >= '0' && *end <= '9'; end++)
			;
	if (strcmp(end, "Z"))
		return false;
	*t = timegm(&tm);
	return *t != (time_t)-1;
}

static char *age_cell(const char *created, time_t now)
{
	long long s;
	time_t t;
	char *out;
	int n;

	if (!parse_time(created, &t))
		return strdup("?");
	s = now > t ? (long long)(now - t) : 0;
	if (s < 120)
		n = asprintf(&out, "%llds", s);
	else if (s < 2 * 3600)
		n = asprintf(&out, "%lldm", s / 60);
	else if (s < 2 * 86400)
		n = asprintf(&out, "%lldh", s / 3600);
	else
		n = asprintf(&out, "%lldd", s / 86400);
	return n < 0 ? NULL : out;
}

static char *cpu_cell(const json_t *meters)
{
	const json_t *v = json_object_get(meters, "cpu_seconds");
	char *out;

	if (!json_is_number(v))
		return strdup("-");
	if (asprintf(&out, "%.2fs", json_number_value(v)) < 0)
		return NULL;
	return out;
}

static char *mem_cell(const json_t *meters)
{
	const json_t *v = json_object_get(meters, "memory_peak_bytes");
	char buf[32];

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return strdup("-");
	corral_format_size((uint64_t)json_integer_value(v), buf, sizeof(buf));
	return strdup(buf);
}

/*
 * KEY=VALUE,... with each key and value as printable_field() shows it: a
 * label is what its creator chose (an MCP agent's sandbox_create too),
 * and {"owner": "ci,approved=yes"} read as two labels.
 */
static char *labels_cell(const json_t *labels)
{
	const char *key;
	char *buf = NULL;
	size_t size = 0;
	json_t *val;
	FILE *m;
	bool first = true, ok = true;

	if (!json_object_size(labels))
		return strdup("-");
	m = open_memstream(&buf, &size);
	if (!m)
		return NULL;
	json_object_foreach((json_t *)labels, key, val) {
		const char *s = json_string_value(val);
		char *k = printable_field(key, strlen(key));
		char *v = printable_field(s ? s : "?", s ? json_string_length(val) : 1);

		ok = ok && k && v;
		fprintf(m, "%s%s=%s", first ? "" : ",", k ? k : "", v ? v : "");
		free(k);
		free(v);
		first = false;
	}
	if (fclose(m) == EOF || !ok) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int fill_row(struct row *r, const json_t *sb, time_t now)
{
	const char *id = json_string_value(json_object_get(sb, "id"));
	const char *state = json_string_value(json_object_get(sb, "state"));
	const json_t *meters = json_object_get(sb, "meters");
	int i;

	r->cell[COL_ID] = printable(id ? id : "?", id ? strlen(id) : 1);
	r->cell[COL_STATE] = printable(state ? state : "?", state ? strlen(state) : 1);
	r->cell[COL_AGE] = age_cell(json_string_value(json_object_get(sb, "created")), now);
	r->cell[COL_CPU] = cpu_cell(meters);
	r->cell[COL_MEM] = mem_cell(meters);
	r->cell[COL_LABELS] = labels_cell(json_object_get(sb, "labels"));
	for (i = 0; i < NCOLS; i++)
		if (!r->cell[i])
			return out_of_memory("printing the sandboxes");
	return 0;
}

static void free_rows(struct row *rows, size_t n)
{
	size_t i;
	int j;

	for (i = 0; i < n; i++)
		for (j = 0; j < NCOLS; j++)
			free(rows[i].cell[j]);
	free(rows);
}

static void print_row(const char *const *cell, const int *width)
{
	int i;

	for (i = 0; i < NCOLS - 1; i++)
		printf("%-*s  ", width[i], cell[i]);
	printf("%s\n", cell[NCOLS - 1]);
}

static int print_table(const json_t *list)
{
	size_t n = json_array_size(list), i;
	time_t now = time(NULL);
	int width[NCOLS], j, code = 0;
	struct row *rows;

	rows = calloc(n ? n : 1, sizeof(*rows));
	if (!rows)
		return out_of_memory("printing the sandboxes");
	for (j = 0; j < NCOLS; j++)
		width[j] = strlen(col_names[j]);
	for (i = 0; i < n && !code; i++) {
		code = fill_row(&rows[i], json_array_get(list, i), now);
		for (j = 0; j < NCOLS && !code; j++)
			if ((int)strlen(rows[i].cell[j]) > width[j])
				width[j] = strlen(rows[i].cell[j]);
	}
	if (!code) {
		print_row(col_names, width);
		for (i = 0; i < n; i++)
			print_row((const char *const *)rows[i].cell, width);
	}
	free_rows(rows, n);
	return code;
}

static int print_ids(const json_t *list)
{
	size_t i;
	json_t *sb;

	json_array_foreach(list, i, sb) {
		const char *id = json_string_value(json_object_get(sb, "id"));

		if (id && client_valid_id(id) && puts(id) == EOF)
			return EXIT_CORRAL;
	}
	return 0;
}

int cmd_ls(int argc, char **argv)
{
	struct ls_args a = { 0 };
	struct conn c = { 0 };
	json_t *o = NULL, *list;
	int code;

	code = verb_parse(&ls_verb, ls_options, ":hq", argc, argv, &c,
			  ls_option, &a);
	if (code)
		goto out;
	if (optind < argc) {
		code = verb_usage_error(&ls_verb, "ls takes no operands (got \"%s\")",
					argv[optind]);
		goto out;
	}
	if (a.json && a.quiet) {
		code = verb_usage_error(&ls_verb, "--json and --quiet exclude each other");
		goto out;
	}
	code = conn_open(&c, &ls_verb);
	if (code)
		goto out;
	o = conn_call_json(&c, "GET", "/v1/sandboxes", NULL);
	if (!o) {
		code = EXIT_CORRAL;
		goto out;
	}
	list = json_object_get(o, "sandboxes");
	if (!json_is_array(list)) {
		cli_error("the daemon's answer has no list of sandboxes");
		code = EXIT_CORRAL;
	} else {
		code = a.json ? print_json(o) : a.quiet ? print_ids(list) :
		       print_table(list);
	}
out:
	json_decref(o);
	conn_close(&c);
	return code == HELP_SHOWN ? 0 : verb_finish(code);
}
