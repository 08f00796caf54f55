# The Perl side of a .psgi application's request. perl_psgi.c calls the
# app with the environment it built, and writes an array response of plain
# byte strings itself; every other response is answer's here. Either way
# the response goes to the response channel (STDOUT's own IO, through the
# glob OUT) as a CGI response ("Status:", the headers, a blank line, the
# body), so that the gateway frames and streams it as it does a script's
# (chunked without a length, nothing for HEAD, 204, 304). While the app's
# code runs STDOUT is STDERR, so that what the app prints itself goes to
# the error log under its name, as a PSGI server sends it to its console,
# and never into its response. Compiled into the runtime with
# PLXD/Worker.pm; it needs no module of Plack's.
package PLXD::PSGI;

use strict;
# psgi.input's in-memory handles: loaded with plxd's set-up, not counted
# as a script's C code (perl_interp.c).
use PerlIO::scalar ();

# A header name is an HTTP token; a value holds no CR, LF or NUL (other
# controls but tab neither): anything else would let the app write a
# header or a response of its own (response splitting).
my $TOKEN = qr/\A[!#\$%&'*+.^_`|~0-9A-Za-z-]+\z/;
my $BAD_VALUE = qr/[\x00-\x08\x0a-\x1f\x7f]/;

# The response channel: STDOUT's IO as the runtime made it, which it puts
# back in STDOUT after each request whatever a script did there
# (PLXD::Worker::restore_std), so set once per interpreter.
*OUT = $PLXD::Worker::STD_IO[1];

# Requests served, counted by perl_psgi.c before it calls the app: a
# responder kept past its request (in a global) dies when called, as a
# writer used after close does, rather than write into the request being
# served then.
our $served = 0;

# An application's file, compiled and run as `do FILE` runs one: at file
# scope, with no lexical variable and no pragma of this file's in sight
# (perl_registry.c). Returns its last value, or dies with the failure (a
# package variable holds the value: a lexical would be in sight).
our $loaded;
sub eval_file {
    no strict;
    no warnings;
    local $loaded = eval $_[0];
    die $@ if $@;
    $loaded;
}

# Writes $res, what the app of request number $this returned, when
# perl_psgi.c did not: an array response it left, or a delayed response.
# Dies (the caller logs it naming the app, and answers 500 when no header
# went out) when the app dies or answers what PSGI does not allow. Returns
# nothing. STDOUT is STDERR meanwhile (perl_psgi.c).
sub answer {
    my ($res, $this) = @_;
    if (ref $res eq 'ARRAY') {
        _respond($res);
        return;
    }
    die "the application returned " . (defined $res ? "'$res'" : 'undef')
        . ": not an array or a code reference\n"
        unless ref $res && ref $res ne 'HASH' && ref $res ne 'SCALAR';
    my $answered;
    my $writer;
    $res->(sub {
        my ($r) = @_;
        die "the responder of an earlier request was called\n" if $this != $served;
        die "the responder was called twice\n" if $answered++;
        die "the responder was given " . (defined $r ? $r : 'undef') . ", not an array\n"
            unless ref $r eq 'ARRAY';
        if (@$r > 2) {
            _respond($r);
            return;
        }
        my $chunked = _head($r);
        return $writer = PLXD::PSGI::Writer->_new($chunked);
    });
    die "the application's delayed response never called its responder\n" unless $answered;
    # What the writer has not sent yet goes now: the response ends as the
    # app returns (a blocking server). Writes after this die.
    $writer->_end if $writer;
    return;
}

# A response with its body: what can be checked is checked before the head
# goes out, so that a body that dies (an element whose stringification
# dies, a wide character, not a body at all) is a 500, never a 200 cut
# short. An array body is made into bytes first.
sub _respond {
    my ($r) = @_;
    # Plain byte strings throughout (most responses): checked and written
    # in C (perl_psgi_response.c), as below.
    return if respond_plain($r, \*OUT);
    die "the response has no body\n" if @$r < 3;
    my $body = $r->[2];
    if (ref $body eq 'ARRAY') {
        my $bytes = join '', map { _bytes($_) } @$body;
        if (_chunked($r->[1])) {
            my $chunked = _dechunker();
            $bytes = _dechunk($chunked, $bytes);
            _dechunk_end($chunked);
        }
        _head($r);
        local ($,, $\);
        print OUT $bytes;
        return;
    }
    die "the response body is " . (defined $body ? "'$body'" : 'undef')
        . ": not an array, a file handle or an object with getline and close\n"
        unless ref $body && (ref $body eq 'GLOB' || eval { $body->can('getline') });
    _body($body, _head($r));
    return;
}

# A body part as bytes; dies at a wide character, as a socket write would.
sub _bytes {
    my $s = defined $_[0] ? "$_[0]" : '';
    die "a wide character in the response body (encode it first)\n" if $s =~ /[^\x00-\xff]/;
    return $s;
}

# Writes the head. Returns a de-chunker (_dechunker) when the app framed
# its body in chunks itself, as Mojolicious does for write_chunk (a
# Transfer-Encoding: chunked header, the body with its chunks' sizes),
# which a server that copies headers and body to the socket sends as it
# is: the header is left out, and the body unframed, so that plxd frames
# it (chunked, or with a length when the body is complete).
sub _head {
    my ($r) = @_;
    my ($status, $headers) = @$r;
    die "bad status " . (defined $status ? "'$status'" : 'undef') . "\n"
        unless defined $status && $status =~ /\A[1-5][0-9][0-9]\z/;
    die "headers are not an array reference\n" unless ref $headers eq 'ARRAY';
    die "headers have an odd number of elements\n" if @$headers % 2;
    my $head = "Status: $status\r\n";
    my $chunked = _chunked($headers);
    for (my $i = 0; $i < @$headers; $i += 2) {
        my ($k, $v) = @$headers[ $i, $i + 1 ];
        next if $chunked && $k =~ /\ATransfer-Encoding\z/i;
        die "bad header name '" . (defined $k ? $k : 'undef') . "'\n"
            unless defined $k && $k =~ $TOKEN && $k !~ /\AStatus\z/i;
        $v = '' unless defined $v;
        if ($k =~ /\ATransfer-Encoding\z/i) {
            # plxd frames the body (chunked, or with its length): an
            # app's "identity" says nothing more; "chunked" framing it did
            # itself is unframed above; another coding it would apply.
            next if $v =~ /\A[ \t]*identity[ \t]*\z/i;
            die "header Transfer-Encoding '$v': plxd frames the body itself "
                . "(chunked, or with its length) and applies no other transfer coding\n";
        }
        die "header $k has a CR, LF or control byte in its value\n" if $v =~ $BAD_VALUE;
        die "header $k has a wide character in its value\n" if $v =~ /[^\x00-\xff]/;
        $head .= "$k: $v\r\n";
    }
    # The app's $, and $\ are its own, as under a server that writes to a
    # socket: each print of the response would add them to it.
    local ($,, $\);
    print OUT $head, "\r\n";
    return $chunked ? _dechunker() : undef;
}

# Whether headers say Transfer-Encoding: chunked (one header, that value
# only: another coding is left to the gateway, which refuses it).
sub _chunked {
    my ($headers) = @_;
    my @te;
    for (my $i = 0; $i + 1 < @$headers; $i += 2) {
        push @te, $headers->[ $i + 1 ] if defined $headers->[$i] && $headers->[$i] =~ /\ATransfer-Encoding\z/i;
    }
    return @te == 1 && defined $te[0] && $te[0] =~ /\A\s*chunked\s*\z/i;
}

# A body in chunks, unframed as it comes in parts: _dechunk returns the
# data of the chunks its part completes or continues; the last chunk's
# trailer is dropped. Dies at what is not chunked framing.
sub _dechunker { return { buf => '', left => 0 } }

sub _dechunk {
    my ($d, $part) = @_;
    $d->{buf} .= $part;
    my $out = '';
    while (length $d->{buf} && !$d->{done}) {
        if ($d->{left}) {
            my $data = substr($d->{buf}, 0, $d->{left}, '');
            $out .= $data;
            $d->{left} -= length $data;
            $d->{crlf} = 1 unless $d->{left};
        } elsif ($d->{crlf}) {
            last if length $d->{buf} < 2;
            die "the response body is not in chunks as its Transfer-Encoding says\n"
                unless substr($d->{buf}, 0, 2, '') eq "\r\n";
            $d->{crlf} = 0;
        } elsif ($d->{buf} =~ s/\A([0-9A-Fa-f]{1,15})[ \t]*(?:;[^\r\n]*)?\r\n//) {
            $d->{left} = hex $1;
            $d->{done} = 1 unless $d->{left};
        } else {
            die "the response body is not in chunks as its Transfer-Encoding says\n"
                if $d->{buf} !~ /\A[0-9A-Fa-f]{0,15}(?:[ \t]*;[^\r\n]*)?[ \t]*\r?\z/;
            last;
        }
    }
    return $out;
}

# The body ended: its last chunk must have come.
sub _dechunk_end {
    die "the response body in chunks has no last chunk\n" unless $_[0]{done};
    return;
}

# A file handle or an object with getline and close, after the head: a
# death here cuts the response short (perl_req.c).
sub _body {
    my ($body, $chunked) = @_;
    if (UNIVERSAL::can($body, 'path') && !$chunked) {
        # A file with a path (Plack::Util::set_io_path, IO::File::WithPath):
        # read from its descriptor in large blocks, not by lines.
        my $fd = eval { fileno $body };
        if (defined $fd && $fd >= 0) {
            my $buf;
            while (1) {
                my $n = sysread($body, $buf, 65536);
                die "reading the response body's file: $!\n" unless defined $n;
                last unless $n;
                local ($,, $\);
                print OUT $buf;
            }
            $body->close;
            return;
        }
    }
    local $/ = \65536 unless ref $/;
    my $ok = eval {
        while (defined(my $chunk = $body->getline)) {
            local ($,, $\);
            print OUT $chunked ? _dechunk($chunked, _bytes($chunk)) : _bytes($chunk);
        }
        _dechunk_end($chunked) if $chunked;
        1;
    };
    my $err = $@;
    $body->close;
    die $err unless $ok;
    return;
}

# The streaming writer: write sends at once (flushed, so that the client
# sees each part as it is written), close ends the response.
package PLXD::PSGI::Writer;

sub _new { return bless { open => 1, chunked => $_[1] }, $_[0] }

sub write {
    my ($self, $data) = @_;
    die "the PSGI writer was written to after close\n" unless $self->{open};
    die "the PSGI writer cannot write: the client left\n" if PLXD::PSGI::client_gone();
    return unless defined $data && length $data;
    $data = PLXD::PSGI::_bytes($data);
    $data = PLXD::PSGI::_dechunk($self->{chunked}, $data) if $self->{chunked};
    local ($,, $\);
    # Flushed from now on ($| on OUT, which stdio_end turns off after
    # the request): STDOUT, the selected handle, is STDERR here.
    select((select(PLXD::PSGI::OUT), $| = 1)[0]);
    print PLXD::PSGI::OUT $data or die "the PSGI writer cannot write: $!\n";
    return;
}

sub close {
    my ($self) = @_;
    $self->{open} = 0;
    return;
}

# poll_cb (PSGI's non-blocking interface): a blocking server may call the
# callback until the writer is closed.
sub poll_cb {
    my ($self, $cb) = @_;
    $cb->($self) while $self->{open};
    return;
}

sub _end { $_[0]{open} = 0; return }

package PLXD::PSGI;

# psgix.logger: the app's message goes to the error log under its name, as
# what it prints to STDERR (psgi.errors) does, its level first
# ("FILE: warn: MESSAGE").
sub logger {
    my ($m) = @_;
    my ($level, $text) = ref $m eq 'HASH' ? @$m{qw(level message)} : ('info', $m);
    $level = 'info' unless defined $level;
    $text = '' unless defined $text;
    $text =~ s/\n\z//;
    print STDERR "$level: $text\n";
    return;
}

# Calls $code with @args in scalar context, STDOUT being STDERR: the
# app's file as it is run for the app, and each psgix.cleanup handler.
sub call {
    my $code = shift;
    local *STDOUT = *STDERR;
    return scalar $code->(@_);
}

# The request body for psgi.input: read whole from STDIN and made
# seekable (psgix.input.buffered), in memory up to 1 MB, in an anonymous
# temporary file beyond. A request without a body (no CONTENT_LENGTH, or
# 0: plxd gives a chunked body's length once it is spooled) reads nothing.
#
# Every request without a body gets the same empty handle, put back at its
# start: opening one per request costs an open (which makes the runtime
# look at the standard descriptors again, perl_stdio.c) for nothing a
# request could tell apart. One the application closed is opened again.
# perl_psgi.c puts $none back at its start itself, and calls input when
# it cannot.
my $empty = '';
our $none;
sub input {
    my ($length) = @_;
    if (!$length) {
        return $none if $none && seek $none, 0, 0;
        open $none, '<', \$empty or die "psgi.input: $!\n";
        return $none;
    }
    my $buf = '';
    while (length $buf <= 1 << 20) {
        my $n = read(STDIN, $buf, 65536, length $buf);
        die "reading the request body: $!\n" unless defined $n;
        if (!$n) {
            open my $mem, '<', \$buf or die "psgi.input: $!\n";
            return $mem;
        }
    }
    open my $fh, '+>', undef or die "psgi.input: a temporary file: $!\n";
    binmode $fh;
    while (1) {
        print $fh $buf or die "psgi.input: writing a temporary file: $!\n";
        my $n = read(STDIN, $buf, 65536);
        die "reading the request body: $!\n" unless defined $n;
        last unless $n;
    }
    seek $fh, 0, 0;
    return $fh;
}

1;
