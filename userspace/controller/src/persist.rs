//! Learned state on disk, so a restart does not relearn every curve from scratch.
//!
//! The file is JSON (one [`LearnedState`]), written whole to a temporary file in the
//! same directory and renamed over the old one: rename within a directory is atomic,
//! so a reader, or the next start after a crash, sees the old file or the new one,
//! never half of one.
//!
//! Loading is defensive in the other direction. The file may be from another version
//! of this crate, from another machine (a copied disk image), truncated by a full
//! disk, or plain garbage; none of it may stop the scheduler. [`load`] therefore never
//! fails and never panics: it returns the state, [`LoadOutcome::Missing`], or
//! [`LoadOutcome::Ignored`] with a reason to log, and the caller starts afresh.
//!
//! Files are opened so that nothing planted in the state directory is followed: the
//! temporary file is created exclusively (O_EXCL; a name that exists, symlink
//! included, is never opened) under an unpredictable name, mode 0644, and a state
//! file that is a symlink is not read. One process at a time owns a state file
//! ([`lock`]): the running scheduler for its whole run, `profile --save` for its
//! read-modify-write, so neither silently overwrites what the other learned.
//!
//! State learned on one topology says nothing about another (other CPUs per node,
//! other devices), so the caller passes a fingerprint of the topology and a file with
//! another one is ignored. What goes into the fingerprint is the caller's business.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Bumped whenever the meaning or layout of the stored state changes.
pub const STATE_VERSION: u32 = 1;

/// A state file larger than this is not one of ours (a node's state is a few hundred
/// bytes); reading it whole could exhaust memory.
const MAX_FILE_BYTES: u64 = 16 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnedState {
    pub version: u32,
    /// Fingerprint of the topology the state was learned on, given by the caller.
    pub topology: String,
    pub nodes: Vec<NodeState>,
}

impl LearnedState {
    /// The current version's state for `topology`.
    pub fn new(topology: impl Into<String>, nodes: Vec<NodeState>) -> LearnedState {
        LearnedState {
            version: STATE_VERSION,
            topology: topology.into(),
            nodes,
        }
    }

    /// The stored state of `node`, if any.
    pub fn node(&self, node: u32) -> Option<&NodeState> {
        self.nodes.iter().find(|n| n.node == node)
    }
}

/// One node's controller, complete enough that a restored controller takes the same
/// next decision the saved one would have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeState {
    pub node: u32,
    /// The learned threshold (without exploration).
    pub threshold: u32,
    /// The bound in force when saved; informational, restore takes today's.
    pub max_threshold: u32,
    pub fit: FitState,
    pub numa: NumaState,
    /// What a spilled task waits for a CPU on the next node (absent in files
    /// of builds before it: not measured).
    #[serde(default)]
    pub spill: SpillState,
    /// Direct observations per n, sorted by n.
    pub observed: Vec<ObservedPoint>,
    pub pending: PendingState,
    /// Informative intervals since the threshold last moved or explored.
    pub since_explore: u32,
    /// The last decision was an exploration (threshold + 1).
    pub exploring: bool,
}

/// The recursive least-squares fit, in its scaled form: the curve is
/// `theta[0]·x² + theta[1]·x + theta[2]` with x = n / scale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitState {
    pub scale: f64,
    pub theta: [f64; 3],
    /// The inverse of the RLS covariance matrix, row by row: the fit keeps this form
    /// (see the `fit` module), and inverting it for storage would only lose bits.
    pub information: [[f64; 3]; 3],
    /// The outlier clipping's deviation estimate.
    pub mean_abs_innovation: f64,
}

/// The NUMA penalty's moving average (`None` before any measurement) and how many
/// intervals went into it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NumaState {
    pub ewma: Option<f64>,
    pub samples: u64,
}

/// The spill contention's moving average, stored as the NUMA penalty's is.
pub type SpillState = NumaState;

/// The most recent P_cont observations at one n, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservedPoint {
    pub n: u32,
    pub recent: Vec<f64>,
    /// How many of `recent` (the oldest) are from before the node last came
    /// back to n: typical of n, but not what the evidence rule steers on.
    #[serde(default)]
    pub stale: usize,
    /// The evidence's clock (points recorded, at any n) when the newest of
    /// `recent` came in; 0 in state written before it was kept.
    #[serde(default)]
    pub last: u64,
}

/// Hysteresis in progress: the side of the threshold the target is on (-1, 0, 1) and
/// for how many intervals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingState {
    pub side: i8,
    pub count: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LoadOutcome {
    Loaded(LearnedState),
    /// No file at that path.
    Missing,
    /// A file that cannot be used, and why.
    Ignored(String),
}

/// Writes `state` to `path` atomically (see the module doc). On error the old file,
/// if any, is untouched and no temporary file is left behind. A state with a number
/// that is not finite is refused (`InvalidData`).
pub fn save(path: &Path, state: &LearnedState) -> io::Result<()> {
    // JSON would write a NaN as null, and the file would be refused on the next
    // start; better to refuse now, where the caller can see it.
    if let Some(n) = state.nodes.iter().find(|n| !node_is_finite(n)) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("node {} has a number that is not finite", n.node),
        ));
    }
    let json = serde_json::to_vec_pretty(state).map_err(io::Error::other)?;
    let tmp = write_temp(path, &json)?;
    // rename() replaces a symlink at `path` itself, never its target.
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    // Make the rename itself durable; without it a crash may bring back the old
    // file, which is harmless, so a failure here is not worth reporting.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// `.NAME<suffix>` beside `path`: the hidden files that go with a state file.
fn hidden_sibling(path: &Path, suffix: &str) -> io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} does not name a file", path.display()),
        )
    })?;
    let mut hidden = std::ffi::OsString::from(".");
    hidden.push(name);
    hidden.push(suffix);
    Ok(path.with_file_name(hidden))
}

/// A temporary name for one save: the pid, a per-process count and the clock's
/// nanoseconds, so it is unique and not guessable in advance.
fn temp_path(path: &Path) -> io::Result<PathBuf> {
    static SAVES: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let suffix = format!(
        ".tmp.{}.{}.{nanos:09}",
        std::process::id(),
        SAVES.fetch_add(1, Ordering::Relaxed)
    );
    hidden_sibling(path, &suffix)
}

/// Writes `bytes` to a new temporary file next to `path` and returns its name.
/// Created exclusively: a name that already exists (left by a crash, or planted) is
/// skipped, never opened, and a symlink is never followed.
fn write_temp(path: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
    let mut attempt = 0;
    loop {
        let tmp = temp_path(path)?;
        let opened = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp);
        let mut f = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 8 => {
                attempt += 1;
                continue;
            }
            Err(e) => return Err(e),
        };
        // The data must be on disk before the rename makes it the file.
        let written = f.write_all(bytes).and_then(|()| f.sync_all());
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        return Ok(tmp);
    }
}

/// Ownership of a state file, until dropped: an flock on a hidden lock file next to
/// it (not on the state file, which each save replaces). The kernel drops it when
/// the process dies, so a crash never leaves a stale lock.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
}

/// Takes the state file at `path` for this process. `WouldBlock` when another
/// process holds it; other errors when the lock file cannot be made (for example a
/// directory that does not exist or cannot be written).
pub fn lock(path: &Path) -> io::Result<StateLock> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(hidden_sibling(path, ".lock")?)?;
    match file.try_lock() {
        Ok(()) => Ok(StateLock { _file: file }),
        Err(TryLockError::WouldBlock) => Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!("{} is in use by another scx_esn process", path.display()),
        )),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// Reads the state at `path` for the topology `expected_topology`.
pub fn load(path: &Path, expected_topology: &str) -> LoadOutcome {
    let bytes = match read_bounded(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return LoadOutcome::Missing,
        Err(e) => return LoadOutcome::Ignored(format!("cannot read {}: {e}", path.display())),
    };
    match parse(&bytes, expected_topology) {
        Ok(state) => LoadOutcome::Loaded(state),
        Err(reason) => LoadOutcome::Ignored(reason),
    }
}

fn read_bounded(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                io::Error::other("it is a symbolic link, which is not followed")
            } else {
                e
            }
        })?;
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(io::Error::other(format!(
            "larger than {MAX_FILE_BYTES} bytes"
        )));
    }
    Ok(bytes)
}

/// The checks in the order that gives the most useful reason: a file from another
/// version is reported as such even if its layout no longer parses.
fn parse(bytes: &[u8], expected_topology: &str) -> Result<LearnedState, String> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON: {e}"))?;
    let version = value
        .get("version")
        .and_then(serde_json::Value::as_u64)
        .ok_or("no version number")?;
    if version != u64::from(STATE_VERSION) {
        return Err(format!("version {version}, expected {STATE_VERSION}"));
    }
    let state: LearnedState =
        serde_json::from_value(value).map_err(|e| format!("malformed state: {e}"))?;
    if state.topology != expected_topology {
        return Err(format!(
            "learned on topology {:?}, this is {:?}",
            state.topology, expected_topology
        ));
    }
    let mut seen = BTreeSet::new();
    for n in &state.nodes {
        if !seen.insert(n.node) {
            return Err(format!("node {} appears twice", n.node));
        }
        if !node_is_finite(n) {
            return Err(format!("node {} has a number that is not finite", n.node));
        }
    }
    Ok(state)
}

/// JSON itself has no NaN or infinity, but a number too large for f64 or a state
/// built by other code may still carry one; the fit must never start from it.
fn node_is_finite(n: &NodeState) -> bool {
    let f = &n.fit;
    let fit_ok = f.scale.is_finite()
        && f.mean_abs_innovation.is_finite()
        && f.theta
            .iter()
            .chain(f.information.iter().flatten())
            .all(|v| v.is_finite());
    let numa_ok = n.numa.ewma.is_none_or(f64::is_finite);
    let observed_ok = n
        .observed
        .iter()
        .flat_map(|p| &p.recent)
        .all(|v| v.is_finite());
    fit_ok && numa_ok && observed_ok
}
