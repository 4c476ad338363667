/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Block I/O attribution: which task submits I/O, to which device, and how
 * I/O-bound it is right now.
 *
 * One tracepoint in the submitter's context (block_bio_queue) feeds a small
 * per-task state: a decayed I/O score and a majority vote over the devices
 * the task uses. The scheduler reads that state; it never writes it. Only
 * devices userspace put in dev_home_node (whole disks with a known home node)
 * count, so stacked devices (dm, md) with no node of their own do not hide
 * the NVMe disk underneath.
 */
#ifndef __ESN_IOTRACE_BPF_H
#define __ESN_IOTRACE_BPF_H

#include "stats.bpf.h"

/* Half-life of the per-task I/O score: how fast a task "forgets" its I/O. */
const volatile u64 io_half_life_ns = 100ULL * 1000 * 1000;

struct esn_io_task {
	u64 score;	  /* bios, halved every io_half_life_ns */
	u64 decayed_at;	  /* time the score was last decayed to */
	u64 last_io_ns;	  /* last bio on a known device */
	u32 vote_dev;	  /* device currently winning the majority vote */
	u32 vote_weight;  /* its lead over the others */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct esn_io_task);
} io_task_stor SEC(".maps");

/* Written by userspace: kernel dev_t of a whole disk -> its home node. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ESN_MAX_DEVICES);
	__type(key, u32);
	__type(value, u8);
} dev_home_node SEC(".maps");

/* Pre-5.12 kernels kept the disk in the bio itself. */
struct bio___old {
	struct gendisk *bi_disk;
} __attribute__((preserve_access_index));

static __always_inline u32 kernel_mkdev(u32 major, u32 minor)
{
	return (major << 20) | minor;
}

/* dev_t of the whole disk a bio targets; partitions fold into their disk. */
static __always_inline u32 bio_disk_dev(struct bio *bio)
{
	struct gendisk *disk;

	if (bpf_core_field_exists(bio->bi_bdev))
		disk = BPF_CORE_READ(bio, bi_bdev, bd_disk);
	else
		disk = BPF_CORE_READ((struct bio___old *)bio, bi_disk);
	if (!disk)
		return 0;
	return kernel_mkdev(BPF_CORE_READ(disk, major),
			    BPF_CORE_READ(disk, first_minor));
}

/* Whole half-lives elapsed between the score's last decay and @now. */
static __always_inline u64 io_halvings(const struct esn_io_task *io, u64 now)
{
	if (now <= io->decayed_at || !io_half_life_ns)
		return 0;
	return (now - io->decayed_at) / io_half_life_ns;
}

/*
 * The score as of @now, without writing: readers other than the tracepoint
 * (the scheduler) must not race its updates.
 */
static __always_inline u64 io_score_now(const struct esn_io_task *io, u64 now)
{
	u64 halvings = io_halvings(io, now);

	return halvings >= 64 ? 0 : io->score >> halvings;
}

/*
 * Boyer-Moore majority vote: O(1) state per task, and the winner is the
 * device the task uses most whenever one device carries most of its I/O.
 */
static __always_inline void io_vote(struct esn_io_task *io, u32 dev)
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

/* Home node of the device a task mostly uses, ESN_NO_NODE if none. */
static __always_inline u8 io_task_home_node(const struct esn_io_task *io)
{
	u32 dev = io->vote_dev;
	u8 *node;

	if (!io->vote_weight)
		return ESN_NO_NODE;
	node = bpf_map_lookup_elem(&dev_home_node, &dev);
	return node ? *node : ESN_NO_NODE;
}

/*
 * block_bio_queue fires in submit_bio_noacct() in the submitting task's
 * context, before any queueing or merging, so "current" is the task to
 * charge. Completions run elsewhere (IRQ, polling) and would blame a
 * bystander.
 */
SEC("tp_btf/block_bio_queue")
int BPF_PROG(esn_bio_queue, struct bio *bio)
{
	struct task_struct *p = bpf_get_current_task_btf();
	struct esn_io_task *io;
	u64 now, halvings;
	u32 dev;

	dev = bio_disk_dev(bio);
	if (!dev || !bpf_map_lookup_elem(&dev_home_node, &dev)) {
		stat_inc(ESN_STAT_BIO_UNKNOWN_DEV);
		return 0;
	}
	io = bpf_task_storage_get(&io_task_stor, p, NULL,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!io)
		return 0;

	now = bpf_ktime_get_ns();
	halvings = io_halvings(io, now);
	io->score = io_score_now(io, now) + 1;
	if (halvings >= 64)
		io->decayed_at = now;
	else
		io->decayed_at += halvings * io_half_life_ns;
	io->last_io_ns = now;
	io_vote(io, dev);
	stat_inc(ESN_STAT_BIO_TRACKED);
	return 0;
}

#endif /* __ESN_IOTRACE_BPF_H */
