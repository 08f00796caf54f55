/* The status page's counters (server/status.c reads them): connections
 * reading and writing, requests by handler and by status class, latency
 * histograms per handler. Each event thread counts into a struct of its
 * own, so counting touches no cache line another thread writes; a reader
 * on another thread sums them with relaxed atomic loads (each counter is
 * exact; a sum may mix counters a request apart). Pure C: no
 * libmicrohttpd. */
#ifndef PLXD_STATS_H
#define PLXD_STATS_H

#include <stdint.h>

#include "hist.h"

/* Handler ids: plxd itself (a request refused or unrouted), the status
 * page, then the handler sections by name, in the order first seen. */
#define STATS_HANDLERS 32
enum { STATS_PLXD = 0, STATS_STATUS = 1 };

enum stats_phase { STATS_IDLE, STATS_READING, STATS_WRITING };

/* Turns counting on or off, and starts the uptime clock. Main thread,
 * before the event threads start. */
void stats_init(int enabled);
int stats_enabled(void);

/* The id of a handler section's name, registering it the first time (main
 * thread: at start-up and reload). The last id takes every name past
 * STATS_HANDLERS - 1, under the name "other". */
unsigned stats_handler_id(const char *name);

/* The per-thread structs: created for n event threads before they start,
 * each thread attaches to its own (index i) when it starts; freed after
 * they have stopped. */
void stats_threads_create(unsigned n);
void stats_thread_attach(unsigned i);
void stats_threads_destroy(void);

/* A connection's phase changes (it belongs to the calling thread):
 * reading a request, writing its response, or idle between requests. */
void stats_conn_phase(unsigned char *phase, enum stats_phase to);

/* A request has ended: its handler's id, status and duration. */
void stats_request(unsigned handler, unsigned status, uint64_t duration_us);

/* Every counter summed over the event threads. */
struct stats_handler_sum {
	const char *name; /* NULL: an id no request has used */
	uint64_t requests;
	uint64_t by_class[6]; /* [1] 1xx ... [5] 5xx; [0] anything else */
	uint64_t sum_us;
	uint64_t hist[HIST_BUCKETS];
};

struct stats_sum {
	uint64_t uptime_us;
	uint64_t reading, writing;
	unsigned nhandlers;
	struct stats_handler_sum handlers[STATS_HANDLERS];
};

void stats_read(struct stats_sum *out);

#endif
