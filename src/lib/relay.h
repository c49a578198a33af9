/*
 * relay.h - move a tunnel's bytes between two sockets with splice(2).
 */
#ifndef CORRAL_RELAY_H
#define CORRAL_RELAY_H

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdint.h>

struct relay;

/*
 * Called once, when both directions have ended (or one failed).  Free the
 * relay there and then: the last direction's FIN is its sink's close.
 */
typedef void (*relay_done_fn)(void *arg, uint64_t bytes_up, uint64_t bytes_down);

/*
 * Take over two connected sockets (closed by relay_free) and relay until
 * both directions end.  to_up / to_down: bytes already read that must go
 * first (drained; may be NULL).
 */
struct relay *relay_start(struct event_base *base, int down_fd, int up_fd,
			  struct evbuffer *to_up, struct evbuffer *to_down,
			  relay_done_fn done, void *arg);
void relay_free(struct relay *r);

#endif
