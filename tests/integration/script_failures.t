# One table of script behaviours, each row run through both script handlers
# (.pl, a process per request, and .plx, persistent workers) with the same
# script body: both must give the same status, the same framing on the wire
# (read with the raw client, which fails on any byte that belongs to no
# response), the same fate of the connection, and the same error-log lines
# once the script's name is taken out. doc/cgi.md's table "When a script
# fails" is this table's specification; a failure of the script itself
# before its headers is 500, a timeout 504, and what a script printed
# before it died or exited is its response, as under CGI.
#
# Then the rows that exist for one handler only: plxd's own plumbing
# (.pl: the interpreter cannot be executed; .plx: no worker could be
# started) and the output a script may print while its request body still
# arrives ([server] max_body), which only a .pl can do: a .plx starts once
# its body is in.
use strict;
use warnings;
use Test::More;
use IO::Select;
use Time::HiRes qw(time);
use PlxdTest qw(wait_for write_file read_file thread_mode);
use PlxdRaw qw(read_responses request_bytes);

# How the timeout rows' scripts wait 30 s. In thread mode a script stuck in
# C code (sleep) cannot be interrupted and keeps its thread until it returns
# (doc/perl.md, isolation modes): there they reach a Perl op every 50 ms, at
# which the timeout ends them.
my $wait_30s = thread_mode() ? 'select(undef, undef, undef, 0.05) for 1 .. 600' : 'sleep 30';
# In thread mode plxd says so when it ends a script at its next op.
my $thread_end = qr/^warn: its interpreter ends it: /;
# ... and, as it ends no process the script started, how a background
# process that held the output past linger is logged there.
my $thread_bg_end = 'the response was ended; the process was left running';

# [cgi] and [perl] max_script_header_size on the servers below.
my $HDR_MAX = 4096;
# A header block of exactly $n bytes, blank line included.
sub header_block {
    my ($n) = @_;
    my $head = "Content-Type: text/plain\nContent-Length: 5\n";
    my $pad = $n - length($head) - length("X-Pad: ") - 2;
    return $head . 'X-Pad: ' . ('a' x $pad) . "\n\n";
}
sub print_block { my ($n) = @_; my $b = header_block($n); $b =~ s/\n/\\n/g; return qq{print "$b", "body\\n";\n} }

# Each row: name, script, and what both handlers must give:
#   status   the response's status
#   frame    'length' (a Content-Length that the body matches), 'short'
#            (the script's Content-Length, the body cut short), 'none' (no
#            body on the wire, a bodiless response), 'cut' (no length,
#            unterminated: the connection closes), 'complete' (a length or
#            chunked, and complete: a script with no Content-Length that
#            ends just after its output gets a length when its end was seen
#            before the response started, and streams otherwise, the same
#            rule in both handlers, which a race decides for a .pl)
#   body     the body (where it is the script's)
#   closes   the connection is closed after the response (otherwise a
#            pipelined request after it must be answered)
#   log      a line the error log must hold after "SCRIPT: " (a regex)
#   method   HEAD or GET (the default)
#   srv      's' (timeout 60 s, which no script reaches however loaded the
#            machine is) or 't' (timeout 2 s, for the 504 rows)
my @rows = (
    { name => 'no output', script => '', status => 500, frame => 'length',
      log => 'answered 500: no output' },
    { name => 'output without a header block', script => qq{print "just text\\n";\n},
      status => 500, frame => 'length',
      log => 'answered 500: malformed header line \(no headers\?\)' },
    { name => 'output ending inside the header block',
      script => qq{print "Content-Type: text/plain\\n";\n}, status => 500, frame => 'length',
      log => 'answered 500: output ended inside the header block' },
    { name => 'a malformed header line',
      script => qq{print "Content-Type: text/plain\\nX-Bad\\x01: 1\\n\\nbody";\n},
      status => 500, frame => 'length',
      log => 'answered 500: control character inside a header line' },
    { name => 'a bad Status', script => qq{print "Status: 42\\nContent-Type: text/plain\\n\\nbody";\n},
      status => 500, frame => 'length', log => 'answered 500: bad Status line' },
    { name => 'Transfer-Encoding from the script',
      script => qq{print "Content-Type: text/plain\\nTransfer-Encoding: chunked\\n\\nbody";\n},
      status => 500, frame => 'length', log => 'answered 500: \S.*' },
    { name => 'no Content-Type, Location or Status', script => qq{print "X-A: 1\\n\\nbody";\n},
      status => 500, frame => 'length',
      log => 'answered 500: no Content-Type, Location or Status' },
    { name => 'died before its headers', script => qq{die "boom\\n";\n}, status => 500,
      frame => 'length', log => 'answered 500: no output; exited with status 255' },
    { name => 'exit 0 before its headers', script => qq{exit 0;\n}, status => 500,
      frame => 'length', log => 'answered 500: no output' },
    { name => 'exit 3 before its headers', script => qq{exit 3;\n}, status => 500,
      frame => 'length', log => 'answered 500: no output; exited with status 3' },
    # In thread mode the script is inside plxd: $$ is plxd's, and the kill
    # is refused (thread_kill_refused_ok).
    { name => 'killed by a signal before its headers', script => qq{kill 'SEGV', \$\$; sleep 5;\n},
      status => 500, frame => 'length', thread_crash => 1,
      log => 'answered 500: no output; killed by signal 11 \(SIGSEGV\)' },
    { name => "a header block of max_script_header_size ($HDR_MAX)", script => print_block($HDR_MAX),
      status => 200, frame => 'length', body => "body\n" },
    { name => 'a header block one byte past max_script_header_size',
      script => print_block($HDR_MAX + 1), status => 500, frame => 'length',
      log => 'answered 500: header block too large' },
    { name => 'died after a complete header block',
      script => qq{print "Content-Type: text/plain\\n\\npartial\\n"; die "late\\n";\n},
      status => 200, frame => 'complete', body => "partial\n", log => 'exited with status 255' },
    { name => 'exit 4 after a complete header block',
      script => qq{print "Content-Type: text/plain\\n\\ndone\\n"; exit 4;\n},
      status => 200, frame => 'complete', body => "done\n", log => 'exited with status 4' },
    { name => 'fewer bytes than its Content-Length',
      script => qq{print "Content-Type: text/plain\\nContent-Length: 10\\n\\nabc";\n},
      status => 200, frame => 'short', body => 'abc', closes => 1,
      log => 'output ended after 3 of the 10 bytes its Content-Length announced; connection closed' },
    { name => 'more bytes than its Content-Length',
      script => qq{print "Content-Type: text/plain\\nContent-Length: 3\\n\\nabcdef";\n},
      status => 200, frame => 'length', body => 'abc', closes => 1,
      log => 'printed more than the 3 bytes its Content-Length announced; connection closed' },
    { name => 'timeout before its headers', script => qq{$wait_30s;\n}, srv => 't', thread_ends => 1,
      status => 504, frame => 'length', log => 'answered 504: ran longer than timeout \(2000 ms\)' },
    { name => 'timeout after its headers', srv => 't', thread_ends => 1,
      script => qq{\$| = 1; print "Content-Type: text/plain\\n\\nfirst\\n"; $wait_30s;\n},
      status => 200, frame => 'cut', body => "first\n", closes => 1,
      log => 'ran longer than timeout \(2000 ms\) after its headers were sent; connection closed' },
    { name => 'a local redirect', script => qq{print "Location: /ok.html\\n\\n";\n},
      status => 200, frame => 'length', body => "ok\n" },
    # No length a 200 would have: none at all (RFC 9110 8.6), which
    # libmicrohttpd sends only with the connection closed after it.
    { name => 'Status: 304 with a body printed',
      script => qq{print "Status: 304\\nContent-Type: text/plain\\n\\nignored\\n";\n},
      status => 304, frame => 'none', closes => 1, no_length => 1 },
    { name => 'Status: 204 with a body printed',
      script => qq{print "Status: 204\\nContent-Type: text/plain\\n\\nignored\\n";\n},
      status => 204, frame => 'none' },
    { name => 'HEAD, the script printing a body', method => 'HEAD',
      script => qq{print "Content-Type: text/plain\\n\\nsome body\\n";\n},
      status => 200, frame => 'none', head_length => 10 },
    # The background process holds the output until the test ends it; the
    # response must not wait for it.
    { name => 'a background process holding the output after the script ended',
      script => q{my $pid = fork; if (defined $pid && !$pid) { exec '/bin/sleep', '300' }
open my $f, '>', "$ENV{SCRIPT_FILENAME}.bg" or die; print $f $pid; close $f;
print "Content-Type: text/plain\n\nmain\n";} . "\n",
      status => 200, frame => 'complete', body => "main\n", bg => 1 },
);

my %files = ('ok.html' => "ok\n");
for my $i (0 .. $#rows) {
    $files{"r$i.pl"} = $files{"r$i.plx"} = $rows[$i]{script};
}
# connection_timeout (120 s) is far beyond the 30 s within which closed()
# must see the end: a connection plxd keeps cannot pass for a closed one.
my %common = (
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    server   => { connection_timeout => '120s' },
);
my $s = PlxdTest->start(%common,
    sections => { cgi  => { timeout => '60s', max_script_header_size => $HDR_MAX },
                  perl => { workers => 1, timeout => '60s', max_script_header_size => $HDR_MAX } });
my $t = PlxdTest->start(%common,
    sections => { cgi => { timeout => '2s' }, perl => { workers => 1, timeout => '2s' } });
my %srv = (s => $s, t => $t);

# Whether plxd closed the connection: the end of the stream within 30 s,
# and no byte before it.
sub closed {
    my ($sock) = @_;
    return 0 unless IO::Select->new($sock)->can_read(30);
    my $n = sysread $sock, my $buf, 1;
    return defined $n && $n == 0;
}

# The error log's lines for a script, its name and the log's prefix taken
# out ("LEVEL: TEXT"); debug lines, which say how long things took, left out.
sub lines_of {
    my ($srv, $file) = @_;
    my @out;
    for (split /\n/, $srv->error_log) {
        next unless /^\S+ \S+ \[(\w+)\] \[pid \d+\] \Q$file\E: (.*)$/;
        next if $1 eq 'debug';
        push @out, "$1: $2";
    }
    # Sorted: whether a stderr line is relayed before or after the failure
    # line is a race between two pipes, in either handler.
    return sort @out;
}

# A row whose .plx signals plxd itself in thread mode ($$ is plxd's there):
# the kill is refused with a line in the log (doc/perl.md, process-wide
# state in thread mode), the script goes on, and plxd serves on. Checked on
# a server of its own, so that a kill that got through ends nothing else.
sub thread_kill_refused_ok {
    my ($row) = @_;
    my $c = PlxdTest->start(files => { 'crash.plx' => $row->{script} },
        handlers => { '.plx' => 'perl' }, sections => { perl => { workers => 1 } });
    my $res = $c->get('/crash.plx');
    is($res->{status}, 500, ".plx in thread mode, $row->{name}: the kill is refused, and the script's lack of output is 500");
    ok($c->wait_log(qr/crash\.plx: kill refused: SEGV to plxd, its process group or its master \(isolation = thread\)/),
        '... the refusal logged');
    ok($c->wait_log(qr/crash\.plx: answered 500: no output/), '... and the answer');
    is($c->get('/crash.plx')->{status}, 500, '... and plxd serves on');
    ok(!defined $c->wait_exit(0), '... still running');
}

my (%seen, @bg);
for my $i (0 .. $#rows) {
    my $row = $rows[$i];
    my $srv = $srv{ $row->{srv} // 's' };
    my $method = $row->{method} // 'GET';
    if ($row->{thread_crash} && thread_mode()) {
        thread_kill_refused_ok($row);
        next;
    }
    for my $ext ('pl', 'plx') {
        my $what = ".$ext, $row->{name}";
        my $sock = $srv->connect;
        my $t0 = time;
        $sock->syswrite(request_bytes($method, "/r$i.$ext") . request_bytes('GET', '/ok.html'));
        my @r = read_responses($sock, $row->{closes} ? 1 : 2, timeout => 60,
            head => $method eq 'HEAD' ? [0] : [],
            partial => ($row->{frame} =~ /^(cut|short)$/ ? 1 : 0));
        my $took = time - $t0;
        my $r = $r[0] // { status => 0, headers => {}, body => '', complete => 0 };
        is($r->{status}, $row->{status}, "$what: $row->{status}");
        my $h = $r->{headers};
        my $frame = defined $h->{'content-length'} ? 'length'
            : ($h->{'transfer-encoding'} // '') =~ /chunked/i ? 'chunked' : 'neither';
        if ($row->{frame} eq 'length') {
            is($frame, 'length', "$what: sent with a Content-Length");
            ok($r->{complete}, "$what: ... which the body matches");
        } elsif ($row->{frame} eq 'short') {
            is($frame, 'length', "$what: sent with the script's Content-Length");
            ok(!$r->{complete}, "$what: ... and cut short");
        } elsif ($row->{frame} eq 'cut') {
            isnt($frame, 'length', "$what: sent without a length");
            ok(!$r->{complete}, "$what: ... and unterminated");
        } elsif ($row->{frame} eq 'none') {
            is($r->{body}, '', "$what: no body on the wire");
            is($h->{'content-length'}, $row->{head_length}, "$what: HEAD's Content-Length is GET's")
                if $row->{head_length};
            ok(!defined $h->{'content-length'} && !defined $h->{'transfer-encoding'},
                "$what: neither a Content-Length nor chunks") if $row->{no_length};
        } else {
            like($frame, qr/^(length|chunked)$/, "$what: sent with a length or chunked");
            ok($r->{complete}, "$what: ... and complete");
            $frame = 'complete';
        }
        is($r->{body}, $row->{body}, "$what: the body is the script's output") if defined $row->{body};
        if ($row->{closes}) {
            is(scalar @r, 1, "$what: the request after it is not answered");
            ok(closed($sock), "$what: the connection is closed after it");
        } else {
            is($r[1] && $r[1]{body}, "ok\n", "$what: the next request on the connection is answered");
        }
        if ($row->{bg}) {
            my $pidfile = $srv->root . "/r$i.$ext.bg";
            ok(wait_for(sub { -s $pidfile }), "$what: the background process started");
            my $pid = read_file($pidfile);
            push @bg, [ $ext, $pid ];
            # Its linger (2 s) or at once: far less than the 300 s it holds
            # the output, whatever the load.
            ok($took < 60, sprintf('%s: the response ended without waiting for it (%.1f s)', $what, $took));
        }
        $seen{$i}{$ext} = { status => $r->{status}, frame => $frame, complete => $r->{complete} ? 1 : 0,
            body => $r->{body}, next => ($r[1] ? $r[1]{status} : 'none') };
    }
    is_deeply($seen{$i}{plx}, $seen{$i}{pl}, "$row->{name}: .pl and .plx gave the same answer");
}

# The log lines: each row's expected one, then all of them alike in both
# handlers (the failure line, stderr relayed, how the script ended).
for my $i (0 .. $#rows) {
    my $row = $rows[$i];
    my $srv = $srv{ $row->{srv} // 's' };
    next if $row->{thread_crash} && thread_mode();
    for my $ext ('pl', 'plx') {
        my $file = $srv->root . "/r$i.$ext";
        next unless $row->{log};
        ok($srv->wait_log(qr/^.*\Q$file\E: $row->{log}$/m), ".$ext, $row->{name}: logged '$row->{log}'")
            or diag(join "\n", grep { /\Qr$i.$ext\E/ } split /\n/, $srv->error_log);
    }
}
for my $i (0 .. $#rows) {
    my $row = $rows[$i];
    my $srv = $srv{ $row->{srv} // 's' };
    next if $row->{thread_crash} && thread_mode();
    my (%lines, $ended);
    # A line the handler writes after the response (how the script ended,
    # once reaped) may come a moment later: wait until both have as many.
    # In thread mode, the line saying a script was ended at its next op is
    # that mode's own, and a background process is not ended.
    wait_for(sub {
        %lines = map { $_ => [ lines_of($srv, $srv->root . "/r$i.$_") ] } 'pl', 'plx';
        if (thread_mode()) {
            $ended = grep { /$thread_end/ } @{ $lines{plx} };
            $lines{plx} = [ grep { !/$thread_end/ } @{ $lines{plx} } ];
            s/its process group was ended$/$thread_bg_end/ for @{ $lines{pl} };
        }
        @{ $lines{pl} } == @{ $lines{plx} } && (!thread_mode() || !$row->{thread_ends} || $ended);
    }, 10);
    ok($ended, ".plx in thread mode, $row->{name}: logged that its interpreter ended the script")
        if thread_mode() && $row->{thread_ends};
    is_deeply($lines{plx}, $lines{pl}, "$row->{name}: the same log lines from .pl and .plx")
        or diag(explain(\%lines));
}

# The background processes: ended by plxd, or by this test.
for my $bg (@bg) {
    my ($ext, $pid) = @$bg;
    next unless $pid && $pid =~ /^\d+$/;
    my $gone = sub { !kill(0, $pid) || read_file("/proc/$pid/stat") =~ /^\d+ \(.*\) Z/ };
    if ($ext eq 'plx' && thread_mode()) {
        # Past linger (its response has ended): still running.
        ok(!$gone->(), ".plx in thread mode: plxd left the background process that held the output running");
        kill 'KILL', $pid;
        ok(wait_for($gone, 10), '... which this test ended');
        next;
    }
    my $ended = wait_for($gone, 10);
    ok($ended, ".$ext: plxd ended the background process that held the output");
    kill 'KILL', $pid unless $ended;
}

# ---- what only one handler can meet ----------------------------------------
# Output printed while the request body still arrives is held until the
# response can start, at most [server] max_body of it: a .pl streams its
# body to the script, so it meets the limit (at it: served; one past: 500);
# a .plx starts once its body is in, so the same script is served either
# way. The script prints before it reads a body four times larger than the
# pipe and plxd's buffer hold together, so all its output comes first.
my $MAX_BODY = 256 * 1024;
my $printer = q{my ($n) = $ENV{QUERY_STRING} =~ /(\d+)/; $| = 1;
print "Content-Type: text/plain\n\n", "x" x $n; local $/; my $in = <STDIN>;} . "\n";
my $u = PlxdTest->start(
    files    => { 'print.pl' => $printer, 'print.plx' => $printer },
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    server   => { max_body => $MAX_BODY },
    sections => { perl => { workers => 1 } },
);
for my $ext ('pl', 'plx') {
    for my $n ($MAX_BODY, $MAX_BODY + 1) {
        my $sock = $u->connect;
        $sock->syswrite(request_bytes('POST', "/print.$ext?$n", "Content-Length: $MAX_BODY",
            'Content-Type: application/octet-stream', 'Connection: close') . ('b' x $MAX_BODY));
        my ($r) = read_responses($sock, 1, timeout => 60);
        my $limited = $ext eq 'pl' && $n > $MAX_BODY;
        is($r && $r->{status}, $limited ? 500 : 200,
            ".$ext printing $n bytes before it reads a body of max_body: " . ($limited ? 500 : 200));
        is(length($r ? $r->{body} : ''), $n, "... all of it the response") unless $limited;
    }
}
ok($u->wait_log(qr/print\.pl: answered 500: printed more than $MAX_BODY bytes before its response could start/),
    '.pl: logged');
unlike($u->error_log, qr/print\.plx: answered/, '.plx: nothing to log');

# plxd's own plumbing. A .pl whose interpreter cannot be executed: 500
# (doc/cgi.md), "cannot execute" and why.
my $v = PlxdTest->start(
    files    => { 'a.nx' => "print 1;\n", 'a.nf' => "print 1;\n" },
    handlers => { '.nx' => 'cgi', '.nf' => 'cgi' },
    sections => { cgi => { interpreters => '.nx=/dev/null .nf=/nonexistent/perl' } },
);
for (['nx', '/dev/null', 'Permission denied'], ['nf', '/nonexistent/perl', 'No such file or directory']) {
    my ($ext, $prog, $err) = @$_;
    my $sock = $v->connect;
    $sock->syswrite(request_bytes('GET', "/a.$ext") . request_bytes('GET', "/a.$ext"));
    my @r = read_responses($sock, 2);
    is($r[0]{status}, 500, ".pl-style script whose interpreter is $prog: 500");
    is($r[1] && $r[1]{status}, 500, '... and the connection goes on');
    ok($v->wait_log(qr/\Q${\ $v->root}\E\/a\.$ext: cannot execute \Q$prog\E: $err$/m), "... logged: $err");
}

# In thread mode a .plx gets 503 when its interpreter threads stay busy
# past queue_timeout: one thread held by a script until a file appears.
sub thread_queue_ok {
    my $q = PlxdTest->start(
        files    => { 'hold.plx' => <<'EOF' },
open my $f, '>', "$ENV{DOCUMENT_ROOT}/holding" or die; close $f;
my $until = time + 60;
select(undef, undef, undef, 0.02) until -e "$ENV{DOCUMENT_ROOT}/release" || time > $until;
print "Content-Type: text/plain\n\nheld\n";
EOF
        handlers => { '.plx' => 'perl' },
        sections => { perl => { workers => 1, queue_timeout => '1s' } },
    );
    my $held = $q->connect;
    $held->syswrite(request_bytes('GET', '/hold.plx'));
    ok(wait_for(sub { -e $q->root . '/holding' }), '... a thread is held');
    my $sock = $q->connect;
    $sock->syswrite(request_bytes('GET', '/hold.plx'));
    my @r = read_responses($sock, 1, timeout => 60);
    is($r[0] && $r[0]{status}, 503, '.plx in thread mode: no interpreter thread became free: 503');
    is($r[0] && $r[0]{headers}{'retry-after'}, 1, '... with Retry-After: 1');
    ok($q->wait_log(qr/\Q${\ $q->root}\E\/hold\.plx: no perl worker became free \(queue_timeout passed\): answered 503$/m),
        '... and the request answered 503');
    write_file($q->root . '/release', '');
    my @h = read_responses($held, 1, timeout => 60);
    is($h[0] && $h[0]{body}, "held\n", '... the held request is answered once released');
}

# A .plx when no worker can be started: the first request makes the
# preload file die (a flag file), its worker retires after it
# (max_requests = 1) and no replacement starts; the next request waits
# queue_timeout and gets 503 with Retry-After.
my $w = PlxdTest->start(
    files    => { 'flag.plx' => qq{open my \$f, '>', "\$ENV{DOCUMENT_ROOT}/flag" or die; print "Content-Type: text/plain\\n\\nset\\n";\n},
                  'preload.pl' => qq{use File::Basename; die "flag set: no more workers\\n" if -e dirname(__FILE__) . '/flag'; 1;\n} },
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, max_requests => 1, queue_timeout => '1s',
                            preload => 'root/preload.pl' } },
);
{
    my $sock = $w->connect;
    $sock->syswrite(request_bytes('GET', '/flag.plx') . request_bytes('GET', '/flag.plx'));
    my @r = read_responses($sock, 2, timeout => 60);
    is($r[0]{status}, 200, '.plx: the request that sets the flag is served');
    if (thread_mode()) {
        # The preload ran once, in the parent interpreter, and max_requests
        # does not apply (doc/perl.md, isolation modes): the thread serves on.
        is($r[1] && $r[1]{status}, 200, '.plx in thread mode: the interpreter thread serves on');
        thread_queue_ok();
        last;
    }
    is($r[1] && $r[1]{status}, 503, '.plx: no worker could be started: 503');
    is($r[1] && $r[1]{headers}{'retry-after'}, 1, '... with Retry-After: 1');
    ok($w->wait_log(qr/perl: .*flag set: no more workers/), '... the worker that could not start is logged');
    ok($w->wait_log(qr/\Q${\ $w->root}\E\/flag\.plx: no perl worker became free \(queue_timeout passed\): answered 503$/m),
        '... and the request answered 503');
}

done_testing;
