package PlxdServer;
# The one way plxd is started and stopped, by the integration tests
# (PlxdTest, its run_plxd for --check and --help too), the test tools
# (PlxdTool: tests/soak, tests/leakcheck), bench/run and bench/frameworks:
# fork and exec, optionally in a session or process group of its
# own, read the `listening on URL` line it prints on stdout once it accepts
# connections, and stop it by its PID, SIGTERM then SIGKILL. bench/run starts
# bench/mhd_floor, which prints the same line, and the peers (spawn: no such
# line) with it too.
#
#   my $srv = PlxdServer->start(
#       cmd     => [$plxd, '--config', $conf, '--listen', '127.0.0.1:0'],
#       stderr  => "$dir/stderr.log",    # appended to; default: inherited
#       env     => { ASAN_OPTIONS => '...' },    # added to its environment
#       session => 'setsid',             # its own session; 'pgrp': its own
#                                        # process group; default: neither
#       timeout => 30,                   # seconds for the listening line
#   );                                   # dies (having stopped it) if none came
#   $srv->url;                           # http://127.0.0.1:PORT/ (host, port, base)
#   my $status = $srv->stop(grace => 30);    # its wait status
#
# Nothing here is tied to Test::More: PlxdTest adds the harness checks.

use strict;
use warnings;
use POSIX qw(WNOHANG _exit);
use IO::Select;
use Time::HiRes qw(time);

# Forks and execs o{cmd}, stdin from /dev/null, stdout to o{stdout} (a file
# appended to) or inherited, stderr likewise. Returns the object; its pid is
# the command's (setsid and setpgid happen in the child, before exec).
sub spawn {
    my ($class, %o) = @_;
    my @cmd = @{ $o{cmd} or die "PlxdServer: no cmd\n" };
    my $name = $o{name} // ($cmd[0] =~ s{.*/}{}r);
    my ($r, $w);
    if ($o{read_stdout}) { pipe($r, $w) or die "PlxdServer: pipe: $!\n" }
    my $pid = fork // die "PlxdServer: fork: $!\n";
    if (!$pid) {
        close $r if $r;
        open STDIN, '<', '/dev/null';
        if ($w) { open STDOUT, '>&', $w or _exit(127) }
        elsif (defined $o{stdout}) { open STDOUT, '>>', $o{stdout} or _exit(127) }
        if (defined $o{stderr}) { open STDERR, '>>', $o{stderr} or _exit(127) }
        # A session of its own: the scheduler's autogroups (on in Debian)
        # give it a share of its own, as a server started by hand with
        # setsid or by a service manager gets. A process group of its own:
        # Ctrl-C reaches the caller only, which stops it by PID, and a server
        # that signals its own group (Apache's prefork parent stopping) does
        # not reach the caller. A session brings a process group with it.
        if (($o{session} // '') eq 'setsid') { POSIX::setsid() // _exit(126) }
        elsif (($o{session} // '') eq 'pgrp') { setpgrp(0, 0) }
        @ENV{ keys %{ $o{env} } } = values %{ $o{env} } if $o{env};
        { no warnings 'exec'; exec { $cmd[0] } @cmd }
        print STDERR "$name: exec $cmd[0]: $!\n";
        _exit(127);
    }
    close $w if $w;
    return bless { pid => $pid, name => $name, stdout => $r }, $class;
}

# spawn, then waits up to o{timeout} seconds (default 30) for the line
# "listening on http://HOST:PORT/" on its stdout, which stays open (a pipe
# plxd may write to later: read it with ->stdout or leave it). Dies if the
# line does not come, after stopping the process: "NAME did not start:
# WHY (stdout: '...')".
sub start {
    my ($class, %o) = @_;
    my $self = $class->spawn(%o, read_stdout => 1);
    my $r = $self->{stdout};
    my $sel = IO::Select->new($r);
    my $timeout = $o{timeout} // 30;
    my $until = time + $timeout;
    my ($out, $eof) = ('', 0);
    while ($out !~ /\n/) {
        my $left = $until - time;
        last if $left <= 0 || !$sel->can_read($left);
        my $n = sysread($r, my $buf, 4096);
        if (!$n) { $eof = 1; last }
        $out .= $buf;
    }
    if ($out =~ m{^listening on (http://(\[[^\]]+\]|[^:/\s]+):(\d+)/)\s*$}m) {
        @$self{qw(url host port)} = ($1, $2, $3);
        $self->{host} =~ s/^\[|\]$//g;
        return $self;
    }
    my $status = $self->stop(grace => $o{fail_grace} // 10);
    my $why = $out =~ /\n/ ? 'its first line is not "listening on URL"'
        : $eof ? status_text($status)    # it exited, or closed its stdout
        : sprintf('no "listening on URL" line within %g s', $timeout);
    chomp $out;
    die "$self->{name} did not start: $why (stdout: '$out')\n";
}

sub pid    { $_[0]{pid} }

# plxd's serving process (server/master.c): the master's child that runs
# the same program, a fork of it; the process itself when it has none (plxd
# --no-master, or another server). Waits up to timeout seconds (default 0)
# for one while the master starts it. Memory and threads are read there.
sub serving_pid {
    my ($self, $timeout) = @_;
    my $pid = ref $self ? $self->{pid} : $self;
    return undef unless defined $pid;
    my $exe = readlink("/proc/$pid/exe") // return $pid;
    my $until = time + ($timeout // 0);
    while (1) {
        my $kids = -e "/proc/$pid/task/$pid/children" ? _read("/proc/$pid/task/$pid/children") : undef;
        my @kids = defined $kids ? split(' ', $kids)
            : grep { ((_stat_fields($_))[1] // 0) == $pid } map { m{/(\d+)$} } glob '/proc/[0-9]*';
        for my $k (@kids) {
            my @f = _stat_fields($k) or next;
            return $k if $f[1] == $pid && $f[0] ne 'Z' && (readlink("/proc/$k/exe") // '') eq $exe;
        }
        return $pid if time >= $until;
        select(undef, undef, undef, 0.02);
    }
}

sub _read { open my $fh, '<', $_[0] or return ''; local $/; return scalar(<$fh>) // '' }
sub name   { $_[0]{name} }
sub url    { $_[0]{url} }
sub host   { $_[0]{host} }
sub port   { $_[0]{port} }
sub stdout { $_[0]{stdout} }
sub killed { $_[0]{killed} }

# The URL without its trailing slash, to append paths to.
sub base { my $u = $_[0]{url}; return defined $u ? $u =~ s{/$}{}r : undef }

sub running { defined $_[0]{pid} }

# "exited with status N", "killed by signal N", "exited normally".
sub status_text {
    my ($status) = @_;
    return "killed by signal " . ($status & 127) if $status & 127;
    return "exited with status " . ($status >> 8) if $status >> 8;
    return 'exited normally';
}

# Polls every 20 ms, up to timeout seconds, for the process to exit.
# Returns its wait status once it has (the object then has no pid), or
# undef while it runs.
sub wait_exit {
    my ($self, $timeout) = @_;
    my $pid = $self->{pid} // return $self->{status};
    my $until = time + ($timeout // 0);
    while (1) {
        if (waitpid($pid, WNOHANG) == $pid) {
            $self->{status} = $?;
            delete $self->{pid};
            return $self->{status};
        }
        return undef if time >= $until;
        select(undef, undef, undef, 0.02);
    }
}

# Stops it by PID: SIGTERM, up to o{grace} seconds (default 30) for it to
# exit, then SIGKILL (calling o{on_kill} first, if given; ->killed is then
# true). With o{descendants} (seconds), the processes below it when the stop
# began that are still there so long after it exited are killed too, each
# only if it is still the same process (its start time): never someone
# else's. Returns its wait status; a stopped server returns the same again.
sub stop {
    my ($self, %o) = @_;
    my $pid = $self->{pid} // return $self->{status};
    my %desc = $o{descendants} ? descendants($pid) : ();
    kill 'TERM', $pid;
    my $status = $self->wait_exit($o{grace} // 30);
    if (!defined $status) {
        $o{on_kill}->() if $o{on_kill};
        kill 'KILL', $pid;
        waitpid $pid, 0;
        $self->{status} = $status = $?;
        $self->{killed} = 1;
        delete $self->{pid};
    }
    if (%desc) {
        my $until = time + $o{descendants};
        while (my @left = grep { (proc_start($_) // '') eq $desc{$_} } keys %desc) {
            if (time > $until) {
                kill 'KILL', @left;
                last;
            }
            select(undef, undef, undef, 0.05);
        }
    }
    close $self->{stdout} if $self->{stdout};
    delete $self->{stdout};
    return $status;
}

# ----- /proc ------------------------------------------------------------------

sub _stat_fields {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/stat" or return;
    my $stat = do { local $/; <$fh> } // return;
    $stat =~ s/^.*\)\s+//s;    # the command name may hold spaces
    return split ' ', $stat;    # from field 3, the state
}

# A process's start time (clock ticks after boot), or undef if it is gone.
sub proc_start { (_stat_fields($_[0]))[19] }

# Its process group and session ids.
sub proc_pgrp    { (_stat_fields($_[0]))[2] }
sub proc_session { (_stat_fields($_[0]))[3] }

# The CPU time, in seconds, that pid and every process below it have used:
# each one's utime + stime (a process's own line counts all its threads,
# those that have ended too) and cutime + cstime (its children that have
# exited and been waited for). Read before and after a load, the difference
# is what the server spent on it, its workers and CGI children included.
sub tree_cpu {
    my ($pid) = @_;
    my %below = descendants($pid);
    my $ticks = 0;
    for my $p ($pid, keys %below) {
        my @f = _stat_fields($p) or next;
        $ticks += $f[11] + $f[12] + $f[13] + $f[14];    # fields 14 to 17 of stat(5)
    }
    return $ticks / POSIX::sysconf(POSIX::_SC_CLK_TCK());
}

# Every process below pid, found through /proc: pid => start time.
sub descendants {
    my ($root) = @_;
    my (%kids, %start);
    opendir my $dh, '/proc' or return ();
    for my $p (grep { /^\d+$/ } readdir $dh) {
        my @f = _stat_fields($p) or next;
        push @{ $kids{ $f[1] } }, $p;
        $start{$p} = $f[19];
    }
    my (%out, @todo);
    @todo = ($root);
    while (defined(my $p = shift @todo)) {
        for my $k (@{ $kids{$p} || [] }) {
            $out{$k} = $start{$k};
            push @todo, $k;
        }
    }
    return %out;
}

1;
