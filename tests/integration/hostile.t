# Hostile clients: plxd keeps serving while attackers hold its connections,
# trickle headers, push huge bodies or flood a busy script handler. The
# attackers connect from their own loopback addresses (127.0.0.2 and up;
# Linux routes 127/8 to lo) and per_ip_connections stays 0, so no per-IP
# limit is what saves plxd; a probe from 127.0.0.1 must get the whole of a
# static file within 5 s during every attack.
#
# 1. Hundreds of idle connections (nothing sent, or half a request line)
#    cost a thread each but starve nobody under max_connections. Past it,
#    a new connection gets 503 with Retry-After or is closed at once (never
#    a hang), a client connected before the flood is still served, and
#    header_timeout frees the slots.
# 2. Slowloris (a header byte a second) is cut by plxd's header_timeout,
#    although the trickle keeps libmicrohttpd's idle timer from firing.
# 3. A 1 GB body, Content-Length or chunked, to a .pl and a .plx that never
#    read it: 413, or the connection closed at max_body; with max_body large
#    enough it is streamed to the script or spooled to a temp file, never
#    kept in plxd's memory (its RSS stays put), and the temp file is gone
#    afterwards.
# 4. More clients of a busy .plx than [perl] workers + queue: the excess
#    get 503 with Retry-After at once, the queued ones complete, and .plx is
#    served normally afterwards.
# After each case plxd's descriptors, threads and children return to what
# they were before it.
#
# On a loaded machine: every bound ("within 5 s", "at once") is far below
# the deadline that would end the same wait if plxd were starved or hung
# (15 s or more: each server sets its deadlines so), and nothing is ordered
# by a sleep: the busy .plx holds its worker until the test releases it.
use strict;
use warnings;
use Test::More;
use IO::Select;
use IO::Socket::IP;
use Time::HiRes qw(time);
use POSIX qw(EAGAIN EWOULDBLOCK EINTR);
use PlxdTest qw(wait_for read_file);
use PlxdRaw qw(responses);

$SIG{PIPE} = 'IGNORE';

# ---- plxd's process, from /proc -----------------------------------------------
sub status_kb {
    my ($pid, $key) = @_;
    my ($v) = read_file("/proc/$pid/status") =~ /^$key:\s+(\d+)/m;
    return $v // 0;
}
sub rss_mb { return status_kb($_[0], 'VmRSS') / 1024 }
sub threads { return status_kb($_[0], 'Threads') }
sub fds { return PlxdTest::fds_besides_cache($_[0], $_[1]) }
sub children {
    my ($ppid) = @_;
    return scalar grep { read_file($_) =~ /^\d+ \(.*\) \S+ (\d+) / && $1 == $ppid }
        glob '/proc/[0-9]*/stat';
}
# Descriptors of pid open on files under dir (spooled bodies).
sub fds_in {
    my ($pid, $dir) = @_;
    return scalar grep { (readlink($_) // '') =~ /^\Q$dir\E\// } glob "/proc/$pid/fd/*";
}

sub usage {
    my ($s) = @_;
    return { fds => fds($s->pid, $s->root), threads => threads($s->pid), children => children($s->pid) };
}

# plxd's usage once it is quiet: the same for half a second (the thread of
# a connection just closed may still be ending).
sub quiet {
    my ($s) = @_;
    my ($last, $same) = ('', 0);
    my $now;
    wait_for(sub {
        $now = usage($s);
        my $key = join ',', map { "$_=$now->{$_}" } sort keys %$now;
        $same = $key eq $last ? $same + 1 : 0;
        $last = $key;
        $same >= 5;
    }, 10);
    return $now;
}

# Once an attack is over, plxd must come back to what it had before it:
# polled, since connection threads and children end asynchronously.
sub settles {
    my ($s, $before, $what) = @_;
    my $now;
    wait_for(sub {
        $now = usage($s);
        !grep { $now->{$_} > $before->{$_} } keys %$before;
    }, 60);
    for (sort keys %$before) {
        ok($now->{$_} <= $before->{$_}, "$what: plxd's $_ back to $before->{$_} ($now->{$_})");
    }
}

# ---- the probe -----------------------------------------------------------------
my $probe_body = join '', map { sprintf "probe line %05d\n", $_ } 1 .. 1000;
my $BOUND = 5;    # seconds: "at once", for the probe and every refusal

# GET /probe.txt from 127.0.0.1, on a new connection or on sock (kept
# alive). Returns '' when the whole file came back with 200 within $BOUND
# seconds, or what went wrong.
sub probe_failure {
    my ($s, $sock) = @_;
    my $t0 = time;
    $sock //= IO::Socket::IP->new(PeerHost => $s->host, PeerPort => $s->port,
        LocalHost => '127.0.0.1', Timeout => $BOUND) or return "connect: $@";
    $sock->syswrite("GET /probe.txt HTTP/1.1\r\nHost: plxd.test\r\n\r\n") or return "write: $!";
    my $sel = IO::Select->new($sock);
    my $raw = '';
    while (time - $t0 < $BOUND) {
        my $end = index $raw, "\r\n\r\n";
        last if $end >= 0 && $raw =~ /^Content-Length: (\d+)\r$/mi && length $raw >= $end + 4 + $1;
        next unless $sel->can_read($BOUND - (time - $t0));
        last unless sysread $sock, $raw, 65536, length $raw;
    }
    my $took = time - $t0;
    my ($r) = responses($raw);
    return sprintf('no answer in %.2f s', $took) unless $r;
    return "status $r->{status}" unless $r->{status} == 200;
    return sprintf('%d of %d bytes', length $r->{body}, length $probe_body)
        unless $r->{body} eq $probe_body;
    return sprintf('took %.2f s', $took) if $took > $BOUND;
    return '';
}

sub probe_ok {
    my ($s, $what) = @_;
    my $why = probe_failure($s);
    ok($why eq '', "$what: the probe from 127.0.0.1 is answered in full within $BOUND s")
        or diag($why);
}

# ---- attackers -----------------------------------------------------------------
# A connection from 127.0.0.(2 + n % spread).
sub attacker {
    my ($s, $n, $spread) = @_;
    my $src = '127.0.0.' . (2 + $n % ($spread // 4));
    return IO::Socket::IP->new(PeerHost => $s->host, PeerPort => $s->port,
        LocalHost => $src, Timeout => 30) // die "connect from $src: $@";
}

# Whether plxd closed sock (EOF or reset), waiting up to timeout seconds.
sub closed_by_plxd {
    my ($sock, $timeout) = @_;
    my $sel = IO::Select->new($sock);
    my $until = time + $timeout;
    do {
        if ($sel->can_read($until - time > 0 ? $until - time : 0)) {
            my $n = sysread $sock, my $buf, 4096;
            return 1 if !$n;
        }
    } while (time < $until);
    return 0;
}

my %files = ('probe.txt' => $probe_body);

# ==== 1. idle connections ========================================================
{
    # The idle connections are held until the test closes them (a starved
    # probe would wait that long), not cut by header_timeout meanwhile.
    my $s = PlxdTest->start(files => \%files, server => { header_timeout => '60s' });
    probe_ok($s, 'before any attack');
    my $before = quiet($s);
    my $count = 400;
    my @idle = map { attacker($s, $_) } 1 .. $count;
    # Half send nothing, half the start of a request line.
    $idle[$_]->syswrite("GET /probe.txt HT") for grep { $_ % 2 } 0 .. $#idle;
    ok(wait_for(sub { fds($s->pid, $s->root) >= $before->{fds} + $count }, 60),
        "$count idle connections from 4 addresses are all held by plxd");
    probe_ok($s, "$count idle connections") for 1 .. 5;
    ok(!grep({ closed_by_plxd($_, 0) } @idle), 'the idle connections are still open');
    close $_ for @idle;
    settles($s, $before, 'idle connections');
    probe_ok($s, 'after the idle connections');
    $s->stop;
}

# Past max_connections. plxd's answer to a flood of idle connections is
# the limit itself: a connection accepted past it that sends a request gets
# 503 with Retry-After (up to a margin of max_connections / 8, at least
# 16), one past the margin is closed at once by libmicrohttpd, nobody waits
# on a hang, and header_timeout gives the slots back. Clients connected
# before the flood are within the limit and keep being served.
# (per_ip_connections is the defence against one address taking them all.)
# header_timeout (15 s) is three times the bound for "at once": a new
# connection that waited for a slot would wait until it.
{
    my $s = PlxdTest->start(files => \%files,
        server => { max_connections => 32, header_timeout => '15s', connection_timeout => '60s' });
    my $before = quiet($s);
    my $kept = IO::Socket::IP->new(PeerHost => $s->host, PeerPort => $s->port,
        LocalHost => '127.0.0.1') or die "connect: $@";
    is(probe_failure($s, $kept), '', 'a client connected before the flood is served');
    my @idle = map { attacker($s, $_) } 1 .. 40;
    ok(wait_for(sub { fds($s->pid, $s->root) >= $before->{fds} + 41 }),
        '40 idle connections, max_connections 32');
    is(probe_failure($s, $kept), '', '... and still served, on its kept-alive connection');
    my $t0 = time;
    my $raw = $s->raw("GET /probe.txt HTTP/1.1\r\nHost: x\r\n\r\n", 2 * $BOUND);
    like($raw, qr{^HTTP/1\.1 503 }, 'past max_connections: 503');
    like($raw, qr/^Retry-After: \d+\r$/m, '... with Retry-After');
    is(scalar(my @r503 = responses($raw)), 1, '... one response, framed exactly');
    ok(time - $t0 < $BOUND, '... at once');
    push @idle, map { attacker($s, $_) } 1 .. 20;
    $t0 = time;
    $raw = $s->raw("GET /probe.txt HTTP/1.1\r\nHost: x\r\n\r\n", 2 * $BOUND);
    ok(time - $t0 < $BOUND && ($raw eq '' || $raw =~ /^HTTP\/1\.1 503 /),
        'past the margin (48) too: closed or 503 at once, no hang');
    ok(scalar(my @rm = responses($raw)) <= 1, '... framed exactly');
    ok(wait_for(sub { probe_failure($s) eq '' }, 60),
        'header_timeout closes the idle connections and the probe is served again');
    ok(!grep({ !closed_by_plxd($_, 1) } @idle), '... and every idle one is closed');
    close $_ for @idle;
    settles($s, $before, 'past max_connections');
    $s->stop;
}

# ==== 2. slowloris ===============================================================
# header_timeout (15 s) is three times the probe's bound: a probe starved
# by the trickling connections would wait until they are cut.
{
    my $header_timeout = 15;
    my $s = PlxdTest->start(files => \%files, server => { header_timeout => "${header_timeout}s" });
    my $before = quiet($s);
    my @slow = map { attacker($s, $_, 3) } 1 .. 30;
    $_->syswrite("GET /probe.txt HTTP/1.1\r\nHost: x\r\nX-Slow: ") for @slow;
    my $t0 = time;
    my (%closed_at, $probes_failed);
    # One byte a second on every connection still open, probing between.
    while (time - $t0 < $header_timeout + 20 && keys %closed_at < @slow) {
        for my $i (grep { !exists $closed_at{$_} } 0 .. $#slow) {
            if (closed_by_plxd($slow[$i], 0)) {
                $closed_at{$i} = time - $t0;
            } else {
                $slow[$i]->syswrite('x');
            }
        }
        my $why = probe_failure($s);
        $probes_failed .= "$why; " if $why ne '';
        select undef, undef, undef, 1 - (time - $t0 - int(time - $t0));
    }
    ok(!$probes_failed, "slowloris: every probe answered in full within $BOUND s")
        or diag($probes_failed);
    is(scalar keys %closed_at, scalar @slow, 'plxd closed every trickling connection');
    # Not before header_timeout (and within 20 s after it, or the loop above
    # would not have seen it close).
    my @early = grep { $_ < $header_timeout - 0.5 } values %closed_at;
    ok(!@early, "at header_timeout ($header_timeout s)") or diag("closed at @early s");
    like($s->error_log, qr/from 127\.0\.0\.[234]: no complete request headers within header_timeout/,
        '... and logged');
    close $_ for @slow;
    settles($s, $before, 'slowloris');
    probe_ok($s, 'after slowloris');
    $s->stop;
}

# ==== 3. huge bodies ============================================================
# The body is made as it is sent, 256 KiB at a time, from 127.0.0.2;
# every 64 MiB plxd's RSS and its descriptors on tmp_dir are sampled, and
# every 256 MiB the probe is sent. Returns what happened.
my $block = 'x' x (256 * 1024);
sub upload {
    my ($s, $path, $size, %o) = @_;
    my $tmp = $s->dir . '/spool';
    my %u = (sent => 0, raw => '', rss_peak => rss_mb($s->pid), spool_seen => 0, probes => '');
    my $sock = attacker($s, 0);
    $sock->blocking(0);
    my $out = "POST $path HTTP/1.1\r\nHost: plxd.test\r\nConnection: close\r\n"
        . ($o{chunked} ? "Transfer-Encoding: chunked\r\n" : "Content-Length: $size\r\n") . "\r\n";
    my ($off, $ended, $progress) = (0, 0, time);
    my $sel = IO::Select->new($sock);
    my $t0 = time;
    while (!$u{closed} && !$u{error}) {
        if ($off == length $out) {
            last if $ended;
            if ($u{sent} < $size) {
                $out = $o{chunked} ? sprintf("%x\r\n%s\r\n", length $block, $block) : $block;
                $u{sent} += length $block;
                if ($u{sent} % (64 << 20) == 0) {
                    my $rss = rss_mb($s->pid);
                    $u{rss_peak} = $rss if $rss > $u{rss_peak};
                    $u{spool_seen} ||= fds_in($s->pid, $tmp);
                }
                if ($u{sent} % (256 << 20) == 0) {
                    my $why = probe_failure($s);
                    $u{probes} .= "at $u{sent}: $why; " if $why ne '';
                }
            } else {
                $out = $o{chunked} ? "0\r\n\r\n" : '';
                $ended = 1;
            }
            $off = 0;
            next;
        }
        my ($r, $w) = IO::Select->select($sel, $sel, undef, 1);
        if ($r && @$r) {
            my $n = sysread $sock, my $buf, 65536;
            $u{raw} .= $buf if $n;
            $u{closed} = 1 if defined $n && $n == 0;
            $u{error} = "$!" if !defined $n && $! != EAGAIN && $! != EINTR;
        }
        if ($w && @$w && !$u{closed}) {
            my $n = syswrite $sock, $out, length($out) - $off, $off;
            if ($n) {
                $off += $n;
                $progress = time;
            } elsif ($! != EAGAIN && $! != EWOULDBLOCK && $! != EINTR) {
                $u{error} = "$!";
            }
        }
        if (time - $progress > 20) {
            $u{error} = 'stalled: plxd read nothing for 20 s';
        }
    }
    $u{unsent} = $size - $u{sent} + length($out) - $off;
    $sock->blocking(1);
    $u{raw} .= PlxdTest::read_until_closed($sock, 30) unless $u{closed} || $u{error};
    ($u{response}) = responses($u{raw});
    $u{took} = time - $t0;
    $u{rss_after} = rss_mb($s->pid);
    return \%u;
}

my $ignore = <<'EOF';
my $body = "ignored $ENV{CONTENT_LENGTH}\n";
print "Content-Type: text/plain\nContent-Length: ", length($body), "\n\n", $body;
EOF
my $gig = 1 << 30;
my $mb = $gig >> 20;
for my $max_body ('64M', '2G') {
    my $s = PlxdTest->start(
        files    => { %files, 'ignore.pl' => $ignore, 'ignore.plx' => $ignore },
        handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
        sections => { perl => { workers => 1 } },
        server   => { max_body => $max_body, tmp_dir => 'spool' },
    );
    my $tmp = $s->dir . '/spool';
    mkdir $tmp or die "mkdir $tmp: $!";
    # Warm: the .plx compiled, each handler's first request done.
    is($s->get('/ignore.pl')->{content}, "ignored \n", "max_body $max_body: the .pl answers");
    is($s->get('/ignore.plx')->{content}, "ignored \n", "max_body $max_body: the .plx answers");
    for my $path ('/ignore.pl', '/ignore.plx') {
        for my $chunked (0, 1) {
            my $what = "max_body $max_body, $mb MiB " . ($chunked ? 'chunked' : 'Content-Length')
                . " to $path";
            my $before = quiet($s);
            my $rss = rss_mb($s->pid);
            my $u = upload($s, $path, $gig, chunked => $chunked);
            my $r = $u->{response};
            note(sprintf '%s: %d MiB sent in %.1f s, RSS %.0f -> peak %.0f -> %.0f MiB',
                $what, $u->{sent} >> 20, $u->{took}, $rss, $u->{rss_peak}, $u->{rss_after});
            if ($max_body eq '64M' && !$chunked) {
                is($r && $r->{status}, 413, "$what: 413 at once");
                ok($u->{unsent} > $gig / 2, '... before the body is read');
            } elsif ($max_body eq '64M') {
                is($r && $r->{status}, 413, "$what: 413 once it passes max_body")
                    or diag($u->{raw}, $u->{error});
                ok($u->{closed} || $u->{error}, '... and the connection closed');
                ok($u->{unsent} > $gig / 2, '... when the body passes max_body')
                    or diag("unsent $u->{unsent}");
            } else {
                is($r && $r->{status}, 200, "$what: 200 after the whole body")
                    or diag($u->{raw}, $u->{error});
                is($r && $r->{body}, "ignored $gig\n", '... the script saw its CONTENT_LENGTH');
                is($u->{unsent}, 0, '... every byte was taken');
                # Only a .pl with a Content-Length gets its body streamed.
                if ($path eq '/ignore.pl' && !$chunked) {
                    ok(!$u->{spool_seen}, '... streamed to the script, not spooled');
                } else {
                    ok($u->{spool_seen}, "... spooled to a temp file in tmp_dir");
                }
            }
            ok($u->{rss_peak} - $rss < 20, sprintf('%s: RSS up %.1f MiB at most', $what,
                $u->{rss_peak} - $rss));
            ok($u->{rss_after} - $rss < 20, '... and after');
            ok(!$u->{probes}, '... the probe answered meanwhile') or diag($u->{probes});
            settles($s, $before, $what);
            ok(wait_for(sub { !fds_in($s->pid, $tmp) }, 10), '... no temp file left open');
            opendir my $dh, $tmp or die;
            is(scalar(grep { !/^\.\.?$/ } readdir $dh), 0, '... none left in tmp_dir');
        }
    }
    is($s->get('/ignore.plx')->{content}, "ignored \n", "max_body $max_body: the .plx answers on");
    like($s->error_log, qr/grew past max_body/, 'a chunked body past max_body is logged')
        if $max_body eq '64M';
    $s->stop;
}

# ==== 4. more clients than workers + queue =======================================
# A client per path, each sending "GET path" at once.
sub send_all {
    my ($s, @paths) = @_;
    my @clients = map { { sock => attacker($s, $_), raw => '', t0 => time } } 0 .. $#paths;
    $clients[$_]{sock}->syswrite("GET $paths[$_] HTTP/1.1\r\nHost: plxd.test\r\nConnection: close\r\n\r\n")
        for 0 .. $#paths;
    return @clients;
}

# Reads the clients' answers, probing every half second, until n of them
# have their answer (or 60 s pass). Returns the probes' failures; each
# client answered gets r (the response) and took (seconds from its request
# to its end).
sub collect {
    my ($s, $n, @clients) = @_;
    my %of = map { ($_->{sock} => $_) } @clients;
    my $sel = IO::Select->new(map { $_->{sock} } grep { !defined $_->{took} } @clients);
    my $done = grep { defined $_->{took} } @clients;
    my ($probes, $t0) = ('', time);
    my $next_probe = $t0;
    while ($done < $n && time - $t0 < 60) {
        for my $sock ($sel->can_read(0.05)) {
            my $got = sysread $sock, my $buf, 65536;
            if ($got) {
                $of{$sock}{raw} .= $buf;
                next;
            }
            $of{$sock}{took} = time - $of{$sock}{t0};
            $sel->remove($sock);
            $done++;
        }
        if (time >= $next_probe) {
            my $why = probe_failure($s);
            $probes .= sprintf('at %.1f s: %s; ', time - $t0, $why) if $why ne '';
            $next_probe = time + 0.5;
        }
    }
    ($_->{r}) = responses($_->{raw}) for grep { defined $_->{took} && !$_->{r} } @clients;
    return $probes;
}

{
    # hold.plx?MARK&RELEASE: creates MARK, then holds its worker until
    # RELEASE exists (60 s at most); without a query it answers at once.
    my $hold = <<'EOF';
my ($mark, $release) = split /&/, $ENV{QUERY_STRING} // '';
if ($mark) { open my $fh, '>', $mark or die "$mark: $!"; close $fh }
my $until = time + 60;
select undef, undef, undef, 0.02 until !$release || -e $release || time > $until;
print "Content-Type: text/plain\n\nreleased\n";
EOF
    my $queue_timeout = 15;    # three times the bound for "at once"
    my $s = PlxdTest->start(
        files    => { %files, 'hold.plx' => $hold },
        handlers => { '.plx' => 'perl' },
        sections => { perl => { workers => 1, queue => 2, queue_timeout => "${queue_timeout}s" } },
    );
    is($s->get('/hold.plx')->{content}, "released\n", 'hold.plx answers');
    my $before = quiet($s);

    # One runs, held; of nine more, two wait and seven are refused, all
    # while the worker is held; once it is released, the three complete.
    my ($mark, $release) = ($s->dir . '/running', $s->dir . '/release');
    my @c = send_all($s, "/hold.plx?$mark&$release");
    ok(wait_for(sub { -e $mark }), 'a request holds the only worker');
    push @c, send_all($s, ('/hold.plx') x 9);
    my $probes = collect($s, 7, @c);
    my @refused = grep { $_->{r} && $_->{r}{status} == 503 } @c;
    is(scalar @refused, 7, '10 clients, 1 worker, queue 2: seven get 503');
    ok(!grep({ ($_->{r}{headers}{'retry-after'} // '') !~ /^\d+$/ } @refused), '... with Retry-After');
    my @slow = grep { $_->{took} > $BOUND } @refused;
    ok(!@slow, '... at once') or diag(join ', ', map { sprintf '%.1f s', $_->{took} } @slow);
    PlxdTest::write_file($release, '');
    $probes .= collect($s, 10, @c);
    ok(!$probes, "... every probe answered in full within $BOUND s") or diag($probes);
    my @done = grep { $_->{r} && $_->{r}{status} == 200 } @c;
    is(scalar @done, 3, 'the running and the two queued requests complete');
    ok(!grep({ $_->{r}{body} ne "released\n" } @done), '... in full');

    # The worker held again: of five more clients three are refused at once
    # and two wait queue_timeout, then get 503 (the worker still held).
    ($mark, $release) = ($s->dir . '/running2', $s->dir . '/release2');
    my @busy = send_all($s, "/hold.plx?$mark&$release");
    ok(wait_for(sub { -e $mark }), 'a request holds the worker again');
    @c = send_all($s, ('/hold.plx') x 5);
    $probes = collect($s, 5, @c);
    ok(!$probes, "... and 5 more clients: every probe answered in full within $BOUND s")
        or diag($probes);
    @refused = grep { $_->{r} && $_->{r}{status} == 503 } @c;
    is(scalar @refused, 5, 'the others get 503');
    my @waited = sort { $a <=> $b } map { $_->{took} } @refused;
    my $shown = join ', ', map { sprintf '%.1f s', $_ } @waited;
    ok(@waited == 5 && $waited[2] < $BOUND, "... three at once ($shown)");
    ok(@waited == 5 && $waited[3] > $queue_timeout - 0.5,
        "... the last two after queue_timeout, $queue_timeout s ($shown)");
    PlxdTest::write_file($release, '');
    collect($s, 1, @busy);
    is($busy[0]{r} && $busy[0]{r}{status}, 200, 'the running one completes');

    settles($s, $before, 'busy .plx');
    is($s->get('/hold.plx')->{content}, "released\n", '.plx is served normally afterwards');
    probe_ok($s, 'after the busy .plx');
    $s->stop;
}

done_testing;
