# Loading code in thread mode, one load at a time in the process: a
# script's compile and a PSGI application's build never run in two
# interpreter threads at once (handlers/perl/perl_clone.c,
# clone_load_begin). XS modules keep what their BOOT makes in C statics
# that every interpreter shares: Package::Stash::XS (which Moose, and so
# Catalyst, loads) compiles one regex for all of them, and perl writes that
# regex's UTF-8 strings into it at its first match, so a second thread
# matching meanwhile read a NULL and SIGSEGV ended the serving process
# (seen as four threads first loaded Catalyst at once). The files below run
# Package::Stash::XS's BOOT again and again as they load, each followed by
# its first match: an application as it is built, a script in a BEGIN
# block as it compiles; four threads are asked for each at once. Without
# the lock, the serving process died in every round. Of thread mode only.
use strict;
use warnings;
use Test::More;
use PlxdTest;
use IO::Socket::IP;
use Time::HiRes qw(time);
use JSON::PP qw(decode_json);

my $threads = 4;
my $rounds = $ENV{PLXD_TEST_ROUNDS} // 5;
my $boots = <<'PERL';
require Package::Stash::XS;
for (1 .. 2000) {
    no warnings 'redefine';
    XSLoader::load('Package::Stash::XS');
    Package::Stash::XS->new('A::B') or die 'no stash';
}
PERL
my %files = (
    'boot.psgi' => "$boots\nsub { [200, ['Content-Type' => 'text/plain'], [\"loaded\\n\"]] };\n",
    'boot.plx'  => "BEGIN {\n$boots}\nprint \"Content-Type: text/plain\\n\\nloaded\\n\";\n",
);

# Asks $threads interpreter threads for $file at once, its first request.
sub load_at_once {
    my ($file, $round) = @_;
    my $plxd = PlxdTest->start(
        files    => \%files,
        handlers => { '.psgi' => 'perl', '.plx' => 'perl' },
        sections => { perl => { workers => $threads, isolation => 'thread', inline_budget => 0 } },
    );
    my @s = map {
        IO::Socket::IP->new(PeerHost => $plxd->host, PeerPort => $plxd->port, Proto => 'tcp')
            // die "connect: $@"
    } 1 .. $threads;
    $_->syswrite("GET /$file HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") for @s;
    my $good = 0;
    for (@s) {
        my $res = PlxdTest::read_until_closed($_, 120);
        $good++ if $res =~ m{^HTTP/1\.1 200 } && $res =~ /loaded\n\z/;
    }
    is($good, $threads, "$file, round $round: $threads threads loading it at once each answered 200");
    is($plxd->stop, 0, "$file, round $round: plxd exited 0");
}

for my $round (1 .. $rounds) {
    load_at_once($_, $round) for sort keys %files;
}

# A load that its cancel cannot end (SIGALRM blocked, asleep in a BEGIN
# block) holds the lock past its timeout, and past a stop. A thread that
# waits behind it for a compile of its own looks for its cancel as it
# waits: at its timeout its request is answered 504 and the thread is free
# again, and a stop ends it, leaving only the stuck one behind
# (perl_thread.c, STOP_GRACE_MS).
{
    my %stuck = (
        'stuck.plx' => <<'EOF',
BEGIN {
    use POSIX ();
    POSIX::sigprocmask(POSIX::SIG_BLOCK(), POSIX::SigSet->new(POSIX::SIGALRM()));
    # What a compile prints to STDERR is logged as it ends: a file says it.
    open my $f, '>', 'stuck.loading' or die "stuck.loading: $!";
    close $f;
    sleep 300;
}
print "Content-Type: text/plain\n\nstuck\n";
EOF
        'other.plx' => qq{print "Content-Type: text/plain\\n\\nother\\n";\n},
    );
    my $plxd = PlxdTest->start(
        files    => \%stuck,
        handlers => { '.plx' => 'perl' },
        server   => { shutdown_timeout => '1s' },
        sections => { perl => { workers => 2, isolation => 'thread', inline_budget => 0, timeout => '2s' } },
    );
    my $busy = sub {
        my $res = $plxd->get('/plxd-status?json');
        return undef unless $res->{status} == 200;
        return join ' ', sort map { $_->{script} =~ s{.*/}{}r }
            grep { $_->{state} eq 'busy' } @{ decode_json($res->{content})->{workers} };
    };
    my @c = map { $plxd->connect } 1 .. 2;
    $c[0]->syswrite("GET /stuck.plx HTTP/1.0\r\n\r\n");
    ok(PlxdTest::wait_for(sub { -e $plxd->root . '/stuck.loading' }, 30), 'stuck.plx is loading');
    $c[1]->syswrite("GET /other.plx HTTP/1.0\r\n\r\n");
    like(PlxdTest::read_until_closed($c[1], 30), qr{^HTTP/1\.\d 504 },
        'other.plx, waiting to compile behind it, is answered 504 at its timeout');
    ok(PlxdTest::wait_for(sub { ($busy->() // '') eq 'stuck.plx' }, 30),
        '... and its thread is free again: only stuck.plx is busy') or diag($busy->());
    my $t0 = time;
    $plxd->signal('TERM');
    is($plxd->wait_exit(60), 0, 'plxd stops, exit status 0');
    diag(sprintf 'stopped in %.1f s', time - $t0);
    my $left = qr{stopping without an interpreter thread that runs on[^\n]*};
    like($plxd->error_log, qr{$left/stuck\.plx}, 'the stop left the stuck load behind, and said so');
    unlike($plxd->error_log, qr{$left/other\.plx}, '... and no other thread');
}

# Inline (the default): a script proven short runs on its event thread,
# which compiles it there the first time. While another interpreter loads,
# that first run would wait for the load on the event thread, holding
# every connection it carries; plxd sends it to the interpreter threads
# instead (perl_tpool.c, try_inline; perl_interp_load_would_wait). One
# event thread: a static file asked for meanwhile on it is answered long
# before the load ends. Without this, the static file waited for the load
# (4 s here).
{
    my $load_s = 4;
    my %files = (
        'slow.plx' => <<"EOF",
BEGIN {
    open my \$f, '>', 'slow.loading' or die "slow.loading: \$!";
    close \$f;
    select undef, undef, undef, $load_s;
}
print "Content-Type: text/plain\\n\\nslow\\n";
EOF
        'fast.plx'   => qq{print "Content-Type: text/plain\\n\\nfast\\n";\n},
        'hello.html' => "hello\n",
    );
    my $plxd = PlxdTest->start(
        files    => \%files,
        handlers => { '.plx' => 'perl' },
        server   => { threads => 1 },
        sections => { perl => { workers => 2, isolation => 'thread', inline_budget => '50ms',
                                inline_after => 1, timeout => '60s' } },
    );
    is($plxd->get('/fast.plx')->{content}, "fast\n", 'fast.plx runs once on an interpreter thread');
    my $slow = $plxd->connect;
    $slow->syswrite("GET /slow.plx HTTP/1.0\r\n\r\n");
    ok(PlxdTest::wait_for(sub { -e $plxd->root . '/slow.loading' }, 30), 'slow.plx is loading');
    my $fast = $plxd->connect;
    $fast->syswrite("GET /fast.plx HTTP/1.0\r\n\r\n");
    my $t0 = time;
    my $static = $plxd->get('/hello.html');
    my $took = time - $t0;
    is($static->{content}, "hello\n", 'hello.html is answered meanwhile');
    ok($took < $load_s / 2, sprintf('... in %.2f s, while the load takes %d s', $took, $load_s));
    like(PlxdTest::read_until_closed($fast, 60), qr{^HTTP/1\.\d 200 .*fast\n\z}s,
        'fast.plx, sent to the interpreter threads, is answered 200');
    like(PlxdTest::read_until_closed($slow, 60), qr{^HTTP/1\.\d 200 .*slow\n\z}s, 'slow.plx is answered 200');
    is($plxd->get('/fast.plx')->{content}, "fast\n", 'fast.plx runs again once the load is over');
    is($plxd->stop, 0, 'plxd exited 0');
}

done_testing;
