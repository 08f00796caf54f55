# Edges of the response path found by testing from outside: a timeout
# while the request body still arrives, HEAD through a local redirect, a
# body with a local redirect, a header block that the connection cannot
# hold, stdout closed while the script runs on, an empty Content-Length with
# output past it, a Location with a fragment, and an idle worker that died.
use strict;
use warnings;
use Test::More;
use IO::Select;
use Time::HiRes qw(time);
use PlxdRaw qw(read_responses request_bytes responses);
use PlxdServer ();
use PlxdTest qw(wait_for);

my %files = (
    'hello.html'     => "hello\n",
    'hello.pl'       => qq{print "Content-Type: text/plain\\r\\n\\r\\nhello from pl\\n";\n},
    'hello.plx'      => qq{print "Content-Type: text/plain\\r\\n\\r\\nhello from plx\\n";\n},
    'noread.pl'      => qq{sleep 30; print "Content-Type: text/plain\\r\\n\\r\\nlate\\n";\n},
    'to_pl.pl'       => qq{print "Location: /hello.pl\\r\\n\\r\\n";\n},
    'to_plx.pl'      => qq{print "Location: /hello.plx\\r\\n\\r\\n";\n},
    'to_pl.plx'      => qq{print "Location: /hello.pl\\r\\n\\r\\n";\n},
    'frag.pl'        => qq{print "Location: /hello.html#top\\r\\n\\r\\n";\n},
    'big.pl'         => q{my ($n) = $ENV{QUERY_STRING} =~ /(\d+)/; print "Content-Type: text/plain\r\nX-Big: ", "a" x $n, "\r\n\r\nbody\n";} . "\n",
    'cl0.pl'         => qq{print "Content-Type: text/plain\\r\\nContent-Length: 0\\r\\n\\r\\nEXTRA";\n},
    'closelate.pl'   => q{$| = 1; print "Content-Type: text/plain\r\n\r\nfirst\n"; close STDOUT; sleep 30;} . "\n",
    'pid.plx'        => qq{print "Content-Type: text/plain\\r\\n\\r\\n\$\$\\n";\n},
);
$files{'big.plx'} = $files{'big.pl'};
$files{'cl0.plx'} = $files{'cl0.pl'};

my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    # The scripts' header limit above what a connection holds, so that the
    # connection's memory is what binds (a header block too large for it).
    sections => { cgi => { timeout => '2s', linger => '1s', max_children => 2,
                           max_script_header_size => '1M' },
                  perl => { workers => 1, max_script_header_size => '1M' } },
);

sub post {
    my ($path, $len, %o) = @_;
    my $sock = $s->connect;
    $sock->syswrite("POST $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: $len\r\n\r\n");
    my $body = 'b' x $len;
    my $sel = IO::Select->new($sock);
    my $sent = 0;
    # Write what the socket takes; stop when plxd answers (it may refuse the rest).
    $sock->blocking(0);
    my $got = '';
    my $until = time + ($o{timeout} // 30);
    while (time < $until) {
        if ($sent < $len) {
            my $n = syswrite($sock, $body, $len - $sent, $sent);
            $sent += $n if $n;
        }
        if ($sel->can_read(0.05)) {
            my $n = sysread($sock, my $buf, 65536);
            last unless $n;
            $got .= $buf;
        }
    }
    return $got;
}

# A process below plxd that runs NAME, or one that has ended and is not
# reaped yet (a zombie holds its max_children slot until plxd reaps it).
sub script_left {
    my ($name) = @_;
    my %below = PlxdServer::descendants($s->pid);
    for my $pid (keys %below) {
        my ($state) = PlxdServer::_stat_fields($pid);
        return 1 if defined $state && $state eq 'Z';
        open my $fh, '<', "/proc/$pid/cmdline" or next;
        local $/;
        return 1 if (<$fh> // '') =~ /\Q$name\E/;
    }
    return 0;
}

# Waits until every CGI script plxd started has ended and been reaped: a
# max_children slot is given back only then, which on a loaded machine may
# come after the script's response.
sub scripts_reaped {
    return wait_for(sub { !script_left('.pl') });
}

# ---- a timeout while the body still arrives --------------------------------
{
    my $t0 = time;
    my $got = post('/noread.pl', 200_000, timeout => 20);
    like($got, qr{^HTTP/1\.1 504 }, 'a .pl that reads no body and runs past timeout: 504');
    ok(time - $t0 < 15, sprintf('... soon after the timeout (%.1f s)', time - $t0));
    # Its slot is free again once plxd has seen it end (killed at the timeout,
    # reaped when its pidfd says so, which on a loaded machine may come after
    # the 504): then max_children (2) requests at once are served.
    ok(wait_for(sub { !script_left('noread.pl') }), '... the timed-out script is ended and reaped');
    my @socks = map { my $c = $s->connect; $c->syswrite(request_bytes('GET', '/hello.pl', 'Connection: close')); $c } 1 .. 2;
    my $ok = 0;
    for my $c (@socks) { my ($r) = read_responses($c, 1); $ok++ if $r && $r->{status} == 200 }
    is($ok, 2, '... and its max_children slot is free again');
}

# ---- HEAD through a local redirect -----------------------------------------
for my $from ('/to_pl.plx', '/to_pl.pl', '/to_plx.pl') {
    my $sock = $s->connect;
    $sock->syswrite(request_bytes('HEAD', $from) . request_bytes('GET', '/hello.html'));
    my @r = read_responses($sock, 2, head => [0]);
    is($r[0]{status}, 200, "HEAD $from (a local redirect): 200");
    is($r[0]{body}, '', '... ending at its headers');
    is($r[1]{body}, "hello\n", '... and the next request on the connection parses');
}

# ---- a request body and a local redirect ------------------------------------
for my $from ('/to_pl.pl', '/to_plx.pl') {
    my $ok = 0;
    for (1 .. 6) {
        scripts_reaped();    # the redirect and its target take two slots
        my $got = post($from, 100_000);
        $ok++ if $got =~ m{^HTTP/1\.1 200 .*hello from}s;
    }
    is($ok, 6, "POST of 100 KB to $from: the redirect target answers, every time");
}

# ---- a header block too large for the connection ----------------------------
for my $ext ('pl', 'plx') {
    is($s->get("/big.$ext?20000")->{status}, 200, ".$ext: a 20 KB header block is sent");
    # The connection holds 32 KB at the default max_header_size (8K).
    my $res = $s->get("/big.$ext?200000");
    is($res->{status}, 500, ".$ext: a 200 KB one, more than the connection holds: 500");
    ok($s->wait_log(qr/big\.$ext: answered 500: header block too large for the connection's memory/),
        '... logged');
}

# ---- stdout closed while the script runs on ----------------------------------
{
    my $t0 = time;
    my $sock = $s->connect;
    $sock->syswrite(request_bytes('GET', '/closelate.pl'));
    my ($r) = read_responses($sock, 1, timeout => 20);
    is($r->{body}, "first\n", 'a .pl that closes stdout and runs on: its response ends there');
    ok(time - $t0 < 10, sprintf('... without waiting for the script (%.1f s)', time - $t0));
    ok($s->wait_log(qr/closelate\.pl: still running \d+ ms after its output ended; ended it/),
        '... which is ended after linger');
}

# ---- Content-Length: 0 with output past it --------------------------------------
for my $ext ('pl', 'plx') {
    my $raw = $s->raw(request_bytes('GET', "/cl0.$ext") . request_bytes('GET', '/hello.html'), 10);
    like($raw, qr{^HTTP/1\.1 200 .*Content-Length: 0\r\n}s, ".$ext: Content-Length 0 and more output: the empty body");
    unlike($raw, qr/EXTRA|hello\n/, '... nothing else, and the connection is not reused');
    my @r = responses($raw);
    ok(@r == 1 && $r[0]{body} eq '', '... one response, framed exactly');
    ok($s->wait_log(qr/cl0\.$ext: printed more than the 0 bytes its Content-Length announced; connection closed/),
        '... logged');
}

# ---- a client that shuts down its sending side --------------------------------
# Taken as gone while a script runs (doc/security.md); a static file is
# answered before anyone looks. The script runs until its timeout (2 s),
# so the half-close always comes while it runs (a script that answers at
# once could be answered before plxd reads the end of the request).
{
    for my $path ('/noread.pl', '/hello.html') {
        my $sock = $s->connect;
        $sock->syswrite(request_bytes('GET', $path));
        shutdown($sock, 1);
        my $got = '';
        my $sel = IO::Select->new($sock);
        while ($sel->can_read(20)) { last unless sysread($sock, my $b, 65536); $got .= $b }
        if ($path =~ /\.pl$/) {
            is($got, '', "a half-closed client of $path: taken as gone, no answer");
        } else {
            like($got, qr{^HTTP/1\.1 200 }, "a half-closed client of $path: answered");
            is(scalar(my @r = responses($got)), 1, '... one response, framed exactly');
        }
    }
}

# ---- a Location with a fragment ----------------------------------------------------
scripts_reaped();    # the half-closed client's script, ended, holds its slot until reaped
is($s->get('/frag.pl')->{content}, "hello\n", 'a local redirect to PATH#fragment serves PATH');

# ---- an idle worker that died --------------------------------------------------------
{
    my ($pid) = $s->get('/pid.plx')->{content} =~ /^(\d+)/;
    ok($pid && kill('KILL', $pid), "the idle worker ($pid) is killed from outside");
    ok($s->wait_log(qr/perl worker $pid died while idle: replacing it/, 20), '... plxd sees it while idle');
    my ($new) = $s->get('/pid.plx')->{content} =~ /^(\d+)/;
    isnt($new, $pid, "... and the next request is served by its replacement ($new)");
    unlike($s->error_log, qr/perl worker $pid was gone/, '... found before a request was sent to it');
    # Reaped: no zombie is left under plxd.
    ok(wait_for(sub { !-e "/proc/$pid" || !(`cat /proc/$pid/stat 2>/dev/null` =~ /^\d+ \(.*\) Z /) }, 20),
        '... and reaped');
}

done_testing;
