/* The form-encoded parser: pairs, decoding, order, and every error it
 * reports, table-driven. */
#include "test_req_collect.h"
#include "req_urlencoded.h"
#include "tap.h"

#include <limits.h>

struct row {
	const char *input;
	const char *want; /* the collected fields, or the start of the message */
	enum req_code code;
	unsigned long max_fields;
	unsigned long long max_field_size, max_total; /* 0: the defaults */
};

/* clang-format off */
static const struct row rows[] = {
	{ .input = "", .want = "", .code = REQ_OK },
	{ .input = "a=b", .want = "a=b;", .code = REQ_OK },
	{ .input = "a=b&c=d", .want = "a=b;c=d;", .code = REQ_OK },
	{ .input = "a=1&a=2&b=3&a=4", .want = "a=1;a=2;b=3;a=4;", .code = REQ_OK },
	{ .input = "a=&b", .want = "a=;b=;", .code = REQ_OK },
	{ .input = "=x", .want = "=x;", .code = REQ_OK },
	{ .input = "a=1&&b=2&", .want = "a=1;b=2;", .code = REQ_OK },
	{ .input = "&&&", .want = "", .code = REQ_OK },
	{ .input = "a=1;b=2", .want = "a=1;b=2;", .code = REQ_OK },
	{ .input = "a=b&c=+k+d+d+f&d=asf&as=+1+2+3+4", .want = "a=b;c= k d d f;d=asf;as= 1 2 3 4;",
	  .code = REQ_OK },
	{ .input = "x=%20y%2By+", .want = "x= y+y ;", .code = REQ_OK },
	{ .input = "n%61me=v", .want = "name=v;", .code = REQ_OK },
	{ .input = "a=b=c", .want = "a=b=c;", .code = REQ_OK },
	{ .input = "u=%C3%A9t%c3%a9", .want = "u=\\xc3\\xa9t\\xc3\\xa9;", .code = REQ_OK },
	{ .input = "z=%00&%0d%0a=1", .want = "z=\\x00;\\x0d\\x0a=1;", .code = REQ_OK },
	{ .input = "k=%7e%7E", .want = "k=~~;", .code = REQ_OK },
	{ .input = "a%26b=c%3Dd", .want = "a&b=c=d;", .code = REQ_OK },

	{ .input = "a=%G1", .want = "bad percent escape \"%G1\" in the query string",
	  .code = REQ_BAD_ESCAPE },
	{ .input = "a=%4", .want = "bad percent escape \"%4\"", .code = REQ_BAD_ESCAPE },
	{ .input = "a=1&b=%", .want = "bad percent escape \"%\"", .code = REQ_BAD_ESCAPE },
	{ .input = "%zz=1", .want = "bad percent escape \"%zz\"", .code = REQ_BAD_ESCAPE },
	{ .input = "a=%u00e9", .want = "bad percent escape \"%u0\"", .code = REQ_BAD_ESCAPE },

	{ .input = "a&b", .want = "a=;b=;", .code = REQ_OK, .max_fields = 2 },
	{ .input = "a&b&c", .want = "more than 2 parameters", .code = REQ_TOO_MANY_FIELDS,
	  .max_fields = 2 },
	{ .input = "a=1&&&b=2", .want = "a=1;b=2;", .code = REQ_OK,
	  .max_fields = 2 }, /* empty pairs are no parameters */
	{ .input = "a=abc", .want = "a=abc;", .code = REQ_OK, .max_field_size = 3 },
	{ .input = "a=%41%42%43", .want = "a=ABC;", .code = REQ_OK,
	  .max_field_size = 3 }, /* the limit counts decoded bytes */
	{ .input = "a=abcd",
	  .want = "the value of parameter \"a\" in the query string is larger than 3 bytes",
	  .code = REQ_FIELD_TOO_LARGE, .max_field_size = 3 },
	{ .input = "abcd=1",
	  .want = "the name of parameter \"abcd\" in the query string is larger than 3",
	  .code = REQ_FIELD_TOO_LARGE, .max_field_size = 3 },
	{ .input = "a=12345", .want = "a=12345;", .code = REQ_OK, .max_total = 7 },
	{ .input = "a=123456", .want = "the request is larger than 7 bytes", .code = REQ_TOO_LARGE,
	  .max_total = 7 },
};
/* clang-format on */

static void run_row(const struct row *r)
{
	struct req_limits lim;
	req_limits_defaults(&lim);
	if (r->max_fields)
		lim.max_fields = r->max_fields;
	if (r->max_field_size)
		lim.max_field_size = r->max_field_size;
	if (r->max_total)
		lim.max_total = r->max_total;
	struct req_usage used = { 0 };
	struct req_error err = { 0 };
	struct collect c = { .len = 0 };
	int rc = req_urlencoded_parse(r->input, strlen(r->input), "query string", &lim, &used,
			collect_field, &c, &err);
	if (r->code == REQ_OK) {
		ok(rc == 0 && err.code == REQ_OK, "'%s' parses", r->input);
		is_str(c.out, r->want, "'%s' gives its fields in order", r->input);
		ok(used.bytes == strlen(r->input), "'%s' counts its bytes", r->input);
	} else {
		ok(rc < 0 && err.code == r->code, "'%s' fails with %s (got %s)", r->input,
				req_code_name(r->code), req_code_name(err.code));
		ok(strncmp(err.message, r->want, strlen(r->want)) == 0, "'%s' says: %s", r->input,
				err.message);
		ok(req_code_status(err.code) == 400, "'%s' is the client's fault (400)", r->input);
	}
}

int main(void)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		run_row(&rows[i]);

	/* Query string and body share one request's limits. */
	struct req_limits lim;
	req_limits_defaults(&lim);
	lim.max_fields = 3;
	lim.max_total = 12;
	struct req_usage used = { 0 };
	struct req_error err = { 0 };
	struct collect c = { .len = 0 };
	ok(req_urlencoded_parse("a=1&b=2", 7, "query string", &lim, &used, collect_field, &c, &err)
					== 0,
			"first input within the limits");
	ok(used.fields == 2 && used.bytes == 7, "usage counted (%lu fields, %llu bytes)",
			used.fields, used.bytes);
	ok(req_urlencoded_parse("c=3&d", 5, "request body", &lim, &used, collect_field, &c,
			   &err) < 0 && err.code == REQ_TOO_MANY_FIELDS,
			"the second input's fields add to the first's");
	used = (struct req_usage){ 0 };
	err = (struct req_error){ 0 };
	req_urlencoded_parse("a=1&b=2", 7, "query string", &lim, &used, collect_field, &c, &err);
	ok(req_urlencoded_parse("c=333", 5, "request body", &lim, &used, collect_field, &c, &err)
					== 0,
			"12 bytes in all is within max_total 12");
	ok(req_urlencoded_parse("x", 1, "request body", &lim, &used, collect_field, &c, &err) < 0
					&& err.code == REQ_TOO_LARGE,
			"one byte more is too large");

	/* A callback that refuses stops the parser. */
	req_limits_defaults(&lim);
	used = (struct req_usage){ 0 };
	err = (struct req_error){ 0 };
	c = (struct collect){ .fail_after = 2 };
	ok(req_urlencoded_parse("a=1&b=2&c=3", 11, "query string", &lim, &used, collect_field, &c,
			   &err) < 0 && err.code == REQ_STORE
					&& c.calls == 2,
			"a refusing callback stops the parser with REQ_STORE");
	ok(req_code_status(REQ_STORE) == 500, "REQ_STORE is the server's fault (500)");

	/* The first error wins: a callback may say why itself. */
	err = (struct req_error){ 0 };
	req_error_set(&err, REQ_STORE, "disk full");
	req_error_set(&err, REQ_TRUNCATED, "later");
	ok(err.code == REQ_STORE && strcmp(err.message, "disk full") == 0, "the first error wins");

	/* Names in messages are cut short and stripped of control bytes. */
	char shown[64];
	req_error_quote(shown, sizeof shown, "a\r\nb\"c", 6);
	is_str(shown, "\"a??b?c\"", "control bytes and quotes are masked");
	req_error_quote(shown, sizeof shown, "0123456789012345678901234567890123456789XYZ", 43);
	is_str(shown, "\"0123456789012345678901234567890123456789...\"", "long names are cut");
	return done_testing();
}
