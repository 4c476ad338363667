#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# `make demo`: set up the VM (tests/vm/setup.sh), boot the 2-node NUMA guest
# with an NVMe on node 1 and show scx_esn placing a real fio load, against the
# default scheduler on the same load (tests/vm/guest-demo.sh).
# Output: the guest log on stdout; files in build/vm/results/demo/.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
[[ -x $repo/target/release/scx_esn ]] || { echo "demo: build first (make)" >&2; exit 1; }
bash "$here/setup.sh"
out=$repo/build/vm/results/demo
rm -rf "$out"
mkdir -p "$out"
bash "$here/run-in-vm.sh" "$here/guest-demo.sh" "$out" "$@"
