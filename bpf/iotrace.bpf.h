/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Block I/O attribution: which task submits I/O, to which device, and how
 * I/O-bound it is right now.
 *
 * A tracepoint in the submitter's context feeds the classification half of
 * the per-task record: a decayed I/O score and a majority vote over the
 * devices the task uses. That is block_io_start (6.5+, one event per
 * request, in blkobs.bpf.h) or, before it existed, block_bio_queue (one per
 * bio, here). The scheduler reads it and
 * never writes it; blkobs.bpf.h adds request counts to the same record and
 * userspace reports it, so the scheduler and the reports share one source. Only
 * devices userspace put in dev_home_node (whole disks with a known home node)
 * count, so stacked devices (dm, md) with no node of their own do not hide
 * the NVMe disk underneath.
 */
#ifndef __ESN_IOTRACE_BPF_H
#define __ESN_IOTRACE_BPF_H

#include "stats.bpf.h"

/* Half-life of the per-task I/O score: how fast a task "forgets" its I/O. */
const volatile u64 io_half_life_ns = 100ULL * 1000 * 1000;

/* The kernel's tick rate; 0 where libbpf found no kernel config. */
extern int CONFIG_HZ __kconfig __weak;

/*
 * 1e9 / @hz. HZ is a constant the verifier knows (a frozen .kconfig value),
 * so for the kernel's usual rates the branches not taken are dropped and
 * this is a constant, where the division costs tens of cycles at every
 * request and every wake-up of a task with an I/O record.
 */
static __always_inline u64 ns_per_jiffy(u64 hz)
{
	switch (hz) {
	case 100:
		return 10000000;
	case 250:
		return 4000000;
	case 300:
		return 3333333;
	case 1000:
		return 1000000;
	default:
		return 1000000000ULL / hz;
	}
}

/*
 * The clock of the I/O score and the "last I/O" times: jiffies, in ns since
 * boot (CLOCK_MONOTONIC to within a tick or two, which userspace's decay of
 * the reported score relies on). A tick is fine resolution against a 100 ms
 * half-life and a 500 ms idle limit, and reading it is a load, where
 * bpf_ktime_get_ns() reads the clocksource at every bio and at every wake-up
 * of a task with an I/O record: a TSC read on most machines, but an HPET
 * access where the TSC is not stable, 25-50 us each in the TCG VM (the
 * bench's BPF cost). bpf_ktime_get_coarse_ns() is not allowed in tracing
 * programs.
 */
static __always_inline u64 io_clock_ns(void)
{
	u64 hz = CONFIG_HZ;
	/* INITIAL_JIFFIES: jiffies start 300 s before their 32-bit wrap. */
	u64 initial = (u32)(-300 * (s32)hz);

	if (!hz || hz > 100000)
		return bpf_ktime_get_ns();
	return (bpf_jiffies64() - initial) * ns_per_jiffy(hz);
}

/*
 * The per-task record (struct esn_task_io), keyed by tid. An LRU hash and
 * not task storage: lookups are inlined by the verifier (task storage is a
 * helper call and a lock, the dearest part of a bio on mitigated CPUs),
 * userspace can list it, and a table full of tasks loses the quietest one.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ESN_MAX_IO_TASKS);
	__type(key, u32);
	__type(value, struct esn_task_io);
} task_io SEC(".maps");

/* Written by userspace: kernel dev_t of a whole disk -> its home node. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ESN_MAX_DEVICES);
	__type(key, u32);
	__type(value, u8);
} dev_home_node SEC(".maps");

/*
 * A fresh record for the current task @tid. Out of line: its zeroed
 * template is 96 bytes of stores that clang otherwise hoists in front of
 * every lookup, though all but a task's first request find a record.
 */
static __noinline struct esn_task_io *new_task_io(u32 tid, u32 tgid)
{
	struct esn_task_io fresh = {};

	fresh.tgid = tgid;
	bpf_get_current_comm(fresh.comm, sizeof(fresh.comm));
	bpf_map_update_elem(&task_io, &tid, &fresh, BPF_ANY);
	return bpf_map_lookup_elem(&task_io, &tid);
}

/*
 * The record of the current task, created if needed. A record left by an
 * exited task whose tid was reused (another tgid) starts over.
 */
static __always_inline struct esn_task_io *current_task_io(void)
{
	/* Not bpf_get_current_pid_tgid(), always a helper call: recent JITs
	 * inline this one, and the fields are plain loads. */
	struct task_struct *cur = bpf_get_current_task_btf();
	u32 tid = cur->pid, tgid = cur->tgid;
	struct esn_task_io *t;

	t = bpf_map_lookup_elem(&task_io, &tid);
	if (t && t->tgid == tgid)
		return t;
	return new_task_io(tid, tgid);
}

/* The record of @p for readers (the scheduler), NULL if it has none. */
static __always_inline struct esn_task_io *task_io_of(struct task_struct *p)
{
	u32 tid = p->pid;
	struct esn_task_io *t = bpf_map_lookup_elem(&task_io, &tid);

	return t && t->tgid == (u32)p->tgid ? t : NULL;
}

/* Pre-5.12 kernels kept the disk in the bio itself. */
struct bio___old {
	struct gendisk *bi_disk;
} __attribute__((preserve_access_index));

static __always_inline u32 kernel_mkdev(u32 major, u32 minor)
{
	return (major << 20) | minor;
}

/*
 * dev_t of the whole disk a bio targets; partitions fold into their disk.
 * Plain loads through the typed tp_btf argument: no probe-read helper calls
 * on the hottest path. CO-RE picks the field the kernel has.
 */
static __always_inline u32 bio_disk_dev(struct bio *bio)
{
	struct gendisk *disk;

	if (bpf_core_field_exists(bio->bi_bdev)) {
		struct block_device *bdev = bio->bi_bdev;

		disk = bdev ? bdev->bd_disk : NULL;
	} else {
		disk = ((struct bio___old *)bio)->bi_disk;
	}
	if (!disk)
		return 0;
	return kernel_mkdev(disk->major, disk->first_minor);
}

/*
 * Whole half-lives elapsed between the score's last decay and @now. Most
 * calls come within one half-life of the last: no division for them.
 */
static __always_inline u64 io_halvings(const struct esn_task_io *io, u64 now)
{
	u64 since = now - io->decayed_at;

	if (now <= io->decayed_at || !io_half_life_ns || since < io_half_life_ns)
		return 0;
	return since / io_half_life_ns;
}

/*
 * The score as of @now, without writing: readers other than the tracepoint
 * (the scheduler) must not race its updates.
 */
static __always_inline u64 io_score_now(const struct esn_task_io *io, u64 now)
{
	u64 halvings = io_halvings(io, now);

	return halvings >= 64 ? 0 : io->score >> halvings;
}

/*
 * Boyer-Moore majority vote: O(1) state per task, and the winner is the
 * device the task uses most whenever one device carries most of its I/O.
 */
static __always_inline void io_vote(struct esn_task_io *io, u32 dev)
{
	if (io->vote_dev == dev) {
		if (io->vote_weight < 1024)
			io->vote_weight++;
	} else if (io->vote_weight > 1) {
		io->vote_weight--;
	} else {
		io->vote_dev = dev;
		io->vote_weight = 1;
	}
}

/*
 * One more I/O of the current task to @dev (a device with a home node) at
 * @now: decay the score once, count the I/O, vote for the device. Only the
 * task's own context writes its record, so plain updates do not race.
 */
static __always_inline void io_score_add(struct esn_task_io *io, u32 dev,
					 u64 now)
{
	u64 halvings = io_halvings(io, now);

	if (halvings >= 64) {
		io->score = 1;
		io->decayed_at = now;
	} else {
		io->score = (io->score >> halvings) + 1;
		io->decayed_at += halvings * io_half_life_ns;
	}
	io->last_io_ns = now;
	io_vote(io, dev);
	stat_inc(ESN_STAT_IO_SCORED);
}

/* Home node of the device a task mostly uses, ESN_NO_NODE if none. */
static __always_inline u8 io_task_home_node(const struct esn_task_io *io)
{
	u32 dev = io->vote_dev;
	u8 *node;

	if (!io->vote_weight)
		return ESN_NO_NODE;
	node = bpf_map_lookup_elem(&dev_home_node, &dev);
	return node ? *node : ESN_NO_NODE;
}

/*
 * Before 6.5 (no block_io_start): block_bio_queue fires in
 * submit_bio_noacct() in the submitting task's context, before any queueing
 * or merging, so "current" is the task to charge. Completions run elsewhere
 * (IRQ, polling) and would blame a bystander. Where block_io_start exists,
 * blkobs.bpf.h scores there instead and userspace leaves this unloaded: one
 * program and one task lookup per request instead of two.
 */
SEC("tp_btf/block_bio_queue")
int BPF_PROG(esn_bio_queue, struct bio *bio)
{
	struct esn_task_io *io;
	u32 dev;

	dev = bio_disk_dev(bio);
	if (!dev || !bpf_map_lookup_elem(&dev_home_node, &dev)) {
		stat_inc(ESN_STAT_IO_UNKNOWN_DEV);
		return 0;
	}
	io = current_task_io();
	if (io)
		io_score_add(io, dev, io_clock_ns());
	return 0;
}

#endif /* __ESN_IOTRACE_BPF_H */
