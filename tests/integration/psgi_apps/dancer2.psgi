# A Dancer2 application for tests/integration/psgi_apps.t. Its sessions are
# Dancer2's YAML engine, files in a folder beside the application, which
# every worker and interpreter shares. X-Interp names the interpreter that
# answered (the test ignores it in the comparison and counts it).
package PsgiAppsDancer2;
use Dancer2;
use Digest::MD5 qw(md5_hex);
use File::Basename qw(dirname);
use Time::HiRes ();

my $interp = sprintf '%d-%.6f', $$, Time::HiRes::time();
set environment => 'production';
set show_errors => 0;
set logger      => 'null';
set engines     => { session => { YAML => { session_dir => dirname(__FILE__) . '/dancer2-sessions' } } };
set session     => 'YAML';
hook after => sub { response_header 'X-Interp' => $interp };

get '/hello' => sub { content_type 'text/plain'; 'hello ' . (query_parameters->get('name') // 'world') };
post '/form' => sub {
    my $p = body_parameters;
    content_type 'text/plain';
    join ',', map { "$_=" . join('|', $p->get_all($_)) } sort keys %$p;
};
post '/upload' => sub {
    my $u = upload('file');
    content_type 'text/plain';
    join ' ', $u->filename, $u->size, md5_hex($u->content), body_parameters->get('note');
};
get '/cookie/set' => sub { cookie flavour => 'oat', path => '/'; content_type 'text/plain'; 'set' };
get '/cookie/get' => sub { content_type 'text/plain'; 'flavour=' . (cookie('flavour') // '') };
get '/session/set' => sub { session v => query_parameters->get('v'); content_type 'text/plain'; 'stored' };
get '/session/get' => sub { content_type 'text/plain'; 'v=' . (session('v') // '') };
get '/redirect' => sub { redirect '/hello' };
get '/stream' => sub {
    delayed {
        response_header 'Content-Type' => 'text/plain';
        response_header 'X-Interp' => $interp;
        flush;
        content "chunk $_\n" for 1 .. 3;
        done;
    };
};
get '/die' => sub { die "boom\n" };

__PACKAGE__->to_app;
