# The static handler: content types, HEAD, validators and 304 (never a
# stale one), single byte ranges (206, 416), folders (index.html, 301 to the
# slash, 403 without an index), 405 with Allow, 404, large files, and the
# line between files sent from memory (up to 16 KiB) and with sendfile;
# [static] deny: hidden names and editor leftovers are 404 for every
# handler, /.well-known/ excepted, with a custom list and an empty one.
use strict;
use warnings;
use Test::More;
use IO::Select;
use POSIX qw(mkfifo);
use Time::HiRes ();
use PlxdTest;
use PlxdRaw qw(responses request_bytes read_responses);

my $hello = "hello world\n"; # 12 bytes
my $big = join '', map { sprintf "%07d\n", $_ } 0 .. 699_999; # 5.6 MB
# Around the size up to which a file is read into memory (16 KiB).
my %edge = map { ("edge$_.bin" => substr($big, 1000, $_)) } 16383, 16384, 16385;
my $s = PlxdTest->start(
    files => {
        'hello.txt'       => $hello,
        'page.html'       => "<p>page</p>\n",
        'STYLE.CSS'       => "p {}\n",
        'archive.tar.gz'  => "gz",
        'noext'           => "no extension\n",
        'empty.txt'       => '',
        'big.bin'         => $big,
        'dir/index.html'  => "<p>dir index</p>\n",
        'dir/other.txt'   => "other\n",
        'a b/index.html'  => "spaced\n",
        'script.pl'       => "print 'source';\n",
        'site.pl/index.html'  => "<p>site.pl index</p>\n",
        'site.plx/index.html' => "<p>site.plx index</p>\n",
        'site.plt/index.html' => "<p>site.plt index</p>\n",
        %edge,
    },
    handlers => { '.pl' => 'echo', '.plx' => 'echo', '.plt' => 'echo' },
);
my $root = $s->root;
mkdir "$root/empty" or die "mkdir: $!";

# One request over its own connection; the first response, parsed.
sub one {
    my ($req, %o) = @_;
    my @r = responses($s->raw($req, 10), %o);
    return $r[0] // { status => 0, headers => {}, body => '' };
}
sub get_raw { one(request_bytes('GET', $_[0], 'Connection: close', @_[1 .. $#_])) }

# Sets a file's modification time (fractional seconds allowed).
sub set_mtime { my ($file, $t) = @_; Time::HiRes::utime($t, $t, "$root/$file") or die "utime: $!" }
my $past = int(time) - 1000;
set_mtime($_, $past + 0.25) for qw(hello.txt page.html big.bin dir/index.html empty.txt), keys %edge;

# ---- content and types ------------------------------------------------------
my $r = get_raw('/hello.txt');
is($r->{status}, 200, 'GET a file');
is($r->{body}, $hello, 'its content');
is($r->{headers}{'content-length'}, 12, 'Content-Length');
is($r->{headers}{'content-type'}, 'text/plain', 'Content-Type from /etc/mime.types');
is($r->{headers}{'accept-ranges'}, 'bytes', 'Accept-Ranges');
is($r->{headers}{'x-content-type-options'}, 'nosniff', 'nosniff');
is(get_raw('/page.html')->{headers}{'content-type'}, 'text/html', 'html');
is(get_raw('/STYLE.CSS')->{headers}{'content-type'}, 'text/css',
    'extensions match without regard to case (as routing does)');
is(get_raw('/archive.tar.gz')->{headers}{'content-type'}, 'application/gzip', 'the last extension');
is(get_raw('/noext')->{headers}{'content-type'}, 'application/octet-stream',
    'no extension: default_type');
$r = get_raw('/empty.txt');
is($r->{status}, 200, 'an empty file');
is($r->{headers}{'content-length'}, 0, 'with Content-Length 0');

$r = one(request_bytes('HEAD', '/hello.txt', 'Connection: close'), head => [0]);
is($r->{status}, 200, 'HEAD');
is($r->{headers}{'content-length'}, 12, 'HEAD says the size');
my $raw = $s->raw(request_bytes('HEAD', '/hello.txt', 'Connection: close'));
like($raw, qr/\r\n\r\n\z/, 'HEAD sends no body');
is(scalar(my @rh = responses($raw, head => [0])), 1, '... one response, framed exactly');

# ---- validators, 304, never stale ------------------------------------------
$r = get_raw('/hello.txt');
my ($etag, $lm) = @{ $r->{headers} }{qw(etag last-modified)};
like($etag, qr/^"[0-9a-f]+-c-[0-9a-f]+\.\d{9}"$/, 'a strong ETag: inode, size, mtime to the ns');
like($lm, qr/^\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$/, 'Last-Modified');

$r = get_raw('/hello.txt', "If-None-Match: $etag");
is($r->{status}, 304, 'If-None-Match with the ETag: 304');
is($r->{body}, '', '304 has no body');
is($r->{headers}{etag}, $etag, '304 repeats the ETag');
ok(!defined $r->{headers}{'content-length'} || $r->{headers}{'content-length'} == 12,
    "304: no Content-Length, or the 200's (RFC 9110 8.6)");
{
    my @two = responses($s->raw(request_bytes('GET', '/hello.txt', "If-None-Match: $etag")
        . request_bytes('GET', '/hello.txt', 'Connection: close'), 10));
    is(join(' ', map { $_->{status} } @two), '304 200', 'a 304 sends no body: the next response follows');
    is($two[1]{body}, $hello, 'intact');
}
is(get_raw('/hello.txt', qq{If-None-Match: "x", W/$etag})->{status}, 304, 'weakly, in a list: 304');
is(get_raw('/hello.txt', 'If-None-Match: *')->{status}, 304, '*: 304');
is(get_raw('/hello.txt', 'If-None-Match: "other"')->{status}, 200, 'another ETag: 200');
is(get_raw('/hello.txt', "If-Modified-Since: $lm")->{status}, 304, 'If-Modified-Since equal: 304');
is(get_raw('/hello.txt', 'If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT')->{status}, 200,
    'If-Modified-Since another date: 200');
is(get_raw('/hello.txt', 'If-None-Match: "other"', "If-Modified-Since: $lm")->{status}, 200,
    'If-None-Match wins over If-Modified-Since');
$r = one(request_bytes('HEAD', '/hello.txt', 'Connection: close', "If-None-Match: $etag"),
    head => [0]);
is($r->{status}, 304, 'HEAD gets 304 too');


# If-Match and If-Unmodified-Since (RFC 9110 13.1.1, 13.1.4), in the order
# of 13.2.2: If-Match, then If-Unmodified-Since only without it, then
# If-None-Match, then If-Modified-Since, then Range and If-Range.
(my $weak = $etag) =~ s/^/W\//;
my $before = 'Sat, 01 Jan 2000 00:00:00 GMT';    # before the file's time
my $after = 'Fri, 01 Jan 2100 00:00:00 GMT';
my @preconditions = (
    [ "If-Match: $etag" => 200, 'If-Match with the ETag: 200' ],
    [ qq{If-Match: "x", $etag} => 200, 'If-Match with the ETag in a list: 200' ],
    [ 'If-Match: *' => 200, 'If-Match *: 200' ],
    [ 'If-Match: "x"' => 412, 'If-Match with another ETag: 412' ],
    [ qq{If-Match: "x", "y"} => 412, 'If-Match with a list of others: 412' ],
    [ "If-Match: $weak" => 412, 'If-Match with the ETag marked weak: 412 (strong comparison)' ],
    [ qq{If-Match: "x", $weak} => 412, '... also in a list' ],
    [ "If-Unmodified-Since: $lm" => 200, 'If-Unmodified-Since the Last-Modified date: 200' ],
    [ "If-Unmodified-Since: $after" => 200, 'If-Unmodified-Since a later date: 200' ],
    [ "If-Unmodified-Since: $before" => 412, 'If-Unmodified-Since an earlier date: 412' ],
    [ 'If-Unmodified-Since: junk' => 200, 'If-Unmodified-Since not a date: ignored' ],
    [ [ "If-Match: $etag", "If-Unmodified-Since: $before" ] => 200,
        'If-Match holding: If-Unmodified-Since is not looked at' ],
    [ [ 'If-Match: "x"', "If-None-Match: $etag" ] => 412, 'If-Match comes before If-None-Match' ],
    [ [ "If-Unmodified-Since: $before", "If-None-Match: $etag" ] => 412,
        'If-Unmodified-Since comes before If-None-Match' ],
    [ [ "If-Match: $etag", "If-None-Match: $etag" ] => 304, 'If-Match holding, If-None-Match: 304' ],
    [ [ "If-Unmodified-Since: $lm", "If-Modified-Since: $lm" ] => 304,
        'If-Unmodified-Since holding, If-Modified-Since: 304' ],
    [ [ 'If-Match: "x"', 'Range: bytes=0-4' ] => 412, 'If-Match comes before Range' ],
    [ [ "If-Match: $etag", 'Range: bytes=0-4', "If-Range: $etag" ] => 206,
        'If-Match holding, then Range with If-Range: 206' ],
    # Repeated field lines are one list (RFC 9110 5.3).
    [ [ 'If-Match: "x"', "If-Match: $etag" ] => 200, 'If-Match on two lines, the ETag on the second: 200' ],
    [ [ 'If-Match: "x"', 'If-Match: "y"' ] => 412, 'If-Match on two lines, neither the ETag: 412' ],
    [ [ 'If-None-Match: "a"', "If-None-Match: $etag" ] => 304,
        'If-None-Match on two lines, the ETag on the second: 304' ],
    [ [ 'If-None-Match: "a"', 'If-None-Match: "b"' ] => 200, 'If-None-Match on two lines, neither: 200' ],
);
for my $case (@preconditions) {
    my ($fields, $want, $name) = @$case;
    is(get_raw('/hello.txt', ref $fields ? @$fields : $fields)->{status}, $want, $name);
}
$r = one(request_bytes('HEAD', '/hello.txt', 'Connection: close', 'If-Match: "x"'), head => [0]);
is($r->{status}, 412, 'HEAD gets 412 too');
{
    my @two = responses($s->raw(request_bytes('GET', '/hello.txt', 'If-Match: "x"')
        . request_bytes('GET', '/hello.txt', 'Connection: close'), 10));
    is(join(' ', map { $_->{status} } @two), '412 200', 'a 412 keeps the connection for the next request');
}
is(get_raw('/missing.txt', 'If-Match: *')->{status}, 404, 'If-Match * on a missing file: 404');

# Rewritten in place (same inode, same size) within the same second.
open my $fh, '+<', "$root/hello.txt" or die;
print $fh "HELLO WORLD\n";
close $fh;
set_mtime('hello.txt', $past + 0.75);
$r = get_raw('/hello.txt', "If-None-Match: $etag");
is($r->{status}, 200, 'same size, same inode, same second: the old ETag gets 200');
is($r->{body}, "HELLO WORLD\n", 'with the new content');
isnt($r->{headers}{etag}, $etag, 'and a new ETag');
my $etag2 = $r->{headers}{etag};

# Rewritten just now: no validators for a second, so none can go stale.
open $fh, '+<', "$root/hello.txt" or die;
print $fh "hello again\n";
close $fh;
my $t0 = Time::HiRes::time;
$r = get_raw('/hello.txt', "If-None-Match: $etag2");
my $took = Time::HiRes::time - $t0;
SKIP: {
    skip "the request took ${took}s: the file is no longer recent", 3 if $took > 0.9;
    is($r->{status}, 200, 'modified just now: 200 whatever the client holds');
    ok(!exists $r->{headers}{etag}, 'no ETag for a file modified within the last second');
    ok(!exists $r->{headers}{'last-modified'}, 'no Last-Modified either');
}
is($r->{body}, "hello again\n", 'the newest content');
set_mtime('hello.txt', time + 30);
$r = get_raw('/hello.txt', 'If-None-Match: *');
is($r->{status}, 200, 'a modification time in the future: no 304, even for *');
ok(!exists $r->{headers}{etag}, 'and no ETag');

# Replaced by an older file (rsync, tar): If-Modified-Since must be equal.
set_mtime('hello.txt', $past + 0.25);
$r = get_raw('/hello.txt');
my ($etag3, $lm3) = @{ $r->{headers} }{qw(etag last-modified)};
PlxdTest::write_file("$root/hello.new", "older file!\n");
set_mtime('hello.new', $past - 500);
rename "$root/hello.new", "$root/hello.txt" or die;
$r = get_raw('/hello.txt', "If-Modified-Since: $lm3");
is($r->{status}, 200, 'replaced by an older file: If-Modified-Since no longer matches');
is($r->{body}, "older file!\n", 'the replacement is sent');
is(get_raw('/hello.txt', "If-None-Match: $etag3")->{status}, 200, 'nor does the old ETag');
PlxdTest::write_file("$root/hello.txt", $hello);
set_mtime('hello.txt', $past + 0.25);

# ---- ranges --------------------------------------------------------------
$r = get_raw('/hello.txt', 'Range: bytes=0-4');
is($r->{status}, 206, 'Range: 206');
is($r->{body}, 'hello', 'the first five bytes');
is($r->{headers}{'content-range'}, 'bytes 0-4/12', 'Content-Range');
is($r->{headers}{'content-length'}, 5, 'Content-Length of the part');
is(get_raw('/hello.txt', 'Range: bytes=6-')->{body}, "world\n", 'an open range');
is(get_raw('/hello.txt', 'Range: bytes=-3')->{body}, "ld\n", 'a suffix range');
is(get_raw('/hello.txt', 'Range: bytes=10-99')->{body}, "d\n", 'clamped to the file');
$r = get_raw('/hello.txt', 'Range: bytes=12-');
is($r->{status}, 416, 'past the end: 416');
is($r->{headers}{'content-range'}, 'bytes */12', '416 says the size');
is(get_raw('/empty.txt', 'Range: bytes=0-')->{status}, 416, 'any range of an empty file: 416');
$r = get_raw('/hello.txt', 'Range: bytes=0-1,4-5');
is($r->{status}, 200, 'several ranges: the whole file (200)');
is($r->{body}, $hello, 'all of it');
is(get_raw('/hello.txt', 'Range: bytes=5-2')->{status}, 200, 'an invalid range is ignored');
is(get_raw('/hello.txt', 'Range: lines=1-2')->{status}, 200, 'another unit is ignored');
$r = one(request_bytes('HEAD', '/hello.txt', 'Connection: close', 'Range: bytes=0-4'), head => [0]);
is($r->{status}, 200, 'HEAD ignores Range');
$r = get_raw('/hello.txt');
($etag, $lm) = @{ $r->{headers} }{qw(etag last-modified)};
is(get_raw('/hello.txt', 'Range: bytes=0-4', "If-Range: $etag")->{status}, 206,
    'If-Range with the ETag: 206');
is(get_raw('/hello.txt', 'Range: bytes=0-4', "If-Range: $lm")->{status}, 206,
    'If-Range with Last-Modified: 206');
$r = get_raw('/hello.txt', 'Range: bytes=0-4', 'If-Range: "stale"');
is($r->{status}, 200, 'If-Range with another ETag: the whole file');
is($r->{body}, $hello, 'all of it');
$r = get_raw('/big.bin', 'Range: bytes=-8');
is($r->{body}, "0699999\n", 'a range at the end of a large file');
is($r->{headers}{'content-range'}, 'bytes ' . (length($big) - 8) . '-' . (length($big) - 1)
    . '/' . length($big), 'with its Content-Range');
$r = get_raw('/big.bin', 'Range: bytes=4000000-4000015');
is($r->{body}, substr($big, 4_000_000, 16), 'a range in the middle (sendfile from an offset)');

my $res = $s->get('/big.bin');
is($res->{status}, 200, 'a 5.6 MB file');
ok($res->{content} eq $big, 'arrives whole');

# ---- folders --------------------------------------------------------------
$r = get_raw('/dir/');
is($r->{status}, 200, 'a folder with its slash: its index.html');
is($r->{body}, "<p>dir index</p>\n", 'the index content');
is($r->{headers}{'content-type'}, 'text/html', 'typed as html');
ok($r->{headers}{etag}, 'with validators');
$r = get_raw('/dir');
is($r->{status}, 301, 'a folder without its slash: 301');
is($r->{headers}{location}, '/dir/', 'to the folder with its slash');
is(get_raw('/dir?x=1&y=%20')->{headers}{location}, '/dir/?x=1&y=%20', 'the query is kept');
is(get_raw('//dir')->{headers}{location}, '/dir/', 'never a "//" Location (another host)');
is(get_raw('/a%20b')->{headers}{location}, '/a%20b/', 'the Location is percent-encoded');
is(get_raw('/a%20b/')->{body}, "spaced\n", 'and leads to the folder');
is(get_raw('/empty/')->{status}, 403, 'a folder without index.html: 403, no listing');
unlike(get_raw('/empty/')->{body}, qr/index of/i, 'no listing in the page');
is(get_raw('/empty')->{status}, 301, 'without its slash it is still redirected first');
is(get_raw('/')->{status}, 403, 'the root without index.html: 403');
is(get_raw('/dir/other.txt')->{body}, "other\n", 'a file in a folder');
# A folder named like a script is a folder: the redirect to its slash, then
# its index, as for any other.
for my $ext (qw(pl plx plt)) {
    $r = get_raw("/site.$ext");
    is($r->{status}, 301, "a folder named site.$ext, without its slash: 301");
    is($r->{headers}{location}, "/site.$ext/", '... to the folder with its slash');
    is(get_raw("/site.$ext?a=1&b=%20")->{headers}{location}, "/site.$ext/?a=1&b=%20",
        '... the query kept');
    is(get_raw("/site.$ext/")->{body}, "<p>site.$ext index</p>\n", '... where its index.html is served');
}
mkdir "$root/bare.pl" or die;
is(get_raw('/bare.pl')->{status}, 301, 'a folder bare.pl without index.html: 301 first');
is(get_raw('/bare.pl/')->{status}, 403, '... then 403, no listing');
mkdir "$root/dir2" or die;
mkdir "$root/dir2/index.html" or die;
is(get_raw('/dir2/')->{status}, 403, 'a folder named index.html is not an index');

# ---- methods and errors ---------------------------------------------------
for my $method (qw(POST PUT DELETE OPTIONS PATCH)) {
    $r = one(request_bytes($method, '/hello.txt', 'Connection: close', 'Content-Length: 0'));
    is($r->{status}, 405, "$method on a static file: 405");
    is($r->{headers}{allow}, 'GET, HEAD', "$method: Allow: GET, HEAD");
}
is(one(request_bytes('POST', '/dir/', 'Connection: close', 'Content-Length: 0'))->{status}, 405,
    'POST to a folder: 405');
# A large body is refused at once, not read.
{
    my $sock = $s->connect;
    $sock->syswrite(request_bytes('POST', '/hello.txt', 'Content-Length: 50000000'));
    my @resp = responses(PlxdTest::read_until_closed($sock, 10));
    is($resp[0]{status}, 405, 'POST with a 50 MB body announced: 405 before the body');
}
is(get_raw('/missing.txt')->{status}, 404, 'a missing file: 404');
is(get_raw('/hello.txt/extra')->{status}, 404, 'a path below a static file: 404');
is(get_raw('/hello.txt/')->{status}, 404, 'a static file with a slash: 404');
SKIP: {
    skip 'root reads any file', 1 if $> == 0;
    chmod 0000, "$root/dir/other.txt";
    is(get_raw('/dir/other.txt')->{status}, 403, 'an unreadable file: 403');
}

# ---- keep-alive ------------------------------------------------------------
{
    my $sock = $s->connect;
    $sock->syswrite(request_bytes('GET', '/hello.txt'));
    my $buf = '';
    my $sel = IO::Select->new($sock);
    PlxdTest::wait_for(sub {
        if ($sel->can_read(0.05)) {
            my $n = sysread($sock, my $chunk, 65536);
            $buf .= $chunk if $n;
        }
        my @resp = responses($buf);
        @resp && length $resp[0]{body} == 12;
    }, 10);
    $sock->syswrite(request_bytes('GET', '/page.html', 'Connection: close'));
    my @resp = responses($buf . PlxdTest::read_until_closed($sock, 10));
    is(scalar @resp, 2, 'a static response keeps the connection open for the next request');
    is($resp[1]{body}, "<p>page</p>\n", 'which is answered');
}

# ---- files around the in-memory size ----------------------------------------
for my $name (sort keys %edge) {
    my $want = $edge{$name};
    my $len = length $want;
    $r = get_raw("/$name");
    ok($r->{status} == 200 && $r->{body} eq $want && $r->{headers}{'content-length'} == $len,
        "$len bytes: the whole file");
    $r = get_raw("/$name", 'Range: bytes=16380-16390');
    is($r->{body}, substr($want, 16380, 11), "$len bytes: a range across 16 KiB");
    is($r->{headers}{'content-range'}, sprintf('bytes 16380-%d/%d', $len < 16391 ? $len - 1 : 16390, $len),
        "$len bytes: its Content-Range");
}
# A 304 sends no body, and the access log says so.
{
    my $etag = get_raw('/edge16384.bin')->{headers}{etag};
    is(get_raw('/edge16384.bin', "If-None-Match: $etag", 'User-Agent: edge-304')->{status}, 304,
        'a small file: 304');
    my $line = PlxdTest::wait_for(sub { (grep { /edge-304/ } split /\n/, $s->access_log)[0] }, 5);
    like($line // '', qr{" 304 (?:0|-) }, 'the access log counts no body bytes for the 304');
}

# ---- configuration ---------------------------------------------------------
my $t = PlxdTest->start(
    files    => { 'index.html' => "root index\n", 'data.weird' => 'x', 'data.css' => 'y' },
    sections => { static => { mime_types => '/nonexistent/mime.types', default_type => 'text/plain' } },
);
is($t->get('/')->{content}, "root index\n", 'the root index.html');
is($t->get('/data.weird')->{headers}{'content-type'}, 'text/plain', 'default_type');
is($t->get('/data.css')->{headers}{'content-type'}, 'text/css',
    'without mime_types, the built-in table');
like($t->error_log, qr{static: cannot read /nonexistent/mime.types}, 'and a warning says so');

# ---- [static] deny -------------------------------------------------------------
# The default refuses hidden names (but /.well-known/) and editor and backup
# leftovers, matched against every segment of the path in any case, for
# every handler: routing refuses them before a handler is chosen.
my %private = map { ($_ => "PRIVATE $_\n") } (
    '.htpasswd', '.htaccess', '.env', '.git/config', '.git/HEAD', 'sub/.svn/entries',
    '.hidden/page.html', '.DS_Store', 'x.pl~', 'page.html~', '.x.pl.swp', 'x.pl.swp', 'x.swo',
    'x.pl.bak', 'X.PL.BAK', '#x.pl#', 'x.orig', 'x.old', 'x.rej', 'x.save', 'x.tmp',
    '.well-known/.htaccess', '.x.pl',
);
my %public = (
    '.well-known/security.txt'   => "security\n",
    '.well-known/acme-challenge/token' => "token\n",
    'a~b.txt'        => "tilde inside\n",
    'x.bak.txt'      => "bak inside\n",
    'old.txt'        => "old word\n",
    'hash#tag.txt'   => "hash inside\n",
    'sub/page.html'  => "sub page\n",
    'run.pl'         => "SOURCE\n",
);
my $d = PlxdTest->start(files => { %private, %public }, handlers => { '.pl' => 'echo' },
    sections => { echo => { greeting => 'SCRIPT-RAN' } });
symlink '.env', $d->root . '/env.txt' or die;           # a harmless name for a hidden file
mkfifo($d->root . '/.fifo', 0600) or die "mkfifo: $!"; # 403 if it were not denied
my %enc = ('#' => '%23');
sub url_of { (my $u = "/$_[0]") =~ s/([#])/$enc{$1}/g; $u }
for my $name (sort keys %private) {
    for my $method (qw(GET HEAD)) {
        my $raw = $d->raw(request_bytes($method, url_of($name), 'Connection: close'), 10);
        my @r = responses($raw, head => ($method eq 'HEAD' ? [0] : []));
        is($r[0]{status}, 404, "$method /$name: 404");
        unlike($raw, qr/PRIVATE|SCRIPT-RAN/, "$method /$name: neither sent nor run");
    }
}
for my $target ('/.git/', '/.git', '/.hidden/', '/%2egit/config', '/sub/../.env', '/env.txt',
        '/.fifo', '/.missing', '/.git/missing') {
    my $raw = $d->raw(request_bytes('GET', $target, 'Connection: close'), 10);
    is((responses($raw))[0]{status}, 404, "GET $target: 404");
    unlike($raw, qr/PRIVATE/, "GET $target: nothing private");
}
for my $name (sort keys %public) {
    my ($r) = responses($d->raw(request_bytes('GET', url_of($name), 'Connection: close'), 10));
    is($r->{status}, 200, "GET /$name: 200");
    my $want = $name eq 'run.pl' ? qr/^SCRIPT-RAN\n/ : qr/^\Q$public{$name}\E\z/;
    like($r->{body}, $want, "GET /$name: served");
}
like((responses($d->raw(request_bytes('GET', '/run.pl/.hidden', 'Connection: close'), 10)))[0]{body},
    qr/^path_info \/\.hidden$/m, 'deny names files: a hidden segment in PATH_INFO reaches the script');
like($d->error_log, qr{refused /\.htpasswd: a name \[static\] deny refuses}, 'refusals are logged');

# A list of one's own replaces the default; "!" excepts.
my $c = PlxdTest->start(files => { 'a.secret' => "A\n", 'keep.secret' => "K\n",
        '.htpasswd' => "H\n", 'x.pl~' => "T\n", 'sub/b.SECRET' => "B\n" },
    sections => { static => { deny => '*.secret !keep.*' } });
is($c->get('/a.secret')->{status}, 404, 'custom list: a.secret 404');
is($c->get('/sub/b.SECRET')->{status}, 404, 'custom list: in any case, in a folder');
is($c->get('/keep.secret')->{content}, "K\n", 'custom list: the exception is served');
is($c->get('/.htpasswd')->{content}, "H\n", 'custom list: the default no longer applies');
is($c->get('/x.pl~')->{content}, "T\n", 'custom list: nor to leftovers');

# An empty list denies nothing, but a file named only like a mapped
# extension is still never sent.
my $e = PlxdTest->start(files => { '.htpasswd' => "H\n", 'x.pl~' => "T\n", '.pl' => "SOURCE\n",
        '.x.pl' => "S\n" },
    handlers => { '.pl' => 'echo' }, sections => { static => { deny => '' } });
is($e->get('/.htpasswd')->{content}, "H\n", 'empty list: hidden files are served');
is($e->get('/x.pl~')->{content}, "T\n", 'empty list: leftovers too');
like($e->get('/.x.pl')->{content}, qr/^echo\n/, 'empty list: a hidden script runs');
is($e->get('/.pl')->{status}, 404, 'empty list: a file named .pl is still 404');
unlike($e->get('/.pl')->{content}, qr/SOURCE/, '... and never sent');

# A small file's response is kept per event thread: a change to the file,
# even one that keeps its size and its modification time, is served at
# once (the inode's change time moves with every write). Every request on
# one kept-alive connection, so one thread answers them all.
{
    my $c = PlxdTest->start(files => { 'kept.txt' => "one\n" });
    my $file = $c->root . '/kept.txt';
    # An hour old: validators (and so the kept response) are used only
    # for a file unchanged for a second at least (cond.c).
    my $mtime = time - 3600;
    utime $mtime, $mtime, $file;
    my $ka = $c->connect;
    my $get = sub {
        $ka->syswrite("GET /kept.txt HTTP/1.1\r\nHost: x\r\n\r\n");
        my ($res) = read_responses($ka, 1);
        return $res->{body};
    };
    is($get->(), "one\n", 'a small file');
    is($get->(), "one\n", '... again, from the kept response');
    PlxdTest::write_file($file, "two\n");
    utime $mtime, $mtime, $file;
    is($get->(), "two\n", 'rewritten with the same size and mtime: the new content');
    PlxdTest::write_file($file, "three\n");
    is($get->(), "three\n", 'rewritten longer: the new content');
    $c->stop;
}

# [server] stat_cache: a file found before is served without opening it
# again, until inotify reports a change; every change below is seen by the
# very next request on the same connection, with the cache on (the default)
# and off.
for my $cache ('yes', 'no') {
    my $c = PlxdTest->start(
        files  => { 'sc/page.txt' => "one\n", 'outside.txt' => "secret\n" },
        server => { stat_cache => $cache });
    my $root = $c->root;
    my $ka = $c->connect;
    my $get = sub {
        $ka->syswrite("GET $_[0] HTTP/1.1\r\nHost: x\r\n\r\n");
        my ($res) = read_responses($ka, 1);
        return $res ? "$res->{status} $res->{body}" : 'no answer';
    };
    my $what = "stat_cache = $cache";
    is($get->('/sc/page.txt'), "200 one\n", "$what: a file");
    is($get->('/sc/page.txt'), "200 one\n", "$what: ... again");
    PlxdTest::write_file("$root/sc/new.txt", "two\n");
    rename "$root/sc/new.txt", "$root/sc/page.txt" or die "rename: $!";
    is($get->('/sc/page.txt'), "200 two\n", "$what: another file renamed over it: the new one");
    unlink "$root/sc/page.txt";
    symlink '../../outside.txt', "$root/sc/page.txt" or die "symlink: $!";
    rename "$root/outside.txt", "$root/../outside.txt" or die "rename: $!";
    like($get->('/sc/page.txt'), qr/^403 /, "$what: replaced by a link out of the root: 403");
    unlink "$root/sc/page.txt";
    like($get->('/sc/page.txt'), qr/^404 /, "$what: removed: 404");
    PlxdTest::write_file("$root/sc/page.txt", "three\n");
    is($get->('/sc/page.txt'), "200 three\n", "$what: made again: served");
    rename "$root/sc", "$root/sc.old" or die "rename: $!";
    like($get->('/sc/page.txt'), qr/^404 /, "$what: its folder renamed away: 404");
    mkdir "$root/sc" or die "mkdir: $!";
    PlxdTest::write_file("$root/sc/page.txt", "four\n");
    is($get->('/sc/page.txt'), "200 four\n", "$what: a new folder of that name: its file");
    # A write through a second name in a folder outside the root.
    link "$root/sc/page.txt", "$root/../page-link.txt" or die "link: $!";
    open my $fh, '>>', "$root/../page-link.txt" or die "open: $!";
    print $fh "more\n";
    close $fh;
    is($get->('/sc/page.txt'), "200 four\nmore\n", "$what: written through a hard link elsewhere: the new content");
    unlink "$root/../page-link.txt";
    if ($cache eq 'yes') {
        # The event loop watches inotify's descriptor: it is read when it
        # has news, not by each request to find that it has none.
        $get->('/sc/page.txt');
        my $answered = 0;
        my @reads = grep { /inotify/ } $c->strace_during($c->pid, ['read'], sub {
            $answered = grep { $get->("/sc/page.txt") eq "200 four\nmore\n" } 1 .. 20;
        });
        is($answered, 20, "$what: 20 requests under strace");
        is(scalar @reads, 0, "$what: ... and no read of inotify's descriptor for them")
            or diag(join "\n", @reads);
    }
    $c->stop;
}

# A small file rewritten in place (truncated, then written) while it is
# requested, many times over: each answer is the old content, the new, or
# the empty file of the instant between, whole, with its own length; never
# a 500 nor the new content cut at the old size (the stat cache's stat is
# older than the request's read). Pipelined on one connection, so that the
# requests come faster than the rewrites.
for my $cache ('yes', 'no') {
    my %content = (old => 'o' x 100 . "\n", new => 'n' x 3000 . "\n");
    my $c = PlxdTest->start(files => { 'churn.txt' => $content{old} },
        server => { stat_cache => $cache });
    my $file = $c->root . '/churn.txt';
    my $writer = fork // die "fork: $!";
    if (!$writer) {
        for (my $i = 1;; $i++) {
            open my $fh, '>', $file or POSIX::_exit(1);
            syswrite $fh, $content{$i % 2 ? 'new' : 'old'};
            close $fh;
        }
    }
    my $ka = $c->connect;
    my %seen;
    for (1 .. 30) {
        $ka->syswrite("GET /churn.txt HTTP/1.1\r\nHost: x\r\n\r\n" x 100);
        for my $res (read_responses($ka, 100)) {
            my $body = $res->{body};
            $seen{ $res->{status} != 200 ? "status $res->{status}"
                : $body eq $content{old} ? 'old' : $body eq $content{new} ? 'new'
                : $body eq '' ? 'empty' : 'another body' }++;
        }
    }
    kill 'KILL', $writer;
    waitpid $writer, 0;
    my $what = "stat_cache = $cache: 3000 requests for a file rewritten meanwhile";
    my $seen = join ', ', map { "$_: $seen{$_}" } sort keys %seen;
    is(($seen{old} // 0) + ($seen{new} // 0) + ($seen{empty} // 0), 3000,
        "$what: each gets 200 with the old, the new or no content ($seen)");
    unlike($c->error_log, qr/churn\.txt/, "$what: nothing logged");
    $c->stop;
}

# A pattern with '/' can never match a name: a configuration error.
my ($status, undef, $err) = PlxdTest::run_plxd('--check', '--config',
    do { my $f = $e->dir . '/bad.conf'; PlxdTest::write_file($f, "[server]\nroot = root\n[static]\ndeny = a/b\n"); $f });
isnt($status, 0, "deny = a/b: --check fails");
like($err, qr{bad\.conf:4: \[static\] deny: a pattern matches one name, so it cannot hold '/'},
    '... naming file, line and key');

# A file plxd cannot open for a reason of its own (no descriptor left) is a
# 500 with a line in the log that says why, and the connection and the
# server go on; a script is opened the same way before any handler has it,
# so a .pl (CGI) and a .plx get the same answer. The open-files limit is
# lowered under plxd while a kept-alive connection waits, and raised again.
{
    my $s = PlxdTest->start(files => { 'a.txt' => "a\n", 'b.txt' => "b\n",
            'c.pl' => "print qq{Content-Type: text/plain\\n\\nc\\n};\n",
            'd.plx' => "print qq{Content-Type: text/plain\\n\\nd\\n};\n" },
        handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
        server => { stat_cache => 'no' });
    my $pid = $s->pid;
    my $sock = $s->connect;
    my $get = sub {
        $sock->syswrite("GET $_[0] HTTP/1.1\r\nHost: x\r\n\r\n");
        my ($r) = read_responses($sock, 1);
        return $r;
    };
    is($get->('/a.txt')->{status}, 200, 'no descriptor left: a first request on a connection is answered');
    is($get->('/d.plx')->{body}, "d\n", '... and a .plx, whose worker is then idle');
    my ($soft, $hard) = `prlimit --pid $pid --nofile --noheadings --raw` =~ /(\d+)\s+(\d+)/;
    # The limit is on the number a new descriptor would get: the lowest free
    # one, once the first file's descriptor is closed (at its response).
    ok(PlxdTest::wait_for(sub { !grep { (readlink($_) // '') =~ m{/a\.txt$} } glob "/proc/$pid/fd/*" }),
        '... and its file closed');
    my %open = map { m{/(\d+)$} ? ($1 => 1) : () } glob "/proc/$pid/fd/*";
    my $lowest_free = 0;
    $lowest_free++ while $open{$lowest_free};
    system('prlimit', "--pid=$pid", "--nofile=$lowest_free:$hard") == 0 or die "prlimit failed\n";
    my %refused = map { $_ => $get->($_)->{status} } qw(/b.txt /c.pl /d.plx);
    system('prlimit', "--pid=$pid", "--nofile=$soft:$hard") == 0 or die "prlimit failed\n";
    is($refused{'/b.txt'}, 500, '... then, with no descriptor number left under the open-files limit, a file: 500');
    ok($s->wait_log(qr{\[error\].*cannot open /b\.txt: Too many open files}),
        '... and the log says which file and why');
    for my $script (qw(/c.pl /d.plx)) {
        is($refused{$script}, 500, "... $script: 500 too");
        ok($s->wait_log(qr{\[error\].*cannot open \Q$script\E: Too many open files}), '... and the same line');
    }
    my $again = $get->('/b.txt');
    is("$again->{status} $again->{body}", "200 b\n", '... the limit raised again, the same connection gets the file');
    is($get->('/c.pl')->{body}, "c\n", '... and the .pl runs');
    is($get->('/d.plx')->{body}, "d\n", '... and the .plx');
    $s->stop;
}

done_testing;
