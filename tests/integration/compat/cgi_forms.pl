#!/usr/bin/perl
# CGI.pm, function-oriented, as its documentation writes it: a sticky form,
# an upload, a redirect, a cookie, the script's own 404 and a die, chosen by
# PATH_INFO.
use strict;
use warnings;
use CGI qw(:standard);

my $page = path_info() || '/';

if ($page eq '/') {
    print header(-charset => 'utf-8'),
        start_html('Compat: CGI.pm'),
        h1('Your name'),
        start_form(-method => 'POST', -action => url(-relative => 1) . '/greet'),
        textfield(-name => 'name', -default => 'nobody'),
        checkbox_group(-name => 'colour', -values => [qw(red green blue)]),
        submit(-name => 'go', -value => 'Go'),
        end_form,
        start_multipart_form(-action => url(-relative => 1) . '/upload'),
        filefield(-name => 'file'),
        submit,
        end_form,
        end_html;
} elsif ($page eq '/greet') {
    my @colours = multi_param('colour');
    print header(-charset => 'utf-8'),
        start_html('Hello'),
        h1('Hello, ' . escapeHTML(scalar(param('name')) // 'stranger')),
        p('Colours: ' . escapeHTML(join ', ', @colours)),
        p('Method: ' . request_method()),
        # the same form again: its fields keep what was posted (sticky)
        start_form(-method => 'POST'), textfield('name'), end_form,
        end_html;
} elsif ($page eq '/upload') {
    my $fh = upload('file');
    my $info = uploadInfo(scalar param('file'));
    my ($lines, $bytes, $data) = (0, 0, '');
    if ($fh) {
        while (my $line = <$fh>) { $lines++; $bytes += length $line; $data .= $line }
    }
    print header('text/plain'),
        'file: ', (scalar(param('file')) // 'none'), "\n",
        'type: ', ($info ? $info->{'Content-Type'} : 'none'), "\n",
        "lines: $lines\nbytes: $bytes\n",
        'note: ', (scalar(param('note')) // ''), "\n",
        $data;
} elsif ($page eq '/redirect') {
    print redirect(-uri => url(-relative => 1) . '/greet?name=redirected', -status => '302 Found');
} elsif ($page eq '/cookie') {
    my $n = (cookie('visits') // 0) + 1;
    my $c = cookie(-name => 'visits', -value => $n, -path => '/');
    print header(-type => 'text/plain', -cookie => $c), "visits: $n\n";
} elsif ($page eq '/die') {
    die "compat: the application died\n";
} else {
    print header(-status => '404 Not Found', -type => 'text/html'),
        start_html('Not found'), h1('No page ' . escapeHTML($page)), end_html;
}
