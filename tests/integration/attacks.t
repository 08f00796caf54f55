# Attacks over raw sockets: a script is never sent as source however its
# URL is spelled (with Range, POST, HEAD; through symbolic links), nothing
# outside the document root is ever served (traversal in every spelling,
# links to outside files and folders), oversized request lines and headers
# are refused, pipelined and HTTP/1.0 requests are answered correctly.
# The echo handler stands in for a script handler: its answer starts with
# its greeting, never with the file.
use strict;
use warnings;
use Test::More;
use PlxdTest;
use PlxdRaw qw(responses request_bytes);

my $source = "#!/usr/bin/perl\nprint 'SOURCE-OF-SCRIPT';\n";
my $s = PlxdTest->start(
    files => {
        'x.pl'           => $source,
        'UPPER.PL'       => $source,
        'hello.txt'      => "hello\n",
        'sub/file.txt'   => "in sub\n",
        'idx/keep'       => '',
    },
    handlers => { '.pl' => 'echo' },
    sections => { echo => { greeting => 'SCRIPT-RAN' } },
);
my $root = $s->root;
my $dir = $s->dir;
PlxdTest::write_file("$dir/outside/secret.txt", "TOP-SECRET\n");
symlink 'x.pl', "$root/link.txt" or die;              # harmless name, script inside
symlink '../x.pl', "$root/idx/index.html" or die;      # a folder index that is a script
symlink 'hello.txt', "$root/inside.txt" or die;
symlink '../outside/secret.txt', "$root/out.txt" or die;
symlink '../outside', "$root/outdir" or die;
symlink '/etc/passwd', "$root/abs" or die;
symlink 'loop2', "$root/loop1" or die;
symlink 'loop1', "$root/loop2" or die;
symlink 'nothing-there', "$root/dangling" or die;

# Sends bytes to plxd (server => another one) and parses what comes back.
sub exchange {
    my ($bytes, %o) = @_;
    my $server = delete $o{server} // $s;
    my $raw = $server->raw($bytes, 10);
    return ($raw, responses($raw, %o));
}

# ---- scripts are never source --------------------------------------------
# spelling => expected status (200 means the handler ran)
my @spellings = (
    [ '/x.pl'            => 200 ],
    [ '/x.pl.'           => 404 ],
    [ '/X.PL'            => 404 ],   # no such file (the root is case-sensitive)
    [ '/UPPER.PL'        => 200 ],   # routed without regard to case
    [ '/upper.pl'        => 404 ],
    [ '/x.pl%20'         => 404 ],
    [ '/x.pl/'           => 200 ],   # PATH_INFO "/"
    [ '/x.pl/extra'      => 200 ],
    [ '/x.pl::$DATA'     => 404 ],
    [ '/x.pl;.txt'       => 404 ],
    [ '//x.pl'           => 200 ],
    [ '/./x.pl'          => 200 ],
    [ '/y/../x.pl'       => 200 ],
    [ '/sub/../x.pl'     => 200 ],
    [ '/x%2epl'          => 200 ],
    [ '/%78.pl'          => 200 ],
    [ '/x.p%6C'          => 200 ],
    [ '/x.pl%00.txt'     => 400 ],
    [ '/x.pl%2f'         => 400 ],
    [ '/x.pl%2F.txt'     => 400 ],
    [ '/x.pl?.txt'       => 200 ],
    [ '/x.pl%3f.txt'     => 404 ],
    [ '/x.pl#.txt'       => 404 ],
    [ '/x.pl%23.txt'     => 404 ],
    [ '/x.pl\\'          => 404 ],
    [ "/x.pl\0.txt"      => 200 ],   # a raw NUL cuts the target at x.pl
    [ '/link.txt'        => 200 ],   # x.txt -> x.pl: routed by the real name
    [ '/link.txt/'       => 200 ],
    [ '/idx/'            => 200 ],   # index.html -> ../x.pl
    [ '/idx/index.html'  => 200 ],
    [ 'http://plxd.test/x.pl' => 200 ],
    [ 'http://plxd.test/./X.pl' => 404 ],
);
my @forms = (
    [ GET  => [] ],
    [ GET  => ['Range: bytes=0-10'] ],
    [ GET  => ['Range: bytes=-20'] ],
    [ GET  => ['Range: bytes=0-1,5-9'] ],
    [ POST => ['Content-Length: 5'], 'a=b&c' ],
    [ POST => ['Transfer-Encoding: chunked'], "5\r\na=b&c\r\n0\r\n\r\n" ],
    [ HEAD => [] ],
);
for my $sp (@spellings) {
    my ($target, $want) = @$sp;
    (my $shown = $target) =~ s/\0/\\0/g;
    for my $form (@forms) {
        my ($method, $headers, $body) = @$form;
        my $what = "$method $shown" . (@$headers ? " (@$headers)" : '');
        my ($raw, @r) = exchange(request_bytes($method, $target, 'Connection: close', @$headers)
            . ($body // ''), head => ($method eq 'HEAD' ? [0] : []));
        unlike($raw, qr/SOURCE-OF-SCRIPT/, "$what: never the source");
        is($r[0]{status}, $want, "$what: $want");
        like($r[0]{body}, qr/^SCRIPT-RAN\n/, "$what: the handler answered")
            if $want == 200 && $method ne 'HEAD';
    }
}
like((exchange(request_bytes('POST', '/link.txt', 'Connection: close', 'Content-Length: 3') . 'abc'))[1]{body},
    qr/^body\nabc\z/m, 'a POST through a link reaches the handler with its body');
like((exchange(request_bytes('GET', '/link.txt', 'Connection: close')))[1]{body},
    qr/^route_name x\.pl$/m, 'the handler is told the name it was routed by, the target\'s');
like((exchange(request_bytes('GET', '/x.pl', 'Connection: close')))[1]{body},
    qr/^route_name x\.pl$/m, 'without a link, the file\'s own name');

# ---- script handlers through links; names that are only an extension -----
# A link with a harmless name runs the script it leads to, in both script
# handlers: the handler picks how to run it by the name it was routed by.
# A file named only like a mapped extension (".pl") has no extension to
# route by, yet is a script's name: refused (404), whatever [static] deny
# says (empty here), never sent.
my $run = "#!/usr/bin/perl\nprint qq{Content-Type: text/plain\\n\\nRAN\\n};\n";
my $scripts = PlxdTest->start(
    files    => { 'x.pl' => $run, 'x.plx' => $run, 'run.cgi' => $run, '.pl' => $run,
                  '.PLX' => $run, '.cgi' => $run, 'sub/.pl' => $run },
    handlers => { '.pl' => 'cgi', '.plx' => 'perl', '.cgi' => 'cgi' },
    sections => { perl => { workers => 1 }, static => { deny => '' } },
);
chmod 0755, $scripts->root . '/run.cgi' or die;
for my $link ([ 'pl.txt', 'x.pl' ], [ 'plx.txt', 'x.plx' ], [ 'cgi.txt', 'run.cgi' ],
        [ 'dot.txt', '.pl' ]) {
    symlink $link->[1], $scripts->root . "/$link->[0]" or die;
}
for my $c ([ '/pl.txt', 'x.txt -> x.pl (cgi, through perl)' ],
        [ '/plx.txt', 'x.txt -> x.plx (persistent perl)' ],
        [ '/cgi.txt', 'x.txt -> run.cgi (executed itself)' ]) {
    my ($target, $what) = @$c;
    for my $method (qw(GET POST)) {
        my (undef, @r) = exchange(request_bytes($method, $target, 'Connection: close',
            $method eq 'POST' ? ('Content-Length: 2') : ()) . ($method eq 'POST' ? 'hi' : ''),
            server => $scripts);
        is($r[0]{status}, 200, "$method $what: 200");
        is($r[0]{body}, "RAN\n", "$method $what: the script's output");
    }
}
for my $target ('/.pl', '/.PL', '/.PLX', '/.plx', '/.Pl', '/.cgi', '/sub/.pl', '/dot.txt',
        '/.pl/', '/.pl/more', '/%2epl') {
    for my $method (qw(GET HEAD)) {
        my ($raw, @r) = exchange(request_bytes($method, $target, 'Connection: close'),
            head => ($method eq 'HEAD' ? [0] : []), server => $scripts);
        is($r[0]{status}, 404, "$method $target: a name that is only an extension: 404");
        unlike($raw, qr/print qq|RAN/, "$method $target: never sent, never run");
    }
}
like($scripts->error_log, qr{refused /\.pl: a file named only like a script extension},
    'the reason is logged');

# ---- traversal ------------------------------------------------------------
my @traversal = (
    '/../outside/secret.txt',
    '/../../../../../../etc/passwd',
    '/sub/../../outside/secret.txt',
    '/%2e%2e/outside/secret.txt',
    '/%2E%2E/outside/secret.txt',
    '/.%2e/outside/secret.txt',
    '/%2e./outside/secret.txt',
    '/sub/%2e%2e/%2e%2e/outside/secret.txt',
    '/%252e%252e/outside/secret.txt',
    '/..%2foutside%2fsecret.txt',
    '/..%2Foutside/secret.txt',
    '/sub%2f..%2f..%2foutside/secret.txt',
    '/..\\outside\\secret.txt',
    '/..%5coutside%5csecret.txt',
    '/%c0%ae%c0%ae/outside/secret.txt',
    '/%c0%ae%c0%ae%c0%afoutside%c0%afsecret.txt',
    '/%e0%80%ae%e0%80%ae/outside/secret.txt',
    '/%c1%9c..%c1%9coutside/secret.txt',
    '/%00/../outside/secret.txt',
    '/..%00/outside/secret.txt',
    "/..\0/outside/secret.txt",
    'http://plxd.test/../outside/secret.txt',
    'http://plxd.test/%2e%2e/outside/secret.txt',
    'http://plxd.test/..%2foutside/secret.txt',
    '/outdir/secret.txt',
    '/outdir/../outdir/secret.txt',
    '/out.txt',
    '/abs',
    '../outside/secret.txt',
    'outside/secret.txt',
    '*',
);
for my $target (@traversal) {
    (my $shown = $target) =~ s/\0/\\0/g;
    my ($raw, @r) = exchange(request_bytes('GET', $target, 'Connection: close'));
    unlike($raw, qr/TOP-SECRET|root:x:0:0/, "GET $shown: nothing from outside the root");
    like($r[0]{status} // 'none', qr/^(400|403|404)$/, "GET $shown: refused ($r[0]{status})");
}

# A raw NUL byte: libmicrohttpd hands plxd the target as a C string, cut at
# the NUL, so plxd serves what comes before it and never sees the rest.
{
    my ($raw, @r) = exchange("GET /hello.txt\0/../../outside/secret.txt HTTP/1.1\r\n"
        . "Host: plxd.test\r\nConnection: close\r\n\r\n");
    unlike($raw, qr/TOP-SECRET/, 'a raw NUL: nothing from outside the root');
    is($r[0]{body}, "hello\n", 'a raw NUL: the target is cut there (/hello.txt)');
}

# ---- symbolic links ---------------------------------------------------------
my %links = (
    '/inside.txt'  => [ 200, "hello\n" ],
    '/out.txt'     => [ 403 ],
    '/outdir/'     => [ 403 ],
    '/outdir'      => [ 403 ],
    '/abs'         => [ 403 ],
    '/loop1'       => [ 403 ],
    '/dangling'    => [ 404 ],
);
for my $target (sort keys %links) {
    my (undef, @r) = exchange(request_bytes('GET', $target, 'Connection: close'));
    is($r[0]{status}, $links{$target}[0], "link $target: $links{$target}[0]");
    is($r[0]{body}, $links{$target}[1], "link $target: content") if $links{$target}[1];
}
my $follow = PlxdTest->start(
    files  => { 'x.txt' => "x\n" },
    server => { follow_symlinks_outside => 'yes' },
);
symlink "$dir/outside/secret.txt", $follow->root . '/out.txt' or die;
symlink "$dir/outside", $follow->root . '/outdir' or die;
is($follow->get('/out.txt')->{content}, "TOP-SECRET\n",
    'follow_symlinks_outside = yes serves a link to an outside file');
is($follow->get('/outdir/secret.txt')->{content}, "TOP-SECRET\n", '... and through an outside folder');
is($follow->get('/../outside/secret.txt')->{status}, 400, '... but never a path above the root');

# ---- oversized request line and headers -------------------------------------
my $small = PlxdTest->start(files => { 'a.txt' => "a\n" }, server => { max_header_size => '4K' });
my $long = '/' . ('a' x 5000);
my @r = responses($small->raw("GET $long HTTP/1.1\r\nHost: x\r\n\r\n", 10));
is($r[0]{status}, 414, 'a request line longer than max_header_size: 414');
@r = responses($small->raw("GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Big: " . ('b' x 5000) . "\r\n\r\n", 10));
is($r[0]{status}, 431, 'headers larger than max_header_size: 431');
@r = responses($small->raw("GET /a.txt HTTP/1.1\r\nHost: x\r\n"
    . join('', map { "X-$_: v\r\n" } 1 .. 800) . "\r\n", 10));
is($r[0]{status}, 431, 'many small headers past max_header_size: 431');
@r = responses($small->raw("GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Fits: "
    . ('c' x 2000) . "\r\n\r\n", 10));
is($r[0]{status}, 200, 'headers within max_header_size are fine');

# ---- pipelining and HTTP/1.0 ------------------------------------------------
my ($raw, @resp) = exchange(request_bytes('GET', '/hello.txt')
    . request_bytes('POST', '/x.pl', 'Content-Length: 3') . 'abc'
    . request_bytes('GET', '/sub/file.txt')
    . request_bytes('HEAD', '/hello.txt')
    . request_bytes('GET', '/inside.txt')
    . request_bytes('GET', '/missing')
    . request_bytes('GET', '/hello.txt', 'Connection: close'), head => [3]);
is(scalar @resp, 7, 'seven pipelined requests in one write: all answered');
is($resp[0]{body}, "hello\n", 'first: in order');
like($resp[1]{body}, qr/^SCRIPT-RAN\n.*^body\nabc\z/ms, 'second: the POST with its body');
is($resp[2]{body}, "in sub\n", 'third');
is($resp[3]{headers}{'content-length'}, 6, 'fourth: HEAD, no body in the stream');
is($resp[4]{body}, "hello\n", 'fifth: through a link');
is($resp[5]{status}, 404, 'sixth: 404');
# A refusal without a body (404 here) keeps the connection: the next
# request is answered. One with a body it will not read closes it.
is($resp[6]{body}, "hello\n", 'seventh: answered after the 404 on the same connection');
($raw, @resp) = exchange(request_bytes('POST', '/missing', 'Content-Length: 3') . 'abc'
    . request_bytes('GET', '/hello.txt'));
is($resp[0]{status}, 404, 'a POST to a missing file: 404');
is(scalar @resp, 1, 'and, its body unread, the connection closes: the next request is not read');

# Closed after the response, not at connection_timeout (30 s): within 10 s
# (and read for longer, so that a connection left open is seen as one).
my $sock = $s->connect;
$sock->syswrite("GET /hello.txt HTTP/1.0\r\n\r\n");
my $t0 = time;
@resp = responses(PlxdTest::read_until_closed($sock, 60));
is($resp[0]{status}, 200, 'HTTP/1.0 without Host: 200');
is($resp[0]{body}, "hello\n", 'HTTP/1.0: the content');
ok(time - $t0 < 10, 'HTTP/1.0: the connection closes after the response');
@resp = responses($s->raw("POST /x.pl HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi", 10));
like($resp[0]{body}, qr/^SCRIPT-RAN\n.*^version HTTP\/1\.0$/ms, 'HTTP/1.0 POST to a script');

done_testing;
