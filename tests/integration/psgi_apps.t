# Real applications on Debian's frameworks (tests/integration/psgi_apps/:
# Mojolicious::Lite, Dancer2, Catalyst, Web::Simple, a Plack::Builder stack
# with Session, Static and Deflater), each served by plxd ([mount] / =, two
# workers) and by plackup (HTTP::Server::PSGI, -E deployment, the
# reference), the same requests sent to both and the responses compared:
# GET, HEAD, POST forms, multipart uploads, cookies, sessions, redirects,
# streaming, a route that dies, a missing route. Run in both isolation
# modes (PLXD_TEST_ISOLATION, tests/CMakeLists.txt).
#
# What the comparison leaves out, and why (normalise below):
# - Date (the clock) and Server (each server names itself);
# - Content-Length and Transfer-Encoding: the framing is the server's
#   choice (doc/psgi.md, "The response"); the body each frames is compared,
#   and a Content-Length, where given, is checked against its body;
# - Connection and Keep-Alive: the servers' connection handling differs
#   (HTTP::Server::PSGI closes every connection);
# - X-Interp, the fixtures' own header naming the interpreter that
#   answered: it differs by design, and is counted instead;
# - the loopback port in URLs (absolute redirects, error pages): each server
#   has its own;
# - a session cookie's value and any cookie's Expires: a session id or a
#   signed, timestamped session is different at each issue;
# - the request id in Mojolicious's error pages, new for each request.
# The bodies of error pages a framework makes (a route that dies under
# Mojolicious, Dancer2 or Catalyst, their pages for a missing route) are
# compared like any other: each renders its own page from the status, with
# nothing of the server in it. Where the app dies and no framework catches
# it (Web::Simple, the bare Builder stack), the 500 is the server's own:
# HTTP::Server::PSGI answers "Internal Server Error" as text/plain, plxd
# its HTML error page; only the status is compared, and plxd's log is
# checked for the app's message.
# HTTP::Server::PSGI sends the app's body in answer to HEAD when the app
# gives one (Web::Simple and the bare stack do; the frameworks leave it out
# themselves); plxd sends none, as HTTP requires: only plxd's is checked.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for source_dir read_file thread_mode);
use PlxdServer;
use IO::Socket::IP;

my $fixtures = source_dir() . '/tests/integration/psgi_apps';
my $plackup = '/usr/bin/plackup';
-x $plackup or BAIL_OUT("$plackup is missing: install libplack-perl (setup.sh)");

# Cookies whose value is a session (an id, or the signed session itself).
my %session_cookie = map { $_ => 1 } qw(mojolicious dancer.session plack_session memory_session);

my $upload_data = join '', map { chr(($_ * 7) % 256) } 0 .. 2999;
my $boundary = 'plxd-psgi-apps-boundary';
my $multipart = join "\r\n", "--$boundary",
    'Content-Disposition: form-data; name="note"', '', 'a note',
    "--$boundary",
    'Content-Disposition: form-data; name="file"; filename="up.bin"',
    'Content-Type: application/octet-stream', '', $upload_data,
    "--$boundary--", '';

# The requests every application answers: [name, method, path, headers, body].
my @common = (
    ['GET', 'GET', '/hello?name=plxd'],
    ['GET without a query', 'GET', '/hello'],
    ['HEAD', 'HEAD', '/hello?name=plxd'],
    ['POST form', 'POST', '/form', ['Content-Type' => 'application/x-www-form-urlencoded'],
        'a=1&b=two+words&b=three&c=%26%3D'],
    ['POST multipart upload', 'POST', '/upload',
        ['Content-Type' => "multipart/form-data; boundary=$boundary"], $multipart],
    ['a cookie set', 'GET', '/cookie/set'],
    ['the cookie sent back', 'GET', '/cookie/get'],
    ['a redirect', 'GET', '/redirect'],
    ['a stream', 'GET', '/stream'],
    ['a route that dies', 'GET', '/die'],
    ['no such route', 'GET', '/nowhere'],
);
# Routes whose app dies uncaught: the server answers (see the top).
my %server_answers = (web_simple => { '/die' => 1 }, builder => { '/die' => 1 });
my %extra = (
    mojolicious => [['a stream with write', 'GET', '/stream-write']],
    builder     => [
        ['a static file', 'GET', '/static/hello.txt'],
        ['a static file, gzip', 'GET', '/static/hello.txt', ['Accept-Encoding' => 'gzip']],
        ['a missing static file', 'GET', '/static/none.txt'],
        ['GET, gzip', 'GET', '/hello?name=plxd', ['Accept-Encoding' => 'gzip']],
        ['a stream, gzip', 'GET', '/stream', ['Accept-Encoding' => 'gzip']],
    ],
);

# PLXD_TEST_APPS=NAME... runs those only.
for my $app (split ' ', $ENV{PLXD_TEST_APPS} // 'mojolicious dancer2 catalyst web_simple builder') {
    subtest $app => sub { compare_app($app) };
}
done_testing;

sub compare_app {
    my ($app) = @_;
    my %files = ("$app.psgi" => read_file("$fixtures/$app.psgi"));
    $files{'static/hello.txt'} = read_file("$fixtures/static/hello.txt") if $app eq 'builder';
    my $plxd = PlxdTest->start(
        files    => \%files,
        handlers => { '.psgi' => 'perl' },
        # Workers retire after 40 requests: the framework is loaded again
        # in a fresh one while the other serves (interpreter threads have
        # no max_requests, doc/perl.md).
        sections => { mount => { '/' => "root/$app.psgi" }, perl => { workers => 2, max_requests => 40 } },
    );
    my $root = $plxd->root;
    # The session folders, shared by plxd's workers and plackup, writable
    # by plxd after it dropped its privileges.
    for (qw(dancer2-sessions plack-sessions)) { mkdir "$root/$_"; chmod 01777, "$root/$_" }
    my $ref = start_plackup("$root/$app.psgi", $plxd->dir);
    my %server = (plxd => $plxd->url, plackup => $ref->{url});
    my %jar = (plxd => {}, plackup => {});
    # First, before any worker retires (max_requests above).
    memory_sessions($server{plxd}) if $app eq 'builder';

    for my $r (@common, @{ $extra{$app} || [] }) {
        my %res = map { $_ => send_one($server{$_}, $jar{$_}, $r) } keys %server;
        if ($server_answers{$app}{ $r->[2] }) {
            is($res{plxd}{status}, $res{plackup}{status}, "$r->[0]: plxd answers with plackup's status");
            ok(!$res{plxd}{error}, "$r->[0]: plxd's response is well framed") or diag($res{plxd}{error});
        } else {
            compare($r->[0], \%res, $r->[1] eq 'HEAD');
        }
        if ($r->[2] eq '/die') {
            is($res{plxd}{status}, 500, "$app: a route that dies answers 500");
        }
    }
    is($jar{plxd}{flavour}, 'oat', "$app: the cookie was set");

    # Sessions across requests, two at a time, so that both of plxd's
    # interpreters serve some: each must see what the other stored.
    my %interp;
    for my $v (qw(first second third)) {
        my %set = map { $_ => send_one($server{$_}, $jar{$_}, ["session set $v", 'GET', "/session/set?v=$v"]) }
            keys %server;
        compare("session set $v", \%set);
        for my $round (1 .. 4) {
            my %got;
            for my $s (keys %server) {
                $got{$s} = send_together($server{$s}, $jar{$s}, map { ["session get $v", 'GET', '/session/get'] } 1 .. 2);
            }
            for my $i (0 .. 1) {
                compare("session get $v, $round.$i", { map { $_ => $got{$_}[$i] } keys %got });
                is($got{plxd}[$i]{body}, "v=$v", "$app: the session holds v=$v ($round.$i)");
                $interp{ $got{plxd}[$i]{headers}{'x-interp'}[0] // '' }++;
            }
        }
    }
    ok(keys %interp >= 2, "$app: both of plxd's interpreters served the session")
        or diag(explain \%interp);

    # Two at a time on plxd alone: in thread mode, the framework's modules
    # in two interpreter threads at once; in process mode, past several
    # workers' retirements.
    my ($good, %seen) = (0);
    for (1 .. 60) {
        for my $res (@{ send_together($server{plxd}, {}, map { ['GET', 'GET', '/hello?name=plxd'] } 1 .. 2) }) {
            $good++ if $res->{status} == 200 && $res->{body} eq 'hello plxd';
            $seen{ $res->{headers}{'x-interp'}[0] // '' }++;
        }
    }
    is($good, 120, "$app: 120 requests two at a time, each answered");
    if (PlxdTest::inline_mode()) {
        # Proven short, a route runs on the event threads' interpreters,
        # as many as there are event threads the connections landed on.
        ok(keys %seen >= 1, "$app: inline, by the event threads' interpreters") or diag(explain \%seen);
    } elsif (thread_mode()) {
        is(keys %seen, 2, "$app: by both interpreter threads") or diag(explain \%seen);
    } else {
        ok(keys %seen > 2, "$app: by workers replaced as they retired") or diag(explain \%seen);
    }

    stop_plackup($ref);
    unlike($plxd->error_log, qr/\[(?:alert|crit)\]/, "$app: no alert in plxd's log");
    like($plxd->error_log, qr/the PSGI application died: boom/, "$app: the route that died is in the log")
        if $app eq 'builder' || $app eq 'web_simple';
    $plxd->stop;
}

# A session in the memory of the interpreter that stored it (Plack's
# default store) is that interpreter's alone: the others answer without it,
# as each of Starman's workers would.
sub memory_sessions {
    my ($plxd) = @_;
    my %jar;
    my $set = send_one($plxd, \%jar, ['memory set', 'GET', '/memory/set?v=kept']);
    my $setter = $set->{headers}{'x-interp'}[0] // '';
    my ($with, $without, $wrong) = (0, 0, 0);
    # Two at a time until both interpreters have answered (a loaded
    # machine may give one of them many pairs in a row).
    for my $round (1 .. 100) {
        last if $round > 6 && $with && $without;
        for my $res (@{ send_together($plxd, {%jar}, map { ['memory get', 'GET', '/memory/get'] } 1 .. 2) }) {
            my $here = ($res->{headers}{'x-interp'}[0] // '') eq $setter;
            if ($here && $res->{body} eq 'v=kept') { $with++ }
            elsif (!$here && $res->{body} eq 'v=') { $without++ }
            else { $wrong++ }
        }
    }
    is($wrong, 0, 'builder: a session in memory: kept by the interpreter that stored it, missing in the others');
    ok($with && $without, '... both seen') or diag("with it: $with, without: $without");
}

sub start_plackup {
    my ($file, $dir) = @_;
    my ($srv, $port);
    for my $try (1 .. 5) {
        $port = free_port();
        $srv = PlxdServer->spawn(name => 'plackup', stderr => "$dir/plackup.log",
            cmd => [$plackup, '-s', 'HTTP::Server::PSGI', '-E', 'deployment',
                    '--host', '127.0.0.1', '--port', $port, $file]);
        # Ready once it accepts a connection; a port taken meanwhile ends it.
        my $up = wait_for(sub {
            return -1 if defined $srv->wait_exit(0);
            IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $port, Proto => 'tcp') ? 1 : 0;
        }, 60);
        last if $up && $up > 0;
        $srv->stop(grace => 5) if $srv->running;
        diag("plackup on port $port did not start: " . read_file("$dir/plackup.log"));
        undef $srv;
    }
    $srv or BAIL_OUT('plackup did not start');
    return { srv => $srv, url => "http://127.0.0.1:$port/" };
}

sub stop_plackup { $_[0]{srv}->stop(grace => 10) }

sub free_port {
    my $s = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Proto => 'tcp', Listen => 1)
        or die "no free port: $@";
    return $s->sockport;
}

sub request_bytes {
    my ($base, $jar, $r) = @_;
    my (undef, $method, $path, $headers, $body) = @$r;
    my ($hostport) = $base =~ m{^http://([^/]+)};
    my $req = "$method $path HTTP/1.1\r\nHost: $hostport\r\nConnection: close\r\n";
    my @h = @{ $headers || [] };
    while (my ($k, $v) = splice @h, 0, 2) { $req .= "$k: $v\r\n" }
    $req .= 'Cookie: ' . join('; ', map { "$_=$jar->{$_}" } sort keys %$jar) . "\r\n" if %$jar;
    $req .= 'Content-Length: ' . length($body) . "\r\n" if defined $body;
    return $req . "\r\n" . ($body // '');
}

sub send_one { return send_together($_[0], $_[1], $_[2])->[0] }

# Sends each request on a connection of its own, all before reading any
# answer, and returns the parsed responses in the same order; the cookie
# jar takes the Set-Cookie headers of each, in that order.
sub send_together {
    my ($base, $jar, @reqs) = @_;
    my ($host, $port) = $base =~ m{^http://([^:/]+):(\d+)};
    my @socks = map {
        IO::Socket::IP->new(PeerHost => $host, PeerPort => $port, Proto => 'tcp') // die "connect $base: $@";
    } @reqs;
    $socks[$_]->syswrite(request_bytes($base, $jar, $reqs[$_])) for 0 .. $#reqs;
    my @res;
    for my $i (0 .. $#reqs) {
        my $raw = PlxdTest::read_until_closed($socks[$i], 30);
        push @res, parse_response($raw, $reqs[$i][1]);
        for my $c (@{ $res[-1]{headers}{'set-cookie'} || [] }) {
            my ($n, $v) = $c =~ /^\s*([^=;\s]+)=([^;]*)/ or next;
            if ($c =~ /expires=[^;]*19[0-9]{2}|max-age=0\b/i) { delete $jar->{$n} } else { $jar->{$n} = $v }
        }
    }
    return \@res;
}

# Status, headers (names lower-cased, each a list of values in order) and
# the body, de-chunked; framing errors are noted in {error}.
sub parse_response {
    my ($raw, $method) = @_;
    my %res = (raw_length => length $raw, headers => {});
    my ($head, $body) = split /\r\n\r\n/, $raw, 2;
    if (!defined $body || $head !~ m{^HTTP/1\.[01] (\d{3})}) {
        return { %res, status => 0, body => '', error => "no response: '" . substr($raw, 0, 200) . "'" };
    }
    $res{status} = $1;
    for my $line (split /\r\n/, $head) {
        next unless $line =~ /^([^:\s]+):\s*(.*?)\s*$/;
        push @{ $res{headers}{ lc $1 } }, $2;
    }
    my $te = join ',', @{ $res{headers}{'transfer-encoding'} || [] };
    my $cl = $res{headers}{'content-length'};
    if ($method eq 'HEAD') {
        $res{error} = 'a body in answer to HEAD' if length $body;
        $body = '';
    } elsif ($te =~ /chunked/i) {
        my $out = '';
        while ($body =~ s/^([0-9a-fA-F]+)[^\r\n]*\r\n//) {
            my $n = hex $1;
            if ($n == 0) { $res{last_chunk} = 1; last }
            $out .= substr($body, 0, $n, '');
            $body =~ s/^\r\n// or $res{error} = 'a chunk not ended by CRLF';
        }
        $res{error} //= 'no last chunk' unless $res{last_chunk};
        $body = $out;
    } elsif ($cl) {
        $res{error} = "Content-Length $cl->[0], body " . length($body) if $cl->[0] != length $body;
    }
    $res{body} = $body;
    return \%res;
}

# What is compared of a response (the list at the top says what is not).
sub normalise {
    my ($res) = @_;
    my $h = $res->{headers};
    my @lines = ("status $res->{status}");
    for my $name (sort keys %$h) {
        next if $name =~ /^(?:date|server|content-length|transfer-encoding|connection|keep-alive|x-interp)$/;
        for my $v (@{ $h->{$name} }) {
            my $n = $v =~ s{127\.0\.0\.1:\d+}{HOST}gr;
            if ($name eq 'set-cookie') {
                $n =~ s/^(\s*([^=;\s]+)=)[^;]*/$1*/ if $session_cookie{ ($n =~ /^\s*([^=;\s]+)=/)[0] };
                $n =~ s/(expires=)[^;]*/$1*/gi;
            }
            # Web::Simple answers every unknown route with one array, kept
            # in its interpreter, into which Session::Cookie pushes its
            # Set-Cookie again at each 404: how many the same line comes
            # says how many 404s that interpreter served, not the server.
            push @lines, "$name: $n" unless grep { $_ eq "$name: $n" } @lines;
        }
    }
    my $body = $res->{body} =~ s{127\.0\.0\.1:\d+}{HOST}gr;
    $body =~ s/(<!-- Request ID: )\S+/$1*/;
    return join("\n", @lines) . "\n\n" . $body;
}

sub compare {
    my ($what, $res, $head) = @_;
    my ($p, $r) = @$res{qw(plxd plackup)};
    ok(!$p->{error}, "$what: plxd's response is well framed") or diag($p->{error});
    ok(!$r->{error}, "$what: plackup's response is well framed") or diag($r->{error}) unless $head;
    is(normalise($p), normalise($r), "$what: plxd answers as plackup does");
}
