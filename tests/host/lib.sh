# SPDX-License-Identifier: GPL-2.0-only
#
# What every host test starts with; sourced, not run.
#   host_init NAME [TOOL...]  sets repo, bin (ESN_BIN or the release build)
#                             and work (build/host-test), defines die(), and
#                             stops with exit 2 unless we are root and each
#                             TOOL is on PATH ("bin" asks for the binary).
#   host_disk                 sets source and disk: the block device and the
#                             whole disk holding $work, which fio then reads.
#   check NAME OK DETAIL      one PASS or FAIL line (OK is 1 or not), counted
#                             in pass and fail; after a FAIL it calls the
#                             function named by ON_FAIL, if set, to show more.
#   host_result               the closing line; status 0 only if none failed.

host_init() {
	local tool
	test_name=$1
	shift
	repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	bin=${ESN_BIN:-$repo/target/release/scx_esn}
	work=$repo/build/host-test
	mkdir -p "$work"
	[[ $(id -u) == 0 ]] || die "needs root (BPF)"
	for tool in "$@"; do
		if [[ $tool == bin ]]; then
			[[ -x $bin ]] || die "no binary at $bin: run make build"
		else
			command -v "$tool" >/dev/null || die "$tool is missing (apt-get install $tool)"
		fi
	done
}

die() {
	echo "${test_name:-host test} host test: $*" >&2
	exit 2
}

host_disk() {
	source=$(findmnt -no SOURCE -T "$work")
	[[ -b $source ]] || die "$work is on $source, not a block device: run from a disk-backed checkout"
	disk=$(lsblk -no PKNAME "$source" | head -n1)
	[[ -n $disk ]] || disk=$(basename "$source")
}

pass=0 fail=0
check() {
	if [[ $2 == 1 ]]; then
		echo "PASS $1: $3"
		pass=$((pass + 1))
	else
		echo "FAIL $1: $3"
		fail=$((fail + 1))
		if [[ -n ${ON_FAIL:-} ]]; then "$ON_FAIL"; fi
	fi
	return 0
}

host_result() {
	echo "$test_name host test: $pass passed, $fail failed"
	((fail == 0))
}
