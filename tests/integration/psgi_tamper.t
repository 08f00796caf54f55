# A .psgi application that tampers with what its request's gateway gives it
# (psgi.input, STDOUT and STDERR, the responder, $@) or fails in odd
# places: each request gets its own answer, the next request, of this app
# or another, sees nothing of the last, and errors are logged naming the
# application. In worker processes, on the interpreter threads, and inline.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(wait_for);

my $app = <<'EOF2';
my ($kept_responder, $kept_env, $kept_writer, $kept_value, $kept_weak);
use Scalar::Util ();
package EvilIn { sub read { $_[1] = "EVILREAD"; 8 } }
package TieIn { sub TIEHANDLE { bless {}, shift } sub READ { $_[1] = "TIEDREAD"; 8 } sub READLINE { "TIEDLINE" } }
package ExitGuard { sub new { bless {}, shift } sub DESTROY { exit 3 } }
package EnvGuard { sub event { my ($file, $what) = @_; open my $fh, '>>', $file or die "$file: $!"; print $fh "$what\n"; close $fh }
    sub new { bless { name => $_[1], file => $_[2] }, $_[0] } sub DESTROY { event($_[0]{file}, "destroyed $_[0]{name}") } }
package Boom { use overload '""' => sub { die "a stringification died\n" }, fallback => 1; }
package Guard { sub new { bless {}, shift } sub DESTROY { eval { die "set by a DESTROY\n" } } }
package Body { sub new { bless { n => 0, die => $_[1] }, $_[0] } sub getline { my $s = shift;
    die "a getline died\n" if $s->{die} && $s->{n} == 1; return $s->{n}++ < 3 ? "line$s->{n}\n" : undef } sub close {} }
sub {
    my $env = shift;
    my %q = map { split /=/, $_, 2 } split /&/, $env->{QUERY_STRING} // '';
    my $in = $env->{'psgi.input'};
    my $read = do { local $/; my $x = <$in>; $x // '' };
    if ($q{reopen}) { open $in, '<', \"the secret of an earlier request" or die }
    if ($q{closein}) { close $in }
    if ($q{seek}) { seek $in, 5, 0 }
    if ($q{closeout}) { close STDOUT }
    if ($q{openout}) { open STDOUT, '>', $q{openout} or die "open: $!" }
    if ($q{openerr}) { open STDERR, '>', $q{openerr} or die "open: $!" }
    if ($q{selecterr}) { select STDERR }
    if ($q{stdoutglob}) { *STDOUT = *main::NOWHERE }
    print STDERR "marker $q{marker}\n" if $q{marker};
    print "printed $q{printed}\n" if $q{printed};
    return [200, ['Content-Type', 'text/plain'], ["ok\n"], Guard->new] if $q{guard};
    if ($q{keep}) { return sub { $kept_responder = shift; $kept_responder->([200, [], ["kept\n"]]) } }
    if ($q{usekept}) { $kept_responder->([200, [], ["from the old responder\n"]]); return [200, [], ["after\n"]] }
    if ($q{keepenv}) { $kept_env = $env }
    if ($q{oldenv}) { return [200, [], ["old env: " . ($kept_env ? $kept_env->{QUERY_STRING} : 'none') . "\n"]] }
    return [200, [], Body->new($q{getline})] if $q{getline} || $q{body};
    if ($q{writer}) { return sub { my $w = shift->([200, ['Content-Type', 'text/plain']]); $w->write("part1\n"); die "a writer died\n" } }
    return "a string" if $q{string};
    return {} if $q{hash};
    return undef if $q{undef};
    if ($q{localerr}) { local $@ = "a local error"; return [200, [], ["localerr\n"]] }
    if ($q{keepw}) { return sub { $kept_writer = shift->([200, ['Content-Type', 'text/plain']]); $kept_writer->write("kept writer\n"); $kept_writer->close } }
    if ($q{usew}) { eval { $kept_writer->write("LEAKED by an old writer\n") }; return [200, [], ["usew: " . ($@ ? "died" : "wrote") . "\n"]] }
    if ($q{cleanupresp}) { return sub { my $r = shift; push @{ $env->{'psgix.cleanup.handlers'} }, sub { $r->([200, [], ["from cleanup\n"]]) }; $r->([200, [], ["cleanupresp\n"]]) } }
    if ($q{boom}) { die bless {}, 'Boom' }
    if ($q{where}) { my $tid = syscall(186); open my $fh, '<', "/proc/self/task/$tid/comm" or die; my $c = <$fh>; return [200, [], [$c]] }
    if ($q{exit}) { exit $q{exit} }
    # What one request does to its environment hash, which the next may be
    # given again (perl_psgi.c, env_keep)
    if ($q{envadd}) { $env->{'my.key'} = 'mine'; $env->{'my.guard'} = EnvGuard->new($q{envadd}, $q{events});
        push @{ $env->{'psgix.cleanup.handlers'} }, sub { EnvGuard::event($q{events}, "cleanup of $q{envadd}") } }
    if ($q{envdecode}) { utf8::decode($env->{PATH_INFO}) }
    if ($q{envdelete}) { delete @$env{qw(QUERY_STRING REQUEST_METHOD psgi.version psgi.input psgix.cleanup.handlers)} }
    if ($q{envset}) { $env->{REQUEST_METHOD} = [1]; $env->{'psgi.multithread'} = 'maybe'; $env->{HTTP_HOST} = EnvGuard->new('set', $q{events}) }
    if ($q{envref}) { $kept_value = \$env->{QUERY_STRING} }
    if ($q{envweak}) { $kept_weak = $env; Scalar::Util::weaken($kept_weak) }
    # What one request does to its empty psgi.input, which the next request, of any app, may be given
    # again (perl_psgi.c, still_empty)
    if ($q{inglob}) { ${*$in}{secret} = 'GLOBHASH'; ${*$in} = 'GLOBSV'; @{*$in} = ('GLOBAV') }
    if ($q{inbless}) { bless $in, 'EvilIn' }
    if ($q{inblessio}) { bless *{$in}{IO}, 'EvilIn' }
    if ($q{intie}) { tie *$in, 'TieIn' }
    if ($q{infmt}) { my $old = select $in; $~ = 'SECRETFMT'; $^ = 'SECRETTOP'; select $old }
    if ($q{inutf8}) { binmode $in, ':utf8' }
    if ($q{inlines}) { $. = 42 }
    if ($q{scheme}) { utf8::upgrade($env->{'psgi.url_scheme'}) }
    if ($q{exitdestroy}) { $env->{'my.exit'} = ExitGuard->new }
    if ($q{envversion}) { eval { $env->{'psgi.version'}[1] = 2 }; return [200, [], ["version: " . ($@ ? "read-only" : "changed") . "\n"]] }
    if ($q{envshow}) {
        my $handlers = $env->{'psgix.cleanup.handlers'};
        return [200, [], [join(' ', map { "$_=" . (defined $env->{$_} ? $env->{$_} : 'undef') }
            qw(my.key my.guard HTTP_X_ONCE QUERY_STRING REQUEST_METHOD psgi.multithread HTTP_HOST)),
            " utf8=" . (utf8::is_utf8($env->{PATH_INFO}) || utf8::is_utf8($env->{'psgi.url_scheme'}) ? 1 : 0),
            " version=@{ $env->{'psgi.version'} } handlers=" . scalar(@$handlers),
            " input=" . (ref $env->{'psgi.input'} ? 'ref' : 'none'),
            " kept=" . (defined $kept_value ? $$kept_value : 'undef'),
            " weak=" . (defined $kept_weak ? 'alive' : 'gone'), "\n"]];
    }
    if ($q{die}) { die "the app died here\n" }
    return [200, ['Content-Type', 'text/plain'], ["read=[$read]\n"]];
};
EOF2

for my $mode (qw(worker thread inline)) {
    my %sec = $mode eq 'worker' ? (perl => { workers => 1 })
        : (perl => { isolation => 'thread', workers => 1, inline_budget => $mode eq 'inline' ? '200ms' : 0 });
    my $other = 'sub { my $in = $_[0]{"psgi.input"}; my $x = do { local $/; <$in> } // ""; '
        . '[200, [], ["other read=[$x]\n"]] }';
    # Reads its empty psgi.input every way, and says what is on its glob.
    my $look = 'sub { my $in = $_[0]{"psgi.input"}; my $n = $in->read(my $b, 100); my $l = <$in> // ""; '
        . 'my $lines = $.; my $old = select $in; my $f = "$~ $^"; select $old; '
        . '[200, [], ["read=[$b] line=[$l] ref=" . ref($in) . " io=" . ref(*{$in}{IO}) . " lines=$lines slots=["'
        . ' . join(",", ${*$in} // (), @{*$in}, %{*$in}) . "] formats=" . ($f =~ /SECRET/ ? "kept" : "own") . "\n"]] }';
    my $s = PlxdTest->start(files => { 'app.psgi' => $app, 'other.psgi' => $other, 'look.psgi' => $look },
        handlers => { '.psgi' => 'perl' },
        server => { threads => 1 }, sections => \%sec);
    my $get = sub { my $r = $s->get("/app.psgi/$_[0]"); "$r->{status} " . ($r->{content} // '') };
    # inline: the routes prove themselves first
    $get->('?') for 1 .. 4;
    $s->get('/other.psgi') for 1 .. 4;
    my $dir = $s->dir;
    # Whether what the app prints to STDERR on a request sent now reaches the log.
    my $logged = sub {
        my ($marker) = @_;
        $get->("?marker=$marker");
        return wait_for(sub { $s->error_log =~ /^.*marker \Q$marker\E$/m });
    };
    is($get->('?where=1'), $mode eq 'inline' ? "200 plxd-event\n" : "200 plxd-perl\n",
        "$mode: where the app runs") if $mode ne 'worker';

    $get->('?reopen=1');
    is($s->get('/other.psgi')->{content}, "other read=[]\n",
        "$mode: a psgi.input an app opened again onto other bytes does not reach another app's request");
    $get->('?reopen=1');
    is($get->('?'), "200 read=[]\n", "$mode: ... nor the app's next request");
    $get->('?closein=1');
    is($get->('?'), "200 read=[]\n", "$mode: ... nor a closed one");
    $get->('?seek=1');
    is($get->('?'), "200 read=[]\n", "$mode: ... nor a seek");

    $get->('?closeout=1');
    ok($logged->('after-close'), "$mode: after close STDOUT, STDERR still reaches the log");
    $get->("?openout=$dir/out.txt&printed=1");
    ok($logged->('after-openout'), "$mode: after open STDOUT, STDERR still reaches the log");
    $get->('?selecterr=1&printed=2');
    is($get->('?'), "200 read=[]\n", "$mode: after select STDERR");
    $get->('?stdoutglob=1&printed=3');
    is($get->('?'), "200 read=[]\n", "$mode: after *STDOUT = ...");

    is($get->('?guard=1'), "200 ok\n", "$mode: a response whose DESTROY sets \$@");
    unlike($s->error_log, qr/set by a DESTROY/, "$mode: ... is not logged as the app dying");
    like($get->('?keep=1'), qr/^200 kept/, "$mode: a responder kept");
    my $u = $get->('?usekept=1');
    like($u, qr/^500/, "$mode: a kept responder called by a later request is a 500 ($u)");
    like($s->error_log, qr/app\.psgi.*responder of an earlier request/, "$mode: ... logged naming the app");
    my $look_clean = "200 read=[] line=[] ref=GLOB io=IO::File lines=0 slots=[] formats=own\n";
    is(join('', map { $_->{status} . ' ' . $_->{content} } $s->get('/look.psgi')), $look_clean,
        "$mode: an app's empty psgi.input, every way read");
    for my $tamper (qw(inglob inbless inblessio intie infmt inutf8 inlines)) {
        $get->("?$tamper=1");
        my $r = $s->get('/look.psgi');
        is("$r->{status} $r->{content}", $look_clean, "$mode: after $tamper on it, another app's empty psgi.input is its own");
    }
    $get->('?keepenv=1');
    is($get->('?oldenv=1'), "200 old env: keepenv=1\n", "$mode: a kept \$env is the old request's");
    is($get->('?body=1'), "200 line1\nline2\nline3\n", "$mode: a getline body");
    $get->('?getline=1');
    like($s->error_log, qr/app\.psgi.*a getline died/, "$mode: ... logged naming the app");
    $get->('?writer=1');
    like($s->error_log, qr/app\.psgi.*a writer died/, "$mode: a writer that dies is logged naming the app");
    for my $bad (qw(string hash undef die)) {
        like($get->("?$bad=1"), qr/^500/, "$mode: $bad is a 500");
    }
    like($s->error_log, qr/app\.psgi.*the app died here/, "$mode: a die logged naming the app");
    is($get->('?localerr=1'), "200 localerr\n", "$mode: local \$@ in the app");
 $get->('?keepw=1');
    is($get->('?usew=1'), "200 usew: died\n", "$mode: an earlier request's writer cannot write into a later response");
    is($get->('?cleanupresp=1'), "200 cleanupresp\n", "$mode: a cleanup handler calling the responder");
    is($get->('?'), "200 read=[]\n", "$mode: ... and the next request is its own");
    $get->('?boom=1');
    is($get->('?'), "200 read=[]\n", "$mode: served after a die with an object whose stringification dies");
    $get->("?openerr=$dir/err.txt");
    ok($logged->('after-openerr'), "$mode: after open STDERR, the next request's STDERR reaches the log");

    # The environment hash of one request is the next's, filled again, when
    # nothing kept it: nothing of the last request's may show in it.
    my $mt = $mode eq 'worker' ? '' : 1;
    my $clean = "my.key=undef my.guard=undef HTTP_X_ONCE=undef QUERY_STRING=envshow=1 REQUEST_METHOD=GET "
        . "psgi.multithread=$mt HTTP_HOST=127.0.0.1:" . $s->port . " utf8=0 version=1 1 handlers=0 input=ref";
    is($get->('?envshow=1'), "200 $clean kept=undef weak=gone\n", "$mode: the environment as a request finds it");
    my $events = "$dir/events-$mode.txt";
    my $event_log = sub { open my $fh, '<', $events or return ''; local $/; <$fh> };
    is($get->("?envadd=add1&events=$events"), "200 read=[]\n", "$mode: an app adds a string, an object and a cleanup handler to \$env");
    ok(wait_for(sub { $event_log->() =~ /destroyed add1/ }),
        "$mode: ... the object is destroyed as its request ends, before any other request");
    is($get->('?envshow=1'), "200 $clean kept=undef weak=gone\n", "$mode: ... the next request has none of them");
    $s->get("/app.psgi?envadd=once&events=$events", { 'X-Once' => 'yes' });
    is($get->('?envshow=1'), "200 $clean kept=undef weak=gone\n", "$mode: a header of the last request is not in the next's");
    $s->get('/app.psgi/caf%C3%A9?envdecode=1');
    like($s->get('/app.psgi/caf%C3%A9?envshow=1')->{content}, qr/ utf8=0 /,
        "$mode: a value an app decoded in place is bytes again in the next request");
    for my $tamper (qw(envdelete envset)) {
        $get->("?$tamper=1&events=$events");
        ok(wait_for(sub { $event_log->() =~ /destroyed set/ }),
            "$mode: an object stored over a variable is destroyed as its request ends") if $tamper eq 'envset';
        is($get->('?envshow=1'), "200 $clean kept=undef weak=gone\n", "$mode: after $tamper, the next request's environment is whole");
    }
    is($event_log->(), "cleanup of add1\ndestroyed add1\ncleanup of once\ndestroyed once\ndestroyed set\n",
        "$mode: each cleanup handler ran once, and each object was destroyed once");
    $get->('?envref=1');
    is($get->('?envshow=1'), "200 $clean kept=envref=1 weak=gone\n",
        "$mode: a reference kept to a value of \$env keeps its request's value");
    $get->('?envweak=1');
    like($get->('?envshow=1'), qr/ weak=gone\n/, "$mode: a weak reference to an earlier request's \$env is gone");
    is($get->('?envversion=1'), "200 version: read-only\n", "$mode: psgi.version is read-only");
    $get->('?scheme=1');
    like($get->('?envshow=1'), qr/ utf8=0 /, "$mode: psgi.url_scheme upgraded by an app is bytes again in the next request");
    is($get->('?exitdestroy=1'), "200 read=[]\n", "$mode: an object in \$env whose DESTROY calls exit: its request is answered");
    ok(wait_for(sub { $s->error_log =~ /app\.psgi: exited with status 3/ }), "$mode: ... the exit is logged naming the app");
    is($get->('?'), "200 read=[]\n", "$mode: ... and plxd serves the next request");

    $get->('?exit=3');
    is($get->('?'), "200 read=[]\n", "$mode: served after all that");
    $s->stop;
}
done_testing;
