#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# `make install` and `make uninstall` into a staging root (DESTDIR), as a
# packager runs them:
#   1. every file is where scripts/install.sh says, the binary executable;
#   2. systemd-analyze verify passes on the installed unit (inside the root);
#   3. the man pages render with man(1) and list the scheduler's options;
#   4. the bash completion loads and completes the subcommands; zsh and fish
#      scripts are there;
#   5. the installed binary's --version names the commit it was built from;
#   6. an edited /etc/default/scx_esn survives a reinstall and an uninstall;
#   7. uninstall leaves no other file behind.
#
# Usage: tests/host/install.sh   (root)
set -euo pipefail

source "$(dirname "$0")/lib.sh"
host_init install bin systemd-analyze man
root=$work/install-root
rm -rf "$root"
vars=(PREFIX=/usr UNITDIR=/usr/lib/systemd/system DESTDIR="$root")

make -s -C "$repo" install "${vars[@]}" >"$work/install.log" 2>&1 ||
	die "make install failed: $(tail -n3 "$work/install.log")"

expected=(
	usr/bin/scx_esn
	usr/lib/systemd/system/scx_esn.service
	etc/default/scx_esn
	usr/share/scx_esn/bt-run.sh
	usr/share/scx_esn/nvme-locality.bt
	usr/share/scx_esn/bpftrace-0.17/nvme-locality.bt
	usr/share/man/man8/scx_esn.8.gz
	usr/share/man/man8/scx_esn-observe.8.gz
	usr/share/bash-completion/completions/scx_esn
	usr/share/zsh/vendor-completions/_scx_esn
	usr/share/fish/vendor_completions.d/scx_esn.fish
)
missing=()
for f in "${expected[@]}"; do [[ -s $root/$f ]] || missing+=("$f"); done
ok=0
((${#missing[@]} == 0)) && [[ -x $root/usr/bin/scx_esn && -x $root/usr/share/scx_esn/bt-run.sh ]] && ok=1
check "1 files in place" "$ok" "$(find "$root" -type f | wc -l) files${missing:+; missing: ${missing[*]}}"

unit=$root/usr/lib/systemd/system/scx_esn.service
# systemd-analyze checks that ExecStart's binary exists and that man finds
# the Documentation= page: point both into the staging root (a copy of the
# unit whose ExecStart names the staged binary; MANPATH its man pages).
mkdir -p "$work/install-verify"
sed "s|^ExecStart=/usr/bin/scx_esn|ExecStart=$root/usr/bin/scx_esn|" "$unit" >"$work/install-verify/scx_esn.service"
rc=0
verify=$(MANPATH=$root/usr/share/man systemd-analyze verify "$work/install-verify/scx_esn.service" 2>&1) || rc=$?
rm -rf "$work/install-verify"
ok=0
((rc == 0)) && [[ -z $verify ]] && grep -qx 'ExecStart=/usr/bin/scx_esn $SCX_ESN_FLAGS' "$unit" && ok=1
check "2 systemd-analyze verify" "$ok" "exit $rc${verify:+: $(head -c 300 <<<"$verify")}; $(grep '^ExecStart' "$unit")"

page=$(MANWIDTH=100 man -l "$root/usr/share/man/man8/scx_esn.8.gz" 2>&1) || true
missing=()
for option in --threshold --numa-penalty --state-file --stats-group --kconfig --prometheus; do
	grep -q -- "$option" <<<"$page" || missing+=("$option")
done
ok=0
((${#missing[@]} == 0)) && grep -q '^scx_esn(8) ' <<<"$page" && ok=1
check "3 man page renders" "$ok" "$(wc -l <<<"$page") lines, $(ls "$root/usr/share/man/man8" | wc -l) pages${missing:+; missing: ${missing[*]}}"

words=$(bash -c 'source "$1"; COMP_WORDS=(scx_esn ""); COMP_CWORD=1; COMP_LINE="scx_esn "; COMP_POINT=8
	_scx_esn scx_esn "" scx_esn; printf "%s\n" "${COMPREPLY[@]}"' _ "$root/usr/share/bash-completion/completions/scx_esn" 2>&1) || true
ok=0
for w in observe profile top topology completions --threshold; do
	grep -qx -- "$w" <<<"$words" || continue
	ok=$((ok + 1))
done
check "4 bash completion" "$([[ $ok == 6 ]] && echo 1 || echo 0)" \
	"$ok of 6 expected words offered after 'scx_esn ' ($(wc -l <<<"$words") in all)"

version=$("$root/usr/bin/scx_esn" --version 2>&1) || true
commit=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || true)
ok=0
[[ -n $commit && $version == "scx_esn "*"-g$commit "*linux* ]] && ok=1
check "5 --version names the commit" "$ok" "'$version' (HEAD $commit)"

echo 'SCX_ESN_FLAGS="--threshold 4"' >>"$root/etc/default/scx_esn"
make -s -C "$repo" install "${vars[@]}" >>"$work/install.log" 2>&1
make -s -C "$repo" uninstall "${vars[@]}" >>"$work/install.log" 2>&1
left=$(cd "$root" && find . -type f | sort)
ok=0
[[ $left == ./etc/default/scx_esn ]] && grep -q -- '--threshold 4' "$root/etc/default/scx_esn" && ok=1
check "6 edited defaults kept" "$ok" "left after uninstall: ${left:-nothing}"

cp "$repo/contrib/systemd/scx_esn.default" "$root/etc/default/scx_esn"
make -s -C "$repo" uninstall "${vars[@]}" >>"$work/install.log" 2>&1
left=$(cd "$root" && find . -type f | sort)
check "7 uninstall leaves no file" "$([[ -z $left ]] && echo 1 || echo 0)" "left: ${left:-nothing}"
rm -rf "$root"

host_result
