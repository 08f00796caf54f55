/* The multipart/form-data parser: fields, files streamed to the sink, and
 * every error, each body fed whole and in chunks of many sizes (the result
 * must not depend on where the chunks split). */
#include "test_req_collect.h"
#include "req_multipart.h"
#include "tap.h"

#include <stdlib.h>

#define CT       "multipart/form-data; boundary=XyZ"
#define D        "--XyZ\r\n"
#define CD       "Content-Disposition: form-data; "
#define END      "--XyZ--\r\n"
#define SPACES10 "          "
#define SPACES100 \
	SPACES10 SPACES10 SPACES10 SPACES10 SPACES10 SPACES10 SPACES10 SPACES10 SPACES10 SPACES10

struct row {
	const char *what;
	const char *content_type;
	const char *body;
	const char *want; /* collected output, or the start of the message */
	enum req_code code;
	unsigned long max_fields;
	unsigned long long max_field_size, max_upload_size, max_total; /* 0: defaults */
	int no_uploads;                                                /* max_upload_size 0 */
	int fail_field, fail_file_begin, fail_file_data;               /* sink refuses on call N */
};

/* clang-format off */
static const struct row rows[] = {
	{ .what = "two fields",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n1\r\n" D CD "name=\"b\"\r\n\r\ntwo\r\n" END,
	  .want = "a=1;b=two;",
	  .code = REQ_OK },
	{ .what = "repeated names and an empty value",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n1\r\n" D CD "name=\"a\"\r\n\r\n\r\n"
	    D CD "name=\"a\"\r\n\r\n3\r\n" END,
	  .want = "a=1;a=;a=3;",
	  .code = REQ_OK },
	{ .what = "files and fields",
	  .content_type = CT,
	  .body = D CD "name=\"title\"\r\n\r\nholiday\r\n"
	  D CD "name=\"f\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nhello\r\n"
	  D CD "name=\"f\"; filename=\"b.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
	    "x--XyZ-not\x01\xff\r\n-\r\n--Xy\r\n" D CD "name=\"g\"; filename=\"c\"\r\n\r\n\r\n" END,
	  .want = "title=holiday;file f a.txt text/plain [hello] 5;"
	  "file f b.bin application/octet-stream [x--XyZ-not\\x01\\xff\\x0d\\x0a-\\x0d\\x0a--Xy] 21;"
	  "file g c (none) [] 0;",
	  .code = REQ_OK },
	{ .what = "an empty filename is a field (as CGI.pm)",
	  .content_type = CT,
	  .body = D CD "name=\"f\"; filename=\"\"\r\n"
	    "Content-Type: application/octet-stream\r\n\r\n\r\n" END,
	  .want = "f=;",
	  .code = REQ_OK },
	{ .what = "preamble and epilogue are ignored",
	  .content_type = CT,
	  .body = "This is a preamble.\r\nx--XyZ-ish\r\n--Xy\r\n" D CD "name=\"a\"\r\n\r\n1\r\n"
	    "--XyZ--\r\nepilogue --XyZ\r\n",
	  .want = "a=1;",
	  .code = REQ_OK },
	{ .what = "a body opening with a line end",
	  .content_type = CT,
	  .body = "\r\n" D CD "name=\"a\"\r\n\r\n1\r\n" END,
	  .want = "a=1;",
	  .code = REQ_OK },
	{ .what = "quoted boundary, parameter names in any case",
	  .content_type = "Multipart/Form-Data; charset=utf-8; BOUNDARY=\"a b:c\"",
	  .body = "--a b:c\r\ncontent-disposition: FORM-DATA; NAME=x\r\n\r\ny\r\n--a b:c--",
	  .want = "x=y;",
	  .code = REQ_OK },
	{ .what = "transport padding after a boundary",
	  .content_type = CT,
	  .body = "--XyZ \t \r\n" CD "name=\"a\"\r\n\r\n1\r\n--XyZ  \r\n" CD "name=\"b\"\r\n\r\n2\r\n" END,
	  .want = "a=1;b=2;",
	  .code = REQ_OK },
	{ .what = "other part headers ignored, unquoted name",
	  .content_type = CT,
	  .body = D "X-Other: 1\r\n" CD "name=plain\r\nContent-Transfer-Encoding: 8bit\r\n\r\nv\r\n" END,
	  .want = "plain=v;",
	  .code = REQ_OK },
	{ .what = "UTF-8 names, values and filenames pass as bytes",
	  .content_type = CT,
	  .body = D CD "name=\"\xc3\xa9\"\r\n\r\n\xe2\x82\xac\r\n"
	  D CD "name=\"u\"; filename=\"\xc3\xa9.txt\"\r\n\r\nx\r\n" END,
	  .want = "\\xc3\\xa9=\\xe2\\x82\\xac;file u \\xc3\\xa9.txt (none) [x] 1;",
	  .code = REQ_OK },
	{ .what = "an empty body has no parameters",
	  .content_type = CT,
	  .body = "",
	  .want = "",
	  .code = REQ_OK },
	{ .what = "closing boundary without its line end",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n1\r\n--XyZ--",
	  .want = "a=1;",
	  .code = REQ_OK },

	{ .what = "not multipart",
	  .content_type = "text/plain",
	  .body = "",
	  .want = "the body is not multipart/form-data",
	  .code = REQ_BAD_CONTENT_TYPE },
	{ .what = "no boundary parameter",
	  .content_type = "multipart/form-data; charset=utf-8",
	  .body = "",
	  .want = "multipart/form-data without a boundary",
	  .code = REQ_BAD_CONTENT_TYPE },
	{ .what = "empty boundary",
	  .content_type = "multipart/form-data; boundary=\"\"",
	  .body = "",
	  .want = "the multipart boundary must be 1 to 70",
	  .code = REQ_BAD_CONTENT_TYPE },
	{ .what = "boundary of 71 characters",
	  .content_type = "multipart/form-data; boundary="
	    "12345678901234567890123456789012345678901234567890123456789012345678901",
	  .body = "",
	  .want = "the multipart boundary must be 1 to 70",
	  .code = REQ_BAD_CONTENT_TYPE },
	{ .what = "malformed Content-Type parameters",
	  .content_type = "multipart/form-data; boundary=\"abc",
	  .body = "",
	  .want = "malformed parameters in the multipart Content-Type",
	  .code = REQ_BAD_CONTENT_TYPE },

	{ .what = "boundary never reached",
	  .content_type = CT,
	  .body = "just some text, no boundary at all\r\n--XyY",
	  .want = "the multipart body never reaches its boundary \"XyZ\"",
	  .code = REQ_NO_BOUNDARY },
	{ .what = "truncated inside a part's value",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n1\r\n" D CD "name=\"b\"\r\n\r\ntw",
	  .want = "the multipart body ends inside part \"b\", before its closing boundary",
	  .code = REQ_TRUNCATED },
	{ .what = "truncated inside a file",
	  .content_type = CT,
	  .body = D CD "name=\"f\"; filename=\"x\"\r\n\r\nabc",
	  .want = "the multipart body ends inside part \"f\"",
	  .code = REQ_TRUNCATED },
	{ .what = "truncated after a boundary line",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n1\r\n--XyZ  \r\n",
	  .want = "the multipart body ends before its closing boundary",
	  .code = REQ_TRUNCATED },
	{ .what = "truncated inside headers",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\nContent-Ty",
	  .want = "the multipart body ends before its closing boundary",
	  .code = REQ_TRUNCATED },
	{ .what = "truncated right after a boundary",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n1\r\n--XyZ",
	  .want = "the multipart body ends inside part \"a\", before its closing boundary",
	  .code = REQ_TRUNCATED },
	{ .what = "a boundary line that never ends",
	  .content_type = CT,
	  .body = "--XyZ" SPACES100 SPACES100 SPACES100,
	  .want = "a multipart boundary line does not end",
	  .code = REQ_BAD_MULTIPART },
	{ .what = "a delimiter run on into other text is content (as CGI.pm)",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n1\r\n--XyZabc\r\n--XyZ-\r\n--XyZ \tx\r\n--XyZ\r2\r\n" END,
	  .want = "a=1\\x0d\\x0a--XyZabc\\x0d\\x0a--XyZ-\\x0d\\x0a--XyZ \\x09x\\x0d\\x0a--XyZ\\x0d2;",
	  .code = REQ_OK },
	{ .what = "a delimiter run on into text in the preamble",
	  .content_type = CT,
	  .body = "--XyZabc\r\n" CD "name=\"a\"\r\n\r\n1\r\n" D CD "name=\"b\"\r\n\r\n2\r\n" END,
	  .want = "b=2;",
	  .code = REQ_OK },
	{ .what = "a part without a name",
	  .content_type = CT,
	  .body = D CD "filename=\"x\"\r\n\r\n1\r\n" END,
	  .want = "a multipart part has no form-data name",
	  .code = REQ_BAD_MULTIPART },
	{ .what = "a part without Content-Disposition",
	  .content_type = CT,
	  .body = D "Content-Type: text/plain\r\n\r\n1\r\n" END,
	  .want = "a multipart part has no form-data name",
	  .code = REQ_BAD_MULTIPART },
	{ .what = "a disposition other than form-data",
	  .content_type = CT,
	  .body = D "Content-Disposition: attachment; name=\"a\"\r\n\r\n1\r\n" END,
	  .want = "a multipart part has a Content-Disposition other than form-data",
	  .code = REQ_BAD_MULTIPART },
	{ .what = "two dispositions",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n" CD "name=\"b\"\r\n\r\n1\r\n" END,
	  .want = "a multipart part has two Content-Disposition headers",
	  .code = REQ_BAD_MULTIPART },
	{ .what = "a name given twice",
	  .content_type = CT,
	  .body = D CD "name=\"a\"; name=\"b\"\r\n\r\n1\r\n" END,
	  .want = "a multipart part has a Content-Disposition parameter given twice",
	  .code = REQ_BAD_MULTIPART },
	{ .what = "an unterminated quoted name",
	  .content_type = CT,
	  .body = D CD "name=\"a\r\n\r\n1\r\n" END,
	  .want = "a multipart part has a malformed Content-Disposition header",
	  .code = REQ_BAD_MULTIPART },
	{ .what = "a header line without a colon",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\nbogus\r\n\r\n1\r\n" END,
	  .want = "a multipart part has a header line without ':'",
	  .code = REQ_BAD_MULTIPART },
	{ .what = "a folded header line",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n continued\r\n\r\n1\r\n" END,
	  .want = "a multipart part has a folded header line",
	  .code = REQ_BAD_MULTIPART },
	{ .what = "a bare LF inside headers",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\nX: y\r\n\r\n1\r\n" END,
	  .want = "a multipart part has a control character in its headers",
	  .code = REQ_BAD_MULTIPART },

	{ .what = "fields at the limit",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n1\r\n" D CD "name=\"b\"; filename=\"f\"\r\n\r\n2\r\n" END,
	  .want = "a=1;file b f (none) [2] 1;",
	  .code = REQ_OK,
	  .max_fields = 2 },
	{ .what = "one field over the limit (files count too)",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n1\r\n" D CD "name=\"b\"; filename=\"f\"\r\n\r\n2\r\n"
	    D CD "name=\"c\"\r\n\r\n3\r\n" END,
	  .want = "more than 2 parameters",
	  .code = REQ_TOO_MANY_FIELDS,
	  .max_fields = 2 },
	{ .what = "a value at its limit",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n12345\r\n" END,
	  .want = "a=12345;",
	  .code = REQ_OK,
	  .max_field_size = 5 },
	{ .what = "a value over its limit",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n123456\r\n" END,
	  .want = "the value of parameter \"a\" in the body is larger than 5 bytes",
	  .code = REQ_FIELD_TOO_LARGE,
	  .max_field_size = 5 },
	{ .what = "a name over its limit",
	  .content_type = CT,
	  .body = D CD "name=\"abcdef\"\r\n\r\n1\r\n" END,
	  .want = "a parameter name in the body is larger than 5 bytes",
	  .code = REQ_FIELD_TOO_LARGE,
	  .max_field_size = 5 },
	{ .what = "a file at its limit (field size does not apply)",
	  .content_type = CT,
	  .body = D CD "name=\"f\"; filename=\"x\"\r\n\r\n1234567890\r\n" END,
	  .want = "file f x (none) [1234567890] 10;",
	  .code = REQ_OK,
	  .max_field_size = 5,
	  .max_upload_size = 10 },
	{ .what = "a file over its limit",
	  .content_type = CT,
	  .body = D CD "name=\"f\"; filename=\"x\"\r\n\r\n12345678901\r\n" END,
	  .want = "upload \"f\" is larger than 10 bytes",
	  .code = REQ_UPLOAD_TOO_LARGE,
	  .max_upload_size = 10 },
	{ .what = "uploads turned off",
	  .content_type = CT,
	  .body = D CD "name=\"f\"; filename=\"x\"\r\n\r\n\r\n" END,
	  .want = "upload \"f\": file uploads are not accepted",
	  .code = REQ_UPLOAD_TOO_LARGE,
	  .no_uploads = 1 },
	{ .what = "a body over max_total",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n1\r\n" END,
	  .want = "the request is larger than 62 bytes",
	  .code = REQ_TOO_LARGE,
	  .max_total = 62 },
	{ .what = "a body at max_total",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n1\r\n" END,
	  .want = "a=1;",
	  .code = REQ_OK,
	  .max_total = 63 },

	{ .what = "the field sink refuses",
	  .content_type = CT,
	  .body = D CD "name=\"a\"\r\n\r\n1\r\n" END,
	  .want = "cannot store a parameter",
	  .code = REQ_STORE,
	  .fail_field = 1 },
	{ .what = "the file sink refuses to begin",
	  .content_type = CT,
	  .body = D CD "name=\"f\"; filename=\"x\"\r\n\r\n1\r\n" END,
	  .want = "cannot store upload \"f\"",
	  .code = REQ_STORE,
	  .fail_file_begin = 1 },
	{ .what = "the file sink refuses data",
	  .content_type = CT,
	  .body = D CD "name=\"f\"; filename=\"x\"\r\n\r\n1\r\n" END,
	  .want = "cannot store upload \"f\"",
	  .code = REQ_STORE,
	  .fail_file_data = 1 },
};
/* clang-format on */

struct sink_state {
	struct collect c;
	const struct row *row;
	int file_begins, file_datas;
	int in_file;
	unsigned long long got;
};

static int on_file_begin(void *ctx, const struct req_part *part)
{
	struct sink_state *s = ctx;
	if (++s->file_begins == s->row->fail_file_begin)
		return -1;
	collect_bytes(&s->c, "file ", 5);
	collect_bytes(&s->c, part->name, part->name_len);
	collect_bytes(&s->c, " ", 1);
	collect_bytes(&s->c, part->filename, strlen(part->filename));
	collect_bytes(&s->c, " ", 1);
	const char *type = part->content_type ? part->content_type : "(none)";
	collect_bytes(&s->c, type, strlen(type));
	collect_bytes(&s->c, " [", 2);
	s->in_file = 1;
	s->got = 0;
	return 0;
}

static int on_file_data(void *ctx, const char *data, size_t len)
{
	struct sink_state *s = ctx;
	if (++s->file_datas == s->row->fail_file_data)
		return -1;
	collect_bytes(&s->c, data, len);
	s->got += len;
	return 0;
}

static int on_file_end(void *ctx, unsigned long long size)
{
	struct sink_state *s = ctx;
	char text[64];
	snprintf(text, sizeof text, "] %llu;", size);
	collect_bytes(&s->c, text, strlen(text));
	s->in_file = 0;
	return size == s->got ? 0 : -1;
}

static const struct req_multipart_sink sink = {
	.field = collect_field,
	.file_begin = on_file_begin,
	.file_data = on_file_data,
	.file_end = on_file_end,
};

/* Parses the row's body in chunks of chunk bytes (0: whole). Returns the
 * error code; *out gets the collected output or the message. */
static enum req_code parse(const struct row *r, size_t chunk, char *out, size_t outlen,
		struct req_usage *used)
{
	struct req_limits lim;
	req_limits_defaults(&lim);
	if (r->max_fields)
		lim.max_fields = r->max_fields;
	if (r->max_field_size)
		lim.max_field_size = r->max_field_size;
	if (r->max_upload_size || r->no_uploads)
		lim.max_upload_size = r->max_upload_size;
	if (r->max_total)
		lim.max_total = r->max_total;
	struct sink_state s = { .row = r, .c.fail_after = r->fail_field };
	struct req_error err = { 0 };
	*used = (struct req_usage){ 0 };
	size_t len = strlen(r->body);
	struct req_multipart *m =
			req_multipart_create(r->content_type, &lim, used, &sink, &s, &err);
	if (m) {
		size_t step = chunk ? chunk : len;
		int rc = 0;
		for (size_t off = 0; off < len && rc == 0; off += step)
			rc = req_multipart_feed(m, r->body + off,
					len - off < step ? len - off : step);
		if (rc == 0)
			req_multipart_finish(m);
		ok(req_multipart_feed(m, "x", 0) < 0 || err.code == REQ_OK,
				"%s: after an error, feeding fails", r->what);
		req_multipart_destroy(m);
	}
	snprintf(out, outlen, "%s", err.code == REQ_OK ? s.c.out : err.message);
	return err.code;
}

int main(void)
{
	static const size_t chunks[] = { 0, 1, 2, 3, 7, 64, 4096 };
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const struct row *r = &rows[i];
		for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
			char out[8192];
			struct req_usage used;
			enum req_code code = parse(r, chunks[k], out, sizeof out, &used);
			ok(code == r->code, "%s (chunks of %zu): %s (got %s)", r->what, chunks[k],
					req_code_name(r->code), req_code_name(code));
			if (r->code == REQ_OK)
				is_str(out, r->want, "%s (chunks of %zu): output", r->what,
						chunks[k]);
			else
				ok(strncmp(out, r->want, strlen(r->want)) == 0,
						"%s (chunks of %zu): says '%s'", r->what, chunks[k],
						out);
		}
	}

	/* Part headers are bounded: one endless line, or many lines. */
	for (int many = 0; many < 2; many++) {
		static char hbody[20000];
		size_t hl = (size_t)sprintf(hbody, D CD "name=\"a\"\r\n");
		while (hl < 10000)
			hl += (size_t)sprintf(hbody + hl,
					many ? "X-Pad: 0123456789\r\n" : "0123456789");
		struct row r = { .what = many ? "many header lines" : "an endless header line",
			.content_type = CT,
			.body = hbody };
		for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
			char out[8192];
			struct req_usage used;
			ok(parse(&r, chunks[k], out, sizeof out, &used) == REQ_BAD_MULTIPART
							&& strcmp(out, "a multipart part's headers are longer than 8192 bytes")
									== 0,
					"%s (chunks of %zu): %s", r.what, chunks[k], out);
		}
	}

	/* A large file in odd chunks: streamed, never held, byte-exact. */
	size_t big = 3 * 1024 * 1024 + 17;
	char *file = malloc(big);
	for (size_t i = 0; i < big; i++)
		file[i] = (char)(i * 7 % 251 == 0 ? '\r' : i * 13 % 256);
	char *body = malloc(big + 512);
	size_t blen = (size_t)sprintf(body, D CD "name=\"up\"; filename=\"big\"\r\n\r\n");
	memcpy(body + blen, file, big);
	blen += big;
	blen += (size_t)sprintf(body + blen, "\r\n" END);
	struct req_limits lim;
	req_limits_defaults(&lim);
	struct req_usage used = { 0 };
	struct req_error err = { 0 };
	struct row r = { .what = "big" };
	struct sink_state s = { .row = &r };
	struct req_multipart *m = req_multipart_create(CT, &lim, &used, &sink, &s, &err);
	int rc = 0;
	for (size_t off = 0, step = 1; off < blen && rc == 0;
			off += step, step = step * 3 % 70001 + 1)
		rc = req_multipart_feed(m, body + off, blen - off < step ? blen - off : step);
	ok(rc == 0 && req_multipart_finish(m) == 0, "a 3 MB upload in uneven chunks parses: %s",
			err.message);
	ok(s.got == big, "every byte of it reached the sink (%llu of %zu)", s.got, big);
	ok(used.bytes == blen && used.fields == 1, "usage counted");
	req_multipart_destroy(m);
	free(body);
	free(file);
	req_multipart_destroy(NULL);
	return done_testing();
}
