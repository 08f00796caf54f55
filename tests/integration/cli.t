# The command line: --version, --help (every key, from the same tables the
# parser uses), unknown options; --help=markdown is doc/configuration.md as
# checked in, byte for byte, and --help=man8 and man5 are man pages.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(run_plxd source_dir read_file);

my ($status, $out, $err) = run_plxd('--version');
is($status, 0, '--version exits 0');
like($out, qr/^plxd \d+\.\d+\.\d+ \(\w+\)$/m, '--version prints version and revision');
like($out, qr/^handler interface [0-9a-f]{8}$/m, '... and the handler interface modules are built for');

($status, $out, $err) = run_plxd('--help');
is($status, 0, '--help exits 0');
like($out, qr/--config FILE.*--listen ADDR:PORT.*--root DIR.*--check/s, '--help lists the options');

# Every [server] key in the reference configuration is in --help and every
# key --help lists for [server] is in the reference configuration.
my $conf = read_file(source_dir() . '/conf/plxd.conf');
for my $section (qw(server static)) {
    my ($section_conf) = $conf =~ /^\[$section\]\n(.*?)(?=^\[|\z)/ms;
    my %in_conf = map { /^;?\s*(\w+)\s*=/ ? ($1 => 1) : () } split /\n/, $section_conf // '';
    my ($section_help) = $out =~ /^\[$section\]\n(.*?)(?=^\[|\z)/ms;
    my %in_help = map { /^  (\w+)\s/ ? ($1 => 1) : () } split /\n/, $section_help // '';
    ok(keys %in_help >= ($section eq 'server' ? 10 : 3), "help lists the [$section] keys");
    is_deeply([sort keys %in_conf], [sort keys %in_help],
        "conf/plxd.conf documents exactly the [$section] keys --help lists");
}
like($out, qr/^\[static\]\n(?:.*\n)*?  deny\s+list\s.*\.well-known/m, '[static] deny, with its default');
like($out, qr/^\[echo\]\n  greeting .*\n.*\n  max_sleep/m, 'module handler keys are listed (echo)');
like($out, qr/^  load\s+path/m, 'the load key is listed for modules');
my ($static_help) = $out =~ /^\[static\]\n(.*?)(?=^\[|\z)/ms;
unlike($static_help // '', qr/^  load\s/m, 'but not for the built-in static handler');
like($out, qr/changes need a restart/, 'keys that need a restart say so');
like($out, qr/^  trusted_proxies\s+addresses\s+default: \(empty\)\n.*CIDR ranges \(10\.0\.0\.0\/8, fd00::\/8\)/m,
    'trusted_proxies: a list of addresses and CIDR ranges');
for my $section (qw(cgi perl)) {
    my ($help) = $out =~ /^\[$section\]\n(.*?)(?=^\[|\z)/ms;
    like($help // '', qr/^  max_script_header_size\s+size\s+default: 64K/m, "[$section] max_script_header_size");
    like($help // '', qr/^  max_header_size\s+alias\s+the old name of max_script_header_size \(deprecated\)$/m,
        "[$section] max_header_size, its old name, is listed as such");
}

like($out, qr/^  max_connections .*\n.*\n      at the limit: a connection opened beyond it gets 503/m,
    'a limit says what happens at it');

# doc/configuration.md is what the binary prints: every section, the
# handlers' included, with the tables' help, limits and tests. A change to a
# key table without the page (or the page without the table) fails here.
($status, $out, $err) = run_plxd('--help=markdown');
is($status, 0, '--help=markdown exits 0');
my $page = read_file(source_dir() . '/doc/configuration.md');
my @want = split /\n/, $page, -1;
my @got = split /\n/, $out, -1;
my ($first) = grep { ($want[$_] // "\0") ne ($got[$_] // "\0") } 0 .. ($#want > $#got ? $#want : $#got);
ok(!defined $first, 'doc/configuration.md is what plxd --help=markdown prints')
    or diag("first difference at line " . ($first + 1) . ":\n  doc/configuration.md: "
        . ($want[$first] // '(end of file)') . "\n  plxd --help=markdown: "
        . ($got[$first] // '(end of output)')
        . "\nregenerate it: build/plxd --help=markdown > doc/configuration.md");
for my $section (qw(server request handlers static cgi perl echo)) {
    like($out, qr/^## `\[$section\]`$/m, "the page has [$section]");
}
# Every key row names what checks it (tests/doc_claims resolves the paths).
my @rows = grep { /^\| `[a-z_]+` \|/ } split /\n/, $out;
ok(@rows > 50, 'the page has a row per key');
is_deeply([grep { !/\| [^|]*(?:\.\.\/tests\/|code: )[^|]* \|$/ } @rows], [], 'every row names a test or the code');

for my $page ([ man8 => qr/^\.TH PLXD 8 /m, qr/^\.SH OPTIONS$/m ],
        [ man5 => qr/^\.TH PLXD\.CONF 5 /m, qr/^\.SS \[perl\]$/m ]) {
    my ($format, @like) = @$page;
    ($status, $out, $err) = run_plxd("--help=$format");
    is($status, 0, "--help=$format exits 0");
    like($out, $_, "--help=$format is a man page") for @like;
    unlike($out, qr/[^\x00-\x7f]/, "--help=$format is ASCII, as groff reads it");
}
($status, $out, $err) = run_plxd('--help=html');
is($status >> 8, 1, 'an unknown --help format exits 1');
like($err, qr/expected text, markdown, man8 or man5/, 'and names the formats');

($status, $out, $err) = run_plxd('--bogus');
is($status >> 8, 1, 'an unknown option exits 1');
like($err, qr/usage: plxd/, 'and prints usage');

($status, $out, $err) = run_plxd('extra');
is($status >> 8, 1, 'a stray argument exits 1');

done_testing;
