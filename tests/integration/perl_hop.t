# The hop to a Perl worker process, made as cheap as it can be: what a
# script's STDOUT still buffers at its end comes back with DONE, in one
# message; one poll after DONE tells whether the script wrote to the
# response or stderr pipe itself before its end (most write to neither),
# and only then is either read, the pipe's bytes before DONE's; the
# control socket is watched with a one-shot watch left in the loop's set,
# so a request that ends with DONE makes one epoll_ctl and no delete.
# Checked here: responses exactly at STDOUT's buffer (8 KB, one message)
# and one byte past it, flushed output before the buffered rest, stderr
# with and without output flushed, a streamed response, workers killed or
# exiting right after their DONE (their sockets' entries go with them), on
# two event threads sharing one worker; and, with strace, the system calls
# of plxd's event thread per request, with no turn of the loop between a
# response and libmicrohttpd's next read of that connection, and a worker
# given back at its script's end, before that script's response is sent.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for);
use PlxdRaw qw(responses read_responses request_bytes);
use HTTP::Tiny;
use POSIX ();

my $size_script = <<'EOF';
# ?N: exactly N bytes of output, the header block included.
my $n = $ENV{QUERY_STRING} || 26;
my $head = "Content-Type: text/plain\n\n";
print $head, 'x' x ($n - length $head);
EOF

my %files = (
    'size.plx' => $size_script,
    'hello.plx' => "print \"Content-Type: text/plain\\n\\nhello\\n\";\n",
    'pid.plx' => "print \"Content-Type: text/plain\\n\\n\$\$\\n\";\n",
    # Flushed output goes through the pipe, the rest with DONE: the pipe's
    # bytes come first.
    'order.plx' => <<'EOF',
my $first = $ENV{QUERY_STRING} || 10;
print "Content-Type: text/plain\n\n", 'a' x $first;
STDOUT->flush;
print 'b' x 10;
EOF
    # Its stderr, logged as its own, whether or not it flushed output.
    'warn.plx' => <<'EOF',
$| = 1 if $ENV{QUERY_STRING} =~ /flush/;
print "Content-Type: text/plain\n\n";
print STDERR "hop-warn $ENV{QUERY_STRING}\n";
print "body\n";
EOF
    'stream.plx' => <<'EOF',
$| = 1;
print "Content-Type: text/plain\n\n", "one\n";
select(undef, undef, undef, 0.3);
print "two\n";
EOF
    # Its worker is killed 0.2 s after it answered, while idle.
    'killer.plx' => <<'EOF',
my $worker = $$;
my $pid = fork;
if (defined $pid && $pid == 0) {
    close STDOUT; close STDERR; close STDIN;
    select(undef, undef, undef, 0.2);
    kill 'KILL', $worker;
    POSIX::_exit(0);
}
print "Content-Type: text/plain\n\n$worker\n";
EOF
);

sub gone {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/stat" or return 1;
    my $stat = <$fh> // return 1;
    return $stat =~ /^\d+ \(.*\) [ZX] /;
}

{
    my $s = PlxdTest->start(
        files    => \%files,
        server   => { threads => 2 },
        handlers => { '.plx' => 'perl' },
        sections => { perl => { workers => 1 } },
    );
    # One keep-alive connection: each response must end where its framing says.
    my $ka = HTTP::Tiny->new(timeout => 30, keep_alive => 1);
    for my $n (26, 27, 4096, 8191, 8192, 8193, 16383, 16384, 16385, 65536, 65537, 200_000) {
        my $res = $ka->get($s->url("/size.plx?$n"));
        my $body = $res->{content} // '';
        ok($res->{status} == 200 && length($body) == $n - 26 && $body !~ /[^x]/,
            "$n bytes of output: the whole body, nothing else")
            or diag("status $res->{status}, " . length($body) . ' bytes');
        # Within STDOUT's buffer the output comes whole with DONE: a
        # length. Past it, what the script flushed may be read before its
        # end, and the response start chunked.
        is($res->{headers}{'content-length'}, $n - 26, "... in one message, with its length")
            if $n < 8192;
    }
    for my $first (10, 8166, 8167, 70_000) {
        my $res = $ka->get($s->url("/order.plx?$first"));
        is($res->{content}, ('a' x $first) . ('b' x 10),
            "$first bytes flushed, then 10 buffered: in that order");
    }

    for my $q (qw(plain-1 flush-1 plain-2 flush-2)) {
        is($ka->get($s->url("/warn.plx?$q"))->{content}, "body\n", "a script that writes to stderr ($q)");
        ok($s->wait_log(qr/warn\.plx: hop-warn \Q$q\E$/m, 30), '... logged as its own');
    }

    my $sock = $s->connect;
    print $sock "GET /stream.plx HTTP/1.1\r\nHost: x\r\n\r\n";
    my @r = read_responses($sock, 1);
    is($r[0]{status}, 200, 'a streamed response');
    is($r[0]{headers}{'transfer-encoding'}, 'chunked', '... goes chunked');
    is($r[0]{body}, "one\ntwo\n", '... whole');

    # Killed right after its DONE, while idle: the next requests get a new
    # worker, on either event thread.
    for my $round (1 .. 3) {
        my $res = $s->get('/killer.plx');
        is($res->{status}, 200, "round $round: the script whose worker is killed after it answered");
        my ($killed) = ($res->{content} // '') =~ /(\d+)/;
        ok($killed && wait_for(sub { gone($killed) }, 30), "... its worker is gone");
        my %served;
        for my $i (1 .. 6) {
            my $r2 = $s->get('/pid.plx');
            $served{$r2->{status}}++;
            is(($r2->{content} // '') =~ /^(\d+)$/ && $1 != $killed ? 1 : 0, 1,
                "... request $i after it is served by another worker")
                if $r2->{status} == 200;
        }
        ok(($served{200} // 0) >= 5, "... the requests after it are answered (one may be 502)")
            or diag(explain \%served);
    }
}

{
    # Workers that exit after each DONE (max_requests = 1), each on the
    # event thread its request came to.
    my $s = PlxdTest->start(
        files    => \%files,
        server   => { threads => 2 },
        handlers => { '.plx' => 'perl' },
        sections => { perl => { workers => 1, max_requests => 1 } },
    );
    my %pids;
    for my $i (1 .. 8) {
        my $res = $s->get('/pid.plx');
        is($res->{status}, 200, "max_requests = 1: request $i answered");
        $pids{$1}++ if ($res->{content} // '') =~ /^(\d+)$/;
    }
    is(scalar keys %pids, 8, '... each by a worker of its own');
}

{
    my $s = PlxdTest->start(
        files    => \%files,
        server   => { threads => 1 },
        handlers => { '.plx' => 'perl' },
        sections => { perl => { workers => 1 } },
    );
    my $ka = HTTP::Tiny->new(timeout => 30, keep_alive => 1);
    is($ka->get($s->url('/hello.plx'))->{status}, 200, 'a first request');
    my $pid = $s->pid;
    my ($worker) = grep { $_ } map { /^(\d+)$/ ? $1 : () } split /\s+/,
        PlxdTest::read_file("/proc/$pid/task/$pid/children");
    my $out = readlink("/proc/$worker/fd/1") // '';
    my $n = 20;
    my $answered = 0;
    my @lines = $s->strace_during($pid, [qw(read recvmsg poll), @PlxdTest::RESUME_CALLS], sub {
        for (1 .. $n) {
            my $res = $ka->get($s->url('/hello.plx'));
            $answered++ if $res->{status} == 200 && $res->{content} eq "hello\n";
        }
    });
    is($answered, $n, "$n keep-alive requests answered under strace");
    my ($ctl_del, $ctl_arm, @after_done, @polls, $in_done) = (0, 0);
    for (@lines) {
        if (/^\d+\s+poll\(.*\Q$out\E/ && $in_done) {
            $polls[-1]++;
            next;
        }
        next unless /^\d+\s+(\w+)\((\d+)<([^>]*)>(.*)/;
        my ($call, $fd, $what, $rest) = ($1, $2, $3, $4);
        if ($call eq 'epoll_ctl' && $rest =~ /EPOLL_CTL_(\w+), \d+<UNIX/) {
            $1 eq 'DEL' ? $ctl_del++ : $ctl_arm++;
        } elsif ($call eq 'recvmsg' && $what =~ /^UNIX/) {
            push @after_done, 0;
            push @polls, 0;
            $in_done = 1;
        } elsif ($call eq 'sendmsg' && $what =~ /^UNIX/) {
            $in_done = 0;
        } elsif ($call eq 'read' && "$what" eq $out && $in_done) {
            $after_done[-1]++;
        }
    }
    is(scalar @after_done, $n, "... $n answers (DONE) read from the control socket")
        or diag(join "\n", @lines);
    is($ctl_del, 0, '... and the control socket never taken out of the loop for them');
    is($ctl_arm, $n, '... one epoll_ctl each to watch it');
    is(join(',', grep { $_ != 1 } @polls), '',
        '... after each DONE, one poll of the response and stderr pipes')
        or diag(join "\n", @lines);
    is(join(',', grep { $_ != 0 } @after_done), '',
        '... and, finding nothing there, no read of the response pipe, the drain after the response included');

    # After a response libmicrohttpd asks to be run again at once, twice;
    # those runs take no turn of plxd's loop (an epoll_wait of its set
    # that would find nothing). tests/integration/resume_turns.t puts the
    # other handlers through the same case.
    my ($sets, $loop_turns) = PlxdTest::loop_turns_after_responses(\@lines);
    is($sets, 1, "... the loop's epoll set found") or diag(join "\n", @lines);
    is(scalar @$loop_turns, $n, "... $n responses sent");
    is(join(',', grep { $_ } @$loop_turns), '',
        '... after each, libmicrohttpd run again with no turn of the loop in between')
        or diag(join "\n", @lines);
}

# A worker goes back at its script's end (DONE), before the response is
# sent, when the output is all in hand: with one worker, a request queued
# behind another is sent to it before that other's response goes out.
# Without it, the worker waited for the response to be sent first.
{
    my $s = PlxdTest->start(
        files => {
            'hello.plx' => "print \"Content-Type: text/plain\\n\\nhello\\n\";\n",
            # Runs until the test says go, so that another request can
            # queue behind it.
            'gate.plx' => <<'EOF',
my $root = $ENV{DOCUMENT_ROOT};
open my $f, '>', "$root/started" or die "started: $!";
close $f;
for (1 .. 2000) { last if -e "$root/go"; select(undef, undef, undef, 0.01) }
print "Content-Type: text/plain\n\ngate\n";
EOF
        },
        server   => { threads => 1 },
        handlers => { '.plx' => 'perl' },
        sections => { perl => { workers => 1 } },
    );
    my $root = $s->root;
    is($s->get('/hello.plx')->{content}, "hello\n", 'one worker serves');
    my $pid = $s->serving_pid;
    my $get = sub { "GET $_[0] HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" };
    my ($gate, $hello) = ('', '');
    my @lines = $s->strace_during($pid, [qw(sendmsg recvmsg)], sub {
        my $first = $s->connect;
        $first->syswrite($get->('/gate.plx'));
        ok(wait_for(sub { -e "$root/started" }, 30), 'the first request runs on the worker');
        my $second = $s->connect;
        $second->syswrite($get->('/hello.plx'));
        # Queued: the perl handler has it (writing counts it, the first
        # and this status request).
        ok(wait_for(sub {
            my $res = $s->get('/plxd-status?json');
            $res->{status} == 200 && $res->{content} =~ /"writing":(\d+)/ && $1 >= 3;
        }, 30), 'the second waits for the worker');
        PlxdTest::write_file("$root/go", '');
        $gate = PlxdTest::read_until_closed($first, 30);
        $hello = PlxdTest::read_until_closed($second, 30);
    });
    like($gate, qr/\r\n\r\ngate\n\z/, 'the first answered');
    like($hello, qr/\r\n\r\nhello\n\z/, 'the second answered');
    # The calls from the first DONE on (a recvmsg on the worker's socket):
    # the second request to the worker, then the first response.
    my @after;
    for (@lines) {
        next unless /^\d+\s+(sendmsg|recvmsg)\(\d+<(UNIX|TCP)/;
        push @after, "$1 $2" if @after || "$1 $2" eq 'recvmsg UNIX';
    }
    is(join(', ', grep { defined } @after[0 .. 2]), 'recvmsg UNIX, sendmsg UNIX, sendmsg TCP',
        "at the first script's end, the queued request goes to the worker before that script's response goes out")
        or diag(join "\n", @lines);
}

done_testing;
