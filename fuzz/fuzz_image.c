/*
 * fuzz_image.c - libFuzzer target for what an image archive says in text:
 * image names (image_ref.c) and image configs (image_config.c).  The first
 * byte picks which; whatever the rest, a name normalises to one that
 * normalises to itself, or fails with a message; a config parses or fails
 * with a message, and leaks nothing.
 *
 *   make fuzz FUZZ_SECONDS=60
 */
#include "image.h"

#include <stdlib.h>
#include <string.h>

static void fuzz_name(const uint8_t *data, size_t size)
{
	char in[600], out[512], again[512];
	struct corral_err err = { 0 };

	if (size >= sizeof(in))
		return;
	memcpy(in, data, size);
	in[size] = '\0';
	if (corral_image_ref_normalize(in, out, sizeof(out), &err) < 0) {
		if (!err.msg[0])
			abort();
		return;
	}
	/* the full form is a fixed point */
	if (corral_image_ref_normalize(out, again, sizeof(again), &err) < 0 ||
	    strcmp(out, again) != 0)
		abort();
}

static void fuzz_config(const uint8_t *data, size_t size)
{
	struct corral_image_config c;
	struct corral_err err = { 0 };
	json_t *ids = NULL;

	if (image_config_parse((const char *)data, size, &c, &ids, &err) < 0) {
		if (!err.msg[0])
			abort();
		return;
	}
	for (size_t i = 0; i < json_array_size(ids); i++)
		if (!image_valid_digest(json_string_value(json_array_get(ids, i))))
			abort();
	json_decref(ids);
	image_config_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		fuzz_name(data + 1, size - 1);
	else
		fuzz_config(data + 1, size - 1);
	return 0;
}
