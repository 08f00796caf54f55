# Perl's own threads (use threads) in a persistent interpreter, in both
# modes: a thread the script joins works as under CGI; one it leaves
# running (detached, or not joined) holds the interpreter's standard
# descriptors, which later requests' responses, bodies and log lines use.
# Once the request is answered they point at /dev/null, so that nothing the
# thread prints reaches another response or the log under another script's
# name, and a fresh interpreter serves the next request. In thread mode the
# interpreter left behind is destroyed once its threads have ended: a
# script that leaves a thread on every request costs plxd no descriptor and
# no thread for good.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(thread_mode wait_for);

my %files = (
    'join.plx' => <<'EOF',
use threads;
our $n;
$n++;
print "Content-Type: text/plain\n\n";
my $t = threads->create(sub { return 6 * 7 });
print "joined:", $t->join, " run:$n\n";
EOF
    # A detached thread that prints after its request, then leaves a mark.
    'detach.plx' => <<'EOF',
use threads;
use Time::HiRes ();
print "Content-Type: text/plain\n\nmain\n";
my $mark = "$ENV{DOCUMENT_ROOT}/thread.$ENV{QUERY_STRING}";
threads->create(sub {
    Time::HiRes::sleep(0.5);
    print "THREAD LINE\n";
    print STDERR "THREAD ERR\n";
    open my $fh, '>', $mark;
})->detach;
EOF
    # A thread not joined, which prints once the request is over.
    'unjoined.plx' => <<'EOF',
use threads;
use Time::HiRes ();
print "Content-Type: text/plain\n\nmain\n";
my $mark = "$ENV{DOCUMENT_ROOT}/thread.$ENV{QUERY_STRING}";
our @keep;
push @keep, threads->create(sub {
    Time::HiRes::sleep(0.5);
    print "THREAD LINE\n";
    print STDERR "THREAD ERR\n";
    open my $fh, '>', $mark;
});
EOF
    # Leaves short threads on every request, in every way: detached, not
    # joined (its object dropped, or kept in a global), one that starts
    # another, one that dies.
    'leave.plx' => <<'EOF',
use threads;
our @keep;
my $short = sub { select undef, undef, undef, 0.2; 1 };
threads->create($short)->detach;
threads->create($short);
push @keep, threads->create($short);
threads->create(sub { threads->create($short); $short->() });
threads->create(sub { die "a thread's own death\n" });
print "Content-Type: text/plain\n\nleft\n";
EOF
    # Runs until the threads named in its query have printed (3 s at most:
    # in process mode they end with their worker).
    'slow.plx' => <<'EOF',
print "Content-Type: text/plain\n\n";
$| = 1;
print "slow start\n";
my @marks = map { "$ENV{DOCUMENT_ROOT}/thread.$_" } split /,/, $ENV{QUERY_STRING};
my $until = time + 3;
select(undef, undef, undef, 0.05) until !grep({ !-e } @marks) || time > $until;
print "slow end\n";
EOF
);

my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 2 } },
);
my $root = $s->root;

# Joined threads: as under CGI, and the interpreter serves on.
my %runs;
for (1 .. 4) {
    my $r = $s->get('/join.plx');
    is($r->{status}, 200, 'use threads, create and join: 200');
    my ($joined, $run) = ($r->{content} // '') =~ /^joined:(\d+) run:(\d+)$/;
    is($joined, 42, "... the thread's value");
    $runs{$run}++ if $run;
}
ok((grep { $_ > 1 } keys %runs), 'a joined thread leaves its interpreter serving (its globals kept)');
unlike($s->error_log, qr/Perl threads it started run on/, '... and no line in the log');

for my $script ('detach', 'unjoined') {
    for my $i (1, 2) {
        my $r = $s->get("/$script.plx?$script$i");
        is($r->{content}, "main\n", "$script.plx ($i): its own response");
    }
    ok($s->wait_log(qr{\Q$root\E/$script\.plx: Perl threads it started run on after its request: what they print from now on is discarded}),
        "$script.plx: the log says its threads' output is discarded");
    # Two scripts, on both interpreters, while the threads print.
    my @c = map {
        my $c = $s->connect;
        print $c "GET /slow.plx?${script}1,${script}2 HTTP/1.0\r\n\r\n";
        $c
    } 1 .. 2;
    for my $c (@c) {
        my $reply = do { local $/; <$c> } // '';
        like($reply, qr/\r\n\r\nslow start\nslow end\n\z/,
            "$script.plx: a later request's response holds nothing of its threads");
    }
    if (thread_mode()) {
        ok(-e "$root/thread.${script}1" && -e "$root/thread.${script}2", "... whose threads had printed by then");
    } else {
        ok(!-e "$root/thread.${script}1" && !-e "$root/thread.${script}2",
            '... whose threads ended with their worker, as with a CGI process');
    }
    unlike($s->error_log, qr/THREAD ERR/, "... nor does the log, under any script's name");
    is($s->get('/slow.plx')->{content}, "slow start\nslow end\n", '... nor the next request');
}
if (!thread_mode()) {
    ok($s->wait_log(qr/perl worker \d+ retires after \d+ requests: Perl threads its script started run on/),
        'in process mode its worker retires');
}
like($s->get('/join.plx')->{content}, qr/^joined:42 run:\d+$/, 'threads still work');

# Threads left on every request: once they have all ended, plxd has the
# descriptors and threads it had before (in process mode each worker
# retires, and plxd holds nothing of it).
my $count = sub { my @e = glob('/proc/' . $s->pid . "/$_[0]/*"); scalar @e };
$s->get('/join.plx') for 1 .. 2;
my ($fds, $tasks) = ($count->('fd'), $count->('task'));
is($s->get("/leave.plx")->{content}, "left\n", "leave.plx: its own response ($_)") for 1 .. 30;
ok(wait_for(sub { $count->('task') <= $tasks }, 20), "30 requests that each left threads: plxd's threads back to $tasks once they end")
    or diag($count->('task') . ' threads');
# The interpreters left behind go after the next request.
ok(wait_for(sub { $s->get('/join.plx'); $count->('fd') <= $fds }, 20),
    "... and its descriptors back to $fds") or diag($count->('fd') . ' descriptors');
$s->stop;
unlike($s->error_log, qr/AddressSanitizer|LeakSanitizer|runtime error:/, 'no sanitizer report');

done_testing;
