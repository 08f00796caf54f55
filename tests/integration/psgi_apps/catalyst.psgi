# A Catalyst application in one file for tests/integration/psgi_apps.t: its
# root controller, then the application class, its PSGI application wrapped
# in Plack's cookie session (Catalyst::Plugin::Session is not in the test's
# packages; the session is the PSGI environment's psgix.session). X-Interp
# names the interpreter that answered (the test ignores it in the
# comparison and counts it).
package PsgiAppsCatalyst::Controller::Root;
use Moose;
use namespace::autoclean;
use Digest::MD5 qw(md5_hex);
BEGIN { extends 'Catalyst::Controller' }
__PACKAGE__->config(namespace => '');

sub text { my ($c, $body) = @_; $c->res->content_type('text/plain'); $c->res->body($body) }

sub hello :Local { my ($self, $c) = @_; text($c, 'hello ' . ($c->req->query_params->{name} // 'world')) }

sub form :Local {
    my ($self, $c) = @_;
    my $p = $c->req->body_params;
    text($c, join ',', map { my $v = $p->{$_}; "$_=" . join('|', ref $v ? @$v : $v) } sort keys %$p);
}

sub upload :Local {
    my ($self, $c) = @_;
    my $u = $c->req->upload('file');
    text($c, join ' ', $u->filename, $u->size, md5_hex($u->slurp), $c->req->body_params->{note});
}

sub cookie_set :Path('cookie/set') {
    my ($self, $c) = @_;
    $c->res->cookies->{flavour} = { value => 'oat', path => '/' };
    text($c, 'set');
}

sub cookie_get :Path('cookie/get') {
    my ($self, $c) = @_;
    my $k = $c->req->cookie('flavour');
    text($c, 'flavour=' . ($k ? $k->value : ''));
}

sub session_set :Path('session/set') {
    my ($self, $c) = @_;
    $c->req->env->{'psgix.session'}{v} = $c->req->query_params->{v};
    text($c, 'stored');
}

sub session_get :Path('session/get') {
    my ($self, $c) = @_;
    text($c, 'v=' . ($c->req->env->{'psgix.session'}{v} // ''));
}

sub redirect :Local { my ($self, $c) = @_; $c->res->redirect($c->uri_for('/hello')) }

sub stream :Local {
    my ($self, $c) = @_;
    $c->res->content_type('text/plain');
    $c->res->write("chunk $_\n") for 1 .. 3;
}

sub boom :Path('die') { die "boom\n" }

sub default :Path { my ($self, $c) = @_; $c->res->status(404); text($c, 'not found') }

package PsgiAppsCatalyst;
use Catalyst;
use Catalyst::Log;
use Plack::Builder;
use Time::HiRes ();

my $interp = sprintf '%d-%.6f', $$, Time::HiRes::time();
__PACKAGE__->config(name => 'PsgiAppsCatalyst', disable_component_resolution_regex_fallback => 1);
__PACKAGE__->log(Catalyst::Log->new('fatal'));
__PACKAGE__->setup;

builder {
    enable sub { my $app = shift; sub { Plack::Util::response_cb($app->(@_), sub { push @{ $_[0][1] }, 'X-Interp' => $interp }) } };
    enable 'Session::Cookie', secret => 'plxd psgi_apps test';
    __PACKAGE__->psgi_app;
};
