# Connection and request limits: max_connections answers 503 with
# Retry-After, per_ip_connections (never for trusted proxies), the idle
# timeout, the header and body deadlines against trickling clients, header
# size.
use strict;
use warnings;
use Test::More;
use IO::Select;
use IO::Socket::IP;
use Socket ();
use Time::HiRes qw(time);
use PlxdTest qw(wait_for);
use PlxdRaw qw(read_responses responses);

# Every raw answer read below is checked for its framing (PlxdRaw): a byte
# that belongs to no response fails the test.
sub framed { my ($raw) = @_; responses($raw); return $raw }

sub closed_within {
    my ($sock, $timeout, $trickle) = @_;
    my $sel = IO::Select->new($sock);
    my $t0 = time;
    while (time - $t0 < $timeout) {
        if ($sel->can_read(0.3)) {
            my $n = sysread $sock, my $buf, 4096;
            return time - $t0 if !$n;
            next;
        }
        $sock->syswrite($trickle) if defined $trickle;    # one byte at a time
    }
    return undef;
}

# max_connections. (The connections holding the slots must outlast the
# checks, however slow the machine: their deadlines are 60 s. One event
# thread accepts them, so they are counted in the order they connect.)
my $s = PlxdTest->start(files => { 'a.txt' => "a\n" },
    server => { max_connections => 4, threads => 1, header_timeout => '60s',
        connection_timeout => '60s' });
my @idle = map { $s->connect } 1 .. 4;
$_->syswrite("GET /a.txt HTTP/1.1\r\n") for @idle;    # started, not finished
my $raw = framed($s->raw("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"));
like($raw, qr{^HTTP/1\.1 503 }, 'a connection beyond max_connections gets 503');
like($raw, qr/^Retry-After: \d+\r$/m, 'with Retry-After');
like($raw, qr/^Connection: close\r$/mi, 'and the connection is closed');
ok($s->wait_log(qr/max_connections is 4/), 'and it is logged');
close $_ for @idle;
ok(wait_for(sub { $s->get('/a.txt')->{status} == 200 }), 'served again once connections close');
$s->stop;

# max_connections at exactly its value: with 3 connections held idle at
# max_connections = 4, a 4th is served, and kept open; a 5th gets 503. One
# event thread accepts them, so they are counted in the order they connect.
$s = PlxdTest->start(files => { 'a.txt' => "a\n" },
    server => { max_connections => 4, threads => 1, header_timeout => '60s',
        connection_timeout => '60s' });
@idle = map { $s->connect } 1 .. 3;
my $fourth = $s->connect;
$fourth->syswrite("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
my @got = read_responses($fourth, 1);
is($got[0]{status}, 200, 'the 4th connection at max_connections = 4 is served (3 held idle)');
$raw = framed($s->raw("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"));
like($raw, qr{^HTTP/1\.1 503 }, 'a 5th, with the 4 still open, gets 503');
close $_ for @idle, $fourth;
$s->stop;

# Closed half-sent requests at max_connections: clients that sent part of a
# request line, or of a head, then closed, must not hold their slots. A new
# client is served well before the deadlines (60 s here) would end them.
$s = PlxdTest->start(files => { 'a.txt' => "a\n" },
    server => { max_connections => 4, header_timeout => '60s', connection_timeout => '60s' });
for my $round (1 .. 5) {
    my @half = map { $s->connect } 1 .. 4;
    $half[$_]->syswrite($_ % 2 ? "GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Half: y" : 'GET /a.t')
        for 0 .. 3;
    close $_ for @half;
    my $t0 = time;
    ok(wait_for(sub { $s->get('/a.txt')->{status} == 200 }, 20),
        sprintf('round %d: 4 half-sent requests closed at max_connections = 4: a new client is '
            . 'served (%.1f s)', $round, time - $t0));
}
$s->stop;

# per_ip_connections gives every count back: after a refusal, once all are
# closed, two new connections from the same address are both served; at
# per_ip_connections = 1, a connection that closed lets the next one in,
# at once, on two event threads (a connection over the limit is held a
# moment, PER_IP_GRACE_MS, for its event thread to see the close).
$s = PlxdTest->start(files => { 'a.txt' => "a\n" },
    server => { per_ip_connections => 2, threads => 2, header_timeout => '60s', connection_timeout => '60s' });
{
    my @two = map { $s->connect } 1 .. 2;
    $_->syswrite("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n") for @two;
    read_responses($_, 1) for @two;
    my $refused = $s->connect;
    $refused->syswrite("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    is(framed(PlxdTest::read_until_closed($refused, 30)), '', 'per_ip_connections = 2: a third is refused');
    close $_ for @two, $refused;
    # Both new connections are open before either asks: each holds a count.
    my $both = sub {
        my @pair = map { $s->connect } 1 .. 2;
        $_->syswrite("GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") for @pair;
        my @answers = map { PlxdTest::read_until_closed($_, 10) } @pair;
        close $_ for @pair;
        return 2 == grep { /^HTTP\/1\.1 200 / } @answers;
    };
    # At once, each time: a close another event thread has not seen yet
    # must not refuse the next connection.
    my $served = grep { $both->() } 1 .. 10;
    is($served, 10, '... then all closed: two new connections from the same address are both served, 10 times in a row');
}
$s->stop;
$s = PlxdTest->start(files => { 'a.txt' => "a\n" },
    server => { per_ip_connections => 1, threads => 2, header_timeout => '60s', connection_timeout => '60s' });
{
    my $first = $s->connect;
    $first->syswrite("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    my @answer = read_responses($first, 1);
    is($answer[0]{status}, 200, 'per_ip_connections = 1: a connection is served');
    close $first;
    my $again = sub {
        my $next = $s->connect;
        $next->syswrite("GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        return PlxdTest::read_until_closed($next, 10) =~ m{^HTTP/1\.1 200 };
    };
    my $served = grep { $again->() } 1 .. 30;
    is($served, 30, '... closed, the next connection from that address gets 200, 30 times in a row');
}
$s->stop;

# per_ip_connections, with a trusted proxy exempt
$s = PlxdTest->start(files => { 'a.txt' => "a\n" },
    server => { per_ip_connections => 2, trusted_proxies => '127.0.0.2', header_timeout => '60s',
        connection_timeout => '60s' });
my @mine = map { $s->connect } 1 .. 2;
$mine[0]->syswrite("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
my @r = read_responses($mine[0], 1);
is($r[0]{status}, 200, 'connections within the per-IP limit are served');
# Read until plxd closes it (an answer would come first, however late).
my $third = $s->connect;
$third->syswrite("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
is(framed(PlxdTest::read_until_closed($third, 30)), '', 'a third connection from the same address is closed unanswered');
ok($s->wait_log(qr/refused a connection from 127\.0\.0\.1: 2 open/), 'and it is logged');
my @proxy = map { $s->connect(local => '127.0.0.2') } 1 .. 3;
$proxy[2]->syswrite("GET /a.txt HTTP/1.0\r\n\r\n");
like(framed(PlxdTest::read_until_closed($proxy[2], 30)), qr{^HTTP/1\.1 200 }, 'a trusted proxy is not limited');
close $_ for @mine, @proxy, $third;
$s->stop;

# trusted_proxies is one parsed list, the limiter's as much as the CGI
# environment's: a CIDR range exempts every address in it, and an address
# written another way ("0:0:0:0:0:0:0:1" for ::1) is the same address.
$s = PlxdTest->start(files => { 'a.txt' => "a\n" },
    server => { per_ip_connections => 1, trusted_proxies => '127.0.0.2/31', header_timeout => '60s',
        connection_timeout => '60s' });
@proxy = map { $s->connect(local => '127.0.0.3') } 1 .. 2;
$proxy[1]->syswrite("GET /a.txt HTTP/1.0\r\n\r\n");
like(framed(PlxdTest::read_until_closed($proxy[1], 30)), qr{^HTTP/1\.1 200 },
    'an address inside a trusted CIDR range is not limited');
@mine = map { $s->connect } 1 .. 2;
$mine[1]->syswrite("GET /a.txt HTTP/1.0\r\n\r\n");
is(framed(PlxdTest::read_until_closed($mine[1], 30)), '', 'one outside it is (127.0.0.1 is not in 127.0.0.2/31)');
close $_ for @mine, @proxy;
$s->stop;

SKIP: {
    my $probe = IO::Socket::IP->new(LocalHost => '::1', LocalPort => 0, Listen => 1);
    skip 'this machine has no IPv6 loopback (::1): the [::1]:0 per_ip_connections check is skipped', 3
        unless $probe;
    close $probe;
    $s = PlxdTest->start(files => { 'a.txt' => "a\n" }, listen => '[::1]:0',
        server => { per_ip_connections => 1, trusted_proxies => '0:0:0:0:0:0:0:1',
            header_timeout => '60s', connection_timeout => '60s' });
    my $first = $s->connect;
    $first->syswrite("GET /a.txt HTTP/1.1\r\n");    # started, holds its connection open
    my $second = $s->connect;
    $second->syswrite("GET /a.txt HTTP/1.0\r\n\r\n");
    like(framed(PlxdTest::read_until_closed($second, 30)), qr{^HTTP/1\.1 200 },
        'trusted_proxies = 0:0:0:0:0:0:0:1: a second connection from ::1 is served');
    unlike($s->error_log, qr/refused a connection from ::1/, '... and none was refused');
    close $_ for $first, $second;
    $s->stop;
}

# Idle timeout, header deadline, header size. Without the deadline under
# test, these connections would stay open for good (a trickle is never
# idle): the lower bounds say a deadline was kept, the upper bound of 20 s
# only that the connection was cut at all, whatever the load.
$s = PlxdTest->start(files => { 'a.txt' => "a\n" },
    server => { connection_timeout => '1s', header_timeout => '1500ms', max_header_size => '4K' });
my $took = closed_within($s->connect, 30);
ok(defined $took && $took > 0.5 && $took < 20, 'an idle connection is closed after connection_timeout ('
    . ($took // 'never') . ' s)');

# A slow reader of a large file is not idle: connection_timeout (1 s here)
# must not cut it while it reads, although the kernel's send buffer, once
# full, lets plxd write again only after much of it drained, which takes
# this reader longer than a second. One that stops reading is cut.
{
    my $size = 6_000_000;
    my $t = PlxdTest->start(files => { 'big.bin' => 'x' x $size },
        server => { connection_timeout => '1s' });
    my $ask = sub {
        # A small receive buffer, set before connecting so that the
        # window is small from the start.
        socket(my $sock, Socket::AF_INET(), Socket::SOCK_STREAM(), 0) or die "socket: $!";
        setsockopt($sock, Socket::SOL_SOCKET(), Socket::SO_RCVBUF(), 16384) or die "setsockopt: $!";
        connect($sock, Socket::pack_sockaddr_in($t->port, Socket::inet_aton('127.0.0.1')))
            or die "connect: $!";
        syswrite($sock, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n");
        return $sock;
    };
    my $sock = $ask->();
    my ($got, $t0) = (0, time);
    while (time - $t0 < 120) {    # 8 KiB every 10 ms at most: 800 KB/s
        my $n = sysread($sock, my $buf, 8192);
        last if !$n;
        $got += $n;
        Time::HiRes::sleep(0.01);
    }
    my $took = time - $t0;
    ok($got > $size && $took > 1.5,
        sprintf('a slow reader of %d bytes reads them all over %.1f s, past connection_timeout', $size, $took))
        or diag("read $got bytes");
    my $stalled = $ask->();    # reads nothing
    $t0 = time;
    ok(wait_for(sub { (() = $t->access_log =~ m{"GET /big\.bin }g) == 2 }, 20),
        sprintf('one that stops reading is cut (%.1f s)', time - $t0));
    close $stalled;
    $t->stop;
}

my $slow = $s->connect;
$slow->syswrite("GET /a.txt HTTP/1.1\r\nHost: x\r\n");
$took = closed_within($slow, 30, 'X');
ok(defined $took && $took > 1 && $took < 20, 'a client trickling its headers is cut at header_timeout ('
    . ($took // 'never') . ' s), although it never idles');
ok($s->wait_log(qr/no complete request headers within header_timeout/), 'and it is logged');

$raw = framed($s->raw("GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Big: " . ('b' x 6000) . "\r\n\r\n"));
like($raw, qr{^HTTP/1\.1 431 }, 'headers over max_header_size get 431');
$raw = framed($s->raw("GET /" . ('u' x 6000) . " HTTP/1.1\r\nHost: x\r\n\r\n"));
like($raw, qr{^HTTP/1\.1 414 }, 'a request line over max_header_size gets 414');
is($s->get('/a.txt')->{status}, 200, 'still serving');
$s->stop;

# max_header_size is plxd's limit, not libmicrohttpd's memory, which keeps
# the cookies a second time, and an entry for each field, beside the head.
# At the default 8K and at 32K: a head of exactly the limit, all cookie or
# all query string, is served, one byte more gets 431; at 32K many small
# cookies and one big cookie are served far below the limit,
# max_header_fields being 800 there by default. A script sees the Cookie
# header whole. (header_fields.t tests max_header_fields.)
for my $limit (8192, 32768) {
    my %server = $limit == 8192 ? () : (server => { max_header_size => '32K' });
    my $at = $limit == 8192 ? 'the default 8K' : '32K';
    $s = PlxdTest->start(
        files => { 'a.txt' => "a\n",
            'c.pl' => 'print "Content-Type: text/plain\n\n", length($ENV{HTTP_COOKIE} // ""), "\n";' },
        handlers => { '.pl' => 'cgi' }, %server);
    my $head = sub {
        my ($path, $cookie) = @_;
        return "GET $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\nCookie: $cookie\r\n\r\n";
    };
    for my $path ('/a.txt', '/c.pl') {
        my @r;
        if ($limit == 32768) {
            my $small = join '; ', map { sprintf 'c%03d=v', $_ } 1 .. 400;    # 400 cookies, 4.8 KB
            @r = responses(framed($s->raw($head->($path, $small))));
            is($r[0]{status}, 200, "$path: 400 small cookies (4.8 KB) are served at max_header_size = 32K");
            @r = responses(framed($s->raw($head->($path, 'big=' . ('b' x 20_000)))));
            is($r[0]{status}, 200, "$path: one 20 KB cookie is served");
        }
        my $fill = $limit - length $head->($path, 'big=');
        @r = responses(framed($s->raw($head->($path, 'big=' . ('b' x $fill)))));
        is($r[0]{status}, 200, "$path: at $at, a head of exactly $limit bytes, most of it a cookie, is served");
        is($r[0]{body}, (4 + $fill) . "\n", '... the script sees the whole cookie') if $path eq '/c.pl';
        # 196 cookies and one that brings the head to the limit: with Host,
        # Connection and Cookie, 200 entries, max_header_fields' default.
        my $many = join('; ', map { "m$_=v" } 1 .. 196) . '; big=';
        my $rest = $limit - length $head->($path, $many);
        @r = responses(framed($s->raw($head->($path, $many . ('b' x $rest)))));
        is($r[0]{status}, 200, "$path: at $at, a head of exactly $limit bytes, with 197 cookies, is served");
        @r = responses(framed($s->raw($head->($path, 'big=' . ('b' x ($fill + 1))))));
        is($r[0]{status}, 431, "$path: one byte more gets 431");
        is($r[0]{headers}{connection}, 'close', '... and the connection is closed');
    }
    ok($s->wait_log(qr/a request head of ${\($limit + 1)} bytes, over max_header_size \($limit bytes\)/),
        'and it is logged');
    if ($limit == 32768) {
        # More entries than libmicrohttpd's memory holds (3000 tiny
        # cookies, 26 KB): once its own 431 with its head sent twice, now
        # plxd's, before libmicrohttpd parses them.
        my $tiny = join '; ', map { "c$_=v" } 1 .. 3000;
        my $raw = framed($s->raw($head->('/a.txt', $tiny)));
        is(join(' ', map { $_->{status} } responses($raw)), '431', "3000 tiny cookies: one 431, and nothing more");
    }
    my $query = sub { "GET /a.txt?$_[0] HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" };
    my $fill = $limit - length $query->('');
    my @r = responses(framed($s->raw($query->('q' x $fill))));
    is($r[0]{status}, 200, "at $at, a head of exactly $limit bytes, most of it the query string, is served");
    @r = responses(framed($s->raw($query->('q' x ($fill + 1)))));
    is($r[0]{status}, 431, '... one byte more gets 431');
    @r = responses(framed($s->raw($query->('q' x $limit))));
    is($r[0]{status}, 414, "a request line of more than $limit bytes gets 414");
    is($s->get('/a.txt')->{status}, 200, 'still serving');
    $s->stop;
}

# Body deadline: body_timeout, extended by a second per body_min_rate bytes.
# Trickled to a handler that spools the body (echo) and to a CGI script that
# reads it as it comes: both cut, the script's process ended, and an upload
# that keeps up with body_min_rate is never cut, however long it takes.
$s = PlxdTest->start(
    files    => { 'a.txt' => "a\n", 'x.echo' => '', 'up.pl' => 'print "Content-Type: text/plain\n\n", length(join "", <STDIN>), "\n";' },
    handlers => { '.echo' => 'echo', '.pl' => 'cgi' },
    server   => { connection_timeout => '10s', body_timeout => '1500ms', body_min_rate => '100' });
for my $path ('/x.echo', '/up.pl') {
    my $trickler = $s->connect;
    $trickler->syswrite("POST $path HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n");
    $took = closed_within($trickler, 30, 'b');
    ok(defined $took && $took > 1 && $took < 20, "a client trickling its body to $path is cut at "
        . 'body_timeout (' . ($took // 'never') . ' s), although it never idles');
}
ok($s->wait_log(qr/request body came slower than body_timeout and body_min_rate allow/),
    'and it is logged');
my $script = $s->root . '/up.pl';
ok(wait_for(sub { !grep { index(PlxdTest::read_file($_), $script) >= 0 } glob '/proc/[0-9]*/cmdline' }),
    'the CGI script reading the trickle is ended');
{
    my $steady = $s->connect;
    $steady->syswrite("POST /x.echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1200\r\nConnection: close\r\n\r\n");
    # 100 bytes every 0.2 s, for 2.4 s, past body_timeout: each piece buys
    # a second, so the pace may slow fivefold on a loaded machine and still
    # keep up with body_min_rate.
    for (1 .. 12) {
        select(undef, undef, undef, 0.2);
        $steady->syswrite('s' x 100);
    }
    my $reply = framed(PlxdTest::read_until_closed($steady, 30));
    like($reply, qr{^HTTP/1\.1 200 .*body_length 1200\n}s, 'a body that keeps up with body_min_rate is read whole');
}
is($s->get('/a.txt')->{status}, 200, 'still serving');
done_testing;
