# Inline runs that hold their event thread past inline_budget by the clock
# while their CPU time stays within it and their event thread makes no
# voluntary context switch: a loop of sched_yield beside a busy process,
# and a script that lowers its event thread's priority. Such a run counts
# as preempted only up to 4 times the budget and 16 ms: past that it is
# demoted, whatever held it (doc/perl.md, "Inline runs").
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for);
use Time::HiRes qw(time);
use POSIX ();

my $where = <<'EOF2';
sub where { my $tid = syscall(186); open my $fh, '<', "/proc/self/task/$tid/comm" or return '?';
    my $comm = <$fh>; chomp $comm; return $comm }
EOF2
my $yield = $where . <<'EOF2';
use Time::HiRes ();
my %q = map { split /=/, $_, 2 } split /&/, $ENV{QUERY_STRING} // '';
my $end = Time::HiRes::time() + ($q{ms} // 0) / 1000;
syscall(24) while Time::HiRes::time() < $end;
print "Content-Type: text/plain\n\n", where(), "\n";
EOF2
my $nice = $where . <<'EOF2';
my %q = map { split /=/, $_, 2 } split /&/, $ENV{QUERY_STRING} // '';
setpriority(0, 0, $q{nice}) if defined $q{nice};
if ($q{cpu}) { require Time::HiRes; my $end = Time::HiRes::clock_gettime(Time::HiRes::CLOCK_THREAD_CPUTIME_ID()) + $q{cpu} / 1000;
    1 while Time::HiRes::clock_gettime(Time::HiRes::CLOCK_THREAD_CPUTIME_ID()) < $end }
print "Content-Type: text/plain\n\n", where(), " ", getpriority(0, 0), "\n";
EOF2
my $s = PlxdTest->start(
    files    => { 'yield.plt' => $yield, 'nice.plt' => $nice, 'a.txt' => "static\n" },
    handlers => { '.plt' => 'perl:thread' },
    server   => { threads => 1 },
    sections => { 'perl:thread' => { isolation => 'thread', workers => 1, inline_budget => '50ms',
                                      timing => 'yes' } },
);
my $first = sub { my $r = $s->get($_[0]); $r->{status} == 200 ? (split /\n/, $r->{content})[0] : "status $r->{status}" };
is($first->('/yield.plt'), 'plxd-perl', "yield.plt proving itself ($_)") for 1 .. 3;
is($first->('/nice.plt'), 'plxd-perl 0', "nice.plt proving itself ($_)") for 1 .. 3;
is(system('taskset', '-a', '-p', '-c', '0', $s->serving_pid) >> 8, 0, 'plxd pinned to core 0');
my $busy = fork // die "fork: $!";
if (!$busy) { exec 'taskset', '-c', '0', $^X, '-e', 'my $e = time + 60; 1 while time < $e'; POSIX::_exit(127) }

# A yield loop of 300 ms wall: CPU near nothing, no voluntary switch.
my @where;
for (1 .. 5) {
    my $t0 = time;
    my $r = $s->get('/yield.plt?ms=300');
    push @where, sprintf '%s %.0fms [%s]', (split /\n/, $r->{content})[0], (time - $t0) * 1000,
        $r->{headers}{'x-plxd-perl'} // '';
}
# Meanwhile a static file on the same (only) event thread waits.
my $kid = fork // die;
if (!$kid) { $s->get('/yield.plt?ms=300'); POSIX::_exit(0) }
select undef, undef, undef, 0.05;
my $t0 = time;
my $st = $s->get('/a.txt');
my $waited = (time - $t0) * 1000;
waitpid $kid, 0;
is($st->{status}, 200, 'a static file beside a yield run is answered');
cmp_ok($waited, '<', 50, sprintf('... in %.0f ms: not held 50 ms or more', $waited));
my @inline = grep { /^plxd-event/ } @where;
cmp_ok(scalar @inline, '<=', 1, 'a script that yields its core for 300 ms each run holds its event thread at most once')
    or diag(join "\n", @where);
like($s->error_log, qr/yield\.plt: ran \d+ us inline, past inline_budget/, '... and is demoted');

# setpriority from an inline run: the event thread's nice stays.
# The event thread keeps the priority a script set (doc/perl.md, "Process-
# wide state"); a run it makes slow past 4 times the budget and 16 ms is
# demoted.
my $r = $s->get('/nice.plt?nice=19');
is($r->{content}, "plxd-event 19\n", 'an inline run sets its event thread\'s nice to 19');
my @held;
for (1 .. 3) {
    my $t0 = time;
    my $y = $s->get('/nice.plt?cpu=10');
    push @held, sprintf '%s in %.0f ms', (split /\n/, $y->{content})[0], (time - $t0) * 1000;
}
ok(wait_for(sub { $s->error_log =~ /nice\.plt: ran \d+ us inline, past inline_budget/ }, 10),
    'a run of 10 ms of CPU that the lowered priority keeps past 216 ms is demoted')
    or diag(join '; ', @held);
kill 'KILL', $busy;
waitpid $busy, 0;
$s->stop;
done_testing;
