/*
 * image_config.c - what an image's config asks of a run: Env, WorkingDir,
 * User, Entrypoint and Cmd (OCI image spec, "config" of the config blob),
 * and rootfs.diff_ids, the digests its layers' tars must have.  The image
 * is data: the run path applies these under the policy, which still
 * decides everything else.
 */
#include "image.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define LIST_MAX 4096		/* entries in Env, Cmd, Entrypoint */

static int strv_from(json_t *arr, const char *key, char ***out, size_t *n,
		     struct corral_err *err)
{
	size_t i;
	json_t *v;

	*out = NULL;
	*n = 0;
	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr) || json_array_size(arr) > LIST_MAX)
		return corral_set_err(err, -EINVAL, "image config: %s is not a list of at most %d strings",
				      key, LIST_MAX);
	json_array_foreach(arr, i, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return corral_set_err(err, -EINVAL, "image config: %s[%zu] is not a string without NUL bytes",
					      key, i);
		if (image_strv_add(out, n, json_string_value(v)) < 0)
			return corral_set_err(err, -ENOMEM, "out of memory for %s", key);
	}
	return 0;
}

static int str_from(json_t *v, const char *key, char **out, struct corral_err *err)
{
	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
		return corral_set_err(err, -EINVAL, "image config: %s is not a string", key);
	if (!*json_string_value(v))
		return 0;
	*out = strdup(json_string_value(v));
	return *out ? 0 : corral_set_err(err, -ENOMEM, "out of memory for %s", key);
}

int image_config_parse(const char *text, size_t len, struct corral_image_config *c,
		       json_t **diff_ids, struct corral_err *err)
{
	json_error_t je;
	json_t *root, *cfg, *ids;
	size_t i;
	json_t *v;
	int r;

	memset(c, 0, sizeof(*c));
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(root)) {
		json_decref(root);
		return corral_set_err(err, -EINVAL, "image config: line %d: %s", je.line,
				      root ? "not an object" : je.text);
	}
	cfg = json_object_get(root, "config");
	if (cfg && !json_is_null(cfg) && !json_is_object(cfg)) {
		r = corral_set_err(err, -EINVAL, "image config: \"config\" is not an object");
		goto out;
	}
	if ((r = strv_from(json_object_get(cfg, "Env"), "Env", &c->env, &c->nenv, err)) < 0 ||
	    (r = strv_from(json_object_get(cfg, "Entrypoint"), "Entrypoint", &c->entrypoint,
			   &c->nentrypoint, err)) < 0 ||
	    (r = strv_from(json_object_get(cfg, "Cmd"), "Cmd", &c->cmd, &c->ncmd, err)) < 0 ||
	    (r = str_from(json_object_get(cfg, "WorkingDir"), "WorkingDir", &c->workdir, err)) < 0 ||
	    (r = str_from(json_object_get(cfg, "User"), "User", &c->user, err)) < 0 ||
	    (r = str_from(json_object_get(root, "os"), "os", &c->os, err)) < 0 ||
	    (r = str_from(json_object_get(root, "architecture"), "architecture", &c->arch, err)) < 0)
		goto out;
	for (i = 0; i < c->nenv; i++)
		if (!strchr(c->env[i], '=') || c->env[i][0] == '=') {
			r = corral_set_err(err, -EINVAL, "image config: Env[%zu] \"%.60s\" is not NAME=VALUE",
					   i, c->env[i]);
			goto out;
		}
	if (c->workdir && c->workdir[0] != '/') {
		r = corral_set_err(err, -EINVAL, "image config: WorkingDir \"%.60s\" is not absolute",
				   c->workdir);
		goto out;
	}
	ids = json_object_get(json_object_get(root, "rootfs"), "diff_ids");
	if (!json_is_array(ids)) {
		r = corral_set_err(err, -EINVAL, "image config: no rootfs.diff_ids list");
		goto out;
	}
	json_array_foreach(ids, i, v)
		if (!json_is_string(v) || !image_valid_digest(json_string_value(v))) {
			r = corral_set_err(err, -EINVAL, "image config: rootfs.diff_ids[%zu] is not a sha256 digest",
					   i);
			goto out;
		}
	if (diff_ids)
		*diff_ids = json_incref(ids);
	r = 0;
out:
	json_decref(root);
	if (r < 0)
		image_config_free(c);
	return r;
}

void image_config_free(struct corral_image_config *c)
{
	image_strv_free(c->env, c->nenv);
	image_strv_free(c->entrypoint, c->nentrypoint);
	image_strv_free(c->cmd, c->ncmd);
	free(c->workdir);
	free(c->user);
	free(c->os);
	free(c->arch);
	memset(c, 0, sizeof(*c));
}

static json_t *strv_json(char **v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

char *corral_image_json(const struct corral_image *img)
{
	const struct corral_image_config *c = &img->config;
	json_t *o, *layers = json_array();
	char *text;

	for (size_t i = 0; i < img->nlayers; i++)
		json_array_append_new(layers, json_pack("{s:s, s:s}", "diff_id", img->diff_ids[i],
							"path", img->layers[i]));
	o = json_pack("{s:s, s:s, s:o, s:I, s:s?, s:o, s:{s:s?, s:s?, s:o, s:o, s:o, s:s?, s:s?}}",
		      "digest", img->digest, "config_digest", img->config_digest,
		      "names", strv_json(img->names, img->nnames),
		      "size", (json_int_t)img->size, "imported", img->imported,
		      "layers", layers,
		      "config", "os", c->os, "architecture", c->arch,
		      "env", strv_json(c->env, c->nenv),
		      "entrypoint", strv_json(c->entrypoint, c->nentrypoint),
		      "cmd", strv_json(c->cmd, c->ncmd),
		      "working_dir", c->workdir, "user", c->user);
	if (!o)
		return NULL;
	/*
	 * ASCII: the config is the image's to write, and `image inspect`
	 * prints this to a terminal; jansson escapes C0 controls only, so a
	 * C1 (U+009B, CSI to xterm) or U+202E went out as they were.
	 */
	text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(o);
	return text;
}
