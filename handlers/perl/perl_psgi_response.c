/* A PSGI application's array response written in C: most responses are an
 * array of plain byte strings, and checking and writing them in Perl
 * (PLXD/PSGI.pm's _respond, a regular expression per header and body part)
 * cost more than the hello application itself. Anything this cannot write
 * as PSGI.pm would, it leaves to PSGI.pm, which also words the errors. */
#include "perl_interp.h"
#include "perl_interp_int.h"

#include <string.h>
#include <strings.h>

/* An HTTP token character (RFC 9110), as PSGI.pm's $TOKEN. */
static int token_char(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
			|| (c && strchr("!#$%&'*+.^_`|~-", c));
}

/* sv as plain bytes: a defined string or number, no reference, no magic,
 * not flagged UTF-8 (PSGI.pm decides what such a one means). undef, where
 * undef_ok, is ''. NULL: leave it to PSGI.pm. */
static const char *plain_bytes(pTHX_ SV *sv, int undef_ok, STRLEN *len)
{
	if (!sv || SvROK(sv) || SvMAGICAL(sv))
		return NULL;
	if (!SvOK(sv)) {
		*len = 0;
		return undef_ok ? "" : NULL;
	}
	const char *s = SvPV_const(sv, *len);
	return SvUTF8(sv) ? NULL : s;
}

/* av when it is a plain array (no tie): its elements are read directly. */
static AV *plain_array(pTHX_ SV *ref)
{
	if (!ref || !SvROK(ref) || SvMAGICAL(ref))
		return NULL;
	SV *av = SvRV(ref);
	return SvTYPE(av) == SVt_PVAV && !SvMAGICAL(av) ? (AV *)av : NULL;
}

static int status_ok(const char *s, STRLEN len)
{
	return len == 3 && s[0] >= '1' && s[0] <= '5' && s[1] >= '0' && s[1] <= '9' && s[2] >= '0'
			&& s[2] <= '9';
}

static int name_ok(const char *s, STRLEN len)
{
	if (!len || (len == 6 && strncasecmp(s, "Status", 6) == 0))
		return 0;
	for (STRLEN i = 0; i < len; i++)
		if (!token_char((unsigned char)s[i]))
			return 0;
	return 1;
}

/* No CR, LF, NUL or other control byte but tab, as PSGI.pm's $BAD_VALUE. */
static int value_ok(const char *s, STRLEN len)
{
	for (STRLEN i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return 0;
	}
	return 1;
}

/* Whether every part of r can be written here, before any is. */
static int response_plain(pTHX_ AV *r)
{
	STRLEN len;
	SV **part = AvARRAY(r);
	const char *status = plain_bytes(aTHX_ part[0], 0, &len);
	AV *headers = plain_array(aTHX_ part[1]);
	AV *body = plain_array(aTHX_ part[2]);
	if (!status || !status_ok(status, len) || !headers || !body || (AvFILLp(headers) + 1) % 2)
		return 0;
	for (SSize_t i = 0; i <= AvFILLp(headers); i += 2) {
		const char *name = plain_bytes(aTHX_ AvARRAY(headers)[i], 0, &len);
		if (!name || !name_ok(name, len))
			return 0;
		/* A body the app framed in chunks itself: PSGI.pm unframes it. */
		if (len == 17 && strncasecmp(name, "Transfer-Encoding", 17) == 0)
			return 0;
		const char *value = plain_bytes(aTHX_ AvARRAY(headers)[i + 1], 1, &len);
		if (!value || !value_ok(value, len))
			return 0;
	}
	for (SSize_t i = 0; i <= AvFILLp(body); i++)
		if (!plain_bytes(aTHX_ AvARRAY(body)[i], 1, &len))
			return 0;
	return 1;
}

static void put(pTHX_ PerlIO *out, const char *s, STRLEN len)
{
	if (len)
		PerlIO_write(out, s, len);
}

int psgi_respond_plain(pTHX_ SV *res, IO *io)
{
	AV *r = plain_array(aTHX_ res);
	PerlIO *out = io ? IoOFP(io) : NULL;
	/* A handle the app gave a :utf8 or :encoding layer takes characters:
	 * print upgrades bytes for it, and bytes past 0x7f written as they
	 * are would be malformed there (an :encoding layer then ends the
	 * process as it closes). */
	if (out && PerlIO_isutf8(out))
		return 0;
	/* A tied handle: print calls its PRINT, which this would pass by. */
	if (io && SvRMAGICAL(io) && mg_find((SV *)io, PERL_MAGIC_tiedscalar))
		return 0;
	if (!r || AvFILLp(r) != 2 || !out || !response_plain(aTHX_ r))
		return 0;
	STRLEN len;
	SV **part = AvARRAY(r);
	AV *headers = (AV *)SvRV(part[1]);
	AV *body = (AV *)SvRV(part[2]);
	const char *status = SvPV_const(part[0], len);
	put(aTHX_ out, "Status: ", 8);
	put(aTHX_ out, status, len);
	put(aTHX_ out, "\r\n", 2);
	for (SSize_t i = 0; i <= AvFILLp(headers); i += 2) {
		const char *name = plain_bytes(aTHX_ AvARRAY(headers)[i], 0, &len);
		put(aTHX_ out, name, len);
		put(aTHX_ out, ": ", 2);
		const char *value = plain_bytes(aTHX_ AvARRAY(headers)[i + 1], 1, &len);
		put(aTHX_ out, value, len);
		put(aTHX_ out, "\r\n", 2);
	}
	put(aTHX_ out, "\r\n", 2);
	for (SSize_t i = 0; i <= AvFILLp(body); i++) {
		const char *s = plain_bytes(aTHX_ AvARRAY(body)[i], 1, &len);
		put(aTHX_ out, s, len);
	}
	return 1;
}

/* PLXD::PSGI::respond_plain($res, $fh): psgi_respond_plain for PSGI.pm. */
XS(xs_psgi_respond_plain)
{
	dXSARGS;
	if (items != 2)
		croak_xs_usage(cv, "res, fh");
	if (psgi_respond_plain(aTHX_ ST(0), sv_2io(ST(1))))
		XSRETURN_YES;
	XSRETURN_NO;
}
