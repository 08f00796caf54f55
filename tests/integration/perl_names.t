# Script names as package names: every name plxd routes to the perl handler
# compiles as .plx as it runs as .pl (CGI), whatever its length or bytes: a
# 250-byte and a NAME_MAX name, a package name at perl's limit and one byte
# past it, a PATH_MAX-deep path, UTF-8, spaces, '-', '::', "'", digits
# first, bytes that are no UTF-8; two paths alike once escaped and cut get
# packages of their own, and each script is compiled once.
use strict;
use warnings;
use Cwd qw(getcwd);
use Test::More;
use PlxdTest qw(write_file);

use constant PACKAGE_MAX => 252;    # PERL_SOURCE_PACKAGE_MAX: perl's limit
use constant PATH_MAX    => 4096;   # with its NUL

# Prints its package in a header, for the test; the body is the same both
# ways: its own name through a named sub (of two scripts sharing a package,
# the one compiled last would answer for both) and its SCRIPT_NAME.
sub script {
    my ($id) = @_;
    return <<EOF;
sub me { '$id' }
print "Content-Type: text/plain\\nX-Pkg: ", __PACKAGE__, "\\n\\n";
print me(), " ", \$ENV{SCRIPT_NAME} =~ s{\\.plx?\\z}{}r, "\\n";
EOF
}

# The package plxd's readable mapping gives an absolute path.
sub readable {
    my ($path) = @_;
    return join '::', 'PLXD::Script',
        map { s/([^A-Za-z0-9])/sprintf '_%02x', ord $1/ger } grep { length } split m{/}, $path;
}

sub url_of { my ($rel) = @_; return '/' . ($rel =~ s{([^A-Za-z0-9/._~-])}{sprintf '%%%02X', ord $1}ger) }

my $s = PlxdTest->start(
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { perl => { workers => 1, timing => 'on' } },
);
my $root = $s->root;

# Relative path (without extension) => what it is.
my @names = (
    ['n' x 246,                      '250-byte name as .plx'],
    ['m' x 251,                      'NAME_MAX (255-byte) name as .plx'],
    ["caf\xc3\xa9",                  'UTF-8 (é)'],
    ["\xe6\x97\xa5\xe6\x9c\xac",     'UTF-8 (日本)'],
    ['with space',                   'a space'],
    ['a-b',                          "'-'"],
    ['a::b',                         "'::'"],
    ["it's",                         q{"'"}],
    ['9lives',                       'digits first'],
    ['0',                            'a digit alone'],
    ["\xff\xfe",                     'bytes that are no UTF-8'],
    ["half\xc3",                     'a cut UTF-8 character'],
    ["dir 1/caf\xc3\xa9-\xe6\x97\xa5 'x'::9", 'all of them, in a folder'],
);

# A package name at perl's limit, and one byte past it.
my $fixed = length readable("$root/.plx");
my $at = PACKAGE_MAX - $fixed;
die "the test folder's name is too long for this test ($root)\n" if $at < 2;
push @names, ['p' x $at, 'package name at the limit'], ['p' x ($at + 1), 'package name one byte past'];

# Two paths alike once escaped and cut: a long folder of 'é', then x or y.
my $alike = join '/', ("\xc3\xa9" x 60) x 3;
push @names, ["$alike/x", 'alike once cut (x)'], ["$alike/y", 'alike once cut (y)'];

# PATH_MAX deep: folders of 200 bytes, the .plx at exactly PATH_MAX - 1
# bytes (the .pl beside it one shorter).
my $deep = '';
$deep .= ('d' x 199) . '/' while length("$root/$deep") + 200 + 16 < PATH_MAX;
my $deep_name = $deep . ('f' x (PATH_MAX - 1 - length("$root/$deep") - length('.plx')));
push @names, [$deep_name, 'PATH_MAX deep'];
is(length("$root/$deep_name.plx"), PATH_MAX - 1, 'the deep path is PATH_MAX - 1 bytes');

for my $i (0 .. $#names) {
    write_file("$root/$names[$i][0]$_", script("id$i")) for '.pl', '.plx';
}

my (%pkg, %who);
for my $round (1, 2) {
    for my $i (0 .. $#names) {
        my ($rel, $what) = @{ $names[$i] };
        my $cgi = $s->get(url_of("$rel.pl"));
        my $plx = $s->get(url_of("$rel.plx"));
        is($cgi->{status}, 200, "$what: 200 as .pl") if $round == 1;
        is($plx->{status}, 200, "$what: 200 as .plx (round $round)");
        is($plx->{content}, $cgi->{content}, "$what: the same body both ways (round $round)");
        like($plx->{content}, qr/^id$i /, "$what: its own code (round $round)");
        my $p = $plx->{headers}{'x-pkg'} // '';
        if ($round == 1) {
            like($plx->{headers}{'x-plxd-perl'} // '', qr/^compiled/, "$what: compiled");
            ok(length($p) && length($p) <= PACKAGE_MAX, "$what: package of " . length($p) . ' bytes');
            ok(!$who{$p}, "$what: a package of its own") or diag "shared with $who{$p}";
            $pkg{$i} = $p;
            $who{$p} = $what;
        } else {
            like($plx->{headers}{'x-plxd-perl'} // '', qr/^reused/, "$what: reused, not compiled again");
            is($p, $pkg{$i}, "$what: the same package");
        }
    }
}

my ($i_at) = grep { $names[$_][1] eq 'package name at the limit' } 0 .. $#names;
is($pkg{$i_at}, readable("$root/$names[$i_at][0].plx"), 'at the limit: the readable name');
is(length $pkg{$i_at}, PACKAGE_MAX, '... of exactly the limit');
like($pkg{ $i_at + 1 }, qr/^PLXD::Script::\w+(::\w+)*_h[0-9a-f]{16}\z/, 'one byte past: cut, with a hash');
is(length $pkg{ $i_at + 1 }, PACKAGE_MAX, '... as long as the limit allows');

# One byte past PATH_MAX: the path cannot be opened (it is made from the
# folder's inside). Whatever plxd answers, it answers the same both ways.
{
    my $cwd = getcwd();
    chdir "$root/$deep" or die "chdir: $!";
    my $base = 'g' x (PATH_MAX - length("$root/$deep") - length('.plx'));
    for my $ext ('.plx', '.pl') {
        open my $fh, '>', "$base$ext" or die "$base$ext: $!";
        print $fh script('past');
        close $fh;
    }
    chdir $cwd or die "chdir: $!";
    is(length("$root/$deep$base.plx"), PATH_MAX, 'the path one past is PATH_MAX bytes');
    my $cgi = $s->get(url_of("$deep$base.pl"));
    my $plx = $s->get(url_of("$deep$base.plx"));
    is($plx->{status}, $cgi->{status}, "PATH_MAX bytes: the same status both ways ($cgi->{status})");
}

# A script's folder is its working directory, whatever the folder's length:
# one of PATH_MAX - 1 bytes (chdir takes it whole) and one of PATH_MAX
# bytes (chdir refuses it, ENAMETOOLONG). Each holds a file the script finds
# by its relative name only from there. (Only as .plx: under CGI, perl
# itself cannot open a script whose path is that long.)
{
    my $cwd = getcwd();
    chdir "$root/$deep" or die "chdir: $!";
    for my $len (PATH_MAX - 1, PATH_MAX) {
        my $folder = 'e' x ($len - length("$root/$deep"));
        mkdir $folder or die "mkdir: $!";
        open my $fh, '>', "$folder/here" or die "here: $!";
        print $fh "in $len\n";
        close $fh;
        open $fh, '>', "$folder/cwd.plx" or die "cwd.plx: $!";
        print $fh qq{print "Content-Type: text/plain\\n\\n";\n}
            . qq{my \$h;\n}
            . qq{print open(\$h, '<', 'here') ? scalar <\$h> : "elsewhere: \$!\\n";\n};
        close $fh;
    }
    chdir $cwd or die "chdir: $!";
    for my $len (PATH_MAX - 1, PATH_MAX) {
        my $folder = $deep . ('e' x ($len - length("$root/$deep")));
        is(length("$root/$folder"), $len, "a folder of $len bytes");
        # A request in another folder first, so that a script left where
        # the one before ran would not be in this folder by chance.
        is($s->get(url_of("$names[0][0].plx"))->{status}, 200, '... (a request elsewhere)');
        my $res = $s->get(url_of("$folder/cwd.plx"));
        is("$res->{status} $res->{content}", "200 in $len\n", '... is its .plx script\'s working directory');
    }
}

unlike($s->error_log, qr/Identifier too long|\[error\]|cannot change/, 'no compile error in the log');

done_testing;
