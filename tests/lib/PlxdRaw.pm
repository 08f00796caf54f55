package PlxdRaw;
# Reading raw HTTP/1.1 responses, for tests that talk to plxd over a socket
# where a client library would hide the case (pipelining, HEAD, smuggling).
#
#   my @r = responses($s->raw($bytes), head => [0]);   # response 0 answers a HEAD
#   is($r[0]{status}, 206); is($r[0]{headers}{'content-range'}, 'bytes 0-4/12');
#   is(scalar @r, 1, 'one response only');
#
# Each response: { status, reason, version, headers => { lower-case name =>
# value, repeated names joined with ", " }, count => { name => n }, body }.
# Bodies are delimited by Content-Length or chunked (decoded); a response
# with neither (and not bodiless) takes the rest of the bytes.

use strict;
use warnings;
use Exporter 'import';

our @EXPORT_OK = qw(responses request_bytes);

sub responses {
    my ($bytes, %o) = @_;
    my %head = map { $_ => 1 } @{ $o{head} || [] };
    my @out;
    while (length $bytes) {
        my $end = index $bytes, "\r\n\r\n";
        last if $end < 0;
        my ($line, @fields) = split /\r\n/, substr($bytes, 0, $end);
        substr($bytes, 0, $end + 4, '');
        my ($version, $status, $reason) = $line =~ m{^(HTTP/\d\.\d) (\d{3}) ?(.*)$} or last;
        my (%h, %count);
        for (@fields) {
            my ($n, $v) = /^([^:]+):[ \t]*(.*?)[ \t]*$/ or next;
            $n = lc $n;
            $h{$n} = exists $h{$n} ? "$h{$n}, $v" : $v;
            $count{$n}++;
        }
        my $body = '';
        my $bodiless = $head{ scalar @out } || $status =~ /^(1\d\d|204|304)$/;
        if (!$bodiless && lc($h{'transfer-encoding'} // '') eq 'chunked') {
            $body = _dechunk(\$bytes);
        } elsif (!$bodiless) {
            my $len = $h{'content-length'} // length $bytes;
            $body = substr($bytes, 0, $len, '');
        }
        push @out, { version => $version, status => $status, reason => $reason,
            headers => \%h, count => \%count, body => $body };
    }
    return @out;
}

# Takes a chunked body (and its trailer) off the front of $$bytes and
# returns it decoded; a body cut short gives what arrived.
sub _dechunk {
    my ($bytes) = @_;
    my $body = '';
    while ($$bytes =~ s/^([0-9a-fA-F]+)[^\r\n]*\r\n//) {
        my $size = hex $1;
        if ($size == 0) {
            $$bytes =~ s/^(?:[^\r\n]+\r\n)*\r\n//;   # trailer fields, then the end
            last;
        }
        $body .= substr($$bytes, 0, $size, '');
        $$bytes =~ s/^\r\n//;
    }
    return $body;
}

# "METHOD target HTTP/1.1" with Host and the given header lines.
sub request_bytes {
    my ($method, $target, @lines) = @_;
    return join '', "$method $target HTTP/1.1\r\n", "Host: plxd.test\r\n",
        map({ "$_\r\n" } @lines), "\r\n";
}

1;
