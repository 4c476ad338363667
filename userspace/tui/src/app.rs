//! What `scx_esn top` knows and what the user asked for, without any terminal.
//!
//! # The model
//!
//! The [`App`] holds the latest [`IntervalStats`] and a short [`History`] of a
//! few numbers per node and device, so the UI can draw sparklines. Everything
//! else is view state the keys change: which [`View`] is shown, how tasks are
//! sorted ([`TaskSort`]), the refresh interval, pause and the help overlay.
//!
//! ```text
//!  IntervalStats ──push──▶ latest (shown as is)
//!                    └───▶ History: one time axis, 120 points
//!                            per node: threshold, submitted IOPS
//!                            per device: IOPS
//!  KeyEvent ──handle_key──▶ view / sort / pause / refresh / help ──▶ Action
//! ```
//!
//! The [`Link`] says whether the last fetch worked. Losing the scheduler does not
//! clear anything: the last interval and its history stay on screen under a
//! "disconnected" banner, which is more useful than an empty screen while the
//! scheduler restarts.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use esn_reading::IntervalStats;
use esn_stats::{Report, TaskReport};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// Points kept per series: two minutes at the default one-second refresh.
pub const HISTORY_LEN: usize = 120;
/// Fastest refresh `+` reaches: faster only burns the scheduler's CPU on stats.
pub const REFRESH_MIN: Duration = Duration::from_millis(250);
/// Slowest refresh `-` reaches.
pub const REFRESH_MAX: Duration = Duration::from_secs(10);

/// Where the intervals come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A running scx_esn's stats socket: every field of [`IntervalStats`].
    Scheduler,
    /// No scheduler: only `io` is filled; counters, nodes, control and health
    /// are empty.
    Observe,
}

/// Whether the last fetch reached the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    Connected,
    Disconnected {
        /// The error of the first failed fetch in a row, updated by later ones.
        why: String,
        /// When the first fetch in a row failed.
        since: Instant,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Nodes,
    Devices,
    Tasks,
}

impl View {
    pub const ALL: [View; 3] = [View::Nodes, View::Devices, View::Tasks];

    pub fn next(self) -> View {
        match self {
            View::Nodes => View::Devices,
            View::Devices => View::Tasks,
            View::Tasks => View::Nodes,
        }
    }

    pub fn prev(self) -> View {
        match self {
            View::Nodes => View::Tasks,
            View::Devices => View::Nodes,
            View::Tasks => View::Devices,
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            View::Nodes => "Nodes",
            View::Devices => "Devices",
            View::Tasks => "Tasks",
        }
    }
}

/// The column the task table is sorted by: numbers biggest first, pid and comm
/// in ascending order (the way one looks a task up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSort {
    Iops,
    MbS,
    /// Share of the task's requests submitted away from its device's node.
    Remote,
    Pid,
    Comm,
}

impl TaskSort {
    pub fn next(self) -> TaskSort {
        match self {
            TaskSort::Iops => TaskSort::MbS,
            TaskSort::MbS => TaskSort::Remote,
            TaskSort::Remote => TaskSort::Pid,
            TaskSort::Pid => TaskSort::Comm,
            TaskSort::Comm => TaskSort::Iops,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            TaskSort::Iops => "iops",
            TaskSort::MbS => "mb/s",
            TaskSort::Remote => "remote",
            TaskSort::Pid => "pid",
            TaskSort::Comm => "comm",
        }
    }

    pub fn descending(self) -> bool {
        matches!(self, TaskSort::Iops | TaskSort::MbS | TaskSort::Remote)
    }
}

/// What the caller should do after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    Redraw,
    None,
}

/// A ring buffer of at most [`HISTORY_LEN`] points, oldest first. `None` is an
/// interval without the value (no elapsed time, the node or device absent), so
/// every series of a [`History`] stays on the same time axis.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    points: VecDeque<Option<f64>>,
}

impl Series {
    /// A series that starts with `gap` missing points, aligned with older ones.
    fn with_gap(gap: usize) -> Series {
        Series {
            points: std::iter::repeat_n(None, gap.min(HISTORY_LEN)).collect(),
        }
    }

    fn push(&mut self, v: Option<f64>) {
        if self.points.len() == HISTORY_LEN {
            self.points.pop_front();
        }
        self.points.push_back(v.filter(|v| v.is_finite()));
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    pub fn points(&self) -> impl Iterator<Item = Option<f64>> + '_ {
        self.points.iter().copied()
    }

    /// The newest point that has a value.
    pub fn last(&self) -> Option<f64> {
        self.points.iter().rev().find_map(|p| *p)
    }
}

/// History of one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeHistory {
    /// The scheduler's threshold at the end of each interval.
    pub threshold: Series,
    /// Requests per second submitted from the node's CPUs.
    pub iops: Series,
}

/// The series behind the sparklines, all on one time axis: a node or device
/// first seen later starts with gaps, one that vanishes gets gaps, so the
/// newest point is at the right end of every line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// Intervals pushed so far (capped: only the gap length depends on it).
    pushed: usize,
    pub nodes: BTreeMap<u32, NodeHistory>,
    /// By device name.
    pub devices: BTreeMap<String, Series>,
}

impl History {
    fn push(&mut self, stats: &IntervalStats) {
        let gap = self.pushed;
        let per_s = |reqs: u64| rate(reqs, stats.io.elapsed_s);

        let mut thresholds: BTreeMap<u32, Option<f64>> = BTreeMap::new();
        for n in &stats.nodes {
            thresholds.insert(n.node, Some(f64::from(n.threshold)));
        }
        let mut iops: BTreeMap<u32, Option<f64>> = BTreeMap::new();
        for n in &stats.io.nodes {
            iops.insert(n.node, per_s(n.reqs));
        }
        for &node in thresholds.keys().chain(iops.keys()) {
            self.nodes.entry(node).or_insert_with(|| NodeHistory {
                threshold: Series::with_gap(gap),
                iops: Series::with_gap(gap),
            });
        }
        for (node, h) in &mut self.nodes {
            h.threshold.push(thresholds.get(node).copied().flatten());
            h.iops.push(iops.get(node).copied().flatten());
        }

        let mut dev_iops: BTreeMap<&str, Option<f64>> = BTreeMap::new();
        for d in &stats.io.devices {
            dev_iops.insert(&d.name, d.iops);
        }
        for name in dev_iops.keys() {
            if !self.devices.contains_key(*name) {
                self.devices
                    .insert((*name).to_string(), Series::with_gap(gap));
            }
        }
        for (name, s) in &mut self.devices {
            s.push(dev_iops.get(name.as_str()).copied().flatten());
        }

        self.pushed = (self.pushed + 1).min(HISTORY_LEN);
    }
}

/// `n` per second over `elapsed_s`; `None` without elapsed time.
pub fn rate(n: u64, elapsed_s: f64) -> Option<f64> {
    (elapsed_s.is_finite() && elapsed_s > 0.0).then(|| n as f64 / elapsed_s)
}

/// The node of the task's dominant device: where the scheduler wants it to run.
pub fn home_node(io: &Report, task: &TaskReport) -> Option<u32> {
    let dev = task.dominant_dev.as_deref()?;
    io.devices.iter().find(|d| d.name == dev)?.node
}

/// remote_reqs / reqs of a task; `None` without requests.
pub fn task_remote_share(task: &TaskReport) -> Option<f64> {
    (task.reqs > 0).then(|| task.remote_reqs as f64 / task.reqs as f64)
}

#[derive(Debug, Clone)]
pub struct App {
    mode: Mode,
    link: Link,
    latest: Option<IntervalStats>,
    history: History,
    view: View,
    sort: TaskSort,
    paused: bool,
    refresh: Duration,
    help: bool,
}

impl App {
    /// `refresh` is clamped to [`REFRESH_MIN`]..[`REFRESH_MAX`].
    pub fn new(mode: Mode, refresh: Duration) -> App {
        App {
            mode,
            link: Link::Connected,
            latest: None,
            history: History::default(),
            view: View::Nodes,
            sort: TaskSort::Iops,
            paused: false,
            refresh: refresh.clamp(REFRESH_MIN, REFRESH_MAX),
            help: false,
        }
    }

    /// One new interval: it becomes the one shown, its numbers join the
    /// history, and the link is up again.
    pub fn push(&mut self, stats: IntervalStats) {
        self.history.push(&stats);
        self.latest = Some(stats);
        self.link = Link::Connected;
    }

    /// Keeps the last interval and the history; the first failure of a row
    /// sets `since`, later ones only update the reason.
    pub fn set_disconnected(&mut self, why: impl Into<String>) {
        let why = why.into();
        match &mut self.link {
            Link::Disconnected { why: w, .. } => *w = why,
            Link::Connected => {
                self.link = Link::Disconnected {
                    why,
                    since: Instant::now(),
                }
            }
        }
    }

    pub fn set_connected(&mut self) {
        self.link = Link::Connected;
    }

    /// The source may change mode, e.g. fall back to observing when no
    /// scheduler runs.
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn link(&self) -> &Link {
        &self.link
    }

    pub fn latest(&self) -> Option<&IntervalStats> {
        self.latest.as_ref()
    }

    pub fn history(&self) -> &History {
        &self.history
    }

    pub fn view(&self) -> View {
        self.view
    }

    pub fn set_view(&mut self, view: View) {
        self.view = view;
    }

    pub fn sort(&self) -> TaskSort {
        self.sort
    }

    /// The runner does not fetch while paused, so the screen holds still.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    pub fn refresh(&self) -> Duration {
        self.refresh
    }

    pub fn help_visible(&self) -> bool {
        self.help
    }

    /// The latest interval's tasks in the order of [`App::sort`]; ties go by
    /// tid so rows do not jump between refreshes.
    pub fn sorted_tasks(&self) -> Vec<&TaskReport> {
        let Some(stats) = &self.latest else {
            return Vec::new();
        };
        let mut tasks: Vec<&TaskReport> = stats.io.tasks.iter().collect();
        // Missing and NaN values go last whatever the direction: they are
        // "no data", not a smallest or largest value.
        let num = |v: Option<f64>| v.filter(|v| v.is_finite());
        let desc = |a: Option<f64>, b: Option<f64>| match (num(a), num(b)) {
            (Some(a), Some(b)) => b.total_cmp(&a),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        };
        tasks.sort_by(|a, b| {
            let primary = match self.sort {
                TaskSort::Iops => desc(a.iops, b.iops),
                TaskSort::MbS => desc(a.mb_s, b.mb_s),
                TaskSort::Remote => desc(task_remote_share(a), task_remote_share(b)),
                TaskSort::Pid => a.tgid.cmp(&b.tgid),
                TaskSort::Comm => a.comm.cmp(&b.comm),
            };
            primary.then(a.tid.cmp(&b.tid))
        });
        tasks
    }

    pub fn faster(&mut self) {
        self.refresh = (self.refresh / 2).max(REFRESH_MIN);
    }

    pub fn slower(&mut self) {
        self.refresh = self.refresh.saturating_mul(2).min(REFRESH_MAX);
    }

    pub fn handle_key(&mut self, key: KeyEvent) -> Action {
        // Terminals that report releases (and repeats) would otherwise toggle
        // twice per keystroke.
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('c') if ctrl => Action::Quit,
            KeyCode::Char('q') => Action::Quit,
            KeyCode::Tab => {
                self.view = self.view.next();
                Action::Redraw
            }
            KeyCode::BackTab => {
                self.view = self.view.prev();
                Action::Redraw
            }
            KeyCode::Char('s') => {
                self.sort = self.sort.next();
                Action::Redraw
            }
            KeyCode::Char('p') => {
                self.paused = !self.paused;
                Action::Redraw
            }
            // '=' is '+' without shift on most layouts.
            KeyCode::Char('+') | KeyCode::Char('=') => {
                self.faster();
                Action::Redraw
            }
            KeyCode::Char('-') => {
                self.slower();
                Action::Redraw
            }
            KeyCode::Char('?') => {
                self.help = !self.help;
                Action::Redraw
            }
            KeyCode::Esc if self.help => {
                self.help = false;
                Action::Redraw
            }
            _ => Action::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_keeps_the_newest_points() {
        let mut s = Series::default();
        for i in 0..130 {
            s.push(Some(f64::from(i)));
        }
        assert_eq!(s.len(), HISTORY_LEN);
        assert_eq!(s.points().next(), Some(Some(10.0)));
        assert_eq!(s.last(), Some(129.0));
    }

    #[test]
    fn non_finite_points_are_gaps() {
        let mut s = Series::default();
        s.push(Some(1.0));
        s.push(Some(f64::NAN));
        assert_eq!(s.points().collect::<Vec<_>>(), vec![Some(1.0), None]);
        assert_eq!(s.last(), Some(1.0));
    }

    #[test]
    fn refresh_is_clamped_at_construction() {
        assert_eq!(
            App::new(Mode::Scheduler, Duration::ZERO).refresh(),
            REFRESH_MIN
        );
        assert_eq!(
            App::new(Mode::Scheduler, Duration::from_secs(3600)).refresh(),
            REFRESH_MAX
        );
    }

    #[test]
    fn rate_needs_elapsed_time() {
        assert_eq!(rate(10, 0.0), None);
        assert_eq!(rate(10, f64::NAN), None);
        assert_eq!(rate(10, 2.0), Some(5.0));
    }
}
