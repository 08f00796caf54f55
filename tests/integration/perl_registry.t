# The persistent Perl handler's script registry: one package per script
# without collisions, compile once and reuse, recompile on change, compile
# errors (file and line, not cached), __DATA__/__END__, BEGIN once, END per
# request, file-level lexicals seen by named subs, globals restored.
use strict;
use warnings;
use Test::More;
use IO::Select;
use PlxdTest qw(wait_for write_file);
use PlxdRaw qw(responses);

my $s = PlxdTest->start(
    files => {
        'a_b/c.plx' => <<'EOF',
our $who = 'a_b/c';
sub name { 'first' }
print "Content-Type: text/plain\n\n", __PACKAGE__, " $who ", name(), "\n";
EOF
        'a/b_c.plx' => <<'EOF',
our $who = 'a/b_c';
sub name { 'second' }
print "Content-Type: text/plain\n\n", __PACKAGE__, " $who ", name(), "\n";
EOF
        'data.plx' => <<'EOF',
print "Content-Type: text/plain\n\n";
print "line: $_" while <DATA>;
__DATA__
one
two
EOF
        'end.plx' => <<'EOF',
print "Content-Type: text/plain\n\n";
print "data: ", scalar(<DATA>);
__END__
after end
EOF
        'heredoc.plx' => <<'EOF',
print "Content-Type: text/plain\n\n";
print <<TEXT;
__END__ inside a here-doc
TEXT
print "still code\n";

=pod

__END__ inside POD

=cut

print "after pod\n";
EOF
        'phases.plx' => <<'EOF',
our ($begins, $runs);
BEGIN { $begins++ }
$runs++;
print "Content-Type: text/plain\n\n";
print "begins=$begins runs=$runs\n";
END { print "end block ran\n" }
EOF
        'closure.plx' => <<'EOF',
use strict;
use warnings;
my $q = $ENV{QUERY_STRING};
my @list = ($q, $q);
sub show { return "$q @list" }
sub outer { return inner() }
sub inner { return "inner:$q" }
print "Content-Type: text/plain\n\n", show(), " ", outer(), "\n";
END { print "end:$q\n" }
EOF
        'line.plx' => <<'EOF',
# Dies before any header.

die "at line three";
EOF
        'mess.plx' => <<'EOF',
$/ = undef; $\ = "!"; $, = "-"; $" = ":"; $| = 1;
select(STDERR);
$SIG{ALRM} = sub { print "alarm\n" };
$SIG{__WARN__} = sub { };
$0 = 'renamed';
@ARGV = ('x');
push @INC, '/nowhere';
binmode STDOUT, ':crlf';
print STDOUT "Content-Type: text/plain\n\n", "messy";
EOF
        'look.plx' => <<'EOF',
my @a = (1, 2);
print "Content-Type: text/plain\n\n";
print "rs=", (defined $/ && $/ eq "\n" ? 'nl' : 'other'),
    " ors=", (defined $\ ? 'set' : 'undef'),
    " ofs=", (defined $, ? 'set' : 'undef'),
    " list=@a af=$| sel=", select(),
    " alrm=", ($SIG{ALRM} // 'undef'), " warn=", ($SIG{__WARN__} // 'undef'),
    " zero=", ($0 =~ m{/look\.plx$} ? 'script' : $0),
    " argv=", scalar(@ARGV),
    " nowhere=", (scalar(grep { $_ eq '/nowhere' } @INC)),
    " layers=", join(',', PerlIO::get_layers(STDOUT)), "\n";
EOF
        'uselib.plx' => <<'EOF',
use lib 'lib';
use Mine;
print "Content-Type: text/plain\n\n", Mine::hi(), " ", (grep({ $_ eq 'lib' } @INC) ? 'lib in @INC' : 'no lib'), "\n";
require Later;
print Later::hi(), "\n";
EOF
        'lib/Mine.pm' => "package Mine; sub hi { 'mine' } 1;\n",
        'lib/Later.pm' => "package Later; sub hi { 'later' } 1;\n",
    },
    handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, timing => 'on' } },
);

# --- collision-free packages ---
my $first = $s->get('/a_b/c.plx')->{content};
my $second = $s->get('/a/b_c.plx')->{content};
like($first, qr/ a_b\/c first$/m, '/a_b/c.plx runs its own code');
like($second, qr/ a\/b_c second$/m, '/a/b_c.plx runs its own code');
my ($p1) = $first =~ /^(\S+)/;
my ($p2) = $second =~ /^(\S+)/;
isnt($p1, $p2, "different packages ($p1, $p2)");
is($s->get('/a_b/c.plx')->{content}, $first, 'the first one is still itself');

# --- compiled once, then reused ---
my $r1 = $s->get('/a_b/c.plx');
like($r1->{headers}{'x-plxd-perl'}, qr/^reused/, 'the second request reuses the compiled script');

# --- the timing header when the headers go out first ---
# A script that flushes its headers, then waits for a file the test makes
# once the headers are in: they cannot have waited for its end.
{
    my $gate = $s->dir . '/flush.go';
    write_file($s->root . '/flush.plx', "\$| = 1;\nprint \"Content-Type: text/plain\\n\\n\";\n"
        . "select(undef, undef, undef, 0.02) until -e '$gate';\nprint \"done\\n\";\n");
    for my $round ('compiled', 'reused') {
        unlink $gate;
        my $sock = $s->connect;
        $sock->syswrite("GET /flush.plx HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        my $head = '';
        my $sel = IO::Select->new($sock);
        while ($head !~ /\r\n\r\n/ && $sel->can_read(30)) {
            last unless sysread($sock, my $b, 4096);
            $head .= $b;
        }
        my ($value) = $head =~ /^X-Plxd-Perl: (.*?)\r$/mi;
        my $want = $round eq 'compiled' ? qr/^compiled; compile=\d+us; run=\d+us; partial$/
                                         : qr/^reused; run=\d+us; partial$/;
        like($value // '', $want, "headers flushed early ($round): what is known then, marked partial");
        write_file($gate, '');
        my $rest = $head;
        while ($sel->can_read(30)) { last unless sysread($sock, my $b, 4096); $rest .= $b }
        like($rest, qr/done\n/, '... and the body follows when the script ends');
        my @r = responses($rest);
        ok(@r == 1 && $r[0]{body} =~ /done\n/, '... one response, framed exactly');
    }
}

# --- edit and reload ---
my $edit = $s->root . '/edit.plx';
write_file($edit, "print \"Content-Type: text/plain\\n\\nversion one\\n\";\n");
is($s->get('/edit.plx')->{content}, "version one\n", 'first version');
like($s->get('/edit.plx')->{headers}{'x-plxd-perl'}, qr/^reused/, 'reused');
# Same size, new content, a different mtime: recompiled.
write_file($edit, "print \"Content-Type: text/plain\\n\\nversion two\\n\";\n");
utime(time + 5, time + 5, $edit);
my $r2 = $s->get('/edit.plx');
is($r2->{content}, "version two\n", 'the edited script is recompiled on its next request');
like($r2->{headers}{'x-plxd-perl'}, qr/^compiled/, 'compiled again');
# Replaced by another file (a new inode), same mtime.
my $mtime = (stat $edit)[9];
write_file("$edit.new", "print \"Content-Type: text/plain\\n\\nversion three\\n\";\n");
utime($mtime, $mtime, "$edit.new");
rename "$edit.new", $edit;
is($s->get('/edit.plx')->{content}, "version three\n", 'a new inode is noticed');

# --- compile errors: 500, file and line, not cached ---
write_file($edit, "print \"Content-Type: text/plain\\n\\n\";\nmy \$x = ;\n");
utime(time + 10, time + 10, $edit);
is($s->get('/edit.plx')->{status}, 500, 'a syntax error is a 500');
ok($s->wait_log(qr/syntax error at \Q$edit\E line 2/), 'the log names the file and line');
is($s->get('/edit.plx')->{status}, 500, 'still 500: the error is not cached as success');
write_file($edit, "print \"Content-Type: text/plain\\n\\nfixed\\n\";\n");
utime(time + 15, time + 15, $edit);
is($s->get('/edit.plx')->{content}, "fixed\n", 'the next request after the fix works');

is($s->get('/line.plx')->{status}, 500, 'die is a 500');
my $line = $s->root . '/line.plx';
ok($s->wait_log(qr/at line three at \Q$line\E line 3\./), 'die names the real file and line');

# --- __DATA__ and __END__ ---
is($s->get('/data.plx')->{content}, "line: one\nline: two\n", '__DATA__ is readable');
is($s->get('/data.plx')->{content}, "line: one\nline: two\n", 'from the start each time');
is($s->get('/end.plx')->{content}, "data: after end\n", 'DATA after __END__');
is($s->get('/heredoc.plx')->{content}, "__END__ inside a here-doc\nstill code\nafter pod\n",
    '__END__ in a here-doc or POD does not end the code');

# --- BEGIN once per compile, END per request ---
is($s->get('/phases.plx')->{content}, "begins=1 runs=1\nend block ran\n", 'first run');
is($s->get('/phases.plx')->{content}, "begins=1 runs=2\nend block ran\n",
    'BEGIN ran once, END again, globals persist');

# --- file-level lexicals in named subs (mod_perl's "will not stay shared") ---
is($s->get('/closure.plx?first')->{content}, "first first first inner:first\nend:first\n",
    'named subs see the file lexicals');
is($s->get('/closure.plx?second')->{content}, "second second second inner:second\nend:second\n",
    'the next request\'s values, not the first one\'s');
is($s->get('/closure.plx?third')->{content}, "third third third inner:third\nend:third\n", 'and so on');
unlike($s->error_log, qr/will not stay shared/, 'no closure warning');

# --- globals a script changes are restored ---
like($s->get('/mess.plx')->{content}, qr/messy/, 'a messy script runs');
is($s->get('/look.plx')->{content},
    "rs=nl ors=undef ofs=undef list=1 2 af=0 sel=main::STDOUT alrm=undef warn=undef "
    . "zero=script argv=0 nowhere=0 layers=unix,perlio\n",
    '$/, $\\, $,, $", $|, select, %SIG, $0, @ARGV, @INC and layers are back');

# --- use lib and a later require, as under CGI ---
is($s->get('/uselib.plx')->{content}, "mine lib in \@INC\nlater\n", 'use lib at compile time');
is($s->get('/uselib.plx')->{content}, "mine lib in \@INC\nlater\n", 'and its @INC on later runs');
like($s->get('/look.plx')->{content}, qr/nowhere=0/, 'other scripts do not get it');

done_testing;
