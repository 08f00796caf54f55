#!/usr/bin/perl
# dancer.plx as a PSGI application, written as Dancer2's own examples are:
# the routes at the top level, to_app as the file's last value. plxd runs
# the file once per interpreter and calls the application for each
# request: no Plack::Handler::CGI and no "our $psgi ||=".
use Dancer2;

our $built;    # how many times this interpreter ran the file
$built++;
my $served = 0;
set show_errors => 0;

get '/' => sub {
    $served++;
    my $routes = 0;
    $routes += @$_ for values %{ app->routes };
    content_type 'text/html; charset=utf-8';
    return "<!DOCTYPE html>\n<html><head><title>Dancer2 on plxd, as .psgi</title></head><body>\n"
        . "<h1>Dancer2 on plxd, as .psgi</h1>\n<p>This interpreter built the application <b>$built</b> time(s); "
        . "it has <b>$routes</b> routes (HEAD included) and has served <b>$served</b> request(s) "
        . "(pid $$).</p>\n<p>Try <a href=\"" . request->uri_for('/hello/world') . '">'
        . request->uri_for('/hello/world') . "</a>.</p>\n</body></html>\n";
};
get '/hello/:name' => sub {
    content_type 'text/plain';
    return 'Hello, ' . route_parameters->get('name') . "!\n";
};

to_app;
