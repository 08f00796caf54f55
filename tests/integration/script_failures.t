# The same script behaviour gets the same answer and the same log line from
# both script handlers (.pl per request, .plx persistent): doc/cgi.md's
# table of script failures, row by row. A failure of the script itself
# before its headers is 500, a timeout 504; what a script printed before it
# died or exited is its response, as under CGI.
use strict;
use warnings;
use Test::More;
use PlxdTest;

# name => [ script, status, log line after "SCRIPT: " (a regex, as text) or undef
# for none, body (for a 200) ]
my @rows = (
    [ 'no output', '', 500, 'answered 500: no output' ],
    [ 'text without a header block', qq{print "just text\\n";\n}, 500,
      'answered 500: malformed header line \(no headers\?\)' ],
    [ 'output ending inside the header block', qq{print "Content-Type: text/plain\\n";\n}, 500,
      'answered 500: output ended inside the header block' ],
    [ 'a malformed header line', qq{print "Content-Type: text/plain\\nX-Bad\\x01: 1\\n\\nbody";\n}, 500,
      'answered 500: \S.*' ],
    [ 'a bad Status', qq{print "Status: 42\\nContent-Type: text/plain\\n\\nbody";\n}, 500,
      'answered 500: bad Status line' ],
    [ 'Transfer-Encoding from the script',
      qq{print "Content-Type: text/plain\\nTransfer-Encoding: chunked\\n\\nbody";\n}, 500,
      'answered 500: \S.*' ],
    [ 'no Content-Type, Location or Status', qq{print "X-A: 1\\n\\nbody";\n}, 500,
      'answered 500: no Content-Type, Location or Status' ],
    [ 'died before its headers', qq{die "boom\\n";\n}, 500,
      'answered 500: no output; (died|exited with status 255)' ],
    [ 'exit 3 before its headers', qq{exit 3;\n}, 500,
      'answered 500: no output; exited with status 3' ],
    [ 'killed by a signal before its headers', qq{kill 'SEGV', \$\$; sleep 5;\n}, 500,
      'answered 500: no output; killed by signal 11 \(SIGSEGV\)' ],
    [ 'ran past timeout', qq{sleep 30;\n}, 504,
      'answered 504: ran longer than timeout \(1000 ms\)' ],
    [ 'died after its headers', qq{print "Content-Type: text/plain\\n\\npartial\\n"; die "late\\n";\n},
      200, undef, "partial\n" ],
    [ 'exit 4 after its headers', qq{print "Content-Type: text/plain\\n\\ndone\\n"; exit 4;\n},
      200, undef, "done\n" ],
);

my %files;
for my $i (0 .. $#rows) {
    $files{"r$i.pl"} = $files{"r$i.plx"} = $rows[$i][1];
}
# The rows that end in 504 run on a server whose timeout is 1 s; the others
# on one whose timeout (60 s) no script can reach however loaded the
# machine is, so that their answers never depend on how fast a script
# starts.
my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { cgi => { timeout => '60s' }, perl => { workers => 1, timeout => '60s' } },
);
my $t = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { cgi => { timeout => '1s' }, perl => { workers => 1, timeout => '1s' } },
);
sub server_of { my ($row) = @_; return $row->[2] == 504 ? $t : $s }

for my $i (0 .. $#rows) {
    my ($name, undef, $status, $log, $body) = @{ $rows[$i] };
    my $srv = server_of($rows[$i]);
    for my $ext ('pl', 'plx') {
        my $file = $srv->root . "/r$i.$ext";
        my $res = $srv->get("/r$i.$ext");
        is($res->{status}, $status, ".$ext, $name: $status");
        is($res->{content}, $body, ".$ext, $name: the script's output is the response") if defined $body;
        next unless $log;
        ok($srv->wait_log(qr/^.*\Q$file\E: $log$/m), ".$ext, $name: the log line")
            or diag(join "\n", grep { /\Qr$i.$ext\E/ } split /\n/, $srv->error_log);
    }
}

# Both handlers wrote the same reason for each failure (the part before
# how the script ended, which only a process can tell as an exit status).
for my $i (0 .. $#rows) {
    next unless $rows[$i][3];
    my $srv = server_of($rows[$i]);
    my %reason;
    for my $ext ('pl', 'plx') {
        my $file = $srv->root . "/r$i.$ext";
        ($reason{$ext}) = $srv->error_log =~ /\Q$file\E: (answered \d+: [^;\n]*)/;
    }
    is($reason{plx}, $reason{pl}, "$rows[$i][0]: the same status and reason in both logs");
}

done_testing;
