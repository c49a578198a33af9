/*
 * unit_egress.c - the egress decision layer: pattern parsing, name and
 * address matching, the resolution guard, the hosts map.  Every row of
 * every table counts, and reports, as a test of its own.
 */
#include "egress.h"
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/ipv6.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <sys/un.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Report one table row as a test: ok/not ok with its description. */
static void row_done(int before, const char *table, const char *what)
{
	if (unit_failed_checks == before) {
		unit_passed++;
		printf("ok - %s: %s\n", table, what);
	} else {
		unit_failed++;
		printf("not ok - %s: %s\n", table, what);
	}
}

/* ---- patterns -------------------------------------------------------- */

static const struct {
	const char *text;
	bool allow;
	enum egress_kind kind;
	const char *what;	/* canonical name, or network address */
	unsigned prefix;
	uint16_t port;
} good_patterns[] = {
	{ "pypi.org", true, EGRESS_NAME, "pypi.org", 0, 0 },
	{ "PyPI.ORG.", true, EGRESS_NAME, "pypi.org", 0, 0 },
	{ "api.github.com:443", true, EGRESS_NAME, "api.github.com", 0, 443 },
	{ "a_b.example-1.org:1", true, EGRESS_NAME, "a_b.example-1.org", 0, 1 },
	{ "xn--bcher-kva.example:65535", true, EGRESS_NAME,
	  "xn--bcher-kva.example", 0, 65535 },
	{ "*.example.com", true, EGRESS_SUBDOMAINS, "example.com", 0, 0 },
	{ "*.Example.COM.:8443", true, EGRESS_SUBDOMAINS, "example.com", 0, 8443 },
	{ "*.co.uk", true, EGRESS_SUBDOMAINS, "co.uk", 0, 0 },
	{ "10.1.2.0/24", true, EGRESS_NET, "10.1.2.0", 24, 0 },
	{ "10.1.2.0/24:5432", true, EGRESS_NET, "10.1.2.0", 24, 5432 },
	{ "192.0.2.10", true, EGRESS_NET, "192.0.2.10", 32, 0 },
	{ "192.0.2.10.:8080", true, EGRESS_NET, "192.0.2.10", 32, 8080 },
	{ "2852039166", true, EGRESS_NET, "169.254.169.254", 32, 0 },
	{ "0xa9fea9fe", true, EGRESS_NET, "169.254.169.254", 32, 0 },
	{ "0XA9FEA9FE:80", true, EGRESS_NET, "169.254.169.254", 32, 80 },
	{ "0251.0376.0251.0376", true, EGRESS_NET, "169.254.169.254", 32, 0 },
	{ "127.1", true, EGRESS_NET, "127.0.0.1", 32, 0 },
	{ "10.0/8", true, EGRESS_NET, "10.0.0.0", 8, 0 },
	{ "[::1]", true, EGRESS_NET, "::1", 128, 0 },
	{ "[2001:db8::/32]:443", true, EGRESS_NET, "2001:db8::", 32, 443 },
	{ "[2001:db8::]/32:443", true, EGRESS_NET, "2001:db8::", 32, 443 },
	{ "[2001:DB8::1]:8443", true, EGRESS_NET, "2001:db8::1", 128, 8443 },
	{ "[::ffff:10.0.0.0/104]", true, EGRESS_NET, "10.0.0.0", 8, 0 },
	{ "[::ffff:169.254.169.254]", true, EGRESS_NET, "169.254.169.254", 32, 0 },
	{ "*", false, EGRESS_ANY, "", 0, 0 },
	{ "*:22", false, EGRESS_ANY, "", 0, 22 },
	{ "*.com", false, EGRESS_SUBDOMAINS, "com", 0, 0 },
	{ "com", false, EGRESS_NAME, "com", 0, 0 },
	{ "0.0.0.0/0", false, EGRESS_NET, "0.0.0.0", 0, 0 },
	{ "[::/0]:25", false, EGRESS_NET, "::", 0, 25 },
};

static void check_good_pattern(size_t i)
{
	struct corral_err err = { 0 };
	struct egress_pattern p;
	char addr[INET6_ADDRSTRLEN] = "";
	int r;

	memset(&p, 0x5a, sizeof(p));
	r = egress_pattern_parse(good_patterns[i].text, &p,
				 good_patterns[i].allow, &err);
	if (r)
		fprintf(stderr, "  %s: %s\n", good_patterns[i].text, err.msg);
	CHECK(r == 0);
	if (r)
		return;
	CHECK(p.kind == good_patterns[i].kind);
	CHECK(p.allow == good_patterns[i].allow);
	CHECK(p.port == good_patterns[i].port);
	CHECK(!strcmp(p.text, good_patterns[i].text));
	if (p.kind == EGRESS_NET) {
		CHECK(inet_ntop(p.family, p.addr, addr, sizeof(addr)) != NULL);
		CHECK(!strcmp(addr, good_patterns[i].what));
		CHECK(p.prefix == good_patterns[i].prefix);
	} else if (p.kind != EGRESS_ANY) {
		CHECK(!strcmp(p.name, good_patterns[i].what));
	}
}

static const struct {
	const char *text;
	bool allow;
	const char *want;
} bad_patterns[] = {
	{ "", true, "empty pattern" },
	{ "*", true, "\"*\" would allow every host" },
	{ "*:443", true, "\"*\" would allow every host" },
	{ "*.com", true, "whole top-level domain is not allowed" },
	{ "*.COM.", true, "whole top-level domain is not allowed" },
	{ "com", true, "a name of one label (a bare top-level domain)" },
	{ "com.:443", true, "a name of one label" },
	{ "0.0.0.0/0", true, "a /0 network would allow every address" },
	{ "0/0:443", true, "a /0 network" },
	{ "[::/0]", true, "a /0 network" },
	{ "[::ffff:0:0/96]", true, "a /0 network" },
	{ "10.1.2.3/24", true,
	  "address has bits set beyond the /24 prefix (did you mean 10.1.2.0/24?)" },
	{ "[2001:db8::1/32]", true, "(did you mean [2001:db8::]/32?)" },
	/* inet_aton reads "10" as 0.0.0.10 */
	{ "10/8", true, "bits set beyond the /8 prefix (did you mean 0.0.0.0/8?)" },
	{ "10.0.0.0/33", true, "prefix length must be a number from 0 to 32" },
	{ "10.0.0.0/08", true, "prefix length" },
	{ "10.0.0.0/", true, "prefix length" },
	{ "10.0.0.0/-1", true, "prefix length" },
	{ "[2001:db8::/129]", true, "prefix length must be a number from 0 to 128" },
	{ "2001:db8::1", true, "an IPv6 address must be in brackets" },
	{ "::1", true, "an IPv6 address must be in brackets" },
	{ "example.com:443:80", true, "more than one ':'" },
	{ "[10.0.0.1]", true, "brackets are only for IPv6 addresses" },
	{ "[::1", true, "'[' without a closing ']'" },
	{ "[::1]x", true, "unexpected text after ']'" },
	{ "[::1]:", true, "port must be a number from 1 to 65535" },
	{ "[fe80::1%eth0]", true, "not an IPv6 address inside [...]" },
	{ "[]", true, "not an IPv6 address inside [...]" },
	{ "example.com:0", true, "port must be a number from 1 to 65535" },
	{ "example.com:65536", true, "port must be" },
	{ "example.com:080", true, "port must be" },
	{ "example.com:http", true, "port must be" },
	{ "example.com:", true, "port must be" },
	{ "example.com:+443", true, "port must be" },
	{ ":443", true, "no host before \":PORT\"" },
	{ "a.*.com", true, "'*' may only be the whole first label" },
	{ "*example.com", true, "'*' may only be the whole first label" },
	{ "**.example.com", true, "'*' may only be the whole first label" },
	{ "*.", true, "'*' may only be the whole first label" },
	{ "*.*.example.com", false, "'*' may only be the whole first label" },
	{ "*.10.0.0.1", true, "a wildcard cannot cover an IP address" },
	{ "exa mple.com", true, "contains a space" },
	{ "allowed.test@evil.test", true, "contains \"@\"" },
	{ "example.com/path", true, "a host pattern has no path: give the host alone" },
	{ "1.2.3.4.5/8", true, "not an IPv4 address before '/'" },
	{ "https://example.com", true, "a URL, not a host pattern: give its host" },
	{ "http://example.com:8080/x", true, "a URL, not a host pattern" },
	{ "ex%61mple.com", true, "contains \"%\"" },
	{ "b\xc3\xbc" "cher.example", true, "non-ASCII byte (\\xc3); write international names in punycode" },
	{ "tab\t.example", true, "a control character (\\x09)" },
	{ "a..b.example", true, "host name has an empty label" },
	{ ".example.com", true, "host name has an empty label" },
	{ "example.com..", true, "host name has an empty label" },
	{ "1.2.3.256", true, "looks like an IPv4 address but is not a valid one" },
	{ "1.2.3.4.5", true, "looks like an IPv4 address" },
	{ "4294967296", false, "looks like an IPv4 address" },
	{ "example.0x1f", true, "looks like an IPv4 address" },
	{ "1.2.3.4 junk", true, "contains a space" },
};

static void check_bad_pattern(size_t i)
{
	struct corral_err err = { 0 };
	struct egress_pattern p;
	char got[400];

	CHECK(egress_pattern_parse(bad_patterns[i].text, &p,
				   bad_patterns[i].allow, &err) == -EINVAL);
	CHECK(err.code == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, bad_patterns[i].want);
	/* the message names the pattern, if it is printable */
	if (!strpbrk(bad_patterns[i].text, "\t\x80\xc3\"\\")) {
		snprintf(got, sizeof(got), "(got \"%s\")", bad_patterns[i].text);
		CHECK_STR_CONTAINS(err.msg, got);
	}
}

TEST(pattern_limits)
{
	struct corral_err err = { 0 };
	struct egress_pattern p;
	char name[400], why[256];
	size_t i;

	/* a 63-byte label is fine, 64 is not */
	memset(name, 'a', 63);
	strcpy(name + 63, ".example");
	CHECK(egress_pattern_parse(name, &p, true, &err) == 0);
	memset(name, 'a', 64);
	strcpy(name + 64, ".example");
	CHECK(egress_pattern_parse(name, &p, true, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "label longer than 63 characters");
	/* 253 bytes in all is fine, also with a trailing dot and a port */
	for (i = 0; i < 253; i++)
		name[i] = (i % 10 == 9) ? '.' : 'b';
	name[253] = '\0';
	CHECK(egress_pattern_parse(name, &p, true, &err) == 0);
	CHECK(strlen(p.name) == 253);
	strcpy(name + 253, ".:443");
	CHECK(egress_pattern_parse(name, &p, true, &err) == 0);
	name[253] = 'c';
	name[254] = '\0';
	CHECK(egress_pattern_parse(name, &p, true, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "longer than 253 characters");
	/* the quoted pattern is cut short */
	CHECK(strlen(err.msg) < 200);
	CHECK_STR_CONTAINS(err.msg, "\"...)");
	memset(name, 'x', 300);
	name[300] = '\0';
	CHECK(egress_pattern_parse(name, &p, true, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "pattern longer than 270 characters");
	/* a NUL inside a length-delimited pattern */
	CHECK(egress_pattern_parsen("pypi.org\0.evil", 14, &p, true, why,
				    sizeof(why)) == -EINVAL);
	CHECK_STR_CONTAINS(why, "contains a NUL byte");
	CHECK(egress_pattern_parse(NULL, &p, true, &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "empty pattern (got \"\")");
}

/* ---- deciding by name ------------------------------------------------ */

static struct egress *build(const char *const *allow, const char *const *deny,
			    const char *hosts_json)
{
	struct corral_err err = { 0 };
	struct corral_policy p;
	struct egress *e;

	corral_policy_init(&p);
	for (; allow && *allow; allow++)
		if (corral_policy_add_allow(&p, *allow, &err))
			fprintf(stderr, "  allow %s: %s\n", *allow, err.msg);
	for (; deny && *deny; deny++)
		if (corral_policy_add_deny(&p, *deny, &err))
			fprintf(stderr, "  deny %s: %s\n", *deny, err.msg);
	if (hosts_json &&
	    corral_policy_load_string(&p, hosts_json, strlen(hosts_json),
				      "hosts.json", &err))
		fprintf(stderr, "  hosts: %s\n", err.msg);
	e = egress_new(&p, &err);
	if (!e)
		fprintf(stderr, "  egress_new: %s\n", err.msg);
	corral_policy_free(&p);
	return e;
}

static const char *const names_allow[] = {
	"pypi.org", "*.pythonhosted.org", "api.github.com:443", "*.example.com",
	"multi.test", "multi.test:8443", "mail.test:25", "allowed.test",
	"10.1.2.0/24:5432", "192.0.2.10", "100.64.0.0/10",
	"[2001:db8::/32]:443", NULL,
};
static const char *const names_deny[] = {
	"evil.example.com", "*.internal.example.com",
	"files.pythonhosted.org:80", "*:25", "169.254.0.0/16",
	"100.64.1.0/24", NULL,
};

static const struct {
	const char *host;
	size_t len;		/* 0: strlen(host) */
	uint16_t port;
	int ret;		/* 0, -EACCES or -EINVAL */
	const char *canon;	/* v->host, or NULL to skip */
	const char *reason;	/* a part of v->reason */
} name_cases[] = {
	/* exact names, case, trailing dot */
	{ "pypi.org", 0, 443, 0, "pypi.org", "pypi.org:443 is allowed by \"pypi.org\"" },
	{ "pypi.org", 0, 80, 0, "pypi.org", "allowed" },
	{ "PyPI.Org.", 0, 443, 0, "pypi.org", "pypi.org:443 is allowed" },
	{ "pypi.org", 0, 8080, -EACCES, "pypi.org",
	  "port 8080 of pypi.org is not allowed (allowed ports: 80, 443)" },
	{ "www.pypi.org", 0, 443, -EACCES, "www.pypi.org",
	  "www.pypi.org:443 is not in the allowlist" },
	{ "pypi.org..", 0, 443, -EINVAL, NULL, "empty label" },
	{ "example.org", 0, 443, -EACCES, "example.org",
	  "example.org:443 is not in the allowlist" },
	/* wildcards: subdomains at any depth, never the apex */
	{ "files.pythonhosted.org", 0, 443, 0, NULL,
	  "is allowed by \"*.pythonhosted.org\"" },
	{ "a.b.c.pythonhosted.org", 0, 443, 0, NULL, "allowed" },
	{ "pythonhosted.org", 0, 443, -EACCES, NULL, "not in the allowlist" },
	{ "evilpythonhosted.org", 0, 443, -EACCES, NULL, "not in the allowlist" },
	{ "pythonhosted.org.evil.test", 0, 443, -EACCES, NULL,
	  "not in the allowlist" },
	/* ports */
	{ "api.github.com", 0, 443, 0, NULL, "allowed" },
	{ "api.github.com", 0, 80, -EACCES, NULL,
	  "port 80 of api.github.com is not allowed (allowed ports: 443)" },
	{ "api.github.com", 0, 22, -EACCES, NULL,
	  "port 22 of api.github.com is not allowed (allowed ports: 443)" },
	{ "multi.test", 0, 8443, 0, NULL, "allowed by \"multi.test:8443\"" },
	{ "multi.test", 0, 22, -EACCES, NULL, "(allowed ports: 80, 443, 8443)" },
	{ "pypi.org", 0, 0, -EINVAL, NULL, "port 0 of pypi.org is not a valid port" },
	/* deny wins */
	{ "evil.example.com", 0, 443, -EACCES, "evil.example.com",
	  "evil.example.com:443 is denied by \"evil.example.com\"" },
	{ "EVIL.example.com.", 0, 80, -EACCES, NULL, "denied by" },
	{ "db.internal.example.com", 0, 443, -EACCES, NULL,
	  "db.internal.example.com:443 is denied by \"*.internal.example.com\"" },
	{ "internal.example.com", 0, 443, 0, NULL,
	  "allowed by \"*.example.com\"" },
	{ "files.pythonhosted.org", 0, 80, -EACCES, NULL,
	  "denied by \"files.pythonhosted.org:80\"" },
	{ "mail.test", 0, 25, -EACCES, NULL, "mail.test:25 is denied by \"*:25\"" },
	{ "10.1.2.9", 0, 25, -EACCES, NULL, "denied by \"*:25\"" },
	/* what is not a host name */
	{ "allowed.test", 0, 443, 0, NULL, "allowed" },
	{ "allowed.test@evil.test", 0, 443, -EINVAL, NULL,
	  "\"allowed.test@evil.test\" is not a valid host (not a host name: contains \"@\")" },
	{ "evil.test#allowed.test", 0, 443, -EINVAL, NULL, "contains \"#\"" },
	{ "allowed.test/evil", 0, 443, -EINVAL, NULL, "contains \"/\"" },
	{ "allowed.test evil", 0, 443, -EINVAL, NULL, "contains a space" },
	{ "allowed.test%2eevil", 0, 443, -EINVAL, NULL, "contains \"%\"" },
	{ "allowed.test\0.evil.test", 23, 443, -EINVAL, NULL,
	  "\"allowed.test\\x00.evil.test\" is not a valid host (not a host name: contains a NUL byte)" },
	{ "allowed.test\r\nX: y", 0, 443, -EINVAL, NULL, "\"allowed.test\\x0d\\x0aX: y\"" },
	{ "allowed.test:443", 0, 443, -EINVAL, NULL, "contains \":\"" },
	{ "*.example.com", 0, 443, -EINVAL, NULL, "contains \"*\"" },
	{ "", 0, 443, -EINVAL, NULL, "empty host name" },
	{ "[pypi.org]", 0, 443, -EINVAL, NULL, "not an IPv6 address inside [...]" },
	{ "[fe80::1%eth0]", 0, 443, -EINVAL, NULL, "not an IPv6 address" },
	/* IP literals: judged by IP/CIDR entries only, in any spelling */
	{ "10.1.2.7", 0, 5432, 0, "10.1.2.7", "allowed by \"10.1.2.0/24:5432\"" },
	{ "10.1.2.7", 0, 443, -EACCES, NULL,
	  "port 443 of 10.1.2.7 is not allowed (allowed ports: 5432)" },
	{ "192.0.2.10", 0, 80, 0, NULL, "allowed by \"192.0.2.10\"" },
	{ "3221225994", 0, 443, 0, "192.0.2.10", "allowed" },
	{ "0xc000020a", 0, 443, 0, "192.0.2.10", "allowed" },
	{ "0300.0.02.012", 0, 443, 0, "192.0.2.10", "allowed" },
	{ "192.0.2.10.", 0, 443, 0, "192.0.2.10", "allowed" },
	{ "192.0.2.11", 0, 443, -EACCES, NULL,
	  "192.0.2.11:443 is not in the allowlist (an IP address is allowed only by an IP or CIDR entry)" },
	{ "2852039166", 0, 80, -EACCES, "169.254.169.254",
	  "169.254.169.254:80 is denied by \"169.254.0.0/16\"" },
	{ "0xa9fea9fe", 0, 80, -EACCES, "169.254.169.254", "denied" },
	{ "0XA9FEA9FE", 0, 80, -EACCES, "169.254.169.254", "denied" },
	{ "0251.0376.0251.0376", 0, 80, -EACCES, "169.254.169.254", "denied" },
	{ "169.254.169.254", 0, 80, -EACCES, "169.254.169.254", "denied" },
	{ "169.16689662", 0, 80, -EACCES, "169.254.169.254", "denied" },
	{ "[::ffff:169.254.169.254]", 0, 80, -EACCES, "169.254.169.254", "denied" },
	{ "::ffff:a9fe:a9fe", 0, 80, -EACCES, "169.254.169.254", "denied" },
	{ "127.1", 0, 80, -EACCES, "127.0.0.1",
	  "127.0.0.1:80 is not in the allowlist (an IP address" },
	{ "0", 0, 80, -EACCES, "0.0.0.0", "not in the allowlist" },
	{ "100.64.0.5", 0, 443, 0, NULL, "allowed by \"100.64.0.0/10\"" },
	{ "100.64.1.5", 0, 443, -EACCES, NULL, "denied by \"100.64.1.0/24\"" },
	{ "[2001:db8::5]", 0, 443, 0, "2001:db8::5", "[2001:db8::5]:443 is allowed" },
	{ "2001:db8::5", 0, 443, 0, "2001:db8::5", "allowed" },
	{ "[2001:DB8:0:0::5]", 0, 443, 0, "2001:db8::5", "allowed" },
	{ "2001:db8::5", 0, 80, -EACCES, NULL,
	  "port 80 of 2001:db8::5 is not allowed (allowed ports: 443)" },
	{ "[2001:db9::1]", 0, 443, -EACCES, NULL, "not in the allowlist (an IP" },
	{ "[::1]", 0, 443, -EACCES, "::1", "[::1]:443 is not in the allowlist" },
	/* a name pattern never allows an address, nor the reverse */
	{ "151.101.0.223", 0, 443, -EACCES, NULL, "not in the allowlist" },
	{ "host192.0.2.10.test", 0, 443, -EACCES, NULL, "not in the allowlist" },
};

static void check_name_case(const struct egress *e, size_t i)
{
	struct egress_verdict v;
	size_t len = name_cases[i].len ? name_cases[i].len :
					 strlen(name_cases[i].host);
	int r;

	memset(&v, 0x5a, sizeof(v));
	r = egress_check_namen(e, name_cases[i].host, len, name_cases[i].port,
			       &v);
	if (r != name_cases[i].ret)
		fprintf(stderr, "  %s: %d, %s\n", name_cases[i].host, r, v.reason);
	CHECK(r == name_cases[i].ret);
	CHECK(v.allowed == (r == 0));
	CHECK(v.port == name_cases[i].port);
	if (name_cases[i].canon)
		CHECK(!strcmp(v.host, name_cases[i].canon));
	CHECK_STR_CONTAINS(v.reason, name_cases[i].reason);
	CHECK(!strpbrk(v.reason, "\r\n"));
	CHECK(v.allowed ? v.rule != NULL : true);
}

TEST(verdict_fields)
{
	static const char *const allow[] = { "10.0.0.0/8:5432", "pypi.org", NULL };
	struct egress *e = build(allow, NULL, NULL);
	struct sockaddr_in6 *s6;
	struct sockaddr_in *s4;
	struct egress_verdict v;

	CHECK(e != NULL);
	if (!e)
		return;
	CHECK(egress_check_name(e, "012.1", 5432, &v) == 0);
	CHECK(v.is_ip && !strcmp(v.host, "10.0.0.1"));
	s4 = (struct sockaddr_in *)&v.addr;
	CHECK(s4->sin_family == AF_INET && ntohs(s4->sin_port) == 5432);
	CHECK(s4->sin_addr.s_addr == htonl(0x0a000001));
	CHECK(v.rule && !strcmp(v.rule->text, "10.0.0.0/8:5432"));
	CHECK(egress_check_name(e, "PYPI.org", 443, &v) == 0);
	CHECK(!v.is_ip && !strcmp(v.host, "pypi.org"));
	CHECK(v.rule && v.rule->kind == EGRESS_NAME);
	CHECK(egress_check_name(e, "[2001:db8::1]", 443, &v) == -EACCES);
	s6 = (struct sockaddr_in6 *)&v.addr;
	CHECK(v.is_ip && s6->sin6_family == AF_INET6 &&
	      ntohs(s6->sin6_port) == 443);
	CHECK(v.rule == NULL);
	CHECK(egress_check_name(e, NULL, 443, &v) == -EINVAL);
	CHECK(!v.allowed);
	egress_free(e);
	egress_free(NULL);
}

TEST(empty_policy_allows_nothing)
{
	struct egress *e = build(NULL, NULL, NULL);
	struct egress_verdict v;

	CHECK(e != NULL);
	if (!e)
		return;
	CHECK(egress_check_name(e, "example.com", 443, &v) == -EACCES);
	CHECK_STR_CONTAINS(v.reason, "example.com:443 is not in the allowlist");
	CHECK(egress_check_name(e, "1.1.1.1", 443, &v) == -EACCES);
	egress_free(e);
}

/* ---- the resolution guard -------------------------------------------- */

static const char *const guard_allow[] = {
	"*.example.com", "internal.example", "10.9.0.0/16", "[fd00:1::/64]",
	"127.0.0.1:8080", "0.0.0.0/1", "192.168.50.7", "[fe80::/10]:443", NULL,
};
static const char *const guard_deny[] = { "203.0.113.0/24", NULL };
static const char guard_hosts[] =
	"{\"network\": {\"hosts\": {\"mapped.test\": \"10.200.0.1\","
	" \"V6.test.\": \"fd00:99::1\", \"meta.test\": \"169.254.169.254\"}}}";

static const struct {
	const char *host;
	const char *addr;
	uint16_t port;
	int ret;
	const char *reason;
} guard_cases[] = {
	{ "a.example.com", "93.184.216.34", 443, 0,
	  "a.example.com resolved to 93.184.216.34, a public address" },
	{ "a.example.com", "2606:2800:220:1:248:1893:25c8:1946", 443, 0, "resolved to" },
	{ "a.example.com", "172.32.0.1", 443, 0, "resolved to" },
	{ "a.example.com", "100.128.0.1", 443, 0, "resolved to" },
	{ "a.example.com", "::ffff:93.184.216.34", 443, 0, "resolved to 93.184.216.34" },
	{ "a.example.com", "64:ff9b::5db8:d822", 443, 0, "resolved to" },
	/* loopback */
	{ "a.example.com", "127.0.0.1", 443, -EACCES,
	  "a.example.com resolved to 127.0.0.1, a loopback address; allow 127.0.0.1 explicitly to reach it" },
	{ "a.example.com", "127.255.255.254", 443, -EACCES, "a loopback address" },
	{ "a.example.com", "::1", 443, -EACCES,
	  "resolved to ::1, a loopback address; allow [::1] explicitly to reach it" },
	{ "a.example.com", "::ffff:127.0.0.1", 443, -EACCES,
	  "resolved to 127.0.0.1, a loopback address" },
	/* link-local, the metadata address */
	{ "a.example.com", "169.254.169.254", 80, -EACCES,
	  "resolved to 169.254.169.254, a link-local address (the cloud metadata service)" },
	{ "a.example.com", "::ffff:169.254.169.254", 80, -EACCES, "cloud metadata" },
	{ "a.example.com", "169.254.1.1", 443, -EACCES, "a link-local address" },
	/* public, but a VM's host channel on Azure, root's only there */
	{ "a.example.com", "168.63.129.16", 80, -EACCES,
	  "resolved to 168.63.129.16, Azure's WireServer (the VM agent's channel to its host)" },
	{ "a.example.com", "::ffff:168.63.129.16", 32526, -EACCES, "Azure's WireServer" },
	{ "a.example.com", "64:ff9b::a83f:8110", 80, -EACCES,
	  "the NAT64 form of 168.63.129.16, Azure's WireServer" },
	{ "a.example.com", "168.63.129.17", 80, 0, "a public address" },
	{ "a.example.com", "fe80::1", 80, -EACCES, "a link-local address" },
	{ "a.example.com", "febf::1", 80, -EACCES, "a link-local address" },
	{ "a.example.com", "64:ff9b::a9fe:a9fe", 80, -EACCES,
	  "resolved to 64:ff9b::a9fe:a9fe, the NAT64 form of 169.254.169.254, a link-local address" },
	/* private */
	{ "internal.example", "10.0.0.5", 443, -EACCES,
	  "internal.example resolved to 10.0.0.5, a private address; allow 10.0.0.5 explicitly to reach it" },
	{ "a.example.com", "172.16.0.1", 443, -EACCES, "a private address" },
	{ "a.example.com", "172.31.255.255", 443, -EACCES, "a private address" },
	{ "a.example.com", "192.168.1.1", 443, -EACCES, "a private address" },
	{ "a.example.com", "::ffff:192.168.0.1", 443, -EACCES, "192.168.0.1, a private address" },
	{ "a.example.com", "::ffff:10.0.0.1", 443, -EACCES, "10.0.0.1, a private address" },
	{ "a.example.com", "fc00::1", 443, -EACCES, "a private address" },
	{ "a.example.com", "fd12:3456::1", 443, -EACCES,
	  "a private address; allow [fd12:3456::1] explicitly" },
	{ "a.example.com", "fec0::1", 443, -EACCES, "a site-local address" },
	{ "a.example.com", "64:ff9b:1::a00:1", 443, -EACCES, "local-use NAT64" },
	{ "a.example.com", "64:ff9b::a00:5", 443, -EACCES, "the NAT64 form of 10.0.0.5, a private address" },
	/* unspecified */
	{ "a.example.com", "0.0.0.0", 443, -EACCES, "an unspecified address" },
	{ "a.example.com", "0.1.2.3", 443, -EACCES, "an unspecified address" },
	{ "a.example.com", "::", 443, -EACCES, "an unspecified address" },
	{ "a.example.com", "::ffff:0.0.0.0", 443, -EACCES, "an unspecified address" },
	{ "a.example.com", "::127.0.0.1", 443, -EACCES, "a reserved (IPv4-compatible) address" },
	/* CGNAT, multicast, broadcast, reserved */
	{ "a.example.com", "100.64.0.1", 443, -EACCES, "a carrier-grade NAT address" },
	{ "a.example.com", "100.127.255.255", 443, -EACCES, "carrier-grade NAT" },
	{ "a.example.com", "224.0.0.1", 443, -EACCES, "a multicast address" },
	{ "a.example.com", "239.255.255.250", 443, -EACCES, "a multicast address" },
	{ "a.example.com", "ff02::1", 443, -EACCES, "a multicast address" },
	{ "a.example.com", "255.255.255.255", 443, -EACCES, "the broadcast address" },
	{ "a.example.com", "240.0.0.1", 443, -EACCES, "a reserved address" },
	/* an explicit allow entry opens the guard, a broad one does not */
	{ "a.example.com", "10.9.1.2", 443, 0,
	  "a.example.com resolved to 10.9.1.2, allowed explicitly by \"10.9.0.0/16\"" },
	{ "a.example.com", "::ffff:10.9.1.2", 443, 0, "allowed explicitly by \"10.9.0.0/16\"" },
	{ "a.example.com", "10.10.0.1", 443, -EACCES, "a private address" },
	{ "a.example.com", "fd00:1::5", 443, 0, "allowed explicitly by \"[fd00:1::/64]\"" },
	{ "a.example.com", "fd00:2::5", 443, -EACCES, "a private address" },
	{ "a.example.com", "127.0.0.1", 8080, 0, "allowed explicitly by \"127.0.0.1:8080\"" },
	{ "a.example.com", "127.0.0.1", 0, 0, "allowed explicitly" },
	{ "a.example.com", "127.0.0.2", 8080, -EACCES, "a loopback address" },
	{ "a.example.com", "192.168.50.7", 80, 0, "allowed explicitly by \"192.168.50.7\"" },
	{ "a.example.com", "192.168.50.7", 8080, -EACCES, "a private address" },
	{ "a.example.com", "fe80::1", 443, 0, "allowed explicitly by \"[fe80::/10]:443\"" },
	/* deny entries for addresses hold after resolving too */
	{ "a.example.com", "203.0.113.9", 443, -EACCES,
	  "a.example.com resolved to 203.0.113.9, denied by \"203.0.113.0/24\"" },
	{ "a.example.com", "::ffff:203.0.113.9", 443, -EACCES, "denied by" },
	/* the hosts map: trusted for its own name only */
	{ "mapped.test", "10.200.0.1", 443, 0,
	  "mapped.test is mapped to 10.200.0.1 by the policy's hosts map" },
	{ "MAPPED.test.", "10.200.0.1", 443, 0, "hosts map" },
	{ "mapped.test", "10.200.0.2", 443, -EACCES, "a private address" },
	{ "a.example.com", "10.200.0.1", 443, -EACCES, "a private address" },
	{ "v6.test", "fd00:99::1", 443, 0, "hosts map" },
	{ "meta.test", "169.254.169.254", 80, 0, "hosts map" },
	/* an address the client wrote itself */
	{ "93.184.216.34", "93.184.216.34", 443, 0, "93.184.216.34 is a public address" },
	{ "10.0.0.1", "10.0.0.1", 443, -EACCES,
	  "10.0.0.1 is a private address; allow 10.0.0.1 explicitly to reach it" },
	{ "[::ffff:10.9.0.1]", "10.9.0.1", 443, 0,
	  "10.9.0.1 is allowed explicitly by \"10.9.0.0/16\"" },
	{ "203.0.113.1", "203.0.113.1", 443, -EACCES,
	  "203.0.113.1 is denied by \"203.0.113.0/24\"" },
	/* not a host */
	{ "a@b.example.com", "93.184.216.34", 443, -EINVAL, "not a valid host" },
};

static void check_guard_case(const struct egress *e, size_t i)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	struct egress_verdict v;
	int r;

	if (inet_pton(AF_INET, guard_cases[i].addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(guard_cases[i].port);
	} else {
		CHECK(inet_pton(AF_INET6, guard_cases[i].addr,
				&s6->sin6_addr) == 1);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(guard_cases[i].port);
	}
	memset(&v, 0x5a, sizeof(v));
	r = egress_check_addr(e, guard_cases[i].host, (struct sockaddr *)&ss,
			      &v);
	if (r != guard_cases[i].ret)
		fprintf(stderr, "  %s -> %s: %d, %s\n", guard_cases[i].host,
			guard_cases[i].addr, r, v.reason);
	CHECK(r == guard_cases[i].ret);
	CHECK(v.allowed == (r == 0));
	CHECK_STR_CONTAINS(v.reason, guard_cases[i].reason);
	if (r != -EINVAL) {
		CHECK(v.port == guard_cases[i].port);
		CHECK(v.addr.ss_family == ss.ss_family);
	}
}

TEST(guard_own_addresses)
{
	static const char *const allow[] = { "*.example.com", NULL };
	struct egress *e = build(allow, NULL, NULL);
	struct ifaddrs *ifa, *i;
	struct egress_verdict v;
	char t[INET6_ADDRSTRLEN];
	int seen = 0;

	CHECK(e != NULL);
	CHECK(getifaddrs(&ifa) == 0);
	if (!e || !ifa) {
		egress_free(e);
		return;
	}
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET &&
				     i->ifa_addr->sa_family != AF_INET6))
			continue;
		seen++;
		if (egress_check_addr(e, "a.example.com", i->ifa_addr, &v) !=
		    -EACCES) {
			inet_ntop(i->ifa_addr->sa_family,
				  i->ifa_addr->sa_family == AF_INET ?
				  (void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr :
				  (void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
				  t, sizeof(t));
			fprintf(stderr, "  own address %s: %s\n", t, v.reason);
			CHECK(!"own address allowed");
		} else {
			CHECK_STR_CONTAINS(v.reason, "a.example.com resolved to ");
			CHECK_STR_CONTAINS(v.reason, "explicitly to reach it");
		}
	}
	freeifaddrs(ifa);
	CHECK(seen > 0);		/* at least loopback */
	egress_free(e);
}

/*
 * A public address of this host is refused as "an address of this host",
 * and only an entry for exactly that address opens it.  Uses the first
 * public address the host has, if any (a CI box may have none).
 */
TEST(guard_own_public_address)
{
	struct egress *e = build(guard_allow, NULL, NULL), *e2;
	struct ifaddrs *ifa, *i;
	struct egress_verdict v;
	struct sockaddr_in *s4;
	char t[INET_ADDRSTRLEN + 8];
	const char *allow2[] = { t, NULL };
	const char *allow3[] = { "a.example.com", NULL, NULL };
	uint32_t a;
	char net[32];

	CHECK(e != NULL && getifaddrs(&ifa) == 0);
	if (!e)
		return;
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		s4 = (struct sockaddr_in *)i->ifa_addr;
		a = ntohl(s4->sin_addr.s_addr);
		if ((a >> 24) == 10 || (a >> 24) == 127 || (a >> 16) == 0xc0a8 ||
		    (a >> 20) == 0xac1 || (a >> 16) == 0xa9fe ||
		    (a >> 22) == (0x6440 >> 6) || (a >> 24) == 0)
			continue;
		inet_ntop(AF_INET, &s4->sin_addr, t, sizeof(t));
		CHECK(egress_check_addr(e, "a.example.com", i->ifa_addr, &v) == -EACCES);
		CHECK_STR_CONTAINS(v.reason, "an address of this host");
		e2 = build(allow2, NULL, NULL);
		CHECK(e2 && egress_check_addr(e2, "x.test", i->ifa_addr, &v) == 0);
		egress_free(e2);
		/* a network around it is not enough */
		snprintf(net, sizeof(net), "%u.0.0.0/8", a >> 24);
		allow3[1] = net;
		e2 = build(allow3, NULL, NULL);
		CHECK(e2 && egress_check_addr(e2, "x.test", i->ifa_addr, &v) == -EACCES);
		egress_free(e2);
		break;
	}
	if (!i)
		printf("# no public IPv4 address on this host: skipped\n");
	freeifaddrs(ifa);
	egress_free(e);
}

/*
 * Addresses on a network of this host's interfaces are neighbours (the
 * LAN's router, a NAS; a global IPv6 /64 is not private): refused as the
 * host's own are, unless an entry inside that network allows them.
 * Judged in a user and network namespace of the test's own, where lo has
 * 198.18.7.1/24 and 2001:db8:7::1/64 and nothing else is.
 */
static int lo_addrs(void)
{
	struct ifreq ifr = { 0 };
	struct in6_ifreq r6 = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ifr.ifr_addr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), fd6, ok;

	if (fd < 0)
		return -1;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo:7");
	s4->sin_family = AF_INET;
	inet_pton(AF_INET, "198.18.7.1", &s4->sin_addr);
	ok = ioctl(fd, SIOCSIFADDR, &ifr) == 0;
	inet_pton(AF_INET, "255.255.255.0", &s4->sin_addr);
	ok = ok && ioctl(fd, SIOCSIFNETMASK, &ifr) == 0;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	ok = ok && ioctl(fd, SIOCGIFINDEX, &ifr) == 0;
	close(fd);
	fd6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (!ok || fd6 < 0)
		return -1;
	inet_pton(AF_INET6, "2001:db8:7::1", &r6.ifr6_addr);
	r6.ifr6_prefixlen = 64;
	r6.ifr6_ifindex = ifr.ifr_ifindex;
	ok = ioctl(fd6, SIOCSIFADDR, &r6) == 0;
	close(fd6);
	return ok ? 0 : -1;
}

static int check_addr_text(const struct egress *e, const char *addr,
			   struct egress_verdict *v)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(443);
	} else {
		CHECK(inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(443);
	}
	return egress_check_addr(e, "a.example.com", (struct sockaddr *)&ss, v);
}

static void on_link_checks(void)
{
	static const char *const allow[] = { "*.example.com", NULL };
	static const char *const allow_one[] = {
		"*.example.com", "198.18.7.9", "[2001:db8:7::9]", NULL,
	};
	static const char *const allow_wide[] = { "*.example.com", "198.18.0.0/15", NULL };
	struct egress *e = build(allow, NULL, NULL);
	struct egress_verdict v;

	CHECK(e != NULL);
	if (!e)
		return;
	CHECK(check_addr_text(e, "198.18.7.9", &v) == -EACCES);
	CHECK_STR_CONTAINS(v.reason, "a.example.com resolved to 198.18.7.9, an address on "
			   "this host's network 198.18.7.0/24; allow 198.18.7.9 explicitly");
	CHECK(check_addr_text(e, "2001:db8:7::9", &v) == -EACCES);
	CHECK_STR_CONTAINS(v.reason, "an address on this host's network [2001:db8:7::]/64; "
			   "allow [2001:db8:7::9] explicitly");
	CHECK(check_addr_text(e, "198.18.7.1", &v) == -EACCES);
	CHECK_STR_CONTAINS(v.reason, "an address of this host");
	/* the next network is not the host's */
	CHECK(check_addr_text(e, "198.18.8.9", &v) == 0);
	CHECK(check_addr_text(e, "2001:db8:8::9", &v) == 0);
	CHECK_STR_CONTAINS(v.reason, "a public address");
	egress_free(e);
	e = build(allow_one, NULL, NULL);
	CHECK(e && check_addr_text(e, "198.18.7.9", &v) == 0);
	CHECK(e && check_addr_text(e, "2001:db8:7::9", &v) == 0);
	CHECK(e && check_addr_text(e, "198.18.7.10", &v) == -EACCES);
	egress_free(e);
	/* a network around the host's is not an entry for it */
	e = build(allow_wide, NULL, NULL);
	CHECK(e && check_addr_text(e, "198.18.7.9", &v) == -EACCES);
	egress_free(e);
}

TEST(guard_on_link_networks)
{
	int status = 0;
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		if (unshare(CLONE_NEWUSER | CLONE_NEWNET) || lo_addrs())
			_exit(77);
		on_link_checks();
		_exit(unit_failed_checks ? 1 : 0);
	}
	if (pid < 0)
		return;
	CHECK(waitpid(pid, &status, 0) == pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		printf("# no user and network namespace with addresses: skipped\n");
		return;
	}
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(guard_bad_input)
{
	struct egress *e = build(guard_allow, NULL, NULL);
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct egress_verdict v;

	CHECK(e != NULL);
	if (!e)
		return;
	CHECK(egress_check_addr(e, "a.example.com", (struct sockaddr *)&un,
				&v) == -EAFNOSUPPORT);
	CHECK(!v.allowed);
	CHECK_STR_CONTAINS(v.reason, "neither IPv4 nor IPv6");
	CHECK(egress_check_addr(e, "a.example.com", NULL, &v) == -EINVAL);
	CHECK(!v.allowed);
	CHECK(egress_check_addr(e, NULL, NULL, &v) == -EINVAL);
	egress_free(e);
}

/* ---- the hosts map and static resolution ------------------------------ */

static const char lookup_hosts[] =
	"{\"network\": {\"hosts\": {\"mapped.test\": \"10.200.0.1\","
	" \"V6.Test\": \"2001:db8::7\", \"m4.test\": \"::ffff:10.1.1.1\"}}}";

static const struct {
	const char *name;
	int ret;
	int family;
	const char *addr;
} lookups[] = {
	{ "mapped.test", 0, AF_INET, "10.200.0.1" },
	{ "Mapped.TEST.", 0, AF_INET, "10.200.0.1" },
	{ "v6.test", 0, AF_INET6, "2001:db8::7" },
	{ "m4.test", 0, AF_INET, "10.1.1.1" },
	{ "nope.test", -ENOENT, 0, NULL },
	{ "sub.mapped.test", -ENOENT, 0, NULL },
	{ "bad host", -EINVAL, 0, NULL },
	{ "10.200.0.1", -EINVAL, 0, NULL },
	{ "", -EINVAL, 0, NULL },
};

static void sockaddr_text(const struct sockaddr_storage *ss, char *t,
			  size_t len, uint16_t *port)
{
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

	if (ss->ss_family == AF_INET) {
		inet_ntop(AF_INET, &s4->sin_addr, t, len);
		*port = ntohs(s4->sin_port);
	} else {
		inet_ntop(AF_INET6, &s6->sin6_addr, t, len);
		*port = ntohs(s6->sin6_port);
	}
}

static void check_lookup(const struct egress *e, size_t i)
{
	struct sockaddr_storage ss;
	char t[INET6_ADDRSTRLEN];
	uint16_t port;
	int r;

	memset(&ss, 0x5a, sizeof(ss));
	r = egress_hosts_lookup(e, lookups[i].name, &ss);
	CHECK(r == lookups[i].ret);
	if (r)
		return;
	CHECK(ss.ss_family == lookups[i].family);
	sockaddr_text(&ss, t, sizeof(t), &port);
	CHECK(!strcmp(t, lookups[i].addr));
	CHECK(port == 0);
}

TEST(resolve_static)
{
	struct egress *e = build(NULL, NULL, lookup_hosts);
	struct sockaddr_storage ss;
	char t[INET6_ADDRSTRLEN];
	uint16_t port;

	CHECK(e != NULL);
	if (!e)
		return;
	CHECK(egress_resolve_static(e, "MAPPED.test", 443, &ss) == 0);
	sockaddr_text(&ss, t, sizeof(t), &port);
	CHECK(!strcmp(t, "10.200.0.1") && port == 443);
	CHECK(egress_resolve_static(e, "0xa9fea9fe", 80, &ss) == 0);
	sockaddr_text(&ss, t, sizeof(t), &port);
	CHECK(!strcmp(t, "169.254.169.254") && port == 80);
	CHECK(egress_resolve_static(e, "[2001:db8::9]", 8443, &ss) == 0);
	sockaddr_text(&ss, t, sizeof(t), &port);
	CHECK(ss.ss_family == AF_INET6 && !strcmp(t, "2001:db8::9") &&
	      port == 8443);
	CHECK(egress_resolve_static(e, "pypi.org", 443, &ss) == -ENOENT);
	CHECK(egress_resolve_static(e, "a b", 443, &ss) == -EINVAL);
	egress_free(e);
}

/* ---- compiling a policy ------------------------------------------------ */

TEST(egress_new_names_the_bad_entry)
{
	struct corral_err err = { 0 };
	struct corral_policy p;
	struct egress *e;

	/* the loader refuses these; a caller filling the struct may not */
	corral_policy_init(&p);
	CHECK(corral_policy_add_allow(&p, "pypi.org", &err) == 0);
	p.net_allow = realloc(p.net_allow, 2 * sizeof(char *));
	p.net_allow[1] = strdup("*.com");
	p.nnet_allow = 2;
	e = egress_new(&p, &err);
	CHECK(e == NULL);
	CHECK(err.code == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "network.allow[1]: a wildcard over a whole top-level domain");
	CHECK_STR_CONTAINS(err.msg, "(got \"*.com\")");
	corral_policy_free(&p);

	corral_policy_init(&p);
	p.net_deny = calloc(1, sizeof(char *));
	p.net_deny[0] = strdup("a b");
	p.nnet_deny = 1;
	CHECK(egress_new(&p, &err) == NULL);
	CHECK_STR_CONTAINS(err.msg, "network.deny[0]: not a host name: contains a space");
	corral_policy_free(&p);

	corral_policy_init(&p);
	p.net_hosts = calloc(1, sizeof(*p.net_hosts));
	p.net_hosts[0].name = strdup("x.test");
	p.net_hosts[0].value = strdup("10.0.0.1/8");
	p.nnet_hosts = 1;
	CHECK(egress_new(&p, &err) == NULL);
	CHECK_STR_CONTAINS(err.msg, "network.hosts.x.test: not an IP address");
	free(p.net_hosts[0].value);
	p.net_hosts[0].value = strdup("0xa000001");	/* loose spellings: no */
	CHECK(egress_new(&p, &err) == NULL);
	free(p.net_hosts[0].name);
	p.net_hosts[0].name = strdup("10.0.0.1");
	CHECK(egress_new(&p, &err) == NULL);
	CHECK_STR_CONTAINS(err.msg, "network.hosts: an IP address, not a host name");
	corral_policy_free(&p);
}

TEST(policy_helpers)
{
	struct corral_err err = { 0 };
	struct corral_policy p;

	corral_policy_init(&p);
	CHECK(corral_policy_set_net(&p, "proxy", &err) == 0);
	CHECK(p.net == CORRAL_NET_PROXY);
	CHECK(corral_policy_set_net(&p, "none", &err) == 0);
	CHECK(p.net == CORRAL_NET_NONE);
	CHECK(corral_policy_set_net(&p, "open", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "unknown network mode, expected \"none\" or \"proxy\" (got \"open\")");
	CHECK(corral_policy_add_allow(&p, "pypi.org", &err) == 0);
	CHECK(corral_policy_add_allow(&p, "pypi.org", &err) == 0);	/* once */
	CHECK(corral_policy_add_allow(&p, "*", &err) == -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "\"*\" would allow every host; list the hosts to allow (got \"*\")");
	CHECK(corral_policy_add_deny(&p, "*", &err) == 0);
	CHECK(corral_policy_add_deny(&p, "bad..name", &err) == -EINVAL);
	CHECK(p.nnet_allow == 1 && !strcmp(p.net_allow[0], "pypi.org"));
	CHECK(p.nnet_deny == 1 && !strcmp(p.net_deny[0], "*"));
	corral_policy_free(&p);
	CHECK(p.net_allow == NULL && p.nnet_allow == 0);
}

/* "*" in a deny list: nothing gets out, names or addresses. */
TEST(deny_everything)
{
	static const char *const allow[] = { "pypi.org", "10.0.0.0/8", NULL };
	static const char *const deny[] = { "*", NULL };
	struct egress *e = build(allow, deny, NULL);
	struct egress_verdict v;

	CHECK(e != NULL);
	if (!e)
		return;
	CHECK(egress_check_name(e, "pypi.org", 443, &v) == -EACCES);
	CHECK_STR_CONTAINS(v.reason, "pypi.org:443 is denied by \"*\"");
	CHECK(egress_check_name(e, "10.1.1.1", 443, &v) == -EACCES);
	CHECK(egress_check_name(e, "[::1]", 65535, &v) == -EACCES);
	egress_free(e);
}

int main(void)
{
	struct egress *e;
	size_t i;
	int before;

	for (i = 0; i < ARRAY_SIZE(good_patterns); i++) {
		before = unit_failed_checks;
		check_good_pattern(i);
		row_done(before, "pattern ok", good_patterns[i].text);
	}
	for (i = 0; i < ARRAY_SIZE(bad_patterns); i++) {
		before = unit_failed_checks;
		check_bad_pattern(i);
		row_done(before, "pattern refused", bad_patterns[i].want);
	}
	unit_run_all();

	e = build(names_allow, names_deny, NULL);
	CHECK(e != NULL);
	for (i = 0; e && i < ARRAY_SIZE(name_cases); i++) {
		before = unit_failed_checks;
		check_name_case(e, i);
		row_done(before, "name", name_cases[i].reason);
	}
	egress_free(e);

	e = build(guard_allow, guard_deny, guard_hosts);
	CHECK(e != NULL);
	for (i = 0; e && i < ARRAY_SIZE(guard_cases); i++) {
		before = unit_failed_checks;
		check_guard_case(e, i);
		row_done(before, "guard", guard_cases[i].addr);
	}
	egress_free(e);

	e = build(NULL, NULL, lookup_hosts);
	CHECK(e != NULL);
	for (i = 0; e && i < ARRAY_SIZE(lookups); i++) {
		before = unit_failed_checks;
		check_lookup(e, i);
		row_done(before, "hosts lookup", lookups[i].name);
	}
	egress_free(e);
	UNIT_DONE();
}
