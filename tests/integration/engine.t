# The engine: a fixed set of event threads carries every connection, so
# idle connections cost memory, not threads; plxd raises its open-files
# limit to what max_connections needs, and says so when it cannot.
use strict;
use warnings;
use Test::More;
use IO::Socket::IP;
use Time::HiRes qw(time);
use PlxdTest qw(wait_for);
use PlxdRaw qw(responses);

sub status_field {
    my ($pid, $name) = @_;
    open my $fh, '<', "/proc/$pid/status" or return 0;
    while (<$fh>) { return $1 if /^\Q$name\E:\s+(\d+)/ }
    return 0;
}
sub threads { status_field($_[0], 'Threads') }
sub rss_mb  { status_field($_[0], 'VmRSS') / 1024 }
sub fds     { my @fds = glob "/proc/$_[0]/fd/*"; scalar @fds }
sub soft_nofile {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/limits" or return 0;
    while (<$fh>) { return $1 if /^Max open files\s+(\d+)/ }
    return 0;
}

# A request on a connection of its own: its time in seconds, and whether it
# was answered with the file.
sub timed_get {
    my ($s) = @_;
    my $t0 = time;
    my $res = $s->get('/hello.html');
    return (time - $t0, $res->{status} == 200 && $res->{content} eq "hello\n");
}

sub idle_connections {
    my ($s, $count) = @_;
    my @socks;
    for my $i (1 .. $count) {
        # Spread over loopback addresses: no one source runs out of ports.
        my $sock = IO::Socket::IP->new(PeerHost => $s->host, PeerPort => $s->port,
            LocalHost => '127.0.0.' . (2 + $i % 50), Timeout => 30)
            or die "connection $i: $@";
        push @socks, $sock;
    }
    return @socks;
}

my %files = ('hello.html' => "hello\n");

# ---- 300 idle keep-alive connections: no thread each ---------------------------
{
    my $s = PlxdTest->start(files => \%files, server => { threads => 2 });
    my $before = threads($s->pid);
    my @keep = idle_connections($s, 300);
    # Each has had a request answered and is now kept alive, idle.
    for my $sock (@keep) {
        $sock->syswrite("GET /hello.html HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    my $answered = 0;
    for my $sock (@keep) {
        my $buf = '';
        my $until = time + 30;
        while ($buf !~ /\r\n\r\nhello\n/ && time < $until) {
            last unless sysread($sock, my $chunk, 4096);
            $buf .= $chunk;
        }
        my @r = responses($buf);
        $answered++ if @r == 1 && $r[0]{status} == 200 && $r[0]{body} eq "hello\n";
    }
    is($answered, 300, '300 keep-alive connections, each answered once');
    ok(fds($s->pid) >= 300, '... all still open in plxd (' . fds($s->pid) . ' descriptors)');
    my $now = threads($s->pid);
    ok($now < 40, "... with $now threads (fewer than 40; $before before)");
    is($now, $before, '... as many threads as before they came');
    close $_ for @keep;
    $s->stop;
}

# ---- 10,000 idle connections: memory, and a request still prompt ---------------
{
    # The client holds 10,000 sockets too: its soft limit goes up to its
    # hard one (plxd raises its own).
    my $want = 10500;
    chomp(my $hard = `sh -c 'ulimit -Hn'`);
    $hard = 1 << 20 if $hard eq 'unlimited';
    BAIL_OUT("the open-files hard limit ($hard) is below the $want this test needs: "
        . "raise it (ulimit -Hn) for the test suite") if $hard < $want;
    system('prlimit', "--pid=$$", "--nofile=$hard:$hard") == 0
        or BAIL_OUT("cannot raise the open-files soft limit to $hard");
    # A worker started after plxd's peak must not inherit it: max_rss sits
    # between a worker's own size and what plxd reaches holding the
    # connections (getrusage's ru_maxrss, kept across the exec of a
    # posix_spawn, would carry plxd's peak into every later worker).
    my $max_rss_mb = $ENV{PLXD_SANITIZED} ? 150 : 40;
    my $s = PlxdTest->start(files => { %files, 'pid.plx' => 'print "Content-Type: text/plain\n\n$$";' },
        handlers => { '.plx' => 'perl' },
        sections => { perl => { workers => 1, max_rss => "${max_rss_mb}M" } },
        server => { max_connections => 12000, header_timeout => '120s',
                    connection_timeout => '120s' });
    my $rss_before = rss_mb($s->pid);
    my @idle = idle_connections($s, 10000);
    # Each has begun a request, so that libmicrohttpd has given it a read
    # buffer (a connection that sent nothing costs less); in the sanitizer
    # build with a longer head, which takes plxd past its larger max_rss.
    my $begun = "GET /hello.html HTTP/1.1\r\n" . ($ENV{PLXD_SANITIZED} ? 'X-Pad: ' . ('p' x 24000) : '');
    $_->syswrite($begun) for @idle;
    ok(wait_for(sub { fds($s->pid) >= 10000 }, 60),
        '10,000 idle connections held by plxd (' . fds($s->pid) . ' descriptors)');
    my $rss = rss_mb($s->pid);
    # AddressSanitizer's shadow memory and redzones about double a heap.
    my $limit = $ENV{PLXD_SANITIZED} ? 400 : 200;
    ok($rss < $limit, sprintf('... in %.0f MB of RSS (under %d MB%s; %.0f MB before)', $rss,
        $limit, $ENV{PLXD_SANITIZED} ? ', sanitizer build' : '', $rss_before));
    my @times;
    my $ok = 0;
    for (1 .. 9) {
        my ($t, $good) = timed_get($s);
        push @times, $t;
        $ok += $good;
    }
    is($ok, 9, '... and requests are answered meanwhile');
    # Not starved by them: a bound for a loaded machine and the sanitizer
    # build, not a speed (bench/ measures that).
    my $median = (sort { $a <=> $b } @times)[4];
    ok($median < 1, sprintf('... within 1 s (median of 9: %.1f ms)', $median * 1000));
    ok(threads($s->pid) < 40, '... by the same few threads (' . threads($s->pid) . ')');
    close $_ for @idle;

    my $peak = status_field($s->pid, 'VmHWM') / 1024;
    ok($peak > $max_rss_mb, sprintf("plxd's peak (%.0f MB) is past the perl max_rss (%d MB)",
        $peak, $max_rss_mb));
    my $old = $s->get('/pid.plx')->{content};
    kill 'KILL', $old if $old =~ /^\d+$/;    # the next worker starts after plxd's peak
    my $new = wait_for(sub { my $r = $s->get('/pid.plx'); $r->{status} == 200 && $r->{content} ne $old ? $r->{content} : undef });
    ok($new, "a worker started after plxd's peak serves ($new)");
    my @pids = map { $s->get('/pid.plx')->{content} } 1 .. 3;
    is_deeply(\@pids, [ ($new) x 3 ], '... and is not retired for max_rss: its own peak is what counts');
    $s->stop;
}

# ---- RLIMIT_NOFILE ---------------------------------------------------------------
{
    # A soft limit below what max_connections needs is raised to it.
    my $s = PlxdTest->start(files => \%files, server => { max_connections => 3000 },
        prefix => [ 'prlimit', '--nofile=1024:20000' ]);
    ok(soft_nofile($s->pid) >= 3000, 'the soft open-files limit is raised for max_connections ('
        . soft_nofile($s->pid) . ')');
    unlike($s->error_log, qr/open files limited/, '... with nothing to say');
    $s->stop;

    # A hard limit below it: raised as far as it goes, and logged.
    my $t = PlxdTest->start(files => \%files, server => { max_connections => 3000 },
        prefix => [ 'prlimit', '--nofile=512:2048' ]);
    is(soft_nofile($t->pid), 2048, 'a hard limit too low: the soft limit goes up to it');
    ok($t->wait_log(qr/open files limited to 2048 \(RLIMIT_NOFILE\), \d+ wanted for 3\d\d\d connections/),
        '... and the log says so');
    $t->stop;
}

done_testing;
