# Connections the client closed stop counting against max_connections at
# once, not at header_timeout: max_connections clients each send half a
# request line and leave (close, shutdown(SHUT_WR), or a reset), and a new
# connection must be served well before header_timeout. Each way is tried
# twice: with plxd running as usual (it reads the half line before the
# client leaves), and with plxd stopped (SIGSTOP) while the clients
# connect, write and leave, so that it finds the bytes and the end in the
# socket together, as a loaded machine can make it do. Last, a keep-alive
# client that sends a whole request and shuts its side is answered, then
# closed just as soon.
use strict;
use warnings;
use Test::More;
use JSON::PP qw(decode_json);
use Socket qw(SOL_SOCKET SO_LINGER SHUT_WR);
use Time::HiRes qw(time);
use PlxdTest qw(wait_for);
use PlxdRaw qw(responses);

my $max = 4;
my $header_timeout = 30;
# Well under header_timeout, and generous for a loaded sanitizer build: plxd
# notices a client that left within a deadline tick (250 ms).
my $prompt = 10;

my $s = PlxdTest->start(files => { 'a.txt' => "a\n" },
    server => { max_connections => $max, header_timeout => "${header_timeout}s",
        connection_timeout => "${header_timeout}s" });

# Open connections by the status page: it is served only while fewer than
# max_connections others are open, and counts itself.
sub open_connections {
    my $res = $s->get('/plxd-status?json');
    return undef unless $res->{status} == 200;
    return decode_json($res->{content})->{connections}{open};
}

sub leave {
    my ($sock, $how) = @_;
    if ($how eq 'shutdown') {
        shutdown($sock, SHUT_WR) or die "shutdown: $!";
    } elsif ($how eq 'reset') {
        setsockopt($sock, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0)) or die "SO_LINGER: $!";
        close $sock;
    } else {
        close $sock;
    }
}

ok(wait_for(sub { (open_connections() // 0) == 1 }), 'at first only the status request is open');

for my $stopped (0, 1) {
    for my $how ('close', 'shutdown', 'reset') {
        my $name = "$how" . ($stopped ? ', plxd stopped meanwhile' : '');
        kill 'STOP', $s->pid if $stopped;
        my @socks = map { $s->connect } 1 .. $max;
        $_->syswrite("GET /a.txt HTTP/1.1\r\n") for @socks;    # started, not finished
        unless ($stopped) {
            # Held: a connection beyond max_connections gets 503.
            ok(wait_for(sub { $s->get('/a.txt')->{status} == 503 }), "$name: the $max connections are counted");
        }
        leave($_, $how) for @socks;
        kill 'CONT', $s->pid if $stopped;
        my $t0 = time;
        # All of them let go: only the status request itself is open.
        my $freed = wait_for(sub { (open_connections() // 0) == 1 }, $header_timeout + 10);
        my $took = time - $t0;
        ok($freed, "$name: the connections are let go");
        cmp_ok($took, '<', $prompt, "$name: within $prompt s, not at header_timeout")
            or diag sprintf('took %.1f s', $took);
        is($s->get('/a.txt')->{status}, 200, "$name: a new connection is served");
        close $_ for @socks;
    }
}

for my $stopped (0, 1) {
    my $name = 'a whole request, then shutdown' . ($stopped ? ', plxd stopped meanwhile' : '');
    kill 'STOP', $s->pid if $stopped;
    my $sock = $s->connect;
    $sock->syswrite("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    shutdown($sock, SHUT_WR) or die "shutdown: $!";
    kill 'CONT', $s->pid if $stopped;
    my $t0 = time;
    my $got = PlxdTest::read_until_closed($sock, $header_timeout + 10);
    my $took = time - $t0;
    my @r = responses($got);
    ok(@r == 1 && $r[0]{status} == 200 && $r[0]{body} eq "a\n", "$name: answered, once");
    cmp_ok($took, '<', $prompt, "$name: then closed within $prompt s, not at header_timeout")
        or diag sprintf('took %.1f s', $took);
    close $sock;
}
ok(wait_for(sub { (open_connections() // 0) == 1 }), 'in the end only the status request is open');

$s->stop;
done_testing;
