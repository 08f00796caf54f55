# The handler interface through the echo module: loading by name and by
# load = PATH, routing by extension, the request a handler sees, the body
# (in memory, spooled, chunked, too large), the always-called finished hook,
# and a blocking handler that holds up only its own connection.
use strict;
use warnings;
use Test::More;
use Digest::SHA ();
use File::Copy qw(copy);
use IO::Select;
use File::Temp ();
use PlxdTest qw(build_dir wait_for);
use PlxdRaw qw(responses read_responses);

my $s = PlxdTest->start(
    files    => { 'a.echo' => "not served\n", 'dir/b.ECHO' => "x\n", 'plain.txt' => "plain\n" },
    handlers => { '.echo' => 'echo' },
    sections => { echo => { greeting => 'hello from echo' } },
    server   => { max_body => '2M' },
);

my $res = $s->get('/a.echo?x=1&y=%20');
is($res->{status}, 200, 'mapped extension goes to the handler');
like($res->{content}, qr/^hello from echo\n/, 'the handler reads its own section');
like($res->{content}, qr/^method GET$/m, 'method');
like($res->{content}, qr/^query x=1&y=%20$/m, 'raw query, undecoded');
like($res->{content}, qr/^file \Q${\ $s->root}\E\/a\.echo$/m, 'file under the root');
like($res->{content}, qr/^header Host: /m, 'headers');

$res = $s->get('/dir/b.ECHO/more/path');
like($res->{content}, qr/^script_name \/dir\/b\.ECHO$/m, 'extension matched in any case');
like($res->{content}, qr/^path_info \/more\/path$/m, 'PATH_INFO after the file');

is($s->get('/plain.txt')->{content}, "plain\n", 'unmapped files go to the static handler');
is($s->get('/missing.echo')->{status}, 404, 'a missing script is 404 before any handler');
like($s->get('/missing.echo')->{content}, qr{<title>404 Not Found</title>.*<h1>404 Not Found</h1>}s,
    "plxd's error page names the status with libmicrohttpd's reason phrase");

# Bodies: small (memory), large (temp file), chunked.
my $small = 'a=1&b=2';
$res = $s->request('POST', '/a.echo', content => $small);
like($res->{content}, qr/^body_length 7$/m, 'body length');
like($res->{content}, qr/\nbody\n\Q$small\E\z/, 'small body reaches the handler');
my $big = join '', map { chr(ord('a') + $_ % 26) x 1000 } 0 .. 1023;    # 1,024,000 bytes
$res = $s->request('POST', '/a.echo', content => $big);
my ($echoed) = $res->{content} =~ /\nbody\n(.*)\z/s;
ok(defined $echoed && $echoed eq $big, 'a 1 MB body is spooled and read back byte for byte');
my @chunks = ('x' x 100, 'y' x 200);
$res = $s->request('POST', '/a.echo', content => sub { shift @chunks });
like($res->{content}, qr/^body_length 300$/m, 'a chunked body is spooled whole');

# Over max_body: by Content-Length (refused before reading) and chunked.
my $raw = $s->raw("POST /a.echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000\r\n\r\n");
like($raw, qr{^HTTP/1\.1 413 }, 'Content-Length over max_body is 413');
like($raw, qr/^Connection: close\r$/mi, 'and closes the connection');
like($raw, qr{<h1>413 Content Too Large</h1>}, "its page, with libmicrohttpd's phrase for 413 (RFC 9110's)");
is(scalar(my @r413 = responses($raw)), 1, '... one response, framed exactly');
my $chunked = "POST /a.echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
$chunked .= sprintf("%x\r\n%s\r\n", 65536, 'z' x 65536) for 1 .. 40;
$chunked .= "0\r\n\r\n";
$raw = $s->raw($chunked);
like($raw, qr{^HTTP/1\.1 413 }, 'a chunked body growing over max_body: 413');
ok(scalar(my @rc = responses($raw)) <= 1, '... no more than one response, framed exactly');
ok($s->wait_log(qr/grew past max_body/), 'its connection is closed as soon as it does, and logged');
like($s->access_log, qr{"POST /a\.echo HTTP/1\.1" 413 }m, 'the access log says 413');

# finished(): once per request, with how it ended.
my $stats = sub { $s->get('/a.echo?stats')->{content} };
my ($done_before) = $stats->() =~ /done=(\d+)/;
$s->get('/a.echo');
# finished() runs once a response is sent, maybe after its client has read
# it, on its own event thread: polled. Before the n-th poll, the GET, the
# first stats request and n - 1 polls were complete: done counts each once.
my ($polls, $done_after) = (0);
ok(wait_for(sub { ($done_after) = $stats->() =~ /done=(\d+)/; $done_after == $done_before + 1 + ++$polls }),
    'finished(done) after each complete request (and the stats ones)')
    or diag("done=$done_after after $polls polls, from $done_before");

# TCP delivers the partial body before the close, however late plxd reads.
my $sock = $s->connect;
$sock->syswrite("POST /a.echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npartial");
close $sock;
ok(wait_for(sub { $stats->() =~ /client_gone=([1-9]\d*)/ }, 10),
    'finished(client gone) for a client that left mid-body, before handle ran');

# A handler blocking in one request does not hold up another: once the
# sleeping request is in its handler (one more handled than finished, the
# stats request itself aside), another is answered before it. The sleep
# (6 s) is far longer than a request takes on a loaded machine.
my $in_handler = sub {
    my ($handled, @finished) = $stats->() =~ /(\d+)/g;
    my $finished = 0;
    $finished += $_ for @finished;
    return $handled - $finished - 1;
};
my $before = $in_handler->();
my $slow = $s->connect;
$slow->syswrite("GET /a.echo?sleep=6000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
ok(wait_for(sub { $in_handler->() > $before }), 'a request sleeps in its handler');
$res = $s->get('/plain.txt');
is($res->{status}, 200, 'another request is answered while one handler sleeps');
ok(!IO::Select->new($slow)->can_read(0), '... before the sleeping one');
my ($slow_answer) = read_responses($slow, 1);
is($slow_answer && $slow_answer->{status}, 200, 'the sleeping request is answered too');
$s->stop;

# load = PATH names the module file explicitly.
my $copy = File::Temp::tempdir(CLEANUP => 1) . '/echo-copy.so';
copy(build_dir() . '/modules/echo.so', $copy) or die "copy: $!";
my $l = PlxdTest->start(
    files    => { 'x.echo' => '' },
    handlers => { '.echo' => 'echo' },
    sections => { echo => { load => $copy, greeting => 'loaded by path' } },
);
like($l->get('/x.echo')->{content}, qr/^loaded by path\n/, 'load = PATH loads the module from there');
like($l->error_log, qr/echo: started/, 'start() was called');
$l->stop;
like($l->error_log, qr/echo: stopped/, 'stop() was called at shutdown');

# How modules are loaded (server/modules.c): RTLD_LOCAL, so that no module
# sees another's symbols; libperl global only once a plugin that names it as
# its global_library is loaded (plxd_plugin_load, the way perl.so loads
# plxd-perl-threads.so). The probes (tests/modules/probe.c) log what they
# see.
my $probes = build_dir() . '/tests/modules';
my $local = PlxdTest->start(
    sections => { probe_a => { load => "$probes/probe_a.so" }, probe_b => { load => "$probes/probe_b.so" } });
my $seen = $local->error_log;
like($seen, qr/probe_b: plxd_probe_a is not visible/, 'a module loaded first is RTLD_LOCAL: the next one does not see its symbols');
like($seen, qr/probe_a: plxd_probe_b is not visible/, '... nor the other way round');
like($seen, qr/probe_b: plxd_log is visible/, "plxd's own exported symbols are");
like($seen, qr/probe_b: Perl_xs_handshake is not visible/, "libperl's are not, when no plugin asked for them");
$local->stop;
SKIP: {
    skip 'perl has no shared libperl here', 4 unless -e "$probes/probe_perl.so";
    my $global = PlxdTest->start(
        sections => { probe_b => { load => "$probes/probe_b.so" }, probe_perl => { load => "$probes/probe_perl.so" } });
    $seen = $global->error_log;
    like($seen, qr/probe_perl: plugin loaded/, 'a module loads a plugin with plxd_plugin_load');
    like($seen, qr/probe_perl: Perl_xs_handshake is visible/,
        "... which names libperl as its global_library: libperl's symbols are then in the global scope, where XS modules look for them");
    like($seen, qr/probe_perl: plxd_probe_plugin is not visible/, '... and the plugin itself is loaded RTLD_LOCAL');
    like($seen, qr/probe_perl: plxd_probe_b is not visible/, '... as the module still is');
    $global->stop;
}

# The module interface's version: a SHA-256 of every header of the tree that
# a handler's C file (handlers/*/*.c) includes, directly or through another
# header, in the order of their paths (CMakeLists.txt), shown by --version.
# The set is recomputed here from the sources' #include lines, and must be
# the one the build hashed (its generated/handler_abi.h lists it): so a
# change to gateway.h, or to a header a module comes to include, changes
# the version.
my ($status, $version) = PlxdTest::run_plxd('--version');
my ($abi) = $version =~ /^handler interface ([0-9a-f]{8})$/m;
ok($abi, '--version shows the handler interface') or diag($version);
my $src = PlxdTest::source_dir();
my %by_name;
for my $h (map { s{^\Q$src\E/}{}r } glob("$src/server/*.h $src/server/gateway/*.h $src/handlers/*/*.h")) {
    my ($base) = $h =~ m{([^/]+)$};
    die "two headers named $base\n" if $by_name{$base};
    $by_name{$base} = $h;
}
my @todo = map { s{^\Q$src\E/}{}r } glob("$src/handlers/*/*.c");
my %reached;
while (my $file = shift @todo) {
    my ($dir) = $file =~ m{^(.*)/};
    for my $name (PlxdTest::read_file("$src/$file") =~ /^#include "([^"]+)"/mg) {
        my ($base) = $name =~ m{([^/]+)$};
        my $h = -e "$src/$dir/$name" ? "$dir/$name" : $by_name{$base} or next;
        push @todo, $h unless $reached{$h}++;
    }
}
my @abi_files = sort keys %reached;
my $generated = PlxdTest::read_file(build_dir() . '/generated/handler_abi.h');
my @hashed = $generated =~ m{^ \*   (\S+\.h)$}mg;
is_deeply(\@hashed, \@abi_files, 'the build hashed every header reachable from the handlers\' #include lines')
    or diag("hashed: @hashed\nreachable: @abi_files");
ok((grep { $_ eq 'server/gateway/gateway.h' } @hashed), '... gateway.h among them, whose struct gw modules embed');
ok((grep { $_ eq 'handlers/perl/perl_thread.h' } @hashed), '... and perl_thread.h, the threads plugin\'s calls');
is($abi, substr(Digest::SHA::sha256_hex(join '', map { PlxdTest::read_file("$src/$_") } @abi_files), 0, 8),
    '... and the interface is the start of a SHA-256 of them, in that order: ' . scalar(@abi_files) . ' headers');
my $conf_dir = File::Temp::tempdir(CLEANUP => 1);
PlxdTest::write_file("$conf_dir/plxd.conf", "[server]\nroot = $conf_dir\n[probe_old]\nload = $probes/probe_old.so\n");
my ($st, $out, $err) = PlxdTest::run_plxd('--check', '--config', "$conf_dir/plxd.conf");
is($st >> 8, 1, 'a module built for another handler interface is refused');
like($err, qr{^\Q$conf_dir\E/plxd\.conf:3: \[probe_old\]: unknown section: \Q$probes\E/probe_old\.so was built for handler interface 00000002, this plxd has $abi: rebuild it against this plxd's headers$}m,
    '... with a line naming the file and both versions') or diag($err);
my $stale = PlxdTest->start(sections => { probe_old_plugin => { load => "$probes/probe_old_plugin.so" } });
like($stale->error_log, qr{^.*probe_old_plugin: plugin refused: \Q$probes\E/plugin_old\.so was built for handler interface 00000002, this plxd has $abi: rebuild it against this plxd's headers$}m,
    'a plugin built for another handler interface is refused too, naming the file and both versions');
$stale->stop;

# Instances: [echo:two] is a second echo handler, started apart with its own
# settings, and [handlers] routes to it by that name.
{
    my $i = PlxdTest->start(
        files    => { 'x.one' => '', 'x.two' => '' },
        handlers => { '.one' => 'echo', '.two' => 'echo:two' },
        sections => { echo => { greeting => 'first' }, 'echo:two' => { greeting => 'second' } },
    );
    like($i->get('/x.one')->{content}, qr/^first\n/, 'an instance: [echo] answers .one');
    like($i->get('/x.two')->{content}, qr/^second\n/, '... and [echo:two], with its own settings, .two');
    $i->get('/x.two') for 1 .. 3;
    my ($one) = $i->get('/x.one?stats')->{content} =~ /^handled (\d+)/m;
    my ($two) = $i->get('/x.two?stats')->{content} =~ /^handled (\d+)/m;
    is($one, 2, '... each with a state of its own (first: 2 requests)');
    is($two, 5, '... (second: 5)');
    ok($i->wait_log(qr/echo: started, greeting 'second'/), '... started apart');
    $i->stop;
    for my $bad ([ 'echo:', 'an instance is named HANDLER:NAME' ], [ 'echo:a:b', 'an instance is named HANDLER:NAME' ],
            [ 'nosuch:x', 'nosuch' ]) {
        my ($name, $why) = @$bad;
        my $dir = File::Temp::tempdir(CLEANUP => 1);
        PlxdTest::write_file("$dir/plxd.conf", "[handlers]\n.z = $name\n");
        my ($status, undef, $err) = PlxdTest::run_plxd('--check', '--config', "$dir/plxd.conf");
        isnt($status, 0, "[handlers] .z = $name: refused");
        like($err, qr/plxd\.conf:2:.*\Q$why\E/, '... naming file, line and why');
    }
}

done_testing;
