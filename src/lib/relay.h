/*
 * relay.h - move a tunnel's bytes between two sockets with splice(2).
 */
#ifndef CORRAL_RELAY_H
#define CORRAL_RELAY_H

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct relay;

/*
 * Called once, when both directions have ended (or one failed).  Free the
 * relay there and then: the last direction's FIN is its sink's close.
 */
typedef void (*relay_done_fn)(void *arg, uint64_t bytes_up, uint64_t bytes_down);

/*
 * A judge sees a direction's first bytes before any of them goes on: the
 * sandbox's (a TLS hello's SNI is judged so), and, when that judge asks,
 * the upstream's answer to them.  p, n: every byte held so far (those the
 * judge let go before are not shown again); full: no more would be read
 * for it.
 *   RELAY_JUDGE_PASS: they go on, and the rest is spliced unseen;
 *   RELAY_JUDGE_MORE: call again with more;
 *   RELAY_JUDGE_GONE: refused, and the relay was freed;
 *   RELAY_JUDGE_PEER (the sandbox's judge only): the first *pass bytes go
 *	on, the rest stays held, and the upstream's first bytes go to the
 *	peer judge; once it passes them, this judge is asked again with what
 *	is held (a TLS HelloRetryRequest asks for a second hello so).
 */
enum relay_verdict { RELAY_JUDGE_MORE, RELAY_JUDGE_PASS, RELAY_JUDGE_GONE, RELAY_JUDGE_PEER };
typedef enum relay_verdict (*relay_judge_fn)(void *arg, const uint8_t *p, size_t n,
					     bool full, size_t *pass);

struct relay_judges {
	relay_judge_fn first;	/* the sandbox's first bytes; NULL: none judged */
	relay_judge_fn peer;	/* the upstream's, after RELAY_JUDGE_PEER */
	size_t max;		/* the most bytes a judge is shown at once */
};

/*
 * Take over two connected sockets (closed by relay_free) and relay until
 * both directions end.  to_up / to_down: bytes already read that must go
 * first (drained; may be NULL).  judges (or NULL): what the sandbox sends,
 * to_up's bytes first, waits for the first judge's verdict on up to
 * judges->max bytes (to_up may hold no more); the upstream's bytes flow
 * meanwhile, unless the peer judge is asked.  The end of either side
 * (EOF, an error) before a verdict on its bytes ends the tunnel both ways.
 */
struct relay *relay_start(struct event_base *base, int down_fd, int up_fd,
			  struct evbuffer *to_up, struct evbuffer *to_down,
			  const struct relay_judges *judges,
			  relay_done_fn done, void *arg);
void relay_free(struct relay *r);
/* The bytes given to each sink so far: up (to the upstream) and down. */
void relay_counts(const struct relay *r, uint64_t *up, uint64_t *down);
/*
 * End both sockets with a reset when relay_free closes them: what their
 * send queues and our pipes hold is dropped, not sent (a halt).
 */
void relay_reset(struct relay *r);
/* fd's close (later, by whoever owns it) resets the connection. */
void relay_sock_reset(int fd);

#endif
