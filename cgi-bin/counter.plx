#!/usr/bin/perl
# Persistence made visible: $count lives as long as the worker process, so
# it grows by one per request that worker serves. Each worker counts on its
# own, hence its pid beside the count. Run as CGI, it would print 1 always.
use strict;
use warnings;

our $count;
$count++;
print "Content-Type: text/plain; charset=utf-8\n\n";
print "count $count pid $$\n";
