package PlxdLoad;
# The mixed load of tests/soak and tests/leakcheck: client processes, each on
# a keep-alive connection to plxd serving cgi-bin/, cycling through good and
# bad kinds of request and checking every answer's status (and body).
#
#   my %sum = PlxdLoad::run(port => $port, seconds => 10, clients => 20,
#       dir => $tmp, at => [5, sub { kill 'HUP', $plxd_pid }]);
#   my @problems = PlxdLoad::report(\%sum);
#   PlxdLoad::stop();              # from a signal handler: ends the clients
#
# A good request fails when it gets another status or body, or a connection
# error; a bad one when it gets another status (a connection plxd closes
# on it is counted, not failed: libmicrohttpd may reset a connection whose
# oversized header it did not read).

use strict;
use warnings;
use IO::Select;
use IO::Socket::IP;
use POSIX qw(WNOHANG _exit);
use Time::HiRes qw(time);

our $REQUEST_TIMEOUT = 30;    # longer than this for one answer is a failure

my $QUERY = 'a=b&c=+k+d+d+f&d=asf&as=+1+2+3+4';
my $QUERY_ANSWER = "a => b\nc =>  k d d f\nd => asf\nas =>  1 2 3 4";
my $FORM = 'name=soak&list=x+y%21&empty=';
my $FORM_ANSWER = "name => soak\nlist => x y!\nempty => ";

# What is sent (request line, an extra header, a body: form, of type
# x-www-form-urlencoded unless type says) and what must come back. The first eleven are the good
# requests; plt and post_plt run in interpreter threads inside plxd (.plt = perl:thread), psgi
# and app_psgi where the configuration maps .psgi.
our @KINDS = (
    { name => 'static',      good => 1, get => '/hello.html',         status => [200], body => qr/Hello world!/ },
    { name => 'pl',          good => 1, get => '/hello.pl',           status => [200], body => qr/Hello world!/ },
    { name => 'plx',         good => 1, get => '/hello.plx',          status => [200], body => qr/Hello world!/ },
    { name => 'counter',     good => 1, get => '/counter.plx',        status => [200], body => qr/^count \d+ pid \d+$/ },
    { name => 'request_plx', good => 1, get => "/request.plx?$QUERY", status => [200], body => qr/^\Q$QUERY_ANSWER\E\z/ },
    { name => 'request_pl',  good => 1, get => "/request.pl?$QUERY",  status => [200], body => qr/^\Q$QUERY_ANSWER\E\z/ },
    { name => 'post_plx',    good => 1, post => '/request.plx', form => $FORM, status => [200],
      body => qr/^\Q$FORM_ANSWER\E\z/ },
    # Its whole body: hello.plt's source, sent as a static file, would match /Hello world!/ too.
    { name => 'plt',         good => 1, get => '/hello.plt',          status => [200],
      body => qr{^<html><body>\nHello world!\n</body></html>\n\z} },
    { name => 'post_plt',    good => 1, post => "/request.plt?$QUERY", form => $FORM, status => [200],
      body => qr/^\Q$QUERY_ANSWER\E\n\Q$FORM_ANSWER\E\z/ },
    { name => 'psgi',        good => 1, get => '/hello.psgi',         status => [200],
      body => qr{^<html><body>\nHello world!\n</body></html>\n\z} },
    # Plack::Request and middleware: what they add to the environment is the request's alone.
    { name => 'app_psgi',    good => 1, get => '/app.psgi?name=soak', status => [200], body => qr/^Hello, soak!\n/ },
    { name => 'bad_escape',  get => '/request.plx?a=%zz', status => [400] },
    { name => 'traversal',   get => '/../../etc/passwd',  status => [400, 403, 404] },
    { name => 'big_header',  get => '/hello.html', header => 'X-Big: ' . ('b' x 40000), status => [431] },
    { name => 'missing',     get => '/no-such-file.html', status => [404] },
);

my @pids;    # the running clients

# Runs o{clients} clients against 127.0.0.1:o{port} for o{seconds}, calling
# each sub of o{at} (seconds, sub, ...) once that many seconds have passed.
# Client files go to o{dir}. Returns elapsed, req{kind}, fail{kind} (wrong
# answers), error{kind} (connection errors), failed (how many of those
# count as failures) and up to 5 notes saying what went wrong.
sub run {
    my (%o) = @_;
    my $t0 = time;
    my $stop = $t0 + $o{seconds};
    my %at = @{ $o{at} || [] };
    for my $i (0 .. $o{clients} - 1) {
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            $SIG{INT} = $SIG{TERM} = 'DEFAULT';
            client($i, $o{port}, $stop, "$o{dir}/client-$i");
            _exit(0);
        }
        push @pids, $pid;
    }
    while (@pids) {
        for my $when (sort { $a <=> $b } keys %at) {
            (delete $at{$when})->() if time - $t0 >= $when;
        }
        # By PID: waitpid(-1) could reap the server.
        @pids = grep { waitpid($_, WNOHANG) != $_ } @pids;
        select(undef, undef, undef, 0.1) if @pids;
    }
    my %good = map { $_->{name} => $_->{good} } @KINDS;
    my %sum = (elapsed => time - $t0, failed => 0, notes => []);
    for my $i (0 .. $o{clients} - 1) {
        my $file = "$o{dir}/client-$i";
        open my $fh, '<', $file or next;
        while (my $line = <$fh>) {
            chomp $line;
            my ($what, $kind, $rest) = split /\t/, $line, 3;
            if ($what eq 'note') {
                push @{ $sum{notes} }, "$kind: $rest" if @{ $sum{notes} } < 5;
            } else {
                $sum{$what}{$kind} += $rest;
                $sum{failed} += $rest if $what eq 'fail' || ($what eq 'error' && $good{$kind});
            }
        }
        close $fh;
        unlink $file;
    }
    return %sum;
}

# Ends the clients (SIGTERM, by PID) and reaps them.
sub stop {
    kill 'TERM', @pids if @pids;
    waitpid $_, 0 for @pids;
    @pids = ();
}

# Prints the requests per kind. Returns the problems found.
sub report {
    my ($sum) = @_;
    my @problems;
    printf "%-12s %10s %8s %8s  %s\n", 'kind', 'requests', 'failed', 'conn.err', 'expected';
    my ($total, $failed, $errors) = (0, 0, 0);
    for my $k (@KINDS) {
        my ($n, $f, $e) = map { $sum->{$_}{ $k->{name} } // 0 } qw(req fail error);
        printf "%-12s %10d %8d %8d  %s\n", $k->{name}, $n, $f, $e,
            join('/', @{ $k->{status} }) . ($k->{good} ? '' : ' (bad request)');
        ($total, $failed, $errors) = ($total + $n, $failed + $f, $errors + $e);
        push @problems, "$k->{name}: $f requests got another answer than expected" if $f;
        push @problems, "$k->{name}: $e connection errors" if $e && $k->{good};
    }
    printf "%-12s %10d %8d %8d  %.0f requests/s over %.1f s\n", 'total', $total, $failed, $errors,
        $total / $sum->{elapsed}, $sum->{elapsed};
    print "  $_\n" for @{ $sum->{notes} };
    push @problems, 'no request was answered' unless $total > $errors;
    return @problems;
}

# One client: a keep-alive connection, reopened whenever plxd closes it,
# cycling through @KINDS from its own offset until $stop. Writes its counts
# to $out: "req|fail|error TAB KIND TAB N" lines and up to 3 "note" lines.
sub client {
    my ($index, $port, $stop, $out) = @_;
    my (%req, %fail, %error, @notes);
    my $conn;
    my $n = $index;
    while (time < $stop) {
        my $kind = $KINDS[$n++ % @KINDS];
        $req{ $kind->{name} }++;
        my $res = eval {
            $conn //= connect_plxd($port);
            exchange($conn, $kind);
        };
        if (!$res) {
            (my $why = $@ || 'no answer') =~ s/\s+$//;
            $error{ $kind->{name} }++;
            push @notes, "$kind->{name}\tconnection error: $why" if @notes < 3;
            undef $conn;
            next;
        }
        my $ok = grep { $_ == $res->{status} } @{ $kind->{status} };
        $ok &&= $res->{body} =~ $kind->{body} if $kind->{body};
        if (!$ok) {
            $fail{ $kind->{name} }++;
            push @notes, "$kind->{name}\tgot $res->{status}: " . substr($res->{body} =~ s/\s+/ /gr, 0, 100)
                if @notes < 3;
        }
        undef $conn if $res->{close};
    }
    open my $fh, '>', $out or _exit(1);
    print $fh "req\t$_\t$req{$_}\n" for keys %req;
    print $fh "fail\t$_\t$fail{$_}\n" for keys %fail;
    print $fh "error\t$_\t$error{$_}\n" for keys %error;
    print $fh "note\t$_\n" for @notes;
    close $fh;
}

sub connect_plxd {
    my ($port) = @_;
    my $sock = IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
        or die "connect: $@\n";
    return { sock => $sock, buf => '' };
}

# Sends one request of $kind on $conn and reads its answer. Returns
# { status, body, close }; dies on a connection error or a timeout.
sub exchange {
    my ($conn, $kind) = @_;
    my ($method, $path) = $kind->{post} ? ('POST', $kind->{post}) : ('GET', $kind->{get});
    my $head = "$method $path HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    $head .= "$kind->{header}\r\n" if $kind->{header};
    my $body = '';
    if (defined $kind->{form}) {
        $body = $kind->{form};
        $head .= 'Content-Type: ' . ($kind->{type} // 'application/x-www-form-urlencoded') . "\r\n"
            . 'Content-Length: ' . length($body) . "\r\n";
    }
    my $bytes = "$head\r\n$body";
    while (length $bytes) {
        my $n = syswrite($conn->{sock}, $bytes) // die "write: $!\n";
        substr($bytes, 0, $n) = '';
    }
    my $deadline = time + $REQUEST_TIMEOUT;
    my $head_end;
    fill($conn, $deadline) || die "closed before the headers\n"
        while ($head_end = index($conn->{buf}, "\r\n\r\n")) < 0;
    my $header = substr($conn->{buf}, 0, $head_end + 4, '');
    my ($version, $status) = $header =~ m{^HTTP/1\.(\d) (\d{3})} or die "not an HTTP response\n";
    my %h;
    $h{ lc $1 } = $2 while $header =~ /^([\w-]+):[ \t]*(.*?)\r$/mg;
    my $res = { status => $status, body => '',
        close => $version eq '0' || scalar(($h{connection} // '') =~ /close/i) };
    if (defined $h{'content-length'}) {
        fill($conn, $deadline) || die "closed in the body\n" while length $conn->{buf} < $h{'content-length'};
        $res->{body} = substr($conn->{buf}, 0, $h{'content-length'}, '');
    } elsif (($h{'transfer-encoding'} // '') =~ /chunked/i) {
        while (1) {
            my $eol;
            fill($conn, $deadline) || die "closed in a chunk size\n" while ($eol = index($conn->{buf}, "\r\n")) < 0;
            my $size = hex substr($conn->{buf}, 0, $eol, '');
            substr($conn->{buf}, 0, 2, '');
            if ($size == 0) {    # plxd sends no trailers
                fill($conn, $deadline) || die "closed after the last chunk\n" while length $conn->{buf} < 2;
                substr($conn->{buf}, 0, 2, '');
                last;
            }
            fill($conn, $deadline) || die "closed in a chunk\n" while length $conn->{buf} < $size + 2;
            $res->{body} .= substr($conn->{buf}, 0, $size, '');
            substr($conn->{buf}, 0, 2, '');
        }
    } else {
        1 while fill($conn, $deadline);
        $res->{body} = $conn->{buf};
        $res->{close} = 1;
    }
    return $res;
}

# Reads what is there into the connection's buffer. Returns the bytes read
# (0 when plxd closed); dies on an error or at the deadline.
sub fill {
    my ($conn, $deadline) = @_;
    my $left = $deadline - time;
    die "no answer within $REQUEST_TIMEOUT s\n" if $left <= 0 || !IO::Select->new($conn->{sock})->can_read($left);
    my $n = sysread($conn->{sock}, $conn->{buf}, 65536, length $conn->{buf});
    die "read: $!\n" unless defined $n;
    return $n;
}

1;
