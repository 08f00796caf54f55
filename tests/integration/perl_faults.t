# The persistent Perl handler under faults: exit, die, a script past its
# timeout, a segfault, a 2 GB allocation, scripts that break their own
# process state; workers replaced (crash, timeout) or recycled
# (max_requests, max_rss, a changed module); the queue; preload and inc.
# Nothing a script does takes plxd or another request down.
# In thread mode (PLXD_TEST_ISOLATION=thread) the same cases check what
# doc/perl.md's isolation table says of that mode where the modes differ:
# every interpreter has plxd's pid, a segfault ends plxd, max_requests and
# max_rss do not apply, a changed module the preload loaded and a
# reload's settings wait for a restart.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for write_file thread_mode);
use PlxdRaw qw(responses);
use POSIX ();
use File::Temp ();
use IO::Select;
use Time::HiRes qw(time);

my $sanitized = PlxdTest::read_file(PlxdTest::build_dir() . '/CMakeCache.txt')
    =~ /^PLXD_SANITIZE:BOOL=ON$/m;

my $pid_script = "print \"Content-Type: text/plain\\n\\n\$\$\\n\";\n";
my %files = (
    'pid.plx' => $pid_script,
    'exit.plx' => <<'EOF',
print "Content-Type: text/plain\n\n";
print "before\n";
eval { exit 3 };
print "after\n";
EOF
    'die.plx' => "die \"oops\\n\";\n",
    'headdie.plx' => "print \"Content-Type: text/plain\\n\\nsaid\\n\";\ndie \"oops\\n\";\n",
    'latedie.plx' => <<'EOF',
$| = 1;
print "Content-Type: text/plain\n\n", "partial\n";
select(undef, undef, undef, 0.5);
die "late oops\n";
EOF
    'loop.plx' => "1 while 1;\n",
    'loopchild.plx' => "system('sleep', '120.25');\n",
    'sleeping.plx' => "print \"Content-Type: text/plain\\n\\n\";\nsleep 120;\n",
    'segv.plx' => "print \"Content-Type: text/plain\\n\\n\";\nunpack 'p', pack 'Q', 8;\n",
    'big.plx' => <<'EOF',
my $n = 2 * 1024 * 1024 * 1024 + ($ENV{QUERY_STRING} eq 'never' ? 1 : 0);
my $x = 'x' x $n;
print "Content-Type: text/plain\n\n", length($x), "\n";
EOF
    'closeout.plx' => "print \"Content-Type: text/plain\\n\\nclosed\\n\";\nclose STDOUT;\nprint \"lost\\n\";\n",
    'wreck.plx' => <<'EOF',
%ENV = ();
chdir '/';
$SIG{ALRM} = sub { die "alarm\n" };
alarm 1;
$SIG{PIPE} = 'IGNORE';
close STDERR;
close STDIN;
print "Content-Type: text/plain\n\nwrecked\n";
EOF
    'state.plx' => <<'EOF',
use Cwd;
print "Content-Type: text/plain\n\n";
print "cwd=", getcwd(), " method=$ENV{REQUEST_METHOD} alrm=", ($SIG{ALRM} // 'none'), "\n";
warn "stderr works\n";
EOF
    # Its background process marks when its late output was written (even
    # if writing it failed).
    'bg.plx' => <<'EOF',
print "Content-Type: text/plain\n\nfirst\n";
system("((echo late); touch '$ENV{DOCUMENT_ROOT}/bg.done') &");
EOF
    # wait.plx?MARK&RELEASE: creates MARK, then waits for RELEASE (60 s at
    # most), so a test holds a worker busy exactly as long as it needs to.
    'wait.plx' => <<'EOF',
my ($mark, $release) = split /&/, $ENV{QUERY_STRING};
open my $fh, '>', $mark or die "$mark: $!";
close $fh;
my $until = time + 60;
select(undef, undef, undef, 0.02) until -e $release || time > $until;
print "Content-Type: text/plain\n\nreleased\n";
EOF
    # meet.plx?DIR&N&NAME: leaves a file NAME in DIR and waits (20 s at
    # most) until N requests have: only scripts running side by side can
    # meet.
    'meet.plx' => <<'EOF',
my ($dir, $n, $name) = split /&/, $ENV{QUERY_STRING};
open my $fh, '>', "$dir/$name" or die "$dir/$name: $!";
close $fh;
my $until = time + 20;
select(undef, undef, undef, 0.02) until (() = glob "$dir/*") >= $n || time > $until;
print "Content-Type: text/plain\n\n", ((() = glob "$dir/*") >= $n ? 'met' : 'alone'), "\n";
EOF
    'grow.plx' => "my \$x = 'x' x (150 * 1024 * 1024);\nprint \"Content-Type: text/plain\\n\\n\$\$\\n\";\n",
    'counter.plx' => "our \$n;\n\$n++;\nprint \"Content-Type: text/plain\\n\\n\$n\\n\";\n",
    # exit while the interpreter is destroyed: CORE::exit in a DESTROY, and
    # an exit override of the script's own that calls it.
    'destroy_exit.plx' => <<'EOF',
package E2;
sub DESTROY { CORE::exit(0) }
package main;
our $obj ||= bless {}, 'E2';
print "Content-Type: text/plain\n\nkept\n";
EOF
    # The same in a script run with taint checks (a second interpreter).
    'destroy_taint.plx' => <<'EOF',
#!/usr/bin/perl -T
package E4;
sub DESTROY { CORE::exit(0) }
package main;
our $obj ||= bless {}, 'E4';
print "Content-Type: text/plain\n\nkept\n";
EOF
    'destroy_override.plx' => <<'EOF',
package E3;
BEGIN { no warnings 'once'; *CORE::GLOBAL::exit = sub { CORE::exit($_[0] // 0) } }
sub DESTROY { exit(3) }
package main;
our $obj ||= bless {}, 'E3';
print "Content-Type: text/plain\n\nkept\n";
EOF
);

sub pid_of { my ($s) = @_; my $r = $s->get('/pid.plx'); return $r->{content} =~ /^(\d+)$/ ? $1 : 'none' }

# The Perl workers of a plxd, from /proc (no request needed).
sub workers_of {
    my ($parent) = @_;
    my @kids;
    for my $stat (glob '/proc/[0-9]*/stat') {
        my ($pid, $comm, $ppid) = PlxdTest::read_file($stat) =~ /^(\d+) \((.*)\) \S+ (\d+)/ or next;
        push @kids, $pid if $ppid == $parent && $comm =~ /^plxd-perl-work/;
    }
    return @kids;
}

my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1 } },
);
my $pid = pid_of($s);
like($pid, qr/^\d+$/, "worker $pid answers");

# exit keeps the output and the worker.
my $r = $s->get('/exit.plx');
is($r->{status}, 200, 'exit: 200');
is($r->{content}, "before\n", 'exit ends the request, even inside eval, output kept');
is(pid_of($s), $pid, 'the worker lives on');

# die before the headers: 500, logged.
is($s->get('/die.plx')->{status}, 500, 'die: 500');
ok($s->wait_log(qr/die\.plx: oops/), 'the message is logged');
is(pid_of($s), $pid, 'the worker lives on');

# die after a complete header block, as under CGI: what the script printed
# is the response, whole, and the die goes to the log.
my $hd = $s->get('/headdie.plx');
is($hd->{status}, 200, 'die after the headers: the response stands');
is($hd->{content}, "said\n", '... with what the script printed');
ok($s->wait_log(qr/headdie\.plx: exited with status 255$/m), '... logged as the end of a CGI process would be');
{
    my $raw = $s->raw("GET /latedie.plx HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 10);
    like($raw, qr/^HTTP\/1.1 200.*partial\n/s, 'flushed headers and body, then die: they arrive');
    like($raw, qr/\r\n0\r\n\r\n\z/, '... and the chunked body ends properly');
    my @late = responses($raw);
    ok(@late == 1 && $late[0]{body} =~ /partial\n/, '... one response, framed exactly');
    ok($s->wait_log(qr/latedie\.plx: late oops/), 'the message is logged');
}

# A crash: 500 (the script's failure, as a CGI process killed by a signal),
# the worker replaced at once. In thread mode it ends plxd (on a plxd of
# its own, below).
if (!thread_mode()) {
    my $pid3 = pid_of($s);
    is($s->get('/segv.plx')->{status}, 500, 'a segfault: 500');
    ok($s->wait_log(qr/perl worker $pid3 died of signal 11/), 'the log says so');
    my $pid4 = pid_of($s);
    like($pid4, qr/^\d+$/, 'the next request is served');
    isnt($pid4, $pid3, 'by a new worker');
}

# What a script does to its process is undone for the next one.
is($s->get('/closeout.plx')->{content}, "closed\n", 'close STDOUT ends the response');
is($s->get('/wreck.plx')->{content}, "wrecked\n", '%ENV = (), chdir, alarm, closed STDERR/STDIN');
my $state = $s->get('/state.plx')->{content};
is($state, "cwd=" . $s->root . " method=GET alrm=none\n", 'environment, folder and %SIG are back');
ok($s->wait_log(qr/state\.plx: stderr works/), 'STDERR works again');
# A background process the script left holding its output: what it prints
# before it closes the output (within linger) ends the response, as under
# CGI, and nothing of it reaches a later response.
is($s->get('/bg.plx')->{content}, "first\nlate\n", 'the response ends when the background process closes the output');
ok(wait_for(sub { -e $s->root . '/bg.done' }), 'the background process wrote its late output');
like($s->get('/pid.plx')->{content}, qr/^\d+\n\z/, 'its late output reaches no later response');

my $pid5 = pid_of($s);
select(undef, undef, undef, 1.3);
is(pid_of($s), $pid5, 'the alarm the script set did not kill its worker');

$s->stop;

if (thread_mode()) {
    my $c = PlxdTest->start(
        files    => \%files,
        crashes  => 1,
        # Under ASan the segfault is the signal, as in a normal build, not
        # a sanitizer report.
        ($sanitized ? (env => { ASAN_OPTIONS => join ':', grep { length }
            ($ENV{ASAN_OPTIONS} // ''), 'handle_segv=0' }) : ()),
        handlers => { '.plx' => 'perl' },
        sections => { perl => { workers => 1 } },
    );
    my $before = $c->pid;
    is(pid_of($c), $before, "in thread mode a script runs in plxd's serving process");
    # Raw: HTTP::Tiny would send the GET again once its connection closed.
    is($c->raw("GET /segv.plx HTTP/1.0\r\n\r\n", 30), '', 'a segfault in an interpreter thread: no response');
    ok($c->wait_log(qr/master: serving process $before killed by signal 11/),
        'it ended the serving process, of the signal: the master says so');
    my $after = pid_of($c);
    like($after, qr/^\d+$/, 'plxd answers again after the crash');
    isnt($after, $before, '... from a new serving process the master started');
    like($c->get('/counter.plx')->{content}, qr/^1$/, '... with fresh interpreters');
    $c->stop;
}

# Past the timeout: 504, worker killed and replaced (and the child it ran).
# Both scripts here run forever and the worker is found in /proc: nothing
# has to finish within the 1 s timeout, and ended within 20 s, a script was
# ended by it, however slow the machine.
my $t = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, timeout => '1s' } },
);
my $tw = thread_mode() ? $t->pid : wait_for(sub { my @w = workers_of($t->pid); @w == 1 ? $w[0] : 0 });
# A timeout costs the script its interpreter: the next request gets a fresh
# one (a new worker, or a fresh clone of the parent), its globals as new.
is($t->get('/counter.plx')->{content}, "1\n", 'a global counter: 1');
is($t->get('/counter.plx')->{content}, "2\n", '... 2 in the same interpreter');
is($t->get('/loop.plx')->{status}, 504, 'a script past the timeout: 504');
is($t->get('/counter.plx')->{content}, "1\n", '... then the counter reads 1 again: a fresh interpreter');
# A script asleep in a system call: in thread mode the cancel's signal to
# its thread interrupts the sleep, so it ends and frees its thread.
is($t->get('/sleeping.plx')->{status}, 504, 'a script asleep past the timeout: 504');
my $t_sleep = time;
is($t->get('/counter.plx')->{content}, "1\n", '... the next request is served, by a fresh interpreter');
ok(time - $t_sleep < 20, '... soon, not after the sleep');
$tw = wait_for(sub { my @w = workers_of($t->pid); @w == 1 ? $w[0] : 0 }) if !thread_mode();
my $t0 = time;
is($t->get('/loop.plx')->{status}, 504, 'an endless loop: 504');
my $took = time - $t0;
ok($took > 0.9 && $took < 20, "after the timeout, not later ($took s)");
if (thread_mode()) {
    # The script is ended at its next op; a fresh clone serves next.
    is(pid_of($t), $t->pid, 'in thread mode the next request is served, in plxd');
    # A script waiting on a child is in C code, which no cancel reaches:
    # the processes it started are killed, as with its worker in process
    # mode, and it gets to its next op.
    is($t->get('/loopchild.plx')->{status}, 504, 'a script waiting on a child: 504');
    ok(wait_for(sub { !`pgrep -xf 'sleep 120.25'` }), 'in thread mode the child is killed');
    is(pid_of($t), $t->pid, 'and the thread serves the next request');
    $t->stop;
} else {
    my $tw2 = wait_for(sub { my @w = grep { $_ != $tw } workers_of($t->pid); @w ? $w[0] : 0 });
    ok($tw2, "a new worker ($tw2) replaced the killed one");
    ok(wait_for(sub { !kill(0, $tw) }), 'the old worker is gone');
    is($t->get('/loopchild.plx')->{status}, 504, 'a script waiting on a child: 504');
    ok(wait_for(sub { !`pgrep -xf 'sleep 120.25'` }), 'the child went with its worker');
    $t->stop;
}

# exit while an interpreter is destroyed (a DESTROY, with CORE::exit or an
# override that calls it) is ignored, with a line naming the script: in
# thread mode it ended plxd, without a word. Interpreters are destroyed
# when a timeout replaces one (thread mode) or a worker retires
# (max_requests).
{
    my $d = PlxdTest->start(
        files    => \%files,
        handlers => { '.plx' => 'perl' },
        sections => { perl => { workers => 1, timeout => '1s', max_requests => 2 } },
    );
    my $root = $d->root;
    for my $case (['destroy_exit', 0], ['destroy_override', 3], ['destroy_taint', 0]) {
        my ($name, $status) = @$case;
        is($d->get("/$name.plx")->{content}, "kept\n", "$name.plx keeps an object whose DESTROY calls exit");
        if (thread_mode()) {
            is($d->get('/loop.plx')->{status}, 504, '... a timeout replaces its interpreter');
        } else {
            $d->get("/$name.plx");    # its worker retires (max_requests)
        }
        ok($d->wait_log(qr{\Q$root/$name.plx\E line \d+: exit\($status\) ignored: its interpreter is being destroyed}),
            "... the exit($status) in its DESTROY is ignored, and the log names the script");
        like(pid_of($d), qr/^\d+$/, '... the next request is served');
    }
    is($d->get('/counter.plx')->{content}, "1\n", 'plxd serves on');
    $d->stop;
}

# --- recycling ---
my $m = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, max_requests => 3,
        max_rss => ($sanitized ? '600M' : '100M') } },
);
my @pids = map { pid_of($m) } 1 .. 7;
my $before = pid_of($m);
my $g;
if (thread_mode()) {
    # max_requests and max_rss do not apply: there is no worker to replace.
    is(scalar(grep { $_ eq $m->pid } @pids), 7, "in thread mode seven requests in plxd's process");
    $g = $m->get('/grow.plx');
    is($g->{status}, 200, 'a script growing plxd past max_rss is answered');
    like(pid_of($m), qr/^\d+$/, 'and the next request is served');
    unlike($m->error_log, qr/retires after/, 'nothing retires');
} else {
    is_deeply([ map { $pids[$_] eq $pids[0] ? 1 : 0 } 0 .. 2 ], [1, 1, 1], 'three requests on one worker');
    isnt($pids[3], $pids[2], 'max_requests: the fourth on a new one');
    is($pids[5], $pids[3], 'which serves three too');
    ok($m->wait_log(qr/retires after 3 requests: it served max_requests/), 'logged');
    $g = $m->get('/grow.plx');
    is($g->{status}, 200, 'a script growing the worker past max_rss is answered');
    isnt(pid_of($m), ($g->{content} =~ /(\d+)/)[0], 'max_rss: its worker is replaced after it');
}

# 2 GB at once: refused by max_memory (2G by default) or, where it cannot
# apply (sanitizer build), allocated and then recycled by max_rss.
my $big = $m->get('/big.plx');
ok($big->{status} == 500 || $big->{status} == 200, "a 2 GB allocation is answered ($big->{status})");
like(pid_of($m), qr/^\d+$/, 'and survived');
$m->stop;

# --- preload, inc, and a changed module ---
my $lib = File::Temp::tempdir(CLEANUP => 1);
write_file("$lib/Shared.pm", "package Shared; our \$V = 1; 1;\n");
my $p = PlxdTest->start(
    files => {
        'startup.pl' => "use Shared; our \$PRELOADED = \$\$; 1;\n",
        'mod.plx' => "use Shared;\nprint \"Content-Type: text/plain\\n\\n\$Shared::V \$main::PRELOADED \$\$\\n\";\n",
    },
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, preload => 'root/startup.pl', inc => $lib } },
);
my ($v, $pre, $wpid) = $p->get('/mod.plx')->{content} =~ /^(\d+) (\d+) (\d+)$/;
is($v, 1, 'a module from an inc folder');
is($pre, $wpid, 'the preload file ran in the worker');
write_file("$lib/Shared.pm", "package Shared; our \$V = 2; 1;\n");
utime(time + 5, time + 5, "$lib/Shared.pm");
if (thread_mode()) {
    # The parent interpreter loaded it: every clone has it as it was. The
    # check looks once a second: requests over 2.5 s see it twice.
    my ($old, $n) = (0, 0);
    for (my $until = time + 2.5; time < $until; $n++) {
        $old++ if $p->get('/mod.plx')->{content} =~ /^1 /;
    }
    is($old, $n, "in thread mode a changed module the preload loaded stays as it was ($n requests)");
    unlike($p->error_log, qr/a module it loaded changed/, 'no interpreter is replaced for it');
} else {
    ok(wait_for(sub { $p->get('/mod.plx')->{content} =~ /^2 / }),
        'a changed module is picked up (its worker is recycled)');
    ok($p->wait_log(qr/a module it loaded changed/), 'logged');
}

# A reload (SIGHUP) replaces the workers with the new settings.
{
    my $conf = PlxdTest::read_file($p->conf_file);
    write_file($p->root . '/startup2.pl', "our \$PRELOADED = 'second'; 1;\n");
    $conf =~ s{^preload = .*$}{preload = root/startup2.pl}m or die 'no preload line';
    write_file($p->conf_file, $conf);
    $p->signal('HUP');
    if (thread_mode()) {
        ok($p->wait_log(qr/interpreter threads keep their settings until a restart/),
            'in thread mode a reload logs that the interpreters keep their settings');
        ok($p->wait_log(qr/configuration reloaded/), 'the reload is done');
        like($p->get('/mod.plx')->{content}, qr/^\d+ $pre \d+$/, 'and the old preload file stays');
    } else {
        ok(wait_for(sub { $p->get('/mod.plx')->{content} =~ /^\d+ second \d+$/ }),
            'after SIGHUP new workers run the new preload file');
    }
}
$p->stop;

my $bad = eval {
    PlxdTest->start(
        files => { 'startup.pl' => "die 'broken preload';\n" },
        handlers => { '.plx' => 'perl' },
        sections => { perl => { workers => 1, preload => 'root/startup.pl' } },
    );
};
ok(!$bad, 'a preload file that dies stops plxd from starting');
like($@, qr/broken preload/, 'and says why');

# --- queue: workers=1, one request waits, the next is refused ---
# The running script holds the worker until the test releases it. Of two
# more requests one is queued and the other refused, whichever comes first;
# queue_timeout (60 s) is far above the 10 s within which the refusal must
# come, so it cannot be a queued request timing out.
my $q = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, queue => 1, queue_timeout => '60s' } },
);
pid_of($q);
my ($running, $release) = ($q->dir . '/running', $q->dir . '/release');
my $first = $q->connect;
$first->syswrite("GET /wait.plx?$running&$release HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
ok(wait_for(sub { -e $running }), 'one request runs');
my @more = map {
    my $c = $q->connect;
    $c->syswrite("GET /pid.plx HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    $c
} 1 .. 2;
my $t1 = time;
my ($answered) = IO::Select->new(@more)->can_read(30);
my $waited_s = time - $t1;
my ($queued) = grep { !$answered || $_ != $answered } @more;
my $refused = $answered ? PlxdTest::read_until_closed($answered, 30) : '';
like($refused, qr{^HTTP/1\.1 503 }, 'beyond the queue: 503');
is(scalar(my @r503 = responses($refused)), 1, '... one response, framed exactly');
ok($waited_s < 10, sprintf('at once (%.2f s)', $waited_s));
like($refused, qr/^Retry-After: 1\r$/m, 'with Retry-After');
ok(!IO::Select->new($queued)->can_read(0), 'the other one waits in the queue');
write_file($release, '');
my ($first_raw, $queued_raw) = map { PlxdTest::read_until_closed($_, 30) } $first, $queued;
is(scalar(my @rf = responses($first_raw)), 1, 'the running request: one response, framed exactly');
is(scalar(my @rq = responses($queued_raw)), 1, 'the queued one: one response, framed exactly');
like($first_raw, qr{^HTTP/1\.1 200 .*released}s, 'the running request is served');
like($queued_raw, qr{^HTTP/1\.1 200 .*\r\n\r\n\d+\n}s,
    'and so is the queued one');

# The same limit where the queue itself enforces it. The GETs above are
# refused at their headers, when the queue is already full; two POSTs whose
# headers both pass while the queue is still empty reach the queue only when
# their bodies are in: the first to get there waits (the queue holds exactly
# `queue` = 1), the second is refused. "100 Continue" says a POST's headers
# were taken, so both bodies are sent only after both heads passed.
my ($running2, $release2) = ($q->dir . '/running2', $q->dir . '/release2');
my $holder = $q->connect;
$holder->syswrite("GET /wait.plx?$running2&$release2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
ok(wait_for(sub { -e $running2 }), 'queue at its limit: one request holds the worker');
my @posts = map { $q->connect } 1 .. 2;
for my $c (@posts) {
    $c->syswrite("POST /pid.plx HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        . "Content-Type: text/plain\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
}
my @heads = map { my $h = ''; my $sel = IO::Select->new($_);
    while ($h !~ /\r\n\r\n/ && $sel->can_read(30)) { sysread($_, $h, 1, length $h) or last }
    $h } @posts;
like($_, qr{^HTTP/1\.1 100 }, '... a POST\'s headers are taken (100 Continue)') for @heads;
$_->syswrite('body') for @posts;
my ($over) = IO::Select->new(@posts)->can_read(30);
my ($waiting) = grep { !$over || $_ != $over } @posts;
my $over_raw = $over ? PlxdTest::read_until_closed($over, 30) : '';
like($over_raw, qr{^HTTP/1\.1 503 }, '... of the two bodies, the one past the queue gets 503');
is(scalar(my @o503 = responses($over_raw)), 1, '... one response, framed exactly');
ok(!IO::Select->new($waiting)->can_read(0.2), '... the other waits in the queue');
write_file($release2, '');
my ($holder_raw, $waiting_raw) = map { PlxdTest::read_until_closed($_, 30) } $holder, $waiting;
like($holder_raw, qr{^HTTP/1\.1 200 .*released}s, '... the held request is served');
like($waiting_raw, qr{^HTTP/1\.1 200 .*\r\n\r\n\d+\n}s, '... then the queued POST');
is(scalar(my @ow = responses($waiting_raw)), 1, '... one response, framed exactly');
like($q->error_log, qr/pid\.plx: no perl worker became free \(queue full\): answered 503/,
    '... the refusal is logged as the queue being full');
$q->stop;

# Two workers run two scripts at the same time: each waits until the other
# has started, which only two scripts running side by side can do.
my $two = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 2 } },
);
pid_of($two);
my $meet = $two->dir . '/meet';
mkdir $meet or die "mkdir $meet: $!";
my @par;
for (1 .. 2) {
    my $kid = fork // die;
    if (!$kid) { POSIX::_exit($two->get("/meet.plx?$meet&2&$_")->{content} eq "met\n" ? 0 : 1) }
    push @par, $kid;
}
my $okpar = 0;
for (@par) { waitpid $_, 0; $okpar++ if $? == 0 }
is($okpar, 2, 'two scripts ran side by side (each saw the other start)');

$two->stop;

# A client that leaves: a script that soon ends (0.3 s) keeps its worker;
# one that runs on (60 s) is ended after the grace period (2 s), and the
# next request is served: within 20 s, so not after the whole script.
my $gone = PlxdTest->start(
    files => {
        %files,
        'drip.plx' => "\$| = 1;\nprint \"Content-Type: text/plain\\n\\n\";\n"
            . "for (1 .. \$ENV{QUERY_STRING}) { print \"drop\\n\"; select(undef, undef, undef, 0.1) }\n",
    },
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1 } },
);
my $gpid = pid_of($gone);
for my $drops (3, 600) {
    my $sock = $gone->connect;
    print $sock "GET /drip.plx?$drops HTTP/1.1\r\nHost: x\r\n\r\n";
    my $got = '';
    sysread($sock, $got, 4096, length $got) until $got =~ /drop/;
    close $sock;
    my $t = time;
    my $next = pid_of($gone);
    my $secs = $drops / 10;
    like($next, qr/^\d+$/, "after a client left a ${secs}s script, the next request is served");
    if ($drops == 3) {
        is($next, $gpid, 'by the same worker: the script finished');
    } elsif (thread_mode()) {
        ok(time - $t < 20, 'in thread mode the script was ended after the grace period, not the whole script');
    } else {
        isnt($next, $gpid, 'by a new worker: the script was ended');
        ok(time - $t < 20, 'after the grace period, not the whole script');
    }
}

done_testing;
