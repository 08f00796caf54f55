# Turns a Perl file into a C string constant, for compiling the worker's
# Perl side into the binary: perl embed_pm.pl NAME IN OUT
use strict;
use warnings;
my ($name, $in, $out) = @ARGV;
my ($label) = $in =~ m{([^/]+/[^/]+)$};
open my $fh, '<', $in or die "$in: $!\n";
local $/;
my $text = <$fh>;
close $fh;
my $c = join '', map {
    my $line = $_;
    $line =~ s/([\\"])/\\$1/g;
    qq{\t"$line\\n"\n};
} split /\n/, $text;
open my $o, '>', "$out.tmp" or die "$out: $!\n";
print $o "/* Generated from $in by embed_pm.pl: do not edit. */\n",
    "static const char ${name}[] =\n\t\"#line 1 \\\"$label (built in)\\\"\\n\"\n", $c, "\t\"\";\n";
close $o or die "$out: $!\n";
rename "$out.tmp", $out or die "$out: $!\n";
