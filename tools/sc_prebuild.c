/*
 * sc_prebuild - the seccomp programs corral loads, compiled when corral is
 * built instead of at every start.
 *
 * The filter depends on four things only: the ABI, whether denials go to
 * the supervisor (USER_NOTIF), whether the policy has a network (ICMP
 * echo sockets), and whether a bind writes to the host (no set-id modes).  Compiling it with libseccomp cost init about 2 ms of CPU
 * in each cold start (issue 17).  This program runs sc_program() for each
 * combination and prints them as C (the Makefile's $(BUILD)/gen/
 * sc_prebuilt.c); sc_compile() takes a program from there when the ABI and
 * libseccomp's API level match, and compiles it as before otherwise.
 * tests/unit_seccomp.c checks each program against a fresh compile.
 *
 * A combination libseccomp refuses here (USER_NOTIF on a kernel without
 * it) is left out with a line on stderr: corral compiles it at run time.
 * It links tools/sc_prebuilt_none.c: it compiles every program itself.
 */
#include "internal.h"

#include <linux/filter.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>

struct made {
	bool notify, net, hostw;
	size_t len;
};

static int print_program(int n, bool notify, bool net, bool hostw, struct made *m)
{
	struct corral_policy p;
	struct corral_err err = { 0 };
	struct sock_filter *prog;
	size_t len;
	int r;

	corral_policy_init(&p);
	p.net = net ? CORRAL_NET_PROXY : CORRAL_NET_NONE;
	r = hostw ? corral_policy_add_bind(&p, "/tmp", true, &err) : 0;
	if (r == 0)
		r = sc_program(&p, notify, &prog, &len, NULL, &err);
	corral_policy_free(&p);
	if (r < 0) {
		fprintf(stderr, "sc_prebuild: no program for notify=%d net=%d hostw=%d (%s); "
			"corral compiles it when it starts\n", notify, net, hostw, err.msg);
		return r;
	}
	printf("static const struct sock_filter prog%d[%zu] = {\n", n, len);
	for (size_t i = 0; i < len; i++)
		printf("\t{ 0x%04x, %u, %u, 0x%08x },\n", prog[i].code, prog[i].jt,
		       prog[i].jf, prog[i].k);
	printf("};\n\n");
	free(prog);
	*m = (struct made){ .notify = notify, .net = net, .hostw = hostw, .len = len };
	return 0;
}

int main(void)
{
	const struct scmp_version *v = seccomp_version();
	uint32_t arch = seccomp_arch_native();
	unsigned int api = seccomp_api_get();
	struct made made[8];
	int n = 0;

	printf("/*\n * Written by tools/sc_prebuild when corral was built "
	       "(libseccomp %u.%u.%u,\n * API level %u): sc_program()'s output, "
	       "for sc_compile().  Do not edit.\n */\n#include \"internal.h\"\n\n"
	       "#include <linux/filter.h>\n\n", v->major, v->minor, v->micro, api);
	for (int notify = 0; notify <= 1; notify++)
		for (int net = 0; net <= 1; net++)
			for (int hostw = 0; hostw <= 1; hostw++)
				if (print_program(n, notify, net, hostw, &made[n]) == 0)
					n++;
	printf("const struct sc_prebuilt sc_prebuilt[%d] = {\n", n ? n : 1);
	for (int i = 0; i < n; i++)
		printf("\t{ 0x%08x, %s, %s, %s, %u, %zu, prog%d },\n", arch,
		       made[i].notify ? "true" : "false", made[i].net ? "true" : "false",
		       made[i].hostw ? "true" : "false", api, made[i].len, i);
	if (!n)
		printf("\t{ 0 },\n");
	printf("};\nconst size_t sc_nprebuilt = %d;\n", n);
	return ferror(stdout) || fflush(stdout) ? 1 : 0;
}
