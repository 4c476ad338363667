/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * scx_esn: NUMA- and NVMe-aware placement of I/O-bound tasks ("lesser evil").
 *
 * A task that issues block I/O from a socket other than its device's pays an
 * interconnect penalty; piling every I/O task onto the device's socket pays a
 * CPU-contention penalty instead. The lesser evil: keep I/O-bound tasks on the
 * node of the device they use while that node holds fewer than its threshold
 * of them, then spill the excess to the nearest node (by NUMA distance) that
 * has room.
 *
 * Model:
 *   - iotrace.bpf.h scores each task's I/O and votes on its main device;
 *     a task is I/O-bound while its decayed score >= io_min_score, and its
 *     home node is the node of the device that wins its vote.
 *   - An I/O-bound task takes a slot on a node (nr_placed[node] <
 *     node_threshold[node]) and keeps it while it stays I/O-bound, allowed on
 *     that node and keeps doing I/O (a timer frees slots of tasks that went
 *     quiet, so sleepers do not hold them forever).
 *   - Each node with CPUs has an I/O queue (its placed tasks, never taken
 *     by another node unless they wait too long) and a fair queue
 *     (everything else, stolen freely by idle nodes). Both are ordered by
 *     vtime on the node's own clock, and a CPU serves the head that used
 *     less CPU, the I/O queue on ties: a placed task that turns CPU-heavy
 *     gets its fair share, no more.
 *   - A run's vtime charge is scaled by the task's I/O priority class
 *     (ionice): RT-class tasks pay less and run ahead, IDLE-class ones pay
 *     more and yield (ioprio_rt_boost, ioprio_idle_penalty).
 *   - Energy: while a node runs placed tasks on fewer CPUs than it has,
 *     other tasks that wake on a wholly idle node take its idle CPUs
 *     instead, and the nodes without I/O stay asleep (keep_idle_nodes).
 *
 * Userspace (scx_esn/src/sched.rs) fills the topology rodata before load, the
 * device and threshold maps before attach, and its controller (control.rs)
 * rewrites the thresholds live; a node over its new threshold sheds the
 * excess at the placed tasks' next wake-ups.
 */
#include <scx/common.bpf.h>

#include "intf.h"
#include "topo.bpf.h"
#include "iotrace.bpf.h"
#include "blkobs.bpf.h"

char _license[] SEC("license") = "GPL";

/* Priorities below this are RT, deadline and stop tasks (sched/prio.h). */
#ifndef MAX_RT_PRIO
#define MAX_RT_PRIO 100
#endif

UEI_DEFINE(uei);

/*
 * Tunables, set by userspace before load.
 */

/* Time slice of every task. */
const volatile u64 slice_ns = 5ULL * 1000 * 1000;

/*
 * Decayed I/O score at which a task counts as I/O-bound. With the default
 * 100 ms half-life a steady rate r gives a score of about 0.144 * r, so 8
 * means "about 55 block I/Os per second or more".
 */
const volatile u64 io_min_score = 8;

/* A placed task that did no I/O for this long gives its slot back. */
const volatile u64 io_idle_ns = 500ULL * 1000 * 1000;

/*
 * A placed task waiting this long in its node's I/O queue may be run by
 * another node: the home node is then out of capacity (e.g. RT tasks hog it)
 * and running remotely beats not running. Also the watchdog's safety net.
 */
const volatile u64 io_steal_after_ns = 50ULL * 1000 * 1000;

/*
 * A placed task that wakes to find no idle CPU on its node preempts a CPU
 * only if the task there has run this long; else it queues. Preempting at
 * every I/O completion (0) starves the node's other tasks: at 8 fio jobs in
 * the 2-node VM, ~1660 preemptions a second on 4 CPUs left fair tasks
 * waiting 2-3 ms for a CPU and doubled fio's own p99.
 */
const volatile u64 io_preempt_after_ns = 1000ULL * 1000;

/*
 * A task on the fair path that wakes to find no idle CPU preempts a fair task
 * that has run this long and used more CPU than it (the later vtime, its run so
 * far charged), as EEVDF's wake-up preemption does; else it waits for a slice
 * to end, which the tick notices: up to slice_ns plus a tick. A shell forking
 * beside two CPU hogs in the 1-node VM woke ~190 times a second (exec's reads)
 * and waited 2.0-2.9 ms each time, against 0.5-1.2 ms under EEVDF, and forked
 * 0.55-0.65x as often. Placed and I/O-bound tasks are never preempted for it
 * (cpu_state.spared): they leave the CPU at their next I/O. Nor does an
 * I/O-bound task that found no slot preempt (it runs off its device's node, and
 * a hog's CPU there is remote I/O's), nor does anyone while I/O-bound tasks run
 * (preempt_for_fair_wakeup): this serves the machine's CPU-only phases and
 * CPU-only machines.
 */
const volatile bool fair_preempt = true;
const volatile u64 fair_preempt_after_ns = 1000ULL * 1000;

/*
 * Energy: while a node runs placed I/O tasks on fewer CPUs than it has, a
 * task that is not I/O-bound and wakes on a node that is wholly idle (no
 * placed task, every CPU idle) takes an idle CPU of the nearest such node
 * instead, which is awake anyway (pick_idle_on_awake_node). Waking the idle
 * node for a few microseconds of a daemon's tick takes its whole socket out
 * of deep idle: the research's energy saving is in the sockets left idle.
 * With no idle CPU on such a node the task wakes its own: work before sleep.
 */
const volatile bool keep_idle_nodes = true;

/*
 * I/O priority classes (ionice), without changing applications: a task of
 * the RT class is charged its CPU time divided by this and may keep this
 * many times the lag at a wake-up, so it runs ahead of best-effort tasks in
 * the vtime queues; 1 treats it like any other.
 */
const volatile u64 ioprio_rt_boost = 4;

/* ... and an IDLE-class task is charged its CPU time times this and keeps
 * this share of the lag: it yields the CPU to the others. 1 treats it like
 * any other. */
const volatile u64 ioprio_idle_penalty = 4;

/*
 * sched_ext's watchdog unloads us when a runnable task waits this long. The
 * steal delay and the rescue timer keep real waits far below it; 5 s (the
 * peers' choice) rather than the kernel's 30 s default so a bug here costs a
 * machine seconds, not half a minute, before it falls back to the fair class.
 */
#define WATCHDOG_TIMEOUT_MS 5000

/*
 * Does the kernel have SMT siblings online (sched_smt_active())? Without
 * them its idle pick ignores SCX_PICK_IDLE_CORE and searches every idle CPU
 * anyway, so asking for a whole idle core first and then for any idle CPU
 * would search the same mask twice at every wake-up that finds none.
 * Turning SMT on or off is CPU hotplug, which restarts the scheduler.
 */
const volatile bool smt_active = true;

/*
 * Is a higher class taking a CPU seen at every context switch
 * (esn_sched_switch, loaded where the kernel re-enqueues a local queue from
 * any program)? Then every switch to an RT or deadline task stamps the CPU
 * (cpu_rt_took_at), a switch back from the idle task included, which
 * ops.cpu_release never saw, and direct_dispatch_safe() needs no look at the
 * CPU's current task.
 */
const volatile bool rt_seen_at_switch = false;

/* Topology beyond topo.bpf.h: which nodes have CPUs and, for each node, the
 * other nodes with CPUs, nearest first, ESN_NO_NODE terminated. */
const volatile u8 node_has_cpus[ESN_MAX_NODES];
const volatile u8 spill_order[ESN_MAX_NODES][ESN_MAX_NODES];
/* Online CPUs of each node (a node's cpumask also holds the ids of CPUs
 * offline at load, which default to node 0). */
const volatile u32 node_cpus_nr[ESN_MAX_NODES];

/*
 * State written only by BPF.
 */

/* I/O-bound tasks currently holding a slot on each node. */
u32 nr_placed[ESN_MAX_NODES];

/*
 * Placements released so far, anywhere (the sweep, an exiting task, a task
 * re-placed). A task's last check (esn_sched_task.checked_gen) stands only
 * while this has not moved: the sweep releases by tid, without the task's
 * own state at hand, and a release frees a slot others may take.
 */
u64 placements_released;

/*
 * What each CPU's own callbacks note for the others, in one record per CPU
 * so that ops.running, which writes it at every context switch, touches one
 * cache line (aligned: a CPU's writes do not bounce its neighbours').
 *
 * spared: preempt_for_io must leave the CPU alone: it runs an I/O-bound
 * task, placed or not (written in ops.running), or a higher class holds it
 * (ops.cpu_release; the next ops.running rewrites it). An I/O-bound task
 * gives its CPU up at its next request anyway; preempting it buys a context
 * switch and little else (at 8 fio jobs on 4 CPUs, most preemptions hit
 * another fio job). A task put on the local queue of a CPU an RT task holds
 * would wait until that task yields.
 *
 * lent: a higher class took the CPU (ops.cpu_release) and no sched_ext task
 * has run since (the next ops.running clears it): an RT task throttled for
 * its window may take such a CPU back at any moment (direct_dispatch_safe).
 *
 * run_start: when the task on the CPU started running (ops.running), for
 * io_preempt_after_ns.
 *
 * spared also stays set on a CPU an I/O-bound task left idle at its I/O
 * (until the next task runs there): the CPU the task's completion wakes it
 * back onto, which keep_idle_nodes leaves alone (pick_idle_beside_io).
 */
struct esn_cpu_state {
	u64 run_start;
	u8 spared;
	u8 lent;
} __attribute__((aligned(64)));

struct esn_cpu_state cpu_state[ESN_MAX_CPUS];

static __always_inline struct esn_cpu_state *cpu_state_of(s32 cpu)
{
	return MEMBER_VPTR(cpu_state, [cpu]);
}

/*
 * When (bpf_jiffies64()) an RT or deadline task last took or held each CPU
 * (0: never), by ops.cpu_release and by the timer's sample
 * (note_rt_held_cpus). Jiffies, not sched_now(): direct_dispatch_safe
 * reads it at wake-ups, outside any runqueue lock, where sched_now() is a
 * sched_clock call and a jiffies read is a load. Such a
 * task takes the CPU back from the idle task at the end of its throttling
 * window without a cpu_release, so cpu_state.lent, cleared by whatever ran in
 * the window, cannot tell that the CPU is about to go
 * (direct_dispatch_safe). Written rarely: at a cpu_release, and once a
 * timer interval for a CPU a higher class holds.
 */
u64 cpu_rt_took_at[ESN_MAX_CPUS];

/*
 * How long after an RT or deadline task took a CPU it is no target for a
 * direct dispatch, in seconds: longer than the RT bandwidth period (1 s by
 * default, sched_rt_period_us, and the deadline servers' period), so a task
 * that holds the CPU through its throttling windows keeps it marked.
 */
#define RT_RECENT_SECS 2

/*
 * The share of each CPU's time a higher class holds, as the timer samples it
 * (note_rt_held_cpus: a moving average over ~8 samples, RT_LOAD_ONE = all
 * of it). A CPU an RT task holds most of the time (cpu_rt_hogged) runs
 * sched_ext tasks only in the gaps its throttling leaves, about 50 ms a
 * second, and an I/O request submitted there in such a gap most likely
 * completes through that CPU's softirq or kblockd worker, which then waits
 * out the RT task's next second (fio's max latency 963-970 ms beside an RT
 * spinner in 4 of 64 VM fairness R runs, while bpftrace saw ksoftirqd/3 and
 * kworker/3:0H wait 418-956 ms, and no fio thread wait over 200 ms to run).
 * Placed tasks keep off such a CPU; where every CPU of their node is one,
 * they wait for the steal delay (io_queue_starving) and are then run.
 */
#define RT_LOAD_ONE 1024
#define RT_LOAD_HOGGED (RT_LOAD_ONE / 2)
u32 cpu_rt_load[ESN_MAX_CPUS];

/*
 * Per-node vtime clocks: the largest vtime a task started running with on
 * the node's CPUs. One global clock is dragged forward by whichever node
 * runs the heaviest tasks, and waking tasks everywhere are clamped up to
 * it. The clock follows every task that runs, not only those its queues
 * hand out: a clock left behind by direct dispatches would let a newcomer
 * or a waker, clamped to it, run ahead of tasks for seconds.
 */
u64 node_vtime_now[ESN_MAX_NODES];

/*
 * How many tasks wait in each node's two queues, as the scheduler counts
 * them, so that a CPU about to go idle reads four counters instead of
 * making four kfunc calls (each a hash lookup of the queue) to find every
 * queue empty. A task is counted when enqueue queues it and uncounted when
 * it runs, or leaves sched_ext, or is queued again elsewhere: the count is
 * raised before the kernel inserts the task (an insert made from enqueue
 * lands after the callback returns) and lowered only once the task is out
 * of the queue, so it is never below what the queue holds, and a count of
 * zero means the queue is empty. A task the kernel takes out of a queue
 * without a callback (a property change) is counted until it is queued
 * again or runs: a count can read high, which only costs the lookup.
 */
enum queue_kind {
	QUEUE_FAIR,
	QUEUE_IO,
	NR_QUEUE_KINDS,
};

u32 queued_count[ESN_MAX_NODES][NR_QUEUE_KINDS];

/* Set for good if a task could not be counted (no task state): the
 * counts then stop being trusted, and the kernel's are read instead. */
bool queue_counts_off;

/* Written only by userspace (the controller): slots per node. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ESN_MAX_NODES);
	__type(key, u32);
	__type(value, u32);
} node_threshold SEC(".maps");

/* Who holds a slot where, keyed by tid. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ESN_MAX_PLACED_TASKS);
	__type(key, u32);
	__type(value, struct esn_placement);
} placements SEC(".maps");

struct node_ctx {
	struct bpf_cpumask __kptr *cpumask;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ESN_MAX_NODES);
	__type(key, u32);
	__type(value, struct node_ctx);
} node_ctxs SEC(".maps");

/* Scheduler-side per-task state (the I/O side lives in task_io). */
struct esn_sched_task {
	struct bpf_cpumask __kptr *scratch; /* node mask & p->cpus_ptr */
	u64 io_enqueued_at;
	/*
	 * Became runnable, where the kernel does not stamp it
	 * (kernel_stamps_waits()): set at a wake-up by select_cpu, by stopping
	 * when preempted, else by enqueue when 0. 0 while it runs or sleeps,
	 * and after disable. No ops.runnable for it: a callback per wake-up,
	 * in a VM tens of microseconds per I/O, for one clock read.
	 */
	u64 runnable_at;
	/* Where the kernel stamps waits: its run_delay plus the wait then in
	 * progress, as of this task's last run start (account_wait). */
	u64 wait_seen;
	u64 running_at;	 /* started its current run */
	bool io_placed;	 /* placed at its last wake-up or enqueue */
	bool io_bound;	 /* I/O-bound then, placed or not (it found no slot) */
	bool woke_node_set; /* select_cpu's woke_node awaits its enqueue */
	bool woke_idle;	 /* its wake-up went straight to an idle CPU */
	/* select_cpu's fair path claimed no idle CPU for it (its enqueue
	 * does not look again) */
	bool woke_none_idle;
	u8 woke_node;	 /* task_io_node() at select_cpu (ESN_NO_NODE: fair) */
	u8 vtime_node;	 /* node whose clock p->scx.dsq_vtime is measured on */
	u8 wait_node;	 /* node whose queues it waits in: charged its wait */
	u8 ioprio_class; /* enum esn_ioprio_class, as last read */
	bool rescued;	 /* run out of vtime order (run_starving) */
	bool joined;	 /* new to us (forked, or there at load), not yet queued
			  * nor run */
	u64 ioprio_due_at; /* jiffies when it is reread (task_ioprio_class);
			    * 0: now */
	/* last_check_stands(): task_target_node()'s last full answer */
	u8 checked_node;
	u64 checked_until; /* jiffies until which it stands; 0: none does */
	u64 checked_gen; /* placements_released as of that check */
	u8 counted_in;	 /* its queued_count slot + 1; 0: none (see there) */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct esn_sched_task);
} sched_task_stor SEC(".maps");

/* @p's scheduler state; NULL only for a task init_task never saw. */
static __always_inline struct esn_sched_task *sched_task(struct task_struct *p)
{
	return bpf_task_storage_get(&sched_task_stor, p, NULL, 0);
}

/* Wait from runnable to running, per node (struct esn_node_sched). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ESN_MAX_NODES);
	__type(key, u32);
	__type(value, struct esn_node_sched);
} node_sched SEC(".maps");

#define SWEEP_INTERVAL_NS (100ULL * 1000 * 1000)
#define RESCUE_MIN_INTERVAL_NS (1000ULL * 1000)

struct sweep_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sweep_timer);
} sweep_timers SEC(".maps");

/*
 * Topology helpers.
 */

static __always_inline u64 io_dsq(u32 node)
{
	return ESN_DSQ_IO_BASE + node;
}

static __always_inline u64 fair_dsq(u32 node)
{
	return ESN_DSQ_FAIR_BASE + node;
}

static __always_inline u64 queue_dsq(u32 node, enum queue_kind kind)
{
	return kind == QUEUE_IO ? io_dsq(node) : fair_dsq(node);
}

/*
 * Queue counts (queued_count).
 */

static __always_inline u32 *queued_count_of(u32 node, u32 kind)
{
	return MEMBER_VPTR(queued_count, [node][kind]);
}

/* May @node's @kind queue hold a task? False only when it surely is empty. */
static __always_inline bool queue_may_hold(u32 node, enum queue_kind kind)
{
	u32 *cnt = queued_count_of(node, kind);

	return queue_counts_off || !cnt || READ_ONCE(*cnt);
}

/* @st's task left the queue it was counted in (it runs, say). */
static __always_inline void uncount_queued(struct esn_sched_task *st)
{
	u32 slot = st->counted_in, *cnt;

	if (!slot)
		return;
	st->counted_in = 0;
	slot--;
	cnt = queued_count_of(slot / NR_QUEUE_KINDS, slot % NR_QUEUE_KINDS);
	if (cnt)
		__sync_fetch_and_sub(cnt, 1);
}

/* @st's task is about to be inserted into @node's @kind queue. */
static void count_queued(struct esn_sched_task *st, u32 node,
			 enum queue_kind kind)
{
	u32 slot = node * NR_QUEUE_KINDS + kind + 1, *cnt;

	if (!st) {
		queue_counts_off = true;
		return;
	}
	/* Taken out by the kernel and queued where it was: counted once. */
	if (st->counted_in == slot)
		return;
	uncount_queued(st);
	cnt = queued_count_of(node, kind);
	if (!cnt) {
		queue_counts_off = true;
		return;
	}
	__sync_fetch_and_add(cnt, 1);
	st->counted_in = slot;
}

static __always_inline bool node_has_cpu(u32 node)
{
	const volatile u8 *has = MEMBER_VPTR(node_has_cpus, [node]);

	return has && *has;
}

/* The i-th nearest other node of @node with CPUs, or ESN_NO_NODE. */
static __always_inline u8 nth_neighbour(u32 node, u32 i)
{
	const volatile u8 *next = MEMBER_VPTR(spill_order, [node][i]);

	return next ? *next : ESN_NO_NODE;
}

static const struct cpumask *node_cpumask(u32 node)
{
	struct node_ctx *nctx;

	if (node >= ESN_MAX_NODES)
		return NULL;
	nctx = bpf_map_lookup_elem(&node_ctxs, &node);
	if (!nctx || !nctx->cpumask)
		return NULL;
	return cast_mask(nctx->cpumask);
}

/*
 * The kernel's nr_cpu_ids, read once by ops.init. A task allowed on that
 * many CPUs may use every CPU (a task's cpumask has no bits past it), so
 * the wake-up path skips the cpumask kfuncs for it (up to three calls per
 * wake-up), and nearly every task is such a task.
 */
static u32 cpu_ids_nr;

static __always_inline bool task_runs_anywhere(struct task_struct *p)
{
	/* migrate_disable() narrows cpus_ptr, not nr_cpus_allowed. */
	return cpu_ids_nr && p->nr_cpus_allowed >= cpu_ids_nr &&
	       !is_migration_disabled(p);
}

/*
 * CPUs of @node that @p may use: the node's mask itself for a task allowed
 * everywhere, else their intersection in @p's scratch mask (@st is @p's
 * state, looked up once by the callback); NULL if none. Every placement
 * goes through here, which is what keeps taskset and cpusets honoured.
 */
static const struct cpumask *task_node_cpus(struct task_struct *p,
					    struct esn_sched_task *st, u32 node)
{
	const struct cpumask *nmask = node_cpumask(node);
	struct bpf_cpumask *scratch;

	if (!nmask || !st)
		return NULL;
	if (task_runs_anywhere(p))
		return nmask;
	scratch = st->scratch;
	if (!scratch)
		return NULL;
	if (!bpf_cpumask_and(scratch, nmask, p->cpus_ptr))
		return NULL;
	return cast_mask(scratch);
}

/* May @p run on @cpu of @node (a CPU of that node)? */
static __always_inline bool task_may_use_cpu(struct task_struct *p, s32 cpu,
					     u32 node)
{
	if ((u32)cpu >= cpu_ids_nr || node_of_cpu(cpu) != node)
		return false;
	return task_runs_anywhere(p) || bpf_cpumask_test_cpu(cpu, p->cpus_ptr);
}

static bool task_allowed_on_node(struct task_struct *p, u32 node)
{
	const struct cpumask *nmask = node_cpumask(node);

	if (!nmask)
		return false;
	return task_runs_anywhere(p) ||
	       bpf_cpumask_intersects(nmask, p->cpus_ptr);
}

static bool task_is_pinned(const struct task_struct *p)
{
	return p->nr_cpus_allowed == 1 || is_migration_disabled(p);
}

/*
 * Slots.
 */

/*
 * Take a slot on @node if it holds fewer than its threshold; returns the
 * number of slots held before it (the new placement's rank, see
 * node_over_threshold), or -1. A compare and swap, not add-then-undo: an
 * increment undone a moment later lets another CPU see the node over its
 * threshold and shed a placement that was valid. Bounded: under a storm of
 * contenders, failing to place is the safe answer (the task is scheduled
 * fairly and tries again at its next wake-up).
 */
static s32 node_take_slot(u32 node)
{
	u32 *limit = bpf_map_lookup_elem(&node_threshold, &node);
	u32 *count = MEMBER_VPTR(nr_placed, [node]);
	u32 i;

	if (!limit || !count)
		return -1;
	bpf_for(i, 0, 8) {
		u32 held = *count;

		if (held >= *limit)
			return -1;
		if (__sync_val_compare_and_swap(count, held, held + 1) == held)
			return held;
	}
	return -1;
}

static void node_put_slot(u32 node)
{
	u32 *count = MEMBER_VPTR(nr_placed, [node]);

	if (count)
		__sync_fetch_and_sub(count, 1);
}

/* Drop @tid's placement; the map delete makes a second release a no-op. */
static void release_placement(u32 tid, u32 node)
{
	if (bpf_map_delete_elem(&placements, &tid))
		return;
	__sync_fetch_and_add(&placements_released, 1);
	node_put_slot(node);
	stat_inc(ESN_STAT_RELEASE);
}

/* Drop @p's placement, if it has one. */
static void release_task_placement(struct task_struct *p)
{
	struct esn_placement *pl;
	u32 tid = p->pid;

	pl = bpf_map_lookup_elem(&placements, &tid);
	if (pl)
		release_placement(tid, pl->node);
}

/*
 * The controller lowered @node's threshold below the tasks it holds: the
 * excess must go, or a lowered threshold would only take effect as placed
 * tasks stop doing I/O, which busy ones never do. Each placed task checks at
 * its next wake-up, and the newest placements go, the ones whose @rank (the
 * slots held when they were placed) is at or above the threshold: the task
 * placed during the controller's one-interval exploration of threshold + 1
 * leaves again, rather than whichever task woke first. That passed the one
 * slot between two jobs at every exploration in the VM control test (each
 * job 64-65 % local where one should have been all local). The i-th oldest
 * placement still held was placed with at least i slots held, so at least
 * the excess has such a rank and the count always comes down to the
 * threshold. Tasks that shed together are re-placed one by one, the first
 * ones taking home's free slots again.
 */
static bool node_over_threshold(u32 node, u16 rank)
{
	u32 *limit = bpf_map_lookup_elem(&node_threshold, &node);
	u32 *count = MEMBER_VPTR(nr_placed, [node]);

	return limit && count && *count > *limit && rank >= *limit;
}

/*
 * A spilled task goes back to its home node as soon as home has a free slot
 * and the task may run there (its affinity widened, or a home task left).
 * The unlocked read only avoids hammering the counter; the slot itself is
 * taken atomically when the task is placed again.
 */
static bool can_return_home(struct task_struct *p, u32 node, u32 home)
{
	u32 *limit, *count;

	if (node == home)
		return false;
	limit = bpf_map_lookup_elem(&node_threshold, &home);
	count = MEMBER_VPTR(nr_placed, [home]);
	return limit && count && *count < *limit &&
	       task_allowed_on_node(p, home);
}

enum node_event { NODE_SPILL_IN, NODE_SPILL_OUT, NODE_STOLEN_FROM };

/*
 * A per-node event counted on the node it concerns (not the running CPU's
 * node): the map is per-CPU, so this only adds to the current CPU's copy.
 */
static __always_inline void node_event_inc(u32 node, enum node_event ev)
{
	struct esn_node_sched *ns = bpf_map_lookup_elem(&node_sched, &node);

	if (!ns)
		return;
	if (ev == NODE_SPILL_IN)
		ns->spill_in++;
	else if (ev == NODE_SPILL_OUT)
		ns->spill_out++;
	else
		ns->stolen_from++;
}

/* Home node first, then the neighbours nearest first; ESN_NO_NODE if all
 * the nodes @p may use are full. @rank: see node_take_slot. */
static u8 choose_node(struct task_struct *p, u8 home, u16 *rank)
{
	s32 held;
	u32 i;

	if (task_allowed_on_node(p, home)) {
		held = node_take_slot(home);
		if (held >= 0) {
			*rank = held;
			stat_inc(ESN_STAT_PLACE_LOCAL);
			return home;
		}
	}
	bpf_for(i, 0, nr_nodes) {
		u8 node = nth_neighbour(home, i);

		if (node == ESN_NO_NODE)
			break;
		if (!task_allowed_on_node(p, node))
			continue;
		held = node_take_slot(node);
		if (held >= 0) {
			*rank = held;
			stat_inc(ESN_STAT_PLACE_SPILL);
			node_event_inc(node, NODE_SPILL_IN);
			node_event_inc(home, NODE_SPILL_OUT);
			return node;
		}
	}
	stat_inc(ESN_STAT_PLACE_NONE);
	return ESN_NO_NODE;
}

/*
 * Home node of the task whose I/O record is @io if it is I/O-bound now, else
 * ESN_NO_NODE. Hysteresis: a task becomes I/O-bound at io_min_score but,
 * once placed (@pl), stays so down to a quarter of it. A placed task that
 * stalls for a few half-lives (CPU contention, a slow device) would
 * otherwise lose its slot, a spilled task would take it, and the two would
 * swap nodes over and over. Kernel threads never get here
 * (task_target_node).
 */
static u8 io_bound_home(struct esn_task_io *io, const struct esn_placement *pl)
{
	u64 bar = pl ? io_min_score / 4 : io_min_score;
	u8 home;

	if (!io)
		return ESN_NO_NODE;
	if (io_score_now(io, io_clock_ns()) < (bar ? bar : 1))
		return ESN_NO_NODE;
	/* Devices are registered once, before attach: a placed task still
	 * voting for the device it was placed for has the same home, and its
	 * wake-ups skip the device table. */
	if (pl && io->vote_weight && io->vote_dev == pl->dev)
		home = pl->home_node;
	else
		home = io_task_home_node(io);
	if (home >= nr_nodes || !node_has_cpu(home))
		return ESN_NO_NODE;
	return home;
}

/*
 * For the hot paths' rate limits: has a tenth of a second passed since
 * @then, both read from bpf_jiffies64()? The verifier turns that read into
 * a load, where sched_now() is a call. @then 0 means never.
 */
static __always_inline bool tenth_passed(u64 then, u64 now_jiffies)
{
	u64 hz = CONFIG_HZ ?: 1000;

	return !then || (now_jiffies - then) * 10 >= hz;
}

/*
 * The same limits for a task's own state, kept as deadlines: a tenth of a
 * second from @now_jiffies (never 0), and whether @due has come (0 has).
 * The check, at every wake-up and context switch, is then one subtraction,
 * with no CONFIG_HZ to read (a map of its own, .kconfig).
 */
static __always_inline u64 tenth_from(u64 now_jiffies)
{
	u64 hz = CONFIG_HZ ?: 1000;

	return (now_jiffies + (hz + 9) / 10) ?: 1;
}

static __always_inline bool due_by(u64 due, u64 now_jiffies)
{
	return !due || (s64)(now_jiffies - due) >= 0;
}

/*
 * An I/O-bound task wakes at every I/O completion, thousands of times a
 * second, and each full check (task_target_node) costs two or three hash
 * lookups and the slot counters; one that found every node full walks the
 * nodes' slots again each time. What the check looks at moves slowly: the
 * I/O score decays over half-lives, the controller sets thresholds once a
 * second, a slot frees when a placed task goes quiet or exits. So the
 * answer of an I/O-bound task's check (its node, or "no slot") stands for a
 * tenth of a second, unless a placement was released anywhere since (the
 * sweep may have dropped this one, or freed a slot this task may take), or
 * the task may not run on every CPU: an affinity change must be seen at
 * once, or the task would wait in a queue no CPU it may use serves.
 * Most wake-ups are of tasks that are not I/O-bound; their "no" stands for
 * the tenth of a second too, whatever was released (they hold no slot and
 * take the fair path, which serves any affinity): a task that turns
 * I/O-bound is placed at most a tenth of a second later.
 */
static __always_inline bool last_check_stands(struct task_struct *p,
					      struct esn_sched_task *st,
					      u64 gen, u64 now_jiffies)
{
	if (due_by(st->checked_until, now_jiffies))
		return false;
	/* "Not I/O-bound" stands whatever was released: it holds no slot. */
	if (!st->io_bound)
		return st->checked_node == ESN_NO_NODE;
	return st->checked_gen == gen && task_runs_anywhere(p);
}

/* task_target_node()'s answer @node (ESN_NO_NODE: not placed), as of @gen. */
static __always_inline void remember_check(struct esn_sched_task *st, u8 node,
					   u64 gen, u64 now_jiffies)
{
	if (!st)
		return;
	st->checked_node = node;
	st->checked_gen = gen;
	st->checked_until = tenth_from(now_jiffies);
}

/*
 * The node @p must run on, or ESN_NO_NODE for the fair path. Places @p when
 * it became I/O-bound, keeps the placement while it stays valid, releases it
 * when it is not (I/O stopped, device changed, affinity moved away).
 * A task whose last answer (@st) was "not placed" has no placement: only
 * this function creates one, and its answer then is the node. Most wake-ups
 * are of such tasks, so they skip the placements lookup.
 */
static u8 task_target_node(struct task_struct *p, struct esn_sched_task *st)
{
	u64 gen = READ_ONCE(placements_released), now_jiffies = bpf_jiffies64();
	struct esn_placement *pl = NULL, fresh = {};
	struct esn_task_io *io;
	u32 tid = p->pid;
	u8 home, node;

	/* Kernel threads (writeback, journal) are left to the fair path: they
	 * serve everyone. Asked first, so they pay no lookups. */
	if (p->flags & PF_KTHREAD) {
		if (st)
			st->io_bound = false;
		return ESN_NO_NODE;
	}
	if (st) {
		if (last_check_stands(p, st, gen, now_jiffies))
			return st->checked_node;
		st->checked_until = 0;
	}
	io = task_io_of(p);
	if (!st || st->io_placed)
		pl = bpf_map_lookup_elem(&placements, &tid);
	home = io_bound_home(io, pl);
	if (st)
		st->io_bound = home != ESN_NO_NODE;
	if (pl) {
		node = pl->node;
		bool shed = node_over_threshold(node, pl->rank);

		if (home == pl->home_node && task_allowed_on_node(p, node) &&
		    !can_return_home(p, node, home) && !shed) {
			if (io)
				pl->last_io_ns = io->last_io_ns;
			remember_check(st, node, gen, now_jiffies);
			return node;
		}
		/* Re-placed from scratch below: home first. */
		if (shed)
			stat_inc(ESN_STAT_SHED);
		else if (node != home && home == pl->home_node)
			stat_inc(ESN_STAT_RETURN_HOME);
		release_placement(tid, node);
	}
	if (home == ESN_NO_NODE || !io) {
		/* The next tenth of a second of wake-ups skips the lookups. */
		remember_check(st, ESN_NO_NODE, gen, now_jiffies);
		return ESN_NO_NODE;
	}

	node = choose_node(p, home, &fresh.rank);
	if (node == ESN_NO_NODE) {
		remember_check(st, ESN_NO_NODE, gen, now_jiffies);
		return ESN_NO_NODE;
	}
	fresh.node = node;
	fresh.home_node = home;
	fresh.dev = io->vote_dev;
	fresh.last_io_ns = io->last_io_ns;
	if (bpf_map_update_elem(&placements, &tid, &fresh, BPF_NOEXIST)) {
		node_put_slot(node);
		return ESN_NO_NODE;
	}
	remember_check(st, node, gen, now_jiffies);
	return node;
}

/*
 * When (bpf_jiffies64()) an I/O-bound task last woke or queued, placed or
 * not; 0: never. Fair wake-up preemption waits until a tenth of a second
 * after it (preempt_for_fair_wakeup). Written only when the jiffy changed.
 */
u64 io_bound_seen_at;

static __always_inline void note_io_bound(void)
{
	u64 now_jiffies = bpf_jiffies64();

	if (READ_ONCE(io_bound_seen_at) != now_jiffies)
		WRITE_ONCE(io_bound_seen_at, now_jiffies);
}

/* task_target_node(), remembering the answer for ops.running. */
static u8 task_io_node(struct task_struct *p, struct esn_sched_task *st)
{
	u8 node = task_target_node(p, st);

	if (st) {
		st->io_placed = node != ESN_NO_NODE;
		if (st->io_bound)
			note_io_bound();
	}
	return node;
}

/* Is this enqueue the wake-up whose select_cpu answer awaits it? */
static __always_inline bool woke_through_select_cpu(struct esn_sched_task *st,
						    u64 enq_flags)
{
	return st && st->woke_node_set && (enq_flags & SCX_ENQ_WAKEUP);
}

/*
 * task_io_node() for enqueue: a wake-up that found no idle CPU in select_cpu
 * reaches enqueue microseconds later, under the same wake-up, so select_cpu's
 * answer is reused rather than the placement tables walked twice. Any other
 * enqueue (slice expiry, preemption, a wake-up without select_cpu) decides
 * afresh; ops.running drops an answer no enqueue took (direct dispatch).
 */
static u8 enqueue_io_node(struct task_struct *p, struct esn_sched_task *st,
			  u64 enq_flags)
{
	if (woke_through_select_cpu(st, enq_flags)) {
		st->woke_node_set = false;
		return st->woke_node;
	}
	return task_io_node(p, st);
}

/*
 * The CPU @p is on, as scx_bpf_task_cpu() gives it, read off the task where
 * the kernel keeps it there (CONFIG_THREAD_INFO_IN_TASK: x86, arm64): a
 * load instead of a kfunc call at every run's start (ops.running) and in
 * every queueing that asks (enqueue, the preemptions, enable). Not
 * the current CPU: a property change on a running task (nice, affinity)
 * runs ops.running from the CPU that made it.
 */
static __always_inline s32 task_cpu_of(const struct task_struct *p)
{
	if (bpf_core_field_exists(struct task_struct, thread_info.cpu))
		return p->thread_info.cpu;
	return scx_bpf_task_cpu(p);
}

/*
 * The clock of the scheduler's own timestamps (waits, runs, queue ages):
 * the runqueue clock the kernel already read, where bpf_ktime_get_ns()
 * reads the clocksource at every call. Most machines read the TSC either
 * way, but where the TSC is unusable (a VM whose vCPUs' TSCs disagree
 * falls back to the HPET) each read is a device access: two more of them
 * per context switch made hackbench 1.37x slower in the 2-node VM. Times
 * compared with the attribution's (a task's I/O score and last I/O) are on
 * its clock, io_clock_ns().
 */
static __always_inline u64 sched_now(void)
{
	return scx_bpf_now();
}

/*
 * Does the kernel stamp when a task became runnable (CONFIG_SCHED_INFO:
 * sched_info.last_queued, set when the task is queued on a runqueue or
 * preempted and 0 once it runs; run_delay, the sum of those waits)? Then
 * the scheduler keeps no stamp of its own (runnable_at): select_cpu runs
 * outside the runqueue lock, where sched_now() is no cached read but a
 * sched_clock call, and it made that call at every wake-up.
 */
static __always_inline bool kernel_stamps_waits(void)
{
	return bpf_core_field_exists(struct task_struct,
				     sched_info.last_queued) &&
	       bpf_core_field_exists(struct task_struct, sched_info.run_delay);
}

/* When @p became runnable and has not run since; 0 if it runs or sleeps. */
static __always_inline u64 runnable_since(struct task_struct *p,
					  struct esn_sched_task *st)
{
	if (kernel_stamps_waits())
		return p->sched_info.last_queued;
	return st ? st->runnable_at : 0;
}

/* @st's task became runnable (a wake-up, or joining): where the kernel
 * does not stamp it, stamp it now unless it is already. */
static __always_inline void note_runnable(struct esn_sched_task *st)
{
	if (!kernel_stamps_waits() && st && !st->runnable_at)
		st->runnable_at = sched_now();
}

/*
 * How long @p waited for the run it starts @now; false if it did not queue
 * for it (a property change that ran it again). Where the kernel stamps
 * waits, the wait is read off its run_delay as the growth since the last
 * run's start (wait_seen): a task moved to another CPU's runqueue (a steal)
 * has the part before the move added to run_delay and last_queued reset,
 * and both parts count. The kernel adds the wait in progress to run_delay
 * at the context switch that follows, with the same runqueue clock.
 */
static __always_inline bool waited_for_cpu(struct task_struct *p,
					   struct esn_sched_task *st, u64 now,
					   u64 *wait)
{
	u64 since, total;

	if (!kernel_stamps_waits()) {
		since = st->runnable_at;
		st->runnable_at = 0;
		*wait = since && now > since ? now - since : 0;
		return since != 0;
	}
	since = p->sched_info.last_queued;
	total = p->sched_info.run_delay;
	if (since && time_after(now, since))
		total += now - since;
	*wait = total > st->wait_seen ? total - st->wait_seen : 0;
	st->wait_seen = total;
	return since != 0;
}

/*
 * Vtime: tasks are ordered by the CPU time they used, scaled by weight, on
 * the clock of the node whose queues they wait in.
 */

static __always_inline u64 *node_clock(u32 node)
{
	return MEMBER_VPTR(node_vtime_now, [node]);
}

/*
 * However a task came to lag (a long wait translated from another node's
 * clock, a node clock pushed ahead by one task), it is never more than this
 * many slices of run time behind its node's clock: a task further behind
 * holds its CPU (prev_keeps_cpu) or the queue's head for that long, and the
 * tasks behind it wait, the watchdog's own kworker included (a soak under
 * affinity churn and CPU hotplug stalled 5 s that way).
 */
#define MAX_LAG_SLICES 8

/*
 * Nor is a task ever so far *ahead* of its node's clock that it would wait
 * longer than about this for its next run. Its wait is the distance
 * divided by the rate the clock advances, which is the node's CPUs over
 * its runnable tasks: a nice-19 task (weight 1, every run charged 100x)
 * among 24 nice-0 spinners on a 2-CPU node waited out sched_ext's 5 s
 * watchdog after one 5 ms slice. So the distance allowed shrinks as the
 * queues grow; with few tasks waiting it is wide enough that nice keeps
 * its full effect.
 */
#define MAX_AHEAD_WAIT_NS (1000ULL * 1000 * 1000)

/* Tasks in @node's queues, at least 1. The counts may read a little high
 * (queued_count): a shorter cap. */
static __always_inline u64 node_queued(u32 node)
{
	u32 *fair = queued_count_of(node, QUEUE_FAIR);
	u32 *io = queued_count_of(node, QUEUE_IO);
	u64 queued = (fair ? READ_ONCE(*fair) : 0) + (io ? READ_ONCE(*io) : 0);

	return queued ? queued : 1;
}

static __always_inline u64 max_ahead_ns(u32 node)
{
	return MAX_AHEAD_WAIT_NS / node_queued(node);
}

#define IOPRIO_CLASS_SHIFT_BITS 13

/*
 * @p's I/O priority class (its io_context's, set by ioprio_set(2)); a task
 * without one, or without a class in it, is best effort. ionice changes are
 * rare: the class is reread at most ten times a second (this runs at every
 * wake-up and every stop).
 */
static u8 task_ioprio_class(struct task_struct *p, struct esn_sched_task *st)
{
	u64 now = bpf_jiffies64();
	struct io_context *ioc;
	u8 class;

	if (!due_by(st->ioprio_due_at, now))
		return st->ioprio_class;
	ioc = BPF_CORE_READ(p, io_context);
	class = ioc ? BPF_CORE_READ(ioc, ioprio) >> IOPRIO_CLASS_SHIFT_BITS : 0;
	if (class != ESN_IOPRIO_RT && class != ESN_IOPRIO_IDLE)
		class = ESN_IOPRIO_BE;
	st->ioprio_class = class;
	st->ioprio_due_at = tenth_from(now);
	return class;
}

/*
 * @value scaled by @p's I/O priority class. A credit (the lag it may keep
 * behind its node's clock) grows ioprio_rt_boost times for the RT class, so
 * at a wake-up it queues ahead of best-effort wakers (most I/O tasks sleep
 * at every request, and a cheaper charge alone would be erased by the
 * clamp), and shrinks for IDLE, which queues behind them. A cost (the vtime
 * a run is charged) goes the other way.
 */
static __always_inline u64 ioprio_scale(struct task_struct *p,
					struct esn_sched_task *st, u64 value,
					bool credit)
{
	switch (task_ioprio_class(p, st)) {
	case ESN_IOPRIO_RT:
		return credit ? value * ioprio_rt_boost
			      : value / (ioprio_rt_boost ?: 1);
	case ESN_IOPRIO_IDLE:
		return credit ? value / (ioprio_idle_penalty ?: 1)
			      : value * ioprio_idle_penalty;
	default:
		return value;
	}
}

/*
 * The weight of a nice-0 task, which scale_by_task_weight_inverse() (scx's
 * common.bpf.h) divides by: a run of t costs t * NICE0_WEIGHT / weight.
 */
#define NICE0_WEIGHT 100

/*
 * Would task_vtime_on() leave @vtime as it is, for a task whose lag may be
 * @lag_slices slices? The answer without its divisions, for the call at
 * every queueing: the vtime was bounded against this clock when @p last
 * queued, and only charged since while the clock moved up,
 * so nearly always it still lies within both bounds. d > floor(M / w)
 * exactly when d * w > M, which turns each bound's division into a
 * multiplication (with d capped first, so the product cannot overflow).
 * Only a "yes" must be exact: a task of the IDLE class, or whose I/O class
 * is due for a reread, gets "no", and the full path.
 */
static __always_inline bool vtime_in_bounds(struct task_struct *p,
					    struct esn_sched_task *st, u32 node,
					    u64 vtime, u64 clock,
					    u64 lag_slices)
{
	u64 lag = lag_slices * slice_ns * NICE0_WEIGHT, d;

	if (st->vtime_node != node || st->ioprio_class == ESN_IOPRIO_IDLE ||
	    due_by(st->ioprio_due_at, bpf_jiffies64()))
		return false;
	if (time_after(vtime, clock)) {
		d = vtime - clock;
		return d <= MAX_AHEAD_WAIT_NS &&
		       d * node_queued(node) <= MAX_AHEAD_WAIT_NS;
	}
	/* Behind: within the best-effort lag, and the RT class's is wider. */
	d = clock - vtime;
	return d <= lag && d * p->scx.weight <= lag;
}

/*
 * @p's vtime for waiting on @node, brought within the bounds above (a lag
 * of @lag_slices; @st not NULL), written back to the task when @write_back
 * (an insert into a vtime queue sets it itself, and the write is a kfunc
 * call on kernels since 6.19). A task that changed node keeps its lag,
 * measured against the clock it left. A waking task gets at most one slice
 * of lag, inversely to its weight as EEVDF does, so the credit is one slice
 * of *run time* at any nice level: sleeping never buys a burst. Tasks
 * queued again without sleeping (slice over, preempted, sent back from a CPU
 * a higher class took) keep their vtime up to MAX_LAG_SLICES behind: clamping
 * them to one slice would erase the CPU they used and flatten nice.
 */
static u64 task_vtime_bound(struct task_struct *p, struct esn_sched_task *st,
			    u32 node, u64 lag_slices, bool write_back)
{
	u64 vtime = p->scx.dsq_vtime, *clock = node_clock(node), *from, lag;
	u64 ahead;

	if (!clock)
		return vtime;
	if (st->vtime_node != node) {
		from = node_clock(st->vtime_node);
		if (from)
			vtime = vtime - *from + *clock;
		st->vtime_node = node;
	}
	lag = ioprio_scale(p, st,
			   scale_by_task_weight_inverse(p, lag_slices * slice_ns),
			   true);
	if (time_before(vtime, *clock - lag))
		vtime = *clock - lag;
	/* Only a task ahead at all reads the queue lengths. */
	if (time_after(vtime, *clock)) {
		ahead = max_ahead_ns(node);
		if (time_after(vtime, *clock + ahead))
			vtime = *clock + ahead;
	}
	if (write_back && vtime != p->scx.dsq_vtime)
		scx_bpf_task_set_dsq_vtime(p, vtime);
	return vtime;
}

/*
 * @p's vtime for waiting on @node: as it is where vtime_in_bounds() says so,
 * which is nearly always and needs no call, else task_vtime_bound()'s. The
 * lag allowed is one slice for a wake-up, MAX_LAG_SLICES otherwise.
 */
static __always_inline u64 task_vtime_on(struct task_struct *p,
					 struct esn_sched_task *st, u32 node,
					 u64 enq_flags, bool write_back)
{
	u64 lag_slices = enq_flags & SCX_ENQ_WAKEUP ? 1 : MAX_LAG_SLICES;
	u64 vtime = p->scx.dsq_vtime, *clock = node_clock(node);

	if (!clock || !st ||
	    vtime_in_bounds(p, st, node, vtime, *clock, lag_slices))
		return vtime;
	return task_vtime_bound(p, st, node, lag_slices, write_back);
}

/*
 * The vtime @p's run so far costs it: the CPU time used, inversely to
 * weight (nice), then scaled by its I/O priority class.
 */
static __always_inline u64 run_charge(struct task_struct *p,
				      struct esn_sched_task *st, u64 now)
{
	u64 charge;

	if (!st->running_at || !time_after(now, st->running_at))
		return 0;
	charge = scale_by_task_weight_inverse(p, now - st->running_at);
	return ioprio_scale(p, st, charge, false);
}

/* The stats' CPU time per I/O priority class, for a run that ended. */
static __always_inline void count_run_by_ioprio(struct esn_sched_task *st,
						u64 now)
{
	u32 idx = ESN_STAT_RUN_NS_IOPRIO_BE;

	if (!st->running_at || !time_after(now, st->running_at))
		return;
	if (st->ioprio_class == ESN_IOPRIO_RT)
		idx = ESN_STAT_RUN_NS_IOPRIO_RT;
	else if (st->ioprio_class == ESN_IOPRIO_IDLE)
		idx = ESN_STAT_RUN_NS_IOPRIO_IDLE;
	stat_add(idx, now - st->running_at);
}

/*
 * @p starts running on @node, and the clock moves up to its vtime. A task
 * that waited on @node's clock was bounded against it when it queued or was
 * put on its CPU (wait_on_node), and the clock has only moved up since: it
 * is not checked again here, where vtime_in_bounds() cost a jiffies read and
 * its multiplications at every run's start. Only a task moved from another
 * node's clock (a steal) has its vtime translated and bounded.
 */
static __always_inline void advance_clock(struct task_struct *p,
					  struct esn_sched_task *st, u32 node)
{
	u64 vtime = p->scx.dsq_vtime, *clock = node_clock(node);

	if (!clock)
		return;
	if (st->vtime_node != node)
		vtime = task_vtime_bound(p, st, node, MAX_LAG_SLICES, true);
	if (time_before(*clock, vtime))
		*clock = vtime;
}

/*
 * @p was run out of vtime order because it starved (run_starving): it runs
 * at its node's clock rather than pushing the clock out to its own vtime,
 * which would hand every task waiting there the same distance as lag.
 */
static __always_inline void rejoin_clock(struct task_struct *p,
					 struct esn_sched_task *st, u32 node)
{
	u64 vtime = task_vtime_bound(p, st, node, MAX_LAG_SLICES, true);
	u64 *clock = node_clock(node);

	st->rescued = false;
	if (clock && time_after(vtime, *clock))
		scx_bpf_task_set_dsq_vtime(p, *clock);
}

/*
 * @p is about to wait for a CPU of @node: its vtime moves onto @node's
 * clock (see task_vtime_on for @write_back), and the wait that starts is
 * charged to @node (account_wait).
 */
static u64 wait_on_node(struct task_struct *p, struct esn_sched_task *st,
			u32 node, u64 enq_flags, bool write_back)
{
	u64 vtime = task_vtime_on(p, st, node, enq_flags, write_back);

	if (st)
		st->wait_node = node;
	return vtime;
}

/* Into @node's vtime queue of @kind; returns the vtime it queued at. */
static u64 queue_on_node(struct task_struct *p, struct esn_sched_task *st,
			 enum queue_kind kind, u32 node, u64 enq_flags)
{
	u64 vtime = wait_on_node(p, st, node, enq_flags, false);

	count_queued(st, node, kind);
	scx_bpf_dsq_insert_vtime(p, queue_dsq(node, kind), slice_ns, vtime,
				 enq_flags);
	return vtime;
}

/* Is @p an RT, deadline or stop-class task (above sched_ext)? */
static __always_inline bool of_higher_class(const struct task_struct *p)
{
	return p->prio < MAX_RT_PRIO;
}

/*
 * Does an RT or deadline task (or the stop class) hold @cpu now? Its
 * cpu_state.spared alone can be stale for such a CPU: cpu_release runs only
 * when sched_ext hands the CPU to a higher class, not when the RT task takes it
 * back from the idle task after RT throttling's window, in which a fair task
 * may have run there and had ops.running clear the flag. A task put on that
 * CPU's local queue would wait out the RT task (fio's max latency of 960 ms
 * beside an RT spinner, VM fairness test R).
 */
static bool cpu_held_by_higher_class(s32 cpu)
{
	struct task_struct *curr = __COMPAT_scx_bpf_cpu_curr(cpu);

	return curr && of_higher_class(curr);
}

/* Does a higher class hold @cpu most of the time (see cpu_rt_load)? */
static bool cpu_rt_hogged(s32 cpu)
{
	u32 *load = MEMBER_VPTR(cpu_rt_load, [cpu]);

	return load && *load > RT_LOAD_HOGGED;
}

/* Did an RT or deadline task take or hold @cpu within RT_RECENT_SECS (see
 * cpu_rt_took_at)? */
static bool cpu_rt_lately(s32 cpu)
{
	u64 *took_at = MEMBER_VPTR(cpu_rt_took_at, [cpu]);

	if (!took_at)
		return true;
	return *took_at && (s64)(bpf_jiffies64() - *took_at) <
				   (s64)(RT_RECENT_SECS * (CONFIG_HZ ?: 1000));
}

/*
 * May a wake-up go straight onto idle @cpu's local queue? The insert lands
 * later, under that CPU's lock, and a task in a local queue that an RT task
 * then takes waits until the RT task yields or is throttled: about 950 ms
 * beside an RT spinner (fio's max latency 968 ms in one VM fairness R run of
 * eleven before cpu_state.lent). So not while @cpu is lent (cpu_release has
 * already emptied the queue once, and will not again), not while a higher class
 * holds it now (asked of the CPU's current task only where cpu_release is all
 * that is seen: with rt_seen_at_switch the switch that gave it the CPU stamped
 * it, and the timer stamps it again while it holds it), and not within
 * RT_RECENT_SECS of an RT or deadline task taking or
 * holding it (cpu_rt_took_at): at the end of its throttling window such a task
 * takes the CPU back from the idle task, which calls no cpu_release. Such a
 * wake-up is queued by enqueue instead, where a CPU that takes it does so under
 * its own lock, and @cpu is kicked to look (select_cpu cleared its idle bit).
 */
static __always_inline bool direct_dispatch_safe(s32 cpu)
{
	struct esn_cpu_state *cs = cpu_state_of(cpu);

	if (cs && !cs->lent && !cpu_rt_lately(cpu) &&
	    (rt_seen_at_switch || !cpu_held_by_higher_class(cpu)))
		return true;
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	stat_inc(ESN_STAT_LENT_SKIPPED);
	return false;
}

/*
 * Straight onto the local queue of @cpu (a wake-up that found it idle). Its
 * wait is then the wake-up's own cost, which no choice of node avoids: the
 * controller measures contention as the wait beyond it (woke_idle).
 */
static void run_on_idle_cpu(struct task_struct *p, struct esn_sched_task *st,
			    s32 cpu)
{
	if (st)
		st->woke_idle = true;
	wait_on_node(p, st, node_of_cpu(cpu), SCX_ENQ_WAKEUP, true);
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
}

/* An idle CPU of @cpus, a whole idle core first where SMT is on; -1 if
 * none. */
static __always_inline s32 pick_idle_in(const struct cpumask *cpus)
{
	s32 cpu;

	if (smt_active) {
		cpu = scx_bpf_pick_idle_cpu(cpus, SCX_PICK_IDLE_CORE);
		if (cpu >= 0)
			return cpu;
	}
	return scx_bpf_pick_idle_cpu(cpus, 0);
}

/*
 * Idle CPU of @node that @p may use (@cpus: task_node_cpus()), preferring
 * @prev_cpu, and passing over one a higher class hogs (cpu_rt_load) once:
 * the kick puts back the idle bit the pick cleared, and a second such CPU
 * on the node is taken rather than none. -1 if none.
 */
static s32 pick_idle_on_node(struct task_struct *p, const struct cpumask *cpus,
			     u32 node, s32 prev_cpu)
{
	s32 cpu;

	if (!cpus)
		return -1;
	if (task_may_use_cpu(p, prev_cpu, node) && !cpu_rt_hogged(prev_cpu) &&
	    scx_bpf_test_and_clear_cpu_idle(prev_cpu))
		return prev_cpu;
	cpu = pick_idle_in(cpus);
	if (cpu < 0 || !cpu_rt_hogged(cpu))
		return cpu;
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	return pick_idle_in(cpus);
}

/* Does @node hold placed I/O tasks (and so has an awake CPU most of the
 * time)? */
static __always_inline bool node_has_placed(u32 node)
{
	u32 *count = MEMBER_VPTR(nr_placed, [node]);

	return count && READ_ONCE(*count);
}

/*
 * Does @node hold placed I/O tasks and more CPUs than them? Only such a node
 * takes keep_idle_nodes' tasks: where every CPU has a placed task of its
 * own, a task put on the CPU one of them left at its I/O is in its way at
 * its next completion. With 2 jobs placed on a 2-CPU node and the lab at
 * 2.0, sending the wake-ups there regardless cost 1.14-1.35x the CPU time
 * per I/O in 6 of 7 repeats (two boots), and a median 0.90x the IOPS.
 */
static __always_inline bool node_has_cpus_beside_io(u32 node)
{
	u32 *count = MEMBER_VPTR(nr_placed, [node]);
	const volatile u32 *cpus = MEMBER_VPTR(node_cpus_nr, [node]);
	u32 placed;

	if (!count || !cpus)
		return false;
	placed = READ_ONCE(*count);
	return placed && placed < *cpus;
}

/* Is every CPU of @node idle? */
static bool node_all_idle(u32 node)
{
	const struct cpumask *cpus = node_cpumask(node), *idle;
	bool all;

	if (!cpus)
		return false;
	idle = scx_bpf_get_idle_cpumask();
	all = bpf_cpumask_subset(cpus, idle);
	scx_bpf_put_idle_cpumask(idle);
	return all;
}

/*
 * How many idle CPUs of a node pick_idle_beside_io() looks at before it
 * gives up: each look is a kfunc call, and a node whose idle CPUs are all
 * ones placed tasks left is better woken up than crowded.
 */
#define BESIDE_IO_LOOKS 4

/* One of @idle's CPUs in @cpus that no I/O-bound task left, claimed. */
static s32 claim_idle_beside_io(const struct cpumask *cpus,
				const struct cpumask *idle)
{
	struct esn_cpu_state *cs;
	u32 i;
	s32 cpu;

	for (i = 0; i < BESIDE_IO_LOOKS; i++) {
		cpu = bpf_cpumask_any_and_distribute(cpus, idle);
		if ((u32)cpu >= cpu_ids_nr)
			return -1;
		cs = cpu_state_of(cpu);
		if (!cs || cs->spared || cpu_rt_hogged(cpu))
			continue;
		if (scx_bpf_test_and_clear_cpu_idle(cpu))
			return cpu;
	}
	return -1;
}

/*
 * An idle CPU of @cpus (a node's, for keep_idle_nodes) that no I/O-bound
 * task left at its I/O (cpu_state.spared), a whole idle core first where
 * SMT is on, claimed; -1 if none. The CPU a placed task left is the one its
 * completion wakes it back onto (the kernel's idle pick and
 * pick_idle_on_node both prefer the previous CPU): a task moved there from
 * an idle node is in its way a few hundred microseconds later. At 1 fio job
 * on a 2-CPU node with the lab off, keeping those tasks anywhere on the
 * node read p99 1.32x EEVDF's against 1.23x with keep_idle_nodes off.
 * The idle mask is read before any idle bit is cleared: a pick that cleared
 * a spared CPU's bit would have to kick it awake to set it again.
 */
static s32 pick_idle_beside_io(const struct cpumask *cpus)
{
	const struct cpumask *idle;
	s32 cpu;

	if (!cpus)
		return -1;
	if (smt_active) {
		idle = scx_bpf_get_idle_smtmask();
		cpu = claim_idle_beside_io(cpus, idle);
		scx_bpf_put_idle_cpumask(idle);
		if (cpu >= 0)
			return cpu;
	}
	idle = scx_bpf_get_idle_cpumask();
	cpu = claim_idle_beside_io(cpus, idle);
	scx_bpf_put_idle_cpumask(idle);
	return cpu;
}

/*
 * keep_idle_nodes: for @p, not I/O-bound, waking with @prev_cpu on a node
 * without placed tasks, every CPU of which is idle (waking there would wake
 * the node), an idle CPU of the nearest node with placed tasks and CPUs
 * beside them (node_has_cpus_beside_io), not one a placed task left at its
 * I/O (pick_idle_beside_io). -1 otherwise (@prev_cpu's node
 * has placed tasks or runs anything), or if no such node has an idle CPU @p
 * may use. Not for a task whose previous CPU is on a node with placed
 * tasks: keeping such tasks there too (tried) raised the placed tasks' wait
 * for a CPU beside a hog on every node, where the controller weighs it. The
 * placed counts are read first: on a machine without placed tasks this is
 * one load per node, and no idle-mask call. A plain bounded loop, as in
 * steal_from_neighbours: no kfunc call per turn.
 */
static s32 pick_idle_on_awake_node(struct task_struct *p,
				   struct esn_sched_task *st, s32 prev_cpu)
{
	bool asleep_checked = false;
	u32 prev_node, i;
	s32 cpu;

	if (nr_nodes < 2 || (u32)prev_cpu >= cpu_ids_nr)
		return -1;
	prev_node = node_of_cpu(prev_cpu);
	if (node_has_placed(prev_node))
		return -1;
	for (i = 0; i < nr_nodes && i < ESN_MAX_NODES; i++) {
		u8 node = nth_neighbour(prev_node, i);

		if (node == ESN_NO_NODE)
			break;
		if (!node_has_cpus_beside_io(node))
			continue;
		if (!asleep_checked) {
			if (!node_all_idle(prev_node))
				return -1;
			asleep_checked = true;
		}
		cpu = pick_idle_beside_io(task_node_cpus(p, st, node));
		if (cpu >= 0)
			return cpu;
	}
	return -1;
}

/* Does @cpu's own state let a task there be preempted (cpu_state.spared,
 * cpu_rt_load)? Who runs there now is the caller's to ask. */
static __always_inline bool cpu_state_preemptible(s32 cpu)
{
	struct esn_cpu_state *cs = cpu_state_of(cpu);

	return cs && !cs->spared && cpu < cpu_ids_nr && !cpu_rt_hogged(cpu);
}

/* Can @cpu be preempted for a placed task (see cpu_state.spared)? */
static bool cpu_preemptible_for_io(s32 cpu)
{
	return cpu_state_preemptible(cpu) && !cpu_held_by_higher_class(cpu);
}

/*
 * How long the task on @cpu has run, 0 if unknown. A start read from
 * another CPU's clock may lie a little ahead of ours: that reads as "just
 * started", never as a huge run.
 */
static u64 cpu_ran_ns(s32 cpu, u64 now)
{
	struct esn_cpu_state *cs = cpu_state_of(cpu);
	u64 start = cs ? READ_ONCE(cs->run_start) : now;

	if ((s64)(now - start) < 0)
		return 0;
	return now - start;
}

/* Has the task on @cpu run for io_preempt_after_ns? */
static bool ran_long_enough(s32 cpu, u64 now)
{
	return !io_preempt_after_ns || cpu_ran_ns(cpu, now) >= io_preempt_after_ns;
}

/*
 * A CPU of @node for a placed task that woke to find none idle: @prev_cpu if
 * it is the node's and may be preempted, else one other CPU of the node if
 * that one may, else a CPU of the node anyway (the task then queues there).
 * The choice is made here, not in enqueue, because enqueue may preempt only
 * the CPU it was called for (see preempt_for_io).
 */
static s32 busy_cpu_on_node(struct task_struct *p, const struct cpumask *cpus,
			    u32 node, s32 prev_cpu)
{
	bool prev_on_node;
	s32 cpu;

	if (!cpus)
		return prev_cpu;
	prev_on_node = task_may_use_cpu(p, prev_cpu, node);
	if (prev_on_node && cpu_preemptible_for_io(prev_cpu))
		return prev_cpu;
	cpu = bpf_cpumask_any_distribute(cpus);
	if (cpu >= cpu_ids_nr)
		return prev_cpu;
	if (cpu_preemptible_for_io(cpu) || !prev_on_node)
		return cpu;
	return prev_cpu;
}

/*
 * A placed task woke and no CPU of @node is idle: put it straight on the
 * local queue of the node CPU it is enqueued on (select_cpu chose one that
 * runs a task that is not I/O-bound where it could), preempting that task.
 * Each I/O completion wakes the task, so waiting for a slice to end at every
 * wake-up would cap its IOPS; this costs a context switch instead, and the
 * preempted task is charged only what it ran. Not before that task has run
 * io_preempt_after_ns, or the node's other tasks get no CPU between two
 * completions; the placed task then queues, for any CPU of its node whose
 * slice ends first. Wake-ups only: a placed task whose slice ran out has
 * just had the CPU and queues like anyone else.
 *
 * Only this CPU: enqueue holds its runqueue lock, so "not held by an RT
 * task" (cpu_preemptible_for_io reads the current task itself) stays true
 * until the insert lands. An insert into another CPU's local queue is
 * carried out later, under that CPU's lock; an RT task that took that CPU
 * in between has already had cpu_release empty its queue, and the task
 * would wait there until the deadline server next lends the CPU to
 * sched_ext, up to ~950 ms (seen as fio's max latency beside an RT spinner).
 */
static bool preempt_for_io(struct task_struct *p, struct esn_sched_task *st,
			   u32 node, u64 enq_flags, u64 now)
{
	s32 cpu = task_cpu_of(p);

	if (!(enq_flags & SCX_ENQ_WAKEUP) || node_of_cpu(cpu) != node ||
	    !cpu_preemptible_for_io(cpu) || !ran_long_enough(cpu, now))
		return false;
	wait_on_node(p, st, node, enq_flags, true);
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns,
			   enq_flags | SCX_ENQ_PREEMPT);
	stat_inc(ESN_STAT_IO_PREEMPT);
	return true;
}

/*
 * The head of @dsq_id, or NULL. Since 7.1 the kernel's peek is one lockless
 * read (the test is the one scx's compat header makes, resolved at load
 * time). Before, the peek walks the queue under its lock, so the length,
 * a plain load, is read first; on 7.1+ that read would be a second lookup
 * of the same queue, on every dispatch.
 */
static __always_inline struct task_struct *queue_head(u32 node,
							  enum queue_kind kind)
{
	u64 dsq_id = queue_dsq(node, kind);

	if (!queue_may_hold(node, kind))
		return NULL;
	if (bpf_ksym_exists(scx_bpf_dsq_peek) &&
	    LINUX_KERNEL_VERSION >= KERNEL_VERSION(7, 1, 0))
		return scx_bpf_dsq_peek(dsq_id);
	if (!scx_bpf_dsq_nr_queued(dsq_id))
		return NULL;
	return __COMPAT_scx_bpf_dsq_peek(dsq_id);
}

/* Has the oldest task in @node's I/O queue waited past io_steal_after_ns?
 * The clock is read only for a queue that holds one. */
static bool io_queue_starving(u32 node)
{
	struct task_struct *head = queue_head(node, QUEUE_IO);
	struct esn_sched_task *st;

	if (!head)
		return false;
	st = sched_task(head);
	return st && sched_now() - st->io_enqueued_at > io_steal_after_ns;
}

/*
 * Slots of tasks that went quiet are given back here, so a placed task
 * that sleeps for an hour does not keep its node "full". The task's I/O
 * record is the authority on its last I/O: the placement's copy is only
 * refreshed when the task is queued, and a task that keeps its CPU through
 * refilled slices is not queued for as long as it likes.
 */
static long sweep_one(struct bpf_map *map, u32 *tid, struct esn_placement *pl,
		      u64 *now)
{
	struct esn_task_io *io = bpf_map_lookup_elem(&task_io, tid);
	u64 last_io = pl->last_io_ns;

	if (io && time_after(io->last_io_ns, last_io))
		last_io = io->last_io_ns;
	if ((s64)(*now - last_io) > (s64)io_idle_ns)
		release_placement(*tid, pl->node);
	return 0;
}

/* Wake an idle CPU of @node, if it has one; whether one was kicked. The
 * timer's callers hold an RCU read section for the node's cpumask. */
static bool kick_idle_cpu_of(u32 node)
{
	const struct cpumask *cpus = node_cpumask(node);
	s32 cpu = cpus ? scx_bpf_pick_idle_cpu(cpus, 0) : -1;

	if (cpu < 0)
		return false;
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	return true;
}

/*
 * The steal delay needs someone to notice it expired: a CPU only looks at
 * other nodes' I/O queues when it dispatches, and an idle CPU does not
 * dispatch until something wakes it. So a node's I/O queue whose head has
 * waited too long wakes an idle CPU of the nearest node that has one.
 */
static void rescue_starving_io(void)
{
	u32 node, i;

	bpf_for(node, 0, nr_nodes) {
		if (!node_has_cpu(node) || !io_queue_starving(node))
			continue;
		bpf_for(i, 0, nr_nodes) {
			u8 other = nth_neighbour(node, i);

			if (other == ESN_NO_NODE)
				break;
			if (kick_idle_cpu_of(other)) {
				stat_inc(ESN_STAT_IO_RESCUE);
				break;
			}
		}
	}
}

/*
 * Stamp the CPUs an RT or deadline task holds now (cpu_rt_took_at). Such a
 * task takes a CPU from the idle task without a cpu_release, and one that
 * keeps its CPU for seconds does so after every throttling window in which
 * the CPU went idle: cpu_release alone can leave the stamp seconds old. A
 * hold long enough to strand a task in a local queue is long enough for
 * this sample, every timer interval, to see.
 */
static void note_rt_held_cpus(void)
{
	u64 now = bpf_jiffies64() ?: 1;
	u32 cpu;

	bpf_for(cpu, 0, cpu_ids_nr) {
		u64 *rt_took_at = MEMBER_VPTR(cpu_rt_took_at, [cpu]);
		u32 *load = MEMBER_VPTR(cpu_rt_load, [cpu]);
		bool held = cpu_held_by_higher_class(cpu);
		u32 next;

		if (!rt_took_at || !load)
			continue;
		if (held)
			*rt_took_at = now;
		next = *load - *load / 8 + (held ? RT_LOAD_ONE / 8 : 0);
		if (next != *load)
			*load = next;
	}
}

/* How often the timer runs: often enough that a starving queue is noticed
 * within half a steal delay, never more often than every millisecond. */
static __always_inline u64 timer_interval_ns(void)
{
	u64 ns = io_steal_after_ns / 2;

	if (ns < RESCUE_MIN_INTERVAL_NS)
		return RESCUE_MIN_INTERVAL_NS;
	return ns < SWEEP_INTERVAL_NS ? ns : SWEEP_INTERVAL_NS;
}

static u64 last_sweep_ns;

/*
 * The queue counts' safety net. queued_count is built never to read below
 * its queue; were it ever to (a path that takes tasks out of a queue that
 * this file does not know of), an idle CPU would not look there and the
 * tasks would wait for a busy CPU of the node to finish its slice. So at
 * every sweep each queue's length is read between two reads of its count,
 * and a queue longer than both is counted (queue_count_low) and wakes an
 * idle CPU of its node. A task arriving and another leaving between the
 * reads can raise it without cause; a kick is all that costs.
 */
static void check_queue_counts(void)
{
	u32 node, kind;

	if (queue_counts_off)
		return;
	bpf_for(node, 0, nr_nodes) {
		bpf_for(kind, 0, NR_QUEUE_KINDS) {
			u32 *cnt = queued_count_of(node, kind), before, after;
			s32 len;

			if (!cnt)
				break;
			before = READ_ONCE(*cnt);
			len = scx_bpf_dsq_nr_queued(queue_dsq(node, kind));
			after = READ_ONCE(*cnt);
			if (len <= (s32)before || len <= (s32)after)
				continue;
			stat_inc(ESN_STAT_QUEUE_COUNT_LOW);
			kick_idle_cpu_of(node);
		}
	}
}

static int timer_fire(void *map, int *key, struct bpf_timer *timer)
{
	/* The clock of the placements' last I/O times. */
	u64 now = io_clock_ns();

	/* Peeking a queue walks a DSQ iterator on kernels without
	 * scx_bpf_dsq_peek(), and a node's cpumask (a kptr) is passed to
	 * scx_bpf_pick_idle_cpu(); the verifier checks this callback as part
	 * of sleepable ops.init (since 6.16, and on 6.12), where both need an
	 * explicit RCU read section. */
	bpf_rcu_read_lock();
	rescue_starving_io();
	note_rt_held_cpus();
	bpf_rcu_read_unlock();
	if (now - last_sweep_ns >= SWEEP_INTERVAL_NS) {
		last_sweep_ns = now;
		bpf_for_each_map_elem(&placements, sweep_one, &now, 0);
		bpf_rcu_read_lock();
		check_queue_counts();
		bpf_rcu_read_unlock();
	}
	bpf_timer_start(timer, timer_interval_ns(), 0);
	return 0;
}

/*
 * May @p, a fair task that woke to find no idle CPU and queued at @vtime,
 * preempt @cpu (fair_preempt_after_ns)? The task there must be ours, not
 * I/O-bound, have run that long, and lie beyond @vtime once that run is
 * charged, so the preemption follows the order the queue would.
 */
static bool fair_wakeup_may_preempt(struct task_struct *p, s32 cpu, u64 vtime,
				    u64 now)
{
	struct task_struct *curr;
	u64 ran;

	if (cpu < 0 || cpu >= cpu_ids_nr ||
	    !bpf_cpumask_test_cpu(cpu, p->cpus_ptr) ||
	    !cpu_state_preemptible(cpu))
		return false;
	ran = cpu_ran_ns(cpu, now);
	if (ran < fair_preempt_after_ns)
		return false;
	/* One look at the CPU's task serves both questions:
	 * cpu_preemptible_for_io()'s (no higher class) and ours (one of ours). */
	curr = __COMPAT_scx_bpf_cpu_curr(cpu);
	if (!curr || of_higher_class(curr) || curr == p ||
	    !(curr->scx.flags & SCX_TASK_QUEUED))
		return false;
	return time_before(vtime, curr->scx.dsq_vtime +
					  scale_by_task_weight_inverse(curr, ran));
}

/*
 * @p woke, found no idle CPU, and was queued on @node's fair queue at
 * @vtime: preempt the CPU it was queued from if it may, else one other CPU
 * of @node. The preempted CPU's dispatch then takes the queue's head by
 * vtime (prev_keeps_cpu), normally @p.
 */
static void preempt_for_fair_wakeup(struct task_struct *p, u32 node,
				    u64 vtime)
{
	const struct cpumask *cpus;
	u64 now;
	s32 cpu;

	/*
	 * Not while I/O-bound tasks run (woke within a tenth of a second): the
	 * task preempted is queued again and takes the next CPU that frees
	 * up, the one an I/O-bound task would have woken onto. Beside
	 * stress-ng on every CPU with the lab at 2.0, placed wake-ups onto an
	 * idle CPU halved (13082 to 6172 in a point), their preemptions rose
	 * from 4322 to 7510, and IOPS read 0.74-0.93x the build without this
	 * preemption; sparing only nodes with placed tasks still read
	 * 0.67-0.91x against the same build under --no-fair-preempt (the
	 * I/O-bound tasks that found no slot run on the other node).
	 */
	if (!tenth_passed(READ_ONCE(io_bound_seen_at), bpf_jiffies64()))
		return;
	now = sched_now();
	cpu = task_cpu_of(p);
	if (!fair_wakeup_may_preempt(p, cpu, vtime, now)) {
		cpus = node_cpumask(node);
		if (!cpus)
			return;
		cpu = bpf_cpumask_any_distribute(cpus);
		if (!fair_wakeup_may_preempt(p, cpu, vtime, now))
			return;
	}
	scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	stat_inc(ESN_STAT_FAIR_PREEMPT);
}

/*
 * ops callbacks.
 */

/*
 * Wake-up: the one moment a task can move cheaply. A placed task goes to an
 * idle CPU of its node, or at least to a CPU of its node that enqueue may
 * preempt for it (or queue it on); anyone else gets the kernel's default
 * idle pick.
 */
s32 BPF_STRUCT_OPS(esn_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	struct esn_sched_task *st = sched_task(p);
	bool is_idle = false;
	u8 node;
	s32 cpu;

	node = task_io_node(p, st);
	if (st) {
		st->woke_node = node;
		st->woke_node_set = true;
		if (!kernel_stamps_waits())
			st->runnable_at = sched_now();
	}
	if (node != ESN_NO_NODE) {
		const struct cpumask *cpus = task_node_cpus(p, st, node);

		cpu = pick_idle_on_node(p, cpus, node, prev_cpu);
		if (cpu >= 0) {
			if (!direct_dispatch_safe(cpu))
				return cpu;
			run_on_idle_cpu(p, st, cpu);
			stat_inc(ESN_STAT_IO_DIRECT);
			return cpu;
		}
		return busy_cpu_on_node(p, cpus, node, prev_cpu);
	}

	cpu = -1;
	if (keep_idle_nodes && st && !st->io_bound) {
		cpu = pick_idle_on_awake_node(p, st, prev_cpu);
		if (cpu >= 0) {
			stat_inc(ESN_STAT_KEPT_ASLEEP);
			is_idle = true;
		}
	}
	if (cpu < 0)
		cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags,
					     &is_idle);
	/* Read by enqueue only after this path (enqueue_io_node reuses its
	 * ESN_NO_NODE). */
	if (st)
		st->woke_none_idle = !is_idle;
	if (is_idle && direct_dispatch_safe(cpu)) {
		run_on_idle_cpu(p, st, cpu);
		stat_inc(ESN_STAT_FAIR_DIRECT);
	}
	return cpu;
}

/*
 * Queue a task that did not get an idle CPU at wake-up (or was preempted,
 * or used up its slice, or was sent back by cpu_release): placed tasks into
 * their node's I/O queue, the rest into the fair queue of the node they are
 * on. Then wake an idle CPU that may take it, unless select_cpu just
 * looked; where none is idle, a fair task that woke preempts a CPU whose
 * task used more CPU than it (preempt_for_fair_wakeup), as a placed one
 * does (preempt_for_io).
 */
void BPF_STRUCT_OPS(esn_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct esn_sched_task *st = sched_task(p);
	bool joined = st && st->joined;
	/* Read before enqueue_io_node() consumes select_cpu's answer. */
	bool selected = woke_through_select_cpu(st, enq_flags);
	u64 now, vtime;
	u8 node;
	s32 cpu;

	/* A new task's first enqueue carries no SCX_ENQ_WAKEUP, yet it wakes
	 * as much as any (a fork-exec loop is mostly new tasks). */
	if (joined)
		st->joined = false;

	/* A wake-up without select_cpu (one allowed CPU), or a task joining
	 * sched_ext: its wait starts here (see runnable_at). */
	note_runnable(st);

	/*
	 * One CPU is all it may use. Its placement is still brought up to
	 * date, so a pinned task does not keep a slot (or lose one) on stale
	 * grounds, but it never waits in an I/O queue other CPUs serve. A
	 * waking one goes straight to its CPU's local queue; one that used up
	 * its slice queues by vtime on its node's fair queue (only its CPU
	 * will take it from there), or a pinned hog would own its CPU
	 * whatever its nice.
	 */
	if (task_is_pinned(p)) {
		enqueue_io_node(p, st, enq_flags);
		if ((enq_flags & SCX_ENQ_WAKEUP) || is_migration_disabled(p)) {
			node = node_of_cpu(task_cpu_of(p));
			wait_on_node(p, st, node, enq_flags, true);
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns,
					   enq_flags);
			stat_inc(ESN_STAT_PINNED);
			return;
		}
		goto fair;
	}

	node = enqueue_io_node(p, st, enq_flags);
	if (node != ESN_NO_NODE) {
		cpu = pick_idle_on_node(p, task_node_cpus(p, st, node), node,
					-1);
		now = sched_now();
		if (cpu < 0 && preempt_for_io(p, st, node, enq_flags, now))
			return;
		if (st)
			st->io_enqueued_at = now;
		queue_on_node(p, st, QUEUE_IO, node, enq_flags);
		stat_inc(ESN_STAT_IO_QUEUED);
		if (cpu >= 0)
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		return;
	}

fair:
	node = node_of_cpu(task_cpu_of(p));
	vtime = queue_on_node(p, st, QUEUE_FAIR, node, enq_flags);
	stat_inc(ESN_STAT_FAIR_QUEUED);
	/*
	 * select_cpu looked for an idle CPU microseconds ago, under this
	 * wake-up: it claimed one the kernel now wakes for @p (or kicked, see
	 * direct_dispatch_safe), or found none. A second look was a kfunc call
	 * at every such wake-up that rarely found one, and where it did, woke
	 * a CPU beside the one chosen.
	 */
	if (st && selected) {
		if (st->woke_none_idle && fair_preempt && !st->io_bound)
			preempt_for_fair_wakeup(p, node, vtime);
		return;
	}
	cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (cpu >= 0)
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	else if (fair_preempt && ((enq_flags & SCX_ENQ_WAKEUP) || joined) &&
		 !(st && st->io_bound))
		preempt_for_fair_wakeup(p, node, vtime);
}

/*
 * Serve @node's own queues: the head that used less CPU (the lower vtime on
 * the node's clock) first, the I/O queue on ties. Serving the I/O queue
 * unconditionally would let one CPU-heavy placed task starve the node's
 * fair queue, leaving it to other nodes to steal from. The heads were
 * peeked once by esn_dispatch, for this and prev_keeps_cpu: a stale head
 * only changes which queue is tried first, never what is moved.
 */
static bool dispatch_own_node(u32 node, struct task_struct *io_head,
			      struct task_struct *fair_head)
{
	if (fair_head && (!io_head || time_before(fair_head->scx.dsq_vtime,
						  io_head->scx.dsq_vtime))) {
		if (scx_bpf_dsq_move_to_local(fair_dsq(node), 0))
			return true;
	}
	if (io_head && scx_bpf_dsq_move_to_local(io_dsq(node), 0))
		return true;
	return fair_head && scx_bpf_dsq_move_to_local(fair_dsq(node), 0);
}

/*
 * @prev's slice ran out but it is still runnable: should it go on rather
 * than hand the CPU to the head of its node's queues? It is not in a queue
 * (it is queued again only after this dispatch), so without this check a
 * CPU always takes a waiting task, however much more CPU that task used:
 * two nice-0 and two nice-10 spinners on two CPUs then run about equally.
 * Its vtime is compared as if charged for the run it is in.
 */
static bool prev_keeps_cpu(struct task_struct *prev,
			   struct task_struct *io_head,
			   struct task_struct *fair_head)
{
	struct esn_sched_task *st = sched_task(prev);
	u64 vtime;

	if (!st)
		return false;
	vtime = prev->scx.dsq_vtime + run_charge(prev, st, sched_now());
	/* One head at a time: the verifier refuses `!a && !b` on pointers. */
	if (!io_head) {
		if (!fair_head)
			return false;
		return time_before(vtime, fair_head->scx.dsq_vtime);
	}
	if (!time_before(vtime, io_head->scx.dsq_vtime))
		return false;
	if (!fair_head)
		return true;
	return time_before(vtime, fair_head->scx.dsq_vtime);
}

/*
 * Vtime order alone bounds no wait. A task ahead of its node's clock waits
 * until the clock reaches it, and the clock advances only as fast as the
 * node's CPUs over its runnable tasks: max_ahead_ns caps the distance for
 * the queue length at enqueue, but a queue that then grows tenfold (fork
 * and wake-up storms) makes the wait ten times longer. In a soak under
 * hackbench, pthread churn and CPU hotplug, khugepaged (nice 19) waited out
 * the watchdog that way. So a CPU looks through its node's queues at most
 * ten times a second for a task that has waited STARVE_AFTER_NS and may
 * run here, and runs it first; while it finds one it keeps looking.
 */
#define STARVE_AFTER_NS (1000ULL * 1000 * 1000)

/* When (bpf_jiffies64()) each node's queues were last looked through and
 * held no starving task (races between CPUs only cost a scan). */
u64 node_starve_scan_at[ESN_MAX_NODES];

static bool move_starving(u64 dsq_id, s32 cpu, u64 now)
{
	struct task_struct *p;

	bpf_for_each(scx_dsq, p, dsq_id, 0) {
		struct esn_sched_task *st = sched_task(p);
		u64 since = runnable_since(p, st);

		if (!st || !since || (s64)(now - since) < (s64)STARVE_AFTER_NS ||
		    !bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			continue;
		st->rescued = true;
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0)) {
			stat_inc(ESN_STAT_STARVED_RUN);
			return true;
		}
		st->rescued = false;
	}
	return false;
}

static bool run_starving(s32 cpu, u32 node)
{
	u64 *scan_at = MEMBER_VPTR(node_starve_scan_at, [node]);
	u64 jiffies_now = bpf_jiffies64(), now;

	if (!scan_at || !tenth_passed(*scan_at, jiffies_now))
		return false;
	now = sched_now();
	if (move_starving(fair_dsq(node), cpu, now) ||
	    move_starving(io_dsq(node), cpu, now))
		return true;
	*scan_at = jiffies_now;
	return false;
}

/*
 * Take the head of @kind's queue of another node, nearest node first: any
 * fair queue that holds a task, an I/O queue only when its head starves
 * (io_queue_starving). Plain bounded loops, not bpf_for: nr_nodes is
 * read-only data the verifier knows at load, so it checks exactly that many
 * turns, and no turn costs a kfunc call. bpf_for made four per walk, eight
 * in a dispatch that finds nothing, the common call of a CPU going idle.
 */
static __always_inline bool steal_from_neighbours(u32 node,
						  enum queue_kind kind)
{
	u32 i;

	for (i = 0; i < nr_nodes && i < ESN_MAX_NODES; i++) {
		u8 other = nth_neighbour(node, i);

		if (other == ESN_NO_NODE)
			break;
		if (kind == QUEUE_IO ? !io_queue_starving(other)
				     : !queue_may_hold(other, QUEUE_FAIR))
			continue;
		if (!scx_bpf_dsq_move_to_local(queue_dsq(other, kind), 0))
			continue;
		if (kind == QUEUE_IO) {
			stat_inc(ESN_STAT_IO_STOLEN);
			node_event_inc(other, NODE_STOLEN_FROM);
		} else {
			stat_inc(ESN_STAT_FAIR_STOLEN);
		}
		return true;
	}
	return false;
}

/*
 * A CPU needs work: its node's queues first, then other nodes' fair queues
 * nearest first. Another node's I/O queue only when its head waited too
 * long: taking it earlier would undo the placement while the home node
 * keeps up. Every queue is first looked at in the scheduler's own counts
 * (queued_count): a CPU about to idle makes no kfunc call for an empty one.
 */
void BPF_STRUCT_OPS(esn_dispatch, s32 cpu, struct task_struct *prev)
{
	u32 node = node_of_cpu(cpu);
	struct task_struct *io_head = queue_head(node, QUEUE_IO);
	struct task_struct *fair_head = queue_head(node, QUEUE_FAIR);

	if (run_starving(cpu, node))
		return;
	/* Placed tasks keep off a CPU a higher class hogs (cpu_rt_load),
	 * unless their queue starves. */
	if (io_head && cpu_rt_hogged(cpu) && !io_queue_starving(node))
		io_head = NULL;
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED) &&
	    prev_keeps_cpu(prev, io_head, fair_head)) {
		scx_bpf_task_set_slice(prev, slice_ns);
		return;
	}
	if (dispatch_own_node(node, io_head, fair_head))
		return;

	if (steal_from_neighbours(node, QUEUE_FAIR) ||
	    steal_from_neighbours(node, QUEUE_IO))
		return;

	/* Nothing else to run: let the previous task go on. */
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED))
		scx_bpf_task_set_slice(prev, slice_ns);
}

/*
 * The runnable-to-running wait of @p, added to the node whose queues it
 * waited in (not the node that finally ran it: a placed task stolen after
 * waiting too long is exactly the overloaded node's wait the controller
 * must see).
 */
static __always_inline void account_wait(struct task_struct *p,
					 struct esn_sched_task *st,
					 u32 run_node, u64 now)
{
	u32 node = st->wait_node < nr_nodes ? st->wait_node : run_node;
	bool woke_idle = st->woke_idle;
	struct esn_node_sched *ns;
	u64 wait;
	u32 slot;

	/* Cleared at every run's start, accounted or not: a stale flag must
	 * not mark the next wait. */
	st->woke_idle = false;
	if (!waited_for_cpu(p, st, now, &wait))
		return;
	ns = bpf_map_lookup_elem(&node_sched, &node);
	if (!ns)
		return;
	slot = lat_slot(wait);
	if (slot < ESN_LAT_SLOTS)
		ns->wait_slots[slot]++;
	if (st->io_placed) {
		ns->io_waits++;
		ns->io_wait_ns += wait;
		if (woke_idle) {
			ns->io_idle_waits++;
			ns->io_idle_wait_ns += wait;
		}
	} else {
		ns->fair_waits++;
		ns->fair_wait_ns += wait;
	}
}

/*
 * Note whether this CPU now runs an I/O-bound task (preempt_for_io spares
 * those; written only when it changes, the array is shared by every CPU),
 * and when it started (io_preempt_after_ns), uncount the task from the
 * queue it came out of (queued_count), account how long it waited for a
 * CPU (the controller's contention measure), start its run clock, and
 * advance its node's vtime clock.
 */
void BPF_STRUCT_OPS(esn_running, struct task_struct *p)
{
	s32 cpu = task_cpu_of(p);
	struct esn_cpu_state *cs = cpu_state_of(cpu);
	struct esn_sched_task *st = sched_task(p);
	u8 io = st && (st->io_placed || st->io_bound);
	u64 now = sched_now();
	u32 node;

	if (cs) {
		cs->run_start = now;
		if (cs->spared != io)
			cs->spared = io;
		if (cs->lent)
			cs->lent = 0;
	}
	if (!st)
		return;
	uncount_queued(st);
	st->woke_node_set = false;
	/* Direct-dispatched before any enqueue: it has run, no longer new. */
	st->joined = false;
	node = node_of_cpu(cpu);
	account_wait(p, st, node, now);
	st->running_at = now;
	if (st->rescued)
		rejoin_clock(p, st, node);
	advance_clock(p, st, node);
}

/*
 * Charge the CPU time actually used, inversely to weight (nice) and scaled
 * by the I/O priority class (ioprio_rt_boost, ioprio_idle_penalty). Not the
 * slice consumed: a preemption zeroes the running task's slice, and a task
 * preempted by a placed one microseconds into its run would be charged a
 * whole slice at every I/O completion. A task stopped while still runnable
 * starts waiting again now; an exiting one gives its slot back at once
 * (ops.exit_task may come much later, when the task struct is freed).
 */
void BPF_STRUCT_OPS(esn_stopping, struct task_struct *p, bool runnable)
{
	struct esn_sched_task *st = sched_task(p);
	u64 now = sched_now(), charge;

	if (!st)
		return;
	charge = run_charge(p, st, now);
	count_run_by_ioprio(st, now);
	if (charge)
		scx_bpf_task_set_dsq_vtime(p, p->scx.dsq_vtime + charge);
	st->running_at = 0;
	if (runnable) {
		if (!kernel_stamps_waits())
			st->runnable_at = now;
	} else if (p->flags & PF_EXITING) {
		release_task_placement(p);
	}
}

/*
 * Set once ops.init has run, cleared at ops.exit: the sched_switch hook is
 * attached before the scheduler is and may outlive it by a moment, and
 * re-enqueues only while sched_ext runs this scheduler.
 */
bool ops_live;

/*
 * A higher class (RT, deadline, stop) took @cpu from sched_ext. Tasks already
 * in its local queue (direct dispatches at wake-up, preempt_for_io, pinned
 * tasks) would wait behind it however idle the other CPUs are: send them back
 * through enqueue, which queues them where any CPU of their node can take
 * them, and keep preempt_for_io and select_cpu's direct dispatch away until
 * sched_ext runs a task here again. An RT or deadline task (@by_rt) also
 * stamps the CPU for cpu_rt_hogged().
 */
static __always_inline void higher_class_took_cpu(s32 cpu, bool by_rt)
{
	struct esn_cpu_state *cs = cpu_state_of(cpu);
	u64 *rt_took_at = MEMBER_VPTR(cpu_rt_took_at, [cpu]);

	if (cs) {
		cs->spared = 1;
		cs->lent = 1;
	}
	if (rt_took_at && by_rt)
		*rt_took_at = bpf_jiffies64() ?: 1;
	scx_bpf_reenqueue_local();
	stat_inc(ESN_STAT_CPU_RELEASED);
}

/*
 * The kernel's own notice that a higher class took the CPU, on kernels whose
 * local-queue re-enqueue works only from here (6.12-6.18). Where it works from
 * anywhere (6.19 and later) this callback is deprecated: userspace leaves it
 * out and loads esn_sched_switch instead.
 */
void BPF_STRUCT_OPS(esn_cpu_release, s32 cpu, struct scx_cpu_release_args *args)
{
	higher_class_took_cpu(cpu, args->reason == SCX_CPU_PREEMPT_RT ||
					   args->reason == SCX_CPU_PREEMPT_DL);
}

/*
 * ops.cpu_release's successor (6.19 and later; loaded only there): a switch
 * from a task of sched_ext's or a lower class (or idle) to one of a higher
 * class is the moment the kernel would have called it. The stop class
 * (migration) is told from RT by the runqueue's stop task. Every context
 * switch runs this, so it asks the two priorities first.
 */
SEC("?tp_btf/sched_switch")
int BPF_PROG(esn_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	struct rq *rq;
	s32 cpu;

	if (!of_higher_class(next) || of_higher_class(prev) ||
	    !READ_ONCE(ops_live))
		return 0;
	cpu = bpf_get_smp_processor_id();
	rq = bpf_per_cpu_ptr(&runqueues, cpu);
	higher_class_took_cpu(cpu, !rq || (u64)BPF_CORE_READ(rq, stop) !=
						 (u64)next);
	return 0;
}

/*
 * A task joining the scheduler starts one slice of its own run time past its
 * node's clock (queued after the tasks due by then), and its first enqueue
 * counts as a wake-up (joined). The clock is the vtime of the last task to
 * start, the front of the queue: a new task placed on it ran ahead of every
 * waiting task, and a shell loop fork-exec'ing beside two spinners on two
 * CPUs held 0.85 of a CPU, the spinners 0.52 each (fair: 2/3 each); half a
 * slice (where EEVDF puts a new task's first deadline) left it 0.76, one
 * slice (CFS's old START_DEBIT) 0.63 with 1.36x EEVDF's forks.
 */
void BPF_STRUCT_OPS(esn_enable, struct task_struct *p)
{
	struct esn_sched_task *st = sched_task(p);
	u32 node = node_of_cpu(task_cpu_of(p));
	u64 *clock = node_clock(node);

	scx_bpf_task_set_dsq_vtime(
		p, clock ? *clock + scale_by_task_weight_inverse(p, slice_ns)
			 : 0);
	if (st) {
		st->vtime_node = node;
		st->joined = true;
		/* Its waits before it joined are none of ours. */
		if (kernel_stamps_waits())
			st->wait_seen = p->sched_info.run_delay;
	}
}

/*
 * A task leaving sched_ext (a switch to SCHED_FIFO, say) frees its slot
 * now: ops.exit_task only runs when the task struct is freed. The kernel
 * took it out of any queue of ours first, so it is uncounted there too.
 */
void BPF_STRUCT_OPS(esn_disable, struct task_struct *p)
{
	struct esn_sched_task *st = sched_task(p);

	if (st) {
		uncount_queued(st);
		st->runnable_at = 0;
	}
	release_task_placement(p);
}

/* Give every task its scratch cpumask up front: the hot paths cannot
 * allocate. */
s32 BPF_STRUCT_OPS(esn_init_task, struct task_struct *p,
		   struct scx_init_task_args *args)
{
	struct esn_sched_task *st;
	struct bpf_cpumask *mask;

	st = bpf_task_storage_get(&sched_task_stor, p, NULL,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		return -ENOMEM;
	st->vtime_node = ESN_NO_NODE;
	st->wait_node = ESN_NO_NODE;
	mask = bpf_cpumask_create();
	if (!mask)
		return -ENOMEM;
	mask = bpf_kptr_xchg(&st->scratch, mask);
	if (mask)
		bpf_cpumask_release(mask);
	return 0;
}

/* The task is gone: its slot too, if disable and stopping missed it. */
void BPF_STRUCT_OPS(esn_exit_task, struct task_struct *p,
		    struct scx_exit_task_args *args)
{
	release_task_placement(p);
}

static s32 build_node_cpumask(u32 node)
{
	struct bpf_cpumask *mask;
	struct node_ctx *nctx;
	u32 cpu;

	nctx = bpf_map_lookup_elem(&node_ctxs, &node);
	if (!nctx)
		return -ENOENT;
	mask = bpf_cpumask_create();
	if (!mask)
		return -ENOMEM;
	bpf_for(cpu, 0, scx_bpf_nr_cpu_ids()) {
		if (node_of_cpu(cpu) == node)
			bpf_cpumask_set_cpu(cpu, mask);
	}
	mask = bpf_kptr_xchg(&nctx->cpumask, mask);
	if (mask)
		bpf_cpumask_release(mask);
	return 0;
}

/* Per-node queues and cpumasks, then the timer that frees quiet slots and
 * rescues starving I/O queues. */
s32 BPF_STRUCT_OPS_SLEEPABLE(esn_init)
{
	struct sweep_timer *st;
	u32 node, zero = 0;
	s32 err;

	cpu_ids_nr = scx_bpf_nr_cpu_ids();
	bpf_for(node, 0, nr_nodes) {
		if (!node_has_cpu(node))
			continue;
		err = scx_bpf_create_dsq(io_dsq(node), node);
		if (!err)
			err = scx_bpf_create_dsq(fair_dsq(node), node);
		if (!err)
			err = build_node_cpumask(node);
		if (err) {
			scx_bpf_error("node %u: cannot set up queues (%d)",
				      node, err);
			return err;
		}
	}

	st = bpf_map_lookup_elem(&sweep_timers, &zero);
	if (!st)
		return -ENOENT;
	err = bpf_timer_init(&st->timer, &sweep_timers, CLOCK_MONOTONIC);
	if (err)
		return err;
	err = bpf_timer_set_callback(&st->timer, timer_fire);
	if (err)
		return err;
	err = bpf_timer_start(&st->timer, timer_interval_ns(), 0);
	if (!err)
		WRITE_ONCE(ops_live, true);
	return err;
}

/* A debug dump lists at most this many tasks of each queue. */
#define DUMP_TASKS_PER_QUEUE 16

/*
 * One queue of a debug dump: each task's distance from its node's clock and
 * how long it has waited, so a stall report shows whether the task that
 * failed to run was ordered behind the others (vtime far ahead) or simply
 * not reached.
 */
static void dump_queue(const char *name, u32 node, enum queue_kind kind,
		       u64 clock, u64 now)
{
	u32 *counted = queued_count_of(node, kind);
	u64 dsq_id = queue_dsq(node, kind);
	struct task_struct *p;
	u32 shown = 0;

	/* A count below the kernel's would leave tasks no idle CPU looks for. */
	scx_bpf_dump("  %s queue: %d waiting (counted %u%s)\n", name,
		     scx_bpf_dsq_nr_queued(dsq_id), counted ? *counted : 0,
		     queue_counts_off ? ", counts off" : "");
	bpf_for_each(scx_dsq, p, dsq_id, 0) {
		struct esn_sched_task *st = sched_task(p);
		u64 since = runnable_since(p, st), waited = 0;

		if (shown++ >= DUMP_TASKS_PER_QUEUE)
			break;
		if (since && now > since)
			waited = now - since;
		scx_bpf_dump("    %s[%d] weight %u cpus %d vtime-clock %lldus waited %llums\n",
			     p->comm, p->pid, p->scx.weight, p->nr_cpus_allowed,
			     (s64)(p->scx.dsq_vtime - clock) / 1000,
			     waited / (1000 * 1000));
	}
}

/*
 * Appended to the kernel's debug dump when the scheduler exits on an error
 * or a stall (scx_esn prints it): every node's clock and queues.
 */
void BPF_STRUCT_OPS(esn_dump, struct scx_dump_ctx *dctx)
{
	u64 now = sched_now();
	u32 node;

	bpf_for(node, 0, nr_nodes) {
		u64 *clock = node_clock(node);
		u64 at = clock ? *clock : 0;

		scx_bpf_dump("node %u: clock %lluus\n", node, at / 1000);
		dump_queue("fair", node, QUEUE_FAIR, at, now);
		dump_queue("I/O", node, QUEUE_IO, at, now);
	}
}

/* Keep the exit reason for userspace to report. */
void BPF_STRUCT_OPS(esn_exit, struct scx_exit_info *ei)
{
	WRITE_ONCE(ops_live, false);
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(esn_ops,
	       .select_cpu = (void *)esn_select_cpu,
	       .enqueue = (void *)esn_enqueue,
	       .dispatch = (void *)esn_dispatch,
	       .running = (void *)esn_running,
	       .stopping = (void *)esn_stopping,
	       .cpu_release = (void *)esn_cpu_release,
	       .enable = (void *)esn_enable,
	       .disable = (void *)esn_disable,
	       .init_task = (void *)esn_init_task,
	       .exit_task = (void *)esn_exit_task,
	       .init = (void *)esn_init,
	       .exit = (void *)esn_exit,
	       .dump = (void *)esn_dump,
	       .timeout_ms = WATCHDOG_TIMEOUT_MS,
	       .name = "esn");
