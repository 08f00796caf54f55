/* An incremental parser of a CGI response's header block (RFC 3875 section
 * 6): fed the script's output as it arrives, it says when the block is
 * complete and what it held. Shared by the CGI handler and the persistent
 * Perl handler. Pure C: no libmicrohttpd, no Perl. */
#ifndef PLXD_CGI_REPLY_H
#define PLXD_CGI_REPLY_H

#include <stddef.h>
#include <stdint.h>

enum cgi_reply_result {
	CGI_REPLY_MORE, /* every byte taken, the block is not complete yet */
	CGI_REPLY_DONE, /* the block is complete; *used bytes of this chunk
			    belonged to it, the rest is body */
	CGI_REPLY_ERROR /* the block is malformed; error says why */
};

/* A header the script sent that is none of the fields below. */
struct cgi_reply_header {
	const char *name;  /* as the script spelled it */
	const char *value; /* leading and trailing blanks removed */
};

/* Fields are valid once cgi_reply_feed returned CGI_REPLY_DONE, and until
 * cgi_reply_fini; strings are owned by the parser. */
struct cgi_reply {
	unsigned status;                  /* from Status or an NPH status line; otherwise 302
				   when Location is given, else 200 */
	const char *reason;               /* reason phrase given with the status, or NULL */
	const char *content_type;         /* Content-Type, or NULL */
	const char *location;             /* Location, or NULL */
	int location_local;               /* Location is a local path ("/x", not "//x") and no
				   Status was given: RFC 3875's local redirect, which
				   the server serves itself when there is no body */
	int nph;                          /* the block began with an "HTTP/1.x NNN reason" line
				   (a non-parsed-header script) */
	int64_t content_length;           /* Content-Length, or -1 when not given */
	struct cgi_reply_header *headers; /* other headers, in order */
	size_t header_count;
	const char *error; /* after CGI_REPLY_ERROR: static text, e.g.
				   "bad Status line" */

	/* Private. */
	char *buf;
	size_t len, cap, max, scanned;
	int state;
};

/* Prepares p. max_bytes bounds the header block (0: 64 KiB); a longer block
 * is an error. */
void cgi_reply_init(struct cgi_reply *p, size_t max_bytes);

/* Feeds len bytes of the script's output. With CGI_REPLY_DONE, *used is how
 * many of these bytes were header block (they may all be); the caller
 * treats the rest as the start of the body. Feeding after DONE or ERROR
 * returns the same result again with *used 0.
 *
 * Lines end in LF or CRLF. Errors: a line without ':' or with a name that is
 * not an HTTP token, a CR, NUL or other control byte inside a line, a folded
 * (continued) line, a bad Status or NPH status line (a status must be 200 to
 * 599), a bad or conflicting Content-Length, Transfer-Encoding (framing is
 * the server's), no Content-Type, Location or Status at all, and a block
 * longer than max_bytes. Hop-by-hop headers (Connection, Keep-Alive,
 * Proxy-Connection, TE, Trailer, Upgrade) are dropped silently. */
enum cgi_reply_result cgi_reply_feed(struct cgi_reply *p, const char *data, size_t len,
		size_t *used);

/* The script's output ended. Returns CGI_REPLY_DONE when the block was
 * complete, else CGI_REPLY_ERROR with error set ("no output" when nothing
 * came, "output ended inside the header block" otherwise). */
enum cgi_reply_result cgi_reply_eof(struct cgi_reply *p);

void cgi_reply_fini(struct cgi_reply *p);

#endif
