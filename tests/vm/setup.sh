#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Prepare everything the VM tests need, idempotently:
#   - Debian packages (qemu, kmod, fio, bpftrace, ...), only when one is missing;
#   - a Python venv build/venv with virtme-ng;
#   - a sched_ext-enabled Debian kernel (image + modules + config) from
#     trixie-backports, unpacked under build/vm/kernel/;
#   - build/vm/kernel.env with KVER, VMLINUZ, KCONFIG, MODDIR.
#
# Nothing outside the repository's build/ directory is written, except the
# Debian packages installed with apt-get and, only if ESN_INSTALL_HOST_MODULES=1,
# a symlink /lib/modules/<ver> (not needed: virtme-ng finds the modules next to
# the image in build/vm/kernel/).
#
# Environment:
#   ESN_KERNEL_VERSION  pin a kernel, e.g. "7.3.4+deb13-amd64" (or "7.3.4+deb13")
#   ESN_KERNEL_SUITE    Debian suite to take it from (default trixie-backports)
#   ESN_KERNEL_BUILD    a series to build instead (6.12: tests/vm/build-kernel.sh)
#   ESN_DEBIAN_MIRROR   Debian mirror (default: the one apt's own sources use,
#                       tests/debian-mirror.sh)
#   ESN_SKIP_APT=1      do not install Debian packages (check only)
#   ESN_INSTALL_HOST_MODULES=1  also symlink /lib/modules/<ver> to the unpacked tree
#   ESN_VM_DIR          where the kernel, image and results live (build/vm), so
#                       a second kernel can sit beside the first
#   ESN_REQUIRE_SCHED_EXT=0  accept a kernel without sched_ext (for the
#                       observe-only test on an older kernel, e.g. bookworm's 6.1)
# Exit status 3: the pinned kernel is not in the archive (any more).
set -euo pipefail
# No `producer | grep -q` here: grep -q exits at the first match, the producer
# may die of SIGPIPE, and pipefail then reads a found line as "not found".

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build="$repo/build"
vmdir=${ESN_VM_DIR:-$build/vm}
venv="$build/venv"
suite=${ESN_KERNEL_SUITE:-trixie-backports}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
# shellcheck source=tests/debian-mirror.sh
. "$repo/tests/debian-mirror.sh"

t0=$SECONDS
log() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: ERROR: %s\n' "$*" >&2; exit 1; }

[[ $(uname -m) == x86_64 ]] || die "only x86_64 hosts are supported (got $(uname -m))"
[[ $(id -u) == 0 ]] || die "must run as root (apt-get, qemu with /dev files, bpftrace in the guest)"

# ---------------------------------------------------------------- packages --
# Debian package -> a file it provides that we check for.
declare -A pkgs=(
	[qemu-system-x86]=/usr/bin/qemu-system-x86_64
	[kmod]=/usr/bin/kmod
	[cpio]=/usr/bin/cpio
	[busybox-static]=/bin/busybox
	[zstd]=/usr/bin/zstd
	[xz-utils]=/usr/bin/xz
	[fio]=/usr/bin/fio
	[bpftrace]=/usr/bin/bpftrace
	[stress-ng]=/usr/bin/stress-ng
	[rt-tests]=/usr/bin/cyclictest # hackbench and cyclictest, for the benchmark
	[python3-matplotlib]=/usr/share/doc/python3-matplotlib # the benchmark report's plots
	[numactl]=/usr/bin/numactl
	[bpftool]=/usr/sbin/bpftool # the verifier's instruction counts
	[python3-venv]=/usr/bin/python3
	[file]=/usr/bin/file
	[binutils]=/usr/bin/strings
	[iproute2]=/bin/ip # the NVMe/TCP test's wire and network namespace
	[iputils-ping]=/bin/ping
	[debian-archive-keyring]=$keyring
	[ca-certificates]=/etc/ssl/certs/ca-certificates.crt
	[util-linux]=/usr/bin/lscpu
	[procps]=/usr/bin/pgrep
	[coreutils]=/usr/bin/timeout
)
missing=()
for p in "${!pkgs[@]}"; do
	# dpkg status is the authority; the file check catches a half-removed package.
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null; then
		missing+=("$p")
		continue
	fi
	if [[ ! -e ${pkgs[$p]} ]]; then
		missing+=("$p")
	fi
done
if ((${#missing[@]})); then
	[[ ${ESN_SKIP_APT:-0} == 1 ]] && die "missing Debian packages: ${missing[*]} (ESN_SKIP_APT=1)"
	log "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	timeout 600 apt-get update -qq || die "apt-get update failed"
	timeout 1200 apt-get install -y -qq --no-install-recommends \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
		"${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
else
	log "Debian packages present"
fi

# -------------------------------------------------------------------- venv --
if [[ ! -x $venv/bin/vng ]] || ! "$venv/bin/vng" --version >/dev/null 2>&1; then
	log "creating venv $venv with virtme-ng"
	rm -rf "$venv"
	# The system interpreter, not whatever python3 is first on PATH (pyenv shims).
	/usr/bin/python3 -m venv "$venv" || die "python3 -m venv failed (python3-venv missing?)"
	timeout 600 "$venv/bin/pip" install -q --disable-pip-version-check \
		"virtme-ng${ESN_VIRTME_NG_SPEC:->=1.42}" || die "pip install virtme-ng failed"
fi
log "virtme-ng $("$venv/bin/vng" --version 2>&1 | awk '{print $NF; exit}')"

# ------------------------------------------------------------------ kernel --
# A kernel Debian does not ship with sched_ext (6.12): built, not downloaded.
if [[ -n ${ESN_KERNEL_BUILD:-} ]]; then
	exec bash "$here/build-kernel.sh"
fi
mkdir -p "$vmdir/debs" "$vmdir/apt/lists/partial" "$vmdir/apt/cache/archives/partial"
srclist="$vmdir/apt/sources.list"
# No mirror known counts as offline: a kernel already unpacked is still used.
mirror=''
if mirror=$(debian_mirror 2>"$vmdir/apt/mirror.err"); then
	printf 'deb [signed-by=%s] %s %s main\n' "$keyring" "$mirror" "$suite" >"$srclist"
else
	log "WARNING: $(cat "$vmdir/apt/mirror.err")"
fi
# A private apt: its own source list, lists and cache; the system's dpkg status
# is hidden so nothing installed on the host changes the resolution.
aptopts=(
	-o "Dir::Etc::SourceList=$srclist"
	-o "Dir::Etc::SourceParts=/dev/null"
	-o "Dir::State::Lists=$vmdir/apt/lists"
	-o "Dir::Cache=$vmdir/apt/cache"
	-o "Dir::State::status=/dev/null"
	-o "APT::Sandbox::User=root"
	-o "Debug::NoLocking=1"
	-o "Acquire::Retries=3"
)

have_kernel() { # $1 = KVER: is a complete unpacked kernel there?
	local d="$vmdir/kernel/usr/lib/modules/$1"
	[[ -f $d/vmlinuz.unsigned || -f $vmdir/kernel/boot/vmlinuz-$1 ]] &&
		[[ -f $d/config && -f $d/modules.dep && -d $d/kernel ]]
}

kver=${ESN_KERNEL_VERSION:-}
if [[ -n $kver && $kver != *-amd64 ]]; then kver="$kver-amd64"; fi
lists_ok=0
if [[ -z $mirror ]]; then
	: # said above
elif timeout 300 apt-get "${aptopts[@]}" update -qq 2>"$vmdir/apt/update.err"; then
	lists_ok=1
else
	log "WARNING: apt-get update of $suite failed: $(tr '\n' ' ' <"$vmdir/apt/update.err")"
fi

if [[ -z $kver ]]; then
	if ((lists_ok)); then
		# linux-image-amd64 Depends: ..., linux-image-7.3.4+deb13-amd64 (= ...), ...
		dep=$(apt-cache "${aptopts[@]}" show linux-image-amd64 2>/dev/null |
			awk -F': ' '/^Depends:/ {print $2; exit}')
		kver=$(tr ',' '\n' <<<"$dep" | sed -n 's/^ *linux-image-\([0-9][^ ]*-amd64\) .*/\1/p' | head -n1)
		[[ -n $kver ]] || die "could not resolve the kernel version from linux-image-amd64 in $suite (Depends: $dep)"
		log "resolved current kernel of $suite: $kver"
	elif [[ -f $vmdir/kernel.env ]]; then
		# shellcheck disable=SC1091
		kver=$(. "$vmdir/kernel.env" && echo "${KVER:?}")
		log "WARNING: offline; reusing the kernel already unpacked: $kver"
	else
		die "cannot reach ${mirror:-a Debian mirror} ($suite) and no kernel is unpacked yet"
	fi
else
	log "kernel pinned by ESN_KERNEL_VERSION: $kver"
fi

if have_kernel "$kver"; then
	log "kernel $kver already unpacked"
else
	((lists_ok)) || die "kernel $kver not unpacked and $suite is unreachable"
	# Recent Debian kernels are split: linux-binary-unsigned-<ver> (the image),
	# linux-modules-<ver> (modules), linux-base-<ver> (config, System.map).
	# Older ones ship everything in linux-image-<ver>-unsigned, or in the
	# signed linux-image-<ver> (the signature does not matter to qemu).
	avail() { apt-cache "${aptopts[@]}" show "$1" 2>/dev/null | grep '^Package:' >/dev/null; }
	want=()
	if avail "linux-binary-unsigned-$kver"; then
		want=("linux-binary-unsigned-$kver" "linux-modules-$kver")
		avail "linux-base-$kver" && want+=("linux-base-$kver")
	elif avail "linux-image-$kver-unsigned"; then
		want=("linux-image-$kver-unsigned")
	elif avail "linux-image-$kver" &&
		! apt-cache "${aptopts[@]}" show "linux-image-$kver" | grep "^Depends:.*linux-binary-$kver" >/dev/null; then
		want=("linux-image-$kver")
	else
		printf 'setup: ERROR: %s\n' "kernel $kver is not in $suite (any more): no linux-binary-unsigned-$kver, linux-image-$kver-unsigned or linux-image-$kver" >&2
		exit 3
	fi
	log "downloading ${want[*]} into build/vm/debs/"
	# Only the debs of this version stay; older ones are removed.
	find "$vmdir/debs" -maxdepth 1 -name '*.deb' ! -name "*${kver}_*" -delete
	(cd "$vmdir/debs" && timeout 900 apt-get "${aptopts[@]}" download -q "${want[@]}") ||
		die "apt-get download ${want[*]} failed"
	rm -rf "$vmdir/kernel.tmp"
	mkdir -p "$vmdir/kernel.tmp"
	for p in "${want[@]}"; do
		deb=$(find "$vmdir/debs" -maxdepth 1 -name "${p}_*.deb" | sort | tail -n1)
		log "unpacking $(basename "$deb")"
		dpkg-deb -x "$deb" "$vmdir/kernel.tmp"
	done
	d="$vmdir/kernel.tmp/usr/lib/modules/$kver"
	if [[ ! -d $d && -d $vmdir/kernel.tmp/lib/modules/$kver ]]; then # not usr-merged
		mkdir -p "$vmdir/kernel.tmp/usr/lib/modules"
		mv "$vmdir/kernel.tmp/lib/modules/$kver" "$d"
	fi
	[[ -d $d ]] || die "unpacked packages have no usr/lib/modules/$kver"
	# Older layouts keep config and image in /boot.
	if [[ ! -f $d/config && -f $vmdir/kernel.tmp/boot/config-$kver ]]; then
		cp "$vmdir/kernel.tmp/boot/config-$kver" "$d/config"
	fi
	if [[ ! -f $d/vmlinuz.unsigned && -f $vmdir/kernel.tmp/boot/vmlinuz-$kver ]]; then
		ln -s "../../../../boot/vmlinuz-$kver" "$d/vmlinuz.unsigned"
	fi
	# The package's postinst would run depmod; do it on the unpacked tree.
	# depmod -b wants <base>/lib/modules/<ver>.
	depmod -a -b "$vmdir/kernel.tmp/usr" "$kver" || die "depmod on the unpacked modules failed"
	# Keep one kernel: replace the previous tree atomically enough.
	rm -rf "$vmdir/kernel"
	mv "$vmdir/kernel.tmp" "$vmdir/kernel"
	have_kernel "$kver" || die "unpacked kernel $kver is incomplete"
fi

rm -f "$vmdir/kernel.env" # written again only if the kernel passes the checks
moddir="$vmdir/kernel/usr/lib/modules/$kver"
vmlinuz="$moddir/vmlinuz.unsigned"
kconfig="$moddir/config"
[[ -f $vmlinuz ]] || die "kernel image not found: $vmlinuz"
[[ -f $kconfig ]] || die "kernel config not found: $kconfig"
if [[ ${ESN_REQUIRE_SCHED_EXT:-1} != 0 ]] && ! grep -qx 'CONFIG_SCHED_CLASS_EXT=y' "$kconfig"; then
	die "kernel $kver has no sched_ext: $(grep -m1 'CONFIG_SCHED_CLASS_EXT' "$kconfig" || echo 'CONFIG_SCHED_CLASS_EXT absent') in $kconfig; pin another one with ESN_KERNEL_VERSION"
fi
for opt in CONFIG_DEBUG_INFO_BTF=y CONFIG_BPF_SYSCALL=y CONFIG_NUMA=y; do
	grep -qx "$opt" "$kconfig" || die "kernel $kver lacks $opt"
done
[[ -n $(find "$moddir/kernel/drivers/nvme" -name 'nvme.ko*' -print -quit 2>/dev/null) ]] ||
	die "kernel $kver has no nvme module in $moddir"

if [[ ${ESN_INSTALL_HOST_MODULES:-0} == 1 ]]; then
	link=/lib/modules/$kver
	if [[ -L $link || ! -e $link ]]; then
		mkdir -p /lib/modules
		ln -sfn "$moddir" "$link"
		log "symlinked $link -> $moddir"
	else
		log "$link exists and is not a symlink; left alone"
	fi
fi

cat >"$vmdir/kernel.env.tmp" <<EOF
# written by tests/vm/setup.sh; sourced by tests/vm/run-in-vm.sh
KVER=$kver
VMLINUZ=$vmlinuz
KCONFIG=$kconfig
MODDIR=$moddir
KSUITE=$suite
EOF
mv "$vmdir/kernel.env.tmp" "$vmdir/kernel.env"

log "kernel: $kver ($(grep -m1 -x "CONFIG_SCHED_CLASS_EXT=y" "$kconfig" || echo "no sched_ext")) from $suite"
log "wrote ${vmdir#"$repo"/}/kernel.env; done in $((SECONDS - t0)) s"
