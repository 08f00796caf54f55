# plxd starts on a free port, says where, serves, and stops cleanly; IPv6;
# command-line values override the file.
use strict;
use warnings;
use Test::More;
use PlxdTest;

my $s = PlxdTest->start(files => { 'hello.html' => "hello\n" });
like($s->url, qr{^http://127\.0\.0\.1:\d+/$}, 'prints the URL it listens on');
ok($s->port > 0, 'a free port was chosen');
my $res = $s->get('/hello.html');
is($res->{status}, 200, 'serves a file');
is($res->{content}, "hello\n", 'its content');
is($res->{headers}{server}, 'plxd/0.1.0', 'Server header');
is($s->stop, 0, 'exit status 0 after SIGTERM');

SKIP: {
    skip 'no IPv6 loopback on this machine', 3 unless -e '/proc/net/if_inet6';
    my $v6 = PlxdTest->start(listen => '[::1]:0', files => { 'a.txt' => "six\n" });
    like($v6->url, qr{^http://\[::1\]:\d+/$}, 'IPv6 URL in brackets');
    is($v6->get('/a.txt')->{content}, "six\n", 'serves over IPv6');
}

# --root on the command line wins over the file's root.
my $other = File::Temp::tempdir(CLEANUP => 1);
PlxdTest::write_file("$other/which.txt", "from --root\n");
my $r = PlxdTest->start(files => { 'which.txt' => "from the file\n" }, args => ['--root', $other]);
is($r->get('/which.txt')->{content}, "from --root\n", '--root overrides [server] root');

# Without openat2 (a kernel before 5.6, a sandbox that filters it out) no
# path could be opened beneath the root: plxd says so and does not start,
# where it would answer every request 500. strace makes the call fail: with
# ENOSYS (no such call) and EPERM (a seccomp filter's answer); any other
# error is each request's to answer (EACCES: 403), and plxd starts.
{
    my $conf = "$other/plxd.conf";
    PlxdTest::write_file($conf, "[server]\nroot = $other\nerror_log = -\n");
    # A sanitized build's leak check cannot stop a traced process's threads.
    my $env = { ASAN_OPTIONS => join(':', grep { length } $ENV{ASAN_OPTIONS} // '', 'detect_leaks=0') };
    my $failing = sub {
        my ($errno) = @_;
        return { env => $env, prefix => [qw(strace -f -qq -o /dev/null -e trace=openat2 -e),
            "inject=openat2:error=$errno"] };
    };
    for ([ENOSYS => 'Function not implemented'], [EPERM => 'Operation not permitted']) {
        my ($errno, $text) = @$_;
        my $says = qr{\Q$conf\E: \[server\] root \Q$other\E: cannot open files beneath it: openat2: \Q$text\E \(plxd needs Linux 5\.6};
        my ($status, $out, $err) = PlxdTest::run_plxd($failing->($errno), '--check', '--config', $conf);
        is($status >> 8, 1, "openat2 failing with $errno: --check fails");
        like($err, $says, '... and says why, naming the file and the root');
        ($status, $out, $err) = PlxdTest::run_plxd($failing->($errno), '--config', $conf, '--listen', '127.0.0.1:0');
        is($status >> 8, 1, "openat2 failing with $errno: plxd does not start");
        like($err, $says, '... and says why');
    }
    my ($status, $out, $err) = PlxdTest::run_plxd($failing->('EACCES'), '--check', '--config', $conf);
    is($status, 0, 'openat2 failing with EACCES: the configuration is good') or diag($err);
    ($status, $out, $err) = PlxdTest::run_plxd('--check', '--config', $conf);
    is($status, 0, 'with openat2 the same file is good') or diag($err);
}

done_testing;
