/*
 * image.h - between the image store's modules: image_ref.c (names),
 * image_store.c (blobs, layers, the index), image_import.c (the archive
 * formats), image_unpack.c (a layer into a directory, least privileged).
 */
#ifndef CORRAL_IMAGE_H
#define CORRAL_IMAGE_H

#include "internal.h"

#include <jansson.h>
#include <nettle/sha2.h>
#include <stdbool.h>
#include <stdint.h>

/* Layout under the store's directory (see image_store.c). */
#define IMAGE_BLOBS	"blobs/sha256"
#define IMAGE_LAYERS	"layers"
#define IMAGE_TMP	"tmp"
#define IMAGE_INDEX	"index.json"
/* A layer directory holds the tree and the owners the tar gave. */
#define LAYER_ROOT	"root"
#define LAYER_OWNERS	"owners"

/*
 * Who unpacks a root store's layers and owns them: the agent's host id in
 * corral's range (ns.c), the id a root-run sandbox on an image runs as, so
 * the image's files are its own.  Not a host account's: "nobody" (65534,
 * an older corral's choice) is shared with host daemons, any of which
 * could then signal the agent.
 * Where the range is in use on this host: 65534, as before (ns.c says why
 * then); layers an older corral left at 65534 are migrated (image_migrate.c).
 */
#define IMAGE_OWNER_UID (CORRAL_IDS_BASE + CORRAL_AGENT_UID)
#define IMAGE_OWNER_GID (CORRAL_IDS_BASE + CORRAL_AGENT_GID)
#define IMAGE_LEGACY_UID 65534u
#define IMAGE_LEGACY_GID 65534u

struct corral_image_store {
	char *dir;
	int dirfd;
	int lockfd;
	uid_t uid;		/* who unpacks and owns the layers (above) */
	gid_t gid;
	char note[200];		/* why not the range's id, for an import's report */
};

/* ---- image_ref.c ---- */
bool image_valid_digest(const char *s);		/* "sha256:" + 64 lowercase hex */
bool image_looks_like_digest(const char *ref);	/* [sha256:]hex, >= 12 digits */

/* ---- sha256 over a stream (nettle) ---- */
struct image_hash {
	struct sha256_ctx ctx;
	bool live;		/* between init and final (or free) */
};
void image_hash_init(struct image_hash *h);
void image_hash_update(struct image_hash *h, const void *buf, size_t len);
/* "sha256:HEX" into out (CORRAL_DIGEST_MAX); the digest is done after it. */
void image_hash_final(struct image_hash *h, char *out);
void image_hash_free(struct image_hash *h);

/* ---- image_store.c, for the importer ---- */
/*
 * Copy fd into the store as a blob while hashing it; expected (or NULL)
 * must match.  *was_new: it was not there before.  digest_out gets the
 * digest (may be NULL).
 */
int store_put_blob(struct corral_image_store *s, int fd, const char *expected,
		   uint64_t expected_size, char *digest_out, bool *was_new,
		   struct corral_err *err);
/* Open a blob for reading; its digest is checked by whoever reads it. */
int store_open_blob(struct corral_image_store *s, const char *digest,
		    struct corral_err *err);
/* Read a small blob whole, verifying its digest; malloc'd, NUL-ended. */
/* fd's bytes whole, at most max, NUL-terminated: 0, -EFBIG past max, -errno. */
int image_read_fd(int fd, size_t max, char **out, size_t *len);
/* fd's JSON document, read whole (duplicate keys refused); NULL with *je and *r. */
json_t *image_json_fd(int fd, size_t max, json_error_t *je, int *r);
int store_read_blob(struct corral_image_store *s, const char *digest,
		    size_t max, char **out, size_t *len, struct corral_err *err);
bool store_has_layer(struct corral_image_store *s, const char *diff_id);
/*
 * Unpack the blob into the layer diff_id (a fresh directory renamed into
 * place when complete).  budget is decreased by what the layer used.
 */
int store_add_layer(struct corral_image_store *s, const char *blob_digest,
		    const char *diff_id, struct corral_image_limits *budget,
		    struct corral_image_import_report *rep,
		    struct corral_err *err);
/*
 * Record an image: manifest digest, config digest, the blobs and layers it
 * holds, and names (normalised) moved to it from any other image.
 */
int store_record_image(struct corral_image_store *s, const char *digest,
		       const char *config, json_t *blobs, json_t *diff_ids,
		       uint64_t size, char **names, size_t nnames,
		       struct corral_err *err);
/* The exclusive lock also migrates an older corral's layers (below). */
int store_lock(struct corral_image_store *s, bool exclusive, struct corral_err *err);
/* The shared lock, or -EAGAIN at once while an import or removal holds it. */
int store_trylock_shared(struct corral_image_store *s, struct corral_err *err);
void store_unlock(struct corral_image_store *s);
/* Under the exclusive lock: remove what earlier imports left in tmp/. */
void store_clean_tmp(struct corral_image_store *s);
/* The index ({"version":1,"images":{DIGEST:{...}}}), read and written whole. */
json_t *store_load_index(struct corral_image_store *s, struct corral_err *err);
int store_save_index(struct corral_image_store *s, json_t *idx, struct corral_err *err);
/* Remove blobs and layers no image of idx refers to; how many. */
int store_gc(struct corral_image_store *s, json_t *idx);
/* A fresh directory under tmp/; name gets its path relative to the store. */
int store_tmpdir(struct corral_image_store *s, char *name, size_t len,
		 struct corral_err *err);
/* Remove a tree beneath dirfd without following any symlink. */
int store_remove_tree(int dirfd, const char *name);

/* ---- image_migrate.c ---- */
/*
 * As root, layers an older corral unpacked as IMAGE_LEGACY_UID become
 * IMAGE_OWNER_UID's, under the exclusive lock: held already (LOCKED),
 * waited for (WAIT), or taken only if free at once (TRY: a daemon's
 * caller; the holder, an import or a removal, migrates itself).
 */
enum store_migrate_lock { MIGRATE_LOCKED, MIGRATE_WAIT, MIGRATE_TRY };
int store_migrate(struct corral_image_store *s, enum store_migrate_lock how,
		  struct corral_err *err);

/* add a note to an import's report ("layer sha256:...: ...") */
void image_report_note(struct corral_image_import_report *rep,
		       const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int image_strv_add(char ***v, size_t *n, const char *s);
void image_strv_free(char **v, size_t n);

/*
 * The most a layer's tar may hold under lim: its files' bytes, a header
 * or two (1.5 KiB) for each, and the end blocks.  A blob (compressed, or
 * not) is allowed a sixty-fourth more: gzip and zstd grow what they
 * cannot compress by less.
 */
static inline uint64_t image_stream_max(const struct corral_image_limits *lim)
{
	return lim->max_bytes + lim->max_files * 1536 + (1 << 20);
}

/* ---- image_source.c: the files of an archive or a layout ---- */
struct src_entry {
	char *path;
	char *alias;			/* a link: the entry it stands for */
	long file;			/* tmp file number, or -1 */
};

struct source {
	const char *path;		/* as given */
	int dirfd;			/* the layout, or tmp/ with the tar's files */
	char tmp[128];			/* store-relative, for an archive */
	struct src_entry *ents;
	size_t nents;
	struct corral_image_store *s;
	uint64_t max_bytes;		/* a tar's files together */
	struct corral_err *err;
};

/* A layout directory, or a tar read into the store's tmp/ (the store locked). */
int source_open(struct source *src, struct corral_image_store *s, const char *path,
		uint64_t max_bytes, struct corral_err *err);
/* The file NAME ("index.json", "blobs/sha256/HEX"), opened for reading. */
int source_file(struct source *src, const char *name);
bool source_has(struct source *src, const char *name);
json_t *source_json(struct source *src, const char *name, size_t max);
void source_close(struct source *src);

/* ---- image_config.c ---- */
/* The parts of an image config (JSON) a run applies; diff_ids too. */
int image_config_parse(const char *text, size_t len, struct corral_image_config *c,
		       json_t **diff_ids, struct corral_err *err);
void image_config_free(struct corral_image_config *c);

/* ---- image_user.c ---- */
/* The image's User as p->user_name / user_home (uid 1000 still). */
int image_user_apply(struct corral_policy *p, const struct corral_image *img,
		     struct corral_err *err);

/* ---- image_unpack.c ---- */

/*
 * fn(arg, out, err) in a forked child that, as root, is uid and gid
 * (the store's owner) with no groups, no_new_privs and Landlock
 * allowing only destpath (where it may write); out (outlen bytes) and err
 * come back to the caller.  For everything that parses an archive.
 */
int image_unprivileged(const char *destpath, uid_t uid, gid_t gid,
		       int (*fn)(void *arg, void *out, struct corral_err *err),
		       void *arg, void *out, size_t outlen, struct corral_err *err);

struct unpack_report {
	char diff_id[CORRAL_DIGEST_MAX];
	uint64_t files, bytes;			/* entries, declared file bytes */
	uint64_t stream, compressed;		/* the tar's bytes, the blob's */
	uint64_t devices, setid, caps, other;	/* dropped or stripped */
	uint64_t absolute;			/* names made relative */
	char examples[5][160];			/* the first of each kind */
};

/*
 * Unpack the tar (gzip, zstd or plain) read from blobfd into destfd's
 * directory (at destpath, for Landlock): LAYER_ROOT the tree in overlay
 * form, LAYER_OWNERS the owners.  As root this runs in a child that is
 * uid and gid (the store's owner); destfd must be owned by it.  The
 * blob's digest and the tar's (the diff-id) are checked against
 * blob_digest and diff_id.
 */
int image_unpack(int blobfd, const char *blob_digest, const char *diff_id,
		 int destfd, const char *destpath, uid_t uid, gid_t gid,
		 const struct corral_image_limits *budget,
		 struct unpack_report *rep, struct corral_err *err);

#endif
