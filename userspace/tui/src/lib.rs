//! `scx_esn top`: a live terminal view of a running scx_esn, or of block I/O
//! alone when no scheduler runs.
//!
//! # The flow
//!
//! ```text
//!  Source ──fetch()──▶ IntervalStats ──App::push──▶ App ──ui::draw──▶ Frame
//!  (stats socket,        one per refresh            │ latest interval
//!   or observe)                                     │ history (120 points)
//!                                                   │ view, sort, pause,
//!  keyboard ──Events──▶ App::handle_key ───────────▶│ refresh, help
//!                             │
//!                             └─▶ Action: Quit / Redraw / None
//! ```
//!
//! * [`app`]: the state and the keys, no terminal: testable on its own.
//! * [`ui`]: draws an [`App`] into any ratatui frame (a `TestBackend` in tests).
//! * [`run`](mod@run): the loop tying a [`Source`] and the terminal together.
//!
//! A source that fails is not fatal: the view keeps the last interval, says
//! "disconnected … retrying", and the next refresh tries again.

pub mod app;
mod fmt;
pub mod run;
pub mod ui;

pub use app::{
    Action, App, History, Link, Mode, NodeHistory, Series, TaskSort, View, HISTORY_LEN,
    REFRESH_MAX, REFRESH_MIN,
};
pub use run::{fetch_into, handle_event, run, run_loop, Events, Source, TerminalEvents};
pub use ui::draw;
