# A reload (SIGHUP) replaces the persistent-Perl workers as Apache's graceful
# restart does: the old workers serve until their replacements are ready, one
# at a time, never more than `workers` lent at once; and the status page shows
# each worker slot once, with the figures of the worker it holds now.
#
# The preload file sleeps, so that a worker's start takes a known long time:
# a request sent right after the reload must be answered well before it.
#
# With the scripts in interpreter threads (PLXD_TEST_ISOLATION=thread), a
# reload keeps the interpreters, as doc/perl.md's isolation table says: the
# same threads serve on, in plxd's process, with the preload they started
# with, and the log says the new settings wait for a restart.
use strict;
use warnings;
use Test::More;
use IO::Select;
use JSON::PP;
use HTTP::Tiny;
use POSIX ();
use Time::HiRes qw(time);
use PlxdTest qw(wait_for write_file read_file thread_mode);

my $start_s = 3;    # how long a worker's start takes: its preload sleeps
my $workers = 2;
my $s = PlxdTest->start(
    files => {
        'startup.pl'  => "select undef, undef, undef, $start_s; our \$GEN = 'first'; 1;\n",
        'startup2.pl' => "select undef, undef, undef, $start_s; our \$GEN = 'second'; 1;\n",
        'gen.plx'     => qq{print "Content-Type: text/plain\\n\\n\$main::GEN \$\$\\n";\n},
    },
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => $workers, preload => 'root/startup.pl' } },
);

sub gen {
    my ($res) = @_;
    return $res->{status} == 200 && $res->{content} =~ /^(\w+) (\d+)$/ ? ($1, $2) : ();
}

sub status_json {
    my $res = $s->get('/plxd-status?json');
    return $res->{status} == 200 ? decode_json($res->{content}) : undef;
}

# Requests on both workers, so that the old ones have counted some: two at
# once, each slow enough to hold its worker while the other arrives.
write_file($s->root . '/hold.plx',
    qq{select undef, undef, undef, 0.3; print "Content-Type: text/plain\\n\\n\$\$\\n";\n});
my @socks = map { my $c = $s->connect; $c->syswrite("GET /hold.plx HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); $c } 1 .. $workers;
for my $c (@socks) { local $/; my $r = <$c>; }
is((gen($s->get('/gen.plx')))[0], 'first', 'the first preload file ran') for 1 .. 3;
my @before = @{ status_json()->{workers} };
if (thread_mode()) {
    is(scalar @before, $workers, "the status page shows $workers interpreter threads");
    my $conf = read_file($s->conf_file);
    $conf =~ s{^preload = .*$}{preload = root/startup2.pl}m or die 'no preload line';
    write_file($s->conf_file, $conf);
    $s->signal('HUP');
    ok($s->wait_log(qr/configuration reloaded/), 'SIGHUP: the configuration is reloaded');
    ok($s->wait_log(qr/interpreter threads keep their settings until a restart/),
        '... and the log says the new preload waits for a restart');
    for (1 .. 3) {
        my $t0 = time;
        my ($g, $pid) = gen($s->get('/gen.plx'));
        is("$g $pid", 'first ' . $s->pid, "the same interpreters answer, in plxd's process");
        cmp_ok(time - $t0, '<', $start_s / 2, '... at once');
    }
    is(scalar @{ status_json()->{workers} }, $workers, "still $workers on the status page");
    $s->stop;
} else {
    my %old = map { $_->{pid} => 1 } @before;
    is(scalar keys %old, $workers, "$workers workers, each with a pid of its own");
    is(scalar(grep { $_->{requests} > 0 } @before), $workers, '... each has served requests');

    # ---- a reload: the old workers serve on ----------------------------------

    my $conf = read_file($s->conf_file);
    $conf =~ s{^preload = .*$}{preload = root/startup2.pl}m or die 'no preload line';
    write_file($s->conf_file, $conf);
    $s->signal('HUP');
    ok($s->wait_log(qr/configuration reloaded/), 'SIGHUP: the configuration is reloaded');
    my $t0  = time;
    my $res = $s->get('/gen.plx');
    my $took = time - $t0;
    my ($g, $pid) = gen($res);
    is($g, 'first', 'a request right after the reload is answered by an old worker');
    ok($pid && $old{$pid}, '... one of those that ran before it');
    cmp_ok($took, '<', $start_s / 2,
        sprintf('... in %.3f s, without waiting for a new worker to start (%d s)', $took, $start_s));

    # While the workers are replaced: every scrape shows each slot once (the
    # slot label tells them apart, even two with pid 0 or one state), the
    # figures of the worker it holds now (a new worker or an empty slot has
    # served nothing yet: no perl request is sent meanwhile), never more than
    # `workers` busy; until every slot holds a new worker.
    my (@bad, $scrapes, %seen_new);
    my $done = wait_for(sub {
        my $text = $s->get('/plxd-status?prometheus')->{content};
        $scrapes++;
        my (%series, %slots, %pids, $busy, %every);
        for my $line (split /\n/, $text) {
            # Prometheus refuses a scrape with a series twice: every name
            # and label set, of all the page's series, once.
            push @bad, "series twice: $line" if $line =~ /^([^#].*) \S+$/ && $every{$1}++;
            next unless $line =~ /^(plxd_worker_\w+)\{([^}]*)\} (\d+)$/;
            my ($name, $labels, $v) = ($1, $2, $3);
            my %l = $labels =~ /(\w+)="([^"]*)"/g;
            push @bad, "twice: $line" if $series{"$name $l{handler} " . ($l{slot} // '?')}++;
            push @bad, "no slot label: $line" unless defined $l{slot};
            $slots{$name}{ $l{slot} // '?' } = 1;
            next unless $name eq 'plxd_worker_requests';
            $pids{ $l{slot} // '?' } = $l{pid};
            $busy++ if $l{state} eq 'busy';
            push @bad, "a worker not yet used, or none, counts requests: $line"
                if $v != 0 && !$old{ $l{pid} };
            $seen_new{ $l{pid} } = 1 if $l{pid} && !$old{ $l{pid} };
        }
        for my $name (keys %slots) {
            my $n = keys %{ $slots{$name} };
            push @bad, "$name: $n slots, not $workers" if $n != $workers;
        }
        push @bad, "$busy busy" if ($busy // 0) > $workers;
        my @new = grep { $_ && !$old{$_} } values %pids;
        return @new == $workers;
    }, 60);
    ok($done, 'every slot comes to hold a new worker') or diag(explain(\@bad));
    ok(!@bad, "... and in each of $scrapes scrapes meanwhile each slot was there once, with its worker's figures")
        or diag(explain(\@bad));
    is(scalar keys %seen_new, $workers, "... $workers new workers, no more");
    my ($g2, $pid2) = gen($s->get('/gen.plx'));
    is($g2, 'second', 'then the new preload file serves');
    ok(!$old{$pid2}, '... in a new worker');
    my $j = status_json();
    is(scalar @{ $j->{workers} }, $workers, "the page shows $workers workers");
    # The worker's count goes up as it is given back, which may come just
    # after its response reached the client: polled, and never past 1.
    my $used;
    ok(wait_for(sub {
        my $page = status_json() or return 0;
        ($used) = grep { $_->{pid} == $pid2 } @{ $page->{workers} };
        return $used && $used->{requests} >= 1;
    }), 'the new worker that served counts its request');
    is($used && $used->{requests}, 1, '... that one request');
    ok(wait_for(sub { !grep { kill 0, $_ } keys %old }), 'the old workers have exited');
    unlike($s->error_log, qr/did not exit within|died/, 'each old worker ended cleanly');
    $s->stop;
}

# ---- a pool that is never idle is replaced too --------------------------

# One worker, and always a request queued for it when it comes back (two
# requests in flight, a new one sent as each is answered): the worker is
# handed from request to request and never idle, yet the new generation
# takes over while the load goes on, and no request fails. In thread mode
# the one interpreter serves on through the reload: 50 answers after it are
# all of the first preload, and none fails.
my $b = PlxdTest->start(
    files => {
        'startup.pl'  => "our \$GEN = 'first'; 1;\n",
        'startup2.pl' => "our \$GEN = 'second'; 1;\n",
        'gen.plx'     => qq{select undef, undef, undef, 0.05; print "Content-Type: text/plain\\n\\n\$main::GEN \$\$\\n";\n},
    },
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, preload => 'root/startup.pl' } },
);
sub send_gen {
    my $c = $b->connect;
    $c->syswrite("GET /gen.plx HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    return $c;
}
my %buf = map { my $c = send_gen(); ("$c" => [$c, '']) } 1 .. 2;
my ($answers, $failed, $hupped, $second_at, $first_after) = (0, 0, 0, undef, 0);
my $until = time + 60;
while (time < $until && !defined $second_at && $first_after < 50) {
    my $sel = IO::Select->new(map { $_->[0] } values %buf);
    for my $c ($sel->can_read(1)) {
        my $n = sysread($c, $buf{"$c"}[1], 4096, length $buf{"$c"}[1]);
        next if $n;
        my $text = delete($buf{"$c"})->[1];
        close $c;
        my $c2 = send_gen();
        $buf{"$c2"} = [$c2, ''];
        $answers++;
        if ($text !~ m{^HTTP/1\.1 200 .*\r\n\r\n(\w+) \d+\n\z}s) {
            $failed++;
            next;
        }
        $second_at = $answers if $1 eq 'second';
        $first_after++ if $1 eq 'first' && $hupped && $b->error_log =~ /configuration reloaded/;
        if ($answers == 5 && !$hupped++) {
            my $conf = read_file($b->conf_file);
            $conf =~ s{^preload = .*$}{preload = root/startup2.pl}m or die 'no preload line';
            write_file($b->conf_file, $conf);
            $b->signal('HUP');
        }
    }
}
ok($hupped, 'SIGHUP while two requests at a time kept the one worker busy');
if (thread_mode()) {
    ok(!defined $second_at && $first_after == 50,
        'the one interpreter served on through the reload, with its first preload');
} else {
    ok(defined $second_at, 'the new generation took over while the load went on')
        or diag($b->error_log);
}
is($failed, 0, "none of the $answers requests failed");
for my $c (map { $_->[0] } values %buf) { local $/; my $r = <$c>; }
$b->stop;

# ---- a preload slower than queue_timeout: zero drop ------------------------

# Each new worker's preload sleeps 3 s, longer than queue_timeout (2 s): a
# reload that left no worker serving until a new one had started would make
# the requests meanwhile wait past queue_timeout and get 503. Four clients
# keep requesting (one request each 10 ms) while two reloads replace the
# workers (the second while the first is still under way); every answer
# must be a 200. In thread mode a reload starts nothing (the interpreters
# keep their preload), so there is nothing slow to wait for: the case is of
# the worker processes.
if (!thread_mode()) {
    my $slow_s = 3;
    my $z = PlxdTest->start(
        files => {
            'startup.pl'  => "our \$GEN = 'first'; 1;\n",
            'startup2.pl' => "select undef, undef, undef, $slow_s; our \$GEN = 'second'; 1;\n",
            'startup3.pl' => "select undef, undef, undef, $slow_s; our \$GEN = 'third'; 1;\n",
            'gen.plx'     => qq{print "Content-Type: text/plain\\n\\n\$main::GEN \$\$\\n";\n},
        },
        handlers => { '.plx' => 'perl' },
        sections => { perl => { workers => 2, preload => 'root/startup.pl', queue_timeout => '2s' } },
        server   => { access_log => '' },
    );
    my $stop = $z->dir . '/stop';
    my @kids;
    for my $n (1 .. 4) {
        my $kid = fork // die "fork: $!";
        if (!$kid) {
            my $http = HTTP::Tiny->new(keep_alive => 1, timeout => 30);
            my (%status, $worst) = ();
            my $until = time + 90;
            while (!-e $stop && time < $until) {
                my $t0 = time;
                my $r = $http->get($z->url('/gen.plx'));
                my $took = time - $t0;
                $worst = $took if !defined $worst || $took > $worst;
                my $what = $r->{status} == 200 && $r->{content} =~ /^(\w+) \d+$/ ? "200 $1" : "$r->{status} $r->{content}";
                # The first answer of each preload, for the test to wait on.
                write_file($z->dir . "/seen-$1", '') if !$status{$what}++ && $what =~ /^200 (\w+)$/;
                select undef, undef, undef, 0.01;    # a steady load, not all the CPU
            }
            write_file($z->dir . "/client$n", join('', map { "$_\t$status{$_}\n" } sort keys %status)
                . sprintf("worst\t%.3f\n", $worst // 0));
            POSIX::_exit(0);
        }
        push @kids, $kid;
    }
    my $reload_to = sub {
        my ($file) = @_;
        my $conf = read_file($z->conf_file);
        $conf =~ s{^preload = .*$}{preload = root/$file}m or die 'no preload line';
        write_file($z->conf_file, $conf);
        $z->signal('HUP');
    };
    ok(wait_for(sub { (gen($z->get('/gen.plx')))[0] eq 'first' }), 'slow preload: the clients are served');
    $reload_to->('startup2.pl');
    ok(wait_for(sub { (gen($z->get('/gen.plx')))[0] eq 'second' }, 60),
        '... a reload: a worker of the new preload serves after its start');
    ok(wait_for(sub { -e $z->dir . '/seen-second' }, 60), '... and the clients too');
    $reload_to->('startup3.pl');
    # Both slots hold a worker of the last preload: several answers in a
    # row are all of it.
    ok(wait_for(sub { !grep { (gen($z->get('/gen.plx')))[0] ne 'third' } 1 .. 6 }, 60),
        '... a second reload while the first was under way: its workers take over');
    write_file($stop, '');
    waitpid $_, 0 for @kids;
    my (%all, @worst);
    for my $n (1 .. 4) {
        for (split /\n/, read_file($z->dir . "/client$n")) {
            my ($what, $count) = split /\t/;
            if ($what eq 'worst') { push @worst, $count } else { $all{$what} += $count }
        }
    }
    my $served = 0;
    $served += $all{$_} for grep { /^200 / } keys %all;
    my @bad = grep { !/^200 / } keys %all;
    ok($served > 0 && $all{'200 second'} && $all{'200 third'},
        "the clients were served by all three preloads ($served requests)") or diag(explain(\%all));
    is(scalar @bad, 0, "... and none of their requests failed (the slowest took @worst s)")
        or diag(explain(\%all));
    unlike($z->error_log, qr/no perl worker became free|answered 503/, '... none waited past queue_timeout');
    $z->stop;
}

done_testing;
