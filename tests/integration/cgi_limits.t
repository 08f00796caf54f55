# CGI limits: the script timeout (504 before headers, connection closed
# after), max_children (503 with Retry-After), resource limits set before
# the script starts, a stderr flood costing no memory, and no zombie or
# descriptor left behind by any of it.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time);
use PlxdTest qw(read_file source_dir wait_for);

my $fixture = read_file(source_dir() . '/tests/integration/cgi_fixture.pl');
my $limits_cgi = "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\n"
    . "grep -E '^Max (cpu time|address space|processes) ' /proc/self/limits\n"
    . "ls /proc/self/fd | tr '\\n' ' '\n";

sub status_kb {
    my ($pid, $key) = @_;
    my ($kb) = read_file("/proc/$pid/status") =~ /^$key:\s+(\d+) kB/m;
    return $kb // 0;
}
sub alive { my ($pid) = @_; return kill(0, $pid) && read_file("/proc/$pid/stat") !~ /^\d+ \(.*\) Z/ }
sub children_of {
    my ($ppid) = @_;
    my @kids;
    for my $stat (glob '/proc/[0-9]*/stat') {
        my $text = read_file($stat);
        push @kids, $1 if $text =~ /^(\d+) \(.*\) \S+ (\d+) / && $2 == $ppid;
    }
    return @kids;
}
sub fd_count { my ($pid) = @_; my @fds = glob "/proc/$pid/fd/*"; return scalar @fds }

my $s = PlxdTest->start(
    files => { 'f.pl' => $fixture, 'limits.cgi' => $limits_cgi },
    handlers => { '.pl' => 'cgi', '.cgi' => 'cgi' },
    server => { connection_timeout => '1s' },
    sections => { cgi => { timeout => '3s', max_children => 2, kill_grace => '200ms' } },
);
chmod 0755, $s->root . '/limits.cgi';
my $pid = $s->pid;
$s->get('/f.pl?text=warm');
my $fds = fd_count($pid);

# Timeout before the headers: 504, the script's group ended.
my $pidfile = $s->dir . '/slow.pid';
my $t0 = time;
my $res = $s->get("/f.pl?pidfile=$pidfile&sleep=30");
my $took = time - $t0;
is($res->{status}, 504, 'timeout before headers: 504');
ok($took > 2.8 && $took < 6, "... after the timeout ($took s)");
my $slow = read_file($pidfile) =~ s/\s+//gr;
ok(wait_for(sub { !alive($slow) }, 5), '... and the script was ended');
ok($s->wait_log(qr/f\.pl: answered 504: ran longer than timeout \(3000 ms\)/), '... logged');

# Timeout after the headers: the connection is closed, the body cut short.
$t0 = time;
my $raw = $s->raw("GET /f.pl?text=begun&sleep=30 HTTP/1.1\r\nHost: x\r\n\r\n", 10);
$took = time - $t0;
like($raw, qr/^HTTP\/1\.1 200 .*begun\r\n$/s, 'timeout after headers: what was printed, no end');
ok($took < 6, "... connection closed at the timeout ($took s)");

# A script that takes longer than connection_timeout (1 s) to answer is
# still answered: the connection waits for its script.
$res = $s->get('/f.pl?sleep=1.5&text=late');
is($res->{content}, 'late', 'a script slower than connection_timeout still answers');

# max_children: the third concurrent script gets 503 with Retry-After.
# (A slot is held until its script is reaped, a moment after the response.)
ok(wait_for(sub { !children_of($pid) }, 5), 'no script running');
my @busy = map {
    my $c = $s->connect;
    my $pf = $s->dir . "/busy$_.pid";
    $c->syswrite("GET /f.pl?pidfile=$pf&sleep=2.5&text=busy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    $c
} 1 .. 2;
ok(wait_for(sub { -s $s->dir . '/busy1.pid' && -s $s->dir . '/busy2.pid' }, 10), 'two scripts running');
$res = $s->get('/f.pl?text=third');
is($res->{status}, 503, 'max_children reached: 503');
is($res->{headers}{'retry-after'}, '1', '... with Retry-After');
$t0 = time;
$raw = $s->raw("POST /f.pl?echo=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n" . ('z' x 1000), 10);
like($raw, qr/^HTTP\/1\.1 503 /, '503 before a body');
ok(time - $t0 < 3, '... and the connection closes');
like(PlxdTest::read_until_closed($_, 10), qr/busy/, 'the running scripts complete') for @busy;
$res = $s->get('/f.pl?text=again');
is($res->{content}, 'again', 'slots are given back');

# The child sees only 0, 1, 2 (ls itself opens one more for /proc/self/fd).
$res = $s->get('/limits.cgi');
like($res->{content}, qr/^0 1 2 3 $/m, 'the script inherits descriptors 0, 1 and 2 only');

# No zombie, no descriptor left after all of the above.
ok(wait_for(sub { !children_of($pid) }, 5), 'no child of plxd left (zombie or not)')
    or diag(join ' ', children_of($pid));
ok(wait_for(sub { fd_count($pid) <= $fds }, 5), "no descriptor left ($fds before, " . fd_count($pid) . ' after)');
$s->stop;

# Resource limits hold from the script's first instruction.
my $l = PlxdTest->start(
    files => { 'f.pl' => $fixture, 'limits.cgi' => $limits_cgi },
    handlers => { '.pl' => 'cgi', '.cgi' => 'cgi' },
    sections => { cgi => { limit_cpu => 1, limit_memory => '512M', limit_processes => 300,
        timeout => '20s' } },
);
chmod 0755, $l->root . '/limits.cgi';
$res = $l->get('/limits.cgi');
like($res->{content}, qr/^Max cpu time\s+1\s+2\s+seconds/m, 'limit_cpu (hard limit one second later)');
like($res->{content}, qr/^Max address space\s+536870912\s+536870912\s/m, 'limit_memory');
like($res->{content}, qr/^Max processes\s+300\s+300\s/m, 'limit_processes');
like($res->{content}, qr/^0 1 2 3 $/m, '... and still only descriptors 0, 1 and 2');
$t0 = time;
$res = $l->get('/f.pl?burn=1');
is($res->{status}, 500, 'a script over its CPU limit is ended: 500');
ok(time - $t0 < 10, '... by the limit, not the timeout');
ok($l->wait_log(qr/f\.pl: answered 500: .*killed by signal (24|9)/), '... logged (SIGXCPU)');

# stderr flood: 100 MB, line by line into the log, not into memory.
my $hwm = status_kb($l->pid, 'VmHWM');
$t0 = time;
$res = $l->get('/f.pl?stderrbytes=104857600&text=loud');
is($res->{content}, 'loud', '100 MB of stderr: the response is fine (' . sprintf('%.1f', time - $t0) . ' s)');
my $grew = status_kb($l->pid, 'VmHWM') - $hwm;
ok($grew < 16 * 1024, "... plxd's peak memory grew by $grew kB");
ok(-s ($l->dir . '/error.log') > 100_000_000, '... the lines are in the error log');
ok(wait_for(sub { !children_of($l->pid) }, 5), 'no child left');

# plxd shutting down ends the scripts still running.
my $d = PlxdTest->start(
    files => { 'f.pl' => $fixture },
    handlers => { '.pl' => 'cgi' },
    server => { shutdown_timeout => '500ms' },
);
my $running = $d->dir . '/running.pid';
my $c = $d->connect;
$c->syswrite("GET /f.pl?pidfile=$running&sleep=60 HTTP/1.1\r\nHost: x\r\n\r\n");
ok(wait_for(sub { -s $running }, 5), 'a script runs');
my $script = read_file($running) =~ s/\s+//gr;
is($d->stop, 0, 'plxd stops while it runs');
ok(wait_for(sub { !alive($script) }, 5), '... and the script is ended with it');

done_testing;
