# Forks under concurrent load in thread mode: programs started with
# backticks and pipe opens from two interpreter threads at once. A child
# forked while the other thread held PerlIO's process-wide lock used to
# wait for it forever (perl's own fork guard was not registered), and its
# request hung until timeout.
use strict;
use warnings;
use Test::More;
use PlxdTest;
use HTTP::Tiny;
use POSIX ();

my $s = PlxdTest->start(
    files => {
        'ticks.plt' => qq{my \$x = `echo hi`;\nprint "Content-Type: text/plain\\n\\n\$x";\n},
        'pipe.plt'  => qq{open my \$fh, '-|', 'echo', 'hi' or die "\$!";\nmy \$x = <\$fh>;\nclose \$fh;\n}
            . qq{print "Content-Type: text/plain\\n\\n\$x";\n},
    },
    handlers => { '.plt' => 'perl:thread' },
    server   => { threads => 2 },
    sections => { 'perl:thread' => { isolation => 'thread', workers => 2, timeout => '20s' } },
);

# Four clients, two per script, 1000 requests each: 4000 forks, about three
# times what it took to hang one.
my $per_client = 1000;
my @clients;
for my $k (0 .. 3) {
    my $script = $k % 2 ? 'pipe.plt' : 'ticks.plt';
    pipe(my $r, my $w) or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $r;
        my $http = HTTP::Tiny->new(timeout => 15, keep_alive => 1);
        my ($ok, $bad) = (0, '');
        for (1 .. $per_client) {
            my $res = $http->get($s->url("/$script"));
            if ($res->{status} == 200 && $res->{content} eq "hi\n") {
                $ok++;
            } elsif (!$bad) {
                $bad = "$res->{status} " . substr($res->{content} // '', 0, 80);
            }
        }
        print $w "$ok $bad\n";
        close $w;
        POSIX::_exit(0);
    }
    close $w;
    push @clients, [$pid, $r, $script];
}
for my $c (@clients) {
    my ($pid, $r, $script) = @$c;
    my $line = <$r> // '0 no report';
    waitpid $pid, 0;
    my ($ok, $bad) = $line =~ /^(\d+) ?(.*)$/;
    is($ok, $per_client, "$script: every request answered \"hi\" (client $pid)")
        or diag("first failure: $bad");
}
unlike($s->error_log, qr/timed out|AddressSanitizer|runtime error:/, 'no timeout, no sanitizer report');
$s->stop;
done_testing;
