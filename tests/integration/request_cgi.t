# PLXD::Request through a real plxd, as .pl scripts under the cgi handler:
# the sample request.pl answers what cgi_pm.pl answers, uploads arrive
# byte-exact and their files are removed, every bad input is a 400 naming
# the problem (Status survives plxd's CGI response parser, and the message
# reaches the error log), and the response helpers' Status and Location
# keep their meaning.
#
# Most scripts here run under a wrapper perl that puts BUILD/modules/perl5 in
# PERL5LIB; the tests at the end check that the cgi handler does so itself,
# and passes the [request] limits.
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
use File::Temp qw(tempdir);
use Test::More;
use PlxdTest qw(build_dir source_dir read_file write_file wait_for);
use PlxdRaw qw(responses);

my $perl5 = build_dir() . '/modules/perl5';
plan skip_all => "PLXD::Request is not built in $perl5"
    unless -e "$perl5/auto/PLXD/Request/Request.so";
plan skip_all => 'the cgi handler is not built' unless -e build_dir() . '/modules/cgi.so';

my $tmp = tempdir('plxd-request-cgi-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $tmp;
my $uploads = "$tmp/uploads";
mkdir $uploads or die;
chmod 0777, $uploads;

# perl with the module's folder in PERL5LIB; a second one with tight limits,
# as the handler would pass them from [request].
write_file("$tmp/perl", "#!/bin/sh\nPERL5LIB=$perl5 PLXD_REQUEST_TMPDIR=$uploads exec $^X \"\$@\"\n", 0755);
write_file("$tmp/perl-tight", "#!/bin/sh\nPERL5LIB=$perl5 PLXD_REQUEST_TMPDIR=$uploads"
    . " PLXD_REQUEST_MAX_FIELDS=3 PLXD_REQUEST_MAX_UPLOAD_SIZE=1000 exec $^X \"\$@\"\n", 0755);

my $cgi_bin = source_dir() . '/cgi-bin';
my %files = map { $_ => read_file("$cgi_bin/$_") } qw(request.pl cgi_pm.pl upload.pl hello.html);
$files{'dump.pl'} = <<'PERL';
use strict; use PLXD::Request; use Digest::MD5 qw(md5_hex);
my $q = PLXD::Request->new;
$q->content_type('text/plain');
$q->send_header;
for my $n ($q->param) { print "$n=", join('|', $q->param($n)), "\n" }
for my $u ($q->upload) { print 'upload ', join(' ', $u->name, $u->filename, $u->type // 'undef', $u->size, md5_hex($u->slurp)), "\n" }
for my $c ($q->cookie) { print "cookie $c=", scalar $q->cookie($c), "\n" }
print 'method=', $q->method, ' path=', $q->path, ' info=', $q->path_info, ' addr=', $q->remote_addr, ' agent=', $q->header('User-Agent') // '', "\n";
PERL
$files{'respond.pl'} = <<'PERL';
use strict; use PLXD::Request;
my $q = PLXD::Request->new;
my $case = $q->param('case') // '';
if ($case eq 'redirect') { $q->redirect('http://example.org/elsewhere') }
elsif ($case eq 'local') { $q->header_out(Location => '/hello.html') }
elsif ($case eq 'missing') { $q->status(404)->content_type('text/plain') }
elsif ($case eq 'cookie') { $q->header_out('Set-Cookie' => 'a=1; Path=/', 'b=2; Path=/') }
$q->send_header;
print "body of $case\n" unless $case eq 'local' || $case eq 'redirect';
PERL

my $s = PlxdTest->start(
    files => \%files,
    handlers => { '.pl' => 'cgi' },
    sections => { cgi => { interpreters => ".pl=$tmp/perl" } },
);
# A second server whose scripts get the tight limits.
my $tight = PlxdTest->start(
    files => { 'dump.pl' => $files{'dump.pl'}, 'request.pl' => $files{'request.pl'} },
    handlers => { '.pl' => 'cgi' },
    sections => { cgi => { interpreters => ".pl=$tmp/perl-tight" } },
);

sub uploads_left { opendir my $d, $uploads or die; return grep { !/^\./ } readdir $d }

# ---- the sample, against CGI.pm ---------------------------------------------

for my $qs ('a=b&c=+k+d+d+f&d=asf&as=+1+2+3+4', 'x=1&x=2&y=&z=%C3%A9&w=a%20b+c') {
    my $mine = $s->get("/request.pl?$qs");
    my $theirs = $s->get("/cgi_pm.pl?$qs");
    is($mine->{status}, 200, "request.pl?$qs: 200") or diag($mine->{content}, $s->error_log);
    is($mine->{headers}{'content-type'}, 'text/plain', 'its Content-Type');
    is($mine->{content}, $theirs->{content}, "request.pl?$qs answers what cgi_pm.pl answers");
}
is($s->get('/request.pl?a=b&c=+k+d+d+f&d=asf&as=+1+2+3+4')->{content},
    "a => b\nc =>  k d d f\nd => asf\nas =>  1 2 3 4", 'the seed query string, exactly');

# ---- parameters, cookies, request facts --------------------------------------

my $res = $s->get('/dump.pl/extra/path?a=1&b=&a=%E2%82%AC&c=x+y%20z',
    { Cookie => 'sid=abc; theme=dark', 'User-Agent' => 'request-cgi-test' });
is($res->{content}, join("\n", 'a=1|' . "\xe2\x82\xac", 'b=', 'c=x y z', 'cookie sid=abc',
    'cookie theme=dark', 'method=GET path=/dump.pl/extra/path info=/extra/path addr=127.0.0.1 agent=request-cgi-test', ''),
    'repeated keys, empty values, UTF-8, + and %20, cookies, path info, headers');

$res = $s->request('POST', '/dump.pl?q=0', content => 'a=1&b=two+words&a=3',
    headers => { 'content-type' => 'application/x-www-form-urlencoded' });
is($res->{content}, "q=0\na=1|3\nb=two words\nmethod=POST path=/dump.pl info= addr=127.0.0.1 agent=HTTP-Tiny/$HTTP::Tiny::VERSION\n",
    'a form POST: query string parameters first, then the body\'s');

# A chunked body: plxd spools it and sets CONTENT_LENGTH.
my $sock = $s->connect;
print $sock "POST /dump.pl HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    . "Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n"
    . "4\r\nk=v&\r\n5\r\nk=w&m\r\n0\r\n\r\n";
my $raw = PlxdTest::read_until_closed($sock, 10);
like($raw, qr/^HTTP\/1\.1 200.*\r\n\r\n.*k=v\|w\nm=\n/s, 'a chunked form body');
is(scalar(my @r = responses($raw)), 1, '... one response, framed exactly');

# ---- uploads -----------------------------------------------------------------

my $B = 'requestCgiBoundary';
my $binary = join '', map { chr(($_ * 7 + ($_ >> 8)) % 256) } 0 .. 1_500_000;
my @files = ([ 'doc', 'a.txt', 'text/plain', "hello\r\nworld\n" ], [ 'doc', 'b.bin', 'application/octet-stream', $binary ],
    [ 'other', "\xc3\xa9.dat", undef, '' ]);
my $body = "--$B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nmy files\r\n";
for my $f (@files) {
    $body .= "--$B\r\nContent-Disposition: form-data; name=\"$f->[0]\"; filename=\"$f->[1]\"\r\n"
        . (defined $f->[2] ? "Content-Type: $f->[2]\r\n" : '') . "\r\n$f->[3]\r\n";
}
$body .= "--$B--\r\n";
$res = $s->request('POST', '/dump.pl', content => $body,
    headers => { 'content-type' => "multipart/form-data; boundary=$B" });
is($res->{status}, 200, 'a multipart POST with several files: 200') or diag($res->{content});
is($res->{content}, join('', "title=my files\n", "doc=a.txt|b.bin\n", "other=\xc3\xa9.dat\n",
    map({ "upload $_->[0] $_->[1] " . ($_->[2] // 'undef') . ' ' . length($_->[3]) . ' ' . md5_hex($_->[3]) . "\n" } @files),
    "method=POST path=/dump.pl info= addr=127.0.0.1 agent=HTTP-Tiny/$HTTP::Tiny::VERSION\n"),
    'every field, and every file byte-exact (MD5) with its name and type');
ok(wait_for(sub { !uploads_left() }, 10), 'the upload files are gone after the request');

$res = $s->request('POST', '/upload.pl', content => $body,
    headers => { 'content-type' => "multipart/form-data; boundary=$B" });
like($res->{content}, qr{<td>b\.bin</td><td>application/octet-stream</td><td>1500001</td><td><code>${\ md5_hex($binary)}</code>},
    'the upload sample lists a file with its size and MD5');

# ---- bad input -----------------------------------------------------------------

my $cut = substr($body, 0, 5000);
my @bad = (
    [ 'a bad escape', GET => '/request.pl?a=%G1', undef, undef, 'bad percent escape "%G1" in the query string' ],
    [ 'a bad escape in a form body', POST => '/request.pl', 'a=1&b=%%', 'application/x-www-form-urlencoded',
        'bad percent escape "%%" in the request body' ],
    [ 'a multipart body without its closing boundary', POST => '/request.pl', $cut,
        "multipart/form-data; boundary=$B", 'the multipart body ends inside part "doc", before its closing boundary' ],
    [ 'a boundary that never appears', POST => '/request.pl', "nothing\r\n" x 20,
        "multipart/form-data; boundary=$B", "the multipart body never reaches its boundary \"$B\"" ],
    [ 'multipart without a boundary', POST => '/request.pl', 'x', 'multipart/form-data',
        'multipart/form-data without a boundary' ],
);
for my $case (@bad) {
    my ($what, $method, $path, $content, $type, $message) = @$case;
    my $r = $s->request($method, $path, defined $content ? (content => $content,
        headers => { 'content-type' => $type }) : ());
    is($r->{status}, 400, "$what: 400 through plxd");
    is($r->{headers}{'content-type'}, 'text/plain; charset=utf-8', "$what: a text body");
    is($r->{content}, "400 Bad Request: $message\n", "$what: naming the problem");
    ok($s->wait_log(qr/request\.pl.*PLXD::Request: 400 Bad Request: \Q$message\E/), "$what: in the error log");
}
ok(wait_for(sub { !uploads_left() }, 10), 'no upload file left behind by a bad request');

# Limits passed in the environment.
$res = $tight->get('/request.pl?a&b&c&d');
is($res->{status}, 400, 'PLXD_REQUEST_MAX_FIELDS=3: four parameters are refused');
is($res->{content}, "400 Bad Request: more than 3 parameters\n", '... saying so');
is($tight->get('/request.pl?a&b&c')->{status}, 200, '... three are fine');
$res = $tight->request('POST', '/dump.pl', content => $body,
    headers => { 'content-type' => "multipart/form-data; boundary=$B" });
is($res->{status}, 400, 'PLXD_REQUEST_MAX_UPLOAD_SIZE=1000: a 1.5 MB file is refused');
is($res->{content}, "400 Bad Request: upload \"doc\" is larger than 1000 bytes\n", '... saying so');
ok(wait_for(sub { !uploads_left() }, 10), '... and its partial file is removed');

# ---- the response helpers through plxd's CGI response parser -------------------

$res = $s->get('/respond.pl?case=redirect');
is($res->{status}, 302, 'redirect: 302');
is($res->{headers}{location}, 'http://example.org/elsewhere', 'redirect: its Location');
$res = $s->get('/respond.pl?case=local');
is($res->{status}, 200, 'a local Location without a status: served by plxd itself');
is($res->{content}, $files{'hello.html'}, '... the page it names');
$res = $s->get('/respond.pl?case=missing');
is($res->{status}, 404, 'status(404) keeps its meaning');
is($res->{content}, "body of missing\n", '... with the script\'s body');
$res = $s->get('/respond.pl?case=cookie');
is_deeply($res->{headers}{'set-cookie'}, [ 'a=1; Path=/', 'b=2; Path=/' ], 'two Set-Cookie headers');
is($res->{headers}{'content-type'}, 'text/html; charset=ISO-8859-1', 'the default content type');

# ---- the handler's own way: PERL5LIB and [request] -----------------------------

my $plain = PlxdTest->start(files => { 'request.pl' => $files{'request.pl'} }, handlers => { '.pl' => 'cgi' });
is($plain->get('/request.pl?a=1')->{content}, 'a => 1',
    'request.pl finds PLXD::Request under the default interpreter, without use lib');
$plain->stop;

my $configured = eval {
    PlxdTest->start(files => { 'request.pl' => $files{'request.pl'} }, handlers => { '.pl' => 'cgi' },
        sections => { cgi => { interpreters => ".pl=$tmp/perl" }, request => { max_fields => 3 } });
};
ok($configured, 'plxd accepts a [request] section') or diag($@);
is($configured && $configured->get('/request.pl?a&b&c&d')->{content},
    "400 Bad Request: more than 3 parameters\n", '[request] max_fields = 3 reaches the script');
$configured->stop if $configured;

$_->stop for $s, $tight;
done_testing;
