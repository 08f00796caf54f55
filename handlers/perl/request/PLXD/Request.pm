package PLXD::Request;
# The request object of plxd's Perl scripts: parameters, cookies and uploads
# parsed in C (the XS part wraps handlers/perl/request), request facts from the
# CGI environment, and the CGI response header helpers. One script uses it
# unchanged as .pl (CGI: %ENV and STDIN) and as .plx.
use strict;
# No "use warnings": loading warnings.pm costs every .pl process about a
# millisecond (a sixth of request.pl's whole run). The tests run this file
# under -w instead.

our $VERSION = '0.1.0';
require XSLoader;
XSLoader::load('PLXD::Request', $VERSION);

# A handler that already holds the request sets this; see "FOR HANDLERS".
our $Source;

# Carp only when something goes wrong: loading it costs every request.
sub _croak { require Carp; goto &Carp::croak }

sub _store { return { names => [], values => {} } }

sub _error {
    my ($code, $message, $status) = @_;
    return { code => $code, message => $message, status => $status || 400 };
}

# ---- construction -----------------------------------------------------------

# new() is in the XS part: the common request (no options, no $Source, no
# body, a good query string) is made there in one call. Everything else
# comes here, with the same arguments.
sub _new {
    my ($class, %opt) = @_;
    %opt = (%{ $Source->() || {} }, %opt) if $Source;
    my ($self, $err, $why) = _start(ref $class || $class, $opt{env} || \%ENV, $opt{limits},
        $opt{on_error}, $opt{output});
    _croak("PLXD::Request: $why") if defined $why;
    $err ||= $self->_read_body(\%opt) if $self->{env}{CONTENT_LENGTH};
    $self->_fail($err) if $err;
    return $self;
}

# Parses a form body. Returns undef, or an error.
sub _read_body {
    my ($self, $opt) = @_;
    my $env = $self->{env};
    # Used in place, not copied: the XS part counts usage inside it.
    my $state = \$self->{_state};
    my $err;

    my $len = $env->{CONTENT_LENGTH};
    return _error('bad_request', 'the Content-Length is not a number')
        unless $len =~ /^[0-9]{1,15}\z/;
    return undef if $len == 0;
    my ($media) = ($env->{CONTENT_TYPE} // '') =~ m{^\s*([^\s;]+)};
    $media = lc($media // '');
    my $multipart = $media eq 'multipart/form-data';
    # Other bodies (JSON, XML...) are the script's to read from STDIN.
    return undef unless $multipart || $media eq 'application/x-www-form-urlencoded';
    # Made here: a request without a form body has no body store.
    my $body = $self->{body} = _store();

    # Refused before a byte of the body is read.
    my $lim = _limits($$state);
    return _error('too_large',
        "the request is larger than $lim->{max_total} bytes (query string and body)")
        if $len > $lim->{max_total} - $lim->{used_bytes};

    my $given = $opt->{body};
    my $in = $opt->{input} || \*STDIN;
    binmode $in unless $given;
    if (!$multipart) {
        my $bytes = '';
        if ($given) {
            $bytes = substr($$given, 0, $len);
        } else {
            while (length $bytes < $len) {
                my $n = read($in, $bytes, $len - length $bytes, length $bytes);
                return _error('truncated', "cannot read the request body: $!") unless defined $n;
                last unless $n;
            }
        }
        return _short(length $bytes, $len) if length $bytes < $len;
        $err = _parse_urlencoded($$state, $body, $bytes, 'request body') and return $err;
        return $self->_merge;
    }

    my $tmpdir = $opt->{tmpdir} // $env->{PLXD_REQUEST_TMPDIR} // $ENV{TMPDIR} // '/tmp';
    my $uploads = $self->{uploads} = bless [], 'PLXD::Request::_Uploads';
    (my $mp, $err) = _multipart_new($$state, $body, $uploads, $env->{CONTENT_TYPE}, $tmpdir);
    return $err unless $mp;
    my $got = 0;
    if ($given) {
        $got = length $$given < $len ? length $$given : $len;
        $err = $mp->feed(substr($$given, 0, $got)) and return $err;
    } else {
        while ($got < $len) {
            my $want = $len - $got;
            my $n = read($in, my $chunk, $want < 65536 ? $want : 65536);
            return _error('truncated', "cannot read the request body: $!") unless defined $n;
            last unless $n;
            $got += $n;
            $err = $mp->feed($chunk) and return $err;
        }
    }
    return _short($got, $len) if $got < $len;
    $err = $mp->finish and return $err;
    return $self->_merge;
}

sub _short {
    my ($got, $len) = @_;
    return _error('truncated', "the request body ended after $got of its $len bytes");
}

# param() sees query string parameters, then body parameters (as
# libapreq's); the common case has only one of them and shares its store.
sub _merge {
    my ($self) = @_;
    my ($q, $b) = @$self{qw(query body)};
    return undef unless @{ $b->{names} };
    if (!@{ $q->{names} }) {
        $self->{param} = $b;
        return undef;
    }
    my %values = map { $_ => [ @{ $q->{values}{$_} } ] } @{ $q->{names} };
    my @names = @{ $q->{names} };
    for my $n (@{ $b->{names} }) {
        push @names, $n unless $values{$n};
        push @{ $values{$n} }, @{ $b->{values}{$n} };
    }
    $self->{param} = { names => \@names, values => \%values };
    return undef;
}

sub _fail {
    my ($self, $err) = @_;
    bless $err, 'PLXD::Request::Error';
    $self->_discard;
    $self->{error} = $err;
    if (my $cb = $self->{on_error}) {
        $cb->($err, $self);
        return;
    }
    my $line = "$err->{status} " . (_reason($err->{status}) // 'Error');
    print STDERR "PLXD::Request: $line: $err->{message}\n";
    # The client is told what was wrong with its request, but not the
    # server's own trouble (it may name folders): that goes to the log only.
    my $shown = $err->{status} < 500 ? "$line: $err->{message}" : $line;
    my $out = $self->{out} || \*STDOUT;
    print {$out} "Status: $line\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n$shown\n";
    $self->{header_sent} = 1;
    exit 0;
}

# Forgets what was parsed and removes the upload files.
sub _discard {
    my ($self) = @_;
    if (my $uploads = $self->{uploads}) {
        local $!;
        unlink map { $_->{tempname} } @$uploads;
        @$uploads = ();
    }
    $self->{query} = $self->{body} = $self->{param} = _store();
}

# No DESTROY here: most requests have no uploads, and a DESTROY call would
# cost every one of them. The upload list removes its own files (below).

# ---- parameters -------------------------------------------------------------

sub _lookup {
    my $store = shift;
    return @{ $store->{names} } unless @_;
    my $v = $store->{values}{ $_[0] };
    return $v ? @$v : ();
}

# param() is in the XS part: scripts call it in loops.

sub multi_param { my $self = shift; return _lookup($self->{param}, @_) }

sub params {
    my ($self) = @_;
    my $v = $self->{param}{values};
    return { map { $_ => [ @{ $v->{$_} } ] } keys %$v };
}

sub url_param {
    my $self = shift;
    return _lookup($self->{query}, @_) if wantarray;
    return @_ ? ($self->{query}{values}{ $_[0] } || [])->[0] : scalar @{ $self->{query}{names} };
}

sub body_param {
    my $self = shift;
    my $body = $self->{body} || _store();
    return _lookup($body, @_) if wantarray;
    return @_ ? ($body->{values}{ $_[0] } || [])->[0] : scalar @{ $body->{names} };
}

sub upload {
    my ($self, $name) = @_;
    my @u = @{ $self->{uploads} || [] };
    @u = grep { $_->{name} eq $name } @u if defined $name;
    return wantarray ? @u : $u[0];
}

sub cookie {
    my ($self, $name) = @_;
    my $c = $self->{cookies} ||= do {
        my $store = _store();
        my $header = $self->{env}{HTTP_COOKIE};
        _parse_cookies($store, $header) if defined $header && $header ne '';
        $store;
    };
    return @{ $c->{names} } unless defined $name;
    my $v = $c->{values}{$name};
    return wantarray ? ($v ? @$v : ()) : $v ? $v->[0] : undef;
}

# ---- the request ------------------------------------------------------------

sub env          { $_[0]{env} }
sub method       { $_[0]{env}{REQUEST_METHOD} }
sub script_name  { $_[0]{env}{SCRIPT_NAME} // '' }
sub path_info    { $_[0]{env}{PATH_INFO} // '' }
sub path         { $_[0]->script_name . $_[0]->path_info }
sub query_string { $_[0]{env}{QUERY_STRING} // '' }
sub uri          { $_[0]{env}{REQUEST_URI} }
sub remote_addr  { $_[0]{env}{REMOTE_ADDR} }
sub remote_port  { $_[0]{env}{REMOTE_PORT} }
sub server_name  { $_[0]{env}{SERVER_NAME} }
sub server_port  { $_[0]{env}{SERVER_PORT} }
sub protocol     { $_[0]{env}{SERVER_PROTOCOL} }
sub scheme       { lc($_[0]{env}{HTTPS} // '') eq 'on' ? 'https' : 'http' }
sub error        { $_[0]{error} }
sub limits       { _limits($_[0]{_state}) }

sub header {
    my ($self, $name) = @_;
    my $env = $self->{env};
    if (!defined $name) {
        my @names = map { (my $n = lc substr $_, 5) =~ tr/_/-/; $n } grep { /^HTTP_/ } keys %$env;
        push @names, grep { defined $env->{ uc tr/-/_/r } } qw(content-type content-length);
        return sort @names;
    }
    (my $key = uc $name) =~ tr/-/_/;
    return $env->{$key} if $key eq 'CONTENT_TYPE' || $key eq 'CONTENT_LENGTH';
    return $env->{"HTTP_$key"};
}

# ---- the response -----------------------------------------------------------

sub _check_value {
    my ($what, $value) = @_;
    _croak("PLXD::Request: $what is undefined") unless defined $value;
    # A CR or LF would end the header early: header injection.
    _croak("PLXD::Request: $what holds a control character")
        if $value =~ /[\x00-\x08\x0a-\x1f\x7f]/;
}

sub status {
    my ($self, $code, $reason) = @_;
    return $self->{status} if @_ < 2;
    if (defined $code && $code =~ /^([0-9]{3})\s+(.+)\z/s && !defined $reason) {
        ($code, $reason) = ($1, $2);
    }
    _croak('PLXD::Request: a status must be a number from 200 to 599')
        unless defined $code && $code =~ /^[2-5][0-9][0-9]\z/;
    _check_value('a status reason', $reason) if defined $reason;
    $self->{status} = $code + 0;
    $self->{reason} = $reason;
    return $self;
}

# content_type is in the XS part (every response sets it); a bad type
# comes back to _check_value.

sub redirect {
    my ($self, $url, $code) = @_;
    _check_value('a redirect URL', $url);
    _croak('PLXD::Request: a redirect URL is empty') if $url eq '';
    $code //= 302;
    _croak('PLXD::Request: a redirect status must be from 300 to 399')
        unless $code =~ /^3[0-9][0-9]\z/;
    $self->{location} = $url;
    return $self->status($code);
}

sub header_out {
    my ($self, $name, @values) = @_;
    _croak("PLXD::Request: '" . ($name // '') . "' is not a header name")
        unless defined $name && $name =~ /^[!#\$%&'*+.^_`|~0-9A-Za-z-]+\z/;
    my $lc = lc $name;
    if (!@values) {
        return $self->{status} if $lc eq 'status';
        return $self->{content_type} if $lc eq 'content-type';
        return $self->{location} if $lc eq 'location';
        return map { $_->[1] } grep { lc $_->[0] eq $lc } @{ $self->{headers_out} || [] };
    }
    return $self->status(@values) if $lc eq 'status';
    return $self->content_type($values[0]) if $lc eq 'content-type';
    if ($lc eq 'location') {
        _check_value('a Location', $values[0]);
        $self->{location} = $values[0];
        return $self;
    }
    _croak('PLXD::Request: Transfer-Encoding is the server\'s to choose')
        if $lc eq 'transfer-encoding';
    for my $v (@values) {
        _check_value("header $name", $v);
        push @{ $self->{headers_out} }, [ $name, $v ];
    }
    return $self;
}

sub header_sent { $_[0]{header_sent} }

# send_header is in the XS part, which builds the block and writes it to
# STDOUT itself when that is a plain handle; anything else (the output
# option, a tied STDOUT, a :utf8 layer, $\ set) is printed here.
sub _print {
    my ($out, $h) = @_;
    print { $out || \*STDOUT } $h;
}

package PLXD::Request::_Uploads;
# A request's upload list (made when a multipart body is parsed). The
# request object holds the only reference to it, so it goes with the
# request, and removes the files then.

sub DESTROY {
    my ($self) = @_;
    return unless @$self;
    local ($!, $?);
    unlink map { $_->{tempname} } @$self;
}

package PLXD::Request::Upload;
# One uploaded file; its temporary file goes with the request object.

sub name     { $_[0]{name} }
sub filename { $_[0]{filename} }
sub type     { $_[0]{type} }
sub size     { $_[0]{size} }
sub tempname { $_[0]{tempname} }
sub path     { $_[0]{tempname} }

sub basename {
    (my $b = $_[0]{filename}) =~ s{.*[/\\]}{}s;
    return $b;
}

sub fh {
    my ($self) = @_;
    open my $fh, '<:raw', $self->{tempname}
        or PLXD::Request::_croak("PLXD::Request: cannot open upload $self->{tempname}: $!");
    return $fh;
}

sub slurp {
    my ($self) = @_;
    my $fh = $self->fh;
    local $/;
    my $data = <$fh>;
    return $data // '';
}

package PLXD::Request::Error;
# Why a request could not be parsed.

sub code    { $_[0]{code} }
sub message { $_[0]{message} }
sub status  { $_[0]{status} }

1;

__END__

=head1 NAME

PLXD::Request - plxd's request object: parameters, cookies and uploads parsed in C

=head1 SYNOPSIS

    use strict;
    use PLXD::Request;

    my $q = PLXD::Request->new;            # a bad request ends here with a 400
    my $name  = $q->param('name');         # first value
    my @tags  = $q->param('tag');          # every value, in order
    my @names = $q->param;                 # parameter names, in order

    if (my $up = $q->upload('photo')) {
        my $fh = $up->fh;                  # read handle on the temporary file
        printf STDERR "%s: %d bytes of %s\n", $up->filename, $up->size, $up->type;
    }
    my $sid = $q->cookie('sid');

    $q->send_header('text/plain; charset=utf-8');  # or content_type(...), then send_header
    print "hello $name\n";

=head1 DESCRIPTION

PLXD::Request gives a script run by plxd what CGI.pm's C<param> and
C<upload> give, with the parsing done in C (the parsers in plxd's
F<handlers/perl/request/>, reached through XS), much as Apache::Request did for
mod_perl. The same script runs unchanged as a C<.pl> (a process per
request: the object reads C<%ENV> and C<STDIN>) and as a C<.plx> (persistent:
see L</FOR HANDLERS>).

Everything is bytes, as CGI.pm gives them by default: a UTF-8 parameter is
its UTF-8 bytes (use C<utf8::decode> or C<Encode::decode_utf8> to get
characters).

=head1 CONSTRUCTOR

=head2 new(%options)

Parses the query string, the cookies (on first use) and a body of type
C<application/x-www-form-urlencoded> or C<multipart/form-data> (any method;
a body of another type is left unread on STDIN for the script). Options:

=over

=item on_error => sub { my ($error, $q) = @_; ... }

Called instead of the default answer when the request cannot be parsed; see
L</ERRORS>. C<new> then returns the object, holding no parameters and no
uploads, with C<< $q->error >> set; the response helpers work as usual.

=item limits => { max_fields => 100, ... }

Overrides limits for this request (see L</LIMITS>); values are written as in
plxd.conf (C<"2M">). An unknown name or a bad value dies.

=item tmpdir => DIR

Where uploads are stored. Default: C<$ENV{PLXD_REQUEST_TMPDIR}> (set by
plxd from C<[server] tmp_dir>), else C<$ENV{TMPDIR}>, else F</tmp>.

=item env => \%env, input => $fh, body => \$bytes, output => $fh

Where the request comes from and the header goes to, instead of C<%ENV>,
C<STDIN> and C<STDOUT>: for tests and for handlers. C<body> is the whole
body, already in memory.

=back

Create one object per request: the body can be read only once. Reading a
form body puts STDIN (or C<input>) in binary mode (C<binmode>) first, so
that an encoding layer a script set cannot change the bytes.

=head1 PARAMETERS

Query string parameters come first, then body parameters, each name in the
order it first appeared. Pairs are separated by C<&> or C<;>; C<+> is a
space and C<%XX> a byte; C<a=1&&b> gives C<a> = C<"1"> and C<b> = C<"">; a
repeated name has several values. A file field's value is its file name (as
in CGI.pm); the file itself is in C<upload>.

=over

=item param()

The parameter names, in order.

=item param($name)

In list context every value of C<$name> (an empty list if none), in scalar
context the first (C<undef> if none): as CGI.pm's C<param>.

=item multi_param($name)

Every value of C<$name>, in any context (CGI.pm's C<multi_param>); without a
name, the names.

=item params()

A new hash reference: name => [values].

=item url_param($name), body_param($name)

As C<param>, but only the query string's, or only the body's, parameters.
CGI.pm's C<param> of a POST request is C<body_param>; its C<url_param> is
C<url_param>.

=back

=head1 UPLOADS

=over

=item upload($name)

In scalar context the first upload of field C<$name> (or C<undef>), in list
context all of them; without a name, every upload. Each is a
PLXD::Request::Upload object:

    $up->name        # the form field's name
    $up->filename    # the file name the browser sent ("" never: an empty
                     # file input is a plain parameter, as in CGI.pm)
    $up->basename    # filename without any folder part (old browsers sent paths)
    $up->type        # its Content-Type, or undef if none was sent
    $up->size        # bytes
    $up->tempname    # the temporary file (also $up->path)
    $up->fh          # a new read handle on it, at its start (binary)
    $up->slurp       # its whole content

Uploads are streamed to files named F<plxd-upload-XXXXXX> (mode 0600) in
the upload folder, never held in memory. The files are removed when the
request object goes away (and when parsing fails); move or copy one to keep
it. A process killed with SIGKILL cannot remove its files.

=back

=head1 COOKIES

=over

=item cookie($name)

The value of the cookie C<$name> (scalar context: the first sent, which is
the most specific; list context: every value sent under that name). Without
a name, the cookie names in order. Values are decoded as CGI.pm decodes
them (C<+> and C<%XX>; a bad escape is kept as it stands: cookies come from
other software too, so they never make a request bad); double quotes around
a value are kept, as CGI.pm keeps them.

=back

=head1 THE REQUEST

C<method>, C<path> (C<script_name> . C<path_info>, decoded), C<script_name>,
C<path_info>, C<query_string> (raw), C<uri> (REQUEST_URI, raw),
C<remote_addr>, C<remote_port>, C<server_name>, C<server_port>,
C<protocol>, C<scheme> (C<http> or C<https>), and C<env> (the environment
hash the object reads).

=over

=item header($name)

A request header's value, by name in any case (C<User-Agent>,
C<user-agent>); repeated headers come joined with C<, > as plxd passes them.
Without a name, the header names present (lower case). Authorization is
passed to scripts only when plxd is configured to.

=item limits

A hash reference: the limits in force and C<used_fields>/C<used_bytes>.

=item error

After a failure handled by C<on_error>, the error object; else undef.

=back

=head1 THE RESPONSE

The helpers build a CGI header block (RFC 3875) and C<send_header> prints
it to STDOUT, where plxd's CGI response parser reads it, so C<Status> and
C<Location> keep their meaning for C<.pl> and C<.plx> alike. Each setter
returns the object and dies on a value holding CR, LF or another control
character (header injection).

=over

=item status($code [, $reason])

Sets the status (200 to 599), as C<Status: 404 Not Found>. Without
arguments, returns it.

=item content_type($type)

Sets Content-Type. Default: C<text/html; charset=ISO-8859-1> (as CGI.pm),
unless a Location is set; an empty string sends none.

=item redirect($url [, $status])

A client redirect: C<Location: $url> with status 302 (or C<$status>, 300 to
399). For an internal redirect (RFC 3875's local redirect, served by plxd
itself), set C<< header_out(Location => '/local/path') >> with no status
and no content type instead.

=item header_out($name, @values)

Adds a header (several values: several lines, e.g. Set-Cookie). C<Status>,
C<Content-Type> and C<Location> go to the setters above; C<Transfer-Encoding>
dies (framing is the server's). With a name only, returns its values.

=item send_header([$type])

Prints the block: C<Status>, C<Location>, other headers, C<Content-Type>,
a blank line, with CRLF line ends. With C<$type>, sets the content type
first, as C<content_type($type)> (and as Apache's
C<< $r->send_http_header('text/plain') >>): C<< $q->send_header('text/plain') >>.
A second call warns and does nothing (C<$type> included); it returns 1,
and 0 for a second call. C<header_sent> tells whether it has been sent.

=back

=head1 ERRORS

When the request cannot be parsed, C<new> prints a complete response to
STDOUT and a line to STDERR (plxd's error log) and exits:

    Status: 400 Bad Request
    Content-Type: text/plain; charset=utf-8

    400 Bad Request: bad percent escape "%G1" in the query string

unless C<on_error> was given. The error object has C<code>, C<message> and
C<status> (400; 500 for C<store> and C<no_memory>, whose response body says
only C<500 Internal Server Error>: the details are the server's, in the
log). Codes:

    bad_escape        a % not followed by two hex digits (query string, form body)
    too_many_fields   more parameters than max_fields (files count too)
    field_too_large   a parameter's name or value over max_field_size
    upload_too_large  a file over max_upload_size (or uploads turned off)
    too_large         query string and body over max_total (before any body is read)
    truncated         the body ended before Content-Length, or inside a multipart part
    no_boundary       a multipart body that never reaches its boundary
    bad_multipart     a boundary line that does not end or runs on into text,
                      malformed part headers, a part without a form-data name
    bad_content_type  multipart/form-data without a usable boundary
    bad_request       a Content-Length that is not a number
    store             an upload file could not be written (500)
    no_memory         (500)

=head1 LIMITS

Four limits bound what a request may make the parsers hold:

    max_fields       1000  parameters and uploads together
    max_field_size   1M    one parameter's name or value, decoded
    max_upload_size  64M   one uploaded file (0: no uploads)
    max_total        64M   query string and body together

They come from plxd.conf's C<[request]> section. plxd passes them to a
script in its environment as C<PLXD_REQUEST_MAX_FIELDS>,
C<PLXD_REQUEST_MAX_FIELD_SIZE>, C<PLXD_REQUEST_MAX_UPLOAD_SIZE>,
C<PLXD_REQUEST_MAX_TOTAL> (and the upload folder as
C<PLXD_REQUEST_TMPDIR>); a variable that is absent (a script run from a
shell) keeps its default, and a malformed one makes C<new> die. The
C<limits> option tightens or loosens them per script.

=head1 DIFFERENCES FROM CGI.pm

=over

=item *

C<param> of a POST request includes the query string's parameters (first),
as Apache::Request's does; C<body_param> is CGI.pm's C<param>.

=item *

A bad percent escape is an error, not kept literally; C<%uXXXX> is not
decoded. A query string without C<=> (C<?word>) is a parameter named
C<word> with an empty value, not CGI.pm's C<keywords>.

=item *

Cookies are split on C<;> only (RFC 6265), and a value is not split on
C<&>.

=item *

Parameters are read-only; C<content_type> sets the response's type (the
request's is C<< header('Content-Type') >>); C<header($name)> reads a
request header, and C<send_header> prints the response's.

=back

=head1 FOR HANDLERS

A handler that already holds the request (plxd's persistent C<.plx>
handler) sets C<$PLXD::Request::Source> to a code reference. C<new> calls
it with no arguments; it returns a hash reference of constructor options
(C<env>, C<input> or C<body>, C<output>, C<tmpdir>), which options given to
C<new> override. Unset, the object reads C<%ENV>, C<STDIN> and writes
C<STDOUT>, which is right for C<.pl> and for a C<.plx> whose handler has
set up those three for the request.

=head1 FILES

The module is installed in F<PREFIX/lib/plxd/perl5> (F<PLXD/Request.pm>
and F<auto/PLXD/Request/Request.so>); in a build tree, in
F<BUILD/modules/perl5>: either way the folder F<perl5> beside plxd's
handler modules. plxd puts that folder in C<PERL5LIB> for C<.pl> scripts
and in C<@INC> for C<.plx> scripts, so they need no C<use lib>. From a
shell: C<PERL5LIB=PREFIX/lib/plxd/perl5 perl script.pl>.

=head1 SEE ALSO

L<CGI>, RFC 3875 (CGI), RFC 7578 (multipart/form-data), RFC 6265 (cookies).

=cut
