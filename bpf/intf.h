/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Types and constants shared by the BPF programs and the Rust userspace.
 *
 * Rust receives this header through bindgen (scx_cargo's BpfBuilder), so a
 * constant or a layout is declared here once and nowhere else.
 */
#ifndef __ESN_INTF_H
#define __ESN_INTF_H

#ifndef __VMLINUX_H__
typedef unsigned char u8;
typedef unsigned int u32;
typedef int s32;
typedef unsigned long long u64;
#endif

enum esn_limits {
	/* Node ids are kept in u8 arrays; 64 covers every shipping machine. */
	ESN_MAX_NODES = 64,
	/* CPU ids above this are refused at start-up with a clear message. */
	ESN_MAX_CPUS = 4096,
	/* Distinct tasks that may hold a placement at once. */
	ESN_MAX_PLACED_TASKS = 16384,
	/* Whole-disk devices whose home node userspace tells BPF about. */
	ESN_MAX_DEVICES = 1024,
};

/* "No node" in u8/s32 node fields. */
#define ESN_NO_NODE 0xff

/*
 * DSQ ids. Each node with CPUs has two queues: one for the I/O-bound tasks
 * placed on it (never taken by another node while the home node keeps up),
 * one for everything else (freely stolen, so the scheduler stays
 * work-conserving).
 */
#define ESN_DSQ_IO_BASE 0x1000ULL
#define ESN_DSQ_FAIR_BASE 0x2000ULL

/*
 * Event counters, one slot per CPU in a per-CPU array; userspace sums them.
 * Append only: the stats code indexes by these values.
 */
enum esn_stat {
	/* placement decisions for tasks that became I/O-bound */
	ESN_STAT_PLACE_LOCAL,	/* on the node of the device they use */
	ESN_STAT_PLACE_SPILL,	/* home full or not allowed: a neighbour node */
	ESN_STAT_PLACE_NONE,	/* every allowed node full: scheduled fairly */
	ESN_STAT_RELEASE,	/* placement dropped: I/O stopped, exit, affinity */
	/* where placed tasks were sent to run */
	ESN_STAT_IO_DIRECT,	/* straight onto an idle CPU of their node */
	ESN_STAT_IO_QUEUED,	/* into their node's I/O queue */
	ESN_STAT_IO_STOLEN,	/* run by another node after waiting too long */
	/* everything else */
	ESN_STAT_FAIR_DIRECT,	/* idle CPU found at wake-up */
	ESN_STAT_FAIR_QUEUED,
	ESN_STAT_FAIR_STOLEN,	/* taken from another node's fair queue */
	ESN_STAT_PINNED,	/* one allowed CPU or migration disabled */
	/* block I/O seen by the attribution tracepoint */
	ESN_STAT_BIO_TRACKED,	/* on a device with a known home node */
	ESN_STAT_BIO_UNKNOWN_DEV,
	ESN_STAT_RETURN_HOME,	/* a spilled task moved back to its home node */
	ESN_STAT_IO_PREEMPT,	/* a non-I/O task preempted for a placed one */
	ESN_NR_STATS,
};

/*
 * Placement table entry, keyed by tid. Written only by BPF; userspace reads
 * it to show which tasks sit where.
 */
struct esn_placement {
	u64 last_io_ns;	/* refreshed by the block tracepoint */
	u32 dev;	/* kernel dev_t (MAJOR << 20 | MINOR) of the home device */
	u8 node;	/* node the task is placed on */
	u8 home_node;	/* node of its device; differs from node when spilled */
	u8 pad[2];
};

#endif /* __ESN_INTF_H */
