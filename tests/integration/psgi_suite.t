# Plack::Test::Suite against a real plxd, as Plack's t/Plack-Handler/apache2.t
# runs it against Apache: an app.psgi that is the suite's handler wrapped in
# Plack::Middleware::Lint, served by the perl handler, and the suite's
# client with run_server_tests. The app is mounted at its file's URL path
# (PLACK_TEST_SCRIPT_NAME=/app.psgi). Run in both isolation modes
# (PLXD_TEST_ISOLATION, tests/CMakeLists.txt).
use strict;
use warnings;
use Test::More;
use PlxdTest;
use Plack::Test::Suite;
use POSIX ();

my $s = PlxdTest->start(
    files => {
        'app.psgi' => <<'APP',
use Plack::Test::Suite;
use Plack::Middleware::Lint;
Plack::Middleware::Lint->wrap(Plack::Test::Suite->test_app_handler);
APP
    },
    handlers => { '.psgi' => 'perl' },
);

# Plack::Test::Suite set it to '' as it loaded.
$ENV{PLACK_TEST_SCRIPT_NAME} = '/app.psgi';
# The server side is plxd, already listening: Test::TCP's server process
# only waits to be stopped.
Plack::Test::Suite->run_server_tests(sub { POSIX::pause() while 1 }, $s->port);
unlike($s->error_log, qr/\[(?:alert|crit)\]/, 'no alert in the log');
done_testing;
