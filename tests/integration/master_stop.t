#!/usr/bin/perl
# A stop the serving process announces to the master (server/master.c; it
# got SIGTERM itself, not through the master) ends the master too, with the
# serving process's status, however the stop ended: a clean stop exits 0
# with nothing left running; a crash during the stop exits non-zero and
# is not restarted (the master's listening socket is closed by then). A
# serving process whose listening socket does not listen says so and exits
# 1, before it starts anything.
use strict;
use warnings;
use Test::More;
use Fcntl qw(F_SETFD);
use File::Temp qw(tempdir);
use IO::Socket::IP;
use POSIX qw(_exit);
use PlxdTest qw(wait_for read_file write_file plxd_bin);
use PlxdServer;

my $sanitized = read_file(PlxdTest::build_dir() . '/CMakeCache.txt') =~ /^PLXD_SANITIZE:BOOL=ON$/m;
# Under ASan a segfault is the sanitizer's report and exit 1; here it must be
# the signal, as in a normal build.
my $asan = join ':', grep { length } ($ENV{ASAN_OPTIONS} // ''), 'handle_segv=0';
my %env = $sanitized ? (env => { ASAN_OPTIONS => $asan }) : ();

sub alive { my ($pid) = @_; my @f = PlxdServer::_stat_fields($pid); return @f && $f[0] ne 'Z' }

# ---- SIGTERM to the serving process: a clean stop of the whole ----
{
    my $t = PlxdTest->start(
        files => { 'hello.html' => "hi\n", 'pid.plx' => "print \"Content-Type: text/plain\\n\\n\$\$\\n\";\n" },
        handlers => { '.plx' => 'perl' }, sections => { perl => { workers => 2 } },
    );
    is($t->get('/pid.plx')->{status}, 200, 'direct stop: a Perl worker answers');
    my $serving = $t->pid;
    my %below = (PlxdServer::descendants($t->master_pid), $t->master_pid => 1);
    ok(keys %below >= 4, 'direct stop: the serving process and its workers run') or diag(join ' ', keys %below);
    kill 'TERM', $serving;
    my $st = $t->wait_exit(30);
    is($st, 0, 'direct stop: the master exits 0');
    ok(wait_for(sub { !grep { alive($_) } keys %below }, 10), 'direct stop: nothing is left running')
        or diag(join ' ', grep { alive($_) } keys %below);
    my $log = $t->error_log;
    like($log, qr/master: the serving process stopped: stopping too/, 'direct stop: the master says why it stops');
    is(() = $log =~ /master: started serving process/g, 1, 'direct stop: no restart');
    unlike($log, qr/AddressSanitizer|LeakSanitizer|runtime error:/, 'direct stop: no sanitizer report');
}

# ---- a crash during a stop the serving process announced ----
{
    # Started before the stop, it crashes its interpreter thread, and so
    # the serving process, once the stop has begun (the file crash).
    my $late = "print \"Content-Type: text/plain\\n\\n\";\n"
        . "my (\$d) = \$ENV{SCRIPT_FILENAME} =~ m{^(.*)/};\n"
        . "open my \$f, '>', \"\$d/started\" or die;\nclose \$f;\n"
        . "select undef, undef, undef, 0.02 until -e \"\$d/crash\";\n"
        . "my \$x = unpack 'p', pack 'L!', 1;\n";
    my $c = PlxdTest->start(
        files => { 'hello.html' => "hi\n", 'late.plt' => $late },
        crashes => 1, %env,
        handlers => { '.plt' => 'perl:thread' },
        sections => { 'perl:thread' => { isolation => 'thread', workers => 1, inline_budget => 0 } },
        server => { shutdown_timeout => '20s' },
    );
    my $serving = $c->pid;
    my $held = $c->connect;
    $held->syswrite("GET /late.plt HTTP/1.0\r\n\r\n");
    ok(wait_for(sub { -e $c->root . '/started' }), 'crash in a stop: the request runs');
    my %below = (PlxdServer::descendants($c->master_pid), $c->master_pid => 1);
    kill 'TERM', $serving;
    ok($c->wait_log(qr/stopping: no new connections/), 'crash in a stop: SIGTERM to the serving process: its stop begins');
    write_file($c->root . '/crash', '');
    my $st = $c->wait_exit(30);
    ok(defined $st, 'crash in a stop: the master exits');
    is(defined $st ? $st >> 8 : -1, 128 + 11, '... with the serving process\'s status (128 + SIGSEGV)');
    my $log = $c->error_log;
    like($log, qr/master: serving process $serving killed by signal 11 .* while stopping/,
        '... and says it died while stopping');
    is(() = $log =~ /master: started serving process/g, 1, 'crash in a stop: no restart');
    unlike($log, qr/before it was ready|restarting/, '... no restart loop');
    ok(wait_for(sub { !grep { alive($_) } keys %below }, 10), 'crash in a stop: nothing is left running');
    unlike($log, qr/AddressSanitizer|LeakSanitizer|runtime error:/, 'crash in a stop: no sanitizer report');
    diag($log) unless Test::More->builder->is_passing;
}

# ---- a serving process whose listening socket does not listen ----
# The socket is passed as systemd passes it (fd 3, LISTEN_FDS) and this test
# keeps its own copy: shutdown() on it ends its listening for every copy, the
# master's too. The serving process then killed, the next one is given a
# socket that does not listen.
{
    my $dir = tempdir('plxd-master-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{PLXD_TEST_KEEP});
    mkdir "$dir/root";
    write_file("$dir/root/hello.html", "hi\n");
    write_file("$dir/plxd.conf", "[server]\nroot = root\nerror_log = error.log\nlog_level = debug\n");
    my $listen = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Listen => 16) or die "listen: $@";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDOUT, '>>', "$dir/stdout";
        open STDERR, '>>', "$dir/stderr";
        open STDIN, '<', '/dev/null';
        POSIX::dup2(fileno($listen), 3) // _exit(126);
        open my $h, '<&=', 3 or _exit(126);
        fcntl($h, F_SETFD, 0) // _exit(126);
        @ENV{qw(LISTEN_FDS LISTEN_PID)} = (1, $$);
        $ENV{ASAN_OPTIONS} = $asan if $sanitized;
        { no warnings 'exec'; exec plxd_bin(), '--config', "$dir/plxd.conf" }
        _exit(127);
    }
    my $elog = sub { read_file("$dir/error.log") . read_file("$dir/stderr") };
    ok(wait_for(sub { $elog->() =~ /master: serving process \d+ ready/ }, 30), 'no listener: plxd is ready first');
    my $first = PlxdServer::serving_pid($pid, 30);
    shutdown($listen, 0) or die "shutdown: $!";
    kill 'SEGV', $first;
    ok(wait_for(sub { $elog->() =~ /master: serving process \d+ exited with status 1/ }, 30),
        'no listener: the next serving process exits 1');
    my $log = $elog->();
    like($log, qr/cannot serve: no usable listening socket \(fd 3\): it does not listen/, '... and says why');
    is(() = $log =~ /killed by signal 11/g, 1, '... no SIGSEGV but the one this test sent');
    unlike($log, qr/AddressSanitizer|LeakSanitizer|runtime error:/, 'no listener: no sanitizer report');
    kill 'TERM', $pid;
    my $st = PlxdServer::wait_exit({ pid => $pid }, 30);
    ok(defined $st, 'no listener: SIGTERM stops the master');
    if (!defined $st) {
        kill 'KILL', $pid;
        waitpid $pid, 0;
    }
    diag($elog->()) unless Test::More->builder->is_passing;
}

done_testing;
