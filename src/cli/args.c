/*
 * args.c - a client verb's command line: its --help, usage errors, the
 * options every verb shares, and the JSON body built from the rest.
 */
#include "client.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char conn_help[] =
"\n"
"Connection (every verb that talks to the daemon):\n"
"  --socket PATH        the daemon's unix socket; default: $CORRAL_SOCKET,\n"
"                       else /run/corral/corral.sock as root, else\n"
"                       $XDG_RUNTIME_DIR/corral.sock, where `corral serve`\n"
"                       makes it\n"
"  --url URL            talk to the daemon over TCP instead: http://HOST:PORT,\n"
"                       or https:// when `corral serve --listen` has\n"
"                       --tls-cert; needs --token-file\n"
"  --token-file FILE    the bearer token for --url: the first line of FILE\n"
"  --ca-file FILE       with an https:// --url: the PEM certificate(s) to\n"
"                       verify the daemon's by, instead of the system's\n"
"  --cert-file FILE     with an https:// --url: a PEM client certificate, for\n"
"                       a daemon with --tls-client-ca (the token is still\n"
"                       needed)\n"
"  --key-file FILE      its PEM private key (without a passphrase)\n"
"  -h, --help           this text\n"
"The daemon's refusals are printed as \"corral: DETAIL (HTTP STATUS)\".\n";

/* Not for a verb without --json (mcp: its stdout is the protocol's). */
static const char json_help[] =
"With --json, every error (a usage error too) is also one object on stdout:\n"
"{\"error\": CODE, \"detail\": SENTENCE}, CODE the daemon's (with\n"
"\"http_status\"), \"usage\", or a word of the CLI's own for what failed\n"
"here: \"unreachable\", \"not_found\", \"forbidden\" ... \"failed\"\n"
"(docs/API.md, \"The CLI's own errors\").\n";

const struct option verb_json_options[] = {
	CONN_OPTIONS,
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

int set_json_flag(void *arg, int opt, const char *val)
{
	bool *json = arg;

	if (opt != OPT_JSON)
		return EXIT_CORRAL;
	*json = true;
	return 0;
}

int verb_help(const struct verb *v)
{
	fputs(v->head, stdout);
	fputs(conn_help, stdout);
	if (!v->no_json)
		fputs(json_help, stdout);
	fputs("\n", stdout);
	fputs(v->tail, stdout);
	return 0;
}

int verb_usage_status(const struct verb *v)
{
	return v->usage_status ? v->usage_status : 2;
}

int verb_usage_error(const struct verb *v, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	cli_error("%s; see `corral %s --help`", buf, v->name);
	cli_json_amend("usage", NULL, 0);
	return verb_usage_status(v);
}

static bool conn_option(struct conn *c, int opt, const char *arg)
{
	switch (opt) {
	case OPT_SOCKET:
		c->socket = arg;
		c->socket_from = "--socket";
		return true;
	case OPT_URL:
		c->url = arg;
		return true;
	case OPT_TOKEN_FILE:
		c->token_file = arg;
		return true;
	case OPT_CA_FILE:
		c->ca_file = arg;
		return true;
	case OPT_CERT_FILE:
		c->cert_file = arg;
		return true;
	case OPT_KEY_FILE:
		c->key_file = arg;
		return true;
	}
	return false;
}

static int bad_option(const struct verb *v, int opt, char **argv)
{
	const char *arg = argv[optind - 1];
	char s[3] = { '-', (char)optopt, 0 };
	const char *hint;

	if (opt == ':')
		return verb_usage_error(v, "option \"%s\" needs a value", arg);
	if (optopt > 0 && optopt < 256)
		arg = s;	/* argv's may be a cluster, "-it" */
	/* a docker user's option: name corral's way, not only the error */
	hint = docker_flag_hint(v->name, arg);
	if (hint)
		return verb_usage_error(v, "unknown option \"%s\": %s", arg, hint);
	return verb_usage_error(v, "unknown option \"%s\"", arg);
}

int verb_parse_more(const struct verb *v, const struct option *opts,
		    const char *shorts, int argc, char **argv, struct conn *c,
		    option_fn fn, void *arg)
{
	int opt, code, idx = -1;
	const char *prefix;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, shorts, opts, &idx)) != -1) {
		prefix = option_abbreviated(argv, opts, idx);
		if (prefix) {
			say_abbreviated(v->name, prefix, opts[idx].name);
			return verb_usage_status(v);
		}
		if (value_is_dashes(argv, idx))
			return verb_usage_error(v, "option \"--%s\" needs a value (got "
						"\"--\", which ends the options)",
						opts[idx].name);
		idx = -1;
		if (opt == 'h') {
			verb_help(v);
			return HELP_SHOWN;
		}
		if (opt == ':' || opt == '?')
			return bad_option(v, opt, argv);
		if (conn_option(c, opt, optarg))
			continue;
		code = fn ? fn(arg, opt, optarg) : 0;
		if (code)
			return code;
	}
	return 0;
}

int verb_parse(const struct verb *v, const struct option *opts,
	       const char *shorts, int argc, char **argv, struct conn *c,
	       option_fn fn, void *arg)
{
	/* an error of the command line is JSON too if --json is anywhere on it */
	cli_json_scan(argc, argv, shorts[0] == '+' ? shorts + 1 : shorts, opts,
		      OPT_JSON);
	/* 0, not 1: glibc then also forgets the "+" of an earlier parse */
	optind = 0;
	return verb_parse_more(v, opts, shorts, argc, argv, c, fn, arg);
}

int verb_duration(const struct verb *v, const char *flag, const char *arg,
		  uint64_t *ms)
{
	struct corral_err err = { 0 };

	if (corral_parse_duration(arg, ms, &err) < 0)
		return verb_usage_error(v, "%s: %s", flag, err.msg);
	if (*ms > DURATION_MAX_MS)
		return verb_usage_error(v, "%s: too long (got \"%s\")", flag, arg);
	return 0;
}

bool client_valid_id(const char *id)
{
	struct corral_err err;

	return corral_check_sandbox_id(id, &err) == 0;
}

int verb_check_id(const struct verb *v, const char *id)
{
	if (client_valid_id(id))
		return 0;
	return verb_usage_error(v, "\"%s\" is not a sandbox id (1 to %d letters, digits and ._-, as `corral create` prints them)",
				id, CORRAL_SANDBOX_ID_MAX);
}

int body_put(json_t *o, const char *key, json_t *v)
{
	if (json_object_set_new(o, key, v) < 0)
		return out_of_memory("building the request body");
	return 0;
}

int body_put_text(const struct verb *v, json_t *o, const char *key,
		  const char *flag, const char *text)
{
	json_t *s = json_string(text);

	if (!s)
		return verb_usage_error(v, "%s: \"%s\" is not UTF-8 text", flag,
					text);
	return body_put(o, key, s);
}

int body_put_pair(const struct verb *v, json_t *obj, const char *flag,
		  const char *arg)
{
	const char *eq = strchr(arg, '=');
	json_t *val;
	char *key;
	int code = 0;

	if (!eq || eq == arg)
		return verb_usage_error(v, "%s: expected KEY=VALUE (got \"%s\")",
					flag, arg);
	key = strndup(arg, eq - arg);
	if (!key)
		return out_of_memory("reading an option");
	if (json_object_get(obj, key)) {
		code = verb_usage_error(v, "%s: %s is given twice", flag, key);
	} else {
		/* jansson checks both key and value are UTF-8, and takes val */
		val = json_string(eq + 1);
		if (!val || json_object_set_new(obj, key, val) < 0)
			code = verb_usage_error(v, "%s: \"%s\" is not UTF-8 text",
						flag, arg);
	}
	free(key);
	return code;
}

int body_put_seconds(json_t *body, const char *key, uint64_t ms)
{
	if (ms % 1000 == 0)
		return body_put(body, key, json_integer((json_int_t)(ms / 1000)));
	return body_put(body, key, json_real((double)ms / 1000.0));
}
