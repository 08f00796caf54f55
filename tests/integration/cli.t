# The command line: --version, --help (every key, from the same tables the
# parser uses), unknown options.
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

($status, $out, $err) = run_plxd('--bogus');
is($status >> 8, 1, 'an unknown option exits 1');
like($err, qr/usage: plxd/, 'and prints usage');

($status, $out, $err) = run_plxd('extra');
is($status >> 8, 1, 'a stray argument exits 1');

done_testing;
