# The Perl side of plxd-perl-worker. It is compiled into the worker binary
# and runs in each interpreter before any user code (the preload file, then
# scripts). PLXD::Worker::exit is XS, defined by perl_interp.c.
package PLXD::Worker;

use strict;

# exit ends the request, not the worker: the XS version records the call
# and unwinds the way perl's own exit does, and the worker catches that.
# Code compiled from now on calls it for every plain "exit".
*CORE::GLOBAL::exit = \&PLXD::Worker::exit;

# Reopens STDIN, STDOUT or STDERR (handle 0, 1, 2) on fd with default layers, after the
# worker found it closed, moved elsewhere, or given other layers.
sub open_std {
    my ($handle, $fd) = @_;
    return open(STDIN, '<&=', $fd) if $handle == 0;
    return open(STDOUT, '>&=', $fd) if $handle == 1;
    return open(STDERR, '>&=', $fd);
}

# The standard globs and their IO objects as the worker set them up. A
# script can point a standard glob at another (*STDOUT = *LOG) or put
# another handle in it (*STDOUT = *LOG{IO}); these aliases keep the
# originals alive (with what STDOUT still buffers) for restore_std.
our @STD_IO = (*STDIN{IO}, *STDOUT{IO}, *STDERR{IO});
*KEEP_STDIN = *STDIN;
*KEEP_STDOUT = *STDOUT;
*KEEP_STDERR = *STDERR;

# Gives STDIN, STDOUT or STDERR back its own glob and IO. The glob or
# handle the script put there is left as it is: it may be the script's own
# global. (A tie is removed by the worker, in C: UNTIE is user code that
# could die and leave it in place.)
sub restore_std {
    my ($fd) = @_;
    if ($fd == 0) {
        *STDIN = *KEEP_STDIN;
        *STDIN = $STD_IO[0];
    } elsif ($fd == 1) {
        *STDOUT = *KEEP_STDOUT;
        *STDOUT = $STD_IO[1];
    } else {
        *STDERR = *KEEP_STDERR;
        *STDERR = $STD_IO[2];
    }
    return;
}

# Points a script's DATA handle at the text after its __DATA__ or __END__
# line, from the start, for each request.
sub open_data {
    my ($glob, $text) = @_;
    close $glob;
    return open($glob, '<', $text);
}

# CGI.pm keeps the first query it parsed and gives it to every later
# CGI->new in the process (the "parameters from the previous request"
# bug of persistent Perl). Called after each request once CGI.pm is
# loaded; its settings (pragmas such as -nosticky) are left alone.
sub cgi_pm_reset {
    no warnings 'once';
    undef $CGI::Q;
    undef @CGI::QUERY_PARAM;
    undef %CGI::QUERY_PARAM;
    undef $CGI::QUERY_CHARSET;
    undef %CGI::QUERY_FIELDNAMES;
    undef %CGI::QUERY_TMPFILES;
    $CGI::BEEN_THERE = 0;
    return;
}

# Settings that modules keep in package variables for the one program a
# CGI process runs, set when a script imports them (use CGI qw(-utf8
# -nosticky), use CGI::Carp qw(fatalsToBrowser)) or calls them at run
# time (CGI::Carp's set_message, $CGI::POST_MAX = ...). In a worker every
# script shares them: one script's set_message would give another's die
# its page, and CGI::Fast->new (CGI->_reset_globals) would drop every
# other script's pragmas. Each script gets them as its own compile left
# them at the start of each run (settings_apply, with what
# settings_snapshot took after the compile); a compile starts from the
# set-up's (the preload's), or the module's defaults.
our @SETTINGS_MODULES = ('CGI.pm', 'CGI/Carp.pm');
my %SETTINGS = (
    'CGI.pm' => [qw($CGI::XHTML $CGI::DEFAULT_DTD $CGI::NOSTICKY $CGI::NPH $CGI::DEBUG
        $CGI::TABINDEX $CGI::CLOSE_UPLOAD_FILES $CGI::HEADERS_ONCE
        $CGI::USE_PARAM_SEMICOLONS $CGI::NO_UNDEF_PARAMS $CGI::PARAM_UTF8
        $CGI::PUTDATA_UPLOAD $CGI::APPEND_QUERY_STRING $CGI::DTD_PUBLIC_IDENTIFIER
        $CGI::POST_MAX $CGI::DISABLE_UPLOADS $CGI::UNLINK_TMP_FILES $CGI::LIST_CONTEXT_WARN
        $CGI::ENCODE_ENTITIES $CGI::ALLOW_DELETE_CONTENT $CGI::COOKIE_CACHE
        @CGI::SAVED_SYMBOLS)],
    'CGI/Carp.pm' => [qw($CGI::Carp::CUSTOM_MSG $CGI::Carp::DIE_HANDLER
        $CGI::Carp::TO_BROWSER $CGI::Carp::NO_TIMESTAMP $CGI::Carp::FULL_PATH
        $CGI::Carp::PROGNAME $CGI::Carp::WRAP $CGI::Carp::WARN
        $CGI::Carp::EMIT_WARNINGS @CGI::Carp::WARNINGS)],
);
# The modules' own defaults (CGI.pm's initialize_globals and its file's
# top, CGI::Carp's), for a module the set-up did not load.
my %SETTINGS_DEFAULT = (
    'CGI.pm' => [1, ['-//W3C//DTD HTML 4.01 Transitional//EN',
        'http://www.w3.org/TR/html4/loose.dtd'], 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, '', -1, 0,
        1, 1, q{&<>"'}, 0, 0, []],
    'CGI/Carp.pm' => [undef, undef, 1, 0, 0, undef, undef, undef, undef, []],
);
my %SETTINGS_BASE;
my %SETTINGS_REF;    # module => references to its variables, made once

sub settings_refs {
    my ($module) = @_;
    return $SETTINGS_REF{$module} //= do {
        no strict 'refs';
        [ map { my $name = substr $_, 1; /^\@/ ? \@{$name} : \${$name} } @{ $SETTINGS{$module} } ];
    };
}

# The settings of the modules loaded now: module => [values], arrays as
# array references (copies); undef when none is loaded.
sub settings_snapshot {
    my %snap;
    for my $module (grep { $INC{$_} } @SETTINGS_MODULES) {
        $snap{$module} = [ map { ref $_ eq 'ARRAY' ? [@$_] : $$_ } @{ settings_refs($module) } ];
    }
    return %snap ? \%snap : undef;
}

# The set-up's settings, the base of every compile (and of a script that
# loaded neither module).
sub settings_base {
    my $snap = settings_snapshot();
    %SETTINGS_BASE = $snap ? %$snap : ();
    return;
}

# The values snap (a snapshot, or undef: the set-up's, or the defaults)
# gives module.
sub settings_wanted {
    my ($snap, $module) = @_;
    return ($snap && $snap->{$module}) || $SETTINGS_BASE{$module} || $SETTINGS_DEFAULT{$module};
}

# What settings_apply(snap) gives the loaded modules, as [reference,
# value, ...]: plxd compares it with the variables before each run, in C,
# and calls settings_assign with it only when one differs (a script set
# one at run time, or another script's settings are in place).
sub settings_plan {
    my ($snap) = @_;
    my @plan;
    for my $module (grep { $INC{$_} } @SETTINGS_MODULES) {
        my $values = settings_wanted($snap, $module);
        my $refs = settings_refs($module);
        push @plan, map { ($refs->[$_], $values->[$_]) } 0 .. $#$refs;
    }
    return \@plan;
}

# Gives each loaded module the settings of snap.
sub settings_apply {
    settings_assign(settings_plan(@_));
    return;
}

# Gives plan's variables its values (a plan settings_plan made).
sub settings_assign {
    my ($plan) = @_;
    for (my $i = 0; $i < @$plan; $i += 2) {
        my ($ref, $value) = @$plan[$i, $i + 1];
        if (ref $ref eq 'ARRAY') {
            @$ref = @$value;
        } else {
            $$ref = $value;
        }
    }
    return;
}

# FastCGI-style scripts: `while (my $q = CGI::Fast->new) { ... }`, or
# `while ($request->Accept >= 0) { ... }` with FCGI. Outside a FastCGI
# server FCGI accepts once per process, so such a script would answer one
# request per worker and then nothing (and break every other such script
# in the worker). Once FCGI is loaded the worker calls fcgi_install, which
# gives FCGI's request objects methods of plxd's: each request the worker
# runs is one turn of the loop. The first Accept of a run takes the request
# that started it; each later one answers that request and waits for the
# next: for the same script it returns 0 with that request in place (%ENV,
# STDIN, working directory), for another script -1, so the loop ends, the
# script returns, and the next request for it starts it from the top.
# The rest of the interface, as a process started by a FastCGI server sees
# it: Finish answers the request at once (what is printed after it goes
# nowhere), Flush sends what STDOUT holds, LastCall makes the next Accept
# end the loop; IsFastCGI is false, as for the same script run as .pl;
# Detach and Attach do nothing. An environment hash of the script's own
# (FCGI::Request's fourth argument) is filled with the request's %ENV at
# each Accept. A request object on a socket of the script's own
# (FCGI::OpenSocket) is a FastCGI server of its own: FCGI's methods serve it.
my %FCGI;    # FCGI's own subs
sub fcgi_install {
    return if $FCGI{Request} || !defined &FCGI::RequestX;
    no strict 'refs';
    no warnings 'redefine';
    for my $name (qw(Request Accept Finish Flush Detach Attach LastCall GetEnvironment
                     GetHandles IsFastCGI StartFilterData DESTROY)) {
        $FCGI{$name} = defined &{"FCGI::$name"} ? \&{"FCGI::$name"} : sub { return };
    }
    # An object of FCGI's own (made before this, or on a socket of its
    # own) is an FCGI blessed scalar; plxd's are FCGI blessed hashes.
    my $ours = sub { ref $_[0] && UNIVERSAL::isa($_[0], 'HASH') && !$_[0]{real} };
    my $theirs = sub {
        my ($self) = @_;
        return $self->{real} if UNIVERSAL::isa($self, 'HASH');
        return $FCGI{IsFastCGI}->($self) ? $self : undef;
    };
    *FCGI::Request = sub (;***$*$) {
        my @args = (\*STDIN, \*STDOUT, \*STDERR, \%ENV, 0, 1);
        splice @args, 0, scalar(@_), @_;
        my $socket = $args[4];
        $socket = fileno($socket) if defined $socket && ref $socket && defined fileno($socket);
        return bless { real => $FCGI{Request}->(@_) }, 'FCGI' if $socket;
        return bless { in => $args[0], out => $args[1], err => $args[2], env => $args[3] },
            'FCGI';
    };
    *FCGI::Accept = sub {
        my ($self) = @_;
        if (!$ours->($self)) {
            my $real = $theirs->($self);
            return $FCGI{Accept}->($real) if $real;
        }
        my $rc = PLXD::Worker::fcgi_accept();
        my $env = UNIVERSAL::isa($self, 'HASH') ? $self->{env} : undef;
        %$env = %ENV if $rc >= 0 && ref $env eq 'HASH' && $env != \%ENV;
        return $rc;
    };
    my %plain = (
        Finish   => \&PLXD::Worker::fcgi_finish,
        Flush    => \&PLXD::Worker::fcgi_flush,
        LastCall => \&PLXD::Worker::fcgi_last_call,
        Detach   => sub { return },
        Attach   => sub { return },
        IsFastCGI => sub { return 0 },
        StartFilterData => sub { return -1 },
        GetEnvironment => sub { return $_[0]{env} },
        GetHandles => sub { return @{ $_[0] }{qw(in out err)} },
    );
    for my $name (keys %plain) {
        my $mine = $plain{$name};
        *{"FCGI::$name"} = sub {
            my ($self) = @_;
            return $mine->($self) if $ours->($self);
            my $real = $theirs->($self);
            return $FCGI{$name}->($real, @_[1 .. $#_]) if $real;
            # An FCGI object made before plxd took FCGI over.
            return $mine->($self) unless $name =~ /^Get/;
            return $FCGI{$name}->($self);
        };
    }
    *FCGI::DESTROY = sub {
        my ($self) = @_;
        $FCGI{DESTROY}->($self) unless UNIVERSAL::isa($self, 'HASH');
        return;
    };
    return;
}

# A changed script compiles into a package of its own (the old one may
# still be running elsewhere on the stack); the old one is emptied then, so
# that editing a script does not grow the worker.
# In an interpreter thread inside plxd (isolation = thread), exec without
# a fork and POSIX::_exit would end plxd itself, with every request in it:
# there they end the request instead, as exit does, after a line in the
# log. A child the script forked (system, fork, a pipe open) is a process
# of its own, where both do what they always do.
sub thread_overrides {
    require POSIX;
    my $real_exit = \&POSIX::_exit;
    no warnings 'redefine';
    *CORE::GLOBAL::exec = sub {
        CORE::exec(@_) if in_child();
        print STDERR "exec refused: it would replace plxd (isolation = thread); "
            . "the request ends as with exit\n";
        PLXD::Worker::exit(255);
    };
    # plxd reaps only what a script forked (waitpid(-1) would take plxd's
    # own children): the override notes it. The empty prototype keeps
    # `fork // die` parsing as with the builtin.
    *CORE::GLOBAL::fork = sub () {
        my $pid = CORE::fork();
        note_child($pid) if $pid;
        return $pid;
    };
    # alarm is per interpreter thread: a timer of the thread's own
    # (perl_clone.c) whose SIGALRM reaches that thread only, and runs the
    # script's $SIG{ALRM} at its next op; disarmed when the request ends.
    *CORE::GLOBAL::alarm = sub (_) {
        return CORE::alarm($_[0]) if in_child();
        return alarm_set($_[0]);
    };
    # wait and waitpid(-1) (or 0, or a group) see only the script's own
    # children: what it forked, and its pipe opens not yet closed; never
    # plxd's (CGI scripts, other threads' programs).
    *CORE::GLOBAL::wait = sub () {
        return CORE::wait() if in_child();
        return wait_own(-1, 0);
    };
    *CORE::GLOBAL::waitpid = sub ($$) {
        return CORE::waitpid($_[0], $_[1]) if in_child();
        return wait_own($_[0], $_[1]);
    };
    # kill aimed at plxd itself ($$), its process group (0, or -PGRP), or
    # its master (the parent: a stop of the master is the service's), is
    # refused with a line in the log; any other process is signalled.
    *CORE::GLOBAL::kill = sub (@) {
        return CORE::kill(@_) if in_child() || !@_;
        my ($sig, @pids) = @_;
        my $group = $sig =~ /^-/;
        my $pgrp = getpgrp();
        my $parent = getppid();
        my $zero = $sig =~ /^-?(?:0|ZERO)\z/;
        my (@ok, $refused);
        for my $pid (@pids) {
            my $p = $group ? -abs($pid) : $pid;
            if (!$zero && ($p == 0 || $p == $$ || $p == -$pgrp || $p == $parent)) {
                $refused++;
                next;
            }
            push @ok, $pid;
        }
        if ($refused) {
            print STDERR "kill refused: $sig to plxd, its process group or its master (isolation = thread)\n";
            $! = POSIX::EPERM();
        }
        return @ok ? CORE::kill($sig, @ok) : 0;
    };
    # POSIX::raise signals the calling thread, whose handler passes plxd's
    # own signals (HUP, TERM, INT) on to plxd: refused as kill of $$ is.
    my $real_raise = \&POSIX::raise;
    *POSIX::raise = sub {
        return $real_raise->(@_) if in_child();
        print STDERR "POSIX::raise refused: it would signal plxd (isolation = thread)\n";
        $! = POSIX::EPERM();
        return undef;
    };
    # The user and group ids are the process's, every thread's: setting
    # them is refused with a line in the log, reading them works.
    no strict 'refs';
    for my $var ('<', '>', '(', ')') {
        my $real = \${"main::$var"};
        *{"main::$var"} = \my $fake;
        tie ${"main::$var"}, 'PLXD::Worker::Id', $var, $real;
    }
    for my $name ('setuid', 'setgid') {
        my $real = \&{"POSIX::$name"};
        *{"POSIX::$name"} = sub {
            return $real->(@_) if in_child();
            print STDERR "POSIX::$name refused: it would change plxd's user or group "
                . "(isolation = thread)\n";
            $! = POSIX::EPERM();
            return undef;
        };
    }
    *POSIX::_exit = sub {
        $real_exit->(@_) if in_child();
        PLXD::Worker::exit($_[0] // 0);
    };
    # POSIX::sigaction would set plxd's own disposition, for every thread
    # (SIGALRM's would take every thread's alarm): it sets the script's own
    # %SIG instead, as $SIG{NAME} = does, and reads the old action from
    # there. The action's mask and flags are not kept.
    require Config;
    my %sig_name;
    my @nums = split ' ', $Config::Config{sig_num};
    my @names = split ' ', $Config::Config{sig_name};
    $sig_name{ $nums[$_] } //= $names[$_] for 0 .. $#nums;
    my $real_sigaction = \&POSIX::sigaction;
    *POSIX::sigaction = sub {
        return $real_sigaction->(@_) if in_child();
        my ($sig, $action, $old) = @_;
        my $name = defined $sig ? $sig_name{$sig} : undef;
        if (!$name || $name =~ /^(?:ZERO|KILL|STOP)\z/) {
            $! = POSIX::EINVAL();
            return undef;
        }
        if ($old) {
            $old->{HANDLER} = $SIG{$name} // 'DEFAULT';
            $old->{FLAGS} = 0;
        }
        $SIG{$name} = $action->{HANDLER} if $action;
        return '0 but true';
    };
    return 1;
}

# The thread's alarm went off (perl_clone.c calls this at the script's
# next op): $SIG{ALRM} runs; with none, the request ends, as SIGALRM ends
# a CGI script.
sub alarm_fire {
    my $h = $SIG{ALRM};
    return if defined $h && !ref $h && $h eq 'IGNORE';
    if (!defined $h || (!ref $h && ($h eq 'DEFAULT' || $h eq ''))) {
        print STDERR "Alarm clock: no \$SIG{ALRM} handler, the request ends\n";
        PLXD::Worker::exit(142);
    }
    if (!ref $h) {
        $h = "main::$h" if $h !~ /::/;
        no strict 'refs';
        return &$h('ALRM');
    }
    return $h->('ALRM');
}

# $<, $>, $( and $) of an interpreter thread: read from perl's own,
# never set (outside a forked child).
package PLXD::Worker::Id;

sub TIESCALAR {
    my ($class, $name, $real) = @_;
    return bless { name => $name, real => $real }, $class;
}
sub FETCH { return ${ $_[0]{real} } }

sub STORE {
    my ($self, $v) = @_;
    return ${ $self->{real} } = $v if PLXD::Worker::in_child();
    print STDERR "\$$self->{name} = $v refused: it would change plxd's user or group "
        . "(isolation = thread)\n";
    $! = POSIX::EPERM();
    return;
}

package PLXD::Worker;

sub delete_package {
    my ($package) = @_;
    require Symbol;
    Symbol::delete_package($package);
    return;
}

1;
