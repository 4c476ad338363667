//! The terminal loop: fetch when due, draw when something changed, wait for
//! keys in between.
//!
//! # The model
//!
//! ```text
//!        ┌──────────────────────────────────────────────────────┐
//!        ▼                                                      │
//!  should_quit? ──yes──▶ return                                 │
//!        │ no                                                   │
//!  refresh due and not paused? ──yes──▶ fetch_into: push or     │
//!        │                              mark disconnected       │
//!  changed? ──yes──▶ draw                                       │
//!        │                                                      │
//!  wait for an event until the next fetch (at most POLL_MAX) ───┘
//!        key ──▶ App::handle_key ──▶ Quit / Redraw / None
//!        resize ──▶ Redraw
//! ```
//!
//! A failed fetch is not an error of the loop: the source may be a scheduler
//! that restarts, so the app shows it as disconnected and the next refresh
//! tries again. Only terminal errors end the loop.
//!
//! The terminal and the event source are parameters of [`run_loop`], so tests
//! drive the whole loop with a `TestBackend` and scripted keys; [`run`] plugs
//! in the real terminal.

use std::time::{Duration, Instant};

use anyhow::Context;
use esn_reading::IntervalStats;
use ratatui::backend::Backend;
use ratatui::crossterm::event::{self, Event};
use ratatui::Terminal;

use crate::app::{Action, App, Mode};
use crate::ui;

/// Longest wait for an event before `should_quit` is asked again, so a
/// signal handler's flag ends the loop promptly even with a slow refresh.
pub const POLL_MAX: Duration = Duration::from_millis(200);

/// Where the intervals come from.
pub trait Source {
    /// Next interval; Err means the source is unreachable now (the loop marks
    /// the app disconnected and retries at the next refresh).
    fn fetch(&mut self) -> anyhow::Result<IntervalStats>;
    fn mode(&self) -> Mode;
}

/// Where keys and resizes come from.
pub trait Events {
    /// The next event, or `None` when none came within `timeout`.
    fn next(&mut self, timeout: Duration) -> anyhow::Result<Option<Event>>;
}

/// The real terminal's events, through crossterm.
#[derive(Debug, Default, Clone, Copy)]
pub struct TerminalEvents;

impl Events for TerminalEvents {
    fn next(&mut self, timeout: Duration) -> anyhow::Result<Option<Event>> {
        if event::poll(timeout).context("cannot poll terminal events")? {
            Ok(Some(event::read().context("cannot read a terminal event")?))
        } else {
            Ok(None)
        }
    }
}

/// One fetch: the interval joins the app, or the app shows why there is none.
/// The mode is asked after the fetch, since a source may change it then.
pub fn fetch_into(app: &mut App, source: &mut dyn Source) {
    let result = source.fetch();
    app.set_mode(source.mode());
    match result {
        Ok(stats) => app.push(stats),
        // `{:#}` keeps the context chain ("cannot connect: No such file…").
        Err(e) => app.set_disconnected(format!("{e:#}")),
    }
}

pub fn handle_event(app: &mut App, event: &Event) -> Action {
    match event {
        Event::Key(key) => app.handle_key(*key),
        Event::Resize(..) => Action::Redraw,
        _ => Action::None,
    }
}

/// Runs until a quit key or `should_quit()`, and returns the app as it was
/// then. The first fetch is made before the first draw.
pub fn run_loop<B>(
    terminal: &mut Terminal<B>,
    source: &mut dyn Source,
    events: &mut dyn Events,
    refresh: Duration,
    should_quit: &dyn Fn() -> bool,
) -> anyhow::Result<App>
where
    B: Backend,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let mut app = App::new(source.mode(), refresh);
    let mut last_fetch: Option<Instant> = None;
    let mut dirty = true;
    loop {
        if should_quit() {
            return Ok(app);
        }
        let now = Instant::now();
        // Asked every turn rather than scheduled once, so `+`/`-` take effect
        // on the wait already under way.
        let due = last_fetch.is_none_or(|t| now.saturating_duration_since(t) >= app.refresh());
        if due && !app.is_paused() {
            fetch_into(&mut app, source);
            last_fetch = Some(now);
            dirty = true;
        }
        if dirty {
            terminal
                .draw(|frame| ui::draw(frame, &app))
                .context("cannot draw")?;
            dirty = false;
        }

        let until_fetch = match last_fetch {
            Some(t) if !app.is_paused() => {
                (t + app.refresh()).saturating_duration_since(Instant::now())
            }
            // Paused, or nothing fetched yet while paused: only keys matter.
            _ => POLL_MAX,
        };
        if let Some(ev) = events.next(until_fetch.min(POLL_MAX))? {
            match handle_event(&mut app, &ev) {
                Action::Quit => return Ok(app),
                Action::Redraw => dirty = true,
                Action::None => {}
            }
        }
    }
}

/// Takes over the terminal (raw mode, alternate screen), runs the loop on it
/// and gives the terminal back, on error too. `ratatui::try_init` installs a
/// panic hook that restores the terminal before a panic message is printed.
pub fn run(
    source: &mut dyn Source,
    refresh: Duration,
    should_quit: &dyn Fn() -> bool,
) -> anyhow::Result<()> {
    // try_init rather than init: a caller without a terminal (stdout piped)
    // gets an error to report instead of a panic.
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            // Raw mode may be on already when the alternate screen failed.
            ratatui::restore();
            return Err(e).context("cannot set up the terminal");
        }
    };
    let result = run_loop(
        &mut terminal,
        source,
        &mut TerminalEvents,
        refresh,
        should_quit,
    );
    ratatui::restore();
    result.map(|_| ())
}
