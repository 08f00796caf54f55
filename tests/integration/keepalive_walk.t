# Every sample script and static file of cgi-bin/, on one keep-alive
# connection: GET, HEAD, a conditional GET and a Range request each, read
# with the raw client, which fails on any byte that does not belong to a
# response (RFC 9112 6.3: HEAD, 1xx, 204 and 304 end at their headers). One
# desynchronised response makes every later one fail to parse. Then the
# bodiless cases scripts can produce (Status: 304, 204, HEAD with and
# without a Content-Length, streamed or not) through both script handlers,
# pipelined, and 100 Continue.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(source_dir);
use PlxdRaw qw(read_responses request_bytes);
use IO::Select;

my $root = source_dir() . '/cgi-bin';
opendir my $dh, $root or die "$root: $!";
my @files = sort grep { -f "$root/$_" } readdir $dh;
closedir $dh;

my $s = PlxdTest->start(
    args     => ['--root', $root],
    handlers => { '.pl' => 'cgi', '.plx' => 'perl', '.cgi' => 'cgi' },
    sections => { perl => { workers => 1 } },
);

my $sock = $s->connect;
for my $file (@files) {
    my $path = "/$file";
    $sock->syswrite(request_bytes('GET', $path) . request_bytes('HEAD', $path)
        . request_bytes('GET', $path, 'If-None-Match: *')
        . request_bytes('GET', $path, 'Range: bytes=0-3'));
    my @r = read_responses($sock, 4, head => [1]);
    is(scalar @r, 4, "$file: four responses on the kept connection");
    like($r[0]{status}, qr/^200$/, "$file: GET is 200");
    is($r[1]{status}, $r[0]{status}, "$file: HEAD has GET's status");
    is($r[1]{body}, '', "$file: HEAD has no body");
    # HEAD says what GET would send: a length always, GET's own where the
    # output is the same each time (a chunked GET: its body's length).
    my $head_len = $r[1]{headers}{'content-length'};
    ok(defined $head_len && $head_len =~ /^\d+$/, "$file: HEAD has a Content-Length");
    # Not compared where the output names the request (a count, the time, a
    # pid, its method) or, for psgi.pl, where the application answers HEAD
    # itself (Plack's Head middleware).
    is($head_len, length $r[0]{body}, "$file: HEAD's Content-Length is GET's body length")
        unless $file =~ /^(counter|env|uptime|mojo|dancer|psgi|upload)/;
    ok(!grep({ ($_->{headers}{connection} // '') =~ /close/i } @r), "$file: nothing closed the connection");
}

# Bodiless responses a script chooses, through both handlers.
my %scripts = (
    's304'   => qq{print "Status: 304 Not Modified\\n\\n";\n},
    's304b'  => qq{print "Status: 304 Not Modified\\nContent-Type: text/plain\\n\\nignored body\\n";\n},
    's204'   => qq{print "Status: 204 No Content\\n\\n";\n},
    'stream' => qq{\$| = 1; print "Content-Type: text/plain\\n\\n"; print "x" x 100; print "y" x 50;\n},
    'sized'  => qq{print "Content-Type: text/plain\\nContent-Length: 5\\n\\nhello";\n},
);
my $t = PlxdTest->start(
    files    => { map { ("$_.pl" => $scripts{$_}, "$_.plx" => $scripts{$_}) } keys %scripts },
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { perl => { workers => 1 } },
);
for my $ext ('pl', 'plx') {
    my $c = $t->connect;
    $c->syswrite(join '', map { request_bytes(@$_) } ['GET', "/s204.$ext"], ['HEAD', "/stream.$ext"],
        ['HEAD', "/sized.$ext"], ['GET', "/stream.$ext"]);
    my @r = read_responses($c, 4, head => [1, 2]);
    is_deeply([map { $_->{status} } @r], [204, 200, 200, 200],
        ".$ext: four pipelined answers, each framed as HTTP says");
    is($r[1]{headers}{'content-length'}, 150, ".$ext: HEAD of a streamed response: the length GET sends");
    ok(!defined $r[1]{headers}{'transfer-encoding'}, '... not chunked');
    is($r[2]{headers}{'content-length'}, 5, ".$ext: HEAD of a response with a Content-Length keeps it");
    is($r[3]{body}, ('x' x 100) . ('y' x 50), ".$ext: the next GET is intact");
    # A 304 without the length a 200 would have says none (RFC 9110 8.6),
    # which libmicrohttpd sends only with the connection closed after it:
    # the request pipelined behind it is not answered, and no byte is left.
    for my $name ('s304', 's304b') {
        my $d = $t->connect;
        $d->syswrite(request_bytes('GET', "/$name.$ext") . request_bytes('GET', "/sized.$ext"));
        my @q = read_responses($d, 1);
        is($q[0]{status}, 304, ".$ext: $name: 304");
        ok(!defined $q[0]{headers}{'content-length'} && !defined $q[0]{headers}{'transfer-encoding'},
            ".$ext: $name: neither a Content-Length nor chunks");
        like($q[0]{headers}{connection} // '', qr/close/i, ".$ext: $name: the connection closes");
        ok(IO::Select->new($d)->can_read(30) && !sysread($d, my $rest, 1),
            ".$ext: $name: ... after it, the next request not answered");
    }
}

# 100 Continue comes before the final response and is framed apart.
my $c = $t->connect;
$c->syswrite("POST /sized.pl HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n");
my @r = read_responses($c, 1, interim => 1);
is($r[0]{status}, 100, '100 Continue first');
$c->syswrite("abc" . request_bytes('GET', '/sized.plx'));
@r = read_responses($c, 2);
is_deeply([map { $_->{status} } @r], [200, 200], 'then the answer, and the next request on the connection');

done_testing;
