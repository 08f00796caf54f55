package PlxdTest;
# Integration test harness: starts a real plxd on a free loopback port with a
# configuration written inline, in a temporary folder (through PlxdServer, as
# the test tools and bench/run do), and checks on the way out that it stopped
# cleanly: not killed by a signal, no sanitizer report in its logs.
#
#   my $s = PlxdTest->start(
#       files    => { 'hello.html' => "hi\n" },     # written under the root
#       server   => { max_body => '1K' },           # [server] keys
#       handlers => { '.echo' => 'echo' },          # [handlers]
#       sections => { echo => { greeting => 'hi' } },
#       prefix   => [ 'prlimit', '--nofile=1024' ],     # a command plxd runs under
#   );
#   my $res = $s->get('/hello.html');                # HTTP::Tiny response
#   my $raw = $s->raw("GET / HTTP/1.0\r\n\r\n");     # bytes over a socket
#   $s->stop;                                        # or let it go out of scope
#   $s->pid;           # the serving process (the engine, the handlers), whose
#                      # /proc a test reads; $s->master_pid: the process
#                      # started, which signals and the stop go to
#
# plxd runs as a master that starts the serving process. The serving
# process dying is logged by the master and counted a failure when the file
# ends, unless the test expects it: crashes => 1 (or $s->expect_crashes).
#
# Knobs: PLXD_TEST_KEEP=1 keeps the temporary folder; the logs are printed
# with diag whenever the test file is failing.

use strict;
use warnings;
use Exporter 'import';
use File::Path qw(make_path remove_tree);
use File::Spec;
use File::Temp qw(tempdir);
use HTTP::Tiny;
use IO::Select;
use IO::Socket::IP;
use POSIX ();
use PlxdServer;
use Test::More;
use Scalar::Util qw(weaken);
use Test2::API qw(test2_add_callback_testing_done);
use Time::HiRes qw(time);

# A write to a connection plxd has closed fails with EPIPE instead of
# killing the test file: killed by the signal, it could not stop the plxd
# it started, which would outlive it.
$SIG{PIPE} = 'IGNORE';

# Servers still running when the test calls done_testing are stopped (and
# their checks counted) before the plan is printed.
my %live;
test2_add_callback_testing_done(sub { $_->stop for grep { defined && $_->{pid} } values %live });

our @EXPORT_OK = qw(wait_for plxd_bin source_dir build_dir write_file read_file run_plxd
    fds_besides_cache thread_mode);

sub plxd_bin   { $ENV{PLXD_BIN} // die "PLXD_BIN is not set (run the tests through ctest)\n" }
sub build_dir  { $ENV{PLXD_BUILD_DIR} // File::Spec->rel2abs('build') }
sub source_dir { $ENV{PLXD_SOURCE_DIR} // File::Spec->rel2abs('.') }

# Polls cond every 20 ms until it returns true or timeout seconds pass
# (30 by default: generous, since a loaded machine is slow and the wait ends
# as soon as cond holds). Returns cond's last value. This is how tests wait:
# never a fixed sleep.
sub wait_for {
    my ($cond, $timeout) = @_;
    my $until = time + ($timeout // 30);
    while (1) {
        my $v = $cond->();
        return $v if $v || time > $until;
        select(undef, undef, undef, 0.02);
    }
}

# The descriptors pid holds, not counting those on regular files under
# root and the inotify instances: [server] stat_cache keeps the files it
# found open, at most one per file and event thread, and an inotify
# instance per thread, which is checked here: more, and the count is
# made too large for any leak check to pass.
# What a leak check counts is then sockets, pipes and spooled bodies.
sub fds_besides_cache {
    my ($pid, $root, $threads) = @_;
    my ($besides, %held) = (0);
    for my $fd (glob "/proc/$pid/fd/*") {
        my $to = readlink($fd) // next;
        if ($to =~ m{^\Q$root\E/} && -f $to) {
            $held{$to}++;
        } elsif ($to eq 'anon_inode:inotify') {
            $held{inotify}++;    # the cache's, one per event thread
        } else {
            $besides++;
        }
    }
    # One event thread per core unless the test set [server] threads.
    $threads //= () = read_file('/proc/cpuinfo') =~ /^processor\s*:/mg;
    return (grep { $_ > ($threads || 1) } values %held) ? 1e9 : $besides;
}

sub write_file {
    my ($path, $content, $mode) = @_;
    my ($dir) = $path =~ m{^(.*)/[^/]+$};
    make_path($dir) if defined $dir && length $dir && !-d $dir;
    open my $fh, '>:raw', $path or die "cannot write $path: $!";
    print $fh $content;
    close $fh;
    chmod $mode, $path if defined $mode;
}

sub read_file {
    my ($path) = @_;
    open my $fh, '<:raw', $path or return '';
    local $/;
    my $text = <$fh>;
    return $text // '';
}

sub _ini {
    my ($name, $keys) = @_;
    my $text = "[$name]\n";
    $text .= "$_ = $keys->{$_}\n" for sort keys %$keys;
    return $text;
}

# Runs plxd with arguments to completion (for --check, --help, ...), through
# PlxdServer like every other start of plxd: one that is still running after
# timeout seconds (default 60) is stopped, and the test says so. Returns (exit
# status, stdout, stderr). A first argument that is a hash reference gives
# options: prefix, a command that runs plxd (strace, prlimit); env, added to
# its environment.
sub run_plxd {
    my $o = ref $_[0] eq 'HASH' ? shift : {};
    my (@args) = @_;
    my $timeout = 60;
    my $dir = tempdir('plxd-run-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my $run = PlxdServer->spawn(name => 'plxd', cmd => [@{ $o->{prefix} // [] }, plxd_bin(), @args],
        env => $o->{env},
        stdout => "$dir/out", stderr => "$dir/err");
    my $status = $run->wait_exit($timeout);
    if (!defined $status) {
        $status = $run->stop(grace => 10);
        fail("plxd @args ended within $timeout s");
    }
    return ($status, read_file("$dir/out"), read_file("$dir/err"));
}

# Whether this run puts the persistent-Perl handler in thread mode
# (PLXD_TEST_ISOLATION=thread, below): a test file checks what doc/perl.md's
# isolation table says of that mode where the modes differ.
# PLXD_TEST_ISOLATION=thread: interpreter threads only ([perl]
# inline_budget = 0); =inline: a request with no body runs inline on its
# event thread from its script's second run, when the first took at most
# 50 ms (inline_after = 1).
sub thread_mode { return ($ENV{PLXD_TEST_ISOLATION} // '') =~ /^(?:thread|inline)$/ }
sub inline_mode { return ($ENV{PLXD_TEST_ISOLATION} // '') eq 'inline' }

sub start {
    my ($class, %o) = @_;
    my $dir = tempdir('plxd-test-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{PLXD_TEST_KEEP});
    chmod 0755, $dir;    # readable after plxd drops privileges to [server] user
    my $root = "$dir/root";
    make_path($root);
    write_file("$root/$_", $o{files}{$_}) for keys %{ $o{files} || {} };

    my %server = (
        root       => 'root',
        error_log  => 'error.log',
        access_log => 'access.log',
        log_level  => 'debug',
        %{ $o{server} || {} },
    );
    # PLXD_TEST_ISOLATION=thread runs a persistent-Perl test file with its
    # .plx scripts in interpreter threads inside plxd ([perl] isolation):
    # the same cases, the other mode.
    my %sections = %{ $o{sections} || {} };
    if (thread_mode()) {
        my %inline = inline_mode() ? (inline_after => 1, inline_budget => '50ms') : (inline_budget => 0);
        $sections{perl} = { %inline, %{ $sections{perl} || {} }, isolation => 'thread' };
    }
    my $conf = $o{conf} // join "\n", _ini(server => \%server),
        _ini(handlers => $o{handlers} || {}),
        map { _ini($_ => $sections{$_}) } sort keys %sections;
    write_file("$dir/plxd.conf", $conf);

    my $self = bless {
        dir => $dir, root => $root, conf => "$dir/plxd.conf", args => $o{args} || [],
        listen => $o{listen} // '127.0.0.1:0', env => $o{env} || {},
        prefix => $o{prefix} || [], crashes => $o{crashes},
        # Without a master the process started serves itself.
        no_master => (grep({ $_ eq '--no-master' } @{ $o{args} || [] })
            || ($server{master} // 'yes') =~ /^(?:no|off|false|0)$/i
            || ($o{conf} // '') =~ /^\s*master\s*=\s*(?:no|off|false|0)\s*$/mi) ? 1 : 0,
    }, $class;
    $self->_spawn;
    $live{"$self"} = $self;
    weaken($live{"$self"});
    return $self;
}

sub _spawn {
    my ($self) = @_;
    # plxd prints "listening on URL" once it accepts connections.
    my $srv = eval {
        PlxdServer->start(
            name   => 'plxd',
            cmd    => [@{ $self->{prefix} }, plxd_bin(), '--config', $self->{conf}, '--listen',
                       $self->{listen}, @{ $self->{args} }],
            stderr => "$self->{dir}/stderr.log",
            env    => $self->{env},
            timeout => 30,
        );
    };
    die $@ . $self->logs unless $srv;
    $self->{server} = $srv;
    $self->{pid} = $srv->pid;
    @$self{qw(url host port)} = ($srv->url, $srv->host, $srv->port);
}

sub url  { my ($self, $path) = @_; my $u = $self->{url}; $u =~ s{/$}{}; return $u . ($path // '/') }
sub port { $_[0]{port} }
sub host { $_[0]{host} }
sub master_pid { $_[0]{pid} }
sub expect_crashes { $_[0]{crashes} = 1 }

# The serving process: the master's child (waited for up to 30 s while the
# master starts a new one), or, run without a master, plxd itself.
sub pid {
    my ($self) = @_;
    my $master = $self->{pid} // return undef;
    return $master if $self->{no_master};
    my $cached = $self->{serving};
    if ($cached) {
        my @f = PlxdServer::_stat_fields($cached);
        return $cached if @f && $f[1] == $master && $f[0] ne 'Z';
    }
    $self->{serving} = wait_for(sub { $self->serving_pid }, 30);
    return $self->{serving} || undef;
}

# The serving process found in /proc now, or 0 while there is none.
sub serving_pid {
    my ($self) = @_;
    my $master = $self->{pid} // return 0;
    my $p = PlxdServer::serving_pid($master);
    return defined $p && $p != $master ? $p : 0;
}

sub dir  { $_[0]{dir} }
sub root { $_[0]{root} }
sub conf_file { $_[0]{conf} }

sub error_log  { read_file("$_[0]{dir}/error.log") . read_file("$_[0]{dir}/stderr.log") }
sub access_log { read_file("$_[0]{dir}/access.log") }
sub logs {
    my ($self) = @_;
    return join '', map { "--- $_\n" . read_file("$self->{dir}/$_") }
        grep { -e "$self->{dir}/$_" } qw(stderr.log error.log access.log);
}

sub http { HTTP::Tiny->new(timeout => 30, keep_alive => 0, max_redirect => 0) }

sub get {
    my ($self, $path, $headers) = @_;
    return $self->http->get($self->url($path), { headers => $headers || {} });
}

sub request {
    my ($self, $method, $path, %args) = @_;
    return $self->http->request($method, $self->url($path), \%args);
}

# A connected socket to plxd.
sub connect {
    my ($self, %o) = @_;
    return IO::Socket::IP->new(
        PeerHost => $self->{host}, PeerPort => $self->{port}, Proto => 'tcp',
        ($o{local} ? (LocalHost => $o{local}) : ()),
    ) // die "connect: $@";
}

# Sends bytes and reads until plxd closes the connection or timeout seconds
# pass without it. Returns what was read.
sub raw {
    my ($self, $bytes, $timeout) = @_;
    my $sock = $self->connect;
    $sock->syswrite($bytes) if length $bytes;
    return read_until_closed($sock, $timeout // 10);
}

sub read_until_closed {
    my ($sock, $timeout) = @_;
    my $sel = IO::Select->new($sock);
    my $data = '';
    my $until = time + $timeout;
    while (time < $until) {
        last unless $sel->can_read($until - time);
        my $n = sysread $sock, my $buf, 65536;
        last unless $n;
        $data .= $buf;
    }
    return $data;
}

# Runs $code while strace records the system calls named in @$calls that
# every thread of $pid makes, and returns them, a line each ("TID
# call(...) = ..."), with strace's -yy (descriptors named). Dies when
# strace is missing (setup.sh installs it) or cannot attach within 30 s.
sub strace_during {
    my ($self, $pid, $calls, $code) = @_;
    my $trace = "$self->{dir}/strace.$pid.txt";
    my $tracer = fork // die "fork: $!";
    if (!$tracer) {
        open STDERR, '>', "$self->{dir}/strace.err";
        { exec 'strace', '-f', '-yy', '-e', 'trace=' . join(',', @$calls), '-o', $trace, '-p', $pid }
        POSIX::_exit(127);
    }
    my $attached = wait_for(sub {
        my @tasks = glob "/proc/$pid/task/*/status";
        return 0 if waitpid($tracer, POSIX::WNOHANG()) == $tracer;
        @tasks && !grep { read_file($_) !~ /^TracerPid:\s*[1-9]/m } @tasks;
    }, 30);
    if (!$attached) {
        kill 'KILL', $tracer;
        waitpid $tracer, 0;
        die "strace could not attach to $pid: " . read_file("$self->{dir}/strace.err") . "\n";
    }
    $code->();
    kill 'INT', $tracer;
    waitpid $tracer, 0;
    return split /\n/, read_file($trace);
}

# System calls strace_during needs for loop_turns_after_responses.
our @RESUME_CALLS = qw(epoll_ctl epoll_wait sendmsg sendto recvfrom);

# From strace_during's lines (with @RESUME_CALLS traced), the event loop's
# own epoll set, and for each response the turns of that set with a zero
# timeout that found nothing, between the response's last send and
# libmicrohttpd's next read of its connection. Only the event thread's
# calls count (the one that reads and writes the client's socket: other
# threads have loops of their own). The loop's set is the one a script's
# descriptors are watched in (a worker's control socket, a CGI script's
# pipes) or that is waited on with a timeout; libmicrohttpd's own is only
# ever polled. Returns (number of loop sets seen, [turns per response]).
sub loop_turns_after_responses {
    my ($all) = @_;
    my ($event_thread) = map { /^(\d+)\s+(?:send(?:msg|to)|recvfrom)\(\d+<TCP/ ? $1 : () } @$all;
    my $lines = [ grep { /^(\d+)\s/ && $1 eq ($event_thread // '') } @$all ];
    my %loop_set = map {
        /^\d+\s+epoll_ctl\((\d+)<[^>]*>, EPOLL_CTL_\w+, \d+<(?!TCP)/
            || /^\d+\s+epoll_wait\((\d+)<[^>]*>, .*, \d+, [1-9]\d*\) = / ? ($1 => 1) : ()
    } @$lines;
    my ($turns, $open) = ([], 0);
    for (@$lines) {
        if (/^\d+\s+send(?:msg|to)\(\d+<TCP/) {
            # A response's parts: only the turns after its last count.
            $open ? ($turns->[-1] = 0) : push @$turns, 0;
            $open = 1;
        } elsif (/^\d+\s+recvfrom\(\d+<TCP/) {
            $open = 0;
        } elsif ($open && /^\d+\s+epoll_wait\((\d+)<[^>]*>, \[\], \d+, 0\) = 0/ && $loop_set{$1}) {
            $turns->[-1]++;
        }
    }
    return (scalar keys %loop_set, $turns);
}

# Polls the error log for a pattern.
sub wait_log {
    my ($self, $re, $timeout) = @_;
    return wait_for(sub { $self->error_log =~ $re }, $timeout);
}

sub signal {
    my ($self, $sig) = @_;
    kill $sig, $self->{pid};
}

# Stops plxd with SIGTERM and checks how it went. Returns the exit status.
sub stop {
    my ($self, %o) = @_;
    delete $self->{pid} or return;
    my $status = $self->{server}->stop(grace => 60);
    fail('plxd stopped within 60 s of SIGTERM') if $self->{server}->killed;
    my $signal = $status & 127;
    ok(!$signal, 'plxd main process was not killed by a signal') or diag("signal $signal");
    # A crash the master recovered from is a failure all the same.
    if (!$self->{crashes}) {
        my ($died) = $self->error_log =~ /^(.*master: serving process \d+ (?:killed by signal|exited with status).*)$/m;
        ok(!$died, 'the serving process did not die') or diag($died);
    }
    unlike($self->error_log, qr/AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:/,
        'no sanitizer report in the logs');
    diag($self->logs) unless Test::More->builder->is_passing;
    diag("kept $self->{dir}") if $ENV{PLXD_TEST_KEEP};
    return $status;
}

# Waits for plxd to exit on its own (after a signal the test sent).
sub wait_exit {
    my ($self, $timeout) = @_;
    $self->{pid} or return;
    my $status = $self->{server}->wait_exit($timeout // 30);
    delete $self->{pid} if defined $status;
    return $status;
}

sub DESTROY {
    my ($self) = @_;
    local ($?, $@);
    $self->stop if $self->{pid};
    delete $live{"$self"};
}

1;
