# Process-wide state in interpreter threads ([perl] isolation = thread):
# what a script does to %SIG, alarm, wait, kill, its user, $0, its limits
# and its TZ stays the script's own, or is refused, and never reaches plxd.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for read_file);
use PlxdServer;
use Time::HiRes qw(time);
use POSIX ();

# SigIgn and SigCgt of a process (its dispositions: every thread's).
sub dispositions {
    my ($pid) = @_;
    my $st = read_file("/proc/$pid/status");
    return join ' ', map { $st =~ /^$_:\s*(\S+)/m ? $1 : '?' } qw(SigIgn SigCgt);
}

my %files = (
    'hello.plt' => qq{print "Content-Type: text/plain\\n\\nhello\\n";\n},
    # alarm: the thread's own, with $SIG{ALRM} dying into the script's eval.
    'alarm_loop.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
my $t0 = time;
my $r = eval { local $SIG{ALRM} = sub { die "timeout\n" }; alarm 1; 1 while 1; alarm 0; 'done' };
print $r // "caught: $@";
EOF
    'alarm_sleep.plt' => <<'EOF',
use Time::HiRes ();
print "Content-Type: text/plain\n\n";
my $t0 = Time::HiRes::time();
my $r = eval { local $SIG{ALRM} = sub { die "timeout\n" }; alarm 1; sleep 5; alarm 0; 'done' };
printf "%s elapsed:%.1f\n", ($r // "caught: $@") =~ s/\n//r, Time::HiRes::time() - $t0;
$t0 = Time::HiRes::time();
$r = eval { local $SIG{ALRM} = sub { die "timeout\n" }; alarm 1; select(undef, undef, undef, 5); alarm 0; 'done' };
printf "%s elapsed:%.1f\n", ($r // "caught: $@") =~ s/\n//r, Time::HiRes::time() - $t0;
EOF
    'alarm_left.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
my $none = alarm 10;
my $left = alarm 3;
my $zero = alarm 0;
my $after = alarm 0;
my $n = 0;
local $SIG{ALRM} = sub { $n++; eval { die "inside\n" } };
eval { die "kept\n" };
alarm 1;
my $t0 = time;
1 while !$n && time - $t0 < 4;
print "none:$none left:$left zero:$zero after:$after handled:$n err:$@";
EOF
    # Arms an alarm and leaves: it must not go off in the next request.
    'alarm_leave.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
$SIG{ALRM} = sub { die "alarm from the request before\n" };
alarm 1;
print "armed\n";
EOF
    'slow.plt' => <<'EOF',
use Time::HiRes ();
print "Content-Type: text/plain\n\n";
my $t0 = Time::HiRes::time();
select(undef, undef, undef, 1.5);
my $n = select(undef, undef, undef, 0.2);
printf "slept:%.1f alrm:%s\n", Time::HiRes::time() - $t0, $SIG{ALRM} // 'none';
EOF
    'alarm_default.plt' => <<'EOF',
print "Content-Type: text/plain\n\nbefore\n";
$| = 1;
alarm 1;
sleep 5;
print "after\n";
EOF
    # %SIG: the script's own table, never plxd's dispositions.
    'sig_set.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
$| = 1;
$SIG{TERM} = 'IGNORE';
$SIG{HUP} = sub { };
$SIG{PIPE} = 'IGNORE';
$SIG{INT} = 'IGNORE';
$SIG{CHLD} = sub { };
my $st = do { local $/; open my $f, '<', '/proc/self/status' or die; <$f> };
print map { $st =~ /^($_:\s*\S+)/m ? "$1\n" : () } qw(SigIgn SigCgt);
print "TERM:$SIG{TERM} PIPE:$SIG{PIPE} HUP:", ref $SIG{HUP}, "\n";
print "keys:", (grep { $_ eq 'TERM' } keys %SIG) ? 'yes' : 'no', "\n";
system(q{sed -n 's/^SigIgn:/child SigIgn:/p' /proc/self/status});
EOF
    'sig_read.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
print join(' ', map { "$_:" . ($SIG{$_} // 'none') } qw(TERM HUP PIPE INT CHLD ALRM)), "\n";
system(q{sed -n 's/^SigIgn:/child SigIgn:/p' /proc/self/status});
EOF
    'sig_hold.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
$SIG{TERM} = 'IGNORE';
$SIG{HUP} = sub { print "HUP reached the script\n" };
$SIG{INT} = 'IGNORE';
print STDERR "handlers set\n";
my $t0 = time;
select(undef, undef, undef, 0.05) while time - $t0 < 3;
print "held\n";
EOF
    # wait and waitpid(-1): the script's own children only.
    'wait_none.plt' => <<'EOF',
use POSIX ':sys_wait_h';
print "Content-Type: text/plain\n\n";
my $w = wait;
my $ws = $?;
my $p = waitpid(-1, 0);
my $ps = $?;
my $n = waitpid(-1, WNOHANG);
print "wait:$w/$ws waitpid:$p/$ps nohang:$n\n";
EOF
    'wait_own.plt' => <<'EOF',
use POSIX ':sys_wait_h';
print "Content-Type: text/plain\n\n";
my $pid = fork // die;
if (!$pid) { select(undef, undef, undef, 0.3); CORE::exit(7) }
my $early = waitpid(-1, WNOHANG);
my $r = wait;
print "early:$early wait:", ($r == $pid ? 'own' : $r), " status:", $? >> 8, "\n";
my $pipe = open(my $fh, '-|', 'sh', '-c', 'exit 3') // die;
$r = waitpid(-1, 0);
print "pipe:", ($r == $pipe ? 'own' : $r), " status:", $? >> 8, "\n";
$r = wait;
print "then:$r\n";
EOF
    # POSIX::sigaction: the script's own %SIG, as $SIG{NAME} = is.
    'sigaction.plt' => <<'EOF',
use POSIX qw(sigaction SIGTERM SIGHUP SIGALRM);
print "Content-Type: text/plain\n\n";
my $old = POSIX::SigAction->new;
my $ok = sigaction(SIGTERM, POSIX::SigAction->new('IGNORE'), $old);
sigaction(SIGHUP, POSIX::SigAction->new(sub { print "HUP ran\n" }));
my $r = eval {
    sigaction(SIGALRM, POSIX::SigAction->new(sub { die "timeout\n" })) or die "sigaction: $!\n";
    alarm 1;
    select(undef, undef, undef, 3);
    alarm 0;
    'done';
};
my $bad = defined sigaction(9999, POSIX::SigAction->new('IGNORE')) ? 'set' : 'EINVAL';
print "ok:", ($ok ? 1 : 0), " old:$old->{HANDLER} TERM:$SIG{TERM} HUP:", ref $SIG{HUP},
    " alarm:", $r // "caught: $@";
print "bad:$bad\n";
EOF
    # waitpid of a given pid: one of the script's own, or ECHILD.
    'wait_pid.plt' => <<'EOF',
use POSIX ':sys_wait_h';
print "Content-Type: text/plain\n\n";
my $pid = $ENV{QUERY_STRING};
my $n = waitpid($pid, WNOHANG);
my $e1 = $! == POSIX::ECHILD() ? 'ECHILD' : "$!";
my $b = waitpid($pid, 0);
my $e2 = $! == POSIX::ECHILD() ? 'ECHILD' : "$!";
print "nohang:$n/$e1 blocking:$b/$e2\n";
EOF
    'wait_alarm.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
my $pid = fork // die;
if (!$pid) { sleep 5; CORE::exit(0) }
my $r = eval { local $SIG{ALRM} = sub { die "timeout\n" }; alarm 1; wait; alarm 0; 'waited' };
print $r // "caught: $@";
kill 'KILL', $pid;
print "reaped:", (waitpid($pid, 0) == $pid ? 'own' : 'none'), "\n";
EOF
    'slow.pl' => <<'EOF',
#!/usr/bin/perl
print "Content-Type: text/plain\n\n";
$| = 1;
select(undef, undef, undef, 2);
print "cgi done\n";
EOF
    # kill: plxd and its process group are out of reach.
    'kill.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
my @r;
for my $target (0, $$, -getpgrp(), getppid()) {
    $! = 0;
    my $n = kill 'TERM', $target;
    push @r, "$n/" . ($!{EPERM} ? 'EPERM' : 'ok');
}
push @r, 'group:' . kill('-TERM', getpgrp());
push @r, 'zero:' . kill(0, $$);
my $pid = fork // die;
if (!$pid) { sleep 10; CORE::exit(0) }
push @r, 'child:' . kill('TERM', $pid);
waitpid $pid, 0;
push @r, 'sig:' . ($? & 127);
require POSIX;
$! = 0;
push @r, 'raise:' . (POSIX::raise(POSIX::SIGTERM()) // 'undef') . '/' . ($!{EPERM} ? 'EPERM' : 'ok');
print "@r\n";
EOF
    # The user and group: refused.
    'uid.plt' => <<'EOF',
use POSIX ();
print "Content-Type: text/plain\n\n";
my ($uid, $euid, $gid) = ($<, $>, $( + 0);
$! = 0;
$< = $uid;
my $e1 = $!{EPERM} ? 'EPERM' : 'ok';
$> = $euid;
my $r = POSIX::setuid($uid);
my $e2 = $!{EPERM} ? 'EPERM' : 'ok';
print "uid:", ($< == $uid ? 'same' : $<), " euid:", ($> == $euid ? 'same' : $>),
    " set:$e1 posix:", ($r // 'undef'), "/$e2\n";
my $child = `$^X -e 'print \$<'`;
print "child:", ($child == $uid ? 'same' : $child), "\n";
EOF
    # $0: the interpreter's own; plxd's command line stays.
    'zero.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
my $was = $0;
$0 = 'renamed-by-script';
print "zero:$0 was:", ($was =~ m{/zero\.plt$} ? 'script' : $was), "\n";
EOF
    'zero_again.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
print "zero:", ($0 =~ m{/zero_again\.plt$} ? 'script' : $0), "\n";
EOF
    # rlimits: a program the script starts changes its own.
    'ulimit.plt' => <<'EOF',
print "Content-Type: text/plain\n\n";
print "child:", `sh -c 'ulimit -S -n 77; ulimit -S -n'`;
EOF
    # TZ: localtime uses plxd's zone; programs the script starts get %ENV's.
    'tz.plt' => <<'EOF',
use POSIX ();
print "Content-Type: text/plain\n\n";
$ENV{TZ} = 'JST-9';
POSIX::tzset();
my @t = localtime(0);
print "hour:$t[2] strftime:", POSIX::strftime('%H', localtime(0)), " child:", `date -d \@0 +%H`;
EOF
);

my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plt' => 'perl:thread' },
    sections => { 'perl:thread' => { isolation => 'thread', workers => 2, timeout => '20s' } },
    env      => { TZ => 'UTC' },
    # A process group of its own: a kill of plxd's group, were it let
    # through, must not reach this test.
    prefix => ['setsid'],
);
isnt(PlxdServer::proc_pgrp($s->pid), getpgrp(), 'plxd runs in a process group of its own');
is($s->get('/hello.plt')->{content}, "hello\n", 'hello.plt answers');

# ---- alarm ----
my $t0 = time;
my $r = $s->get('/alarm_loop.plt');
is($r->{content}, "caught: timeout\n", 'alarm in a pure-Perl loop: $SIG{ALRM} dies into the eval');
my $took = time - $t0;
ok($took >= 0.9 && $took < 5, "... after its second ($took s)");
like($s->get('/alarm_sleep.plt')->{content}, qr/^caught: timeout elapsed:1\.\d\ncaught: timeout elapsed:1\.\d\n\z/,
    'sleep and select return at the alarm, and the handler runs');
is($s->get('/alarm_left.plt')->{content}, "none:0 left:10 zero:3 after:0 handled:1 err:kept\n",
    'alarm returns the seconds left, as the builtin does; a handler that returns lets the script go on, $@ as it was');

# An alarm a request leaves armed is disarmed at its end: the next request
# on either thread sleeps undisturbed.
is($s->get('/alarm_leave.plt')->{content}, "armed\n", 'a script arms an alarm and leaves');
my @slow;
for (1 .. 2) {
    my $c = $s->connect;
    print $c "GET /slow.plt HTTP/1.0\r\n\r\n";
    push @slow, $c;
}
for my $c (@slow) {
    my $reply = do { local $/; <$c> } // '';
    like($reply, qr/slept:1\.\d alrm:none/, 'the next requests are not interrupted, and see no $SIG{ALRM}');
}
unlike($s->error_log, qr/alarm from the request before/, 'the old handler never ran');

# Two threads at once: one's alarm interrupts only its own script.
{
    my $c = $s->connect;
    print $c "GET /slow.plt HTTP/1.0\r\n\r\n";
    like($s->get('/alarm_sleep.plt')->{content}, qr/^caught: timeout/, "one thread's alarm goes off");
    my $reply = do { local $/; <$c> } // '';
    like($reply, qr/slept:1\.\d/, "... and the other thread's sleep is left alone");
}

$r = $s->get('/alarm_default.plt');
is($r->{content}, "before\n", 'an alarm with no handler ends the request, as SIGALRM ends a CGI script');
ok($s->wait_log(qr{alarm_default\.plt: Alarm clock: no \$SIG\{ALRM\} handler}), '... and the log says so');
kill 'ALRM', $s->pid;
ok(wait_for(sub { ($s->get('/hello.plt')->{content} // '') eq "hello\n" }), 'a SIGALRM sent to plxd does not end it');

# ---- %SIG ----
my $before = dispositions($s->pid);
$r = $s->get('/sig_set.plt');
my ($ign, $cgt) = $before =~ /(\S+) (\S+)/;
like($r->{content}, qr/^SigIgn:\s*\Q$ign\E\nSigCgt:\s*\Q$cgt\E\n/,
    "setting TERM, HUP, PIPE, INT and CHLD in %SIG leaves plxd's dispositions as they were");
like($r->{content}, qr/^TERM:IGNORE PIPE:IGNORE HUP:CODE$/m, 'the script reads back what it set');
like($r->{content}, qr/^keys:yes$/m, 'keys %SIG are the signal names');
my ($child_ign) = $r->{content} =~ /^child SigIgn:\s*(\S+)/m;
ok(defined $child_ign && (hex(substr($child_ign, -8)) & (1 << (15 - 1))) && (hex(substr($child_ign, -8)) & (1 << (13 - 1))),
    "a program it starts has TERM and PIPE ignored, as it set them");
is(dispositions($s->pid), $before, "after the request too");
for (1 .. 2) {    # both threads
    $r = $s->get('/sig_read.plt');
    like($r->{content}, qr/^TERM:none HUP:none PIPE:none INT:none CHLD:none ALRM:none$/m,
        'the next request sees a clean %SIG');
    ($child_ign) = $r->{content} =~ /^child SigIgn:\s*(\S+)/m;
    is(hex(substr($child_ign // 'f', -8)) & ((1 << 14) | (1 << 12)), 0, '... and so do the programs it starts');
}

# ---- POSIX::sigaction ----
$before = dispositions($s->pid);
is($s->get('/sigaction.plt')->{content},
    "ok:1 old:DEFAULT TERM:IGNORE HUP:CODE alarm:caught: timeout\nbad:EINVAL\n",
    "POSIX::sigaction sets the script's %SIG (and its SIGALRM handler runs at the thread's alarm)");
is(dispositions($s->pid), $before, "... and none of plxd's dispositions");
for (1 .. 2) {    # both threads
    like($s->get('/sig_read.plt')->{content}, qr/^TERM:none HUP:none PIPE:none INT:none CHLD:none ALRM:none$/m,
        '... which the next request does not see');
}

# ---- wait, waitpid(-1) ----
is($s->get('/wait_none.plt')->{content}, "wait:-1/-1 waitpid:-1/-1 nohang:-1\n",
    'wait and waitpid(-1) with no child of its own return -1, $? -1, as the builtin does');
is($s->get('/wait_own.plt')->{content}, "early:0 wait:own status:7\npipe:own status:3\nthen:-1\n",
    "they wait for the script's own children: a fork, a pipe open");
is($s->get('/wait_alarm.plt')->{content}, "caught: timeout\nreaped:own\n",
    'an alarm interrupts wait, into the eval');
{
    my $cgi = $s->connect;
    print $cgi "GET /slow.pl HTTP/1.0\r\n\r\n";
    ok(wait_for(sub { grep { read_file("/proc/$_/cmdline") =~ /slow\.pl/ } keys %{ { PlxdServer::descendants($s->pid) } } }),
        'a CGI script of plxd runs');
    $t0 = time;
    is($s->get('/wait_none.plt')->{content}, "wait:-1/-1 waitpid:-1/-1 nohang:-1\n",
        "meanwhile waitpid(-1) in a script does not reap plxd's child");
    ok(time - $t0 < 1.5, '... nor wait for it');
    my ($cgi_pid) = grep { read_file("/proc/$_/cmdline") =~ /slow\.pl/ } keys %{ { PlxdServer::descendants($s->pid) } };
    is($s->get("/wait_pid.plt?$cgi_pid")->{content}, "nohang:-1/ECHILD blocking:-1/ECHILD\n",
        "waitpid of plxd's child by its pid: no child of the script's (ECHILD)");
    my $reply = do { local $/; <$cgi> } // '';
    like($reply, qr{^HTTP/1\.[01] 200.*cgi done\n\z}s, 'the CGI script answers in full');
}

# ---- kill ----
is($s->get('/kill.plt')->{content}, "0/EPERM 0/EPERM 0/EPERM 0/EPERM group:0 zero:1 child:1 sig:15 raise:undef/EPERM\n",
    'kill of plxd ($$), of its group (0, -PGRP, -SIG), of its master (the parent), and POSIX::raise are refused; signal 0 and its own children work');
ok($s->wait_log(qr{kill\.plt: kill refused: TERM to plxd, its process group or its master}), '... with a line in the log');
is($s->get('/hello.plt')->{content}, "hello\n", 'plxd serves on');

# ---- the user ----
is($s->get('/uid.plt')->{content}, "uid:same euid:same set:EPERM posix:undef/EPERM\nchild:same\n",
    'setting $<, $> and POSIX::setuid is refused, with EPERM');
ok($s->wait_log(qr{uid\.plt: \$< = \d+ refused: it would change plxd's user}), '... with a line in the log');

# ---- $0 ----
my $cmdline = read_file("/proc/" . $s->pid . "/cmdline");
is($s->get('/zero.plt')->{content}, "zero:renamed-by-script was:script\n", '$0 is the script\'s path, and it may set it');
is(read_file("/proc/" . $s->pid . "/cmdline"), $cmdline, "plxd's command line stays");
is($s->get('/zero_again.plt')->{content}, "zero:script\n", 'the next request has its own $0');

# ---- rlimits ----
my ($nofile) = read_file("/proc/" . $s->pid . "/limits") =~ /^Max open files\s+(\d+)/m;
is($s->get('/ulimit.plt')->{content}, "child:77\n", 'ulimit in a program the script starts sets that program\'s');
my ($nofile_after) = read_file("/proc/" . $s->pid . "/limits") =~ /^Max open files\s+(\d+)/m;
is($nofile_after, $nofile, "plxd's own stay");

# ---- TZ ----
is($s->get('/tz.plt')->{content}, "hour:0 strftime:00 child:09\n",
    "localtime keeps plxd's zone (TZ=UTC here) whatever \$ENV{TZ} says; a program the script starts gets \$ENV{TZ}");
like(read_file("/proc/" . $s->pid . "/environ"), qr/(?:^|\0)TZ=UTC\0/, "plxd's environment is unchanged");

# ---- SIGHUP and SIGTERM while a script set TERM, HUP and INT ----
{
    my $c = $s->connect;
    print $c "GET /sig_hold.plt HTTP/1.0\r\n\r\n";
    ok($s->wait_log(qr/handlers set/), 'a script set TERM and INT to IGNORE, and HUP to a sub');
    $s->signal('HUP');
    ok($s->wait_log(qr/configuration reloaded/), 'SIGHUP still reloads plxd');
    $s->signal('TERM');
    my $reply = do { local $/; <$c> } // '';
    like($reply, qr/held\n\z/, 'the script finishes its request (a graceful stop)');
    unlike($reply, qr/HUP reached/, "plxd's SIGHUP never ran the script's handler");
    my $status = $s->wait_exit(30);
    ok(defined $status, 'SIGTERM still stops plxd');
    is($status // -1, 0, '... with status 0');
    unlike($s->error_log, qr/AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:/,
        'no sanitizer report in the logs');
}

# A preload runs in perl's first interpreter, whose %SIG sets process
# dispositions (SIGCHLD ignored would make the kernel reap plxd's CGI
# children): its handlers stay in %SIG, for the scripts, and plxd keeps
# its own dispositions.
my $p = PlxdTest->start(
    files => {
        'preload.pl' => "\$SIG{TERM} = 'IGNORE'; \$SIG{HUP} = sub { }; \$SIG{INT} = 'IGNORE';\n"
            . "\$SIG{CHLD} = 'IGNORE'; \$SIG{USR1} = sub { }; 1;\n",
        'sig.plt' => qq{print "Content-Type: text/plain\\n\\nTERM:\$SIG{TERM}\\n";\n},
    },
    handlers => { '.plt' => 'perl:thread' },
    sections => { 'perl:thread' => { isolation => 'thread', workers => 1, preload => 'root/preload.pl' } },
);
is($p->get('/sig.plt')->{content}, "TERM:IGNORE\n", 'what the preload set is in the scripts\' %SIG');
is(dispositions($p->pid), $before, "plxd's dispositions are those of a plxd without the preload");
$p->signal('HUP');
ok($p->wait_log(qr/configuration reloaded/), 'SIGHUP reloads plxd, whose preload set $SIG{HUP}');
$p->signal('TERM');
my $status = $p->wait_exit(30);
is($status // -1, 0, "SIGTERM stops it, whose preload set \$SIG{TERM} = 'IGNORE'");
done_testing;
