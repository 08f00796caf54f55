# PLXD::Request run as a .pl script is, with no server: perl on a script
# with a CGI environment and STDIN (a pipe, written in pieces), the module
# found through PERL5LIB=BUILD/modules/perl5. Its answers are compared with CGI.pm's
# for the same inputs, and every bad input must give a complete 400.
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
use File::Temp qw(tempdir);
use POSIX qw(_exit);
use Test::More;
use PlxdTest qw(build_dir source_dir write_file read_file);

my $perl5 = build_dir() . '/modules/perl5';
plan skip_all => "PLXD::Request is not built in $perl5"
    unless -e "$perl5/auto/PLXD/Request/Request.so";

my $dir = tempdir('plxd-request-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $uploads = "$dir/uploads";
mkdir $uploads or die;
my $cgi_bin = source_dir() . '/cgi-bin';

# ---- running a script -------------------------------------------------------

# Runs perl on script with exactly env (plus PATH, PERL5LIB and the upload
# folder) and stdin fed through a pipe in 1000-byte pieces. Returns
# { status, out, err, head, body }.
sub run {
    my ($script, $env, $stdin) = @_;
    $stdin //= '';
    pipe(my $r, my $w) or die "pipe: $!";
    my $writer = fork // die "fork: $!";
    if (!$writer) {
        close $r;
        local $SIG{PIPE} = 'IGNORE';
        for (my $off = 0; $off < length $stdin; $off += 1000) {
            syswrite($w, substr($stdin, $off, 1000)) or last;
        }
        _exit(0);
    }
    close $w;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        %ENV = (PATH => '/usr/bin:/bin', PERL5LIB => $perl5, PLXD_REQUEST_TMPDIR => $uploads,
            %$env);
        open STDIN, '<&', $r or die;
        open STDOUT, '>', "$dir/out" or die;
        open STDERR, '>', "$dir/err" or die;
        exec $^X, $script or _exit(127);
    }
    close $r;
    waitpid $pid, 0;
    my $status = $?;
    kill 'KILL', $writer;
    waitpid $writer, 0;
    my $out = read_file("$dir/out");
    my ($head, $body) = split /\r?\n\r?\n/, $out, 2;
    return { status => $status, out => $out, err => read_file("$dir/err"),
        head => $head // '', body => $body // '' };
}

sub uploads_left { opendir my $d, $uploads or die; return grep { !/^\./ } readdir $d }

# Two dumpers printing the same format: every parameter with all its values,
# cookies, uploads with their content's MD5. Bytes outside printable ASCII
# are shown as \xNN so that a difference is visible.
my $dump_common = <<'PERL';
use strict;
use Digest::MD5 qw(md5_hex);
sub esc { my $s = shift; return 'undef' unless defined $s;
          $s =~ s/([^\x21-\x7e]|\\)/sprintf '\\x%02x', ord $1/ge; return "[$s]" }
print "Content-Type: text/plain\r\n\r\n";
PERL

write_file("$dir/cgi_dump.pl", $dump_common . <<'PERL');
use CGI;
my $q = CGI->new;
for my $n ($q->param) {
    print 'param ', esc($n), ' =', (map { ' ' . esc("$_") } $q->multi_param($n)), "\n";
}
for my $n ($ENV{DUMP_URL} ? sort $q->url_param : ()) {
    print 'url_param ', esc($n), ' =', (map { ' ' . esc($_) } $q->url_param($n)), "\n";
}
for my $n (sort $q->cookie) { print 'cookie ', esc($n), ' = ', esc(scalar $q->cookie($n)), "\n" }
for my $n ($q->param) {
    for my $fh (grep { defined } $q->upload($n)) {
        binmode $fh;
        local $/;
        my $d = <$fh>;
        print 'upload ', esc($n), ' ', esc("$fh"), ' ', esc($q->uploadInfo($fh)->{'Content-Type'}),
            ' ', length $d, ' ', md5_hex($d), "\n";
    }
}
PERL

# PLXD::Request does not load warnings.pm (to start faster): it is
# compiled under -w here, and must be silent.
write_file("$dir/plxd_dump.pl", $dump_common . <<'PERL');
BEGIN { $^W = 1 }
use PLXD::Request;
my $q = PLXD::Request->new;
my $param = $ENV{DUMP_URL} ? 'body_param' : 'multi_param';
for my $n ($q->$param) {
    print 'param ', esc($n), ' =', (map { ' ' . esc($_) } $q->$param($n)), "\n";
}
for my $n ($ENV{DUMP_URL} ? sort $q->url_param : ()) {
    print 'url_param ', esc($n), ' =', (map { ' ' . esc($_) } $q->url_param($n)), "\n";
}
for my $n (sort $q->cookie) { print 'cookie ', esc($n), ' = ', esc(scalar $q->cookie($n)), "\n" }
for my $n ($q->$param) {
    for my $up ($q->upload($n)) {
        print 'upload ', esc($n), ' ', esc($up->filename), ' ', esc($up->type), ' ', $up->size,
            ' ', md5_hex($up->slurp), "\n";
    }
}
print 'left ', scalar(grep { !-e $_->tempname } $q->upload), "\n";
PERL

# ---- request bodies ---------------------------------------------------------

my $B = 'plxdTestBoundary7MA4YWxk';
sub multipart {
    my (@parts) = @_;
    my $body = '';
    for my $p (@parts) {
        my ($name, $value, $filename, $type) = @$p;
        $body .= "--$B\r\nContent-Disposition: form-data; name=\"$name\""
            . (defined $filename ? "; filename=\"$filename\"" : '') . "\r\n"
            . (defined $type ? "Content-Type: $type\r\n" : '') . "\r\n$value\r\n";
    }
    return $body . "--$B--\r\n";
}
sub mp_env {
    my ($body, %more) = @_;
    return (REQUEST_METHOD => 'POST', CONTENT_TYPE => "multipart/form-data; boundary=$B",
        CONTENT_LENGTH => length $body, %more);
}
sub form_env {
    my ($body, %more) = @_;
    return (REQUEST_METHOD => 'POST', CONTENT_TYPE => 'application/x-www-form-urlencoded',
        CONTENT_LENGTH => length $body, %more);
}

# Holds the start of a delimiter line, which must not end the file.
my $binary = join '', map { chr($_ % 256) } 0 .. 200_000;
$binary .= "\r\n--" . substr($B, 0, 10) . "\r\n-";
my $files = multipart(
    [ title => 'holiday photos' ],
    [ file => "first file\nline two\n", 'a.txt', 'text/plain' ],
    [ file => $binary, 'b.bin', 'application/octet-stream' ],
    [ empty => '', 'empty.dat', 'application/octet-stream' ],
    [ none => '', '', 'application/octet-stream' ],
    [ "\xc3\xa9t\xc3\xa9" => "caf\xc3\xa9", "\xc3\xa9.txt", 'text/plain; charset=utf-8' ],
    [ title => '' ],
    [ untyped => 'no type', 'u.txt' ],
);

# ---- the same answers as CGI.pm ---------------------------------------------

my @same = (
    [ 'the seed query string', { REQUEST_METHOD => 'GET', QUERY_STRING => 'a=b&c=+k+d+d+f&d=asf&as=+1+2+3+4' } ],
    [ 'repeated keys', { REQUEST_METHOD => 'GET', QUERY_STRING => 'a=1&b=2&a=3&a=&c&b=4' } ],
    [ 'empty values and empty pairs', { REQUEST_METHOD => 'GET', QUERY_STRING => 'a=&b=&&c=3&;d&' } ],
    [ '+ and %20', { REQUEST_METHOD => 'GET', QUERY_STRING => 'x=a+b%20c%2Bd&y=+&z=%20&w=++%20%20' } ],
    [ 'UTF-8, escaped and raw', { REQUEST_METHOD => 'GET',
        QUERY_STRING => "name=%C3%A9t%C3%A9&%E2%82%AC=euro&raw=\xc3\xa9\xe2\x82\xac" } ],
    [ 'semicolons, empty names, escaped separators', { REQUEST_METHOD => 'GET',
        QUERY_STRING => '=x&y=;a%26b=c%3Dd;z=%00%ff' } ],
    [ 'a form body', { form_env('a=1&b=two+words&a=%C3%A9&c=') }, 'a=1&b=two+words&a=%C3%A9&c=' ],
    [ 'cookies', { REQUEST_METHOD => 'GET',
        HTTP_COOKIE => 'a=1; b=two%20words; c=x+y; d=%zz; e="quoted"; a=2' } ],
    [ 'multipart: fields and several files', { mp_env($files) }, $files ],
    [ 'multipart with a preamble and an epilogue', { mp_env("preamble\r\n" . multipart([ k => 'v' ]) . "epilogue\r\n") },
        "preamble\r\n" . multipart([ k => 'v' ]) . "epilogue\r\n" ],
    [ 'POST with a query string (body_param and url_param)',
        { form_env('b=2&a=3', QUERY_STRING => 'a=1&q=x', DUMP_URL => 1) }, 'b=2&a=3' ],
);

for my $case (@same) {
    my ($what, $env, $stdin) = @$case;
    my $cgi = run("$dir/cgi_dump.pl", $env, $stdin);
    my $plxd = run("$dir/plxd_dump.pl", $env, $stdin);
    is($cgi->{status}, 0, "$what: CGI.pm ran") or diag $cgi->{err};
    is($plxd->{status}, 0, "$what: PLXD::Request ran") or diag $plxd->{err};
    (my $got = $plxd->{body}) =~ s/^left 0\n//m or fail("$what: an upload file vanished early");
    is($got, $cgi->{body}, "$what: the same answers as CGI.pm");
    is($plxd->{err}, '', "$what: nothing on stderr");
}
is_deeply([ uploads_left() ], [], 'every upload file was removed when the script ended');

# The sample scripts themselves: request.pl answers what cgi_pm.pl answers.
for my $qs ('a=b&c=+k+d+d+f&d=asf&as=+1+2+3+4', 'x=%C3%A9&x=2&y=&z') {
    my %env = (REQUEST_METHOD => 'GET', QUERY_STRING => $qs, SCRIPT_NAME => '/request.pl');
    my $mine = run("$cgi_bin/request.pl", \%env);
    my $theirs = run("$cgi_bin/cgi_pm.pl", \%env);
    is($mine->{status}, 0, "request.pl ?$qs runs") or diag $mine->{err};
    is($mine->{head}, 'Content-Type: text/plain', 'request.pl sends its header');
    is($mine->{body}, $theirs->{body}, "request.pl ?$qs prints what cgi_pm.pl prints");
}
is(run("$cgi_bin/request.pl", { REQUEST_METHOD => 'GET', QUERY_STRING => 'a=b&c=+k+d+d+f&d=asf&as=+1+2+3+4' })->{body},
    "a => b\nc =>  k d d f\nd => asf\nas =>  1 2 3 4", 'the seed query string, exactly');

# param in scalar and list context, as CGI.pm.
write_file("$dir/contexts.pl", <<'PERL');
use strict; use warnings; use PLXD::Request;
my $q = PLXD::Request->new;
print "Content-Type: text/plain\r\n\r\n";
my $first = $q->param('a'); my @all = $q->param('a'); my @none = $q->param('nope');
my $missing = $q->param('nope');
print "first=$first all=@all none=", scalar(@none), ' missing=', defined $missing ? 'def' : 'undef', "\n";
print 'names=', join(',', $q->param), ' multi=', join(',', $q->multi_param('a')), "\n";
my $p = $q->params; push @{ $p->{a} }, 'x';
print 'params=', join(',', map { "$_:" . join('/', @{ $p->{$_} }) } sort keys %$p),
    ' unchanged=', scalar(() = $q->param('a')), "\n";
PERL
is(run("$dir/contexts.pl", { REQUEST_METHOD => 'GET', QUERY_STRING => 'a=1&b=2&a=3' })->{body},
    "first=1 all=1 3 none=0 missing=undef\nnames=a,b multi=1,3\nparams=a:1/3/x,b:2 unchanged=2\n",
    'param: first value in scalar context, all in list context; params is a copy');

# ---- bad input: a complete 400 naming the problem ------------------------------

my $long_field = multipart([ big => 'x' x 11 ]);
my $big_file = multipart([ f => 'y' x 11, 'f.txt', 'text/plain' ], [ after => 'z' ]);
my $truncated = multipart([ a => '1' ], [ f => 'abc' x 100, 'f.txt' ]);
$truncated = substr($truncated, 0, length($truncated) - 40);
my @bad = (
    [ 'a bad escape in the query string', { REQUEST_METHOD => 'GET', QUERY_STRING => 'a=1&b=%G1' },
        undef, 'bad percent escape "%G1" in the query string' ],
    [ 'an escape cut short', { REQUEST_METHOD => 'GET', QUERY_STRING => 'a=%4' },
        undef, 'bad percent escape "%4" in the query string' ],
    [ 'a bad escape in a form body', { form_env('a=%zz') }, 'a=%zz',
        'bad percent escape "%zz" in the request body' ],
    [ 'too many fields', { REQUEST_METHOD => 'GET', QUERY_STRING => 'a&b&c&d', PLXD_REQUEST_MAX_FIELDS => 3 },
        undef, 'more than 3 parameters' ],
    [ 'too many fields across query and body',
        { form_env('c=3&d=4', QUERY_STRING => 'a=1&b=2', PLXD_REQUEST_MAX_FIELDS => 3) },
        'c=3&d=4', 'more than 3 parameters' ],
    [ 'too many multipart parts', { mp_env($files, PLXD_REQUEST_MAX_FIELDS => 3) }, $files,
        'more than 3 parameters' ],
    [ 'a query field over its limit', { REQUEST_METHOD => 'GET', QUERY_STRING => 'a=12345678901',
        PLXD_REQUEST_MAX_FIELD_SIZE => 10 }, undef,
        'the value of parameter "a" in the query string is larger than 10 bytes' ],
    [ 'a multipart field over its limit', { mp_env($long_field, PLXD_REQUEST_MAX_FIELD_SIZE => 10) },
        $long_field, 'the value of parameter "big" in the body is larger than 10 bytes' ],
    [ 'a file over its limit', { mp_env($big_file, PLXD_REQUEST_MAX_UPLOAD_SIZE => 10) }, $big_file,
        'upload "f" is larger than 10 bytes' ],
    [ 'uploads turned off', { mp_env($big_file, PLXD_REQUEST_MAX_UPLOAD_SIZE => 0) }, $big_file,
        'upload "f": file uploads are not accepted' ],
    [ 'a request over max_total', { form_env('a=' . 'x' x 200, PLXD_REQUEST_MAX_TOTAL => 100) },
        'a=' . 'x' x 200, 'the request is larger than 100 bytes (query string and body)' ],
    [ 'a body shorter than its Content-Length', { form_env('a=1&b=2', CONTENT_LENGTH => 50) }, 'a=1&b=2',
        'the request body ended after 7 of its 50 bytes' ],
    [ 'a truncated multipart body', { mp_env($truncated, CONTENT_LENGTH => length($truncated) + 40) },
        $truncated, 'the request body ended after ' ],
    [ 'a multipart body without its closing boundary', { mp_env($truncated) }, $truncated,
        'the multipart body ends inside part "f", before its closing boundary' ],
    [ 'a boundary that never appears', { mp_env("no boundary here\r\n" x 5) }, "no boundary here\r\n" x 5,
        "the multipart body never reaches its boundary \"$B\"" ],
    [ 'a boundary line that never ends', { mp_env("--$B" . (' ' x 400) . "\r\n") },
        "--$B" . (' ' x 400) . "\r\n", 'a multipart boundary line does not end' ],
    [ 'a boundary run on into text and nothing else', { mp_env("--${B}junk\r\n\r\n") },
        "--${B}junk\r\n\r\n", "the multipart body never reaches its boundary \"$B\"" ],
    [ 'a part without a name', { mp_env("--$B\r\nContent-Disposition: form-data\r\n\r\nx\r\n--$B--\r\n") },
        "--$B\r\nContent-Disposition: form-data\r\n\r\nx\r\n--$B--\r\n", 'a multipart part has no form-data name' ],
    [ 'multipart without a boundary', { REQUEST_METHOD => 'POST', CONTENT_TYPE => 'multipart/form-data',
        CONTENT_LENGTH => 3 }, 'abc', 'multipart/form-data without a boundary' ],
    [ 'a Content-Length that is no number', { form_env('a=1', CONTENT_LENGTH => '1x') }, 'a=1',
        'the Content-Length is not a number' ],
);

for my $case (@bad) {
    my ($what, $env, $stdin, $message) = @$case;
    my $r = run("$cgi_bin/request.pl", $env, $stdin);
    is($r->{status}, 0, "$what: the script exits normally") or diag $r->{err};
    is($r->{head}, "Status: 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8",
        "$what: Status 400 and a content type");
    like($r->{body}, qr/^400 Bad Request: \Q$message\E/, "$what: the body names the problem")
        or diag $r->{body};
    like($r->{err}, qr/^PLXD::Request: 400 Bad Request: \Q$message\E/m, "$what: so does stderr");
    is_deeply([ uploads_left() ], [], "$what: no upload file left behind");
}

# An upload that cannot be stored is the server's trouble: 500, details in
# the log only.
my $r = run("$cgi_bin/request.pl", { mp_env($big_file, PLXD_REQUEST_TMPDIR => "$dir/missing") },
    $big_file);
is($r->{out}, "Status: 500 Internal Server Error\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
    . "500 Internal Server Error\n", 'an upload folder that is missing: 500, no details');
like($r->{err}, qr/^PLXD::Request: 500 Internal Server Error: cannot create an upload file in \Q$dir\E\/missing: No such file or directory$/m,
    '... which go to stderr');

# on_error: the script decides; the object is empty, uploads removed.
write_file("$dir/on_error.pl", <<'PERL');
use strict; use warnings; use PLXD::Request;
my @seen;
my $q = PLXD::Request->new(on_error => sub { my ($err, $obj) = @_; push @seen, $err, $obj });
my $err = $q->error;
$q->status(422)->content_type('text/plain')->send_header;
print join('|', scalar(@seen), $seen[1] == $q ? 'same' : 'other', $err->code, $err->status,
    $err->message, scalar(() = $q->param), scalar(() = $q->upload)), "\n";
PERL
$r = run("$dir/on_error.pl", { mp_env($big_file, PLXD_REQUEST_MAX_UPLOAD_SIZE => 10) }, $big_file);
is($r->{head}, "Status: 422 Unprocessable Content\r\nContent-Type: text/plain",
    'on_error: the script answers as it likes');
is($r->{body}, "2|same|upload_too_large|400|upload \"f\" is larger than 10 bytes|0|0\n",
    'on_error gets the error and the object, which holds nothing');
is($r->{err}, '', 'on_error: nothing on stderr');
is_deeply([ uploads_left() ], [], 'on_error: the partial upload was removed');

# A malformed limit in the environment is the server's mistake: the script dies.
$r = run("$cgi_bin/request.pl", { REQUEST_METHOD => 'GET', PLXD_REQUEST_MAX_FIELDS => 'many' });
isnt($r->{status}, 0, 'a bad PLXD_REQUEST_MAX_FIELDS makes the script die');
like($r->{err}, qr/PLXD_REQUEST_MAX_FIELDS: 'many' is not a whole number/, 'naming the variable');

# ---- uploads, cookies, headers, request facts ---------------------------------

write_file("$dir/uploads.pl", <<'PERL');
use strict; use warnings; use PLXD::Request;
my $q = PLXD::Request->new;
print "Content-Type: text/plain\r\n\r\n";
my @f = $q->upload('file');
my $one = $q->upload('file');
print 'count=', scalar(@f), ' all=', scalar(() = $q->upload), ' first=', $one->filename, "\n";
for my $u (@f) {
    my $fh = $u->fh;
    my $n = read $fh, my $start, 10;
    printf "%s %s %s %d %s %s\n", $u->name, $u->filename, $u->type, $u->size,
        (-s $u->tempname) == $u->size ? 'sized' : 'wrong', $u->path eq $u->tempname ? 'path' : '';
}
print 'field=', scalar $q->param('file'), ' none=', defined $q->upload('title') ? 'def' : 'undef', "\n";
print 'temp=', join(',', map { $_->tempname =~ m{/plxd-upload-\w{6}$} ? 'named' : $_->tempname } $q->upload), "\n";
printf "mode=%o\n", (stat $f[0]->tempname)[2] & 0777;
my $t = $f[0]->tempname;
undef $q;
print 'after=', -e $t ? 'kept' : 'removed', ' object=', $f[0]->size, "\n";
PERL
$r = run("$dir/uploads.pl", { mp_env($files) }, $files);
is($r->{body}, join('', "count=2 all=5 first=a.txt\n",
    "file a.txt text/plain 20 sized path\n",
    "file b.bin application/octet-stream ", length($binary), " sized path\n",
    "field=a.txt none=undef\n", "temp=named,named,named,named,named\n", "mode=600\n",
    "after=removed object=20\n"), 'upload objects: name, filename, type, size, file, handle, removal')
    or diag $r->{err};

write_file("$dir/facts.pl", <<'PERL');
use strict; use warnings; use PLXD::Request;
my $q = PLXD::Request->new;
print "Content-Type: text/plain\r\n\r\n";
print join('|', $q->method, $q->path, $q->script_name, $q->path_info, $q->query_string,
    $q->uri, $q->remote_addr, $q->remote_port, $q->scheme, $q->server_name, $q->server_port,
    $q->protocol), "\n";
print join('|', $q->header('User-Agent'), $q->header('user-agent'), $q->header('X-Two'),
    $q->header('Content-Type') // 'none', defined $q->header('Missing') ? 'def' : 'undef'), "\n";
print join(',', $q->header), "\n";
print join(',', $q->cookie), '|', scalar $q->cookie('a'), '|', join(',', $q->cookie('a')), '|',
    defined $q->cookie('zz') ? 'def' : 'undef', "\n";
my $l = $q->limits;
print join(',', map { "$_=$l->{$_}" } sort keys %$l), "\n";
PERL
$r = run("$dir/facts.pl", { REQUEST_METHOD => 'GET', SCRIPT_NAME => '/dir/facts.pl',
    PATH_INFO => '/x/y', QUERY_STRING => 'k=v', REQUEST_URI => '/dir/facts.pl/x/y?k=v',
    REMOTE_ADDR => '192.0.2.7', REMOTE_PORT => 5555, HTTPS => 'on', SERVER_NAME => 'example.org',
    SERVER_PORT => 443, SERVER_PROTOCOL => 'HTTP/1.1', HTTP_USER_AGENT => 'tester/1.0',
    HTTP_X_TWO => 'a, b', HTTP_COOKIE => 'a=1; b=2; a=3', PLXD_REQUEST_MAX_FIELDS => 50 });
is($r->{body}, join("\n",
    'GET|/dir/facts.pl/x/y|/dir/facts.pl|/x/y|k=v|/dir/facts.pl/x/y?k=v|192.0.2.7|5555|https|example.org|443|HTTP/1.1',
    'tester/1.0|tester/1.0|a, b|none|undef',
    'cookie,user-agent,x-two',
    'a,b|1|1,3|undef',
    'max_field_size=1048576,max_fields=50,max_total=67108864,max_upload_size=67108864,used_bytes=3,used_fields=1',
    ''), 'request facts, headers, cookies and limits') or diag $r->{err};

# A body of another type is left on STDIN for the script.
write_file("$dir/json.pl", <<'PERL');
use strict; use warnings; use PLXD::Request;
my $q = PLXD::Request->new;
read STDIN, my $body, $ENV{CONTENT_LENGTH};
print "Content-Type: text/plain\r\n\r\n", scalar(() = $q->param), " $body\n";
PERL
$r = run("$dir/json.pl", { REQUEST_METHOD => 'POST', CONTENT_TYPE => 'application/json',
    CONTENT_LENGTH => 9 }, '{"a":"b"}');
is($r->{body}, "0 {\"a\":\"b\"}\n", 'a JSON body is not parsed and stays readable');

# ---- the response helpers ------------------------------------------------------

write_file("$dir/response.pl", <<'PERL');
use strict; use warnings; use PLXD::Request;
my $q = PLXD::Request->new;
my $case = $q->param('case');
if ($case eq 'default') { $q->send_header; print 'body' }
elsif ($case eq 'status') {
    $q->status(404)->header_out('X-A' => 1, 2)->header_out('Set-Cookie' => 'k=v; Path=/');
    $q->content_type('text/plain');
    $q->send_header or die;
    $q->send_header and die;
}
elsif ($case eq 'reason') { $q->status('299 Custom Thing'); $q->header_out('Content-Type' => ''); $q->send_header }
elsif ($case eq 'redirect') { $q->redirect('https://example.org/x?y=1'); $q->send_header }
elsif ($case eq 'see_other') { $q->redirect('/next', 303); $q->send_header }
elsif ($case eq 'local') { $q->header_out(Location => '/other.html'); $q->send_header }
elsif ($case eq 'typed') {
    # send_header($type): content_type($type), then send; a second call
    # changes nothing, its type included.
    $q->send_header('text/plain') == 1 or die;
    $q->send_header('text/html') == 0 or die;
    print $q->content_type;
}
elsif ($case eq 'typed_empty') { $q->status(204)->send_header('') }
elsif ($case eq 'typed_redirect') { $q->redirect('/x')->send_header('text/plain') }
elsif ($case eq 'messages') {
    # A bad value dies naming the script's line, set through any door.
    print "X: y\r\n\r\n";
    for my $try (sub { $q->send_header("text/html\nX: y") },
                 sub { $q->content_type(undef) },
                 sub { $q->header_out('Content-Type' => "a\rb") }) {
        eval { $try->() };
        print $@ =~ s/ at \Q$0\E line [0-9]+\.\n\z/ at SCRIPT/r;
        print "\n";
    }
    print $q->header_sent ? 'sent' : 'unsent', ' ', $q->content_type // 'undef', "\n";
}
elsif ($case eq 'autoflush') { $| = 1; $q->send_header('text/plain'); syswrite STDOUT, 'after' }
elsif ($case eq 'ors') { $\ = '!'; $q->send_header('text/plain'); $\ = undef; print 'body' }
elsif ($case eq 'utf8') {
    binmode STDOUT, ':utf8';
    $q->status(299, "caf\xe9")->send_header('text/plain');
    print "\x{263a}";
}
elsif ($case eq 'wide') {
    $q->header_out('X-W' => "\x{263a}")->send_header('text/plain');
    print "body";
}
elsif ($case eq 'tied') {
    package Capture { sub TIEHANDLE { bless [], shift } sub PRINT { my $s = shift; push @$s, @_; 1 } }
    my $t = tie *STDOUT, 'Capture';
    $q->send_header('text/plain');
    my @got = @$t;
    undef $t;
    untie *STDOUT;
    print "Content-Type: text/plain\r\n\r\n", join('|', map { s/\r\n/~/gr } @got), "captured\n";
}
elsif ($case eq 'getters') {
    $q->status(201); $q->header_out('X-M' => 'a', 'b');
    print "X: y\r\n\r\n", join('|', $q->status, $q->header_out('Status'), join(',', $q->header_out('x-m')),
        $q->header_sent ? 1 : 0), "\n";
}
else {
    my %bad = (
        crlf => sub { $q->header_out('X-Evil' => "a\r\nSet-Cookie: b") },
        lf_type => sub { $q->content_type("text/html\nX: y") },
        name => sub { $q->header_out('Bad Name' => 1) },
        status => sub { $q->status(99) },
        status600 => sub { $q->status(600) },
        redirect_status => sub { $q->redirect('/x', 200) },
        redirect_crlf => sub { $q->redirect("/x\r\nX: y") },
        te => sub { $q->header_out('Transfer-Encoding' => 'chunked') },
        send_type => sub { $q->send_header("text/plain\r\nX: y") },
        send_undef => sub { $q->send_header(undef) },
    );
    for my $k (sort keys %bad) { print "$k: ", (eval { $bad{$k}->(); 1 } ? 'accepted' : 'refused'), "\n" }
}
PERL
my %response = (
    default => "Content-Type: text/html; charset=ISO-8859-1\r\n\r\nbody",
    status => "Status: 404 Not Found\r\nX-A: 1\r\nX-A: 2\r\nSet-Cookie: k=v; Path=/\r\nContent-Type: text/plain\r\n\r\n",
    reason => "Status: 299 Custom Thing\r\n\r\n",
    redirect => "Status: 302 Found\r\nLocation: https://example.org/x?y=1\r\n\r\n",
    see_other => "Status: 303 See Other\r\nLocation: /next\r\n\r\n",
    local => "Location: /other.html\r\n\r\n",
    getters => "X: y\r\n\r\n201|201|a,b|0\n",
    bad => join('', map { "$_: refused\n" } sort qw(crlf lf_type name status status600
        redirect_status redirect_crlf te send_type send_undef)),
    typed => "Content-Type: text/plain\r\n\r\ntext/plain",
    typed_empty => "Status: 204 No Content\r\n\r\n",
    typed_redirect => "Status: 302 Found\r\nLocation: /x\r\nContent-Type: text/plain\r\n\r\n",
    messages => "X: y\r\n\r\n"
        . "PLXD::Request: a content type holds a control character at SCRIPT\n"
        . "PLXD::Request: a content type is undefined at SCRIPT\n"
        . "PLXD::Request: a content type holds a control character at SCRIPT\n"
        . "unsent undef\n",
    # Written straight to STDOUT or printed by perl, the bytes are print's.
    autoflush => "Content-Type: text/plain\r\n\r\nafter",
    ors => "Content-Type: text/plain\r\n\r\n!body",
    utf8 => "Status: 299 caf\xc3\xa9\r\nContent-Type: text/plain\r\n\r\n\xe2\x98\xba",
    wide => "X-W: \xe2\x98\xba\r\nContent-Type: text/plain\r\n\r\nbody",
    tied => "Content-Type: text/plain\r\n\r\nContent-Type: text/plain~~captured\n",
);
for my $case (sort keys %response) {
    my $r = run("$dir/response.pl", { REQUEST_METHOD => 'GET', QUERY_STRING => "case=$case" });
    is($r->{out}, $response{$case}, "response: $case");
    if ($case eq 'status' || $case eq 'typed') {
        like($r->{err}, qr/send_header called twice/, "$case: a second send_header warns");
    }
    if ($case eq 'wide') {
        like($r->{err}, qr/Wide character/, 'wide: perl warns of the wide character, as print does');
    }
}

# ---- the constructor hook for handlers -----------------------------------------

write_file("$dir/hook.pl", <<'PERL');
use strict; use warnings; use PLXD::Request;
my $out = '';
open my $fh, '>', \$out or die;
my $body = 'x=1&y=2';
local $PLXD::Request::Source = sub {
    return { env => { REQUEST_METHOD => 'POST', QUERY_STRING => 'q=0',
        CONTENT_TYPE => 'application/x-www-form-urlencoded', CONTENT_LENGTH => length $body },
        body => \$body, output => $fh };
};
my $q = PLXD::Request->new;
$q->content_type('text/plain')->send_header;
my $q2 = PLXD::Request->new(env => { REQUEST_METHOD => 'GET', QUERY_STRING => 'only=me' });
print "Content-Type: text/plain\r\n\r\n",
    join(',', map { "$_=" . $q->param($_) } $q->param), '|', $q->method, '|',
    $out =~ /^Content-Type: text\/plain\r\n\r\n\z/ ? 'captured' : $out, '|',
    join(',', $q2->param), "\n";
PERL
$r = run("$dir/hook.pl", { REQUEST_METHOD => 'GET', QUERY_STRING => 'from=env' });
is($r->{body}, "q=0,x=1,y=2|POST|captured|only\n",
    '$PLXD::Request::Source supplies env, body and output; options to new win') or diag $r->{err};

# ---- the constructor's paths ----------------------------------------------------

# new() makes the common request in XS and leaves the rest to Perl; both
# must read the limits as the environment has them now (the XS part keeps
# the last ones parsed), bless into the class asked for, and leave no
# DESTROY to call.
write_file("$dir/paths.pl", <<'PERL');
use strict; use warnings; use PLXD::Request;
print "Content-Type: text/plain\r\n\r\n";
my $long = ('0' x 40) . '3';    # too long to be kept: parsed every time
for my $v ('2', '2', '5', undef, $long, '3', '3 ') {
    if (defined $v) { $ENV{PLXD_REQUEST_MAX_FIELDS} = $v } else { delete $ENV{PLXD_REQUEST_MAX_FIELDS} }
    my $fast = eval { PLXD::Request->new };
    my $slow = eval { PLXD::Request->new(env => { %ENV, QUERY_STRING => 'a&b&c&d' },
        on_error => sub {}) };
    print $fast ? $fast->limits->{max_fields} . ':' . ($slow->error ? $slow->error->code : 'ok')
        : 'died: ' . ($@ =~ /(PLXD_REQUEST_MAX_FIELDS: .*?) at /)[0], "\n";
}
$ENV{PLXD_REQUEST_MAX_FIELDS} = 1000;
{ package My::Request; our @ISA = ('PLXD::Request') }
my $sub = My::Request->new;
print join(' ', ref $sub, ref $sub->new, ref(PLXD::Request->new), scalar $sub->param('k'),
    PLXD::Request->can('DESTROY') ? 'DESTROY' : 'no DESTROY'), "\n";
{
    local $ENV{CONTENT_LENGTH} = '0';
    local $ENV{QUERY_STRING} = 'z=1';
    print 'empty body: ', join(',', PLXD::Request->new->param), "\n";
}
# A body store and upload list only when there is a body.
my $q = PLXD::Request->new;
print join(',', sort grep { !/^_/ } keys %$q), ' | ', scalar(() = $q->body_param),
    ' ', scalar(() = $q->upload), ' ', scalar(() = $q->header_out('X-None')), "\n";
PERL
$r = run("$dir/paths.pl", { REQUEST_METHOD => 'GET', QUERY_STRING => 'k=v&l=w' });
is($r->{body}, join("\n", '2:too_many_fields', '2:too_many_fields', '5:ok', '1000:ok',
    '3:too_many_fields', '3:too_many_fields', "died: PLXD_REQUEST_MAX_FIELDS: '3 ' is not a whole number",
    'My::Request My::Request PLXD::Request v no DESTROY', 'empty body: z',
    'env,param,query | 0 0 0', ''),
    'new: limits follow the environment, subclasses, no body, no DESTROY') or diag $r->{err};
is($r->{err}, '', '... and not a warning');

SKIP: {
    require Config;
    skip 'perl has no threads', 1 unless $Config::Config{useithreads};
    # Every interpreter has its own copy of what the XS part keeps.
    write_file("$dir/threads.pl", <<'PERL');
use strict; use warnings; use threads; use PLXD::Request;
print "Content-Type: text/plain\r\n\r\n";
my $main = PLXD::Request->new;
my $t = threads->create(sub {
    $ENV{PLXD_REQUEST_MAX_FIELDS} = 7;
    my $q = PLXD::Request->new;
    return join ',', $q->param, $q->limits->{max_fields};
});
print $t->join, ' ', join(',', $main->param, PLXD::Request->new->limits->{max_fields}), "\n";
PERL
    $r = run("$dir/threads.pl", { REQUEST_METHOD => 'GET', QUERY_STRING => 'a=1&b=2',
        PLXD_REQUEST_MAX_FIELDS => 9 });
    is($r->{body}, "a,b,7 a,b,9\n", 'new in a second thread') or diag $r->{err};
}

# ---- installed with plxd -------------------------------------------------------

my $prefix = "$dir/prefix";
my $log = "$dir/install.log";
is(system("cmake --install '${\ build_dir()}' --prefix '$prefix' >'$log' 2>&1"), 0,
    'cmake --install into a temporary prefix') or diag read_file($log);
my ($pm) = glob("$prefix/lib/plxd/perl5/PLXD/Request.pm $prefix/lib/*/plxd/perl5/PLXD/Request.pm");
ok($pm && -f $pm, 'PLXD/Request.pm under PREFIX/lib/plxd/perl5');
(my $installed = $pm // '') =~ s{/PLXD/Request\.pm$}{};
ok(-f "$installed/auto/PLXD/Request/Request.so", 'its XS part beside it');
ok(-f "$prefix/share/man/man3/PLXD::Request.3pm", 'its manual page');
$r = run("$cgi_bin/request.pl", { REQUEST_METHOD => 'GET', QUERY_STRING => 'a=1', PERL5LIB => $installed });
is($r->{body}, 'a => 1', 'request.pl runs with the installed module');
my $pod = `podchecker '$pm' 2>&1`;
like($pod, qr/pod syntax OK/, 'the POD is well-formed') or diag $pod;

done_testing;
