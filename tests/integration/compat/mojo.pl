#!/usr/bin/perl
# Mojolicious::Lite, as its documentation writes it: routes, a template in
# __DATA__, the session, an upload, a redirect; app->start runs it as CGI
# when it finds a CGI environment.
use Mojolicious::Lite -signatures;

# Run as CGI there is no MOJO_MODE in the environment: the mode is set here,
# as Dancer2's dispatch.cgi sets its environment.
app->mode('production');
app->secrets(['compat suite secret']);

get '/' => sub ($c) {
    $c->render(template => 'index', title => 'Compat: Mojolicious::Lite');
};

post '/greet' => sub ($c) {
    $c->render(template => 'greet', name => $c->param('name') // 'stranger',
        colours => $c->every_param('colour'));
};

get '/greet' => sub ($c) {
    $c->render(text => 'Hello, ' . ($c->param('name') // 'stranger') . "\n");
};

post '/upload' => sub ($c) {
    my $file = $c->req->upload('file');
    $c->render(text => sprintf "file: %s\nbytes: %d\nnote: %s\n%s",
        $file ? ($file->filename, $file->size) : ('none', 0),
        $c->param('note') // '', $file ? $file->slurp : '');
};

get '/redirect' => sub ($c) {
    $c->redirect_to($c->url_for('/greet')->query(name => 'redirected'));
};

get '/count' => sub ($c) {
    my $n = ($c->session('count') // 0) + 1;
    $c->session(count => $n);
    $c->render(text => "count: $n\n");
};

get '/die' => sub ($c) {
    die "compat: the application died\n";
};

app->start;
__DATA__

@@ index.html.ep
% layout 'default';
<form method="post" action="<%= url_for('/greet') %>">
  %= text_field 'name'
  %= submit_button
</form>

@@ greet.html.ep
% layout 'default', title => 'Hello';
<h1>Hello, <%= $name %></h1>
<p>Colours: <%= join ', ', @$colours %></p>

@@ layouts/default.html.ep
<!DOCTYPE html>
<html><head><title><%= title %></title></head><body><%= content %></body></html>
