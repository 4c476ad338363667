/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The per-call profiler: a test instrument (tests/callprof), never loaded by
 * scx_esn.
 *
 * The kernel's bpf stats give a program's total run time and run count, so
 * only the mean of its calls. Under single-threaded TCG a call that a vCPU
 * switch lands in is timed with the other vCPUs' turns (up to 100 ms each),
 * and a handful of those decide a window's mean: the mean of one build read
 * 0.8x-1.3x of itself from window to window. This pair of tracing programs
 * times every call of one scheduler callback instead, fentry to fexit, into a
 * log-linear histogram, so that the loader can give the median and the tail
 * separately: the median is what the callback's code costs, the tail is where
 * the emulator's turns went.
 *
 * The loader opens this object once per callback program and points both
 * programs at it (bpf_program__set_attach_target) before loading: the target
 * is any loaded BPF program, here a sched_ext scheduler's struct_ops
 * callbacks, which do not nest on a CPU (they run under the runqueue lock or
 * with interrupts off), so one per-CPU entry time is enough.
 */
#include <scx/common.bpf.h>

/* Slots per power of two (2^SUB_BITS) and in all: 64 powers of two fit in
 * 2048. tests/callprof/src/slots.rs mirrors both, and the loader checks the
 * map's size against its own before reading it. */
#define CALLPROF_SUB_BITS 5
#define CALLPROF_SLOTS 2048

char _license[] SEC("license") = "GPL";

/* When the current call on this CPU entered; 0 while none is open (the
 * profiler attached between an entry and its exit). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} call_entered_at SEC(".maps");

/* Calls per duration slot (callprof_slot), per CPU: no shared line bounces
 * between the CPUs the callback runs on; the loader sums them. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CALLPROF_SLOTS);
	__type(key, u32);
	__type(value, u64);
} call_slots SEC(".maps");

/*
 * The histogram slot of a duration: exact below 2^SUB_BITS ns, above that
 * 2^SUB_BITS slots per power of two (a slot is at most 1/32 of its value
 * wide), so a median of 2 µs and one of 60 µs are both read to ~3 %. The
 * loader's slot_bounds (tests/callprof/src/slots.rs) is the inverse; its
 * tests hold it to slot_of there, this function's mirror.
 */
static __always_inline u32 callprof_slot(u64 ns)
{
	u32 msb, sub;

	if (ns < (1ULL << CALLPROF_SUB_BITS))
		return ns;
	/* scx's log2_u64() is one more than the index of the highest bit. */
	msb = log2_u64(ns) - 1;
	sub = (ns >> (msb - CALLPROF_SUB_BITS)) &
	      ((1U << CALLPROF_SUB_BITS) - 1);
	return ((msb - CALLPROF_SUB_BITS + 1) << CALLPROF_SUB_BITS) |
	       sub;
}

/* The callback is entered: note when, on this CPU. */
SEC("fentry")
int BPF_PROG(call_entered)
{
	u32 zero = 0;
	u64 *at = bpf_map_lookup_elem(&call_entered_at, &zero);

	if (at)
		*at = bpf_ktime_get_ns();
	return 0;
}

/* The callback returns: count its duration in its slot. */
SEC("fexit")
int BPF_PROG(call_returned)
{
	u64 now = bpf_ktime_get_ns();
	u32 zero = 0, slot;
	u64 *at = bpf_map_lookup_elem(&call_entered_at, &zero), *count;

	if (!at || !*at)
		return 0;
	slot = callprof_slot(now > *at ? now - *at : 0);
	*at = 0;
	if (slot >= CALLPROF_SLOTS)
		slot = CALLPROF_SLOTS - 1;
	count = bpf_map_lookup_elem(&call_slots, &slot);
	if (count)
		*count += 1;
	return 0;
}

/* Does nothing: the profiler aimed at it (the loader runs it through
 * BPF_PROG_TEST_RUN) times only itself, the floor under every callback's
 * figure on this machine. */
SEC("syscall")
int empty_call(void *ctx)
{
	return 0;
}
