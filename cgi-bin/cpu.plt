#!/usr/bin/perl
# About 2 ms of pure CPU work per request (on a 2020s x86 core): shows how
# throughput scales with [perl] workers on several cores.
use strict;
use warnings;

my $sum = 0;
$sum += sqrt($_) for 1 .. 25_000;
print "Content-Type: text/plain; charset=utf-8\n\n";
printf "%.3f\n", $sum;
