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

done_testing;
