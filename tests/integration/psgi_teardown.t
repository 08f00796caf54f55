# A Catalyst application (tests/integration/psgi_apps/catalyst.psgi) in
# thread mode, four interpreter threads, stopped again and again after every
# thread served it: each stop must end plxd cleanly. At a stop the threads
# destroy their interpreters; torn down at once, Variable::Magic (which
# namespace::autoclean loads) had its process-wide mutex destroyed by the
# last interpreter to unload it while another still freed its objects:
# "panic: MUTEX_LOCK (22)" in perl_destruct, and perl exited the serving
# process with status 255, nothing logged. Interpreters are now torn down
# one at a time (perl_interp_destroy). The race shows on a busy machine
# (about one stop in twelve with both cores busy), so two busy loops run
# beside plxd while it stops. Then interpreters replaced mid-service (below).
use strict;
use warnings;
use Test::More;
use PlxdTest qw(read_file source_dir);
use IO::Socket::IP;

my $stops = $ENV{PLXD_TEST_STOPS} // 20;
my $threads = 4;
my $app = read_file(source_dir() . '/tests/integration/psgi_apps/catalyst.psgi');

my @busy = map {
    my $pid = fork // die "fork: $!";
    if (!$pid) { alarm 900; 1 while 1; exit 0 }
    $pid;
} 1 .. 2;

for my $i (1 .. $stops) {
    my $plxd = PlxdTest->start(
        files    => { 'catalyst.psgi' => $app },
        handlers => { '.psgi' => 'perl' },
        sections => {
            mount => { '/' => 'root/catalyst.psgi' },
            perl  => { workers => $threads, isolation => 'thread', inline_budget => 0 },
        },
    );
    # Requests $threads at a time until every thread has loaded Catalyst.
    my (%seen, $good);
    for (1 .. 20) {
        my @s = map {
            IO::Socket::IP->new(PeerHost => $plxd->host, PeerPort => $plxd->port, Proto => 'tcp')
                // die "connect: $@"
        } 1 .. $threads;
        $_->syswrite("GET /hello?name=x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") for @s;
        for (@s) {
            my $res = PlxdTest::read_until_closed($_, 30);
            $good++ if $res =~ m{^HTTP/1\.1 200 } && $res =~ /hello x$/;
            $seen{$1}++ if $res =~ /^X-Interp: (\S+)/mi;
        }
        last if keys %seen == $threads;
    }
    is(keys %seen, $threads, "stop $i: every interpreter thread served Catalyst") or diag(explain \%seen);
    my $status = $plxd->stop;
    is($status, 0, "stop $i: plxd exited 0");
    unlike($plxd->error_log, qr/exited with status|killed by signal|panic|stopping without/, "stop $i: the serving process ended cleanly, every thread joined");
}

# Interpreters replaced while the other serves: every request asks for a
# fresh clone (psgix.harakiri.commit), so Catalyst is loaded and torn down
# again and again beside the other thread. Moose's XS part keeps values
# made by the interpreter that first loaded it and uses them in every
# other: without Moose in the preload, the clone that loaded it first is
# torn down under the other ("Use of uninitialized value in subroutine
# entry" from Class::MOP, then a crash, about one run in four). With
# Moose in the preload (doc/psgi.md), the parent made them, and it lives
# until plxd stops.
{
    my $wrap = <<'PSGI';
my $inner = do './catalyst.psgi' or die "catalyst.psgi: $@ $!";
sub { my $env = shift; $env->{'psgix.harakiri.commit'} = 1; $inner->($env) };
PSGI
    my $plxd = PlxdTest->start(
        files    => { 'catalyst.psgi' => $app, 'wrap.psgi' => $wrap, 'preload.pl' => "use Moose ();\n1;\n" },
        handlers => { '.psgi' => 'perl' },
        sections => {
            mount => { '/' => 'root/wrap.psgi' },
            perl  => { workers => 2, isolation => 'thread', inline_budget => 0, preload => 'root/preload.pl' },
        },
    );
    my $good = 0;
    for (1 .. 20) {
        my @s = map {
            IO::Socket::IP->new(PeerHost => $plxd->host, PeerPort => $plxd->port, Proto => 'tcp')
                // die "connect: $@"
        } 1 .. 2;
        $_->syswrite("GET /hello?name=x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") for @s;
        for (@s) {
            my $res = PlxdTest::read_until_closed($_, 60);
            $good++ if $res =~ m{^HTTP/1\.1 200 } && $res =~ /hello x$/;
        }
    }
    is($good, 40, 'harakiri: 40 requests two at a time, each answered by a clone replaced after it');
    my $replaced = () = $plxd->error_log =~ /replaced by a fresh clone: its PSGI application asked for it/g;
    ok($replaced >= 38, "harakiri: the clones were replaced ($replaced times)");
    is($plxd->stop, 0, 'harakiri: plxd exited 0');
    unlike($plxd->error_log, qr/exited with status|killed by signal|panic|uninitialized value/,
        'harakiri: no crash, no warning from Moose');
}

kill 'KILL', @busy;
waitpid $_, 0 for @busy;
done_testing;
