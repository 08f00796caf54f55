/* The Cookie header parser, table-driven. */
#include "test_req_collect.h"
#include "req_cookie.h"
#include "tap.h"

struct row {
	const char *input;
	const char *want;
};

/* clang-format off */
static const struct row rows[] = {
	{ "", "" },
	{ "a=1", "a=1;" },
	{ "a=1; b=2", "a=1;b=2;" },
	{ "a=1;b=2", "a=1;b=2;" },
	{ "  a = 1 ;\tb=2  ", "a=1;b=2;" },
	{ "q=\"hello world\"", "q=\"hello world\";" }, /* as CGI.pm */
	{ "q=\"\"", "q=\"\";" },
	{ "q=\"", "q=\";" },
	{ "x=%41+b%2B", "x=A b+;" },
	{ "bad=%zz%4", "bad=%zz%4;" },
	{ "noeq; c=3", "c=3;" },
	{ "=v; d=4", "d=4;" },
	{ "a=1; a=2", "a=1;a=2;" },
	{ "e=", "e=;" },
	{ "a=b=c", "a=b=c;" },
	{ ";;; ;", "" },
	{ "n%61me=%C3%A9", "name=\\xc3\\xa9;" },
	{ "sid=abc123; theme=dark; lang=en-US",
	  "sid=abc123;theme=dark;lang=en-US;" },
};
/* clang-format on */

int main(void)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		struct collect c = { .len = 0 };
		struct req_error err = { 0 };
		ok(req_cookie_parse(rows[i].input, strlen(rows[i].input), collect_field, &c, &err)
						== 0,
				"'%s' parses", rows[i].input);
		is_str(c.out, rows[i].want, "'%s' gives its cookies", rows[i].input);
	}
	struct collect c = { .fail_after = 1 };
	struct req_error err = { 0 };
	ok(req_cookie_parse("a=1; b=2", 8, collect_field, &c, &err) < 0 && err.code == REQ_STORE,
			"a refusing callback stops the parser");
	return done_testing();
}
