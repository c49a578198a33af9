/*
 * unit.h - the smallest test harness that says what failed and where.
 * Each unit_*.c defines tests with TEST(name) and lists them in main()
 * via RUN(name); the binary ends with "N passed, N failed".
 */
#ifndef CORRAL_UNIT_H
#define CORRAL_UNIT_H

#include <stdio.h>
#include <string.h>

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

#define TEST(name) static void test_##name(void)

#define RUN(name) do {							\
	int before_ = unit_failed_checks;				\
	test_##name();							\
	if (unit_failed_checks == before_) {				\
		unit_passed++;						\
		printf("ok - %s\n", #name);				\
	} else {							\
		unit_failed++;						\
		printf("not ok - %s\n", #name);				\
	}								\
} while (0)

#define UNIT_DONE() do {						\
	printf("%d passed, %d failed\n", unit_passed, unit_failed);	\
	return unit_failed ? 1 : 0;					\
} while (0)

#endif
