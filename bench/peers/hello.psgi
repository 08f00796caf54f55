# A native PSGI hello for `bench/run --peers`: what hello.plx prints, as a
# PSGI app under uWSGI's psgi plugin (no CGI emulation).
my $body = "<html><body>\nHello world!\n</body></html>\n";
my @headers = ('Content-Type' => 'text/html', 'Content-Length' => length $body);
sub { [200, \@headers, [$body]] };
