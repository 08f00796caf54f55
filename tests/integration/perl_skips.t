# What a request's set-up skips when nothing changed since the last request
# of the same interpreter (doc/perl.md, "What a request's set-up skips"): %ENV's
# lookups, the chdir to the script's folder, the umask, alarm(0), the
# fstat of the standard descriptors. Each is skipped only while the
# scripts run since changed none of it: here a script disturbs each one,
# in every way Perl code can, and the next request (the same script, the
# same folder: the case where the step is skipped) must answer exactly as
# the same script does under CGI (.pl). One worker, so that every request
# meets what the one before left. tests/CMakeLists.txt runs this file again
# with PLXD_TEST_ISOLATION=thread (interpreter threads).
use strict;
use warnings;
use Test::More;
use PlxdTest;

# Prints what the script sees, then disturbs it as the query says; the
# next request prints again. Nothing it loads has C code (XS) but for the
# last cases (POSIX), so that the skips stay on in a worker until then.
my $probe = <<'EOF';
my %d = map { $_ => 1 } split /,/, $ENV{QUERY_STRING};
$| = 1;    # through fd 1, not only STDOUT's buffer: a file put there shows
print "Content-Type: text/plain\n\n";
# Files are read through ARGV, which runs no open op: an open would make
# the next request check the standard descriptors whatever else happened.
sub first_line { local @ARGV = @_; my $line = <>; return $line // "none\n" }
print "marker=", first_line('marker.txt');
printf "umask=%04o\n", umask;
print "alarm=", alarm(0), "\n";
# Every variable but those that name the request or its connection.
my %skip = map { $_ => 1 } qw(QUERY_STRING REQUEST_URI REMOTE_PORT SCRIPT_NAME SCRIPT_FILENAME
    PATH_TRANSLATED);
print map { "env $_=$ENV{$_}\n" } grep { !$skip{$_} } sort keys %ENV;
# What a program it starts gets: the real environment.
my @child = grep { /^(SERVER_NAME|HTTP_X_PROBE|ADDED|ONLY|GATEWAY_INTERFACE)=/ }
    split /\n/, `$^X -e 'print map { "\$_=\$ENV{\$_}\\n" } sort keys %ENV'`;
print "child $_\n" for @child;
print "stdin=", scalar(<STDIN>) // 'eof', "\n";
print STDERR "said $ENV{HTTP_X_SAY}\n" if $ENV{HTTP_X_SAY};
{ local @ARGV = ('/proc/thread-self/status'); print grep { /^SigBlk:/ } <> }

chdir '/' if $d{chdir};
chdir "$ENV{DOCUMENT_ROOT}/sub" if $d{chdir_sub};
umask 077 if $d{umask};
alarm 300 if $d{alarm};
$ENV{SERVER_NAME} = 'elsewhere' if $d{set};
substr($ENV{SERVER_NAME}, 0, 1) = 'Z' if $d{substr};
$ENV{ADDED} = 'yes' if $d{add};
delete $ENV{SERVER_NAME} if $d{delete};
if ($d{swap}) { delete $ENV{SERVER_NAME}; $ENV{ADDED} = 'instead' }
%ENV = () if $d{clear};
%ENV = (ONLY => 1) if $d{assign};
undef %ENV if $d{undef};
*ENV = { ONLY => 'glob' } if $d{glob};
$_ .= '!' for $d{values} ? values %ENV : ();
open(STDOUT, '>', '/dev/null') if $d{stdout};
open(STDIN, '<', 'marker.txt') if $d{stdin};
open(STDERR, '>', '/dev/null') if $d{stderr};
if ($d{dup2}) {
    require POSIX;
    my $file = POSIX::open('marker.txt', POSIX::O_RDONLY());    # no open op: only dup2 tells
    POSIX::dup2($file, fileno(STDIN));
}
if ($d{dup2_err}) {
    require POSIX;
    POSIX::dup2(POSIX::open('/dev/null', POSIX::O_WRONLY()), fileno(STDERR));
}
if ($d{mask}) {
    require POSIX;
    POSIX::sigprocmask(POSIX::SIG_BLOCK(), POSIX::SigSet->new(POSIX::SIGUSR1()));
}
EOF

my %files = (
    'marker.txt' => "top folder\n",
    'sub/marker.txt' => "sub folder\n",
);
for my $ext (qw(pl plx)) {
    $files{"probe.$ext"} = $files{"sub/probe.$ext"} = $files{"other.$ext"} = $probe;
}
my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { perl => { workers => 1 } },
);

# The answer with the names of the script and its kind made the same.
sub answer {
    my ($path, %o) = @_;
    my $r = $o{body}
        ? $s->request('POST', $path, content => $o{body}, headers => $o{headers} || {})
        : $s->get($path, $o{headers});
    my $text = "$r->{status}\n$r->{content}";
    $text =~ s/\.plx?\b/.EXT/g;
    return $text;
}

# CGI's answer for the probe (with these headers), then the .plx's after
# each disturbance, twice: the first request after it puts back what the
# script changed, the second is the same script again.
sub after_each {
    my ($what, $disturb, %o) = @_;
    my $path = $o{path} // '/probe';
    my $cgi = answer("$path.pl", %o);
    like($cgi, qr/^200\nmarker=/, "$what: CGI's answer") or diag $cgi;
    answer("$path.plx?$disturb", %o);
    is(answer("$path.plx", %o), $cgi, "$what: the next request answers as CGI does");
    is(answer("$path.plx", %o), $cgi, "$what: and the one after");
}

my %x = (headers => { 'X-Probe' => 'one' });
answer('/probe.plx', %x) for 1 .. 2;    # compiled, every step known

# The working directory.
after_each('chdir elsewhere by the same script', 'chdir', %x);
after_each('chdir to another folder that has its own marker.txt', 'chdir_sub', %x);
after_each('a script in another folder', '', %x, path => '/sub/probe');
is(answer('/probe.plx', %x), answer('/probe.pl', %x), 'back in the first folder');
after_each('another script in the same folder that moved away', 'chdir', %x, path => '/other');
is(answer('/probe.plx', %x), answer('/probe.pl', %x), '... then this one');

# The umask and a pending alarm.
after_each('umask 077', 'umask', %x);
after_each('alarm 300', 'alarm', %x);

# %ENV and the environment programs get.
for my $d (qw(set substr add delete swap clear assign undef values glob)) {
    after_each("\%ENV: $d", $d, %x);
}
after_each('%ENV: several at once', 'set,add,delete', %x);
after_each('a header with another value', '', headers => { 'X-Probe' => 'two' });
after_each('the header gone', '', headers => {});
after_each('the header back', '', %x);

# The standard handles, reopened in place on other files.
after_each('STDOUT reopened on /dev/null', 'stdout', %x);
after_each('STDERR reopened on /dev/null', 'stderr', %x);
after_each('STDIN reopened on a file', 'stdin', %x);
after_each('STDIN reopened, then a body', 'stdin', %x, body => "the body\n");

# C code: POSIX's dup2 and sigprocmask. In thread mode plxd loads POSIX
# itself and watches these two; in a worker, once a script loaded a module
# with C code, every step runs after every request.
after_each("POSIX::dup2 of a file onto STDIN's descriptor", 'dup2', %x);
after_each('POSIX::sigprocmask blocking SIGUSR1', 'mask', %x);
answer('/probe.plx?dup2_err', %x);
answer('/probe.plx', headers => { 'X-Say' => "after dup2 $_" }) for 1 .. 2;
ok(PlxdTest::wait_for(sub { $s->logs =~ /said after dup2 2/ }, 10),
    "POSIX::dup2 of /dev/null onto STDERR's descriptor: the next requests' STDERR reaches the log")
    or diag $s->logs;

done_testing;
