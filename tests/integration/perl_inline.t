# Inline runs ([perl] isolation = thread, inline_budget, inline_after): a
# .plt whose last runs were short runs on the event thread that owns its
# connection, with no hand-off; a new script, a slow one, one with a body,
# one that forked or printed too much runs on the interpreter threads. The
# thread a script ran on is read from /proc: plxd names its event threads
# plxd-event and its interpreter threads plxd-perl.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for);
use PlxdRaw qw(read_responses request_bytes);
use Time::HiRes qw(time);
use HTTP::Tiny;
use POSIX ();

my $where = <<'EOF';
sub where { my $tid = syscall(186); open my $fh, '<', "/proc/self/task/$tid/comm" or return '?';
    my $comm = <$fh>; chomp $comm; return $comm }
EOF
my %files = (
    'where.plt' => $where . <<'EOF',
my %q = map { split /=/, $_, 2 } split /&/, $ENV{QUERY_STRING} // '';
print "Content-Type: text/plain\n\n", where(), "\n";
select undef, undef, undef, $q{sleep} / 1000 if $q{sleep};
if ($q{big}) { my $line = ('x' x 99) . "\n"; print $line for 1 .. $q{big} / 100 }
if ($q{warn}) { my $line = ('w' x 99); print STDERR "$line $_\n" for 1 .. $q{warn} }
if ($q{fork}) { system 'echo', 'from a child' }
if ($q{sys}) { $| = 1; syswrite STDOUT, "written past the buffer\n"; print STDERR "a warning inline\n" }
if ($q{mark}) { open my $m, '>', $q{mark} or die; close $m }
select undef, undef, undef, $q{then} / 1000 if $q{then};
1 while $q{loop};
EOF
    'sub/cwd.plt' => "use Cwd;\nprint \"Content-Type: text/plain\\n\\n\", getcwd(), \"\\n\"; chdir '/';\n",
    'slow.plt'    => "print \"Content-Type: text/plain\\n\\n\"; select undef, undef, undef, 1; print \"slow\\n\";\n",
    'a.txt'       => "static\n",
    'post.plt'    => $where . "print \"Content-Type: text/plain\\n\\n\", where(), ' ', scalar(<STDIN>), \"\\n\";\n",
);
$files{'never.plt'} = $files{'where.plt'};
# A copy for each case below that demotes its script: each demotion
# doubles the short runs the next promotion needs.
$files{"$_.plt"} = $files{'where.plt'} for qw(big fork warn sys loop kept);
# A PSGI application says where it ran, and its interpreter's address;
# ?sleep=MS makes a run slow, ?cleanup=1 pushes a cleanup handler,
# ?harakiri=1 asks for the interpreter's end.
$files{'where.psgi'} = $where . <<'EOF';
sub {
    my $env = shift;
    my %q = map { split /=/, $_, 2 } split /&/, $env->{QUERY_STRING};
    select undef, undef, undef, $q{sleep} / 1000 if $q{sleep};
    push @{ $env->{'psgix.cleanup.handlers'} }, sub { $main::cleaned++ } if $q{cleanup};
    $env->{'psgix.harakiri.commit'} = 1 if $q{harakiri};
    [200, ['Content-Type', 'text/plain'], [where() . "\n" . (0 + \%main::) . "\n"]];
};
EOF
# An application that takes longer to build than the budget: building it
# is its compile, once per interpreter, not a slow run.
$files{'heavy.psgi'} = $where . <<'EOF';
select undef, undef, undef, 0.3;
sub { [200, ['Content-Type', 'text/plain'], [where() . "\n"]] };
EOF

my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.plt' => 'perl:thread', '.psgi' => 'perl:thread' },
    server   => { threads => 1 },
    sections => { 'perl:thread' => { isolation => 'thread', workers => 1, timeout => '2s',
                                      inline_budget => '200ms' } },
);
my $where_is = sub { my $r = $s->get($_[0]); return $r->{status} == 200 ? (split /\n/, $r->{content})[0] : "status $r->{status}" };

# Requests path until it runs inline: at most inline_after (3) runs on the
# interpreter threads first.
sub inline_again {
    my ($path) = @_;
    for (1 .. 4) {
        return 1 if $where_is->($path) eq 'plxd-event';
    }
    return 0;
}

# --- an application's routes prove themselves short each on its own ---
is($where_is->('/where.psgi/a'), 'plxd-perl', "an application's new route runs on an interpreter thread ($_)") for 1 .. 3;
is($where_is->('/where.psgi/a?x=1'), 'plxd-event', '... after 3 short runs, inline (the query is not the route)');
is($where_is->('/where.psgi/b'), 'plxd-perl', "another route of it is new: on an interpreter thread ($_)") for 1 .. 3;
is($where_is->('/where.psgi/b'), 'plxd-event', '... then inline too');
is($where_is->('/where.psgi/a?sleep=400'), 'plxd-event', 'a slow run of a proven route runs inline, once');
ok(wait_for(sub { $s->error_log =~ m{where\.psgi, route /a: ran \d+ us inline, past inline_budget} }),
    '... its demotion is logged under the application and the route');
is($where_is->('/where.psgi/a'), 'plxd-perl', '... that route runs on an interpreter thread again');
is($where_is->('/where.psgi/b'), 'plxd-event', '... and the other stays inline');
is($where_is->('/where.psgi'), 'plxd-perl', 'the application itself (PATH_INFO empty) is a route of its own');
my $long = '/where.psgi/' . ('l' x 255);
is_deeply([ map { $where_is->($long) } 1 .. 4 ], [ ('plxd-perl') x 3, 'plxd-event' ],
    'a route of 256 bytes (PATH_INFO with its slash) is recorded');
is_deeply([ map { $where_is->("${long}m") } 1 .. 6 ], [ ('plxd-perl') x 6 ],
    'a route of 257 bytes is not: it never runs inline');
is_deeply([ map { $where_is->('/heavy.psgi') } 1 .. 5 ], [ ('plxd-perl') x 3, ('plxd-event') x 2 ],
    'an application built in 300 ms (budget 200 ms) proves itself short, then builds inline and stays there');
unlike($s->error_log, qr/heavy\.psgi.*past inline_budget/, '... its build never counted as a slow run');
# 4,096 routes are recorded; a route past them makes room by forgetting
# them all, so that new routes can still prove themselves.
my $ka = HTTP::Tiny->new(timeout => 30, keep_alive => 1);
$where_is->('/kept.plt') for 1 .. 3;
my $sent = grep { $ka->get($s->url("/where.psgi/r$_"))->{status} == 200 } 1 .. 4100;
is($sent, 4100, '4,100 distinct routes of an application answered');
is_deeply([ map { $where_is->('/where.psgi/fresh') } 1 .. 4 ], [ ('plxd-perl') x 3, 'plxd-event' ],
    '... and a new route after them still proves itself and runs inline');
is($where_is->('/kept.plt'), 'plxd-event', "... while the scripts' records are kept");
is_deeply([ map { $where_is->('/where.psgi/c?cleanup=1') } 1 .. 6 ], [ ('plxd-perl') x 6 ],
    'a route whose requests push psgix.cleanup handlers never runs inline: its client would wait for them');
$s->get('/where.psgi/h') for 1 .. 3;
my $r0 = $s->get('/where.psgi/h');
my ($thread0, $interp0) = split /\n/, $r0->{content};
is($thread0, 'plxd-event', 'a proven route runs inline');
$r0 = $s->get('/where.psgi/h?harakiri=1');
is((split /\n/, $r0->{content})[0], 'plxd-event', '... and asks, inline, for its interpreter\'s end');
ok(wait_for(sub { $s->error_log =~ /replaced by a fresh clone: its PSGI application asked for it/ }),
    '... which is logged');
my @after = split /\n/, $s->get('/where.psgi/h')->{content};
isnt($after[1], $interp0, '... and the next request of the route is served by a new interpreter');

# --- promoted after inline_after (3) short runs, demoted by one slow one ---
is($where_is->('/where.plt'), 'plxd-perl', "a new script runs on an interpreter thread ($_)") for 1 .. 3;
is($where_is->('/where.plt'), 'plxd-event', 'after 3 short runs, on the event thread');
is($where_is->('/where.plt'), 'plxd-event', '... and again');
ok(wait_for(sub { $s->error_log =~ /an event thread has its interpreter for inline runs/ }),
    'the log says an event thread made its interpreter');
is($where_is->('/where.plt?sleep=400'), 'plxd-event', 'a slow run that was short before runs inline, once');
ok(wait_for(sub { $s->error_log =~ m{where\.plt: ran \d+ us inline, past inline_budget .*until it has run short 3 times} }),
    'its demotion is logged under its name');
is($where_is->('/where.plt'), 'plxd-perl', "then it runs on an interpreter thread ($_)") for 1 .. 3;
is($where_is->('/where.plt'), 'plxd-event', 'and inline again once it has proven short');
is($where_is->('/where.plt?sleep=300'), 'plxd-event', 'slow inline a second time, less than 4 times the budget');
ok(wait_for(sub { $s->error_log =~ m{where\.plt: ran \d+ us inline, past inline_budget .*until it has run short 3 times(?s:.*)where\.plt: ran \d+ us inline, past inline_budget .*until it has run short 3 times} }),
    '... its demotion does not double the short runs its next promotion needs (a busy machine)');
is_deeply([ map { $where_is->('/where.plt') } 1 .. 4 ], [ ('plxd-perl') x 3, 'plxd-event' ],
    '... 3 on the interpreter threads, then inline');
is($where_is->('/where.plt?sleep=900'), 'plxd-event', 'slow inline a third time, more than 4 times the budget');
ok(wait_for(sub { $s->error_log =~ m{where\.plt: ran \d+ us inline, past inline_budget .*until it has run short 6 times} }),
    '... its demotion says the next promotion needs twice the short runs');
is_deeply([ map { $where_is->('/where.plt') } 1 .. 7 ], [ ('plxd-perl') x 6, 'plxd-event' ],
    '... 6 on the interpreter threads, then inline');

# --- what never runs inline ---
$s->get('/post.plt') for 1 .. 3;
my $r = $s->request('POST', '/post.plt', content => "body\n");
is($r->{content}, "plxd-perl body\n\n", 'a request with a body runs on an interpreter thread, and reads it');

# --- what an inline run does keeps working, and demotes its script ---
for my $case ([ 'big=3000000', 'prints 3 MB, more than its pipe holds' ],
              [ 'fork=1', 'starts a program' ],
              [ 'warn=20000', 'writes 2 MB to stderr' ]) {
    my ($q, $what) = @$case;
    my ($name) = $q =~ /^(\w+)=/;
    ok(inline_again("/$name.plt"), "($q) the script runs inline");
    my $t0 = time;
    $r = $s->get("/$name.plt?$q");
    is($r->{status}, 200, "an inline run that $what answers");
    is((split /\n/, $r->{content})[0], 'plxd-event', '... it ran inline');
    if ($q =~ /^big/) {
        is(length $r->{content}, length("plxd-event\n") + 3_000_000, '... with all its output');
        is($r->{content}, "plxd-event\n" . ((('x' x 99) . "\n") x 30_000), '... in order');
    }
    like($r->{content}, qr/^from a child$/m, "... the program's output is in the response") if $q =~ /^fork/;
    if ($q =~ /^warn/) {
        ok(wait_for(sub { my @l = $s->error_log =~ /warn\.plt: w+ \d+$/mg; @l == 20_000 }),
            '... every stderr line is logged under its name');
    }
    cmp_ok(time - $t0, '<', 10, '... without waiting for its timeout');
    is($where_is->("/$name.plt"), 'plxd-perl', '... and its script is demoted');
}

# --- what a run writes past STDOUT's buffer, and to STDERR, a little ---
ok(inline_again('/sys.plt'), '(sys) the script runs inline');
$r = $s->get('/sys.plt?sys=1');
is($r->{content}, "plxd-event\nwritten past the buffer\n", 'syswrite to STDOUT inline: in the response, in order');
ok($s->wait_log(qr{sys\.plt: a warning inline$}m), 'a line to STDERR inline: logged under its name');
is($where_is->('/sys.plt'), 'plxd-event', '... and the script stays inline');

# --- the watchdog sleeps while no inline run is in progress ---
# (a second with none), and wakes for the next: the timeout below is its.
my ($watchdog) = grep { (read_comm($_) // '') eq 'plxd-watchdog' } glob('/proc/' . $s->pid . '/task/*');
sub read_comm { open my $fh, '<', "$_[0]/comm" or return; my $c = <$fh>; chomp $c; $c }
sub switches {
    open my $fh, '<', "$watchdog/status" or return -1;
    my ($n) = join('', <$fh>) =~ /^voluntary_ctxt_switches:\s*(\d+)/m;
    return $n;
}
ok($watchdog, 'the watchdog thread is there');
ok(wait_for(sub { my $n = switches(); select undef, undef, undef, 0.3; switches() == $n }, 10),
    '... and once no run is in progress, it is not woken (no switch in 0.3 s)');

# --- the timeout ends an inline run, and the next request is served ---
ok(inline_again('/loop.plt'), '(loop) the script runs inline');
$r = $s->get('/loop.plt?loop=1');
is($r->{status}, 504, 'an inline run past timeout gets 504');
ok(wait_for(sub { $s->error_log =~ m{loop\.plt: ran past timeout inline: its interpreter ends it} }),
    '... logged under its name');
is($s->get('/a.txt')->{status}, 200, 'the event thread serves again');
is($where_is->('/loop.plt'), 'plxd-perl', '... and the script runs on the interpreter threads');

# --- the working directory is the event thread's own ---
$s->get('/sub/cwd.plt') for 1 .. 3;
my $cwd_before = readlink("/proc/" . $s->pid . "/cwd");
is($s->get('/sub/cwd.plt')->{content}, $s->root . "/sub\n", "inline, the script's folder is its working directory");
is(readlink("/proc/" . $s->pid . "/cwd"), $cwd_before, "plxd's own stays where it was");

# --- a slow script does not stall its event thread's other connections ---
# One event thread: the slow script is new, so it runs on the interpreter
# thread, and the static file on another connection is answered meanwhile.
my $best;
for my $try (1 .. 3) {
    my $slow = $s->connect;
    $slow->syswrite(request_bytes('GET', '/slow.plt'));
    select undef, undef, undef, 0.1;
    my $t0 = time;
    my $got = $s->get('/a.txt');
    my $took = time - $t0;
    $best = $took if !defined $best || $took < $best;
    my ($slow_r) = read_responses($slow, 1, timeout => 20);
    is($slow_r->{body}, "slow\n", "the slow script answers ($try)");
    is($got->{content}, "static\n", "the static file meanwhile ($try)");
}
cmp_ok($best, '<', 0.05, sprintf('a static request beside a slow .plt on the same event thread: answered in %.0f ms', $best * 1000));
$s->stop;

# --- inline_budget = 0: never inline ---
$s = PlxdTest->start(
    files    => \%files,
    handlers => { '.plt' => 'perl:thread' },
    sections => { 'perl:thread' => { isolation => 'thread', workers => 1, inline_budget => 0 } },
);
my @seen = map { $where_is->('/never.plt') } 1 .. 10;
is_deeply([ grep { $_ ne 'plxd-perl' } @seen ], [], 'inline_budget = 0: every run on an interpreter thread');
unlike($s->error_log, qr/an event thread has its interpreter/, '... and no event thread made an interpreter');

# --- a stop while an inline run is in progress ---
$s->stop;
$s = PlxdTest->start(
    files    => \%files,
    handlers => { '.plt' => 'perl:thread' },
    sections => { 'perl:thread' => { isolation => 'thread', workers => 1, inline_budget => '200ms' } },
);
$s->get('/where.plt') for 1 .. 3;
my $mark = $s->dir . '/running';
# A reload while an inline run is in progress: the run is answered, and the
# script runs inline after it, on the same interpreters.
my $c = $s->connect;
$c->syswrite(request_bytes('GET', "/where.plt?mark=$mark&then=500"));
ok(wait_for(sub { -e $mark }), 'an inline run is in progress');
$s->signal('HUP');
my ($during) = read_responses($c, 1, timeout => 10);
is($during->{status}, 200, 'SIGHUP during an inline run: it is answered');
like($during->{body} // '', qr/^plxd-event$/m, '... inline');
ok($s->wait_log(qr/configuration reloaded/), '... and the reload is done');
ok(inline_again('/where.plt'), 'the script runs inline after the reload');
unlink $mark;
$c = $s->connect;
$c->syswrite(request_bytes('GET', "/where.plt?mark=$mark&then=1500"));
ok(wait_for(sub { -e $mark }), 'an inline run is in progress');
my $t0 = time;
$s->signal('TERM');
my $status = $s->wait_exit(30);
is($status, 0, 'SIGTERM during an inline run: plxd stops, with status 0');
cmp_ok(time - $t0, '<', 20, sprintf('... in %.1f s', time - $t0));
my ($inflight) = read_responses($c, 1, timeout => 5);
is($inflight->{status}, 200, '... after answering the run in flight');
like($inflight->{body} // '', qr/^plxd-event$/m, '... which ran inline');


# --- a run past the budget only while its event thread was preempted ---
# plxd pinned to one core beside a busy process, so that a run that needs
# 30 ms of CPU takes about twice as long: within a 50 ms budget by its CPU
# time, past it by the clock. It stays inline; a run that needs more CPU
# than the budget, or one that sleeps, is still demoted.
{
    my $spin = $where . <<'EOF';
use Time::HiRes qw(clock_gettime CLOCK_THREAD_CPUTIME_ID);
my %q = map { split /=/, $_, 2 } split /&/, $ENV{QUERY_STRING} // '';
my $end = clock_gettime(CLOCK_THREAD_CPUTIME_ID) + ($q{cpu} // 0) / 1000;
1 while clock_gettime(CLOCK_THREAD_CPUTIME_ID) < $end;
select undef, undef, undef, $q{sleep} / 1000 if $q{sleep};
print "Content-Type: text/plain\n\n", where(), "\n";
EOF
    $s = PlxdTest->start(
        files    => { 'spin.plt' => $spin, 'nap.plt' => $spin, 'stray.plt' => $spin },
        handlers => { '.plt' => 'perl:thread' },
        server   => { threads => 1 },
        sections => { 'perl:thread' => { isolation => 'thread', workers => 1, inline_budget => '50ms',
                                          timing => 'yes' } },
    );
    my $run_ms = sub { ($_[0]{headers}{'x-plxd-perl'} // '') =~ /run=(\d+)us/ ? $1 / 1000 : 0 };
    my $spin_where = sub {
        my $r = $s->get($_[0]);
        return ($r->{status} == 200 ? (split /\n/, $r->{content})[0] : "status $r->{status}", $run_ms->($r));
    };
    # n runs of the path: where each ran, and its run time by the clock (ms).
    my $spin_runs = sub {
        my ($path, $n) = @_;
        my (@where, @ms);
        for (1 .. $n) {
            my ($w, $ms) = $spin_where->($path);
            push @where, $w;
            push @ms, $ms;
        }
        return (\@where, \@ms);
    };
    # A straggler: a run that never waited, past the budget by its CPU
    # time but within twice it, is forgiven while the script's own time,
    # smoothed (each run an eighth), stays within the budget; the limits
    # are tested at their values in tests/unit/test_perl_inline_rule.c.
    is_deeply(($spin_runs->('/stray.plt', 4))[0], [ ('plxd-perl') x 3, 'plxd-event' ],
        'a script that spins no CPU: proven short, then inline');
    is(($spin_where->('/stray.plt?cpu=55'))[0], 'plxd-event', 'a run of 55 ms of CPU (budget 50 ms) runs inline');
    is(($spin_where->('/stray.plt'))[0], 'plxd-event', '... and is forgiven: the next run is inline too');
    unlike($s->error_log, qr/stray\.plt: ran/, '... and nothing is logged');
    my ($strays) = $spin_runs->('/stray.plt?cpu=55', 25);
    my $inline = 0;
    $inline++ while $inline < @$strays && $strays->[$inline] eq 'plxd-event';
    cmp_ok($inline, '>', 5, "runs of 55 ms in a row: the first ones inline, forgiven ($inline)");
    cmp_ok($inline, '<', 25, '... not all of them');
    ok(wait_for(sub { $s->error_log =~ m{stray\.plt: ran \d+ us inline, past inline_budget .*smoothed: (\d+) us} && $1 > 50_000 }),
        '... the last of them demotes it: its smoothed own time is past the budget, which the log gives');
    is_deeply([ @$strays[$inline .. $#$strays] ], [ ('plxd-perl') x (25 - $inline) ],
        '... and the runs after it are on the interpreter thread');
    # Proven short first, with the core to itself.
    is(($spin_where->('/spin.plt?cpu=30'))[0], 'plxd-perl', "a script that spins 30 ms of CPU: proving itself ($_)")
        for 1 .. 3;
    is(($spin_where->('/nap.plt'))[0], 'plxd-perl', "... and another ($_)") for 1 .. 3;
    is(system('taskset', '-a', '-p', '-c', '0', $s->serving_pid) >> 8, 0, 'plxd pinned to core 0')
        or diag("taskset: $?");
    my $busy = fork // die "fork: $!";
    if (!$busy) {
        exec 'taskset', '-c', '0', $^X, '-e', '1 while 1';
        POSIX::_exit(127);
    }
    my ($where, $ms) = $spin_runs->('/spin.plt?cpu=30', 20);
    is(join(',', grep { $_ ne 'plxd-event' } @$where), '',
        '20 runs beside a busy process on its core: every one inline');
    my @past = grep { $_ > 50 } @$ms;
    cmp_ok(scalar @past, '>', 0, sprintf('... %d of them past the 50 ms budget by the clock (%s ms)',
        scalar @past, join(', ', map { sprintf '%.0f', $_ } @$ms)));
    unlike($s->error_log, qr/spin\.plt: ran \d+ us inline, past inline_budget/, '... and none demoted');
    is(($spin_where->('/nap.plt?sleep=80'))[0], 'plxd-event', 'a proven script that sleeps 80 ms runs inline, once');
    ok(wait_for(sub { $s->error_log =~ m{nap\.plt: ran \d+ us inline, past inline_budget} }),
        '... and is demoted: it waited, it was not preempted');
    my ($slow, $slow_ms) = $spin_where->('/spin.plt?cpu=120');
    is($slow, 'plxd-event', 'a run that spins 120 ms of CPU runs inline, once');
    cmp_ok($slow_ms, '>', 200, sprintf('... %.0f ms by the clock beside the busy process, more than 4 times the budget', $slow_ms));
    ok(wait_for(sub { $s->error_log =~ m{spin\.plt: ran \d+ us inline, past inline_budget} }),
        '... and is demoted at once: its CPU time is past twice the budget, no straggler');
    like($s->error_log, qr{spin\.plt: ran \d+ us inline, past inline_budget.* short 3 times},
        '... without doubling the runs its promotion needs: its own time, 120 ms of CPU, is less than 4 times the budget');
    # It proves itself again on the interpreter thread, which the busy
    # process preempts as it did the event thread: there too a run past
    # the budget by the clock only is short, or a script demoted on a busy
    # machine would seldom come back.
    my ($again, $again_ms) = $spin_runs->('/spin.plt?cpu=30', 3);
    is(join(',', grep { $_ ne 'plxd-perl' } @$again), '',
        '... then proves itself again on the interpreter thread in 3 runs, beside the busy process');
    cmp_ok(scalar(grep { $_ > 50 } @$again_ms), '>', 0,
        sprintf('... its runs there past the 50 ms budget by the clock (%s ms)',
            join(', ', map { sprintf '%.0f', $_ } @$again_ms)));
    is(($spin_where->('/spin.plt?cpu=30'))[0], 'plxd-event', '... and runs inline again after them');
    kill 'KILL', $busy;
    waitpid $busy, 0;
    $s->stop;
}

# --- a run that starts from the readings of the run before it ---
# Two requests pipelined on one connection run one after the other on its
# event thread, which does not sleep in between: the second starts from
# the readings of its thread's CPU time and voluntary context switches
# that the first took (struct perl_usage_mark) when it begins within
# PERL_INLINE_MARK_AGE_US of them (tests/unit/test_perl_inline_rule.c
# tests that limit; a slow build or machine reads them anew). Either way
# one that sleeps is seen to have waited, and demoted.
{
    $s = PlxdTest->start(
        files    => { 'pipe.plt' => $files{'where.plt'} },
        handlers => { '.plt' => 'perl:thread' },
        server   => { threads => 1 },
        sections => { 'perl:thread' => { isolation => 'thread', workers => 1, inline_budget => '50ms' } },
    );
    $s->get('/pipe.plt') for 1 .. 3;
    my $c = $s->connect;
    $c->syswrite(request_bytes('GET', '/pipe.plt') . request_bytes('GET', '/pipe.plt?sleep=80'));
    my @r = read_responses($c, 2);
    is(join(',', map { $_->{body} } @r), "plxd-event\n,plxd-event\n",
        'a short run and one that sleeps 80 ms, pipelined: both inline');
    ok(wait_for(sub { $s->error_log =~ m{pipe\.plt: ran \d+ us inline, past inline_budget} }),
        '... and the second is demoted: it waited');
    is($s->get('/pipe.plt')->{content}, "plxd-perl\n", '... its next run is on the interpreter thread');
    $s->stop;
}

done_testing;
