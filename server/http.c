/* The engine: a fixed set of event threads (one per core by default)
 * carries every connection. Each thread runs one event loop (loop.h) and
 * one libmicrohttpd daemon in external epoll mode inside it: the daemon's
 * epoll descriptor is a watch of the loop, beside the shared listening
 * socket (EPOLLEXCLUSIVE: one thread wakes per connection) and whatever the
 * handlers of its requests watch. The thread that accepts a connection
 * hands it to the thread with the fewest, where it stays; an idle one
 * costs its libmicrohttpd memory, not a thread.
 *
 * plxd accepts the connections itself and hands them to its thread's
 * daemon (MHD_add_connection), so the connection limits are enforced before
 * a socket costs anything, and the header and body deadlines by a timer of
 * each loop that looks over its own connections. */
#include "http.h"
#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "loop.h"
#include "recv_tap.h"
#include "resolve_cache.h"
#include "site.h"
#include "stats.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

/* How often each loop looks for connections past a deadline. */
#define TICK_MS 250
/* How long a stop waits for an event thread that missed the quiesce, once
 * asked to stop, before it goes on without it. */
#define STOP_GRACE_MS 2000
/* Connections accepted per wake-up at most, so that a connection storm
 * cannot starve the requests already on the thread. */
#define ACCEPT_BURST 64
/* After accept failed for want of descriptors, how long to leave the
 * listening socket alone (it stays readable: it would wake us for ever). */
#define ACCEPT_PAUSE_MS 100
/* A connection over its client's per_ip_connections is held this long,
 * checked again every PER_IP_RECHECK_MS, before it is refused: a client
 * that closed a connection and at once opened another finds the first
 * still counted until its event thread has seen the close, which may be
 * another thread, busy. */
#define PER_IP_GRACE_MS   250
#define PER_IP_RECHECK_MS 10

struct evthread {
	pthread_t thread;
	int started;
	struct loop *loop;
	struct MHD_Daemon *daemon;
	struct loop_watch mhd;    /* the daemon's epoll descriptor */
	struct loop_watch listen; /* the shared listening socket */
	struct loop_timer tick;   /* deadlines */
	struct loop_timer resume_accept;
	struct loop_timer recheck;  /* the held connections' next check */
	struct conn *held;          /* over per_ip_connections, for a while */
	struct conn *conns;         /* this thread's connections */
	struct conn *conns_pending; /* accepted, for on_connection to take */
	/* The tick's poll for clients that shut their side (on_tick). */
	struct pollfd *shut_fds;
	struct conn **shut_conns;
	size_t shut_cap;
	int stop;
	int busy_at_stop; /* a request's work outlived the stop: keep the loop */
	/* It did not let go of the listening socket by the stop's deadline:
	 * its loop is held by a request run on it (an inline Perl run that
	 * its timeout cannot end), and the stop may have to go without it. */
	int quiesce_missed;
	int quiesced;
	atomic_uint load; /* its connections, with those handed to it */
};

static struct evthread *threads;
static unsigned nthreads;
static int listen_fd = -1;
/* The listening socket's own address, when it is bound to one (not a
 * wildcard): then every connection's local address, with no getsockname. */
static struct sockaddr_storage listen_local;
static int listen_local_known;
static atomic_uint open_connections;
static unsigned connection_cap;       /* max_connections and the 503 margin */
static unsigned connection_timeout_s; /* as libmicrohttpd was given it */
static unsigned long per_ip_limit;
static struct http_handlers callbacks; /* request.c's, from http_start */

/* Quiescing: the main thread waits until every loop has let go of the
 * listening socket before it closes it. */
static pthread_mutex_t quiesce_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t quiesce_cond = PTHREAD_COND_INITIALIZER;
static unsigned quiesce_left;

/* Requests in flight, for a graceful stop. */
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static unsigned in_flight;

/* Per-IP connection counts, used only when per_ip_connections is set. */
struct ip_count {
	struct ip_count *next;
	unsigned char addr[16];
	unsigned count;
};
#define IP_BUCKETS 1024
static struct ip_count *ip_table[IP_BUCKETS];
static pthread_mutex_t ip_lock = PTHREAD_MUTEX_INITIALIZER;

static void *thread_main(void *arg);

unsigned http_threads(void)
{
	return nthreads;
}

unsigned http_open_connections(void)
{
	return atomic_load_explicit(&open_connections, memory_order_relaxed);
}

int http_listen(const char *listen_text, char *err, size_t errlen)
{
	char host[INET6_ADDRSTRLEN];
	unsigned port;
	if (config_parse_listen(listen_text, host, sizeof host, &port) < 0) {
		snprintf(err, errlen, "bad listen address %s", listen_text);
		return -1;
	}
	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	if (strchr(host, ':')) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		inet_pton(AF_INET6, host, &sin6->sin6_addr);
		len = sizeof *sin6;
	} else {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		if (host[0])
			inet_pton(AF_INET, host, &sin->sin_addr);
		else
			sin->sin_addr.s_addr = htonl(INADDR_ANY);
		len = sizeof *sin;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	int on = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 511) < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", listen_text, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

void http_url(int fd, char *out, size_t outlen)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	char addr[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
		log_format_addr((struct sockaddr *)&ss, addr, sizeof addr);
		port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						      : ((struct sockaddr_in *)&ss)->sin_port);
	}
	if (ss.ss_family == AF_INET6)
		snprintf(out, outlen, "http://[%s]:%u/", addr, port);
	else
		snprintf(out, outlen, "http://%s:%u/", addr, port);
}

unsigned long http_header_fields(const struct server_conf *server)
{
	if (server->max_header_fields)
		return server->max_header_fields;
	return (unsigned long)(server->max_header_size / 1024 * 25);
}

size_t http_connection_memory(const struct server_conf *server)
{
	size_t needed = (size_t)(2 * server->max_header_size)
			+ (size_t)http_header_fields(server) * HTTP_FIELD_COST + HTTP_REPLY_ROOM;
	return needed > HTTP_POOL_MALLOC_MAX ? needed : HTTP_POOL_MALLOC_MAX;
}

/* ---- per-IP limit ---------------------------------------------------------- */

static void addr_key(const struct sockaddr *sa, unsigned char key[16])
{
	memset(key, 0, 16);
	if (sa->sa_family == AF_INET)
		memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else
		memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

static unsigned bucket_of(const unsigned char key[16])
{
	unsigned h = 2166136261u;
	for (int i = 0; i < 16; i++)
		h = (h ^ key[i]) * 16777619u;
	return h % IP_BUCKETS;
}

static int is_trusted_proxy(const struct sockaddr *sa)
{
	struct site *site = site_acquire();
	int trusted = site && addr_list_match(&site->config->server.trusted_proxies, sa);
	site_release(site);
	return trusted;
}

/* Adds delta to addr's count, unless limit is reached (limit 0: always).
 * Returns the count before. */
static unsigned ip_count_add(const struct sockaddr *sa, int delta, unsigned long limit)
{
	unsigned char key[16];
	addr_key(sa, key);
	unsigned b = bucket_of(key);
	pthread_mutex_lock(&ip_lock);
	struct ip_count **pp = &ip_table[b], *e;
	while ((e = *pp) && memcmp(e->addr, key, 16) != 0)
		pp = &e->next;
	unsigned before = e ? e->count : 0;
	if (limit && before >= limit) {
		pthread_mutex_unlock(&ip_lock);
		return before;
	}
	if (delta > 0 && !e) {
		e = xcalloc(1, sizeof *e);
		memcpy(e->addr, key, 16);
		*pp = e;
	}
	if (e) {
		e->count = (unsigned)((int)e->count + delta);
		if (e->count == 0) {
			*pp = e->next;
			free(e);
		}
	}
	pthread_mutex_unlock(&ip_lock);
	return before;
}

/* ---- accepting ------------------------------------------------------------- */

enum admission { ADMIT_NO, ADMIT_YES, ADMIT_HOLD };

/* Counts c against its client's per_ip_connections. Returns 0, or the
 * count it found at the limit. */
static unsigned admit_ip(struct conn *c)
{
	if (!per_ip_limit || is_trusted_proxy((struct sockaddr *)&c->peer))
		return 0;
	unsigned before = ip_count_add((struct sockaddr *)&c->peer, 1, per_ip_limit);
	if (before >= per_ip_limit)
		return before;
	c->ip_counted = 1;
	return 0;
}

/* Whether a new connection from peer may be served; counts it when so.
 * Past max_connections plxd still answers, with 503, up to a margin (see
 * request.c); past the margin the socket is closed at once, before it
 * costs anything. One over its client's per_ip_connections is held
 * (PER_IP_GRACE_MS), counted as open. */
static enum admission admit(struct conn *c)
{
	if (atomic_fetch_add(&open_connections, 1) >= connection_cap) {
		atomic_fetch_sub(&open_connections, 1);
		return ADMIT_NO;
	}
	return admit_ip(c) ? ADMIT_HOLD : ADMIT_YES;
}

static int bound_to_one_address(int fd, struct sockaddr_storage *ss)
{
	socklen_t len = sizeof *ss;
	if (getsockname(fd, (struct sockaddr *)ss, &len) < 0)
		return 0;
	if (ss->ss_family == AF_INET)
		return ((struct sockaddr_in *)ss)->sin_addr.s_addr != htonl(INADDR_ANY);
	if (ss->ss_family == AF_INET6)
		return !IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)ss)->sin6_addr);
	return 0;
}

static void accept_resume(struct loop_timer *t)
{
	struct evthread *th = (struct evthread *)(void *)((char *)t
			- offsetof(struct evthread, resume_accept));
	if (!th->stop && th->listen.fd >= 0)
		loop_watch_set(th->loop, &th->listen, LOOP_IN | LOOP_EXCLUSIVE);
}

static void serve(struct evthread *th, struct conn *c);
static void serve_on(struct evthread *to, struct conn *c);
static struct evthread *least_loaded(struct evthread *th);
static void hold(struct evthread *th, struct conn *c);
static void on_recheck(struct loop_timer *t);

static void on_listen(struct loop_watch *w, unsigned events)
{
	(void)events;
	struct evthread *th =
			(struct evthread *)(void *)((char *)w - offsetof(struct evthread, listen));
	for (int i = 0; i < ACCEPT_BURST; i++) {
		struct conn *c = xcalloc(1, sizeof *c);
		socklen_t len = sizeof c->peer;
		int fd = accept4(w->fd, (struct sockaddr *)&c->peer, &len,
				SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			int err = errno;
			free(c);
			if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
				plxd_log(PLXD_LOG_ERROR,
						"cannot accept connections: %s; pausing "
						"for %d ms",
						strerror(err), ACCEPT_PAUSE_MS);
				loop_watch_set(th->loop, w, 0);
				loop_timer_set(th->loop, &th->resume_accept,
						clock_ms() + ACCEPT_PAUSE_MS, accept_resume);
			}
			if (err == EINTR || err == ECONNABORTED)
				continue;
			return;
		}
		c->fd = fd;
		c->peer_len = len;
		enum admission a = admit(c);
		if (a == ADMIT_NO) {
			close(fd);
			free(c);
		} else if (a == ADMIT_HOLD) {
			hold(th, c);
		} else {
			serve_on(least_loaded(th), c);
		}
	}
}

/* The thread with the fewest connections, th on a tie. The thread that
 * woke for the listening socket would take every connection that arrives
 * together (a benchmark's, a browser's): spread, they use every core. A
 * thread whose loop a long run holds (loop_held) takes none: it would
 * answer nothing until the run ends. */
static struct evthread *least_loaded(struct evthread *th)
{
	struct evthread *best = th;
	unsigned best_load = atomic_load_explicit(&th->load, memory_order_relaxed);
	for (unsigned i = 0; i < nthreads; i++) {
		if (loop_held(threads[i].loop))
			continue;
		unsigned load = atomic_load_explicit(&threads[i].load, memory_order_relaxed);
		if (load < best_load) {
			best = &threads[i];
			best_load = load;
		}
	}
	return best;
}

static void serve_posted(void *arg)
{
	struct conn *c = arg;
	serve(c->thread, c);
}

/* Serves c on thread to: here, or posted to it. */
static void serve_on(struct evthread *to, struct conn *c)
{
	atomic_fetch_add_explicit(&to->load, 1, memory_order_relaxed);
	c->thread = to;
	if (to->loop == loop_current())
		serve(to, c);
	else
		loop_post(to->loop, serve_posted, c);
}

/* Hands the admitted connection c to libmicrohttpd. */
static void serve(struct evthread *th, struct conn *c)
{
	c->thread = th;
	socklen_t llen = sizeof c->local;
	if (listen_local_known)
		c->local = listen_local;
	else
		getsockname(c->fd, (struct sockaddr *)&c->local, &llen);
	/* on_connection takes c from here (libmicrohttpd calls it inside
	 * MHD_add_connection). */
	th->conns_pending = c;
	recv_tap_open(c->fd);
	if (MHD_add_connection(th->daemon, c->fd, (struct sockaddr *)&c->peer, c->peer_len)
			!= MHD_YES) {
		/* libmicrohttpd closed the socket. */
		recv_tap_close(c->fd);
		if (th->conns_pending == c) {
			th->conns_pending = NULL;
			atomic_fetch_sub_explicit(&th->load, 1, memory_order_relaxed);
			if (c->ip_counted)
				ip_count_add((struct sockaddr *)&c->peer, -1, 0);
			atomic_fetch_sub(&open_connections, 1);
			free(c);
		}
	}
}

/* Ends a held connection: refused, or at a stop. */
static void held_close(struct conn *c, unsigned open_count)
{
	if (open_count) {
		char text[INET6_ADDRSTRLEN];
		log_format_addr((struct sockaddr *)&c->peer, text, sizeof text);
		plxd_log(PLXD_LOG_WARN,
				"refused a connection from %s: %u open, per_ip_connections is "
				"%lu",
				text, open_count, per_ip_limit);
	}
	close(c->fd);
	atomic_fetch_sub(&open_connections, 1);
	free(c);
}

static void hold(struct evthread *th, struct conn *c)
{
	c->held_until = clock_ms() + PER_IP_GRACE_MS;
	c->next = th->held;
	th->held = c;
	if (!loop_timer_armed(&th->recheck))
		loop_timer_set(th->loop, &th->recheck, clock_ms() + PER_IP_RECHECK_MS, on_recheck);
}

/* Each held connection is served once its client is under the limit, or
 * refused when its grace is over. */
static void on_recheck(struct loop_timer *t)
{
	struct evthread *th =
			(struct evthread *)(void *)((char *)t - offsetof(struct evthread, recheck));
	uint64_t now = clock_ms();
	struct conn **pp = &th->held;
	while (*pp) {
		struct conn *c = *pp;
		unsigned open_count = admit_ip(c);
		if (open_count && now < c->held_until) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		c->next = NULL;
		if (open_count)
			held_close(c, open_count);
		else
			serve_on(th, c);
	}
	if (th->held)
		loop_timer_set(th->loop, &th->recheck, now + PER_IP_RECHECK_MS, on_recheck);
}

/* ---- connections ----------------------------------------------------------- */

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
		enum MHD_ConnectionNotificationCode code)
{
	struct evthread *th = cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		struct conn *c = th->conns_pending;
		th->conns_pending = NULL;
		if (!c)
			return;
		c->connection = connection;
		c->opened_as = http_open_connections();
		c->waiting_since = clock_ms();
		c->next = th->conns;
		if (th->conns)
			th->conns->prev = c;
		th->conns = c;
		*socket_context = c;
		return;
	}
	struct conn *c = *socket_context;
	if (!c)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		th->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	recv_tap_close(c->fd);
	if (c->ip_counted)
		ip_count_add((struct sockaddr *)&c->peer, -1, 0);
	stats_conn_phase(&c->phase, STATS_IDLE);
	atomic_fetch_sub(&open_connections, 1);
	atomic_fetch_sub_explicit(&th->load, 1, memory_order_relaxed);
	free(c->target);
	free(c);
	*socket_context = NULL;
}

struct conn *http_conn(struct MHD_Connection *connection)
{
	const union MHD_ConnectionInfo *info =
			MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return info ? info->socket_context : NULL;
}

/* libmicrohttpd's URI log callback sees the request target before any
 * decoding; plxd keeps it, since the decoded URL it passes on later cannot
 * be trusted (it stops at "%00"). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *connection)
{
	(void)cls;
	struct conn *c = http_conn(connection);
	if (c) {
		size_t len = strlen(uri);
		if (len + 1 > c->target_cap) {
			c->target_cap = len + 1;
			free(c->target);
			c->target = xmalloc(c->target_cap);
		}
		memcpy(c->target, uri, len + 1);
		c->request_start_us = clock_us();
		stats_conn_phase(&c->phase, STATS_READING);
	}
	return NULL;
}

void http_request_started(struct conn *c)
{
	c->waiting_since = 0;
	pthread_mutex_lock(&idle_lock);
	in_flight++;
	pthread_mutex_unlock(&idle_lock);
}

void http_request_ended(struct conn *c)
{
	if (c) {
		http_body_ended(c);
		c->waiting_since = clock_ms();
	}
	pthread_mutex_lock(&idle_lock);
	if (--in_flight == 0)
		pthread_cond_broadcast(&idle_cond);
	pthread_mutex_unlock(&idle_lock);
}

void http_body_started(struct conn *c)
{
	c->body_bytes = 0;
	c->body_since = clock_ms();
}

void http_body_progress(struct conn *c, size_t len)
{
	c->body_bytes += len;
}

void http_body_ended(struct conn *c)
{
	c->body_since = 0;
}

/* The reason to close c now, or NULL. A body must be complete within
 * body_timeout, extended by a second for every body_min_rate bytes that
 * arrived (Apache's mod_reqtimeout "body=20,MinRate=500"): a fast upload
 * of any size is never cut, a trickle is. */
static const char *deadline_passed(struct conn *c, uint64_t now, const struct server_conf *s,
		unsigned long *limit)
{
	uint64_t since = c->waiting_since;
	if (since && s->header_timeout_ms && now - since > s->header_timeout_ms) {
		*limit = s->header_timeout_ms;
		return "no complete request headers within header_timeout";
	}
	since = c->body_since;
	if (!since || !s->body_timeout_ms)
		return NULL;
	uint64_t allowed = s->body_timeout_ms;
	if (s->body_min_rate)
		allowed += c->body_bytes * 1000 / s->body_min_rate;
	if (now - since <= allowed)
		return NULL;
	*limit = s->body_timeout_ms;
	return "its request body came slower than body_timeout and body_min_rate allow";
}

/* Whether the client closed its side with nothing left unread. */
static int client_left(const struct conn *c)
{
	char byte;
	return recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* libmicrohttpd reads a socket once per epoll edge (edge-triggered), and
 * takes a short read for the socket drained: when the client's last bytes
 * and its end (FIN, or shutdown(SHUT_WR)) are both waiting by the time it
 * reads, as on a loaded machine, it reads the bytes and never the end, and
 * no edge comes again. A connection waiting for its request headers would
 * then stay open, counted against max_connections, until header_timeout;
 * one in the middle of a body, until body_timeout. So each tick polls the
 * connections waiting for client bytes (one poll for all of them) for a
 * client that has shut its side, and shuts down those with nothing left
 * unread: libmicrohttpd then sees the end and cleans up as usual. A
 * request in flight (neither deadline running) is left alone: request.c
 * watches those, and a client may half-close and wait for its answer. */
static void close_departed(struct evthread *th)
{
	size_t n = 0;
	for (struct conn *c = th->conns; c; c = c->next) {
		if (c->timed_out || (!c->waiting_since && !c->body_since))
			continue;
		if (n == th->shut_cap) {
			th->shut_cap = th->shut_cap ? th->shut_cap * 2 : 64;
			th->shut_fds = xrealloc(th->shut_fds, th->shut_cap * sizeof *th->shut_fds);
			th->shut_conns = xrealloc(th->shut_conns,
					th->shut_cap * sizeof *th->shut_conns);
		}
		th->shut_fds[n] = (struct pollfd){ .fd = c->fd, .events = POLLRDHUP };
		th->shut_conns[n++] = c;
	}
	if (n == 0 || poll(th->shut_fds, (nfds_t)n, 0) <= 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct conn *c = th->shut_conns[i];
		if (!(th->shut_fds[i].revents & POLLRDHUP) || !client_left(c))
			continue;
		plxd_log(PLXD_LOG_DEBUG, "the client left %s",
				c->body_since ? "in the middle of a request body"
					      : "while plxd waited for request headers");
		c->timed_out = c->client_left = 1;
		shutdown(c->fd, SHUT_RDWR);
	}
}

/* libmicrohttpd restarts a connection's timeout when it writes. With the
 * kernel's send buffer full, the socket is writable again only once about
 * half of it has gone, which for a slow reader of a large file can take
 * longer than connection_timeout although bytes flow all along. A tick
 * that sees a request's send queue shrink restarts the timeout itself, so
 * that connection_timeout ends a reader that stopped, not one that is
 * slow. */
static void note_draining(struct conn *c)
{
	int queued;
	if (ioctl(c->fd, SIOCOUTQ, &queued) < 0)
		return;
	if (queued > 0 && (unsigned)queued < c->queued_last) {
		/* libmicrohttpd restarts the clock only when the timeout it
		 * replaces was 0 (none). */
		MHD_set_connection_option(c->connection, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
		MHD_set_connection_option(c->connection, MHD_CONNECTION_OPTION_TIMEOUT,
				connection_timeout_s);
	}
	c->queued_last = (unsigned)queued;
}

/* The header and body deadlines: libmicrohttpd restarts its idle timer on
 * every byte, so a client trickling one byte a second would hold its
 * connection forever. Shutting the socket down makes libmicrohttpd see the
 * end and clean up as usual. */
static void on_tick(struct loop_timer *t)
{
	struct evthread *th =
			(struct evthread *)(void *)((char *)t - offsetof(struct evthread, tick));
	loop_timer_set(th->loop, t, clock_ms() + TICK_MS, on_tick);
	resolve_cache_tick();
	struct site *site = site_acquire();
	if (!site)
		return;
	const struct server_conf *server = &site->config->server;
	uint64_t now = clock_ms();
	for (struct conn *c = th->conns; c; c = c->next) {
		unsigned long limit;
		const char *why = c->timed_out ? NULL : deadline_passed(c, now, server, &limit);
		if (why) {
			char addr[INET6_ADDRSTRLEN];
			log_format_addr((struct sockaddr *)&c->peer, addr, sizeof addr);
			plxd_log(PLXD_LOG_INFO, "closed the connection from %s: %s (%lu ms)", addr,
					why, limit);
			c->timed_out = 1;
			shutdown(c->fd, SHUT_RDWR);
		} else if (!c->waiting_since) {
			note_draining(c); /* a request in flight */
		}
	}
	site_release(site);
	close_departed(th);
}

static void on_mhd(struct loop_watch *w, unsigned events)
{
	(void)w;
	(void)events; /* MHD_run follows every turn of the loop */
}

static void log_from_mhd(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char msg[1024];
	vsnprintf(msg, sizeof msg, fmt, ap);
	plxd_log(PLXD_LOG_DEBUG, "libmicrohttpd: %s", msg);
}

/* ---- the threads ----------------------------------------------------------- */

static void *thread_main(void *arg)
{
	struct evthread *th = arg;
	/* Named, for top -H and the tests (an inline Perl run shows here). */
	pthread_setname_np(pthread_self(), "plxd-event");
	stats_thread_attach((unsigned)(th - threads));
	unsigned runs_without_turn = 0;
	while (!th->stop) {
		MHD_UNSIGNED_LONG_LONG mt;
		int timeout = -1;
		if (MHD_get_timeout(th->daemon, &mt) == MHD_YES)
			timeout = mt > INT_MAX ? INT_MAX : (int)mt;
		/* libmicrohttpd asks to be run again at once after it answered
		 * or resumed a connection; the loop's turn in between would be
		 * an epoll_wait that finds nothing. Its timers, posts and
		 * watches still get a turn at least every third run. */
		if (timeout != 0 || runs_without_turn == 2) {
			runs_without_turn = 0;
			loop_run_once(th->loop, timeout);
		} else {
			runs_without_turn++;
		}
		MHD_run(th->daemon);
	}
	/* Stopping: what requests were waiting on is ended (request.c), and
	 * stopping the daemon closes every connection, calling their
	 * handlers' finished() on this thread. */
	callbacks.abort_all(th->loop);
	MHD_run(th->daemon);
	loop_timer_stop(th->loop, &th->tick);
	loop_timer_stop(th->loop, &th->resume_accept);
	loop_timer_stop(th->loop, &th->recheck);
	while (th->held) {
		struct conn *c = th->held;
		th->held = c->next;
		held_close(c, 0);
	}
	loop_watch_del(th->loop, &th->mhd);
	MHD_stop_daemon(th->daemon);
	th->daemon = NULL;
	resolve_cache_unwatch();
	/* Scripts still ending (lingering, being killed) finish on their
	 * own deadlines; they are bounded, but a stop must not hang. */
	uint64_t give_up = clock_ms() + 30000;
	while (!loop_idle(th->loop) && clock_ms() < give_up)
		loop_run_once(th->loop, 100);
	if (!loop_idle(th->loop)) {
		plxd_log(PLXD_LOG_WARN, "stopping: scripts of an event thread did not end in 30 s");
		th->busy_at_stop = 1;
	}
	return NULL;
}

static void quiesce_one(void *arg)
{
	struct evthread *th = arg;
	loop_timer_stop(th->loop, &th->resume_accept);
	loop_watch_del(th->loop, &th->listen);
	pthread_mutex_lock(&quiesce_lock);
	th->quiesced = 1;
	if (--quiesce_left == 0)
		pthread_cond_broadcast(&quiesce_cond);
	pthread_mutex_unlock(&quiesce_lock);
}

static void stop_one(void *arg)
{
	struct evthread *th = arg;
	th->stop = 1;
}

/* Descriptors: one per connection, up to the 503 margin, room for what
 * their requests open (pipes to scripts, files), and the files each event
 * thread's stat cache holds. A soft limit below that is raised as far as
 * the hard limit allows. */
static void raise_fd_limit(unsigned connections)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	rlim_t want = (rlim_t)connections * 2 + 256 + (rlim_t)nthreads * RESOLVE_CACHE_FILES;
	if (rl.rlim_cur >= want)
		return;
	rlim_t got = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
	rl.rlim_cur = got;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || got < want)
		plxd_log(PLXD_LOG_WARN,
				"open files limited to %llu (RLIMIT_NOFILE), %llu wanted for "
				"%u connections: raise the hard limit (ulimit -Hn)",
				(unsigned long long)(got < want ? got : rl.rlim_cur),
				(unsigned long long)want, connections);
}

int http_listening(int fd, char *err, size_t errlen)
{
	int on = 0;
	socklen_t len = sizeof on;
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) < 0) {
		snprintf(err, errlen, "no usable listening socket (fd %d): %s", fd,
				strerror(errno));
		return -1;
	}
	if (!on) {
		snprintf(err, errlen, "no usable listening socket (fd %d): it does not listen", fd);
		return -1;
	}
	return 0;
}

int http_start(int fd, const struct server_conf *server, const struct http_handlers *handlers,
		char *err, size_t errlen)
{
	callbacks = *handlers;
	per_ip_limit = server->per_ip_connections;
	/* Past max_connections plxd still answers, with 503, up to this many
	 * more; beyond, a connection is closed at once. */
	unsigned spare = (unsigned)(server->max_connections / 8 > 16 ? server->max_connections / 8
								     : 16);
	connection_cap = (unsigned)server->max_connections + spare;
	unsigned timeout_s = (unsigned)((server->connection_timeout_ms + 999) / 1000);
	connection_timeout_s = timeout_s;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	nthreads = server->threads ? (unsigned)server->threads : (unsigned)(cores > 0 ? cores : 1);
	raise_fd_limit(connection_cap);
	if (recv_tap_init(http_header_fields(server)) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	threads = xcalloc(nthreads, sizeof *threads);
	stats_threads_create(nthreads);
	listen_fd = fd;
	listen_local_known = bound_to_one_address(fd, &listen_local);
	for (unsigned i = 0; i < nthreads; i++) {
		struct evthread *th = &threads[i];
		loop_watch_init(&th->mhd);
		loop_watch_init(&th->listen);
		loop_timer_init(&th->tick);
		loop_timer_init(&th->resume_accept);
		loop_timer_init(&th->recheck);
		th->loop = loop_create();
		if (!th->loop) {
			snprintf(err, errlen, "cannot create an event loop: %s", strerror(errno));
			goto fail;
		}
		/* clang-format off */
		th->daemon = MHD_start_daemon(
			MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME
				| MHD_USE_ERROR_LOG,
			0, NULL, NULL, callbacks.access, NULL,
			MHD_OPTION_EXTERNAL_LOGGER, log_from_mhd, NULL,
			MHD_OPTION_CONNECTION_LIMIT, connection_cap,
			MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
			MHD_OPTION_CONNECTION_MEMORY_LIMIT,
				http_connection_memory(server),
			MHD_OPTION_NOTIFY_COMPLETED, callbacks.completed, NULL,
			MHD_OPTION_NOTIFY_CONNECTION, on_connection, th,
			MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
			MHD_OPTION_END);
		/* clang-format on */
		const union MHD_DaemonInfo *info = th->daemon
				? MHD_get_daemon_info(th->daemon, MHD_DAEMON_INFO_EPOLL_FD)
				: NULL;
		if (!info) {
			snprintf(err, errlen, "libmicrohttpd failed to start");
			goto fail;
		}
		if (loop_watch_add(th->loop, &th->mhd, info->epoll_fd, LOOP_IN, on_mhd) < 0
				|| loop_watch_add(th->loop, &th->listen, fd,
						   LOOP_IN | LOOP_EXCLUSIVE, on_listen)
						< 0) {
			snprintf(err, errlen, "epoll: %s", strerror(errno));
			goto fail;
		}
		loop_timer_set(th->loop, &th->tick, clock_ms() + TICK_MS, on_tick);
	}
	for (unsigned i = 0; i < nthreads; i++) {
		int rc = pthread_create(&threads[i].thread, NULL, thread_main, &threads[i]);
		if (rc != 0) {
			snprintf(err, errlen, "cannot start an event thread: %s", strerror(rc));
			http_stop();
			return -1;
		}
		threads[i].started = 1;
	}
	return 0;
fail:
	http_stop();
	return -1;
}

void http_quiesce(unsigned long timeout_ms)
{
	if (listen_fd < 0)
		return;
	struct timespec until = clock_deadline(CLOCK_REALTIME, timeout_ms);
	pthread_mutex_lock(&quiesce_lock);
	quiesce_left = 0;
	for (unsigned i = 0; i < nthreads; i++)
		quiesce_left += threads[i].started;
	pthread_mutex_unlock(&quiesce_lock);
	for (unsigned i = 0; i < nthreads; i++)
		if (threads[i].started)
			loop_post(threads[i].loop, quiesce_one, &threads[i]);
	pthread_mutex_lock(&quiesce_lock);
	while (quiesce_left > 0)
		if (pthread_cond_timedwait(&quiesce_cond, &quiesce_lock, &until) == ETIMEDOUT)
			break;
	for (unsigned i = 0; i < nthreads; i++)
		threads[i].quiesce_missed = threads[i].started && !threads[i].quiesced;
	pthread_mutex_unlock(&quiesce_lock);
	close(listen_fd);
	listen_fd = -1;
}

unsigned http_wait_idle(unsigned long timeout_ms)
{
	struct timespec until = clock_deadline(CLOCK_REALTIME, timeout_ms);
	pthread_mutex_lock(&idle_lock);
	while (in_flight > 0)
		if (pthread_cond_timedwait(&idle_cond, &idle_lock, &until) == ETIMEDOUT)
			break;
	unsigned left = in_flight;
	pthread_mutex_unlock(&idle_lock);
	return left;
}

/* A loop that a script still running may post to (an interpreter thread
 * stuck in C code) stays until the process ends, reachable from here. */
static struct loop **kept_loops;
static size_t nkept_loops;

static void keep_loop(struct loop *l)
{
	kept_loops = xrealloc(kept_loops, (nkept_loops + 1) * sizeof *kept_loops);
	kept_loops[nkept_loops++] = l;
}

/* Joins th; one that missed the quiesce gets STOP_GRACE_MS more, then is
 * left running. Returns 0 when joined. */
static int evthread_join(struct evthread *th)
{
	if (!th->quiesce_missed)
		return pthread_join(th->thread, NULL);
	struct timespec at = clock_deadline(CLOCK_REALTIME, STOP_GRACE_MS);
	if (pthread_timedjoin_np(th->thread, NULL, &at) == 0)
		return 0;
	plxd_log(PLXD_LOG_WARN,
			"stopping without an event thread that a request still holds (an inline "
			"Perl run that its timeout does not end): the process ends around it");
	return -1;
}

unsigned http_stop(void)
{
	for (unsigned i = 0; i < nthreads; i++)
		if (threads[i].started)
			loop_post(threads[i].loop, stop_one, &threads[i]);
	unsigned left = 0;
	for (unsigned i = 0; i < nthreads; i++) {
		struct evthread *th = &threads[i];
		/* After a failed start, the threads past the one that failed
		 * were never set up. */
		if (!th->loop)
			continue;
		if (th->started && evthread_join(th) < 0) {
			/* Its loop, daemon and connections are its own still. */
			left++;
			continue;
		}
		if (th->daemon)
			MHD_stop_daemon(th->daemon);
		loop_watch_del(th->loop, &th->listen);
		if (th->busy_at_stop)
			keep_loop(th->loop);
		else
			loop_destroy(th->loop);
		free(th->shut_fds);
		free(th->shut_conns);
	}
	if (!left) {
		free(threads);
		stats_threads_destroy();
	}
	threads = NULL;
	nthreads = 0;
	if (listen_fd >= 0)
		close(listen_fd);
	listen_fd = -1;
	return left;
}
