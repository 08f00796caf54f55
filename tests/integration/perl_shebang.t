# The switches of a script's #! line, row by row of doc/perl.md's table:
# each runs as .pl (`perl SCRIPT`, where perl reads them itself) and as
# .plx, and the two must agree: the same status and body, and for a script
# perl refuses, the same reason in the log. Where .plx cannot do what perl
# does (-d, -u, a #! line naming another program) it refuses the script
# with a 500 and a log line naming the script and the switch. -T and -t run
# in an interpreter with taint checks (perl_taint.t has the rest).
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for);

my $hdr = 'print "Content-Type: text/plain\n\n";';
my $uninit = 'my $u; my $s = "a" . $u;';
my $lines = "one two\nthree four\n\nfive six\n";

# name => [ switches, code, request body (POST) or undef, how: 'same' (both
# answer alike), 'refused' (both 500 with the same reason), 'plx-refused'
# (.plx refuses where .pl runs or cannot be compared), log regex (matched in
# both logs unless 'plx-refused'), regex that must not be in either log ]
my %rows = (
    none => [ '', "$uninit $hdr print \"W=\$^W\\n\";", undef, 'same', undef, qr/uninitialized/ ],
    w => [ '-w', "$uninit $hdr print \"W=\$^W\\n\";", undef, 'same',
        qr/Use of uninitialized value \$u in concatenation \(\.\) or string at \S+ line 2\./ ],
    W => [ '-W', "no warnings; $uninit $hdr print \"W=\$^W\\n\";", undef, 'same',
        qr/Use of uninitialized value \$u in concatenation/ ],
    X => [ '-X', "use warnings; $uninit $hdr print \"W=\$^W\\n\";", undef, 'same', undef,
        qr/uninitialized/ ],
    l => [ '-l', 'print "Content-Type: text/plain\n"; print "a"; print "b";', undef, 'same' ],
    l_octal => [ '-l072', 'print "Content-Type: text/plain\n\n"; print "a"; print "b";', undef, 'same' ],
    slurp => [ '-0777', "my \$all = <STDIN>; $hdr print length(\$all), ' ', (\$all =~ tr/\\n//), \"\\n\";",
        $lines, 'same' ],
    g => [ '-g', "my \$all = <STDIN>; $hdr print length(\$all), \"\\n\";", $lines, 'same' ],
    paragraph => [ '-00', "my \$p = <STDIN>; $hdr print \"[\$p]\";", $lines, 'same' ],
    nul => [ '-0', "$hdr print unpack('H*', \$/), \"\\n\";", undef, 'same' ],
    n => [ '-n', 'print "Content-Type: text/plain\n\n" if $. == 1; print "got $_";', $lines, 'same' ],
    p => [ '-p', 's/^/> /; $_ = "Content-Type: text/plain\n\n$_" if $. == 1;', $lines, 'same' ],
    a => [ '-an', 'print "Content-Type: text/plain\n\n" if $. == 1; print "$F[1]\n" if @F;',
        $lines, 'same' ],
    F => [ '-F/o/ -l', 'print "Content-Type: text/plain\n" if $. == 1; print scalar(@F), " $F[0]";',
        $lines, 'same' ],
    i => [ '-i.bak', "$hdr print \"I=\$^I\\n\";", undef, 'same' ],
    I => [ '-Ilib', "use Mine; $hdr print Mine::hi(), \" \$INC[0]\\n\";", undef, 'same' ],
    U => [ '-U', "$hdr print \"ok\\n\";", undef, 'same' ],
    s => [ '-s', "$hdr print \"ok \@ARGV\\n\";", undef, 'same' ],
    C0 => [ '-C0 -w', "$hdr print \"W=\$^W\\n\";", undef, 'same' ],
    C_alone => [ '-C', "$hdr print \"U=\${^UNICODE} caf\\x{e9}\\n\";", undef, 'same' ],
    D => [ '-D', "$hdr print \"ok\\n\";", undef, 'same', qr/Recompile perl with -DDEBUGGING to use -D switch/ ],
    c => [ '-c', "BEGIN { print STDERR \"begin ran\\n\" } $hdr print \"ran\\n\";", undef, 'same',
        qr/syntax OK$/m ],
    C => [ '-CSD', "$hdr print \"ran\\n\";", undef, 'refused', qr/Too late for "-CSD" option at \S+ line 1\./ ],
    M => [ '-Mstrict', "$hdr print \"ran\\n\";", undef, 'refused', qr/Too late for "-Mstrict" option at \S+ line 1\./ ],
    m => [ '-w -mPOSIX', "$hdr print \"ran\\n\";", undef, 'refused', qr/Too late for "-mPOSIX" option/ ],
    e => [ '-e', "$hdr print \"ran\\n\";", undef, 'refused', qr/Can't emulate -e on #! line at \S+ line 1\./ ],
    E => [ '-E', "$hdr print \"ran\\n\";", undef, 'refused', qr/Can't emulate -E on #! line/ ],
    f => [ '-f', "$hdr print \"ran\\n\";", undef, 'refused', qr/Can't emulate -f on #! line/ ],
    x => [ '-x', "$hdr print \"ran\\n\";", undef, 'refused', qr/Can't emulate -x on #! line/ ],
    hex => [ '-0x41', "$hdr print \"ran\\n\";", undef, 'refused', qr/Can't emulate -x on #! line/ ],
    S => [ '-S', "$hdr print \"ran\\n\";", undef, 'refused', qr/Can't emulate -S on #! line/ ],
    V => [ '-V', "$hdr print \"ran\\n\";", undef, 'refused', qr/Can't emulate -V on #! line/ ],
    q => [ '-q', "$hdr print \"ran\\n\";", undef, 'refused',
        qr/Unrecognized switch: -q  \(-h will show valid options\) at \S+ line 1\./ ],
    I_none => [ '-I', "$hdr print \"ran\\n\";", undef, 'refused', qr/No directory specified for -I/ ],
    v => [ '-v', "$hdr print \"ran\\n\";", undef, 'plx-refused', qr/-v prints perl's version/ ],
    h => [ '-h', "$hdr print \"ran\\n\";", undef, 'plx-refused', qr/-h prints perl's usage/ ],
    question => [ '-?', "$hdr print \"ran\\n\";", undef, 'plx-refused', qr/-\? prints perl's usage/ ],
    u => [ '-u', "$hdr print \"ran\\n\";", undef, 'plx-refused', qr/-u dumps core/ ],
    d => [ '-d', "$hdr print \"ran\\n\";", undef, 'plx-refused', qr/-d runs the Perl debugger/ ],
    d_module => [ '-d:Trace', "$hdr print \"ran\\n\";", undef, 'plx-refused', qr/-d runs the Perl debugger/ ],
    T => [ '-wT', "$hdr print \"T=\${^TAINT} W=\$^W\\n\";", undef, 'same' ],
    t => [ '-t', "$hdr print \"T=\${^TAINT}\\n\";", undef, 'same' ],
);

my %files = ('lib/Mine.pm' => "package Mine; sub hi { 'mine' } 1;\n");
for my $name (keys %rows) {
    my ($switches, $code) = @{ $rows{$name} };
    my $text = "#!/usr/bin/perl $switches\n$code\n";
    $files{"r_$name.pl"} = $files{"r_$name.plx"} = $text;
}
$files{'sh.pl'} = $files{'sh.plx'} = "#!/bin/sh\necho 'Content-Type: text/plain'\necho\necho shell\n";

my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
    sections => { perl => { workers => 1 } },
);
my $root = $s->root;
sub fetch {
    my ($path, $body) = @_;
    return $s->get($path) unless defined $body;
    return $s->request('POST', $path, content => $body, headers => { 'Content-Type' => 'text/plain' });
}
# The log lines about one file.
sub log_of {
    my ($file) = @_;
    return join "\n", grep { /\Q$root\/$file\E: / } split /\n/, $s->error_log;
}

for my $name (sort keys %rows) {
    my ($switches, undef, $body, $how, $want_log, $no_log) = @{ $rows{$name} };
    my $label = "#!/usr/bin/perl $switches";
    my $plx = fetch("/r_$name.plx", $body);
    if ($how eq 'plx-refused') {
        is($plx->{status}, 500, "$label: .plx refuses it: 500");
        ok(wait_for(sub { log_of("r_$name.plx") =~ $want_log }, 5), "$label: the log says why")
            or diag(log_of("r_$name.plx"));
        ok(wait_for(sub { log_of("r_$name.plx") =~ /answered 500/ }, 5), "$label: and that it answered 500");
        next;
    }
    my $pl = fetch("/r_$name.pl", $body);
    is($plx->{status}, $pl->{status}, "$label: the status of .pl ($pl->{status})");
    is($plx->{content}, $pl->{content}, "$label: the body of .pl") if $how eq 'same';
    is($plx->{status}, 500, "$label: refused") if $how eq 'refused';
    if ($want_log) {
        for my $ext ('pl', 'plx') {
            ok(wait_for(sub { log_of("r_$name.$ext") =~ $want_log }, 5), "$label: .$ext logs it")
                or diag(log_of("r_$name.$ext"));
        }
    }
    if ($no_log) {
        unlike(log_of("r_$name.$_"), $no_log, "$label: .$_ does not log it") for 'pl', 'plx';
    }
}

# A second run of each supported script does it again.
for my $name ('none', 'w', 'l', 'n', 'I') {
    my ($switches, undef, $body) = @{ $rows{$name} };
    is(fetch("/r_$name.plx", $body)->{content}, fetch("/r_$name.pl", $body)->{content},
        "#!/usr/bin/perl $switches: the second request too");
}
my @w = log_of('r_w.plx') =~ /uninitialized/g;
is(scalar @w, 2, '-w: a warning in each run');

# Nothing of it stays for the next script in the worker.
fetch('/r_l.plx');
fetch('/r_w.plx');
fetch('/r_i.plx');
is(fetch('/r_none.plx')->{content}, "W=0\n", 'after -l, -w and -i: no $\\, no $^W');
unlike(log_of('r_none.plx'), qr/uninitialized/, 'and no warning');
is(fetch('/r_I.plx')->{status}, 200, '-I: the script finds its module');

# A #! line naming another program: perl hands the file to it; a .plx
# must be Perl.
is(fetch('/sh.pl')->{content}, "shell\n", '#!/bin/sh as .pl: perl runs it with /bin/sh');
is(fetch('/sh.plx')->{status}, 500, '#!/bin/sh as .plx: 500');
ok(wait_for(sub { log_of('sh.plx') =~ /its #! line names another interpreter \(\/bin\/sh\)/ }, 5),
    '... saying so');

done_testing;
