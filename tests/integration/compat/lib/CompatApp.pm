package CompatApp;
# A CGI::Application with HTML::Template pages and a CGI::Session kept in
# files: a form, a POST, an upload, a redirect, a session counter, its own
# 404 (the AUTOLOAD run mode) and a die (error_mode).
use strict;
use warnings;
use parent 'CGI::Application';
use CGI::Session;

sub setup {
    my $self = shift;
    $self->start_mode('form');
    $self->mode_param('rm');
    $self->error_mode('oops');
    $self->run_modes(
        form     => 'form',
        greet    => 'greet',
        upload   => 'upload',
        redirect => 'go_elsewhere',
        count    => 'count',
        die      => 'explode',
        AUTOLOAD => 'not_found',
    );
    $self->tmpl_path($self->param('tmpl_path') // 'templates');
}

sub cgiapp_prerun {
    my $self = shift;
    my $session = CGI::Session->new('driver:File', $self->query,
        { Directory => $self->param('session_dir') }) or die CGI::Session->errstr;
    $self->param(session => $session);
    $self->header_props(-cookie => $self->query->cookie(
        -name => $session->name, -value => $session->id, -path => '/'));
}

sub teardown {
    my $self = shift;
    my $session = $self->param('session');
    $session->flush if $session;
}

sub form {
    my $self = shift;
    my $t = $self->load_tmpl('form.tmpl');
    $t->param(title => 'Compat: CGI::Application', script => $self->query->url(-relative => 1));
    return $t->output;
}

sub greet {
    my $self = shift;
    my $q = $self->query;
    my $t = $self->load_tmpl('greet.tmpl');
    $t->param(
        name    => scalar($q->param('name')) // 'stranger',
        method  => $q->request_method,
        colours => [map { { colour => $_ } } $q->multi_param('colour')],
    );
    return $t->output;
}

sub upload {
    my $self = shift;
    my $q = $self->query;
    my $fh = $q->upload('file');
    my $data = $fh ? do { local $/; <$fh> } : '';
    $self->header_add(-type => 'text/plain');
    return sprintf "file: %s\nbytes: %d\nnote: %s\n%s", scalar($q->param('file')) // 'none',
        length $data, scalar($q->param('note')) // '', $data;
}

sub go_elsewhere {
    my $self = shift;
    $self->header_type('redirect');
    $self->header_add(-uri => $self->query->url(-relative => 1) . '?rm=greet&name=redirected');
    return '';
}

sub count {
    my $self = shift;
    my $session = $self->param('session');
    my $n = ($session->param('count') // 0) + 1;
    $session->param(count => $n);
    my $t = $self->load_tmpl('count.tmpl');
    $t->param(count => $n, first => $n == 1);
    return $t->output;
}

sub explode { die "compat: the application died\n" }

sub not_found {
    my ($self, $rm) = @_;
    $self->header_add(-status => '404 Not Found');
    my $t = $self->load_tmpl('not_found.tmpl');
    $t->param(rm => $rm);
    return $t->output;
}

sub oops {
    my ($self, $error) = @_;
    $self->header_add(-status => '500 Internal Server Error', -type => 'text/plain');
    return "CompatApp error: $error";
}

1;
