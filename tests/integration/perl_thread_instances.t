# Two handler instances in thread mode ([perl] and [perl:thread], both
# isolation = thread), each with a parent interpreter of its own, in one
# plxd: both serve, a reload keeps both and can start a third, and plxd
# stops cleanly (exit 0, "stopped" logged), also when the SIGTERM or the
# SIGHUP reaches an interpreter thread of the second instance rather than
# the thread that waits for plxd's signals; and an instance whose start
# failed at a reload starts at the next. perl's process-wide set-up is
# done once for them all and kept: torn down with the first parent
# destroyed, it left the other instance's interpreters on destroyed locks
# ("panic: MUTEX_LOCK (22)", plxd ended with status 29 or 255), and an
# instance started after a failed one found perl's locks destroyed (the
# serving process died at that reload).
use strict;
use warnings;
use Test::More;
use POSIX ();
use PlxdTest qw(wait_for write_file read_file);

require 'syscall.ph';

# Each script says which instance answered, from which process and thread,
# how many requests its interpreter has served, and what its %SIG holds
# for HUP and TERM.
my $where = q{my ($t) = readlink('/proc/thread-self') =~ m{/task/(\d+)$}; our $n; $n++;
my $sig = join ',', map { $SIG{$_} // '' } qw(HUP TERM);};
my %files = (
    'one.plx'    => qq{$where\nprint "Content-Type: text/plain\\n\\n", "one \$\$ \$t \$n \$sig\\n";\n},
    'two.psgi'   => qq{sub { $where [200, ['Content-Type' => 'text/plain'], ["two \$\$ \$t \$n \$sig\\n"]] };\n},
    'three.plu'  => qq{$where\nprint "Content-Type: text/plain\\n\\n", "three \$\$ \$t \$n \$sig\\n";\n},
    # Each preload sets one of plxd's signals in its instance's %SIG.
    'pre1.pl'    => "\$SIG{HUP} = 'IGNORE';\n1;\n",
    'pre2.pl'    => "\$SIG{TERM} = 'IGNORE';\n1;\n",
);
my %thread = (isolation => 'thread', workers => 1, inline_budget => 0);

sub start {
    return PlxdTest->start(
        files    => \%files,
        handlers => { '.plx' => 'perl', '.psgi' => 'perl:thread' },
        sections => { perl => { %thread, preload => 'root/pre1.pl' },
                      'perl:thread' => { %thread, preload => 'root/pre2.pl' } },
    );
}

# (instance, pid, tid, count, %SIG) of an answer, or () for anything else.
sub answer {
    my ($s, $path) = @_;
    my $r = $s->get($path);
    return $r->{status} == 200 && $r->{content} =~ /^(\w+) (\d+) (\d+) (\d+) (\S*)$/
        ? ($1, $2, $3, $4, $5) : ();
}

sub count_of { my ($s, $re) = @_; my @m = $s->error_log =~ /$re/g; return scalar @m }

sub tgkill {
    my ($pid, $tid, $sig) = @_;
    # Numbers, not strings, which syscall would pass as pointers.
    return syscall(&SYS_tgkill, $pid + 0, $tid + 0, $sig + 0) == 0;
}

sub comm { read_file("/proc/$_[0]/task/$_[1]/comm") =~ s/\n//r }

my $s = start();
ok($s->wait_log(qr/1 interpreter threads started.*\n(?s:.*)1 interpreter threads started/),
    'both instances started their interpreter thread');
my $pid = $s->pid;
my ($i1, $p1, $t1, $n1, $sig1) = answer($s, '/one.plx');
my ($i2, $p2, $t2, $n2, $sig2) = answer($s, '/two.psgi');
is($i1, 'one', '[perl] answers');
is($i2, 'two', '[perl:thread] answers');
is($p1, $pid, '... the first in the serving process');
is($p2, $pid, '... the second too');
isnt($t1, $t2, '... each on an interpreter thread of its own');
is(comm($pid, $t2), 'plxd-perl', "the second's thread is an interpreter thread");
is($sig1, 'IGNORE,', "the first's preload set its %SIG: its scripts see it");
is($sig2, ',IGNORE', "the second's its own, apart");

# A reload, as the master passes it on.
my $reloads = count_of($s, qr/configuration reloaded/);
$s->signal('HUP');
ok(wait_for(sub { count_of($s, qr/configuration reloaded/) > $reloads }),
    'SIGHUP reloads: plxd kept its own disposition');
is((answer($s, '/one.plx'))[3], $n1 + 1, 'the first instance serves on, with its interpreter');
is((answer($s, '/two.psgi'))[3], $n2 + 1, 'the second too');

# The same signal at the second instance's interpreter thread, which
# blocks no signal: it is passed on to the thread that waits for it.
$reloads = count_of($s, qr/configuration reloaded/);
ok(tgkill($pid, $t2, POSIX::SIGHUP()), 'SIGHUP sent to the second instance\'s interpreter thread');
ok(wait_for(sub { count_of($s, qr/configuration reloaded/) > $reloads }), '... reloads plxd');
is((answer($s, '/two.psgi'))[3], $n2 + 2, '... and the thread serves on');

# A reload that starts a third instance in thread mode, beside the two.
my $conf = read_file($s->conf_file);
$conf =~ s/^\[handlers\]\n/[handlers]\n.plu = perl:third\n/m or die 'no [handlers] line';
$conf .= "[perl:third]\n" . join('', map { "$_ = $thread{$_}\n" } sort keys %thread);
write_file($s->conf_file, $conf);
$reloads = count_of($s, qr/configuration reloaded/);
$s->signal('HUP');
ok(wait_for(sub { count_of($s, qr/configuration reloaded/) > $reloads }), 'a reload adds [perl:third]');
my ($i3, $p3) = answer($s, '/three.plu');
is($i3, 'three', 'the third instance answers');
is($p3, $pid, '... in the same serving process');
is((answer($s, '/one.plx'))[0], 'one', 'the first still answers');
is((answer($s, '/two.psgi'))[0], 'two', 'the second still answers');

my $status = $s->stop;
is($status, 0, 'SIGTERM: plxd exits 0 with three instances in thread mode (its disposition kept)');
like($s->error_log, qr/\[pid $pid\] stopped$/m, 'the serving process logged that it stopped');
unlike($s->error_log, qr/panic:/, 'no panic from perl');

# SIGTERM at the second instance's interpreter thread: passed on, and
# plxd stops as on any stop (the master with it).
$s = start();
$pid = $s->pid;
(undef, undef, $t2) = answer($s, '/two.psgi');
is((answer($s, '/one.plx'))[0], 'one', 'a second plxd: the first instance answers');
ok($t2 && tgkill($pid, $t2, POSIX::SIGTERM()), 'SIGTERM sent to the second instance\'s interpreter thread');
$status = $s->wait_exit(60);
is($status, 0, '... plxd stops and exits 0');
like($s->error_log, qr/\[pid $pid\] stopped$/m, '... the serving process logged that it stopped');
like($s->error_log, qr/master: the serving process stopped: stopping too/,
    '... and the master stopped with it, as asked');
unlike($s->error_log, qr/serving process \d+ (?:exited with status|killed by signal)|panic:/,
    '... no death, no panic');
unlike($s->error_log, qr/AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:/,
    '... and no sanitizer report');
diag($s->logs) unless Test::More->builder->is_passing;

# The first instance in thread mode fails to start at a reload (its
# preload dies): the next reload starts it, as perl's set-up stayed.
$s = PlxdTest->start(
    files => { 'bad.pl' => "die \"bad preload\\n\";\n", 'good.pl' => "1;\n", %files },
    handlers => {},
);
$pid = $s->pid;
my $base = read_file($s->conf_file);
sub with_preload {
    my ($file) = @_;
    my $conf = $base =~ s/^\[handlers\]\n/[handlers]\n.plx = perl:late\n/mr;
    return $conf . "[perl:late]\npreload = " . $s->root . "/$file\n"
        . join('', map { "$_ = $thread{$_}\n" } sort keys %thread);
}
write_file($s->conf_file, with_preload('bad.pl'));
$s->signal('HUP');
ok($s->wait_log(qr/a handler failed to start: kept the running configuration/),
    'a third plxd: a reload adding an instance whose preload dies is refused');
write_file($s->conf_file, with_preload('good.pl'));
$reloads = count_of($s, qr/configuration reloaded/);
$s->signal('HUP');
ok(wait_for(sub { count_of($s, qr/configuration reloaded/) > $reloads }),
    'the next reload, with a preload that loads, starts it');
is_deeply([(answer($s, '/one.plx'))[0, 1]], ['one', $pid], '... and it answers in the serving process');
is($s->stop, 0, 'SIGTERM: plxd exits 0');
like($s->error_log, qr/\[pid $pid\] stopped$/m, 'the serving process logged that it stopped');

done_testing;
