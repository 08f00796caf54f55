# bench/run --quick, once: it builds, measures, stops what it started, and
# writes a Markdown table, a CSV and a PNG chart that are well formed, with
# every section's rows (the new-connection one and bare libmicrohttpd's
# floor among them, the hop floor in the facts, and each .plt beside its
# .plx), and a chart that draws the three ways. Then bench/run
# --status-cost's turns and callgrind figures. It checks the shape of the
# output, never a speed.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use File::Path qw(remove_tree);
use PlxdTest qw(source_dir read_file);

my $src = source_dir();
my $tmp = tempdir('plxd-bench-test-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{PLXD_TEST_KEEP});
my ($out, $pub) = ("$tmp/results", "$tmp/publish");

# --keep leaves the working folder (configurations, logs) for the checks
# below; it is removed at the end.
my $t0 = time;
my $log = qx('$src/bench/run' --quick --keep --out '$out' --publish '$pub' 2>&1);
my $status = $?;
my $took = time - $t0;
is($status, 0, 'bench/run --quick exits 0') or diag($log);
note("bench/run --quick took $took s");
my ($work) = $log =~ /^kept (\S+)$/m;

# Progress: which target, which run, what is left.
like($log, qr{^\[\s*\d+/\d+\s+\S+\] .+ run 1/3 .+ about \S+ left$}m, 'progress names the step, the run and the time left');
like($log, qr{run 3/3}, 'three runs per figure');

# Files, under a time stamp and as latest.*.
my @md = glob "$out/*-quick.md";
is(scalar @md, 1, 'one Markdown table') or diag(`ls -l $out`);
(my $base = $md[0] // 'none.md') =~ s/\.md$//;
ok(-s "$base.$_", "STAMP.$_ written") for qw(md csv png);
is(read_file("$out/latest.$_"), read_file("$base.$_"), "latest.$_ is a copy") for qw(md csv png);
ok(-s "$pub/chart.png", 'chart.png published for the front page');
is(read_file("$pub/results.txt"), read_file("$base.md"), 'results.txt published beside it');

# ----- Markdown: the four experiments, tables whose rows all have the
# header's number of cells.
my $md = read_file("$base.md");
like($md, qr/^## 1\. Sequential requests, a new connection each/m, 'section 1: seed 1');
like($md, qr/^## 2\. A new connection each, 10 at a time \(ab -n 200 -c 10\)$/m, 'section 2: a new connection each, ab -c 10');
like($md, qr/^## 3\. CGI\.pm against PLXD::Request/m, 'section 3: seed 2');
like($md, qr/^## 4\. Keep-alive throughput/m, 'section 4: keep-alive');
like($md, qr/^## Ratios/m, 'the ratios');
like($md, qr/^\| machine \| \d+ cores, .+ \|$/m, 'the machine: cores and CPU model');
like($md, qr/^\| system \| .*kernel \S+/m, 'the kernel');
like($md, qr/^\| plxd \| plxd \d+\.\d+\.\d+ .*git \S+/m, "plxd's version and git revision");
like($md, qr/^\| floor \| libmicrohttpd \d+\.\d+\.\d+: bench\/mhd_floor/m, "the floor's libmicrohttpd version");
like($md, qr/^\| hop floor \| one CPU [\d.]+ µs(?:, two CPUs [\d.]+ µs)? \(bench\/hop_floor: /m,
    'the hop floor: a round trip between two processes, on one CPU and across two');
like($md, qr/^\| sessions \| every server in a session of its own \(setsid\), every ab and wrk in another \|$/m,
    'how the servers and the load tools were started');
my (@tables, $in);
for my $line (split /\n/, $md) {
    if ($line =~ /^\|/) { push @tables, [] unless $in; push @{ $tables[-1] }, $line; $in = 1 }
    else { $in = 0 }
}
my $bad_tables = 0;
for my $t (@tables) {
    my @cells = map { scalar(() = /\|/g) } @$t;
    $bad_tables++ if grep { $_ != $cells[0] } @cells;
    $bad_tables++ unless @$t >= 2 && $t->[1] =~ /^\|(?:\s*:?-+:?\s*\|)+$/;
}
ok(@tables >= 6, 'six tables (facts, four experiments, ratios)');
is($bad_tables, 0, 'every table has a separator row and rows of the same width');
like($md, qr/^\| \d+\. \| 100 \| [\d.]+[^|]*\| [\d,.]+[^|]*\|.*\| hello\.html, plxd[^,|]*, static \|$/m, 'seed 1 row for the static file, measured');
like($md, qr/^\| hello\.html \| plxd [^|]+ \| static \| [\d.]+[^|]*\| [\d,.]+[^|]*\|/m, 'section 2 row for the static file, measured');
like($md, qr/^\| hello\.html, plxd \/ mhd_floor pool, a new connection each \(ab -c 10\) \| \d+\.\d\d \|/m,
    "the ratio to the floor, a new connection each");
like($md, qr/^\| hello\.html, plxd \/ mhd_floor pool, keep-alive \| \d+\.\d\d \|/m, 'and with keep-alive');

# ----- CSV: the declared columns, a value for each, numbers that add up.
my @lines = split /\n/, read_file("$base.csv");
my @cols = split /,/, shift @lines;
is_deeply([@cols[0 .. 4]], [qw(section server handler target query)], 'CSV header');
ok((grep { $_ eq 'rps' } @cols) && (grep { $_ eq 'p99' } @cols), 'CSV has requests/s and p99 columns');
my (@rows, $bad_width);
# RFC 4180 fields: quoted ones may hold commas and doubled quotes.
sub csv_fields {
    my ($line) = @_;
    my @f;
    while (1) {
        if ($line =~ /\G"((?:[^"]|"")*)"/gc) { push @f, $1 =~ s/""/"/gr }
        elsif ($line =~ /\G([^,"]*)/gc) { push @f, $1 }
        last unless $line =~ /\G,/gc;
    }
    return (pos($line) // 0) == length($line) ? @f : ();
}
for my $line (@lines) {
    my @f = csv_fields($line);
    $bad_width++ if @f != @cols;
    my %r;
    @r{@cols} = @f;
    push @rows, \%r;
}
ok(@rows >= 20, 'a CSV row per target and load (' . scalar(@rows) . ')');
ok(!$bad_width, 'every CSV row has one field per column');
my %sections = map { $_->{section} => 1 } @rows;
is_deeply([sort keys %sections], [qw(conc conn ka seq)], 'rows of all four experiments');
my @ok = grep { $_->{status} eq 'ok' } @rows;
my @na = grep { $_->{status} =~ /^not available: \S/ } @rows;
is(@ok + @na + scalar(grep { $_->{status} =~ /^(?:failed|ok \()/ } @rows), scalar @rows,
    'each status is ok, not available (with why) or failed');
is(scalar(grep { $_->{target} eq 'hello.html' && $_->{server} =~ /^plxd/ } @ok), 4,
    'the static file was measured in each experiment that has it (seed 1 twice)');

# The new-connection section (ab -c 10): hello.html, hello.pl and hello.plx
# from plxd, measured or not available with why; hello.html beside the
# floor's three modes, which are measured with keep-alive too.
for my $t (qw(hello.html hello.pl hello.plx)) {
    my @r = grep { $_->{section} eq 'conn' && $_->{target} eq $t && $_->{server} =~ /^plxd/ } @rows;
    is(scalar @r, 1, "section 2: a row for $t") and is_deeply([@{ $r[0] }{qw(tool n c)}], ['ab', 200, 10], "... ab -n 200 -c 10");
}
for my $mode (qw(pool external perconn)) {
    for my $section (qw(conn ka)) {
        my @r = grep { $_->{section} eq $section && $_->{handler} =~ /^mhd_floor $mode,/ } @rows;
        ok(@r == 1 && $r[0]{status} eq 'ok' && $r[0]{target} eq 'hello.html' && $r[0]{server} =~ /^libmicrohttpd /,
            "the floor, mhd_floor $mode, measured in $section") or diag(explain(\@r));
    }
}
my $num = qr/^\d+(?:\.\d+)?$/;
my @bad = grep {
    my $r = $_;
    (grep { ($r->{$_} // '') !~ $num } qw(rps rps_min rps_max time p50 p99 runs))
        || $r->{rps} <= 0 || $r->{rps_min} > $r->{rps} || $r->{rps} > $r->{rps_max} || $r->{runs} != 3
} @ok;
is(scalar @bad, 0, 'measured rows: positive figures, min <= median <= max, 3 runs')
    or diag(explain(\@bad));

# The three ways side by side: every .plt target in each section where its
# .plx is, measured, from plxd only (the peers have no .plt), in
# interpreter threads; hello.plt and cpu.plt again with one thread.
my %plt = (
    seq  => [qw(hello.plt)],
    conn => [qw(hello.plt)],
    conc => [qw(cgi_pm.plt request.plt)],
    ka   => [qw(hello.plt cgi_pm.plt request.plt cpu.plt)],
);
for my $section (sort keys %plt) {
    for my $t (@{ $plt{$section} }) {
        my @r = grep { $_->{section} eq $section && $_->{target} eq $t && $_->{workers} eq '2' } @rows;
        my $want = $section eq 'seq' ? 2 : 1;    # seed 1 runs two loads
        ok(@r == $want && !(grep { $_->{status} ne 'ok' || $_->{server} !~ /^plxd/ || $_->{mode} ne 'in-process'
            || $_->{handler} !~ /isolation=thread, 2 threads/ } @r), "$section: $t measured in plxd's interpreter threads")
            or diag(explain(\@r));
        (my $twin = $t) =~ s/\.plt$/.plx/;
        ok((grep { $_->{section} eq $section && $_->{target} eq $twin } @rows), "... beside $twin");
    }
}
for my $t (qw(hello.plt cpu.plt)) {
    my @r = grep { $_->{section} eq 'ka' && $_->{target} eq $t && $_->{workers} eq '1' } @rows;
    ok(@r == 1 && $r[0]{status} eq 'ok' && $r[0]{handler} =~ /isolation=thread, 1 thread/,
        "ka: $t measured again with one interpreter thread") or diag(explain(\@r));
}
is(scalar(grep { $_->{target} =~ /\.plt$/ && $_->{server} !~ /^plxd/ } @rows), 0, 'no .plt row for a server other than plxd');
for my $ratio ('hello.plt / hello.plx, plxd, keep-alive', 'cgi_pm.plt / cgi_pm.plx, plxd, keep-alive',
    'request.plt / request.plx, plxd, keep-alive', 'cpu.plt / cpu.plx, plxd, keep-alive',
    'hello.plt / hello.plx, plxd, a new connection each (ab -c 10)', 'cgi_pm.plt / cgi_pm.plx, plxd, seed 2 (ab -c 10)',
    'cpu.plt threads=2 / threads=1, plxd') {
    like($md, qr/^\| \Q$ratio\E \| \d+\.\d\d \|/m, "the ratio $ratio");
}

# PSGI applications: hello.psgi (a new connection each and keep-alive) and
# the Dancer2 and Mojolicious hello apps (keep-alive, served from
# bench/peers/ through [mount]), each measured by plxd in worker processes
# and by a second plxd in interpreter threads, with its ratios.
my %psgi = (conn => [qw(hello.psgi)], ka => [qw(hello.psgi hello_dancer.psgi hello_mojo.psgi)]);
for my $section (sort keys %psgi) {
    for my $t (@{ $psgi{$section} }) {
        for my $way (['persistent', qr/^perl, workers=2, PSGI$/], ['in-process', qr/^perl, isolation=thread, 2 threads, PSGI$/]) {
            my ($mode, $handler) = @$way;
            my @r = grep { $_->{section} eq $section && $_->{target} eq $t && $_->{mode} eq $mode } @rows;
            ok(@r == 1 && $r[0]{status} eq 'ok' && $r[0]{server} =~ /^plxd/ && $r[0]{handler} =~ $handler
                && $r[0]{workers} eq '2', "$section: $t measured in plxd's " . ($mode eq 'persistent' ? 'worker processes' : 'interpreter threads'))
                or diag(explain(\@r));
        }
    }
}
for my $ratio ('hello.psgi / hello.plx, plxd, keep-alive (worker processes)',
    'hello.psgi / hello.plt, plxd, keep-alive (interpreter threads)',
    (map { "$_ in threads / in processes, plxd, keep-alive" } qw(hello.psgi hello_dancer.psgi hello_mojo.psgi)),
    'hello.psgi in threads / in processes, plxd, a new connection each (ab -c 10)') {
    like($md, qr/^\| \Q$ratio\E \| \d+\.\d\d \|/m, "the ratio $ratio");
}
# Issue 32's targets: every row against a peer, said to need --peers.
like($md, qr/^## Targets \(issue 32\)\n\n\| Measurement \| plxd \| against \| Ratio \| Target \| Met \|$/m,
    "issue 32's targets section");
my %rows32 = map { /^\| ([^|]+?) \| (.*) \|$/ ? ($1 => [split / \| /, $2]) : () }
    (($md =~ /^## Targets \(issue 32\)\n\n(.*?)\n\n/ms)[0] // '') =~ /^\|.*$/mg;
my %goal32 = (
    'hello.psgi in threads, keep-alive / Feersum' => '≥ 1.5',
    'hello.psgi in threads, ab -c 10 / Feersum' => '≥ 1.0',
    "hello.psgi in processes, keep-alive / uWSGI's psgi plugin" => '≥ 1.0',
    "hello.psgi in processes, ab -c 10 / uWSGI's psgi plugin" => '≥ 1.0',
    (map { ("$_ hello in processes, keep-alive / Starman" => '≥ 1.5', "$_ hello in threads, keep-alive / Starman" => '≥ 1.5') }
        qw(Dancer2 Mojolicious)),
);
for my $name (sort keys %goal32) {
    my $r = $rows32{$name};
    ok($r && $r->[3] eq $goal32{$name} && $r->[2] eq 'not measured (--peers)' && $r->[0] =~ /^[\d,]+$/,
        "issue 32 target row: $name, $goal32{$name}, plxd's figure measured, the peer's not without --peers")
        or diag(explain($r));
}
is(scalar(keys %rows32), scalar(keys %goal32) + 1, '... and no other row (the header aside)');

# CPU per request around every keep-alive run: measured rows have it, in
# the table and the CSV.
like($md, qr/^\| Target \| Server \| Handler \| Requests\/s \| p50 \(ms\) \| p99 \(ms\) \| CPU per request \(µs\) \| Errors \|$/m,
    'section 4 has a CPU per request column');
my @ka_ok = grep { $_->{section} eq 'ka' && $_->{status} eq 'ok' } @rows;
my @no_cpu = grep {
    my $r = $_;
    (grep { ($r->{$_} // '') !~ $num } qw(cpu_us cpu_us_min cpu_us_max)) || $r->{cpu_us} <= 0
        || $r->{cpu_us_min} > $r->{cpu_us} || $r->{cpu_us} > $r->{cpu_us_max}
} @ka_ok;
ok(@ka_ok >= 10 && !@no_cpu, 'every measured keep-alive row has its CPU per request, min <= median <= max')
    or diag(explain(\@no_cpu));
is(scalar(grep { $_->{section} ne 'ka' && length $_->{cpu_us} } @rows), 0, '... and only those');

# Issue 30's targets: every row, plxd's own ratios measured and judged, the
# peers' said to need --peers.
like($md, qr/^## Targets \(issue 30\)\n\n\| Measurement \| plxd \| against \| Ratio \| Target \| Met \|$/m, 'the targets section');
my %target_rows = map { /^\| ([^|]+?) \| (.*) \|$/ ? ($1 => [split / \| /, $2]) : () }
    (($md =~ /^## Targets[^\n]*\n\n(.*?)\n\n/ms)[0] // '') =~ /^\|.*$/mg;
my %goal = (
    'hello.plt keep-alive / uWSGI native PSGI hello' => '≥ 1.5',
    'hello.plt keep-alive / Feersum native PSGI hello' => '≥ 1.5',
    "hello.plt keep-alive / plxd's static hello.html" => '≥ 0.5',
    'hello.plt ab -c 10 / uWSGI native PSGI hello ab -c 10' => '≥ 1.0',
    "plxd's CPU per hello.plt request / per static request (µs, keep-alive)" => '≤ 2.5',
    'hello.plx keep-alive / ModPerl::Registry hello' => '≥ 1.75',
    'hello.plx ab -c 10 / ModPerl::Registry hello ab -c 10' => '≥ 2.0',
    "cgi_pm.plt keep-alive / ModPerl::Registry's cgi_pm" => '≥ 2.0',
);
for my $name (sort keys %goal) {
    my $r = $target_rows{$name};
    ok($r && $r->[3] eq $goal{$name}, "target row: $name, $goal{$name}") or diag(explain($r));
    next unless $r;
    if ($name =~ /plxd's/) {    # plxd against itself: measured without --peers
        my ($a, $b, $ratio, $goal, $met) = @$r;
        my ($cmp, $g) = split / /, $goal;
        ok($ratio =~ /^\d+\.\d\d$/ && $met eq (($cmp eq '≥' ? $ratio >= $g : $ratio <= $g) ? 'yes' : 'no'),
            "... measured ($a / $b = $ratio) and judged ($met)");
        (my $x = $a) =~ tr/,//d;
        (my $y = $b) =~ tr/,//d;
        ok(abs($x / $y - $ratio) < 0.01 + 0.06 * $ratio, '... the ratio of the two figures');
    } else {
        is_deeply([@$r[2, 4]], ['not measured (--peers)', '-'], '... not measured without --peers');
    }
}
my ($plt_cpu) = map { $_->{cpu_us} } grep { $_->{section} eq 'ka' && $_->{target} eq 'hello.plt' && $_->{workers} eq '2' } @rows;
my ($html_cpu) = map { $_->{cpu_us} } grep { $_->{section} eq 'ka' && $_->{target} eq 'hello.html' && $_->{server} =~ /^plxd/ } @rows;
my $cpu_row = $target_rows{"plxd's CPU per hello.plt request / per static request (µs, keep-alive)"};
ok($cpu_row && $plt_cpu && $html_cpu && abs($cpu_row->[2] - $plt_cpu / $html_cpu) < 0.01,
    "the CPU ratio is section 4's hello.plt and hello.html CPU per request ($plt_cpu / $html_cpu)");

my %na = map { ("$_->{target} ($_->{server})" => 1) } @na;
diag("not available in this build: " . join(", ", sort keys %na)) if @na;

# ----- PNG: a real image of a plausible size.
my $png = read_file("$base.png");
is(substr($png, 0, 8), "\x89PNG\r\n\x1a\n", 'the chart is a PNG');
my ($w, $h) = unpack 'NN', substr($png, 16, 8);
ok($w >= 600 && $h >= 200, "of a readable size (${w}x$h)");

# What gnuplot drew: each panel's bars, a .plt one beside its .plx in the
# in-process colour (the legend names all three ways).
if ($work) {
    my %colour = (plx => hex('2e8b57'), plt => hex('6a4fa3'));
    for my $panel (qw(seq conn conc ka)) {
        my $dat = read_file("$work/chart-$panel.dat");
        my ($t) = @{ $plt{$panel} };
        for my $ext (qw(plx plt)) {
            (my $target = $t) =~ s/\.plt$/.$ext/;
            like($dat, qr/^"\Q$target\E  plxd[^"]*"\t[\d.]+\t[\d.]+\t[\d.]+\t$colour{$ext}$/m,
                "the chart's $panel panel has a $target bar in its colour");
        }
    }
    like(read_file("$work/chart.gp"), qr/persistent \(\.plx; \.psgi in processes\),  purple: in-process \(\.plt; \.psgi in threads\)/, "the chart's legend names the three ways");
}

# ----- nothing left running: no process uses the working folder.
ok($work && -d $work, 'the working folder was kept') or diag($log);
my @left;
if ($work) {
    opendir my $dh, '/proc';
    for my $p (grep { /^\d+$/ } readdir $dh) {
        my $cmd = read_file("/proc/$p/cmdline");
        push @left, "$p: " . ($cmd =~ tr/\0/ /r) if index($cmd, $work) >= 0;
    }
    remove_tree($work) unless $ENV{PLXD_TEST_KEEP};
}
is(scalar @left, 0, 'no server bench/run started is still running') or diag(join "\n", @left);

# ----- --status-cost: counters on and off in turns, then callgrind each way,
# with the Release build the run above made.
$log = qx('$src/bench/run' --status-cost --quick --runs 2 --callgrind 100 --out '$out' 2>&1);
is($?, 0, 'bench/run --status-cost exits 0') or diag($log);
my @turns = $log =~ /^run \d\/2  counters=(on|off) /mg;
is("@turns", 'on off off on', '... alternating counters on and off, each first in turn');
like($log, qr/^median of 2: counters on \d+ req\/s, off \d+ req\/s: counting costs -?[\d.]+%$/m,
    '... the medians and what counting costs');
SKIP: {
    skip 'no valgrind', 2 unless -x '/usr/bin/valgrind';
    like($log, qr/^callgrind counters=on : 100 hello\.html requests, \d+ instructions in plxd/m,
        '... callgrind with counters on');
    like($log, qr/^callgrind: counting adds -?\d+ instructions a request/m, '... and the difference');
}

done_testing;
