/* Validators of a static file and the conditional requests that use them
 * (RFC 9110 section 13): ETag with If-Match and If-None-Match,
 * Last-Modified with If-Unmodified-Since and If-Modified-Since, and
 * If-Range. Pure C.
 *
 * Never a stale 304: a validator is only issued, and only honoured, once
 * the file has gone unmodified for a whole second. File timestamps tick
 * coarsely (a few milliseconds) and Last-Modified has whole seconds, so a
 * file rewritten within the same tick or second as a response could
 * otherwise keep that response's validators. Past that second, any later
 * write moves the modification time, which the ETag holds to the
 * nanosecond with the size and the inode. */
#ifndef PLXD_COND_H
#define PLXD_COND_H

#include <sys/stat.h>
#include <time.h>

struct cond_validators {
	int usable;             /* 0: modified within the last second (or in the
				    future): no ETag, no Last-Modified, no 304 */
	char etag[80];          /* strong, with its quotes */
	char last_modified[32]; /* IMF-fixdate */
	time_t mtime;
};

/* Validators for the file st describes, at time now (CLOCK_REALTIME). */
void cond_validators(struct cond_validators *v, const struct stat *st, const struct timespec *now);

/* Whether a request with these headers (each NULL when absent) gets 412
 * Precondition Failed, checked before cond_not_modified (RFC 9110 13.2.2).
 * If-Match: "*" holds for any file; otherwise one of its entity-tags must
 * equal the ETag by strong comparison (a weak tag never does, nor does any
 * tag while the file has no validators, nor a malformed list).
 * If-Unmodified-Since, only without If-Match and when it is a valid date:
 * the file must not have been modified after it. */
int cond_precondition_failed(const struct cond_validators *v, const char *if_match,
		const char *if_unmodified_since);

/* Whether a GET or HEAD with these headers (each NULL when absent) gets 304
 * Not Modified. If-None-Match wins over If-Modified-Since; a date must equal
 * Last-Modified exactly, so a file replaced by an older one (rsync, tar) is
 * never taken for unchanged. */
int cond_not_modified(const struct cond_validators *v, const char *if_none_match,
		const char *if_modified_since);

/* Whether a Range may be honoured under If-Range (NULL: no If-Range): the
 * strong ETag, or exactly the Last-Modified date, must match. */
int cond_range_allowed(const struct cond_validators *v, const char *if_range);

/* An HTTP-date in any of the three formats recipients must accept
 * (IMF-fixdate, RFC 850, asctime). Returns 0 with *out, or -1. */
int cond_parse_date(const char *text, time_t *out);

/* IMF-fixdate, independent of the locale. out has room for 30 bytes. */
void cond_format_date(time_t t, char *out, size_t outlen);

#endif
