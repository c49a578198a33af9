/* jget - print one field of the JSON document on stdin, for the tests.
 *
 *   jget [-n | -l | -t] [-f FILE] PATH < doc.json
 *   jget -o [KEY VALUE]...
 *   jget -a [STRING]...
 *
 * PATH is dotted: "limits_hit.0", "result.exit_code".  An element of an
 * array is taken by its index (negative from the end).  Strings print
 * bare, null as "None", numbers as they read, objects, arrays and
 * booleans as JSON: what tests/lib.sh's json() printed when it started a
 * Python for each query (about 50 ms of CPU each here, thousands a
 * suite).  -n prints null as "null" (serve.sh's queries print what
 * json.dumps makes of None); -l prints the length of the array, object
 * or string (in characters) instead, as Python's len(); -t its type: object,
 * array, string, integer, real, true, false or null.  A missing field,
 * a bad index or a document that does not parse exits 1 with the reason
 * on stderr.  -f reads the document from FILE instead of stdin: a
 * function of the harness's whose last command is jget, with no
 * redirection, is exec'd by bash in place of a $( )'s subshell, a fork
 * less (4-7 ms of CPU on a pti=on guest, thousands a suite).
 *
 * -o writes a JSON object of the KEY VALUE pairs instead, a VALUE that
 * starts with "json:" as the JSON after it, any other as a string: what
 * serve.sh's jbody() had a Python make for each request body, byte for
 * byte (a byte that is not UTF-8 as "\udcXX", as Python's argv has it).
 * -a writes the JSON array of its arguments, as strings.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static json_t *step(json_t *v, const char *key)
{
	char *end;
	long i;

	if (json_is_object(v))
		return json_object_get(v, key);
	if (!json_is_array(v))
		return NULL;
	errno = 0;
	i = strtol(key, &end, 10);
	if (errno || end == key || *end)
		return NULL;
	if (i < 0)
		i += (long)json_array_size(v);
	if (i < 0)
		return NULL;
	return json_array_get(v, (size_t)i);
}

/* Python's repr of a double: the fewest digits that read back as the
 * same value, written out plainly for exponents -4 to 15 ("3600.0",
 * "0.0001"), else as "1e+16" */
static void put_real(double d)
{
	char e[40], digits[20];
	int prec, exp, n, i;
	char *p;

	if (!isfinite(d)) {
		fputs(isnan(d) ? "NaN" : d < 0 ? "-Infinity" : "Infinity", stdout);
		return;
	}
	for (prec = 0; prec < 17; prec++) {
		snprintf(e, sizeof(e), "%.*e", prec, d);
		if (strtod(e, NULL) == d)
			break;
	}
	p = strchr(e, 'e');
	exp = atoi(p + 1);
	if (exp < -4 || exp >= 16) {
		fputs(e, stdout);
		return;
	}
	n = 0;
	for (i = 0; e + i < p; i++)
		if (e[i] >= '0' && e[i] <= '9')
			digits[n++] = e[i];
	if (signbit(d))
		putchar('-');
	if (exp < 0) {
		fputs("0.", stdout);
		for (i = exp + 1; i < 0; i++)
			putchar('0');
		fwrite(digits, 1, (size_t)n, stdout);
		return;
	}
	for (i = 0; i <= exp; i++)
		putchar(i < n ? digits[i] : '0');
	putchar('.');
	if (n > exp + 1)
		fwrite(digits + exp + 1, 1, (size_t)(n - exp - 1), stdout);
	else
		putchar('0');
}

/* the length of the UTF-8 sequence at p (at most left bytes), its
 * code point in *c; 0 if it is not one that Python's strict decoder
 * takes (overlong, a surrogate, past U+10FFFF, cut short) */
static int utf8_seq(const unsigned char *p, size_t left, unsigned int *c)
{
	int n = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 :
		p[0] >= 0xe0 && p[0] < 0xf0 ? 3 : p[0] >= 0xf0 && p[0] < 0xf5 ? 4 : 0;
	unsigned int v;

	if (!n || (size_t)n > left)
		return 0;
	v = n == 1 ? p[0] : p[0] & (0x3f >> (n - 1));
	for (int i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && (v < 0x800 || (v >= 0xd800 && v < 0xe000))) ||
	    (n == 4 && (v < 0x10000 || v > 0x10ffff)))
		return 0;
	*c = v;
	return n;
}

/* a string as Python's json.dumps writes it: ASCII only, a character
 * beyond the BMP as a surrogate pair, a byte that is not UTF-8 as the
 * lone surrogate Python's surrogateescape decodes it to */
static void put_string(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	unsigned int c;
	int n;

	putchar('"');
	while (p < end) {
		n = utf8_seq(p, (size_t)(end - p), &c);
		if (!n) {
			c = 0xdc00 + *p;
			n = 1;
		}
		p += n;
		switch (c) {
		case '"':  fputs("\\\"", stdout); continue;
		case '\\': fputs("\\\\", stdout); continue;
		case '\n': fputs("\\n", stdout); continue;
		case '\r': fputs("\\r", stdout); continue;
		case '\t': fputs("\\t", stdout); continue;
		case '\b': fputs("\\b", stdout); continue;
		case '\f': fputs("\\f", stdout); continue;
		}
		if (c >= 0x20 && c < 0x7f)
			putchar((int)c);
		else if (c < 0x10000)
			printf("\\u%04x", c);
		else
			printf("\\u%04x\\u%04x", 0xd800 + ((c - 0x10000) >> 10),
			       0xdc00 + ((c - 0x10000) & 0x3ff));
	}
	putchar('"');
}

/* JSON as Python's json.dumps writes it: ", " and ": " between items */
static void put_json(json_t *v)
{
	const char *key;
	json_t *item;
	size_t i;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		putchar('{');
		i = 0;
		json_object_foreach(v, key, item) {
			if (i++)
				fputs(", ", stdout);
			put_string(key, strlen(key));
			fputs(": ", stdout);
			put_json(item);
		}
		putchar('}');
		break;
	case JSON_ARRAY:
		putchar('[');
		json_array_foreach(v, i, item) {
			if (i)
				fputs(", ", stdout);
			put_json(item);
		}
		putchar(']');
		break;
	case JSON_STRING:
		put_string(json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		printf("%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		put_real(json_real_value(v));
		break;
	case JSON_TRUE:
		fputs("true", stdout);
		break;
	case JSON_FALSE:
		fputs("false", stdout);
		break;
	case JSON_NULL:
		fputs("null", stdout);
		break;
	}
}

/* the value as Python's print() of it: a string bare, null as None */
static void print_value(json_t *v, const char *null)
{
	if (json_is_string(v))
		fwrite(json_string_value(v), 1, json_string_length(v), stdout);
	else if (json_is_null(v))
		fputs(null, stdout);
	else
		put_json(v);
	putchar('\n');
}

/* Python's len(): items, or the characters of a UTF-8 string */
static int print_length(json_t *v)
{
	const char *s;
	size_t i, n = 0;

	if (json_is_array(v))
		n = json_array_size(v);
	else if (json_is_object(v))
		n = json_object_size(v);
	else if (json_is_string(v)) {
		s = json_string_value(v);
		for (i = 0; i < json_string_length(v); i++)
			n += ((unsigned char)s[i] & 0xc0) != 0x80;
	} else
		return -1;
	printf("%zu\n", n);
	return 0;
}

/* -o: the object of the KEY VALUE pairs in argv, a later KEY replacing
 * an earlier one's value in its place, as a Python dict does */
static int put_object(int argc, char **argv)
{
	json_error_t jerr;
	json_t *o, *v;

	if (argc % 2) {
		fprintf(stderr, "jget -o: %s has no value\n", argv[argc - 1]);
		return 2;
	}
	o = json_object();
	for (int i = 0; o && i < argc; i += 2) {
		if (!strncmp(argv[i + 1], "json:", 5)) {
			v = json_loads(argv[i + 1] + 5, JSON_DECODE_ANY, &jerr);
			if (!v) {
				fprintf(stderr, "jget -o: %s: %s\n", argv[i], jerr.text);
				return 1;
			}
		} else {
			v = json_stringn_nocheck(argv[i + 1], strlen(argv[i + 1]));
		}
		if (!v || json_object_set_new_nocheck(o, argv[i], v) < 0)
			return 1;
	}
	if (!o)
		return 1;
	put_json(o);
	putchar('\n');
	json_decref(o);
	if (fflush(stdout) == EOF || ferror(stdout)) {
		perror("jget: stdout");
		return 1;
	}
	return 0;
}

/* -a: the array of the strings in argv */
static int put_array(int argc, char **argv)
{
	putchar('[');
	for (int i = 0; i < argc; i++) {
		if (i)
			fputs(", ", stdout);
		put_string(argv[i], strlen(argv[i]));
	}
	puts("]");
	if (fflush(stdout) == EOF || ferror(stdout)) {
		perror("jget: stdout");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	json_error_t jerr;
	json_t *doc, *v;
	char *path, *key, *save = NULL;
	const char *null = "None";
	static const char *const types[] = {
		[JSON_OBJECT] = "object", [JSON_ARRAY] = "array",
		[JSON_STRING] = "string", [JSON_INTEGER] = "integer",
		[JSON_REAL] = "real", [JSON_TRUE] = "true",
		[JSON_FALSE] = "false", [JSON_NULL] = "null",
	};
	bool length = false, type = false;
	const char *file = NULL;
	FILE *in = stdin;
	int opt;

	if (argc > 1 && !strcmp(argv[1], "-o"))
		return put_object(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "-a"))
		return put_array(argc - 2, argv + 2);
	while ((opt = getopt(argc, argv, "+nltf:")) != -1) {
		switch (opt) {
		case 'n':
			null = "null";
			break;
		case 'l':
			length = true;
			break;
		case 't':
			type = true;
			break;
		case 'f':
			file = optarg;
			break;
		default:
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: jget [-n | -l | -t] [-f FILE] PATH < doc.json\n");
		return 2;
	}
	if (file && !(in = fopen(file, "re"))) {
		fprintf(stderr, "jget: %s: %s\n", file, strerror(errno));
		return 1;
	}
	doc = json_loadf(in, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	if (!doc) {
		fprintf(stderr, "jget: %s, line %d: %s\n", file ? file : "stdin", jerr.line, jerr.text);
		return 1;
	}
	path = strdup(argv[optind]);
	if (!path)
		return 1;
	v = doc;
	/* strtok_r would skip empty keys; Python's split(".") keeps them */
	for (key = path; v; key = save + 1) {
		save = strchr(key, '.');
		if (save)
			*save = '\0';
		v = step(v, key);
		if (!save)
			break;
	}
	if (!v) {
		fprintf(stderr, "jget: no %s in the document\n", argv[optind]);
		return 1;
	}
	if (type)
		puts(types[json_typeof(v)]);
	else if (!length)
		print_value(v, null);
	else if (print_length(v) < 0) {
		fprintf(stderr, "jget: %s has no length\n", argv[optind]);
		return 1;
	}
	if (fflush(stdout) == EOF || ferror(stdout)) {
		perror("jget: stdout");
		return 1;
	}
	json_decref(doc);
	free(path);
	return 0;
}
