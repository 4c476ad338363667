// SPDX-License-Identifier: GPL-2.0-only
//! Command line of the one `scx_esn` binary.

use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
the kernel's exit reason and exits 1.

Exit status: 0 done (SIGINT/SIGTERM, --duration reached, or the reader of \
stdout left); 1 a runtime error (one line on stderr: what failed and what to \
do); 2 a bad command line (one line on stderr). Options of the scheduler \
given to a subcommand, or options that do nothing in the mode given, are \
bad command lines, not silently ignored.";

/// The version, the commit built from (when built from git) and the target:
/// `--version` prints it and the scheduler logs it at start.
pub const FULL_VERSION: &str = env!("SCX_ESN_FULL_VERSION");

/// This process's command line as given, for the start-up log line.
pub fn command_line() -> String {
    shell_words(std::env::args_os())
}

/// Arguments joined by spaces, each single-quoted only when a shell would
/// need it, so that the logged line can be pasted back.
fn shell_words(args: impl IntoIterator<Item = std::ffi::OsString>) -> String {
    args.into_iter()
        .map(|arg| {
            let arg = arg.to_string_lossy().into_owned();
            let plain = !arg.is_empty()
                && arg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
            if plain {
                arg
            } else {
                format!("'{}'", arg.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Debug, Parser)]
#[command(name = "scx_esn", version = FULL_VERSION, about = ABOUT, long_about = LONG_ABOUT)]
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
    /// Measure the CPUs' energy per NUMA node while a workload runs, under
    /// any scheduler (to compare them): RAPL's count where readable (root),
    /// else the model's estimate, labelled "estimated". Runs until
    /// --duration or SIGINT/SIGTERM, then prints joules and watts per node
    /// and in total.
    Energy(EnergyOpts),
    /// Put back the CPU frequency limits (scaling_max_freq) that a --dvfs run
    /// lowered and could not restore itself (it was killed with SIGKILL, or
    /// a CPU was offline at exit), from the record that run wrote before its
    /// first change; then remove the record. Root. Nothing to do is not an
    /// error.
    RestoreFreq {
        /// The record (as given to --dvfs-record).
        #[arg(long, value_name = "FILE", default_value = esn_power::cpufreq::DEFAULT_RECORD_FILE)]
        record: PathBuf,
    },
    /// Print a completion script for SHELL on stdout (e.g. `scx_esn
    /// completions bash > /etc/bash_completion.d/scx_esn`; `make install`
    /// installs them).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (scx_esn.8 and one per subcommand) into DIR; for
    /// `make install` and packaging.
    #[command(hide = true)]
    Manpages {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

/// How the CPUs' energy is found: the scheduler's and `scx_esn energy`'s.
#[derive(Debug, Clone, clap::Args)]
pub struct EnergyArgs {
    /// Estimate the CPUs' energy with the model even where RAPL counts it
    /// (to compare the two). Without it, energy figures are RAPL's
    /// (powercap, root) where readable, else the model's, labelled
    /// "estimated": per node, busy time at the busy watts and idle time at
    /// the watts of its C-state (--energy-watts).
    #[arg(long)]
    pub energy_model: bool,

    /// The model's watts per socket: busy, then idle in C1, C3 and C6
    /// (cpuidle states C2-C3 count as C3, C4 and deeper as C6, POLL and
    /// unnamed ones as C1; a node of n CPUs counts 1/n of a socket per CPU).
    /// Defaults: the research's measurements.
    #[arg(long, value_name = "BUSY,C1,C3,C6", default_value = "95,47,22,14",
          value_parser = |s: &str| s.parse::<esn_power::energy::Watts>())]
    pub energy_watts: esn_power::energy::Watts,
}

impl EnergyArgs {
    pub fn mode(&self) -> esn_power::energy::Mode {
        if self.energy_model {
            esn_power::energy::Mode::Model
        } else {
            esn_power::energy::Mode::Auto
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct EnergyOpts {
    /// Stop after SECS seconds (default: until SIGINT/SIGTERM).
    #[arg(long, value_name = "SECS", value_parser = seconds, allow_negative_numbers = true)]
    pub duration: Option<f64>,

    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub energy: EnergyArgs,
}

#[derive(Debug, Clone, clap::Args)]
pub struct TopOpts {
    /// Seconds between refreshes (0.25-10; + and - change it live).
    #[arg(long, default_value_t = 1.0, value_name = "SECS", value_parser = seconds,
          allow_negative_numbers = true)]
    pub interval: f64,

    /// Observe block I/O with our own BPF (root, no scheduler needed) even
    /// if a scheduler serves stats.
    #[arg(long)]
    pub observe: bool,

    /// The stats socket to read (default /var/run/scx/root/stats).
    #[arg(long, value_name = "PATH", conflicts_with = "observe")]
    pub socket: Option<PathBuf>,

    #[command(flatten)]
    pub energy: EnergyArgs,
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
    #[arg(long, value_name = "FILE", default_value = esn_controller::live::DEFAULT_STATE_FILE)]
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
    #[arg(long, default_value_t = 1.0, value_name = "SECS", value_parser = seconds,
          allow_negative_numbers = true)]
    pub interval: f64,

    /// Stop after SECS seconds (default: until SIGINT/SIGTERM).
    #[arg(long, value_name = "SECS", value_parser = seconds, allow_negative_numbers = true)]
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

    /// Count every request's histogram in the hash table, as requests whose
    /// key finds its direct-mapped slot taken are (tests that path).
    #[arg(long, hide = true)]
    pub no_io_slots: bool,

    #[command(flatten)]
    pub energy: EnergyArgs,
}

/// --objective's values, as esn_controller::Objective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Objective {
    Latency,
    Throughput,
}

impl From<Objective> for esn_controller::Objective {
    fn from(o: Objective) -> esn_controller::Objective {
        match o {
            Objective::Latency => esn_controller::Objective::Latency,
            Objective::Throughput => esn_controller::Objective::Throughput,
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct SchedOpts {
    /// Pin the threshold: I/O-bound tasks a node keeps before the excess
    /// spills to the nearest node with room, the same on every node, never
    /// changed (1 to 1000000). Without it the threshold of each node hosting
    /// block devices is learned live (see --numa-penalty); other nodes keep
    /// their number of online CPUs.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=MAX_THRESHOLD as i64),
          allow_negative_numbers = true,
          conflicts_with_all = ["state_file", "no_state", "control_interval"])]
    pub threshold: Option<u32>,

    /// Use this NUMA penalty (remote over local I/O cost, 1.0-10.0) instead
    /// of measuring it. For machines where the measured latency ratio is
    /// known to mislead (an emulator, a device whose remote penalty shows in
    /// throughput rather than latency). Without it each node measures its
    /// own, using the prior 1.3 until it has seen remote requests.
    #[arg(long, value_name = "X", conflicts_with = "threshold", value_parser = numa_penalty,
          allow_negative_numbers = true)]
    pub numa_penalty: Option<f64>,

    /// What the learned threshold optimises. latency: the lesser-evil
    /// balance of the CPU wait on the device's node against the remote/local
    /// device latency ratio, at most two I/O-bound tasks per CPU. throughput:
    /// the IOPS of the node's devices, found by running one interval at a
    /// neighbouring threshold (one more, one fewer, or every task local) and
    /// keeping what completed more; up to 4 tasks per CPU. Experimental: see
    /// docs/PERFORMANCE.md for what it has measured so far.
    #[arg(long, value_enum, default_value_t = Objective::Latency, conflicts_with = "threshold")]
    pub objective: Objective,

    /// Seconds between two steps of the threshold controller.
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "SECS",
        value_parser = seconds,
        allow_negative_numbers = true
    )]
    pub control_interval: f64,

    /// Where the learned thresholds and curves are kept between runs. They
    /// are reused only on the topology they were learned on.
    #[arg(long, value_name = "FILE", default_value = esn_controller::live::DEFAULT_STATE_FILE)]
    pub state_file: PathBuf,

    /// Neither read nor write the learned state: start from scratch.
    #[arg(long, conflicts_with = "state_file")]
    pub no_state: bool,

    /// Print an interval of statistics every SECS seconds while running:
    /// counters, per node placed/threshold and waits, the block I/O tables,
    /// the controller's state.
    #[arg(
        long,
        value_name = "SECS",
        group = "live",
        value_parser = seconds,
        allow_negative_numbers = true
    )]
    pub stats: Option<f64>,

    /// Do not load a scheduler: print the statistics of the scx_esn already
    /// running, every SECS seconds, read from its stats socket
    /// (/var/run/scx/root/stats), until SIGINT/SIGTERM. Waits for one to start.
    #[arg(
        long,
        value_name = "SECS",
        group = "live",
        value_parser = seconds,
        allow_negative_numbers = true
    )]
    pub monitor: Option<f64>,

    /// With --stats or --monitor: one JSON object per interval instead of
    /// text.
    #[arg(long, requires = "live")]
    pub json: bool,

    /// Let this group read the stats socket too (mode 0660); without it only
    /// root can (0600), as what it serves names every I/O task.
    #[arg(long, value_name = "GROUP")]
    pub stats_group: Option<String>,

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

    /// Lower a node's CPU frequency while its block devices are saturated:
    /// every --dvfs-interval-ms, a node whose busiest device was busy for at
    /// least --dvfs-util-pct of the interval (io_ticks) gets its CPUs'
    /// scaling_max_freq one step lower; below that, the limits they had at
    /// start come back at once. The limits are put back on every exit; after
    /// a SIGKILL, `scx_esn restore-freq`. Where cpufreq is absent (a VM) it
    /// says so once and stays off.
    #[arg(long)]
    pub dvfs: bool,

    /// How often --dvfs samples the devices, in milliseconds (10-10000).
    #[arg(long, default_value_t = 100, value_name = "MS", requires = "dvfs",
          value_parser = clap::value_parser!(u64).range(10..=10_000))]
    pub dvfs_interval_ms: u64,

    /// Device utilisation, in percent of the interval, at which --dvfs
    /// steps a node's CPUs down (1-100).
    #[arg(long, default_value_t = 99, value_name = "PCT", requires = "dvfs",
          value_parser = clap::value_parser!(u8).range(1..=100))]
    pub dvfs_util_pct: u8,

    /// One --dvfs step in MHz, where the cpufreq driver lists no frequency
    /// table (intel_pstate, amd-pstate); with a table, a step is the next
    /// lower frequency in it.
    #[arg(long, default_value_t = 100, value_name = "MHZ", requires = "dvfs",
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub dvfs_step_mhz: u64,

    /// Where --dvfs keeps the limits it found, while any is lowered.
    #[arg(long, value_name = "FILE", requires = "dvfs",
          default_value = esn_power::cpufreq::DEFAULT_RECORD_FILE)]
    pub dvfs_record: PathBuf,

    #[command(flatten)]
    pub energy: EnergyArgs,

    /// Time slice in microseconds.
    #[arg(long, default_value_t = 5000, value_name = "US",
          value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    pub slice_us: u64,

    /// I/O priority classes without changing applications: a task whose
    /// I/O priority class is RT (`ionice -c1`) is charged its CPU time
    /// divided by N in the vtime queues and keeps N times the lag when it
    /// wakes, so it runs ahead of best-effort tasks (1: no precedence). The CPU time per class shows in the stats
    /// (run_ns_ioprio_rt, _be, _idle).
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=64))]
    pub ioprio_rt_boost: u64,

    /// ... and an IDLE-class task (`ionice -c3`) is charged its CPU time
    /// times N and keeps 1/N of the lag: it yields the CPU to the others
    /// (1: like any task).
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=64))]
    pub ioprio_idle_penalty: u64,

    /// Decayed I/O score at which a task counts as I/O-bound. With the
    /// default half-life, 8 means about 55 block I/Os per second. A placed
    /// task stays I/O-bound down to a quarter of it (hysteresis).
    #[arg(long, default_value_t = 8, value_name = "SCORE",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub io_min_score: u64,

    /// Half-life of the per-task I/O score, in milliseconds: how fast a task
    /// that stops doing I/O stops being treated as I/O-bound.
    #[arg(long, default_value_t = 100, value_name = "MS", global = true,
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

    /// A placed task that wakes to find every CPU of its node busy preempts
    /// one only if the task there has run this long, else it waits for the
    /// next CPU of its node to free up. 0 preempts at every wake-up, which
    /// serves placed I/O first but leaves the node's other tasks little CPU.
    #[arg(long, default_value_t = 1000, value_name = "US",
          value_parser = clap::value_parser!(u64).range(0..=1_000_000),
          allow_negative_numbers = true)]
    pub io_preempt_after_us: u64,

    /// A task that is not I/O-bound and wakes to find every CPU it may use
    /// busy preempts one whose task has run this long and used more CPU
    /// than it (as the kernel's fair class does at a wake-up), else it waits
    /// for a time slice to end (up to --slice-us plus a timer tick). 0
    /// preempts at once. Only while no I/O-bound task runs (none woke in
    /// the last 100 ms): their wake-ups keep the CPUs that free up.
    #[arg(long, default_value_t = 1000, value_name = "US",
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub fair_preempt_after_us: u64,

    /// Never preempt for a task that is not I/O-bound when it wakes: it
    /// waits for a time slice to end. Fewer context switches for CPU-bound
    /// work, longer waits for short-running tasks beside it.
    #[arg(long)]
    pub no_fair_preempt: bool,

    /// Let a task that is not I/O-bound wake a node that is wholly idle even
    /// while a node running placed I/O tasks on fewer CPUs than it has
    /// offers an idle CPU it may use. By default it takes that CPU, and the
    /// idle node's socket stays in deep idle (energy); this trades that for
    /// the task's previous node (its cache, its memory).
    #[arg(long)]
    pub no_keep_idle_nodes: bool,

    /// Bytes of the kernel's debug dump to print when the scheduler fails.
    #[arg(long, default_value_t = 0, value_name = "BYTES")]
    pub exit_dump_len: u32,

    /// libbpf's object options, as the scx schedulers take them: among them
    /// --kconfig FILE, the running kernel's config when neither
    /// /boot/config-$(uname -r) nor /proc/config.gz exists.
    #[command(flatten)]
    pub libbpf: scx_utils::libbpf_clap_opts::LibbpfOpts,

    /// sysfs root to read the topology from (for tests and diagnosis).
    #[arg(
        long,
        default_value = "/sys",
        value_name = "DIR",
        hide = true,
        global = true
    )]
    pub sysfs: PathBuf,

    /// More logging; twice for libbpf's debug output.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
}

/// Largest --threshold: far above any node's CPU count, it means "never
/// spill" without letting a typo's digits reach the BPF maps.
pub const MAX_THRESHOLD: u32 = 1_000_000;

/// The command line, or exit 2 with one line saying what is wrong with it
/// (exit 0 for --help and --version).
pub fn parse() -> Opts {
    match parse_from(std::env::args_os()) {
        Ok(opts) => opts,
        Err(err) if !err.use_stderr() => err.exit(),
        Err(err) => {
            eprintln!("scx_esn: {}", one_line(&err));
            std::process::exit(2);
        }
    }
}

/// Parses and refuses options that would do nothing in the mode given.
pub fn parse_from<I, T>(args: I) -> Result<Opts, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let mut cmd = Opts::command();
    let matches = cmd.try_get_matches_from_mut(args)?;
    check_modes(&mut cmd, &matches)?;
    Opts::from_arg_matches(&matches).map_err(|err| err.format(&mut cmd))
}

/// clap's message without its usage block and tips (its first paragraph,
/// which may list arguments on lines of their own), with where to read more.
fn one_line(err: &clap::Error) -> String {
    let text = err.to_string();
    let message: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|line| !line.is_empty())
        .collect();
    let message = message.join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    format!("{message} (scx_esn --help explains the options)")
}

/// Options of the top level that are the scheduler's own: all but the
/// global ones (-v, --io-half-life-ms, --sysfs) and help/version.
fn scheduler_only(cmd: &clap::Command) -> Vec<&clap::Arg> {
    cmd.get_arguments()
        .filter(|a| !a.is_global_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .collect()
}

fn flag_name(arg: &clap::Arg) -> String {
    match arg.get_long() {
        Some(long) => format!("--{long}"),
        None => arg.get_id().to_string(),
    }
}

/// A scheduler option before a subcommand (`scx_esn --threshold 3 observe`),
/// or beside --monitor / --help-stats, which load no scheduler, would be
/// silently ignored: refuse it instead.
fn check_modes(cmd: &mut clap::Command, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
    let given = |id: &str| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    let own = scheduler_only(cmd);
    let first_given = |allowed: &[&str]| {
        own.iter()
            .find(|a| given(a.get_id().as_str()) && !allowed.contains(&a.get_id().as_str()))
            .map(|a| flag_name(a))
    };
    let mut why = None;
    if let Some((sub, _)) = matches.subcommand() {
        if let Some(flag) = first_given(&[]) {
            why = Some(format!(
                "{flag} is an option of the scheduler and does nothing with `{sub}`: \
                 leave it out"
            ));
        }
    } else if given("help_stats") {
        if let Some(flag) = first_given(&["help_stats"]) {
            why = Some(format!("{flag} does nothing with --help-stats"));
        }
    } else if given("monitor") {
        if let Some(flag) = first_given(&["monitor", "json"]) {
            why = Some(format!(
                "{flag} does nothing with --monitor, which only reads a running \
                 scx_esn's statistics: give it to that scx_esn instead"
            ));
        }
    }
    match why {
        Some(why) => Err(cmd.error(clap::error::ErrorKind::ArgumentConflict, why)),
        None => Ok(()),
    }
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

/// A seconds option on the command line: a positive, sane number.
fn seconds(text: &str) -> Result<f64, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("{text}: give a positive number of seconds"));
    }
    if secs > MAX_SECS {
        return Err(format!("{text}: at most {MAX_SECS} seconds (a year)"));
    }
    Ok(secs)
}

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

    #[test]
    fn the_logged_command_line_pastes_back_into_a_shell() {
        let args = [
            "scx_esn",
            "--state-file",
            "/var/lib/a b.json",
            "--stats-group",
            "it's",
            "",
        ];
        assert_eq!(
            shell_words(args.iter().map(std::ffi::OsString::from)),
            r"scx_esn --state-file '/var/lib/a b.json' --stats-group 'it'\''s' ''"
        );
    }

    #[test]
    fn the_version_names_the_target() {
        assert!(
            FULL_VERSION.starts_with(env!("CARGO_PKG_VERSION")),
            "{FULL_VERSION}"
        );
        assert!(FULL_VERSION.contains("-linux"), "{FULL_VERSION}");
    }

    #[test]
    fn cli_is_consistent() {
        Opts::command().debug_assert();
    }

    /// The one line `parse` prints for a bad command line.
    fn refused(args: &[&str]) -> String {
        let err = parse_from(std::iter::once("scx_esn").chain(args.iter().copied()))
            .expect_err("should be refused");
        assert!(err.use_stderr(), "{err}");
        assert_eq!(err.exit_code(), 2);
        one_line(&err)
    }

    #[test]
    fn dvfs_options_need_dvfs_and_sane_values() {
        for (bad, says) in [
            (&["--dvfs-util-pct", "50"][..], "--dvfs"),
            (&["--dvfs", "--dvfs-util-pct", "0"], "--dvfs-util-pct"),
            (&["--dvfs", "--dvfs-util-pct", "101"], "--dvfs-util-pct"),
            (&["--dvfs", "--dvfs-interval-ms", "5"], "--dvfs-interval-ms"),
            (&["--dvfs", "--dvfs-step-mhz", "0"], "--dvfs-step-mhz"),
            (&["--dvfs", "restore-freq"], "--dvfs"),
        ] {
            let line = refused(bad);
            assert!(line.contains(says), "{bad:?}: {line}");
        }
        let opts = parse_from(["scx_esn", "--dvfs", "--dvfs-util-pct", "95"]).unwrap();
        assert!(opts.sched.dvfs);
        assert_eq!(opts.sched.dvfs_util_pct, 95);
        let opts = parse_from(["scx_esn", "restore-freq", "--record", "/tmp/r.json"]).unwrap();
        assert!(matches!(
            opts.command,
            Some(Command::RestoreFreq { ref record }) if record == std::path::Path::new("/tmp/r.json")
        ));
    }

    #[test]
    fn bad_thresholds_are_refused_in_one_line() {
        for (bad, says) in [
            (&["--threshold", "0"][..], "--threshold"),
            (&["--threshold", "-3"], "--threshold"),
            (&["--threshold", "x"], "--threshold"),
            (&["--threshold", "1000001"], "--threshold"),
            (&["--threshold", "99999999999999999999"], "--threshold"),
            (&["--threshold"], "--threshold"),
        ] {
            let line = refused(bad);
            assert!(
                line.contains(says) && !line.contains('\n'),
                "{bad:?}: {line}"
            );
            assert!(
                line.ends_with("(scx_esn --help explains the options)"),
                "{line}"
            );
        }
        let opts = parse_from(["scx_esn", "--threshold", "1000000"]).unwrap();
        assert_eq!(opts.sched.threshold, Some(MAX_THRESHOLD));
    }

    #[test]
    fn options_that_would_do_nothing_are_refused() {
        for (args, says) in [
            (&["--threshold", "3", "observe"][..], "--threshold"),
            (&["--stats", "1", "topology"], "--stats"),
            (&["--prometheus", "9000", "top"], "--prometheus"),
            (&["--json"], "--stats"),
            (&["--numa-penalty", "-2"], "--numa-penalty"),
            (&["--stats", "0"], "--stats"),
            (&["--control-interval", "-1"], "--control-interval"),
            (&["--monitor", "nan"], "--monitor"),
            (&["observe", "--interval", "-1"], "--interval"),
            (&["observe", "--duration", "1e30"], "--duration"),
            (&["top", "--interval", "inf"], "--interval"),
            (&["--json", "topology"], "--stats"),
            (&["--no-state", "--state-file", "/tmp/x"], "--state-file"),
            (
                &["--threshold", "2", "--state-file", "/tmp/x"],
                "--state-file",
            ),
            (&["--threshold", "2", "--no-state"], "--no-state"),
            (
                &["--threshold", "2", "--control-interval", "2"],
                "--control-interval",
            ),
            (&["--monitor", "1", "--threshold", "2"], "--threshold"),
            (&["--monitor", "1", "--stats", "1"], "--stats"),
            (&["--help-stats", "--slice-us", "200"], "--slice-us"),
            (&["--io-preempt-after-us", "-1"], "--io-preempt-after-us"),
            (
                &["--io-preempt-after-us", "1000001"],
                "--io-preempt-after-us",
            ),
            (
                &["--io-preempt-after-us", "500", "observe"],
                "--io-preempt-after-us",
            ),
        ] {
            let line = refused(args);
            assert!(line.contains(says), "{args:?}: {line}");
        }
    }

    #[test]
    fn global_options_go_before_or_after_the_subcommand() {
        for args in [
            &["scx_esn", "observe", "-v", "--io-half-life-ms", "200"][..],
            &["scx_esn", "-v", "--io-half-life-ms", "200", "observe"],
        ] {
            let opts = parse_from(args).unwrap();
            assert_eq!(opts.sched.verbose, 1, "{args:?}");
            assert_eq!(opts.sched.io_half_life_ms, 200, "{args:?}");
            assert!(matches!(opts.command, Some(Command::Observe(_))));
        }
        let opts = parse_from(["scx_esn", "--monitor", "1", "--json", "-v"]).unwrap();
        assert_eq!((opts.sched.monitor, opts.sched.json), (Some(1.0), true));
        let opts = parse_from(["scx_esn", "--stats", "2", "--json"]).unwrap();
        assert!(opts.sched.json);
    }

    #[test]
    fn defaults_and_subcommand() {
        let opts = parse_from(["scx_esn", "--threshold", "2", "--stats", "1"]).unwrap();
        assert_eq!(opts.sched.threshold, Some(2));
        assert_eq!(opts.sched.slice_us, 5000);
        assert_eq!(opts.sched.io_preempt_after_us, 1000);
        assert_eq!(opts.sched.fair_preempt_after_us, 1000);
        assert!(!opts.sched.no_fair_preempt);
        assert!(!opts.sched.no_keep_idle_nodes);
        assert!(opts.command.is_none());
        let opts = parse_from(["scx_esn", "topology", "--json"]).unwrap();
        assert!(matches!(
            opts.command,
            Some(Command::Topology { json: true })
        ));
    }

    #[test]
    fn numa_penalty_is_checked_and_excludes_a_pinned_threshold() {
        let opts = parse_from(["scx_esn", "--numa-penalty", "3"]).unwrap();
        assert_eq!(opts.sched.numa_penalty, Some(3.0));
        for bad in ["0.5", "11", "nan", "x"] {
            let err = parse_from(["scx_esn", "--numa-penalty", bad]).unwrap_err();
            assert!(err.to_string().contains("numa-penalty"), "{err}");
        }
        let err = parse_from(["scx_esn", "--numa-penalty", "2", "--threshold", "2"]).unwrap_err();
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
        let opts = parse_from(["scx_esn", "--prometheus", "9091"]).unwrap();
        assert_eq!(
            opts.sched.prometheus,
            Some("127.0.0.1:9091".parse().unwrap())
        );
        let err = parse_from(["scx_esn", "--prometheus", "host"]).unwrap_err();
        assert!(err.to_string().contains("ADDR:PORT"), "{err}");
    }

    #[test]
    fn top_options() {
        let opts = parse_from(["scx_esn", "top", "--interval", "0.5"]).unwrap();
        let Some(Command::Top(t)) = opts.command else {
            panic!("not top");
        };
        assert_eq!(t.interval, 0.5);
        assert!(!t.observe && t.socket.is_none());
        assert!(parse_from(["scx_esn", "top", "--observe", "--socket", "/x"]).is_err());
    }

    #[test]
    fn observe_options() {
        let opts = parse_from([
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
