# Started as root with [server] user set, plxd binds, then becomes that user;
# its logs stay writable to it, so SIGHUP can reopen them. Scripts (.pl) and
# Perl workers (.plx) run as that user, and cannot read plxd's memory.
use strict;
use warnings;
use Test::More;
use File::Copy ();
use File::Temp ();
use PlxdTest qw(wait_for build_dir read_file);

plan skip_all => 'needs root to drop privileges' unless $> == 0;
my $uid = getpwnam('nobody') // plan skip_all => 'no user nobody';

my $s = PlxdTest->start(files => { 'a.txt' => "a\n" }, server => { user => 'nobody' });
is($s->get('/a.txt')->{status}, 200, 'serves after dropping privileges');
my $status = PlxdTest::read_file('/proc/' . $s->pid . '/status');
my ($real, $effective, $saved) = $status =~ /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)/m;
is_deeply([$real, $effective, $saved], [$uid, $uid, $uid], 'real, effective and saved uid are nobody');
my ($gids) = $status =~ /^Groups:\s*(.*)$/m;
unlike(" $gids ", qr/ 0 /, 'no root supplementary group');
is((stat($s->dir . '/error.log'))[4], $uid, 'the error log was given to the user');
like($s->error_log, qr/running as user nobody/, 'the switch is logged');
$s->signal('HUP');
ok($s->wait_log(qr/configuration reloaded/, 10), 'SIGHUP still reopens the logs as nobody');
$s->stop;

# A script reports its uids and whether it could open its parent's (plxd's)
# memory. Changing user made plxd non-dumpable (with the kernel's default
# fs.suid_dumpable = 0), so its /proc files belong to root and a process of
# the same user may not read or trace it.
my $peek = <<'END';
my $parent = getppid;
print "Content-Type: text/plain\n\n";
print "uid $< $>\n";
print 'plxd memory ', (open(my $fh, '<', "/proc/$parent/mem") ? 'opened' : 'refused'), "\n";
END
# The worker executable must be reachable for nobody, and a checkout under
# a private home folder is not: the perl module and its worker are copied
# to a folder anyone can enter, and loaded from there.
my $mods = File::Temp::tempdir('plxd-priv-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $mods or die "chmod $mods: $!";
for my $file ('perl.so', 'plxd-perl-worker') {
    File::Copy::copy(build_dir() . "/modules/$file", "$mods/$file") or die "copy $file: $!";
    chmod 0755, "$mods/$file" or die "chmod $file: $!";
}
$s = PlxdTest->start(files => { 'peek.pl' => $peek, 'peek.plx' => $peek },
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { perl => { workers => 1, load => "$mods/perl.so" } },
    server => { user => 'nobody' });
my $dumpable_default = read_file('/proc/sys/fs/suid_dumpable') =~ /^0/;
for my $script ('peek.pl', 'peek.plx') {
    SKIP: {
        my $res = $s->get("/$script");
        is($res->{status}, 200, "$script runs") or diag($res->{content});
        like($res->{content}, qr/^uid $uid $uid$/m, "$script runs as nobody (real and effective uid)");
        skip 'fs.suid_dumpable is not 0 here', 1 unless $dumpable_default;
        like($res->{content}, qr/^plxd memory refused$/m, "$script cannot read plxd's memory");
    }
}
done_testing;
