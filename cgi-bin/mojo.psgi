#!/usr/bin/perl
# mojo.plx as a PSGI application, written as Mojolicious's own examples
# are: the routes at the top level, the application as the file's last
# value. plxd runs the file once per interpreter (a worker process, or an
# interpreter thread) and calls that application for each request, so the
# routes are declared once with no "our $app ||=": the page shows it built
# once, with its two routes, while the requests add up.
use Mojolicious::Lite -signatures;

our $built;    # how many times this interpreter ran the file
$built++;
my $served = 0;
app->mode('production');
app->secrets(['plxd sample: change me']);

get '/' => sub ($c) {
    $served++;
    $c->render(template => 'index', routes => scalar @{ app->routes->children },
        built => $built, served => $served, pid => $$);
};
get '/hello/:name' => sub ($c) {
    $c->render(text => 'Hello, ' . $c->param('name') . "!\n");
};

# 'psgi' by name: plackup sets PLACK_ENV, from which a bare app->start
# guesses it; plxd sets no such variable.
app->start('psgi');
__DATA__

@@ index.html.ep
% layout 'default', title => 'Mojolicious::Lite on plxd, as .psgi';
<p>This interpreter built the application <b><%= $built %></b> time(s); it has
<b><%= $routes %></b> routes and has served <b><%= $served %></b> request(s) (pid <%= $pid %>).</p>
<p>A .psgi file is an application: run once per interpreter, then called for
each request. Try <a href="<%= url_for('/hello/world') %>"><%= url_for('/hello/world') %></a>.</p>

@@ layouts/default.html.ep
<!DOCTYPE html>
<html><head><meta charset="utf-8"><title><%= title %></title></head>
<body><h1><%= title %></h1><%= content %></body></html>
