use strict; use PLXD::Request; my $q = PLXD::Request->new; $q->content_type('text/plain'); $q->send_header; print join "\n", map {"$_ => ".$q->param($_) } $q->param;
