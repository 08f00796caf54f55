# The Perl side of plxd-perl-worker. It is compiled into the worker binary
# and runs in each interpreter before any user code (the preload file, then
# scripts). PLXD::Worker::exit is XS, defined by perl_interp.c.
package PLXD::Worker;

use strict;

# exit ends the request, not the worker: the XS version records the call
# and unwinds the way perl's own exit does, and the worker catches that.
# Code compiled from now on calls it for every plain "exit".
*CORE::GLOBAL::exit = \&PLXD::Worker::exit;

# Reopens STDIN, STDOUT or STDERR on its fd with default layers, after the
# worker found it closed, moved elsewhere, or given other layers.
sub open_std {
    my ($fd) = @_;
    return open(STDIN, '<&=', 0) if $fd == 0;
    return open(STDOUT, '>&=', 1) if $fd == 1;
    return open(STDERR, '>&=', 2);
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

# A changed script compiles into a package of its own (the old one may
# still be running elsewhere on the stack); the old one is emptied then, so
# that editing a script does not grow the worker.
sub delete_package {
    my ($package) = @_;
    require Symbol;
    Symbol::delete_package($package);
    return;
}

1;
