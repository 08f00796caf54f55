#!/usr/bin/perl
# Persistence in an interpreter thread: $count lives as long as the thread's
# interpreter inside plxd, so it grows by one per request that interpreter
# serves. Every interpreter counts on its own, and all of them share plxd's
# pid, so the address of $count (each interpreter's own) tells them apart.
use strict;
use warnings;

our $count;
$count++;
print "Content-Type: text/plain; charset=utf-8\n\n";
printf "count %d pid %d interpreter %x\n", $count, $$, 0 + \$count;
