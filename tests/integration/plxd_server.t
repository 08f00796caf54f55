# PlxdServer, the one way the tests, the tools and the benchmarks start plxd:
# the listening line read, the process's session and group as asked, a
# graceful stop's status, SIGKILL after the grace, the processes it left
# behind ended, and a start that fails saying why.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use HTTP::Tiny;
use POSIX ();
use PlxdServer;
use PlxdTest qw(plxd_bin write_file wait_for);

my $dir = tempdir('plxd-server-test-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{PLXD_TEST_KEEP});
write_file("$dir/root/hello.html", "hello\n");
write_file("$dir/plxd.conf", "[server]\nroot = $dir/root\nerror_log = $dir/error.log\naccess_log =\n");
my @plxd = (plxd_bin(), '--config', "$dir/plxd.conf", '--listen', '127.0.0.1:0');

# Where a process is: its session and process group, read from /proc.
sub where { my ($pid) = @_; return (PlxdServer::proc_session($pid), PlxdServer::proc_pgrp($pid)) }
my ($my_sid, $my_pgrp) = where($$);

for my $session (undef, 'pgrp', 'setsid') {
    my $how = $session // 'the caller\'s session and group';
    my $s = PlxdServer->start(cmd => \@plxd, stderr => "$dir/stderr.log", session => $session);
    like($s->url, qr{^http://127\.0\.0\.1:\d+/$}, "$how: the URL from the listening line");
    is($s->base, $s->url =~ s{/$}{}r, "$how: the base URL has no trailing slash");
    is(HTTP::Tiny->new(timeout => 10)->get($s->base . '/hello.html')->{content}, "hello\n", "$how: it answers");
    my ($sid, $pgrp) = where($s->pid);
    if (!$session) {
        is_deeply([$sid, $pgrp], [$my_sid, $my_pgrp], 'no session option: in the caller\'s session and group');
    } elsif ($session eq 'pgrp') {
        is_deeply([$sid, $pgrp], [$my_sid, $s->pid], 'pgrp: a process group of its own, in the caller\'s session');
    } else {
        is_deeply([$sid, $pgrp], [$s->pid, $s->pid], 'setsid: a session (and process group) of its own');
    }
    my $pid = $s->pid;
    is($s->stop(grace => 30), 0, "$how: SIGTERM, and plxd exits 0");
    ok(!$s->killed, "$how: without SIGKILL");
    ok(!$s->running && !kill(0, $pid), "$how: reaped");
    is($s->stop, 0, "$how: stopping again returns the same status");
}

# A failed start says why, and leaves nothing running.
write_file("$dir/bad.conf", "[server]\nno_such_key = 1\n");
my $err = eval { PlxdServer->start(cmd => [plxd_bin(), '--config', "$dir/bad.conf"], stderr => "$dir/bad.log"); '' } // $@;
like($err, qr/^plxd did not start: exited with status [1-9]\d* \(stdout: ''\)$/, 'a bad configuration: its exit status');
$err = eval { PlxdServer->start(cmd => ['/no/such/program'], stderr => "$dir/exec.log"); '' } // $@;
like($err, qr/^program did not start: exited with status 127 /, 'no such program: exit status 127');
like(PlxdTest::read_file("$dir/exec.log"), qr{^program: exec /no/such/program: }, '... and why, on its stderr');

# A server that never prints the line is stopped after the timeout.
my @quiet = ($^X, '-e', 'print STDERR "up\n"; sleep 60');
$err = eval { PlxdServer->start(cmd => \@quiet, timeout => 0.5, stderr => "$dir/quiet.log"); '' } // $@;
like($err, qr/^perl did not start: no "listening on URL" line within 0\.5 s/, 'no listening line: a timeout');
ok(wait_for(sub { -s "$dir/quiet.log" }, 10), 'the quiet server had started');

# env is added to its environment.
my $env_check = '$| = 1; print "listening on http://127.0.0.1:1/\n" if $ENV{PLXD_SERVER_T} eq "yes"; sleep 60';
my $e = eval { PlxdServer->start(cmd => [$^X, '-e', $env_check], env => { PLXD_SERVER_T => 'yes' }, timeout => 10) };
ok($e, 'env reaches the server') and $e->stop(grace => 10);

# One that ignores SIGTERM is killed after the grace (on_kill said so), and
# with descendants, a child of it that outlives it is ended too.
my $stubborn = <<'END';
$SIG{TERM} = 'IGNORE';
my $kid = fork // die;
if (!$kid) { sleep 60; exit 0 }
$| = 1;
print "listening on http://127.0.0.1:1/\n";
sleep 60;
END
my $s = PlxdServer->start(cmd => [$^X, '-e', $stubborn], session => 'setsid');
my %kids;
ok(wait_for(sub { %kids = PlxdServer::descendants($s->pid); %kids }, 10), 'the stubborn server has a child');
my $told = 0;
my $status = $s->stop(grace => 0.3, descendants => 5, on_kill => sub { $told++ });
is($status & 127, 9, 'SIGTERM ignored: killed by SIGKILL after the grace');
ok($s->killed && $told == 1, 'killed reports it, and on_kill was called once');
my ($kid) = keys %kids;
ok(wait_for(sub { my $st = (PlxdServer::_stat_fields($kid))[0]; !defined $st || $st eq 'Z' }, 10),
    'its child was ended too');

# tree_cpu: the CPU time a process and every process below it have used, a
# child that has ended (and been waited for) and one still running
# included. Each spends 0.3 s of CPU time (user and system: asking for it
# is a system call), which does not depend on the machine's load.
my $busy = <<'END';
sub cpu { my ($u, $s) = times; $u + $s }
sub spin { my $until = cpu() + 0.3; 1 while cpu() < $until }
my $ended = fork // die;
if (!$ended) { spin(); exit 0 }
waitpid $ended, 0;
pipe my $r, my $w or die;
my $running = fork // die;
if (!$running) { close $r; spin(); close $w; sleep 60; exit 0 }
close $w;
spin();
<$r>;    # its spin is over
$| = 1;
print "listening on http://127.0.0.1:1/\n";
sleep 60;
END
$s = PlxdServer->start(cmd => [$^X, '-e', $busy], session => 'setsid', timeout => 60);
my $cpu = PlxdServer::tree_cpu($s->pid);
my @own = (PlxdServer::_stat_fields($s->pid))[11, 12];
ok($cpu >= 0.88 && $cpu < 1.5, "tree_cpu counts the process, its ended child and its running one ($cpu s)");
ok(($own[0] + $own[1]) / POSIX::sysconf(POSIX::_SC_CLK_TCK()) < 0.6, '... where its own utime + stime count one');
$s->stop(grace => 10, descendants => 5);

# No other file starts plxd its own way: no exec of plxd outside PlxdServer.
my $src = PlxdTest::source_dir();
opendir my $lib, "$src/tests/lib" or die "tests/lib: $!";
my @starters = ((map { "tests/lib/$_" } grep { /\.pm$/ && $_ ne 'PlxdServer.pm' } readdir $lib),
    qw(tests/soak tests/leakcheck tests/loaded bench/run bench/frameworks bench/perl-steps));
for my $f (@starters) {
    my @own = grep { /\bexec\b[^;]*(?:plxd_bin|\{plxd\}|\$plxd\b)/ } split /\n/, PlxdTest::read_file("$src/$f");
    is_deeply(\@own, [], "$f starts plxd through PlxdServer only");
}

done_testing;
