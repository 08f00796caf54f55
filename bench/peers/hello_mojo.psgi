# The Mojolicious::Lite hello app for `bench/run --peers`: one route, a
# short text answer, the app as the file's last value. bench/run serves
# this same file under plxd ([mount], in worker processes and in
# interpreter threads) and under Starman, each asked for the route '/'.
use Mojolicious::Lite -signatures;

# Mojolicious logs every request in its development mode, the default
# without MOJO_MODE or PLACK_ENV: plxd sets neither, Starman sets
# PLACK_ENV=deployment. Named here, the mode is the same under both.
app->mode('production');

get '/' => { text => "Hello world!\n" };

# 'psgi' by name: a bare app->start guesses it from PLACK_ENV.
app->start('psgi');
