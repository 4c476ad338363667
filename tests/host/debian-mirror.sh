#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# tests/debian-mirror.sh against made-up apt configurations: the mirror the
# download scripts use must be the machine's own Debian archive, whatever
# format its sources are in, never a public host chosen by us.
#   - one-line sources.list: options in brackets, a comment, a third-party
#     repository first, the security archive: the Debian archive is chosen;
#   - deb822 .sources: deb-src only, Enabled: no and security stanzas skipped;
#   - files apt ignores (no .list/.sources suffix) are ignored;
#   - nothing usable: exit 1 with a message naming ESN_DEBIAN_MIRROR;
#   - ESN_DEBIAN_MIRROR wins, its trailing slash dropped;
#   - this machine's own sources give an answer (reported only: a machine
#     may legitimately have none).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

expect() { # NAME WANT_RC WANT_OUT APT_DIR [ENV...]
	local name=$1 want_rc=$2 want=$3 dir=$4 out rc
	shift 4
	out=$(env "$@" APT_SOURCES_DIR="$dir" bash -c '. "$1"; debian_mirror' _ "$repo/tests/debian-mirror.sh" 2>"$tmp/err")
	rc=$?
	if [[ $rc == "$want_rc" && $out == "$want" ]] && { [[ $rc == 0 ]] || grep -q ESN_DEBIAN_MIRROR "$tmp/err"; }; then
		echo "PASS  $name: ${out:-$(cat "$tmp/err")}"
	else
		echo "FAIL  $name: exit $rc (want $want_rc), '$out' (want '$want'), stderr: $(cat "$tmp/err")"
		fails=$((fails + 1))
	fi
}

mkdir -p "$tmp/oneline/sources.list.d"
cat >"$tmp/oneline/sources.list" <<'EOF'
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] https://packages.example.com/apt cloud-sdk-bookworm main
# deb http://commented.example/debian bookworm main
deb http://security.debian.org/debian-security trixie-security main
deb http://mirror.local/debian/ trixie main contrib # the archive
EOF
expect "one-line sources" 0 http://mirror.local/debian "$tmp/oneline"

mkdir -p "$tmp/deb822/sources.list.d"
cat >"$tmp/deb822/sources.list.d/debian.sources" <<'EOF'
Types: deb-src
URIs: http://src.example/debian
Suites: bookworm

Types: deb
URIs: http://off.example/debian
Suites: bookworm
Enabled: no

# the security archive
Types: deb
URIs: http://sec.example/debian-security
Suites: bookworm-security

Types: deb deb-src
URIs: http://good.example/debian
Suites: bookworm bookworm-updates
Components: main
EOF
echo "deb http://ignored.example/debian sid main" >"$tmp/deb822/sources.list.d/x.list.disabled"
expect "deb822 sources" 0 http://good.example/debian "$tmp/deb822"

mkdir -p "$tmp/none/sources.list.d"
echo "deb http://ignored.example/debian sid main" >"$tmp/none/sources.list.d/old.list.save"
cat >"$tmp/none/sources.list.d/node.sources" <<'EOF'
Types: deb
URIs: https://deb.example.com/node_20.x
Suites: nodistro
EOF
expect "no Debian archive" 1 "" "$tmp/none"
expect "ESN_DEBIAN_MIRROR wins" 0 http://override.example/debian "$tmp/none" ESN_DEBIAN_MIRROR=http://override.example/debian/

if mine=$(bash -c '. "$1"; debian_mirror' _ "$repo/tests/debian-mirror.sh" 2>&1); then
	echo "info  this machine's mirror: $mine"
else
	echo "info  this machine has no Debian archive in its apt sources: $mine"
fi

((fails == 0)) && echo "debian-mirror: all passed" || echo "debian-mirror: $fails FAILED"
((fails == 0))
