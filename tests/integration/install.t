# cmake --install puts plxd, its modules, the default configuration, the
# sample root and the man pages in FHS places under the prefix, the man pages
# render without a warning, and the installed plxd finds its configuration
# and modules there without flags.
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

# plxd(8) and plxd.conf(5), printed by the plxd just built, and PLXD::Request(3pm)
# from its POD: groff reads each without a warning (-ww: all of them).
my @pages = ("$prefix/share/man/man8/plxd.8", "$prefix/share/man/man5/plxd.conf.5",
    "$prefix/share/man/man3/PLXD::Request.3pm");
for my $page (@pages) {
    ok(-s $page, "$page installed") or next;
    my $warnings = `groff -man -ww -z '$page' 2>&1`;
    is($?, 0, "groff renders $page");
    is($warnings, '', '... without a warning');
}
like(read_file($pages[0]), qr/^\.I \Q$prefix\E\/etc\/plxd\/plxd\.conf$/m,
    'plxd(8) names the installed configuration');
like(read_file($pages[1]), qr/^\.SS \[cgi\]$/m, 'plxd.conf(5) lists the modules\' sections');

local $ENV{PLXD_BIN} = "$prefix/bin/plxd";
my ($status, $out, $err) = run_plxd('--check');
is($status, 0, 'the installed plxd finds and accepts its default configuration') or diag($err);
like($out, qr{\Q$prefix\E/etc/plxd/plxd\.conf: configuration OK}, 'the default configuration path');
($status, $out) = run_plxd('--help');
like($out, qr/^\[echo\]/m, 'the installed plxd finds its modules (--help lists echo)');

my $s = PlxdTest->start(files => { 'x.echo' => '' }, handlers => { '.echo' => 'echo' });
like($s->get('/x.echo')->{content}, qr/^echo\n/, 'an installed module serves without load =');
done_testing;
