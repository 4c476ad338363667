// SPDX-License-Identifier: GPL-2.0-only
//! Which block tracepoints to hook and how: the kernel's BTF and tracefs
//! probed (`probe_kernel`), one program per tracepoint chosen
//! (`choose_hooks`, tp_btf or raw_tp) and set to autoload (`apply_hooks`),
//! the issue hook attached late where a queue does not stamp issue times
//! (`IssueHook`); and what the loaded programs cost (`object_cost`).

use std::os::fd::{AsFd, AsRawFd};

use anyhow::{Context, Result};
use esn_reading::Stat;
use esn_stats::snapshot::BpfCost;

use super::maps::BlkObsMaps;

/// The request tracepoints blkobs.bpf.h hooks, in the order it defines them.
/// Each has a tp_btf program `esn_<tp>` and a raw_tp twin `esn_<tp>_raw`.
pub const RQ_TRACEPOINTS: [&str; 6] = [
    "block_io_start",
    "block_rq_insert",
    "block_rq_issue",
    "block_rq_requeue",
    "block_rq_merge",
    "block_rq_complete",
];

/// What the running kernel offers, probed from its BTF.
#[derive(Debug, Clone, Default)]
pub struct KernelHooks {
    /// Tracepoints with a `btf_trace_<name>` type: tp_btf can attach.
    pub btf_tracepoints: Vec<String>,
    /// Tracepoints present at all (tracefs), for the raw_tp fallback.
    pub tracepoints: Vec<String>,
}

/// How to hook the request tracepoints; the overrides exist to test the
/// fallbacks on a kernel that does not need them.
#[derive(Debug, Clone, Copy, Default)]
pub struct HookPrefs {
    pub force_raw_tp: bool,
    pub no_io_start: bool,
    /// BPF times every issue itself, as on queues without block stats.
    pub keep_issue_times: bool,
    /// Every histogram key goes to io_hists, as keys whose io_slots slot
    /// another key holds do.
    pub no_io_slots: bool,
}

/// The programs to load, by name, and a note for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookChoice {
    pub programs: Vec<String>,
    pub start_point: &'static str,
    pub raw_tp: Vec<String>,
    /// The issue program, loaded but left detached until a request completes
    /// without the kernel's issue stamp (IssueHook); `None` when it must
    /// run from the start (requests start at insert: it charges the ones
    /// issued directly).
    pub lazy_issue: Option<String>,
}

impl HookChoice {
    /// Requests are charged at block_rq_insert (no block_io_start): BPF then
    /// remembers each request until it completes (its rodata says so).
    pub fn starts_at_insert(&self) -> bool {
        self.start_point == "block_rq_insert"
    }
}

/// Pick one program per usable tracepoint. block_io_start (6.5+) is the
/// request's start in its submitter's context, and the task's attribution
/// too; without it block_rq_insert is the nearest start, block_bio_queue
/// attributes (once per bio), and block_rq_merge drops the entries BPF then
/// keeps for requests merged away (with block_io_start there are none).
pub fn choose_hooks(kernel: &KernelHooks, prefs: HookPrefs) -> Result<HookChoice> {
    let has = |tp: &str| {
        kernel.btf_tracepoints.iter().any(|t| t == tp) || kernel.tracepoints.iter().any(|t| t == tp)
    };
    let mut wanted: Vec<&str> = Vec::new();
    let at_insert = !has("block_io_start") || prefs.no_io_start;
    let start_point = if at_insert {
        "block_rq_insert"
    } else {
        "block_io_start"
    };
    wanted.extend([start_point, "block_rq_issue", "block_rq_requeue"]);
    if at_insert {
        wanted.push("block_rq_merge");
    }
    wanted.push("block_rq_complete");

    let mut programs = Vec::new();
    if at_insert {
        programs.push(BIO_HOOK.to_string());
    }
    let mut raw_tp = Vec::new();
    for tp in wanted {
        if !has(tp) {
            if matches!(
                tp,
                "block_rq_issue" | "block_rq_complete" | "block_rq_insert"
            ) {
                anyhow::bail!(
                    "the kernel has no {tp} tracepoint, which block I/O tracking needs \
                     (CONFIG_BLOCK and CONFIG_TRACEPOINTS)"
                );
            }
            // requeue and merge only keep the table exact; aging covers them.
            log::warn!("no {tp} tracepoint: requests merged or requeued age out instead");
            continue;
        }
        if prefs.force_raw_tp || !kernel.btf_tracepoints.iter().any(|t| t == tp) {
            programs.push(format!("esn_{tp}_raw"));
            raw_tp.push(tp.to_string());
        } else {
            programs.push(format!("esn_{tp}"));
        }
    }
    let lazy_issue = (!at_insert)
        .then(|| {
            programs
                .iter()
                .find(|p| p.starts_with("esn_block_rq_issue"))
                .cloned()
        })
        .flatten();
    Ok(HookChoice {
        programs,
        start_point,
        raw_tp,
        lazy_issue,
    })
}

/// Probe the running kernel: BTF typedefs for tp_btf, tracefs for raw_tp.
pub fn probe_kernel() -> KernelHooks {
    let mut hooks = KernelHooks::default();
    match libbpf_rs::btf::Btf::from_vmlinux() {
        Ok(btf) => {
            for tp in RQ_TRACEPOINTS {
                let name = format!("btf_trace_{tp}");
                if btf
                    .type_by_name::<libbpf_rs::btf::types::Typedef>(&name)
                    .is_some()
                {
                    hooks.btf_tracepoints.push(tp.to_string());
                }
            }
        }
        Err(err) => log::warn!("no kernel BTF ({err}): using raw tracepoints"),
    }
    for base in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        for tp in RQ_TRACEPOINTS {
            if std::path::Path::new(&format!("{base}/events/block/{tp}")).exists()
                && !hooks.tracepoints.iter().any(|t| t == tp)
            {
                hooks.tracepoints.push(tp.to_string());
            }
        }
    }
    hooks
}

/// The per-bio attribution program of iotrace.bpf.h: loaded only where
/// block_io_start is not the start point (it attributes there itself).
pub const BIO_HOOK: &str = "esn_bio_queue";

/// Names of every block I/O program: blkobs.bpf.h's (both variants) and the
/// bio attribution hook.
pub fn all_blkobs_programs() -> impl Iterator<Item = String> {
    RQ_TRACEPOINTS
        .iter()
        .flat_map(|tp| [format!("esn_{tp}"), format!("esn_{tp}_raw")])
        .chain(std::iter::once(BIO_HOOK.to_string()))
}

/// Disable autoload for every block I/O program not in @choice. With
/// @only_blkobs, also for every other program: the observer's object
/// carries helper programs from the scx headers that need sched_ext.
pub fn apply_hooks(object: &mut libbpf_rs::OpenObject, choice: &HookChoice, only_blkobs: bool) {
    let ours: Vec<String> = all_blkobs_programs().collect();
    for mut prog in object.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let keep = if ours.contains(&name) {
            choice.programs.contains(&name)
        } else {
            !only_blkobs
        };
        if !keep {
            prog.set_autoload(false);
        }
        if choice.lazy_issue.as_deref() == Some(name.as_str()) {
            prog.set_autoattach(false);
        }
    }
}

/// The issue program where the kernel stamps issue times itself
/// (rq->io_start_time_ns, on every queue with block stats: wbt is on by
/// default): it would run once per request to do nothing, so it stays
/// detached until BPF counts a request that completed without a time.
/// From then on it keeps issue times in BPF; the requests completed before
/// have no device latency (rq_no_issue_time says how many).
pub struct IssueHook {
    /// The lazy program, until its one attempt to attach.
    program: Option<String>,
    /// Held while attached: dropping it detaches.
    link: Option<libbpf_rs::Link>,
}

impl IssueHook {
    pub fn new(choice: &HookChoice) -> Self {
        IssueHook {
            program: choice.lazy_issue.clone(),
            link: None,
        }
    }

    /// Attach the issue program if it is lazy, still detached, and a
    /// request has completed without an issue time. A failed attach costs
    /// only those queues' device latency: it is logged once, not fatal.
    pub fn poll(&mut self, object: &libbpf_rs::Object, maps: &BlkObsMaps) -> Result<()> {
        // Tried once: program is None after the first attempt.
        if self.program.is_none() || maps.stat(Stat::RqNoIssueTime)? == 0 {
            return Ok(());
        }
        let name = self.program.take().unwrap_or_default();
        // progs_mut() borrows the object shared: attaching only reads it.
        let attached = object
            .progs_mut()
            .find(|p| p.name().to_string_lossy() == name)
            .with_context(|| format!("no BPF program {name} in the object"))
            .and_then(|prog| {
                prog.attach()
                    .with_context(|| format!("attaching {name} (block_rq_issue)"))
            });
        match attached {
            Ok(link) => self.link = Some(link),
            Err(err) => {
                log::warn!("{err:#}: requests on queues without block stats get no device latency");
                return Ok(());
            }
        }
        log::info!(
            "a request completed without the kernel's issue time (a queue without block \
             stats): timing issues in BPF from now on"
        );
        Ok(())
    }
}

/// Refuse kernels whose request tracepoints take (queue, request): the
/// programs are written for the one-argument form of 5.11 and later.
pub fn check_kernel_release(release: &str) -> Result<()> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    if major == 0 {
        log::warn!("cannot parse the kernel release {release:?}; trying anyway");
        return Ok(());
    }
    if (major, minor) < (5, 11) {
        anyhow::bail!(
            "kernel {release} is older than 5.11, whose block request tracepoints this \
             needs (and BTF): run scx_esn observe on 5.11 or later, or use the bpftrace \
             scripts in scripts/"
        );
    }
    Ok(())
}

/// run_time_ns and run_cnt of a loaded program, from its fdinfo (filled
/// while kernel.bpf_stats_enabled is 1).
pub fn prog_cost(fd: i32) -> BpfCost {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap_or_default();
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    BpfCost {
        run_time_ns: field("run_time_ns:"),
        run_cnt: field("run_cnt:"),
    }
}

/// Summed cost of the loaded block I/O programs of an object.
pub fn object_cost(object: &libbpf_rs::Object) -> BpfCost {
    let ours: Vec<String> = all_blkobs_programs().collect();
    let mut cost = BpfCost::default();
    for prog in object.progs() {
        if !ours.contains(&prog.name().to_string_lossy().into_owned()) {
            continue;
        }
        // A program the kernel did not get (its hook was not chosen) has no
        // fd: reading /proc/self/fdinfo/-1 would fail at every reading.
        let fd = prog.as_fd().as_raw_fd();
        if fd < 0 {
            continue;
        }
        let c = prog_cost(fd);
        cost.run_time_ns += c.run_time_ns;
        cost.run_cnt += c.run_cnt;
    }
    cost
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(btf: &[&str], tracefs: &[&str]) -> KernelHooks {
        KernelHooks {
            btf_tracepoints: btf.iter().map(|s| s.to_string()).collect(),
            tracepoints: tracefs.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn modern_kernel_uses_tp_btf_and_io_start() {
        let k = kernel(&RQ_TRACEPOINTS, &RQ_TRACEPOINTS);
        let c = choose_hooks(&k, HookPrefs::default()).unwrap();
        assert_eq!(c.start_point, "block_io_start");
        assert_eq!(
            c.programs,
            [
                "esn_block_io_start",
                "esn_block_rq_issue",
                "esn_block_rq_requeue",
                "esn_block_rq_complete"
            ]
        );
        assert!(c.raw_tp.is_empty());
        assert!(!c.starts_at_insert());
        assert_eq!(c.lazy_issue.as_deref(), Some("esn_block_rq_issue"));
    }

    #[test]
    fn pre_6_5_kernel_starts_at_insert() {
        let old: Vec<&str> = RQ_TRACEPOINTS[1..].to_vec();
        let c = choose_hooks(&kernel(&old, &old), HookPrefs::default()).unwrap();
        assert_eq!(c.start_point, "block_rq_insert");
        assert!(c.starts_at_insert());
        assert_eq!(
            c.programs,
            [
                "esn_bio_queue",
                "esn_block_rq_insert",
                "esn_block_rq_issue",
                "esn_block_rq_requeue",
                "esn_block_rq_merge",
                "esn_block_rq_complete"
            ]
        );
        assert_eq!(c.lazy_issue, None, "the issue charges direct issues");
    }

    #[test]
    fn missing_btf_falls_back_to_raw_tp_per_tracepoint() {
        let c = choose_hooks(
            &kernel(&["block_rq_issue"], &RQ_TRACEPOINTS),
            HookPrefs::default(),
        )
        .unwrap();
        assert!(c.programs.contains(&"esn_block_rq_issue".to_string()));
        assert!(c.programs.contains(&"esn_block_io_start_raw".to_string()));
        assert!(c
            .programs
            .contains(&"esn_block_rq_complete_raw".to_string()));
        assert_eq!(c.raw_tp.len(), 3);
        assert_eq!(c.lazy_issue.as_deref(), Some("esn_block_rq_issue"));
    }

    #[test]
    fn forced_fallbacks() {
        let k = kernel(&RQ_TRACEPOINTS, &RQ_TRACEPOINTS);
        let c = choose_hooks(
            &k,
            HookPrefs {
                force_raw_tp: true,
                no_io_start: true,
                keep_issue_times: false,
                no_io_slots: false,
            },
        )
        .unwrap();
        assert_eq!(c.start_point, "block_rq_insert");
        // The bio hook is tp_btf only, as it always was.
        assert!(
            c.programs
                .iter()
                .all(|p| p.ends_with("_raw") || p == BIO_HOOK),
            "{c:?}"
        );
    }

    #[test]
    fn no_completion_tracepoint_is_an_error_that_says_why() {
        let k = kernel(&["block_io_start", "block_rq_issue"], &[]);
        let err = choose_hooks(&k, HookPrefs::default()).unwrap_err();
        assert!(err.to_string().contains("block_rq_complete"), "{err}");
    }

    #[test]
    fn kernel_release_floor() {
        assert!(check_kernel_release("5.10.0-28-amd64").is_err());
        assert!(check_kernel_release("4.19.0").is_err());
        assert!(check_kernel_release("5.11.0").is_ok());
        assert!(check_kernel_release("6.1.0-50-amd64").is_ok());
        assert!(check_kernel_release("7.3.4+deb13-amd64").is_ok());
        assert!(check_kernel_release("weird").is_ok(), "unparsable: try");
        let err = check_kernel_release("5.4.0").unwrap_err().to_string();
        assert!(err.contains("5.11"), "{err}");
    }

    #[test]
    fn program_names_cover_both_variants() {
        let all: Vec<String> = all_blkobs_programs().collect();
        assert_eq!(all.len(), 13);
        assert!(all.contains(&"esn_block_rq_merge_raw".to_string()));
        assert!(all.contains(&BIO_HOOK.to_string()));
    }
}
