#!/usr/bin/perl
# psgi.plx without Plack::Handler::CGI: the same application and
# middleware, as the file's last value. plxd runs the file once per
# interpreter and calls what builder returns for each request.
use strict;
use warnings;
use Plack::Builder;
use Plack::Request;

our $built;    # how many times this interpreter ran the file
$built++;
my $served = 0;

my $hello = sub {
    my $req = Plack::Request->new(shift);
    $served++;
    my $name = $req->parameters->{name} // 'world';
    $name =~ s/[^\w .-]//g;
    return [200, ['Content-Type' => 'text/plain; charset=utf-8'],
        ["Hello, $name!\nThis interpreter built the application $built time(s) "
            . "and has served $served request(s) (pid $$).\n"]];
};

builder {
    enable 'ContentLength';
    enable 'Head';
    $hello;
};
