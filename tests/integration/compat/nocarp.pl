#!/usr/bin/perl
# A script that does not use CGI::Carp, served by the same worker as one
# that does: its die must end as under CGI, with the server's 500.
use strict;
use warnings;
use CGI;

my $q = CGI->new;
die "compat: the application died\n" if ($q->param('what') // '') eq 'die';
print $q->header('text/plain'), "ok\n";
