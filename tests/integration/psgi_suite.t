# Plack::Test::Suite against a real plxd, as Plack's t/Plack-Handler/apache2.t
# runs it against Apache: an app.psgi that is the suite's handler wrapped in
# Plack::Middleware::Lint, served by the perl handler, and the suite's
# client with run_server_tests. Three times: the app at its file's URL path
# (PLACK_TEST_SCRIPT_NAME=/app.psgi), mounted at / ([mount], SCRIPT_NAME
# ''), and mounted at a prefix. Run in both isolation modes
# (PLXD_TEST_ISOLATION, tests/CMakeLists.txt).
use strict;
use warnings;
use Test::More;
use PlxdTest;
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
done_testing;
