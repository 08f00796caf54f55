/* Conditional requests: validators appear only for files unmodified for a
 * second, change with every modification, and decide 304 and If-Range. */
#include "cond.h"
#include "tap.h"

#include <string.h>

static struct stat file(long ino, long size, time_t sec, long nsec)
{
	struct stat st;
	memset(&st, 0, sizeof st);
	st.st_ino = (ino_t)ino;
	st.st_size = size;
	st.st_mtim.tv_sec = sec;
	st.st_mtim.tv_nsec = nsec;
	return st;
}

struct date_row {
	const char *text;
	time_t want; /* -1: refused */
};

/* clang-format off */
static const struct date_row dates[] = {
	{ "Sun, 06 Nov 1994 08:49:37 GMT", 784111777 },
	{ "Sunday, 06-Nov-94 08:49:37 GMT", 784111777 },
	{ "Sun Nov  6 08:49:37 1994", 784111777 },
	{ "Thu, 01 Jan 1970 00:00:00 GMT", 0 },
	{ "Sun, 06 Nov 1994 08:49:37 UTC", -1 },
	{ "Sun, 06 Nov 1994 08:49:37 GMT junk", -1 },
	{ "Sun, 06 Foo 1994 08:49:37 GMT", -1 },
	{ "Sun, 32 Nov 1994 08:49:37 GMT", -1 },
	{ "Sun, 06 Nov 1994 25:49:37 GMT", -1 },
	{ "", -1 },
	{ "yesterday", -1 },
};
/* clang-format on */

int main(void)
{
	for (size_t i = 0; i < sizeof dates / sizeof dates[0]; i++) {
		time_t t = 0;
		int rc = cond_parse_date(dates[i].text, &t);
		if (dates[i].want < 0)
			ok(rc < 0, "'%s' is not a date", dates[i].text);
		else
			ok(rc == 0 && t == dates[i].want, "'%s' is %ld (got %d, %ld)",
					dates[i].text, (long)dates[i].want, rc, (long)t);
	}
	char text[32];
	cond_format_date(784111777, text, sizeof text);
	is_str(text, "Sun, 06 Nov 1994 08:49:37 GMT", "IMF-fixdate");

	struct timespec now = { 1000000, 500 };
	struct cond_validators v, w;
	struct stat st = file(42, 10, 1000000 - 100, 123456789);
	cond_validators(&v, &st, &now);
	ok(v.usable, "a file unmodified for 100 s has validators");
	is_str(v.etag, "\"2a-a-f41dc.123456789\"",
			"ETag holds inode, size and the mtime to the ns");
	cond_format_date(1000000 - 100, text, sizeof text);
	is_str(v.last_modified, text, "Last-Modified");

	st = file(42, 10, 1000000 - 100, 123456790);
	cond_validators(&w, &st, &now);
	ok(strcmp(v.etag, w.etag) != 0, "a change within the same second changes the ETag");
	st = file(42, 11, 1000000 - 100, 123456789);
	cond_validators(&w, &st, &now);
	ok(strcmp(v.etag, w.etag) != 0, "a change of size changes the ETag");
	st = file(43, 10, 1000000 - 100, 123456789);
	cond_validators(&w, &st, &now);
	ok(strcmp(v.etag, w.etag) != 0, "a new inode (a file replaced by rename) changes the ETag");

	st = file(42, 10, 1000000 - 1, 600);
	cond_validators(&w, &st, &now);
	ok(!w.usable && w.etag[0] == '\0' && w.last_modified[0] == '\0',
			"modified less than a second ago: no validators");
	st = file(42, 10, 1000000 - 1, 500);
	cond_validators(&w, &st, &now);
	ok(w.usable, "exactly a second ago: validators");
	st = file(42, 10, 1000000 + 50, 0);
	cond_validators(&w, &st, &now);
	ok(!w.usable, "modified in the future: no validators");
	ok(!cond_not_modified(&w, "*", NULL), "no 304 without validators, even for *");
	ok(!cond_range_allowed(&w, v.etag), "no If-Range match without validators");
	ok(cond_range_allowed(&w, NULL), "a Range without If-Range is allowed");

	ok(cond_not_modified(&v, v.etag, NULL), "If-None-Match with the ETag: 304");
	char list[200];
	snprintf(list, sizeof list, "\"x\", W/%s", v.etag);
	ok(cond_not_modified(&v, list, NULL), "in a list, weakly: 304");
	ok(cond_not_modified(&v, "*", NULL), "*: 304");
	ok(!cond_not_modified(&v, "\"x\"", NULL), "another tag: 200");
	ok(!cond_not_modified(&v, "junk", NULL), "a malformed list: 200");
	ok(!cond_not_modified(&v, "\"x\"", v.last_modified),
			"If-None-Match wins over a matching If-Modified-Since");
	ok(cond_not_modified(&v, NULL, v.last_modified), "If-Modified-Since equal: 304");
	is_str(v.last_modified, "Mon, 12 Jan 1970 13:45:00 GMT",
			"(the date the next checks spell)");
	ok(cond_not_modified(&v, NULL, "Monday, 12-Jan-70 13:45:00 GMT"),
			"the same date in RFC 850: 304");
	ok(cond_not_modified(&v, NULL, "Mon Jan 12 13:45:00 1970"),
			"the same date in asctime: 304");
	cond_format_date(v.mtime + 10, text, sizeof text);
	ok(!cond_not_modified(&v, NULL, text),
			"a later date is not equal: 200 (an older file copied in)");
	cond_format_date(v.mtime - 10, text, sizeof text);
	ok(!cond_not_modified(&v, NULL, text), "an earlier date: 200");
	ok(!cond_not_modified(&v, NULL, "garbage"), "a bad date: 200");

	/* If-Match and If-Unmodified-Since (RFC 9110 13.1.1, 13.1.4). */
	ok(!cond_precondition_failed(&v, NULL, NULL), "no precondition: none fails");
	ok(!cond_precondition_failed(&v, v.etag, NULL), "If-Match with the ETag: holds");
	snprintf(list, sizeof list, "\"x\", %s", v.etag);
	ok(!cond_precondition_failed(&v, list, NULL), "If-Match with the ETag in a list: holds");
	ok(!cond_precondition_failed(&v, "*", NULL), "If-Match *: holds for a file");
	ok(!cond_precondition_failed(&w, "*", NULL), "... also without validators");
	ok(cond_precondition_failed(&v, "\"x\"", NULL), "If-Match with another tag: 412");
	ok(cond_precondition_failed(&v, "\"x\", \"y\"", NULL), "... a list of others: 412");
	snprintf(list, sizeof list, "W/%s", v.etag);
	ok(cond_precondition_failed(&v, list, NULL),
			"If-Match with the ETag marked weak: 412 (strong comparison)");
	snprintf(list, sizeof list, "\"x\", W/%s", v.etag);
	ok(cond_precondition_failed(&v, list, NULL), "... also in a list");
	ok(cond_precondition_failed(&w, v.etag, NULL),
			"If-Match with a tag while the file has no validators: 412");
	ok(cond_precondition_failed(&v, "junk", NULL), "If-Match malformed: 412");
	ok(!cond_precondition_failed(&v, NULL, v.last_modified),
			"If-Unmodified-Since the Last-Modified date: holds");
	cond_format_date(v.mtime + 10, text, sizeof text);
	ok(!cond_precondition_failed(&v, NULL, text), "... a later date: holds");
	cond_format_date(v.mtime - 1, text, sizeof text);
	ok(cond_precondition_failed(&v, NULL, text), "... a second before the modification: 412");
	ok(cond_precondition_failed(&w, NULL, text),
			"... also while the file has no validators (modified since)");
	ok(!cond_precondition_failed(&v, NULL, "garbage"), "an invalid date is ignored");
	snprintf(list, sizeof list, "%s, %s", v.last_modified, v.last_modified);
	ok(!cond_precondition_failed(&v, NULL, list), "... so is a list of dates");
	ok(!cond_precondition_failed(&v, v.etag, text),
			"If-Match holding: If-Unmodified-Since is not looked at");
	ok(cond_precondition_failed(&v, "\"x\"", v.last_modified),
			"If-Match failing: 412, whatever If-Unmodified-Since says");

	ok(cond_range_allowed(&v, v.etag), "If-Range with the ETag");
	snprintf(list, sizeof list, "W/%s", v.etag);
	ok(!cond_range_allowed(&v, list), "If-Range with a weak tag never matches");
	ok(!cond_range_allowed(&v, "\"other\""), "If-Range with another tag");
	ok(cond_range_allowed(&v, v.last_modified), "If-Range with Last-Modified");
	cond_format_date(v.mtime + 1, text, sizeof text);
	ok(!cond_range_allowed(&v, text), "If-Range with another date");
	ok(!cond_range_allowed(&v, "junk"), "If-Range with junk");
	return done_testing();
}
