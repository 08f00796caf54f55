# Scripts written as a FastCGI accept loop (CGI::Fast, FCGI) run
# persistently as .plx: each request runs one turn of the loop, with its
# own %ENV, STDIN and working directory; a request for another script ends
# the loop (the script returns, and starts from the top the next time).
# Over many requests, with two such scripts and a plain one in one worker;
# with die, exit, Finish and LastCall inside a turn; under timeout,
# max_requests, a changed module and a client that leaves. In thread mode
# (PLXD_TEST_ISOLATION=thread) what doc/perl.md's isolation table says of
# it: every interpreter has plxd's pid, max_requests does not apply, and a
# fresh clone takes the place of an interpreter past its timeout or whose
# module changed.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for write_file thread_mode);
use File::Temp ();
use Time::HiRes qw(time);

my $fast = <<'EOF';
use CGI::Fast;
use Cwd ();
my $n = 0;
while (my $q = CGI::Fast->new) {
    $n++;
    my $what = $ENV{QUERY_STRING} // '';
    die "died in turn $n\n" if $what eq 'die';
    if ($what eq 'exit') {
        print $q->header('text/plain'), "exiting in turn $n\n";
        exit 3;
    }
    if ($what eq 'slow') {
        $| = 1;
        print $q->header('text/plain'), "first\n";
        select(undef, undef, undef, 0.5);
    }
    sleep 5 if $what eq 'sleep';
    print $q->header('text/plain'), "n=$n pid=$$ i=", ($q->param('i') // ''),
        " body=", ($q->param('b') // ''), " foo=", ($ENV{HTTP_X_FOO} // 'none'),
        " cwd=", Cwd::getcwd(), " fastcgi=", (FCGI::Request()->IsFastCGI ? 1 : 0), "\n";
    chdir '/';
}
print STDERR "fast.plx: loop ended after $n\n";
EOF

my $other = <<'EOF';
use CGI::Fast;
my $n = 0;
while (my $q = CGI::Fast->new) {
    $n++;
    print $q->header('text/plain'), "other n=$n\n";
}
EOF

# Plain FCGI, with an environment hash of its own, Finish and LastCall.
my $fcgi = <<'EOF';
use FCGI;
my %env;
my $req = FCGI::Request(\*STDIN, \*STDOUT, \*STDERR, \%env);
my $n = 0;
while ($req->Accept() >= 0) {
    $n++;
    print "Content-Type: text/plain\n\nfcgi n=$n qs=$env{QUERY_STRING} env=$ENV{QUERY_STRING}\n";
    if ($env{QUERY_STRING} =~ /^finish/) {
        $req->Finish;
        print "after finish\n";
        print STDERR "work after finish\n";
        system('sleep', '120.5') if $env{QUERY_STRING} eq 'finish-wait';
    }
    $req->LastCall if $env{QUERY_STRING} eq 'last';
}
EOF

# CGI.pm's import pragmas are the script's own: CGI::Fast->new
# (CGI->_reset_globals) drops no other script's, and one script's are no
# other's.
my $pragmas = <<'EOF';
use CGI qw(-utf8 -nosticky);
my $q = CGI->new;
my $form = $q->start_form . $q->checkbox(-name => 'c') . $q->end_form;
print $q->header('text/plain'), "len=", length($q->param('u') // ''), " cgifields=",
    ($form =~ /\.cgifields/ ? 1 : 0), "\n";
EOF
(my $no_pragmas = $pragmas) =~ s/ qw\(-utf8 -nosticky\)//;

my %files = (
    'pragmas.plx' => $pragmas, 'pragmas.pl' => $pragmas,
    'nopragmas.plx' => $no_pragmas, 'nopragmas.pl' => $no_pragmas,
    'postmax.plx' => "use CGI;\n\$CGI::POST_MAX = 5;\n" . 'print "Content-Type: text/plain\n\nset\n";',
    'fast.plx' => $fast, 'fast.pl' => $fast, 'other.plx' => $other, 'fcgi.plx' => $fcgi,
    'plain.plx' => "print \"Content-Type: text/plain\\n\\nplain \$\$\\n\";\n",
);
my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { perl => { workers => 1, timeout => '2s' } },
);
my $root = $s->root;
sub field { my ($r, $name) = @_; return $r->{content} =~ /\b$name=(\S*)/ ? $1 : 'missing' }

# --- one script, many requests: one loop ---
my $first = $s->get('/fast.plx?i=1');
is($first->{status}, 200, 'CGI::Fast as .plx: 200');
my $pid = field($first, 'pid');
my ($in_order, $same_pid, $params) = (0, 0, 0);
for my $i (2 .. 50) {
    my $r = $s->get("/fast.plx?i=$i");
    $in_order++ if field($r, 'n') == $i;
    $same_pid++ if field($r, 'pid') eq $pid;
    $params++ if field($r, 'i') eq $i;
}
is($in_order, 49, '50 requests are 50 turns of one loop');
is($same_pid, 49, 'in one worker');
is($params, 49, 'each turn gets its own query');

my $post = $s->request('POST', '/fast.plx', content => 'b=posted',
    headers => { 'Content-Type' => 'application/x-www-form-urlencoded', 'X-Foo' => 'bar' });
is(field($post, 'n'), 51, 'a POST is the next turn');
is(field($post, 'body'), 'posted', 'with its body on STDIN');
is(field($post, 'foo'), 'bar', 'and its headers in %ENV');
my $after = $s->get('/fast.plx');
is(field($after, 'body'), '', 'the next turn has no body');
is(field($after, 'foo'), 'none', 'and no header of the previous one');
is(field($after, 'cwd'), $root, "the script's folder, though the last turn changed it");
is(field($after, 'fastcgi'), 0, 'IsFastCGI is false, as for the script run as .pl');
is(field($s->get('/fast.pl?i=9'), 'n'), 1, 'as .pl: one turn per process');

# --- another script ends the loop; the next request starts from the top ---
is($s->get('/other.plx')->{content}, "other n=1\n", 'another FastCGI script ends the loop');
ok(wait_for(sub { $s->error_log =~ /\Q$root\E\/fast\.plx, after its request was answered: fast\.plx: loop ended after 52$/m }),
    'what the script writes once its loop ended is logged under its name');
my ($fresh, $others, $plains) = (0, 0, 0);
for my $i (1 .. 10) {
    $fresh++ if field($s->get("/fast.plx?i=$i"), 'n') == 1;
    $others++ if $s->get('/other.plx')->{content} eq "other n=1\n";
    $plains++ if $s->get('/plain.plx')->{content} eq "plain $pid\n";
}
is($fresh, 10, 'alternating with another FastCGI script: each request starts its loop');
is($others, 10, 'the other one too');
is($plains, 10, 'and a plain script in between, in the same worker');
my @ends = $s->error_log =~ /fast\.plx, after its request was answered: fast\.plx: loop ended after 1$/mg;
is(scalar @ends, 10, 'the script returned each time');

# --- CGI.pm's pragmas, per script, across a CGI::Fast request ---
is($s->get('/pragmas.pl?u=%C3%BC')->{content}, "len=1 cgifields=0\n", 'use CGI qw(-utf8 -nosticky) as .pl');
is($s->get('/nopragmas.pl?u=%C3%BC')->{content}, "len=2 cgifields=1\n", 'use CGI as .pl');
my ($kept, $own) = (0, 0);
for my $i (1 .. 3) {
    is($s->get('/other.plx')->{content}, "other n=1\n", "a CGI::Fast request ($i)");
    $kept++ if $s->get('/pragmas.plx?u=%C3%BC')->{content} eq "len=1 cgifields=0\n";
    $own++ if $s->get('/nopragmas.plx?u=%C3%BC')->{content} eq "len=2 cgifields=1\n";
    $kept++ if $s->get('/pragmas.plx?u=%C3%BC')->{content} eq "len=1 cgifields=0\n";
}
is($kept, 6, "after CGI::Fast->new, a script's -utf8 and -nosticky are still its own");
is($own, 3, "and no other script's");
is($s->get('/postmax.plx')->{content}, "set\n", 'a script sets $CGI::POST_MAX = 5 at run time');
is($s->request('POST', '/nopragmas.plx', content => 'u=%C3%BC&pad=0123456789',
    headers => { 'Content-Type' => 'application/x-www-form-urlencoded' })->{content},
    "len=2 cgifields=1\n", "the next script's POST is not held to it");

# --- plain FCGI: its environment hash, Finish, LastCall ---
is($s->get('/fcgi.plx?a')->{content}, "fcgi n=1 qs=a env=a\n", 'FCGI: its own environment hash is filled');
is($s->get('/fcgi.plx?b')->{content}, "fcgi n=2 qs=b env=b\n", 'at each accept');
is($s->get('/fcgi.plx?finish')->{content}, "fcgi n=3 qs=finish env=finish\n",
    'Finish answers the request: what follows goes nowhere');
is($s->get('/fcgi.plx?c')->{content}, "fcgi n=4 qs=c env=c\n", 'the loop goes on after Finish');
ok(wait_for(sub { $s->error_log =~ /fcgi\.plx, after its request was answered: work after finish$/m }),
    'what it logs after Finish is logged as its own');
is($s->get('/fcgi.plx?last')->{content}, "fcgi n=5 qs=last env=last\n", 'LastCall: answered');
is($s->get('/fcgi.plx?d')->{content}, "fcgi n=1 qs=d env=d\n", 'then the loop ended');
my ($counted) = (0);
$counted++ for grep { field($s->get("/fcgi.plx?x$_"), 'n') == $_ + 1 } 1 .. 48;
is($counted, 48, 'FCGI: 50 requests, one loop');

# --- die and exit inside a turn ---
$s->get('/fast.plx');
is($s->get('/fast.plx?die')->{status}, 500, 'a die inside a turn: 500');
ok(wait_for(sub { $s->error_log =~ /fast\.plx: died in turn \d+$/m }), 'logged');
is(field($s->get('/fast.plx'), 'n'), 1, 'the next request starts the loop again');
my $exit = $s->get('/fast.plx?exit');
is($exit->{content}, "exiting in turn 2\n", 'exit inside a turn: its output is the response');
is(field($s->get('/fast.plx'), 'n'), 1, 'and the loop starts again');
is(field($s->get('/fast.plx'), 'pid'), $pid, 'all in the same worker');

# --- a client that leaves during a turn ---
{
    my $sock = $s->connect;
    print $sock "GET /fast.plx?slow HTTP/1.1\r\nHost: x\r\n\r\n";
    my $got = '';
    wait_for(sub { sysread($sock, $got, 4096, length $got); $got =~ /first|\r\n\r\n.*\z/s }, 10);
    close $sock;
    my $next = $s->get('/fast.plx');
    is($next->{status}, 200, 'after a client left mid-turn, the next request is served');
    is(field($next, 'pid'), $pid, 'by the same worker: the turn finished and answered');
}

# --- past the timeout inside a turn: 504, worker replaced ---
my $t0 = time;
is($s->get('/fast.plx?sleep')->{status}, 504, 'a turn past timeout: 504');
ok(time - $t0 < 5, 'at the timeout');
my $new = $s->get('/fast.plx');
is(field($new, 'n'), 1, 'a new worker starts the loop');
if (thread_mode()) {
    is(field($new, 'pid'), $pid, "a fresh interpreter, in plxd's process");
} else {
    isnt(field($new, 'pid'), $pid, 'in a new process');
}

# --- a script still running at stop: answered with Finish, it waits for a
# program; plxd ends both ---
like($s->get('/fcgi.plx?finish-wait')->{content}, qr/^fcgi n=\d+ qs=finish-wait /,
    'Finish answers, then the script runs a program');
ok(wait_for(sub { `pgrep -xf 'sleep 120.5'` }), 'which runs');
my $t_stop = time;
$s->stop;
ok(time - $t_stop < 20, 'plxd stops without waiting for it');
ok(wait_for(sub { !`pgrep -xf 'sleep 120.5'` }), 'and it is gone');

# --- max_requests while a script sits in its accept ---
my $m = PlxdTest->start(
    files    => { 'fast.plx' => $fast },
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, max_requests => 5 } },
);
my @seen = map { my $r = $m->get('/fast.plx'); [field($r, 'n'), field($r, 'pid')] } 1 .. 12;
if (thread_mode()) {
    is_deeply([ map { $_->[0] } @seen ], [1 .. 12], 'max_requests does not apply to an interpreter thread: one loop');
    is(scalar(grep { $_->[1] eq $m->pid } @seen), 12, "in plxd's process");
    unlike($m->error_log, qr/retires after/, 'no retirement');
} else {
    is_deeply([ map { $_->[0] } @seen ], [1 .. 5, 1 .. 5, 1, 2], 'max_requests: five turns, then a new worker');
    isnt($seen[5][1], $seen[4][1], 'a new process after the fifth');
    ok($m->wait_log(qr/retires after 5 requests/), 'the retirement is logged');
    # Written after its last answer: relayed with the worker's name, or with the
    # script's when plxd reads it before the worker has exited (the line names
    # the script either way).
    ok($m->wait_log(qr/(?:perl worker \d+|\S+fast\.plx): \S+fast\.plx, after its request was answered: fast\.plx: loop ended after 5$/m),
        'the loop ended, and the script returned, before the worker exited');
}
$m->stop;

# --- a changed module while the script sits in its accept ---
my $lib = File::Temp::tempdir(CLEANUP => 1);
write_file("$lib/Counted.pm", "package Counted; our \$V = 1; 1;\n");
my $c = PlxdTest->start(
    files => {
        'mod.plx' => "use CGI::Fast; use Counted;\nmy \$n = 0;\nwhile (my \$q = CGI::Fast->new) {\n"
            . "    \$n++;\n    print \$q->header('text/plain'), \"v=\$Counted::V n=\$n\\n\";\n}\n",
    },
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, inc => $lib } },
);
is($c->get('/mod.plx')->{content}, "v=1 n=1\n", 'a module from an inc folder');
is($c->get('/mod.plx')->{content}, "v=1 n=2\n", 'the loop goes on');
write_file("$lib/Counted.pm", "package Counted; our \$V = 2; 1;\n");
utime(time + 5, time + 5, "$lib/Counted.pm");
ok(wait_for(sub { $c->get('/mod.plx')->{content} eq "v=2 n=1\n" }, 10),
    'a changed module retires the worker from inside the loop');
ok($c->wait_log(qr/a module it loaded changed/), 'logged');
is($c->get('/mod.plx')->{content}, "v=2 n=2\n", 'the new loop goes on');
$c->stop;

done_testing;
