# tests/doc_claims, the docs' "every claim true" check: it passes on doc/ as
# checked in, and fails, naming file and line, on a table row or list item
# that names no test and no code, on a reference to a file that does not
# exist and on a link to a page or heading that does not; code blocks and blocks marked <!-- not claims: ... --> are not claims.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use PlxdTest qw(source_dir write_file);

my $script = source_dir() . '/tests/doc_claims';
# Pages in a doc/ folder of their own, whose ../tests and ../server lead to
# the source tree's, as the real pages' links do.
my $top = tempdir(CLEANUP => 1);
my $dir = "$top/doc";
mkdir $dir or die "mkdir $dir: $!";
symlink(source_dir() . "/$_", "$top/$_") or die "symlink $_: $!" for qw(tests server);

sub claims {
    my (@files) = @_;
    my $out = `perl '$script' @files 2>&1`;
    return ($? >> 8, $out);
}

my ($rc, $out) = claims();
is($rc, 0, 'every claim in doc/*.md names a test or the code') or diag($out);
like($out, qr/^\d+ claims in \d+ files: each names a test or the code\.$/m, 'and says how many');

write_file("$dir/good.md", <<'MD');
# A page

- a behaviour (test: tests/integration/static.t)
- another, read against the code (code: server/path.c)
- a third, continued
  on a second line (test: tests/unit/test_path.c)

| what | answer | test |
|---|---|---|
| a row | 404 | [static.t](../tests/integration/static.t) |
| a row read against the code | 400 | code: [path.c](../server/path.c) |

<!-- not claims: a map of files -->
- `server/path.c`: paths
  and more about them
- `server/resolve.c`: files

```
- not a list item: a code block
| nor a table row |
```

    - nor in an indented code block after a paragraph? It is a paragraph line.
MD
($rc, $out) = claims("$dir/good.md");
is($rc, 0, 'rows and items that name a test or the code pass') or diag($out);

write_file("$dir/bare.md", <<'MD');
# A page

- a behaviour that names nothing
- a covered one (test: tests/integration/static.t)

| what | answer |
|---|---|
| a bare row | 404 |
MD
($rc, $out) = claims("$dir/bare.md");
is($rc, 1, 'a claim naming no test and no code fails');
like($out, qr/bare\.md:3: no test and no code named: - a behaviour that names nothing/, 'the item, by file and line');
like($out, qr/bare\.md:8: no test and no code named: \| a bare row \| 404 \|/, 'the row, by file and line');
unlike($out, qr/bare\.md:4:/, 'not the covered item');

write_file("$dir/dangling.md", "- a behaviour (test: tests/integration/gone.t)\n- another (code: server/gone.c)\n");
($rc, $out) = claims("$dir/dangling.md");
is($rc, 1, 'a reference to a missing file fails');
like($out, qr/dangling\.md:1: names tests\/integration\/gone\.t, which does not exist/, 'a missing test');
like($out, qr/dangling\.md:2: names server\/gone\.c, which does not exist/, 'a missing source file');

write_file("$dir/links.md", "# Top\n\nSee [top](#top), [gone](#gone) and [a page](nowhere.md).\n");
($rc, $out) = claims("$dir/links.md");
is($rc, 1, 'a link to a missing heading or page fails');
like($out, qr/links\.md:3: links to #gone, which does not exist/, 'a missing heading');
like($out, qr/links\.md:3: links to nowhere\.md, which does not exist/, 'a missing page');
unlike($out, qr/links to #top/, 'not a heading that is there');

# The source map: a tree whose doc/hacking.md leaves a source file out
# fails, naming it; a header counts as named with its module's .c.
{
    my $tree = tempdir(CLEANUP => 1);
    mkdir "$tree/$_" or die "mkdir: $!" for qw(doc server handlers handlers/x);
    write_file("$tree/server/$_", "/* x */\n") for qw(a.c a.h b.c);
    write_file("$tree/handlers/x/x.pm", "1;\n");
    write_file("$tree/doc/hacking.md", "| `server/a.c` | a | \n| `handlers/x/x.pm` | x |\n");
    my $out = `perl '$script' --map '$tree' 2>&1`;
    isnt($? >> 8, 0, 'a source file missing from the map fails the check');
    like($out, qr{^doc/hacking\.md names no server/b\.c$}m, '... naming it');
    unlike($out, qr{server/a\.h}, '... and a.h counts as named with a.c');
    write_file("$tree/doc/hacking.md", "`a.c`, `b.c`, `handlers/x/x.pm`\n");
    $out = `perl '$script' --map '$tree' 2>&1`;
    is($? >> 8, 0, 'with every file named, it passes') or diag($out);
}

done_testing;
