# Plack::Test::Suite against a real plxd, as Plack's t/Plack-Handler/apache2.t
# runs it against Apache: an app.psgi that is the suite's handler wrapped in
# Plack::Middleware::Lint, served by the perl handler, and the suite's
# client with run_server_tests. Four times: the app at its file's URL path
# (PLACK_TEST_SCRIPT_NAME=/app.psgi), mounted at / ([mount], SCRIPT_NAME
# ''), mounted at a prefix, and through plackup -s Plxd (the build tree's
# Plack::Handler::Plxd, plackup's development environment: its Lint and
# StackTrace around the app). Run in both isolation modes
# (PLXD_TEST_ISOLATION, tests/CMakeLists.txt).
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use PlxdServer;
use PlxdTest qw(build_dir write_file read_file);
use Plack::Test::Suite;
use POSIX ();

my $app = <<'APP';
use Plack::Test::Suite;
use Plack::Middleware::Lint;
Plack::Middleware::Lint->wrap(Plack::Test::Suite->test_app_handler);
APP

for my $case (['/app.psgi', {}], ['', { '/' => 'root/app.psgi' }],
    ['/foo/bar/baz', { '/foo/bar/baz' => 'root/app.psgi' }]) {
    my ($script_name, $mount) = @$case;
    note "SCRIPT_NAME '$script_name'";
    my $s = PlxdTest->start(
        files    => { 'app.psgi' => $app },
        handlers => { '.psgi' => 'perl' },
        sections => { %$mount ? (mount => $mount) : () },
    );
    # Plack::Test::Suite set it to '' as it loaded.
    $ENV{PLACK_TEST_SCRIPT_NAME} = $script_name;
    # The server side is plxd, already listening: Test::TCP's server
    # process only waits to be stopped.
    Plack::Test::Suite->run_server_tests(sub { POSIX::pause() while 1 }, $s->port);
    unlike($s->error_log, qr/\[(?:alert|crit)\]/, "SCRIPT_NAME '$script_name': no alert in the log");
    $s->stop;
}

{
    note 'plackup -s Plxd';
    my $dir = tempdir('plxd-test-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    write_file("$dir/app.psgi", $app);
    my $srv = PlxdServer->start(name => 'plackup',
        cmd => ['plackup', '-s', 'Plxd', '--listen', '127.0.0.1:0', '--error-log', "$dir/error.log",
            (PlxdTest::thread_mode() ? ('--isolation', 'thread') : ()), "$dir/app.psgi"],
        env => { PERL5LIB => build_dir() . '/modules/perl5', PLACK_ENV => undef },
        stderr => "$dir/stderr.log", timeout => 30);
    $ENV{PLACK_TEST_SCRIPT_NAME} = '';
    Plack::Test::Suite->run_server_tests(sub { POSIX::pause() while 1 }, $srv->port);
    is($srv->stop, 0, 'plackup -s Plxd: plxd exits 0 on SIGTERM');
    unlike(read_file("$dir/error.log") . read_file("$dir/stderr.log"),
        qr/\[(?:alert|crit)\]|Sanitizer|runtime error:|master: serving process \d+ (?:killed|exited)/,
        'plackup -s Plxd: no alert, crash or sanitizer report in the log');
}
done_testing;
