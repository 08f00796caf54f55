# CGI: the samples in cgi-bin/ run, and scripts get the RFC 3875
# environment: meta-variables, PATH_INFO, raw QUERY_STRING, HTTP_* rules
# (httpoxy, collisions, Authorization), trusted proxies, no argv, the
# script's folder as working directory, nothing of plxd's environment.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(read_file source_dir);

my $fixture = read_file(source_dir() . '/tests/integration/cgi_fixture.pl');
my %samples = map { $_ => read_file(source_dir() . "/cgi-bin/$_") }
    qw(hello.pl env.pl form.pl cgi_pm.pl uptime.cgi);

my $s = PlxdTest->start(
    files => { 'f.pl' => $fixture, 'sub/dir/f.pl' => $fixture, 'plain.cgi' => "#!/bin/sh\n", 'noshebang.cgi' => "echo Content-Type: text/plain\necho\n",
        'taint.pl' => qq{#!/usr/bin/perl -wT\nprint "Content-Type: text/plain\\n\\n", \${^TAINT};\n},
        %samples },
    handlers => { '.pl' => 'cgi', '.cgi' => 'cgi' },
    env => { PLXD_SECRET => 'do-not-leak', HTTP_PROXY => 'http://inherited:1' },
);
chmod 0755, $s->root . '/uptime.cgi';

# The samples.
my $res = $s->get('/hello.pl');
is($res->{status}, 200, 'hello.pl: 200');
is($res->{content}, "<html><body>\nHello world!\n</body></html>\n", 'hello.pl: the page');
is($res->{headers}{'content-type'}, 'text/html', 'hello.pl: its Content-Type');
is($res->{headers}{server}, 'plxd/0.1.0', 'one Server header, plxd\'s');

$res = $s->get('/cgi_pm.pl?a=1&b=two%20words');
is($res->{status}, 200, 'cgi_pm.pl: 200');
is($res->{content}, "a => 1\nb => two words", 'cgi_pm.pl: CGI.pm parsed the query string');
like($res->{headers}{'content-type'}, qr{^text/plain}, 'cgi_pm.pl: text/plain');

$res = $s->get('/env.pl/x/y?q=1');
like($res->{content}, qr/^GATEWAY_INTERFACE=CGI\/1\.1$/m, 'env.pl lists the environment');
like($res->{content}, qr/^PATH_INFO=\/x\/y$/m, 'env.pl: PATH_INFO');

$res = $s->get('/form.pl?name=Ann&colour=green');
like($res->{content}, qr/<form[^>]*method="post"/i, 'form.pl: shows a form');
like($res->{content}, qr/Name:\s+Ann/, 'form.pl: GET input comes back');
$res = $s->request('POST', '/form.pl', content => 'name=%3Cb%3EBob&colour=red',
    headers => { 'content-type' => 'application/x-www-form-urlencoded' });
like($res->{content}, qr/Method:\s+POST/, 'form.pl: POST');
like($res->{content}, qr/Name:\s+&lt;b&gt;Bob/, 'form.pl: POST input comes back, escaped');

$res = $s->get('/uptime.cgi?x=1');
is($res->{status}, 200, 'a shell .cgi runs through its #! line');
like($res->{content}, qr/^method=GET query=x=1$/m, 'the shell script saw the CGI variables');

chmod 0755, $s->root . '/noshebang.cgi';
$res = $s->get('/noshebang.cgi');
is($res->{status}, 500, 'an executable without a #! line: 500 (never run through a shell)');
like($s->error_log, qr/noshebang\.cgi: cannot execute .*: Exec format error/, '... logged');

$res = $s->get('/plain.cgi');
is($res->{status}, 403, 'a .cgi that is not executable: 403');
like($s->error_log, qr/plain\.cgi: not executable/, '... logged');

# The environment, one variable at a time.
sub env_of {
    my ($path, %h) = @_;
    my $r = $s->get($path, \%h);
    my %e = $r->{content} =~ /^([A-Z_0-9]+)=(.*)$/mg;
    return \%e;
}

my $port = $s->port;
my $e = env_of('/f.pl/p/a%20th?env=*&a=%20b&c');
is($e->{GATEWAY_INTERFACE}, 'CGI/1.1', 'GATEWAY_INTERFACE');
is($e->{REQUEST_METHOD}, 'GET', 'REQUEST_METHOD');
is($e->{QUERY_STRING}, 'env=*&a=%20b&c', 'QUERY_STRING raw, undecoded');
is($e->{SCRIPT_NAME}, '/f.pl', 'SCRIPT_NAME');
is($e->{PATH_INFO}, '/p/a th', 'PATH_INFO decoded');
is($e->{PATH_TRANSLATED}, $s->root . '/p/a th', 'PATH_TRANSLATED');
is($e->{SCRIPT_FILENAME}, $s->root . '/f.pl', 'SCRIPT_FILENAME');
is($e->{DOCUMENT_ROOT}, $s->root, 'DOCUMENT_ROOT');
is($e->{REQUEST_URI}, '/f.pl/p/a%20th?env=*&a=%20b&c', 'REQUEST_URI as received');
is($e->{SERVER_PROTOCOL}, 'HTTP/1.1', 'SERVER_PROTOCOL');
is($e->{SERVER_PORT}, $port, 'SERVER_PORT');
is($e->{SERVER_ADDR}, '127.0.0.1', 'SERVER_ADDR');
is($e->{SERVER_NAME}, '127.0.0.1', 'SERVER_NAME from Host');
is($e->{SERVER_SOFTWARE}, 'plxd/0.1.0', 'SERVER_SOFTWARE');
is($e->{REMOTE_ADDR}, '127.0.0.1', 'REMOTE_ADDR');
is($e->{REMOTE_HOST}, '127.0.0.1', 'REMOTE_HOST (no DNS)');
like($e->{REMOTE_PORT}, qr/^\d+$/, 'REMOTE_PORT');
is($e->{REQUEST_SCHEME}, 'http', 'REQUEST_SCHEME');
is($e->{REDIRECT_STATUS}, '200', 'REDIRECT_STATUS');
is($e->{PATH}, '/usr/local/bin:/usr/bin:/bin', 'PATH from the configuration');
ok(!exists $e->{CONTENT_LENGTH} && !exists $e->{CONTENT_TYPE}, 'no CONTENT_* without a body');
ok(!exists $e->{HTTPS}, 'no HTTPS');
ok(!exists $e->{PLXD_SECRET}, 'nothing of plxd\'s environment');
ok(!exists $e->{HTTP_PROXY}, 'not even HTTP_PROXY inherited');
my @unexpected = grep { !/^(HTTP_[A-Z0-9_]+|GATEWAY_INTERFACE|REQUEST_METHOD|QUERY_STRING|SCRIPT_NAME
    |PATH_INFO|PATH_TRANSLATED|SCRIPT_FILENAME|DOCUMENT_ROOT|REQUEST_URI|SERVER_PROTOCOL|SERVER_PORT
    |SERVER_ADDR|SERVER_NAME|SERVER_SOFTWARE|REMOTE_ADDR|REMOTE_HOST|REMOTE_PORT|REQUEST_SCHEME
    |REDIRECT_STATUS|PATH|PERL5LIB|PLXD_REQUEST_[A-Z_]+)$/x } keys %$e;
is("@unexpected", '', 'no other variables');
like($e->{PERL5LIB}, qr{/perl5$}, 'PERL5LIB: where PLXD::Request lives');
is($e->{PLXD_REQUEST_MAX_FIELDS}, '1000', 'the [request] limits (PLXD_REQUEST_*)');

$e = env_of('/f.pl?env=*', 'Proxy' => 'http://evil:8080', 'X-Custom' => 'v',
    'X_Custom' => 'evil', 'Authorization' => 'Basic dTpw', 'Cookie' => 'a=1');
ok(!exists $e->{HTTP_PROXY}, 'httpoxy: Proxy: never becomes HTTP_PROXY');
is($e->{HTTP_X_CUSTOM}, 'v', 'X-Custom becomes HTTP_X_CUSTOM; X_Custom cannot shadow it');
ok(!exists $e->{HTTP_AUTHORIZATION}, 'Authorization withheld by default');
is($e->{HTTP_COOKIE}, 'a=1', 'HTTP_COOKIE');

$res = $s->request('POST', '/f.pl?env=CONTENT_LENGTH&env=CONTENT_TYPE&read=5', content => 'hello',
    headers => { 'content-type' => 'text/x-test' });
is($res->{content}, "CONTENT_LENGTH=5\nCONTENT_TYPE=text/x-test\n", 'CONTENT_LENGTH and CONTENT_TYPE');

$res = $s->get('/f.pl?argv=1&cwd=1');
is($res->{content}, "argc=0 argv=\ncwd=" . $s->root . "\n", 'no arguments; cwd is the script\'s folder');
$res = $s->get('/f.pl?argv+x+y');
is($res->{status}, 500, 'an isindex query is no argv (the fixture dies on it before its headers: 500)');
ok($s->wait_log(qr{/f\.pl: answered 500: no output; exited with status \d+$}m), '... logged as a script that died');
$res = $s->get('/sub/dir/f.pl?cwd=1');
is($res->{content}, 'cwd=' . $s->root . "/sub/dir\n", 'cwd in a subfolder');
$res = $s->get('/taint.pl');
is($res->{content}, '1', 'a #!/usr/bin/perl -wT script runs, in taint mode');
$res = $s->request('HEAD', '/f.pl?env=REQUEST_METHOD');
is($res->{status}, 200, 'HEAD runs the script');
is($res->{content} // '', '', 'HEAD: no body');

# The [request] limits and tmp_dir are made into PLXD_REQUEST_* once per
# configuration: a reload's new values reach the next request.
{
    my $conf = read_file($s->conf_file);
    $conf =~ s/^tmp_dir = .*\n//m;
    $conf =~ s/^\[server\]\n/[server]\ntmp_dir = \/var\/tmp\n/m or die "no [server] in the configuration";
    PlxdTest::write_file($s->conf_file, $conf . "\n[request]\nmax_fields = 7\n");
    my $before = () = $s->error_log =~ /configuration reloaded/g;
    $s->signal('HUP');
    ok(PlxdTest::wait_for(sub { (() = $s->error_log =~ /configuration reloaded/g) > $before }, 30),
        'reloaded with other [request] limits');
    my $e = env_of('/f.pl?env=*');
    is($e->{PLXD_REQUEST_MAX_FIELDS}, '7', '... PLXD_REQUEST_MAX_FIELDS is the new one');
    is($e->{PLXD_REQUEST_TMPDIR}, '/var/tmp', '... and PLXD_REQUEST_TMPDIR');
}

$s->stop;

# Configured: Authorization passed, a trusted proxy, another PATH.
my $p = PlxdTest->start(
    files => { 'f.pl' => $fixture, 'x.py' => "print('hi')\n", 'sh.sh' => "echo 'Content-Type: text/plain'; echo; echo \$0\n" },
    handlers => { '.pl' => 'cgi', '.py' => 'cgi', '.sh' => 'cgi' },
    server => { trusted_proxies => '127.0.0.1' },
    sections => { cgi => { pass_authorization => 'yes', path => '/bin',
        interpreters => '.pl=/usr/bin/perl .py=/nonexistent/python .SH=/bin/sh' } },
);
is($p->get('/x.py')->{status}, 500, 'a configured interpreter that is missing: 500');
like($p->error_log, qr/x\.py: cannot execute \/nonexistent\/python: No such file/, '... logged');
is($p->get('/sh.sh')->{content}, $p->root . "/sh.sh\n", 'another interpreter per extension (any case)');
my $r = $p->get('/f.pl?env=HTTP_AUTHORIZATION&env=REMOTE_ADDR&env=HTTPS&env=REQUEST_SCHEME&env=PATH',
    { 'Authorization' => 'Basic dTpw', 'X-Forwarded-For' => '198.51.100.7, 127.0.0.1',
      'X-Forwarded-Proto' => 'https' });
is($r->{content}, "HTTP_AUTHORIZATION=Basic dTpw\nREMOTE_ADDR=198.51.100.7\nHTTPS=on\n"
    . "REQUEST_SCHEME=https\nPATH=/bin\n", 'pass_authorization, trusted proxy, path');
$p->stop;

my $u = PlxdTest->start(
    files => { 'f.pl' => $fixture },
    handlers => { '.pl' => 'cgi' },
    server => { trusted_proxies => '10.9.9.9' },
);
$r = $u->get('/f.pl?env=REMOTE_ADDR&env=HTTPS', { 'X-Forwarded-For' => '198.51.100.7',
    'X-Forwarded-Proto' => 'https' });
is($r->{content}, "REMOTE_ADDR=127.0.0.1\nHTTPS=(unset)\n", 'X-Forwarded-* ignored from an untrusted peer');
$u->stop;

# A CIDR range, for .pl and .plx alike (one parsed list, one walk): every
# hop inside 127.0.0.0/8 is a trusted proxy, the first outside is the client.
my $range = PlxdTest->start(
    files => { 'f.pl' => $fixture, 'f.plx' => $fixture },
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    server => { trusted_proxies => '10.0.0.0/8 127.0.0.0/8' },
    sections => { perl => { workers => 1 } },
);
for my $script (qw(f.pl f.plx)) {
    $r = $range->get("/$script?env=REMOTE_ADDR&env=HTTPS", { 'X-Forwarded-For' => '198.51.100.7, 127.3.2.1, 10.1.1.1',
        'X-Forwarded-Proto' => 'https' });
    is($r->{content}, "REMOTE_ADDR=198.51.100.7\nHTTPS=on\n", "$script: trusted_proxies = 127.0.0.0/8 trusts the peer and the hops in it");
    $r = $range->get("/$script?env=REMOTE_ADDR", { 'X-Forwarded-For' => '198.51.100.7, 128.0.0.1, 127.0.0.9' });
    is($r->{content}, "REMOTE_ADDR=128.0.0.1\n", "$script: the walk stops at the first hop outside the ranges");
}

done_testing;
