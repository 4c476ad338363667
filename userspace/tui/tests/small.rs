//! Terminals of every small size: nothing panics, and the user is told the
//! size needed when it does not fit.

mod common;

use std::time::Duration;

use common::*;
use esn_tui::{App, Mode, View};

fn apps() -> Vec<App> {
    let mut out = Vec::new();
    for v in View::ALL {
        let mut a = app_with(two_nodes());
        a.set_view(v);
        out.push(a);
        let mut a = app_with(many_nodes(8));
        a.set_view(v);
        a.set_disconnected("gone");
        a.handle_key(ch('?'));
        out.push(a);
        let mut a = App::new(Mode::Observe, Duration::from_secs(1));
        a.push(observe_only());
        a.set_view(v);
        out.push(a);
    }
    out.push(App::new(Mode::Scheduler, Duration::from_secs(1)));
    out
}

#[test]
fn every_size_up_to_130x45_draws_without_panic() {
    for app in apps() {
        for w in (0..=130).step_by(7).chain([1, 2, 79, 80, 81]) {
            for h in (0..=45).step_by(3).chain([1, 2, 6, 7, 8]) {
                render(&app, w, h);
            }
        }
    }
}

#[test]
fn tiny_terminals() {
    let app = app_with(two_nodes());
    // Zero-sized: drawn without a panic, nothing to see.
    assert!(render(&app, 0, 0).is_empty());
    assert!(render(&app, 10, 0).is_empty());
    assert_eq!(render(&app, 1, 1), vec!["t".to_string()]);
    // 10x3: the message starts, wrapped.
    let lines = render(&app, 10, 3);
    assert_eq!(lines[0].trim_end(), "terminal");
    let lines = render(&app, 20, 5);
    let all = screen(&lines);
    assert!(all.contains("terminal too small"), "{all}");
    assert!(all.contains("(need 80x7)"), "{all}");
}

#[test]
fn too_small_names_the_size_the_view_needs() {
    let mut app = app_with(two_nodes());
    let lines = render(&app, 79, 24);
    assert_eq!(lines[0].trim_end(), "terminal too small (need 80x7)");
    // Exactly the size needed draws the view.
    let lines = render(&app, 80, 7);
    assert!(
        screen(&lines).contains("[#####     ] 48%"),
        "{}",
        screen(&lines)
    );
    let lines = render(&app, 80, 6);
    assert!(lines[0].starts_with("terminal too small"));

    // Banners take lines too.
    app.set_disconnected("gone");
    assert!(render(&app, 80, 7)[0].starts_with("terminal too small (need 80x8)"));
}
