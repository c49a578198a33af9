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
#include <signal.h>
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

/*
 * A SIGTSTP that came while fd was raw (kill -TSTP from elsewhere: ^Z is
 * a byte then), read off a signalfd with SIGTSTP blocked.  Left to its
 * default, the stop kept the terminal raw under the shell (dash's prompt
 * took no line; bash's own settings back, but after `fg` corral relayed
 * a cooked terminal: lines echoed twice, and the next ^Z stopped corral
 * rather than the sandbox's job).  As less(1) and vim do: the settings
 * back, the signal raised as the caller has it (its handler, which may
 * say more to the terminal first, or the default: stopped until
 * SIGCONT), then raw again from the settings the terminal has by then
 * (ssh's enter_raw_mode after its ~^Z).  In the background by then, the
 * tcsetattr stops us (SIGTTOU) until `fg`: raw only in the foreground.
 */
int corral_term_stop(int fd, struct termios *saved)
{
	sigset_t tstp, old;
	int e;

	if (fd >= 0)
		corral_term_restore(fd, saved);
	sigemptyset(&tstp);
	sigaddset(&tstp, SIGTSTP);
	e = pthread_sigmask(SIG_UNBLOCK, &tstp, &old);
	if (e == 0) {
		raise(SIGTSTP);	/* to this thread: taken before raise returns */
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	return fd >= 0 ? corral_term_raw(fd, saved) : -e;
}

void corral_term_winsize(int fd, struct winsize *ws)
{
	if (ioctl(fd, TIOCGWINSZ, ws) < 0)
		memset(ws, 0, sizeof(*ws));
}
