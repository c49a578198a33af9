/*
 * image.c - the images in the store, as a run or a person asks for them:
 * resolve a name or digest, list, remove (and collect what nothing uses).
 * The layout and the writing side are image_store.c's.
 */
#include "image.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_MAX (8u << 20)

/*
 * The index key (manifest digest) ref names.  *by_name: ref was a name
 * (normalised into name), not a digest.
 */
static int find_key(json_t *images, const char *ref, const char **key_out,
		    char *name, size_t namelen, bool *by_name, struct corral_err *err)
{
	const char *key, *hex, *at;
	json_t *img;
	int found = 0, r;

	*by_name = false;
	if (image_looks_like_digest(ref)) {
		hex = !strncmp(ref, "sha256:", 7) ? ref + 7 : ref;
		json_object_foreach(images, key, img)
			if (!strncmp(key + 7, hex, strlen(hex))) {
				*key_out = key;
				found++;
			}
		if (found == 1)
			return 0;
		if (found > 1)
			return corral_set_err(err, -EINVAL, "\"%s\" is the start of %d images' digests: give more of it",
					      ref, found);
		if (!strncmp(ref, "sha256:", 7))
			return corral_set_err(err, -ENOENT, "no image with digest %s", ref);
	}
	r = corral_image_ref_normalize(ref, name, namelen, err);
	if (r < 0)
		return r;
	at = strchr(name, '@');
	if (at) {
		img = json_object_get(images, at + 1);
		if (!img)
			return corral_set_err(err, -ENOENT, "no image with digest %s", at + 1);
		*key_out = json_object_iter_key(json_object_iter_at(images, at + 1));
		return 0;
	}
	json_object_foreach(images, key, img) {
		size_t i;
		json_t *v;

		json_array_foreach(json_object_get(img, "names"), i, v)
			if (json_is_string(v) && !strcmp(json_string_value(v), name)) {
				*key_out = key;
				*by_name = true;
				return 0;
			}
	}
	/* a docker user expects a pull: say there is none, and the way in */
	return corral_set_err(err, -ENOENT, "no image named %s (see `corral image ls`; "
			      "corral pulls from no registry: `skopeo copy docker://REF "
			      "oci-archive:FILE`, then `corral image import FILE`)", name);
}

static int strv_of(json_t *arr, char ***v, size_t *n)
{
	size_t i;
	json_t *x;

	json_array_foreach(arr, i, x)
		if (!json_is_string(x) || image_strv_add(v, n, json_string_value(x)) < 0)
			return -ENOMEM;
	return 0;
}

static int build_image(struct corral_image_store *s, const char *key, json_t *rec,
		       struct corral_image **out, struct corral_err *err)
{
	const char *config = json_string_value(json_object_get(rec, "config"));
	const char *when = json_string_value(json_object_get(rec, "imported"));
	struct corral_image *img;
	size_t len, nlayers = 0;
	char *text = NULL;
	int r;

	img = calloc(1, sizeof(*img));
	if (!img)
		return corral_set_err(err, -ENOMEM, "out of memory");
	if (!config || !image_valid_digest(config) || !image_valid_digest(key)) {
		r = corral_set_err(err, -EINVAL, "%s/%s: image %s has no valid config digest",
				   s->dir, IMAGE_INDEX, key);
		goto fail;
	}
	snprintf(img->digest, sizeof(img->digest), "%s", key);
	snprintf(img->config_digest, sizeof(img->config_digest), "%s", config);
	img->size = json_integer_value(json_object_get(rec, "size"));
	img->imported = when ? strdup(when) : NULL;
	if (strv_of(json_object_get(rec, "names"), &img->names, &img->nnames) < 0 ||
	    strv_of(json_object_get(rec, "layers"), &img->diff_ids, &nlayers) < 0) {
		r = corral_set_err(err, -ENOMEM, "out of memory for image %s", key);
		goto fail;
	}
	img->nlayers = nlayers;
	img->layers = calloc(nlayers + 1, sizeof(char *));
	if (!img->layers) {
		r = corral_set_err(err, -ENOMEM, "out of memory for image %s", key);
		goto fail;
	}
	for (size_t i = 0; i < nlayers; i++) {
		if (!image_valid_digest(img->diff_ids[i]) || !store_has_layer(s, img->diff_ids[i])) {
			r = corral_set_err(err, -ENOENT, "image %s: layer %.80s is not in the store %s (import the image again)",
					   key, img->diff_ids[i], s->dir);
			goto fail;
		}
		if (asprintf(&img->layers[i], "%s/%s/%s/%s", s->dir, IMAGE_LAYERS,
			     img->diff_ids[i] + 7, LAYER_ROOT) < 0) {
			img->layers[i] = NULL;
			r = corral_set_err(err, -ENOMEM, "out of memory for image %s", key);
			goto fail;
		}
	}
	r = store_read_blob(s, config, CONFIG_MAX, &text, &len, err);
	if (r == 0)
		r = image_config_parse(text, len, &img->config, NULL, err);
	free(text);
	if (r < 0)
		goto fail;
	*out = img;
	return 0;
fail:
	corral_image_free(img);
	return r;
}

static int resolve(struct corral_image_store *s, const char *ref, bool wait,
		   struct corral_image **out, struct corral_err *err)
{
	char name[512];
	const char *key = NULL;
	json_t *idx;
	bool by_name;
	int r;

	*out = NULL;
	/* a layer still 65534's would run as host uid 65534 (idmap.c) */
	r = store_migrate(s, wait ? MIGRATE_WAIT : MIGRATE_TRY, err);
	if (r == 0)
		r = wait ? store_lock(s, false, err) : store_trylock_shared(s, err);
	if (r < 0)
		return r;
	idx = store_load_index(s, err);
	if (!idx) {
		store_unlock(s);
		return err->code;
	}
	r = find_key(json_object_get(idx, "images"), ref, &key, name, sizeof(name), &by_name, err);
	if (r == 0)
		r = build_image(s, key, json_object_get(json_object_get(idx, "images"), key),
				out, err);
	json_decref(idx);
	store_unlock(s);
	return r;
}

int corral_image_resolve(struct corral_image_store *s, const char *ref,
			 struct corral_image **out, struct corral_err *err)
{
	return resolve(s, ref, true, out, err);
}

static int by_first_name(const void *a, const void *b)
{
	const struct corral_image *x = *(struct corral_image *const *)a;
	const struct corral_image *y = *(struct corral_image *const *)b;

	if (!x->nnames || !y->nnames)
		return x->nnames ? -1 : y->nnames ? 1 : strcmp(x->digest, y->digest);
	return strcmp(x->names[0], y->names[0]);
}

int corral_image_list(struct corral_image_store *s, struct corral_image ***out,
		      size_t *n, struct corral_err *err)
{
	struct corral_image **v;
	const char *key;
	json_t *idx, *images, *rec;
	size_t i = 0;
	int r = 0;

	*out = NULL;
	*n = 0;
	r = store_migrate(s, MIGRATE_WAIT, err);
	if (r == 0)
		r = store_lock(s, false, err);
	if (r < 0)
		return r;
	idx = store_load_index(s, err);
	if (!idx) {
		store_unlock(s);
		return err->code;
	}
	images = json_object_get(idx, "images");
	v = calloc(json_object_size(images) + 1, sizeof(*v));
	if (!v)
		r = corral_set_err(err, -ENOMEM, "out of memory for the image list");
	json_object_foreach(images, key, rec) {
		if (r < 0)
			break;
		r = build_image(s, key, rec, &v[i], err);
		if (r == 0)
			i++;
	}
	json_decref(idx);
	store_unlock(s);
	if (r < 0) {
		corral_image_list_free(v, i);
		return r;
	}
	qsort(v, i, sizeof(*v), by_first_name);
	*out = v;
	*n = i;
	return 0;
}

void corral_image_free(struct corral_image *img)
{
	if (!img)
		return;
	image_strv_free(img->names, img->nnames);
	image_strv_free(img->layers, img->nlayers);
	image_strv_free(img->diff_ids, img->nlayers);
	free(img->imported);
	image_config_free(&img->config);
	free(img);
}

void corral_image_list_free(struct corral_image **imgs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		corral_image_free(imgs[i]);
	free(imgs);
}

int corral_image_remove(struct corral_image_store *s, const char *ref,
			struct corral_err *err)
{
	char name[512];
	const char *key = NULL;
	json_t *idx, *images, *rec;
	bool by_name;
	int r;

	r = store_lock(s, true, err);
	if (r < 0)
		return r;
	idx = store_load_index(s, err);
	if (!idx) {
		store_unlock(s);
		return err->code;
	}
	images = json_object_get(idx, "images");
	r = find_key(images, ref, &key, name, sizeof(name), &by_name, err);
	if (r < 0)
		goto out;
	rec = json_object_get(images, key);
	if (by_name) {
		json_t *names = json_object_get(rec, "names");
		size_t i;
		json_t *v;

		json_array_foreach(names, i, v)
			if (!strcmp(json_string_value(v), name)) {
				json_array_remove(names, i);
				break;
			}
		if (json_array_size(names) == 0)
			json_object_del(images, key);
	} else {
		json_object_del(images, key);
	}
	r = store_save_index(s, idx, err);
	if (r == 0)
		store_gc(s, idx);
out:
	json_decref(idx);
	store_unlock(s);
	return r;
}

/* ---- what a run takes from an image ---------------------------------------- */

int corral_policy_apply_image(struct corral_policy *p, const struct corral_image *img,
			      struct corral_err *err)
{
	const struct corral_image_config *c = &img->config;
	int r;

	r = corral_policy_set_root(p, img->layers, img->nlayers, err);
	for (size_t i = 0; r == 0 && i < c->nenv; i++) {
		size_t len = strcspn(c->env[i], "=");
		bool set = false;

		for (size_t k = 0; k < p->nenv && !set; k++)
			set = strlen(p->env[k].name) == len && !strncmp(p->env[k].name, c->env[i], len);
		if (!set)
			r = corral_policy_set_env(p, c->env[i], err);
	}
	if (r == 0 && c->workdir && !p->workdir)
		r = corral_policy_set_workdir(p, c->workdir, err);
	if (r == 0)
		r = image_user_apply(p, img, err);
	return r < 0 ? corral_wrap_err(err, "image %s", img->digest) : 0;
}

int corral_image_argv(const struct corral_image *img, char *const *argv,
		      char ***out, struct corral_err *err)
{
	const struct corral_image_config *c = &img->config;
	size_t nargv = 0, n = 0;
	char **v;

	while (argv && argv[nargv])
		nargv++;
	v = calloc(c->nentrypoint + (nargv ? nargv : c->ncmd) + 1, sizeof(char *));
	if (!v)
		return corral_set_err(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < c->nentrypoint; i++)
		v[n++] = c->entrypoint[i];
	for (size_t i = 0; i < (nargv ? nargv : c->ncmd); i++)
		v[n++] = nargv ? argv[i] : c->cmd[i];
	if (n == 0) {
		free(v);
		return corral_set_err(err, -EINVAL, "image %s has no Entrypoint or Cmd: give a command",
				      img->nnames ? img->names[0] : img->digest);
	}
	*out = v;
	return 0;
}

int corral_policy_use_image(struct corral_policy *p, const char *state_dir,
			    struct corral_image **out, struct corral_err *err)
{
	struct corral_image_store *s;
	int r;

	*out = NULL;
	if (!p->image)
		return 0;
	r = corral_image_store_open(&s, state_dir, err);
	if (r < 0)
		return corral_wrap_err(err, "image %s", p->image);
	/* a daemon's caller: an import may hold the store for minutes */
	r = resolve(s, p->image, false, out, err);
	corral_image_store_close(s);
	if (r == 0)
		r = corral_policy_apply_image(p, *out, err);
	if (r < 0) {
		corral_image_free(*out);
		*out = NULL;
	}
	return r;
}
