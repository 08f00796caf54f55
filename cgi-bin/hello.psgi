# hello.plx's page as a PSGI application: the file's last value is the
# application, made once per interpreter and called for each request with
# an array body. bench/run measures it under plxd in both isolation modes,
# and the same file under uWSGI's psgi plugin, Feersum and Starman.
my $body = "<html><body>\nHello world!\n</body></html>\n";
my @headers = ('Content-Type' => 'text/html', 'Content-Length' => length $body);
sub { [200, \@headers, [$body]] };
