#!/usr/bin/perl
# Template Toolkit, its Template object kept per process: it holds the
# compiled templates, made inside "our $tt ||= do { ... }", so a persistent
# .plx worker compiles them on its first request and reuses them after (it
# still checks the files for changes, once a second); as a .pl (CGI) script
# it runs once anyway. A Template object per request would compile them
# again each time. The templates are in .templates/, which plxd never
# serves ([static] deny).
use strict;
use warnings;
use CGI;
use File::Basename qw(dirname);
use Template;

our ($built, $served);
our $tt ||= do {
    $built++;
    Template->new({ INCLUDE_PATH => dirname(__FILE__) . '/.templates' }) or die Template->error, "\n";
};
$served++;
my $q = CGI->new;
print $q->header(-charset => 'utf-8');
$tt->process('tt.html', { name => scalar($q->param('name')) // 'world', built => $built,
    served => $served, pid => $$ }) or die $tt->error, "\n";
