# .psgi applications at the edges an outside attack found: what an app
# prints to STDOUT itself, header values, the app's own framing headers,
# bodies past max_body, file names, one-line files, harakiri's log line,
# the status page beside an app at /, an encoded slash, psgix.logger. Run
# in both isolation modes (PLXD_TEST_ISOLATION, tests/CMakeLists.txt).
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for write_file read_file);
use PlxdRaw qw(responses request_bytes);
use PlxdServer;

my $thread = PlxdTest::thread_mode();

my %files = (
    # Prints to STDOUT as it loads, as it runs, between its writer's
    # writes, and from a cleanup handler.
    'print.psgi' => <<'EOF',
print "loading the app\n";
sub {
    my $env = shift;
    print "from the app, ";
    print STDOUT "by name\n";
    push @{ $env->{'psgix.cleanup.handlers'} }, sub { print "from the cleanup handler\n" };
    return [200, ['Content-Type' => 'text/plain'], ["body"]] unless $env->{QUERY_STRING} eq 'stream';
    return sub {
        my $w = $_[0]->([200, ['Content-Type' => 'text/plain']]);
        print "while streaming\n";
        $w->write("one ");
        printf "%s\n", "printf too";
        $w->write("two");
        $w->close;
    };
}
EOF
    'empty.psgi' => qq{sub { [200, ['X-Empty' => '', 'X-Undef' => undef, 'Content-Type' => 'text/plain'], ['x']] }\n},
    'te.psgi' => <<'EOF',
sub {
    my $env = shift;
    my $q = $env->{QUERY_STRING};
    # Framed in chunks by the app itself, as Mojolicious's write_chunk does.
    return [200, ['Content-Type' => 'text/plain', 'Transfer-Encoding' => 'Chunked'],
        ["3\r\nabc\r\n", "3\r\ndef\r\n0\r\n\r\n"]] if $q eq 'array';
    return [200, ['Transfer-Encoding' => 'identity'], ['abc', 'def']] if $q eq 'identity';
    return [200, ['Transfer-Encoding' => 'gzip'], ['x']] if $q eq 'gzip';
    return [200, ['Transfer-Encoding' => 'chunked', 'Content-Length' => 6],
        ["3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n"]] if $q eq 'length';
    return sub {
        my $w = $_[0]->([200, ['Transfer-Encoding' => 'chunked']]);
        $w->write("3\r\nabc\r\n");
        for (1 .. 1500) { last if -e "$env->{DOCUMENT_ROOT}/te.go"; select undef, undef, undef, 0.02 }
        $w->write("3\r\ndef\r\n");
        $w->write("0\r\n\r\n");
        $w->close;
    };
}
EOF
    'up.psgi' => qq{sub { my \$in = \$_[0]{'psgi.input'}; local \$/; my \$b = <\$in>; [200, ['Content-Type' => 'text/plain'], [length \$b]] }\n},
    'up.plx'  => qq{local \$/; my \$b = <STDIN>; print "Content-Type: text/plain\\n\\n", length \$b;\n},
    'end.psgi'   => qq{sub { [200, ['Content-Type' => 'text/plain'], ['one line']] }; __END__\n},
    'data.psgi'  => qq{sub { [200, ['Content-Type' => 'text/plain'], ['data']] } __DATA__ x\nthe data\n},
    'data.plx'   => qq{print "Content-Type: text/plain\\n\\n", scalar <DATA>; __DATA__ x\nthe data\n},
    'hk.psgi' => <<'EOF',
sub {
    my $env = shift;
    $env->{'psgix.harakiri.commit'} = 1 if $env->{QUERY_STRING} eq 'now';
    push @{ $env->{'psgix.cleanup.handlers'} }, sub { $_[0]{'psgix.harakiri.commit'} = 1 }
        if $env->{QUERY_STRING} eq 'late';
    [200, ['Content-Type' => 'text/plain'], ["pid=$$"]];
}
EOF
    'x.t.psgi'   => qq{sub { [200, ['Content-Type' => 'text/plain'], ['app x.t']] }\n},
    'y.pl.psgi'  => qq{sub { [200, ['Content-Type' => 'text/plain'], ['app y.pl']] }\n},
    'z.psgi.pl'  => qq{print "Content-Type: text/plain\\n\\ncgi z";\n},
    'logger.psgi' => <<'EOF',
sub {
    my $env = shift;
    my $log = $env->{'psgix.logger'};
    $log->({ level => 'warn', message => "a logged message\n" });
    $log->({ level => 'debug', message => 'another' });
    [200, ['Content-Type' => 'text/plain'], [ref $log]];
}
EOF
    'empty.plx'  => qq{print "Content-Type: text/plain\\r\\nX-Empty:\\r\\n\\r\\nx";\n},
);

my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.psgi' => 'perl', '.plx' => 'perl', '.pl' => 'cgi' },
    server   => { max_body => 1000 },
    sections => { perl => { workers => 1 } },
);
my $root = $s->root;
my $log = sub { my $re = shift; wait_for(sub { $s->error_log =~ $re }) };
my $get = sub { my ($r) = responses($s->raw("GET $_[0] HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")); $r };

# ---- STDOUT: the log, not the response ----
for my $q ('', 'stream') {
    my $r = $get->("/print.psgi?$q");
    is("$r->{status} $r->{body}", $q ? '200 one two' : '200 body',
        "an app that prints to STDOUT ($q): its response is whole and only its own");
    is($r->{headers}{'content-type'}, 'text/plain', '... its head too');
}
ok($log->(qr{\Q$root\E/print\.psgi: loading the app}), 'what the file prints as it loads goes to the log, naming the app');
ok($log->(qr{\Q$root\E/print\.psgi: from the app, by name}), 'print and print STDOUT in the app: the log');
ok($log->(qr{\Q$root\E/print\.psgi: while streaming}) && $log->(qr{print\.psgi: printf too}),
    '... and between a writer\'s writes');
ok($log->(qr{print\.psgi, after its request was answered: from the cleanup handler}),
    '... and from a cleanup handler');
is($s->get('/print.psgi')->{content}, 'body', 'the next request: the same');

# ---- an empty header value is sent, not dropped ----
for my $path ('/empty.psgi', '/empty.plx') {
    my $raw = $s->raw("GET $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    like($raw, qr/\r\nX-Empty: *\r\n/, "$path: a header with an empty value is sent");
    my ($r) = responses($raw);
    is($r->{headers}{'x-empty'}, '', '... empty once read');
    like($raw, qr/\r\nX-Undef: *\r\n/, '... and an undef one, as empty') if $path =~ /psgi/;
}
unlike($s->error_log, qr/X-Empty dropped/, '... nothing dropped');

# ---- the app's own Transfer-Encoding: its chunks unframed, plxd frames the body ----
for my $q (qw(array length identity)) {
    my $raw = $s->raw("GET /te.psgi?$q HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    my ($r) = responses($raw);
    is("$r->{status} $r->{body}", '200 abcdef', "Transfer-Encoding from the app ($q): the body, unframed and framed by plxd");
    is($r->{headers}{'content-length'}, 6, '... with its length, as it is whole');
    unlike($raw, qr/Transfer-Encoding/i, '... the app\'s header not sent');
}
{
    unlink "$root/te.go";
    my $c = $s->connect;
    # A route of its own, new: inline (PLXD_TEST_ISOLATION=inline), a
    # proven route's output would come whole at its end.
    $c->syswrite("GET /te.psgi/stream?stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    $c->blocking(0);
    my $got = '';
    my $more = sub { while (sysread($c, my $buf, 65536)) { $got .= $buf } };
    ok(wait_for(sub { $more->(); $got =~ /abc/ }),
        'a stream with the app\'s Transfer-Encoding: chunked: its first write arrives');
    write_file("$root/te.go", '');
    ok(wait_for(sub { $more->(); $got =~ /\r\n0\r\n\r\n\z/ }), '... its end');
    my ($r) = responses($got);
    is($r->{body}, 'abcdef', '... its chunks unframed, chunked again by plxd as they come');
    my @te = $got =~ /^(Transfer-Encoding:.*)\r$/mig;
    is_deeply(\@te, ['Transfer-Encoding: chunked'], '... one Transfer-Encoding header');
}
is($get->('/te.psgi?gzip')->{status}, 500, 'another Transfer-Encoding (gzip): 500');
ok($log->(qr{te\.psgi: the PSGI application died: header Transfer-Encoding 'gzip': plxd frames the body itself}),
    '... the log says why');

# ---- a chunked body past max_body: 413, as with a Content-Length ----
for my $path ('/up.psgi', '/up.plx') {
    my $chunked = sub {
        my ($len, $close) = @_;
        "POST $path HTTP/1.1\r\nHost: x\r\n" . ($close ? "Connection: close\r\n" : '')
            . "Transfer-Encoding: chunked\r\n\r\n"
            . sprintf("%x\r\n%s\r\n", 600, 'a' x 600) . sprintf("%x\r\n%s\r\n", $len - 600, 'b' x ($len - 600))
            . "0\r\n\r\n";
    };
    my ($r) = responses($s->raw($chunked->(1000, 'close')));
    is("$r->{status} $r->{body}", '200 1000', "$path: a chunked body of exactly max_body is served");
    ($r) = responses($s->raw($chunked->(1001)));
    is($r && $r->{status}, 413, "... one byte more: 413");
    like($r && $r->{body}, qr{<h1>413 Content Too Large</h1>}, '... plxd\'s page');
    is($r && $r->{headers}{connection}, 'close', '... and the connection closed');
    ($r) = responses($s->raw("POST $path HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n" . ('c' x 1001)));
    is($r && $r->{status}, 413, '... as with a Content-Length one past it');
}
ok($log->(qr{answered 413 and closed the connection: the body of POST /up\.psgi grew past max_body \(1000 bytes\)}),
    'logged');
like($s->access_log, qr{"POST /up\.plx HTTP/1\.1" 413 }, '... and in the access log');

# ---- a one-line file with __END__ or __DATA__ after its code ----
is($get->('/end.psgi')->{body}, 'one line', 'sub { ... }; __END__ on one line: the app loads');
is($get->('/data.psgi')->{body}, 'data', 'sub { ... } __DATA__ on one line: loads');
is($get->('/data.plx')->{body}, "the data\n", 'a .plx with __DATA__ after its code: DATA is the next line on');

# ---- psgix.harakiri.commit: a line in the error log, in both modes ----
{
    my $said = sub { my @l = read_file($s->dir . '/error.log') =~ /\[info\].*: its PSGI application asked for it \(psgix\.harakiri\.commit\)/g; scalar @l };
    is($get->('/hk.psgi?now')->{status}, 200, 'harakiri: the request answered');
    ok(wait_for(sub { $said->() == 1 }), '... and the retirement in the error log')
        or diag($s->error_log);
    is($get->('/hk.psgi?late')->{status}, 200, 'harakiri from a cleanup handler: answered');
    is($get->('/hk.psgi')->{status}, 200, '... the next request too');
    ok(wait_for(sub { $said->() == 2 }), '... and its retirement in the error log too')
        or diag($s->error_log);
}

# ---- names with more than one dot: routed by the last extension ----
is($get->('/x.t.psgi/p')->{body}, 'app x.t', 'x.t.psgi is an application');
is($get->('/y.pl.psgi')->{body}, 'app y.pl', 'y.pl.psgi too, .pl mapped to cgi');
is($get->('/z.psgi.pl')->{body}, 'cgi z', 'z.psgi.pl is a CGI script');

# ---- an encoded slash: 400 before any routing, as for every file ----
is($get->('/x.t.psgi/a%2Fb')->{status}, 400, 'an encoded slash in the path of an app: 400');
is($get->('/x.t.psgi/a?p=a%2Fb')->{body}, 'app x.t', '... in the query: the app\'s');

# ---- psgix.logger ----
is($get->('/logger.psgi')->{body}, 'CODE', 'psgix.logger is a code reference');
ok($log->(qr{\Q$root\E/logger\.psgi: warn: a logged message\n}) && $log->(qr{logger\.psgi: debug: another\n}),
    '... its messages go to the error log, naming the app, with their level');

# ---- plxd --app: the app at /, the status page still plxd's ----
{
    my $srv = PlxdServer->start(
        name    => 'plxd',
        cmd     => [PlxdTest::plxd_bin(), '--app', "$root/print.psgi", '--listen', '127.0.0.1:0'],
        stderr  => $s->dir . '/app-stderr.log',
        timeout => 30,
    );
    my $http = PlxdTest::http();
    my $page = $http->get($srv->url . 'plxd-status');
    is($page->{status}, 200, 'plxd --app: /plxd-status answers');
    like($page->{headers}{'content-type'}, qr{^text/html}, '... with the status page, not the app');
    like($http->get($srv->url . 'plxd-status?json')->{content}, qr/^\{/, '... its JSON too');
    is($http->get($srv->url . 'plxd-status/x')->{content}, 'body', '... a path under it is the app\'s');
    is($http->get($srv->url . 'x')->{content}, 'body', '... as every other path');
    $srv->stop;
}

done_testing;
