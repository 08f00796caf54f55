# The framework samples of cgi-bin/ (mojo, dancer, psgi: Mojolicious::Lite,
# Dancer2 and a plain PSGI application through Plack::Handler::CGI) build
# their application once per process ("our $app ||= do { ... }", doc/perl.md:
# "Porting to .plx"). Under [perl] workers = 1, 100 requests of each .plx
# must find the application built once, with as many routes as the .pl
# twin, while the requests add up; the same code with "=" for "||=" (the
# setup at the top level, as the frameworks' own examples write it) builds
# the application again on every request, and its routes pile up. The
# same for what the template samples keep: cgiapp (CGI::Application, a new
# application object per request) has HTML::Template parse its template
# once (cache => 1; with cache => 0, on every request), tt keeps its
# Template object and its compiled templates ("our $tt ||= ...").
# The same applications as .psgi files (mojo.psgi, dancer.psgi, app.psgi)
# declare their routes at the top level, as the frameworks' examples do,
# with no "||=": plxd runs the file once per interpreter, so they too are
# built once, keep their routes and answer as their .pl twin.
use strict;
use warnings;
use Test::More;
use PlxdTest qw(source_dir read_file);

my @SAMPLES = qw(mojo dancer psgi cgiapp tt);
my $N = 100;

# Each sample's build-once idiom, and the code without it.
my %IDIOM = (
    (map { $_ => [qr/^our \$\w+ \|\|= do \{$/m, sub { $_[0] =~ s/ \|\|= / = /gr }] } qw(mojo dancer psgi tt)),
    # (a package of its own: the worker has one PlxdSample::CGIApp)
    cgiapp => [qr/\bcache => 1\b/, sub { $_[0] =~ s/\bcache => 1\b/cache => 0/gr =~ s/PlxdSample::CGIApp\b/PlxdSample::CGIAppNaive/gr }],
);
my %files;
for my $name (@SAMPLES) {
    my $text = read_file(source_dir() . "/cgi-bin/$name.plx");
    is(read_file(source_dir() . "/cgi-bin/$name.pl"), $text, "cgi-bin/$name.pl is $name.plx's twin");
    like($text, $IDIOM{$name}[0], "$name.plx keeps what it builds");
    $files{"$name.pl"} = $files{"$name.plx"} = $text;
    $files{"${name}_naive.plx"} = $IDIOM{$name}[1]->($text);
}
my %PSGI = (mojo => 'mojo.psgi', dancer => 'dancer.psgi', psgi => 'app.psgi');
for my $file (values %PSGI) {
    my $text = read_file(source_dir() . "/cgi-bin/$file");
    unlike($text =~ s/#.*//gr, qr/\|\|=/, "$file builds its application with no ||= (its comments aside)");
    $files{$file} = $text;
}
my $templates = source_dir() . '/cgi-bin/.templates';
opendir my $dh, $templates or die "$templates: $!";
$files{".templates/$_"} = read_file("$templates/$_") for grep { -f "$templates/$_" } readdir $dh;

my $s = PlxdTest->start(
    files    => \%files,
    handlers => { '.pl' => 'cgi', '.plx' => 'perl', '.psgi' => 'perl' },
    sections => { perl => { workers => 1 } },
);

# What a sample page says: (built, routes, served, pid); routes is undef
# for the PSGI and template samples, which have none; built is how many
# times the template was parsed for cgiapp.
sub figures {
    my ($res) = @_;
    my $t = $res->{content} // '';
    $t =~ s/<[^>]*>//g;
    my ($built) = $t =~ /(?:built\s+the\s+application|built\s+its\s+Template\s+object|parsed\s+the\s+template)\s+(\d+)\s+time/;
    my ($routes) = $t =~ /has\s+(\d+)\s+routes/;
    my ($served) = $t =~ /served\s+(\d+)\s+request/;
    my ($pid) = $t =~ /pid\s+(\d+)/;
    return { status => $res->{status}, built => $built, routes => $routes, served => $served, pid => $pid };
}

for my $name (@SAMPLES) {
    my $pl = figures($s->get("/$name.pl/"));
    is($pl->{status}, 200, "$name.pl answers");
    is($pl->{built}, 1, "$name.pl builds the application");
    is($pl->{served}, 1, "$name.pl serves one request per process");
    ok(defined $pl->{routes}, "$name.pl counts its routes") if $name =~ /^(?:mojo|dancer)$/;

    my @plx = map { figures($s->get("/$name.plx/")) } 1 .. $N;
    is(scalar(grep { $_->{status} == 200 } @plx), $N, "$name.plx: $N answers");
    is_deeply([map { $_->{built} } @plx], [(1) x $N], "$name.plx: the application was built once in $N requests");
    is_deeply([map { $_->{routes} } @plx], [($pl->{routes}) x $N],
        "$name.plx: its routes stay " . ($pl->{routes} // 'none') . ', as in .pl');
    is_deeply([map { $_->{served} } @plx], [1 .. $N], "$name.plx: one worker served them one after another");
    is(scalar(keys %{ { map { $_->{pid} // '' => 1 } @plx } }), 1, "$name.plx: all in one process");

    if ($name =~ /^(?:cgiapp|tt)$/) {
        like($s->get("/$name.plx?name=you")->{content}, qr{<h1>Hello, you!</h1>}, "$name.plx: its parameters are the request's");
    } else {
        my $hello = $s->get("/$name.plx/hello/world?name=world");
        like($hello->{content}, qr/^Hello, world!/, "$name.plx: its second route answers");
        is($hello->{content}, $s->get("/$name.pl/hello/world")->{content}, "$name.plx: the same answer as .pl")
            unless $name eq 'psgi';    # its answer has the counters
    }

    if (my $app = $PSGI{$name}) {
        my @psgi = map { figures($s->get("/$app/")) } 1 .. $N;
        is(scalar(grep { $_->{status} == 200 } @psgi), $N, "$app: $N answers");
        is_deeply([map { $_->{built} } @psgi], [(1) x $N], "$app: the application was built once in $N requests");
        is_deeply([map { $_->{routes} } @psgi], [($pl->{routes}) x $N],
            "$app: its routes stay " . ($pl->{routes} // 'none') . ', as in .pl');
        is_deeply([map { $_->{served} } @psgi], [1 .. $N], "$app: one interpreter served them one after another");
        is(scalar(keys %{ { map { $_->{pid} // '' => 1 } @psgi } }), 1, "$app: all in one process");
        my $hello = $s->get("/$app/hello/world?name=world");
        like($hello->{content}, qr/^Hello, world!/, "$app: its second route answers");
        is($hello->{content}, $s->get("/$name.pl/hello/world")->{content}, "$app: the same answer as $name.pl")
            unless $name eq 'psgi';    # its answer has the counters
    }

    # The naive form re-runs the setup on each request.
    my @naive = map { figures($s->get("/${name}_naive.plx/")) } 1 .. 10;
    is_deeply([map { $_->{built} } @naive], [1 .. 10], "${name}_naive.plx: the application is built on every request");
    is_deeply([map { $_->{routes} } @naive], [map { defined $pl->{routes} ? $pl->{routes} * $_ : undef } 1 .. 10],
        "${name}_naive.plx: its routes pile up") if defined $pl->{routes};
}

unlike($s->error_log, qr/perl worker \d+ (?:died|exited|killed)/, 'no worker was replaced');
done_testing;
