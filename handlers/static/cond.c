/* ETag, Last-Modified and the conditional headers; see cond.h. */
#include "cond.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const days[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
/* clang-format off */
static const char *const months[] = {
	"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
};
/* clang-format on */

static int month_index(const char *name);
static int valid_time(struct tm *tm, int year, time_t *out);
static int etag_matches(const char *list, const char *etag, int weak_ok);

void cond_format_date(time_t t, char *out, size_t outlen)
{
	/* The files a thread serves share a few modification times: the last
	 * one formatted is kept. */
	static _Thread_local time_t last = (time_t)-1;
	static _Thread_local char text[32];
	if (t != last) {
		struct tm tm;
		gmtime_r(&t, &tm);
		snprintf(text, sizeof text, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday],
				tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour,
				tm.tm_min, tm.tm_sec);
		last = t;
	}
	size_t len = strnlen(text, sizeof text);
	if (len >= outlen)
		len = outlen - 1;
	memcpy(out, text, len);
	out[len] = '\0';
}

/* Writes v in lower-case hex at p; returns the end. */
static char *put_hex(char *p, uintmax_t v)
{
	char digits[2 * sizeof v];
	size_t n = 0;
	do {
		digits[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	while (n)
		*p++ = digits[--n];
	return p;
}

void cond_validators(struct cond_validators *v, const struct stat *st, const struct timespec *now)
{
	memset(v, 0, sizeof *v);
	v->mtime = st->st_mtim.tv_sec;
	/* usable once a whole second has passed since the modification */
	struct timespec m = st->st_mtim;
	v->usable = now->tv_sec > m.tv_sec + 1
			|| (now->tv_sec == m.tv_sec + 1 && now->tv_nsec >= m.tv_nsec);
	if (!v->usable)
		return;
	/* "INO-SIZE-MTIME.NSEC" in hex, the nanoseconds in 9 decimal digits:
	 * written by hand, as it is on every static request. */
	char *p = v->etag;
	*p++ = '"';
	p = put_hex(p, (uintmax_t)st->st_ino);
	*p++ = '-';
	p = put_hex(p, (uintmax_t)st->st_size);
	*p++ = '-';
	p = put_hex(p, (uintmax_t)m.tv_sec);
	*p++ = '.';
	long ns = m.tv_nsec;
	for (int i = 8; i >= 0; i--) {
		p[i] = (char)('0' + ns % 10);
		ns /= 10;
	}
	p += 9;
	*p++ = '"';
	*p = '\0';
	cond_format_date(m.tv_sec, v->last_modified, sizeof v->last_modified);
}

static int month_index(const char *name)
{
	for (int i = 0; i < 12; i++)
		if (strcmp(name, months[i]) == 0)
			return i;
	return -1;
}

static int valid_time(struct tm *tm, int year, time_t *out)
{
	if (tm->tm_mday < 1 || tm->tm_mday > 31 || tm->tm_hour > 23 || tm->tm_min > 59
			|| tm->tm_sec > 60 || tm->tm_hour < 0 || tm->tm_min < 0 || tm->tm_sec < 0
			|| year < 1970 || year > 9999)
		return -1;
	tm->tm_year = year - 1900;
	*out = timegm(tm);
	return *out == (time_t)-1 ? -1 : 0;
}

int cond_parse_date(const char *text, time_t *out)
{
	struct tm tm = { 0 };
	char wday[16], mon[4];
	int year, n = -1;
	size_t len = strlen(text);

	/* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
	if (sscanf(text, "%3[A-Za-z], %2d %3[A-Za-z] %4d %2d:%2d:%2d GMT%n", wday, &tm.tm_mday, mon,
			    &year, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
			    &n) == 7
			&& (size_t)n == len) {
		tm.tm_mon = month_index(mon);
		return tm.tm_mon < 0 ? -1 : valid_time(&tm, year, out);
	}
	/* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT (two-digit years: 1970-2069) */
	n = -1;
	if (sscanf(text, "%15[A-Za-z], %2d-%3[A-Za-z]-%2d %2d:%2d:%2d GMT%n", wday, &tm.tm_mday,
			    mon, &year, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
			    &n) == 7
			&& (size_t)n == len) {
		tm.tm_mon = month_index(mon);
		year += year < 70 ? 2000 : 1900;
		return tm.tm_mon < 0 ? -1 : valid_time(&tm, year, out);
	}
	/* asctime: Sun Nov  6 08:49:37 1994 */
	n = -1;
	if (sscanf(text, "%3[A-Za-z] %3[A-Za-z] %2d %2d:%2d:%2d %4d%n", wday, mon, &tm.tm_mday,
			    &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &year,
			    &n) == 7
			&& (size_t)n == len) {
		tm.tm_mon = month_index(mon);
		return tm.tm_mon < 0 ? -1 : valid_time(&tm, year, out);
	}
	return -1;
}

/* Whether a comma-separated list of entity-tags holds etag ("*" matches
 * any). weak_ok: weak comparison (W/ ignored), else strong (a weak tag
 * never matches). */
static int etag_matches(const char *list, const char *etag, int weak_ok)
{
	size_t etag_len = strlen(etag);
	const char *p = list;
	for (;;) {
		p += strspn(p, " \t,");
		if (*p == '\0')
			return 0;
		if (*p == '*')
			return 1;
		int weak = strncmp(p, "W/", 2) == 0;
		if (weak)
			p += 2;
		if (*p != '"')
			return 0; /* not an entity-tag: the list is malformed */
		const char *close = strchr(p + 1, '"');
		if (!close)
			return 0;
		size_t len = (size_t)(close - p) + 1;
		if ((weak_ok || !weak) && len == etag_len && memcmp(p, etag, len) == 0)
			return 1;
		p = close + 1;
	}
}

int cond_precondition_failed(const struct cond_validators *v, const char *if_match,
		const char *if_unmodified_since)
{
	/* Without validators the ETag is "": only "*" matches. */
	if (if_match)
		return !etag_matches(if_match, v->etag, 0);
	time_t t;
	/* The modification time is known even while no Last-Modified is
	 * sent: a date a client got from plxd is a second older at least. */
	return if_unmodified_since && cond_parse_date(if_unmodified_since, &t) == 0 && v->mtime > t;
}

int cond_not_modified(const struct cond_validators *v, const char *if_none_match,
		const char *if_modified_since)
{
	if (!v->usable)
		return 0;
	if (if_none_match)
		return etag_matches(if_none_match, v->etag, 1);
	time_t t;
	return if_modified_since && cond_parse_date(if_modified_since, &t) == 0 && t == v->mtime;
}

int cond_range_allowed(const struct cond_validators *v, const char *if_range)
{
	if (!if_range)
		return 1;
	if (!v->usable)
		return 0;
	if (if_range[0] == '"' || strncmp(if_range, "W/", 2) == 0)
		return strcmp(if_range, v->etag) == 0;
	time_t t;
	return cond_parse_date(if_range, &t) == 0 && t == v->mtime;
}
