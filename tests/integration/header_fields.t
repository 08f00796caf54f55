# [server] max_header_fields: the entries libmicrohttpd keeps for a request
# head (one per header line, per cookie, per query parameter), counted as
# the head arrives and refused with 431 before libmicrohttpd parses it.
# Heads with more entries than its memory holds were answered twice, not
# at all, or with a 500 blamed on the script. Every handler gets the same
# heads: exactly at the limit (and at max_header_size too), and one past it;
# then heads pipelined behind a request, one past the limit.
use strict;
use warnings;
use Test::More;
use PlxdTest;
use PlxdRaw qw(responses read_responses);

# Every raw answer read below is checked for its framing (PlxdRaw).
sub framed { my ($raw) = @_; responses($raw); return $raw }

my $script = <<'EOF';
my @cookies = split /; /, $ENV{HTTP_COOKIE} // '';
my @params = split /&/, $ENV{QUERY_STRING} // '';
my @fields = grep { /^HTTP_X_/ } keys %ENV;
print "Content-Type: text/plain\n\n", scalar(@fields), ' ', scalar(@params), ' ', scalar(@cookies), "\n";
EOF
my %files = ('a.txt' => "a\n", 'c.pl' => $script, 'c.plx' => $script, 'c.plt' => $script);
my %handlers = ('.pl' => 'cgi', '.plx' => 'perl', '.plt' => 'perl:thread');
my %sections = (perl => { workers => 1 }, 'perl:thread' => { isolation => 'thread', workers => 1 });

# A head of Host, Connection and $fields X- lines, $params query
# parameters and $cookies cookies in one Cookie line (one entry more),
# padded with its last field to $size bytes when $size is given.
sub head {
    my ($path, %o) = @_;
    my $query = $o{params} ? '?' . join('&', map { "p$_" } 1 .. $o{params}) : '';
    my $h = "GET $path$query HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
    $h .= "Cookie: " . join('; ', map { "c$_=v" } 1 .. $o{cookies}) . "\r\n" if $o{cookies};
    $h .= "X-F$_: v\r\n" for 1 .. ($o{fields} // 0);
    if ($o{size}) {
        my $pad = $o{size} - length($h) - 2;
        die "head too long to pad" if $pad < 0 || !$o{fields};
        $h =~ s/v\r\n\z/'v' . ('w' x $pad) . "\r\n"/e;
    }
    return "$h\r\n";
}

# The default: 200 entries. Host and Connection are two of them.
my $s = PlxdTest->start(files => \%files, handlers => \%handlers, sections => \%sections);
my @cases = (
    [ 'header lines', sub { (fields => 198 + $_[0]) }, sub { (198 + $_[0]) . ' 0 0' } ],
    [ 'query parameters', sub { (params => 198 + $_[0]) }, sub { '0 ' . (198 + $_[0]) . ' 0' } ],
    [ 'cookies', sub { (cookies => 197 + $_[0]) }, sub { '0 0 ' . (197 + $_[0]) } ],
    [ 'all three, the head exactly max_header_size (8K)',
        sub { (fields => 100 + $_[0], params => 50, cookies => 47, size => 8192) },
        sub { (100 + $_[0]) . ' 50 47' } ],
);
for my $path ('/a.txt', '/c.pl', '/c.plx', '/c.plt') {
    for my $case (@cases) {
        my ($what, $head, $seen) = @$case;
        my @r = responses(framed($s->raw(head($path, $head->(0)))));
        is($r[0]{status}, 200, "$path: 200 entries, $what: served");
        is($r[0]{body}, $seen->(0) . "\n", '... and the script sees them all') if $path ne '/a.txt';
        @r = responses(framed($s->raw(head($path, $head->(1)))));
        is($r[0]{status}, 431, "$path: 201 entries, $what: 431");
        is($r[0]{headers}{connection}, 'close', '... and the connection is closed');
        is(scalar @r, 1, '... after one answer');
    }
}
ok($s->wait_log(qr/refused a request from 127\.0\.0\.1: 431, its head has more than max_header_fields \(200\)/),
    'the refusal is logged, naming the key');
unlike($s->error_log, qr/answered 500|header block too large/, 'no script was blamed for the head');

# Trailers take entries too: with Host and Transfer-Encoding, a chunked
# body may have 198 trailer lines; 199 are refused (400, Connection: close).
for my $path ('/c.pl', '/c.plx') {
    my $trailers = sub { "POST $path HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n"
        . join('', map { "T$_: v\r\n" } 1 .. $_[0]) . "\r\n" };
    my @r = responses(framed($s->raw($trailers->(198))));
    is($r[0]{status}, 200, "$path: 198 trailer lines beside 2 header lines: served");
    @r = responses(framed($s->raw($trailers->(199))));
    is(join(' ', map { $_->{status} } @r), '400', '... 199: 400, and nothing else');
    is($r[0]{headers}{connection}, 'close', '... and the connection closed');
}
ok($s->wait_log(qr/more trailer lines than max_header_fields leaves beside the head/), '... logged');

# And their bytes: head and trailers (lines and the final CRLF) together at
# most max_header_size (libmicrohttpd keeps both in the same memory, and
# past it answered 431 itself, logged as a 500 with a garbled request).
for my $path ('/c.pl', '/c.plx') {
    my $head = "POST $path HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    my $trailers = sub { "X: " . ('a' x (8192 - length($head) - 7 + $_[0])) . "\r\n\r\n" };
    my @r = responses(framed($s->raw($head . "3\r\nabc\r\n0\r\n" . $trailers->(0))));
    is($r[0]{status}, 200, "$path: head and trailers of exactly 8,192 bytes: served");
    @r = responses(framed($s->raw($head . "3\r\nabc\r\n0\r\n" . $trailers->(1))));
    is(join(' ', map { $_->{status} } @r), '400', '... one byte more: 400, and nothing else');
    @r = responses(framed($s->raw($head . "3\r\nabc\r\n0\r\n" . $trailers->(60_000))));
    is(join(' ', map { $_->{status} } @r), '400', '... 60 KB more: 400');
}
ok($s->wait_log(qr/trailers larger than max_header_size leaves beside the head/), '... logged');
unlike($s->access_log, qr/" 500 /, 'the access log has no 500 for any of them');

# Far past the limit, as a flood would be: 3000 cookies, 3000 query
# parameters, 1000 header lines. One 431, and nothing else.
for my $head (head('/a.txt', cookies => 3000), head('/c.pl', params => 3000),
    head('/c.plx', fields => 1000))
{
    my @r = responses(framed($s->raw($head)));
    is(join(' ', map { $_->{status} } @r), '431', 'a head far past the limit: one 431 (' . length($head) . ' bytes)');
}

# libmicrohttpd's own reading: it skips spaces after the method and takes
# the target to the line's last space; it splits cookies at ',' as at ';'.
# Neither hides an entry from the count; only a query's first '?' starts
# a parameter.
for my $path ('/a.txt', '/c.plx') {
    my $amps = sub { "GET  $path?a b?" . ('&' x $_[0]) . " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" };
    my @r = responses(framed($s->raw($amps->(197))));
    is($r[0]{status}, 200, "$path: a doubled space and a space in the target, 200 entries: served");
    @r = responses(framed($s->raw($amps->(198))));
    is($r[0]{status}, 431, '... 201: 431');
    @r = responses(framed($s->raw($amps->(2000))));
    is(join(' ', map { $_->{status} } @r), '431', '... 2001: one 431');
    my $commas = sub { "GET $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\nCookie: " . join(',', ('a') x $_[0]) . "\r\n\r\n" };
    @r = responses(framed($s->raw($commas->(197))));
    is($r[0]{status}, 200, "$path: 197 cookies split at commas (200 entries): served");
    @r = responses(framed($s->raw($commas->(198))));
    is($r[0]{status}, 431, '... 198: 431');
    @r = responses(framed($s->raw($commas->(600))));
    is(join(' ', map { $_->{status} } @r), '431', '... 600: one 431, not libmicrohttpd\'s twice');
    @r = responses(framed($s->raw("GET $path?q=" . ('?' x 250) . " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")));
    is($r[0]{status}, 200, "$path: 250 '?' in one parameter: served");
}

# Pipelined behind a request: in the same packet, the first request is
# answered, its answer the connection's last, and the head past the limit
# never parsed; sent after the first answer, it gets 431.
my $get = "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n";
my $post = "POST /c.pl HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
my $chunked = "POST /c.pl HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
my $at_limit = head('/a.txt', fields => 198);
my $past = head('/a.txt', fields => 199);
for my $first ([ 'a GET', $get ], [ 'a POST with a length', $post ], [ 'a chunked POST', $chunked ]) {
    my ($what, $bytes) = @$first;
    my @r = responses(framed($s->raw($bytes . $at_limit)));
    is(join(' ', map { $_->{status} } @r), '200 200', "$what, then a head at the limit in the same packet: both served");
    @r = responses(framed($s->raw($bytes . $past)));
    is(join(' ', map { $_->{status} } @r), '200', "$what, then a head past the limit in the same packet: the first served");
    is($r[0]{headers}{connection}, 'close', '... with Connection: close, and nothing after it');
    my $c = $s->connect;
    $c->syswrite($bytes);
    my ($one) = read_responses($c, 1);
    is($one->{status}, 200, "$what, answered");
    $c->syswrite($past);
    my $rest = PlxdTest::read_until_closed($c, 10);
    is(join(' ', map { $_->{status} } responses(framed($rest))), '431', '... then a head past the limit on the same connection: 431');
}
ok($s->wait_log(qr/the request pipelined behind it has more than max_header_fields/),
    'the closed pipeline is logged');

# The head past the limit comes in the same read as the body of the request
# before it (sent after that request's head): that request is answered,
# with Connection: close, and nothing after it.
for my $case ([ 'a Content-Length body', "Content-Length: 5\r\n\r\n", 'hello' ],
    [ 'a 30,000-byte body', "Content-Length: 30000\r\n\r\n", 'x' x 30000 ],
    [ 'a chunked body', "Transfer-Encoding: chunked\r\n\r\n", "5\r\nhello\r\n0\r\n\r\n" ],
    [ 'Expect: 100-continue', "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n", 'hello' ])
{
    my ($what, $head, $body) = @$case;
    for my $path ('/c.pl', '/c.plx', '/c.plt') {
        my $c = $s->connect;
        $c->syswrite("POST $path HTTP/1.1\r\nHost: x\r\n$head");
        # The rest in a read of its own, as a client would send it; had both
        # come in one read, the answer would be the same (the case above).
        select undef, undef, undef, 0.2;
        $c->syswrite($body . $past);
        my @r = responses(framed(PlxdTest::read_until_closed($c, 10)));
        is(join(' ', map { $_->{status} } grep { $_->{status} != 100 } @r), '200',
            "$path, $what, then a head past the limit with its body: the request answered, and nothing else");
        is($r[-1]{headers}{connection}, 'close', '... with Connection: close');
    }
}
ok($s->wait_log(qr/a request pipelined behind one being answered has more than max_header_fields \(200\)/),
    '... and logged');
is($s->get('/a.txt')->{status}, 200, 'still serving');
$s->stop;

# By default 25 per KB of max_header_size: 800 at 32K.
$s = PlxdTest->start(files => \%files, handlers => \%handlers, sections => \%sections,
    server => { max_header_size => '32K' });
for my $path ('/a.txt', '/c.pl') {
    my @r = responses(framed($s->raw(head($path, cookies => 797))));
    is($r[0]{status}, 200, "max_header_size = 32K: $path: 800 entries served");
    @r = responses(framed($s->raw(head($path, cookies => 798))));
    is($r[0]{status}, 431, '... 801: 431');
}
ok($s->wait_log(qr/more than max_header_fields \(800\)/), '... and the log says 800');
$s->stop;

# Lowered: 50.
$s = PlxdTest->start(files => \%files, handlers => \%handlers, sections => \%sections,
    server => { max_header_fields => 50 });
for my $path ('/a.txt', '/c.plx') {
    my @r = responses(framed($s->raw(head($path, fields => 48))));
    is($r[0]{status}, 200, "max_header_fields = 50: $path: 50 entries served");
    @r = responses(framed($s->raw(head($path, fields => 49))));
    is($r[0]{status}, 431, '... 51: 431');
}
$s->stop;

# Raised: 1000 entries, with max_header_size 32K.
$s = PlxdTest->start(files => \%files, handlers => \%handlers, sections => \%sections,
    server => { max_header_fields => 1000, max_header_size => '32K' });
for my $path ('/a.txt', '/c.pl', '/c.plx', '/c.plt') {
    my @r = responses(framed($s->raw(head($path, params => 998))));
    is($r[0]{status}, 200, "max_header_fields = 1000: $path: 998 query parameters served");
    is($r[0]{body}, "0 998 0\n", '... and the script sees them all') if $path ne '/a.txt';
    @r = responses(framed($s->raw(head($path, params => 999))));
    is($r[0]{status}, 431, '... 999 (1001 entries): 431');
    @r = responses(framed($s->raw(head($path, fields => 998, size => 32768))));
    is($r[0]{status}, 200, "... $path: 1000 entries in a head of exactly 32K: served");
}
$s->stop;

done_testing();
