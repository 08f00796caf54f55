# Memory stays flat: plxd's and the Perl workers' resident size after
# 20,000 hello.plx requests is within 1 MB of what it was after a warm-up. Normal build only: AddressSanitizer's quarantine grows RSS.
# In thread mode (PLXD_TEST_ISOLATION=thread) there are no worker
# processes: the two interpreters are threads of plxd, whose own size is
# measured with them in it.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(source_dir read_file thread_mode);
use PlxdRaw qw(responses);

if (read_file(PlxdTest::build_dir() . '/CMakeCache.txt') =~ /^PLXD_SANITIZE:BOOL=ON$/m) {
    plan skip_all => 'memory growth is not measured in the sanitizer build';
}

my $s = PlxdTest->start(
    files => {
        'hello.plx' => read_file(source_dir() . '/cgi-bin/hello.plx'),
        'cgi_pm.plx' => read_file(source_dir() . '/cgi-bin/cgi_pm.plx'),
    },
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 2 } },
    server => { access_log => '', log_level => 'info' },
);

sub rss_kb {
    my ($pid) = @_;
    return read_file("/proc/$pid/status") =~ /^VmRSS:\s+(\d+)/m ? $1 : 0;
}

sub workers {
    my ($parent) = @_;
    my @kids;
    for my $stat (glob '/proc/[0-9]*/stat') {
        my $text = read_file($stat);
        my ($pid, $comm, $ppid) = $text =~ /^(\d+) \((.*)\) \S+ (\d+)/ or next;
        push @kids, $pid if $ppid == $parent && $comm =~ /^plxd-perl-work/;
    }
    return sort @kids;
}

# Several keep-alive connections, requests one after another on each.
my @conns = map { $s->connect } 1 .. 4;
my $bad = 0;
sub run_requests {
    my ($n) = @_;
    for my $i (1 .. $n) {
        my $sock = $conns[$i % @conns];
        # A new query string each time: a value the worker never saw must
        # not cost memory (putenv() strings once leaked this way).
        my $path = $i % 10 ? "/hello.plx?i=$i" : "/cgi_pm.plx?i=$i";
        print $sock "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
        my $head = '';
        while ($head !~ /\r\n\r\n/) {
            sysread($sock, $head, 4096, length $head) or last;
        }
        my ($len) = $head =~ /^Content-Length: (\d+)/mi;
        my ($body) = $head =~ /\r\n\r\n(.*)\z/s;
        $body //= '';
        while (defined $len && length($body) < $len) {
            sysread($sock, $body, $len - length $body, length $body) or last;
        }
        # What was read is one response, framed exactly (PlxdRaw).
        my @r = responses(($head =~ /\A(.*?\r\n\r\n)/s)[0] . $body);
        $bad++ unless $head =~ m{^HTTP/1.1 200} && defined $len && length($body) == $len && @r == 1;
    }
}

run_requests(2000);
# Requests one after another may all go to the same idle worker: the other
# would compile cgi_pm.plx (CGI.pm, 3 MB) only while growth is measured.
# Both scripts on all connections at once, until each worker has run both.
for my $round (1 .. 50) {
    for my $path ('/cgi_pm.plx', '/hello.plx') {
        print $_ "GET $path?w=$round HTTP/1.1\r\nHost: x\r\n\r\n" for @conns;
        for my $sock (@conns) {
            my $got = '';
            until ($got =~ /\r\n\r\n/ && $got =~ /^Content-Length: (\d+)/mi
                    && length($got) >= index($got, "\r\n\r\n") + 4 + $1) {
                sysread($sock, $got, 4096, length $got) or last;
            }
            $bad++ unless $got =~ m{^HTTP/1.1 200};
        }
    }
}
my @w = workers($s->pid);
if (thread_mode()) {
    is(scalar @w, 0, 'no worker process: the interpreters are threads of plxd');
} else {
    is(scalar @w, 2, 'two workers');
}
my %before = map { $_ => rss_kb($_) } $s->pid, @w;
run_requests(18000);
is($bad, 0, '20,200 requests answered completely');
is_deeply([ workers($s->pid) ], \@w, 'by the same workers');
for my $pid ($s->pid, @w) {
    my $growth = rss_kb($pid) - $before{$pid};
    my $what = $pid == $s->pid ? 'plxd' : "worker $pid";
    ok($growth < 1024, "$what grew $growth KB (from $before{$pid} KB) over 18,000 requests");
}
close $_ for @conns;

done_testing;
