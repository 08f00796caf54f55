# Real applications, written with Debian's Perl web libraries the way their
# documentation writes them (tests/integration/compat/), run both as .pl
# (CGI) and as .plx (persistent) under [perl] workers = 1, so that whatever
# one request leaves in the worker shows in every later one, of any script.
#
# Each application gets the same rows per round: a page (GET), a form
# (POST), an upload (multipart), a session or cookie counter read twice with
# a die between, a redirect and the application's own 404 (the CGI::Carp
# one also a perl error, a croak and a warning; nocarp, a script without
# CGI::Carp in the same worker, a page and a die). A round starts with an
# empty cookie jar, so its answers are the same every round. The .plx
# rounds (7: 56 requests or more per application) interleave the
# applications request by request in the one worker, and each answer must
# equal the .pl answer to the same row (status, headers but framing, Date
# and Server, body) once dates, session ids, request ids, pids and the
# script's extension are normalised. The .pl answers come from 2 rounds,
# the second checked against the first (which checks the normalisation),
# the applications side by side: a .pl request is a perl process that loads
# the framework (0.03 s for CGI.pm, 0.4 s for Dancer2), and 7 rounds of them
# take the file from 15 s to 50 s. PLXD_COMPAT_PL_ROUNDS and
# PLXD_COMPAT_PLX_ROUNDS change the counts.
#
# All of them share the one worker, CGI::Carp and CGI::Fast included: a
# FastCGI loop runs one turn per request, and what CGI::Carp installs as it
# loads is the script's that loaded it. carp comes first, so that its first
# request loads CGI::Carp in the worker, as its .pl twin does in its
# process; a later script that uses CGI::Carp (CGI::Fast does) gets neither
# its warn hook nor its die override (doc/perl.md: "What still differs between
# .pl and .plx"), which none of the later ones relies on.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX qw(WNOHANG);
use HTTP::Tiny;
use Storable qw(nstore retrieve);
use PlxdTest qw(wait_for source_dir read_file);

# Without the libraries every row would fail for a reason the diffs do not say.
my @missing = grep { my $f = s{::}{/}gr . '.pm'; !grep { -f "$_/$f" } @INC } qw(CGI CGI::Carp
    CGI::Application HTML::Template CGI::Session CGI::FormBuilder Template CGI::Fast FCGI
    Mojolicious::Lite Dancer2 Dancer2::Session::YAML Plack::Handler::CGI Plack::Builder);
if (@missing) {
    fail("installed (Debian packages; ./setup.sh test installs them): @missing");
    done_testing;
    exit;
}

my $FIXTURES = source_dir() . '/tests/integration/compat';
my $PLX_ROUNDS = $ENV{PLXD_COMPAT_PLX_ROUNDS} // 7;    # 7 rounds: 50 requests or more per application
my $PL_ROUNDS = $ENV{PLXD_COMPAT_PL_ROUNDS} // 2;

my $sessions = tempdir('plxd-compat-sessions-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $scratch = tempdir('plxd-compat-XXXXXX', TMPDIR => 1, CLEANUP => 1);

# ----- the applications and their rows ---------------------------------

my $upload = "first line\nsecond line, caf\xc3\xa9\r\n\x00\x01\xfe\xff binary\nlast line\n";
my @form = (name => 'Ann Lee', colour => 'red', colour => 'blue');

# A row: [name, method, path after the script's name, body].
# body: { form => [pairs] } or { multipart => [pairs], file => [name, filename, type, data] }.
sub rows {
    my (%p) = @_;
    my $up = { multipart => [@{ $p{upload_fields} || [] }, note => 'a note'],
        file => [$p{file_field} // 'file', 'notes.txt', 'text/plain', $upload] };
    return (
        ['page', 'GET', $p{page}],
        ['form', 'POST', $p{post}, { form => $p{form} || \@form }],
        ['upload', 'POST', $p{upload}, $up],
        ['session 1', $p{session_method} // 'GET', $p{session}, $p{session_body}],
        ['die', 'GET', $p{die}],
        ['session 2', $p{session_method} // 'GET', $p{session}, $p{session_body}],
        ['redirect', $p{redirect_method} // 'GET', $p{redirect}, $p{redirect_body}],
        ['404', 'GET', $p{notfound}],
    );
}

my %APPS = (
    cgi_forms => [rows(page => '', post => '/greet', upload => '/upload', session => '/cookie',
        die => '/die', redirect => '/redirect', notfound => '/nope')],
    cgiapp => [rows(page => '', post => '', form => [rm => 'greet', @form],
        upload => '', upload_fields => [rm => 'upload'], session => '?rm=count',
        die => '?rm=die', redirect => '?rm=redirect', notfound => '?rm=nope')],
    formbuilder => [rows(page => '', post => '',
        form => [_submitted_acctinfo => 1, fname => 'Ann', email => 'not an address', _submit => 'Save'],
        upload => '/upload', upload_fields => [_submitted_upload => 1, title => 'Notes'],
        session => '', session_method => 'POST', session_body => { form => [_submitted_acctinfo => 1,
            fname => 'Ann', lname => 'Lee', email => 'ann@example.com', gender => 'Female', _submit => 'Save'] },
        die => '/die', redirect => '', redirect_method => 'POST',
        redirect_body => { form => [_submitted_acctinfo => 1, _submit => 'Cancel'] }, notfound => '/nope')],
    tt => [rows(page => '', post => '/greet', upload => '/upload', session => '/cookie',
        die => '/broken', redirect => '/redirect', notfound => '/nope')],
    mojo => [rows(page => '/', post => '/greet', upload => '/upload', session => '/count',
        die => '/die', redirect => '/redirect', notfound => '/nope')],
    dancer => [rows(page => '/', post => '/greet', upload => '/upload', session => '/count',
        die => '/die', redirect => '/redirect', notfound => '/nope')],
    psgi => [rows(page => '/', post => '/greet', upload => '/upload', session => '/cookie',
        die => '/die', redirect => '/redirect', notfound => '/nope')],
    carp => [rows(page => '', post => '/greet', upload => '/upload', session => '/cookie',
        die => '/die', redirect => '/redirect', notfound => '/nope'),
        ['perl error', 'GET', '/undef'], ['croak', 'GET', '/croak'], ['warn', 'GET', '/warn']],
    nocarp => [['ok', 'GET', ''], ['die', 'GET', '?what=die']],
    fast => [rows(page => '', post => '/greet', upload => '/upload', session => '/cookie',
        die => '/die', redirect => '/redirect', notfound => '/nope')],
);

# ----- the documents ----------------------------------------------------

sub fixture_files {
    my (@apps) = @_;
    my %files = (pid => "print \"Content-Type: text/plain\\n\\n\$\$\\n\";\n");
    for my $app (@apps) {
        (my $text = read_file("$FIXTURES/$app.pl")) =~ s/\@SESSION_DIR\@/$sessions/g;
        $files{"$app.pl"} = $files{"$app.plx"} = $text;
    }
    for my $dir (qw(lib templates)) {
        opendir my $dh, "$FIXTURES/$dir" or die "$FIXTURES/$dir: $!";
        $files{"$dir/$_"} = read_file("$FIXTURES/$dir/$_") for grep { -f "$FIXTURES/$dir/$_" } readdir $dh;
    }
    $files{'pid.plx'} = delete $files{pid};
    return \%files;
}

sub start_plxd {
    my (@apps) = @_;
    return PlxdTest->start(
        files    => fixture_files(@apps),
        handlers => { '.pl' => 'cgi', '.plx' => 'perl' },
        sections => { perl => { workers => 1, timeout => '120s' }, cgi => { timeout => '120s' } },
    );
}

# ----- requests ---------------------------------------------------------

my $http = HTTP::Tiny->new(timeout => 60, keep_alive => 0, max_redirect => 0);

sub urlencode {
    my ($s) = @_;
    $s =~ s/([^A-Za-z0-9_.~-])/sprintf '%%%02X', ord $1/ge;
    return $s;
}

sub request_args {
    my ($body, $jar) = @_;
    my %h;
    $h{Cookie} = join '; ', map { "$_=$jar->{$_}" } sort keys %$jar if %$jar;
    my $content;
    if ($body && $body->{form}) {
        my @p = @{ $body->{form} };
        $content = join '&', map { urlencode($p[2 * $_]) . '=' . urlencode($p[2 * $_ + 1]) } 0 .. $#p / 2;
        $h{'Content-Type'} = 'application/x-www-form-urlencoded';
    } elsif ($body && $body->{multipart}) {
        my $b = 'plxdcompat' . ('x' x 10);
        my @p = @{ $body->{multipart} };
        $content = join '', map { "--$b\r\nContent-Disposition: form-data; name=\"$p[2 * $_]\"\r\n\r\n$p[2 * $_ + 1]\r\n" }
            0 .. $#p / 2;
        my ($field, $name, $type, $data) = @{ $body->{file} };
        $content .= "--$b\r\nContent-Disposition: form-data; name=\"$field\"; filename=\"$name\"\r\n"
            . "Content-Type: $type\r\n\r\n$data\r\n--$b--\r\n";
        $h{'Content-Type'} = "multipart/form-data; boundary=$b";
    }
    return { headers => \%h, (defined $content ? (content => $content) : ()) };
}

# Sends one row's request with the round's cookies, keeps what it sets.
sub send_row {
    my ($server, $app, $ext, $row, $jar) = @_;
    my (undef, $method, $path, $body) = @$row;
    my $res = $http->request($method, $server->url("/$app.$ext$path"), request_args($body, $jar));
    my $set = $res->{headers}{'set-cookie'} // [];
    for my $c (ref $set ? @$set : $set) {
        $jar->{$1} = $2 if $c =~ /^\s*([^=;\s]+)=([^;]*)/;
    }
    return { status => $res->{status}, headers => $res->{headers}, body => $res->{content} // '' };
}

# The answer as the comparison sees it: status, headers but framing, Date
# and Server, body; dates, session ids, pids and .plx normalised.
my $DAY = qr/(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)/;
my $MON = qr/(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)/;
sub normalise_text {
    my ($s) = @_;
    $s =~ s/\.plx\b/.pl/g;
    $s =~ s/\b$DAY, \d\d[ -]$MON[ -]\d{4} \d\d:\d\d:\d\d GMT/DATE/g;            # HTTP and cookie dates
    $s =~ s/\b$DAY $MON [ \d]\d \d\d:\d\d:\d\d \d{4}\b/DATE/g;                 # localtime
    $s =~ s/\b(CGISESSID|dancer\.session|mojolicious)=[^;\s]+/$1=SESSION/g;    # session ids
    $s =~ s/\b(Request ID: )[\w-]+/${1}ID/g;                                    # Mojolicious's request id
    $s =~ s/\bpid([ =:]+)\d+/pid${1}PID/gi;
    # The turns of a FastCGI loop: one per process as .pl, counting up in
    # a persistent loop (checked on its own below).
    $s =~ s/(served by this loop: )\d+/${1}N/g;
    return $s;
}
my %SKIP_HEADER = map { $_ => 1 } qw(date server content-length transfer-encoding connection x-plxd-perl);
sub normalise {
    my ($a) = @_;
    my @h;
    for my $name (sort keys %{ $a->{headers} }) {
        next if $SKIP_HEADER{$name};
        my $v = $a->{headers}{$name};
        push @h, map { "$name: " . normalise_text($_) } ref $v ? @$v : $v;
    }
    return join "\n", "status: $a->{status}", @h, '', normalise_text($a->{body});
}

# Runs rounds of every application's rows as .EXT and returns
# {app}[round][row] of normalised answers. parallel: one client process per
# application, each its own rounds; otherwise one client interleaving the
# applications request by request.
sub run_rounds {
    my ($server, $ext, $rounds, $parallel, @apps) = @_;
    my %out;
    my $one = sub {
        my ($app, $round, $i, $jar) = @_;
        $out{$app}[$round][$i] = normalise(send_row($server, $app, $ext, $APPS{$app}[$i], $jar));
    };
    if (!$parallel) {
        for my $round (0 .. $rounds - 1) {
            my %jar = map { $_ => {} } @apps;
            my ($max) = sort { $b <=> $a } map { scalar @{ $APPS{$_} } } @apps;
            for my $i (0 .. $max - 1) {
                $one->($_, $round, $i, $jar{$_}) for grep { $i < @{ $APPS{$_} } } @apps;
            }
        }
        return \%out;
    }
    my %kids;
    for my $app (@apps) {
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            my $ok = eval {
                for my $round (0 .. $rounds - 1) {
                    my %jar;
                    $one->($app, $round, $_, \%jar) for 0 .. $#{ $APPS{$app} };
                }
                nstore($out{$app}, "$scratch/$ext-$app");
                1;
            };
            print STDERR "compat client $app.$ext: $@" unless $ok;
            POSIX::_exit($ok ? 0 : 1);    # not the test's END blocks: they would stop plxd
        }
        $kids{$pid} = $app;
    }
    wait_for(sub {
        for my $pid (keys %kids) { delete $kids{$pid} if waitpid($pid, WNOHANG) == $pid }
        !%kids;
    }, 600);
    kill 'KILL', keys %kids;
    waitpid $_, 0 for keys %kids;
    $out{$_} = -e "$scratch/$ext-$_" ? retrieve("$scratch/$ext-$_") : [] for @apps;
    return \%out;
}

# The first line where two answers differ, with its neighbours.
sub first_difference {
    my ($want, $got) = @_;
    my @w = split /\n/, $want, -1;
    my @g = split /\n/, $got, -1;
    my $i = 0;
    $i++ while $i < @w && $i < @g && $w[$i] eq $g[$i];
    my $from = $i > 2 ? $i - 2 : 0;
    my $show = sub { my ($l) = @_; join "\n", map { "    $_" } grep { defined } @$l[$from .. $i + 2] };
    return "first difference at line " . ($i + 1) . "\n  .pl:\n" . $show->(\@w) . "\n  .plx:\n" . $show->(\@g);
}

# Compares each application's .plx rounds with its first .pl round, row by row.
sub compare {
    my ($pl, $plx, @apps) = @_;
    for my $app (@apps) {
        my $ref = $pl->{$app}[0] || [];
        is(scalar @$ref, scalar @{ $APPS{$app} }, "$app.pl answered every row")
            or next;
        for my $r (1 .. $#{ $pl->{$app} }) {
            my @bad = grep { ($pl->{$app}[$r][$_] // '') ne $ref->[$_] } 0 .. $#$ref;
            ok(!@bad, "$app.pl round " . ($r + 1) . " answers as round 1 (what varies is normalised)")
                or diag("$APPS{$app}[$bad[0]][0]: " . first_difference($ref->[$bad[0]], $pl->{$app}[$r][$bad[0]]));
        }
        for my $i (0 .. $#{ $APPS{$app} }) {
            my $row = $APPS{$app}[$i][0];
            my @rounds = @{ $plx->{$app} || [] };
            my @bad = grep { ($rounds[$_][$i] // '') ne $ref->[$i] } 0 .. $#rounds;
            my ($status) = $ref->[$i] =~ /^status: (\d+)/;
            my $name = sprintf '%s.plx %s: %d requests answer as .pl (%s)', $app, $row, scalar @rounds, $status;
            ok(@rounds && !@bad, $name)
                or diag(@bad . " of " . @rounds . " differ; round " . ($bad[0] + 1) . ": "
                    . first_difference($ref->[$i], $rounds[$bad[0]][$i] // ''));
        }
    }
}

sub worker_pid { my ($s) = @_; my $r = $s->get('/pid.plx'); $r->{status} == 200 ? $r->{content} =~ s/\s+//gr : "($r->{status})" }

# A worker that crashed or was replaced would hide what a request left.
sub one_worker_throughout {
    my ($s, $pid, $what) = @_;
    is(worker_pid($s), $pid, "$what: one worker served every .plx request");
    unlike($s->error_log, qr/perl worker \d+ (?:died|exited|killed|did not)/, "$what: no worker died or was replaced");
}

# ----- the applications, in one worker -----------------------------------

my @shared = qw(carp nocarp cgi_forms cgiapp formbuilder tt mojo dancer psgi fast);
my $s = start_plxd(@shared);
my $pid = worker_pid($s);
like($pid, qr/^\d+$/, 'the worker answers');
my $pl = run_rounds($s, 'pl', $PL_ROUNDS, 1, @shared);
my $plx = run_rounds($s, 'plx', $PLX_ROUNDS, 0, @shared);
compare($pl, $plx, @shared);

# A few answers checked for what they must say, not only for sameness.
my $first = sub { my ($app, $row) = @_; my ($i) = grep { $APPS{$app}[$_][0] eq $row } 0 .. $#{ $APPS{$app} };
    $pl->{$app}[0][$i] // '' };
like($first->('cgi_forms', 'upload'), qr/^bytes: ${\ length $upload}$/m, 'CGI.pm read the whole upload');
like($first->('cgiapp', 'session 2'), qr/seen 2 visits/, 'the CGI::Session counter counts in a session');
like($first->('mojo', 'session 2'), qr/count: 2/, 'the Mojolicious session counts');
like($first->('dancer', 'session 2'), qr/count: 2/, 'the Dancer2 session counts');
like($first->('formbuilder', 'session 2'), qr/saved 2 time/, 'the FormBuilder cookie counts');
like($first->('tt', 'page'), qr{<td>5</td><td>25</td>}, 'Template Toolkit rendered its loop');
like($first->('dancer', '404'), qr/^status: 404/, "Dancer2's own 404");
like($first->('mojo', 'die'), qr/^status: 500/, "Mojolicious's own 500");
like($first->('carp', $_), qr{^status: 500.*<h1>Software error:</h1>}s, "carp.pl $_: fatalsToBrowser's page")
    for 'die', 'perl error', 'croak';
like($first->('carp', 'session 2'), qr/visits: 2/, 'the CGI::Carp application\'s cookie counts');
like($first->('nocarp', 'die'), qr/^status: 500\n.*500 Internal Server Error/s, "nocarp.pl die: the server's 500");
like($first->('fast', 'page'), qr/^status: 200/, 'fast.pl answers as a CGI script');
opendir my $dh, $sessions or die;
ok(scalar(grep { /^cgisess_/ } readdir $dh), 'CGI::Session kept its sessions in files');

# CGI::Carp's warn hook stamps each warning with the date and the script.
my @warned = $s->error_log =~ /carp\.plx: (.*compat: a warning)/g;
is(scalar @warned, $PLX_ROUNDS, "carp.plx warned $PLX_ROUNDS times");
is(scalar(grep { /^\[.*\] carp\.plx: compat/ } @warned), $PLX_ROUNDS,
    "every carp.plx warning went through CGI::Carp's hook, as carp.pl's")
    or diag(explain(\@warned));

# The loop goes on across requests in the one worker (another script's
# request ends it): its turn count grows.
my @turns = map { $s->get('/fast.plx/cookie')->{content} =~ /served by this loop: (\d+)/ ? $1 : 0 } 1 .. 3;
ok($turns[0] >= 1 && $turns[1] == $turns[0] + 1 && $turns[2] == $turns[1] + 1,
    "fast.plx: one accept loop serves request after request (turns @turns)");
one_worker_throughout($s, $pid, 'shared worker');
$s->stop;

done_testing;
