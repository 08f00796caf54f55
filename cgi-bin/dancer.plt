#!/usr/bin/perl
# Dancer2, run as CGI through Plack::Handler::CGI, built once per process:
# the routes and the PSGI application (to_app) are made inside
# "our $psgi ||= do { ... }", so a persistent .plx worker makes them on its
# first request and reuses them; as a .pl (CGI) script it runs once anyway.
# Declared at the top level, the routes would be added again on every .plx
# request, and each to_app call wraps the hooks once more (Perl's "Deep
# recursion" warnings after a few hundred requests).
use Dancer2;
use Plack::Handler::CGI;

our ($built, $served);
our $psgi ||= do {
    $built++;
    set show_errors => 0;

    get '/' => sub {
        $served++;
        my $routes = 0;
        $routes += @$_ for values %{ app->routes };
        content_type 'text/html; charset=utf-8';
        return "<!DOCTYPE html>\n<html><head><title>Dancer2 on plxd</title></head><body>\n"
            . "<h1>Dancer2 on plxd</h1>\n<p>This process built the application <b>$built</b> time(s); "
            . "it has <b>$routes</b> routes (HEAD included) and has served <b>$served</b> request(s) "
            . "(pid $$).</p>\n<p>Try <a href=\"" . request->uri_for('/hello/world') . '">'
            . request->uri_for('/hello/world') . "</a>.</p>\n</body></html>\n";
    };
    get '/hello/:name' => sub {
        content_type 'text/plain';
        return 'Hello, ' . route_parameters->get('name') . "!\n";
    };
    to_app;
};
Plack::Handler::CGI->new->run($psgi);
