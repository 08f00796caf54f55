# The persistent Perl handler (.plx) and the standard handles: whatever a
# script does to STDIN, STDOUT or STDERR (reopen to a file or a dup, close,
# fd-level dup2 or close, binmode layers, select, tie, glob assignment),
# the next request of the same worker gets them as every request does:
# STDIN the request body (nothing without one), STDOUT the response (past
# the buffer size, with $| on, and for the programs it starts), STDERR the
# error log.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(read_file thread_mode);

# One break script per way of changing a handle; each also prints a valid
# response, so that only what it leaves behind is tested. A .pl would write
# where the handle points; a .plx does the same, then the handle is put back.
# In thread mode the handles live on descriptors of their own, and fds 0-2
# are plxd's (doc/perl.md, isolation modes): the POSIX cases act on the
# handle's descriptor, fileno(STDOUT), as such a script must there.
my @fd = thread_mode() ? map { "fileno($_)" } qw(STDIN STDOUT STDERR) : (0, 1, 2);
my %break = (
    # STDOUT
    stdout_file => q{open STDOUT, '>', 'out-file.txt' or die "open: $!";},
    stdout_dup => q{open my $fh, '>', 'out-dup.txt' or die; open STDOUT, '>&', $fh or die;},
    stdout_dup_stderr => q{open STDOUT, '>&', \*STDERR or die;},
    stdout_fdopen => q{open OUTFD, '>', 'out-fdopen.txt' or die; open STDOUT, '>&=', fileno(OUTFD) or die;},
    stdout_close => q{close STDOUT;},
    stdout_scalar => q{close STDOUT; open STDOUT, '>', \our $captured or die;},
    stdout_pipe => q{open STDOUT, '|-', 'cat > out-pipe.txt' or die;},
    stdout_posix_dup2 => qq{use POSIX (); open my \$fh, '>', 'out-posix.txt' or die; POSIX::dup2(fileno(\$fh), $fd[1]) or die;},
    stdout_posix_close => qq{use POSIX (); POSIX::close($fd[1]);},
    stdout_utf8 => q{binmode STDOUT, ':utf8';},
    stdout_crlf => q{binmode STDOUT, ':crlf';},
    stdout_encoding => q{binmode STDOUT, ':encoding(UTF-16LE)';},
    stdout_select_file => q{open SEL, '>', 'out-select.txt' or die; select SEL;},
    stdout_select_stderr => q{select STDERR;},
    stdout_tie => q{package PlxdSink1 { sub TIEHANDLE { bless {}, shift } sub PRINT { 1 } sub PRINTF { 1 } sub WRITE { length $_[1] } }
tie *STDOUT, 'PlxdSink1';},
    # A tie class whose UNTIE dies and whose DESTROY exits: still untied.
    stdout_tie_hostile => q{package PlxdSink3 { sub TIEHANDLE { bless {}, shift } sub PRINT { 1 } sub UNTIE { die "no\n" } sub DESTROY { exit 3 } }
tie *STDOUT, 'PlxdSink3';},
    stdout_glob => q{print "Content-Type: text/plain\n\nbefore\n";
open OTHEROUT, '>', 'out-glob.txt' or die; *STDOUT = *OTHEROUT;},
    stdout_glob_io => q{print "Content-Type: text/plain\n\nbefore\n";
open OTHEROUTIO, '>', 'out-globio.txt' or die; *STDOUT = *OTHEROUTIO{IO};},
    stdout_undef_glob => q{undef *STDOUT;},
    stdout_local_exit => q{local *STDOUT; open STDOUT, '>', 'out-local.txt' or die; exit 0;},

    # STDIN
    stdin_file => q{open STDIN, '<', 'secret.txt' or die "open: $!";},
    stdin_file_read => q{open STDIN, '<', 'secret.txt' or die; my $c = getc STDIN;},
    stdin_dup => q{open my $fh, '<', 'secret.txt' or die; open STDIN, '<&', $fh or die;},
    stdin_fdopen => q{open INFD, '<', 'secret.txt' or die; open STDIN, '<&=', fileno(INFD) or die;},
    stdin_close => q{close STDIN;},
    stdin_scalar => q{close STDIN; open STDIN, '<', \"fake input\n" or die;},
    stdin_pipe => q{open STDIN, '-|', 'echo piped' or die;},
    stdin_posix_dup2 => qq{use POSIX (); open my \$fh, '<', 'secret.txt' or die; POSIX::dup2(fileno(\$fh), $fd[0]) or die;},
    stdin_posix_close => qq{use POSIX (); POSIX::close($fd[0]);},
    stdin_utf8 => q{binmode STDIN, ':utf8';},
    stdin_crlf => q{binmode STDIN, ':crlf';},
    stdin_encoding => q{binmode STDIN, ':encoding(UTF-16LE)';},
    stdin_tie => q{package PlxdSink0 { sub TIEHANDLE { bless {}, shift } sub READLINE { "tied\n" } sub READ { $_[1] = 'tied'; 4 } sub EOF { 0 } }
tie *STDIN, 'PlxdSink0';},
    stdin_glob => q{open OTHERIN, '<', 'secret.txt' or die; *STDIN = *OTHERIN;},
    stdin_glob_io => q{open OTHERINIO, '<', 'secret.txt' or die; *STDIN = *OTHERINIO{IO};},

    # STDERR
    stderr_file => q{open STDERR, '>', 'err-file.txt' or die "open: $!"; warn "grabbed\n";},
    stderr_dup => q{open my $fh, '>', 'err-dup.txt' or die; open STDERR, '>&', $fh or die;},
    stderr_dup_stdout => q{open STDERR, '>&', \*STDOUT or die;},
    stderr_fdopen => q{open ERRFD, '>', 'err-fdopen.txt' or die; open STDERR, '>&=', fileno(ERRFD) or die;},
    stderr_close => q{close STDERR;},
    stderr_scalar => q{close STDERR; open STDERR, '>', \our $captured or die; warn "captured\n";},
    stderr_pipe => q{open STDERR, '|-', 'cat > err-pipe.txt' or die; warn "piped\n";},
    # The same with no free descriptor below STDERR's: where perl closes the
    # handle's descriptor before it makes the pipe (in thread mode, where it
    # is above 2), the pipe takes its number. The command's own stderr is
    # still the log, as under CGI.
    stderr_pipe_fd => q{my $e = fileno(STDERR); my @hold;
while (open my $h, '<', '/dev/null') { last if fileno($h) > $e; push @hold, $h }
open STDERR, '|-', 'cat > err-pipe-fd.txt; echo pipe-cmd-stderr >&2' or die; warn "piped\n";},
    stderr_posix_dup2 => qq{use POSIX (); open my \$fh, '>', 'err-posix.txt' or die; POSIX::dup2(fileno(\$fh), $fd[2]) or die;},
    stderr_posix_close => qq{use POSIX (); POSIX::close($fd[2]);},
    stderr_utf8 => q{binmode STDERR, ':utf8';},
    stderr_crlf => q{binmode STDERR, ':crlf';},
    stderr_encoding => q{binmode STDERR, ':encoding(UTF-16LE)';},
    stderr_tie => q{package PlxdSink2 { sub TIEHANDLE { bless {}, shift } sub PRINT { 1 } sub PRINTF { 1 } sub WRITE { length $_[1] } }
tie *STDERR, 'PlxdSink2';},
    stderr_glob => q{open OTHERERR, '>', 'err-glob.txt' or die; *STDERR = *OTHERERR;},
    stderr_glob_io => q{open OTHERERRIO, '>', 'err-globio.txt' or die; *STDERR = *OTHERERRIO{IO};},
);

# Where a .pl would have written, a .plx writes too: what a script printed
# after it moved STDOUT or STDERR is where it sent it; what it printed
# before is its response.
my $ok = "Content-Type: text/plain\n\nok\n";
my %after = (
    map({ ($_ => { response => "ok\n" }) } grep { /^std(in|err)_/ } keys %break),
    stdout_file => { file => ['out-file.txt', $ok] },
    stdout_dup => { file => ['out-dup.txt', $ok] },
    stdout_fdopen => { file => ['out-fdopen.txt', $ok] },
    stdout_posix_dup2 => { file => ['out-posix.txt', $ok] },
    stdout_pipe => { file => ['out-pipe.txt', $ok] },
    stdout_select_file => { file => ['out-select.txt', $ok] },
    stdout_glob => { file => ['out-glob.txt', $ok], response => "before\n" },
    stdout_glob_io => { file => ['out-globio.txt', $ok], response => "before\n" },
    stderr_file => { file => ['err-file.txt', "grabbed\n"], response => "ok\n" },
    stderr_pipe => { file => ['err-pipe.txt', "piped\n"], response => "ok\n" },
    stderr_pipe_fd => { file => ['err-pipe-fd.txt', "piped\n"], response => "ok\n",
        log => 'pipe-cmd-stderr' },
);

# Checks every standard handle of the request after: STDIN (empty without
# a body, the body with one), STDOUT (bytes as printed, past 8 KB, with $|,
# from a child), STDERR (warn, print, a child), and that the worker is the
# same.
my $probe = <<'EOF';
my $tag = $ENV{QUERY_STRING};
my $in = do { local $/; <STDIN> };
warn "probe-warn $tag\n";
print STDERR "probe-stderr $tag \xe9\n";
system("echo probe-child $tag >&2");
print "Content-Type: text/plain\n\n";
print "pid=$$\n";
print "stdin=", unpack('H*', $in // ''), "\n";
print "bytes=\xe9\n";
print "x" x 10000, "\n";
$| = 1;
print "flushed\n";
system("echo child $tag");
print "end\n";
EOF

my %files = (
    'probe.plx' => $probe,
    'secret.txt' => "secret\n",
    map { ("$_.plx" => "$break{$_}\nprint \"Content-Type: text/plain\\n\\nok\\n\";\n") } keys %break,
);

my $body = "a\r\nb\xe9";
my $body_hex = unpack 'H*', $body;

sub expected {
    my ($pid, $tag, $stdin) = @_;
    return "pid=$pid\nstdin=$stdin\nbytes=\xe9\n" . ('x' x 10000) . "\nflushed\nchild $tag\nend\n";
}

# Runs the probe twice (GET, then POST with a body) and checks it.
sub probe_ok {
    my ($s, $name, $worker) = @_;
    my $probe_path = $s->root . '/probe.plx';
    my $get = $s->get("/probe.plx?$name-get");
    my ($pid) = $get->{content} =~ /^pid=(\d+)$/m;
    is($pid, $worker, 'the next request runs in the same worker') if defined $worker;
    $pid //= 'none';
    is($get->{status}, 200, 'the next request is answered');
    is($get->{content}, expected($pid, "$name-get", ''),
        'its STDOUT is whole (past 8 KB, with $|, from a child); a GET reads no STDIN');
    my $post = $s->request('POST', "/probe.plx?$name-post", content => $body,
        headers => { 'Content-Type' => 'application/octet-stream' });
    is($post->{content}, expected($pid, "$name-post", $body_hex), 'a POST reads its body');
    for my $tag ("$name-get", "$name-post") {
        ok($s->wait_log(qr/\Q$probe_path\E: probe-child \Q$tag\E$/m, 3),
            "a child's stderr reaches the log ($tag)");
        my $log = $s->error_log;
        like($log, qr/\Q$probe_path\E: probe-warn \Q$tag\E$/m, "warn reaches the log ($tag)");
        like($log, qr/\Q$probe_path\E: probe-stderr \Q$tag\E \xe9$/m,
            "print STDERR reaches the log, bytes as printed ($tag)");
    }
    return $pid;
}

# Each way on a server of its own (one worker, so the next request is served
# by the worker the script ran in): a failure shows which way, alone.
for my $name (sort keys %break) {
    subtest $name => sub {
        my $s = PlxdTest->start(
            files    => \%files,
            handlers => { '.plx' => 'perl' },
            sections => { perl => { workers => 1 } },
        );
        my $worker = probe_ok($s, 'first');
        like($worker, qr/^\d+$/, "worker $worker answers");
        my $res = $s->get("/$name.plx");
        my $want = $after{$name} || {};
        is($res->{content}, $want->{response}, 'its own response') if defined $want->{response};
        ok($s->wait_log(qr/\Q$name.plx\E: \Q$want->{log}\E$/m, 10), "the log has $want->{log}")
            if $want->{log};
        probe_ok($s, $name, $worker);
        is(read_file($s->root . "/$want->{file}[0]"), $want->{file}[1], "$want->{file}[0] has its output")
            if $want->{file};
        # In thread mode the interpreters are destroyed inside plxd as it
        # stops: an object's DESTROY calling exit there ends no more.
        is($s->stop, 0, 'plxd exits 0 when stopped');
    };
}

# After STDERR was reopened, the next request's line reaches the log with
# that request, under its script's name: the handle put back is unbuffered
# as perl's first STDERR is (it was buffered in a worker, and the line
# came out with the request after, under that script's name).
{
    my $s = PlxdTest->start(
        files => { %files, 'tag.plx' => qq{print STDERR "tag-\$ENV{QUERY_STRING}\n";\nprint "Content-Type: text/plain\\n\\nok";\n} },
        handlers => { '.plx' => 'perl' },
        sections => { perl => { workers => 1 } },
    );
    for my $name (qw(stderr_file stderr_dup stderr_fdopen)) {
        $s->get("/$name.plx");
        is($s->get("/tag.plx?$name")->{content}, 'ok', "after $name.plx, a script printing to STDERR answers");
        ok($s->wait_log(qr/tag\.plx: tag-\Q$name\E$/m, 5), '... and its line is logged with its own request');
    }
    $s->stop;
}

done_testing;
