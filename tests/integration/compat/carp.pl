#!/usr/bin/perl
# CGI::Carp's fatalsToBrowser, as its documentation shows it, in a CGI.pm
# application chosen by PATH_INFO: a form, an upload, a redirect, a cookie,
# its own 404; a die, an error perl raises itself (both answered with
# fatalsToBrowser's page), a warning (in CGI::Carp's format in the log) and
# a croak (CGI::Carp's, through the same page).
use strict;
use warnings;
use CGI;
use CGI::Carp qw(fatalsToBrowser);

my $q = CGI->new;
my $page = $q->path_info || '/';
my $self = $q->url(-relative => 1);

if ($page eq '/') {
    print $q->header(-charset => 'utf-8'), $q->start_html('Compat: CGI::Carp'),
        $q->start_form(-method => 'POST', -action => "$self/greet"),
        $q->textfield('name'), $q->checkbox_group(-name => 'colour', -values => [qw(red blue)]),
        $q->end_form, $q->end_html;
} elsif ($page eq '/greet') {
    print $q->header('text/plain'), 'Hello, ', $q->param('name') // 'stranger',
        ' (', join(', ', $q->multi_param('colour')), '; ', $q->request_method, ")\n";
} elsif ($page eq '/upload') {
    my $fh = $q->upload('file');
    my $data = $fh ? do { local $/; <$fh> } : '';
    print $q->header('text/plain'), 'file: ', $q->param('file') // 'none',
        "\nbytes: ", length($data), "\nnote: ", $q->param('note') // '', "\n", $data;
} elsif ($page eq '/redirect') {
    print $q->redirect(-uri => "$self/greet?name=redirected", -status => '302 Found');
} elsif ($page eq '/cookie') {
    my $n = ($q->cookie('carp_visits') // 0) + 1;
    print $q->header(-type => 'text/plain',
        -cookie => $q->cookie(-name => 'carp_visits', -value => $n, -path => '/')), "visits: $n\n";
} elsif ($page eq '/die') {
    die "compat: the application died\n";
} elsif ($page eq '/undef') {
    my $object;
    $object->method;    # perl's own error: caught only through $SIG{__DIE__}
} elsif ($page eq '/croak') {
    # Not alone in its block: perl names the line of a croak alone in an
    # elsif block differently in a program and in a sub (doc/perl.md).
    my $what = 'a croak';
    croak "compat: $what";
} elsif ($page eq '/warn') {
    warn "compat: a warning\n";
    print $q->header('text/plain'), "warned\n";
} else {
    print $q->header(-status => '404 Not Found', -type => 'text/plain'), "no page $page\n";
}
