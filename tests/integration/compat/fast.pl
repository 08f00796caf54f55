#!/usr/bin/perl
# CGI::Fast, as its documentation writes it: an accept loop that serves one
# request per turn (under plain CGI, FCGI accepts exactly once).
use strict;
use warnings;
use CGI::Fast;

my $served = 0;
while (my $q = CGI::Fast->new) {
    $served++;
    my $page = $q->path_info || '/';
    if ($page eq '/') {
        print $q->header, $q->start_html('Compat: CGI::Fast'),
            $q->start_form(-method => 'POST', -action => $q->url(-relative => 1) . '/greet'),
            $q->textfield('name'), $q->end_form, $q->end_html;
    } elsif ($page eq '/greet') {
        print $q->header('text/plain'), 'Hello, ', $q->param('name') // 'stranger',
            ' (', $q->request_method, ")\n";
    } elsif ($page eq '/upload') {
        my $fh = $q->upload('file');
        my $data = $fh ? do { local $/; <$fh> } : '';
        print $q->header('text/plain'), 'file: ', $q->param('file') // 'none',
            "\nbytes: ", length($data), "\n", $data;
    } elsif ($page eq '/redirect') {
        print $q->redirect(-uri => $q->url(-relative => 1) . '/greet?name=redirected',
            -status => '302 Found');
    } elsif ($page eq '/cookie') {
        my $n = ($q->cookie('fast_visits') // 0) + 1;
        print $q->header(-type => 'text/plain',
            -cookie => $q->cookie(-name => 'fast_visits', -value => $n, -path => '/')),
            "visits: $n; served by this loop: $served\n";
    } elsif ($page eq '/die') {
        die "compat: the application died\n";
    } else {
        print $q->header(-status => '404 Not Found', -type => 'text/plain'), "no page $page\n";
    }
}
