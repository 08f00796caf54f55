#!/usr/bin/perl
# Dancer2, a one-file application as its manual writes it, run as CGI
# through Plack::Handler::CGI: routes, a session, an upload, a redirect,
# Dancer2's own 404, and a die (Dancer2's 500 page).
use Dancer2;
use Plack::Handler::CGI;

# Each CGI request is a new process: sessions live in files, not in memory.
set engines => { session => { YAML => { session_dir => '@SESSION_DIR@/dancer' } } };
set session => 'YAML';
set show_errors => 0;

get '/' => sub {
    return '<form method="post" action="' . request->uri_for('/greet')
        . '"><input name="name"><input type="submit"></form>';
};

post '/greet' => sub {
    my @colours = body_parameters->get_all('colour');
    return 'Hello, ' . (body_parameters->get('name') // 'stranger')
        . '; colours: ' . join(', ', @colours) . '; method: ' . request->method;
};

get '/greet' => sub {
    return 'Hello, ' . (query_parameters->get('name') // 'stranger');
};

post '/upload' => sub {
    my $file = upload('file');
    content_type 'text/plain';
    return sprintf "file: %s\nbytes: %d\nnote: %s\n%s", $file ? ($file->filename, $file->size)
        : ('none', 0), body_parameters->get('note') // '', $file ? $file->content : '';
};

get '/redirect' => sub {
    redirect '/greet?name=redirected';
};

get '/count' => sub {
    my $n = (session('count') // 0) + 1;
    session count => $n;
    content_type 'text/plain';
    return "count: $n\n";
};

get '/die' => sub {
    die "compat: the application died\n";
};

Plack::Handler::CGI->new->run(__PACKAGE__->to_app);
