# A Web::Simple application for tests/integration/psgi_apps.t, its
# sessions Plack's cookie session (psgix.session). X-Interp names the
# interpreter that answered (the test ignores it in the comparison and
# counts it). Its named sub `text` uses a file-level `my` under the
# strictures Web::Simple turns on (fatal warnings): plxd compiles the file
# at file scope, as plackup does, so it shares the variable.
package PsgiAppsWebSimple;
use Web::Simple;
use Digest::MD5 qw(md5_hex);
use Plack::Builder;
use Plack::Request;
use Time::HiRes ();

my $interp = sprintf '%d-%.6f', $$, Time::HiRes::time();
sub text { [200, ['Content-Type' => 'text/plain', 'X-Interp' => $interp, @_[1 .. $#_]], [$_[0]]] }

sub dispatch_request {
    'GET + /hello + ?name~' => sub { text('hello ' . ($_[1] // 'world')) },
    'POST + /form + %@*' => sub {
        my $p = $_[1];
        text(join ',', map { "$_=" . join('|', @{ $p->{$_} }) } sort keys %$p);
    },
    'POST + /upload + *file= + %note=' => sub {
        my ($self, $u, $note) = @_;
        open my $fh, '<:raw', $u->path or die "$u: $!";
        my $data = do { local $/; <$fh> };
        text(join ' ', $u->filename, $u->size, md5_hex($data), $note);
    },
    'GET + /cookie/set' => sub { text('set', 'Set-Cookie' => 'flavour=oat; path=/') },
    'GET + /cookie/get' => sub {
        my $k = Plack::Request->new($_[PSGI_ENV])->cookies->{flavour};
        text('flavour=' . ($k // ''));
    },
    'GET + /session/set + ?v=' => sub { $_[PSGI_ENV]{'psgix.session'}{v} = $_[1]; text('stored') },
    'GET + /session/get' => sub { text('v=' . ($_[PSGI_ENV]{'psgix.session'}{v} // '')) },
    'GET + /redirect' => sub { [302, ['Location' => '/hello', 'X-Interp' => $interp], []] },
    'GET + /stream' => sub {
        [sub {
            my $w = $_[0]->([200, ['Content-Type' => 'text/plain', 'X-Interp' => $interp]]);
            $w->write("chunk $_\n") for 1 .. 3;
            $w->close;
        }];
    },
    'GET + /die' => sub { die "boom\n" },
}

builder {
    enable 'Session::Cookie', secret => 'plxd psgi_apps test';
    PsgiAppsWebSimple->to_psgi_app;
};
