# Zero-drop reload: ab -n 20000 -c 10 while plxd takes three SIGHUPs, on
# hello.plx (each SIGHUP starts a new generation of Perl workers) and on
# hello.plt (interpreter threads inside plxd, which a reload keeps): no
# request is refused, cut or answered with anything but 200.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(source_dir read_file);

my $ab = '/usr/bin/ab';
plan skip_all => "$ab is not installed (./setup.sh test installs apache2-utils)" unless -x $ab;

my $hello = read_file(source_dir() . '/cgi-bin/hello.plx');
my $s = PlxdTest->start(
    files    => { 'hello.plx' => $hello, 'hello.plt' => read_file(source_dir() . '/cgi-bin/hello.plt') },
    handlers => { '.plx' => 'perl', '.plt' => 'perl:thread' },
    sections => { perl => { workers => 2 }, 'perl:thread' => { isolation => 'thread', workers => 2 } },
    server   => { access_log => '' },
);
my $total = $ENV{PLXD_SANITIZED} ? 5000 : 20000;
my $page = length "<html><body>\nHello world!\n</body></html>\n";    # what hello.pl* print
my $reloads = 0;
for my $path ('/hello.plx', '/hello.plt') {
    # ab reports its progress on stderr.
    open my $run, '-|', "$ab -n $total -c 10 '" . $s->url($path) . "' 2>&1" or die "ab: $!";

    # ab prints "Completed N requests" every tenth of the way: a SIGHUP at
    # the 2nd, 4th and 6th tenth, while requests are in flight.
    my ($hups, $out) = (0, '');
    while (my $line = <$run>) {
        $out .= $line;
        if ($line =~ /^Completed (\d+) requests/ && $hups < 3 && $1 >= $total / 10 * 2 * ($hups + 1)) {
            $s->signal('HUP');
            $hups++;
        }
    }
    close $run;
    $reloads += $hups;
    is($hups, 3, "$path: three SIGHUPs were sent during the load");
    like($out, qr/^Complete requests:\s+$total$/m, "$path: all $total requests completed");
    like($out, qr/^Failed requests:\s+0$/m, "$path: none failed") or diag($out);
    unlike($out, qr/^Non-2xx responses/m, "$path: none answered with anything but 2xx");
    like($out, qr/^Document Length:\s+$page bytes$/m, "$path: the page hello prints (run, not sent as source)")
        or diag($out);
    ok($s->wait_log(qr/(?:configuration reloaded.*){$reloads}/s, 20), "plxd reloaded $reloads times");
    is($s->get($path)->{status}, 200, "$path: and serves on");
}
# The thread instance kept its interpreters through the reloads.
my @started = $s->error_log =~ /interpreter threads started/g;
is(scalar @started, 1, 'the interpreter threads were started once, at start');
done_testing;
