#!/usr/bin/perl
# The upload form's target: lists the fields and the files received with
# their size and MD5, read back from PLXD::Request's temporary files. A bad
# request gets an HTML error page through on_error.
use strict;
use warnings;
use Digest::MD5;
use PLXD::Request;

sub html {
    my ($s) = @_;
    $s =~ s/([&<>"'])/'&#' . ord($1) . ';'/ge;
    return $s;
}

my $q = PLXD::Request->new(on_error => sub {
    my ($err, $q) = @_;
    $q->status($err->status);
    $q->content_type('text/html; charset=utf-8');
    $q->send_header;
    print "<!DOCTYPE html>\n<title>Upload refused</title>\n<h1>Upload refused</h1>\n",
        '<p>', html($err->message), "</p>\n<p><a href=\"upload.html\">Back</a></p>\n";
    exit 0;
});

$q->content_type('text/html; charset=utf-8');
$q->send_header;
print "<!DOCTYPE html>\n<title>Uploaded</title>\n<h1>Received</h1>\n";
print '<p>Method: ', html($q->method // ''), "</p>\n";
my @fields = grep { !$q->upload($_) } $q->param;
if (@fields) {
    print "<h2>Fields</h2>\n<ul>\n";
    print '<li>', html($_), ': ', html(join ', ', $q->param($_)), "</li>\n" for @fields;
    print "</ul>\n";
}
my @uploads = $q->upload;
print "<h2>Files</h2>\n", @uploads ? "<table>\n" : "<p>None.</p>\n";
print "<tr><th>field</th><th>file</th><th>type</th><th>bytes</th><th>MD5</th></tr>\n" if @uploads;
for my $up (@uploads) {
    my $md5 = Digest::MD5->new->addfile($up->fh)->hexdigest;
    printf "<tr><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td><code>%s</code></td></tr>\n",
        html($up->name), html($up->basename), html($up->type // '?'), $up->size, $md5;
}
print "</table>\n" if @uploads;
print "<p><a href=\"upload.html\">Another</a></p>\n";
