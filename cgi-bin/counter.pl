#!/usr/bin/perl
# counter.plx's twin under CGI: every request is a new process, so $count
# starts from nothing each time and this always prints 1 (with a new pid).
use strict;
use warnings;

our $count;
$count++;
print "Content-Type: text/plain; charset=utf-8\n\n";
print "count $count pid $$\n";
