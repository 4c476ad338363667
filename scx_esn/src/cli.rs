// SPDX-License-Identifier: GPL-2.0-only
//! Command line of the one `scx_esn` binary.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

const ABOUT: &str = "NUMA- and NVMe-aware sched_ext scheduler.";

const LONG_ABOUT: &str = "\
NUMA- and NVMe-aware sched_ext scheduler (\"lesser evil\" placement).

A thread that issues block I/O from a socket other than its NVMe device's pays \
an interconnect penalty; crowding every I/O thread onto the device's socket \
pays CPU contention instead. scx_esn keeps I/O-bound tasks on the NUMA node of \
the device they use until that node holds its threshold of them, then spills \
the excess to the nearest node by NUMA distance that has room. Other tasks are \
scheduled fairly (vtime) and idle CPUs steal them from any node.

The threshold is learned live, per node hosting block devices: every \
--control-interval the NUMA penalty (remote over local device latency) is \
weighed against the contention penalty (how long the node's placed I/O tasks \
wait for a CPU), and the threshold moves toward the largest task count whose \
contention is still the lesser evil. What was learned is kept in --state-file \
for the next run on the same topology. --threshold pins it instead; `scx_esn \
profile` measures the curve with fio beforehand.

Without a subcommand, scx_esn loads the scheduler (root, a kernel with \
CONFIG_SCHED_CLASS_EXT, 6.12 or later) and runs until SIGINT or SIGTERM, then \
unloads it and exits 0. A scheduler error or watchdog stall is reported with \
the kernel's exit reason and exits 1.";

#[derive(Debug, Parser)]
#[command(name = "scx_esn", version, about = ABOUT, long_about = LONG_ABOUT)]
pub struct Opts {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub sched: SchedOpts,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print NUMA nodes (CPUs, distances) and block devices with their home
    /// node, as scx_esn sees them.
    Topology {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Observe block I/O without the scheduler (no sched_ext needed): per
    /// device IOPS, MB/s and latency local vs remote to the device's NUMA
    /// node, the remote share of each node's submissions, and the top I/O
    /// tasks. Root and a kernel with BTF (5.11+). Runs until --duration or
    /// SIGINT/SIGTERM, then prints the totals since start.
    Observe(ObserveOpts),
    /// Measure a device's NUMA and contention penalties with fio (1..K jobs
    /// pinned to its node, then to the nearest other node) and print them with
    /// the balance point n*; --save makes them the scheduler's starting point.
    /// Root, fio installed, the device otherwise idle; reads only (unless
    /// --file). Best run without scx_esn loaded.
    Profile(ProfileOpts),
    /// Live terminal view of a running scx_esn (its stats socket): per node
    /// CPU busy, I/O tasks placed vs threshold, spills and penalties; per
    /// device IOPS, latency local vs remote and remote share; the top I/O
    /// tasks; sparklines of thresholds and IOPS. With no scheduler running,
    /// root observes block I/O itself (observe mode, blk-mq only) and says
    /// so. Keys: q quit, ? help, tab view, s sort, p pause, +/- refresh.
    Top(TopOpts),
}

#[derive(Debug, Clone, clap::Args)]
pub struct TopOpts {
    /// Seconds between refreshes (0.25-10; + and - change it live).
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    pub interval: f64,

    /// Observe block I/O with our own BPF (root, no scheduler needed) even
    /// if a scheduler serves stats.
    #[arg(long)]
    pub observe: bool,

    /// The stats socket to read (default /var/run/scx/root/stats).
    #[arg(long, value_name = "PATH", conflicts_with = "observe")]
    pub socket: Option<PathBuf>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ProfileOpts {
    /// The disk to profile (e.g. nvme0n1), as `scx_esn topology` names it.
    #[arg(long, value_name = "NAME")]
    pub device: String,

    /// Most fio jobs per run (default: the CPUs of the device's node).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub max_jobs: Option<u32>,

    /// Seconds of each fio run, after one second of warm-up.
    #[arg(long, default_value_t = 5, value_name = "SECS",
          value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub runtime: u32,

    /// Read this file (on the device's filesystem) instead of the raw disk;
    /// fio lays it out first if it is missing or short (--file-size-mb).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,

    /// Size of --file, in MiB.
    #[arg(long, default_value_t = 1024, value_name = "MIB",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub file_size_mb: u64,

    /// Balance against this NUMA penalty instead of the measured one.
    #[arg(long, value_name = "X", value_parser = numa_penalty)]
    pub numa_penalty: Option<f64>,

    /// Store the measured curve and penalty as the scheduler's learned state
    /// for this node (other nodes in the file are kept).
    #[arg(long)]
    pub save: bool,

    /// The state file --save writes (the scheduler's --state-file).
    #[arg(long, value_name = "FILE", default_value = crate::control::DEFAULT_STATE_FILE)]
    pub state_file: PathBuf,

    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,

    /// The fio binary.
    #[arg(long, default_value = "fio", value_name = "PATH")]
    pub fio: PathBuf,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ObserveOpts {
    /// One JSON object per line (kind "interval", and "total" at the end)
    /// instead of tables.
    #[arg(long)]
    pub json: bool,

    /// Seconds between reports.
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    pub interval: f64,

    /// Stop after SECS seconds (default: until SIGINT/SIGTERM).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,

    /// Only report these disks (e.g. nvme0n1; repeat or comma-separate).
    /// Partitions count under their disk.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    pub device: Vec<String>,

    /// How many of the busiest tasks to list.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,

    /// Use raw tracepoints even where tp_btf works (tests the fallback).
    #[arg(long, hide = true)]
    pub raw_tp: bool,

    /// Start requests at block_rq_insert as on pre-6.5 kernels (tests the
    /// fallback).
    #[arg(long, hide = true)]
    pub no_io_start: bool,

    /// Time every request's issue in BPF, even on queues whose requests the
    /// kernel stamps (tests the path of queues without block stats).
    #[arg(long, hide = true)]
    pub keep_issue_times: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct SchedOpts {
    /// Pin the threshold: I/O-bound tasks a node keeps before the excess
    /// spills to the nearest node with room, the same on every node, never
    /// changed. Without it the threshold of each node hosting block devices
    /// is learned live (see --numa-penalty); other nodes keep their number of
    /// online CPUs.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threshold: Option<u32>,

    /// Use this NUMA penalty (remote over local I/O cost, 1.0-10.0) instead
    /// of measuring it. For machines where the measured latency ratio is
    /// known to mislead (an emulator, a device whose remote penalty shows in
    /// throughput rather than latency). Without it each node measures its
    /// own, using the prior 1.3 until it has seen remote requests.
    #[arg(long, value_name = "X", conflicts_with = "threshold", value_parser = numa_penalty)]
    pub numa_penalty: Option<f64>,

    /// Seconds between two steps of the threshold controller.
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    pub control_interval: f64,

    /// Where the learned thresholds and curves are kept between runs. They
    /// are reused only on the topology they were learned on.
    #[arg(long, value_name = "FILE", default_value = crate::control::DEFAULT_STATE_FILE)]
    pub state_file: PathBuf,

    /// Neither read nor write the learned state: start from scratch.
    #[arg(long)]
    pub no_state: bool,

    /// Print an interval of statistics every SECS seconds while running:
    /// counters, per node placed/threshold and waits, the block I/O tables,
    /// the controller's state.
    #[arg(long, value_name = "SECS")]
    pub stats: Option<f64>,

    /// Do not load a scheduler: print the statistics of the scx_esn already
    /// running, every SECS seconds, read from its stats socket
    /// (/var/run/scx/root/stats), until SIGINT/SIGTERM. Waits for one to start.
    #[arg(long, value_name = "SECS", conflicts_with = "stats")]
    pub monitor: Option<f64>,

    /// With --stats or --monitor: one JSON object per interval instead of
    /// text.
    #[arg(long)]
    pub json: bool,

    /// Describe every field of the statistics (what --stats --json prints,
    /// --monitor and `scx_esn top` read, and the stats socket serves with
    /// `stats_meta`), then exit.
    #[arg(long)]
    pub help_stats: bool,

    /// Serve Prometheus metrics (OpenMetrics text) at http://ADDR:PORT/metrics
    /// while the scheduler runs: counters since start, latency histograms in
    /// seconds by device, node, locality and op, per-node thresholds and
    /// penalties. A bare PORT listens on 127.0.0.1 only; give 0.0.0.0:PORT
    /// to let other hosts scrape.
    #[arg(long, value_name = "ADDR:PORT", value_parser = crate::prom::parse_listen,
          conflicts_with = "monitor")]
    pub prometheus: Option<std::net::SocketAddr>,

    /// Time slice in microseconds.
    #[arg(long, default_value_t = 5000, value_name = "US",
          value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    pub slice_us: u64,

    /// Decayed I/O score at which a task counts as I/O-bound. With the
    /// default half-life, 8 means about 55 block I/Os per second. A placed
    /// task stays I/O-bound down to a quarter of it (hysteresis).
    #[arg(long, default_value_t = 8, value_name = "SCORE",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub io_min_score: u64,

    /// Half-life of the per-task I/O score, in milliseconds: how fast a task
    /// that stops doing I/O stops being treated as I/O-bound.
    #[arg(long, default_value_t = 100, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub io_half_life_ms: u64,

    /// A placed task that does no I/O for this long gives its slot back.
    #[arg(long, default_value_t = 500, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub io_idle_ms: u64,

    /// A placed task that waited this long for a CPU of its node may run on
    /// another node (the home node is out of capacity).
    #[arg(long, default_value_t = 50, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub io_steal_after_ms: u64,

    /// Bytes of the kernel's debug dump to print when the scheduler fails.
    #[arg(long, default_value_t = 0, value_name = "BYTES")]
    pub exit_dump_len: u32,

    /// The running kernel's config, for libbpf, when neither
    /// /boot/config-$(uname -r) nor /proc/config.gz exists.
    #[arg(long, value_name = "FILE")]
    pub kconfig: Option<PathBuf>,

    /// sysfs root to read the topology from (for tests and diagnosis).
    #[arg(long, default_value = "/sys", value_name = "DIR", hide = true)]
    pub sysfs: PathBuf,

    /// More logging; twice for libbpf's debug output.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// A NUMA penalty the controller will believe.
fn numa_penalty(text: &str) -> Result<f64, String> {
    let p: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    let (lo, hi) = (
        esn_controller::NUMA_PENALTY_MIN,
        esn_controller::NUMA_PENALTY_MAX,
    );
    if !(lo..=hi).contains(&p) {
        return Err(format!(
            "{p} is outside {lo}..{hi} (1.0: remote I/O costs nothing more)"
        ));
    }
    Ok(p)
}

/// Longest interval or duration accepted: a year, so that adding it to a
/// clock reading can never overflow.
const MAX_SECS: f64 = 365.0 * 24.0 * 3600.0;

/// A seconds option as a Duration, refusing what is not a positive, sane
/// number (0, negative, NaN, infinity, more than a year).
pub fn positive_secs(flag: &str, secs: f64) -> anyhow::Result<std::time::Duration> {
    if !(secs.is_finite() && secs > 0.0) {
        anyhow::bail!("{flag} {secs}: give a positive number of seconds");
    }
    if secs > MAX_SECS {
        anyhow::bail!("{flag} {secs}: at most {MAX_SECS} seconds (a year)");
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Opts::command().debug_assert();
    }

    #[test]
    fn threshold_zero_is_refused() {
        let err = Opts::try_parse_from(["scx_esn", "--threshold", "0"]).unwrap_err();
        assert!(err.to_string().contains("threshold"), "{err}");
    }

    #[test]
    fn defaults_and_subcommand() {
        let opts = Opts::try_parse_from(["scx_esn", "--threshold", "2", "--stats", "1"]).unwrap();
        assert_eq!(opts.sched.threshold, Some(2));
        assert_eq!(opts.sched.slice_us, 5000);
        assert!(opts.command.is_none());
        let opts = Opts::try_parse_from(["scx_esn", "topology", "--json"]).unwrap();
        assert!(matches!(
            opts.command,
            Some(Command::Topology { json: true })
        ));
    }

    #[test]
    fn numa_penalty_is_checked_and_excludes_a_pinned_threshold() {
        let opts = Opts::try_parse_from(["scx_esn", "--numa-penalty", "3"]).unwrap();
        assert_eq!(opts.sched.numa_penalty, Some(3.0));
        for bad in ["0.5", "11", "nan", "x"] {
            let err = Opts::try_parse_from(["scx_esn", "--numa-penalty", bad]).unwrap_err();
            assert!(err.to_string().contains("numa-penalty"), "{err}");
        }
        let err = Opts::try_parse_from(["scx_esn", "--numa-penalty", "2", "--threshold", "2"])
            .unwrap_err();
        assert!(err.to_string().contains("cannot be used with"), "{err}");
    }

    #[test]
    fn seconds_options_are_checked() {
        assert_eq!(
            positive_secs("--x", 0.5).unwrap(),
            std::time::Duration::from_millis(500)
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e30] {
            let err = positive_secs("--x", bad).unwrap_err().to_string();
            assert!(err.starts_with("--x "), "{err}");
        }
    }

    #[test]
    fn prometheus_address() {
        let opts = Opts::try_parse_from(["scx_esn", "--prometheus", "9091"]).unwrap();
        assert_eq!(
            opts.sched.prometheus,
            Some("127.0.0.1:9091".parse().unwrap())
        );
        let err = Opts::try_parse_from(["scx_esn", "--prometheus", "host"]).unwrap_err();
        assert!(err.to_string().contains("ADDR:PORT"), "{err}");
    }

    #[test]
    fn top_options() {
        let opts = Opts::try_parse_from(["scx_esn", "top", "--interval", "0.5"]).unwrap();
        let Some(Command::Top(t)) = opts.command else {
            panic!("not top");
        };
        assert_eq!(t.interval, 0.5);
        assert!(!t.observe && t.socket.is_none());
        assert!(Opts::try_parse_from(["scx_esn", "top", "--observe", "--socket", "/x"]).is_err());
    }

    #[test]
    fn observe_options() {
        let opts = Opts::try_parse_from([
            "scx_esn",
            "observe",
            "--json",
            "--duration",
            "5",
            "--device",
            "vda,nvme0n1",
        ])
        .unwrap();
        let Some(Command::Observe(o)) = opts.command else {
            panic!("not observe");
        };
        assert!(o.json);
        assert_eq!(o.interval, 1.0);
        assert_eq!(o.duration, Some(5.0));
        assert_eq!(o.device, ["vda", "nvme0n1"]);
        assert_eq!(o.top, 5);
    }
}
