# What a .psgi request without a body costs the runtime's set-up: the
# same empty psgi.input handle for every such request, put back at its
# start, so that no open runs per request; and PerlIO::scalar, which that
# handle needs, loaded with plxd's own set-up, so that it does not count as
# a script's C code. Either would make the runtime fstat the standard
# descriptors and read the signal mask after every request (doc/perl.md,
# "What a request's set-up skips"). Checked with strace on the process
# that runs the application: a worker, and in thread mode plxd itself.
# The reused handle must still behave as a fresh one: empty, at its start,
# opened again when an application closed it.
# An array response of plain byte strings is checked and written in C
# (perl_psgi_response.c), anything else by PLXD/PSGI.pm: both must write
# the same bytes, and the C path must refuse what it cannot write exactly.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(thread_mode);
use HTTP::Tiny;

my %files = (
    'input.psgi' => <<'EOF',
sub {
    my $env = shift;
    my $in = $env->{'psgi.input'};
    my $got = join '', <$in>;
    my $q = $env->{QUERY_STRING};
    close $in if $q eq 'close';
    seek $in, 0, 2 if $q eq 'end';
    [200, ['Content-Type' => 'text/plain'], ["read '$got' at " . tell($in) . "\n"]];
};
EOF
    'hello.psgi' => "my \$b = \"hi\\n\";\nsub { [200, ['Content-Type' => 'text/plain'], [\$b]] };\n",
    # ?CASE: a response that PLXD::PSGI::respond_plain writes, or leaves to
    # PSGI.pm; the body says which, the rest must not differ.
    'plain.psgi' => <<'EOF',
package Str { use overload '""' => sub { ${ $_[0] } }; sub new { my ($c, $s) = @_; bless \$s, $c } }
package Upper { sub TIEHANDLE { bless { fh => $_[1] }, $_[0] }
    sub PRINT { my $self = shift; print { $self->{fh} } map { s/body/BODY/r } @_ } sub CLOSE { 1 } }
package Tied { sub TIEARRAY { bless [ @_[1 .. $#_] ], $_[0] } sub FETCH { $_[0][ $_[1] ] }
    sub FETCHSIZE { scalar @{ $_[0] } } }
my %cases = (
    plain   => sub { [200, ['Content-Type' => 'text/plain', 'X-Num' => 42], ['a', 'b']] },
    numbers => sub { [201.0, ['X-Len', 3, 'X-Undef', undef, 'X-Empty', ''], [1, undef, 2, '']] },
    latin1  => sub { my $v = "caf\x{e9}"; utf8::upgrade($v); [200, ['X-Latin1' => $v], [$v]] },
    object  => sub { [200, ['X-Obj' => Str->new('o')], [Str->new('obj')]] },
    tied    => sub { tie my @b, 'Tied', 't1', 't2'; [200, [], \@b] },
    extra   => sub { [200, [], ['x'], 'ignored'] },
    status  => sub { [Str->new('202'), [], ['s']] },
    chunked => sub { [200, ['Transfer-Encoding' => 'chunked'], ["1\r\nc\r\n0\r\n\r\n"]] },
    # The app's separators are its own: not in the response either way.
    seps    => sub { ($,, $\) = ('<,>', '<\\>'); [200, ['X-A' => 'a'], ['b', 'c']] },
    sepsperl => sub { ($,, $\) = ('<,>', '<\\>'); my $v = 'c'; utf8::upgrade($v);
        [200, ['X-A' => 'a'], ['b', $v]] },
    # A layer (:utf8; :encoding, last: Encode, loaded, is C code) or a tie
    # the app puts on its STDOUT: STDERR's while it runs, not the
    # response channel's, which the C path writes as it would otherwise.
    utf8    => sub { binmode STDOUT, ':utf8'; [200, ['X-U' => "\xe9"], ["caf\xe9"]] },
    encoded => sub { binmode STDOUT, ':encoding(UTF-8)'; [200, [], ["caf\xe9"]] },
    tiedout => sub { open my $real, '>&', \*STDOUT or die; tie *STDOUT, 'Upper', $real;
        [200, [], ['body']] },
);
sub {
    my $env = shift;
    my $res = $cases{ $env->{QUERY_STRING} }->();
    open my $probe, '>', \my $bytes or die;
    # As the response channel is: the app's STDOUT is STDERR while it
    # runs, so its layers and ties are not the channel's.
    binmode $probe, ':utf8' if grep { $_ eq 'utf8' } PerlIO::get_layers(*PLXD::PSGI::OUT);
    if (tied *PLXD::PSGI::OUT) { open PROBE, '>', \my $p or die; tie *PROBE, 'Upper', $probe; $probe = \*PROBE }
    my $plain = PLXD::PSGI::respond_plain($res, $probe) ? 'C' : 'Perl';
    close $probe;
    push @{ $res->[1] }, 'X-Path' => $plain;
    return $res;
};
EOF
);
my $s = PlxdTest->start(
    files    => \%files,
    server   => { threads => 1 },
    handlers => { '.psgi' => 'perl' },
    sections => { perl => { workers => 1, thread_mode() ? (inline_budget => 0) : () } },
);

# --- the reused empty handle ---
for my $q ('', 'end', 'close', '', 'end', '') {
    my $r = $s->get("/input.psgi?$q");
    is($r->{content}, "read '' at " . ($q eq 'close' ? -1 : 0) . "\n",
        "psgi.input without a body: empty, at its start, after a request that did " . ($q || 'nothing'));
}
is($s->request('POST', '/input.psgi', content => 'abc')->{content}, "read 'abc' at 3\n",
    'a request with a body gets its own handle');
is($s->get('/input.psgi')->{content}, "read '' at 0\n", '... and the next one without a body the empty one');

# --- the array response: C and Perl write the same ---
my %want = (
    plain   => [ 'C',    200, { 'content-type' => 'text/plain', 'x-num' => 42 }, 'ab' ],
    numbers => [ 'C',    201, { 'x-len' => 3 }, '12' ],    # empty values: psgi.t
    latin1  => [ 'Perl', 200, { 'x-latin1' => "caf\xe9" }, "caf\xe9" ],
    object  => [ 'Perl', 200, { 'x-obj' => 'o' }, 'obj' ],
    tied    => [ 'Perl', 200, {}, 't1t2' ],
    extra   => [ 'Perl', 200, {}, 'x' ],
    status  => [ 'Perl', 202, {}, 's' ],
    chunked => [ 'Perl', 200, {}, 'c' ],    # framed by the app: PSGI.pm unframes it
    seps     => [ 'C',    200, { 'x-a' => 'a' }, 'bc' ],
    sepsperl => [ 'Perl', 200, { 'x-a' => 'a' }, 'bc' ],
    # The app's STDOUT is STDERR while it runs: a layer it pushes there,
    # or a tie, never shapes its response, as under plackup.
    utf8     => [ 'C',    200, { 'x-u' => "\xe9" }, "caf\xe9" ],
);
my $encoded = [ 'C', 200, {}, "caf\xe9" ];
sub case_is {
    my ($case, $path, $status, $headers, $body) = @_;
    my $r = $s->get("/plain.psgi?$case");
    is($r->{headers}{'x-path'}, $path, "($case) written by " . ($path eq 'C' ? 'C' : 'PSGI.pm'));
    is($r->{status}, $status, "($case) its status");
    is($r->{headers}{$_}, $headers->{$_}, "($case) header $_") for sort keys %$headers;
    is($r->{content}, $body, "($case) its body");
}
case_is($_, @{ $want{$_} }) for sort keys %want;

# --- no fstat, no signal mask read, per request ---
my $ka = HTTP::Tiny->new(timeout => 30, keep_alive => 1);
is($ka->get($s->url('/hello.psgi'))->{content}, "hi\n", 'a first request');
my $pid = $s->pid;
my ($target) = thread_mode() ? ($pid) : grep { $_ } map { /^(\d+)$/ ? $1 : () } split /\s+/,
    PlxdTest::read_file("/proc/$pid/task/$pid/children");
my $n = 20;
my $answered = 0;
my @calls = grep { /^\d+\s+(?:newfstatat|fstat|rt_sigprocmask)\(/ }
    $s->strace_during($target, [qw(newfstatat fstat rt_sigprocmask)], sub {
        $answered = grep { $ka->get($s->url('/hello.psgi'))->{content} eq "hi\n" } 1 .. $n;
    });
is($answered, $n, "$n keep-alive requests answered under strace");
is(scalar @calls, 0, '... with no fstat and no read of the signal mask among them')
    or diag(join "\n", @calls);

case_is('encoded', @$encoded);
case_is('tiedout', 'C', 200, {}, 'body');

done_testing;
