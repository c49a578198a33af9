/*
 * clock.c - the one clock of timeouts, meters and budgets.
 */
#include "internal.h"

#include <stdio.h>
#include <time.h>

uint64_t corral_now_ms(void)
{
	struct timespec ts;

	/* cannot fail with a valid clock id and pointer */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* v's last n decimal digits, zero-padded, at p; returns the end */
static char *put_digits(char *p, unsigned int v, int n)
{
	for (int i = n - 1; i >= 0; i--) {
		p[i] = (char)('0' + v % 10);
		v /= 10;
	}
	return p + n;
}

/*
 * An event's time, UTC to the millisecond.  Not gmtime(): glibc reads
 * /etc/localtime the first time a process asks for any broken-down time,
 * UTC too, which is a file read and parse in every cold start for a stamp
 * that never uses it.  Days to a civil date as in Howard Hinnant's
 * days_from_civil paper (proleptic Gregorian, any year).
 */
void utc_stamp(char *buf, size_t len, const struct timespec *ts)
{
	int64_t days = ts->tv_sec / 86400, secs = ts->tv_sec % 86400, era, y;
	unsigned int doe, yoe, doy, mp, d, m;

	if (secs < 0) {
		secs += 86400;
		days--;
	}
	days += 719468;		/* from 1970-01-01 to 0000-03-01 */
	era = (days >= 0 ? days : days - 146096) / 146097;
	doe = (unsigned int)(days - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	d = doy - (153 * mp + 2) / 5 + 1;
	m = mp < 10 ? mp + 3 : mp - 9;
	y = (int64_t)yoe + era * 400 + (m <= 2);
	/*
	 * Two of these a proxied connection (egress.allowed, .closed): the
	 * digits by hand, not snprintf, whose format parsing was 3.5k of the
	 * 4k instructions a stamp took.  Years of other than four digits, or
	 * a short buffer, as before.
	 */
	if (y >= 0 && y <= 9999 && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000 &&
	    len >= sizeof("0000-00-00T00:00:00.000Z")) {
		char *p = buf;

		p = put_digits(p, (unsigned int)y, 4);
		*p++ = '-';
		p = put_digits(p, m, 2);
		*p++ = '-';
		p = put_digits(p, d, 2);
		*p++ = 'T';
		p = put_digits(p, (unsigned int)(secs / 3600), 2);
		*p++ = ':';
		p = put_digits(p, (unsigned int)(secs / 60 % 60), 2);
		*p++ = ':';
		p = put_digits(p, (unsigned int)(secs % 60), 2);
		*p++ = '.';
		p = put_digits(p, (unsigned int)(ts->tv_nsec / 1000000), 3);
		*p++ = 'Z';
		*p = '\0';
		return;
	}
	snprintf(buf, len, "%04lld-%02u-%02uT%02u:%02u:%02u.%03ldZ", (long long)y, m, d,
		 (unsigned int)(secs / 3600), (unsigned int)(secs / 60 % 60),
		 (unsigned int)(secs % 60), ts->tv_nsec / 1000000);
}
