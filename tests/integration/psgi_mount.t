# [mount]: an application served for every path under a URL prefix, and
# plxd --app FILE, one application at / with no configuration file, as
# plackup FILE. Plack::Test::Suite runs against mounts in psgi_suite.t.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use PlxdTest qw(write_file read_file run_plxd wait_for);
use PlxdServer;

my $env_app = <<'EOF';
sub {
    my $env = shift;
    [200, ['Content-Type' => 'text/plain'],
        ["app=$env->{'psgix.app'} SCRIPT_NAME=$env->{SCRIPT_NAME} PATH_INFO=$env->{PATH_INFO}"]];
}
EOF
(my $outer = $env_app) =~ s/\$env->\{'psgix\.app'\}/outer/;
(my $inner = $env_app) =~ s/\$env->\{'psgix\.app'\}/inner/;
(my $root_app = $env_app) =~ s/\$env->\{'psgix\.app'\}/root/;

my $s = PlxdTest->start(
    files => {
        'apps/outer.psgi' => $outer,
        'apps/inner.psgi' => $inner,
        'hello.txt'       => "static\n",
        'm/file.txt'      => "under the prefix\n",
    },
    handlers => { '.psgi' => 'perl' },
    sections => { mount => { '/m' => 'root/apps/outer.psgi', '/m/deeper/still' => 'root/apps/inner.psgi' } },
);
is($s->get('/m/a//b')->{content}, 'app=outer SCRIPT_NAME=/m PATH_INFO=/a//b',
    'a path under a prefix: SCRIPT_NAME the prefix, PATH_INFO the rest');
is($s->get('/m')->{content}, 'app=outer SCRIPT_NAME=/m PATH_INFO=', 'the prefix itself: PATH_INFO empty');
is($s->get('/m/file.txt')->{content}, 'app=outer SCRIPT_NAME=/m PATH_INFO=/file.txt',
    'a file the root holds under the prefix is the app\'s');
is($s->get('/m/deeper/still/x')->{content}, 'app=inner SCRIPT_NAME=/m/deeper/still PATH_INFO=/x',
    'the longest prefix wins');
is($s->get('/m/deeper')->{content}, 'app=outer SCRIPT_NAME=/m PATH_INFO=/deeper', '... only under it');
is($s->get('/mx')->{status}, 404, 'a path that only starts like the prefix is not under it');
is($s->get('/hello.txt')->{content}, "static\n", 'other paths are the root\'s');
is($s->get('/m/%2e%2e/hello.txt')->{content}, "static\n", 'matched after decoding and normalising');
$s->stop;

my $t = PlxdTest->start(
    files    => { 'app.psgi' => $root_app, 'hello.txt' => "static\n" },
    handlers => { '.psgi' => 'perl' },
    sections => { mount => { '/' => 'root/app.psgi' } },
);
is($t->get('/')->{content}, 'app=root SCRIPT_NAME= PATH_INFO=/', 'mounted at /: SCRIPT_NAME empty, PATH_INFO /');
is($t->get('/hello.txt')->{content}, 'app=root SCRIPT_NAME= PATH_INFO=/hello.txt', '... every path is the app\'s');
$t->stop;

# Mistakes are start-up errors naming the line.
my $dir = tempdir('plxd-mount-XXXXXX', TMPDIR => 1, CLEANUP => 1);
write_file("$dir/app.psgi", $root_app);
write_file("$dir/page.txt", "text\n");
for my $case (['/a/', 'app.psgi', 'expected a URL prefix'], ['a', 'app.psgi', 'expected a URL prefix'],
    ['/a/../b', 'app.psgi', 'expected a URL prefix'], ['/a', 'missing.psgi', 'missing.psgi: No such file'],
    ['/a', 'page.txt', 'page.txt: no [handlers] line routes its extension']) {
    my ($prefix, $file, $why) = @$case;
    write_file("$dir/plxd.conf", "[server]\nroot = $dir\n[handlers]\n.psgi = perl\n[mount]\n$prefix = $file\n");
    my ($status, $out, $err) = run_plxd('--check', '--config', "$dir/plxd.conf");
    is($status >> 8, 1, "[mount] $prefix = $file: refused");
    like($err, qr/plxd\.conf:6: \[mount\] \Q$prefix\E.*\Q$why\E/, "... naming the line: $why");
}

# plxd --app FILE: no configuration file, the app at /, its folder the root.
my $srv = PlxdServer->start(
    name    => 'plxd',
    cmd     => [PlxdTest::plxd_bin(), '--app', "$dir/app.psgi", '--listen', '127.0.0.1:0'],
    stderr  => "$dir/stderr.log",
    timeout => 30,
);
my $res = PlxdTest::http()->get($srv->url . 'x/y?z=1');
is($res->{content}, 'app=root SCRIPT_NAME= PATH_INFO=/x/y', 'plxd --app FILE serves FILE at /');
$res = PlxdTest::http()->get($srv->url . 'page.txt');
is($res->{content}, 'app=root SCRIPT_NAME= PATH_INFO=/page.txt', '... for every path');
$srv->stop;
unlike(read_file("$dir/stderr.log"), qr/ERROR|\[error\]|\[crit\]/i, '... without an error');

done_testing;
