# PLXD::Request in both handlers: the same script answers the same as .pl
# (a process per request) and as .plx (persistent workers), parameters,
# cookies, uploads, bad input and the [request] limits included; and
# request.plx answers what cgi_pm.plx answers, as request.pl does cgi_pm.pl.
use strict;
use warnings;
use File::Temp qw(tempdir);
use Test::More;
use PlxdTest qw(source_dir read_file wait_for);

my $dump = <<'PL';
use strict;
use PLXD::Request;
my $q = PLXD::Request->new;
$q->content_type('text/plain');
$q->send_header;
print "method ", $q->method, "\n";
print "param $_ = ", join('|', $q->param($_)), "\n" for $q->param;
print "cookie $_ = ", scalar $q->cookie($_), "\n" for $q->cookie;
for my $u ($q->upload) {
    print "upload ", $u->name, " ", $u->filename, " ", $u->type, " ", $u->size, " ",
        $u->slurp, "\n";
}
PL

# The upload folder of its own, to see that no file outlives its request.
my $uploads = tempdir('plxd-uploads-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0777, $uploads;
sub uploads_left { opendir my $d, $uploads or die; return grep { !/^\./ } readdir $d }

my $src = source_dir();
my %files = (
    'dump.pl' => $dump, 'dump.plx' => $dump,
    map { $_ => read_file("$src/cgi-bin/$_") } qw(request.pl request.plx cgi_pm.pl cgi_pm.plx),
);
my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    server   => { tmp_dir => $uploads },
    sections => { perl => { workers => 2 }, request => { max_fields => 5 } },
);

my $boundary = 'XyZ';
my $multipart = join '',
    "--$boundary\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhello world\r\n",
    "--$boundary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.txt\"\r\n"
    . "Content-Type: text/plain\r\n\r\nfile one\r\n",
    "--$boundary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"b.bin\"\r\n"
    . "Content-Type: application/octet-stream\r\n\r\nfile two\r\n",
    "--$boundary--\r\n";

my @cases = (
    [ 'repeated keys, empty values, + and %20', GET => '?a=1&a=2&b=&c=x+y%20z' ],
    [ 'UTF-8', GET => '?w=%C3%A9t%C3%A9' ],
    [ 'cookies', GET => '?', headers => { Cookie => 'k=v; n=2' } ],
    [ 'urlencoded POST', POST => '?q=1', content => 'p=3&p=4',
        headers => { 'Content-Type' => 'application/x-www-form-urlencoded' } ],
    [ 'multipart with two files', POST => '', content => $multipart,
        headers => { 'Content-Type' => "multipart/form-data; boundary=$boundary" } ],
    [ 'a bad escape is a 400', GET => '?x=%G1' ],
    [ 'over [request] max_fields is a 400', GET => '?a&b&c&d&e&f' ],
    [ 'truncated multipart is a 400', POST => '', content => substr($multipart, 0, 60),
        headers => { 'Content-Type' => "multipart/form-data; boundary=$boundary" } ],
);
for my $c (@cases) {
    my ($name, $method, $query, %args) = @$c;
    my %r = map {
        my $res = $s->request($method, "/dump.$_$query", %args);
        ($_ => "$res->{status}\n$res->{content}");
    } qw(pl plx);
    is($r{plx}, $r{pl}, "$name: .plx answers as .pl");
    # A worker lives on: the request's files must go with the request.
    ok(wait_for(sub { !uploads_left() }, 10), "$name: no upload file left")
        if $name =~ /multipart/;
}
like($s->request('GET', '/dump.plx?a=1&a=2')->{content}, qr/^param a = 1\|2$/m, 'and the answers are right');
like($s->request('GET', '/dump.plx?x=%G1')->{content}, qr/bad percent escape/, 'a 400 names the problem');

# The seed's script, both ways, both modules.
my $seed = '?a=b&c=+k+d+d+f&d=asf&as=+1+2+3+4';
my %seed = map { $_ => $s->get("/$_$seed")->{content} } qw(request.pl request.plx cgi_pm.pl cgi_pm.plx);
is($seed{'request.plx'}, $seed{'cgi_pm.plx'}, 'request.plx answers what cgi_pm.plx answers');
is($seed{'request.pl'}, $seed{'cgi_pm.pl'}, 'request.pl answers what cgi_pm.pl answers');
is($seed{'request.plx'}, "a => b\nc =>  k d d f\nd => asf\nas =>  1 2 3 4", 'the seed\'s answer');

# Nothing of one request's parameters reaches the next in a worker.
$s->get('/dump.plx?only=once') for 1 .. 2;
unlike($s->get('/dump.plx?other=1')->{content}, qr/only/, 'no parameter carries over to the next request');
done_testing;
