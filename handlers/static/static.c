/* The static handler: files that no [handlers] extension claims (the core
 * routes by extension, ignoring case, before this handler is chosen), sent
 * from their descriptor with sendfile (small ones from a buffer, in one
 * write with the headers). GET and HEAD only; validators and
 * 304s and 412s (cond.c), one byte range (range.c), Content-Type from mime.types
 * (mime.c). A folder is its index.html (found by the core), else 403:
 * never a listing. */
#include "alloc.h"
#include "cond.h"
#include "deny.h"
#include "file_cache.h"
#include "handler.h"
#include "log.h"
#include "mime.h"
#include "range.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Files up to this size are read and sent with their headers in one
 * write: sendfile would cost a dup, a second send and a close more per
 * request, which is most of the work for a small file. */
#define SMALL_FILE_MAX (16 * 1024)

/* respond_file's answer when the file read other than its stat said. */
#define FILE_CHANGED 2
/* Reads of a file that keeps changing under them before giving up. */
#define FILE_TRIES 4

struct static_conf {
	char *mime_types;
	char *default_type;
	char *deny; /* read by the core's routing (config.c), not here */
};

struct static_state {
	struct mime_table *mime;
	char *mime_file;
};

static int static_start(const void *conf, void **state);
static int static_reconfigure(void *state, const void *conf);
static void static_stop(void *state);
static int static_begin(struct plxd_request *r);
static int static_handle(struct plxd_request *r);
static int respond_page(struct plxd_request *r, unsigned status, const char *title,
		const char *header, const char *value);
static size_t encode(char *out, size_t n, const char *s, const char *keep);
static int respond_redirect(struct plxd_request *r);
static struct MHD_Response *fd_response(struct plxd_request *r, uint64_t offset, uint64_t length);
static struct MHD_Response *file_response(struct plxd_request *r, uint64_t offset, uint64_t *length,
		int *changed);
static int respond_file(struct plxd_request *r);

/* clang-format off */
static const struct conf_key static_keys[] = {
	{ .name = "mime_types", .type = CONF_PATH, .default_value = "/etc/mime.types",
	  .offset = offsetof(struct static_conf, mime_types), .flags = CONF_RESTART,
	  .help = "file of content types by extension (Debian's media-types), read once at "
		  "start; if it cannot be read, a small built-in table is used",
	  .tests = "integration/static.t unit/test_mime.c" },
	{ .name = "default_type", .type = CONF_STRING, .default_value = "application/octet-stream",
	  .offset = offsetof(struct static_conf, default_type),
	  .help = "Content-Type of files whose extension mime_types does not name",
	  .tests = "integration/static.t" },
	/* Hidden names as Apache (.ht*) and nginx setups (/\.(?!well-known))
	 * refuse them, and the leftovers H5BP's server configs block. */
	{ .name = "deny", .type = CONF_LIST,
	  .default_value = ".* !.well-known *~ #*# *.bak *.old *.orig *.rej *.save *.swo *.swp *.tmp",
	  .offset = offsetof(struct static_conf, deny), .check = deny_check,
	  .help = "names no handler serves, scripts included (404): fnmatch patterns, each "
		  "matched against every segment of the path in any case; !PATTERN excepts a "
		  "name; empty denies nothing (a file named only like an extension, .pl, is "
		  "refused anyway)",
	  .tests = "integration/static.t integration/attacks.t unit/test_deny.c" },
	CONF_KEYS_END
};
/* clang-format on */

static int static_start(const void *conf, void **state)
{
	const struct static_conf *c = conf;
	struct static_state *s = xcalloc(1, sizeof *s);
	char err[512];
	s->mime = mime_load(c->mime_types, err, sizeof err);
	s->mime_file = xstrdup(c->mime_types ? c->mime_types : "");
	if (err[0])
		plxd_log(PLXD_LOG_WARN, "static: %s", err);
	else
		plxd_log(PLXD_LOG_DEBUG, "static: %zu extensions from %s", mime_count(s->mime),
				c->mime_types);
	*state = s;
	return 0;
}

static int static_reconfigure(void *state, const void *conf)
{
	const struct static_state *s = state;
	const struct static_conf *c = conf;
	/* Request threads read the table without a lock: it stays as loaded. */
	if (strcmp(s->mime_file, c->mime_types ? c->mime_types : "") != 0)
		plxd_log(PLXD_LOG_WARN, "static: mime_types changed to %s: a restart loads it",
				c->mime_types);
	return 0;
}

static void static_stop(void *state)
{
	struct static_state *s = state;
	if (!s)
		return;
	mime_free(s->mime);
	free(s->mime_file);
	free(s);
}

/* Refuses other methods before their body is read: plxd would otherwise
 * spool up to max_body of a POST only to answer 405. */
static int static_begin(struct plxd_request *r)
{
	if (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0
			|| r->content_length == 0) /* handle() answers, keeping the connection */
		return PLXD_SPOOL_BODY;
	if (respond_page(r, 405, "Method Not Allowed", MHD_HTTP_HEADER_ALLOW, "GET, HEAD") < 0)
		plxd_log(PLXD_LOG_WARN, "static: could not queue a 405");
	return PLXD_RESPONDED;
}

/* A small HTML page with one extra header (NULL for none). */
static int respond_page(struct plxd_request *r, unsigned status, const char *title,
		const char *header, const char *value)
{
	char page[256];
	int len = snprintf(page, sizeof page,
			"<!DOCTYPE html>\n<html><head><title>%u %s</title></head>"
			"<body><h1>%u %s</h1></body></html>\n",
			status, title, status, title);
	struct MHD_Response *resp =
			MHD_create_response_from_buffer((size_t)len, page, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return -1;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
	if (header && MHD_add_response_header(resp, header, value) != MHD_YES) {
		MHD_destroy_response(resp);
		return -1;
	}
	r->bytes_sent = (uint64_t)len;
	return plxd_respond(r, status, resp);
}

/* Appends s to out, percent-encoding every byte but keep ones (and
 * letters and digits). Returns the new length. */
static size_t encode(char *out, size_t n, const char *s, const char *keep)
{
	static const char hex[] = "0123456789ABCDEF";
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
				|| strchr(keep, c)) {
			out[n++] = (char)c;
		} else {
			out[n++] = '%';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		}
	}
	out[n] = '\0';
	return n;
}

/* "/dir" names a folder: 301 to "/dir/", query kept. The Location is built
 * from the normalised path, re-encoded, so it can never start with "//"
 * (another host) nor carry bytes a header must not. */
static int respond_redirect(struct plxd_request *r)
{
	size_t cap = 3 * (strlen(r->path) + strlen(r->query)) + 4;
	char *location = xmalloc(cap);
	size_t n = encode(location, 0, r->path, "-._~!$&'()*+,;=:@/");
	location[n++] = '/';
	location[n] = '\0';
	if (r->query[0]) {
		location[n++] = '?';
		/* The query stays as the client encoded it; only bytes a header
		 * cannot carry are escaped. */
		n = encode(location, n, r->query, "-._~!$&'()*+,;=:@/?%[]{}|\\^`\"<>#");
	}
	int rc = respond_page(r, 301, "Moved Permanently", MHD_HTTP_HEADER_LOCATION, location);
	free(location);
	return rc;
}

/* length bytes of the file from offset, sent from its descriptor with
 * sendfile. Returns NULL after logging why. */
static struct MHD_Response *fd_response(struct plxd_request *r, uint64_t offset, uint64_t length)
{
	if (length == 0)
		return MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	/* libmicrohttpd closes the descriptor it is given; plxd owns r->fd. */
	int fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		plxd_log(PLXD_LOG_ERROR, "static: %s: %s", r->file, strerror(errno));
		return NULL;
	}
	struct MHD_Response *resp = MHD_create_response_from_fd_at_offset64(length, fd, offset);
	if (!resp) {
		plxd_log(PLXD_LOG_ERROR, "static: %s: libmicrohttpd refused the file", r->file);
		close(fd);
	}
	return resp;
}

/* *length bytes of the file from offset, to be sent: a copy in memory for a
 * small file, else from the descriptor. *length becomes what the response
 * holds. Returns NULL after logging why, or, with *changed set and nothing
 * logged, when the file read other than r->st says. */
static struct MHD_Response *file_response(struct plxd_request *r, uint64_t offset, uint64_t *length,
		int *changed)
{
	*changed = 0;
	if (*length == 0 || *length > SMALL_FILE_MAX)
		return fd_response(r, offset, *length);
	/* One byte more where the stat says the file ends, so that a file
	 * rewritten longer since (in place, its stat perhaps the stat cache's)
	 * is not sent cut at its old size. */
	int to_end = offset + *length == (uint64_t)r->st.st_size;
	char *copy = xmalloc((size_t)*length + 1);
	ssize_t n = pread(r->fd, copy, (size_t)*length + (size_t)to_end, (off_t)offset);
	if (n < 0) {
		plxd_log(PLXD_LOG_ERROR, "static: %s: %s", r->file, strerror(errno));
		free(copy);
		return NULL;
	}
	if ((uint64_t)n != *length) {
		free(copy);
		*changed = 1;
		return NULL;
	}
	return MHD_create_response_from_buffer((size_t)n, copy, MHD_RESPMEM_MUST_FREE);
}

/* The headers of a file's 200 or 206. */
static void add_file_headers(struct MHD_Response *resp, const char *type,
		const struct cond_validators *v)
{
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	/* Browsers must not guess a type (and so run a text file as HTML). */
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
	if (v->usable) {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, v->etag);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_LAST_MODIFIED, v->last_modified);
	}
}

static int respond_file(struct plxd_request *r)
{
	const struct static_conf *conf = r->conf;
	const struct static_state *state = r->state;
	uint64_t size = (uint64_t)r->st.st_size;

	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	struct cond_validators v;
	cond_validators(&v, &r->st, &now);
	if (cond_precondition_failed(&v, plxd_request_header_list(r, MHD_HTTP_HEADER_IF_MATCH),
			    plxd_request_header(r, MHD_HTTP_HEADER_IF_UNMODIFIED_SINCE)))
		return plxd_respond_error(r, 412);
	if (cond_not_modified(&v, plxd_request_header_list(r, MHD_HTTP_HEADER_IF_NONE_MATCH),
			    plxd_request_header(r, MHD_HTTP_HEADER_IF_MODIFIED_SINCE))) {
		/* With the size a 200 would have: libmicrohttpd sends no body
		 * for a 304 but writes its Content-Length, which RFC 9110 8.6
		 * allows with that value only. */
		struct MHD_Response *resp = fd_response(r, 0, size);
		if (!resp)
			return -1;
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, v.etag);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_LAST_MODIFIED, v.last_modified);
		return plxd_respond(r, 304, resp);
	}

	/* Range applies to GET only (RFC 9110 14.2); several ranges get the
	 * whole file rather than multipart/byteranges. */
	unsigned status = 200;
	uint64_t first = 0, last = size ? size - 1 : 0;
	const char *range = strcmp(r->method, "GET") == 0
			? plxd_request_header(r, MHD_HTTP_HEADER_RANGE)
			: NULL;
	if (range && cond_range_allowed(&v, plxd_request_header(r, MHD_HTTP_HEADER_IF_RANGE))) {
		switch (range_parse(range, size, &first, &last)) {
		case RANGE_ONE:
			status = 206;
			break;
		case RANGE_UNSATISFIABLE: {
			char value[48];
			snprintf(value, sizeof value, "bytes */%" PRIu64, size);
			return respond_page(r, 416, "Range Not Satisfiable",
					MHD_HTTP_HEADER_CONTENT_RANGE, value);
		}
		case RANGE_NONE:
		case RANGE_MANY:
			first = 0;
			last = size ? size - 1 : 0;
			break;
		}
	}
	uint64_t length = size ? last - first + 1 : 0;

	const char *type = mime_lookup(state->mime, r->route_name);
	if (!type)
		type = conf->default_type;
	/* A whole small file: its response is made once per thread. */
	struct file_cache_key key = { .st = &r->st, .owner = state, .type = type };
	int cacheable = status == 200 && v.usable && size > 0 && size <= SMALL_FILE_MAX;
	struct MHD_Response *kept = cacheable ? file_cache_get(&key) : NULL;
	if (kept && plxd_respond_shared(r, 200, kept) == 0) {
		r->bytes_sent = size;
		return 0;
	}

	int changed;
	struct MHD_Response *resp = file_response(r, first, &length, &changed);
	if (!resp)
		return changed ? FILE_CHANGED : -1;
	add_file_headers(resp, type, &v);
	if (status == 206) {
		char value[80];
		snprintf(value, sizeof value, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, first, last,
				size);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, value);
	}
	r->bytes_sent = length;
	if (cacheable && !kept && length == size) {
		plxd_response_share(resp);
		file_cache_put(&key, resp);
		if (plxd_respond_shared(r, 200, resp) == 0)
			return 0;
		/* Its connection must close: a response of its own. */
		if (!(resp = file_response(r, 0, &length, &changed)))
			return changed ? FILE_CHANGED : -1;
		add_file_headers(resp, type, &v);
	}
	return plxd_respond(r, status, resp);
}

static int static_handle(struct plxd_request *r)
{
	if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0)
		return respond_page(r, 405, "Method Not Allowed", MHD_HTTP_HEADER_ALLOW,
				"GET, HEAD");
	if (S_ISDIR(r->st.st_mode)) {
		size_t len = strlen(r->path);
		if (len == 0 || r->path[len - 1] != '/')
			return respond_redirect(r);
		return plxd_respond_error(r, 403); /* no index.html, and no listings */
	}
	if (r->path_info[0] != '\0')
		return plxd_respond_error(r, 404);
	if (!S_ISREG(r->st.st_mode))
		return plxd_respond_error(r, 403);
	/* A file rewritten in place after it was examined (by this request, or
	 * by the stat cache a moment ago) reads shorter or longer than its
	 * stat: it is examined again and answered anew, validators and range
	 * included, so that the client gets the file as it was at one moment,
	 * never a 500 nor a mix. A file changing faster than it can be read is
	 * given a few tries, then 503 with Retry-After. */
	for (int tries = 0; tries < FILE_TRIES; tries++) {
		int rc = respond_file(r);
		if (rc != FILE_CHANGED)
			return rc;
		if (fstat(r->fd, &r->st) < 0) {
			plxd_log(PLXD_LOG_ERROR, "static: %s: %s", r->file, strerror(errno));
			return -1;
		}
	}
	plxd_log(PLXD_LOG_WARN, "static: %s: changed at each of %d reads", r->file, FILE_TRIES);
	return respond_page(r, 503, "Service Unavailable", MHD_HTTP_HEADER_RETRY_AFTER, "1");
}

const struct plxd_handler static_handler = {
	.abi = PLXD_HANDLER_ABI,
	.name = "static",
	.keys = static_keys,
	.conf_size = sizeof(struct static_conf),
	.start = static_start,
	.reconfigure = static_reconfigure,
	.stop = static_stop,
	.begin = static_begin,
	.handle = static_handle,
};
