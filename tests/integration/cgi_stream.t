# CGI: output streams to the client as the script prints it, with bounded
# memory; a client that leaves ends the script; a script killed mid-output
# closes the connection; a background process holding stdout is ended
# after linger; a slow script holds up nobody else.
use strict;
use warnings;
use Test::More;
use IO::Select;
use Time::HiRes qw(time);
use PlxdTest qw(read_file source_dir wait_for);
use PlxdRaw qw(responses read_responses);

my $fixture = read_file(source_dir() . '/tests/integration/cgi_fixture.pl');
my $s = PlxdTest->start(
    files => { 'f.pl' => $fixture, 'hello.html' => "hello\n" },
    handlers => { '.pl' => 'cgi' },
    sections => { cgi => { linger => '1s' } },
);

sub status_kb {
    my ($pid, $key) = @_;
    my ($kb) = read_file("/proc/$pid/status") =~ /^$key:\s+(\d+) kB/m;
    return $kb // 0;
}
sub alive { my ($pid) = @_; return kill(0, $pid) && read_file("/proc/$pid/stat") !~ /^\d+ \(.*\) Z/ }
sub pid_in { my ($file) = @_; wait_for(sub { -s $file }); my $p = read_file($file); chomp $p; $p }

# Lines arrive as printed: the first while the script still runs, since it
# waits for a file the test creates only once that line is in.
my $release = $s->dir . '/release-stream';
my $sock = $s->connect;
$sock->syswrite("GET /f.pl?text=line+1%0A&wait=$release&text=line+2%0A HTTP/1.1\r\nHost: x\r\n"
    . "Connection: close\r\n\r\n");
my $sel = IO::Select->new($sock);
my $got = '';
while ($got !~ /line 1\n/ && $sel->can_read(30)) {
    sysread($sock, my $buf, 4096) or last;
    $got .= $buf;
}
like($got, qr/line 1\n/, 'streamed: the first line arrives');
unlike($got, qr/line 2/, '... before the script is done');
PlxdTest::write_file($release, '');
$got .= PlxdTest::read_until_closed($sock, 30);
like($got, qr/line 2\n\r\n0\r\n\r\n$/s, '... and the rest, chunked, to the end');
my @streamed = responses($got);
ok(@streamed == 1 && $streamed[0]{body} eq "line 1\nline 2\n", '... one response, framed exactly');

# 10 MB byte-exact.
my $chunk = join '', map { chr(($_ * 7) % 256) } 0 .. 65535;
my $want = $chunk x 160;
my $res = $s->get('/f.pl?size=' . length $want);
ok($res->{content} eq $want, '10 MB download: byte-exact');

# A script printing 300 MB to a client that does not read: plxd keeps
# only pipe and socket buffers.
my $pid = $s->pid;
my $before = status_kb($pid, 'VmRSS');
$sock = $s->connect;
my $writer = $s->dir . '/writer.pid';
$sock->syswrite("GET /f.pl?pidfile=$writer&size=314572800 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
# Stalled once the script is blocked writing to its full pipe: every buffer
# is full then (were plxd to keep the output, it would never block).
my $blocked = pid_in($writer);
ok(wait_for(sub { read_file("/proc/$blocked/wchan") =~ /pipe_write/ }),
    'a stalled client: the script blocks on its full output pipe');
my $stalled = status_kb($pid, 'VmRSS');
ok($stalled - $before < 32 * 1024, "a stalled client: plxd grew by ${\ ($stalled - $before)} kB, not 300 MB");
my ($total, $head, $tail) = (0, '', '');
$sel = IO::Select->new($sock);
while ($sel->can_read(20)) {
    my $n = sysread($sock, my $buf, 1 << 20) or last;
    $head .= substr($buf, 0, 4096 - length $head) if length $head < 4096;
    $tail = substr($tail . $buf, -64);
    $total += $n;
}
ok($total > 314572800, "... then all 300 MB arrive ($total bytes with framing)");
# Too large to keep whole: its head and its end are checked for framing.
like($head, qr{^HTTP/1\.1 200 [^\r]*\r\n(?:[^\r\n]+\r\n)*Transfer-Encoding: chunked\r\n}, '... chunked');
like($tail, qr/\r\n0\r\n\r\n\z/, '... ending with its last chunk, nothing after it');
my $after = status_kb($pid, 'VmHWM');
ok($after < 128 * 1024, "... peak resident size ${after} kB");

# A client that leaves ends the script, before and after its headers. The
# scripts would run 200 s and 100 s, their timeout is 60 s: ended within
# 20 s, they were ended because the client left.
for my $case (['after its headers', 'stream=1000'], ['before its headers', 'sleep=100']) {
    my ($name, $word) = @$case;
    my $pidfile = $s->dir . "/gone-$word";
    $sock = $s->connect;
    $sock->syswrite("GET /f.pl?pidfile=$pidfile&$word HTTP/1.1\r\nHost: x\r\n\r\n");
    my $child = pid_in($pidfile);
    ok($child && alive($child), "client leaves $name: the script runs");
    if ($word =~ /stream/) { $sel = IO::Select->new($sock); $sel->can_read(5); sysread($sock, my $b, 100) }
    close $sock;
    ok(wait_for(sub { !alive($child) }, 20), "... and is ended when the client leaves");
}

# Killed by a signal mid-output: the chunked body is not terminated.
my $raw = $s->raw("GET /f.pl?text=partial&kill=KILL HTTP/1.1\r\nHost: x\r\n\r\n", 30);
like($raw, qr/partial\r\n$/, 'killed mid-output: what it printed, no final chunk');
my @killed = responses($raw, partial => 1);
ok(@killed == 1 && !$killed[0]{complete} && $killed[0]{body} eq 'partial', '... one response, unterminated');
ok($s->wait_log(qr/f\.pl: killed by signal 9 \(SIGKILL\); response cut short/), '... logged');

# A background process holding stdout: the response ends after linger and
# the process group is ended. linger is 1 s, the process would hold stdout
# for 60 s: 20 s tells the two apart however loaded the machine is.
my $bgpid = $s->dir . '/bg.pid';
my $t0 = time;
$res = $s->get("/f.pl?bgpid=$bgpid&bg=60&text=fore");
my $took = time - $t0;
is($res->{status}, 200, 'background child: 200');
is($res->{content}, 'fore', '... with the output');
ok($took >= 0.9 && $took < 20, "... ended after linger ($took s)");
my $bg = pid_in($bgpid);
ok(wait_for(sub { !alive($bg) }), '... and the background process was ended');
ok($s->wait_log(qr/background process held its output/), '... logged');

# A slow script holds up nobody else: it waits for a file the test creates
# only after ten other requests were answered, so if it held them up they
# could not be.
my $slowpid = $s->dir . '/slow.pid';
$release = $s->dir . '/release-slow';
my $slow = $s->connect;
$slow->syswrite("GET /f.pl?pidfile=$slowpid&wait=$release&text=slow HTTP/1.1\r\nHost: x\r\n"
    . "Connection: close\r\n\r\n");
my $slow_script = pid_in($slowpid);
my $answered = 0;
for (1 .. 5) {
    $answered++ if $s->get('/f.pl?text=fast')->{content} eq 'fast';
    $answered++ if $s->get('/hello.html')->{content} eq "hello\n";
}
is($answered, 10, 'ten requests answered while a slow script runs');
ok(alive($slow_script), '... which was running all along');
PlxdTest::write_file($release, '');
my ($slow_r) = read_responses($slow, 1);
like($slow_r && $slow_r->{body}, qr/slow/, '... and still completes');

done_testing;
