# CGI limits: the script timeout (504 before headers, connection closed
# after), max_children (503 with Retry-After), resource limits set before
# the script starts, a stderr flood costing no memory, and no zombie or
# descriptor left behind by any of it. Each limit has a server of its own,
# so that no script has to beat a limit another check sets (a loaded
# machine makes every script slower, never a CPU limit longer).
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time);
use HTTP::Tiny;
use PlxdTest qw(read_file write_file source_dir wait_for);
use PlxdRaw qw(responses read_responses);

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
sub fd_count { my ($pid, $root) = @_; return PlxdTest::fds_besides_cache($pid, $root) }

# Script timeout. Every script this server runs sleeps 60 s, far past its
# 3 s timeout: no script has to finish within the timeout, however slow
# the machine, and a bound of 20 s tells "ended at the timeout" from "ended
# when the script did" with a wide margin either way.
my $t = PlxdTest->start(
    files => { 'f.pl' => $fixture, 'a.txt' => "a\n" },
    handlers => { '.pl' => 'cgi' },
    sections => { cgi => { timeout => '3s', kill_grace => '200ms' } },
);
my $pid = $t->pid;
$t->get('/a.txt');
my $fds = fd_count($pid, $t->root);

# Timeout before the headers: 504, the script's group ended.
my $pidfile = $t->dir . '/slow.pid';
my $t0 = time;
my $res = $t->get("/f.pl?pidfile=$pidfile&sleep=60");
my $took = time - $t0;
is($res->{status}, 504, 'timeout before headers: 504');
ok($took > 2.8 && $took < 20, "... after the timeout ($took s)");
my $slow = read_file($pidfile) =~ s/\s+//gr;
ok(wait_for(sub { !alive($slow) }), '... and the script was ended');
ok($t->wait_log(qr/f\.pl: answered 504: ran longer than timeout \(3000 ms\)/), '... logged');

# Timeout after the headers: the connection is closed, the body cut short.
$t0 = time;
my $raw = $t->raw("GET /f.pl?text=begun&sleep=60 HTTP/1.1\r\nHost: x\r\n\r\n", 30);
$took = time - $t0;
like($raw, qr/^HTTP\/1\.1 200 .*begun\r\n$/s, 'timeout after headers: what was printed, no end');
my @cut = responses($raw, partial => 1);
ok(@cut == 1 && !$cut[0]{complete} && !defined $cut[0]{headers}{'content-length'},
    '... one response, no length, unterminated, and nothing after it');
ok($took > 2.8 && $took < 20, "... connection closed at the timeout ($took s)");
ok(wait_for(sub { !children_of($pid) }), 'no child of plxd left after the timeouts')
    or diag(join ' ', children_of($pid));
ok(wait_for(sub { fd_count($pid, $t->root) <= $fds }), "no descriptor left ($fds before, " . fd_count($pid, $t->root) . ' after)');
$t->stop;

# A script that takes longer than connection_timeout (1 s) to answer is
# still answered: the connection waits for its script.
my $late = PlxdTest->start(
    files => { 'f.pl' => $fixture },
    handlers => { '.pl' => 'cgi' },
    server => { connection_timeout => '1s' },
);
$res = $late->get('/f.pl?sleep=1.5&text=late');
is($res->{content}, 'late', 'a script slower than connection_timeout still answers');
$late->stop;

# max_children: the third concurrent script gets 503 with Retry-After. The
# two running scripts wait for a file the test creates when it is done with
# them, so they run as long as it needs. connection_timeout and body_timeout
# are far above the 10 s bound within which a refused request with a body
# must be closed: "at once", not at a timeout.
my $s = PlxdTest->start(
    files => { 'f.pl' => $fixture, 'limits.cgi' => $limits_cgi },
    handlers => { '.pl' => 'cgi', '.cgi' => 'cgi' },
    server => { connection_timeout => '60s', body_timeout => '60s' },
    sections => { cgi => { max_children => 2 } },
);
chmod 0755, $s->root . '/limits.cgi';
$pid = $s->pid;
$s->get('/f.pl?text=warm');
$fds = fd_count($pid, $s->root);

# (A slot is held until its script is reaped, a moment after the response.)
ok(wait_for(sub { !children_of($pid) }), 'no script running');
my $release = $s->dir . '/release';
my @busy = map {
    my $c = $s->connect;
    my $pf = $s->dir . "/busy$_.pid";
    $c->syswrite("GET /f.pl?pidfile=$pf&wait=$release&text=busy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    $c
} 1 .. 2;
ok(wait_for(sub { -s $s->dir . '/busy1.pid' && -s $s->dir . '/busy2.pid' }), 'two scripts running');
$res = $s->get('/f.pl?text=third');
is($res->{status}, 503, 'max_children reached: 503');
is($res->{headers}{'retry-after'}, '1', '... with Retry-After');
$t0 = time;
$raw = $s->raw("POST /f.pl?echo=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n" . ('z' x 1000), 90);
like($raw, qr/^HTTP\/1\.1 503 /, '503 before a body');
is(scalar(my @r503 = responses($raw)), 1, '... one response, framed exactly');
ok(time - $t0 < 10, '... and the connection closes');
write_file($release, '');
for my $c (@busy) {
    my ($r) = read_responses($c, 1);
    like($r && $r->{body}, qr/busy/, 'the running scripts complete');
}
$res = $s->get('/f.pl?text=again');
is($res->{content}, 'again', 'slots are given back');

# The child sees only 0, 1, 2 (ls itself opens one more for /proc/self/fd).
$res = $s->get('/limits.cgi');
like($res->{content}, qr/^0 1 2 3 $/m, 'the script inherits descriptors 0, 1 and 2 only');

# No zombie, no descriptor left after all of the above.
ok(wait_for(sub { !children_of($pid) }), 'no child of plxd left (zombie or not)')
    or diag(join ' ', children_of($pid));
ok(wait_for(sub { fd_count($pid, $s->root) <= $fds }), "no descriptor left ($fds before, " . fd_count($pid, $s->root) . ' after)');
$s->stop;

# Resource limits hold from the script's first instruction. limit_cpu
# counts CPU time, which load does not stretch; the timeout is far above
# the wall time a loaded machine needs to give a script its second of CPU,
# so only the limit can end the burning script (a timeout would be 504).
my $l = PlxdTest->start(
    files => { 'f.pl' => $fixture, 'limits.cgi' => $limits_cgi },
    handlers => { '.pl' => 'cgi', '.cgi' => 'cgi' },
    sections => { cgi => { limit_cpu => 1, limit_memory => '512M', limit_processes => 300,
        timeout => '120s' } },
);
chmod 0755, $l->root . '/limits.cgi';
$res = $l->get('/limits.cgi');
like($res->{content}, qr/^Max cpu time\s+1\s+2\s+seconds/m, 'limit_cpu (hard limit one second later)');
like($res->{content}, qr/^Max address space\s+536870912\s+536870912\s/m, 'limit_memory');
like($res->{content}, qr/^Max processes\s+300\s+300\s/m, 'limit_processes');
like($res->{content}, qr/^0 1 2 3 $/m, '... and still only descriptors 0, 1 and 2');
$res = $l->get('/f.pl?burn=1');
is($res->{status}, 500, 'a script over its CPU limit is ended: 500, by the limit, not the timeout');
ok($l->wait_log(qr/f\.pl: answered 500: .*killed by signal (24|9)/), '... logged (SIGXCPU)');
ok(wait_for(sub { !children_of($l->pid) }), 'no child left');
$l->stop;

# stderr flood: 100 MB, line by line into the log, not into memory. On a
# server without limit_cpu: writing 100 MB takes more than a second of CPU
# on a busy machine. Nothing reaches the client until the flood is over,
# so the client waits longer than HTTP::Tiny's usual 30 s.
my $f = PlxdTest->start(
    files => { 'f.pl' => $fixture },
    handlers => { '.pl' => 'cgi' },
    sections => { cgi => { timeout => '300s' } },
);
$f->get('/f.pl?text=warm');
my $hwm = status_kb($f->pid, 'VmHWM');
$t0 = time;
$res = HTTP::Tiny->new(timeout => 300)->get($f->url('/f.pl?stderrbytes=104857600&text=loud'));
is($res->{content}, 'loud', '100 MB of stderr: the response is fine (' . sprintf('%.1f', time - $t0) . ' s)');
my $grew = status_kb($f->pid, 'VmHWM') - $hwm;
ok($grew < 16 * 1024, "... plxd's peak memory grew by $grew kB");
ok(wait_for(sub { -s ($f->dir . '/error.log') > 100_000_000 }), '... the lines are in the error log');
ok(wait_for(sub { !children_of($f->pid) }), 'no child left');
$f->stop;

# plxd shutting down ends the scripts still running.
my $d = PlxdTest->start(
    files => { 'f.pl' => $fixture },
    handlers => { '.pl' => 'cgi' },
    server => { shutdown_timeout => '500ms' },
);
my $running = $d->dir . '/running.pid';
my $c = $d->connect;
$c->syswrite("GET /f.pl?pidfile=$running&sleep=60 HTTP/1.1\r\nHost: x\r\n\r\n");
ok(wait_for(sub { -s $running }), 'a script runs');
my $script = read_file($running) =~ s/\s+//gr;
is($d->stop, 0, 'plxd stops while it runs');
ok(wait_for(sub { !alive($script) }), '... and the script is ended with it');

done_testing;
