/* client.h - the parts of the daemon's client verbs (client.c) that hold logic
 * worth testing on their own. */
#ifndef CORRAL_CLIENT_H
#define CORRAL_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * The exit status `corral run` gives for a result object, computed from the
 * JSON that the daemon's exec answers with (status, exit_code, signal), the
 * by corral_result_exit_code() itself.
 * Returns -1 when the object does not say: no status, or no exit_code where
 * neither the status nor a signal gives the answer.
 */
int client_exit_code(const json_t *result);

/* A sandbox id as the daemon makes them: 1 to 120 of [A-Za-z0-9._-], no
 * leading dot (so that it cannot be a path segment like ".."). */
bool client_valid_id(const char *id);

/*
 * "ID:/path" names a file in sandbox ID: true, with the id copied to
 * id[idlen] and *path pointing at the absolute path in arg.  Anything else
 * is a local path: false.
 */
bool client_split_remote(const char *arg, char *id, size_t idlen,
			 const char **path);

#endif
