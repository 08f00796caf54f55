# A Plack::Builder stack for tests/integration/psgi_apps.t: Deflater,
# Static (static/ beside this file) and Session with its file store, in a
# folder beside this file that every worker and interpreter shares, over a
# plain PSGI application; under /memory/, Session with its default store,
# in the memory of the interpreter that stored it. X-Interp names the interpreter that answered (the
# test ignores it in the comparison and counts it).
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
use File::Basename qw(dirname);
use Plack::Builder;
use Plack::Request;
use Plack::Response;
use Plack::Session::Store::File;
use Time::HiRes ();

my $dir = dirname(__FILE__);
my $interp = sprintf '%d-%.6f', $$, Time::HiRes::time();
mkdir "$dir/plack-sessions";

my %route = (
    'GET /hello' => sub { 'hello ' . ($_[0]->query_parameters->{name} // 'world') },
    'POST /form' => sub {
        my $p = $_[0]->body_parameters;
        join ',', map { "$_=" . join('|', $p->get_all($_)) } sort keys %$p;
    },
    'POST /upload' => sub {
        my $u = $_[0]->uploads->{file};
        open my $fh, '<:raw', $u->path or die "$u: $!";
        my $data = do { local $/; <$fh> };
        join ' ', $u->filename, $u->size, md5_hex($data), $_[0]->body_parameters->{note};
    },
    'GET /cookie/set' => sub { $_[1]->cookies->{flavour} = { value => 'oat', path => '/' }; 'set' },
    'GET /cookie/get' => sub { 'flavour=' . ($_[0]->cookies->{flavour} // '') },
    'GET /session/set' => sub { $_[0]->session->{v} = $_[0]->query_parameters->{v}; 'stored' },
    'GET /session/get' => sub { 'v=' . ($_[0]->session->{v} // '') },
    'GET /memory/set' => sub { $_[0]->session->{v} = $_[0]->query_parameters->{v}; 'stored' },
    'GET /memory/get' => sub { 'v=' . ($_[0]->session->{v} // '') },
    'GET /redirect' => sub { $_[1]->redirect('/hello'); '' },
    'GET /die' => sub { die "boom\n" },
);

my $app = sub {
    my ($env) = @_;
    my $req = Plack::Request->new($env);
    if ($req->path_info eq '/stream') {
        return sub {
            my $w = $_[0]->([200, ['Content-Type' => 'text/plain', 'X-Interp' => $interp]]);
            $w->write("chunk $_\n") for 1 .. 3;
            $w->close;
        };
    }
    my $route = $route{ $req->method . ' ' . $req->path_info }
        or return [404, ['Content-Type' => 'text/plain', 'X-Interp' => $interp], ['not found']];
    my $res = Plack::Response->new(200, ['Content-Type' => 'text/plain', 'X-Interp' => $interp]);
    $res->body($route->($req, $res));
    return $res->finalize;
};

builder {
    enable 'Deflater', content_type => ['text/plain', 'text/html'];
    enable 'Static', path => qr{^/static/}, root => $dir;
    enable_if { $_[0]{PATH_INFO} !~ m{^/memory/} } 'Session',
        store => Plack::Session::Store::File->new(dir => "$dir/plack-sessions");
    enable_if { $_[0]{PATH_INFO} =~ m{^/memory/} } 'Session', session_key => 'memory_session';
    $app;
};
