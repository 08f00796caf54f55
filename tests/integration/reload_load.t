# Zero-drop reload: ab -n 20000 -c 10 on hello.plx while plxd takes three
# SIGHUPs (each starting a new generation of Perl workers): no request is
# refused, cut or answered with anything but 200.
use strict;
use warnings;
use Test::More;
use IO::Select;
use PlxdTest qw(source_dir read_file);

my $ab = '/usr/bin/ab';
plan skip_all => "$ab is not installed (./setup.sh test installs apache2-utils)" unless -x $ab;

my $s = PlxdTest->start(
    files    => { 'hello.plx' => read_file(source_dir() . '/cgi-bin/hello.plx') },
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 2 } },
    server   => { access_log => '' },
);
my $total = $ENV{PLXD_SANITIZED} ? 5000 : 20000;
# ab reports its progress on stderr.
open my $run, '-|', "$ab -n $total -c 10 '" . $s->url('/hello.plx') . "' 2>&1" or die "ab: $!";

# ab prints "Completed N requests" every tenth of the way: a SIGHUP at the
# 2nd, 4th and 6th tenth, while requests are in flight.
my ($hups, $out) = (0, '');
while (my $line = <$run>) {
    $out .= $line;
    if ($line =~ /^Completed (\d+) requests/ && $hups < 3 && $1 >= $total / 10 * 2 * ($hups + 1)) {
        $s->signal('HUP');
        $hups++;
    }
}
close $run;
is($hups, 3, 'three SIGHUPs were sent during the load');
like($out, qr/^Complete requests:\s+$total$/m, "all $total requests completed");
like($out, qr/^Failed requests:\s+0$/m, 'none failed') or diag($out);
unlike($out, qr/^Non-2xx responses/m, 'none answered with anything but 2xx');
ok($s->wait_log(qr/(?:configuration reloaded.*){3}/s, 20), 'plxd reloaded three times');
is($s->get('/hello.plx')->{status}, 200, 'and serves on');
done_testing;
