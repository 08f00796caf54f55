/* The daemon and its connections. libmicrohttpd runs one thread per
 * connection (MHD_USE_THREAD_PER_CONNECTION with poll), so a handler may
 * block in its own request without holding up anyone else; the price is a
 * thread, and its stack, per open connection. */
#include "http.h"
#include "alloc.h"
#include "log.h"
#include "site.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct MHD_Daemon *daemon_handle;
static atomic_uint open_connections;

/* Connections waiting for request headers, for the header deadline. */
static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct conn *conns;

static pthread_t watchdog_thread;
static int watchdog_running;
static pthread_mutex_t watchdog_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watchdog_wake = PTHREAD_COND_INITIALIZER;
static int watchdog_stop;

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
static unsigned long per_ip_limit;

uint64_t http_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t http_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
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

/* ---- per-IP limit ---------------------------------------------------------- */

static size_t addr_key(const struct sockaddr *sa, unsigned char key[16])
{
	memset(key, 0, 16);
	if (sa->sa_family == AF_INET) {
		memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return 4;
	}
	memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	return 16;
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

/* Adds delta to addr's count; returns the count before. */
static unsigned ip_count_add(const struct sockaddr *sa, int delta)
{
	unsigned char key[16];
	addr_key(sa, key);
	unsigned b = bucket_of(key);
	pthread_mutex_lock(&ip_lock);
	struct ip_count **pp = &ip_table[b], *e;
	while ((e = *pp) && memcmp(e->addr, key, 16) != 0)
		pp = &e->next;
	unsigned before = e ? e->count : 0;
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

/* Accept policy: refuses a client over its per-IP limit by closing the
 * socket at once, before a thread is spent on it. */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	(void)cls;
	(void)addrlen;
	if (per_ip_limit == 0 || is_trusted_proxy(addr))
		return MHD_YES;
	unsigned char key[16];
	addr_key(addr, key);
	pthread_mutex_lock(&ip_lock);
	struct ip_count *e = ip_table[bucket_of(key)];
	while (e && memcmp(e->addr, key, 16) != 0)
		e = e->next;
	unsigned count = e ? e->count : 0;
	pthread_mutex_unlock(&ip_lock);
	if (count >= per_ip_limit) {
		char text[INET6_ADDRSTRLEN];
		log_format_addr(addr, text, sizeof text);
		plxd_log(PLXD_LOG_WARN, "refused a connection from %s: %u open, per_ip_connections is %lu",
				text, count, per_ip_limit);
		return MHD_NO;
	}
	return MHD_YES;
}

/* ---- connections ----------------------------------------------------------- */

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
		enum MHD_ConnectionNotificationCode code)
{
	(void)cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		struct conn *c = xcalloc(1, sizeof *c);
		const union MHD_ConnectionInfo *info =
			MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
		c->fd = info ? info->connect_fd : -1;
		socklen_t len = sizeof c->local;
		getsockname(c->fd, (struct sockaddr *)&c->local, &len);
		info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (info && info->client_addr)
			memcpy(&c->peer, info->client_addr, info->client_addr->sa_family == AF_INET6
					? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
		atomic_store(&c->waiting_since, http_now_ms());
		pthread_mutex_lock(&conns_lock);
		c->next = conns;
		if (conns)
			conns->prev = c;
		conns = c;
		pthread_mutex_unlock(&conns_lock);
		if (per_ip_limit)
			ip_count_add((struct sockaddr *)&c->peer, 1);
		c->opened_as = atomic_fetch_add(&open_connections, 1) + 1;
		*socket_context = c;
		return;
	}
	struct conn *c = *socket_context;
	if (!c)
		return;
	pthread_mutex_lock(&conns_lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&conns_lock);
	if (per_ip_limit)
		ip_count_add((struct sockaddr *)&c->peer, -1);
	atomic_fetch_sub(&open_connections, 1);
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
		c->request_start_us = http_now_us();
	}
	return NULL;
}

void http_request_started(struct conn *c)
{
	atomic_store(&c->waiting_since, 0);
	pthread_mutex_lock(&idle_lock);
	in_flight++;
	pthread_mutex_unlock(&idle_lock);
}

void http_request_ended(struct conn *c)
{
	if (c) {
		http_body_ended(c);
		atomic_store(&c->waiting_since, http_now_ms());
	}
	pthread_mutex_lock(&idle_lock);
	if (--in_flight == 0)
		pthread_cond_broadcast(&idle_cond);
	pthread_mutex_unlock(&idle_lock);
}

void http_body_started(struct conn *c)
{
	atomic_store(&c->body_bytes, 0);
	atomic_store(&c->body_since, http_now_ms());
}

void http_body_progress(struct conn *c, size_t len)
{
	atomic_fetch_add(&c->body_bytes, (uint64_t)len);
}

void http_body_ended(struct conn *c)
{
	atomic_store(&c->body_since, 0);
}

/* The reason to close c now, or NULL. A body must be complete within
 * body_timeout, extended by a second for every body_min_rate bytes that
 * arrived (Apache's mod_reqtimeout "body=20,MinRate=500"): a fast upload
 * of any size is never cut, a trickle is. */
static const char *deadline_passed(struct conn *c, uint64_t now, const struct server_conf *s,
		unsigned long *limit)
{
	uint64_t since = atomic_load(&c->waiting_since);
	if (since && s->header_timeout_ms && now - since > s->header_timeout_ms) {
		*limit = s->header_timeout_ms;
		return "no complete request headers within header_timeout";
	}
	since = atomic_load(&c->body_since);
	if (!since || !s->body_timeout_ms)
		return NULL;
	uint64_t allowed = s->body_timeout_ms;
	if (s->body_min_rate)
		allowed += atomic_load(&c->body_bytes) * 1000 / s->body_min_rate;
	if (now - since <= allowed)
		return NULL;
	*limit = s->body_timeout_ms;
	return "its request body came slower than body_timeout and body_min_rate allow";
}

/* The header and body deadlines: libmicrohttpd restarts its idle timer on
 * every byte, so a client trickling one byte a second would hold its
 * connection (and thread) forever. Shutting the socket down from here makes
 * the connection's own thread see the end and clean up as usual. */
static void *watchdog(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&watchdog_lock);
	while (!watchdog_stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 250 * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&watchdog_wake, &watchdog_lock, &until);
		if (watchdog_stop)
			break;
		struct site *site = site_acquire();
		if (!site)
			continue;
		const struct server_conf *server = &site->config->server;
		uint64_t now = http_now_ms();
		pthread_mutex_lock(&conns_lock);
		for (struct conn *c = conns; c; c = c->next) {
			unsigned long limit;
			const char *why = c->timed_out ? NULL : deadline_passed(c, now, server, &limit);
			if (why) {
				char addr[INET6_ADDRSTRLEN];
				log_format_addr((struct sockaddr *)&c->peer, addr, sizeof addr);
				plxd_log(PLXD_LOG_INFO, "closed the connection from %s: %s (%lu ms)", addr,
						why, limit);
				c->timed_out = 1;
				shutdown(c->fd, SHUT_RDWR);
			}
		}
		pthread_mutex_unlock(&conns_lock);
		site_release(site);
	}
	pthread_mutex_unlock(&watchdog_lock);
	return NULL;
}

static void log_from_mhd(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char msg[1024];
	vsnprintf(msg, sizeof msg, fmt, ap);
	plxd_log(PLXD_LOG_DEBUG, "libmicrohttpd: %s", msg);
}

int http_start(int listen_fd, const struct server_conf *server, char *err, size_t errlen)
{
	per_ip_limit = server->per_ip_connections;
	/* Past max_connections plxd still answers, with 503, up to this many
	 * more; libmicrohttpd's own limit would just close the socket. */
	unsigned spare = (unsigned)(server->max_connections / 8 > 16 ? server->max_connections / 8 : 16);
	unsigned timeout_s = (unsigned)((server->connection_timeout_ms + 999) / 1000);
	daemon_handle = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL
			| MHD_USE_ITC | MHD_USE_ERROR_LOG,
		0, accept_policy, NULL, request_access, NULL,
		MHD_OPTION_EXTERNAL_LOGGER, log_from_mhd, NULL,
		MHD_OPTION_LISTEN_SOCKET, listen_fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)server->max_connections + spare,
		MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)server->max_header_size,
		MHD_OPTION_NOTIFY_COMPLETED, request_completed, NULL,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
		MHD_OPTION_END);
	if (!daemon_handle) {
		snprintf(err, errlen, "libmicrohttpd failed to start");
		return -1;
	}
	watchdog_stop = 0;
	if (pthread_create(&watchdog_thread, NULL, watchdog, NULL) == 0)
		watchdog_running = 1;
	return 0;
}

void http_quiesce(void)
{
	if (!daemon_handle)
		return;
	MHD_socket fd = MHD_quiesce_daemon(daemon_handle);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
}

unsigned http_wait_idle(unsigned long timeout_ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(timeout_ms / 1000);
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&idle_lock);
	while (in_flight > 0)
		if (pthread_cond_timedwait(&idle_cond, &idle_lock, &until) == ETIMEDOUT)
			break;
	unsigned left = in_flight;
	pthread_mutex_unlock(&idle_lock);
	return left;
}

void http_stop(void)
{
	if (watchdog_running) {
		pthread_mutex_lock(&watchdog_lock);
		watchdog_stop = 1;
		pthread_cond_signal(&watchdog_wake);
		pthread_mutex_unlock(&watchdog_lock);
		pthread_join(watchdog_thread, NULL);
		watchdog_running = 0;
	}
	if (daemon_handle)
		MHD_stop_daemon(daemon_handle);
	daemon_handle = NULL;
}
