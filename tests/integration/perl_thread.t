# In-process Perl ([perl] isolation = thread, .plt in the default
# configuration): scripts run in interpreter threads inside plxd. What a
# script does to process-wide state stays its own, programs it starts get
# what a CGI script's get, and what would end plxd (exec without fork,
# POSIX::_exit, a runaway loop) ends only the request.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for source_dir read_file);
use Time::HiRes qw(time);
use POSIX ();

my $src = source_dir();

my %files = (
    'hello.plt' => read_file("$src/cgi-bin/hello.plt"),
    'hello.pl'  => read_file("$src/cgi-bin/hello.pl"),
    'sub/cwd.plt' => <<'EOF',
use Cwd;
print "Content-Type: text/plain\n\n", getcwd(), "\n";
chdir '/';
$ENV{LEFT_BY_SCRIPT} = 'yes';
EOF
    'children.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
$| = 1;
print "backticks:", `echo \$QUERY_STRING`;
system('echo "system:$REQUEST_METHOD"');
system($^X, '-e', 'opendir my $d, "/proc/self/fd"; '
    . 'print "fds:", join(",", sort grep { /^\d+$/ && $_ > 2 && $_ != fileno($d) } readdir $d), "\n"');
system($^X, '-e', 'open my $s, "<", "/proc/self/status"; '
    . 'print "blocked:", (map { /^SigBlk:\s*(\S+)/ ? $1 : () } <$s>), "\n"');
print "leftover:", ($ENV{LEFT_BY_SCRIPT} // 'none'), "\n";
EOF
    'exec.plt' => <<'EOF',
print "Content-Type: text/plain\n\nbefore exec\n";
exec '/bin/echo', 'replaced';
EOF
    'exit.plt' => <<'EOF',
use POSIX ();
print "Content-Type: text/plain\n\nbefore _exit\n";
POSIX::_exit(3);
EOF
    'fork_exec.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
$| = 1;
my $pid = fork;
if (!$pid) { exec '/bin/echo', 'child exec'; }
waitpid $pid, 0;
print "status:", $? >> 8, "\n";
EOF
    'huge.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
my $line = ('x' x 1023) . "\n";
print $line for 1 .. 4096;
EOF
    'alarm.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
my $r = eval { local $SIG{ALRM} = sub { die "timeout\n" }; alarm 1; select(undef, undef, undef, 1.3); alarm 0; 'done' };
print $r // "caught: $@";
EOF
    'runaway.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
eval { 1 while 1 };
print "caught\n";
EOF
    'sleep.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
sleep 100;
print "woke\n";
EOF
    # Past timeout while waiting for programs it started.
    'wait_system.plt' => qq{print "Content-Type: text/plain\\n\\n";\nsystem('sleep 31.7');\n},
    'wait_group.plt'  => qq{print "Content-Type: text/plain\\n\\n";\nsystem('sleep 31.7 & sleep 31.7');\n},
    'wait_ticks.plt'  => qq{print "Content-Type: text/plain\\n\\n", `sleep 31.7`;\n},
    'wait_fork.plt'   => qq{print "Content-Type: text/plain\\n\\n";\nmy \$p = fork // die;\n}
        . qq{exec 'sleep', '31.7' if !\$p;\nwaitpid(\$p, 0);\n},
);
# The same as CGI scripts: the same failure gets the same answer.
$files{"$_.pl"} = $files{"$_.plt"} for qw(wait_system wait_group wait_ticks wait_fork);

# The interpreter thread is what this file tests (inline runs have
# perl_inline.t): none runs inline, so that no event thread makes an
# interpreter of its own, with pipes of its own, while plxd's pipes are
# counted below.
my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plt' => 'perl:thread' },
    sections => { 'perl:thread' => { isolation => 'thread', workers => 1, timeout => '2s',
                                     inline_budget => 0 },
                  cgi => { timeout => '2s' } },
);

my $r = $s->get('/hello.plt');
is($r->{status}, 200, 'hello.plt answers');
is($r->{content}, $s->get('/hello.pl')->{content}, 'as hello.pl does');
like($s->error_log, qr/1 interpreter threads started in plxd/, 'the log says where it runs');

my $cwd_before = readlink("/proc/" . $s->pid . "/cwd");
$r = $s->get('/sub/cwd.plt');
is($r->{content}, $s->root . "/sub\n", "the script's folder is its working directory");
is(readlink("/proc/" . $s->pid . "/cwd"), $cwd_before, "plxd's own stays where it was");

$r = $s->get('/children.plt?q=42');
is($r->{status}, 200, 'a script starting programs answers');
like($r->{content}, qr/^backticks:q=42$/m, "backticks see the request's %ENV");
like($r->{content}, qr/^system:GET$/m, "system's output is in the response, with the request's %ENV");
like($r->{content}, qr/^fds:$/m, 'a program gets fds 0, 1 and 2 only, none of plxd\'s');
like($r->{content}, qr/^blocked:0+$/m, 'and no blocked signal');
like($r->{content}, qr/^leftover:none$/m, "%ENV set by the request before is gone");

$r = $s->get('/exec.plt');
is($r->{status}, 200, 'exec without fork: the response so far is sent');
is($r->{content}, "before exec\n", '... and exec did not replace plxd');
ok(wait_for(sub { $s->error_log =~ qr{exec\.plt: exec refused: it would replace plxd} }), 'the log says why');

$r = $s->get('/exit.plt');
is($r->{content}, "before _exit\n", 'POSIX::_exit ends the request');
ok(wait_for(sub { $s->error_log =~ qr{exit\.plt: exited with status 3} }), '... with its status, as exit does');

$r = $s->get('/fork_exec.plt');
like($r->{content}, qr/^child exec\nstatus:0$/m, 'exec in a forked child runs the program');

$r = $s->get('/alarm.plt');
is($r->{content}, "caught: timeout\n", "alarm is the thread's own: its \$SIG{ALRM} dies into the eval");
is($s->get('/hello.plt')->{status}, 200, '... and plxd serves on');

$r = $s->get('/runaway.plt');
is($r->{status}, 504, 'a runaway script gets 504 at timeout');
ok(wait_for(sub { $s->error_log =~ /runaway\.plt: its interpreter ends it/ }),
    'its interpreter ends it, logged under its name');
unlike($r->{content} // '', qr/caught/, 'its own eval did not catch the end');
$r = $s->get('/hello.plt');
is($r->{status}, 200, 'the only interpreter thread serves again (a fresh clone)');
is($s->get('/sub/cwd.plt')->{content}, $s->root . "/sub\n", '... with the request glue intact');

# A script asleep in a system call: the cancel's signal wakes it, so that
# it ends at its next op, and its thread is free at once, not when the
# sleep would have ended.
$r = $s->get('/sleep.plt');
is($r->{status}, 504, 'a script asleep past timeout gets 504');
my $t0 = time;
is($s->get('/hello.plt')->{status}, 200, 'the only interpreter thread serves again');
cmp_ok(time - $t0, '<', 20, '... within seconds, not once its sleep of 100 s is over');

# Scripts past timeout while they wait for programs (system, a shell's
# background job, backticks, fork and waitpid): each program is killed with
# what it started, reaped, and nothing of perl's for it stays open in plxd.
sub sleepers { return grep { read_file($_) eq "sleep\0" . "31.7\0" } glob '/proc/[0-9]*/cmdline' }
sub zombies {
    my ($parent) = @_;
    return grep { (read_file($_) =~ /^\d+ \(.*\) (\S) (\d+)/)[0] eq 'Z' && $2 == $parent } glob '/proc/[0-9]*/stat';
}
# Its pipes: the files it serves come and go in its cache of open files.
sub pipes { return scalar grep { (readlink($_) // '') =~ /^pipe:/ } glob('/proc/' . $s->pid . '/fd/*') }
my $pipes = pipes();
for my $script (qw(wait_system wait_group wait_ticks wait_fork)) {
    my $t0 = time;
    my $plt = $s->get("/$script.plt");    # 504, or 200 with the headers perl flushed before its fork
    cmp_ok(time - $t0, '<', 10, "$script: ended at timeout, not when its program would end");
    $t0 = time;
    my $pl = $s->get("/$script.pl");
    cmp_ok(time - $t0, '<', 10, "$script.pl: the same");
    is($plt->{status}, $pl->{status}, "$script: answered as the CGI script is ($pl->{status})");
}
is($s->get('/hello.plt')->{status}, 200, 'the interpreter thread serves again');
ok(wait_for(sub { !sleepers() }, 10), 'every program they started is gone, children of children too')
    or diag(join ' ', sleepers());
ok(wait_for(sub { !zombies($s->pid) }, 10), '... and reaped: no zombie under plxd')
    or diag(join ' ', zombies($s->pid));
# (The CGI scripts' pipes close as their gateway ends, a moment after.)
ok(wait_for(sub { pipes() == $pipes }, 10), "plxd holds as many pipes as before ($pipes)")
    or diag(pipes() . ' pipes');

# A client that leaves in the middle of a large response: the script's
# output is drained until it returns (a thread cannot be killed), so the
# only interpreter thread serves again.
{
    my $c = $s->connect;
    print $c "GET /huge.plt HTTP/1.1\r\nHost: x\r\n\r\n";
    my $got = 0;
    while ($got < 100_000) {
        my $n = sysread($c, my $buf, 65536) or last;
        $got += $n;
    }
    close $c;
    ok($got >= 100_000, 'a large response starts');
    ok(wait_for(sub { ($s->get('/hello.plt')->{status} // 0) == 200 }, 20),
        'after its client left, the thread serves again');
}

ok(kill(0, $s->pid), 'plxd survived all of it');
$s->stop;

# Each thread reaps only what its own scripts forked: a script waiting for
# its child gets that child's status, however many other scripts fork and
# leave children meanwhile on the other thread (waitpid(-1) took it).
my $t = PlxdTest->start(
    files => {
        'own.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
my $pid = fork // die;
if (!$pid) { select(undef, undef, undef, 0.3); CORE::exit(5) }
select(undef, undef, undef, 1.5);
my $r = waitpid($pid, 0);
print "reaped:", ($r == $pid ? 'own' : $r), " status:", $? >> 8, "\n";
EOF
        'leave.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
my $pid = fork // die;
CORE::exit(0) if !$pid;
print "left\n";
EOF
        map { ("comp$_.plt" => "use strict; use warnings; BEGIN { select(undef, undef, undef, 0.05) }\n"
            . "print \"Content-Type: text/plain\\n\\ncomp$_\\n\";\n") } 1 .. 24,
    },
    handlers => { '.plt' => 'perl:thread' },
    sections => { 'perl:thread' => { isolation => 'thread', workers => 2 } },
);
# Two threads compiling at once: each holds its own stderr, never plxd's
# fd 2 (swapped process-wide, it was left on a deleted in-memory file).
my $fd2 = readlink("/proc/" . $t->pid . "/fd/2");
my @clients;
for my $k (0 .. 1) {
    my $pid = fork // die;
    if (!$pid) {
        $t->get("/comp$_.plt") for grep { $_ % 2 == $k } 1 .. 24;
        POSIX::_exit(0);
    }
    push @clients, $pid;
}
waitpid $_, 0 for @clients;
is($t->get('/comp1.plt')->{content}, "comp1\n", 'scripts compiled two at a time answer');
is(readlink("/proc/" . $t->pid . "/fd/2"), $fd2, "plxd's fd 2 is still its log");
my $own = $t->connect;
print $own "GET /own.plt HTTP/1.0\r\n\r\n";
my $until = time + 1.4;
my $left = 0;
while (time < $until) {
    $left++ if ($t->get('/leave.plt')->{content} // '') eq "left\n";
}
my $reply = do { local $/; <$own> } // '';
ok($left > 3, "the other thread served scripts that left children ($left)");
like($reply, qr/reaped:own status:5/, "the waiting script reaped its own child, with its status");
$t->stop;

# A stop ends what the scripts still run. One asleep in a system call is
# woken and ended at once; one that cannot be woken, its thread blocking
# SIGALRM (as C code that reaches no Perl op cannot be), keeps its thread,
# and plxd stops without it once every wait is over, naming it in the log.
my %stuck = (
    'asleep.plt' => <<'EOF',
$| = 1;
print "Content-Type: text/plain\n\nasleep\n";
sleep 100;
EOF
    'blocked.plt' => <<'EOF',
use POSIX ();
$| = 1;
print "Content-Type: text/plain\n\nblocked\n";
POSIX::sigprocmask(POSIX::SIG_BLOCK(), POSIX::SigSet->new(POSIX::SIGALRM()));
sleep 300;
EOF
);
# The CGI script asleep at a stop is ended as the .plt is.
$stuck{'asleep.pl'} = $stuck{'asleep.plt'};
for my $case (['asleep.plt', 15], ['asleep.pl', 15], ['blocked.plt', 90]) {
    my ($script, $bound) = @$case;
    my $u = PlxdTest->start(
        files    => \%stuck,
        handlers => { '.plt' => 'perl:thread', '.pl' => 'cgi' },
        server   => { shutdown_timeout => '1s' },
        sections => { 'perl:thread' => { isolation => 'thread', workers => 1, timeout => '300s' } },
    );
    my $c = $u->connect;
    print $c "GET /$script HTTP/1.0\r\n\r\n";
    like(scalar(<$c>) // '', qr{^HTTP/1\.\d 200 }, "$script runs");
    my $t0 = time;
    $u->signal('TERM');
    my $status = $u->wait_exit($bound);
    is($status, 0, "plxd stops with $script running, in under $bound s");
    diag(sprintf '%s: stopped in %.1f s', $script, time - $t0);
    my $left = qr{stopping without an interpreter thread that runs on.*\Q$script\E};
    if ($script eq 'blocked.plt') {
        like($u->error_log, $left, '... and the log names the script it left running');
    } else {
        unlike($u->error_log, $left, '... with its script ended');
    }
    ok(!grep({ read_file($_) =~ /asleep\.pl\0/ } glob '/proc/[0-9]*/cmdline'), '... and no process of it left')
        if $script eq 'asleep.pl';
    unlike($u->error_log, qr/AddressSanitizer|LeakSanitizer|runtime error:/, 'no sanitizer report');
}
done_testing;
