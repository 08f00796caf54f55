# Message framing over raw sockets. libmicrohttpd 0.9.75 on its own (each
# case checked against plxd without server/framing.c): uses the first of two
# Content-Length fields and keeps the connection, so a second request rides
# in the body; lets Transfer-Encoding win over Content-Length; reads a gzip
# body until the connection closes; keeps "Content-Length : 5" as another
# header; answers HTTP/1.1 without Host; and joins an obs-fold line onto
# the previous header's *name*, so "Content-: 5" + " Length" reads as
# "Content-Length: 5". plxd answers each with 400 (or 501) and
# Connection: close before reading a body byte; the request smuggled behind
# is never answered.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time);
use PlxdTest;
use PlxdRaw qw(responses);

# Its timeouts are 60 s, so that "the connection closes at once" (within
# 10 s) cannot be a connection closed at a timeout, however loaded the
# machine is.
my $s = PlxdTest->start(
    files    => { 'x.pl' => "SOURCE\n", 'smuggled.txt' => "SMUGGLED-CONTENT\n", 'a.txt' => "a\n" },
    handlers => { '.pl' => 'echo' },
    sections => { echo => { greeting => 'SCRIPT-RAN' } },
    server   => { connection_timeout => '60s', header_timeout => '60s', body_timeout => '60s' },
);

my $smuggled = "GET /smuggled.txt HTTP/1.1\r\nHost: plxd.test\r\n\r\n";
my $len = length $smuggled;

# name => [ request bytes, expected status ]
my @cases = (
    [ 'two Content-Length, the first 0',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nContent-Length: $len\r\n\r\n$smuggled", 400 ],
    [ 'two Content-Length, the second 0',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nContent-Length: $len\r\nContent-Length: 0\r\n\r\n$smuggled", 400 ],
    [ 'two equal Content-Length',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\nabc$smuggled", 400 ],
    # libmicrohttpd answers this one itself, with its status line and
    # headers twice (README, "What plxd cannot close").
    [ 'list-valued Content-Length',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nContent-Length: 0, $len\r\n\r\n$smuggled", 400,
      'libmicrohttpd' ],
    [ 'Content-Length with Transfer-Encoding',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nContent-Length: " . ($len + 5)
          . "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n$smuggled", 400 ],
    [ 'Transfer-Encoding before Content-Length',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3"
          . "\r\n\r\n0\r\n\r\n$smuggled", 400 ],
    [ 'Transfer-Encoding: gzip',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\nabc", 501 ],
    [ 'Transfer-Encoding: gzip, chunked',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n$smuggled", 501 ],
    [ 'Transfer-Encoding: chunked, identity',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n$smuggled", 501 ],
    [ 'two Transfer-Encoding: chunked',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked"
          . "\r\n\r\n0\r\n\r\n$smuggled", 501 ],
    [ 'Transfer-Encoding in HTTP/1.0',
      "POST /x.pl HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n$smuggled", 400 ],
    [ 'space before the colon',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nContent-Length : $len\r\n\r\n$smuggled", 400 ],
    [ 'tab before the colon',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nContent-Length\t: $len\r\n\r\n$smuggled", 400 ],
    [ 'non-token header name',
      "GET /a.txt HTTP/1.1\r\nHost: a\r\nX(y): 1\r\n\r\n$smuggled", 400 ],
    [ 'bare CR inside a value',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nX: a\rContent-Length: $len\r\n\r\n$smuggled", 400 ],
    [ 'HTTP/1.1 without Host', "GET /a.txt HTTP/1.1\r\n\r\n$smuggled", 400 ],
    [ 'two Host', "GET /a.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n$smuggled", 400 ],
    [ 'Host with a slash', "GET /a.txt HTTP/1.1\r\nHost: a/b\r\n\r\n$smuggled", 400 ],
    [ 'non-token method', "G(T /a.txt HTTP/1.1\r\nHost: a\r\n\r\n$smuggled", 400 ],
    [ 'unknown method', "FOO /a.txt HTTP/1.1\r\nHost: a\r\n\r\n$smuggled", 501 ],
    [ 'lower-case method', "get /a.txt HTTP/1.1\r\nHost: a\r\n\r\n$smuggled", 501 ],
    # Obsolete line folding: every fold is refused, so it never frames a body.
    [ 'fold that builds Content-Length from two names',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nContent-: $len\r\n Length\r\n\r\n$smuggled", 400 ],
    [ 'fold that builds Transfer-Encoding',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nTransfer-:         chunked\r\n\tEncoding\r\n\r\n"
          . "0\r\n\r\n$smuggled", 400 ],
    [ 'fold hiding Content-Length in another header',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nX-A: b\r\n Content-Length: $len\r\n\r\n$smuggled", 400 ],
    [ 'fold continuing Content-Length',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n 0\r\n\r\n0123456789$smuggled", 400 ],
    [ 'fold continuing Transfer-Encoding',
      "POST /x.pl HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n gzip\r\n\r\n0\r\n\r\n$smuggled", 400 ],
    [ 'fold on the first header line',
      "POST /x.pl HTTP/1.1\r\n Content-Length: $len\r\nHost: a\r\n\r\n$smuggled", 400 ],
    [ 'fold of a harmless header',
      "GET /a.txt HTTP/1.1\r\nHost: a\r\nUser-Agent: a\r\n b\r\n\r\n$smuggled", 400 ],
);

for my $c (@cases) {
    my ($name, $bytes, $want, $by_libmicrohttpd) = @$c;
    my $t0 = time;
    my $raw = $s->raw($bytes, 90);
    my $took = time - $t0;
    my @r = responses($raw, partial => $by_libmicrohttpd);
    is($r[0]{status}, $want, "$name: $want");
    is(scalar @r, 1, "$name: one response only");
    unlike($raw, qr/SMUGGLED-CONTENT|SCRIPT-RAN/, "$name: neither the smuggled request nor the script answered");
    is($r[0]{headers}{connection} // '', 'close', "$name: Connection: close");
    ok($took < 10, "$name: the connection closes at once (${\ sprintf '%.2f', $took} s)");
}
unlike($s->access_log, qr{/smuggled\.txt}, 'no smuggled request reached the access log');
like($s->error_log, qr/refused POST \/x\.pl: more than one Content-Length/, 'the log says why');
like($s->error_log, qr/refused POST \/x\.pl: obsolete line folding in a header/,
    'folding is named in the log');

# Well-framed requests still work, and keep the connection.
my @ok = responses($s->raw(
    "POST /x.pl HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
    . "POST /x.pl HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    . "GET /a.txt HTTP/1.1\r\nHost: a\r\nX-Tab:\tvalue\r\nX-Empty:\r\nConnection: close\r\n\r\n", 10));
is(scalar @ok, 3, 'well-framed pipelined requests: three answers');
like($ok[0]{body}, qr/^body\nhello\z/m, 'a Content-Length body');
like($ok[1]{body}, qr/^body\nabcde\z/m, 'a chunked body');
is($ok[2]{body}, "a\n", 'tabs and empty values are fine');
my @r10 = responses($s->raw("GET /a.txt HTTP/1.0\r\n\r\n", 10));
is($r10[0]{status}, 200, 'HTTP/1.0 needs no Host');
my @opt = responses($s->raw("OPTIONS /x.pl HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n", 10));
is($opt[0]{status}, 200, 'a known method reaches a script; an IPv6 Host is fine');

done_testing;
