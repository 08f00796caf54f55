#!/usr/bin/perl
# A CGI.pm form: shows a form (GET), and what was submitted (GET with a
# query string, or POST), escaped.
use strict;
use warnings;
use CGI qw(-utf8);

my $q = CGI->new;
my $name = $q->param('name') // '';
my $colour = $q->param('colour') // '';

print $q->header(-type => 'text/html', -charset => 'utf-8');
print $q->start_html('plxd form');
print $q->h1('A form');
print $q->start_form(-method => 'POST', -action => $q->url(-absolute => 1));
print $q->p('Name: ', $q->textfield(-name => 'name'));
print $q->p('Colour: ', $q->popup_menu(-name => 'colour', -values => [qw(red green blue)]));
print $q->p($q->submit(-value => 'Send'));
print $q->end_form;
if (length $name || length $colour) {
    print $q->h2('You sent');
    print $q->p('Method: ', $q->escapeHTML($q->request_method));
    print $q->p('Name: ', $q->escapeHTML($name));
    print $q->p('Colour: ', $q->escapeHTML($colour));
}
print $q->end_html;
