#!/usr/bin/perl
# The CGI tests' fixture script, driven by its query string (lighttpd's
# style): words run in order, e.g. ?status=404&env=QUERY_STRING&sleep=1.
#   header words (collected, printed before the first body word or at the end):
#     status=CODE  ctype=TYPE  length=N  location=URL  header=Name:%20value
#   body words:
#     env=NAME (NAME=value line; env=* all)  text=T  size=N (N bytes of a
#     pattern)  echo=1 (the request body back)  stream=N (N lines, 0.2 s apart)
#     cwd=1  argv=1  stdin_len=1 (bytes read from stdin)
#   others:
#     raw=TEXT (printed as is, no automatic headers)  noheaders=1
#     sleep=SECONDS  stderr=TEXT  stderrbytes=N  kill=SIGNAL  exit=CODE
#     wait=PATH (until PATH exists, at most 120 s: a test orders events by
#     creating it, never by a sleep that a loaded machine can outlast)
#     bg=SECONDS (a background child holding stdout; bgpid=PATH first
#     makes it write its pid there)  pidfile=PATH  burn=1 (CPU loop forever)
#     closeout=1 (close stdout)  read=N (read N bytes of stdin first)
use strict;
use warnings;
use Cwd ();
use Time::HiRes qw(sleep);

$| = 1;
binmode STDOUT;
binmode STDIN;

my @words = map {
    my ($k, $v) = split /=/, $_, 2;
    $v //= '';
    $v =~ tr/+/ /;
    $v =~ s/%([0-9A-Fa-f]{2})/chr hex $1/ge;
    [$k, $v]
} grep { length } split /&/, $ENV{QUERY_STRING} // '';

my %head = (ctype => 'text/plain');
my @extra;
my $headers_done = 0;
my $no_headers = 0;

sub headers {
    return if $headers_done++ || $no_headers;
    print "Status: $head{status}\r\n" if defined $head{status};
    print "Location: $head{location}\r\n" if defined $head{location};
    print "Content-Type: $head{ctype}\r\n" if length $head{ctype};
    print "Content-Length: $head{length}\r\n" if defined $head{length};
    print "$_\r\n" for @extra;
    print "\r\n";
}

for my $w (@words) {
    my ($k, $v) = @$w;
    if ($k =~ /^(status|ctype|length|location)$/) { $head{$k} = $v }
    elsif ($k eq 'header')   { push @extra, $v }
    elsif ($k eq 'noheaders') { $no_headers = 1 }
    elsif ($k eq 'raw')      { $headers_done = 1; print $v }
    elsif ($k eq 'env') {
        headers();
        if ($v eq '*') { print "$_=$ENV{$_}\n" for sort keys %ENV }
        else { print "$v=", ($ENV{$v} // '(unset)'), "\n" }
    }
    elsif ($k eq 'text')     { headers(); print $v }
    elsif ($k eq 'size') {
        headers();
        my $chunk = join '', map { chr(($_ * 7) % 256) } 0 .. 65535;
        my $left = $v;
        while ($left > 0) {
            my $n = $left < length $chunk ? $left : length $chunk;
            print substr($chunk, 0, $n);
            $left -= $n;
        }
    }
    elsif ($k eq 'echo') {
        headers();
        my $buf;
        while (read(STDIN, $buf, 65536)) { print $buf }
    }
    elsif ($k eq 'read') {
        my ($buf, $got) = ('', 0);
        while ($got < $v) {
            my $n = read(STDIN, $buf, $v - $got);
            last unless $n;
            $got += $n;
        }
    }
    elsif ($k eq 'stdin_len') {
        headers();
        local $/;
        my $all = <STDIN> // '';
        print "stdin_len=", length($all), "\n";
    }
    elsif ($k eq 'stream')   { headers(); for my $i (1 .. $v) { print "line $i\n"; sleep 0.2 } }
    elsif ($k eq 'cwd')      { headers(); print "cwd=", Cwd::getcwd(), "\n" }
    elsif ($k eq 'argv')     { headers(); print "argc=", scalar(@ARGV), " argv=@ARGV\n" }
    elsif ($k eq 'sleep')    { sleep $v }
    elsif ($k eq 'wait') {
        my $until = time + 120;
        sleep 0.02 until -e $v || time > $until;
    }
    elsif ($k eq 'stderr')   { print STDERR "$v\n" }
    elsif ($k eq 'stderrbytes') {
        my $line = ('e' x 99) . "\n";
        my $left = $v;
        while ($left > 0) { print STDERR $line; $left -= 100 }
    }
    elsif ($k eq 'kill')     { kill $v, $$; sleep 1 }
    elsif ($k eq 'exit')     { exit $v }
    elsif ($k eq 'pidfile') {
        open my $fh, '>', $v or die "pidfile $v: $!";
        print $fh "$$\n";
        close $fh;
    }
    elsif ($k eq 'bgpid')    { $head{bgpid} = $v }
    elsif ($k eq 'bg') {
        my $pid = fork // die "fork: $!";
        if (!$pid) {  # keeps stdout open
            if ($head{bgpid}) { open my $fh, '>', $head{bgpid} or die; print $fh "$$\n"; close $fh }
            sleep $v;
            exit 0;
        }
    }
    elsif ($k eq 'burn')     { 1 while 1 }
    elsif ($k eq 'closeout') { headers(); close STDOUT }
    else { die "cgi_fixture: unknown word $k\n" }
}
headers();
