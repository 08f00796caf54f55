# A local redirect (a script printing "Location: /path" and nothing else)
# is served by plxd as a GET without a body, whatever the first request
# carried: every script handler as the redirecting side and as the target,
# a static target, with no body, a Content-Length body and a chunked body.
# The target must see no CONTENT_LENGTH or CONTENT_TYPE and read nothing
# from stdin; plxd must keep serving (a body length reset without its read
# position once made plxd read past its buffer and crash).
use strict;
use warnings;
use Test::More;
use PlxdTest;
use PlxdRaw qw(responses);

my $go = <<'EOF';
print "Location: /$ENV{QUERY_STRING}\n\n";
EOF
my $target = <<'EOF';
binmode STDIN;
my $in = do { local $/; <STDIN> } // '';
print "Content-Type: text/plain\n\n";
print join(' ', "method=$ENV{REQUEST_METHOD}", 'length=' . ($ENV{CONTENT_LENGTH} // 'unset'),
    'type=' . ($ENV{CONTENT_TYPE} // 'unset'), 'stdin=' . length($in)), "\n";
EOF

my $s = PlxdTest->start(
    files => { 'go.pl' => $go, 'go.plx' => $go, 't.pl' => $target, 't.plx' => $target,
        't.txt' => "static\n" },
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { perl => { workers => 1 } },
);

my $form = 'a=1&b=' . ('x' x 100);
my %bodies = (
    none => '',
    'content-length' => "Content-Type: application/x-www-form-urlencoded\r\n"
        . 'Content-Length: ' . length($form) . "\r\n\r\n$form",
    chunked => "Content-Type: application/x-www-form-urlencoded\r\n"
        . "Transfer-Encoding: chunked\r\n\r\n"
        . sprintf('%x', length $form) . "\r\n$form\r\n0\r\n\r\n",
);

sub ask {
    my ($path, $body) = @_;
    my $method = $body eq '' ? 'GET' : 'POST';
    my $bytes = "$method $path HTTP/1.1\r\nHost: plxd.test\r\nConnection: close\r\n"
        . ($body eq '' ? "\r\n" : $body);
    my @r = responses($s->raw($bytes));
    return $r[0] // { status => 'none', body => '' };
}

for my $from ('go.pl', 'go.plx') {
    for my $to ('t.pl', 't.plx', 't.txt') {
        for my $kind (sort keys %bodies) {
            my $res = ask("/$from?$to", $bodies{$kind});
            my $what = "$from -> $to, $kind body";
            is($res->{status}, 200, "$what: 200");
            if ($to eq 't.txt') {
                is($res->{body}, "static\n", "$what: the static file");
            } else {
                is($res->{body}, "method=GET length=unset type=unset stdin=0\n",
                    "$what: a GET with no body, no CONTENT_LENGTH or CONTENT_TYPE, empty stdin");
            }
        }
    }
}

# The limit of 10 local redirects in a row, at exactly its value: hop.pl?N
# redirects to hop.pl?N-1 until 0, which answers. 10 redirects are served,
# 11 give 500 and the log line; for a .pl and a .plx alike.
for my $ext ('pl', 'plx') {
    PlxdTest::write_file($s->root . "/hop.$ext", <<"EOF");
my \$n = \$ENV{QUERY_STRING};
if (\$n > 0) { print "Location: /hop.$ext?", \$n - 1, "\\n\\n"; exit }
print "Content-Type: text/plain\\n\\nlanded\\n";
EOF
    my $res = ask("/hop.$ext?10", '');
    is($res->{status}, 200, "hop.$ext: a chain of exactly 10 local redirects is served");
    is($res->{body}, "landed\n", '... with the last target\'s body');
    unlike($s->error_log, qr{/hop\.\Q$ext\E\?10: more than}, '... and no limit logged');
    $res = ask("/hop.$ext?11", '');
    is($res->{status}, 500, "hop.$ext: 11 local redirects give 500");
    ok($s->wait_log(qr{/hop\.\Q$ext\E\?11: more than 10 local redirects, last to /hop\.\Q$ext\E\?0}),
        '... and the log line');
}

# Still serving, and nothing of the bodies above reached a later request.
my $res = ask('/t.plx', '');
is($res->{body}, "method=GET length=unset type=unset stdin=0\n", 'a later GET to the same worker reads no body');
is(ask('/t.txt', '')->{status}, 200, 'plxd still serves');

done_testing;
