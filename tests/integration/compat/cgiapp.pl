#!/usr/bin/perl
# CGI::Application's instance script, as its documentation writes it: the
# application is a module, and the script makes one and runs it.
use strict;
use warnings;
use FindBin qw($Bin);
use lib "$Bin/lib";
use CompatApp;

my $app = CompatApp->new(PARAMS => { session_dir => '@SESSION_DIR@' });
$app->run;
