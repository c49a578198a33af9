/*
 * image_import.c - an image archive into the store, offline.
 *
 * Three inputs, one path through the store:
 *   - an OCI image layout directory (oci-layout, index.json, blobs/);
 *   - an oci-archive: the same layout as a tar (skopeo's oci-archive:);
 *   - a `docker save` / `podman save` tarball: manifest.json listing each
 *     image's config and layer tars by path, and its RepoTags.
 * The archive's files come through image_source.c (a tar is read by an
 * unprivileged child).  Every blob is hashed
 * while it is copied in and must match the digest that names it; docker
 * save's files, which no digest names, get an OCI manifest written for
 * them, so that every image in the store is one manifest digest.  Layers
 * are unpacked by image_unpack.c, with its budgets and least privilege.
 */
#include "image.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define META_MAX (8u << 20)		/* index.json, manifest.json, manifests */
/*
 * Layers an image may have: no more than a sandbox can stack.  mount.c
 * names each as /proc/self/fd/N in overlay's options, which mount(2)
 * takes one page of: 200 layers ran here, 230 did not (docker's own
 * limit is 127).
 */
#define IMAGE_LAYERS_MAX 200
#define IMAGE_MANIFESTS_MAX 1000	/* images an index.json or manifest.json lists */

struct import {
	struct corral_image_store *s;
	struct source src;
	struct corral_image_limits budget;
	struct corral_image_import_report *rep;
	struct corral_err *err;
	json_t *copied;		/* archive name -> [digest, size]: each copied once */
};

/* ---- blobs and layers ------------------------------------------------------- */

static int put(struct import *im, const char *name, const char *expected, uint64_t size,
	       char *digest)
{
	uint64_t max = image_stream_max(&im->budget);
	json_t *done = json_object_get(im->copied, name);
	char got[CORRAL_DIGEST_MAX];
	bool was_new;
	struct stat st;
	int fd, r;

	/*
	 * A name copied already in this import is not copied again: a
	 * manifest listing one blob 50,000 times (8 MiB of JSON) had it
	 * copied and fsync'd 50,000 times, for hours, under the store's lock.
	 */
	if (done) {
		const char *had = json_string_value(json_array_get(done, 0));
		uint64_t had_size = json_integer_value(json_array_get(done, 1));

		if (expected && strcmp(had, expected) != 0)
			return corral_set_err(im->err, -EBADMSG, "%s: %s: digest mismatch: the blob named %s hashes to %s",
					       im->src.path, name, expected, had);
		if (size && had_size != size)
			return corral_set_err(im->err, -EBADMSG, "%s: %s: blob %s: %llu bytes, the manifest says %llu",
					       im->src.path, name, had, (unsigned long long)had_size,
					       (unsigned long long)size);
		if (digest)
			strcpy(digest, had);
		im->rep->blobs_present++;
		return 0;
	}
	fd = source_file(&im->src, name);
	if (fd < 0)
		return fd;
	/*
	 * The copy into the store writes every byte, a sparse file's holes
	 * too: a file larger than any layer the budget lets in is not copied.
	 */
	max += max / 64;
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_size > max) {
		char a1[32], a2[32];

		corral_format_size(st.st_size, a1, sizeof(a1));
		corral_format_size(max, a2, sizeof(a2));
		close(fd);
		return corral_set_err(im->err, -EFBIG, "%s: %s is %s, larger than any layer the import's budget takes (%s, --max-size)",
				      im->src.path, name, a1, a2);
	}
	r = store_put_blob(im->s, fd, expected, size, got, &was_new, im->err);
	if (r == 0 && fstat(fd, &st) < 0)
		r = corral_set_errno(im->err, errno, "stat %s", name);
	close(fd);
	if (r < 0)
		return corral_wrap_err(im->err, "%s: %s", im->src.path, name);
	if (json_object_set_new(im->copied, name, json_pack("[s, I]", got,
							    (json_int_t)st.st_size)) < 0)
		return corral_set_err(im->err, -ENOMEM, "out of memory for the import's blobs");
	if (digest)
		strcpy(digest, got);
	if (was_new)
		im->rep->blobs_new++;
	else
		im->rep->blobs_present++;
	return 0;
}

static int put_bytes(struct import *im, const char *text, char *digest)
{
	int fd = memfd_create("corral-manifest", MFD_CLOEXEC), r;
	size_t len = strlen(text);
	bool was_new;

	if (fd < 0)
		return corral_set_err(im->err, -errno, "memfd_create: %s", strerror(errno));
	if (write(fd, text, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) < 0) {
		r = corral_set_err(im->err, -errno, "write a manifest: %s", strerror(errno));
		close(fd);
		return r;
	}
	r = store_put_blob(im->s, fd, NULL, len, digest, &was_new, im->err);
	close(fd);
	if (r == 0)
		was_new ? im->rep->blobs_new++ : im->rep->blobs_present++;
	return r;
}

static int layer(struct import *im, const char *blob, const char *diff_id)
{
	int r;

	if (store_has_layer(im->s, diff_id)) {
		im->rep->layers_present++;
		return 0;
	}
	r = store_add_layer(im->s, blob, diff_id, &im->budget, im->rep, im->err);
	if (r == 0)
		im->rep->layers_new++;
	return r;
}

static const char *const layer_types[] = {
	"application/vnd.oci.image.layer.v1.tar",
	"application/vnd.oci.image.layer.v1.tar+gzip",
	"application/vnd.oci.image.layer.v1.tar+zstd",
	"application/vnd.docker.image.rootfs.diff.tar.gzip",
	"application/vnd.docker.image.rootfs.diff.tar",
};

static bool known_layer_type(const char *t)
{
	for (size_t i = 0; i < sizeof(layer_types) / sizeof(layer_types[0]); i++)
		if (t && !strcmp(t, layer_types[i]))
			return true;
	return false;
}

/* The config blob (stored already): its diff-ids, checked against n layers. */
static int config_diff_ids(struct import *im, const char *config, size_t n, json_t **ids)
{
	struct corral_image_config c;
	size_t len;
	char *text;
	int r;

	r = store_read_blob(im->s, config, META_MAX, &text, &len, im->err);
	if (r < 0)
		return r;
	r = image_config_parse(text, len, &c, ids, im->err);
	free(text);
	if (r < 0)
		return corral_wrap_err(im->err, "%s: config %s", im->src.path, config);
	image_config_free(&c);
	if (n > IMAGE_LAYERS_MAX) {
		json_decref(*ids);
		*ids = NULL;	/* the callers' out: frees it too */
		return corral_set_err(im->err, -E2BIG, "%s: config %s: %zu layers, more than the %d a sandbox can stack",
				      im->src.path, config, n, IMAGE_LAYERS_MAX);
	}
	if (json_array_size(*ids) != n) {
		size_t listed = json_array_size(*ids);

		json_decref(*ids);
		*ids = NULL;
		return corral_set_err(im->err, -EINVAL, "%s: config %s lists %zu layers' diff-ids for %zu layers",
				      im->src.path, config, listed, n);
	}
	return 0;
}

static int record(struct import *im, const char *digest, const char *config,
		  json_t *blobs, json_t *ids, uint64_t size, char **names, size_t nnames)
{
	int r = store_record_image(im->s, digest, config, blobs, ids, size, names, nnames,
				   im->err);

	if (r < 0)
		return r;
	image_strv_add(&im->rep->digests, &im->rep->ndigests, digest);
	for (size_t i = 0; i < nnames; i++)
		image_strv_add(&im->rep->names, &im->rep->nnames, names[i]);
	return 0;
}

/* ---- OCI layout ---------------------------------------------------------------- */

static const char *host_arch(void)
{
	static const struct { const char *uname, *oci; } map[] = {
		{ "x86_64", "amd64" }, { "aarch64", "arm64" }, { "i686", "386" },
		{ "armv7l", "arm" }, { "ppc64le", "ppc64le" }, { "s390x", "s390x" },
		{ "riscv64", "riscv64" },
	};
	static struct utsname u;

	if (uname(&u) < 0)
		return "amd64";
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(u.machine, map[i].uname))
			return map[i].oci;
	return u.machine;
}

/* "NAME:TAG" as written, or a bare tag for the file's own base name. */
static void add_name(struct import *im, const char *given, char ***names, size_t *n)
{
	char full[512], base[256], buf[300];
	struct corral_err e = { 0 };
	size_t j = 0;

	if (!strchr(given, '/') && !strchr(given, ':')) {
		const char *b = strrchr(im->src.path, '/');

		b = b && b[1] ? b + 1 : im->src.path;
		for (; *b && *b != '.' && j + 1 < sizeof(base); b++)
			base[j++] = isalnum((unsigned char)*b) ? tolower((unsigned char)*b) : '-';
		base[j] = '\0';
		snprintf(buf, sizeof(buf), "localhost/%s:%s", base, given);
		given = buf;
	}
	if (corral_image_ref_normalize(given, full, sizeof(full), &e) < 0) {
		image_report_note(im->rep, "name \"%.100s\" not used: %s", given, e.msg);
		return;
	}
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*names)[i], full))
			return;
	image_strv_add(names, n, full);
}

static int oci_manifest(struct import *im, const char *digest, uint64_t size,
			char **names, size_t nnames)
{
	char path[128], config[CORRAL_DIGEST_MAX], blob[CORRAL_DIGEST_MAX];
	json_t *m = NULL, *layers, *blobs = json_array(), *ids = NULL, *l;
	json_error_t je;
	uint64_t total = 0;
	char *text = NULL;
	size_t len, i;
	int r;

	snprintf(path, sizeof(path), "blobs/sha256/%s", digest + 7);
	r = put(im, path, digest, size, NULL);
	if (r == 0)
		r = store_read_blob(im->s, digest, META_MAX, &text, &len, im->err);
	if (r < 0)
		goto out;
	m = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	layers = json_object_get(m, "layers");
	l = json_object_get(m, "config");
	if (!json_is_array(layers) || !json_is_string(json_object_get(l, "digest")) ||
	    !image_valid_digest(json_string_value(json_object_get(l, "digest")))) {
		r = corral_set_err(im->err, -EINVAL, "%s: manifest %s: %s", im->src.path, digest,
				   m ? "no config digest or layers list" : je.text);
		goto out;
	}
	json_array_append_new(blobs, json_string(digest));
	snprintf(path, sizeof(path), "blobs/sha256/%s",
		 json_string_value(json_object_get(l, "digest")) + 7);
	r = put(im, path, json_string_value(json_object_get(l, "digest")),
		json_integer_value(json_object_get(l, "size")), config);
	if (r == 0)
		r = config_diff_ids(im, config, json_array_size(layers), &ids);
	if (r < 0)
		goto out;
	json_array_append_new(blobs, json_string(config));
	json_array_foreach(layers, i, l) {
		const char *ld = json_string_value(json_object_get(l, "digest"));
		const char *type = json_string_value(json_object_get(l, "mediaType"));

		if (!ld || !image_valid_digest(ld) || !known_layer_type(type) ||
		    json_object_get(l, "urls")) {
			r = corral_set_err(im->err, -ENOTSUP, "%s: manifest %s: layer %zu (%.80s) is not a tar, tar+gzip or tar+zstd layer held in the archive",
					   im->src.path, digest, i, type ? type : "no mediaType");
			goto out;
		}
		snprintf(path, sizeof(path), "blobs/sha256/%s", ld + 7);
		r = put(im, path, ld, json_integer_value(json_object_get(l, "size")), blob);
		if (r == 0)
			r = layer(im, blob, json_string_value(json_array_get(ids, i)));
		if (r < 0)
			goto out;
		json_array_append_new(blobs, json_string(blob));
		total += json_integer_value(json_object_get(l, "size"));
	}
	r = record(im, digest, config, blobs, ids, total, names, nnames);
out:
	free(text);
	json_decref(m);
	json_decref(blobs);
	json_decref(ids);
	return r;
}

static bool is_index_type(const char *t)
{
	return t && (!strcmp(t, "application/vnd.oci.image.index.v1+json") ||
		     !strcmp(t, "application/vnd.docker.distribution.manifest.list.v2+json"));
}

static bool is_manifest_type(const char *t)
{
	return t && (!strcmp(t, "application/vnd.oci.image.manifest.v1+json") ||
		     !strcmp(t, "application/vnd.docker.distribution.manifest.v2+json"));
}

static int oci_descriptor(struct import *im, json_t *desc, char **names, size_t nnames,
			  int depth);

/* An image index (multi-platform): the manifest for this host's platform. */
static int oci_index(struct import *im, const char *digest, uint64_t size, char **names,
		     size_t nnames, int depth)
{
	char path[128], *text = NULL;
	json_t *idx = NULL, *d;
	json_error_t je;
	size_t len, i;
	int r;

	snprintf(path, sizeof(path), "blobs/sha256/%s", digest + 7);
	r = put(im, path, digest, size, NULL);
	if (r == 0)
		r = store_read_blob(im->s, digest, META_MAX, &text, &len, im->err);
	if (r < 0)
		return r;
	idx = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	free(text);
	json_array_foreach(json_object_get(idx, "manifests"), i, d) {
		json_t *p = json_object_get(d, "platform");
		const char *os = json_string_value(json_object_get(p, "os"));
		const char *arch = json_string_value(json_object_get(p, "architecture"));

		if (os && arch && !strcmp(os, "linux") && !strcmp(arch, host_arch())) {
			r = oci_descriptor(im, d, names, nnames, depth + 1);
			json_decref(idx);
			return r;
		}
	}
	json_decref(idx);
	return corral_set_err(im->err, -ENOENT, "%s: index %s has no manifest for linux/%s",
			      im->src.path, digest, host_arch());
}

static int oci_descriptor(struct import *im, json_t *desc, char **names, size_t nnames,
			  int depth)
{
	const char *type = json_string_value(json_object_get(desc, "mediaType"));
	const char *digest = json_string_value(json_object_get(desc, "digest"));
	uint64_t size = json_integer_value(json_object_get(desc, "size"));

	if (!digest || !image_valid_digest(digest))
		return corral_set_err(im->err, -EINVAL, "%s: a descriptor without a sha256 digest",
				      im->src.path);
	if (depth > 2)
		return corral_set_err(im->err, -ELOOP, "%s: indexes nested too deep at %s",
				      im->src.path, digest);
	if (is_index_type(type))
		return oci_index(im, digest, size, names, nnames, depth);
	if (is_manifest_type(type))
		return oci_manifest(im, digest, size, names, nnames);
	return corral_set_err(im->err, -ENOTSUP, "%s: %s is a %.80s, not an image manifest or index",
			      im->src.path, digest, type ? type : "descriptor without mediaType");
}

static int import_oci(struct import *im)
{
	json_t *index, *manifests, *d, *layout;
	size_t i;
	int r = 0;

	layout = source_has(&im->src, "oci-layout") ? source_json(&im->src, "oci-layout", META_MAX) : NULL;
	if (layout && strcmp(json_string_value(json_object_get(layout, "imageLayoutVersion")) ?: "",
			     "1.0.0") != 0) {
		json_decref(layout);
		return corral_set_err(im->err, -ENOTSUP, "%s: oci-layout is not version 1.0.0",
				      im->src.path);
	}
	json_decref(layout);
	index = source_json(&im->src, "index.json", META_MAX);
	if (!index)
		return im->err->code;
	manifests = json_object_get(index, "manifests");
	if (!json_is_array(manifests) || json_array_size(manifests) == 0 ||
	    json_array_size(manifests) > IMAGE_MANIFESTS_MAX) {
		json_decref(index);
		return corral_set_err(im->err, -EINVAL, "%s: index.json lists %zu manifests (1 to %d)",
				      im->src.path, json_array_size(manifests), IMAGE_MANIFESTS_MAX);
	}
	json_array_foreach(manifests, i, d) {
		json_t *ann = json_object_get(d, "annotations");
		const char *full = json_string_value(json_object_get(ann, "io.containerd.image.name"));
		const char *ref = json_string_value(json_object_get(ann, "org.opencontainers.image.ref.name"));
		char **names = NULL;
		size_t nnames = 0;

		if (full)
			add_name(im, full, &names, &nnames);
		else if (ref)
			add_name(im, ref, &names, &nnames);
		r = oci_descriptor(im, d, names, nnames, 0);
		image_strv_free(names, nnames);
		if (r < 0)
			break;
	}
	json_decref(index);
	return r;
}

/* ---- docker save / podman save ------------------------------------------------- */

static const char *sniff_type(struct import *im, const char *blob)
{
	unsigned char m[4] = { 0 };
	struct corral_err quiet;
	int fd = store_open_blob(im->s, blob, &quiet);

	if (fd >= 0) {
		if (read(fd, m, sizeof(m)) < 0)
			m[0] = 0;
		close(fd);
	}
	if (m[0] == 0x1f && m[1] == 0x8b)
		return "application/vnd.oci.image.layer.v1.tar+gzip";
	if (m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd)
		return "application/vnd.oci.image.layer.v1.tar+zstd";
	return "application/vnd.oci.image.layer.v1.tar";
}

static uint64_t blob_size(struct import *im, const char *blob)
{
	struct corral_err quiet;
	int fd = store_open_blob(im->s, blob, &quiet);
	struct stat st;
	uint64_t n = 0;

	if (fd >= 0 && fstat(fd, &st) == 0)
		n = st.st_size;
	if (fd >= 0)
		close(fd);
	return n;
}

static int docker_image(struct import *im, json_t *entry, size_t k)
{
	const char *cfg_path = json_string_value(json_object_get(entry, "Config"));
	json_t *layers = json_object_get(entry, "Layers"), *tags = json_object_get(entry, "RepoTags");
	json_t *ids = NULL, *blobs = json_array(), *descs = json_array(), *manifest = NULL, *v;
	char config[CORRAL_DIGEST_MAX], blob[CORRAL_DIGEST_MAX], digest[CORRAL_DIGEST_MAX];
	char **names = NULL, *text = NULL;
	uint64_t total = 0;
	size_t nnames = 0, i;
	int r;

	if (!cfg_path || !json_is_array(layers)) {
		r = corral_set_err(im->err, -EINVAL, "%s: manifest.json[%zu] has no Config or Layers",
				   im->src.path, k);
		goto out;
	}
	r = put(im, cfg_path, NULL, 0, config);
	if (r == 0)
		r = config_diff_ids(im, config, json_array_size(layers), &ids);
	if (r < 0)
		goto out;
	json_array_foreach(layers, i, v) {
		if (!json_is_string(v)) {
			r = corral_set_err(im->err, -EINVAL, "%s: manifest.json[%zu].Layers[%zu] is not a path",
					   im->src.path, k, i);
			goto out;
		}
		r = put(im, json_string_value(v), NULL, 0, blob);
		if (r == 0)
			r = layer(im, blob, json_string_value(json_array_get(ids, i)));
		if (r < 0)
			goto out;
		json_array_append_new(blobs, json_string(blob));
		json_array_append_new(descs, json_pack("{s:s, s:s, s:I}", "mediaType",
						       sniff_type(im, blob), "digest", blob,
						       "size", (json_int_t)blob_size(im, blob)));
		total += blob_size(im, blob);
	}
	/* the OCI manifest docker save did not write: the image's one digest */
	manifest = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:O}", "schemaVersion", 2,
			     "mediaType", "application/vnd.oci.image.manifest.v1+json",
			     "config", "mediaType", "application/vnd.oci.image.config.v1+json",
			     "digest", config, "size", (json_int_t)blob_size(im, config),
			     "layers", descs);
	text = manifest ? json_dumps(manifest, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	if (!text) {
		r = corral_set_err(im->err, -ENOMEM, "out of memory for a manifest");
		goto out;
	}
	r = put_bytes(im, text, digest);
	if (r < 0)
		goto out;
	json_array_insert_new(blobs, 0, json_string(config));
	json_array_insert_new(blobs, 0, json_string(digest));
	json_array_foreach(tags, i, v)
		if (json_is_string(v))
			add_name(im, json_string_value(v), &names, &nnames);
	r = record(im, digest, config, blobs, ids, total, names, nnames);
out:
	image_strv_free(names, nnames);
	free(text);
	json_decref(manifest);
	json_decref(descs);
	json_decref(blobs);
	json_decref(ids);
	return r;
}

static int import_docker(struct import *im)
{
	json_t *m = source_json(&im->src, "manifest.json", META_MAX), *entry;
	size_t i;
	int r = 0;

	if (!m)
		return im->err->code;
	if (!json_is_array(m) || json_array_size(m) == 0 ||
	    json_array_size(m) > IMAGE_MANIFESTS_MAX) {
		json_decref(m);
		return corral_set_err(im->err, -EINVAL, "%s: manifest.json is not a list of 1 to %d images",
				      im->src.path, IMAGE_MANIFESTS_MAX);
	}
	json_array_foreach(m, i, entry)
		if ((r = docker_image(im, entry, i)) < 0)
			break;
	json_decref(m);
	return r;
}

/* ---- the verb --------------------------------------------------------------------- */

static int name_one(struct import *im, const char *name)
{
	char full[512];
	struct corral_err *err = im->err;
	json_t *idx, *img;
	int r;

	if (im->rep->ndigests != 1)
		return corral_set_err(err, -EINVAL, "--name: %s holds %zu images, not one",
				      im->src.path, im->rep->ndigests);
	r = corral_image_ref_normalize(name, full, sizeof(full), err);
	if (r < 0)
		return r;
	idx = store_load_index(im->s, err);
	if (!idx)
		return err->code;
	img = json_object_get(json_object_get(idx, "images"), im->rep->digests[0]);
	json_array_append_new(json_object_get(img, "names"), json_string(full));
	r = store_save_index(im->s, idx, err);
	json_decref(idx);
	if (r == 0)
		image_strv_add(&im->rep->names, &im->rep->nnames, full);
	return r;
}

int corral_image_import(struct corral_image_store *s, const char *path,
			const char *extra_name, const struct corral_image_limits *lim,
			struct corral_image_import_report *rep, struct corral_err *err)
{
	struct import im = { .s = s, .rep = rep, .err = err, .copied = json_object() };
	int r;

	memset(rep, 0, sizeof(*rep));
	if (!im.copied)
		return corral_set_err(err, -ENOMEM, "out of memory for the import's blobs");
	if (lim)
		im.budget = *lim;
	else
		corral_image_limits_init(&im.budget);
	r = store_lock(s, true, err);
	if (r < 0) {
		json_decref(im.copied);
		return r;
	}
	if (s->note[0])
		image_report_note(rep, "%s", s->note);
	store_clean_tmp(s);
	r = source_open(&im.src, s, path, im.budget.max_bytes, err);
	if (r == 0) {
		if (source_has(&im.src, "manifest.json"))
			r = import_docker(&im);
		else if (source_has(&im.src, "index.json"))
			r = import_oci(&im);
		else
			r = corral_set_err(err, -EINVAL, "%s is neither an OCI image layout (index.json) nor a docker save archive (manifest.json)",
					   path);
	}
	if (r == 0 && extra_name)
		r = name_one(&im, extra_name);
	if (r < 0) {
		/* what the failed image brought and nothing else uses goes */
		struct corral_err ignored;
		json_t *idx = store_load_index(s, &ignored);

		if (idx)
			store_gc(s, idx);
		json_decref(idx);
	}
	source_close(&im.src);
	store_clean_tmp(s);
	store_unlock(s);
	json_decref(im.copied);
	return r;
}
