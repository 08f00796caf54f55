package PlxdTool;
# What the stand-alone test tools (tests/soak, tests/leakcheck) share:
# building a tree, starting plxd on its `listening on` line and stopping it
# by PID (PlxdServer underneath), their progress lines and small file helpers. A tool names itself
# (`soak`, `leakcheck`) so that its messages and logs say which one spoke.
#
#   my $dir = PlxdTool::cmake_build('soak', $src, "$src/build-release", '-DCMAKE_BUILD_TYPE=Release');
#   my ($pid, $url) = PlxdTool::start_plxd('soak', $plxd, $workdir, timeout => 30);
#   my $status = PlxdTool::stop_plxd('soak', $pid, 30);   # plxd's wait status
#
# The integration tests use PlxdTest instead, which ties a plxd to Test::More.

use strict;
use warnings;
use Exporter 'import';
use File::Path qw(make_path);
use POSIX qw(strftime);
use PlxdServer;

our @EXPORT_OK = qw(say_step read_text write_text parse_duration);

sub say_step { printf "[%s] %s\n", strftime('%H:%M:%S', localtime), $_[0] }

sub read_text {
    my ($path) = @_;
    open my $fh, '<', $path or return '';
    local $/;
    return scalar(<$fh>) // '';
}

sub write_text {
    my ($path, $text, $mode) = @_;
    open my $fh, '>', $path or die "cannot write $path: $!\n";
    print $fh $text;
    close $fh or die "cannot write $path: $!\n";
    chmod $mode, $path if defined $mode;
}

# "90", "90s", "1.5m", "500ms", "1h": seconds, or undef.
sub parse_duration {
    my ($text) = @_;
    my ($n, $unit) = $text =~ /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/ or return;
    my $s = $n * { ms => 0.001, s => 1, m => 60, h => 3600 }->{ $unit // 's' };
    return $s > 0 ? $s : undef;
}

# Configures (with @cmake) and builds src in dir, quietly; on failure shows
# the end of the log and dies. Returns dir.
sub cmake_build {
    my ($tool, $src, $dir, @cmake) = @_;
    make_path($dir);
    say_step("building $dir");
    my $log = "$dir/$tool-build.log";
    my $rc = system("cmake -S '$src' -B '$dir' @cmake >'$log' 2>&1 && cmake --build '$dir' -j2 >>'$log' 2>&1");
    if ($rc != 0) {
        system('tail', '-n', '30', $log);
        die "tests/$tool: the build failed (log: $log)\n";
    }
    return $dir;
}

# Starts plxd on dir/plxd.conf (through PlxdServer, as the integration tests
# and bench/run do) in a process group of its own (Ctrl-C reaches the tool,
# which stops plxd itself), stderr to dir/stderr.log, with env added to its
# environment. Waits up to timeout seconds for its `listening on` line.
# Returns (pid, base URL); dies with plxd's logs if it did not start (after
# stopping it).
my %server;    # pid => PlxdServer, until stopped

sub start_plxd {
    my ($tool, $plxd, $dir, %o) = @_;
    my $srv = eval {
        PlxdServer->start(name => 'plxd', cmd => [$plxd, '--config', "$dir/plxd.conf"],
            stderr => "$dir/stderr.log", env => $o{env}, session => 'pgrp', timeout => $o{timeout} // 30);
    };
    die "tests/$tool: " . ($@ =~ s/\n*$/:\n/r) . read_text("$dir/error.log") . read_text("$dir/stderr.log")
        unless $srv;
    $server{ $srv->pid } = $srv;
    return ($srv->pid, $srv->base);
}

# SIGTERM, then up to grace seconds for a graceful exit (polled), then
# SIGKILL. Returns plxd's wait status.
sub stop_plxd {
    my ($tool, $pid, $grace) = @_;
    my $srv = delete $server{$pid} or die "tests/$tool: plxd $pid was not started by start_plxd\n";
    return $srv->stop(grace => $grace, on_kill => sub {
        print STDERR "tests/$tool: plxd did not stop within $grace s of SIGTERM: killing it\n";
    });
}

1;
