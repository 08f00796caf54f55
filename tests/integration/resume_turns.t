# A request that waits for its script is suspended, and resumed when the
# script has answered; after the response libmicrohttpd asks to be run
# again at once, twice, and the event thread runs it with no turn of its
# loop in between (an epoll_wait of the loop's set that would find
# nothing: server/http.c, thread_main). The same for every handler that
# waits: a .pl in its CGI process and a .plt on an interpreter thread here,
# a .plx in a worker process in perl_hop.t. Checked with strace, on one
# keep-alive connection.
use strict;
use warnings;
use Test::More;
use PlxdTest;
use HTTP::Tiny;

my $n = 10;
for my $case (
    { script => 'hello.pl', handler => 'cgi' },
    { script => 'hello.plt', handler => 'perl:thread',
      sections => { 'perl:thread' => { isolation => 'thread', workers => 1, inline_budget => 0 } } },
) {
    my $s = PlxdTest->start(
        files    => { $case->{script} => "print \"Content-Type: text/plain\\n\\nhello\\n\";\n" },
        server   => { threads => 1 },
        handlers => { '.' . ($case->{script} =~ s/.*\.//r) => $case->{handler} },
        sections => $case->{sections} // {},
    );
    my $url = $s->url("/$case->{script}");
    my $ka = HTTP::Tiny->new(timeout => 30, keep_alive => 1);
    is($ka->get($url)->{status}, 200, "$case->{script}: a first request");
    my $answered = 0;
    my @lines = $s->strace_during($s->pid, \@PlxdTest::RESUME_CALLS, sub {
        for (1 .. $n) {
            my $res = $ka->get($url);
            $answered++ if $res->{status} == 200 && $res->{content} eq "hello\n";
        }
    });
    is($answered, $n, "... $n keep-alive requests answered under strace");
    my ($sets, $turns) = PlxdTest::loop_turns_after_responses(\@lines);
    is($sets, 1, "... the loop's epoll set found") or diag(join "\n", @lines);
    is(scalar @$turns, $n, "... $n responses sent") or diag(join "\n", @lines);
    is(join(',', grep { $_ } @$turns), '',
        '... after each, libmicrohttpd run again with no turn of the loop in between')
        or diag(join "\n", @lines);
}

done_testing;
