package Plack::Handler::Plxd;
# plackup -s Plxd: serves the .psgi file plackup was given from plxd's own
# interpreters (worker processes or interpreter threads), not the code
# reference plackup hands a handler: the plackup process execs plxd, so the
# PID plackup had is plxd's, and Ctrl-C or SIGTERM stops plxd itself.
# doc/psgi.md ("plackup -s Plxd") says which option maps to what.
use strict;
use warnings;
use Cwd ();
use Fcntl ();
use File::Basename ();
use File::Path ();
use File::Spec;
use File::Temp ();
use POSIX ();
use Scalar::Util ();

our $VERSION = '1.0';

# The plxd to start: an absolute path, or one relative to this file's
# folder. CMake writes it into each copy it makes: the build tree's names
# that build's plxd (BUILD/modules/perl5), the installed one the plxd
# installed beside it, wherever the tree is installed, staged or moved.
my $PLXD = '@PLXD_PLACKUP_PLXD@';

# plackup's option (as Plack::Runner passes it: --max-rss is max_rss) =>
# [section, key] of plxd's configuration. Values are checked by plxd
# (--check), whose messages are given back under the option's name.
my %KEYS = (
    workers           => [qw(perl workers)],
    max_requests      => [qw(perl max_requests)],
    isolation         => [qw(perl isolation)],
    timeout           => [qw(perl timeout)],
    queue             => [qw(perl queue)],
    queue_timeout     => [qw(perl queue_timeout)],
    max_rss           => [qw(perl max_rss)],
    max_memory        => [qw(perl max_memory)],
    preload           => [qw(perl preload)],
    threads           => [qw(server threads)],
    max_connections   => [qw(server max_connections)],
    max_body          => [qw(server max_body)],
    keepalive_timeout => [qw(server connection_timeout)],
    read_timeout      => [qw(server header_timeout)],
    shutdown_timeout  => [qw(server shutdown_timeout)],
    user              => [qw(server user)],
    error_log         => [qw(server error_log)],
    log_level         => [qw(server log_level)],
    tmp_dir           => [qw(server tmp_dir)],
    status_path       => [qw(status path)],
);
# Those whose value is a file or folder: made absolute against the folder
# plackup was started in, since the configuration file is elsewhere.
my %PATHS = map { $_ => 1 } qw(preload error_log tmp_dir);

# Options Starman takes that plxd has no use for, and why.
my %REFUSED = (
    daemonize => 'plxd stays in the foreground: run it under systemd (doc/running.md) or setsid',
    group     => 'plxd runs with the groups of --user',
    backlog   => 'plxd sets the listen backlog itself',
    preload_app => 'plxd compiles the application in each interpreter: --preload FILE loads'
        . ' shared modules before the workers start',
);

# Plack::Runner's options it passes every handler, and the ones mapped by hand.
my %RUNNER = map { $_ => 1 } qw(host port listen socket server_ready pid keepalive config);

sub new {
    my ($class, %args) = @_;
    my $self = bless { args => \%args }, $class;
    $self->_check;
    return $self;
}

sub _fail { die "plackup -s Plxd: $_[0]\n" }

# The Plack::Runner running this handler (plackup's), found in the call
# stack: plackup hands a handler only the application's code reference,
# and the file, -e, -I, -M, --path and --access-log stay with the runner.
sub _runner {
    for (my $i = 1;; $i++) {
        my @frame = do { package DB; caller($i) };
        return unless @frame;
        next unless $frame[3] eq 'Plack::Runner::run';
        my ($runner, @rest) = @DB::args;
        return ($runner, @rest)
            if Scalar::Util::blessed($runner) && $runner->isa('Plack::Runner');
    }
}

sub _check {
    my ($self) = @_;
    my $args = $self->{args};
    for my $name (sort keys %$args) {
        next if $RUNNER{$name} || $KEYS{$name};
        _fail("--$name is not supported: $REFUSED{$name}") if $REFUSED{$name};
        _fail("unknown option --" . ($name =~ tr/_/-/r) . " (doc/psgi.md lists the options)");
    }
    _fail('--disable-keepalive is not supported: plxd holds idle keep-alive connections in'
        . ' its event threads, not in workers') if exists $args->{keepalive} && !$args->{keepalive};
    if ($args->{config}) {
        my @mapped = grep { $KEYS{$_} } sort keys %$args;
        _fail("--config FILE and --" . ($mapped[0] =~ tr/_/-/r) . " together: put"
            . " [$KEYS{$mapped[0]}[0]] $KEYS{$mapped[0]}[1] in the file") if @mapped;
    }
    $self->{listen} = $self->_listen;

    my ($runner, @run_args) = _runner();
    _fail('no plackup to take the application from: Plack::Handler::Plxd runs a .psgi file in'
        . " plxd's interpreters, and cannot serve a code reference") unless $runner;
    my $r = { %$runner };
    my ($psgi) = grep { defined } $r->{app}, @run_args ? $run_args[0] : @{ $r->{argv} || [] };
    _fail("the application is a code reference: plxd runs a .psgi file in its own"
        . ' interpreters; put the application in a file and give plackup its name')
        if ref $psgi;
    my $loader = $r->{loader} // 'Plack::Loader';
    $loader = ref $loader || $loader;
    _fail('-r, -R, -L Restarter and -L Shotgun are not needed: plxd compiles the application'
        . ' again when its file or a module it loaded changes')
        if $loader =~ /(?:^|::)(?:Restarter|Shotgun)$/;
    _fail("-L $loader: only the default loader and Delayed are supported")
        unless $loader =~ /^(?:Plack::Loader|(?:Plack::Loader::)?Delayed)$/;
    $psgi //= 'app.psgi' unless defined $r->{eval};
    if (defined $psgi) {
        _fail("$psgi: no such file") unless -f $psgi;
        $psgi = Cwd::abs_path($psgi);
    }
    $self->{psgi} = $psgi;
    $self->{eval} = $r->{eval};
    $self->{modules} = [ @{ $r->{modules} || [] } ];
    $self->{inc} = [ map { Cwd::abs_path($_) // File::Spec->rel2abs($_) } @{ $r->{includes} || [] } ];
    $self->{path} = $r->{path};
    $self->{access_log} = $r->{access_log};
    $self->{default_middleware} = $r->{default_middleware};
    $self->{cwd} = Cwd::getcwd();
    $self->{plack_env} = $ENV{PLACK_ENV} // $r->{env} // 'development';
    $self->{plxd} = _plxd();
}

# The plxd beside this file (or the build tree's, in the build tree's copy).
sub _plxd {
    _fail('this copy of Plack/Handler/Plxd.pm was not made by the build: use the one in'
        . ' BUILD/modules/perl5 or the installed one') if $PLXD =~ /^\@/;
    my $bin = File::Spec->file_name_is_absolute($PLXD) ? $PLXD
        : File::Spec->catfile(File::Basename::dirname(Cwd::abs_path(__FILE__)), $PLXD);
    $bin = Cwd::abs_path($bin) // $bin;
    _fail("$bin: no plxd there ($!)") unless -x $bin;
    return $bin;
}

# plxd's [server] listen from plackup's --listen, --host, --port, -S:
# one TCP address; no host is every address, as under Starman.
sub _listen {
    my ($self) = @_;
    my @listen = @{ $self->{args}{listen} || [] };
    _fail('plxd listens on one address: give one --listen') if @listen > 1;
    my $listen = $listen[0] // ':5000';
    _fail("--listen $listen: plxd serves no TLS: put a TLS proxy in front of it")
        if $listen =~ /:ssl$/;
    my ($host, $port) = $listen =~ /^(.*):(\d+)$/
        or _fail("--listen $listen: plxd listens on TCP only (HOST:PORT or :PORT), not on a"
            . ' Unix socket');
    $host =~ s/^\[(.*)\]$/$1/;
    if ($host eq '' || $host eq '*' || $host eq '0.0.0.0') {
        $host = '*';
    } elsif ($host !~ /^[\d.]+$/ && $host !~ /:/) {
        require Socket;
        my ($err, @ai) = Socket::getaddrinfo($host, undef, { socktype => Socket::SOCK_STREAM() });
        _fail("--host $host: $err") if $err || !@ai;
        (undef, $host) = Socket::getnameinfo($ai[0]{addr}, Socket::NI_NUMERICHOST());
    }
    return $host =~ /:/ ? "[$host]:$port" : "$host:$port";
}

# Perl source for a string.
sub _q { my $s = shift; $s =~ s/([\\'])/\\$1/g; return "'$s'" }

# The .psgi plxd runs: the user's file loaded as plackup loads it
# (Plack::Util::load_psgi, or -e's builder), with what plackup puts around
# it: -M, --path, and in the development environment Lint and StackTrace.
# The access log plackup's AccessLog would write is plxd's own.
sub _wrapper {
    my ($self) = @_;
    my @src = ('# Written by Plack::Handler::Plxd for plackup -s Plxd; removed when plxd exits.',
        '$ENV{PLACK_ENV} = ' . _q($self->{plack_env}) . ';',
        'my $cwd = ' . _q($self->{cwd}) . ';',
        'chdir $cwd or die "plackup -s Plxd: chdir $cwd: $!\n";');
    for (@{ $self->{modules} }) {
        my ($module, @import) = split /[=,]/;
        _fail("-M$_: not a module name") unless $module =~ /^\w+(?:::\w+)*$/;
        push @src, "BEGIN { require $module; $module->import(" . join(', ', map { _q($_) } @import)
            . ') }';
    }
    push @src, 'require Plack::Util;';
    if (defined $self->{eval}) {
        push @src, 'use Plack::Builder;', 'my $app = do { no strict; no warnings; builder {',
            '#line 1 "-e"', $self->{eval} . ';',
            (defined $self->{psgi} ? ('Plack::Util::load_psgi(' . _q($self->{psgi}) . ');') : ()),
            '} };';
    } else {
        push @src, 'my $app = Plack::Util::load_psgi(' . _q($self->{psgi}) . ');';
    }
    push @src, 'require Plack::App::URLMap;', 'my $map = Plack::App::URLMap->new;',
        '$map->mount(' . _q($self->{path}) . ' => $app);', '$app = $map->to_app;'
        if $self->{path};
    push @src, 'require Plack::Middleware::Lint;', 'require Plack::Middleware::StackTrace;',
        '$app = Plack::Middleware::StackTrace->wrap(Plack::Middleware::Lint->wrap($app));'
        if $self->{plack_env} eq 'development' && $self->{default_middleware};
    # plxd runs each request in its script's folder and with the process's
    # own %ENV: the application gets plackup's folder and PLACK_ENV back.
    push @src, 'my $plack_env = $ENV{PLACK_ENV};',
        'sub { local $ENV{PLACK_ENV} = $plack_env; chdir $cwd; $app->($_[0]) };';
    return join("\n", @src) . "\n";
}

# The configuration: a list of [option it comes from, section, key, value].
sub _config {
    my ($self, $wrapper) = @_;
    my $args = $self->{args};
    my $log = defined $self->{access_log} ? File::Spec->rel2abs($self->{access_log})
        : $self->{plack_env} eq 'development' && $self->{default_middleware}
            && !$ENV{GATEWAY_INTERFACE} ? '-' : '';
    my @conf = (['--listen', 'server', 'listen', $self->{listen}],
        ['the application\'s folder', 'server', 'root',
            File::Basename::dirname($self->{psgi} // "$self->{cwd}/-")],
        ['--access-log', 'server', 'access_log', $log],
        ['the application', 'handlers', '.psgi', 'perl'],
        ['the application', 'mount', '/', $wrapper]);
    my @inc = (@{ $self->{inc} }, grep { m{^/} } split /:/, $ENV{PERL5LIB} // '');
    push @conf, ['-I', 'perl', 'inc', join(' ', @inc)] if @inc;
    for my $name (sort grep { $KEYS{$_} } keys %$args) {
        my $value = $args->{$name};
        $value = File::Spec->rel2abs($value) if $PATHS{$name} && $value ne '-';
        push @conf, ['--' . ($name =~ tr/_/-/r) . " $args->{$name}", @{ $KEYS{$name} }, $value];
    }
    return @conf;
}

# Writes the configuration file; returns line number => the option it came from.
sub _write_config {
    my ($file, @conf) = @_;
    my (%section, @order);
    for (@conf) { push @order, $_->[1] unless $section{ $_->[1] }; push @{ $section{ $_->[1] } }, $_ }
    my @lines = ('; Written by Plack::Handler::Plxd for plackup -s Plxd; removed when plxd exits.');
    my %from;
    for my $s (@order) {
        push @lines, "[$s]";
        for (@{ $section{$s} }) {
            _fail("$_->[0]: a value on one line") if $_->[3] =~ /[\r\n]/;
            push @lines, "$_->[2] = $_->[3]";
            $from{ scalar @lines } = $_->[0];
        }
    }
    _write($file, join("\n", @lines) . "\n");
    return \%from;
}

sub _write {
    my ($file, $text) = @_;
    open my $fh, '>', $file or _fail("$file: $!");
    print $fh $text or _fail("$file: $!");
    close $fh or _fail("$file: $!");
}

# Runs plxd --check on the configuration and dies with its messages, each
# named for the plackup option it came from, if it is refused.
sub _plxd_check {
    my ($self, @cmd) = @_;
    my $from = pop @cmd;
    my $pid = open(my $out, '-|') // _fail("fork: $!");
    if (!$pid) {
        open STDERR, '>&', \*STDOUT;
        exec { $cmd[0] } @cmd, '--check' or POSIX::_exit(127);
    }
    my $text = do { local $/; <$out> } // '';
    close $out;
    return if $? == 0;
    my @msgs;
    for (split /\n/, $text) {
        next if /configuration OK|configuration is invalid/;
        s/^plxd: //;
        s/^\S+\.conf:(\d+): ?/$from->{$1} ? "$from->{$1}: " : ''/e if $from;
        push @msgs, $_;
    }
    _fail(join("\n", @msgs) || "plxd --check failed: $text");
}

# A process of its own, out of the session, that removes the folder (and the
# PID file) once plxd has exited: it waits for the end of a pipe plxd holds
# open across the exec and never writes to.
sub _remover {
    my ($dir, $pidfile, $plxd_pid) = @_;
    pipe(my $r, my $w) or _fail("pipe: $!");
    my $pid = fork // _fail("fork: $!");
    if (!$pid) {
        close $w;
        POSIX::_exit(0) if fork // 1;
        POSIX::setsid();
        $0 = "plxd-plackup: removes $dir once plxd exits";
        $SIG{$_} = 'IGNORE' for qw(INT TERM HUP QUIT PIPE);
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', '/dev/null';
        # Nothing the application opened as plackup loaded it stays open here.
        opendir my $fds, '/proc/self/fd';
        my @fds = grep { /^\d+$/ && $_ > 2 && $_ != fileno($r) } readdir $fds;
        POSIX::close($_) for @fds;
        while (1) {
            my $n = sysread($r, my $buf, 1);
            last if defined $n || !$!{EINTR};
        }
        File::Path::remove_tree($dir);
        if (defined $pidfile && open my $fh, '<', $pidfile) {
            my $held = <$fh> // '';
            unlink $pidfile if $held =~ /^\Q$plxd_pid\E\s*$/;
        }
        POSIX::_exit(0);
    }
    waitpid $pid, 0;
    close $r;
    fcntl($w, Fcntl::F_SETFD(), 0) or _fail("fcntl: $!");
    return $w;
}

sub run {
    my ($self) = @_;    # plackup's code reference is not used: plxd loads the file itself
    my $args = $self->{args};
    my $dir = File::Temp::tempdir('plxd-plackup-XXXXXX', TMPDIR => 1);
    my $name = defined $self->{psgi} ? File::Basename::basename($self->{psgi}) : 'plackup-e';
    $name .= '.psgi' unless $name =~ /\.psgi$/i;
    my $wrapper = "$dir/$name";
    my @cmd = ($self->{plxd});
    my $from;
    if ($args->{config}) {
        push @cmd, '--config', File::Spec->rel2abs($args->{config}), '--app', $wrapper,
            '--listen', $self->{listen};
    } else {
        $from = _write_config("$dir/plxd.conf", $self->_config($wrapper));
        push @cmd, '--config', "$dir/plxd.conf";
    }
    my $ok = eval {
        _write($wrapper, $self->_wrapper);
        if (defined $args->{user} && $> == 0) {
            my (undef, undef, $uid, $gid) = getpwnam($args->{user});
            _fail("--user $args->{user}: no such user") unless defined $uid;
            chown $uid, $gid, $dir, glob("$dir/*");
        }
        $self->_plxd_check(@cmd, $from);
        1;
    };
    if (!$ok) {
        File::Path::remove_tree($dir);
        die $@;
    }
    my $pidfile = defined $args->{pid} ? File::Spec->rel2abs($args->{pid}) : undef;
    my $hold = _remover($dir, $pidfile, $$);
    _write($pidfile, "$$\n") if defined $pidfile;
    STDOUT->flush;
    STDERR->flush;
    { no warnings 'exec'; exec { $cmd[0] } @cmd }
    _fail("exec $cmd[0]: $!");
}

1;

__END__

=head1 NAME

Plack::Handler::Plxd - plackup -s Plxd: serve a .psgi file with plxd

=head1 SYNOPSIS

  plackup -s Plxd --port 8080 --workers 4 app.psgi
  plackup -s Plxd --listen 127.0.0.1:5000 --isolation thread --max-requests 1000 app.psgi

=head1 DESCRIPTION

Starts plxd, the one installed beside this module, with the .psgi file
plackup was given mounted at C</>, in plxd's own interpreters. plackup's
process becomes plxd (exec): Ctrl-C or SIGTERM stops it. The options, and
what differs from Starman, are in plxd's doc/psgi.md.

=cut
