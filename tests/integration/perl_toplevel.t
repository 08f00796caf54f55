# A .plx runs as a top-level program, as the same script does as .pl: $^S
# is 0 at its top level and 1 in its evals (also in $SIG{__DIE__} hooks),
# caller() is empty there, a die no eval catches is perl's own top-level
# die (its message in the log once, END blocks run, the output so far is
# the response), exit and CORE::exit end the request only, tell(STDOUT)
# starts afresh, $^X is the perl matching the worker's libperl. Every
# script runs as .pl and as .plx and the answers are compared, over
# several requests of one worker.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for);
use Config;

my %scripts = (
    # What a top-level program sees of itself.
    'top' => <<'EOF',
my $lexical = 'seen';
sub whence { return (caller(0))[3] =~ /::whence$/ ? 'sub' : 'other' }
my @hook;
local $SIG{__DIE__} = sub { push @hook, $^S };
eval { die "caught\n" };
my $caught = $@;
print "Content-Type: text/plain\n\n";
print "S=$^S in_eval=", eval { $^S }, " caller=", (defined(caller) ? 'yes' : 'no'),
    " wantarray=", (defined(wantarray) ? 'defined' : 'undef'), " sub=", whence(),
    " string_eval=", eval('$lexical'), " hook=@hook caught=$caught";
main() unless caller;
sub main { print "modulino main ran\n" }
EOF
    # CGI::Carp's fatalsToBrowser: its "Software error" page, as it
    # depends on $^S, caller frames and tell(STDOUT).
    'carp' => <<'EOF',
use CGI::Carp qw(fatalsToBrowser);
die "boom\n" if $ENV{QUERY_STRING} eq 'die';
warn "carp warning\n" if $ENV{QUERY_STRING} eq 'warn';
print "Content-Type: text/plain\n\nfine\n";
EOF
    # A die after the headers, and END blocks after a die.
    'late' => <<'EOF',
$| = 1 if $ENV{QUERY_STRING} eq 'flush';
print "Content-Type: text/plain\n\nbefore\n";
END { print STDERR "end block ran\n" }
die "late death\n";
EOF
    # die with an object and with no newline: perl's own rendering.
    'object' => <<'EOF',
die "no newline" if $ENV{QUERY_STRING} eq 'plain';
die { code => 42 };
EOF
    'coreexit' => <<'EOF',
print "Content-Type: text/plain\n\ncore exit\n";
CORE::exit(5);
EOF
    # tell(STDOUT) before anything is printed, as a new process has it.
    'tell' => <<'EOF',
my $before = tell(STDOUT);
print "Content-Type: text/plain\n\n";
print "tell=$before\n";
EOF
    # The signals blocked in the thread that runs it: none, as in a new
    # process, whatever the request before blocked (POSIX::sigprocmask).
    'mask' => <<'EOF',
use POSIX ();
sub blocked {
    open my $st, '<', '/proc/thread-self/status' or return '?';
    return (map { /^SigBlk:\s*(\S+)/ ? $1 : () } <$st>)[0];
}
my $before = blocked();
POSIX::sigprocmask(POSIX::SIG_BLOCK(), POSIX::SigSet->new(POSIX::SIGALRM(), POSIX::SIGUSR1()));
print "Content-Type: text/plain\n\nblocked=$before then=", (blocked() =~ /[1-9a-f]/ ? 'some' : 'none'), "\n";
EOF
    # $. and a slurp of an empty body, as a new process has them: undef
    # and '', whatever the request before read.
    'slurp' => <<'EOF',
my $start = $.;
my $body = do { local $/; <STDIN> };
print "Content-Type: text/plain\n\nstart=", $start // 'undef', ' body=',
    defined $body ? "'$body'" : 'undef', " line=$.\n";
EOF
    # The umask plxd started with, whatever the request before set; the
    # file it creates gets it too.
    'umask' => <<'EOF',
my $start = umask;
umask 077;
my $file = "$ENV{DOCUMENT_ROOT}/umask.$$.tmp";
open my $fh, '>', $file or die "$file: $!";
my $mode = (stat $file)[2] & 0777;
unlink $file;
print "Content-Type: text/plain\n\n";
printf "umask=%04o then=%04o file=%04o\n", $start, umask, $mode;
EOF
    # $^X runs perl itself.
    'caretx' => <<'EOF',
print "Content-Type: text/plain\n\n";
print "X=$^X\n";
system($^X, '-e', 'print "system ran $]\n"') == 0 or print "system failed: $?\n";
print `$^X -le "print q(backticks ran)"`;
EOF
);

my %files;
for my $name (keys %scripts) {
    $files{"$name.pl"} = $files{"$name.plx"} = $scripts{$name};
}
my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { perl => { workers => 1 } },
);
sub get { my ($path) = @_; my $r = $s->get($path); return $r }

# --- the same answers as .pl, request after request ---
for my $round (1 .. 3) {
    for my $case (['/top', ''], ['/carp', '?die'], ['/carp', ''], ['/late', ''], ['/late', '?flush'],
                  ['/tell', ''], ['/caretx', ''], ['/coreexit', ''], ['/mask', ''],
                  ['/slurp', ''], ['/umask', '']) {
        my ($name, $q) = @$case;
        my $pl = get("$name.pl$q");
        my $plx = get("$name.plx$q");
        is($plx->{status}, $pl->{status}, "round $round, $name$q: same status ($pl->{status})");
        is($plx->{content}, $pl->{content}, "round $round, $name$q: same body");
    }
}

my $top = get('/top.plx')->{content};
is($top, "S=0 in_eval=1 caller=no wantarray=undef sub=sub string_eval=seen hook=1 caught=caught\n"
    . "modulino main ran\n", 'top level: $^S 0, 1 in evals and hooks, no caller, lexicals in string evals');

my $carp = get('/carp.plx?die');
is($carp->{status}, 500, "CGI::Carp's fatalsToBrowser: its status");
like($carp->{content}, qr{<h1>Software error:</h1>\s*<pre>boom\n</pre>}, '... and its page');
is($carp->{headers}{'content-type'}, 'text/html', '... as text/html');

is(get('/late.plx')->{content}, "before\n", 'a die after the headers keeps the output');
is(get('/tell.plx')->{content}, get('/tell.pl')->{content}, 'tell(STDOUT) starts as in a new process');
like(get('/caretx.plx')->{content},
    qr{\AX=\Q$Config{perlpath}\E\nsystem ran \Q$]\E\nbackticks ran\n\z},
    "\$^X is $Config{perlpath}, and runs");
is(get('/coreexit.plx')->{content}, "core exit\n", 'CORE::exit keeps the output');
is(get('/slurp.plx')->{content}, "start=undef body='' line=1\n", "\$. and an empty body's slurp: undef and ''");
is(get('/mask.plx')->{content}, "blocked=0000000000000000 then=some\n",
    'no signal blocked at the start of a request, after one that blocked some');
my $server_umask = sprintf '%04o', umask;    # plxd inherits the test's
is(get('/umask.plx')->{content}, "umask=$server_umask then=0077 file=0600\n",
    "the umask plxd started with ($server_umask) at the start of a request, after one that set 077");

# --- the log: each die message once, END blocks, how each ended ---
my $root = $s->root;
my $log = sub { $s->error_log };
ok(wait_for(sub { $log->() =~ /late\.plx: exited with status \d+$/m }), 'a die after the headers is logged as the end of a CGI process');
my $count = sub { my ($re) = @_; my @m = $log->() =~ /$re/g; scalar @m };
my $before = $count->(qr/\Q$root\E\/late\.plx: late death$/m);
get('/late.plx') for 1 .. 4;
ok(wait_for(sub { $count->(qr/\Q$root\E\/late\.plx: late death$/m) == $before + 4 }),
    'four dies, four messages in the log') or diag($count->(qr/late\.plx: late death/m) - $before);
is($count->(qr/\Q$root\E\/late\.plx: end block ran$/m), $count->(qr/\Q$root\E\/late\.plx: late death$/m),
    'END blocks run after each die');

get('/object.plx?plain');
get('/object.pl?plain');
ok(wait_for(sub { $log->() =~ /object\.plx: no newline at \Q$root\E\/object\.plx line 1\.$/m }),
    'die without a newline: file and line, as perl says it');
get('/object.plx');
get('/object.pl');
ok(wait_for(sub { $log->() =~ /object\.plx: HASH\(0x[0-9a-f]+\)$/m }), 'die with a reference: perl renders it');
is(get('/object.plx')->{status}, 500, '... 500, no output');

get('/coreexit.plx');
ok(wait_for(sub { $log->() =~ /coreexit\.plx: exited with status 5$/m }), 'CORE::exit(5): its status');
like(get('/carp.plx')->{content}, qr/^fine$/m, 'the worker lives on after all of these');
unlike($log->(), qr/retires|ended the interpreter/, 'and was never replaced');

# CGI::Carp's log lines name the script (its timestamp and caller frames).
get('/carp.plx?warn');
get('/carp.pl?warn');
ok(wait_for(sub { $log->() =~ /carp\.plx: \[[^\]]+\] carp\.plx: carp warning$/m }),
    "CGI::Carp's warn hook: '[date] carp.plx: ...'");
get('/carp.plx?die');
ok(wait_for(sub { $log->() =~ /carp\.plx: \[[^\]]+\] carp\.plx: boom$/m }),
    "CGI::Carp's die: '[date] carp.plx: boom'");

done_testing;
