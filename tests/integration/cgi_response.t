# CGI: what a script prints becomes the response: Status, Location (local
# redirects served by plxd inside the document root, absolute ones 302),
# headers passed on, bad header blocks 500 with a log line naming the
# script, Content-Length kept or the connection closed, nph- scripts,
# stderr to the error log only.
use strict;
use warnings;
use Test::More;
use IO::Select;
use Time::HiRes qw(time);
use PlxdTest qw(read_file source_dir wait_for);
use PlxdRaw qw(responses);

my $fixture = read_file(source_dir() . '/tests/integration/cgi_fixture.pl');
# "Promptly" below means within 10 s: far from the script timeout (60 s)
# and connection_timeout (60 s here), one of which a hang or a connection
# left open would last.
my $s = PlxdTest->start(
    files => { 'f.pl' => $fixture, 'nph-f.pl' => $fixture, 'hello.html' => "hello\n",
        'sub/page.txt' => "page\n",
        'loop.pl' => qq{print "Location: /loop.pl\\n\\n";\n} },
    handlers => { '.pl' => 'cgi' },
    server => { connection_timeout => '60s' },
    sections => { cgi => { timeout => '60s' } },
);

sub qe { my $t = shift; $t =~ s/([^A-Za-z0-9_.\/-])/sprintf '%%%02X', ord $1/ge; $t }

my $res = $s->get('/f.pl?status=404&text=gone');
is($res->{status}, 404, 'Status: 404');
is($res->{content}, 'gone', '... with the script\'s body');
$res = $s->get('/f.pl?status=' . qe('299 Custom') . '&text=x');
is($res->{status}, 299, 'any status 200..599');

$res = $s->get('/f.pl?header=' . qe('X-One: 1') . '&header=' . qe('Set-Cookie: a=1')
    . '&header=' . qe('Set-Cookie: b=2') . '&header=' . qe('Cache-Control: no-store'));
is($res->{headers}{'x-one'}, '1', 'other headers are passed on');
is_deeply($res->{headers}{'set-cookie'}, ['a=1', 'b=2'], 'repeated headers too');
is($res->{headers}{'cache-control'}, 'no-store', 'Cache-Control');

$res = $s->get('/f.pl?header=' . qe('Date: Tue, 01 Jan 2030 00:00:00 GMT') . '&header='
    . qe('Server: evil'));
is($res->{headers}{date}, 'Tue, 01 Jan 2030 00:00:00 GMT', 'a script\'s Date replaces libmicrohttpd\'s');
is($res->{headers}{server}, 'plxd/0.1.0', 'the Server header stays plxd\'s, once');

# Redirects.
$res = $s->get('/f.pl?location=' . qe('http://example.com/x') . '&ctype=');
is($res->{status}, 302, 'an absolute Location is a 302');
is($res->{headers}{location}, 'http://example.com/x', '... passed on');
$res = $s->get('/f.pl?status=301&location=' . qe('/moved') . '&text=moved');
is($res->{status}, 301, 'Location with a Status keeps the status');
is($res->{headers}{location}, '/moved', '... and the Location');

$res = $s->get('/f.pl?location=' . qe('/hello.html') . '&ctype=');
is($res->{status}, 200, 'a local Location without a body is served by plxd');
is($res->{content}, "hello\n", '... the target\'s content');
ok(!$res->{headers}{location}, '... no Location reaches the client');

$res = $s->get('/f.pl?location=' . qe('/f.pl?env=REQUEST_METHOD&env=QUERY_STRING') . '&ctype=');
is($res->{content}, "REQUEST_METHOD=GET\nQUERY_STRING=env=REQUEST_METHOD&env=QUERY_STRING\n",
    'a local redirect to a script runs it with the new query');

$res = $s->request('POST', '/f.pl?location=' . qe('/f.pl?env=REQUEST_METHOD&env=CONTENT_LENGTH')
    . '&ctype=&read=3', content => 'abc');
is($res->{content}, "REQUEST_METHOD=GET\nCONTENT_LENGTH=(unset)\n", 'the redirected request is a GET without a body');

$res = $s->get('/loop.pl');
is($res->{status}, 500, 'a redirect loop ends in 500');
like($s->error_log, qr/more than 10 local redirects/, '... logged');

$res = $s->get('/f.pl?location=' . qe('/../../../etc/passwd') . '&ctype=');
isnt($res->{status}, 200, 'a local redirect cannot leave the document root');
unlike($res->{content}, qr/root:/, '... nothing of /etc/passwd');
symlink '/etc/passwd', $s->root . '/out';
$res = $s->get('/f.pl?location=' . qe('/out') . '&ctype=');
is($res->{status}, 403, '... not through a symbolic link either');

$res = $s->get('/f.pl?location=' . qe('/hello.html') . '&ctype=text/plain&text=see');
is($res->{status}, 302, 'a local Location with a body goes to the client as 302');
is($res->{content}, 'see', '... with the body');

# Bad header blocks: 500 (the script failed), never a hang, and the log names the script.
my @bad = (
    ['no headers at all', 'raw=' . qe("Hello world\n"), qr/malformed header line/],
    ['a bad Status', 'raw=' . qe("Status: abc\n\n"), qr/bad Status/],
    ['CR in a header', 'raw=' . qe("Content-Type: text/plain\rX: y\n\n"), qr/CR inside/],
    ['NUL in a header', 'raw=' . qe("Content-Type: text/pl\0ain\n\n"), qr/NUL inside/],
    ['Transfer-Encoding', 'raw=' . qe("Content-Type: text/plain\nTransfer-Encoding: chunked\n\n"),
        qr/Transfer-Encoding/],
    ['empty output', 'noheaders=1', qr/no output/],
    ['output ends inside the headers', 'raw=' . qe("Content-Type: text/plain\n"),
        qr/output ended inside the header block/],
    ['killed before its headers', 'kill=KILL', qr/killed by signal 9/],
    ['exit 3 before its headers', 'exit=3', qr/exited with status 3/],
);
for my $b (@bad) {
    my ($name, $query, $log) = @$b;
    my $t0 = time;
    $res = $s->get("/f.pl?$query");
    is($res->{status}, 500, "$name: 500");
    ok(time - $t0 < 10, "$name: promptly");
    ok($s->wait_log(qr/\Q${\ $s->root}\E\/f\.pl: answered 500: .*$log/), "$name: logged with the script's path");
}

# Content-Length.
$res = $s->get('/f.pl?length=5&text=hello');
is($res->{headers}{'content-length'}, 5, 'a script\'s Content-Length is the response\'s');
ok(!$res->{headers}{'transfer-encoding'}, '... no chunking then');
is($res->{content}, 'hello', '... body');

my $sock_req = "GET /f.pl?length=10&text=abc HTTP/1.1\r\nHost: x\r\n\r\n";
my $t0 = time;
my $raw = $s->raw($sock_req, 90);
like($raw, qr/Content-Length: 10\r\n.*\r\n\r\nabc$|Content-Length: 10\r\n\r\nabc$/s, 'shorter output: what there was');
my @short = responses($raw, partial => 1);
ok(@short == 1 && !$short[0]{complete} && $short[0]{body} eq 'abc', '... one response, cut short');
ok(time - $t0 < 10, '... and the connection closed');
ok($s->wait_log(qr/f\.pl: output ended after 3 of the 10 bytes/), '... logged');

$t0 = time;
$raw = $s->raw("GET /f.pl?length=3&text=abcdef HTTP/1.1\r\nHost: x\r\n\r\n", 90);
like($raw, qr/\r\n\r\nabc$/, 'longer output: the announced bytes only');
my @long = responses($raw);
ok(@long == 1 && $long[0]{body} eq 'abc', '... one response, framed exactly, nothing after it');
ok(time - $t0 < 10, '... and the connection closed');
ok($s->wait_log(qr/f\.pl: printed more than the 3 bytes/), '... logged');

# Without a Content-Length: a script still printing when its response
# starts streams chunked; one that had ended gets the length of what it
# printed (as a .plx does), which keeps an HTTP/1.0 client's connection.
$raw = $s->raw("GET /f.pl?stream=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
like($raw, qr/Transfer-Encoding: chunked\r\n(?:.*\r\n)?\r\n7\r\nline 1\n\r\n7\r\nline 2\n\r\n0\r\n\r\n$/s,
    'no Content-Length, still printing: chunked');
my @chunked = responses($raw);
ok(@chunked == 1 && $chunked[0]{body} eq "line 1\nline 2\n", '... one response, framed exactly');
{
    # Ordered by what is observed: the script has printed and exited
    # before the end of the request body (which it does not read) lets
    # its response start.
    my $pidfile = $s->dir . '/whole.pid';
    my $sock = $s->connect;
    $sock->syswrite("POST /f.pl?pidfile=$pidfile&text=whole HTTP/1.1\r\nHost: x\r\n"
        . "Connection: close\r\nContent-Length: 4\r\n\r\n");
    my $read_pid = sub { open my $fh, '<', $pidfile or return; local $/; my $p = <$fh> // '';
        return $p =~ /^(\d+)\n$/ ? $1 : undef };
    ok(wait_for(sub { $read_pid->() }), 'the script started');
    my $pid = $read_pid->();
    # Ended: gone, or a zombie plxd has not reaped yet.
    my $ended = sub {
        open my $fh, '<', "/proc/$pid/stat" or return 1;
        return (<$fh> // '') =~ /^\d+ \(.*\) Z /;
    };
    ok(wait_for($ended), '... and ended');
    $sock->syswrite('body');
    my $got = '';
    my $sel = IO::Select->new($sock);
    while ($sel->can_read(30)) { last unless sysread($sock, my $buf, 65536); $got .= $buf }
    like($got, qr/Content-Length: 5\r\n(?:.*\r\n)?\r\nwhole$/s,
        'no Content-Length, ended before its response: the length of what it printed');
    my @whole = responses($got);
    ok(@whole == 1 && $whole[0]{body} eq 'whole', '... one response, framed exactly');
}
$raw = $s->raw("GET /f.pl?text=old HTTP/1.0\r\n\r\n");
like($raw, qr/^HTTP\/1\.[01] 200.*\r\n\r\nold$/s, 'HTTP/1.0: the body ends with the connection');
my @old = responses($raw);
ok(@old == 1 && $old[0]{body} eq 'old', '... one response, framed exactly');

# nph- scripts.
$res = $s->get('/nph-f.pl?raw=' . qe("HTTP/1.1 203 Whatever\r\nContent-Type: text/plain\r\nX-Nph: yes\r\n\r\nnph body"));
is($res->{status}, 203, 'nph: the script\'s status');
is($res->{headers}{'x-nph'}, 'yes', 'nph: its headers');
is($res->{content}, 'nph body', 'nph: its body');

# No body sent (HEAD, 204, 304): the script's unread output is closed, it
# ends by itself, quietly. (Its output left open, the 10 MB script would
# block until the 60 s timeout ended it.)
my $log_before = length $s->error_log;
for my $case (['HEAD', '/f.pl?size=10000000', 200], ['GET', '/f.pl?status=204', 204],
        ['GET', '/f.pl?status=304&text=unsent', 304]) {
    my ($method, $path, $status) = @$case;
    my $t0 = time;
    $res = $s->request($method, $path);
    is($res->{status}, $status, "$method $path: $status");
    is($res->{content} // '', '', '... no body');
    ok(time - $t0 < 10, '... promptly');
}
$res = $s->get('/f.pl?text=after');
is($res->{content}, 'after', 'the connection after them is fine');
unlike(substr($s->error_log, $log_before), qr/killed by signal|still running/, '... and nothing was killed');

# stderr goes to the log, never into the response; exit codes are logged.
$res = $s->get('/f.pl?stderr=' . qe('a warning line') . '&text=ok&exit=3');
is($res->{content}, 'ok', 'stderr stays out of the response');
ok($s->wait_log(qr/\Q${\ $s->root}\E\/f\.pl: a warning line/), 'stderr lines are logged with the script path');
ok($s->wait_log(qr/f\.pl: exited with status 3/), 'a non-zero exit is logged');

$res = $s->get('/f.pl?stderr=' . qe("evil\r[error] forged") . '&text=ok');
ok($s->wait_log(qr/f\.pl: evil\?\[error\] forged/), 'control characters in stderr are neutralised');

done_testing;
