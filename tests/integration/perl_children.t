# The persistent Perl handler (.plx) and the processes a script forks: a
# child that does not exec gets SIGPIPE's default back, as under CGI (the
# worker's own no-op handler must not make it spin on EPIPE), unless the
# script chose another disposition; children the script does not wait for
# are reaped after the request, never before the script returned; a child
# that runs on in Perl has its standard handles on fds 0-2, as under CGI.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for read_file);
use Time::HiRes qw(time);

# The child writes to a pipe whose reader is closed and ignores the errors;
# the script reports how it ended (killed past 5 s: "running").
my $pipe_child = <<'EOF';
use POSIX ();
$SIG{PIPE} = 'IGNORE' if $ENV{QUERY_STRING} eq 'ignore';
pipe(my $r, my $w) or die "pipe: $!";
close $r;
my $pid = fork // die "fork: $!";
if (!$pid) {
    my $failed = 0;
    for (;;) {
        next if defined syswrite($w, 'x');
        # Only with SIGPIPE ignored on purpose does a write fail here.
        POSIX::_exit($!{EPIPE} ? 3 : 4) if $ENV{QUERY_STRING} eq 'ignore' && ++$failed == 100;
    }
}
close $w;
my $status = 'running';
for (1 .. 500) {
    if (waitpid($pid, POSIX::WNOHANG()) == $pid) {
        $status = $? & 127 ? 'signal ' . ($? & 127) : 'exit ' . ($? >> 8);
        last;
    }
    select(undef, undef, undef, 0.01);
}
if ($status eq 'running') {
    kill 'KILL', $pid;
    waitpid $pid, 0;
}
print "Content-Type: text/plain\n\n$status\n";
EOF

# Forks a child that exits at once and is never waited for; returns once
# the child is a zombie (so that it is one when the script returns).
my $zombie = <<'EOF';
use POSIX ();
my $pid = fork // die "fork: $!";
POSIX::_exit(0) if !$pid;
sub state_of { open my $fh, '<', "/proc/$_[0]/stat" or return ''; return (<$fh> =~ /^\d+ \(.*\) (\S)/)[0] // '' }
for (1 .. 500) {
    last if state_of($pid) eq 'Z';
    select(undef, undef, undef, 0.01);
}
print "Content-Type: text/plain\n\n$$ $pid ", state_of($pid), "\n";
EOF

# A child the script waits for in the same request, after it exited.
my $own_wait = <<'EOF';
use POSIX ();
my $pid = fork // die "fork: $!";
POSIX::_exit(7) if !$pid;
sub state_of { open my $fh, '<', "/proc/$_[0]/stat" or return ''; return (<$fh> =~ /^\d+ \(.*\) (\S)/)[0] // '' }
select(undef, undef, undef, 0.01) until state_of($pid) eq 'Z';
my $got = waitpid($pid, 0);
print "Content-Type: text/plain\n\n", ($got == $pid ? 'exit ' . ($? >> 8) : "waitpid $got: $!"), "\n";
EOF

my $s = PlxdTest->start(
    files => {
        'pipe_child.plx' => $pipe_child,
        'zombie.plx' => $zombie,
        'own_wait.plx' => $own_wait,
        'pid.plx' => "print \"Content-Type: text/plain\\n\\n\$\$\\n\";\n",
    },
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1 } },
);

# --- SIGPIPE ---
is($s->get('/pipe_child.plx')->{content}, "signal 13\n",
    'a forked child writing to a closed pipe dies of SIGPIPE');
is($s->get('/pipe_child.plx?ignore')->{content}, "exit 3\n",
    'unless the script ignores SIGPIPE: then its writes fail with EPIPE');
is($s->get('/pipe_child.plx')->{content}, "signal 13\n", "and that choice ends with its request");

# --- zombies ---
sub zombies_of {
    my ($parent) = @_;
    my @z;
    for my $stat (glob '/proc/[0-9]*/stat') {
        my ($pid, $state, $ppid) = read_file($stat) =~ /^(\d+) \(.*\) (\S) (\d+)/ or next;
        push @z, $pid if $ppid == $parent && $state eq 'Z';
    }
    return @z;
}

my ($worker, $child, $state) = $s->get('/zombie.plx')->{content} =~ /^(\d+) (\d+) (\S*)$/;
ok(defined $worker, 'a script forked a child and did not wait for it');
is($state, 'Z', "the child ($child) had exited when the script returned");
is($s->get('/pid.plx')->{content}, "$worker\n", 'the next request runs in the same worker');
ok(wait_for(sub { !zombies_of($worker) }, 5), 'no zombie is left under the worker')
    or diag('zombies: ' . join ' ', zombies_of($worker));

is($s->get('/own_wait.plx')->{content}, "exit 7\n",
    "a script's own waitpid finds its child, exited, in the same request");
$s->stop;

# --- a forked child that runs on in Perl: its standard handles are its
# own, on fds 0-2, as under CGI (compared with the same script as .pl) ---
my %forked = (
    # A pipe open's child prints into the pipe, not into the response.
    'pipe_fork' => <<'EOF',
print "Content-Type: text/plain\n\n";
my $pid = open(my $fh, '-|') // die "fork: $!";
if (!$pid) { print "from child\n"; exit 0 }
my @got = <$fh>;
close $fh;
print "got: @got";
EOF
    # A child that reopens STDOUT before exec: the program writes there.
    'reopen_exec' => <<'EOF',
$| = 1;
print "Content-Type: text/plain\n\nparent\n";
my $pid = fork // die "fork: $!";
if (!$pid) { open STDOUT, '>', '/dev/null' or die; exec 'echo', 'child, into /dev/null' }
waitpid($pid, 0);
print "done\n";
EOF
    # A child that closes its handles holds none of the response: it ends
    # with the script, not with the child's sleep.
    'close_bg' => <<'EOF',
use POSIX ();
print "Content-Type: text/plain\n\nanswered\n";
my $pid = fork // die "fork: $!";
if (!$pid) { close STDOUT; close STDERR; close STDIN; POSIX::close($_) for 0 .. 2; sleep 3; POSIX::_exit(0) }
EOF
);
my $f = PlxdTest->start(
    files    => { map { ("$_.pl" => "#!/usr/bin/perl\n$forked{$_}", "$_.plx" => $forked{$_}) } keys %forked },
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { perl => { workers => 1 } },
);
chmod 0755, map { $f->root . "/$_.pl" } keys %forked;
for my $name (sort keys %forked) {
    my $t0 = time;
    my $plx = $f->get("/$name.plx");
    my $took = time - $t0;
    my $pl = $f->get("/$name.pl");
    is($plx->{content}, $pl->{content}, "$name: as under CGI ($pl->{content})");
    cmp_ok($took, '<', 1.5, "$name: the response ends with the script") if $name eq 'close_bg';
}
is($f->get('/pipe_fork.plx')->{content}, "got: from child\n", "a pipe open's child prints into its pipe");
$f->stop;

done_testing;
