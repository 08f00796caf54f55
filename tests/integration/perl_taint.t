# -T and -t on a script's #! line ([perl] taint, doc/perl.md: "The #! line").
# With taint = honour (the default) such a script runs in an interpreter
# started with taint checks, beside the plain one of the same worker (or
# interpreter thread), and gets what it gets as .pl under perl -T: ${^TAINT}
# is 1, %ENV, the query and the body are tainted, system with the request's
# PATH dies with "Insecure $ENV{PATH}", and works once the script cleans it.
# -t gives the same checks as warnings (${^TAINT} is -1). Scripts without
# the switch, taking turns with it in one worker, run without taint checks.
# taint = warn runs the script without them after a line in the log; taint
# = refuse answers 500 with a line. Run again with PLXD_TEST_ISOLATION=thread.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for);
use File::Temp ();
use Time::HiRes qw(time);

my $report = <<'EOF';
use Scalar::Util qw(tainted);
my $body = <STDIN> // '';
my $qs = $ENV{QUERY_STRING};
my $sys = eval { system('true'); 1 } ? 'ran'
    : $@ =~ /^(Insecure \$ENV\{PATH\}) while running with -T switch/ ? $1 : "died: $@";
$ENV{PATH} = '/usr/bin:/bin';
delete @ENV{qw(IFS CDPATH ENV BASH_ENV)};
my $clean = eval { system('true'); 1 } ? 'ran' : "died: $@";
print "Content-Type: text/plain\n\ntaint=${^TAINT} env=", (tainted($ENV{HTTP_HOST}) ? 1 : 0),
    " query=", (tainted($qs) ? 1 : 0), " body=", (tainted($body) ? 1 : 0),
    " system=$sys cleaned=$clean pid=$$\n";
EOF
my %files;
for my $ext ('pl', 'plx') {
    $files{"taint.$ext"} = "#!/usr/bin/perl -T\n$report";
    $files{"taintwarn.$ext"} = "#!/usr/bin/perl -wt\n$report";
    $files{"plain.$ext"} = "#!/usr/bin/perl\n$report";
}
# %SIG and alarm work in either interpreter of a worker.
my $alarm = <<'EOF';
my $r = eval {
    local $SIG{ALRM} = sub { die "alarm went off\n" };
    alarm 1;
    select(undef, undef, undef, 5);
    alarm 0;
    "slept\n";
} // $@;
print "Content-Type: text/plain\n\ntaint=${^TAINT} $r";
EOF
$files{'alarm.plx'} = "#!/usr/bin/perl -T\n$alarm";
$files{'plainalarm.plx'} = $alarm;
# A FastCGI-style loop with -T (as Debian's munin CGIs are) runs in the
# tainted interpreter, turn by turn; one past its timeout is ended there.
$files{'fast.plx'} = <<'EOF';
#!/usr/bin/perl -T
use CGI::Fast;
my $n = 0;
while (my $q = CGI::Fast->new) {
    $n++;
    sleep 10 if $ENV{QUERY_STRING} eq 'sleep';
    print $q->header('text/plain'), "n=$n taint=${^TAINT}\n";
}
EOF
my %post = (content => "body=1\n", headers => { 'Content-Type' => 'text/plain' });

my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { perl => { workers => 1, timeout => '2s' } },
);
my $tainted = 'taint=1 env=1 query=1 body=1 system=Insecure $ENV{PATH} cleaned=ran';
my $warned = 'taint=-1 env=1 query=1 body=1 system=ran cleaned=ran';
my $plain = 'taint=0 env=0 query=0 body=0 system=ran cleaned=ran';
sub answer { my ($r) = @_; my $c = $r->{content} // ''; $c =~ s/ pid=\d+\n\z//; return "$r->{status} $c" }

is(answer($s->request('POST', '/taint.pl?q=1', %post)), "200 $tainted", 'taint.pl: perl -T');
is(answer($s->request('POST', '/taintwarn.pl?q=1', %post)), "200 $warned", 'taintwarn.pl: perl -t');
is(answer($s->request('POST', '/plain.pl?q=1', %post)), "200 $plain", 'plain.pl: no taint checks');

my %ok;
my %pids;
for my $i (1 .. 5) {
    for my $name ('taint', 'plain', 'taintwarn') {
        my $r = $s->request('POST', "/$name.plx?q=$i", %post);
        my $want = { taint => $tainted, taintwarn => $warned, plain => $plain }->{$name};
        $ok{$name}++ if answer($r) eq "200 $want";
        $pids{$1}++ if ($r->{content} // '') =~ /pid=(\d+)/;
    }
}
is($ok{taint}, 5, 'taint.plx: what perl -T gives, in each of its requests');
is($ok{taintwarn}, 5, 'taintwarn.plx: what perl -t gives');
is($ok{plain}, 5, 'plain.plx, taking turns with them: no taint checks');
is(scalar keys %pids, 1, 'all in one worker') unless PlxdTest::thread_mode();
is($s->get('/alarm.plx')->{content}, "taint=1 alarm went off\n", 'a tainted script\'s $SIG{ALRM} runs');
is($s->get('/plainalarm.plx')->{content}, "taint=0 alarm went off\n", 'and then a plain one\'s');
is($s->get('/alarm.plx')->{content}, "taint=1 alarm went off\n", 'and the tainted one\'s again');
is($s->get("/fast.plx?$_")->{content}, "n=$_ taint=1\n", "a -T FastCGI loop: turn $_") for 1 .. 3;
like($s->get('/plain.plx')->{content}, qr/^taint=0 /, 'a plain script ends the loop');
is($s->get('/fast.plx?1')->{content}, "n=1 taint=1\n", 'the next request starts it again');
is($s->get('/fast.plx?sleep')->{status}, 504, 'a -T script past its timeout: 504');
is($s->get('/fast.plx?1')->{content}, "n=1 taint=1\n", 'then it runs again, with taint checks');
like($s->get('/plain.plx')->{content}, qr/^taint=0 /, 'and a plain script without');
ok(wait_for(sub { $s->error_log =~ /taintwarn\.plx: Insecure \$ENV\{PATH\} while running with -t switch/ }),
    '-t: the insecure system is a warning in the log');
unlike($s->error_log =~ s/^.*(?:timed out|fast\.plx.*504|killed).*$//mgr, qr/\[error\]/, 'no other error');
$s->stop;

# A real -T application from Debian, unchanged: cvsweb (its CGI script
# starts with #!/usr/bin/perl -T) over a CVS repository made here, as .pl
# and as .plx in one worker, taking turns with a plain script. Every
# answer is the .pl one, but for the script's own name in links and how
# long ago the revision was made (its age).
my $cvsweb = '/usr/lib/cgi-bin/cvsweb';
if (PlxdTest::thread_mode()) {
    # IPC::Run, which cvsweb uses, calls exec with an indirect object
    # (exec { $_[0] } @_), which does not parse under thread mode's exec
    # override (doc/perl.md, "Isolation modes"): cvsweb cannot load there,
    # with -T or without.
    pass('cvsweb: not in thread mode (IPC::Run does not load there)');
} elsif (!-x $cvsweb || !-x '/usr/bin/cvs') {
    fail("cvsweb and cvs installed (Debian packages; ./setup.sh test installs them)");
} else {
    my $tmp = File::Temp->newdir('plxd-cvs-XXXXXX', TMPDIR => 1);
    my $repo = "$tmp/repo";
    mkdir "$tmp/src" or die "$tmp/src: $!";
    PlxdTest::write_file("$tmp/src/hello.txt", "hello from cvs\n");
    system("cd '$tmp/src' && cvs -Q -d '$repo' init && cvs -Q -d '$repo' import -m 'first import' proj vendor start") == 0
        or die "cvs import failed\n";
    my $app = PlxdTest::read_file($cvsweb);
    like($app, qr{\A#!/usr/bin/perl -T\n}, 'cvsweb asks for taint checks on its #! line');
    my $c = PlxdTest->start(
        files => { 'cvsweb.pl' => $app, 'cvsweb.plx' => $app, 'plain.plx' => $files{'plain.plx'},
            'cvsweb.conf' => "do '/etc/cvsweb/cvsweb.conf';\n"
                . "\@CVSrepositories = ('local' => ['Local Repository', '$repo']);\n1;\n" },
        handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
        sections => { perl => { workers => 1 } },
    );
    my $page = sub {
        my ($ext, $path) = @_;
        my $r = $c->get("/cvsweb.$ext$path");
        (my $body = $r->{content} // '') =~ s{/cvsweb\.$ext/}{/cvsweb.X/}g;
        $body =~ s{\((?:very little time|\d+ \w+) ago\)}{(ago)}g;
        $body =~ s{<td class="age">[^<]*</td>}{<td class="age">age</td>}g;
        return "$r->{status} $body";
    };
    my @paths = ('/', '/proj/', '/proj/hello.txt', '/~checkout~/proj/hello.txt?rev=1.1;content-type=text%2Fplain');
    # Its pages again, each after the others. (Not the top page: cvsweb
    # keeps the form target of the page before in a global it sets only
    # when undefined, $scriptwhere, which a persistent interpreter keeps.)
    for my $path (@paths, @paths[2, 3, 1]) {
        my $pl = $page->('pl', $path);
        like($pl, qr/^200 /, "cvsweb.pl$path: 200");
        is($page->('plx', $path), $pl, "cvsweb.plx$path: the .pl answer");
        like($c->get('/plain.plx')->{content}, qr/^taint=0 /, 'then a plain script');
    }
    like($page->('plx', $paths[-1]), qr/^200 hello from cvs\n\z/, 'its checkout runs rcs under taint checks');
    unlike($c->error_log, qr/Insecure|\[error\]/, 'no taint error, no error');
    $c->stop;
}

# taint = warn: the script runs without taint checks, after a line.
my $w = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, taint => 'warn' } },
);
is(answer($w->request('POST', '/taint.plx?q=1', %post)), "200 $plain", 'taint = warn: no taint checks');
ok(wait_for(sub { $w->error_log =~ /"-T" is on the #! line: the script runs without taint checks \(\[perl\] taint = warn\) at \S*taint\.plx line 1\./ }),
    'and a line in the log, once per compile');
$w->stop;

# taint = refuse: 500, and the reason in the log. A worker retires after
# each request (max_requests = 1): those started in its place keep the
# setting.
my $r = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, taint => 'refuse', max_requests => 1 } },
);
is($r->get('/taint.plx')->{status}, 500, 'taint = refuse: 500');
ok(wait_for(sub { $r->error_log =~ /"-T" is on the #! line, and \[perl\] taint = refuse/ }),
    'and the reason in the log');
is(answer($r->request('POST', '/plain.plx?q=1', %post)), "200 $plain", 'a script without it runs');
is($r->get('/taint.plx')->{status}, 500, 'taint = refuse: 500 from a worker started in place of one retired')
    for 1 .. 2;
$r->stop;

# A preload slower than queue_timeout, and -T scripts (doc/perl.md, "Taint
# checks"): the tainted interpreter runs the preload too, so the first -T
# request waits for it. Then the other workers are replaced by workers that
# make theirs at start-up, before they serve, as are all workers started
# later (here by a reload): two -T requests and four plain ones right
# behind them are all answered at once, none with 503 (the plain ones would
# wait past queue_timeout behind -T requests running the preload). In
# thread mode the first -T request makes the tainted parent once, and a
# reload keeps it, so the same holds there.
{
    my $slow_s = 3;
    my $p = PlxdTest->start(
        files => {
            %files,
            'startup.pl'  => "select undef, undef, undef, $slow_s; 1;\n",
            'startup2.pl' => "select undef, undef, undef, $slow_s; 1;\n",
        },
        handlers => { '.plx' => 'perl' },
        sections => { perl => { workers => 2, preload => 'root/startup.pl', queue_timeout => '2s' } },
    );
    # The pid of each slot's worker, from the status page.
    my $slot_pids = sub {
        my %pid;
        for my $line (split /\n/, $p->get('/plxd-status?prometheus')->{content} // '') {
            next unless $line =~ /^plxd_worker_requests\{([^}]*)\}/;
            my %l = $1 =~ /(\w+)="([^"]*)"/g;
            $pid{ $l{slot} // '?' } = $l{pid};
        }
        return values %pid;
    };
    my $burst = sub {
        my ($when) = @_;
        my $send = sub {
            my ($path) = @_;
            my $c = $p->connect;
            $c->syswrite("GET $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            return $c;
        };
        my $t0 = time;
        my @tainted = map { $send->('/taint.plx') } 1 .. 2;
        select undef, undef, undef, 0.2;
        my @plain = map { $send->('/plain.plx') } 1 .. 4;
        my (@status, $tainted_s);
        for my $c (@tainted, @plain) {
            my $text = PlxdTest::read_until_closed($c, 30);
            push @status, $text =~ m{^HTTP/1\.1 (\d+)} ? $1 : 'none';
            $tainted_s = time - $t0 if @status == 2;
        }
        is("@status", join(' ', ('200') x 6), "$when: two -T and four plain requests at once, all 200");
        cmp_ok($tainted_s, '<', $slow_s, '... and the -T ones did not wait for a preload');
    };
    my %first = map { $_ => 1 } $slot_pids->();
    is($p->get('/taint.plx')->{status}, 200, 'slow preload: a -T script runs (its worker makes its tainted interpreter)');
    if (!PlxdTest::thread_mode()) {
        ok($p->wait_log(qr/a script asked for taint checks \(-T\): the other workers are replaced/),
            '... and the pool says the other workers are replaced');
        ok(wait_for(sub {
            my @pids = $slot_pids->();
            return (grep { $_ && !$first{$_} } @pids) == 1 && (grep { $first{$_} } @pids) == 1;
        }, 60), '... and the other slot comes to hold a new worker, the first one serving on');
    }
    $burst->('after the first -T request');

    my %old = map { $_ => 1 } $slot_pids->();
    my $conf = PlxdTest::read_file($p->conf_file);
    $conf =~ s{^preload = .*$}{preload = root/startup2.pl}m or die 'no preload line';
    PlxdTest::write_file($p->conf_file, $conf);
    $p->signal('HUP');
    ok($p->wait_log(qr/configuration reloaded/), 'SIGHUP: the configuration is reloaded');
    ok(wait_for(sub { (grep { $_ && !$old{$_} } $slot_pids->()) == 2 }, 60),
        '... and every slot comes to hold a new worker') unless PlxdTest::thread_mode();
    $burst->('after the reload');
    unlike($p->error_log, qr/no perl worker became free|answered 503/, '... none waited past queue_timeout');
    $p->stop;
}

done_testing;
