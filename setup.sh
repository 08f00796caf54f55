#!/bin/sh
# The README's two commands, for a fresh Debian 12 machine, as root:
#   ./setup.sh run    install what is missing, build, start plxd on conf/plxd.conf
#   ./setup.sh test   install what is missing, build, run the whole test suite
#                     (warnings as errors), then again under ASan+UBSan, then
#                     the leak check (tests/leakcheck)
set -eu
cd "$(dirname "$0")"

# Build and run: compiler, CMake, libmicrohttpd, libinih, libperl, libsystemd
# (socket activation and readiness under systemd), CGI.pm
# (no longer in core Perl), the system's mime.types; Mojolicious, Dancer2 and
# Plack for cgi-bin's framework samples.
RUN_PACKAGES="build-essential cmake pkg-config git libmicrohttpd-dev libinih-dev libperl-dev
  libsystemd-dev perl libcgi-pm-perl media-types libmojolicious-perl libdancer2-perl libplack-perl"
# Tests: clang's libFuzzer runtime for the fuzz targets, the load tools;
# gnuplot and fonts for bench/run's chart, headless Chromium for the front page,
# valgrind for tests/leakcheck; the Perl web libraries that
# tests/integration/compat.t runs as .pl and .plx (with the frameworks above),
# CGI::Fast and FCGI for FastCGI-style scripts (CGI::Carp comes with CGI.pm);
# cvsweb, a real CGI application whose #! line asks for taint checks
# (tests/integration/perl_taint.t runs it as .pl and .plx over a CVS repository);
# groff for the install test, which renders the man pages with warnings on;
# clang-format for the format check (tests/CMakeLists.txt, doc/format);
# Catalyst, Web::Simple and Plack's Session and Deflater middleware, whose apps
# tests/integration/psgi_apps.t compares under plxd and plackup.
TEST_PACKAGES="clang libclang-rt-14-dev clang-format apache2-utils wrk hyperfine curl nginx-light
  gnuplot-nox fonts-dejavu-core chromium chromium-driver valgrind groff-base
  libcgi-application-perl libhtml-template-perl libcgi-session-perl libcgi-formbuilder-perl
  libtemplate-perl libcgi-fast-perl libfcgi-perl cvsweb
  libcatalyst-perl libweb-simple-perl libplack-middleware-session-perl
  libplack-middleware-deflater-perl strace"

install_missing() {
	missing=""
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
			|| missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	echo "== installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	# Servers among them (nginx for the balancer test) must not start as
	# system services: tests start their own, on loopback ports.
	policy=/usr/sbin/policy-rc.d
	made_policy=""
	if [ ! -e $policy ]; then
		printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy && made_policy=1
	fi
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing
	[ -n "$made_policy" ] && rm -f $policy
	return 0
}

stage_start=0
stage() {
	now=$(date +%s)
	[ "$stage_start" -ne 0 ] && echo "== stage took $((now - stage_start)) s"
	stage_start=$now
	[ $# -gt 0 ] && echo "== $*"
	return 0
}

build() { # build-dir cmake-options...
	dir=$1
	shift
	cmake -S . -B "$dir" "$@" >/dev/null
	cmake --build "$dir" -j"$(nproc)"
}

case "${1:-}" in
run)
	# shellcheck disable=SC2086
	install_missing $RUN_PACKAGES
	build build -DCMAKE_BUILD_TYPE=Release
	echo "== starting plxd; open the URL it prints (Ctrl-C stops it)"
	exec build/plxd --config conf/plxd.conf
	;;
test)
	stage "installing packages"
	# shellcheck disable=SC2086
	install_missing $RUN_PACKAGES $TEST_PACKAGES
	stage "building (warnings are errors)"
	build build -DPLXD_WERROR=ON
	stage "running the test suite"
	(cd build && ctest --output-on-failure --no-tests=error)
	stage "building with ASan+UBSan"
	build build-asan -DPLXD_WERROR=ON -DPLXD_SANITIZE=ON
	stage "running the test suite under ASan+UBSan"
	# The install test builds a separate, non-sanitized tree: run above.
	(cd build-asan && ctest --output-on-failure --no-tests=error -E 'integration/install')
	stage "leak check: plxd under LeakSanitizer, its workers under valgrind, mixed load"
	tests/leakcheck
	stage
	echo "== all tests passed"
	;;
*)
	echo "usage: $0 run|test" >&2
	exit 2
	;;
esac
