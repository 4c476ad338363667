/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Event counters: a per-CPU array so the hot paths never share a cache line.
 * Userspace sums the CPUs and takes deltas.
 */
#ifndef __ESN_STATS_BPF_H
#define __ESN_STATS_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ESN_NR_STATS);
	__type(key, u32);
	__type(value, u64);
} stats SEC(".maps");

static __always_inline void stat_inc(u32 idx)
{
	u64 *cnt = bpf_map_lookup_elem(&stats, &idx);

	if (cnt)
		(*cnt)++;
}

static __always_inline void stat_add(u32 idx, u64 value)
{
	u64 *cnt = bpf_map_lookup_elem(&stats, &idx);

	if (cnt)
		*cnt += value;
}

#endif /* __ESN_STATS_BPF_H */
