# plackup -s Plxd, with the build tree's Plack::Handler::Plxd
# (BUILD/modules/perl5, whose copy names the build's plxd): plackup becomes
# plxd (exec), serves the file it was given at / in plxd's interpreters, maps
# Starman's options and plxd's own onto plxd's configuration, refuses what it
# cannot do with a message naming the option, and leaves nothing behind once
# plxd stops: no process, no temporary folder, no PID file.
use strict;
use warnings;
use Test::More;
use Cwd ();
use File::Path qw(make_path);
use File::Temp qw(tempdir);
use HTTP::Tiny;
use PlxdServer;
use PlxdTest qw(wait_for build_dir write_file read_file);

my $tmp = tempdir('plxd-plackup-t-XXXXXX', TMPDIR => 1, CLEANUP => 1);
# plackup's own temporary folder: empty again once plxd has stopped.
my $tmpdir = "$tmp/tmp";
my $site = "$tmp/site";
make_path($tmpdir, "$site/lib", "$site/data");
write_file("$site/data/note.txt", "from the folder plackup ran in\n");
write_file("$site/lib/PlackupGreeting.pm", "package PlackupGreeting; sub text { 'greeting' } 1;\n");
# One app that reports what a test asks of it.
write_file("$site/app.psgi", <<'APP');
use Cwd ();
my $loaded_in = Cwd::getcwd();
# Held open for as long as the app lives (by plackup too, which loads it once).
open my $held, '<', 'data/note.txt' or die "data/note.txt: $!\n";
sub {
    my $env = shift;
    my $keep = $held;
    my $q = $env->{QUERY_STRING};
    die "died here\n" if $q eq 'die';
    my $body = $q eq 'pid' ? $$
        : $q eq 'mode' ? ($env->{'psgi.multithread'} ? 'thread' : 'process')
        : $q eq 'env' ? $ENV{PLACK_ENV}
        : $q eq 'cwd' ? do { open my $fh, '<', 'data/note.txt' or die "$!\n"; scalar <$fh> }
        : $q eq 'greet' ? PlackupGreeting->text
        : $q eq 'path' ? "$env->{SCRIPT_NAME}|$env->{PATH_INFO}"
        : "version 1";
    [200, ['Content-Type' => 'text/plain'], [$body]];
};
APP
chdir $site or die "chdir $site: $!";

my %env = (PERL5LIB => build_dir() . '/modules/perl5', TMPDIR => $tmpdir, PLACK_ENV => undef);
my $http = HTTP::Tiny->new(timeout => 30, keep_alive => 0);
my $n = 0;

sub plackup {
    my (@args) = @_;
    my $log = "$tmp/plackup" . ++$n . '.log';
    my $srv = eval {
        PlxdServer->start(name => 'plackup', cmd => ['plackup', '-s', 'Plxd', @args],
            env => { %env }, stderr => $log, timeout => 30);
    };
    diag($@ . read_file($log)) unless $srv;
    return ($srv, $log);
}
sub body { my ($srv, $q) = @_; my $r = $http->get($srv->url . "?$q"); return "$r->{status} $r->{content}" }

# The processes plackup left, other than plxd's own: the folder's remover.
sub removers {
    grep { (read_file("/proc/$_/cmdline") // '') =~ /^plxd-plackup: removes \Q$tmpdir\E/ }
        map { m{(\d+)$} } glob '/proc/[0-9]*';
}

# Stops it with sig and checks that it exits 0 and leaves nothing: no
# process below it, no remover, nothing in TMPDIR; and that its log has no
# crash and no sanitizer report.
sub stops_clean {
    my ($srv, $log, $what, $sig) = @_;
    my %below = PlxdServer::descendants($srv->pid);
    ok(scalar(keys %below), "$what: plxd runs processes below it");
    kill $sig // 'TERM', $srv->pid;
    is($srv->wait_exit(30), 0, "$what: exits 0 on SIG" . ($sig // 'TERM'));
    ok(wait_for(sub { !grep { (PlxdServer::proc_start($_) // '') eq $below{$_} } keys %below }),
        "$what: none of its processes is left");
    ok(wait_for(sub { !removers() && !glob("$tmpdir/*") }),
        "$what: its temporary folder is removed, and the process that removes it is gone");
    $srv->stop;
    unlike(read_file($log), qr/Sanitizer|runtime error:|master: serving process \d+ (?:killed|exited)/,
        "$what: no crash and no sanitizer report in the log");
}

{
    my ($srv, $log) = plackup('--listen', '127.0.0.1:0', '--workers', 3, "$site/app.psgi");
    ok($srv, 'plackup -s Plxd --listen 127.0.0.1:0 --workers 3 app.psgi starts') or last;
    is(readlink("/proc/" . $srv->pid . "/exe"), Cwd::abs_path(build_dir() . '/plxd'),
        "the process plackup started is the build's plxd (exec)");
    is(body($srv, ''), '200 version 1', 'GET / is the app');
    my @removers = removers();
    is(scalar @removers, 1, 'one process waits to remove the temporary folder');
    is(join(' ', map { readlink($_) =~ s/\[\d+\]$//r } sort glob("/proc/$removers[0]/fd/*")),
        '/dev/null /dev/null /dev/null pipe:',
        '... holding /dev/null and the pipe plxd holds, nothing plackup had open');
    is(body($srv, 'mode'), '200 process', 'worker processes by default');
    my $worker = build_dir() . '/modules/plxd-perl-worker';
    ok(wait_for(sub {
        my %below = PlxdServer::descendants($srv->pid);
        3 == grep { (readlink("/proc/$_/exe") // '') eq $worker } keys %below;
    }), '--workers 3: three worker processes');
    is(body($srv, 'env'), '200 development', 'PLACK_ENV development, as plackup sets it');
    is(body($srv, 'cwd'), "200 from the folder plackup ran in\n",
        'the app runs in the folder plackup was started in');
    my $r = $http->get($srv->url . '?die');
    is($r->{status}, 500, 'an app that dies: 500');
    like($r->{content}, qr/died here/, '... with StackTrace\'s page in development, as plackup gives it');
    like(read_file($log), qr{"GET /\?env HTTP/1\.1" 200 }, 'the access log goes to stderr in development');
    is(body($srv, ''), '200 version 1', 'still serving');
    # plxd compiles the app again when the file changes (why -r is refused).
    my $text = read_file("$site/app.psgi");
    write_file("$site/app.psgi", $text =~ s/version 1/version 2/r);
    ok(wait_for(sub { body($srv, '') eq '200 version 2' }), 'a change to the file is served');
    write_file("$site/app.psgi", $text);
    stops_clean($srv, $log, 'SIGTERM');
}

{
    my $pidfile = "$tmp/plxd.pid";
    my ($srv, $log) = plackup('--listen', '127.0.0.1:0', '--workers', 1, '--max-requests', 2,
        '-E', 'deployment', '--pid', $pidfile, '--access-log', "$tmp/access.log",
        '--error-log', "$tmp/error.log", "$site/app.psgi");
    ok($srv, '--max-requests 2 -E deployment --pid --access-log --error-log') or last;
    is(read_file($pidfile), $srv->pid . "\n", '--pid: the file holds plxd\'s PID');
    my @pids = map { body($srv, 'pid') } 1 .. 3;
    is($pids[0], $pids[1], '--max-requests 2: a worker serves its second request');
    isnt($pids[2], $pids[1], '... and not a third');
    is(body($srv, 'env'), '200 deployment', '-E deployment: PLACK_ENV');
    my $r = $http->get($srv->url . '?die');
    is($r->{status}, 500, 'an app that dies: 500');
    unlike($r->{content}, qr/died here/, '... without StackTrace outside development');
    ok(wait_for(sub { read_file("$tmp/access.log") =~ m{"GET /\?env HTTP/1\.1" 200 } }),
        '--access-log FILE: plxd\'s access log');
    like(read_file("$tmp/error.log"), qr/listening on/, '--error-log FILE: plxd\'s error log');
    unlike(read_file($log), qr{"GET /}, 'no access log on stderr');
    stops_clean($srv, "$tmp/error.log", '--pid', 'INT');
    ok(!-e $pidfile, '--pid: the file is removed once plxd has stopped');
}

{
    my ($srv, $log) = plackup('--listen', '127.0.0.1:0', '--isolation', 'thread', '--timeout', '30s',
        '-I', 'lib', '-MPlackupGreeting', '--path', '/mnt', "$site/app.psgi");
    ok($srv, '--isolation thread --timeout 30s -I lib -M --path') or last;
    my $r = $http->get($srv->url . 'mnt/a?mode');
    is("$r->{status} $r->{content}", '200 thread', '--isolation thread: interpreter threads');
    is(body($srv, 'greet') =~ s/^(\d+).*/$1/sr, 404, '--path /mnt: nothing outside it');
    $r = $http->get($srv->url . 'mnt/a?path');
    is("$r->{status} $r->{content}", '200 /mnt|/a', '--path /mnt: mounted there');
    $r = $http->get($srv->url . 'mnt?greet');
    is("$r->{status} $r->{content}", '200 greeting', '-I lib and -M: the module from lib');
    stops_clean($srv, $log, 'thread mode');
}

{
    my ($srv, $log) = plackup('--listen', 'localhost:0', '-e', 'sub { [200, [], ["from -e"]] }');
    ok($srv, 'plackup -e CODE, no file, --listen localhost:0') or last;
    like($srv->host, qr/^(?:127\.0\.0\.1|::1)$/, '--listen localhost:0: the name resolved to an address');
    is(body($srv, ''), '200 from -e', '-e: the code is the app');
    stops_clean($srv, $log, '-e');
}

{
    write_file("$tmp/site.conf", "[server]\nroot = $site\n[handlers]\n.psgi = perl\n[perl]\nworkers = 1\n"
        . "max_requests = 1\n");
    my ($srv, $log) = plackup('--listen', '127.0.0.1:0', '--config', "$tmp/site.conf", "$site/app.psgi");
    ok($srv, '--config FILE') or last;
    my @pids = map { body($srv, 'pid') } 1 .. 2;
    like($pids[0], qr/^200 \d+$/, '--config FILE: the app at /');
    isnt($pids[1], $pids[0], '--config FILE: its [perl] max_requests = 1');
    stops_clean($srv, $log, '--config');
}

# Runs plackup to its end; returns (exit status, what it printed).
sub fails {
    my (@args) = @_;
    my $out = "$tmp/fail" . ++$n . '.log';
    my $p = PlxdServer->spawn(name => 'plackup', cmd => ['plackup', '-s', 'Plxd', @args],
        env => { %env }, stdout => $out, stderr => $out);
    my $status = $p->wait_exit(60) // $p->stop;
    return ($status, read_file($out));
}
for my $case (
    [['--wrokers', 2], qr/^plackup -s Plxd: unknown option --wrokers /m],
    [['--workers', 'two'], qr/^plackup -s Plxd: --workers two: \[perl\] workers: 'two' is not a whole number$/m],
    [['--max-rss', '12Q'], qr/^plackup -s Plxd: --max-rss 12Q: \[perl\] max_rss: /m],
    [['--isolation', 'fork'], qr/^plackup -s Plxd: --isolation fork: \[perl\] isolation: must be process or thread$/m],
    [['--listen', "$tmp/plxd.sock"], qr/plxd listens on TCP only .*not on a Unix socket/],
    [['--listen', ':0', '--listen', ':1'], qr/plxd listens on one address/],
    [['--listen', '127.0.0.1:0:ssl'], qr/--listen 127\.0\.0\.1:0:ssl: plxd serves no TLS/],
    [['-r'], qr/-r, -R, -L Restarter and -L Shotgun are not needed: plxd compiles the application again/],
    [['-R', 'lib'], qr/-r, -R, -L Restarter and -L Shotgun are not needed/],
    [['-L', 'Shotgun'], qr/-r, -R, -L Restarter and -L Shotgun are not needed/],
    [['-D'], qr/--daemonize is not supported: plxd stays in the foreground/],
    [['--disable-keepalive'], qr/--disable-keepalive is not supported/],
    [['--group', 'nogroup'], qr/--group is not supported: plxd runs with the groups of --user/],
    [['--config', "$tmp/none.conf", '--workers', 2], qr/--config FILE and --workers together: put \[perl\] workers in the file/],
) {
    my ($args, $re) = @$case;
    my @listen = grep({ $_ eq '--listen' } @$args) ? () : ('--listen', '127.0.0.1:0');
    my ($status, $out) = fails(@listen, @$args, "$site/app.psgi");
    isnt($status, 0, "@$args: plackup fails");
    like($out, $re, "@$args: says why") or diag($out);
}
ok(!removers() && !glob("$tmpdir/*"), 'a refused start leaves nothing behind');
{
    # A code reference (Plack::Runner->run($app)) cannot be sent to plxd.
    my $out = "$tmp/coderef.log";
    my $p = PlxdServer->spawn(name => 'perl', cmd => ['perl', '-MPlack::Runner', '-e',
        'my $r = Plack::Runner->new(server => "Plxd"); $r->parse_options("--listen", "127.0.0.1:0");'
        . ' $r->run(sub { [200, [], ["x"]] })'], env => { %env }, stdout => $out, stderr => $out);
    isnt($p->wait_exit(60) // $p->stop, 0, 'an app given as a code reference: refused');
    like(read_file($out), qr/the application is a code reference: plxd runs a \.psgi file/,
        '... saying so');
}
chdir '/';
done_testing;
