#!/usr/bin/perl
# CGI::Carp's fatalsToBrowser, as its documentation shows it: a die, an
# error perl raises itself, and a page that works.
use strict;
use warnings;
use CGI;
use CGI::Carp qw(fatalsToBrowser);

my $q = CGI->new;
my $what = $q->param('what') // 'ok';
if ($what eq 'die') {
    die "compat: the application died\n";
} elsif ($what eq 'undef') {
    my $object;
    $object->method;    # perl's own error: caught only through $SIG{__DIE__}
} elsif ($what eq 'warn') {
    warn "compat: a warning\n";
    print $q->header('text/plain'), "warned\n";
} else {
    print $q->header('text/plain'), "ok\n";
}
