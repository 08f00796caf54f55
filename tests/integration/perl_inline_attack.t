# Inline runs under what a hostile or careless script does: a run its
# timeout cannot end must not keep plxd from stopping, nor a long run get
# new connections that would wait for it, nor a request begun as the stop
# comes abort plxd; what a run changes
# (its working directory) stays its own; pipelined requests that mix inline
# runs, runs on the interpreter threads, HEAD, static files and CGI keep
# their framing and order. The thread a script ran on is read from /proc.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for);
use PlxdRaw qw(read_responses request_bytes);
use Time::HiRes qw(time);

my $head = <<'EOF';
use POSIX ();
sub where { my $tid = syscall(186); open my $fh, '<', "/proc/self/task/$tid/comm" or return '?';
    my $comm = <$fh>; chomp $comm; return $comm }
my %q = map { split /=/, $_, 2 } split /&/, $ENV{QUERY_STRING} // '';
EOF
my %files = (
    'i.plt' => $head . <<'EOF',
print "Content-Type: text/plain\n\n", where(), " $ENV{REQUEST_METHOD} $ENV{QUERY_STRING}\n";
select undef, undef, undef, $q{before} if $q{before};
if ($q{mark}) { open my $m, '>', $q{mark} or die; close $m }
POSIX::sigprocmask(POSIX::SIG_BLOCK(), POSIX::SigSet->new(POSIX::SIGALRM())) if $q{block};
select undef, undef, undef, $q{sleep} if $q{sleep};
chdir $q{chdir} if $q{chdir};
system 'echo', 'from a child' if $q{fork};
EOF
    'x.plt'     => $head . "print \"Content-Type: text/plain\\n\\n\", where(), \" x\\n\"; select undef, undef, undef, \$q{sleep} if \$q{sleep};\n",
    'new.plt'   => "print \"Content-Type: text/plain\\n\\nnew\\n\";\n",
    'n.plt'     => $head . "print \"Content-Type: text/plain\\n\\n\", where(), \" n\\n\";\n",
    'a.txt'     => "static\n",
    'sub/a.txt' => "sub static\n",
    'c.pl'      => "#!/usr/bin/perl\nuse Cwd;\nprint \"Content-Type: text/plain\\n\\n\", getcwd(), \"\\n\";\n",
);

sub start {
    my (%o) = @_;
    my $s = PlxdTest->start(
        files    => \%files,
        handlers => { '.plt' => 'perl:thread', '.pl' => 'cgi' },
        server   => { threads => $o{threads} // 1, shutdown_timeout => '1s' },
        sections => { 'perl:thread' => { isolation => 'thread', workers => 1, timeout => $o{timeout} // '1s',
                                          inline_budget => '200ms' } },
    );
    chmod 0755, $s->root . '/c.pl';
    return $s;
}

my $s = start();
my $where_is = sub { my $r = $s->get($_[0]); return $r->{status} == 200 ? (split / /, $r->{content})[0] : "status $r->{status}" };
sub inline_again {
    my ($path) = @_;
    for (1 .. 4) {
        return 1 if $where_is->($path) eq 'plxd-event';
    }
    return 0;
}

# --- a chdir inline leaves static files and CGI where they were ---
ok(inline_again('/i.plt'), 'the script runs inline');
like($s->get('/i.plt?chdir=/tmp')->{content}, qr/^plxd-event /, 'an inline run that chdirs away');
is($s->get('/a.txt')->{content}, "static\n", '... the static file next on its event thread');
is($s->get('/sub/a.txt')->{content}, "sub static\n", '... one in a folder');
is($s->get('/c.pl')->{content}, $s->root . "\n", '... and a CGI script runs in its own folder');

# --- pipelined: inline, interpreter thread, HEAD, static, CGI, a fork ---
ok(inline_again('/i.plt'), 'the script runs inline again');
my @reqs = ([ 'GET', '/i.plt?1' ], [ 'GET', '/n.plt' ], [ 'HEAD', '/i.plt?3' ], [ 'GET', '/a.txt' ],
            [ 'GET', '/c.pl' ], [ 'GET', '/i.plt?fork=1' ], [ 'HEAD', '/n.plt' ], [ 'GET', '/i.plt?8' ]);
my $c = $s->connect;
my $mark;
$c->syswrite(join '', map { request_bytes(@$_) } @reqs);
my @r = read_responses($c, scalar @reqs, timeout => 20, head => [ 2, 6 ]);
is(scalar @r, scalar @reqs, 'every pipelined request is answered, framed');
is_deeply([ map { $_->{status} } @r ], [ (200) x @reqs ], '... each 200');
like($r[0]{body}, qr/^plxd-event GET 1\n\z/, '... the first inline');
like($r[1]{body}, qr/^plxd-perl n\n\z/, '... a new script on the interpreter thread');
is($r[2]{body}, '', '... HEAD of an inline script, no body');
is($r[3]{body}, "static\n", '... the static file');
is($r[4]{body}, $s->root . "\n", '... the CGI script');
like($r[5]{body}, qr/^plxd-event GET fork=1\nfrom a child\n\z/, '... an inline run that forks, with its program\'s output');
is($r[6]{body}, '', '... HEAD on the interpreter thread');
like($r[7]{body}, qr/^plxd-perl GET 8\n\z/, '... and the script, demoted by its fork, on the interpreter thread');
$s->stop;

# --- new connections go to the event threads no long run holds ---
# Two event threads; an inline run that has gone on 200 ms holds one. The
# other accepts every new connection: handed to the held one (it has fewer
# connections), one would wait for the run's end.
$s = start(threads => 2, timeout => '10s');
ok(inline_again('/i.plt'), 'the script runs inline');
$mark = $s->dir . '/held';
$c = $s->connect;
$c->syswrite(request_bytes('GET', "/i.plt?before=0.2&mark=$mark&sleep=3"));
ok(wait_for(sub { -e $mark }), 'an inline run has gone on 200 ms');
my @slow;
my @kept;
for my $i (1 .. 6) {
    my $k = $s->connect;
    push @kept, $k;    # open, so that it counts in its thread's load
    my $t0 = time;
    $k->syswrite(request_bytes('GET', '/a.txt'));
    my ($got) = read_responses($k, 1, timeout => 10);
    push @slow, $i if time - $t0 > 1 || ($got->{body} // '') ne "static\n";
}
is_deeply(\@slow, [], 'each of 6 new connections meanwhile is answered at once, by the other event thread');
my ($held) = read_responses($c, 1, timeout => 10);
is($held->{status}, 200, '... and the run is answered');
$s->stop;

# --- a stop during an inline run that its timeout cannot end ---
# SIGALRM blocked, the run waits in a system call that neither the
# watchdog's cancel nor the stop's can interrupt: plxd stops without its
# event thread once shutdown_timeout (1 s) and a grace have passed, rather
# than for as long as the run.
$s = start();
ok(inline_again('/i.plt'), 'the script runs inline');
$mark = $s->dir . '/running';
$c = $s->connect;
$c->syswrite(request_bytes('GET', "/i.plt?mark=$mark&block=1&sleep=60"));
ok(wait_for(sub { -e $mark }), 'an inline run with SIGALRM blocked sleeps');
my $t0 = time;
$s->signal('TERM');
my $status = $s->wait_exit(30);
is($status, 0, 'SIGTERM: plxd stops, with status 0');
cmp_ok(time - $t0, '<', 15, sprintf('... in %.1f s, not after the run', time - $t0));
like($s->error_log, qr/stopping without an event thread that a request still holds/, '... and says why');
unlike($s->error_log, qr/AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:/,
    '... with no sanitizer report');
$s->stop unless defined $status;

# --- a request begun as the event thread stops ---
# A stop posted during a long inline run (x.plt) reaches the event thread
# when it ends; the next inline run (i.plt) is in the daemon's last run
# before its stop, and a request for a script new to the interpreter
# threads, sent meanwhile, begins after every waiting request was ended. It
# must not wait (libmicrohttpd aborts plxd when it stops with a suspended
# connection): it is given up with its connection.
$s = start(timeout => '10s');
ok(inline_again('/i.plt'), 'i.plt runs inline');
ok(inline_again('/x.plt'), 'x.plt runs inline');
my ($x, $a, $b) = map { $s->connect } 1 .. 3;
$x->syswrite(request_bytes('GET', "/x.plt?sleep=2.5"));
select undef, undef, undef, 0.2;
$s->signal('TERM');
ok($s->wait_log(qr/stopping: no new connections/), 'SIGTERM during the long inline run');
$a->syswrite(request_bytes('GET', '/i.plt?sleep=0.5'));
my ($rx) = read_responses($x, 1, timeout => 10, partial => 1);
select undef, undef, undef, 0.2;
$b->syswrite(request_bytes('GET', '/new.plt'));
$status = $s->wait_exit(30);
is($status, 0, 'plxd stops with status 0, not aborted by libmicrohttpd');
unlike($s->error_log, qr/Fatal error in GNU libmicrohttpd/, '... which reports no fatal error');
$s->stop unless defined $status;

done_testing;
