/*
 * fuzz_policy.c - libFuzzer target for the policy loader (policy.c,
 * jsonpos.c, and egress.c's pattern checks): whatever the bytes, a load
 * either succeeds or fails with a message, leaks nothing, and a failed
 * load leaves the policy as it was.
 *
 *   make fuzz FUZZ_SECONDS=60
 */
#include "corral.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct corral_policy p, before;
	struct corral_err err = { 0 };

	corral_policy_init(&p);
	corral_policy_init(&before);
	if (corral_policy_load_string(&p, (const char *)data, size, "fuzz", &err) < 0) {
		/* a failed load changes nothing and always says why */
		if (!err.msg[0] || p.memory_bytes != before.memory_bytes ||
		    p.nbinds != before.nbinds || p.nnet_allow != before.nnet_allow)
			abort();
	}
	corral_policy_free(&p);
	corral_policy_free(&before);
	return 0;
}
