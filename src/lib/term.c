/*
 * term.c - the caller's terminal, while a sandbox's pty is relayed to it.
 *
 * Raw: no echo, no line editing, no signals from keys.  ^C and ^Z are
 * bytes that reach the pty inside, whose line discipline turns them into
 * SIGINT and SIGTSTP for the sandbox's foreground job; corral itself is
 * never stopped by them.  The caller gets back exactly the settings it had.
 */
#include "internal.h"
#include "stdrelay.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>

int corral_term_raw(int fd, struct termios *saved)
{
	struct termios raw;

	if (tcgetattr(fd, saved) < 0)
		return -errno;
	raw = *saved;
	cfmakeraw(&raw);
	/* output post-processing stays off too: the pty inside already did it */
	if (tcsetattr(fd, TCSANOW, &raw) < 0)
		return -errno;
	return 0;
}

void corral_term_restore(int fd, const struct termios *saved)
{
	/* TCSANOW: never wait for output a stopped terminal will not take */
	while (tcsetattr(fd, TCSANOW, saved) < 0 && errno == EINTR)
		;
}

void corral_term_winsize(int fd, struct winsize *ws)
{
	if (ioctl(fd, TIOCGWINSZ, ws) < 0)
		memset(ws, 0, sizeof(*ws));
}
