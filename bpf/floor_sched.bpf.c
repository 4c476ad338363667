/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The sched_ext floor: a test instrument (tests/floor), never loaded by
 * scx_esn.
 *
 * It implements no scheduling callback at all, so the kernel's built-in
 * behaviour runs and no BPF program runs per event: a waking task goes to an
 * idle CPU found by the built-in idle tracking (straight to that CPU's local
 * queue), everything else waits in the kernel's global FIFO queue. That queue
 * is one per NUMA node since 6.12 and a CPU takes only from its own node's,
 * so no task crosses nodes except at a wake-up that finds an idle CPU there.
 * Whatever the benchmark measures for it beyond EEVDF, in the same boot, is
 * the cost of running under sched_ext at all on that machine: the floor under
 * scx_esn and under every peer. Its only program is ops.exit, which records
 * why the kernel unloaded it (an error or a stall) for the loader to report.
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

/* Why the kernel took the scheduler down, for the loader's exit message. */
void BPF_STRUCT_OPS(floor_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(floor_ops,
	       .exit = (void *)floor_exit,
	       .name = "esn_floor");
