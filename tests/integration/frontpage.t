# The front page (cgi-bin/index.html) in a real browser: headless Chromium
# driven through chromedriver's WebDriver HTTP API (HTTP::Tiny and JSON::PP,
# nothing else). It loads the page, checks that every sample is linked in
# its .pl/.plx/.plt triple (and that each .plt answers), the framework
# samples' .psgi applications beside them, and that the bench chart has its
# place, presses the live burst's button (four series drawn, the
# persistent, in-process and PSGI rates higher), then follows the counter
# links: the persistent counter grows for the same worker pid, the in-process
# one for the same interpreter, the per-request one stays at 1.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use HTTP::Tiny;
use IO::Socket::IP;
use JSON::PP;
use MIME::Base64 qw(decode_base64);
use POSIX qw(WNOHANG);
use PlxdTest qw(wait_for source_dir write_file);

my $CHROMIUM = '/usr/bin/chromium';
my $DRIVER   = '/usr/bin/chromedriver';
my $ELEMENT  = 'element-6066-11e4-a52e-4f735466cecf';    # W3C WebDriver's element key
my $json = JSON::PP->new->utf8->canonical;
my $http = HTTP::Tiny->new(timeout => 60);

for my $bin ($CHROMIUM, $DRIVER) {
    next if -x $bin;
    fail("$bin is installed (Debian packages chromium and chromium-driver; ./setup.sh test installs them)");
    done_testing;
    exit;
}

# plxd serving the real cgi-bin/, .pl per request, .plx persistent, .plt
# in-process and .psgi applications, as conf/plxd.conf maps them.
my $root = source_dir() . '/cgi-bin';
my $s = eval {
    PlxdTest->start(
        args     => ['--root', $root],
        handlers => { '.pl' => 'cgi', '.plx' => 'perl', '.plt' => 'perl:thread', '.cgi' => 'cgi', '.psgi' => 'perl' },
        sections => { perl => { workers => 2 }, 'perl:thread' => { isolation => 'thread', workers => 2 } },
    );
};
ok($s, 'plxd starts with .pl = cgi, .plx = perl, .plt = perl:thread, .psgi = perl and 2 workers each')
    or diag("without the cgi and perl handlers the counters cannot run: $@");
$s //= PlxdTest->start(args => ['--root', $root]);    # the page itself is static

# The counters must answer before the browser is worth asking about them.
my %available;
for my $c (qw(counter.pl counter.plx counter.plt)) {
    my $res = $s->get("/$c");
    $available{$c} = $res->{status} == 200;
    ok($available{$c}, "$c is available (cgi-bin/$c exists and its handler answers 200)")
        or diag("GET /$c answered $res->{status}: the counter test below cannot pass until "
            . ($c =~ /x$/ ? 'the persistent Perl handler and cgi-bin/counter.plx exist'
             : $c =~ /t$/ ? 'the perl handler in thread mode and cgi-bin/counter.plt exist'
                          : 'the CGI handler and cgi-bin/counter.pl exist'));
}

# ----- chromedriver ---------------------------------------------------------

my $tmp = tempdir('plxd-frontpage-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{PLXD_TEST_KEEP});
my $port = do {
    my $l = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Listen => 1) or die "bind: $@";
    my $p = $l->sockport;
    close $l;
    $p;
};
my $driver_pid = fork // die "fork: $!";
if (!$driver_pid) {
    open STDOUT, '>', "$tmp/chromedriver.out";
    open STDERR, '>&', \*STDOUT;
    exec $DRIVER, "--port=$port", "--log-path=$tmp/chromedriver.log" or POSIX::_exit(127);
}
my $wd = "http://127.0.0.1:$port";
my $session;

sub wd {
    my ($method, $path, $body) = @_;
    my $res = $http->request($method, "$wd$path", {
        headers => { 'Content-Type' => 'application/json' },
        (defined $body ? (content => $json->encode($body)) : ()),
    });
    my $data = eval { $json->decode($res->{content}) } // { value => { error => $res->{content} } };
    die "WebDriver $method $path: $res->{status} " . $json->encode($data->{value}) . "\n"
        unless $res->{success};
    return $data->{value};
}

sub sw { my ($method, $path, $body) = @_; wd($method, "/session/$session$path", $body) }
sub js { my ($script, @args) = @_; sw(POST => '/execute/sync', { script => $script, args => \@args }) }
sub page_text { js('return document.body ? document.body.innerText : ""') }

# Every process below pid, through /proc: what chromedriver started.
sub descendants {
    my ($top) = @_;
    my %kids;
    opendir my $dh, '/proc' or return;
    for my $p (grep { /^\d+$/ } readdir $dh) {
        open my $fh, '<', "/proc/$p/stat" or next;
        my $stat = <$fh> // next;
        $stat =~ s/^.*\)\s+//s;
        push @{ $kids{ (split ' ', $stat)[1] } }, $p;
    }
    my @out;
    my @todo = ($top);
    while (defined(my $p = shift @todo)) {
        push @out, @{ $kids{$p} || [] };
        push @todo, @{ $kids{$p} || [] };
    }
    return @out;
}

sub stop_driver {
    return unless $driver_pid;
    eval { wd(DELETE => "/session/$session") } if $session;    # closes the browser
    undef $session;
    my @left = descendants($driver_pid);
    kill 'TERM', $driver_pid;
    wait_for(sub { waitpid($driver_pid, WNOHANG) == $driver_pid }, 10) or do {
        kill 'KILL', $driver_pid;
        waitpid $driver_pid, 0;
    };
    undef $driver_pid;
    kill 'KILL', grep { kill 0, $_ } @left;    # a browser process that outlived it
}
END { local $?; stop_driver() }

ok(wait_for(sub { my $v = eval { wd(GET => '/status') }; $v && $v->{ready} }, 60), 'chromedriver is ready')
    or diag(PlxdTest::read_file("$tmp/chromedriver.out"));

my $caps = wd(POST => '/session', {
    capabilities => { alwaysMatch => { 'goog:chromeOptions' => {
        binary => $CHROMIUM,
        args   => [qw(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
            --disable-background-networking --disable-component-update --disable-sync
            --disable-dev-shm-usage), '--window-size=1200,1600', "--user-data-dir=$tmp/profile"],
    } } },
});
$session = $caps->{sessionId};
ok($session, 'a headless Chromium session');
sw(POST => '/timeouts', { pageLoad => 30000, script => 10000 });

# ----- the page -------------------------------------------------------------

# The URL plxd prints opens on the front page (the root's index.html).
sw(POST => '/url', { url => $s->url('/') });
like(sw(GET => '/title'), qr/plxd/, 'the URL plxd prints opens on the front page, titled plxd');
my $text = page_text();
like($text, qr/a process per request/i, 'it explains the per-request way');
like($text, qr/persistent/i, 'and the persistent way');
like($text, qr/in-process/i, 'and the in-process way');
like($text, qr/PSGI application/, 'and the PSGI application');

# Each sample row links a .pl, a .plx and a .plt of the same name.
my $rows = js(q{
    return Array.from(document.querySelectorAll('#samples tbody tr')).map(function (tr) {
        return Array.from(tr.querySelectorAll('a')).map(function (a) { return a.getAttribute('href'); });
    });
});
ok(@$rows >= 5, 'the samples table has its rows') or diag(explain($rows));
for my $links (@$rows) {
    my %by = map { m{^([^?]+)\.(pl[xt]?)(?:\?|$)} ? ("$2" => $1) : () } @$links;
    my $name = $by{pl} // $by{plx} // $by{plt} // '(none)';
    ok((grep { ($by{$_} // '') eq $name } qw(pl plx plt)) == 3, "a row links $name.pl, $name.plx and $name.plt")
        or diag(explain($links));
}
my %href = map { ($_ =~ s/\?.*//r) => 1 } map { @$_ } @$rows;
ok($href{$_}, "the page links $_") for map { ("$_.pl", "$_.plx", "$_.plt") } qw(hello counter cgi_pm request env cpu);
# The .psgi twins, each in its sample's row.
my %psgi = (hello => 'hello.psgi', mojo => 'mojo.psgi', dancer => 'dancer.psgi', psgi => 'app.psgi');
for my $name (sort keys %psgi) {
    my ($row) = grep { grep { $_ eq "$name.plx" } @$_ } @$rows;
    ok($row && (grep { $_ eq $psgi{$name} } @$row), "the $name row links $psgi{$name}") or diag(explain($row));
}

# Every script the table links is there and runs: 200 with a body, the .plt
# ones in interpreter threads, the .psgi ones as applications.
for my $link (grep { /\.(?:pl[xt]?|psgi)(?:\?|$)/ } map { @$_ } @$rows) {
    my $res = $s->get("/$link");
    ok($res->{status} == 200 && length $res->{content}, "$link answers 200 with a body")
        or diag("GET /$link: $res->{status} " . substr($res->{content} // '', 0, 300));
}

# The chart: where bench/run puts it; shown if it is there, a note if not.
my $chart = js(q{
    var img = document.getElementById('chart');
    return img ? { src: img.getAttribute('src'), loaded: img.complete && img.naturalWidth > 0,
                   note: !document.getElementById('nochart').hidden } : null;
});
is($chart && $chart->{src}, 'bench/chart.png', 'the chart is bench/chart.png (bench/run copies it there)');
ok($chart && ($chart->{loaded} || $chart->{note}), 'the chart shows, or a note says how to make it');

if ($ENV{PLXD_TEST_KEEP}) {
    write_file("$tmp/frontpage.png", decode_base64(sw(GET => '/screenshot')));
    diag("screenshot: $tmp/frontpage.png");
}

# ----- the live burst -------------------------------------------------------

# The button sends a bounded burst to hello.pl, then hello.plx, hello.plt
# and hello.psgi, and draws each: its figures (rate, count) appear, its
# canvas is drawn on, and the persistent, in-process and PSGI rates are
# higher than the per-request one.
if ($available{'counter.pl'} && $available{'counter.plx'} && $available{'counter.plt'}) {
    sw(POST => '/url', { url => $s->url('/') });
    like(page_text(), qr/modest load generator/, 'the live section says a browser is a modest load generator');
    my $button = sw(POST => '/element', { using => 'css selector', value => '#burst' });
    sw(POST => "/element/$button->{$ELEMENT}/click", {});
    my $live;
    my $read = q{
        var out = {};
        ['pl', 'plx', 'plt', 'psgi'].forEach(function (k) {
            var el = document.getElementById('live-' + k), c = document.getElementById('live-' + k + '-chart');
            var px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, inked = 0;
            for (var i = 3; i < px.length; i += 4) if (px[i]) inked++;
            out[k] = { rate: el.dataset.rate ? parseFloat(el.dataset.rate) : null,
                       count: parseInt(el.dataset.count || '0', 10), failed: parseInt(el.dataset.failed || '0', 10),
                       text: el.textContent, inked: inked };
        });
        out.done = !document.getElementById('burst').disabled && out.pl.rate !== null && out.plx.rate !== null
            && out.plt.rate !== null && out.psgi.rate !== null;
        return out;
    };
    ok(wait_for(sub { $live = js($read); $live->{done} }, 240), 'the burst ends with figures on all four sides')
        or diag(explain($live));
    for my $k (qw(pl plx plt psgi)) {
        my $r = $live->{$k};
        is($r->{count}, 200, "hello.$k: 200 requests");
        is($r->{failed}, 0, '... none failed');
        ok(defined $r->{rate} && $r->{rate} > 0, "... a rate above 0 ($r->{rate} req/s)");
        like($r->{text}, qr/\d+ req\/s; latency median [\d.]+ ms/, '... shown with its latency');
        ok($r->{inked} > 200, '... and drawn on its canvas');
    }
    if ($ENV{PLXD_TEST_KEEP}) {
        js(q{document.getElementById('burst').scrollIntoView()});
        write_file("$tmp/burst.png", decode_base64(sw(GET => '/screenshot')));
        diag("screenshot after the burst: $tmp/burst.png");
    }
    ok($live->{plx}{rate} > $live->{pl}{rate}, "the persistent rate is higher ($live->{plx}{rate} against $live->{pl}{rate} req/s)");
    ok($live->{plt}{rate} > $live->{pl}{rate}, "the in-process rate is higher ($live->{plt}{rate} against $live->{pl}{rate} req/s)");
    ok($live->{psgi}{rate} > $live->{pl}{rate}, "the PSGI rate is higher ($live->{psgi}{rate} against $live->{pl}{rate} req/s)");
} else {
    fail('the live burst: hello.pl, hello.plx and hello.plt need the cgi and perl handlers (see above)');
}

# ----- the counters ---------------------------------------------------------

# Clicks the link to name on the front page, waits for the script's page and
# returns its (pid, count), then goes back.
sub follow {
    my ($name) = @_;
    sw(POST => '/url', { url => $s->url('/') });
    my $el = sw(POST => '/element', { using => 'css selector', value => qq{#samples a[href="$name"]} });
    sw(POST => "/element/$el->{$ELEMENT}/click", {});
    wait_for(sub { sw(GET => '/url') =~ m{/\Q$name\E$} }) or return;
    my $body = page_text();
    my ($pid) = $body =~ /\bpid\D{0,10}?(\d+)/i;
    (my $rest = $body) =~ s/\bpid\D{0,10}?\d+//i;
    my ($count) = $rest =~ /\bcount\w*\D{0,10}?(\d+)/i;
    ($count) = $rest =~ /(\d+)/ unless defined $count;
    return ($pid, $count, $body);
}

if ($available{'counter.plx'}) {
    my (%seen, @bad);
    for (1 .. 12) {
        my ($pid, $count, $body) = follow('counter.plx');
        if (!defined $pid || !defined $count) { push @bad, $body // '(no page)'; next }
        push @{ $seen{$pid} }, $count;
    }
    ok(!@bad, 'counter.plx shows a pid and a count each time') or diag(explain(\@bad));
    my @twice = grep { @{ $seen{$_} } >= 2 } keys %seen;
    ok(@twice, 'a worker pid answered counter.plx more than once') or diag(explain(\%seen));
    my @flat = grep { my $c = $seen{$_}; grep { $c->[$_] <= $c->[$_ - 1] } 1 .. $#$c } keys %seen;
    ok(@twice && !@flat, 'the persistent counter grows for the same worker pid')
        or diag(explain(\%seen));
} else {
    fail('following the counter.plx link: counter.plx is not available (see above)');
}
# In-process, every interpreter shares plxd's pid; counter.plt names its
# interpreter by the address of its global.
if ($available{'counter.plt'}) {
    my (%seen, @bad);
    for (1 .. 12) {
        my ($pid, $count, $body) = follow('counter.plt');
        my ($interp) = ($body // '') =~ /\binterpreter ([0-9a-f]+)/;
        if (!defined $pid || !defined $count || !defined $interp) { push @bad, $body // '(no page)'; next }
        push @{ $seen{$interp} }, $count;
        push @bad, "pid $pid is not plxd's (" . $s->pid . ")" if $pid != $s->pid;
    }
    ok(!@bad, "counter.plt shows a count, plxd's pid and an interpreter each time") or diag(explain(\@bad));
    my @twice = grep { @{ $seen{$_} } >= 2 } keys %seen;
    my @flat = grep { my $c = $seen{$_}; grep { $c->[$_] <= $c->[$_ - 1] } 1 .. $#$c } keys %seen;
    ok(@twice && !@flat, 'the in-process counter grows for the same interpreter') or diag(explain(\%seen));
} else {
    fail('following the counter.plt link: counter.plt is not available (see above)');
}
if ($available{'counter.pl'}) {
    my @pl = map { [follow('counter.pl')] } 1 .. 4;
    ok(!(grep { !defined $_->[1] || $_->[1] != 1 } @pl), 'the per-request counter stays at 1')
        or diag(explain([map { $_->[2] } @pl]));
} else {
    fail('following the counter.pl link: counter.pl is not available (see above)');
}

stop_driver();
done_testing;
