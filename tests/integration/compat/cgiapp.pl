#!/usr/bin/perl
# CGI::Application's instance script, as its documentation writes it: the
# application is a module, and the script makes one and runs it. FindBin's
# $Bin is computed once per worker (doc/perl.md: "Porting to .plx"); every compat
# application is in the same folder, so it is right for all of them.
use strict;
use warnings;
use FindBin qw($Bin);
use lib "$Bin/lib";
use CompatApp;

my $app = CompatApp->new(PARAMS => { session_dir => '@SESSION_DIR@' });
$app->run;
