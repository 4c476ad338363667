/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The NUMA lab's remote-access penalty: a test instrument (tests/lab), never
 * loaded by scx_esn.
 *
 * An emulator has no interconnect, so a block request submitted from a CPU on
 * another node than its disk's costs nothing extra and locality can only
 * cost. This program gives remote requests the cost real hardware charges:
 * right after the request has been handed to the driver's start path
 * (fexit of blk_mq_start_request), while the submitting task still runs on
 * the submitting CPU, it spins for the configured time when that CPU's node
 * differs from the disk's home node. So the cost lands where it lands on real
 * hardware:
 *   - on the remote CPU's time (the submitter spins, it does not sleep);
 *   - inside the request's service time: the block_rq_issue tracepoint (and
 *     everybody's issue timestamp) fired before the spin, the completion
 *     comes after it, so fio's completion latency, bpftrace and scx_esn's
 *     own device-latency histograms all see it.
 *
 * Where fexit of blk_mq_start_request cannot attach, userspace uses the
 * block_rq_issue tracepoint instead: same spin, but observers that attached
 * to that tracepoint after the lab take their issue timestamp after it.
 *
 * Userspace fills the CPU -> node table before load, the disk -> node map
 * and the per (disk node, submitting node) spin times before attach; with
 * --factor it rewrites the spin times once more after measuring with the
 * penalty in place.
 */
#include <scx/common.bpf.h>

#include "intf.h"

char _license[] SEC("license") = "GPL";

/* Node of each CPU id; CPUs past the table count as node 0. */
const volatile u8 lab_cpu_node[ESN_MAX_CPUS];
/*
 * Spin in ns for a request to a disk on node D submitted from node S, at
 * [D * ESN_MAX_NODES + S]; 0 on the diagonal (local) and for pairs that are
 * not penalised. A map, not rodata: --factor refines it while attached.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ESN_MAX_NODES * ESN_MAX_NODES);
	__type(key, u32);
	__type(value, u64);
} lab_spin_ns SEC(".maps");

/* Whole-disk dev_t ((major << 20) | minor) -> its home node. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ESN_MAX_DEVICES);
	__type(key, u32);
	__type(value, u8);
} lab_disk_node SEC(".maps");

/* Per CPU, summed by userspace for the exit report. */
struct lab_counts {
	u64 local;
	u64 remote;
	u64 spun_ns;
	u64 spin_capped;
	/*
	 * Spins that ran more than a tenth over their time: a vCPU preempted by
	 * its host (or an interrupt storm) shows here, a spin that is wrong for
	 * every request shows as all of them.
	 */
	u64 spin_late;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct lab_counts);
} lab_counts SEC(".maps");

/*
 * bpf_loop's own ceiling. Each iteration is a batch of busy work and one clock
 * read, so this bounds one spin at seconds: far above any penalty the lab is
 * meant for.
 */
#define LAB_SPIN_MAX_ITERS (1 << 23)

/*
 * Busy iterations between two clock reads. In the VM the guest's clocksource
 * is the emulated HPET: every read is an MMIO exit that takes qemu's global
 * lock, the same lock the emulated NVMe needs. A spin that read the clock in
 * a tight loop would slow the device model down for everyone, not only delay
 * its own request; in batches it reads the clock a few hundred times per ms
 * under TCG and costs well under a microsecond of overshoot on real hardware.
 */
#define LAB_SPIN_BATCH 256

struct spin_ctx {
	u64 until_ns;
	u64 sink;
};

static long spin_step(u64 index, void *data)
{
	struct spin_ctx *ctx = data;
	u64 x = ctx->sink;

	for (int i = 0; i < LAB_SPIN_BATCH; i++) {
		x += i;
		barrier_var(x);
	}
	ctx->sink = x;
	/* 1 ends bpf_loop. */
	return bpf_ktime_get_ns() >= ctx->until_ns;
}

static __always_inline u8 node_of_cpu(u32 cpu)
{
	const volatile u8 *node = MEMBER_VPTR(lab_cpu_node, [cpu]);

	return node ? *node : 0;
}

static __always_inline u64 spin_ns_for(u8 disk_node, u8 submit_node)
{
	u32 idx = (u32)disk_node * ESN_MAX_NODES + submit_node;
	u64 *ns = bpf_map_lookup_elem(&lab_spin_ns, &idx);

	return ns ? *ns : 0;
}

/*
 * The submitting CPU is the one whose software queue the request came from:
 * a request dispatched later by a kblockd worker still counts for the CPU
 * (and node) that submitted it, as in scx_esn's accounting.
 */
static __always_inline int penalize_remote(struct request *rq)
{
	struct gendisk *disk = BPF_CORE_READ(rq, q, disk);
	struct spin_ctx ctx;
	struct lab_counts *c;
	u32 dev, key = 0, cpu;
	u8 *disk_node, submit_node;
	u64 spin, start, spun;

	if (!disk)
		return 0;
	dev = (BPF_CORE_READ(disk, major) << 20) | BPF_CORE_READ(disk, first_minor);
	disk_node = bpf_map_lookup_elem(&lab_disk_node, &dev);
	if (!disk_node)
		return 0;
	c = bpf_map_lookup_elem(&lab_counts, &key);
	if (!c)
		return 0;

	cpu = BPF_CORE_READ(rq, mq_ctx, cpu);
	submit_node = node_of_cpu(cpu);
	if (submit_node == *disk_node) {
		c->local++;
		return 0;
	}
	c->remote++;
	spin = spin_ns_for(*disk_node, submit_node);
	if (!spin)
		return 0;

	start = bpf_ktime_get_ns();
	ctx.until_ns = start + spin;
	ctx.sink = 0;
	if (bpf_loop(LAB_SPIN_MAX_ITERS, spin_step, &ctx, 0) >= LAB_SPIN_MAX_ITERS)
		c->spin_capped++;
	spun = bpf_ktime_get_ns() - start;
	c->spun_ns += spun;
	if (spun > spin + spin / 10)
		c->spin_late++;
	return 0;
}

/* After the issue tracepoint and before the driver rings the doorbell. */
SEC("fexit/blk_mq_start_request")
int BPF_PROG(lab_after_start_request, struct request *rq)
{
	return penalize_remote(rq);
}

/* Fallback where the fexit cannot attach (no BTF for it, no trampolines). */
SEC("tp_btf/block_rq_issue")
int BPF_PROG(lab_at_rq_issue, struct request *rq)
{
	return penalize_remote(rq);
}
