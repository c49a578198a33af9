/*
 * sc_prebuilt_none.c - no built-in seccomp programs: sc_compile compiles
 * every one.  For tools/sc_prebuild itself, which makes them, and for the
 * fuzzers' library, which does not build the generated table.
 */
#include "internal.h"

const struct sc_prebuilt sc_prebuilt[1];
const size_t sc_nprebuilt = 0;
