# The status page ([status], server/status.c): who may see it (404 for
# everyone else, through a trusted proxy too, and with Expect: 100-continue
# the same bytes as for a missing file), the JSON schema doc/status.md
# documents, exact counters after a known load, the Perl workers' and
# scripts' rows, the CGI children, the Prometheus text, and the limits
# (an empty path turns it off; counters = off).
use strict;
use warnings;
use Test::More;
use HTTP::Tiny;
use JSON::PP;
use PlxdRaw qw(read_responses request_bytes responses);
use PlxdTest qw(wait_for write_file);

my $hello = qq{print "Content-Type: text/plain\\n\\nhello\\n";\n};
my $slow  = qq{select undef, undef, undef, (\$ENV{QUERY_STRING} =~ /(\\d+)/)[0] / 1000;\n}
    . qq{print "Content-Type: text/plain\\n\\nslept\\n";\n};
my %files = (
    'hello.html' => "<p>hello</p>\n",
    'hello.plx'  => $hello,
    'hello.pl'   => $hello,
    'slow.plx'   => $slow,
    'slow.pl'    => $slow,
);
my %handlers = ('.pl' => 'cgi', '.plx' => 'perl');

sub status_json {
    my ($s, $headers) = @_;
    my $res = $s->get('/plxd-status?json', $headers);
    return $res->{status} == 200 ? decode_json($res->{content}) : undef;
}

# A request that stays in flight: a slow script fetched on a socket of its own.
sub slow_request {
    my ($s, $path) = @_;
    my $sock = $s->connect;
    $sock->syswrite("GET $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    return $sock;
}

# Two more connections beside the status request: one idle between
# requests (its first answered, kept alive), one whose request head is still
# arriving. Returns them; they stay open while held.
sub idle_and_reading {
    my ($s) = @_;
    my $idle = $s->connect;
    $idle->syswrite(request_bytes('GET', '/hello.html'));
    my @r = read_responses($idle, 1);
    my $reading = $s->connect;
    $reading->syswrite("GET /hello.html HTTP/1.1\r\nHost: x\r\n");
    return ($idle, $reading);
}

# ---- the counters after a known load, and the schema -----------------------

my $s = PlxdTest->start(
    files    => \%files,
    handlers => \%handlers,
    sections => { perl => { workers => 2 } },
    server   => { threads => 2 },
);

my %load = ('/hello.html' => 7, '/hello.plx' => 5, '/hello.pl' => 3, '/missing.html' => 4);
for my $path (sort keys %load) {
    my $want = $path =~ /missing/ ? 404 : 200;
    my @got = grep { $s->get($path)->{status} == $want } 1 .. $load{$path};
    is(scalar @got, $load{$path}, "$path answered $want $load{$path} times");
}

# A request is counted when it ends, which may come just after its answer
# reached the client, and before its access-log line is written.
my $logged = 0;
$logged += $_ for values %load;
ok(wait_for(sub { (() = $s->access_log =~ /\n/g) >= $logged }), "the $logged requests logged");
my $res = $s->get('/plxd-status?json');
is($res->{status}, 200, '?json: 200 from loopback (the default allow)');
like($res->{headers}{'content-type'}, qr{^application/json}, '... as application/json');
my $d = eval { decode_json($res->{content}) };
ok($d, '... which parses') or diag($res->{content});

# Every key doc/status.md lists, with its type.
my $num = qr/^\d+(\.\d+)?$/;
sub is_num { defined $_[0] && !ref $_[0] && $_[0] =~ $num }
ok(is_num($d->{$_}), "$_ is a number") for qw(uptime_s generation pid threads);
ok(JSON::PP::is_bool($d->{counters}), 'counters is a boolean');
ok(!ref $d->{version} && length $d->{version}, 'version is a string');
ok(is_num($d->{connections}{$_}), "connections.$_ is a number") for qw(open reading writing idle);
ok(is_num($d->{requests}{total}), 'requests.total is a number');
for my $c (qw(1xx 2xx 3xx 4xx 5xx other)) {
    ok(is_num($d->{requests}{by_class}{$c}), "requests.by_class.$c is a number");
}
for my $h (qw(plxd status static cgi perl)) {
    my $row = $d->{requests}{by_handler}{$h};
    ok($row && is_num($row->{total}), "requests.by_handler.$h.total is a number");
    ok($row && is_num($row->{latency_us}{$_}), "... latency_us.$_ too") for qw(mean p50 p90 p99);
    ok($row && is_num($row->{by_class}{'2xx'}), '... and by_class');
}
is(ref $d->{workers}, 'ARRAY', 'workers is an array');
is(ref $d->{scripts}, 'ARRAY', 'scripts is an array');
is(ref $d->{handlers}, 'HASH', 'handlers is an object');
is($d->{generation}, 1, 'generation 1 before any reload');
is($d->{threads}, 2, 'threads: the event threads ([server] threads = 2)');
ok($d->{uptime_s} >= 0 && $d->{uptime_s} < 3600, 'uptime_s is seconds since the start');

# The counts, exact.
my $by = $d->{requests}{by_handler};
is($by->{static}{total}, 7, 'static: 7 requests');
is($by->{static}{by_class}{'2xx'}, 7, '... all 2xx');
is($by->{perl}{total}, 5, 'perl: 5 requests');
is($by->{perl}{by_class}{'2xx'}, 5, '... all 2xx');
is($by->{cgi}{total}, 3, 'cgi: 3 requests');
is($by->{plxd}{total}, 4, 'plxd (unrouted): the 4 missing files');
is($by->{plxd}{by_class}{'4xx'}, 4, '... all 4xx');
is($by->{status}{total}, 0, 'status: none before this one ended');
is($d->{requests}{total}, 19, 'requests.total: 19');
is($d->{requests}{by_class}{'2xx'}, 15, 'requests.by_class.2xx: 15');
is($d->{requests}{by_class}{'4xx'}, 4, 'requests.by_class.4xx: 4');
my $lat = $by->{perl}{latency_us};
ok($lat->{p50} > 0 && $lat->{p50} <= $lat->{p90} && $lat->{p90} <= $lat->{p99},
    'perl latency: 0 < p50 <= p90 <= p99') or diag(explain($lat));
ok($lat->{mean} > 0, '... and a mean');
is($d->{connections}{writing}, 1, 'connections.writing: this request');
ok($d->{connections}{open} >= 1, 'connections.open counts it');
is($d->{connections}{reading}, 0, 'connections.reading: none');

my $again = status_json($s);
is($again->{requests}{by_handler}{status}{total}, 1, 'the status request is counted when it ends');

# Workers: two rows, their requests adding up to the .plx requests.
my @w = grep { $_->{handler} eq 'perl' } @{ $d->{workers} };
is(scalar @w, 2, 'two perl workers ([perl] workers = 2)');
my $served = 0;
$served += $_->{requests} for @w;
is($served, 5, 'their requests add up to the 5 .plx requests');
for my $w (@w) {
    ok($w->{pid} > 0 && kill(0, $w->{pid}), "worker $w->{pid} is a live process");
    like($w->{state}, qr/^(idle|busy)$/, '... idle or busy');
    ok($w->{rss_kb} > 1000, '... with an RSS in KB') or diag($w->{rss_kb});
    ok(is_num($w->{$_}), "... $_ is a number") for qw(script_running_ms scripts_compiled);
}
my $compiled = 0;
$compiled += $_->{scripts_compiled} for @w;
ok($compiled >= 1 && $compiled <= 2, 'scripts_compiled: hello.plx, once per worker that ran it');
is($d->{handlers}{perl}{workers}, 2, 'handlers.perl.workers: 2');
ok(is_num($d->{handlers}{cgi}{children_running}), 'handlers.cgi.children_running is a number');

# Scripts: hello.plx, run 5 times.
my ($row) = grep { $_->{path} =~ m{/hello\.plx$} } @{ $d->{scripts} };
ok($row, 'a scripts row for hello.plx') or diag(explain($d->{scripts}));
is($row->{runs}, 5, '... 5 runs');
is($row->{compiles}, $compiled, '... compiled as often as the workers say');
ok(is_num($row->{run_mean_us}) && is_num($row->{run_p99_us}) && $row->{run_p99_us} > 0,
    '... a mean and a p99 in microseconds');

# A busy worker shows its script and for how long; a CGI child running counts.
my $plx = slow_request($s, '/slow.plx?ms=1500');
my $busy;
wait_for(sub {
    ($busy) = grep { $_->{state} eq 'busy' } @{ status_json($s)->{workers} };
    $busy && $busy->{script};
});
ok($busy && $busy->{script} =~ m{/slow\.plx$}, 'a busy worker names the script it runs');
ok($busy && wait_for(sub {
    my ($b) = grep { $_->{pid} == $busy->{pid} } @{ status_json($s)->{workers} };
    $b && $b->{state} eq 'busy' && $b->{script_running_ms} >= 100;
}), '... and for how long it has run it');
my $pl = slow_request($s, '/slow.pl?ms=1500');
ok(wait_for(sub { status_json($s)->{handlers}{cgi}{children_running} >= 1 }),
    'handlers.cgi.children_running counts a CGI script running');
ok(wait_for(sub { status_json($s)->{connections}{writing} >= 3 }),
    'connections.writing counts the requests in flight');
like(PlxdTest::read_until_closed($_, 30), qr/slept/, 'the slow requests end') for $plx, $pl;
ok(wait_for(sub { status_json($s)->{handlers}{cgi}{children_running} == 0 }),
    '... and children_running goes back to 0');

# The HTML page refreshes itself.
$res = $s->get('/plxd-status');
is($res->{status}, 200, 'the HTML page: 200');
like($res->{headers}{'content-type'}, qr{^text/html}, '... text/html');
like($res->{content}, qr/<meta http-equiv=refresh content=5>/, '... refreshing itself');
like($res->{content}, qr{<td>static</td><td class=n>7</td>}, '... with the static count');
like($res->{content}, qr{hello\.plx}, '... and the scripts');

# Prometheus text: every line a comment or NAME{LABELS} VALUE.
$res = $s->get('/plxd-status?prometheus');
is($res->{status}, 200, '?prometheus: 200');
like($res->{headers}{'content-type'}, qr{^text/plain; version=0\.0\.4}, '... text format 0.0.4');
my @bad = grep { !/^# (HELP|TYPE) / && !/^[a-z_:][a-z0-9_:]*(\{[a-z_]+="(?:[^"\\]|\\.)*"(,[a-z_]+="(?:[^"\\]|\\.)*")*\})? -?[0-9.]+(e[+-]?\d+)?$/ }
    split /\n/, $res->{content};
ok(!@bad, '... every line parses') or diag(explain(\@bad));
like($res->{content}, qr/^plxd_requests_total\{handler="static",class="2xx"\} 7$/m,
    '... plxd_requests_total for static 2xx: 7');
like($res->{content}, qr/^plxd_script_runs\{handler="perl",script="[^"]*\/hello\.plx"\} 5$/m,
    '... plxd_script_runs for hello.plx: 5');

is($s->request('POST', '/plxd-status', content => 'x')->{status}, 405, 'POST: 405');

# Connections by phase: with this request writing, one idle and one reading.
{
    my @held = idle_and_reading($s);
    my $c;
    ok(wait_for(sub { $c = status_json($s)->{connections}; $c->{open} == 3 && $c->{reading} == 1 }),
        'connections: one idle, one reading, this one') or diag(explain($c));
    is($c->{writing}, 1, '... writing: this request');
    is($c->{idle}, 1, '... idle: open less reading and writing');
    close $_ for @held;
}

# A reload: the next generation.
$s->signal('HUP');
ok(wait_for(sub { my $j = status_json($s); $j && $j->{generation} == 2 }), 'after SIGHUP, generation 2');
$s->stop;

# ---- who may see it --------------------------------------------------------

# Addresses from documentation ranges stand for clients elsewhere.
my $other = '203.0.113.9';
{
    my $r = PlxdTest->start(files => \%files, sections => { status => { allow => '10.0.0.0/8' } });
    for my $q ('', '?json', '?prometheus') {
        my $res = $r->get("/plxd-status$q");
        is($res->{status}, 404, "allow = 10.0.0.0/8: 127.0.0.1 gets 404 for /plxd-status$q");
        unlike($res->{content}, qr/uptime|plxd status/, '... and none of it');
    }
    is($r->request('POST', '/plxd-status')->{status}, 404, '... for POST too');
    is($r->get('/plxd-status', { 'X-Forwarded-For' => '10.1.2.3' })->{status}, 404,
        '... whatever X-Forwarded-For says when the peer is no trusted proxy');
    $r->stop;
}
{
    my $r = PlxdTest->start(files => \%files, server => { trusted_proxies => '127.0.0.1' });
    is($r->get('/plxd-status', { 'X-Forwarded-For' => $other })->{status}, 404,
        'through a trusted proxy, a client outside allow gets 404 (the nginx example)');
    is($r->get('/plxd-status', { 'X-Forwarded-For' => '127.0.0.1' })->{status}, 200,
        '... a loopback client through it, 200');
    is($r->get('/plxd-status')->{status}, 200, '... the proxy itself, asking without the header, 200');
    # An entry that is no address hides the client: unknown, never allowed
    # (the proxy's loopback address is not taken for it).
    for my $hidden ("$other:4711", 'unknown', '', 'fe80::1%eth0', "\"$other\"", "$other, junk") {
        is($r->get('/plxd-status', { 'X-Forwarded-For' => $hidden })->{status}, 404,
            "... X-Forwarded-For '$hidden' hides the client: 404");
    }
    is($r->get('/plxd-status', { 'X-Forwarded-For' => "junk, $other" })->{status}, 404,
        '... garbage left of the client is never read: the client, outside allow, 404');
    is($r->get('/plxd-status', { 'X-Forwarded-For' => "junk, 127.0.0.1, 127.0.0.1" })->{status}, 404,
        '... garbage left of trusted hops: unknown, 404');
    $r->stop;
}
{
    my $r = PlxdTest->start(files => \%files,
        server => { trusted_proxies => '127.0.0.1' }, sections => { status => { allow => $other } });
    is($r->get('/plxd-status', { 'X-Forwarded-For' => $other })->{status}, 200,
        'allow matches the client X-Forwarded-For names behind a trusted proxy');
    is($r->get('/plxd-status', { 'X-Forwarded-For' => "$other, 198.51.100.7" })->{status}, 404,
        '... the nearest untrusted hop, as for REMOTE_ADDR');
    is($r->get('/plxd-status')->{status}, 404, '... not the proxy');
    $r->stop;
}

# ---- Expect: 100-continue ---------------------------------------------------

# A client outside allow gets for the page's path what it gets for a missing
# file, byte for byte (but for the Date): no "100 Continue" before a 404,
# the same 404 at and past max_body. The peer is a trusted proxy, so that
# one plxd has a refused client (X-Forwarded-For) and a permitted one.
{
    my $r = PlxdTest->start(files => \%files,
        server => { trusted_proxies => '127.0.0.1', max_body => 1024 });
    # Everything plxd sends for a head, until it closes the connection.
    my $answer = sub {
        my ($target, @lines) = @_;
        my $got = $r->raw(request_bytes('POST', $target, @lines), 10);
        $got =~ s/^Date: [^\r]*\r$/Date: -\r/mi;
        return $got;
    };
    my @cases = (
        ['Content-Length: 5'], ['Content-Length: 1024'], ['Content-Length: 1025'],
        ['Transfer-Encoding: chunked'],
    );
    my $n = 0;
    for my $case (@cases) {
        my @lines = ("X-Forwarded-For: $other", @$case, 'Expect: 100-continue');
        my $page    = $answer->('/plxd-status', @lines);
        my $missing = $answer->('/missing.html', @lines);
        like($missing, qr{^HTTP/1\.1 404 }, "a missing file, @$case and Expect: 404 at once");
        is($page, $missing, "... the page's path to a client outside allow: the same bytes");
        unlike($page, qr{^HTTP/1\.1 100}m, '... no 100 Continue');
        $n += 2;
    }
    my $page = $answer->('/plxd-status?json', "X-Forwarded-For: $other", 'Connection: close');
    is($page, $answer->('/missing.html', "X-Forwarded-For: $other", 'Connection: close'),
        'without a body, the same bytes too');
    $n += 2;

    # The permitted client (the proxy itself) sees that none was the page's.
    my $j = status_json($r);
    is($j->{requests}{by_handler}{status}{total}, 0, "the refused requests are not the page's");
    is($j->{requests}{by_handler}{plxd}{total}, $n, "... they are plxd's, as the missing files");

    # It gets "100 Continue", then the answer after the body, and keeps
    # its connection; past max_body, 413 at once.
    my $c = $r->connect;
    $c->syswrite(request_bytes('POST', '/plxd-status', 'Content-Length: 5', 'Expect: 100-continue'));
    my @res = read_responses($c, 1, interim => 1);
    is($res[0]{status}, 100, 'a permitted client: 100 Continue for a POST');
    $c->syswrite('hello');
    @res = read_responses($c, 1, interim => 1);
    is($res[0]{status}, 405, '... then 405 after the body');
    is($res[0]{headers}{allow}, 'GET, HEAD', '... with Allow');
    $c->syswrite(request_bytes('GET', '/plxd-status?json', 'Content-Length: 1024',
        'Expect: 100-continue'));
    @res = read_responses($c, 1, interim => 1);
    is($res[0]{status}, 100, '... a GET of max_body bytes on the same connection: 100 Continue');
    $c->syswrite('x' x 1024);
    @res = read_responses($c, 1);
    is($res[0]{status}, 200, '... then the page');
    my $big = $r->raw(request_bytes('POST', '/plxd-status', 'Content-Length: 1025',
        'Expect: 100-continue'), 10);
    like($big, qr{\AHTTP/1\.1 413 }, '... one byte past max_body: 413, no 100 Continue');
    $c = $r->connect;
    $c->syswrite(request_bytes('POST', '/missing.html', 'Content-Length: 5', 'Expect: 100-continue'));
    @res = read_responses($c, 1, interim => 1);
    is($res[0]{status}, 404, 'a missing file with Expect: 404, no 100 Continue');
    is($res[0]{headers}{connection}, 'close', '... and the connection closes (the body is not read)');
    $r->stop;
}

# The same at a custom path, to a client refused as the peer itself (no
# proxy): nothing tells the page's path from a missing file's, so a path
# chosen to be hard to guess stays so.
{
    my $r = PlxdTest->start(files => \%files,
        sections => { status => { path => '/_private/st', allow => '10.0.0.0/8' } });
    my $answer = sub {
        my ($target, @lines) = @_;
        my $got = $r->raw(request_bytes('POST', $target, @lines, 'Expect: 100-continue'), 10);
        $got =~ s/^Date: [^\r]*\r$/Date: -\r/mi;
        return $got;
    };
    for my $case (['Content-Length: 5'], ['Transfer-Encoding: chunked']) {
        for my $target ('/_private/st', '/_private/st?json') {
            my $page = $answer->($target, @$case);
            my $missing = $answer->($target =~ s/st/sx/r, @$case);
            like($missing, qr{^HTTP/1\.1 404 }, "path = /_private/st: $target\'s neighbour, @$case: 404");
            is($page, $missing, "... $target to a client outside allow: the same bytes");
        }
    }
    $r->stop;
}

# ---- the file the page shadows ----------------------------------------------
{
    my $r = PlxdTest->start(files => { %files, 'plxd-status' => "a file\n", 'x/y' => "y\n" });
    for my $form ('//plxd-status', '/./plxd-status', '/%70lxd-status', '/x/../plxd-status',
        'http://127.0.0.1/plxd-status?json') {
        my ($res) = responses($r->raw("GET $form HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
        ok($res && $res->{status} != 200 && ($res->{body} // '') !~ /a file/,
            "$form: never the file at the page's path (" . ($res ? $res->{status} : 'no answer') . ')');
    }
    $r->stop;
}

# ---- limits ----------------------------------------------------------------

{
    my $r = PlxdTest->start(files => { %files, 'plxd-status' => "a file\n" },
        sections => { status => { path => '' } });
    my $res = $r->get('/plxd-status?json');
    is($res->{status}, 200, 'path empty: no page ...');
    is($res->{content}, "a file\n", '... a file of that name is served instead');
    $r->stop;
}
{
    my $r = PlxdTest->start(files => { %files, 'plxd-status' => "a file\n" },
        sections => { status => { path => '/_st' } });
    is($r->get('/_st?json')->{status}, 200, 'path = /_st: the page is there');
    is($r->get('/plxd-status')->{content}, "a file\n", '... and no longer at /plxd-status');
    is($r->get('/_st/x')->{status}, 404, '... only at its path exactly (/_st/x is no page)');
    is($r->get('/_stx')->{status}, 404, '... (nor /_stx)');
    $r->stop;
}
{
    my $r = PlxdTest->start(files => \%files, handlers => \%handlers,
        sections => { status => { counters => 'off' }, perl => { workers => 1 } });
    $r->get('/hello.html') for 1 .. 3;
    $r->get('/hello.plx') for 1 .. 2;
    # A worker counts a request once it has sent the response (its DONE
    # may come after the client has it).
    my $j;
    wait_for(sub { $j = status_json($r); $j && ($j->{workers}[0]{requests} // 0) == 2 });
    ok($j && !$j->{counters}, 'counters = off: the page says so');
    is($j->{requests}{total}, 0, '... and counts no request');
    is($j->{workers}[0]{requests}, 2, '... the workers are still shown');
    is(scalar @{ $j->{scripts} }, 0, '... but no per-script figures are kept');

    # No phase is kept, so idle cannot be told from open: left out (null),
    # never every open connection while requests are in flight.
    my @held = idle_and_reading($r);
    my $c;
    ok(wait_for(sub { $c = status_json($r)->{connections}; $c->{open} == 3 }),
        'counters = off: 3 connections open (one idle, one reading, this one)') or diag(explain($c));
    ok(exists $c->{$_} && !defined $c->{$_}, "... connections.$_ is null, not a count")
        for qw(reading writing idle);
    # The page's last client may not yet be seen gone: polled, as above.
    my $prom;
    ok(wait_for(sub { $prom = $r->get('/plxd-status?prometheus')->{content};
                      $prom =~ /^plxd_connections\{state="open"\} 3$/m }),
        '... Prometheus: open 3') or diag($prom);
    unlike($prom, qr/^plxd_connections\{state="(idle|reading|writing)"/m, '... and no phase');
    unlike($prom, qr/^plxd_requests_total|^plxd_request_duration_us/m,
        '... nor request counters that would say 0 for ever');
    ok(wait_for(sub { $r->get('/plxd-status')->{content}
                      =~ m{<td class=n>3</td><td class=n>-</td><td class=n>-</td><td class=n>-</td>} }),
        '... HTML: open 3, the phases -');
    close $_ for @held;

    # A busy worker notes no start without the counters: no time on its script.
    my $plx = slow_request($r, '/slow.plx?ms=1500');
    my $busy;
    ok(wait_for(sub { ($busy) = grep { $_->{state} eq 'busy' } @{ status_json($r)->{workers} }; $busy }),
        'counters = off: a busy worker');
    ok($busy && exists $busy->{script_running_ms} && !defined $busy->{script_running_ms},
        '... script_running_ms is null (not the time since the clock began)')
        or diag(explain($busy));
    ok($busy && !defined $busy->{script}, '... nor its script');
    unlike($r->get('/plxd-status?prometheus')->{content}, qr/^plxd_worker_script_running_ms/m,
        '... nor in Prometheus');
    like(PlxdTest::read_until_closed($plx, 30), qr/slept/, '... the slow request ends');
    $r->stop;
}
# ---- the interpreter threads of a thread-mode instance ----------------------

# [perl:thread] isolation = thread: its interpreters are the instance's
# worker rows, one per thread, with plxd's pid, in all three forms. gate.plt
# runs until the file its query names exists (busy for as long as the test
# says); hello.plt and env.plt are compiled once by the one thread that runs
# them (the first idle one: slot 0, as the requests come one at a time).
{
    my $gate = qq{my \$f = "\$ENV{DOCUMENT_ROOT}/\$ENV{QUERY_STRING}";\n}
        . qq{my \$until = time + 60;\n}
        . qq{select undef, undef, undef, 0.02 until -e \$f || time > \$until;\n}
        . qq{print "Content-Type: text/plain\\n\\nopened\\n";\n};
    my $t = PlxdTest->start(
        files    => { 'hello.plt' => $hello, 'env.plt' => $hello, 'gate.plt' => $gate },
        handlers => { '.plt' => 'perl:thread' },
        # The rows count what the interpreter threads served: nothing runs
        # inline on an event thread here (perl_inline.t).
        sections => { 'perl:thread' => { isolation => 'thread', workers => 2, inline_budget => 0 } },
    );
    is($t->get('/hello.plt')->{status}, 200, 'thread mode: hello.plt answers') for 1 .. 3;
    is($t->get('/env.plt')->{status}, 200, 'thread mode: env.plt answers') for 1 .. 2;
    # A thread is given back just after its response: counted by then.
    my ($j, @tw);
    wait_for(sub {
        $j = status_json($t);
        @tw = grep { $_->{handler} eq 'perl:thread' } @{ $j->{workers} };
        @tw && $tw[0]{requests} == 5;
    });
    is(scalar @tw, 2, 'thread mode: two worker rows, one per interpreter thread (workers = 2)');
    is($j->{handlers}{'perl:thread'}{workers}, 2, '... handlers."perl:thread".workers: 2');
    is_deeply([ map { $_->{pid} } @tw ], [ $j->{pid}, $j->{pid} ], "... each with plxd's own pid");
    is_deeply([ map { $_->{state} } @tw ], [qw(idle idle)], '... idle');
    is_deeply([ map { $_->{requests} } @tw ], [ 5, 0 ], '... requests: the 5 on the first thread');
    is_deeply([ map { $_->{scripts_compiled} } @tw ], [ 2, 0 ],
        '... scripts_compiled: hello.plt and env.plt, once each, on the thread that ran them')
        or diag(explain(\@tw));
    is_deeply([ map { $_->{rss_kb} } @tw ], [ 0, 0 ], "... rss_kb 0: a thread's memory is plxd's");
    my %compiles = map { ($_->{path} =~ m{/(\w+\.plt)$})[0] => $_->{compiles} } @{ $j->{scripts} };
    is_deeply(\%compiles, { 'hello.plt' => 1, 'env.plt' => 1 }, '... as the scripts rows say');

    # Busy: the thread names its script and for how long; the other is idle.
    my $held = slow_request($t, '/gate.plt?open');
    my $busy;
    ok(wait_for(sub {
        ($busy) = grep { $_->{handler} eq 'perl:thread' && $_->{state} eq 'busy' } @{ status_json($t)->{workers} };
        $busy && $busy->{script_running_ms} >= 50;
    }), 'thread mode: a thread running a script is busy, for a time in ms');
    like($busy && $busy->{script}, qr{/gate\.plt$}, '... naming its script');
    my $prom = $t->get('/plxd-status?prometheus')->{content};
    for my $fig (qw(requests scripts_compiled rss_kb script_running_ms)) {
        my @rows = $prom =~ /^plxd_worker_\Q$fig\E\{handler="perl:thread",(.*)$/mg;
        is(scalar @rows, 2, "Prometheus: plxd_worker_$fig has a series per thread");
        like($rows[0], qr/^slot="0",pid="$j->{pid}",state="busy"\} \d+$/, "... slot 0 busy, plxd's pid");
        like($rows[1], qr/^slot="1",pid="$j->{pid}",state="idle"\} \d+$/, '... slot 1 idle');
    }
    like($prom, qr/^plxd_worker_requests\{handler="perl:thread",slot="0",[^}]*\} 5$/m,
        '... requests 5 on slot 0');
    like($prom, qr/^plxd_worker_scripts_compiled\{handler="perl:thread",slot="0",[^}]*\} 2$/m,
        '... scripts_compiled 2 on slot 0');
    my $html = $t->get('/plxd-status')->{content};
    my @hrows = $html =~ m{^<tr><td>perl:thread</td>(<td class=n>\d+</td><td>(?:idle|busy)</td>.*)</tr>$}mg;
    is(scalar @hrows, 2, 'HTML: a Workers row per thread');
    my $n = '<td class=n>';
    like($hrows[0], qr{^$n$j->{pid}</td><td>busy</td><td>[^<]*/gate\.plt</td>$n\d+</td>${n}5</td>${n}0</td>${n}2</td>$},
        '... the busy one: its script, 5 requests, 2 compiles');
    like($hrows[1], qr{^$n$j->{pid}</td><td>idle</td><td></td>${n}0</td>${n}0</td>${n}0</td>${n}0</td>$},
        '... the idle one');
    write_file($t->root . '/open', '');
    like(PlxdTest::read_until_closed($held, 30), qr/opened/, '... gate.plt ends once its file exists');
    ok(wait_for(sub {
        my @r = grep { $_->{handler} eq 'perl:thread' } @{ status_json($t)->{workers} };
        "@{[map { qq{$_->{state}/$_->{requests}/$_->{scripts_compiled}} } @r]}" eq 'idle/6/3 idle/0/0';
    }), '... then idle again: 6 requests, 3 compiles');

    # A reload keeps the interpreters, and so their figures.
    $t->signal('HUP');
    ok(wait_for(sub { my $r = status_json($t); $r && $r->{generation} == 2 }), 'thread mode: after SIGHUP');
    is($t->get('/hello.plt')->{status}, 200, '... hello.plt answers');
    my @after;
    wait_for(sub {
        @after = grep { $_->{handler} eq 'perl:thread' } @{ status_json($t)->{workers} };
        $after[0]{requests} == 7;
    });
    is_deeply([ map { [ $_->{requests}, $_->{scripts_compiled} ] } @after ], [ [ 7, 3 ], [ 0, 0 ] ],
        '... the same interpreters: their counts go on, hello.plt not compiled again');
    $t->stop;
}

# 32 handler ids: plxd, status, then 29 section names of their own; the
# 30th section's requests and any later ones are counted as "other". The
# static section comes last (after the routes' sections).
for my $instances (28, 29) {
    my %routes = map { sprintf('.e%02d', $_) => sprintf('echo:e%02d', $_) } 1 .. $instances;
    my $r = PlxdTest->start(files => \%files, handlers => \%routes);
    $r->get('/hello.html') for 1 .. 2;
    # A request is counted when it ends, which may come just after its
    # answer reached the client: polled until both are.
    my $sections = $instances + 1;
    my $j;
    wait_for(sub {
        $j = status_json($r);
        my $by = $j->{requests}{by_handler};
        (($by->{$sections == 29 ? 'static' : 'other'} // {})->{total} // 0) >= 2;
    });
    if ($sections == 29) {
        is(scalar keys %{ $j->{requests}{by_handler} }, 31, "$sections sections: 31 handler rows, each named");
        is($j->{requests}{by_handler}{static}{total}, 2, '... static among them');
        ok(!exists $j->{requests}{by_handler}{other}, '... and no "other"');
    } else {
        is(scalar keys %{ $j->{requests}{by_handler} }, 32, "$sections sections: 32 handler rows");
        ok(!exists $j->{requests}{by_handler}{static}, '... the 30th section (static) has no row of its own');
        is($j->{requests}{by_handler}{other}{total}, 2, '... it is counted as "other"');
    }
    $r->stop;
}

for my $bad (['path', 'plxd-status', qr/\[status\] path|path/], ['allow', 'not-an-address', qr/allow/],
        ['counters', 'maybe', qr/counters/]) {
    my ($key, $value, $re) = @$bad;
    my $dir = File::Temp::tempdir(CLEANUP => 1);
    write_file("$dir/plxd.conf", "[status]\n$key = $value\n");
    my ($status, undef, $err) = PlxdTest::run_plxd('--check', '--config', "$dir/plxd.conf");
    isnt($status, 0, "[status] $key = $value is refused at start");
    like($err, qr/plxd\.conf:2: .*$key/, '... naming file, line and key') or diag($err);
}

# ---- a backslash in a script's path ------------------------------------------
# It is "\\" in the JSON, which JSON::PP then parses back to the path, and
# "\\" in a Prometheus label: for a .plx (a worker) and a .plt (an
# interpreter thread), in the scripts rows and in a busy worker's row.
{
    my $gate = qq{select undef, undef, undef, 0.05 until -e "open";\n}
        . qq{print "Content-Type: text/plain\\n\\nopened\\n";\n};
    my $r = PlxdTest->start(
        files => { 'back\\slash.plx' => $hello, 'back\\slash.plt' => $hello,
                   'gate\\d.plx' => $gate },
        handlers => { '.plx' => 'perl', '.plt' => 'perl:thread' },
        sections => { perl => { workers => 1 },
                      'perl:thread' => { isolation => 'thread', workers => 1 } });
    my $root = $r->root;
    for my $ext ('plx', 'plt') {
        is($r->get("/back%5Cslash.$ext")->{content}, "hello\n", "/back%5Cslash.$ext answers");
    }
    my $res = $r->get('/plxd-status?json');
    my $j = eval { decode_json($res->{content}) };
    ok($j, '?json with backslashes in script paths parses') or diag($@);
    my %paths = map { ($_->{path} => $_->{handler}) } @{ $j ? $j->{scripts} : [] };
    is($paths{"$root/back\\slash.plx"}, 'perl', '... the .plx row has the path, backslash and all')
        or diag(explain($j && $j->{scripts}));
    is($paths{"$root/back\\slash.plt"}, 'perl:thread', '... and so has the .plt row');
    like($res->{content}, qr{"\Q$root\E/back\\\\slash\.plx"}, '... written as \\\\ in the text');
    my $prom = $r->get('/plxd-status?prometheus')->{content};
    like($prom, qr{^plxd_script_runs\{handler="perl",script="\Q$root\E/back\\\\slash\.plx"\} 1$}m,
        'Prometheus: \\\\ in the script label');

    my $held = slow_request($r, '/gate%5Cd.plx');
    my $busy;
    ok(wait_for(sub {
        my $d = eval { decode_json($r->get('/plxd-status?json')->{content}) } or return 0;
        ($busy) = grep { $_->{state} eq 'busy' } @{ $d->{workers} };
        $busy && $busy->{script};
    }), 'a busy worker on a script with a backslash: ?json parses');
    is($busy && $busy->{script}, "$root/gate\\d.plx", '... its script row names the path');
    write_file("$root/open", '');
    like(PlxdTest::read_until_closed($held, 30), qr/opened/, '... the script ends once its file exists');
    $r->stop;
}

done_testing;
