# Started as root with [server] user set, plxd binds, then becomes that user;
# its logs stay writable to it, so SIGHUP can reopen them.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for);

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
done_testing;
