# What modules install in %SIG (and as overrides of builtins) when a script
# loads them belongs to that script, in every one of its requests, and to
# no other script of the worker: CGI::Carp sets $SIG{__DIE__},
# $SIG{__WARN__} and CORE::GLOBAL::die once, when it loads. %SIG before
# each run is what the script's own compile left, which includes the
# preload's. And the "will not stay shared" warnings of a script's named
# subs stay out of the log whatever warn hook a module installs, while
# every other compile-time message gets there, once.
#
# What a module does as it loads happens once per worker, for the script
# that loaded it first (doc/perl.md: "What still differs"): a second script
# using CGI::Carp in that worker gets no warn hook and no die override of
# CGI::Carp's. CGI::Carp's settings (fatalsToBrowser, set_message) are
# each script's own: one script's set_message text or handler, or its
# fatalsToBrowser, never reaches another's die. A fresh plxd shows
# both, with the "will not stay shared" script as the one that loads
# CGI::Carp (in the first plxd another script loaded it before). A third
# loads CGI::Carp in the preload file: its hooks are then every script's.
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
    # warn hook as it loaded: "will not stay shared" is filtered; a
    # module's own such warning, and the script's other compile-time
    # warnings, are not.
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
die "closures dies\n" if $first eq 'die';
EOF
    # CGI::Carp's set_message at run time, with a text or a handler: its
    # own die's page, and no other script's.
    'msg_text' => <<'EOF',
use CGI::Carp qw(fatalsToBrowser set_message);
set_message("msg_text's own text");
die "msg_text dies\n" if $ENV{QUERY_STRING} eq 'die';
print "Content-Type: text/plain\n\nset\n";
EOF
    'msg_code' => <<'EOF',
use CGI::Carp qw(fatalsToBrowser set_message);
set_message(sub { print "<p>msg_code's handler: $_[0]</p>" });
die "msg_code dies\n" if $ENV{QUERY_STRING} eq 'die';
print "Content-Type: text/plain\n\nset\n";
EOF
    'msg_none' => <<'EOF',
use CGI::Carp qw(fatalsToBrowser);
die "msg_none dies\n";
EOF
    # CGI::Carp in a script compiled after another one loaded it.
    'late' => <<'EOF',
use CGI::Carp qw(fatalsToBrowser);
my $q = $ENV{QUERY_STRING};
warn "late warns $q\n";
die "late dies $q\n" if $q =~ /die/;
print "Content-Type: text/plain\n\nwarn=", ref($SIG{__WARN__}), " die=", ref($SIG{__DIE__}), "\n";
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

# set_message: each script's own die gets its own page, and one with none
# CGI::Carp's, as .pl, after the others set theirs.
my $default = $s->get('/msg_none.pl');
like($default->{content}, qr{<pre>msg_none dies\n</pre>.*For help, please send mail}s,
    "msg_none.pl: CGI::Carp's own page");
for my $i (1 .. 3) {
    is($s->get('/msg_text.plx')->{content}, "set\n", "msg_text.plx sets its text ($i)");
    my $none = $s->get('/msg_none.plx');
    is("$none->{status} $none->{content}", "$default->{status} $default->{content}",
        "then msg_none.plx's die gets CGI::Carp's own page, as .pl ($i)");
    is($s->get('/msg_code.plx')->{content}, "set\n", "msg_code.plx sets its handler ($i)");
    $none = $s->get('/msg_none.plx');
    is("$none->{status} $none->{content}", "$default->{status} $default->{content}",
        "then msg_none.plx's die runs no other script's handler ($i)");
    my $own = $s->get('/msg_text.plx?die');
    ok($own->{status} == 500 && $own->{content} =~ m{<pre>msg_text dies\n</pre>\s*<p>\s*msg_text's own text},
        "msg_text.plx's own die shows its own text ($i)") or diag($own->{content});
    $own = $s->get('/msg_code.plx?die');
    is("$own->{status} $own->{content}", "200 <p>msg_code's handler: msg_code dies\n</p>",
        "msg_code.plx's own die runs its own handler ($i)");
}

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

$s->stop;

# --- a fresh worker: closures.plx loads CGI::Carp first ---
my $t = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { perl => { workers => 1 } },
);
$root = $t->root;
$log = sub { $t->error_log };

# The "will not stay shared" filter, with CGI::Carp's warn hook installed
# in the middle of the script's compile.
is($t->get('/closures.plx?one')->{content}, "one one\n", 'named subs see the first run');
is($t->get('/closures.plx?two')->{content}, "two two\n", 'and the next run');
my $file = "$root/closures.plx";
ok(wait_for(sub { $log->() =~ /closures\.plx: begin block says hello$/m }), 'a BEGIN block\'s stderr is logged');
ok(wait_for(sub { $log->() =~ /"my" variable \$masked masks earlier declaration in same scope at \Q$file\E line 11/ }),
    'a compile-time warning of the script is logged');
ok(wait_for(sub { $log->() =~ /Variable "\$y" will not stay shared at (\Q$root\E\/)?Nested\.pm line 3/ }),
    "a module's own \"will not stay shared\" is true, and logged");
like($log->(), qr/closures\.plx: \[[^\]]+\] closures\.plx: "my" variable \$masked masks/,
    "CGI::Carp's warn hook was in place during the compile, as it loaded");
unlike($log->(), qr/will not stay shared at \Q$root\E\/closures\.plx/,
    "the script's own are not, though CGI::Carp replaced the warn hook");
is($count->(qr/closures\.plx: begin block says hello$/m), 1, 'what the compile printed, once');

# Its die, with CGI::Carp but no fatalsToBrowser: what it printed, and
# the message in the log, as .pl.
for my $ext ('pl', 'plx') {
    my $r = $t->get("/closures.$ext?die");
    is("$r->{status} $r->{content}", "200 die die\n", "closures.$ext?die: what it printed");
}

# A second script with CGI::Carp in the worker: CGI::Carp's code that runs
# as it loads ran for closures.plx, so late.plx gets fatalsToBrowser's die
# hook (set by the import) but no warn hook, and no CGI::Carp die override;
# as .pl it gets all of them.
is($t->get('/late.pl?1')->{content}, "warn=CODE die=CODE\n", 'late.pl: both hooks');
is($t->get('/late.plx?1')->{content}, "warn= die=CODE\n", 'late.plx: the die hook only');
is($t->get('/late.plx?2')->{content}, "warn= die=CODE\n", 'in each of its requests');
for my $ext ('pl', 'plx') {
    my $r = $t->get("/late.$ext?die");
    ok($r->{status} == 500 && $r->{content} =~ m{<h1>Software error:</h1>\s*<pre>late dies die\n},
        "late.$ext: fatalsToBrowser's page for a die");
}
ok(wait_for(sub { $log->() =~ /late\.pl: \[[^\]]+\] late\.pl: late warns 1$/m }),
    "late.pl's warning in CGI::Carp's format");
ok(wait_for(sub { $log->() =~ /late\.plx: late warns 2$/m }), "late.plx's in perl's own");
is($count->(qr/late\.plx: \[[^\]]+\] late\.plx: late warns \d$/m), 0, 'none of them through CGI::Carp');

# fatalsToBrowser is a setting of the module, which late.plx's import
# turned on: the setting is late.plx's own, so closures.plx's die still
# gives no page, as the same script's as .pl.
is($t->get('/closures.plx?die')->{content}, "die die\n",
    "closures.plx?die after late.plx: no page, late.plx's setting is its own");
is($t->get('/closures.pl?die')->{content}, "die die\n", 'closures.pl?die: none either');

$t->stop;

# --- CGI::Carp in the preload file: its hooks are every script's ---
$files{'carp_preload.pl'} = "use CGI::Carp;\n1;\n";
my $u = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { perl => { workers => 1, preload => 'root/carp_preload.pl' } },
);
like($u->get('/plain.plx?1')->{content}, qr/^die=none warn=CODE\(/,
    "with CGI::Carp preloaded, a script that does not use it gets its warn hook");
ok(wait_for(sub { $u->error_log =~ /plain\.plx: \[[^\]]+\] plain\.plx: plain warns 1$/m }),
    "and its warnings in CGI::Carp's format");
is($u->get('/late.plx?1')->{content}, "warn=CODE die=CODE\n", 'a script that uses it: both hooks');

done_testing;
