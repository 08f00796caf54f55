# PSGI applications (.psgi) in the perl handler: each key of the
# environment plxd builds, each response form, the framing the gateway
# gives them, an app that dies or is no app, recompiling on a change of
# the file or of a module it loaded, psgix.harakiri, and
# psgix.cleanup.handlers after the response. Run in both isolation modes
# (PLXD_TEST_ISOLATION, tests/CMakeLists.txt), with one interpreter
# serving every request (workers = 1, no inline runs).
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for write_file read_file);
use PlxdRaw qw(responses read_responses request_bytes);

my $thread = PlxdTest::thread_mode();

my %files = (
    # The environment as the app gets it, one key per line; references by
    # what they hold.
    'dir/env.psgi' => <<'EOF',
sub {
    my $env = shift;
    my $out = '';
    for my $k (sort keys %$env) {
        my $v = $env->{$k};
        $v = ref $v eq 'ARRAY' ? 'ARRAY[' . join(',', @$v) . ']'
           : ref $v ? ref($v)
           : defined $v ? "'$v'" : 'undef';
        $out .= "$k=$v\n";
    }
    $out .= "ENV_METHOD=" . ($ENV{REQUEST_METHOD} // 'none') . "\n";
    $out .= "ENV_PLACK=" . ($ENV{PLACK_ENV} // 'none') . "\n";
    $out .= "INPUT_IN_MEMORY=" . (fileno($env->{'psgi.input'}) // -1) . "\n";
    $out .= "ENV_HTTP=" . join(',', grep { /^HTTP_/ } sort keys %ENV) . "\n";
    print {$env->{'psgi.errors'}} "a line for the log\n";
    [200, ['Content-Type' => 'text/plain'], [$out]];
}
EOF
    'input.psgi' => <<'EOF',
sub {
    my $env = shift;
    my $in = $env->{'psgi.input'};
    my $n = $in->read(my $first, 5, 0);
    $in->seek(0, 0) or die "no seek";
    my $all = '';
    while ($in->read(my $buf, 65536)) { $all .= $buf }
    my $where = (fileno($in) // -1) >= 0 ? 'file' : 'memory';
    [200, ['Content-Type' => 'text/plain'],
        ["$n:$first:" . length($all) . ':' . unpack('%32C*', $all) . ":$where"]];
}
EOF
    'forms.psgi' => <<'EOF',
package CloseMarker;
sub new { my ($c, $file, $lines) = @_; bless { lines => $lines || ["a\n", "b\n"], file => $file }, $c }
sub getline { shift @{ $_[0]{lines} } }
sub close { open my $f, '>', $_[0]{file} or die; print $f "closed"; close $f }
package WithPath;
our @ISA = ('IO::Handle');
sub path { 'x' }
package main;
my $dir = $0 =~ s{/[^/]*$}{}r;
sub {
    my $env = shift;
    my $q = $env->{QUERY_STRING};
    return [200, ['Content-Type' => 'text/plain', 'X-A' => 1, 'X-A' => 2], ["ar", "ray"]] if $q eq 'array';
    if ($q eq 'glob') { open my $fh, '<', __FILE__ or die; return [200, ['Content-Type' => 'text/plain'], $fh] }
    return [200, ['Content-Type' => 'text/plain'], CloseMarker->new("$env->{DOCUMENT_ROOT}/closed.txt")]
        if $q eq 'object';
    if ($q eq 'path') {
        open my $fh, '<', "$env->{DOCUMENT_ROOT}/data.bin" or die;
        bless $fh, 'WithPath';
        return [200, ['Content-Type' => 'application/octet-stream'], $fh];
    }
    return sub { $_[0]->([201, ['Content-Type' => 'text/plain'], ["delayed"]]) } if $q eq 'delayed';
    if ($q eq 'slow') {
        return sub {
            my $w = $_[0]->([200, ['Content-Type' => 'text/plain']]);
            $w->write("first part;");
            for (1 .. 1500) { last if -e "$env->{DOCUMENT_ROOT}/slow.go"; select undef, undef, undef, 0.02 }
            $w->write("second part");
            $w->close;
        };
    }
    if ($q eq 'stream') {
        return sub {
            my $w = $_[0]->([200, ['Content-Type' => 'text/plain']]);
            $w->write("one ");
            $w->write("two");
            $w->close;
            eval { $w->write("three") };
            print STDERR "after close: $@";
        };
    }
    # Bodies the app framed in chunks itself (Mojolicious's write_chunk).
    my @te = ('Content-Type' => 'text/plain', 'Transfer-Encoding' => 'chunked');
    return [200, [@te], ["3\r\non", "e\r\n4;x=y\r\n two\r\n0\r\nX-T: 1\r\n\r\n"]] if $q eq 'te-array';
    if ($q eq 'te-getline') {
        my @parts = ("5\r", "\nfirst\r\n", "", "7\r\n second\r\n0\r\n\r\n");
        return [200, [@te], CloseMarker->new("$env->{DOCUMENT_ROOT}/closed.txt", \@parts)];
    }
    if ($q eq 'te-writer') {
        return sub {
            my $w = $_[0]->([200, [@te]]);
            $w->write("6\r\nwrit");
            $w->write("er\r\n0\r\n\r\n");
            $w->close;
        };
    }
    return [200, [@te], ["not chunks"]] if $q eq 'te-bad';
    return [200, [@te], ["3\r\none\r\n"]] if $q eq 'te-short';
    return [200, ['Content-Type' => 'text/plain', 'Content-Length' => 5], ["hello"]] if $q eq 'sized';
    return [204, [], []] if $q eq '204';
    return [304, ['ETag' => '"x"'], []] if $q eq '304';
    return [200, ['Content-Type' => "text/plain\r\nX-Injected: 1"], ["no"]] if $q eq 'crlf';
    return [200, ["Bad Name" => 1], ["no"]] if $q eq 'badname';
    return ['abc', [], ["no"]] if $q eq 'badstatus';
    return {} if $q eq 'hash';
    return [200, ['Content-Type' => 'text/plain'], ["q=$q"]];
}
EOF
    'die.psgi'     => qq{my \$n = 0;\nsub { die "it broke\\n" if \$_[0]{QUERY_STRING} eq 'die'; \$n++; [200, ['Content-Type' => 'text/plain'], ["alive \$n"]] }\n},
    'notcode.psgi' => qq{my \$x = 42;\n\$x;\n},
    # A named sub using a file-level lexical, under fatal warnings (as
    # strictures, which Web::Simple turns on, makes them): doc/psgi.md,
    # "What differs".
    'closure.psgi' => qq{use warnings FATAL => 'all';\nmy \$x = 'x';\nsub x { \$x }\nsub { [200, [], [x()]] }\n},
    'syntax.psgi'  => "my \$ok = 1;\nsub { [200, [], ['x']] ;\n",
    # Bodies that cannot be sent: found before the head goes out (500), or
    # after it (the response cut short, never framed as whole).
    'body.psgi' => <<'EOF',
package Boom; use overload '""' => sub { die "boom\n" };
package main;
my %bodies = (
    obj => ["first\n", bless({}, 'Boom'), "last\n"], undef => undef, string => 'string',
    hash => {}, wide => ["caf\x{e9} \x{263a}\n"],
);
sub {
    my $q = $_[0]{QUERY_STRING};
    return [200, ['Content-Type', 'text/plain'], $bodies{$q}] if exists $bodies{$q};
    return [200, ['X-Wide', "\x{263a}"], ["x"]] if $q eq 'wideheader';
    return sub { my $w = shift->([200, ['Content-Type', 'text/plain']]); $w->write("x" x 100_000) for 1 .. 3; die "stream died\n" }
        if $q eq 'stream';
    if ($q eq 'getline') {
        my $n = 0;
        my $fh = bless {}, 'Lines';
        *Lines::getline = sub { $n++ < 2 ? "line $n\n" : die "getline died\n" };
        *Lines::close = sub {};
        return [200, ['Content-Type', 'text/plain'], $fh];
    }
    [200, ['Content-Type', 'text/plain'], ["fine\n"]];
}
EOF
    # Keeps its responder without calling it, then calls it in the next
    # request (as a long-poll app keeps its clients').
    'stale.psgi' => <<'EOF',
our $kept;
sub {
    my ($env) = @_;
    return sub { $kept = shift } if $env->{QUERY_STRING} eq 'keep';
    my $err = eval { $kept->([200, ['X-Leak' => 1], ["LEAKED\n"]]); 1 } ? 'none' : $@;
    return [200, ['Content-Type' => 'text/plain'], ["mine: $err"]];
}
EOF
    'broken.psgi'  => qq{die "cannot build the app\\n";\nsub {}\n},
    'count.psgi'   => <<'EOF',
my $made = time;
my $n = 0;
sub {
    my $env = shift;
    $n++;
    $env->{'psgix.harakiri.commit'} = 1 if $env->{QUERY_STRING} eq 'harakiri';
    [200, ['Content-Type' => 'text/plain'], ["n=$n pid=$$"]];
}
EOF
    'version.psgi' => qq{sub { [200, ['Content-Type' => 'text/plain'], ["v1"]] }\n},
    'Upper.PSGI'   => qq{sub { [200, ['Content-Type' => 'text/plain'], ["upper"]] }\n},
    'lib/PsgiMod.pm' => qq{package PsgiMod;\nsub word { 'first' }\n1;\n},
    'mod.psgi'     => <<'EOF',
use lib ($0 =~ s{/[^/]*$}{}r) . '/lib';
use PsgiMod;
sub { [200, ['Content-Type' => 'text/plain'], [PsgiMod::word()]] }
EOF
    # A cleanup handler that asks for harakiri, once the next request is
    # under way (its mark), as a size limit checked after the response
    # would.
    'latekill.psgi' => <<'EOF',
sub {
    my $env = shift;
    my $root = $env->{DOCUMENT_ROOT};
    if ($env->{QUERY_STRING} eq 'commit') {
        push @{ $env->{'psgix.cleanup.handlers'} }, sub {
            for (1 .. 500) { last if -e "$root/next-sent"; select undef, undef, undef, 0.02 }
            select undef, undef, undef, 0.2;
            $_[0]{'psgix.harakiri.commit'} = 1;
        };
    }
    [200, ['Content-Type' => 'text/plain'], ["pid=$$"]];
}
EOF
    'cleanup.psgi' => <<'EOF',
sub {
    my $env = shift;
    my $root = $env->{DOCUMENT_ROOT};
    push @{ $env->{'psgix.cleanup.handlers'} }, sub {
        # Waits for the test to have its whole response.
        for (1 .. 1500) { last if -e "$root/go"; select undef, undef, undef, 0.02 }
        open my $f, '>', "$root/cleaned" or die;
        print $f -e "$root/go" ? "after" : "before";
        close $f;
        print STDERR "from the cleanup handler\n";
    };
    push @{ $env->{'psgix.cleanup.handlers'} }, sub { die "second handler died\n" };
    [200, ['Content-Type' => 'text/plain'], ["answered"]];
}
EOF
    # Streams until its writer dies (at most 30 s), its cleanup handler
    # noting why.
    'endless.psgi' => <<'EOF',
sub {
    my $env = shift;
    my $root = $env->{DOCUMENT_ROOT};
    my $why = 'never died';
    push @{ $env->{'psgix.cleanup.handlers'} }, sub {
        open my $f, '>', "$root/endless.out" or die;
        print $f $why;
        close $f;
    };
    return sub {
        my $w = $_[0]->([200, ['Content-Type' => 'text/plain']]);
        my $ok = eval {
            for (1 .. 1500) { $w->write("x" x 1000); select undef, undef, undef, 0.02 }
            1;
        };
        $why = $@ unless $ok;
        $w->close;
    };
}
EOF
    # DATA read at each request, after the file ran (as Mojolicious::Lite
    # finds the templates of __DATA__ at its first render).
    'data.psgi' => <<'EOF',
my $first = <DATA>;
sub {
    seek DATA, 0, 0 if $_[0]{QUERY_STRING} eq 'again';
    my $rest = join '', <DATA>;
    [200, ['Content-Type' => 'text/plain'], ["first=$first" . "rest=$rest"]];
}
__DATA__
line one
line two
EOF
    'data.bin' => join('', map { chr($_ % 251) } 0 .. 200_000),
);

my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.psgi' => 'perl' },
    server   => { trusted_proxies => '127.0.0.1' },
    sections => { perl => { workers => 1 } },
);
my $root = $s->root;

# ---- the environment ----
my $r = $s->request('GET', '/dir/env.psgi/more/path%20x?a=1&b=%41',
    headers => { 'X-Test' => 'v', Authorization => 'Basic abc' });
is($r->{status}, 200, 'env: 200');
my %e = map { /^([^=]+)=(.*)$/ ? ($1 => $2) : () } split /\n/, $r->{content};
is($e{'psgi.version'}, 'ARRAY[1,1]', 'psgi.version is [1,1]');
is($e{'psgi.url_scheme'}, "'http'", 'psgi.url_scheme http');
is($e{SCRIPT_NAME}, "'/dir/env.psgi'", 'SCRIPT_NAME is the file\'s URL path');
is($e{PATH_INFO}, "'/more/path x'", 'PATH_INFO the rest, decoded');
is($e{REQUEST_URI}, "'/dir/env.psgi/more/path%20x?a=1&b=%41'", 'REQUEST_URI raw');
is($e{QUERY_STRING}, "'a=1&b=%41'", 'QUERY_STRING raw');
is($e{REQUEST_METHOD}, "'GET'", 'REQUEST_METHOD');
is($e{SERVER_PORT}, "'" . $s->port . "'", 'SERVER_PORT');
like($e{SERVER_PROTOCOL}, qr/^'HTTP\/1\.[01]'$/, 'SERVER_PROTOCOL');
is($e{HTTP_X_TEST}, "'v'", 'request headers as HTTP_*');
is($e{HTTP_AUTHORIZATION}, "'Basic abc'", 'Authorization passed to an app');
is($e{'psgi.input'}, 'GLOB', 'psgi.input a handle');
is($e{'psgi.errors'}, 'GLOB', 'psgi.errors a handle');
is($e{'psgi.multithread'}, $thread ? "'1'" : "''", 'psgi.multithread true to the mode');
is($e{'psgi.multiprocess'}, $thread ? "''" : "'1'", 'psgi.multiprocess true to the mode');
is($e{'psgi.run_once'}, "''", 'psgi.run_once false');
is($e{'psgi.nonblocking'}, "''", 'psgi.nonblocking false');
is($e{'psgi.streaming'}, "'1'", 'psgi.streaming true');
is($e{'psgix.input.buffered'}, "'1'", 'psgix.input.buffered true');
is($e{'psgix.harakiri'}, "'1'", 'psgix.harakiri true');
is($e{'psgix.cleanup'}, "'1'", 'psgix.cleanup true');
is($e{'psgix.cleanup.handlers'}, 'ARRAY[]', 'psgix.cleanup.handlers an empty array');
ok(!grep({ /^(?:PATH|PERL5LIB|PLXD_.*|HTTP_CONTENT_.*)$/ } keys %e), 'no process variables, no HTTP_CONTENT_*');
is($e{ENV_METHOD}, 'none', '%ENV holds no request variable');
is($e{ENV_PLACK}, 'deployment', '%ENV holds PLACK_ENV=deployment, as under Starman');
is($e{INPUT_IN_MEMORY}, -1, 'no body: psgi.input is in memory, no temporary file');
is($e{ENV_HTTP}, '', '... nor request headers');
ok(wait_for(sub { $s->error_log =~ m{\Q$root\E/dir/env\.psgi: a line for the log} }),
    'psgi.errors goes to the error log, naming the app');
%e = map { /^([^=]+)=(.*)$/ ? ($1 => $2) : () } split /\n/, $s->get('/dir/env.psgi')->{content};
is($e{PATH_INFO}, "''", 'PATH_INFO empty, not missing, at the mount point');
%e = map { /^([^=]+)=(.*)$/ ? ($1 => $2) : () } split /\n/,
    $s->get('/dir/env.psgi//a///b', { 'X-Forwarded-Proto' => 'https' })->{content};
is($e{PATH_INFO}, "'//a///b'", 'PATH_INFO keeps repeated slashes');
is($e{'psgi.url_scheme'}, "'https'", 'psgi.url_scheme https from a trusted proxy\'s X-Forwarded-Proto');

# ---- psgi.input ----
my $body = join '', map { chr($_ % 256) } 1 .. 3000;
$r = $s->request('POST', '/input.psgi', content => $body);
is($r->{content}, "5:" . substr($body, 0, 5) . ":3000:" . unpack('%32C*', $body) . ':memory',
    'psgi.input reads with an offset, seeks back, and reads it all');
my @chunked = responses($s->raw("POST /input.psgi HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    . "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"));
is($chunked[0]{body}, "5:hello:11:" . unpack('%32C*', 'hello world') . ':memory', 'a chunked body: the same');
# In memory up to 1 MB (and the read that crosses it), a file beyond.
for my $len ((1 << 20), (1 << 20) + 1, 3 << 20) {
    my $big = 'z' x $len;
    $r = $s->request('POST', '/input.psgi', content => $big);
    is($r->{content}, "5:zzzzz:$len:" . unpack('%32C*', $big) . ($len > (1 << 20) ? ':file' : ':memory'),
        "a body of $len bytes: the same, " . ($len > (1 << 20) ? 'from a temporary file' : 'in memory'));
}

# ---- responses ----
$r = $s->get('/forms.psgi?array');
is($r->{content}, 'array', 'an array body');
is_deeply($r->{headers}{'x-a'}, [1, 2], 'repeated headers kept');
is($s->get('/forms.psgi?glob')->{content}, $files{'forms.psgi'}, 'a file handle body');
unlink "$root/closed.txt";
is($s->get('/forms.psgi?object')->{content}, "a\nb\n", 'an object body with getline');
is(eval { read_file("$root/closed.txt") }, 'closed', '... and its close called');
$r = $s->get('/forms.psgi?path');
ok($r->{content} eq $files{'data.bin'}, 'a body with path: the whole file');
$r = $s->get('/forms.psgi?delayed');
is("$r->{status} $r->{content}", '201 delayed', 'the delayed responder');
$r = $s->get('/forms.psgi?stream');
is($r->{content}, 'one two', 'the streaming writer');
# A body the app framed in chunks itself, with Transfer-Encoding: chunked,
# as Mojolicious's write_chunk gives it: unframed, and framed by plxd.
for my $case (['te-array', 'one two', 'an array'], ['te-getline', 'first second', 'a getline'],
    ['te-writer', 'writer', 'a writer\'s']) {
    my ($q, $want, $what) = @$case;
    my ($res) = responses($s->raw(request_bytes('GET', "/forms.psgi?$q", 'Connection: close')));
    is("$res->{status} $res->{body}", "200 $want", "$what body the app framed in chunks, unframed");
    is(($res->{count}{'transfer-encoding'} // 0) + ($res->{count}{'content-length'} // 0), 1,
        "... framed once, by plxd");
}
for my $q (qw(te-bad te-short)) {
    is($s->get("/forms.psgi?$q")->{status}, 500, "$q: a body not in the chunks its header says: 500");
}
ok(wait_for(sub { $s->error_log =~ /after close: the PSGI writer was written to after close/ }),
    'a write after close dies with a clear message');

# Framing, on one kept connection.
my $c = $s->connect;
$c->syswrite(join '', map { request_bytes(@$_) } ['GET', '/forms.psgi?stream'],
    ['GET', '/forms.psgi?sized'], ['HEAD', '/forms.psgi?array'], ['GET', '/forms.psgi?204'],
    ['GET', '/forms.psgi?array']);
my @r = read_responses($c, 5, head => [2]);
is_deeply([map { $_->{status} } @r], [200, 200, 200, 204, 200], 'five answers on one connection');
is($r[0]{body}, 'one two', 'a stream that ended at once: whole, with a length');
is($r[1]{headers}{'content-length'}, 5, 'the app\'s Content-Length kept');
is($r[2]{body}, '', 'HEAD: no body');
ok(!defined $r[3]{headers}{'content-length'} && !defined $r[3]{headers}{'transfer-encoding'},
    '204: no framing');
# A stream still running: chunked, each write sent as it is written.
unlink "$root/slow.go";
$c = $s->connect;
$c->syswrite(request_bytes('GET', '/forms.psgi?slow'));
$c->blocking(0);
my $got = '';
my $more = sub { while (sysread($c, my $buf, 65536)) { $got .= $buf } };
ok(wait_for(sub { $more->(); $got =~ /first part;/ }),
    'a stream: its first write arrives while the app still runs');
like($got, qr/\r\nTransfer-Encoding: chunked\r\n/i, '... chunked, as it has no length');
write_file("$root/slow.go", '');
ok(wait_for(sub { $more->(); $got =~ /\r\n0\r\n\r\n\z/ }), '... its last chunk comes');
@r = responses($got);
is($r[0] && $r[0]{body}, 'first part;second part', '... the whole stream');
my @q = responses($s->raw(request_bytes('GET', '/forms.psgi?304')));
is($q[0]{status}, 304, '304');
ok(!defined $q[0]{headers}{'content-length'} && !defined $q[0]{headers}{'transfer-encoding'}
    && !defined $q[0]{headers}{'content-type'}, '304: no Content-Length, chunks or Content-Type');

for my $case (['crlf', 'header Content-Type has a CR, LF or control byte in its value'],
    ['badname', "bad header name 'Bad Name'"], ['badstatus', "bad status 'abc'"],
    ['hash', "the application returned 'HASH"]) {
    my ($q, $log) = @$case;
    $r = $s->get("/forms.psgi?$q");
    is($r->{status}, 500, "$q: 500");
    ok(!defined $r->{headers}{'x-injected'}, "$q: nothing the app wrote went out") if $q eq 'crlf';
    ok(wait_for(sub { $s->error_log =~ /\Q$root\E\/forms\.psgi: the PSGI application died: \Q$log\E/ }),
        "$q: a log line naming the app says why");
}

# A client that leaves during a streamed response: the writer's next write
# dies with a clear message, the cleanup handlers still run, and the
# interpreter serves on.
unlink "$root/endless.out";
$c = $s->connect;
$c->syswrite(request_bytes('GET', '/endless.psgi'));
$got = '';
$c->blocking(0);
ok(wait_for(sub { $more->(); $got =~ /xxxx/ }), 'an endless stream starts');
close $c;
ok(wait_for(sub { -s "$root/endless.out" }), 'the client left: the app ended, its cleanup handler ran');
is(eval { read_file("$root/endless.out") }, "the PSGI writer cannot write: the client left\n",
    '... its writer\'s write died saying why');
is($s->get('/forms.psgi?array')->{content}, 'array', 'the interpreter serves on');
unlike($s->error_log, qr/endless\.psgi.*(?:ran on|killed|ran past)/, '... not ended, nor replaced');

# ---- failures ----
is($s->get('/die.psgi')->{content}, 'alive 1', 'an app answers');
$r = $s->get('/die.psgi?die');
is($r->{status}, 500, 'an app that dies: 500');
ok(wait_for(sub { $s->error_log =~ /\Q$root\E\/die\.psgi: the PSGI application died: it broke/ }),
    '... and a log line naming the app');
is($s->get('/die.psgi')->{content}, 'alive 2', '... and the server, and the app, go on');
$r = $s->get('/notcode.psgi');
is($r->{status}, 500, 'a file whose last value is no code: 500');
ok(wait_for(sub { $s->error_log =~ /\Q$root\E\/notcode\.psgi: its last value is 42, not a PSGI application/ }),
    '... naming the file');
$r = $s->get('/closure.psgi');
is("$r->{status} $r->{content}", '200 x',
    'a named sub using a file-level lexical under fatal warnings: compiled at file scope, as by do FILE, it shares it');
unlike($s->error_log, qr/will not stay shared/, '... with no warning');
$r = $s->get('/syntax.psgi');
is($r->{status}, 500, 'an application with a syntax error: 500');
ok(wait_for(sub { $s->error_log =~ /\Q$root\E\/syntax\.psgi: the PSGI application did not load: Missing right curly or square bracket at \Q$root\E\/syntax\.psgi line \d+/ }),
    '... the log names the file and the line');
is($s->get('/stale.psgi?keep')->{status}, 500, 'a delayed response that never calls its responder: 500');
$r = $s->get('/stale.psgi?use');
is($r->{content}, "mine: the responder of an earlier request was called\n",
    "a responder kept from an earlier request dies when called: nothing of it reaches this request's client");
ok(!exists $r->{headers}{'x-leak'}, '... not even its header');
for my $q (qw(obj undef string hash wide wideheader)) {
    my ($got) = responses($s->raw(request_bytes('GET', "/body.psgi?$q")));
    is($got->{status}, 500, "a body that cannot be sent ($q), found before the head: 500, not a 200");
}
ok(wait_for(sub { $s->error_log =~ /body\.psgi: the PSGI application died: boom/
        && $s->error_log =~ /a wide character in the response body/ }), '... each with its reason logged');
for my $q (qw(stream getline)) {
    my $raw = $s->raw("GET /body.psgi?$q HTTP/1.1\r\nHost: x\r\n\r\n");
    like($raw, qr{^HTTP/1\.1 200 }, "a body that dies after its head ($q): the head went out");
    unlike($raw, qr/\r\n0\r\n\r\n\z/, '... and the response is cut short: no last chunk, the connection closed');
}
ok(wait_for(sub { $s->error_log =~ /body\.psgi: died; response cut short, connection closed/ }), '... logged');
is($s->get('/body.psgi')->{content}, "fine\n", '... and the app serves on');
$r = $s->get('/broken.psgi');
is($r->{status}, 500, 'a file that dies as it loads: 500');
ok(wait_for(sub { $s->error_log =~ /\Q$root\E\/broken\.psgi: the PSGI application did not load: cannot build the app/ }),
    '... naming the file');

is($s->get('/data.psgi')->{content}, "first=line one\nrest=line two\n",
    'its __DATA__: read as the file runs, and by the app at a request after');
is($s->get('/data.psgi')->{content}, "first=line one\nrest=", '... the same handle, read to its end');
is($s->get('/data.psgi?again')->{content}, "first=line one\nrest=line one\nline two\n",
    '... which seeks to the start of the text after __DATA__');

is($s->get('/Upper.PSGI')->{content}, 'upper', 'the extension in any case, as [handlers] matches it');

# ---- compiled once, recompiled on a change ----
my ($n1) = $s->get('/count.psgi')->{content} =~ /n=(\d+)/;
my ($n2) = $s->get('/count.psgi')->{content} =~ /n=(\d+)/;
is($n2, $n1 + 1, 'the app is built once and called per request');
is($s->get('/version.psgi')->{content}, 'v1', 'an app');
write_file("$root/version.psgi", qq{sub { [200, ['Content-Type' => 'text/plain'], ["v2 changed"]] }\n});
is($s->get('/version.psgi')->{content}, 'v2 changed', 'its file changed: recompiled');
is($s->get('/mod.psgi')->{content}, 'first', 'an app using a module');
write_file("$root/lib/PsgiMod.pm", qq{package PsgiMod;\nsub word { 'second one' }\n1;\n});
ok(wait_for(sub { $s->get('/mod.psgi')->{content} eq 'second one' }),
    'the module changed: the app is built again with it');

# ---- harakiri ----
my $before = $s->get('/count.psgi')->{content};
my $hk = $s->get('/count.psgi?harakiri')->{content};
my ($hn) = $hk =~ /n=(\d+)/;
ok(wait_for(sub { $s->error_log =~ /psgix\.harakiri\.commit/ }), 'harakiri: logged');
my $after = $s->get('/count.psgi')->{content};
is(($after =~ /n=(\d+)/)[0], 1, 'psgix.harakiri.commit: the next request has a fresh interpreter');
isnt(($after =~ /pid=(\d+)/)[0], ($hk =~ /pid=(\d+)/)[0], '... in a new worker process') unless $thread;

# ---- harakiri from a cleanup handler, the next request already sent ----
{
    unlink "$root/next-sent";
    my $first = $s->get('/latekill.psgi?commit');
    is($first->{status}, 200, 'harakiri from a cleanup handler: its request is answered');
    my $c = $s->connect;
    $c->syswrite(request_bytes('GET', '/latekill.psgi'));
    write_file("$root/next-sent", '');
    my ($next) = read_responses($c, 1, timeout => 20);
    is($next->{status}, 200, '... and the request sent meanwhile too, not a 500');
    my $third = $s->get('/latekill.psgi');
    is($third->{status}, 200, '... and the one after');
    isnt(($third->{content} =~ /pid=(\d+)/)[0], ($first->{content} =~ /pid=(\d+)/)[0],
        '... from a new worker: the old one retired') unless $thread;
}

# ---- cleanup handlers ----
unlink "$root/go", "$root/cleaned";
$r = $s->get('/cleanup.psgi');
is($r->{content}, 'answered', 'cleanup: the response');
ok(!-e "$root/cleaned", '... came before the cleanup handler ended');
write_file("$root/go", '');
ok(wait_for(sub { -s "$root/cleaned" }), 'the cleanup handler ran after it');
is(read_file("$root/cleaned"), 'after', '... once the response was out');
is($s->get('/cleanup.psgi')->{content}, 'answered', 'the app serves on');
# What runs after the answer is logged once the interpreter's next request
# comes (doc/psgi.md), as for a FastCGI-style script after Finish.
ok(wait_for(sub { $s->error_log =~ /cleanup\.psgi, after its request was answered: from the cleanup handler/ }),
    'what it prints goes to the log, naming the app');
ok(wait_for(sub { $s->error_log =~ /cleanup\.psgi, after its request was answered: a psgix\.cleanup handler died: second handler died/ }),
    'a handler that dies is logged; the others ran');

done_testing;
