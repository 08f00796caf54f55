#!/usr/bin/perl
# Mojolicious::Lite, built once per process. Routes, helpers, hooks and
# plugins are declared inside "our $app ||= do { ... }": a persistent .plx
# worker declares them on its first request and reuses the application
# after; as a .pl (CGI) script it runs once anyway. Declared at the top level
# instead, as Mojolicious's own examples do, they would be added to the same
# application again on every .plx request.
use Mojolicious::Lite -signatures;

our ($built, $served);
our $app ||= do {
    $built++;
    app->mode('production');    # no MOJO_MODE in a CGI environment
    app->secrets(['plxd sample: change me']);

    get '/' => sub ($c) {
        $served++;
        $c->render(template => 'index', routes => scalar @{ app->routes->children },
            built => $built, served => $served, pid => $$);
    };
    get '/hello/:name' => sub ($c) {
        $c->render(text => 'Hello, ' . $c->param('name') . "!\n");
    };
    app;
};
$app->start;
__DATA__

@@ index.html.ep
% layout 'default', title => 'Mojolicious::Lite on plxd';
<p>This process built the application <b><%= $built %></b> time(s); it has
<b><%= $routes %></b> routes and has served <b><%= $served %></b> request(s) (pid <%= $pid %>).</p>
<p>As .pl every request is a new process: always 1, 2 routes, 1 request.
As .plx the worker keeps the application: built once, still 2 routes, the
requests add up. Try <a href="<%= url_for('/hello/world') %>"><%= url_for('/hello/world') %></a>.</p>

@@ layouts/default.html.ep
<!DOCTYPE html>
<html><head><meta charset="utf-8"><title><%= title %></title></head>
<body><h1><%= title %></h1><%= content %></body></html>
