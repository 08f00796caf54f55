# Forks under concurrent load in thread mode, from two interpreter threads
# at once. A child is a copy of plxd taken while the other thread may hold
# a process-wide lock, which the child would then wait for forever, its
# request hung until timeout:
#  - programs started with backticks and pipe opens: the child reopens its
#    standard handles through PerlIO, whose lock perl's own fork guard
#    (Perl_atfork_lock) takes, unregistered at first;
#  - a child that runs on in Perl and sets its locale: perl's lock of the
#    environment (setlocale "" reads it) and glibc's of its locale
#    functions (perl 5.36 calls newlocale for each setlocale), which
#    neither fork guard took (perl_interp.c's perl_locks_prepare,
#    server/locale_fork.c).
use strict;
use warnings;
use Test::More;
use PlxdTest;
use HTTP::Tiny;
use POSIX ();

# Runs $per_client requests of each [script, expected body] pair's script
# from its own client process, all at once; each client reports how many
# got a 200 with the body expected.
sub hammer {
    my ($s, $per_client, @clients) = @_;
    my @running;
    for my $c (@clients) {
        my ($script, $want) = @$c;
        pipe(my $r, my $w) or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $r;
            my $http = HTTP::Tiny->new(timeout => 15, keep_alive => 1);
            my ($ok, $bad, $first, $sanitizer_waits) = (0, 0, '', 0);
            for (1 .. $per_client) {
                my $res = $http->get($s->url("/$script"));
                if ($res->{status} == 200 && $res->{content} eq $want) {
                    $ok++;
                } elsif ($ENV{PLXD_SANITIZED} && $res->{status} == 599 && $res->{content} =~ /Timed out/) {
                    # The sanitizer build's allocator has no fork guard
                    # (doc/perl.md): a child can rarely wait on its lock.
                    $sanitizer_waits++;
                } else {
                    $bad++;
                    $first ||= "$res->{status} " . substr($res->{content} // '', 0, 80);
                }
            }
            print $w "$ok $bad $sanitizer_waits $first\n";
            close $w;
            POSIX::_exit(0);
        }
        close $w;
        push @running, [$pid, $r, $script];
    }
    for my $c (@running) {
        my ($pid, $r, $script) = @$c;
        my $line = <$r> // '0 0 0 no report';
        waitpid $pid, 0;
        my ($ok, $bad, $waits, $first) = $line =~ /^(\d+) (\d+) (\d+) ?(.*)$/;
        # In the sanitizer build, at most one request in 500 may wait on
        # the sanitizer's own lock; every other is answered, as in the
        # normal build, where none may.
        is($ok + $waits, $per_client, "$script: every request answered (client $pid)")
            or diag("$bad failed, the first: $first");
        cmp_ok($waits, '<=', $per_client / 500, "... none waited on plxd's locks"
            . ($waits ? " ($waits on the sanitizer's allocator, doc/perl.md)" : ''));
    }
}

my $s = PlxdTest->start(
    files => {
        'ticks.plt' => qq{my \$x = `echo hi`;\nprint "Content-Type: text/plain\\n\\n\$x";\n},
        'pipe.plt'  => qq{open my \$fh, '-|', 'echo', 'hi' or die "\$!";\nmy \$x = <\$fh>;\nclose \$fh;\n}
            . qq{print "Content-Type: text/plain\\n\\n\$x";\n},
    },
    handlers => { '.plt' => 'perl:thread' },
    server   => { threads => 2 },
    sections => { 'perl:thread' => { isolation => 'thread', workers => 2, timeout => '20s' } },
);
# Four clients, two per script, 1000 requests each: 4000 forks, about three
# times what it took to hang one.
hammer($s, 1000, map { [$_, "hi\n"] } qw(ticks.plt pipe.plt ticks.plt pipe.plt));
unlike($s->error_log, $ENV{PLXD_SANITIZED} ? qr/AddressSanitizer|runtime error:/ : qr/timed out|AddressSanitizer|runtime error:/,
    'no timeout (in the normal build), no sanitizer report');
$s->stop;

# A child that runs on in Perl while the other thread sets its locale and
# reads the time. busy.plt runs for 1.2 s on one thread; child.plt forks
# again and again for 1 s on the other, each child setting its locale
# (setlocale "" reads the environment under perl's lock, perl 5.36 calls
# newlocale and freelocale under glibc's) and reading the time (under
# perl's lock of the environment). A child not gone within 3 s is stuck;
# it is counted and killed, so a round takes 5 s at most. In the ASan
# build, without glibc's lock held across the fork one child in three was
# stuck, without perl's one in 17: the 25 rounds' forks (180 and more
# then) would all pass without either in under one run in 10,000.
my $t = PlxdTest->start(
    files => {
        'busy.plt' => <<'EOF',
use POSIX ();
use Time::HiRes ();
print "Content-Type: text/plain\n\n";
my ($n, $until) = (0, Time::HiRes::time() + 1.2);
while (Time::HiRes::time() < $until) {
    POSIX::setlocale(POSIX::LC_ALL(), $n++ % 2 ? '' : 'POSIX');
    my @t = localtime;
}
print "set:$n\n";
EOF
        'child.plt' => <<'EOF',
use POSIX ();
use Time::HiRes ();
print "Content-Type: text/plain\n\n";
my ($forks, $stuck, $until) = (0, 0, Time::HiRes::time() + 1);
while (Time::HiRes::time() < $until) {
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        POSIX::setlocale(POSIX::LC_ALL(), '');
        POSIX::setlocale(POSIX::LC_ALL(), 'POSIX');
        my @t = localtime;
        CORE::exit(3);
    }
    $forks++;
    my ($r, $wait) = (0, Time::HiRes::time() + 3);
    select(undef, undef, undef, 0.002)
        while ($r = waitpid($pid, POSIX::WNOHANG())) == 0 && Time::HiRes::time() < $wait;
    next if $r == $pid && $? >> 8 == 3;
    $stuck++;
    kill 'KILL', $pid;
    waitpid $pid, 0;
}
print "forks:$forks stuck:$stuck\n";
EOF
    },
    handlers => { '.plt' => 'perl:thread' },
    server   => { threads => 2 },
    sections => { 'perl:thread' => { isolation => 'thread', workers => 2, timeout => '20s' } },
);
my ($forks, $stuck, $rounds, $busy_ran) = (0, 0, $ENV{PLXD_FORK_ROUNDS} // 25, 0);
for (1 .. $rounds) {
    my $busy = $t->connect;
    print $busy "GET /busy.plt HTTP/1.0\r\n\r\n";
    my $r = $t->get('/child.plt');
    $busy_ran++ if PlxdTest::read_until_closed($busy, 10) =~ /set:\d+/;
    if (($r->{content} // '') =~ /^forks:(\d+) stuck:(\d+)$/m) {
        $forks += $1;
        $stuck += $2;
    } else {
        fail("child.plt: $r->{status} $r->{content}");
    }
}
is($busy_ran, $rounds, 'busy.plt ran each round');
cmp_ok($forks, '>=', $rounds, "children forked while busy.plt ran: $forks");
# In the sanitizer build, a child can rarely wait on the sanitizer's own
# allocator lock (no fork guard, doc/perl.md; one in 1,779 did in a CI
# run, inside Perl_setlocale's malloc, and one in 300 in another): at most
# one in 100 may, counted from the first fork, where the locks plxd's
# fork guard takes, missing, left 25 children of 61 stuck; in the normal
# build, none.
my $allowed = $ENV{PLXD_SANITIZED} ? int(($forks + 99) / 100) : 0;
cmp_ok($stuck, '<=', $allowed, 'no child stuck: each set its locale, read the time and exited'
    . ($stuck ? " ($stuck of $forks on the sanitizer's allocator, doc/perl.md)" : ''));
unlike($t->error_log, qr/timed out|AddressSanitizer|runtime error:/, 'no timeout, no sanitizer report');
$t->stop;
done_testing;
