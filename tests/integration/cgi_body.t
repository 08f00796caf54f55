# CGI: request bodies reach the script's stdin byte-exact (streamed while
# they arrive, or spooled first when chunked so CONTENT_LENGTH is known); a
# script that prints before it reads cannot deadlock; one that never reads
# is fine; one killed mid-output while its body still arrives is sent cut
# short, never whole; bodies over max_body are refused before any script runs.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time);
use PlxdTest qw(read_file source_dir wait_for);
use PlxdRaw qw(responses);

my $fixture = read_file(source_dir() . '/tests/integration/cgi_fixture.pl');
my $s = PlxdTest->start(
    files => { 'f.pl' => $fixture },
    handlers => { '.pl' => 'cgi' },
    server => { max_body => '16M' },
);

srand(42);
my $ten = join '', map { pack 'N', int rand 2**32 } 1 .. (10 * 1024 * 1024 / 4);
my $res = $s->request('POST', '/f.pl?echo=1', content => $ten,
    headers => { 'content-type' => 'application/octet-stream' });
is($res->{status}, 200, '10 MB upload echoed: 200');
ok($res->{content} eq $ten, '10 MB upload: byte-exact') or diag(length $res->{content});

# A script that prints 1 MB before reading anything: plxd must drain its
# stdout while it feeds stdin, or both wait for each other forever. A
# deadlock could only end at a timeout (the client's 30 s without a byte,
# the script's 60 s), which cuts the response: its whole output is the
# proof, however long a loaded machine takes to move 11 MB.
$res = $s->request('POST', '/f.pl?size=1048576&stdin_len=1', content => $ten);
is($res->{status}, 200, 'prints 1 MB before reading a 10 MB body: no deadlock');
is(length $res->{content}, 1048576 + length("stdin_len=10485760\n"), '... all its output');
like($res->{content}, qr/stdin_len=10485760\n$/, '... and it read the whole body');

$res = $s->request('POST', '/f.pl?text=ignored', content => $ten);
is($res->{status}, 200, 'a script that never reads its body');
is($res->{content}, 'ignored', '... answers normally');

$res = $s->request('POST', '/f.pl?read=10&text=partial', content => $ten);
is($res->{content}, 'partial', 'a script that reads part of its body');

# Chunked: spooled, then the script runs with CONTENT_LENGTH.
my $chunked = "POST /f.pl?env=CONTENT_LENGTH&stdin_len=1 HTTP/1.1\r\nHost: x\r\n"
    . "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    . "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
my $raw = $s->raw($chunked);
like($raw, qr/\r\n\r\n(?:[0-9a-fA-F]+\r\n)?CONTENT_LENGTH=11\n/, 'chunked body: CONTENT_LENGTH is known');
like($raw, qr/stdin_len=11\n/, 'chunked body: all of it on stdin');
is(scalar(my @r = responses($raw)), 1, 'chunked body: one response, framed exactly');

my $big_chunked = "POST /f.pl?echo=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
    . "Connection: close\r\n\r\n";
my $body = '';
for my $i (0 .. 99) {
    my $piece = substr($ten, $i * 30000, 30000);
    $big_chunked .= sprintf("%x\r\n%s\r\n", length $piece, $piece);
    $body .= $piece;
}
$big_chunked .= "0\r\n\r\n";
$raw = $s->raw($big_chunked, 60);
my @big = responses($raw);
is(scalar @big, 1, '3 MB chunked upload: one response, framed exactly');
ok(@big && $big[0]{body} eq $body, '3 MB chunked upload (past the in-memory spool): byte-exact');

# A script killed after printing part of its output, while its request
# body still arrives: what it printed is held until the body is in, and by
# then its end is known. It goes out cut short (no terminating chunk, the
# connection closed), never as a complete response, and the log says so.
# Ordered by what can be seen: the script's pid file, then its process
# dead (a zombie, which plxd reaps once the request is over), and only then
# the rest of the body, so that the script's end is there to be seen before
# the response is made.
{
    local $SIG{PIPE} = 'IGNORE';
    my $pidfile = $s->dir . '/killed.pid';
    my $sock = $s->connect;
    $sock->syswrite("POST /f.pl?pidfile=$pidfile&text=partial&kill=KILL HTTP/1.1\r\nHost: x\r\n"
        . "Content-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\n" . ('a' x 500));
    my $pid;
    ok(wait_for(sub { ($pid) = read_file($pidfile) =~ /^(\d+)$/m; $pid }),
        'killed with half its body sent: the script started');
    ok($pid && wait_for(sub { PlxdTest::read_file("/proc/$pid/stat") =~ /^(?:\d+ \(.*\) Z |\z)/s }),
        '... and is dead before the rest is sent');
    $sock->syswrite('b' x 500);
    my $raw = PlxdTest::read_until_closed($sock, 30);
    my @r = responses($raw, partial => 1);
    is(scalar @r, 1, '... one response') or diag($raw);
    is($r[0] && $r[0]{status}, 200, '... 200, its headers');
    is($r[0] && $r[0]{body}, 'partial', '... with what it printed');
    ok(@r && !$r[0]{complete}, '... cut short: no terminating chunk, short of any Content-Length');
    unlike($raw, qr/\r\n0\r\n\r\n\z/, '... no final chunk on the wire');
    ok($s->wait_log(qr/f\.pl: killed by signal 9 \(SIGKILL\); response cut short/),
        '... "response cut short" logged');
}

# Too large: refused before the script runs, and the connection closes: at
# once (within 10 s), not at connection_timeout or body_timeout (60 s here),
# after which it would close anyway.
my $small = PlxdTest->start(
    files => { 'f.pl' => $fixture },
    handlers => { '.pl' => 'cgi' },
    server => { max_body => '1M', connection_timeout => '60s', body_timeout => '60s' },
);
my $marker = $small->dir . '/ran';
my $t0 = time;
$raw = $small->raw("POST /f.pl?pidfile=$marker HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n"
    . ('x' x 65536), 90);
like($raw, qr/^HTTP\/1\.1 413 /, 'over max_body: 413');
is(scalar(my @r413 = responses($raw)), 1, '... one response, framed exactly');
ok(time - $t0 < 10, '... and the connection closes');
ok(!-e $marker, '... the script never ran');

$raw = $small->raw("POST /f.pl?pidfile=$marker HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    . join('', map { sprintf("%x\r\n%s\r\n", 65536, 'y' x 65536) } 1 .. 20), 10);
like($raw, qr/^(?:HTTP\/1\.1 413 .*)?$/s, 'chunked over max_body: 413 or the connection closed');
ok(scalar(my @rc = responses($raw)) <= 1, '... framed exactly');
ok(!-e $marker, '... the script never ran');

done_testing;
