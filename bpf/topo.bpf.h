/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The CPU -> NUMA node map, shared by the scheduler and the observer.
 *
 * Userspace fills it from sysfs before load; it never changes while loaded
 * (a CPU hotplug restarts the scheduler, and the observer rereads topology
 * when it starts).
 */
#ifndef __ESN_TOPO_BPF_H
#define __ESN_TOPO_BPF_H

/* Node ids are < nr_nodes. */
const volatile u32 nr_nodes = 1;
const volatile u8 cpu_node[ESN_MAX_CPUS];

/*
 * Rodata arrays are read through MEMBER_VPTR: clang likes to merge or drop
 * bounds checks in ways the verifier cannot follow, the asm check it emits
 * survives.
 */
static __always_inline u32 node_of_cpu(s32 cpu)
{
	const volatile u8 *node = MEMBER_VPTR(cpu_node, [cpu]);

	return node ? *node : 0;
}

#endif /* __ESN_TOPO_BPF_H */
