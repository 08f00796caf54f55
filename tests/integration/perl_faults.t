# The persistent Perl handler under faults: exit, die, a script past its
# timeout, a segfault, a 2 GB allocation, scripts that break their own
# process state; workers replaced (crash, timeout) or recycled
# (max_requests, max_rss, a changed module); the queue; preload and inc.
# Nothing a script does takes plxd or another request down.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for write_file);
use POSIX ();
use File::Temp ();
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
    'loopchild.plx' => "system('sleep', '30.25');\n",
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
    'bg.plx' => "print \"Content-Type: text/plain\\n\\nfirst\\n\";\nsystem('(sleep 0.3; echo late) &');\n",
    'sleep.plx' => "sleep 1;\nprint \"Content-Type: text/plain\\n\\n\$\$\\n\";\n",
    'grow.plx' => "my \$x = 'x' x (150 * 1024 * 1024);\nprint \"Content-Type: text/plain\\n\\n\$\$\\n\";\n",
);

sub pid_of { my ($s) = @_; my $r = $s->get('/pid.plx'); return $r->{content} =~ /^(\d+)$/ ? $1 : 'none' }

my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, timeout => '1s' } },
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
ok($s->wait_log(qr/headdie\.plx: died$/m), '... logged');
{
    my $raw = $s->raw("GET /latedie.plx HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 10);
    like($raw, qr/^HTTP\/1.1 200.*partial\n/s, 'flushed headers and body, then die: they arrive');
    like($raw, qr/\r\n0\r\n\r\n\z/, '... and the chunked body ends properly');
    ok($s->wait_log(qr/latedie\.plx: late oops/), 'the message is logged');
}

# Past the timeout: 504, worker killed and replaced (and the child it ran).
my $t0 = time;
is($s->get('/loop.plx')->{status}, 504, 'an endless loop: 504');
ok(time - $t0 < 5, 'after the timeout, not later');
my $pid2 = pid_of($s);
isnt($pid2, $pid, "a new worker ($pid2) replaced the killed one");
ok(!kill(0, $pid), 'the old worker is gone');
is($s->get('/loopchild.plx')->{status}, 504, 'a script waiting on a child: 504');
my $pid3 = pid_of($s);
ok(wait_for(sub { !`pgrep -xf 'sleep 30.25'` }, 5), 'the child went with its worker');

# A crash: 500 (the script's failure, as a CGI process killed by a signal),
# the worker replaced at once.
is($s->get('/segv.plx')->{status}, 500, 'a segfault: 500');
ok($s->wait_log(qr/perl worker $pid3 died of signal 11/), 'the log says so');
my $pid4 = pid_of($s);
like($pid4, qr/^\d+$/, 'the next request is served');
isnt($pid4, $pid3, 'by a new worker');

# What a script does to its process is undone for the next one.
is($s->get('/closeout.plx')->{content}, "closed\n", 'close STDOUT ends the response');
is($s->get('/wreck.plx')->{content}, "wrecked\n", '%ENV = (), chdir, alarm, closed STDERR/STDIN');
my $state = $s->get('/state.plx')->{content};
is($state, "cwd=" . $s->root . " method=GET alrm=none\n", 'environment, folder and %SIG are back');
ok($s->wait_log(qr/state\.plx: stderr works/), 'STDERR works again');
# A background process the script left behind writes into no response.
is($s->get('/bg.plx')->{content}, "first\n", 'the response ends when the script returns');
select(undef, undef, undef, 0.6);
like($s->get('/pid.plx')->{content}, qr/^\d+\n\z/, 'its late output reaches no later response');

my $pid5 = pid_of($s);
select(undef, undef, undef, 1.3);
is(pid_of($s), $pid5, 'the alarm the script set did not kill its worker');

$s->stop;

# --- recycling ---
my $m = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, max_requests => 3,
        max_rss => ($sanitized ? '600M' : '100M') } },
);
my @pids = map { pid_of($m) } 1 .. 7;
is_deeply([ map { $pids[$_] eq $pids[0] ? 1 : 0 } 0 .. 2 ], [1, 1, 1], 'three requests on one worker');
isnt($pids[3], $pids[2], 'max_requests: the fourth on a new one');
is($pids[5], $pids[3], 'which serves three too');
ok($m->wait_log(qr/retires after 3 requests: it served max_requests/), 'logged');
my $before = pid_of($m);
my $g = $m->get('/grow.plx');
is($g->{status}, 200, 'a script growing the worker past max_rss is answered');
isnt(pid_of($m), ($g->{content} =~ /(\d+)/)[0], 'max_rss: its worker is replaced after it');

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
ok(wait_for(sub { $p->get('/mod.plx')->{content} =~ /^2 / }, 10),
    'a changed module is picked up (its worker is recycled)');
ok($p->wait_log(qr/a module it loaded changed/), 'logged');

# A reload (SIGHUP) replaces the workers with the new settings.
{
    my $conf = PlxdTest::read_file($p->conf_file);
    write_file($p->root . '/startup2.pl', "our \$PRELOADED = 'second'; 1;\n");
    $conf =~ s{^preload = .*$}{preload = root/startup2.pl}m or die 'no preload line';
    write_file($p->conf_file, $conf);
    $p->signal('HUP');
    ok(wait_for(sub { $p->get('/mod.plx')->{content} =~ /^\d+ second \d+$/ }, 10),
        'after SIGHUP new workers run the new preload file');
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
my $q = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, queue => 1, queue_timeout => '5s' } },
);
pid_of($q);
my @kids;
for my $i (1 .. 2) {
    my $kid = fork // die;
    if (!$kid) {
        my $r = $q->get('/sleep.plx');
        POSIX::_exit($r->{status} == 200 ? 0 : 1);
    }
    push @kids, $kid;
    select(undef, undef, undef, 0.2);
}
my $t1 = time;
my $refused = $q->get('/pid.plx');
is($refused->{status}, 503, 'beyond the queue: 503');
ok(time - $t1 < 0.5, 'at once');
is($refused->{headers}{'retry-after'}, 1, 'with Retry-After');
my $waited = 0;
for (@kids) { waitpid $_, 0; $waited++ if $? == 0 }
is($waited, 2, 'the running and the queued request were both served');
$q->stop;

# Two workers run two scripts at the same time.
my $two = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 2 } },
);
pid_of($two);
my $t2 = time;
my @par;
for (1 .. 2) {
    my $kid = fork // die;
    if (!$kid) { POSIX::_exit($two->get('/sleep.plx')->{status} == 200 ? 0 : 1) }
    push @par, $kid;
}
my $okpar = 0;
for (@par) { waitpid $_, 0; $okpar++ if $? == 0 }
is($okpar, 2, 'two one-second scripts');
ok(time - $t2 < 1.8, sprintf('ran side by side (%.2f s)', time - $t2));

$two->stop;

# A client that leaves: a script that soon ends keeps its worker; one that
# runs on is ended after a grace period, and the next request is served.
my $gone = PlxdTest->start(
    files => {
        %files,
        'drip.plx' => "\$| = 1;\nprint \"Content-Type: text/plain\\n\\n\";\n"
            . "for (1 .. (\$ENV{QUERY_STRING} || 1) * 10) { print \"drop\\n\"; select(undef, undef, undef, 0.1) }\n",
    },
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1 } },
);
my $gpid = pid_of($gone);
for my $secs (1, 6) {
    my $sock = $gone->connect;
    print $sock "GET /drip.plx?$secs HTTP/1.1\r\nHost: x\r\n\r\n";
    my $got = '';
    sysread($sock, $got, 4096, length $got) until $got =~ /drop/;
    close $sock;
    my $t = time;
    my $next = pid_of($gone);
    like($next, qr/^\d+$/, "after a client left a ${secs}s script, the next request is served");
    if ($secs == 1) {
        is($next, $gpid, 'by the same worker: the script finished');
    } else {
        isnt($next, $gpid, 'by a new worker: the script was ended');
        ok(time - $t < 5, 'after the grace period, not the whole script');
    }
}

done_testing;
