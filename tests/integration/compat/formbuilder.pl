#!/usr/bin/perl
# CGI::FormBuilder, as its synopsis writes it: fields with options and
# validation; render until the form is submitted and valid, then confirm.
# Around it, by PATH_INFO: an upload form, a redirect on Cancel, a cookie,
# the script's own 404 and a die.
use strict;
use warnings;
use CGI;
use CGI::FormBuilder;

my $q = CGI->new;
my $page = $q->path_info || '/';

if ($page eq '/') {
    my $form = CGI::FormBuilder->new(
        name     => 'acctinfo',
        method   => 'post',
        params   => $q,
        fields   => [qw(fname lname email)],
        required => [qw(fname email)],
        validate => { email => 'EMAIL' },
        submit   => [qw(Save Cancel)],
    );
    $form->field(name => 'gender', options => [qw(Male Female)]);
    $form->field(name => 'phone', size => 10, validate => '/^1?-?\d{3}-?\d{3}-?\d{4}$/',
        comment => '<i>optional</i>');
    if ($form->submitted && $form->submitted eq 'Cancel') {
        print $q->redirect(-uri => $q->url(-relative => 1) . '?fname=again', -status => '302 Found');
    } elsif ($form->submitted && $form->validate) {
        my $field = $form->fields;
        my $visits = ($q->cookie('saved') // 0) + 1;
        print $q->header(-cookie => $q->cookie(-name => 'saved', -value => $visits, -path => '/'));
        print $form->confirm, "<p>saved $visits time(s): $field->{lname}, $field->{fname}</p>\n";
    } else {
        print $form->render(header => 1);
    }
} elsif ($page eq '/upload') {
    my $form = CGI::FormBuilder->new(
        name   => 'upload',
        method => 'post',
        params => $q,
        fields => [qw(title file)],
    );
    $form->field(name => 'file', type => 'file', required => 1);
    if ($form->submitted && $form->validate) {
        my $fh = $form->field('file');
        my $data = do { local $/; <$fh> };
        print $q->header('text/plain'), 'title: ', $form->field('title') // '', "\n",
            'file: ', "$fh", "\nbytes: ", length($data), "\n", $data;
    } else {
        print $form->render(header => 1);
    }
} elsif ($page eq '/die') {
    die "compat: the application died\n";
} else {
    print $q->header(-status => '404 Not Found'), "<p>No form here.</p>\n";
}
