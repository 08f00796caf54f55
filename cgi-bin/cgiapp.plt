#!/usr/bin/perl
# CGI::Application with HTML::Template, as its instance script writes it: a
# new application object per request (it holds the request's query, so one
# kept across requests would answer with the first one's parameters), and
# the parsed template kept by HTML::Template, load_tmpl(..., cache => 1): a
# persistent .plx worker reads and parses it on its first request and
# reuses it after (HTML::Template still checks the file for changes); as a
# .pl (CGI) script it runs once anyway. The template is in .templates/,
# which plxd never serves ([static] deny).
use strict;
use warnings;

package PlxdSample::CGIApp {
    use parent 'CGI::Application';
    use File::Basename qw(dirname);
    our ($parsed, $served);

    sub setup {
        my $self = shift;
        $self->start_mode('hello');
        $self->run_modes(hello => 'hello');
        $self->tmpl_path(dirname(__FILE__) . '/.templates');
    }

    sub hello {
        my $self = shift;
        $served++;
        # filter runs when HTML::Template reads the file, not on a cache hit.
        my $t = $self->load_tmpl('cgiapp.tmpl', cache => 1, filter => sub { $parsed++ });
        $t->param(name => scalar($self->query->param('name')) // 'world', parsed => $parsed,
            served => $served, pid => $$);
        return $t->output;
    }
}

PlxdSample::CGIApp->new->run;
