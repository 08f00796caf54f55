# Logs and signals: the access log's format, the error log's timestamps and
# levels, SIGHUP (reopen logs, reload, keep a bad config out, report
# restart-only changes), and a graceful SIGTERM.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for write_file read_file);
use PlxdRaw qw(responses);

my $s = PlxdTest->start(
    files    => { 'a.txt' => "a\n", 'x.echo' => '' },
    handlers => { '.echo' => 'echo' },
    sections => { echo => { greeting => 'first' } },
);
$s->get('/a.txt?q=1', { Referer => 'http://ref/', 'User-Agent' => 'tester "7"' });
ok(wait_for(sub { $s->access_log =~ /a\.txt/ }), 'the request is in the access log');
like($s->access_log,
    qr{^127\.0\.0\.1 - - \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] "GET /a\.txt\?q=1 HTTP/1\.1" 200 2 "http://ref/" "tester \\x227\\x22" \d+$}m,
    'Combined Log Format plus microseconds, quotes escaped');
like($s->error_log, qr/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[info\] \[pid \d+\] plxd [\d.]+ listening on/m,
    'error log lines carry a timestamp and a level');

# SIGHUP reopens the logs (as after logrotate's rename).
rename $s->dir . '/access.log', $s->dir . '/access.log.1' or die;
rename $s->dir . '/error.log', $s->dir . '/error.log.1' or die;
$s->signal('HUP');
ok(wait_for(sub { -e $s->dir . '/error.log' && $s->error_log =~ /configuration reloaded/ }, 10),
    'SIGHUP reopens the error log');
$s->get('/a.txt');
ok(wait_for(sub { $s->access_log =~ /a\.txt/ }), 'and the access log');

# A changed handler setting is applied by reconfigure.
like($s->get('/x.echo')->{content}, qr/^first\n/, 'greeting before reload');
my $conf = read_file($s->conf_file);
(my $second = $conf) =~ s/greeting = first/greeting = second/;
write_file($s->conf_file, $second);
$s->signal('HUP');
ok(wait_for(sub { $s->get('/x.echo')->{content} =~ /^second\n/ }, 10), 'SIGHUP applies the new configuration');
like($s->error_log, qr/echo: reconfigured, greeting 'second'/, 'the handler was reconfigured');

# An invalid configuration is refused and the running one kept.
write_file($s->conf_file, $second . "[server]\nbogus = 1\n");
$s->signal('HUP');
ok($s->wait_log(qr/the new configuration is invalid: kept the running one/, 10), 'a bad reload is refused');
like($s->error_log, qr/\[error\].*plxd\.conf:\d+: \[server\] bogus: unknown key/, 'with the mistake named');
like($s->get('/x.echo')->{content}, qr/^second\n/, 'and the running configuration still serves');

# An error log line is at most 16 KiB (LOG_LINE_MAX, with its newline): a
# longer message is cut to fit, and the line says so at its end. The line
# used is a refused target's ("refused TARGET: why"), whose length the test
# sets to the byte: first a short one to learn the rest of the line.
{
    my $line_max = 16384;
    my $l = PlxdTest->start(server => { max_header_size => '64K' });
    my $refused = sub {
        my ($pad) = @_;
        my $target = '/' . ('t' x $pad) . '%zz';
        $l->raw("GET $target HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        ok($l->wait_log(qr/refused \/t{$pad}%zz/, 10), "the line of a target of " . length($target) . ' bytes is logged');
        my ($line) = grep { /refused \/t{$pad}%zz/ } split /(?<=\n)/, $l->error_log;
        return $line // '';
    };
    my $short = $refused->(1);
    like($short, qr/: .*\n\z/, 'a short refused target: its line, with why');
    my $pad = $line_max - length($short) + 1;    # a line of exactly $line_max bytes
    my $at = $refused->($pad);
    is(length $at, $line_max, "a line of exactly $line_max bytes is whole");
    is(substr($at, -length(substr($short, index($short, '%zz')))), substr($short, index($short, '%zz')),
        '... to its last byte');
    unlike($at, qr/\[cut/, '... and not marked');
    my $past = $refused->($pad + 1);
    is(length $past, $line_max, "one byte longer: cut to $line_max bytes");
    like($past, qr/ \[cut: (\d+) more bytes\]\n\z/, '... and ends saying so');
    my ($more) = $past =~ /\[cut: (\d+) more bytes\]\n\z/;
    my $kept = length($past) - length(" [cut: $more more bytes]\n");
    is($kept + $more, length($at), '... with the count of the bytes left out');
    # The whole line it would have been: the line at the limit, one 't'
    # more (the timestamps differ: compared from the message on).
    (my $whole = $at) =~ s{ refused /}{ refused /t};
    my $from = index($whole, ' refused ');
    is(substr($past, $from, $kept - $from), substr($whole, $from, $kept - $from),
        '... after the message as far as it goes');

    # The access log line fits the same limit: each field has its share
    # (the target 10240 bytes, escaped), and one longer is cut there and
    # says how much it left out, leaving the fields after it whole.
    my $share = 10240;
    for my $len ($share, $share + 1) {
        my $target = '/' . ('u' x ($len - 1));
        $l->raw("GET $target HTTP/1.1\r\nHost: x\r\nUser-Agent: agent-$len\r\nConnection: close\r\n\r\n");
        ok(wait_for(sub { $l->access_log =~ /agent-$len/ }, 10), "a target of $len bytes is in the access log");
        my ($line) = grep { /agent-$len/ } split /(?<=\n)/, $l->access_log;
        if ($len == $share) {
            like($line, qr{"GET /u{@{[$len - 1]}} HTTP/1\.1" \d{3} \d+ "-" "agent-$len" \d+\n\z},
                '... whole, at exactly its share');
        } else {
            like($line, qr{"GET /u{@{[$share - 1]}}\[cut: 1 more bytes\] HTTP/1\.1" \d{3} \d+ "-" "agent-$len" \d+\n\z},
                '... one byte longer: cut at its share, marked, the fields after it whole');
        }
        cmp_ok(length $line, '<=', $line_max, "... the line within $line_max bytes");
    }
    $l->stop;
}

# Settings that need a restart are reported and not half-applied.
(my $restart = $second) =~ s/\[server\]\n/[server]\nmax_connections = 7\n/;
write_file($s->conf_file, $restart);
$s->signal('HUP');
ok($s->wait_log(qr/\[server\] max_connections changed: it takes effect only after a restart/, 10),
    'a restart-only change is logged as such');

# SIGTERM: requests in flight finish, then plxd exits 0. The request sleeps
# 5 s, so that it is still in flight when SIGTERM comes however slowly the
# polling below runs; plxd gives it shutdown_timeout (10 s).
my $slow = $s->connect;
$slow->syswrite("GET /x.echo?sleep=5000 HTTP/1.1\r\nHost: x\r\n\r\n");
# In flight: handled but not finished, the stats request itself aside.
ok(wait_for(sub {
    my $stats = $s->get('/x.echo?stats')->{content};
    my ($handled) = $stats =~ /handled (\d+)/;
    my $finished = 0;
    $finished += $_ for $stats =~ /=(\d+)/g;
    $handled - $finished - 1 >= 1;
}, 30), 'slow request is running');
$s->signal('TERM');
my $answer = PlxdTest::read_until_closed($slow, 30);
like($answer, qr{^HTTP/1\.1 200 }, 'a request in flight at SIGTERM still gets its answer');
is(scalar(my @r = responses($answer)), 1, '... one response, framed exactly');
my $status = $s->wait_exit;
is($status, 0, 'then plxd exits 0');
like($s->error_log, qr/stopping: no new connections/, 'the stop is logged');
like($s->error_log, qr/\] stopped$/m, 'and its end');
done_testing;
