/*
 * fuzz_hold.c - libFuzzer target for hold_formats.c: the readers of git
 * config, .gitattributes and VS Code's JSONC that decide what an export
 * holds back.  The input is read under every check; findings must be
 * well-formed (count and NUL-separated strings agree), and every key the
 * git config parser hands out must look like one git would take.
 */
#include "export.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static int check_item(void *arg, const struct gitcfg_item *it)
{
	(void)arg;
	if (!it->sec[0] || !isalpha((unsigned char)it->name[0]))
		abort();
	for (const char *s = it->sec; *s; s++)
		if (isupper((unsigned char)*s))
			abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int c = HOLD_ALWAYS; c <= HOLD_VSCODE_WORKSPACE; c++) {
		char *found = NULL;
		size_t n = 0, seen = 0;

		if (hold_findings((enum hold_check)c, (const char *)data, size, &found, &n) < 0)
			continue;
		for (const char *s = found; seen < n; seen++)
			s += strlen(s) + 1;
		free(found);
	}
	gitcfg_parse((const char *)data, size, check_item, NULL, NULL);
	return 0;
}
