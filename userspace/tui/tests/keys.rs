//! Keys change the app as the footer and help promise, and the history keeps
//! a bounded window.

mod common;

use std::time::Duration;

use common::*;
use esn_tui::{Action, App, Mode, TaskSort, View, HISTORY_LEN, REFRESH_MAX, REFRESH_MIN};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

#[test]
fn tab_cycles_views_both_ways() {
    let mut app = app_with(two_nodes());
    assert_eq!(app.view(), View::Nodes);
    let mut seen = Vec::new();
    for _ in 0..3 {
        assert_eq!(app.handle_key(key(KeyCode::Tab)), Action::Redraw);
        seen.push(app.view());
    }
    assert_eq!(seen, [View::Devices, View::Tasks, View::Nodes]);
    app.handle_key(key(KeyCode::BackTab));
    assert_eq!(app.view(), View::Tasks);
    // The highlighted tab follows, and the tasks table is what is drawn.
    assert!(screen(&render(&app, 120, 40)).contains("top I/O tasks"));
    app.handle_key(key(KeyCode::BackTab));
    assert_eq!(app.view(), View::Devices);
}

/// The comms of the task table, top to bottom.
fn task_order(app: &App) -> Vec<&'static str> {
    let lines = render(app, 120, 40);
    let mut rows: Vec<(usize, &'static str)> = ["fio", "postgres", "kworker"]
        .into_iter()
        .map(|c| {
            let at = lines
                .iter()
                .position(|l| l.contains(&format!(" {c}")))
                .unwrap_or_else(|| panic!("{c} missing:\n{}", screen(&lines)));
            (at, c)
        })
        .collect();
    rows.sort();
    rows.into_iter().map(|(_, c)| c).collect()
}

#[test]
fn s_cycles_the_sort_and_reorders_the_task_table() {
    let mut app = app_with(two_nodes());
    app.set_view(View::Tasks);
    let expected = [
        (TaskSort::Iops, "IOPS▼", ["fio", "postgres", "kworker"]),
        (TaskSort::MbS, "MB/S▼", ["postgres", "fio", "kworker"]),
        (TaskSort::Remote, "REMOTE▼", ["postgres", "kworker", "fio"]),
        (TaskSort::Pid, "PID/TID▲", ["kworker", "postgres", "fio"]),
        (TaskSort::Comm, "COMM▲", ["fio", "kworker", "postgres"]),
        (TaskSort::Iops, "IOPS▼", ["fio", "postgres", "kworker"]),
    ];
    for (i, (sort, header, order)) in expected.into_iter().enumerate() {
        if i > 0 {
            assert_eq!(app.handle_key(ch('s')), Action::Redraw);
        }
        assert_eq!(app.sort(), sort);
        assert_eq!(task_order(&app), order, "sorted by {sort:?}");
        let lines = render(&app, 120, 40);
        let head = line_with(&lines, "COMM");
        assert!(head.contains(header), "{sort:?}: {head}");
        // Only one column is marked.
        assert_eq!(head.matches(['▼', '▲']).count(), 1, "{head}");
    }
}

#[test]
fn refresh_halves_and_doubles_within_bounds() {
    let mut app = App::new(Mode::Scheduler, Duration::from_secs(1));
    assert_eq!(app.handle_key(ch('+')), Action::Redraw);
    assert_eq!(app.refresh(), Duration::from_millis(500));
    app.handle_key(ch('+'));
    assert_eq!(app.refresh(), Duration::from_millis(250));
    app.handle_key(ch('+'));
    assert_eq!(app.refresh(), REFRESH_MIN);
    assert_eq!(REFRESH_MIN, Duration::from_millis(250));
    for _ in 0..10 {
        app.handle_key(ch('-'));
    }
    assert_eq!(app.refresh(), REFRESH_MAX);
    assert_eq!(REFRESH_MAX, Duration::from_secs(10));
    app.handle_key(ch('-'));
    assert_eq!(app.refresh(), Duration::from_secs(10));
    assert!(screen(&render(&app, 120, 40)).contains("refresh 10.00s"));
    // '=' is '+' without shift.
    app.handle_key(ch('='));
    assert_eq!(app.refresh(), Duration::from_secs(5));
}

#[test]
fn p_toggles_pause() {
    let mut app = App::new(Mode::Scheduler, Duration::from_secs(1));
    assert!(!app.is_paused());
    app.handle_key(ch('p'));
    assert!(app.is_paused());
    app.handle_key(ch('p'));
    assert!(!app.is_paused());
}

#[test]
fn q_and_ctrl_c_quit() {
    let mut app = App::new(Mode::Scheduler, Duration::from_secs(1));
    assert_eq!(app.handle_key(ch('q')), Action::Quit);
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(app.handle_key(ctrl_c), Action::Quit);
    // A plain 'c' is no command.
    assert_eq!(app.handle_key(ch('c')), Action::None);
    assert_eq!(app.handle_key(ch('x')), Action::None);
}

#[test]
fn question_mark_toggles_help_and_esc_closes_it() {
    let mut app = App::new(Mode::Scheduler, Duration::from_secs(1));
    app.handle_key(ch('?'));
    assert!(app.help_visible());
    app.handle_key(ch('?'));
    assert!(!app.help_visible());
    app.handle_key(ch('?'));
    assert_eq!(app.handle_key(key(KeyCode::Esc)), Action::Redraw);
    assert!(!app.help_visible());
    assert_eq!(app.handle_key(key(KeyCode::Esc)), Action::None);
}

#[test]
fn key_releases_are_ignored() {
    let mut app = App::new(Mode::Scheduler, Duration::from_secs(1));
    let mut release = ch('p');
    release.kind = KeyEventKind::Release;
    assert_eq!(app.handle_key(release), Action::None);
    assert!(!app.is_paused());
}

#[test]
fn history_keeps_the_newest_120_points() {
    let mut app = App::new(Mode::Scheduler, Duration::from_secs(1));
    for i in 0..200u32 {
        let mut s = two_nodes();
        s.nodes[0].threshold = i;
        s.io.devices[0].iops = Some(f64::from(i));
        app.push(s);
    }
    let h = app.history();
    assert_eq!(HISTORY_LEN, 120);
    let n0 = &h.nodes[&0];
    assert_eq!(n0.threshold.len(), 120);
    assert_eq!(n0.iops.len(), 120);
    let thresholds: Vec<Option<f64>> = n0.threshold.points().collect();
    assert_eq!(thresholds.first(), Some(&Some(80.0)));
    assert_eq!(thresholds.last(), Some(&Some(199.0)));
    assert_eq!(h.devices["nvme0n1"].len(), 120);
    assert_eq!(h.devices["nvme0n1"].last(), Some(199.0));
    assert_eq!(h.nodes[&1].threshold.last(), Some(3.0));
    // Node IOPS is io.nodes reqs over the elapsed time.
    assert_eq!(n0.iops.last(), Some(40_000.0));
}

#[test]
fn history_stays_on_one_time_axis() {
    let mut app = App::new(Mode::Scheduler, Duration::from_secs(1));
    app.push(many_nodes(1));
    app.push(many_nodes(1));
    // Node 1 appears in the third interval, nvme1n1 too.
    app.push(two_nodes());
    let h = app.history();
    let n1: Vec<Option<f64>> = h.nodes[&1].threshold.points().collect();
    assert_eq!(n1, [None, None, Some(3.0)]);
    let d1: Vec<Option<f64>> = h.devices["nvme1n1"].points().collect();
    assert_eq!(d1, [None, None, Some(8000.0)]);
    // and vanishes in the fourth.
    app.push(many_nodes(1));
    let n1: Vec<Option<f64>> = app.history().nodes[&1].threshold.points().collect();
    assert_eq!(n1, [None, None, Some(3.0), None]);
    assert_eq!(app.history().nodes[&0].threshold.len(), 4);
}

#[test]
fn no_elapsed_time_gives_no_rate() {
    let mut app = App::new(Mode::Scheduler, Duration::from_secs(1));
    let mut s = two_nodes();
    s.io.elapsed_s = 0.0;
    app.push(s);
    assert_eq!(app.history().nodes[&0].iops.last(), None);
    assert_eq!(app.history().nodes[&0].threshold.last(), Some(2.0));
}
