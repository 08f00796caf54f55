#!/usr/bin/perl
# The master process (server/master.c): a serving process that dies (a .plt
# that crashes its interpreter, SIGSEGV, SIGKILL) under load is replaced on
# the same socket: no connection refused, only the requests in flight lost,
# the next answered within 1 s, its Perl workers and CGI children ended and
# started again; a serving process that crashes at start is restarted with a
# growing delay, and SIGTERM still stops the master; --no-master and
# [server] master = no run one process; a killed master takes the serving
# process with it.
use strict;
use warnings;
use Test::More;
use POSIX qw(WNOHANG _exit);
use Socket qw(PF_INET SOCK_STREAM inet_aton pack_sockaddr_in);
use Errno qw(ECONNREFUSED);
use File::Temp qw(tempdir);
use JSON::PP;
use IO::Socket::IP;
use Time::HiRes qw(time);
use PlxdTest qw(wait_for read_file write_file plxd_bin);
use PlxdServer;

my $sanitized = PlxdTest::read_file(PlxdTest::build_dir() . '/CMakeCache.txt')
    =~ /^PLXD_SANITIZE:BOOL=ON$/m;
# Under ASan a segfault is the sanitizer's report and exit 1; here it must be
# the signal, as in a normal build, and the report would fail the file.
my %env = $sanitized ? (env => { ASAN_OPTIONS => join ':', grep { length }
    ($ENV{ASAN_OPTIONS} // ''), 'handle_segv=0' }) : ();

sub mark {
    my ($kind) = @_;
    return "my (\$d) = \$ENV{SCRIPT_FILENAME} =~ m{^(.*)/};\n"
        . "open my \$f, '>', \"\$d/$kind.\$\$\" or die;\nclose \$f;\n"
        . "print \"Content-Type: text/plain\\n\\n\";\nsleep 600;\n";
}

my %files = (
    'hello.html' => "hi\n",
    # Reads through the pointer 1: the interpreter's thread, and so the
    # serving process, dies of SIGSEGV.
    'crash.plt' => "print \"Content-Type: text/plain\\n\\n\";\nmy \$x = unpack 'p', pack 'L!', 1;\n",
    'hello.plt' => "print \"Content-Type: text/plain\\n\\nplt\\n\";\n",
    # Long requests that hold a CGI child and a Perl worker at each crash.
    # Each leaves a file named for its process beside it.
    'sleep.pl' => "#!/usr/bin/perl\n" . mark('cgi'),
    'sleep.plx' => mark('plx'),
    'pid.plx' => "print \"Content-Type: text/plain\\n\\n\$\$\\n\";\n",
);

my $s = PlxdTest->start(
    files    => \%files,
    crashes  => 1,
    %env,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl', '.plt' => 'perl:thread' },
    sections => {
        perl          => { workers => 2 },
        'perl:thread' => { isolation => 'thread', workers => 2, inline_budget => 0 },
        status        => { path => '/status', allow => '127.0.0.1' },
    },
);
chmod 0755, $s->root . '/sleep.pl';

sub status_json {
    my $r = $s->get('/status?json');
    return $r->{status} == 200 ? decode_json($r->{content}) : undef;
}

# Perl workers (process mode) below pid.
sub workers_of {
    my ($pid) = @_;
    my %below = PlxdServer::descendants($pid);
    return grep { read_file("/proc/$_/cmdline") =~ /^plxd-perl-worker\0--plxd-worker/ } keys %below;
}

sub alive { my ($pid) = @_; my @f = PlxdServer::_stat_fields($pid); return @f && $f[0] ne 'Z' }

# ---- the load: 10 clients, a new connection per request, as ab -c 10 ----
my $dir = tempdir('plxd-master-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $stop = "$dir/stop";
my @clients;
for my $c (1 .. 10) {
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open my $out, '>', "$dir/client$c" or _exit(1);
        $out->autoflush(1);
        my $addr = pack_sockaddr_in($s->port, inet_aton('127.0.0.1'));
        # Bounded, in case the test dies without saying stop.
        for (my $n = 0; !-e $stop && $n < 200000; $n++) {
            my $t0 = time;
            socket(my $sock, PF_INET, SOCK_STREAM, 0) or _exit(2);
            if (!connect($sock, $addr)) {
                my $why = $! == ECONNREFUSED ? 'refused' : "connect:" . ($! + 0);
                printf $out "%.6f %.6f %s\n", $t0, time, $why;
                next;
            }
            syswrite $sock, "GET /hello.html HTTP/1.0\r\n\r\n";
            my $got = '';
            while (1) {
                my $rin = '';
                vec($rin, fileno($sock), 1) = 1;
                last unless select($rin, undef, undef, 30);
                my $k = sysread $sock, my $buf, 4096;
                last unless $k;
                $got .= $buf;
            }
            close $sock;
            my $ok = $got =~ m{^HTTP/1\.[01] 200 .*\r\n\r\nhi\n\z}s;
            printf $out "%.6f %.6f %s\n", $t0, time, $ok ? 'ok' : 'failed';
        }
        close $out;
        _exit(0);
    }
    push @clients, $pid;
}

sub records {
    my @r;
    for my $c (1 .. 10) {
        for (split /\n/, read_file("$dir/client$c")) {
            my ($t0, $t1, $what) = split ' ';
            push @r, { t0 => $t0, t1 => $t1, what => $what } if defined $what;
        }
    }
    return @r;
}

ok(wait_for(sub { (grep { $_->{what} eq 'ok' } records()) >= 200 }), 'the load is being served');
ok(wait_for(sub { workers_of($s->pid) == 2 }), 'two Perl workers');

my @crashes;
my $n = 0;
for my $how (qw(SIGSEGV SIGKILL crash.plt)) {
    $n++;
    my $old = $s->pid;
    # A CGI child and a Perl worker busy at the crash.
    my $cgi = $s->connect;
    $cgi->syswrite("GET /sleep.pl HTTP/1.0\r\n\r\n");
    my $plx = $s->connect;
    $plx->syswrite("GET /sleep.plx HTTP/1.0\r\n\r\n");
    my %below;
    ok(wait_for(sub {
        %below = PlxdServer::descendants($old);
        my @marks = map { m{/(cgi|plx)\.(\d+)$} ? [$1, $2] : () } glob($s->root . '/*.*');
        (grep { $_->[0] eq 'cgi' && $below{ $_->[1] } } @marks)
            && (grep { $_->[0] eq 'plx' && $below{ $_->[1] } } @marks);
    }), "$how: a CGI child and a busy Perl worker are running");
    my %before = PlxdServer::descendants($old);
    my $t_kill = time;
    my $t_seen = $t_kill;    # when the crash is known to have happened
    if ($how eq 'crash.plt') {
        # Raw: HTTP::Tiny would send a GET whose connection closed again.
        my $r = $s->raw("GET /crash.plt HTTP/1.0\r\n\r\n", 30);
        $t_seen = time;
        is($r, '', "$how: no response to the crashing request");
    } else {
        (my $sig = $how) =~ s/^SIG//;
        kill $sig, $old;
    }
    ok(wait_for(sub { !alive($old) }, 30), "$how: the serving process died");
    my $t_dead = time;
    my $new = $s->pid;
    ok($new && $new != $old, "$how: a new serving process ($new) replaced $old");
    ok(wait_for(sub { !grep { alive($_) } keys %before }, 10),
        "$how: nothing the old serving process started is left (workers, the CGI child)")
        or diag(join ' ', grep { alive($_) } keys %before);
    ok(wait_for(sub { workers_of($new) == 2 }), "$how: two Perl workers again");
    my $again = $s->get('/pid.plx');
    ok($again->{status} == 200 && $again->{content} =~ /^\d+$/ && !$before{ $again->{content} + 0 },
        "$how: .plx answered by a new worker");
    is($s->get('/hello.plt')->{content}, "plt\n", "$how: .plt answered again");
    close $cgi;
    close $plx;
    push @crashes, { how => $how, kill => $t_kill, seen => $t_seen, dead => $t_dead };
    # A serving process that dies within 2 s of being ready is restarted
    # after a growing delay: the next crash waits until it has been up longer.
    if ($n < 3) {
        ok(wait_for(sub { my $j = status_json(); $j && $j->{uptime_s} > 3 }), "$how: the new serving process has been up 3 s");
    }
}
ok(wait_for(sub { (grep { $_->{what} eq 'ok' && $_->{t0} > $crashes[-1]{dead} } records()) >= 200 }),
    'the load is served after the crashes');
write_file($stop, '');
waitpid $_, 0 for @clients;

my @r = records();
my @refused = grep { $_->{what} eq 'refused' } @r;
my @failed = grep { $_->{what} ne 'ok' } @r;
is(scalar @refused, 0, 'no connection was refused');
# A failure is one in flight: it started before the serving process was seen
# gone, and ended after the crash began.
my @not_in_flight = grep { my $f = $_; !grep { $f->{t0} <= $_->{dead} && $f->{t1} >= $_->{kill} } @crashes } @failed;
is(scalar @not_in_flight, 0, 'every failed request was in flight at a crash')
    or diag(join "\n", map { "$_->{t0} $_->{t1} $_->{what}" } @not_in_flight[0 .. ($#not_in_flight < 9 ? $#not_in_flight : 9)]);
ok(@failed <= 3 * 10, 'at most the 10 clients\' requests lost per crash');
for my $c (@crashes) {
    my ($next) = sort { $a <=> $b } map { $_->{t1} } grep { $_->{what} eq 'ok' && $_->{t0} >= $c->{dead} } @r;
    my $after = defined $next ? $next - $c->{seen} : 1e9;
    ok($after < 1, sprintf('%s: the next request was answered %.3f s after the crash', $c->{how}, $after));
    $c->{after} = $after;
}
my %lost;
for my $f (@failed) { for my $c (@crashes) { $lost{ $c->{how} }++ if $f->{t0} <= $c->{dead} && $f->{t1} >= $c->{kill} } }
diag(sprintf "%d requests, %d ok, %d refused, %d failed (%s); next answer after %s", scalar @r,
    scalar(grep { $_->{what} eq 'ok' } @r), scalar @refused, scalar @failed,
    join(', ', map { "$_->{how}: " . ($lost{ $_->{how} } // 0) } @crashes),
    join(', ', map { sprintf '%s %.3f s', $_->{how}, $_->{after} } @crashes));

my $log = $s->error_log;
like($log, qr/master: serving process \d+ killed by signal 11 \(Segmentation fault\), (?:no )?core dumped/,
    'the master logs a SIGSEGV and whether a core was dumped');
like($log, qr/master: serving process \d+ killed by signal 9 \(Killed\)/, 'the master logs a SIGKILL');
is(() = $log =~ /master: restarting the serving process at once/g, 3, 'each restarted at once');
my $j = status_json();
is($j->{pid}, $s->pid, 'the status page\'s pid is the serving process\'s');
is($j->{restarts}, 3, 'the status page counts 3 restarts');
like($j->{last_restart} // '', qr/killed by signal 11/, '... and the last reason');
like($s->get('/status?prometheus')->{content}, qr/^plxd_restarts_total 3$/m, '... in Prometheus text too');
like($s->get('/status')->{content}, qr/restarted 3 times; the last one before it killed by signal 11/, '... and HTML');

# SIGHUP through the master reloads the serving process, which stays.
my $serving = $s->pid;
$s->signal('HUP');
ok($s->wait_log(qr/\[pid $serving\] configuration reloaded/), 'SIGHUP to the master: the serving process reloads');
is($s->pid, $serving, '... and is the same process');
my $status = $s->stop;
is($status, 0, 'SIGTERM: the master exits 0, the serving process\'s status');

# ---- a serving process that crashes at start ----
{
    my $d = tempdir('plxd-master-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    mkdir "$d/root";
    write_file("$d/crash.pl", "unpack 'p', pack 'L!', 1;\n1;\n");
    write_file("$d/plxd.conf", "[server]\nroot = root\nerror_log = error.log\n"
        . "[handlers]\n.plt = perl\n[perl]\nisolation = thread\npreload = crash.pl\n");
    # A free port, found by binding 0: the line that would name it comes
    # only once a serving process is ready.
    my $probe = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Listen => 1) or die;
    my $port = $probe->sockport;
    close $probe;
    my $p = PlxdServer->spawn(name => 'plxd', cmd => [plxd_bin(), '--config', "$d/plxd.conf",
        '--listen', "127.0.0.1:$port"], stdout => "$d/stdout", stderr => "$d/stderr", %env);
    my $elog = sub { read_file("$d/error.log") };
    ok(wait_for(sub { $elog->() =~ /restarting in 2\.0 s/ }, 60), 'crashing at start: restarted with a growing delay')
        or diag($elog->());
    my $l = $elog->();
    like($l, qr/master: serving process \d+ killed by signal 11 .* before it was ready/, 'the master says it died before it was ready');
    my @delays = $l =~ /master: (?:restarting the serving process (at once)|\d+ deaths in a row within 2 s of their start: restarting in ([\d.]+) s)/g;
    @delays = map { defined $_ && $_ eq 'at once' ? 0 : $_ } grep { defined } @delays;
    is("@delays[0..3]", "0 0.5 1.0 2.0", 'delays: at once, then 0.5, 1, 2 s');
    my @starts = map { my ($h, $m, $sec) = /(\d\d):(\d\d):(\d\d\.\d+)/; $h * 3600 + $m * 60 + $sec }
        $l =~ /^(.*master: started serving process.*)$/mg;
    ok($starts[2] - $starts[1] >= 0.5 && $starts[3] - $starts[2] >= 1.0,
        'the starts are that far apart') or diag("@starts");
    # The socket is held throughout: a connection waits, it is not refused.
    my $c = IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $port, Proto => 'tcp');
    ok($c, 'a connection meanwhile waits in the backlog, not refused') or diag("connect: $!");
    ok(!-s "$d/stdout", 'no "listening on" line: it never became ready');
    kill 'TERM', $p->pid;
    my $st = $p->wait_exit(30);
    ok(defined $st, 'SIGTERM stops the master while it waits to restart');
    is($st, 0, '... with exit status 0');
    $p->stop(grace => 5) unless defined $st;
    like($elog->(), qr/master: .*stopping/, 'the master says it stops');
}

# ---- a serving process that cannot start: plxd does not start ----
{
    my $d = tempdir('plxd-master-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    mkdir "$d/root";
    write_file("$d/bad.pl", "die qq{no preload for you\\n};\n");
    write_file("$d/plxd.conf", "[server]\nroot = root\nerror_log = error.log\n"
        . "[handlers]\n.plt = perl\n[perl]\nisolation = thread\npreload = bad.pl\n");
    my ($st) = PlxdTest::run_plxd('--config', "$d/plxd.conf", '--listen', '127.0.0.1:0');
    is($st >> 8, 1, 'a handler that cannot start: plxd exits 1, not restarted');
    my $l = read_file("$d/error.log");
    like($l, qr/master: the serving process could not start: not starting/, '... and the master says so');
    is(() = $l =~ /master: started serving process/g, 1, '... after one start');
}

# ---- without the master ----
for my $way ('--no-master', 'master = no') {
    my $o = PlxdTest->start(
        files => { 'hello.html' => "hi\n" },
        crashes => 1,
        %env,
        ($way eq '--no-master' ? (args => ['--no-master']) : (server => { master => 'no' })),
    );
    is($o->pid, $o->master_pid, "$way: one process serves");
    is($o->get('/hello.html')->{content}, "hi\n", "$way: it answers");
    unlike($o->error_log, qr/master/, "$way: no master");
    kill 'SEGV', $o->pid;
    my $st = $o->wait_exit(30);
    is(defined $st ? $st & 127 : -1, 11, "$way: a crash ends plxd");
}

# ---- a killed master takes the serving process with it ----
{
    my $k = PlxdTest->start(
        files => \%files, crashes => 1, %env,
        handlers => { '.plx' => 'perl' }, sections => { perl => { workers => 2 } },
    );
    my $serving_pid = $k->pid;
    ok(wait_for(sub { workers_of($serving_pid) == 2 }), 'master killed: two workers first');
    my %below = (PlxdServer::descendants($serving_pid), $serving_pid => 1);
    kill 'KILL', $k->master_pid;
    $k->wait_exit(30);
    ok(wait_for(sub { !grep { alive($_) } keys %below }, 30),
        'master killed: the serving process and its workers end');
}

# ---- the serving process stopped directly: the master stops too ----
{
    my $t = PlxdTest->start(files => { 'hello.html' => "hi\n" });
    kill 'TERM', $t->pid;
    my $st = $t->wait_exit(30);
    is($st, 0, 'SIGTERM to the serving process: the master exits 0 too');
}

# ---- an exit 0 the serving process did not announce is a death ----
# (exit_group(0), as C code that calls exit(0) would: not a stop.)
{
    my $e = PlxdTest->start(
        files => { 'hello.html' => "hi\n",
            'exit0.plt' => "require 'syscall.ph';\nprint \"Content-Type: text/plain\\n\\n\";\nsyscall(&SYS_exit_group, 0);\n" },
        crashes => 1, %env,
        handlers => { '.plt' => 'perl:thread' },
        sections => { 'perl:thread' => { isolation => 'thread', workers => 1, inline_budget => 0 } },
    );
    my $first = $e->pid;
    $e->get('/exit0.plt');
    ok($e->wait_log(qr/master: serving process \d+ exited with status 0/), 'an unannounced exit 0: logged as a death');
    ok(wait_for(sub { $e->get('/hello.html')->{status} == 200 }, 30), '... a new serving process answers');
    isnt(PlxdServer::serving_pid($e->master_pid, 30), $first, '... a new one');
    $e->stop;
}

# ---- a stop refuses new connections at once, as without the master ----
{
    my $g = PlxdTest->start(
        files => { 'hello.html' => "hi\n", 'sleep.pl' => "#!/usr/bin/perl\nprint \"Content-Type: text/plain\\n\\n\";\nsleep 30;\n" },
        handlers => { '.pl' => 'cgi' }, server => { shutdown_timeout => '20s' },
    );
    chmod 0755, $g->root . '/sleep.pl';
    my $held = $g->connect;
    print $held "GET /sleep.pl HTTP/1.0\r\n\r\n";
    ok(wait_for(sub { grep { PlxdTest::read_file("/proc/$_/cmdline") =~ /sleep\.pl/ } keys %{ { PlxdServer::descendants($g->pid) } } }),
        'a stop with a request in flight: the request runs');
    my $port = $g->port;
    kill 'TERM', $g->master_pid;
    ok($g->wait_log(qr/stopping: no new connections/), '... SIGTERM: the stop begins');
    my $refused = wait_for(sub {
        my $c = IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $port, Timeout => 2);
        return !$c && $! == Errno::ECONNREFUSED();
    }, 10);
    ok($refused, '... a new connection is refused at once, not left waiting in the backlog');
    kill 'KILL', $g->master_pid, $g->pid;
    $g->wait_exit(30);
}

done_testing;
