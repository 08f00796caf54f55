# What modules install in %SIG (and as overrides of builtins) when a script
# loads them belongs to that script, in every one of its requests, and to
# no other script of the worker: CGI::Carp sets $SIG{__DIE__},
# $SIG{__WARN__} and CORE::GLOBAL::die once, when it loads. %SIG before
# each run is what the script's own compile left, which includes the
# preload's. And the "will not stay shared" warnings of a script's named
# subs stay out of the log whatever warn hook a module installs, while
# every other compile-time message gets there, once.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for);

my %scripts = (
    # CGI::Carp with fatalsToBrowser: its page on die, its format on warn.
    'carp' => <<'EOF',
use CGI::Carp qw(fatalsToBrowser);
my $q = $ENV{QUERY_STRING};
sub shared { return "q=$q" }
warn "carp warns $q\n";
die "carp dies $q\n" if $q =~ /die/;
print "Content-Type: text/plain\n\n", shared(), " die=", ref($SIG{__DIE__}),
    " warn=", ref($SIG{__WARN__}), " usr1=", ($SIG{USR1} // 'none'), "\n";
EOF
    # A script that loads nothing: no hook of CGI::Carp's, a plain die.
    'plain' => <<'EOF',
my $q = $ENV{QUERY_STRING};
warn "plain warns $q\n";
if ($q =~ /die/) {
    print "Content-Type: text/plain\n\nbefore\n";
    die "plain dies $q\n";
}
print "Content-Type: text/plain\n\ndie=", ($SIG{__DIE__} // 'none'), " warn=",
    ($SIG{__WARN__} // 'none'), " term=", ($SIG{TERM} // 'none'), " usr1=",
    ($SIG{USR1} // 'none'), "\n";
EOF
    # Its own compile sets a handler: there in each of its runs.
    'own' => <<'EOF',
BEGIN { $SIG{TERM} = 'IGNORE' }
$SIG{HUP} = 'IGNORE';
print "Content-Type: text/plain\n\nterm=", ($SIG{TERM} // 'none'), " hup=",
    ($SIG{HUP} // 'none'), "\n";
EOF
    # Named subs over file lexicals, compiled after CGI::Carp replaced the
    # warn hook: "will not stay shared" is filtered; a module's own such
    # warning, and the script's other compile-time warnings, are not.
    'closures' => <<'EOF',
use strict;
use warnings;
use CGI::Carp;
use lib '.';
use Nested;
my $first = $ENV{QUERY_STRING};
my @list = ($first);
sub show { return "$first @list" }
BEGIN { print STDERR "begin block says hello\n" }
my $masked = 1;
my $masked = 2;
print "Content-Type: text/plain\n\n", show(), "\n";
EOF
);

my %files = ('Nested.pm' => <<'EOF');
package Nested;
use warnings;
sub outer { my $y = shift; sub inner { return $y } return inner() }
1;
EOF
for my $name (keys %scripts) {
    $files{"$name.pl"} = $files{"$name.plx"} = $scripts{$name};
}
$files{'startup.pl'} = "\$SIG{USR1} = 'IGNORE';\n1;\n";

my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { perl => { workers => 1, preload => 'root/startup.pl' } },
);
my $root = $s->root;

# --- two scripts in one worker, alternating: each keeps its behaviour ---
my $ok_carp = my $ok_plain = my $ok_die = my $ok_plain_die = 0;
my $rounds = 20;
for my $i (1 .. $rounds) {
    my $c = $s->get("/carp.plx?$i");
    $ok_carp++ if $c->{content} eq "q=$i die=CODE warn=CODE usr1=IGNORE\n";
    my $p = $s->get("/plain.plx?$i");
    $ok_plain++ if $p->{content} eq "die=none warn=none term=none usr1=IGNORE\n";
    my $cd = $s->get("/carp.plx?die$i");
    $ok_die++ if $cd->{status} == 500 && $cd->{content} =~ m{<h1>Software error:</h1>\s*<pre>carp dies die$i\n};
    my $pd = $s->get("/plain.plx?die$i");
    $ok_plain_die++ if $pd->{status} == 200 && $pd->{content} eq "before\n";
}
is($ok_carp, $rounds, "CGI::Carp's hooks in each of its requests (and the preload's \$SIG{USR1})");
is($ok_plain, $rounds, 'none of them in the other script');
is($ok_die, $rounds, "CGI::Carp's page for each die");
is($ok_plain_die, $rounds, 'a plain die in the other script, even compiled after CGI::Carp loaded');

# The same answers as .pl (which has no preload file).
for my $q ('7', 'die7') {
    for my $name ('carp', 'plain', 'own') {
        my $pl = $s->get("/$name.pl?$q");
        my $plx = $s->get("/$name.plx?$q");
        s/ usr1=\S+// for $pl->{content}, $plx->{content};
        is($plx->{status}, $pl->{status}, "$name?$q: same status as .pl");
        is($plx->{content}, $pl->{content}, "$name?$q: same body as .pl");
    }
}

# The warn hook's format in the log, each time.
my $log = sub { $s->error_log };
my $count = sub { my ($re) = @_; my @m = $log->() =~ /$re/g; scalar @m };
ok(wait_for(sub { $count->(qr/carp\.plx: \[[^\]]+\] carp\.plx: carp warns \d+$/m) == $rounds + 1 }),
    "CGI::Carp's warn format for every warning of its script")
    or diag($count->(qr/carp\.plx: \[[^\]]+\] carp\.plx: carp warns \d+$/m));
ok(wait_for(sub { $count->(qr/plain\.plx: plain warns \d+$/m) == $rounds + 1 }),
    'the plain format for the other script');

# Its own compile's handlers, in each run; gone for the others.
is($s->get('/own.plx')->{content}, "term=IGNORE hup=IGNORE\n", 'its own handlers') for 1 .. 2;
is($s->get('/plain.plx?x')->{content}, "die=none warn=none term=none usr1=IGNORE\n",
    'not in the next script');
is($s->get('/own.plx')->{content}, "term=IGNORE hup=IGNORE\n", 'and back in its own');

# --- the "will not stay shared" filter ---
is($s->get('/closures.plx?one')->{content}, "one one\n", 'named subs see the first run');
is($s->get('/closures.plx?two')->{content}, "two two\n", 'and the next run');
my $file = "$root/closures.plx";
ok(wait_for(sub { $log->() =~ /closures\.plx: begin block says hello$/m }), 'a BEGIN block\'s stderr is logged');
ok(wait_for(sub { $log->() =~ /"my" variable \$masked masks earlier declaration in same scope at \Q$file\E line 11/ }),
    'a compile-time warning of the script is logged');
ok(wait_for(sub { $log->() =~ /Variable "\$y" will not stay shared at (\Q$root\E\/)?Nested\.pm line 3/ }),
    "a module's own \"will not stay shared\" is true, and logged");
unlike($log->(), qr/will not stay shared at \Q$root\E\/closures\.plx/,
    "the script's own are not, though CGI::Carp replaced the warn hook");
is($count->(qr/closures\.plx: begin block says hello$/m), 1, 'what the compile printed, once');

done_testing;
