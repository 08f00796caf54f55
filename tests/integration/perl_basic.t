# The persistent Perl handler (.plx), request glue: the same script gives
# the same response as .pl; %ENV, STDIN, working directory and programs the
# script starts behave as under CGI; output forms; CGI.pm; parallel clients.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for source_dir read_file write_file);
use PlxdRaw qw(responses);
use IO::Select;
use POSIX ();
use Config ();

my $src = source_dir();
sub sample { read_file("$src/cgi-bin/$_[0]") }

my %files = (
    'hello.plx'  => sample('hello.plx'),
    'hello.pl'   => sample('hello.pl'),
    'env.plx'    => sample('env.plx'),
    'env.pl'     => sample('env.pl'),
    'cgi_pm.plx' => sample('cgi_pm.plx'),
    'cgi_pm.pl'  => sample('cgi_pm.pl'),
    'counter.plx' => sample('counter.plx'),
    'sub/dir/cwd.plx' => <<'EOF',
use Cwd;
print "Content-Type: text/plain\n\n", getcwd(), "\n";
chdir '/';
EOF
    'child.plx' => <<'EOF',
print "Content-Type: text/plain\n\n";
print "backticks:", `echo \$QUERY_STRING`;
system('echo "system:$REQUEST_METHOD"');
system('/bin/sh', '-c', 'echo "exec:$SCRIPT_NAME"');
my $pid = fork;
if (!$pid) { exec '/bin/echo', 'forked-exec' }
waitpid $pid, 0;
print "end\n";
EOF
    'setenv.plx' => <<'EOF',
print "Content-Type: text/plain\n\n";
print "leftover=", ($ENV{LEFTOVER} // 'none'), " foo=", ($ENV{HTTP_X_FOO} // 'none'), "\n";
$ENV{LEFTOVER} = 'yes';
%ENV = () if $ENV{QUERY_STRING} eq 'clear';
EOF
    'body.plx' => <<'EOF',
print "Content-Type: text/plain\n\n";
my $n = read(STDIN, my $body, $ENV{CONTENT_LENGTH} || 0);
print "read $n: $body\n";
EOF
    'bigbody.plx' => <<'EOF',
binmode STDIN;
my $len = 0;
my $sum = 0;
while (my $n = read(STDIN, my $buf, 65536)) { $len += $n; $sum += unpack('%32C*', $buf) }
print "Content-Type: text/plain\n\n$len $sum\n";
EOF
    'printfirst.plx' => <<'EOF',
$| = 1;
print "Content-Type: text/plain\n\n";
print "x" x 100_000;
my $len = 0;
while (my $n = read(STDIN, my $buf, 65536)) { $len += $n }
print "\nread $len\n";
EOF
    'cgi_fn.plx' => <<'EOF',
use CGI qw(:standard);
print header('text/plain');
print join(',', map { "$_=" . param($_) } sort(param())), "\n";
EOF
    'cgi_oo.plx' => <<'EOF',
use CGI;
my $q = CGI->new;
print $q->header('text/plain');
print join(',', map { "$_=" . $q->param($_) } sort($q->param)), "\n";
EOF
    'forms.plx' => <<'EOF',
use feature 'say';
our $n = 7;
format STDOUT =
@<<<< @>>>
'fmt', $n
.
print "Content-Type: text/plain; charset=utf-8\n\n";
say "say";
printf "%s-%03d\n", 'printf', 5;
$| = 1;
syswrite STDOUT, "syswrite\n";
write;
binmode STDOUT, ':utf8';
print "wide \x{263a}\n";
EOF
    # Waits between its lines for the file named in its query string.
    'stream.plx' => <<'EOF',
$| = 1;
print "Content-Type: text/plain\n\n";
print "first\n";
my $until = time + 60;
select(undef, undef, undef, 0.02) until -e $ENV{QUERY_STRING} || time > $until;
print "second\n";
EOF
    'status.plx' => "print \"Status: 404 Not Here\\nContent-Type: text/plain\\n\\nmissing\\n\";\n",
    'status.pl'  => "print \"Status: 404 Not Here\\nContent-Type: text/plain\\n\\nmissing\\n\";\n",
    'redirect.plx' => "print \"Location: http://example.com/x\\n\\n\";\n",
    'redirect.pl'  => "print \"Location: http://example.com/x\\n\\n\";\n",
    'local.plx' => "print \"Location: /hello.html\\n\\n\";\n",
    'local.pl'  => "print \"Location: /hello.html\\n\\n\";\n",
    'hello.html' => "static hello\n",
    'nph-x.plx' => "print \"HTTP/1.1 202 Accepted\\nContent-Type: text/plain\\n\\nnph\\n\";\n",
    'nph-x.pl'  => "print \"HTTP/1.1 202 Accepted\\nContent-Type: text/plain\\n\\nnph\\n\";\n",
    'noheader.plx' => "print \"just text\\n\";\n",
    'empty.plx' => "",
    'stderr.plx' => <<'EOF',
warn "a warning\n";
print STDERR "to stderr\n";
system('echo from-a-child >&2');
print "Content-Type: text/plain\n\nok\n";
EOF
    # More than a pipe holds, to stderr, before any output: the script
    # waits for plxd to read it.
    'stderrflood.plx' => <<'EOF',
print STDERR sprintf("flood %04d %s\n", $_, 'e' x 88) for 1 .. 3000;
print "Content-Type: text/plain\n\nflooded\n";
EOF
    'clen.plx' => "print \"Content-Type: text/plain\\nContent-Length: 3\\n\\nabc\";\n",
    # The interpreter's own switches, as a perl started for the request
    # has them: ${^UTF8CACHE} (perl_clone leaves it off in a clone).
    'interp.plx' => qq{print "Content-Type: text/plain\\n\\n", join(' ', "utf8cache=\${^UTF8CACHE}",
        "taint=\${^TAINT}", "W=\$^W", "P=\$^P"), "\\n";\n},
);
$files{'interp.pl'} = $files{'interp.plx'};

# queue_timeout: the 20 parallel clients below share two workers, and on a
# loaded machine a request may wait its turn for several seconds.
my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl', '.pl' => 'cgi' },
    sections => { perl => { workers => 2, queue_timeout => '60s' } },
);

# --- the same script as .pl and as .plx ---
for my $pair (['/hello', ''], ['/cgi_pm', '?a=b&c=+k+d+d+f&d=asf&as=+1+2+3+4'],
              ['/status', ''], ['/redirect', ''], ['/local', ''], ['/nph-x', ''], ['/interp', '']) {
    my ($name, $query) = @$pair;
    my $pl  = $s->get("$name.pl$query");
    my $plx = $s->get("$name.plx$query");
    is($plx->{status}, $pl->{status}, "$name: same status as .pl ($pl->{status})");
    is($plx->{content}, $pl->{content}, "$name: same body as .pl");
    is($plx->{headers}{'content-type'}, $pl->{headers}{'content-type'}, "$name: same type");
    is($plx->{headers}{location}, $pl->{headers}{location}, "$name: same Location");
}
is($s->get('/hello.plx')->{content}, "<html><body>\nHello world!\n</body></html>\n", 'hello.plx');
is($s->get('/local.plx')->{content}, "static hello\n", 'a local Location is served by plxd');
is($s->get('/interp.plx')->{content}, "utf8cache=1 taint=0 W=0 P=0\n", "the interpreter's switches as perl's own");
is($s->get('/hello.plx')->{headers}{'content-length'}, 41, 'a complete response has a length');

# What plxd has loaded (its /proc/PID/maps): libperl only with an instance
# in thread mode, through plxd-perl-threads.so, which perl.so opens then
# (plxd_plugin_load, which makes libperl global); never otherwise.
{
    my $maps = read_file('/proc/' . $s->pid . '/maps');
    my $libperl = $Config::Config{libperl};
    if (PlxdTest::thread_mode()) {
        like($maps, qr{/plxd-perl-threads\.so$}m, 'thread mode: plxd has loaded plxd-perl-threads.so');
        like($maps, qr{/\Q$libperl\E[0-9.]*$}m, "... and $libperl");
    } else {
        unlike($maps, qr{/plxd-perl-threads\.so$}m, 'no instance in thread mode: plxd never loads plxd-perl-threads.so');
        unlike($maps, qr{/\Q$libperl\E[0-9.]*$}m, "... nor $libperl");
    }
}

# --- %ENV: exactly the request's CGI variables ---
sub env_of {
    my ($res) = @_;
    my %e = map { /^([^=]+)=(.*)$/ ? ($1 => $2) : () } split /\n/, $res->{content};
    delete $e{REMOTE_PORT};
    s/\.plx$/.pl/ for values %e;
    s/\.plx\?/.pl?/ for values %e;
    return \%e;
}
my $e_pl = env_of($s->get('/env.pl?x=1', { 'X-Test' => 'v' }));
my $e_plx = env_of($s->get('/env.plx?x=1', { 'X-Test' => 'v' }));
is_deeply($e_plx, $e_pl, '%ENV of a .plx is what a .pl gets');
ok(!exists $e_plx->{PLXD_BIN} && !exists $e_plx->{HOME}, 'nothing of plxd\'s own environment');

# Nothing is left from an earlier request, whatever the script did.
for (1 .. 4) { $s->get('/setenv.plx', { 'X-Foo' => 'bar' }) }
like($s->get('/setenv.plx')->{content}, qr/leftover=none foo=none/,
    'a header and a variable the script set are gone the next time');
$s->get('/setenv.plx?clear') for 1 .. 2;
like($s->get('/env.plx')->{content}, qr/^GATEWAY_INTERFACE=CGI\/1.1$/m, '%ENV = () undone');

# Programs the script starts see the request's environment and write into
# the response.
my $child = $s->get('/child.plx?q=42');
is($child->{content},
    "backticks:q=42\nsystem:GET\nexec:/child.plx\nforked-exec\nend\n",
    'system, backticks and fork+exec see %ENV and write to the response');
is($s->get('/child.plx?q=43')->{content},
    "backticks:q=43\nsystem:GET\nexec:/child.plx\nforked-exec\nend\n", 'and again');

# The working directory is the script's folder, whatever the last script did.
my $root = $s->root;
is($s->get('/sub/dir/cwd.plx')->{content}, "$root/sub/dir\n", 'cwd is the script folder') for 1 .. 3;

# --- STDIN ---
my $post = $s->request('POST', '/body.plx', content => 'hello body',
    headers => { 'Content-Type' => 'text/plain' });
is($post->{content}, "read 10: hello body\n", 'STDIN reads the body');
is($s->get('/body.plx')->{content}, "read 0: \n", 'no body the next time');
my $big = join '', map { chr($_ % 251) } 1 .. 3_000_000;
my $sum = unpack('%32C*', $big);
my $bigres = $s->request('POST', '/bigbody.plx', content => $big,
    headers => { 'Content-Type' => 'application/octet-stream' });
is($bigres->{content}, length($big) . " $sum\n", 'a 3 MB body arrives whole');
my $pf = $s->request('POST', '/printfirst.plx', content => 'y' x 500_000,
    headers => { 'Content-Type' => 'application/octet-stream' });
like($pf->{content}, qr/\nread 500000\n\z/, 'a script printing 100 KB before reading its body');

# --- CGI.pm, both styles, GET and POST, nothing carried over ---
is($s->get('/cgi_oo.plx?a=1&b=2')->{content}, "a=1,b=2\n", 'CGI.pm OO GET');
is($s->get('/cgi_fn.plx?c=3')->{content}, "c=3\n", 'CGI.pm function GET');
for (1 .. 3) {
    is($s->get('/cgi_oo.plx?z=9')->{content}, "z=9\n", 'a parameter never reappears (OO)');
    is($s->get('/cgi_fn.plx?y=8')->{content}, "y=8\n", 'a parameter never reappears (function)');
}
my $form = { 'Content-Type' => 'application/x-www-form-urlencoded' };
is($s->request('POST', '/cgi_oo.plx', content => 'p=1&q=two', headers => $form)->{content},
    "p=1,q=two\n", 'CGI.pm OO POST');
is($s->request('POST', '/cgi_fn.plx', content => 'r=3', headers => $form)->{content},
    "r=3\n", 'CGI.pm function POST');
is($s->get('/cgi_fn.plx')->{content}, "\n", 'a GET after a POST has no parameters');

# --- output ---
is($s->get('/forms.plx')->{content},
    "say\nprintf-005\nsyswrite\nfmt      7\nwide \xe2\x98\xba\n",
    'print, say, printf, syswrite, write/format, binmode :utf8');
is($s->get('/hello.plx')->{content}, "<html><body>\nHello world!\n</body></html>\n",
    'layers and $| do not leak into the next request');
is($s->get('/clen.plx')->{content}, 'abc', "the script's Content-Length");

# Output streams when the script flushes: the first line arrives while the
# script waits for a file the test creates only once that line is in.
{
    my $release = $s->dir . '/release-stream';
    my $sock = $s->connect;
    print $sock "GET /stream.plx?$release HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    my $sel = IO::Select->new($sock);
    my $got = '';
    while ($got !~ /first/ && $sel->can_read(30)) {
        sysread($sock, $got, 4096, length $got) or last;
    }
    like($got, qr/first/, 'the first line arrives before the script ends');
    unlike($got, qr/second/, 'and the rest after');
    write_file($release, '');
    $got .= PlxdTest::read_until_closed($sock, 30);
    like($got, qr/first.*second/s, 'both lines');
    my @r = responses($got);
    ok(@r == 1 && $r[0]{body} =~ /first.*second/s, '... in one response, framed exactly');
}

# --- bad responses, as for .pl ---
is($s->get('/noheader.plx')->{status}, 500, 'no header block: 500');
is($s->get('/empty.plx')->{status}, 500, 'no output: 500');
ok($s->wait_log(qr/noheader\.plx: answered 500: /), 'logged with the script name');

# --- stderr goes to the log, prefixed with the script ---
is($s->get('/stderr.plx')->{content}, "ok\n", 'stderr is not in the response');
my $sp = $s->root . '/stderr.plx';
ok($s->wait_log(qr/\Q$sp\E: a warning/), 'warn is logged with the script path');
ok($s->wait_log(qr/\Q$sp\E: to stderr/), 'print STDERR too');
ok($s->wait_log(qr/\Q$sp\E: from-a-child/), 'and a child\'s stderr');
my $flood = $s->get('/stderrflood.plx');
is("$flood->{status} $flood->{content}", "200 flooded\n",
    'a script that writes 300 KB to stderr first is answered');
ok($s->wait_log(qr/stderrflood\.plx: flood 3000 e{88}$/m), 'and its last stderr line is logged');

# --- persistence: each worker counts on its own ---
my %counts;
for (1 .. 12) {
    my ($n, $pid) = $s->get('/counter.plx')->{content} =~ /count (\d+) pid (\d+)/;
    push @{ $counts{$pid} }, $n;
}
# Each interpreter's count goes up by one per request it serves. Interpreter
# threads (PLXD_TEST_ISOLATION=thread) share plxd's pid: their counts
# interleave, each its own run of n, n+1, ...
my @interpreters;    # the last count of each
for my $pid (keys %counts) {
    for my $n (@{ $counts{$pid} }) {
        my ($i) = grep { $interpreters[$_]{pid} == $pid && $interpreters[$_]{last} == $n - 1 }
            0 .. $#interpreters;
        if (defined $i) { $interpreters[$i]{last} = $n }
        else { push @interpreters, { pid => $pid, last => $n } }
    }
}
# Inline (PLXD_TEST_ISOLATION=inline), each event thread has one more.
chomp(my $cores = `nproc`);
my $most = 2 + (PlxdTest::inline_mode() ? $cores : 0);
ok(@interpreters <= $most, "the counter grows by one in each interpreter, of at most $most ("
    . join(' ', map { "$_:@{$counts{$_}}" } keys %counts) . ')');
ok(keys(%counts) <= 2, 'at most the two workers answered');

# --- parallel clients across workers ---
my @kids;
for my $k (1 .. 20) {
    my $pid = fork // die;
    if (!$pid) {
        my $ok = 1;
        my $http = HTTP::Tiny->new(keep_alive => 1, timeout => 30);
        for my $i (1 .. 15) {
            my $r = $http->get($s->url("/cgi_pm.plx?k=$k&i=$i"));
            $ok &&= $r->{status} == 200 && $r->{content} eq "k => $k\ni => $i";
            my $h = $http->get($s->url('/hello.plx'));
            $ok &&= $h->{content} eq "<html><body>\nHello world!\n</body></html>\n";
        }
        POSIX::_exit($ok ? 0 : 1);
    }
    push @kids, $pid;
}
my $bad = 0;
for (@kids) { waitpid $_, 0; $bad++ if $? }
is($bad, 0, '20 parallel clients got complete, correct answers');

done_testing;
