# corral - build, test, benchmark.  `make help` lists the targets.

CC      ?= cc
PKGS    := libseccomp jansson libevent zlib
# libcurl's headers only: the client verbs load it at run time (src/cli/curl.c)
HDR_PKGS := libcurl
# image archives and layers (src/lib/image_*.c); nettle's SHA-256, SHA-1
# and base64 (audit.c, image_store.c, patch.c, result.c, secrets.c)
PKGS    += libarchive nettle
# TLS termination in the egress proxy: a plugin, $(BUILD)/corral-tls.so
# (src/tls/, src/lib/tls_plugin.h), linked against these shared; corral
# itself links none of them
TLS_PKGS := libssl libcrypto libevent_openssl
# ldns only in tests/unit_dns.c and fuzz/fuzz_dns.c: an independent reader
# of what src/lib/dnsmsg.c writes (ldns's DNSSEC code needs libcrypto)
TEST_PKGS := ldns
BUILD   ?= build
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Wshadow -Wformat=2 -Wno-unused-parameter
CPPFLAGS += -D_GNU_SOURCE
# Each part sees the API and its own headers: the front ends (the CLI, the
# daemon) only include/corral.h of the library; tests and fuzzers see its
# internals.  The library exports only what corral.h marks CORRAL_PUBLIC.
LIB_FLAGS    := -Iinclude -Isrc/lib -fvisibility=hidden
CLI_FLAGS    := -Iinclude -Isrc/cli
DAEMON_FLAGS := -Iinclude -Isrc/daemon
TEST_FLAGS   := -Iinclude -Isrc/lib
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) $(HDR_PKGS) $(TLS_PKGS) $(TEST_PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
TLS_LIBS   := $(shell pkg-config --libs $(TLS_PKGS) 2>/dev/null)
TEST_LIBS  := $(shell pkg-config --libs $(TEST_PKGS) 2>/dev/null)
ALL_CFLAGS = -std=gnu11 $(WARN) $(CFLAGS) $(PKG_CFLAGS) $(EXTRA_CFLAGS)
# A cold `corral run` paid for loading and relocating 25 shared objects
# (libarchive brings libxml2, ICU and libstdc++): 11.3M instructions before
# main(), 0.75M with the libraries below linked in (issue 17).  Linked in
# is what Debian ships as .a; --gc-sections drops the archive writers that
# would pull libxml2.  libevent stays shared: the daemon's evhttp_send_error
# (src/daemon/api_errors.c) replaces libevent's own, which only works across
# a shared object.  The cost: a security update of one of these libraries
# reaches corral when it is rebuilt.  `make LINK=shared` links as before;
# it is also what a host without one of the .a files gets.  OpenSSL is not
# among them, nor linked at all: its ~18k relocations cost every start,
# and only a policy that terminates TLS needs it, so it is in
# corral-tls.so, loaded then (src/lib/tls_plugin.h; tests/plugin.sh
# checks it stays out).
LINK ?= static
# DNS queries are read by glibc's resolver (src/lib/dnsmsg.c): ns_initparse
# and ns_parserr are in libresolv.  Its .a is made for wholly static
# programs: linked into this one it binds libc's internals (errno and
# __libc_dn_expand, GLIBC_PRIVATE), which no glibc update promises to
# keep.  Its shared object cost every start about 0.25 ms here (mapped,
# relocated, five page faults), so dnsmsg.c dlopen()s it at the first
# DNS message instead.  -lresolv stays, --as-needed: with glibc >= 2.34
# nothing else of it is used and the binary does not need it; an older
# glibc keeps dn_skipname and ns_name_unpack there.
RESOLV := -Wl,--push-state,--as-needed -lresolv -Wl,--pop-state
STATIC_A := seccomp jansson archive nettle acl \
	    zstd lz4 lzma bz2 z http_parser
ifeq ($(LINK),static)
STATIC_MISSING := $(strip $(foreach l,$(STATIC_A),$(if $(filter /%,$(shell $(CC) -print-file-name=lib$(l).a)),,$(l))))
ifneq ($(STATIC_MISSING),)
$(info corral: no static lib$(firstword $(STATIC_MISSING)).a: linking shared libraries)
LINK := shared
endif
endif
ifeq ($(LINK),static)
LDLIBS  += -Wl,--gc-sections -Wl,-Bstatic $(STATIC_A:%=-l%) -Wl,-Bdynamic \
	   -levent $(RESOLV) -ldl -lm -lpthread
else
LDLIBS  += $(PKG_LIBS) -lhttp_parser $(RESOLV) -ldl -lm
endif
# resolved once before the first fork, not again in each process of a run;
# and the GOT read-only (full RELRO).  `override`: a LDFLAGS given on the
# command line (make check's builds give one) adds to this, never drops it.
override LDFLAGS += -Wl,-z,now

LIB_SRC := $(sort $(wildcard src/lib/*.c))
TLS_SRC := $(sort $(wildcard src/tls/*.c))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
DAEMON_SRC := $(sort $(wildcard src/daemon/*.c))
UNIT_SRC := $(sort $(wildcard tests/unit_*.c))
HELPER_SRC := $(sort $(wildcard tests/helpers/*.c))

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/%.o)
# with its own copy of src/lib/livemem.c: the list of OpenSSL's blocks
TLS_OBJ := $(TLS_SRC:%.c=$(BUILD)/%.o) $(BUILD)/src/tls/livemem.o
TLS_PLUGIN := $(BUILD)/corral-tls.so
# the CLI but its main(): what tests/unit_client.c tests
CLI_LIB := $(BUILD)/libcli.a
UNIT_BIN := $(UNIT_SRC:tests/%.c=$(BUILD)/tests/%)
HELPER_BIN := $(HELPER_SRC:tests/helpers/%.c=$(BUILD)/tests/helpers/%)
CLIENT_BIN := $(BUILD)/tests/serve_client
# the fuzz targets with fuzz/replay.c's main(): their corpora, each input
# once, with this build's compiler and sanitizers (make check's ASan build)
FUZZ_TARGETS := sni socks httpreq dns policy api hold image secrets respmask ociconfig nflog untar within layer
REPLAY_BIN := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/replay_%)

.PHONY: oci-validation
.PHONY: all clean check check-werror check-asan test unit integration demo bench deps help fuzz soak chaos image-debian-test

all: $(BUILD)/corral $(TLS_PLUGIN) $(UNIT_BIN) $(HELPER_BIN) $(CLIENT_BIN) $(REPLAY_BIN)

$(LIB_OBJ): PART_FLAGS := $(LIB_FLAGS)
$(CLI_OBJ): PART_FLAGS := $(CLI_FLAGS)
$(DAEMON_OBJ): PART_FLAGS := $(DAEMON_FLAGS)
# the plugin: position-independent, its one export marked in plugin.c
$(TLS_OBJ): PART_FLAGS := -Isrc/lib -Isrc/tls -fPIC -fvisibility=hidden

$(BUILD)/%.o: %.c include/corral.h src/lib/internal.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PART_FLAGS) $(ALL_CFLAGS) -MMD -c -o $@ $<

$(BUILD)/src/tls/livemem.o: src/lib/livemem.c src/lib/livemem.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PART_FLAGS) $(ALL_CFLAGS) -MMD -c -o $@ $<

# The seccomp programs, compiled once here rather than in every cold start
# (tools/sc_prebuild.c says why); the generator links the library's objects.
$(BUILD)/tools/sc_prebuild: tools/sc_prebuild.c tools/sc_prebuilt_none.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_FLAGS) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $(filter %.c,$^) \
		$(LIB_OBJ) $(LDLIBS)

$(BUILD)/gen/sc_prebuilt.c: $(BUILD)/tools/sc_prebuild
	@mkdir -p $(dir $@)
	$< > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/sc_prebuilt.o: $(BUILD)/gen/sc_prebuilt.c include/corral.h src/lib/internal.h
	$(CC) $(CPPFLAGS) $(LIB_FLAGS) $(ALL_CFLAGS) -c -o $@ $<

# anew each time: a source removed (src/lib/tls.c) leaves no stale member
$(BUILD)/libcorral.a: $(LIB_OBJ) $(BUILD)/gen/sc_prebuilt.o
	rm -f $@ && ar rcs $@ $^

# corral loads its plugin from its own directory only: built with it
$(BUILD)/corral: $(CLI_OBJ) $(DAEMON_OBJ) $(BUILD)/libcorral.a | $(TLS_PLUGIN)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $(CLI_OBJ) $(DAEMON_OBJ) $(BUILD)/libcorral.a $(LDLIBS)

# OpenSSL and libevent_openssl shared, over the libevent corral already has
$(TLS_PLUGIN): $(TLS_OBJ)
	$(CC) -shared $(ALL_CFLAGS) $(LDFLAGS) -Wl,--no-undefined -o $@ $(TLS_OBJ) $(TLS_LIBS)

$(CLI_LIB): $(filter-out $(BUILD)/src/cli/main.o,$(CLI_OBJ))
	ar rcs $@ $^

$(BUILD)/tests/unit_%: tests/unit_%.c $(BUILD)/libcorral.a tests/unit.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_FLAGS) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libcorral.a $(LDLIBS)

# the mask's scan alone, for a change of spell.c (bench/mask_scan.c)
$(BUILD)/bench/mask_scan: bench/mask_scan.c $(BUILD)/libcorral.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_FLAGS) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libcorral.a $(LDLIBS)

# ldns, shared, to read the responses back
$(BUILD)/tests/unit_dns: tests/unit_dns.c $(BUILD)/libcorral.a tests/unit.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_FLAGS) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libcorral.a \
		$(LDLIBS) $(TEST_LIBS)

# the plugin's CA and contexts, linked in directly
$(BUILD)/tests/unit_tls: tests/unit_tls.c $(TLS_OBJ) $(BUILD)/libcorral.a tests/unit.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_FLAGS) -Isrc/tls $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(TLS_OBJ) \
		$(BUILD)/libcorral.a $(LDLIBS) $(TLS_LIBS)

# the client verbs' logic, from the CLI's objects (it brings its own cli_error)
$(BUILD)/tests/unit_client: tests/unit_client.c $(CLI_LIB) $(BUILD)/libcorral.a tests/unit.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_FLAGS) -Isrc/cli $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(CLI_LIB) $(BUILD)/libcorral.a $(LDLIBS)

# the binary's free(), linked in as corral has it
$(BUILD)/tests/unit_zerofree: tests/unit_zerofree.c $(BUILD)/src/cli/zerofree.o tests/unit.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_FLAGS) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/src/cli/zerofree.o

# The daemon's API without serve.c (the test stands in for its state files):
# its routes, checks and errno mapping, through the daemon's own objects.
API_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard src/daemon/api*.c src/daemon/registry.c))
$(BUILD)/tests/unit_api: tests/unit_api.c $(API_OBJ) $(BUILD)/libcorral.a tests/unit.h
	@mkdir -p $(dir $@)
	$(CC) -Iinclude -Isrc/daemon -D_GNU_SOURCE $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< \
		$(API_OBJ) $(BUILD)/libcorral.a $(LDLIBS)

# A fuzz target as a program that replays its corpus (fuzz/replay.c): the
# library's and the daemon API's objects of this build, from archives, so
# that a target that needs no API (or no serve.c) takes none of it.
REPLAY_FLAGS := -Iinclude -Isrc/lib -Isrc/daemon -Isrc/cli
$(BUILD)/fuzz/libapi.a: $(API_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/fuzz/replay_%: fuzz/fuzz_%.c fuzz/replay.c fuzz/tree.h $(BUILD)/fuzz/libapi.a $(BUILD)/libcorral.a
	$(CC) $(CPPFLAGS) $(REPLAY_FLAGS) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< fuzz/replay.c \
		$(REPLAY_OBJ) $(BUILD)/fuzz/libapi.a $(BUILD)/libcorral.a $(LDLIBS) $(REPLAY_LIBS)

# ldns reads back what dnsmsg.c wrote; config.json's reader is the CLI's
$(BUILD)/fuzz/replay_dns: REPLAY_LIBS := $(TEST_LIBS)
$(BUILD)/fuzz/replay_ociconfig: $(BUILD)/src/cli/oci_config.o $(BUILD)/src/cli/oci_reach.o
$(BUILD)/fuzz/replay_ociconfig: REPLAY_OBJ := $(BUILD)/src/cli/oci_config.o $(BUILD)/src/cli/oci_reach.o

# tests/serve.sh's client of the daemon: plain sockets, jansson only.
$(CLIENT_BIN): tests/serve_client.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_FLAGS) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(PKG_LIBS)

# Programs the attack tests run inside the sandbox: static, so they need
# nothing from the sandbox's view of the host.
$(BUILD)/tests/helpers/%: tests/helpers/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -Wall -Wextra -D_GNU_SOURCE -static -o $@ $< $(HELPER_LIBS)

# the tests' JSON reader, run on the host thousands of times a suite
$(BUILD)/tests/helpers/jget: HELPER_LIBS := -ljansson -lm
# and their HTTP client (see httpc.c)
$(BUILD)/tests/helpers/httpc: HELPER_LIBS := -lhttp_parser

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(DAEMON_OBJ:.o=.d) $(TLS_OBJ:.o=.d)

# The whole suite: a -Werror build, unit and integration tests as root and
# as an unprivileged user, then all of it again under ASan+UBSan.
check:
	tests/check.sh

unit: all
	for t in $(UNIT_BIN); do $$t || exit 1; done

integration: all
	tests/integration.sh $(BUILD)/corral $(BUILD)/tests/helpers

demo: all
	tests/demo.sh $(BUILD)/corral

bench: all
	bench/bench.sh $(BUILD)/corral

# Not in check: a debootstrap'd Debian image, apt-get install inside it
# through the egress proxy from Debian's mirror (minutes, real network).
image-debian-test: all
	tests/image_debian.sh $(BUILD)/corral

# SOAK_CYCLES sandboxes in a row (and 20 at once); nothing may be left.
SOAK_CYCLES ?= 10000
soak: all
	tests/soak.sh $(BUILD)/corral $(SOAK_CYCLES)
	/usr/bin/python3 tests/soak_serve.py $(BUILD)/corral $(SOAK_CYCLES)

# The daemon's API at random for CHAOS_SECONDS, then CHAOS_CALLS of corral
# mcp's tools; CHAOS_SEED replays a run (the check runs 30 s and 300 calls;
# use the ASan build: make BUILD=build-asan ...).
CHAOS_SECONDS ?= 600
CHAOS_CALLS ?= 5000
chaos: all
	/usr/bin/python3 tests/chaos_serve.py $(BUILD)/corral $(CHAOS_SECONDS) $(CHAOS_SEED)
	/usr/bin/python3 tests/chaos_mcp.py $(BUILD)/corral $(CHAOS_CALLS) $(CHAOS_SEED)

# libFuzzer targets, one a parser, each run for FUZZ_SECONDS over its seed
# corpus (fuzz/corpus/NAME); new inputs go to build-fuzz/, crashes too.
# The library and the daemon's API are compiled once for all targets, and
# the linker takes from them only what a target reaches.
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 1
FUZZ_CC ?= clang
FUZZ_CFLAGS := -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all \
	-D_GNU_SOURCE -Iinclude -Isrc/lib -Isrc/daemon $(PKG_CFLAGS)
FUZZ_LIB_SRC := $(LIB_SRC) $(wildcard src/daemon/api*.c) src/daemon/registry.c \
		tools/sc_prebuilt_none.c
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=build-fuzz/obj/%.o)

build-fuzz/obj/%.o: %.c $(wildcard src/lib/*.h) $(wildcard src/daemon/*.h) include/corral.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

build-fuzz/libcorral-fuzz.a: $(FUZZ_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

build-fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/tree.h build-fuzz/libcorral-fuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< build-fuzz/libcorral-fuzz.a \
		$(PKG_LIBS) -lhttp_parser -lresolv -ldl -lm

build-fuzz/fuzz_dns: fuzz/fuzz_dns.c build-fuzz/libcorral-fuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< build-fuzz/libcorral-fuzz.a \
		$(PKG_LIBS) $(TEST_LIBS) -lhttp_parser -lresolv -ldl -lm

# config.json's reader is the CLI's (src/cli/oci_config.c): compiled in
build-fuzz/fuzz_ociconfig: fuzz/fuzz_ociconfig.c src/cli/oci_config.c src/cli/oci_reach.c \
		src/cli/oci.h build-fuzz/libcorral-fuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Isrc/cli -fsanitize=fuzzer -o $@ fuzz/fuzz_ociconfig.c \
		src/cli/oci_config.c src/cli/oci_reach.c build-fuzz/libcorral-fuzz.a $(PKG_LIBS) -lhttp_parser -lresolv -ldl -lm

# runtime-tools' validation suite against `corral oci` (root; its sources
# are not in Debian: tests/oci_validation.sh says what is missing)
oci-validation: $(BUILD)/corral
	tests/oci_validation.sh $(BUILD)/corral

fuzz: $(FUZZ_TARGETS:%=build-fuzz/fuzz_%)
	fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_JOBS) $(FUZZ_TARGETS)

deps:
	scripts/install-deps.sh

clean:
	rm -rf build build-*

help:
	@echo "make            build $(BUILD)/corral"
	@echo "make demo       build and show what the sandbox stops"
	@echo "make check      the whole test suite (root: also as an unprivileged user)"
	@echo "make bench      corral vs bubblewrap vs unshare, the proxy vs direct, the daemon"
	@echo "make fuzz       the libFuzzer targets, FUZZ_SECONDS each (default 60), FUZZ_JOBS at once"
	@echo "make soak       SOAK_CYCLES runs and daemon cycles (default 10000), then count leftovers"
	@echo "make chaos      the daemon's API at random for CHAOS_SECONDS (600), mcp's tools CHAOS_CALLS (5000)"
	@echo "make deps       install the Debian packages the build and tests need"
