#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# A small Linux 6.12 with sched_ext and BTF, built from Debian's own
# linux-source-6.12 (Debian's 6.12 images are built without sched_ext, and
# 6.12 is the oldest kernel scx_esn claims). Everything the VM tests need is
# built in (no modules): virtme-ng's minimal config (`vng --kconfig`) plus
# sched_ext, BPF, BTF, NUMA, NVMe, block tracepoints and CPU hotplug.
#
# The kernel is cached outside the clone, keyed by the source package's
# version, so CI on the same machine builds it once (and again only when the
# cached config lacks one of the `required` items below):
#   ${ESN_KERNEL_CACHE:-~/.cache/scx_esn/kernels}/linux-<version>/{bzImage,config,build.log}
# The source is downloaded and unpacked under the clone's build/ tree. Then
# $ESN_VM_DIR/kernel.env (default build/vm-6.12) points run-in-vm.sh at it.
#
# Usage: tests/vm/build-kernel.sh   (root; after tests/vm/setup.sh's packages
#        and venv; run.sh calls it when ESN_KERNEL_BUILD=6.12)
# Environment: ESN_KERNEL_BUILD (6.12), ESN_KERNEL_SOURCE_SUITE (trixie),
#   ESN_DEBIAN_MIRROR, ESN_KERNEL_CACHE, ESN_VM_DIR, ESN_BUILD_JOBS (nproc).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
series=${ESN_KERNEL_BUILD:-6.12}
suite=${ESN_KERNEL_SOURCE_SUITE:-trixie}
vmdir=${ESN_VM_DIR:-$repo/build/vm-$series}
cache=${ESN_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/scx_esn/kernels}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
# shellcheck source=tests/debian-mirror.sh
. "$repo/tests/debian-mirror.sh"

log() { printf 'build-kernel: %s\n' "$*"; }
die() { printf 'build-kernel: ERROR: %s\n' "$*" >&2; exit 1; }
t0=$SECONDS

# virtme-ng's minimal guest config (x86_64's defconfig underneath), then what
# scx_esn and its tests use, without what they do not: graphics (i915 alone is
# a tenth of the build) and sound.
items=(
	CONFIG_SCHED_CLASS_EXT=y CONFIG_BPF=y CONFIG_BPF_SYSCALL=y CONFIG_BPF_JIT=y
	CONFIG_BPF_JIT_ALWAYS_ON=y CONFIG_BPF_EVENTS=y CONFIG_DEBUG_INFO=y
	CONFIG_DEBUG_INFO_DWARF5=y CONFIG_DEBUG_INFO_BTF=y CONFIG_DEBUG_INFO_REDUCED=n
	CONFIG_FTRACE=y CONFIG_FUNCTION_TRACER=y CONFIG_KPROBES=y CONFIG_KPROBE_EVENTS=y
	CONFIG_NUMA=y CONFIG_X86_64_ACPI_NUMA=y CONFIG_ACPI_NUMA=y
	CONFIG_BLK_DEV_NVME=y CONFIG_NVME_CORE=y CONFIG_PCI=y CONFIG_PCIEPORTBUS=y
	CONFIG_HOTPLUG_PCI=y CONFIG_HOTPLUG_PCI_PCIE=y CONFIG_HOTPLUG_CPU=y
	CONFIG_BLK_DEBUG_FS=y CONFIG_CGROUPS=y CONFIG_CPUSETS=y CONFIG_CGROUP_SCHED=y
	CONFIG_IKCONFIG=y CONFIG_IKCONFIG_PROC=y CONFIG_MODULES=y
	CONFIG_DRM=n CONFIG_AGP=n CONFIG_SOUND=n
)
# What the tests cannot do without; the build checks its config has them.
required=(CONFIG_SCHED_CLASS_EXT=y CONFIG_DEBUG_INFO_BTF=y CONFIG_BLK_DEV_NVME=y CONFIG_NUMA=y)
# A cached kernel serves while its config has them: a kernel built before the
# list turned graphics and sound off still serves (and CI keeps its cache).
cache_serves() {
	local dir=$1 i
	[[ -f $dir/bzImage && -f $dir/config ]] || return 1
	for i in "${required[@]}"; do
		grep -qx "$i" "$dir/config" || {
			log "the cached kernel in $dir lacks $i: building anew"
			return 1
		}
	done
}

# ---- what to build: the source package's version in the suite -----------------
mkdir -p "$vmdir/apt/lists/partial" "$vmdir/apt/cache/archives/partial" "$vmdir/src"
srclist=$vmdir/apt/sources.list
mirror=$(debian_mirror) || die "no Debian mirror known"
printf 'deb [signed-by=%s] %s %s main\n' "$keyring" "$mirror" "$suite" >"$srclist"
aptopts=(
	-o "Dir::Etc::SourceList=$srclist" -o "Dir::Etc::SourceParts=/dev/null"
	-o "Dir::State::Lists=$vmdir/apt/lists" -o "Dir::Cache=$vmdir/apt/cache"
	-o "Dir::State::status=/dev/null" -o "APT::Sandbox::User=root"
	-o "Debug::NoLocking=1" -o "Acquire::Retries=3"
)
pkg=linux-source-$series
version=''
if timeout 300 apt-get "${aptopts[@]}" update -qq 2>"$vmdir/apt/update.err"; then
	version=$(apt-cache "${aptopts[@]}" show "$pkg" 2>/dev/null | awk '/^Version:/ { print $2; exit }')
fi
if [[ -z $version ]]; then
	# Offline or gone from the suite: the newest build already cached will do.
	cached=$(find "$cache" -maxdepth 1 -name "linux-$series.*" -type d 2>/dev/null | sort -V | tail -n1)
	[[ -n $cached && -f $cached/bzImage ]] || die "$pkg not found in $suite ($(tr '\n' ' ' <"$vmdir/apt/update.err")) and nothing cached in $cache"
	log "WARNING: $pkg not resolvable in $suite; using the cached $(basename "$cached")"
else
	cached=$cache/linux-$version
fi

# ---- build it unless cached ---------------------------------------------------
if cache_serves "$cached"; then
	log "cached: $cached"
else
	log "building $pkg $version (cached afterwards in $cached)"
	# The kernel's build needs these; pahole makes the BTF sched_ext requires.
	need=()
	for p in bc bison flex libelf-dev libssl-dev dwarves xz-utils cpio; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null || need+=("$p")
	done
	if ((${#need[@]})); then
		log "installing ${need[*]}"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null ||
			die "apt-get install ${need[*]} failed"
	fi
	log "pahole $(pahole --version)"
	deb=$(find "$vmdir/src" -maxdepth 1 -name "${pkg}_${version//:/%3a}_*.deb" | head -n1)
	if [[ -z $deb ]]; then
		find "$vmdir/src" -maxdepth 1 -name '*.deb' -delete
		(cd "$vmdir/src" && timeout 900 apt-get "${aptopts[@]}" download -q "$pkg") ||
			die "apt-get download $pkg failed"
		deb=$(find "$vmdir/src" -maxdepth 1 -name "${pkg}_*.deb" | head -n1)
	fi
	rm -rf "$vmdir/src/unpacked" "$vmdir/src/linux"
	dpkg-deb -x "$deb" "$vmdir/src/unpacked"
	tarball=$(find "$vmdir/src/unpacked/usr/src" -maxdepth 1 -name "$pkg.tar.*" | head -n1)
	[[ -n $tarball ]] || die "no $pkg.tar.* in $deb"
	mkdir -p "$vmdir/src/linux"
	tar -xf "$tarball" -C "$vmdir/src/linux" --strip-components=1
	rm -rf "$vmdir/src/unpacked"
	cd "$vmdir/src/linux"
	configitems=()
	for i in "${items[@]}"; do configitems+=(--configitem "$i"); done
	# vng runs virtme-configkernel from PATH.
	PATH="$repo/build/venv/bin:$PATH" vng --kconfig "${configitems[@]}" >"$vmdir/src/kconfig.log" 2>&1 ||
		die "vng --kconfig failed: $(tail -n5 "$vmdir/src/kconfig.log")"
	for i in "${required[@]}"; do
		grep -qx "$i" .config || die "the config lost $i (a dependency missing?)"
	done
	grep -qx CONFIG_DRM=y .config && log "WARNING: CONFIG_DRM stayed on (something selects it): the build takes longer"
	jobs=${ESN_BUILD_JOBS:-$(nproc)}
	log "make -j$jobs bzImage (a long while on 2 cores; log: $vmdir/src/build.log)"
	tb=$SECONDS
	make -j"$jobs" bzImage >"$vmdir/src/build.log" 2>&1 ||
		die "the kernel build failed: $(tail -n 15 "$vmdir/src/build.log")"
	mkdir -p "$cached.tmp"
	cp arch/x86/boot/bzImage "$cached.tmp/bzImage"
	cp .config "$cached.tmp/config"
	cp "$vmdir/src/build.log" "$cached.tmp/build.log"
	echo "$(make -s kernelrelease) built in $((SECONDS - tb)) s with $jobs jobs" >"$cached.tmp/built"
	rm -rf "$cached"
	mv "$cached.tmp" "$cached"
	cd "$repo"
	rm -rf "$vmdir/src/linux" # 1.5 GB of objects; the image is cached
	log "$(cat "$cached/built")"
fi

# ---- point the VM at it -------------------------------------------------------
kver=$(awk '{ print $1; exit }' "$cached/built")
cat >"$vmdir/kernel.env.tmp" <<EOF
# written by tests/vm/build-kernel.sh; sourced by tests/vm/run-in-vm.sh
KVER=$kver
VMLINUZ=$cached/bzImage
KCONFIG=$cached/config
MODDIR=
KSUITE="built from $pkg ${version:-cached} ($suite)"
EOF
mv "$vmdir/kernel.env.tmp" "$vmdir/kernel.env"
log "kernel $kver ready in $((SECONDS - t0)) s: $cached"
