#!/usr/bin/perl
# Prints the CGI environment the script was given, one NAME=value a line.
use strict;
use warnings;

print "Content-Type: text/plain; charset=utf-8\n\n";
print "$_=$ENV{$_}\n" for sort keys %ENV;
