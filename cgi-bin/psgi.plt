#!/usr/bin/perl
# A plain PSGI application with Plack::Builder's middleware, run as CGI
# through Plack::Handler::CGI and built once per process: the application
# and its middleware stack are made inside "our $app ||= ...", so a
# persistent .plx worker wraps them on its first request only; as a .pl
# (CGI) script it runs once anyway.
use strict;
use warnings;
use Plack::Builder;
use Plack::Request;
use Plack::Handler::CGI;

our ($built, $served);
our $app ||= do {
    $built++;
    my $hello = sub {
        my $req = Plack::Request->new(shift);
        $served++;
        my $name = $req->parameters->{name} // 'world';
        $name =~ s/[^\w .-]//g;
        return [200, ['Content-Type' => 'text/plain; charset=utf-8'],
            ["Hello, $name!\nThis process built the application $built time(s) "
                . "and has served $served request(s) (pid $$).\n"]];
    };
    builder {
        enable 'ContentLength';
        enable 'Head';
        $hello;
    };
};
Plack::Handler::CGI->new->run($app);
