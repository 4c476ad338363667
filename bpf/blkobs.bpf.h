/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * blk-mq request observation: who submits each request, from which node, to
 * which device, and how long it queues and runs on the device.
 *
 * Life of a request, as seen here:
 *
 *   block_io_start (6.5+, submitter's context)   -> inflight[rq] = start
 *     or block_rq_insert (older kernels)          (task, node, dev, op)
 *   block_rq_issue  (handed to the driver)       -> issue time; an entry is
 *                                                   created here if the start
 *                                                   was missed
 *   block_rq_requeue                             -> issue time cleared
 *   block_rq_merge  (merged into another one)    -> entry dropped
 *   block_rq_complete (IRQ / poll CPU; fires per
 *     partial completion)                        -> first one accounts the
 *                                                   request and drops it
 *
 * Starts feed the per-node and per-task tables, completions the
 * per-(device, locality, op) histograms. Everything is cumulative;
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

/* Tracking state of one request, keyed by its address. */
struct blkobs_rq {
	u64 start_ns; /* 0: start not seen, no queue latency */
	u64 issue_ns; /* 0: not (re)issued yet */
	u32 dev;
	u32 bytes;
	u8 submit_node;
	u8 locality;
	u8 op;
	u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ESN_MAX_INFLIGHT);
	__type(key, u64);
	__type(value, struct blkobs_rq);
} inflight SEC(".maps");

/*
 * Declared by size, not type: the skeleton generator would otherwise emit a
 * Rust type for the value that cannot derive Default (arrays over 32), and a
 * map has BTF for both key and value or for neither. Userspace reads them
 * through the bindgen types of intf.h.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
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

static __always_inline u32 rq_disk_dev(struct request *rq, bool typed)
{
	struct gendisk *disk = rq_disk(rq, typed);

	if (!disk)
		return 0;
	return kernel_mkdev(RQ_READ(typed, disk, major),
			    RQ_READ(typed, disk, first_minor));
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
 * Histogram slot of a latency: floor(log2(ns)), 0 for 0 and 1 (scx's
 * log2_u64() is one more than the floor). Must match
 * esn_stats::hist::slot_of.
 */
static __always_inline u32 lat_slot(u64 ns)
{
	u32 slot = log2_u64(ns) - 1;

	return slot < ESN_LAT_SLOTS ? slot : ESN_LAT_SLOTS - 1;
}

static __always_inline u8 dev_locality(u32 dev, u8 submit_node)
{
	u8 *home = bpf_map_lookup_elem(&dev_home_node, &dev);

	if (!home || *home == ESN_NO_NODE)
		return ESN_LOC_UNKNOWN;
	return *home == submit_node ? ESN_LOC_LOCAL : ESN_LOC_REMOTE;
}

/*
 * Add a started request to the current task's record. A tid runs on one CPU
 * at a time and starts fire in its own context, so plain updates do not race.
 */
static __always_inline void charge_task(const struct blkobs_rq *info, u64 now)
{
	struct esn_task_io *t = current_task_io();

	if (!t)
		return;
	t->reqs++;
	t->bytes += info->bytes;
	if (info->locality == ESN_LOC_REMOTE)
		t->remote_reqs++;
	t->last_req_ns = now;
	t->last_node = info->submit_node;
}

static __always_inline void charge_node_start(const struct blkobs_rq *info)
{
	u32 node = info->submit_node;
	struct esn_node_io *n = bpf_map_lookup_elem(&node_io, &node);

	if (!n)
		return;
	n->reqs += 1;
	n->bytes += info->bytes;
	if (info->locality == ESN_LOC_REMOTE) {
		n->remote_reqs += 1;
		n->remote_bytes += info->bytes;
	}
}

/*
 * A request starts: record who, where and when. @at_issue: first seen when
 * handed to the driver (start missed), so there is no queue time.
 * @overwrite: a fresh request (block_io_start) replaces whatever a previous
 * user of the same address left behind.
 */
static __always_inline int blkobs_start(struct request *rq, bool typed,
					bool at_issue, bool overwrite)
{
	struct blkobs_rq info = {};
	u64 key = (u64)rq, now = bpf_ktime_get_ns();

	info.dev = rq_disk_dev(rq, typed);
	if (!info.dev)
		return 0;
	info.bytes = RQ_READ(typed, rq, __data_len);
	info.op = rq_op_class(rq, typed);
	info.submit_node = node_of_cpu(bpf_get_smp_processor_id());
	info.locality = dev_locality(info.dev, info.submit_node);
	if (at_issue)
		info.issue_ns = now;
	else
		info.start_ns = now;

	if (bpf_map_update_elem(&inflight, &key, &info,
				overwrite ? BPF_ANY : BPF_NOEXIST)) {
		/* NOEXIST failing on a known request is not a full table. */
		if (!bpf_map_lookup_elem(&inflight, &key))
			stat_inc(ESN_STAT_RQ_INFLIGHT_FULL);
		return 0;
	}
	stat_inc(ESN_STAT_RQ_STARTED);
	charge_node_start(&info);
	charge_task(&info, now);
	return 0;
}

static __always_inline int blkobs_issue(struct request *rq, bool typed)
{
	u64 key = (u64)rq;
	struct blkobs_rq *info = bpf_map_lookup_elem(&inflight, &key);

	if (!info)
		return blkobs_start(rq, typed, true, false);
	info->issue_ns = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int blkobs_requeue(struct request *rq, bool typed)
{
	u64 key = (u64)rq;
	struct blkobs_rq *info = bpf_map_lookup_elem(&inflight, &key);

	if (info) {
		info->issue_ns = 0;
		stat_inc(ESN_STAT_RQ_REQUEUED);
	}
	return 0;
}

/* Merged into another request: it completes as part of that one. */
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
	__sync_fetch_and_add(&h->lat_cnt[kind], 1);
	__sync_fetch_and_add(&h->lat_sum_ns[kind], ns);
	__sync_fetch_and_add(&h->slots[kind][slot], 1);
}

static __always_inline struct esn_io_hist *io_hist_of(const struct esn_io_key *k)
{
	struct esn_io_hist *h = bpf_map_lookup_elem(&io_hists, k), *zero;
	u32 idx = 0;

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
 * First completion of a request (there may be partial ones): account it and
 * forget it, so the table holds only requests in flight.
 */
static __always_inline int blkobs_complete(struct request *rq, bool typed)
{
	struct esn_io_key hkey = {};
	struct blkobs_rq info, *found;
	struct esn_io_hist *h;
	u64 key = (u64)rq, now;
	u32 done_node;
	bool cross;

	found = bpf_map_lookup_elem(&inflight, &key);
	if (!found) {
		stat_inc(ESN_STAT_RQ_UNTRACKED);
		return 0;
	}
	info = *found;
	bpf_map_delete_elem(&inflight, &key);

	now = bpf_ktime_get_ns();
	done_node = node_of_cpu(bpf_get_smp_processor_id());
	cross = done_node != info.submit_node;
	charge_node_completion(done_node, cross);

	hkey.dev = info.dev;
	hkey.locality = info.locality;
	hkey.op = info.op;
	h = io_hist_of(&hkey);
	if (!h)
		return 0;
	__sync_fetch_and_add(&h->reqs, 1);
	__sync_fetch_and_add(&h->bytes, info.bytes);
	if (cross)
		__sync_fetch_and_add(&h->cross_completions, 1);
	if (info.issue_ns && now >= info.issue_ns) {
		hist_add(h, ESN_LAT_DEVICE, now - info.issue_ns);
		if (info.start_ns && info.issue_ns >= info.start_ns)
			hist_add(h, ESN_LAT_QUEUE, info.issue_ns - info.start_ns);
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
#define BLKOBS_RQ_HOOK(tp, body, ...)                                   \
	SEC("tp_btf/" #tp)                                              \
	int BPF_PROG(esn_##tp, struct request *rq)                      \
	{                                                               \
		return body(rq, true, ##__VA_ARGS__);                   \
	}                                                               \
	SEC("raw_tp/" #tp)                                              \
	int BPF_PROG(esn_##tp##_raw, struct request *rq)                \
	{                                                               \
		return body(rq, false, ##__VA_ARGS__);                  \
	}

/* 6.5+: fires in blk_mq_bio_to_request(), in the submitter's context. */
BLKOBS_RQ_HOOK(block_io_start, blkobs_start, false, true)
/* Before 6.5 the nearest start point; skipped by requests issued directly. */
BLKOBS_RQ_HOOK(block_rq_insert, blkobs_start, false, false)
BLKOBS_RQ_HOOK(block_rq_issue, blkobs_issue)
BLKOBS_RQ_HOOK(block_rq_requeue, blkobs_requeue)
BLKOBS_RQ_HOOK(block_rq_merge, blkobs_merge)
/* (rq, error, nr_bytes): only the request matters here. */
BLKOBS_RQ_HOOK(block_rq_complete, blkobs_complete)

#endif /* __ESN_BLKOBS_BPF_H */
