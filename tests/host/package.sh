#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# `make deb`, inspected as an archive maintainer would:
#   1. it builds, and dpkg-deb -c lists the files `make install` puts down
#      with PREFIX=/usr (the binary, the unit, the defaults, man pages,
#      completions, scripts), all owned by root;
#   2. its control fields: Package scx-esn, a version naming the commit,
#      Depends on the libraries the binary links, the defaults a conffile;
#   3. lintian finds no error;
#   4. unpacked, its binary runs (--version) and its unit is enabled by the
#      postinst (deb-systemd-helper), not started.
# The VM edges test loads the packaged binary on a sched_ext kernel.
#
# Usage: tests/host/package.sh   (root)
set -euo pipefail

source "$(dirname "$0")/lib.sh"
host_init package bin dpkg-deb lintian

deb=$(make -s -C "$repo" deb 2>"$work/deb.err" | tail -n1) || true
[[ -f $deb ]] || die "make deb made no package: $(tail -n3 "$work/deb.err")"

contents=$(dpkg-deb -c "$deb")
missing=()
for f in ./usr/bin/scx_esn ./usr/lib/systemd/system/scx_esn.service ./etc/default/scx_esn \
	./usr/share/man/man8/scx_esn.8.gz ./usr/share/bash-completion/completions/scx_esn \
	./usr/share/scx_esn/bt-run.sh ./usr/share/doc/scx-esn/copyright; do
	grep -q " $f\$" <<<"$contents" || missing+=("$f")
done
not_root=$(awk '$2 != "root/root"' <<<"$contents" | head -n3)
ok=0
((${#missing[@]} == 0)) && [[ -z $not_root ]] && ok=1
check "1 contents" "$ok" "$(basename "$deb"): $(wc -l <<<"$contents") entries${missing:+; missing: ${missing[*]}}${not_root:+; not root: $not_root}"

field() { dpkg-deb -f "$deb" "$1"; }
commit=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo none)
ok=0
[[ $(field Package) == scx-esn && $(field Version) == *"+g$commit" && $(field Depends) == *libelf1* ]] &&
	dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/default/scx_esn && ok=1
check "2 control" "$ok" "Version $(field Version); Depends $(field Depends)"

# lintian exits non-zero on an error tag (its default --fail-on error) and
# when it cannot check the package at all.
rc=0
lint=$(lintian --tag-display-limit 0 "$deb" 2>&1) || rc=$?
errors=$(grep -c '^E:' <<<"$lint" || true)
check "3 lintian: no error" "$([[ $rc == 0 && $errors == 0 ]] && echo 1 || echo 0)" \
	"exit $rc, $errors errors, $(grep -c '^W:' <<<"$lint" || true) warnings$(grep -m3 '^[EW]:' <<<"$lint" | sed 's/^/; /' | tr -d '\n')"

root=$work/deb-root
rm -rf "$root"
mkdir -p "$root"
dpkg-deb -x "$deb" "$root"
version=$("$root/usr/bin/scx_esn" --version 2>&1) || true
# The postinst's enable, run against the unpacked tree as systemd would see it.
enabled=$(systemctl --root="$root" enable scx_esn.service >/dev/null 2>&1 &&
	find "$root/etc/systemd/system" -name scx_esn.service -printf '%P\n') || true
ok=0
[[ $version == "scx_esn "*"-g$commit "* && $enabled == *multi-user.target.wants/scx_esn.service* ]] &&
	grep -q 'deb-systemd-helper enable scx_esn.service' <(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./postinst) &&
	! dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./postinst | grep -v '^[[:space:]]*#' |
	grep -q 'systemctl.* start\|invoke.* start' && ok=1
check "4 unpacked: binary runs, unit enables, postinst starts nothing" "$ok" \
	"'$version'; enabled as $(tr '\n' ' ' <<<"$enabled" | tail -c 120)"
rm -rf "$root"

host_result
