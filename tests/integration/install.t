# cmake --install puts plxd, its modules, the default configuration and the
# sample root in FHS places under the prefix, and the installed plxd finds
# its configuration and modules there without flags.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use PlxdTest qw(source_dir read_file run_plxd);

my $tmp = tempdir(CLEANUP => 1);
my $prefix = "$tmp/prefix";
my $log = "$tmp/build.log";
my $rc = system("cmake -S '${\ source_dir()}' -B '$tmp/build' -DCMAKE_INSTALL_PREFIX='$prefix' >'$log' 2>&1"
    . " && cmake --build '$tmp/build' -j2 >>'$log' 2>&1 && cmake --install '$tmp/build' >>'$log' 2>&1");
is($rc, 0, 'configure, build and install into a temporary prefix') or diag(read_file($log));

ok(-x "$prefix/bin/plxd", 'bin/plxd');
my ($echo) = glob("$prefix/lib*/plxd/echo.so $prefix/lib/*/plxd/echo.so");
ok($echo && -f $echo, 'the echo module under lib/plxd');
ok(-f "$prefix/etc/plxd/plxd.conf", 'etc/plxd/plxd.conf');
ok(-f "$prefix/share/plxd/cgi-bin/hello.html", 'the sample root under share/plxd/cgi-bin');
like(read_file("$prefix/etc/plxd/plxd.conf"), qr{^root = \Q$prefix\E/share/plxd/cgi-bin$}m,
    'the installed configuration names the installed root');

local $ENV{PLXD_BIN} = "$prefix/bin/plxd";
my ($status, $out, $err) = run_plxd('--check');
is($status, 0, 'the installed plxd finds and accepts its default configuration') or diag($err);
like($out, qr{\Q$prefix\E/etc/plxd/plxd\.conf: configuration OK}, 'the default configuration path');
($status, $out) = run_plxd('--help');
like($out, qr/^\[echo\]/m, 'the installed plxd finds its modules (--help lists echo)');

my $s = PlxdTest->start(files => { 'x.echo' => '' }, handlers => { '.echo' => 'echo' });
like($s->get('/x.echo')->{content}, qr/^echo\n/, 'an installed module serves without load =');
done_testing;
