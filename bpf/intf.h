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
typedef unsigned short u16;
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
	/* Requests tracked between start and completion at once. */
	ESN_MAX_INFLIGHT = 32768,
	/* (device, submitting node, op) histogram entries. */
	ESN_MAX_IO_KEYS = 4096,
	/* Slots of the histograms' direct-mapped table (a power of two). */
	ESN_IO_SLOTS = 32,
	/* Tasks in the per-task I/O table (LRU: the quietest are dropped). */
	ESN_MAX_IO_TASKS = 8192,
	/* log2 latency buckets: slot 0 is [0, 2) ns, slot i is [2^i, 2^(i+1)),
	 * the last one also takes everything longer (2^39 ns is ~9 minutes). */
	ESN_LAT_SLOTS = 40,
	ESN_COMM_LEN = 16,
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
	ESN_STAT_PLACE_NONE,	/* all allowed nodes full (<= 10/s a task) */
	ESN_STAT_RELEASE,	/* placement dropped: I/O stopped, exit, affinity */
	/* where placed tasks were sent to run */
	ESN_STAT_IO_DIRECT,	/* straight onto an idle CPU of their node */
	ESN_STAT_IO_QUEUED,	/* into their node's I/O queue */
	ESN_STAT_IO_STOLEN,	/* run by another node after waiting too long */
	/* everything else */
	ESN_STAT_FAIR_DIRECT,	/* idle CPU found at wake-up */
	ESN_STAT_FAIR_QUEUED,
	ESN_STAT_FAIR_STOLEN,	/* taken from another node's fair queue */
	ESN_STAT_PINNED,	/* one allowed CPU, woken: straight to it */
	/* I/O seen by the attribution (request starts; bios before 6.5) */
	ESN_STAT_IO_SCORED,	/* on a device with a known home node */
	ESN_STAT_IO_UNKNOWN_DEV,
	ESN_STAT_RETURN_HOME,	/* a spilled task moved back to its home node */
	ESN_STAT_IO_PREEMPT,	/* a non-I/O task preempted for a placed one */
	/* blk-mq request tracking (blkobs.bpf.h) */
	ESN_STAT_RQ_STARTED,	/* requests charged at start (or first at issue) */
	ESN_STAT_RQ_COMPLETED,	/* requests accounted at completion */
	ESN_STAT_RQ_UNTRACKED,	/* start at insert: completed, start not seen */
	ESN_STAT_RQ_INFLIGHT_FULL, /* in-flight table full: request not tracked */
	ESN_STAT_RQ_REQUEUED,	/* requeued: its issue time starts over */
	ESN_STAT_SHED,		/* placement dropped: its node's threshold fell */
	ESN_STAT_IO_RESCUE,	/* a starving I/O queue woke another node's CPU */
	ESN_STAT_CPU_RELEASED,	/* a higher class took a CPU: its queue sent back */
	ESN_STAT_RQ_ISSUE_KEPT,	/* issue time kept by BPF: the queue has no stamp */
	ESN_STAT_RQ_NO_ISSUE_TIME, /* completed without an issue time: no device
				    * latency (userspace then attaches the
				    * issue hook) */
	/* CPU time, in ns, of tasks by I/O priority class (ionice) */
	ESN_STAT_RUN_NS_IOPRIO_RT,
	ESN_STAT_RUN_NS_IOPRIO_BE,	/* best effort, and tasks without a class */
	ESN_STAT_RUN_NS_IOPRIO_IDLE,
	ESN_STAT_STARVED_RUN,	/* waited past STARVE_AFTER_NS: run out of order */
	ESN_STAT_QUEUE_COUNT_LOW, /* a queue held more than its count said */
	ESN_STAT_LENT_SKIPPED,	/* a wake-up queued, not put on an idle CPU
				 * RT holds, is lent to, or took lately */
	ESN_STAT_FAIR_PREEMPT,	/* a fair wake-up preempted a fair task that
				 * had run fair_preempt_after_ns */
	ESN_STAT_KEPT_ASLEEP,	/* a fair wake-up went to a node with placed
				 * tasks, not to its own idle node */
	ESN_NR_STATS,
};

/* A disk name as the kernel keeps it (DISK_NAME_LEN). */
#define ESN_DISK_NAME_LEN 32

/* Multipath path disks userspace names (path_disk_dev), at most. */
#define ESN_MAX_PATH_DISKS 256

/* I/O priority classes (the kernel's IOPRIO_CLASS_*: ionice -c). */
enum esn_ioprio_class {
	ESN_IOPRIO_NONE,	/* not set: best effort, from the nice value */
	ESN_IOPRIO_RT,
	ESN_IOPRIO_BE,
	ESN_IOPRIO_IDLE,
};

/* Request operation classes, as reported. */
enum esn_io_op {
	ESN_OP_READ,
	ESN_OP_WRITE,
	ESN_OP_FLUSH,
	ESN_OP_DISCARD,	/* discard, secure erase, write zeroes */
	ESN_OP_OTHER,	/* zone management, driver private, ... */
	ESN_NR_OPS,
};

/* Where a request was submitted relative to its device's home node. */
enum esn_locality {
	ESN_LOC_LOCAL,
	ESN_LOC_REMOTE,
	ESN_LOC_UNKNOWN,	/* device with no home node (or CPU unknown) */
	ESN_NR_LOCS,
};

enum esn_lat_kind {
	ESN_LAT_QUEUE,	/* start (rq->start_time_ns) -> issue to driver */
	ESN_LAT_DEVICE,	/* issue -> completion */
	ESN_NR_LAT_KINDS,
};

/* Key of the per-(device, locality, op) statistics. */
/*
 * Keyed by the submitting node, not by locality: userspace derives the
 * locality from dev_home_node, which saves the completion a map lookup.
 */
struct esn_io_key {
	u32 dev;	/* kernel dev_t of the whole disk */
	u8 submit_node;	/* ESN_NO_NODE when the request has no sw queue */
	u8 op;		/* enum esn_io_op */
	u8 pad[2];
};

/* Cumulative counters and latency histograms; userspace takes deltas. */
struct esn_io_hist {
	u64 reqs;		/* completed requests */
	u64 bytes;		/* bytes completed (partial completions too) */
	u64 cross_completions;	/* completed on another node than submitted */
	u64 lat_cnt[ESN_NR_LAT_KINDS];
	u64 lat_sum_ns[ESN_NR_LAT_KINDS];
	u64 slots[ESN_NR_LAT_KINDS][ESN_LAT_SLOTS];
};

/*
 * One slot of the histograms' direct-mapped table: the key that owns it on
 * this CPU (dev 0: no key yet) and that key's counters.
 */
struct esn_io_slot {
	struct esn_io_key key;
	struct esn_io_hist hist;
};

/* Per NUMA node of the submitting (or completing) CPU, cumulative. */
struct esn_node_io {
	u64 reqs;		/* requests started on this node's CPUs */
	u64 bytes;
	u64 remote_reqs;	/* ... to a device homed on another node */
	u64 remote_bytes;
	u64 completions;	/* requests completed on this node's CPUs */
	u64 cross_completions;	/* ... that another node submitted */
};

/*
 * Everything known about one task's block I/O, keyed by tid in an LRU hash:
 * the one per-task record. The attribution hook keeps the classification
 * state the scheduler reads; the request start adds the counts userspace
 * reports (on 6.5+ both happen in the one block_io_start program).
 */
struct esn_task_io {
	/*
	 * classification, devices with a home node only: at block_io_start
	 * (per request) or, before 6.5, at block_bio_queue (per bio)
	 */
	u64 score;		/* I/Os, halved every io_half_life_ns */
	u64 decayed_at;		/* time the score was last decayed to */
	u64 last_io_ns;		/* last I/O on a known device */
	u32 vote_dev;		/* device winning the majority vote */
	u32 vote_weight;	/* its lead over the others; 0: no device yet */
	/* reporting (request starts, every device), cumulative */
	u64 reqs;
	u64 bytes;
	u64 remote_reqs;	/* from a node other than the device's */
	u64 last_req_ns;
	u32 tgid;		/* a new task reusing the tid resets the record */
	u32 home_dev;		/* last disk started on, and its home node: */
	u8 home_dev_node;	/* saves a dev_home_node lookup per request */
	u8 last_node;		/* node it last started a request from */
	u8 pad[2];
	char comm[ESN_COMM_LEN];
};

/*
 * Per node of the CPU that ran the task, cumulative, per-CPU: how long tasks
 * waited between becoming runnable (wake-up or preemption) and running. For
 * the placed I/O-bound tasks, what it exceeds an uncontended wake-up's by is
 * the contention penalty the controller weighs against the NUMA penalty.
 */
struct esn_node_sched {
	u64 io_waits;		/* placed I/O-bound tasks: runs counted */
	u64 io_wait_ns;		/* ... and their total wait */
	u64 fair_waits;		/* everyone else */
	u64 fair_wait_ns;
	/*
	 * The placed tasks' waits again, for the wake-ups that went straight
	 * to an idle CPU: an uncontended wake-up's cost, which a task spilled
	 * to another node pays too. The controller weighs only the wait
	 * beyond it.
	 */
	u64 io_idle_waits;
	u64 io_idle_wait_ns;
	/*
	 * Every wait, both classes, by log2 slot (lat_slot's rule): the longest
	 * wait of an interval is how close the watchdog came to unloading us.
	 */
	u64 wait_slots[ESN_LAT_SLOTS];
	/* Keyed by the node concerned rather than by the running CPU's: */
	u64 spill_in;		/* placed here though homed elsewhere */
	u64 spill_out;		/* homed here, placed elsewhere */
	u64 stolen_from;	/* placed here, run by another node's CPU */
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
	u16 rank;	/* slots node held when it was placed: newest shed first */
};

#endif /* __ESN_INTF_H */
