package PlxdRaw;
# Reading raw HTTP/1.1 responses, for tests that talk to plxd over a socket
# where a client library would hide the case (pipelining, HEAD, smuggling).
#
#   my @r = responses($s->raw($bytes), head => [0]);   # response 0 answers a HEAD
#   is($r[0]{status}, 206); is($r[0]{headers}{'content-range'}, 'bytes 0-4/12');
#   is(scalar @r, 1, 'one response only');
#
# Each response: { status, reason, version, headers => { lower-case name =>
# value, repeated names joined with ", " }, count => { name => n }, body,
# complete }. Framing follows RFC 9112 6.3: a response to HEAD, any 1xx,
# 204 and 304 ends at its headers; otherwise chunked (decoded), or
# Content-Length, or (neither) the rest of the bytes.
#
# Every byte must belong to a response: stray bytes after a response, an
# unfinished header block, a malformed chunk or a body shorter than its
# Content-Length each add a failing test, so that a response that would
# desynchronise a keep-alive connection never goes unnoticed. A test that
# expects a response cut short says partial => 1 (the last response may be
# incomplete; its complete field tells).

use strict;
use warnings;
use Exporter 'import';
use IO::Select;
use Test::More ();
use Time::HiRes ();

our @EXPORT_OK = qw(responses read_responses request_bytes);

sub responses {
    my ($bytes, %o) = @_;
    my ($out, $left, $problem) = _parse($bytes, %o);
    _check_framing($out, $left, $problem, %o);
    return @$out;
}

# Reads from a connected socket until n responses (interim 1xx ones not
# counted, unless interim => 1) are complete, or timeout seconds pass (30 by
# default: it ends as soon as they are, and a loaded machine is slow);
# checks their framing as responses does, and that nothing follows them.
# Returns them.
sub read_responses {
    my ($sock, $n, %o) = @_;
    my $until = Time::HiRes::time() + ($o{timeout} // 30);
    my $sel = IO::Select->new($sock);
    my $bytes = '';
    my ($out, $left, $problem) = ([], '', undef);
    while (1) {
        ($out, $left, $problem) = _parse($bytes, %o);
        my $answers = grep { $o{interim} || $_->{status} !~ /^1/ } @$out;
        last if $answers >= $n && !$problem;
        my $wait = $until - Time::HiRes::time();
        last if $wait <= 0 || !$sel->can_read($wait);
        my $got = sysread $sock, my $buf, 65536;
        last unless $got;
        $bytes .= $buf;
    }
    # What arrives right after would be stray bytes of the last response.
    if ($sel->can_read(0.05) && sysread($sock, my $more, 65536)) {
        ($out, $left, $problem) = _parse($bytes . $more, %o);
    }
    my $answers = grep { $o{interim} || $_->{status} !~ /^1/ } @$out;
    Test::More::fail("$n response(s) within the timeout (got $answers)") if $answers < $n;
    _check_framing($out, $left, $problem, %o);
    return @$out;
}

sub _check_framing {
    my ($out, $left, $problem, %o) = @_;
    return unless $problem;
    # With partial, only the last response may be incomplete.
    return if $o{partial} && $problem =~ /^(a body cut short|an unfinished header block)/;
    my $shown = substr($left, 0, 200);
    $shown =~ s/([^\x20-\x7e])/sprintf '\\x%02x', ord $1/ge;
    Test::More::fail("response framing: $problem after " . scalar(@$out) . ' response(s)');
    Test::More::diag("left over: '$shown'");
}

# Parses every response in $bytes. Returns (responses, bytes left, what
# was wrong or undef).
sub _parse {
    my ($bytes, %o) = @_;
    my %head = map { $_ => 1 } @{ $o{head} || [] };
    my @out;
    my $problem;
    while (length $bytes) {
        my $end = index $bytes, "\r\n\r\n";
        if ($end < 0) {
            $problem = 'an unfinished header block';
            last;
        }
        my ($line, @fields) = split /\r\n/, substr($bytes, 0, $end);
        my ($version, $status, $reason) = $line =~ m{^(HTTP/\d\.\d) (\d{3}) ?(.*)$};
        if (!defined $status) {
            $problem = 'bytes that do not start a response';
            last;
        }
        my $rest = substr($bytes, $end + 4);
        my (%h, %count);
        for (@fields) {
            my ($n, $v) = /^([^:]+):[ \t]*(.*?)[ \t]*$/ or next;
            $n = lc $n;
            $h{$n} = exists $h{$n} ? "$h{$n}, $v" : $v;
            $count{$n}++;
        }
        my ($body, $complete) = ('', 1);
        # Interim (1xx) responses do not count as answers to a request.
        my $answers = grep { $_->{status} !~ /^1/ } @out;
        my $bodiless = $status =~ /^(1\d\d|204|304)$/ || $head{$answers};
        if (!$bodiless && lc($h{'transfer-encoding'} // '') eq 'chunked') {
            ($body, $complete) = _dechunk(\$rest);
        } elsif (!$bodiless) {
            my $len = $h{'content-length'} // length $rest;
            $body = substr($rest, 0, $len, '');
            $complete = length($body) == $len;
        }
        if (!$complete) {
            $problem = "a body cut short (status $status)";
            push @out, { version => $version, status => $status, reason => $reason,
                headers => \%h, count => \%count, body => $body, complete => 0 };
            $bytes = '';
            last;
        }
        $bytes = $rest;
        push @out, { version => $version, status => $status, reason => $reason,
            headers => \%h, count => \%count, body => $body, complete => 1 };
    }
    return (\@out, $bytes, $problem);
}

# Takes a chunked body (and its trailer) off the front of $$bytes. Returns
# the body decoded and whether it ended properly (a last chunk, a trailer
# and the blank line).
sub _dechunk {
    my ($bytes) = @_;
    my $body = '';
    while ($$bytes =~ s/^([0-9a-fA-F]+)(?:;[^\r\n]*)?\r\n//) {
        my $size = hex $1;
        if ($size == 0) {
            # Trailer fields, then the end.
            return ($body, 1) if $$bytes =~ s/^(?:[^\r\n]+\r\n)*\r\n//;
            return ($body, 0);
        }
        return ($body . $$bytes, 0) if length($$bytes) < $size + 2;
        $body .= substr($$bytes, 0, $size, '');
        return ($body, 0) unless $$bytes =~ s/^\r\n//;
    }
    return ($body, 0);
}

# "METHOD target HTTP/1.1" with Host and the given header lines.
sub request_bytes {
    my ($method, $target, @lines) = @_;
    return join '', "$method $target HTTP/1.1\r\n", "Host: plxd.test\r\n",
        map({ "$_\r\n" } @lines), "\r\n";
}

1;
