# cmake --install puts plxd, its modules, the default configuration, the
# sample root and the man pages in FHS places under the prefix, the man pages
# render without a warning, and the installed plxd finds its configuration
# and modules there without flags. Installed to another prefix than the
# build's (--prefix), or staged with DESTDIR, every file lands under it, and
# that plxd, started with its installed configuration, serves the samples;
# so does a staged tree moved to its place.
use strict;
use warnings;
use Test::More;
use Cwd ();
use File::Find ();
use File::Path qw(remove_tree);
use File::Temp qw(tempdir);
use PlxdServer;
use PlxdTest qw(source_dir read_file run_plxd);
use HTTP::Tiny;
use Config;
use File::Spec;

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
my ($root) = read_file("$prefix/etc/plxd/plxd.conf") =~ /^root = (.*)$/m;
is(Cwd::realpath("$prefix/etc/plxd/$root"), Cwd::realpath("$prefix/share/plxd/cgi-bin"),
    "the installed configuration names the installed root, relative to itself ($root)");

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
$s->stop;

# Every file under $dir, and those install_manifest.txt lists.
sub files_under {
    my ($dir) = @_;
    my @files;
    File::Find::find({ no_chdir => 1, wanted => sub { push @files, $_ if !-d $_ } }, $dir)
        if -d $dir;
    return sort @files;
}
sub manifest { return sort split /\n/, read_file("$tmp/build/install_manifest.txt") }
is_deeply([files_under($prefix)], [manifest()], 'every file installed is under the prefix');

# Starts the plxd at $bin with the configuration installed beside it ($conf,
# or, without, the one it finds by itself), on a free port; checks that it
# serves the static sample, a .pl and a .plx, and that it stops cleanly.
sub serves {
    my ($what, $bin, $conf) = @_;
    my $log = "$tmp/serve.log";
    unlink $log;
    my $srv = eval {
        PlxdServer->start(cmd => [$bin, ($conf ? ('--config', $conf) : ()), '--listen',
            '127.0.0.1:0'], stderr => $log, timeout => 30);
    };
    ok($srv, "$what: starts") or return diag($@ . read_file($log));
    my ($root) = $bin =~ m{^(.*)/bin/plxd$};
    my $http = HTTP::Tiny->new(timeout => 30);
    my $page = $http->get($srv->base . '/hello.html');
    is("$page->{status} $page->{content}", '200 ' . read_file("$root/share/plxd/cgi-bin/hello.html"),
        "$what: GET /hello.html, the installed sample");
    like($http->get($srv->base . "/hello.$_")->{content}, qr/Hello world/, "$what: GET /hello.$_")
        for qw(pl plx);
    is($srv->stop(grace => 30), 0, "$what: exits 0 on SIGTERM");
    unlike(read_file($log), qr/\[(error|alert)\]/, "$what: logs no error") or diag(read_file($log));
}

# Where the handler goes under a prefix that is not perl's vendor prefix.
my $perl_lib = File::Spec->abs2rel($Config{installsitelib}, $Config{siteprefix});
ok(-f "$prefix/$perl_lib/Plack/Handler/Plxd.pm", "Plack::Handler::Plxd under $perl_lib");
like(read_file($pages[0]), qr{^\.I \Q$prefix/$perl_lib\E/Plack/Handler/Plxd\.pm$}m,
    'plxd(8) names the installed Plack::Handler::Plxd');

# plackup -s Plxd with the handler installed under $root starts $root's plxd
# (the process plackup started is it, by exec) and serves an app.
sub plackup_serves {
    my ($what, $root) = @_;
    my $app = "$tmp/app.psgi";
    open my $fh, '>', $app or die "$app: $!";
    print $fh "sub { [200, ['Content-Type' => 'text/plain'], ['plackup app']] }\n";
    close $fh;
    my $log = "$tmp/plackup.log";
    my $srv = eval {
        PlxdServer->start(name => 'plackup', cmd => ['plackup', '-s', 'Plxd', '--listen',
            '127.0.0.1:0', $app], env => { PERL5LIB => "$root/$perl_lib" }, stderr => $log,
            timeout => 30);
    };
    ok($srv, "$what: plackup -s Plxd starts") or return diag($@ . read_file($log));
    is(readlink('/proc/' . $srv->pid . '/exe'), Cwd::realpath("$root/bin/plxd"),
        "$what: plackup -s Plxd runs the plxd installed beside the handler");
    is(HTTP::Tiny->new(timeout => 30)->get($srv->base . '/')->{content}, 'plackup app',
        "$what: plackup -s Plxd serves the app");
    is($srv->stop(grace => 30), 0, "$what: plackup -s Plxd: exits 0 on SIGTERM");
}

# Installed to another prefix than the one the build was configured with
# (which is removed first, so that nothing there can be what is found).
remove_tree($prefix);
my $other = "$tmp/other";
$rc = system("cmake --install '$tmp/build' --prefix '$other' >>'$log' 2>&1");
is($rc, 0, 'cmake --install --prefix another folder') or diag(read_file($log));
ok(!-e $prefix, '... writes nothing under the prefix the build was configured with');
my @installed = files_under($other);
is_deeply(\@installed, [manifest()], '... every file it installed is under the new prefix');
ok(-f "$other/etc/plxd/plxd.conf", '... the configuration too');
like(read_file("$other/etc/plxd/plxd.conf"), qr{^root = \.\./\.\./share/plxd/cgi-bin$}m,
    '... naming the installed root relative to itself');
{
    local $ENV{PLXD_BIN} = "$other/bin/plxd";
    my ($status, $out, $err) = run_plxd('--check');
    like($out, qr{^plxd: \Q$other\E/etc/plxd/plxd\.conf: configuration OK$}m,
        'that plxd finds the configuration installed with it, without --config') or diag($err);
}
serves('installed to another prefix', "$other/bin/plxd", "$other/etc/plxd/plxd.conf");
plackup_serves('installed to another prefix', $other);

# Staged with DESTDIR: everything under DESTDIR, nothing at the prefix, and
# the staged tree works where it lies and once moved to the prefix.
my $stage = "$tmp/stage";
$rc = system("DESTDIR='$stage' cmake --install '$tmp/build' >>'$log' 2>&1");
is($rc, 0, 'DESTDIR=... cmake --install') or diag(read_file($log));
ok(!-e $prefix, '... writes nothing at the prefix itself');
is_deeply([map { s{^\Q$stage$prefix\E/}{}r } files_under($stage)],
    [map { s{^\Q$other\E/}{}r } @installed],
    '... the same files under DESTDIR/PREFIX as an install to a prefix puts under it');
serves('staged with DESTDIR, where it lies', "$stage$prefix/bin/plxd");
rename "$stage$prefix", $prefix or die "rename: $!";
serves('staged with DESTDIR, moved to the prefix', "$prefix/bin/plxd", "$prefix/etc/plxd/plxd.conf");
plackup_serves('staged with DESTDIR, moved to the prefix', $prefix);
done_testing;
