/*
 * replay.c - a main() for the fuzz targets without libFuzzer: every input
 * of the corpora named goes once through LLVMFuzzerTestOneInput, in name
 * order.  The build links each target with it as $(BUILD)/fuzz/replay_NAME,
 * with the compiler and sanitizers of that build: make check replays
 * fuzz/corpus/NAME under gcc's ASan+UBSan, so what the fuzzers once found
 * stays fixed without a second build of the library by clang.  `make
 * fuzz` is where new inputs are looked for.
 *
 *   replay_NAME DIR|FILE...
 *
 * Exits 1 if a path cannot be read or names no input at all; a crash, a
 * leak or undefined behaviour is the sanitizers' to report.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the whole file in a buffer of exactly its size, so that a read past
 * the input's end is one past the allocation */
static int replay_file(const char *path)
{
	struct stat st;
	uint8_t *buf;
	size_t got = 0;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		fprintf(stderr, "replay: %s: out of memory\n", path);
		close(fd);
		return -1;
	}
	while (got < (size_t)st.st_size) {
		n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "replay: %s: %s\n", path,
				n < 0 ? strerror(errno) : "shorter than its size");
			free(buf);
			close(fd);
			return -1;
		}
		got += (size_t)n;
	}
	close(fd);
	LLVMFuzzerTestOneInput(buf, got);
	free(buf);
	return 0;
}

/* a directory's regular files, not descending: a corpus is flat */
static int replay_dir(const char *dir, long *count)
{
	struct dirent **names;
	char path[4096];
	struct stat st;
	int n, rc = 0;

	n = scandir(dir, &names, NULL, alphasort);
	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (rc == 0 && names[i]->d_name[0] != '.') {
			if (snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name) >=
			    (int)sizeof(path)) {
				fprintf(stderr, "replay: %s/%s: name too long\n", dir,
					names[i]->d_name);
				rc = -1;
			} else if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				rc = replay_file(path);
				*count += rc == 0;
			}
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	const char *name = strrchr(argv[0], '/');
	struct stat st;
	long count = 0;

	name = name ? name + 1 : argv[0];
	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR|FILE...\n", name);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (S_ISDIR(st.st_mode) ? replay_dir(argv[i], &count) < 0 :
		    replay_file(argv[i]) < 0)
			return 1;
		count += !S_ISDIR(st.st_mode);
	}
	if (count == 0) {
		fprintf(stderr, "replay: %s: no input in the paths given\n", name);
		return 1;
	}
	printf("%s: %ld inputs, each once\n", name, count);
	return 0;
}
