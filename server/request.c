/* One request's life: libmicrohttpd calls the access handler several times
 * per request (headers in; once per body chunk; once more at the end of
 * the body) and then the completion callback. This file hides that state
 * machine: a handler sees one handle() call with the body spooled, and one
 * finished() call.
 *
 * A request whose handler answers later (PLXD_PENDING), whose body the
 * handler cannot take yet, or whose streamed response has nothing to send
 * yet waits suspended (MHD_suspend_connection): its event thread serves
 * the others meanwhile, and resumes it when the handler says so. While it
 * waits, libmicrohttpd does not look at its socket, so this file watches it
 * for the client leaving. */
#include "alloc.h"
#include "clock.h"
#include "deny.h"
#include "framing.h"
#include "handler.h"
#include "modules.h"
#include "http.h"
#include "log.h"
#include "loop.h"
#include "path.h"
#include "recv_tap.h"
#include "request.h"
#include "resolve.h"
#include "resolve_cache.h"
#include "site.h"
#include "spool.h"
#include "stats.h"
#include "status.h"
#include "version.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* Bodies up to this size stay in memory; larger ones go to a temp file. */
#define BODY_IN_MEMORY (64 * 1024)
/* Response body pieces libmicrohttpd asks a handler's reader for. */
#define STREAM_BLOCK (32 * 1024)
/* A suspended request's socket is watched for the client's hang-up only
 * once it has waited this long: most waits (a persistent script's answer)
 * are over sooner, and cost no epoll_ctl then. */
#define HUP_WATCH_AFTER_MS 20

/* A spooled request body and the read position in it. Only body_append,
 * plxd_body_read and body_discard touch it, and each keeps pos <= the
 * spool's length: a reader can never be sent past the end, whatever a
 * handler does with the public body_length. */
struct body {
	struct spool spool;
	uint64_t pos; /* bytes handed to plxd_body_read's callers */
};

enum phase {
	PHASE_READING, /* headers in; body (if any) being read */
	PHASE_DONE     /* handled, or answered by plxd itself */
};

struct request {
	struct plxd_request pub;
	struct conn *conn;
	struct loop *loop; /* its event thread's */
	struct site *site;
	const struct handler_section *section; /* NULL: plxd answered itself */
	enum phase phase;
	int responded;
	int close;             /* answer with Connection: close */
	unsigned refuse;       /* status decided while the body arrives (413) */
	int streaming;         /* the handler's body() takes the body */
	uint64_t body_seen;    /* bytes of body taken, kept or dropped */
	uint64_t body_arrived; /* bytes of body offered, taken or not */
	/* Where the request ends in the connection's stream: from the body's
	 * start (body_at), its Content-Length or, chunked, what chunk_scan
	 * took. watching: the socket's reads go to chunk_scan. */
	uint64_t body_at;
	uint64_t body_declared;
	int chunked;
	int watching;
	struct chunk_scan chunk;
	char *target;
	char *path;
	char *file;
	char *script_name;
	char *route_name;
	char *local_target; /* plxd_serve_local's target */
	char *header_list;  /* plxd_request_header_list's last answer */
	unsigned redirects; /* plxd_serve_local calls so far */
	uint64_t start_us;
	struct body body; /* the spooled request body */

	/* Waiting (see the top of this file). */
	int pending;     /* handle() answered PLXD_PENDING, nothing queued yet */
	int body_wait;   /* body() left part of a chunk: plxd_body_resume */
	int stream_wait; /* the reader had nothing: plxd_stream_resume */
	int suspended;
	int aborted;                    /* given up: the client left, or plxd stops */
	int close_after;                /* plxd_connection_close */
	int head;                       /* the client asked HEAD (a local redirect asks GET) */
	enum plxd_end end;              /* how it ended when plxd decided (aborted) */
	struct loop_watch client;       /* the socket, for a hang-up while suspended */
	struct loop_timer client_later; /* ... watched from then */
	struct request *wprev, *wnext;  /* its thread's suspended requests */
	plxd_reader_fn *read;           /* a streamed response's reader, and its cls */
	void *read_cls;
	struct resolve_entry *cached; /* where pub.fd came from, if not opened for it */
};

/* The requests of this event thread that wait suspended: a stop resumes
 * them all (libmicrohttpd may not stop with suspended connections). */
static _Thread_local struct request *waiting;
/* Its stop has begun (request_abort_all): a request that would wait from
 * here (one begun or a reader emptied in the daemon's last run) is given
 * up instead, as the daemon stops next. */
static _Thread_local int stopping;

#define REQUEST_OF(pub) ((struct request *)(void *)((char *)(pub)-offsetof(struct request, pub)))

static void on_client_hup(struct loop_watch *w, unsigned events);
static void on_client_later(struct loop_timer *t);

static void suspend(struct request *r)
{
	if (r->suspended)
		return;
	if (stopping) {
		/* libmicrohttpd calls it again, and it refuses to go on. */
		r->aborted = 1;
		r->end = PLXD_END_ERROR;
		return;
	}
	MHD_suspend_connection(r->pub.connection);
	r->suspended = 1;
	r->wprev = NULL;
	r->wnext = waiting;
	if (waiting)
		waiting->wprev = r;
	waiting = r;
	if (r->conn)
		loop_timer_set(r->loop, &r->client_later, clock_ms() + HUP_WATCH_AFTER_MS,
				on_client_later);
}

static void on_client_later(struct loop_timer *t)
{
	struct request *r = (struct request *)(void *)((char *)t
			- offsetof(struct request, client_later));
	if (r->suspended)
		loop_watch_add(r->loop, &r->client, r->conn->fd, LOOP_HUP, on_client_hup);
}

static void resume(struct request *r)
{
	if (!r->suspended)
		return;
	r->suspended = 0;
	if (r->wprev)
		r->wprev->wnext = r->wnext;
	else
		waiting = r->wnext;
	if (r->wnext)
		r->wnext->wprev = r->wprev;
	r->wprev = r->wnext = NULL;
	loop_timer_stop(r->loop, &r->client_later);
	loop_watch_del(r->loop, &r->client);
	MHD_resume_connection(r->pub.connection);
}

/* Gives up on a waiting request: libmicrohttpd, resumed, closes its
 * connection (request_access and the stream reader refuse to go on), and
 * its handler hears how in finished(). */
static void abort_waiting(struct request *r, enum plxd_end how)
{
	r->aborted = 1;
	r->end = how;
	resume(r);
}

static void on_client_hup(struct loop_watch *w, unsigned events)
{
	(void)events;
	struct request *r =
			(struct request *)(void *)((char *)w - offsetof(struct request, client));
	abort_waiting(r, PLXD_END_CLIENT_GONE);
}

void request_abort_all(struct loop *loop)
{
	(void)loop; /* waiting is this thread's, and loop runs on it */
	stopping = 1;
	while (waiting)
		abort_waiting(waiting, PLXD_END_ERROR);
}

struct loop *plxd_loop(struct plxd_request *pub)
{
	return REQUEST_OF(pub)->loop;
}

/* Queues response for r (in the access handler, or at any time while the
 * connection is suspended: a pending request). Returns 0, or -1. */
static int queue(struct request *r, unsigned status, struct MHD_Response *response)
{
	if (MHD_queue_response(r->pub.connection, status, response) != MHD_YES)
		return -1;
	r->responded = 1;
	r->pub.status = status;
	if (r->pending) {
		r->pending = 0;
		resume(r);
	}
	return 0;
}

/* Whether r's answer must close its connection: r asked, or a head
 * pipelined behind it had too many entries (recv_tap.c). */
static int closing(struct request *r)
{
	if (!r->close && r->conn && recv_tap_closing(r->conn->fd))
		r->close = r->close_after = 1;
	return r->close;
}

int plxd_respond(struct plxd_request *pub, unsigned status, struct MHD_Response *response)
{
	struct request *r = REQUEST_OF(pub);
	if (r->responded || r->aborted) {
		MHD_destroy_response(response);
		return -1;
	}
	plxd_response_share(response);
	if (closing(r))
		MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
	int rc = queue(r, status, response);
	MHD_destroy_response(response);
	return rc;
}

void plxd_response_share(struct MHD_Response *response)
{
	MHD_add_response_header(response, MHD_HTTP_HEADER_SERVER, "plxd/" PLXD_VERSION);
}

int plxd_respond_shared(struct plxd_request *pub, unsigned status, struct MHD_Response *response)
{
	struct request *r = REQUEST_OF(pub);
	/* A shared response cannot say Connection: close for one request. */
	if (r->responded || r->aborted || closing(r))
		return -1;
	return queue(r, status, response);
}

void plxd_connection_close(struct plxd_request *pub)
{
	REQUEST_OF(pub)->close_after = 1;
}

void plxd_body_resume(struct plxd_request *pub)
{
	struct request *r = REQUEST_OF(pub);
	if (r->body_wait) {
		r->body_wait = 0;
		resume(r);
	}
}

void plxd_stream_resume(struct plxd_request *pub)
{
	struct request *r = REQUEST_OF(pub);
	if (r->stream_wait) {
		r->stream_wait = 0;
		resume(r);
	}
}

/* plxd's small HTML page for status into page; returns its length. */
static int error_page(unsigned status, char *page, size_t size)
{
	const char *reason = MHD_get_reason_phrase_for(status); /* "Unknown" if it has none */
	return snprintf(page, size,
			"<!DOCTYPE html>\n<html><head><title>%u %s</title></head>"
			"<body><h1>%u %s</h1></body></html>\n",
			status, reason, status, reason);
}

int plxd_respond_error(struct plxd_request *pub, unsigned status)
{
	char page[256];
	int len = error_page(status, page, sizeof page);
	struct MHD_Response *resp =
			MHD_create_response_from_buffer((size_t)len, page, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return -1;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
	if (status == 503)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
	pub->bytes_sent = (uint64_t)len;
	return plxd_respond(pub, status, resp);
}

const char *plxd_request_header(struct plxd_request *pub, const char *name)
{
	return MHD_lookup_connection_value(pub->connection, MHD_HEADER_KIND, name);
}

/* Counts the field lines named name, and once text is set (room for
 * them all), joins them there, ", " between two. */
struct header_join {
	const char *name;
	unsigned lines;
	size_t len;
	char *text;
};

static enum MHD_Result header_join_line(void *cls, enum MHD_ValueKind kind, const char *key,
		const char *value)
{
	(void)kind;
	struct header_join *j = cls;
	if (strcasecmp(key, j->name) != 0 || !value)
		return MHD_YES;
	size_t n = strlen(value);
	if (j->text) {
		if (j->lines)
			memcpy(j->text + j->len, ", ", 2);
		memcpy(j->text + j->len + (j->lines ? 2 : 0), value, n + 1);
	}
	j->len += n + (j->lines ? 2 : 0);
	j->lines++;
	return MHD_YES;
}

const char *plxd_request_header_list(struct plxd_request *pub, const char *name)
{
	struct request *r = REQUEST_OF(pub);
	const char *first = plxd_request_header(pub, name);
	if (!first)
		return NULL; /* most requests: no walk over the headers */
	struct header_join j = { .name = name };
	MHD_get_connection_values(pub->connection, MHD_HEADER_KIND, header_join_line, &j);
	if (j.lines < 2)
		return first; /* no copy */
	char *text = xmalloc(j.len + 1);
	j = (struct header_join){ .name = name, .text = text };
	MHD_get_connection_values(pub->connection, MHD_HEADER_KIND, header_join_line, &j);
	free(r->header_list);
	r->header_list = text;
	return text;
}

ssize_t plxd_body_read(struct plxd_request *pub, void *buf, size_t len)
{
	struct body *b = &REQUEST_OF(pub)->body;
	ssize_t n = spool_read(&b->spool, b->pos, buf, len);
	if (n > 0)
		b->pos += (uint64_t)n;
	return n;
}

/* Forgets the body: a local redirect is a GET without one. */
static void body_discard(struct request *r)
{
	spool_fini(&r->body.spool);
	r->body.pos = 0;
	r->pub.body_length = 0;
	r->pub.content_length = 0;
}

/* The body of a response that HTTP says has none: never read. */
static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)cls;
	(void)pos;
	(void)buf;
	(void)max;
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* The reader libmicrohttpd calls: the handler's, and when that has
 * nothing yet, the connection waits for plxd_stream_resume. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct request *r = cls;
	if (r->aborted)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	ssize_t n = r->read(r->read_cls, pos, buf, max);
	if (n == 0) {
		r->stream_wait = 1;
		suspend(r);
	}
	return n;
}

int plxd_response_bodiless(struct plxd_request *pub, unsigned status)
{
	return REQUEST_OF(pub)->head || status == 304 || status == 204
			|| (status >= 100 && status < 200);
}

size_t plxd_reply_header_room(struct plxd_request *pub)
{
	/* libmicrohttpd builds the response's head in the connection's memory
	 * (http_connection_memory), beside the request's head and what it
	 * parsed of it: the cookies again, and an entry for every field. */
	const union MHD_ConnectionInfo *head = MHD_get_connection_info(pub->connection,
			MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
	int fields = MHD_get_connection_values(pub->connection,
			MHD_HEADER_KIND | MHD_COOKIE_KIND | MHD_GET_ARGUMENT_KIND, NULL, NULL);
	size_t pool = http_connection_memory(&REQUEST_OF(pub)->site->config->server);
	size_t used = 2 * (head ? head->header_size : 0)
			+ (size_t)(fields > 0 ? fields : 0) * HTTP_FIELD_COST + 1024;
	return pool > used ? pool - used : 0;
}

int plxd_request_head(struct plxd_request *pub)
{
	return REQUEST_OF(pub)->head;
}

struct MHD_Response *plxd_response_stream(struct plxd_request *pub, unsigned status, uint64_t size,
		plxd_reader_fn *read, void *cls)
{
	struct request *r = REQUEST_OF(pub);
	if (!plxd_response_bodiless(pub, status)) {
		r->read = read;
		r->read_cls = cls;
		return MHD_create_response_from_callback(size, STREAM_BLOCK, stream_read, r, NULL);
	}
	/* libmicrohttpd frames a response of unknown length as chunked, and
	 * for HEAD and 304 it still sends the last chunk after the headers:
	 * bytes the client takes for the next response. So the response has
	 * a length and a reader never called. A 304's and a 204's end at
	 * their headers whatever they say (RFC 9112 6.3); for HEAD the size
	 * is what GET would send: a caller that does not know it counts it
	 * first (the gateway does), else the response says 0. */
	if (status == 304 && size == MHD_SIZE_UNKNOWN) {
		/* A 304 may carry only the length a 200 would have (RFC 9110
		 * 8.6), which a script that did not say it leaves unknown:
		 * libmicrohttpd writes a Content-Length for any size it is
		 * given, and neither a length nor chunks without one but in
		 * its HTTP/1.0-compatible mode, which closes the connection
		 * after the response. */
		struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN,
				STREAM_BLOCK, no_body, NULL, NULL);
		if (resp)
			MHD_set_response_options(resp, MHD_RF_HTTP_1_0_COMPATIBLE_STRICT,
					MHD_RO_END);
		return resp;
	}
	if (size == MHD_SIZE_UNKNOWN || status == 304 || status == 204 || status < 200)
		size = 0;
	return MHD_create_response_from_callback(size, STREAM_BLOCK, no_body, NULL, NULL);
}

/* Answers with plxd's own error page; the connection closes when the
 * request could not be read to its end. */
static void refuse(struct request *r, unsigned status, int close_connection)
{
	r->close |= close_connection;
	r->phase = PHASE_DONE;
	if (r->conn)
		stats_conn_phase(&r->conn->phase, STATS_WRITING);
	if (plxd_respond_error(&r->pub, status) < 0)
		plxd_log(PLXD_LOG_WARN, "could not queue a %u response", status);
}

/* Appends a chunk of body. Returns 0, or an HTTP status to answer with. */
static unsigned body_append(struct request *r, const char *data, size_t len)
{
	if (spool_append(&r->body.spool, data, len) < 0) {
		plxd_log(PLXD_LOG_ERROR, "cannot spool a request body in %s: %s",
				r->site->config->server.tmp_dir, strerror(errno));
		return 500;
	}
	r->pub.body_length = r->body.spool.len;
	return 0;
}

/* A Content-Length of digits only, as framing let through; UINT64_MAX
 * when it does not fit. */
static uint64_t content_length_parse(const char *text)
{
	uint64_t n = 0;
	for (; *text >= '0' && *text <= '9'; text++) {
		unsigned digit = (unsigned)(*text - '0');
		if (n > (UINT64_MAX - digit) / 10)
			return UINT64_MAX;
		n = n * 10 + digit;
	}
	return n;
}

static void dispatch(struct request *r)
{
	r->phase = PHASE_DONE;
	if (r->conn)
		stats_conn_phase(&r->conn->phase, STATS_WRITING);
	const struct plxd_handler *h = r->section->handler;
	int rc = h->handle(&r->pub);
	if (r->responded)
		return;
	if (rc == PLXD_PENDING) {
		r->pending = 1;
		suspend(r);
		return;
	}
	if (rc == 0)
		plxd_log(PLXD_LOG_ERROR, "handler %s queued no response for %s", h->name, r->path);
	refuse(r, 500, 0); /* resumes r if it was waiting (a local redirect) */
}

/* Why routing refuses a file for its name, or NULL. path's first len
 * bytes name the file, whose last component is name; real_name is its own
 * name when a link led to it ("" otherwise). Every handler is spared the
 * names [static] deny lists, and a name that is only a mapped extension
 * (".pl": config_route sees no extension in it, yet it is a script's). */
/* Lets go of the file route found: the stat cache's, or its own. */
static void file_release(struct request *r)
{
	if (r->cached)
		resolve_cache_release(r->cached);
	else if (r->pub.fd >= 0)
		close(r->pub.fd);
	r->cached = NULL;
	r->pub.fd = -1;
}

static const char *refused_name(const struct config *config, const char *path, size_t len,
		const char *name, const char *real_name)
{
	if (deny_path(config->deny, path, len)
			|| (real_name[0] && deny_name(config->deny, real_name, strlen(real_name))))
		return "a name [static] deny refuses";
	if (config_bare_extension(config, name)
			|| (real_name[0] && config_bare_extension(config, real_name)))
		return "a file named only like a script extension";
	return NULL;
}

/* A path under a [mount] prefix: its file, opened for this request (the
 * handler sees whether it changed), with SCRIPT_NAME the prefix ("" for
 * "/") and PATH_INFO the rest of the path. Returns 0, or an HTTP status. */
static unsigned route_mount(struct request *r, const struct mount *m, const char *target)
{
	const struct config *config = r->site->config;
	int fd = open(m->file, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &r->pub.st) < 0) {
		plxd_log(PLXD_LOG_ERROR, "%s: [mount] %s: %s: %s", target, m->prefix, m->file,
				strerror(errno));
		if (fd >= 0)
			close(fd);
		return 500;
	}
	r->pub.fd = fd;
	size_t len = m->prefix_len == 1 ? 0 : m->prefix_len;
	r->script_name = xstrndup(r->path, len);
	r->pub.script_name = r->script_name;
	r->pub.path_info = r->path + len;
	r->file = xstrdup(m->file);
	r->pub.file = r->file;
	r->pub.root = config->server.root;
	r->section = m->section;
	r->route_name = xstrdup(m->name);
	r->pub.route_name = r->route_name;
	r->pub.conf = r->section->conf;
	r->pub.state = r->section->state;
	return 0;
}

/* Finds the file and the handler for target. Returns 0, or an HTTP
 * status. */
static unsigned route(struct request *r, const char *target)
{
	const char *why = NULL;
	size_t cap = strlen(target) + 2;
	r->path = xmalloc(cap);
	const char *query;
	unsigned status = (unsigned)path_from_target(target, r->path, cap, &query, &why);
	if (status) {
		plxd_log(PLXD_LOG_INFO, "refused %s: %s", target, why);
		return status;
	}
	r->pub.path = r->path;
	r->pub.query = query;

	const struct config *config = r->site->config;
	/* The status page takes its path: a file there is never served, also
	 * when asked for in a form the page's exact match does not take
	 * (//plxd-status, /%70lxd-status, /x/../plxd-status, absolute form). */
	if (config->status.path[0] && strcmp(r->path, config->status.path) == 0) {
		plxd_log(PLXD_LOG_INFO, "refused %s: the status page's path, in another form",
				target);
		return 404;
	}
	const struct mount *m = config_mount(config, r->path);
	if (m)
		return route_mount(r, m, target);
	struct resolved res;
	int stat_cache = config->server.stat_cache;
	r->cached = stat_cache ? resolve_cache_get(r->site->generation, r->path, &res) : NULL;
	int open_errno = 0;
	if (!r->cached) {
		status = (unsigned)resolve_path(r->site->root_fd, r->path,
				config->server.follow_symlinks_outside, &res);
		open_errno = errno;
	}
	if (status) {
		/* A denied name is 404 however it fails to open, so that a 403
		 * cannot tell a hidden file is there. */
		if (deny_path(config->deny, r->path, strlen(r->path))) {
			plxd_log(PLXD_LOG_INFO, "refused %s: a name [static] deny refuses", target);
			return 404;
		}
		/* Not the client's doing (no descriptors left, an I/O error):
		 * the log says what, as it does for a script. */
		if (status == 500)
			plxd_log(PLXD_LOG_ERROR, "cannot open %s: %s", target,
					strerror(open_errno));
		return status;
	}
	char *path = res.index ? xconcat(r->path, res.index) : NULL;
	const char *full = path ? path : r->path; /* "/dir/" is served as "/dir/index.html" */
	const char *slash = memrchr(full, '/', res.name_len);
	const char *name = slash ? slash + 1 : full;
	size_t name_len = res.name_len - (size_t)(name - full);
	char *own_name = xstrndup(name, name_len);
	r->pub.fd = res.fd;
	why = refused_name(config, full, res.name_len, own_name, res.real_name);
	if (why) {
		plxd_log(PLXD_LOG_INFO, "refused %s: %s", target, why);
		file_release(r);
		free(path);
		free(own_name);
		return 404;
	}
	if (stat_cache && !r->cached)
		r->cached = resolve_cache_put(r->site->generation, r->site->root_fd, r->path, &res);
	if (path) {
		free(r->path);
		r->path = path;
		r->pub.path = path;
	}
	r->pub.st = res.st;
	r->script_name = xstrndup(r->path, res.name_len);
	r->pub.script_name = r->script_name;
	r->pub.path_info = r->path + res.name_len;
	r->file = xconcat(config->server.root, r->script_name);
	r->pub.file = r->file;
	r->pub.root = config->server.root;

	/* A folder is the static handler's whatever its name, so that
	 * "/dir.pl" gets its 301 to "/dir.pl/" as any other folder does. */
	int folder = S_ISDIR(res.st.st_mode);
	r->section = folder ? config->fallback : config_route(config, own_name);
	r->route_name = own_name;
	/* A link with a harmless name (x.txt -> x.pl) is routed by the file's
	 * own name too, and a handler wins: a script is never sent as text.
	 * Handlers then see that name, so they pick what they run it with by
	 * the same extension. */
	if (!folder && r->section == config->fallback && res.real_name[0]) {
		const struct handler_section *by_target = config_route(config, res.real_name);
		if (by_target != config->fallback) {
			r->section = by_target;
			free(r->route_name);
			r->route_name = xstrdup(res.real_name);
		}
	}
	r->pub.route_name = r->route_name;
	r->pub.conf = r->section->conf;
	r->pub.state = r->section->state;
	return 0;
}

const char *plxd_tmp_dir(struct plxd_request *pub)
{
	return REQUEST_OF(pub)->site->config->server.tmp_dir;
}

uint64_t plxd_max_body(struct plxd_request *pub)
{
	return REQUEST_OF(pub)->site->config->server.max_body;
}

const struct addr_list *plxd_trusted_proxies(struct plxd_request *pub)
{
	return &REQUEST_OF(pub)->site->config->server.trusted_proxies;
}

/* X-Forwarded-For lines, in order; past XFF_LINES, the last ones (the
 * walk starts from the right, and no chain of trusted proxies is that
 * long). */
#define XFF_LINES 16
struct xff {
	const char *v[XFF_LINES];
	size_t n;
};

static enum MHD_Result collect_xff(void *cls, enum MHD_ValueKind kind, const char *name,
		const char *value)
{
	(void)kind;
	struct xff *x = cls;
	if (!value || strcasecmp(name, "X-Forwarded-For") != 0)
		return MHD_YES;
	if (x->n == XFF_LINES) {
		memmove(x->v, x->v + 1, (XFF_LINES - 1) * sizeof x->v[0]);
		x->n--;
	}
	x->v[x->n++] = value;
	return MHD_YES;
}

int plxd_client_addr(struct plxd_request *pub, struct addr_range *out)
{
	char text[64];
	struct addr_range peer;
	log_format_addr(pub->client, text, sizeof text);
	if (addr_parse(text, strlen(text), &peer) < 0)
		return -1;
	struct xff x = { .n = 0 };
	const struct addr_list *trusted = plxd_trusted_proxies(pub);
	if (addr_list_match_addr(trusted, &peer))
		MHD_get_connection_values(pub->connection, MHD_HEADER_KIND, collect_xff, &x);
	return addr_client(trusted, &peer, x.v, x.n, out) < 0 ? -1 : 0;
}

char *const *plxd_request_limits_env(struct plxd_request *pub)
{
	return REQUEST_OF(pub)->site->limits_env;
}

int plxd_serve_local(struct plxd_request *pub, const char *target)
{
	struct request *r = REQUEST_OF(pub);
	if (r->aborted)
		return -1;
	if (r->responded)
		return -1;
	if (++r->redirects > 10) {
		plxd_log(PLXD_LOG_ERROR, "%s: more than 10 local redirects, last to %s", r->target,
				target);
		refuse(r, 500, 0);
		return r->responded ? 0 : -1;
	}
	/* Forget the first route (the access log keeps the client's target)
	 * and the body: the new target is fetched with GET. */
	file_release(r);
	free(r->path);
	free(r->file);
	free(r->script_name);
	free(r->route_name);
	r->path = r->file = r->script_name = r->route_name = NULL;
	free(r->local_target);
	r->local_target = xstrdup(target);
	pub->target = r->local_target;
	pub->method = "GET";
	pub->query = "";
	pub->path_info = "";
	pub->data = NULL;
	body_discard(r);
	r->section = NULL;
	unsigned status = route(r, r->local_target);
	if (status)
		refuse(r, status, 0);
	else
		dispatch(r);
	return r->responded || r->pending ? 0 : -1;
}

static struct request *request_begin(struct MHD_Connection *connection, const char *method,
		const char *version)
{
	struct request *r = xcalloc(1, sizeof *r);
	r->conn = http_conn(connection);
	r->loop = loop_current();
	loop_watch_init(&r->client);
	loop_timer_init(&r->client_later);
	r->site = site_acquire();
	spool_init(&r->body.spool, r->site ? r->site->config->server.tmp_dir : "/tmp",
			BODY_IN_MEMORY);
	r->pub.fd = -1;
	r->pub.connection = connection;
	r->pub.method = method;
	r->pub.version = version;
	r->head = strcmp(method, "HEAD") == 0;
	r->target = xstrdup(r->conn && r->conn->target ? r->conn->target : "/");
	r->pub.target = r->target;
	r->pub.query = "";
	r->pub.path_info = "";
	r->start_us = r->conn && r->conn->request_start_us ? r->conn->request_start_us : clock_us();
	if (r->conn) {
		r->pub.client = (struct sockaddr *)&r->conn->peer;
		r->pub.local = (struct sockaddr *)&r->conn->local;
		http_request_started(r->conn);
	}
	return r;
}

/* Feeds a request header to the framing check, with where libmicrohttpd
 * left it in its read buffer: that is how folds, NULs and lines that end
 * the head early are seen (framing.h). */
static enum MHD_Result header_framing(void *cls, enum MHD_ValueKind kind, const char *name,
		size_t name_len, const char *value, size_t value_len)
{
	(void)kind;
	framing_field_at(cls, name, name_len, value, value_len);
	return MHD_YES;
}

/* A read of a chunked body's socket, as libmicrohttpd makes it: before it
 * decodes the bytes, so a refusal stands before their data is handed on. */
static void on_chunk_read(void *cls, const char *data, size_t len)
{
	struct request *r = cls;
	int how = chunk_scan(&r->chunk, data, len);
	if (!how)
		return;
	recv_tap_watch(r->conn->fd, NULL, NULL);
	r->watching = 0;
	if (how > 0) {
		/* The rest of this read is counted as the next head's. */
		recv_tap_next_head(r->conn->fd, r->body_at + r->chunk.length, NULL, 0);
		return;
	}
	plxd_log(PLXD_LOG_INFO, "refused %s %s: %s", r->pub.method, r->target, r->chunk.why);
	/* libmicrohttpd takes no answer before the body's end: the rest is
	 * read and dropped, and the connection closed after the 400, before
	 * anything behind the body is read. */
	if (!r->refuse)
		r->refuse = 400;
	r->close = r->close_after = 1;
}

/* Where the request after r starts, for the count of its head's entries
 * (recv_tap.c): at the end of r's body, body_len bytes from body, where
 * libmicrohttpd's memory holds what it read after r's head, nothing
 * decoded or moved yet (chunk_watch). What it holds of the next head is
 * counted now: with too many entries, r's answer is the connection's last,
 * and the next head is never parsed. */
static void next_head(struct request *r, const char *body, uint64_t body_len)
{
	struct conn *c = r->conn;
	uint64_t bytes = 0;
	const char *first = NULL;
	if (!c || !c->pool || recv_tap_state(c->fd, &bytes, &first) < 0 || first != c->pool
			|| bytes < r->body_at || (uintptr_t)body < (uintptr_t)first)
		return;
	size_t memory = http_connection_memory(&r->site->config->server);
	uintptr_t off = (uintptr_t)body - (uintptr_t)first;
	if (off > memory || bytes - r->body_at > memory - off)
		return;
	uint64_t at = r->body_at + body_len;
	size_t held = bytes > at ? (size_t)(bytes - at) : 0;
	if (recv_tap_next_head(c->fd, at, held ? body + body_len : NULL, held) < 0) {
		plxd_log(PLXD_LOG_INFO,
				"%s %s: the request pipelined behind it has more than "
				"max_header_fields (%lu) header lines, cookies and query parameters: "
				"the connection is closed after this answer",
				r->pub.method, r->target,
				http_header_fields(&r->site->config->server));
		r->close = r->close_after = 1;
	}
}

/* Checks the framing of a chunked body as far as libmicrohttpd has read it
 * with the head, and has the socket's next reads checked until the body's
 * end (on_chunk_read). The bytes read lie in libmicrohttpd's memory for
 * the connection, in the order received, from its start (pool) to the
 * byte body_at + (bytes read - body_at): nothing has been decoded or moved
 * yet. Returns 0, or -1 when it answered (400, the connection closed). */
static int chunk_watch(struct request *r, const char *body, size_t memory)
{
	struct conn *c = r->conn;
	uint64_t bytes = 0;
	const char *first = NULL;
	r->chunked = 1;
	chunk_scan_begin(&r->chunk);
	/* Trailers take entries in libmicrohttpd's memory as the head's did. */
	int entries = MHD_get_connection_values(r->pub.connection,
			MHD_HEADER_KIND | MHD_COOKIE_KIND | MHD_GET_ARGUMENT_KIND, NULL, NULL);
	unsigned long max = http_header_fields(&r->site->config->server);
	r->chunk.trailers_left = entries >= 0 && (unsigned long)entries < max
			? max - (unsigned long)entries
			: 0;
	size_t head_len = (size_t)(body - r->pub.method);
	unsigned long long head_max = r->site->config->server.max_header_size;
	r->chunk.trailer_bytes_left = head_len < head_max ? head_max - head_len : 0;
	int laid_out = c && recv_tap_state(c->fd, &bytes, &first) == 0 && first == c->pool
			&& (uintptr_t)body >= (uintptr_t)first;
	uintptr_t at = laid_out ? (uintptr_t)body - (uintptr_t)first : 0;
	laid_out = laid_out && at <= memory && bytes >= r->body_at
			&& bytes - r->body_at <= memory - at;
	const char *why = "a chunked body whose framing plxd cannot check (libmicrohttpd's "
			  "reads not seen, or not laid out as 0.9.75 leaves them)";
	int how = laid_out ? chunk_scan(&r->chunk, body, (size_t)(bytes - r->body_at)) : -1;
	if (how < 0) {
		plxd_log(laid_out ? PLXD_LOG_INFO : PLXD_LOG_WARN, "refused %s %s: %s",
				r->pub.method, r->target, laid_out ? r->chunk.why : why);
		refuse(r, 400, 1);
		return -1;
	}
	if (!how) {
		recv_tap_watch(c->fd, on_chunk_read, r);
		r->watching = 1;
	} else {
		next_head(r, body, r->chunk.length);
	}
	return 0;
}

/* The first call of a request: its headers are in. */
static void request_headers(struct request *r)
{
	struct MHD_Connection *connection = r->pub.connection;
	const struct server_conf *server = &r->site->config->server;

	/* The head lies in libmicrohttpd's read buffer from the method's first
	 * byte; header_size runs to the end of its empty line. libmicrohttpd
	 * has room for more (http_connection_memory), so the limit is plxd's:
	 * a head of max_header_size bytes is served, one byte more is not. */
	const union MHD_ConnectionInfo *head = MHD_get_connection_info(connection,
			MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
	size_t head_len = head ? head->header_size : 0;
	if (head_len > server->max_header_size) {
		/* The request line with its line end: up to the version's end, and
		 * one or two bytes more. */
		size_t line = (size_t)(r->pub.version - r->pub.method) + strlen(r->pub.version) + 1;
		unsigned status = line >= server->max_header_size ? 414 : 431;
		plxd_log(PLXD_LOG_INFO,
				"refused %s %s: a request %s of %zu bytes, over max_header_size "
				"(%llu bytes)",
				r->pub.method, r->target, status == 414 ? "line" : "head",
				status == 414 ? line : head_len, server->max_header_size);
		refuse(r, status, 1);
		return;
	}

	/* Framing first: a request that could be read two ways is answered
	 * before its body and the connection closed, so that what follows it
	 * is never taken for a request. */
	struct framing framing;
	const char *why;
	framing_begin(&framing, r->pub.method, r->pub.version);
	framing_head(&framing, r->pub.method, head_len, r->pub.version);
	MHD_get_connection_values_n(connection, MHD_HEADER_KIND, header_framing, &framing);
	unsigned bad = framing_end(&framing, &why);
	if (bad) {
		plxd_log(PLXD_LOG_INFO, "refused %s %s: %s", r->pub.method, r->target, why);
		refuse(r, bad, 1);
		return;
	}

	/* Only a connection accepted past the limit is refused: a flood of
	 * new (idle) connections must not cut off the clients already in. */
	if (http_open_connections() > server->max_connections
			&& (!r->conn || r->conn->opened_as > server->max_connections)) {
		plxd_log(PLXD_LOG_WARN, "answered 503: %u connections open, max_connections is %lu",
				http_open_connections(), server->max_connections);
		refuse(r, 503, 1);
		return;
	}
	/* Framing let through digits only; libmicrohttpd answered 413 itself
	 * past 2^64 - 1. A length that does not fit content_length (2^63 and
	 * up) is over any max_body plxd could count to. */
	const char *length = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
			MHD_HTTP_HEADER_CONTENT_LENGTH);
	uint64_t declared = length ? content_length_parse(length) : 0;
	int too_large = declared > server->max_body || declared > INT64_MAX;
	r->pub.content_length = declared > INT64_MAX ? INT64_MAX : (int64_t)declared;
	const char *body = r->pub.method + head_len;
	struct conn *c = r->conn;
	uint64_t bytes;
	if (c && !c->pool && recv_tap_state(c->fd, &bytes, &c->pool) < 0)
		c->pool = NULL;
	/* libmicrohttpd's memory for the connection starts with what it read
	 * and has not used: the previous request's leftovers, the head. */
	if (c && c->pool)
		r->body_at = c->stream_at + (uint64_t)((uintptr_t)body - (uintptr_t)c->pool);
	r->body_declared = declared;
	if (MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
			    MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
		r->pub.content_length = -1;
		if (chunk_watch(r, body, http_connection_memory(server)) < 0)
			return;
	} else {
		next_head(r, body, declared);
	}
	/* The status page comes before any file of its name. A client that
	 * may not see it gets what a missing file gets (404, the same way
	 * below), decided now: had the page taken the request, libmicrohttpd
	 * would answer "Expect: 100-continue" with "100 Continue" before its
	 * 404, which tells the page is there. */
	const char *status_query;
	unsigned status;
	if (!status_route(&r->site->config->status, r->target, &status_query)) {
		status = route(r, r->target);
	} else if (!status_allowed(&r->pub, &r->site->config->status)) {
		status = 404;
	} else {
		r->section = &status_section;
		r->pub.path = r->site->config->status.path;
		r->pub.query = status_query;
		r->pub.conf = &r->site->config->status;
		r->pub.state = r->site;
		r->pub.root = server->root;
		r->phase = PHASE_READING;
		if (too_large) {
			refuse(r, 413, 1);
			return;
		}
		return;
	}
	if (status && r->pub.content_length == 0) {
		/* Answered on the next call, which keeps the connection open (a
		 * browser's missing favicon must not cost a reconnect). */
		r->refuse = status;
		r->phase = PHASE_READING;
		return;
	}
	if (status) {
		refuse(r, status, 1); /* its body will not be read */
		return;
	}
	if (too_large) {
		plxd_log(PLXD_LOG_INFO,
				"refused %s %s: Content-Length %s is over max_body (%llu bytes)",
				r->pub.method, r->target, length, server->max_body);
		refuse(r, 413, 1);
		return;
	}
	r->phase = PHASE_READING;
	const struct plxd_handler *h = r->section->handler;
	if (h->begin) {
		int how = h->begin(&r->pub);
		if (how == PLXD_RESPONDED || r->responded) {
			/* Answered before the body: it will not be read. */
			r->phase = PHASE_DONE;
			if (!r->responded)
				refuse(r, 500, 1);
			return;
		}
		r->streaming = how == PLXD_STREAM_BODY && h->body;
	}
	/* Even without a body the handler runs on the next call: a response
	 * queued on this first call makes libmicrohttpd close the connection
	 * (it takes it for an answer given before the body). */
}

/* Answers status on r's socket itself, then lets libmicrohttpd close the
 * connection (the caller returns MHD_NO). For a body that grew past
 * max_body as it arrived (chunked): libmicrohttpd accepts no response
 * until the body has been read, and an endless body would never be, so
 * the answer is written as recv_tap.c writes its 431: nothing else is in
 * flight on the connection while a body arrives. The write side is shut
 * and what the client already sent is read, so that the close does not
 * reset the connection before the client reads the answer. */
static void refuse_on_socket(struct request *r, unsigned status)
{
	char page[256], head[256];
	int len = error_page(status, page, sizeof page);
	int hlen = snprintf(head, sizeof head,
			"HTTP/1.1 %u %s\r\nConnection: close\r\n"
			"Content-Type: text/html; charset=utf-8\r\n"
			"Server: plxd/" PLXD_VERSION "\r\nContent-Length: %d\r\n\r\n",
			status, MHD_get_reason_phrase_for(status), len);
	r->pub.status = status; /* for the access log */
	if (!r->conn)
		return;
	struct iovec iov[2] = { { head, (size_t)hlen }, { page, (size_t)len } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	ssize_t n = sendmsg(r->conn->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n <= 0)
		return;
	r->pub.bytes_sent = (uint64_t)len;
	shutdown(r->conn->fd, SHUT_WR);
	recv_tap_drain(r->conn->fd);
}

enum MHD_Result request_access(void *cls, struct MHD_Connection *connection, const char *url,
		const char *method, const char *version, const char *upload_data,
		size_t *upload_data_size, void **con_cls)
{
	(void)cls;
	(void)url; /* decoded by libmicrohttpd: plxd uses the raw target instead */
	struct request *r = *con_cls;
	if (r && r->aborted)
		return MHD_NO; /* libmicrohttpd closes the connection */
	if (r && r->pending) {
		suspend(r); /* woken with nothing to send yet */
		return MHD_YES;
	}
	if (!r) {
		r = request_begin(connection, method, version);
		*con_cls = r;
		if (!r->site) {
			refuse(r, 503, 1);
			return MHD_YES;
		}
		request_headers(r);
		/* A body follows unless plxd closes the connection instead. */
		if (r->conn && r->pub.content_length != 0 && !r->close)
			http_body_started(r->conn);
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		size_t len = *upload_data_size;
		*upload_data_size = 0;
		/* Bytes a handler left are offered again: count arrivals once. */
		uint64_t arrived = r->body_seen + len;
		if (r->conn && arrived > r->body_arrived)
			http_body_progress(r->conn, (size_t)(arrived - r->body_arrived));
		if (arrived > r->body_arrived)
			r->body_arrived = arrived;
		if (arrived > r->site->config->server.max_body) {
			plxd_log(PLXD_LOG_WARN,
					"answered 413 and closed the connection: the body of %s %s "
					"grew past max_body (%llu bytes)",
					r->pub.method, r->target, r->site->config->server.max_body);
			refuse_on_socket(r, 413);
			return MHD_NO;
		}
		/* After a refusal the rest of the body is read and dropped. */
		if (r->phase != PHASE_READING || r->refuse) {
			r->body_seen += len;
			return MHD_YES;
		}
		if (r->streaming) {
			size_t taken = len;
			r->refuse = r->section->handler->body(&r->pub, upload_data, len, &taken);
			if (!r->refuse && taken < len) {
				/* The handler takes the rest when it can. */
				*upload_data_size = len - taken;
				len = taken;
				r->body_wait = 1;
				suspend(r);
			}
			r->pub.body_length += len;
		} else {
			r->refuse = body_append(r, upload_data, len);
		}
		r->body_seen += len;
		return MHD_YES;
	}
	if (r->conn)
		http_body_ended(r->conn);
	if (r->phase == PHASE_READING) {
		if (r->refuse) /* the body, if any, has been read: keep the connection */
			refuse(r, r->refuse, 0);
		else
			dispatch(r);
	}
	return MHD_YES;
}

static enum plxd_end end_of(enum MHD_RequestTerminationCode toe)
{
	switch (toe) {
	case MHD_REQUEST_TERMINATED_COMPLETED_OK:
		return PLXD_END_DONE;
	case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED:
		return PLXD_END_TIMEOUT;
	case MHD_REQUEST_TERMINATED_READ_ERROR:
	case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
		return PLXD_END_CLIENT_GONE;
	default:
		return PLXD_END_ERROR;
	}
}

/* The status the access log gives r: what was sent. With no response
 * queued, libmicrohttpd's own answer to a chunked body it refuses itself,
 * else nginx's 499 when the client left first, or 500. */
static unsigned logged_status(const struct request *r, enum plxd_end how)
{
	if (r->pub.status)
		return r->pub.status;
	if (r->chunked && r->chunk.state == CHUNK_LEFT)
		return r->chunk.left_status;
	return how == PLXD_END_CLIENT_GONE ? 499 : 500;
}

void request_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
		enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)connection;
	struct request *r = *con_cls;
	if (!r)
		return;
	*con_cls = NULL;
	enum plxd_end how = r->aborted                    ? r->end
			: r->conn && r->conn->client_left ? PLXD_END_CLIENT_GONE
							  : end_of(toe);
	/* A connection closed while it waited (a deadline, the daemon
	 * stopping) is no longer suspended. */
	if (r->suspended) {
		r->suspended = 0;
		if (r->wprev)
			r->wprev->wnext = r->wnext;
		else
			waiting = r->wnext;
		if (r->wnext)
			r->wnext->wprev = r->wprev;
		loop_timer_stop(r->loop, &r->client_later);
		loop_watch_del(r->loop, &r->client);
	}
	if (r->section && r->section->handler->finished)
		r->section->handler->finished(&r->pub, how);

	struct access_entry entry = {
		.client = r->pub.client,
		.method = r->pub.method,
		.target = r->target,
		.version = r->pub.version,
		.status = logged_status(r, how),
		.bytes = r->head ? 0 : r->pub.bytes_sent,
		.referer = plxd_request_header(&r->pub, "Referer"),
		.user_agent = plxd_request_header(&r->pub, "User-Agent"),
		.duration_us = clock_us() - r->start_us,
	};
	/* Counted before its access-log line is written: whoever reads the
	 * log finds the status page's counters caught up. */
	stats_request(r->section ? r->section->stats_id : STATS_PLXD, entry.status,
			entry.duration_us);
	if (r->conn)
		stats_conn_phase(&r->conn->phase, STATS_IDLE);
	log_access(&entry);

	if (r->conn && r->watching)
		recv_tap_watch(r->conn->fd, NULL, NULL);
	if (r->conn) {
		r->conn->stream_at = r->body_at + (r->chunked ? r->chunk.length : r->body_declared);
		recv_tap_idle(r->conn->fd);
	}
	/* Before a pipelined request is read (and when the head behind had
	 * too many entries after r's answer was queued). */
	if (r->conn && (r->close_after || recv_tap_closing(r->conn->fd)))
		shutdown(r->conn->fd, SHUT_RDWR);
	if (r->conn)
		http_request_ended(r->conn);
	file_release(r);
	body_discard(r);
	free(r->target);
	free(r->path);
	free(r->file);
	free(r->script_name);
	free(r->route_name);
	free(r->local_target);
	free(r->header_list);
	site_release(r->site);
	free(r);
}
