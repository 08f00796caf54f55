# Module settings kept per script (CGI.pm's and CGI::Carp's package
# variables, doc/perl.md) that a script changes at run time are its
# request's only: the next run, of the same script or another, starts
# from what its own compile left. plxd compares the variables with what
# they should be before each run and sets them again only on a
# difference, so each kind of value is changed here: a number, a string,
# a reference, undef to a value, an array; and a module loaded after a
# script's first run, whose settings that script's next run must get too.
# CGI.pm is loaded by the preload, so that every script's compile starts
# from the same settings and nothing but what a test changes differs.
use strict;
use warnings;
use Test::More;
use PlxdTest;

my $show = <<'EOF';
sub show {
    no warnings 'once';
    my $dtd = ref $CGI::DEFAULT_DTD ? $CGI::DEFAULT_DTD->[0] : $CGI::DEFAULT_DTD;
    print "Content-Type: text/plain\n\n", join(' ', "post_max=$CGI::POST_MAX",
        "xhtml=$CGI::XHTML", "dtd=$dtd", 'msg=' . ($CGI::Carp::CUSTOM_MSG // 'undef'),
        'symbols=' . scalar(@CGI::SAVED_SYMBOLS)), "\n";
}
EOF
my %files = (
    # Sets every kind of value at run time when asked.
    'runtime.plx' => <<"EOF",
use CGI ();
$show
show();
if (\$ENV{QUERY_STRING} eq 'change') {
    \$CGI::POST_MAX = -2;
    \$CGI::XHTML = 0;
    \$CGI::DEFAULT_DTD = ['-//plxd test//EN'];
    push \@CGI::SAVED_SYMBOLS, 'a', 'b';
}
if (\$ENV{QUERY_STRING} eq 'same-looking') {
    \$CGI::POST_MAX = '-1';
    \$CGI::XHTML = '1';
}
EOF
    # Its compile sets POST_MAX: each of its runs starts from that.
    'own.plx' => <<"EOF",
use CGI ();
BEGIN { \$CGI::POST_MAX = 100 }
$show
show();
\$CGI::POST_MAX = 999 if \$ENV{QUERY_STRING} eq 'change';
EOF
    # Loads CGI::Carp, after runtime.plx ran, and sets its message.
    'carp.plx' => <<"EOF",
use CGI ();
use CGI::Carp qw(set_message);
$show
show();
set_message('carp.plx text');
EOF
);

$files{'startup.pl'} = "use CGI ();\n1;\n";
my $s = PlxdTest->start(files => \%files, handlers => { '.plx' => 'perl' },
    sections => { perl => { workers => 1, preload => 'root/startup.pl' } });
my $default = "post_max=-1 xhtml=1 dtd=-//W3C//DTD HTML 4.01 Transitional//EN msg=undef symbols=0\n";
my $own = "post_max=100 xhtml=1 dtd=-//W3C//DTD HTML 4.01 Transitional//EN msg=undef symbols=0\n";
my $body = sub { my $r = $s->get($_[0]); "$r->{status} $r->{content}" };

is($body->('/runtime.plx'), "200 $default", 'runtime.plx: the defaults');
for my $i (1 .. 3) {
    is($body->('/runtime.plx?change'), "200 $default", "runtime.plx changes them ($i)");
    is($body->('/runtime.plx'), "200 $default", "... its next run has the defaults again ($i)");
    is($body->('/runtime.plx?same-looking'), "200 $default", "runtime.plx sets strings that look the same ($i)");
    is($body->('/runtime.plx'), "200 $default", "... the defaults again ($i)");
    is($body->('/own.plx'), "200 $own", "own.plx: its compile's POST_MAX ($i)");
    is($body->('/own.plx?change'), "200 $own", "own.plx changes it ($i)");
    is($body->('/own.plx'), "200 $own", "... its next run has its compile's again ($i)");
    is($body->('/runtime.plx'), "200 $default", "runtime.plx after own.plx: the defaults ($i)");
}
# carp.plx loads CGI::Carp and sets its message; runtime.plx, compiled
# before CGI::Carp was loaded, gets CGI::Carp's defaults.
is($body->('/carp.plx'), "200 $default", 'carp.plx: CGI::Carp loaded, no message yet');
is($body->('/carp.plx'), "200 $default", 'carp.plx: its message is set at run time only');
is($body->('/runtime.plx'), "200 $default", "runtime.plx after carp.plx: no message of carp.plx's");
is($body->('/carp.plx'), "200 $default", 'carp.plx again');
is($body->('/runtime.plx?change'), "200 $default", 'runtime.plx changes them, CGI::Carp loaded');
is($body->('/runtime.plx'), "200 $default", '... the defaults again');
unlike($s->error_log, qr/\[(?:error|crit)\]/, 'no error in the log');
$s->stop;
done_testing;
