#!/usr/bin/perl
# plxd under systemd, started the way systemd starts it: the listening
# socket inherited as fd 3 with LISTEN_FDS/LISTEN_PID (socket activation),
# NOTIFY_SOCKET a datagram socket this test reads (READY=1, RELOADING=1,
# READY=1 again, STOPPING=1, WATCHDOG=1 with WATCHDOG_USEC), with the master
# and without it; and systemd-analyze verify on conf/examples' units where
# it is installed.
use strict;
use warnings;
use Test::More;
use Fcntl qw(F_GETFD F_SETFD FD_CLOEXEC);
use File::Temp qw(tempdir);
use IO::Select;
use IO::Socket::IP;
use IO::Socket::UNIX;
use POSIX qw(WNOHANG _exit dup2);
use Socket qw(SOCK_DGRAM);
use Time::HiRes qw(time);
use PlxdTest qw(wait_for read_file write_file plxd_bin source_dir);
use PlxdServer;

# In a child about to exec: the descriptors given become 3, 4, ..., open
# across exec (dup2 to the same number would leave FD_CLOEXEC set). The
# handles stay referenced: a handle freed closes its descriptor.
my @passed;
sub pass_fds {
    my @from = map { POSIX::dup($_) // _exit(126) } @_;
    my $to = 3;
    for my $fd (@from) {
        dup2($fd, $to) // _exit(126) if $fd != $to;
        open my $h, '<&=', $to or _exit(126);
        fcntl($h, F_SETFD, 0) // _exit(126);
        push @passed, $h;
        $to++;
    }
}

# One plxd, started as systemd would: returns its pid and what it needs.
sub start_activated {
    my (%o) = @_;
    my $dir = tempdir('plxd-sd-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{PLXD_TEST_KEEP});
    mkdir "$dir/root";
    write_file("$dir/root/hello.html", "hi\n");
    # [server] listen names a port this test holds: plxd would fail to start
    # if it bound it instead of using the socket it is given.
    my $held = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Listen => 1) or die "listen: $@";
    write_file("$dir/plxd.conf", "[server]\nroot = root\nerror_log = error.log\nlog_level = debug\n"
        . "listen = 127.0.0.1:" . $held->sockport . "\n" . ($o{conf} // ''));
    my $listen = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Listen => 16, ReuseAddr => 1)
        or die "listen: $@";
    my $notify = IO::Socket::UNIX->new(Type => SOCK_DGRAM, Local => "$dir/notify") or die "notify: $!";
    # A connection made before plxd runs waits in the socket's backlog.
    my $early = IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $listen->sockport) or die "connect: $@";
    $early->syswrite("GET /hello.html HTTP/1.0\r\n\r\n");
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDOUT, '>>', "$dir/stdout";
        open STDERR, '>>', "$dir/stderr";
        open STDIN, '<', '/dev/null';
        pass_fds(fileno($listen));
        $ENV{LISTEN_FDS} = 1;
        $ENV{LISTEN_PID} = $$;
        $ENV{NOTIFY_SOCKET} = "$dir/notify";
        $ENV{WATCHDOG_USEC} = $o{watchdog_usec} if $o{watchdog_usec};
        delete $ENV{WATCHDOG_PID};
        { no warnings 'exec'; exec plxd_bin(), '--config', "$dir/plxd.conf", @{ $o{args} || [] } }
        _exit(127);
    }
    my $port = $listen->sockport;
    close $listen;
    return { pid => $pid, dir => $dir, notify => $notify, early => $early, held => $held,
        port => $port, seen => [] };
}

# Reads datagrams for up to timeout seconds until one matches re; every one
# read is kept in $p->{seen}. Returns the matching message or undef.
sub next_message {
    my ($p, $re, $timeout) = @_;
    my $sel = IO::Select->new($p->{notify});
    my $until = time + ($timeout // 30);
    while (time < $until) {
        last unless $sel->can_read($until - time);
        my $msg;
        defined $p->{notify}->recv($msg, 4096) or last;
        push @{ $p->{seen} }, $msg;
        return $msg if $msg =~ $re;
    }
    return undef;
}

sub get {
    my ($port) = @_;
    my $c = IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $port) or return "connect: $@";
    $c->syswrite("GET /hello.html HTTP/1.0\r\n\r\n");
    return PlxdTest::read_until_closed($c, 30);
}

sub wait_exit {
    my ($pid, $timeout) = @_;
    my $status;
    wait_for(sub {
        return 0 unless waitpid($pid, WNOHANG) == $pid;
        $status = $?;
        return 1;
    }, $timeout);
    return $status;
}

for my $mode ('master', 'no master') {
    my $p = start_activated(watchdog_usec => 400_000, args => $mode eq 'master' ? [] : ['--no-master']);
    my $elog = sub { read_file("$p->{dir}/error.log") };
    ok(next_message($p, qr/^READY=1$/), "$mode: READY=1 once it listens") or diag($elog->() . read_file("$p->{dir}/stderr"));
    like($elog->(), qr/listening on the socket systemd passed/, "$mode: on the socket it was passed");
    like(PlxdTest::read_until_closed($p->{early}, 30), qr{^HTTP/1\.[01] 200 .*\r\n\r\nhi\n\z}s,
        "$mode: a connection made before it started is answered");
    like(get($p->{port}), qr{^HTTP/1\.[01] 200 .*hi\n\z}s, "$mode: it serves on the socket");
    my $serving = $mode eq 'master' ? PlxdServer::serving_pid($p->{pid}, 30) : $p->{pid};
    isnt($serving, $p->{pid}, 'master: a serving process below it') if $mode eq 'master';
    # WATCHDOG_USEC = 0.4 s: a ping at least every 0.2 s or so.
        ok(next_message($p, qr/^WATCHDOG=1$/, 5) && next_message($p, qr/^WATCHDOG=1$/, 5),
        "$mode: WATCHDOG=1, again and again");
    if ($mode eq 'master') {
        # A serving process that stops answering the master's pings (here:
        # stopped) stops the watchdog's: systemd would then restart the
        # service. Pings come every 0.1 s; the master passes one on while
        # the last came within 0.4 s, checking every 0.2 s.
        kill 'STOP', $serving;
        my $stopped = time;
        my $last = $stopped;
        my $until = $stopped + 2;
        while (time < $until) {
            next_message($p, qr/^WATCHDOG=1$/, $until - time) or last;
            $last = time;
        }
        ok($last - $stopped < 1, sprintf('master: no WATCHDOG=1 once the serving process stopped answering (the last %.2f s after)', $last - $stopped));
        kill 'CONT', $serving;
        ok(next_message($p, qr/^WATCHDOG=1$/, 5), 'master: WATCHDOG=1 again once it answers');
    }
    # The serving process tells the master, which alone tells systemd:
    # one READY=1 for the start.
    is(scalar(grep { /^READY=1$/ } @{ $p->{seen} }), 1, "$mode: one READY=1 for the start");
    kill 'HUP', $p->{pid};
    my $r = next_message($p, qr/^RELOADING=1/);
    like($r // '', qr/^RELOADING=1\nMONOTONIC_USEC=\d+$/, "$mode: SIGHUP: RELOADING=1 with MONOTONIC_USEC");
    ok(next_message($p, qr/^READY=1$/), "$mode: then READY=1");
    ok(wait_for(sub { $elog->() =~ /configuration reloaded/ }), "$mode: it reloaded");
    if ($mode eq 'master') {
        # The serving process dies; the master starts another and is
        # ready again; systemd's socket never closed.
        kill 'KILL', $serving;
        ok(next_message($p, qr/^READY=1$/), 'master: READY=1 after a new serving process started');
        like(get($p->{port}), qr{^HTTP/1\.[01] 200 .*hi\n\z}s, 'master: it serves again on the same socket');
    }
    kill 'TERM', $p->{pid};
    ok(next_message($p, qr/^STOPPING=1$/), "$mode: SIGTERM: STOPPING=1");
    my $status = wait_exit($p->{pid}, 60);
    is($status, 0, "$mode: it stops, exit status 0");
    kill 'KILL', $p->{pid} unless defined $status;
    # Sent before it exited, so already in the socket: read what is left.
    next_message($p, qr/(?!)/, 0.2);
    is(scalar(grep { /^STOPPING=1$/ } @{ $p->{seen} }), 1, "$mode: one STOPPING=1");
    unlike($elog->(), qr/AddressSanitizer|LeakSanitizer|runtime error:/, "$mode: no sanitizer report");
    diag($elog->()) unless Test::More->builder->is_passing;
}

# No service manager: nothing is sent and nothing fails (plxd_server.t and
# every other file start it so).

# Two sockets passed: plxd serves one, and says why it will not start.
{
    my $dir = tempdir('plxd-sd-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    write_file("$dir/plxd.conf", "[server]\nerror_log = error.log\n");
    my @l = map { IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Listen => 1) or die } 1 .. 2;
    my $pid = fork // die;
    if (!$pid) {
        open STDERR, '>>', "$dir/stderr";
        pass_fds(map { fileno $_ } @l);
        @ENV{qw(LISTEN_FDS LISTEN_PID)} = (2, $$);
        { no warnings 'exec'; exec plxd_bin(), '--config', "$dir/plxd.conf" }
        _exit(127);
    }
    my $status = wait_exit($pid, 30);
    is(defined $status ? $status >> 8 : -1, 1, 'two sockets passed: plxd does not start (exit 1)');
    like(read_file("$dir/error.log"), qr/systemd passed 2 sockets: plxd listens on one/, '... and says why');
}

# The example units.
my $sa = `sh -c 'command -v systemd-analyze'`;
chomp $sa;
if (!$sa) {
    diag('systemd-analyze is not installed: conf/examples/plxd.service and plxd.socket were not verified');
} else {
    my $dir = tempdir('plxd-units-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my $bin = plxd_bin();
    for my $u (qw(plxd.service plxd.socket)) {
        # The installed binary's path, made this build's: verify checks that
        # ExecStart's program exists.
        (my $text = read_file(source_dir() . "/conf/examples/$u")) =~ s{/usr/local/bin/plxd}{$bin}g;
        write_file("$dir/$u", $text);
    }
    my $out = `cd $dir && $sa verify plxd.socket plxd.service 2>&1`;
    is($?, 0, 'systemd-analyze verify: the units pass');
    is($out, '', '... without a warning') or diag($out);
    like(read_file("$dir/plxd.service"), qr/^Type=notify$/m, 'the service is Type=notify');
}

done_testing;
