#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# `make demo`: set up the VM (tests/vm/setup.sh), boot the 2-node NUMA guest
# with an NVMe on node 1 and show scx_esn placing a real fio load, against the
# default scheduler on the same load (tests/vm/guest-demo.sh).
# Output: the guest log on stdout; files in build/vm/results/demo/, among them
# top-{nodes,devices,tasks}.png, the guest's `scx_esn top` screens drawn by
# scripts/render-screen.py.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
[[ -x $repo/target/release/scx_esn ]] || { echo "demo: build first (make)" >&2; exit 1; }
bash "$here/setup.sh"
out=$repo/build/vm/results/demo
rm -rf "$out"
mkdir -p "$out"
rc=0
bash "$here/run-in-vm.sh" "$here/guest-demo.sh" "$out" "$@" || rc=$?
for screen in "$out"/top-*.ansi; do
	[[ -s $screen ]] || continue
	/usr/bin/python3 "$repo/scripts/render-screen.py" "$screen" "${screen%.ansi}.png" ||
		echo "demo: $screen could not be drawn (python3-pil and fonts-dejavu-core: scripts/install-build-deps.sh)" >&2
done
exit "$rc"
