#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Install what building scx_esn needs on Debian 12/13: clang >= 16 for the BPF
# side (Debian 12 ships clang-19), libelf/zlib/zstd for libbpf, the Rust
# lint components, and what the host tests and benchmarks run (fio, bpftrace,
# python3, util-linux's findmnt/lsblk, procps' pgrep, tmux for
# driving `scx_esn top`, man-db and systemd for checking what `make install`
# puts down, dpkg-dev and lintian for `make deb`, python3-pil and
# fonts-dejavu-core for drawing the demo's `top` screens). Idempotent: a
# machine that has everything only gets checked.
set -euo pipefail

packages=(clang-19 llvm-19 libelf-dev zlib1g-dev libzstd-dev pkg-config make
	fio bpftrace python3 util-linux procps tmux man-db systemd dpkg-dev lintian
	python3-pil fonts-dejavu-core)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "install-build-deps: installing ${missing[*]}"
	sudo_cmd=()
	((EUID == 0)) || sudo_cmd=(sudo)
	"${sudo_cmd[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

command -v cargo >/dev/null || {
	echo "install-build-deps: no cargo on PATH: install Rust (https://rustup.rs), 1.91 or later" >&2
	exit 1
}
if command -v rustup >/dev/null; then
	for c in rustfmt clippy; do
		rustup component list --installed 2>/dev/null | grep "^$c" >/dev/null || rustup component add "$c"
	done
fi
echo "install-build-deps: ok ($(clang-19 --version | head -1), $(cargo --version))"
