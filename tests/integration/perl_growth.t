# The growth warning (doc/perl.md: "Porting to .plx"): a script whose runs keep
# leaving more Perl values alive in its worker, as a framework application
# set up at the script's top level does (its routes pile up), is named in
# the log once, with the build-once idiom; a script that builds its
# application once, or keeps nothing, never is. Under [perl] workers = 1:
# - the samples of cgi-bin/ (built once), hello.plx, a script that
#   fills a cache in its first runs only, and scripts whose leftovers the
#   next request's set-up frees (a variable added to %ENV, an exception
#   object in $@, @ARGV), 200 requests each: no warning;
# - the Mojolicious and Dancer2 samples with "=" for "||=" (set up per
#   request), and a plain script that keeps every request's query in a
#   global, 200 requests each: one warning, right after the 33rd run (the
#   first compiles, the 32 after it are measured); the PSGI, Template
#   Toolkit and CGI::Application samples without their idiom make their
#   objects again on every request and let the old ones go: none;
# - traffic mixing a growing script with others, the growing one now and
#   then twice in a row: its warning, and none for the others.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(source_dir read_file wait_for);

my @SAMPLES = qw(mojo dancer psgi cgiapp tt);
my $N = 200;

# Each script logs its runs ("run N"): the warning comes right after the
# run that gave it, as the worker's stderr keeps its order.
my $logs = 'print STDERR "run $ENV{QUERY_STRING}\n";' . "\n";
my %files = ('hello.plx' => $logs . read_file(source_dir() . '/cgi-bin/hello.plx'),
    'mark.plx' => 'print STDERR "mark $ENV{QUERY_STRING}\n"; print "Content-Type: text/plain\n\nok\n";');
for my $name (@SAMPLES) {
    my $text = read_file(source_dir() . "/cgi-bin/$name.plx");
    $files{"$name.plx"} = $logs . $text;
    $files{"${name}_naive.plx"} = $logs . ($name eq 'cgiapp'
        ? $text =~ s/\bcache => 1\b/cache => 0/gr =~ s/PlxdSample::CGIApp\b/PlxdSample::CGIAppNaive/gr
        : $text =~ s/ \|\|= / = /gr);
}
my $templates = source_dir() . '/cgi-bin/.templates';
opendir my $dh, $templates or die "$templates: $!";
$files{".templates/$_"} = read_file("$templates/$_") for grep { -f "$templates/$_" } readdir $dh;
my $print = 'print "Content-Type: text/plain\n\n", scalar(@seen), "\n";';
$files{'keeps.plx'} = $logs . "our \@seen; push \@seen, \$ENV{QUERY_STRING};\n$print\n";
$files{'warms.plx'} = $logs . "our \@seen; push \@seen, \$ENV{QUERY_STRING} if \@seen < 10;\n$print\n";
$files{'mixed.plx'} = $files{'keeps.plx'};
# What every request's set-up frees (doc/perl.md: "What every request gets
# afresh") is no growth: a variable the script adds to %ENV, an exception
# object left in $@, an @ARGV it filled.
$files{'setenv.plx'} = $logs . "\$ENV{PLXD_GROWTH_X} = \$ENV{QUERY_STRING};\n"
    . 'print "Content-Type: text/plain\n\nok\n";' . "\n";
$files{'caught.plx'} = $logs . "eval { die bless { q => \$ENV{QUERY_STRING} }, 'Caught::Error' };\n"
    . "push \@ARGV, \$ENV{QUERY_STRING};\n" . 'print "Content-Type: text/plain\n\nok\n";' . "\n";

my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1 } },
);
my $root = $s->root;
sub path { my ($name) = @_; return $name =~ /^(?:mojo|dancer|psgi)/ ? "/$name.plx/" : "/$name.plx" }
# The log lines of a script: its runs ("run N") and its warnings ("grows").
sub lines_of {
    my ($name) = @_;
    return map { /: run (\S+)$/ ? "run $1" : /: it keeps growing: / ? 'grows' : () }
        grep { /\Q$root\E\/\Q$name\E\.plx: / } split /\n/, $s->error_log;
}
sub warnings_for { my ($name) = @_; return scalar grep { $_ eq 'grows' } lines_of($name) }
# Everything the worker wrote before this request is in the log.
my $marks = 0;
sub sync {
    $marks++;
    $s->get("/mark.plx?$marks");
    ok(wait_for(sub { $s->error_log =~ /mark\.plx: mark $marks$/m }), "the log has caught up ($marks)");
}

for my $name (@SAMPLES, 'hello', 'warms', 'setenv', 'caught') {
    my $ok = grep { $s->get(path($name) . "?$_")->{status} == 200 } 1 .. $N;
    is($ok, $N, "$name.plx: $N answers");
}
sync();
is(warnings_for($_), 0, "$_.plx: no growth warning in $N requests")
    for @SAMPLES, 'hello', 'warms', 'setenv', 'caught';

for my $name ((map { "${_}_naive" } @SAMPLES), 'keeps') {
    my $ok = grep { $s->get(path($name) . "?$_")->{status} == 200 } 1 .. $N;
    is($ok, $N, "$name.plx: $N answers");
}
sync();
# Plack::Builder's application, a Template object, HTML::Template's parsed
# template, made per request, are let go each time: slower, but nothing
# piles up.
is(warnings_for("${_}_naive"), 0, "${_}_naive.plx: nothing grows, no warning") for 'psgi', 'cgiapp', 'tt';
for my $name ('mojo_naive', 'dancer_naive', 'keeps') {
    # The first request compiles; the 32 after it are measured, and the
    # last of them, right after another run of the script, tells.
    my @lines = lines_of($name);
    is(warnings_for($name), 1, "$name.plx: one warning in $N requests");
    my ($at) = grep { $lines[$_] eq 'grows' } 0 .. $#lines;
    is($at && $lines[$at - 1], 'run 33', "$name.plx: right after its 33rd run");
    my ($line) = grep { /\Q$root\E\/\Q$name\E\.plx: it keeps growing/ } split /\n/, $s->error_log;
    like($line // '', qr/: it keeps growing: (?:2[4-9]|3[0-2]) of its last 32 runs in this worker left more Perl values alive than they found\. .*our \$app \|\|= do \{ \.\.\. \};/,
        "$name.plx: it says how it grows and what to do");
}

# Mixed traffic: hello, the Mojolicious sample and a growing script, the
# growing one twice in a row every fifth turn. A run that follows another
# script's may free what that one left, or leave what the next one frees:
# only a run after a run of the same script tells.
for my $i (1 .. 60) {
    $s->get('/mixed.plx?' . $i);
    $s->get('/mixed.plx?' . $i . 'again') if $i % 5 == 0;
    $s->get('/hello.plx?mixed');
    $s->get('/mojo.plx/?mixed');
}
sync();
is(warnings_for('mixed'), 1, 'mixed.plx: one warning in mixed traffic');
is(warnings_for($_), 0, "$_.plx: still none") for 'hello', 'mojo';

unlike($s->error_log, qr/perl worker \d+ (?:died|exited|killed)/, 'no worker was replaced');
done_testing;
