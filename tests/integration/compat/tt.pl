#!/usr/bin/perl
# Template Toolkit in a CGI script, as its manual shows it: one Template
# object, process() to STDOUT, its error if the template fails.
use strict;
use warnings;
use CGI;
use Template;

my $q = CGI->new;
my $tt = Template->new({
    INCLUDE_PATH => 'templates',
}) || die "$Template::ERROR\n";

my $page = $q->path_info || '/';
my %vars = (title => 'Compat: Template Toolkit', script => $q->url(-relative => 1));
my ($template, %header) = ('home.tt');

if ($page eq '/') {
    $vars{items} = [map { { n => $_, square => $_ * $_ } } 1 .. 5];
} elsif ($page eq '/greet') {
    $template = 'greet.tt';
    $vars{name} = $q->param('name') // 'stranger';
    $vars{colours} = [$q->multi_param('colour')];
    $vars{method} = $q->request_method;
} elsif ($page eq '/upload') {
    my $fh = $q->upload('file');
    my $data = $fh ? do { local $/; <$fh> } : '';
    $template = 'upload.tt';
    @vars{qw(file bytes data)} = ($q->param('file') // 'none', length $data, $data);
    %header = (-type => 'text/plain');
} elsif ($page eq '/redirect') {
    print $q->redirect(-uri => "$vars{script}/greet?name=redirected", -status => '302 Found');
    exit;
} elsif ($page eq '/cookie') {
    my $n = ($q->cookie('tt_visits') // 0) + 1;
    $template = 'visits.tt';
    $vars{visits} = $n;
    %header = (-cookie => $q->cookie(-name => 'tt_visits', -value => $n, -path => '/'));
} elsif ($page eq '/broken') {
    $template = 'broken.tt';    # a template error: the script dies with it
} else {
    $template = 'not_found.tt';
    $vars{page} = $page;
    %header = (-status => '404 Not Found');
}

print $q->header(-charset => 'utf-8', %header);
$tt->process($template, \%vars) || die $tt->error(), "\n";
