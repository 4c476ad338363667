#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# `make deb`: a Debian package of this tree (Debian 12 and 13), staged by
# `scripts/install.sh install` with PREFIX=/usr, so the package holds exactly
# what `make install` puts down. The unit is enabled on install and not
# started (contrib/debian/postinst).
#
# usage: scripts/make-deb.sh            (after make; writes build/deb/*.deb)
# Output: the path of the package on stdout's last line.
# Environment: ESN_BIN (default target/release/scx_esn).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$repo/build/deb
stage=$out/root
die() { echo "make-deb: $*" >&2; exit 1; }
for tool in dpkg-deb dpkg-shlibdeps; do
	command -v "$tool" >/dev/null || die "$tool is missing (apt-get install dpkg-dev)"
done

# The version is the binary's own (build.rs: Cargo's version and, from git,
# the commit), so the package and `scx_esn --version` never disagree and two
# builds of different trees never share a version. Debian reads a hyphen as
# the start of a packaging revision: 0.1.0-g<commit> becomes 0.1.0+g<commit>.
bin=${ESN_BIN:-$repo/target/release/scx_esn}
[[ -x $bin ]] || die "no binary at $bin: run make first"
version=$("$bin" --version | awk 'NR == 1 { print $2 }')
version=${version/-g/+g}
[[ $version =~ ^[0-9][0-9A-Za-z.+~]*$ ]] || die "$bin --version gave no usable version: '$version'"
arch=$(dpkg --print-architecture)

rm -rf "$stage"
mkdir -p "$stage/DEBIAN"
PREFIX=/usr SYSCONFDIR=/etc UNITDIR=/usr/lib/systemd/system DESTDIR=$stage \
	"$repo/scripts/install.sh" install >/dev/null
# As dh_strip does: no symbol table or build notes in a package's binary.
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/scx_esn"

doc=$stage/usr/share/doc/scx-esn
install -D -m 0644 "$repo/contrib/debian/copyright" "$doc/copyright"
{
	echo "scx-esn ($version) unstable; urgency=medium"
	echo
	echo "  * Built as scx_esn $("$bin" --version | awk 'NR == 1 { print $2, $3 }')."
	echo
	echo " -- scx_esn developers <scx-esn@users.noreply.github.com>  $(date -R -d "@$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)")"
} | gzip -9n >"$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

# bpftrace is only suggested (the scheduler does not need it), so lintian
# does not know the scripts' interpreter.
overrides=$stage/usr/share/lintian/overrides/scx-esn
mkdir -p "$(dirname "$overrides")"
echo 'scx-esn: unusual-interpreter bpftrace [usr/share/scx_esn/*]' >"$overrides"
chmod 0644 "$overrides"

# The libraries the binary links, as Debian names them (libc6, libelf1, ...).
mkdir -p "$out/shlibs/debian"
: >"$out/shlibs/debian/control"
depends=$(cd "$out/shlibs" && dpkg-shlibdeps -O "$stage/usr/bin/scx_esn" 2>/dev/null |
	sed -n 's/^shlibs:Depends=//p')
[[ -n $depends ]] || die "dpkg-shlibdeps found no dependencies for the binary"

size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@SIZE@|$size|" \
	-e "s|@DEPENDS@|$depends|" "$repo/contrib/debian/control.in" >"$stage/DEBIAN/control"
echo /etc/default/scx_esn >"$stage/DEBIAN/conffiles"
for script in postinst prerm postrm; do
	install -m 0755 "$repo/contrib/debian/$script" "$stage/DEBIAN/$script"
done

rm -f "$out"/scx-esn_*.deb
deb=$out/scx-esn_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
