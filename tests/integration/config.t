# Configuration mistakes stop plxd and name file, line and key; --check
# validates without serving; a known handler's section is checked even when
# no extension maps to it.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use PlxdTest qw(run_plxd write_file source_dir);

my $dir = tempdir(CLEANUP => 1);
mkdir "$dir/root";

sub check_conf {
    my ($text) = @_;
    write_file("$dir/plxd.conf", $text);
    return run_plxd('--check', '--config', "$dir/plxd.conf");
}

my ($status, $out, $err) = check_conf("[server]\nroot = root\nlisten = 127.0.0.1:0\n");
is($status, 0, '--check passes a valid file');
like($out, qr/configuration OK/, '--check says so');

($status, $out, $err) = run_plxd('--check', '--config', source_dir() . '/conf/plxd.conf');
is($status, 0, 'the shipped conf/plxd.conf is valid') or diag($err);

my @cases = (
    [ "[server]\nroot = root\nbogus = 1\n", 3, qr/\[server\] bogus: unknown key/, 'unknown key' ],
    [ "[server]\nroot = root\n[nope]\nx = 1\n", 3, qr/\[nope\]: unknown section/, 'unknown section' ],
    [ "[server]\nroot = root\nmax_body = lots\n", 3, qr/\[server\] max_body: 'lots' is not a size/, 'bad value' ],
    [ "[server]\nroot = root\nmax_body = 1K\nmax_body = 2K\n", 4, qr/max_body: duplicate key \(first set on line 3\)/, 'duplicate key' ],
    [ "[server]\nroot = root\n  max_body = 1K\n", 3, qr/indented line/, 'indented continuation line' ],
    [ "[server]\nroot = root\nlisten = localhost\n", 3, qr/\[server\] listen: expected ADDRESS:PORT/, 'bad listen' ],
    [ "[server]\nroot = root\n[echo]\nbogus = 1\n", 4, qr/\[echo\] bogus: unknown key/, 'unmapped handler section validated' ],
    [ "[server]\nroot = root\n[echo]\nmax_sleep = forever\n", 4, qr/\[echo\] max_sleep: 'forever' is not a duration/, 'unmapped handler value validated' ],
    [ "[server]\nroot = root\n[handlers]\n.x = nosuch\n", 4, qr/\[handlers\] \.x: no handler called 'nosuch'/, 'unknown handler' ],
    [ "[server]\nroot = root\n[echo]\nload = /nonexistent/echo.so\n", 0, qr/cannot load handler module \/nonexistent\/echo\.so/, 'bad load path' ],
    [ "[server]\nroot = root\ntrusted_proxies = 10.0.0.0/8 127.0.0.0/33\n", 3,
      qr/\[server\] trusted_proxies: '127\.0\.0\.0\/33': the prefix length must be 32 at most/, 'bad trusted_proxies range' ],
    [ "[server]\nroot = root\ntrusted_proxies = 10.0.0.1/8\n", 3,
      qr/\[server\] trusted_proxies: '10\.0\.0\.1\/8': the address has bits set past its \/8 prefix/, 'trusted_proxies range with host bits' ],
    [ "[server]\nroot = root\ntrusted_proxies = proxy.example\n", 3,
      qr/\[server\] trusted_proxies: 'proxy\.example' is not an IP address/, 'trusted_proxies host name' ],
    [ "[server]\nroot = root\n[handlers]\n.pl = cgi\n[cgi]\nmax_header_size = 8K\nmax_script_header_size = 8K\n", 7,
      qr/\[cgi\] max_script_header_size: duplicate key \(first set on line 6 as max_header_size; max_header_size is the old name of max_script_header_size\)/,
      'an old key name and its new one both set' ],
);
for my $c (@cases) {
    my ($text, $line, $re, $name) = @$c;
    ($status, $out, $err) = check_conf($text);
    is($status >> 8, 1, "$name: --check exits 1");
    like($err, $re, "$name: says what is wrong");
    like($err, qr/\Q$dir\E\/plxd\.conf:$line:/, "$name: names file and line $line") if $line;
    # The same file refuses to start.
    my ($st2, undef, $err2) = run_plxd('--config', "$dir/plxd.conf", '--listen', '127.0.0.1:0');
    isnt($st2, 0, "$name: plxd refuses to start");
    like($err2, qr/not starting/, "$name: and says so");
}

# A renamed key: [cgi] and [perl] max_header_size is max_script_header_size
# now. The old name still works, with one deprecation line naming file, line,
# old and new name: on --check's stderr, and in the error log of a plxd
# started (or reloaded) with it.
my $renamed = "[server]\nroot = root\n[handlers]\n.pl = cgi\n.plx = perl\n[cgi]\nmax_header_size = 8K\n"
    . "[perl]\nworkers = 1\nmax_header_size = 16K\n";
($status, $out, $err) = check_conf($renamed);
is($status, 0, 'an old key name passes --check');
my @deprecated = $err =~ /^(.*deprecated.*)$/mg;
is_deeply(\@deprecated, [
    "$dir/plxd.conf:7: [cgi] max_header_size is deprecated: it is now called max_script_header_size",
    "$dir/plxd.conf:10: [perl] max_header_size is deprecated: it is now called max_script_header_size",
], '... with one line for each use, naming file, line, old and new key');
($status, $out, $err) = check_conf($renamed =~ s/max_header_size/max_script_header_size/gr);
is($status, 0, 'the new name passes --check');
unlike($err, qr/deprecated/, '... without a warning');
my $s = PlxdTest->start(conf => $renamed =~ s{root = root}{root = root\nerror_log = error.log\nlog_level = info}r,
    files => { 'big.pl' => "print \"Content-Type: text/plain\\nX-Big: \", 'x' x 9000, \"\\n\\nbody\";\n" },
    handlers => {});
my @logged = $s->error_log =~ /^(.*deprecated.*)$/mg;
is(scalar @logged, 2, 'a plxd started with it logs the two lines once') or diag(join "\n", @logged);
like($logged[0] // '', qr/^\S+ \S+ \[warn\] .*plxd\.conf:9: \[cgi\] max_header_size is deprecated: it is now called max_script_header_size$/,
    '... as warnings, in the error log');
is($s->get('/big.pl')->{status}, 500, 'and the value set under the old name applies (a 9K header block is over 8K)');
$s->signal('HUP');
ok($s->wait_log(qr/configuration reloaded/), 'reloaded');
@logged = $s->error_log =~ /^(.*deprecated.*)$/mg;
is(scalar @logged, 4, 'a reload logs them again, once each');
$s->stop;

($status, $out, $err) = run_plxd('--check', '--config', "$dir/missing.conf");
is($status >> 8, 1, 'a missing file fails --check');
like($err, qr/\Q$dir\E\/missing\.conf: cannot open: No such file/, 'and is named');

($status, $out, $err) = check_conf("[server]\nroot = nowhere\n");
is($status >> 8, 1, 'a missing document root fails --check');
like($err, qr/root .*nowhere: No such file/, 'and is named');

($status, $out, $err) = run_plxd('--check', '--config', "$dir/plxd.conf", '--listen', 'bad');
like($err, qr/^--listen: expected ADDRESS:PORT/m, 'a bad --listen is named as such');

done_testing;
