use strict; use PLXD::Request; my $q = PLXD::Request->new; $q->send_header('text/plain'); print join "\n", map {"$_ => ".$q->param($_) } $q->param;
