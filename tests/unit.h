/*
 * unit.h - the smallest test harness that says what failed and where.
 * Each unit_*.c defines tests with TEST(name); a TEST registers itself
 * (a constructor appends it to a list), so a test written is a test run:
 * main() calls unit_run_all(), which runs them in the file's order, and
 * the binary ends with "N passed, N failed".
 */
#ifndef CORRAL_UNIT_H
#define CORRAL_UNIT_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * The bytes at address a, read as the kernel has them (/proc/self/mem, so
 * neither the sanitizers nor the compiler see a read of freed memory);
 * false if they cannot be read.
 */
static inline bool unit_peek(uintptr_t a, void *buf, size_t len)
{
	int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = pread(fd, buf, len, (off_t)a);
	close(fd);
	return n == (ssize_t)len;
}

static inline bool unit_all_zero(const unsigned char *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (b[i])
			return false;
	return true;
}

static int unit_failed_checks;
static int unit_passed, unit_failed;

#define CHECK(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "  %s:%d: check failed: %s\n",		\
			__FILE__, __LINE__, #cond);			\
		unit_failed_checks++;					\
	}								\
} while (0)

#define CHECK_STR_CONTAINS(hay, needle) do {				\
	const char *h_ = (hay), *n_ = (needle);				\
	if (!h_ || !strstr(h_, n_)) {					\
		fprintf(stderr, "  %s:%d: \"%s\" does not contain \"%s\"\n", \
			__FILE__, __LINE__, h_ ? h_ : "(null)", n_);	\
		unit_failed_checks++;					\
	}								\
} while (0)

struct unit_test {
	const char *name;
	void (*fn)(void);
	struct unit_test *next;
};

static struct unit_test *unit_tests, **unit_tail = &unit_tests;

/*
 * The constructor's priority is the line, so the list is in the file's
 * order whatever order the toolchain runs constructors in.
 */
#define TEST(name)							\
	static void test_##name(void);					\
	static struct unit_test unit_test_##name = { #name, test_##name, NULL }; \
	__attribute__((constructor(101 + __LINE__)))			\
	static void unit_register_##name(void)				\
	{								\
		*unit_tail = &unit_test_##name;				\
		unit_tail = &unit_test_##name.next;			\
	}								\
	static void test_##name(void)

static void unit_run(const char *name, void (*fn)(void))
{
	int before = unit_failed_checks;

	fn();
	if (unit_failed_checks == before) {
		unit_passed++;
		printf("ok - %s\n", name);
	} else {
		unit_failed++;
		printf("not ok - %s\n", name);
	}
}

/* A list by hand is what let a test be written and never run. */
#define RUN(name) _Static_assert(0, "no RUN lists: a TEST registers "	\
				 "itself; main() calls unit_run_all()")

/* Every TEST of the file, in its order. */
static void unit_run_all(void)
{
	for (struct unit_test *t = unit_tests; t; t = t->next)
		unit_run(t->name, t->fn);
}

#define UNIT_DONE() do {						\
	printf("%d passed, %d failed\n", unit_passed, unit_failed);	\
	return unit_failed ? 1 : 0;					\
} while (0)

#endif
