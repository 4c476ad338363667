/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * blk-mq request observation: who submits each request, from which node, to
 * which device, and how long it queues and runs on the device.
 *
 * A request carries most of what there is to know about it, so nothing is
 * stored per request where the kernel keeps it, and no clock is read but at
 * completion:
 *
 *   block_io_start (6.5+, submitter's context)  -> charged to the task and to
 *                                                  its CPU's node; the task's
 *                                                  I/O score and device vote
 *                                                  (iotrace.bpf.h)
 *   block_rq_issue (handed to the driver)       -> not even attached while
 *                                                  the kernel stamps
 *                                                  rq->io_start_time_ns
 *                                                  (queues with block stats:
 *                                                  wbt, iolatency); once a
 *                                                  request completes without
 *                                                  a stamp, userspace attaches
 *                                                  it: inflight[rq].issue_ns
 *                                                  for unstamped requests
 *   block_rq_requeue                            -> counted; the next issue
 *                                                  stamps again
 *   block_rq_complete (IRQ / poll CPU; fires
 *     per partial completion)                   -> the last one accounts the
 *                                                  request from its fields:
 *                                                  disk, op, submitting CPU
 *                                                  (rq->mq_ctx), start
 *                                                  (rq->start_time_ns, with
 *                                                  iostats on) and issue
 *
 * Kernels before 6.5 have no block_io_start: block_bio_queue scores the
 * task (iotrace.bpf.h), block_rq_insert charges the request and
 * inflight[rq] remembers that it did, so the issue charges only requests
 * issued directly (they skip the insert) and a request dispatched twice is
 * charged once. That entry goes at completion, or at block_rq_merge when
 * the request is merged into another one.
 *
 * Starts feed the per-node and per-task tables, completions the
 * per-(device, submitting node, op) histograms. Everything is cumulative;
 * userspace takes deltas and ages out entries that never complete.
 *
 * The same body serves tp_btf programs (typed arguments, the default) and
 * raw_tp programs (the fallback for kernels whose BTF lacks the tracepoint;
 * reads go through BPF_CORE_READ there). Userspace enables one of each pair.
 */
#ifndef __ESN_BLKOBS_BPF_H
#define __ESN_BLKOBS_BPF_H

#include "stats.bpf.h"

/* Request operation numbers (enum req_op); stable across kernel versions. */
#define ESN_REQ_OP_MASK 0xff
#define ESN_REQ_OP_READ 0
#define ESN_REQ_OP_WRITE 1
#define ESN_REQ_OP_FLUSH 2
#define ESN_REQ_OP_DISCARD 3
#define ESN_REQ_OP_SECURE_ERASE 5
#define ESN_REQ_OP_WRITE_ZEROES 9

/*
 * What the kernel does not keep in a request, keyed by its address: an issue
 * time where the queue does not stamp one, and (before 6.5) that
 * block_rq_insert charged it. Most requests have no entry at all.
 */
struct blkobs_rq {
	u64 start_ns; /* charged at insert (io_clock_ns), for aging; else 0 */
	u64 issue_ns; /* issued where the kernel does not stamp it; else 0 */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ESN_MAX_INFLIGHT);
	__type(key, u64);
	__type(value, struct blkobs_rq);
} inflight SEC(".maps");

/*
 * Set by userspace when block_rq_insert is the start point (no
 * block_io_start): the issue and completion then keep the table exact.
 */
const volatile bool start_at_insert = false;

/*
 * Ignore the kernel's issue stamps and time every issue in BPF: the path of
 * queues without block stats (the issue hook attached on the first request
 * that completes without a time), made testable on a machine whose queues
 * all have them (observe --keep-issue-times).
 */
const volatile bool keep_issue_times = false;

/*
 * The per-(device, submitting node, op) histograms of keys that io_slots
 * below has no slot for. Per CPU: a completion adds to its own CPU's copy
 * with plain adds, where one shared entry took up to eight atomic adds and,
 * with per-CPU NVMe completion queues, bounced between sockets. Userspace
 * sums the copies.
 *
 * Declared by size, not type: the skeleton generator would otherwise emit a
 * Rust type for the value that cannot derive Default (arrays over 32), and a
 * map has BTF for both key and value or for neither. Userspace reads them
 * through the bindgen types of intf.h.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, ESN_MAX_IO_KEYS);
	__uint(key_size, sizeof(struct esn_io_key));
	__uint(value_size, sizeof(struct esn_io_hist));
} io_hists SEC(".maps");

/* Per CPU: the hottest counters, updated without atomics; userspace sums. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ESN_MAX_NODES);
	__type(key, u32);
	__type(value, struct esn_node_io);
} node_io SEC(".maps");

/*
 * The histograms' hot table, per CPU: slot io_slot_of(key) holds the first
 * key that hashed there on this CPU, found by an inlined array access and
 * three compares. A lookup in io_hists above is a call into the kernel's
 * hash table, and it was 40-130 ns of a completion's 190-280 ns on a
 * 2-vCPU VM (observe-cost.sh, 2026-11-27). A key whose slot another key
 * holds goes to io_hists. Userspace sums both by key. 32 slots cover the
 * usual (disk, submitting node, op) keys of a machine; each costs 704
 * bytes per possible CPU.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ESN_IO_SLOTS);
	__uint(key_size, sizeof(u32));
	__uint(value_size, sizeof(struct esn_io_slot));
} io_slots SEC(".maps");

/*
 * Off: every key goes to io_hists, the path of keys that collide, made
 * testable (observe --no-io-slots).
 */
const volatile bool use_io_slots = true;

/* All-zero template for new histogram entries: too large for the stack. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(u32));
	__uint(value_size, sizeof(struct esn_io_hist));
} zero_hist SEC(".maps");

/* Pre-5.17 kernels kept the disk in the request itself. */
struct request___old {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

/*
 * Request fields are read directly in tp_btf programs (typed pointers: a
 * plain load, no helper call, which halves the cost per event) and with
 * bpf_probe_read_kernel in raw_tp ones. @typed is a constant at every call
 * site, so each program keeps only its own branch.
 */
#define RQ_READ(typed, src, a, ...)                                            \
	((typed) ? (src)->a __VA_OPT__(->) __VA_ARGS__                        \
		 : BPF_CORE_READ(src, a __VA_OPT__(, ) __VA_ARGS__))

static __always_inline struct gendisk *rq_disk(struct request *rq, bool typed)
{
	struct request___old *old = (void *)rq;

	if (bpf_core_field_exists(old->rq_disk))
		return RQ_READ(typed, old, rq_disk);
	return RQ_READ(typed, rq, q, disk);
}

/*
 * A multipath head (nvme<S>n<N>: NVMe/TCP, dual-port drives) is bio-based:
 * its requests are issued on a path disk (nvme<S>c<C>n<N>), hidden, whose
 * number no sysfs file shows. Userspace names each path with its head's
 * number here; a request on a disk it did not register is looked up by
 * name and counts as the head's.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ESN_MAX_PATH_DISKS);
	__uint(key_size, ESN_DISK_NAME_LEN);
	__uint(value_size, sizeof(u32));
} path_disk_dev SEC(".maps");

/*
 * Set by userspace when it named any path disk: without one (most machines)
 * the verifier drops the lookup below, and a request costs no extra map
 * lookup.
 */
const volatile bool has_path_disks = false;

static __always_inline u32 path_head_dev(struct gendisk *disk, u32 dev)
{
	char name[ESN_DISK_NAME_LEN] = {};
	u32 *head;

	if (!has_path_disks || !dev ||
	    bpf_map_lookup_elem(&dev_home_node, &dev))
		return dev;
	if (bpf_probe_read_kernel_str(name, sizeof(name), disk->disk_name) < 0)
		return dev;
	head = bpf_map_lookup_elem(&path_disk_dev, name);
	return head ? *head : dev;
}

static __always_inline u32 rq_disk_dev(struct request *rq, bool typed)
{
	struct gendisk *disk = rq_disk(rq, typed);

	if (!disk)
		return 0;
	return path_head_dev(disk, kernel_mkdev(RQ_READ(typed, disk, major),
						RQ_READ(typed, disk, first_minor)));
}

static __always_inline u8 rq_op_class(struct request *rq, bool typed)
{
	u32 op = RQ_READ(typed, rq, cmd_flags) & ESN_REQ_OP_MASK;

	switch (op) {
	case ESN_REQ_OP_READ:
		return ESN_OP_READ;
	case ESN_REQ_OP_WRITE:
		return ESN_OP_WRITE;
	case ESN_REQ_OP_FLUSH:
		return ESN_OP_FLUSH;
	case ESN_REQ_OP_DISCARD:
	case ESN_REQ_OP_SECURE_ERASE:
	case ESN_REQ_OP_WRITE_ZEROES:
		return ESN_OP_DISCARD;
	default:
		return ESN_OP_OTHER;
	}
}

/*
 * Histogram slot of a latency: floor(log2(ns)), 0 for 0 and 1, the last slot
 * for anything longer. Must match esn_stats::hist::slot_of. A branch per
 * halving of the bit range: about 15 instructions run, against about 40 for
 * scx's branch-free log2_u64() (BPF has no set-on-condition instruction, so
 * each of its steps compiles to a jump anyway). It runs at every block
 * completion and at every run's start (the wait histogram).
 */
static __always_inline u32 lat_slot(u64 ns)
{
	u32 slot = 0;

	if (ns >> 32) {
		ns >>= 32;
		slot = 32;
	}
	if (ns >> 16) {
		ns >>= 16;
		slot += 16;
	}
	if (ns >> 8) {
		ns >>= 8;
		slot += 8;
	}
	if (ns >> 4) {
		ns >>= 4;
		slot += 4;
	}
	if (ns >> 2) {
		ns >>= 2;
		slot += 2;
	}
	if (ns >> 1)
		slot += 1;
	return slot < ESN_LAT_SLOTS ? slot : ESN_LAT_SLOTS - 1;
}

/* Home node of a disk, ESN_NO_NODE for one userspace did not register. */
static __always_inline u8 dev_home(u32 dev)
{
	u8 *home = bpf_map_lookup_elem(&dev_home_node, &dev);

	return home ? *home : ESN_NO_NODE;
}

static __always_inline u8 home_locality(u8 home, u8 submit_node)
{
	if (home == ESN_NO_NODE)
		return ESN_LOC_UNKNOWN;
	return home == submit_node ? ESN_LOC_LOCAL : ESN_LOC_REMOTE;
}

/*
 * Node of the CPU that allocated the request (its software queue's CPU):
 * the submitter's, read where the submitter is long gone.
 */
static __always_inline u8 rq_submit_node(struct request *rq, bool typed)
{
	struct blk_mq_ctx *ctx = RQ_READ(typed, rq, mq_ctx);

	if (!ctx)
		return ESN_NO_NODE;
	return node_of_cpu(RQ_READ(typed, ctx, cpu));
}

/* Before 5.16 block stats were switched on by a flag, not counted. */
struct blk_queue_stats___old {
	bool enable_accounting;
} __attribute__((preserve_access_index));

/*
 * Does the kernel stamp rq->io_start_time_ns when it issues @rq? It does on
 * queues with QUEUE_FLAG_STATS, which is set exactly while a block stats
 * callback is registered (wbt, iolatency, ...) or accounting is on. The
 * flag's bit moves between kernels in an enum CO-RE cannot name; the
 * condition behind it is plain fields.
 */
static __always_inline bool queue_stamps_issue(struct request *rq, bool typed)
{
	struct request_queue *q = RQ_READ(typed, rq, q);
	struct blk_queue_stats *stats;
	struct blk_queue_stats___old *old;
	u64 head, first;

	if (!q)
		return false;
	stats = RQ_READ(typed, q, stats);
	if (!stats)
		return false;
	if (bpf_core_field_exists(stats->accounting)) {
		if (RQ_READ(typed, stats, accounting) > 0)
			return true;
	} else {
		old = (void *)stats;
		if (bpf_core_field_exists(old->enable_accounting) &&
		    RQ_READ(typed, old, enable_accounting))
			return true;
	}
	head = (u64)stats + bpf_core_field_offset(stats->callbacks);
	first = (u64)RQ_READ(typed, stats, callbacks.next);
	return first && first != head;
}

/*
 * Home node of @dev, remembered in the task's record: most tasks use one
 * disk, and dev_home_node never changes while the programs are attached
 * (userspace fills it before).
 */
static __always_inline u8 task_dev_home(struct esn_task_io *t, u32 dev)
{
	if (t->home_dev != dev) {
		t->home_dev = dev;
		t->home_dev_node = dev_home(dev);
	}
	return t->home_dev_node;
}

/*
 * Add a started request to the current task's record @t; with @score (the
 * start is the attribution point: block_io_start), also its I/O score and
 * device vote. A tid runs on one CPU at a time and starts fire in its own
 * context, so plain updates do not race.
 */
static __always_inline void charge_task(struct esn_task_io *t, u32 dev,
					u8 home, u32 bytes, u8 node,
					bool score)
{
	u64 now = io_clock_ns();

	t->reqs++;
	t->bytes += bytes;
	if (home != ESN_NO_NODE && home != node)
		t->remote_reqs++;
	t->last_req_ns = now;
	t->last_node = node;
	if (!score)
		return;
	if (home != ESN_NO_NODE)
		io_score_add(t, dev, now);
	else
		stat_inc(ESN_STAT_IO_UNKNOWN_DEV);
}

static __always_inline void charge_node_start(u32 node, u32 bytes, u8 locality)
{
	struct esn_node_io *n = bpf_map_lookup_elem(&node_io, &node);

	if (!n)
		return;
	n->reqs += 1;
	n->bytes += bytes;
	if (locality == ESN_LOC_REMOTE) {
		n->remote_reqs += 1;
		n->remote_bytes += bytes;
	}
}

/*
 * A request starts, in its submitter's context: charge it to the task and
 * to the node of the CPU it runs on (@score: see charge_task). False for
 * requests to no disk.
 */
static __always_inline bool charge_start(struct request *rq, bool typed,
					 bool score)
{
	u32 dev = rq_disk_dev(rq, typed), bytes;
	struct esn_task_io *t;
	u8 node, home;

	if (!dev)
		return false;
	bytes = RQ_READ(typed, rq, __data_len);
	node = node_of_cpu(bpf_get_smp_processor_id());
	t = current_task_io();
	home = t ? task_dev_home(t, dev) : dev_home(dev);
	stat_inc(ESN_STAT_RQ_STARTED);
	charge_node_start(node, bytes, home_locality(home, node));
	if (t)
		charge_task(t, dev, home, bytes, node, score);
	return true;
}

/* Remember @val for the request; false when the table is full. */
static __always_inline bool track(u64 *key, struct blkobs_rq *val)
{
	if (!bpf_map_update_elem(&inflight, key, val, BPF_ANY))
		return true;
	stat_inc(ESN_STAT_RQ_INFLIGHT_FULL);
	return false;
}

/*
 * 6.5+: the request's own start, nothing to remember; also the attribution
 * point (block_bio_queue is not loaded).
 */
static __always_inline int blkobs_io_start(struct request *rq, bool typed)
{
	charge_start(rq, typed, true);
	return 0;
}

/*
 * Before 6.5: inserted into a scheduler or software queue. A request
 * inserted again (requeued) was charged the first time.
 */
static __always_inline int blkobs_insert(struct request *rq, bool typed)
{
	struct blkobs_rq fresh = { .start_ns = io_clock_ns() };
	u64 key = (u64)rq;

	if (bpf_map_lookup_elem(&inflight, &key) || !rq_disk_dev(rq, typed))
		return 0;
	if (track(&key, &fresh))
		charge_start(rq, typed, false);
	return 0;
}

static __always_inline int blkobs_issue(struct request *rq, bool typed)
{
	struct blkobs_rq *seen, fresh = {};
	bool stamped = !keep_issue_times && queue_stamps_issue(rq, typed);
	u64 key = (u64)rq;

	if (!start_at_insert) {
		if (stamped || !rq_disk_dev(rq, typed))
			return 0;
		fresh.issue_ns = bpf_ktime_get_ns();
		if (track(&key, &fresh))
			stat_inc(ESN_STAT_RQ_ISSUE_KEPT);
		return 0;
	}
	seen = bpf_map_lookup_elem(&inflight, &key);
	if (seen) {
		if (!stamped) {
			seen->issue_ns = bpf_ktime_get_ns();
			stat_inc(ESN_STAT_RQ_ISSUE_KEPT);
		}
		return 0;
	}
	/* Issued directly: block_rq_insert never saw it. */
	if (!rq_disk_dev(rq, typed))
		return 0;
	fresh.start_ns = io_clock_ns();
	if (!stamped)
		fresh.issue_ns = bpf_ktime_get_ns();
	if (track(&key, &fresh)) {
		charge_start(rq, typed, false);
		if (!stamped)
			stat_inc(ESN_STAT_RQ_ISSUE_KEPT);
	}
	return 0;
}

/* The kernel stamps the issue again when it re-issues. */
static __always_inline int blkobs_requeue(struct request *rq, bool typed)
{
	stat_inc(ESN_STAT_RQ_REQUEUED);
	return 0;
}

/* Merged into another request before its issue: it completes as part of it. */
static __always_inline int blkobs_merge(struct request *rq, bool typed)
{
	u64 key = (u64)rq;

	bpf_map_delete_elem(&inflight, &key);
	return 0;
}

static __always_inline void hist_add(struct esn_io_hist *h, u32 kind, u64 ns)
{
	u32 slot = lat_slot(ns);

	if (kind >= ESN_NR_LAT_KINDS || slot >= ESN_LAT_SLOTS)
		return;
	h->lat_cnt[kind] += 1;
	h->lat_sum_ns[kind] += ns;
	h->slots[kind][slot] += 1;
}

/* Multiplicative hashing: the top bits of the products spread small,
 * close numbers (minors, nodes, ops) over every slot. */
static __always_inline u32 io_slot_of(const struct esn_io_key *k)
{
	u32 mix = k->dev * 0x9e3779b1u ^ (u32)k->submit_node * 0x85ebca6bu ^
		  (u32)k->op * 0xc2b2ae35u;

	return (mix >> 27) & (ESN_IO_SLOTS - 1);
}

static __always_inline struct esn_io_hist *io_hist_of(const struct esn_io_key *k)
{
	struct esn_io_hist *h, *zero;
	struct esn_io_slot *slot;
	u32 slot_idx, idx = 0;

	if (use_io_slots) {
		slot_idx = io_slot_of(k);
		slot = bpf_map_lookup_elem(&io_slots, &slot_idx);
		if (!slot)
			return NULL;
		/* Per CPU, and a program never nests in itself: no race. */
		if (!slot->key.dev)
			slot->key = *k;
		if (slot->key.dev == k->dev &&
		    slot->key.submit_node == k->submit_node &&
		    slot->key.op == k->op)
			return &slot->hist;
	}
	h = bpf_map_lookup_elem(&io_hists, k);
	if (h)
		return h;
	zero = bpf_map_lookup_elem(&zero_hist, &idx);
	if (!zero)
		return NULL;
	bpf_map_update_elem(&io_hists, k, zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&io_hists, k);
}

static __always_inline void charge_node_completion(u32 node, bool cross)
{
	struct esn_node_io *n = bpf_map_lookup_elem(&node_io, &node);

	if (!n)
		return;
	n->completions += 1;
	if (cross)
		n->cross_completions += 1;
}

/*
 * The issue time the kernel did not stamp, from the table, and the entry
 * dropped: the request is done with. 0 if none was kept.
 */
static __always_inline u64 forget_request(struct request *rq)
{
	u64 key = (u64)rq, issue_ns;
	struct blkobs_rq *seen = bpf_map_lookup_elem(&inflight, &key);

	if (!seen) {
		if (start_at_insert)
			stat_inc(ESN_STAT_RQ_UNTRACKED);
		return 0;
	}
	issue_ns = seen->issue_ns;
	bpf_map_delete_elem(&inflight, &key);
	return issue_ns;
}

/*
 * A completion, @nr_bytes of the request's remaining __data_len: its bytes
 * count now; the last one (all that remains) also counts the request and
 * its latencies, everything read from the request itself.
 */
static __always_inline int blkobs_complete(struct request *rq, bool typed,
					   u32 nr_bytes)
{
	struct esn_io_key hkey = {};
	struct esn_io_hist *h;
	u64 start, issue, now;
	u32 done_node;
	u8 submit_node;
	bool last;

	hkey.dev = rq_disk_dev(rq, typed);
	if (!hkey.dev)
		return 0;
	last = nr_bytes >= RQ_READ(typed, rq, __data_len);
	issue = keep_issue_times ? 0 : RQ_READ(typed, rq, io_start_time_ns);
	if (last && (start_at_insert || !issue)) {
		u64 kept = forget_request(rq);

		/* Kept only where the kernel did not stamp (or when told to). */
		if (kept)
			issue = kept;
	}

	submit_node = rq_submit_node(rq, typed);
	hkey.submit_node = submit_node;
	hkey.op = rq_op_class(rq, typed);
	h = io_hist_of(&hkey);
	if (!h)
		return 0;
	h->bytes += nr_bytes;
	if (!last)
		return 0;

	done_node = node_of_cpu(bpf_get_smp_processor_id());
	charge_node_completion(done_node, done_node != submit_node);
	h->reqs += 1;
	if (done_node != submit_node)
		h->cross_completions += 1;
	if (issue) {
		now = bpf_ktime_get_ns();
		start = RQ_READ(typed, rq, start_time_ns);
		if (now >= issue) {
			hist_add(h, ESN_LAT_DEVICE, now - issue);
			if (start && issue >= start)
				hist_add(h, ESN_LAT_QUEUE, issue - start);
		}
	} else {
		stat_inc(ESN_STAT_RQ_NO_ISSUE_TIME);
	}
	stat_inc(ESN_STAT_RQ_COMPLETED);
	return 0;
}

/*
 * Entry points: a tp_btf and a raw_tp program per tracepoint, same body.
 * Since 5.11 every request tracepoint but block_rq_complete takes only the
 * request; the scheduler needs 6.12 and the observer task storage (5.11), so
 * the older (queue, request) forms are not handled.
 */
#define BLKOBS_RQ_HOOK(tp, body)                                        \
	SEC("tp_btf/" #tp)                                              \
	int BPF_PROG(esn_##tp, struct request *rq)                      \
	{                                                               \
		return body(rq, true);                                  \
	}                                                               \
	SEC("raw_tp/" #tp)                                              \
	int BPF_PROG(esn_##tp##_raw, struct request *rq)                \
	{                                                               \
		return body(rq, false);                                 \
	}

/* 6.5+: fires in blk_mq_bio_to_request(), in the submitter's context. */
BLKOBS_RQ_HOOK(block_io_start, blkobs_io_start)
/* Before 6.5 the nearest start point; skipped by requests issued directly. */
BLKOBS_RQ_HOOK(block_rq_insert, blkobs_insert)
BLKOBS_RQ_HOOK(block_rq_issue, blkobs_issue)
BLKOBS_RQ_HOOK(block_rq_requeue, blkobs_requeue)
BLKOBS_RQ_HOOK(block_rq_merge, blkobs_merge)

/* (rq, error, nr_bytes): the bytes this completion covers. */
SEC("tp_btf/block_rq_complete")
int BPF_PROG(esn_block_rq_complete, struct request *rq, int error,
	     unsigned int nr_bytes)
{
	return blkobs_complete(rq, true, nr_bytes);
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(esn_block_rq_complete_raw, struct request *rq, int error,
	     unsigned int nr_bytes)
{
	return blkobs_complete(rq, false, nr_bytes);
}

#endif /* __ESN_BLKOBS_BPF_H */
