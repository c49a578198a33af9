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
 * Sees the sandbox's first bytes before any of them goes upstream (a TLS
 * hello's SNI is judged so).  full: no more bytes would be read for it.
 * RELAY_JUDGE_PASS: they go on, and the rest is spliced unseen;
 * RELAY_JUDGE_MORE: call again with more; RELAY_JUDGE_GONE: refused, and
 * the relay was freed.
 */
enum relay_verdict { RELAY_JUDGE_MORE, RELAY_JUDGE_PASS, RELAY_JUDGE_GONE };
typedef enum relay_verdict (*relay_judge_fn)(void *arg, const uint8_t *p, size_t n,
					     bool full);

/*
 * Take over two connected sockets (closed by relay_free) and relay until
 * both directions end.  to_up / to_down: bytes already read that must go
 * first (drained; may be NULL).  judge (or NULL): what the sandbox sends
 * waits for its verdict on up to judge_max first bytes (to_up must then
 * be empty); the upstream's bytes flow meanwhile.  The sandbox's end
 * (EOF, an error) before a verdict ends the tunnel both ways.
 */
struct relay *relay_start(struct event_base *base, int down_fd, int up_fd,
			  struct evbuffer *to_up, struct evbuffer *to_down,
			  relay_judge_fn judge, size_t judge_max,
			  relay_done_fn done, void *arg);
void relay_free(struct relay *r);

#endif
