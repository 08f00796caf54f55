#!/usr/bin/perl
# A plain PSGI application run as CGI through Plack::Handler::CGI, with
# Plack::Request and Plack::Response, and Plack::Builder's middleware.
use strict;
use warnings;
use Plack::Builder;
use Plack::Request;
use Plack::Response;
use Plack::Handler::CGI;

my $app = sub {
    my $req = Plack::Request->new(shift);
    my $res = Plack::Response->new(200);
    $res->content_type('text/plain; charset=utf-8');
    my $path = $req->path_info || '/';
    if ($path eq '/') {
        $res->content_type('text/html; charset=utf-8');
        $res->body('<form method="post" action="' . $req->script_name
            . '/greet"><input name="name"></form>');
    } elsif ($path eq '/greet') {
        $res->body('Hello, ' . ($req->parameters->{name} // 'stranger') . '; colours: '
            . join(', ', $req->parameters->get_all('colour')) . '; method: ' . $req->method . "\n");
    } elsif ($path eq '/upload') {
        my $up = $req->uploads->{file};
        my $data = '';
        if ($up) { open my $fh, '<', $up->path or die $!; local $/; $data = <$fh> }
        $res->body(sprintf "file: %s\nbytes: %d\nnote: %s\n%s", $up ? ($up->filename, $up->size)
            : ('none', 0), $req->body_parameters->{note} // '', $data);
    } elsif ($path eq '/redirect') {
        $res->redirect($req->script_name . '/greet?name=redirected');
    } elsif ($path eq '/cookie') {
        my $n = ($req->cookies->{psgi_visits} // 0) + 1;
        $res->cookies->{psgi_visits} = { value => $n, path => '/' };
        $res->body("visits: $n\n");
    } elsif ($path eq '/die') {
        die "compat: the application died\n";
    } else {
        $res->status(404);
        $res->body("no page $path\n");
    }
    return $res->finalize;
};

$app = builder {
    enable 'ContentLength';
    enable 'HTTPExceptions';
    $app;
};

Plack::Handler::CGI->new->run($app);
