//! The whole loop on a test terminal, with a scripted source and keys.

mod common;

use std::cell::Cell;
use std::collections::VecDeque;
use std::time::Duration;

use anyhow::anyhow;
use common::*;
use esn_reading::IntervalStats;
use esn_tui::{run_loop, Events, Link, Mode, Source, View};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{Event, KeyCode};
use ratatui::Terminal;

struct Script {
    results: VecDeque<anyhow::Result<IntervalStats>>,
    fetches: usize,
    mode: Mode,
}

impl Script {
    fn new(results: Vec<anyhow::Result<IntervalStats>>) -> Script {
        Script {
            results: results.into(),
            fetches: 0,
            mode: Mode::Scheduler,
        }
    }
}

impl Source for Script {
    fn fetch(&mut self) -> anyhow::Result<IntervalStats> {
        self.fetches += 1;
        self.results
            .pop_front()
            .unwrap_or_else(|| Err(anyhow!("script ended")))
    }

    fn mode(&self) -> Mode {
        self.mode
    }
}

/// Hands out the events in order, one per call; `None` entries are a poll
/// that timed out. After the script, 'q'.
struct Keys(VecDeque<Option<Event>>);

impl Events for Keys {
    fn next(&mut self, _timeout: Duration) -> anyhow::Result<Option<Event>> {
        Ok(self.0.pop_front().unwrap_or(Some(Event::Key(ch('q')))))
    }
}

fn keys(events: Vec<Option<Event>>) -> Keys {
    Keys(events.into())
}

fn terminal() -> Terminal<TestBackend> {
    Terminal::new(TestBackend::new(120, 40)).unwrap()
}

fn drawn(t: &Terminal<TestBackend>) -> String {
    let buf = t.backend().buffer();
    buf.content()
        .chunks(usize::from(buf.area.width))
        .map(|row| row.iter().map(|c| c.symbol()).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn fetches_first_draws_and_quits_on_q() {
    let mut t = terminal();
    let mut src = Script::new(vec![Ok(two_nodes())]);
    let app = run_loop(
        &mut t,
        &mut src,
        &mut keys(vec![Some(Event::Key(key(KeyCode::Tab)))]),
        Duration::from_secs(10),
        &|| false,
    )
    .unwrap();
    assert_eq!(src.fetches, 1);
    assert_eq!(app.view(), View::Devices);
    assert!(app.latest().is_some());
    // The Tab was drawn before the 'q'.
    assert!(drawn(&t).contains("nvme0n1"), "{}", drawn(&t));
}

/// Like [`Keys`], but each poll first sleeps past the shortest refresh, so
/// a fetch is due at every turn of the loop.
struct SlowKeys(VecDeque<Option<Event>>);

impl Events for SlowKeys {
    fn next(&mut self, _timeout: Duration) -> anyhow::Result<Option<Event>> {
        std::thread::sleep(Duration::from_millis(300));
        Ok(self.0.pop_front().unwrap_or(Some(Event::Key(ch('q')))))
    }
}

#[test]
fn a_failed_fetch_marks_the_app_disconnected_and_is_retried() {
    let mut t = terminal();
    let mut src = Script::new(vec![Ok(two_nodes()), Err(anyhow!("connection refused"))]);
    let app = run_loop(
        &mut t,
        &mut src,
        &mut SlowKeys(vec![None, None].into()),
        Duration::from_millis(250),
        &|| false,
    )
    .unwrap();
    // The first fetch, the failed one, and the retry after it.
    assert_eq!(src.fetches, 3);
    match app.link() {
        Link::Disconnected { why, .. } => assert_eq!(why, "script ended"),
        other => panic!("still {other:?}"),
    }
    // The last interval is kept and shown under the banner.
    assert!(app.latest().is_some());
    let screen = drawn(&t);
    assert!(
        screen.contains("disconnected: script ended — retrying"),
        "{screen}"
    );
    assert!(screen.contains("[#####     ] 48%"), "{screen}");
}

#[test]
fn a_fetch_after_a_failure_reconnects() {
    let mut t = terminal();
    let mut src = Script::new(vec![Err(anyhow!("connection refused")), Ok(two_nodes())]);
    let app = run_loop(
        &mut t,
        &mut src,
        &mut SlowKeys(vec![None].into()),
        Duration::from_millis(250),
        &|| false,
    )
    .unwrap();
    assert_eq!(src.fetches, 2);
    assert_eq!(app.link(), &Link::Connected);
    assert!(!drawn(&t).contains("disconnected"));
}

#[test]
fn paused_does_not_fetch() {
    let mut t = terminal();
    let mut src = Script::new(vec![Ok(two_nodes()), Ok(two_nodes())]);
    let app = run_loop(
        &mut t,
        &mut src,
        &mut SlowKeys(vec![Some(Event::Key(ch('p'))), None, None].into()),
        Duration::from_millis(250),
        &|| false,
    )
    .unwrap();
    assert!(app.is_paused());
    assert_eq!(src.fetches, 1, "fetched while paused");
    assert!(drawn(&t).contains("PAUSED"));
}

#[test]
fn should_quit_ends_the_loop() {
    let mut t = terminal();
    let mut src = Script::new(vec![Ok(two_nodes())]);
    let calls = Cell::new(0);
    let quit = || {
        calls.set(calls.get() + 1);
        calls.get() > 2
    };
    // Never a key: only should_quit can end this.
    struct Silent;
    impl Events for Silent {
        fn next(&mut self, _t: Duration) -> anyhow::Result<Option<Event>> {
            Ok(None)
        }
    }
    run_loop(
        &mut t,
        &mut src,
        &mut Silent,
        Duration::from_secs(10),
        &quit,
    )
    .unwrap();
    assert_eq!(calls.get(), 3);
}

#[test]
fn mode_comes_from_the_source_and_resize_redraws() {
    let mut t = terminal();
    let mut src = Script::new(vec![Ok(observe_only())]);
    src.mode = Mode::Observe;
    let app = run_loop(
        &mut t,
        &mut src,
        &mut keys(vec![Some(Event::Resize(100, 30))]),
        Duration::from_secs(10),
        &|| false,
    )
    .unwrap();
    assert_eq!(app.mode(), Mode::Observe);
    assert!(drawn(&t).contains("observe mode: no scx_esn running, block I/O only"));
}
