# conf/examples/nginx-balancer.conf in front of two plxd instances: requests
# reach both, scripts see the client's address (plxd trusts nginx), a
# forged X-Forwarded-For from an untrusted client is ignored, and one
# instance going down is survived.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use IO::Socket::IP;
use POSIX qw(WNOHANG);
use PlxdTest qw(wait_for read_file write_file source_dir);
use PlxdRaw qw(responses);

my $nginx = '/usr/sbin/nginx';
plan skip_all => "$nginx is not installed (./setup.sh test installs nginx-light)" unless -x $nginx;

my $script = <<'PL';
print "Content-Type: text/plain\n\n";
print "remote=$ENV{REMOTE_ADDR} instance=$ENV{SERVER_PORT}\n";
PL
my @plxd = map {
    PlxdTest->start(
        files    => { 'who.pl' => $script },
        handlers => { '.pl' => 'cgi' },
        server   => { trusted_proxies => '127.0.0.1' },
    )
} 1 .. 2;

# A free port for nginx: bind port 0, read it, let it go.
my $probe = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Listen => 1) or die;
my $port = $probe->sockport;
close $probe;

my $prefix = tempdir(CLEANUP => 1);
my $conf = read_file(source_dir() . '/conf/examples/nginx-balancer.conf');
$conf =~ s/server 127\.0\.0\.1:8081 /server 127.0.0.1:${\ $plxd[0]->port } / or die 'example changed: first upstream';
$conf =~ s/server 127\.0\.0\.1:8082 /server 127.0.0.1:${\ $plxd[1]->port } / or die 'example changed: second upstream';
$conf =~ s/listen 127\.0\.0\.1:8080;/listen 127.0.0.1:$port;/ or die 'example changed: listen';
$conf =~ s/^worker_processes .*$/worker_processes 1;/m;
write_file("$prefix/nginx.conf", $conf);

my $pid = fork // die;
if (!$pid) {
    open STDOUT, '>', "$prefix/stdout.log";
    open STDERR, '>', "$prefix/stderr.log";
    exec $nginx, '-p', "$prefix/", '-c', "$prefix/nginx.conf" or die;
}
my $up = wait_for(sub { IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $port) }, 20);
ok($up, 'nginx is up') or diag(read_file("$prefix/stderr.log") . read_file("$prefix/error.log"));

sub fetch {
    my (%o) = @_;
    my $sock = IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $o{port} // $port,
        LocalHost => $o{from} // '127.0.0.1') or return '';
    $sock->syswrite("GET /who.pl HTTP/1.0\r\nHost: x\r\n" . ($o{headers} // '') . "\r\n");
    my $raw = PlxdTest::read_until_closed($sock, 10);
    responses($raw);    # fails on any byte that belongs to no response
    return $raw;
}

my %seen;
for (1 .. 10) {
    my $answer = fetch(from => '127.0.0.3');
    $seen{$1}++ if $answer =~ /instance=(\d+)/;
    like($answer, qr/remote=127\.0\.0\.3 /, 'the script sees the client address, not the proxy')
        if $_ == 1;
}
is(scalar keys %seen, 2, 'requests reach both instances') or diag(explain \%seen);

like(fetch(from => '127.0.0.3', headers => "X-Forwarded-For: 6.6.6.6\r\n"), qr/remote=127\.0\.0\.3 /,
    'a forged X-Forwarded-For sent through nginx is replaced');
like(fetch(port => $plxd[0]->port, from => '127.0.0.5', headers => "X-Forwarded-For: 6.6.6.6\r\n"),
    qr/remote=127\.0\.0\.5 /, 'sent straight to plxd by an untrusted client, it is ignored');

$plxd[0]->stop;
my @after = map { fetch(from => '127.0.0.3') } 1 .. 6;
is(scalar(grep { m{^HTTP/1\.1 200 } } @after), 6, 'with one instance down every request is still answered');
is(scalar(grep { /instance=${\ $plxd[1]->port }/ } @after), 6, 'by the other');

kill 'TERM', $pid;
ok(wait_for(sub { waitpid($pid, WNOHANG) == $pid }, 20), 'nginx stopped') or do { kill 'KILL', $pid; waitpid $pid, 0 };
done_testing;
