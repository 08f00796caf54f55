# bench/run --memory in a tiny form: the plxd under test with 2 and then 3
# interpreter threads, each having served cgi_pm.plt, and 200 then 2,000
# keep-alive requests of hello.plt and cgi_pm.plt. It checks that the tool
# runs and prints its figures, never what they are (memory is measured, not
# asserted), and that it stops what it started. Then its options' limits.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use File::Path qw(remove_tree);
use PlxdTest qw(source_dir read_file);

my $src = source_dir();
my $plxd = PlxdTest::plxd_bin();
my $tmp = tempdir('plxd-bench-memory-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{PLXD_TEST_KEEP});

my $log = qx('$src/bench/run' --memory --plxd '$plxd' --memory-threads 2,3 --memory-requests 200,2000 --keep --out '$tmp' 2>&1);
is($?, 0, 'bench/run --memory exits 0') or diag($log);
my ($work) = $log =~ /^kept (\S+)$/m;

my %rss;
for my $n (2, 3) {
    like($log, qr/^memory: $n interpreter threads: VmRSS (\d+) kB at start, (\d+) kB once each thread served cgi_pm\.plt \(\d+ rounds? of ab -n \d+ -c \d+\)$/m,
        "$n threads: plxd's VmRSS at start and once every thread served cgi_pm.plt");
    ($rss{$n}) = $log =~ /^memory: $n interpreter threads: VmRSS \d+ kB at start, (\d+) kB/m;
    like($log, qr/^memory: $n interpreter threads, plxd's mappings: (?:[a-z ]+ \d+ kB, )*libperl \d+ kB/m,
        "... and where it is (smaps by kind, libperl among them)");
}
ok($rss{2} && $rss{3} && $rss{2} > 1000 && $rss{3} > 1000, 'the figures are resident sizes in kB') or diag($log);
my ($per) = $log =~ /^memory per extra interpreter: \(RSS3 - RSS2\) \/ 1 = (-?[\d.]+) MB \((-?\d+) kB\)$/m;
ok(defined $per, 'the memory per extra interpreter, (RSS3 - RSS2) / 1') or diag($log);
is(sprintf('%.2f', ($rss{3} - $rss{2}) / 1024), $per, '... from the two figures printed') if defined $per;

for my $t (qw(hello.plt cgi_pm.plt)) {
    like($log, qr/^memory over time: \Q$t\E, keep-alive \(ab -k -c 2\), 2 interpreter threads: VmRSS \d+ kB after request 200, \d+ kB after request 2000: [-+]\d+ kB$/m,
        "the growth of VmRSS between request 200 and request 2000 of $t");
}

# Nothing left running: no process uses the working folder.
ok($work && -d $work, 'the working folder was kept') or diag($log);
my @left;
if ($work) {
    opendir my $dh, '/proc';
    for my $p (grep { /^\d+$/ } readdir $dh) {
        my $cmd = read_file("/proc/$p/cmdline");
        push @left, "$p: " . ($cmd =~ tr/\0/ /r) if index($cmd, $work) >= 0;
    }
    remove_tree($work) unless $ENV{PLXD_TEST_KEEP};
}
is(scalar @left, 0, 'no plxd bench/run --memory started is still running') or diag(join "\n", @left);

# The options' limits: two counts each, fewer first, at least 1. 1,2 and 1,2
# are the least they take (checked with --help, which measures nothing).
for my $bad (['--memory-threads', '3,3'], ['--memory-threads', '0,2'], ['--memory-threads', '2'],
    ['--memory-requests', '2000,2000'], ['--memory-requests', '0,1'], ['--memory-requests', '1,x']) {
    my $out = qx('$src/bench/run' --memory --plxd '$plxd' $bad->[0] '$bad->[1]' 2>&1);
    ok($? != 0 && $out =~ /^bench\/run: \Q$bad->[0]\E takes two counts, fewer first/m, "$bad->[0] $bad->[1] is refused")
        or diag($out);
}
my $out = qx('$src/bench/run' --memory-threads 1,2 --memory-requests 1,2 --help 2>&1);
is($?, 0, '--memory-threads 1,2 and --memory-requests 1,2 are taken') or diag($out);
like($out, qr/^  --memory\s/m, 'the usage text has --memory');

done_testing;
