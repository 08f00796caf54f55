# A Mojolicious::Lite application, as its documentation writes one, for
# tests/integration/psgi_apps.t. X-Interp names the interpreter that
# answered (the test ignores it in the comparison and counts it).
use Mojolicious::Lite -signatures;
use Mojo::Util qw(md5_sum);
use Time::HiRes ();

my $interp = sprintf '%d-%.6f', $$, Time::HiRes::time();
app->mode('production');
app->log->level('fatal');
app->secrets(['plxd psgi_apps test']);
hook after_dispatch => sub ($c) { $c->res->headers->header('X-Interp' => $interp) };

get '/hello' => sub ($c) { $c->render(text => 'hello ' . ($c->param('name') // 'world')) };
post '/form' => sub ($c) {
    my $p = $c->req->body_params;
    $c->render(text => join ',', map { "$_=" . join('|', @{ $p->every_param($_) }) } sort @{ $p->names });
};
post '/upload' => sub ($c) {
    my $u = $c->req->upload('file');
    $c->render(text => join ' ', $u->filename, $u->size, md5_sum($u->slurp), $c->param('note'));
};
get '/cookie/set' => sub ($c) { $c->cookie(flavour => 'oat', { path => '/' }); $c->render(text => 'set') };
get '/cookie/get' => sub ($c) { $c->render(text => 'flavour=' . ($c->cookie('flavour') // '')) };
get '/session/set' => sub ($c) { $c->session(v => $c->param('v')); $c->render(text => 'stored') };
get '/session/get' => sub ($c) { $c->render(text => 'v=' . ($c->session('v') // '')) };
get '/redirect' => sub ($c) { $c->redirect_to('/hello') };
get '/stream' => sub ($c) {
    $c->res->headers->content_type('text/plain');
    $c->write_chunk("chunk $_\n") for 1 .. 3;
    $c->finish;
};
get '/stream-write' => sub ($c) {
    $c->res->headers->content_type('text/plain');
    $c->write("part $_\n") for 1 .. 3;
    $c->write('');
};
get '/die' => sub ($c) { die "boom\n" };

app->start;
