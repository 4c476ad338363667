//! Each view, drawn on a test terminal, shows the fixture's real values.

mod common;

use std::time::Duration;

use common::*;
use esn_tui::{App, Mode, View};

fn view(app: &mut App, v: View) -> Vec<String> {
    app.set_view(v);
    render(app, 120, 40)
}

#[test]
fn nodes_view_shows_each_nodes_load_and_decision() {
    let mut app = app_with(two_nodes());
    let lines = view(&mut app, View::Nodes);
    let all = screen(&lines);
    assert!(all.contains("scx_esn top"), "{all}");
    assert!(all.contains("connected"), "{all}");
    assert!(all.contains("refresh 1.00s"), "{all}");

    // Node 0: 16 CPUs, 48 % busy, 2 placed of threshold 2, P_numa 1.42,
    // P_cont 1.17, 10 % of its 40 000 submitted requests remote.
    let n0 = line_with(&lines, "[#####     ] 48%");
    assert!(n0.trim_start().starts_with("0 "), "{n0}");
    for want in ["16", "2/2", "0/11", "12.5µs", "1.42", "1.17", "90/10"] {
        assert!(n0.contains(want), "node 0 row lacks {want}: {n0}");
    }
    // Node 1 has no P_cont in its decision: "-", not 0.
    let n1 = line_with(&lines, "1/3");
    assert!(n1.trim_start().starts_with("1 "), "{n1}");
    for want in ["[#         ] 12%", "7/11", "1.38", " - ", "62/38"] {
        assert!(n1.contains(want), "node 1 row lacks {want}: {n1}");
    }

    // The energy, labelled with its source, in the table's title.
    let title = line_with(&lines, "nodes (2)");
    assert!(
        title.contains("energy (estimated) 91.5 W, 1.72 mJ/IO, trade-off 2.400; n0 71.0, n1 20.5"),
        "{title}"
    );

    let health = line_with(&lines, "dispatched");
    for want in [
        "123k",
        "fallbacks 3",
        "longest wait 2.1ms",
        "watchdog margin 100.0%",
    ] {
        assert!(health.contains(want), "health lacks {want}: {health}");
    }

    // One threshold and one IOPS sparkline per node, labelled with the
    // newest value.
    assert!(line_with(&lines, "n0 threshold 2").contains('█'));
    assert!(line_with(&lines, "n1 threshold 3").contains('█'));
    assert!(line_with(&lines, "n0 IOPS 40.0k").contains('█'));
    assert!(line_with(&lines, "n1 IOPS 13.2k").contains('█'));
}

#[test]
fn devices_view_shows_rates_and_local_vs_remote_latency() {
    let mut app = app_with(two_nodes());
    let lines = view(&mut app, View::Devices);
    let row = line_with(&lines, "nvme0n1 ");
    // 45 210 IOPS, 185.2 MB/s, 10 % remote, read latency local 78/412 µs and
    // remote 96/655 µs (the queue-kind entry must not be taken).
    for want in [
        "45.2k", "185.2", "10%", "read", "78.0µs", "412.0µs", "96.0µs", "655.0µs",
    ] {
        assert!(row.contains(want), "nvme0n1 row lacks {want}: {row}");
    }
    assert!(
        !row.contains("3.0µs"),
        "queue latency shown as device: {row}"
    );
    let row1 = line_with(&lines, "nvme1n1 ");
    assert!(row1.contains("8000") && row1.contains("32.8"), "{row1}");
    assert!(line_with(&lines, "nvme0n1 IOPS 45.2k").contains('█'));
}

#[test]
fn devices_view_falls_back_to_the_first_op_without_reads() {
    use esn_stats::{LatKind, Locality, Op};
    let mut stats = two_nodes();
    stats.io.devices[0].latency = vec![
        lat(Locality::Local, Op::Write, LatKind::Device, 20.0, 50.0),
        lat(Locality::Remote, Op::Write, LatKind::Device, 30.0, 70.0),
    ];
    let mut app = app_with(stats);
    let lines = view(&mut app, View::Devices);
    let row = line_with(&lines, "nvme0n1 ");
    for want in ["write", "20.0µs", "50.0µs", "30.0µs", "70.0µs"] {
        assert!(row.contains(want), "nvme0n1 row lacks {want}: {row}");
    }
}

#[test]
fn tasks_view_shows_home_and_current_node() {
    let mut app = app_with(two_nodes());
    let lines = view(&mut app, View::Tasks);
    assert!(line_with(&lines, "PID/TID").contains("IOPS▼"));
    assert!(line_with(&lines, "sort: iops ▼").contains("Tasks"));

    let fio = line_with(&lines, " fio ");
    for want in ["4242/4243", "30.0k", "122.9", "nvme0n1"] {
        assert!(fio.contains(want), "fio row lacks {want}: {fio}");
    }
    // postgres: its device is on node 1 (home), it last ran on node 0, and
    // 4000 of its 5000 requests were remote.
    let pg = line_with(&lines, "postgres");
    assert!(pg.contains("1201/1250"), "{pg}");
    assert!(pg.contains("   1    0 "), "home 1, current 0: {pg}");
    assert!(pg.contains("80%"), "{pg}");
    // kworker has no device, so no home node.
    let kw = line_with(&lines, "kworker/u64:2");
    assert!(kw.contains("   -    1 "), "{kw}");
}

#[test]
fn no_devices_and_no_tasks_say_so() {
    let mut stats = two_nodes();
    stats.io.devices.clear();
    stats.io.tasks.clear();
    let mut app = app_with(stats);
    let lines = view(&mut app, View::Devices);
    assert!(
        screen(&lines).contains("devices: none with I/O"),
        "{}",
        screen(&lines)
    );
    let lines = view(&mut app, View::Tasks);
    assert!(screen(&lines).contains("tasks: none submitted I/O"));
    // The tasks' home node needs a device; without any it is unknown.
    let mut stats = two_nodes();
    stats.io.devices.clear();
    let mut app = app_with(stats);
    let lines = view(&mut app, View::Tasks);
    assert!(line_with(&lines, " fio ").contains("   -    0 "));
}

#[test]
fn one_node() {
    let mut app = app_with(many_nodes(1));
    let lines = view(&mut app, View::Nodes);
    assert!(screen(&lines).contains("nodes (1)"));
    assert!(line_with(&lines, "0/2").trim_start().starts_with("0 "));
    assert!(!screen(&lines).contains("n1 "));
}

#[test]
fn eight_nodes_all_rows_visible() {
    let mut app = app_with(many_nodes(8));
    let lines = view(&mut app, View::Nodes);
    for i in 0..8u32 {
        // Node i: placed i, threshold i + 2.
        let row = line_with(&lines, &format!(" {i}/{} ", i + 2));
        assert!(row.trim_start().starts_with(&format!("{i} ")), "{row}");
    }
    // On 40 lines all 16 sparklines fit under the table.
    let all = screen(&lines);
    assert!(all.contains("n0 threshold 2"), "{all}");
    assert!(all.contains("n7 IOPS 8000"), "{all}");
    assert!(!all.contains("do not fit"), "{all}");

    // On 25 the table keeps all its rows, the sparklines that fit are drawn
    // and the others counted.
    let lines = render(&app, 120, 25);
    for i in 0..8u32 {
        line_with(&lines, &format!(" {i}/{} ", i + 2));
    }
    let all = screen(&lines);
    assert!(all.contains("n0 threshold 2"), "{all}");
    assert!(all.contains("(6 more lines do not fit)"), "{all}");
    assert!(
        all.contains("n4 IOPS 5000") && !all.contains("n5 threshold") && !all.contains("n5 IOPS"),
        "{all}"
    );
}

#[test]
fn long_comm_is_truncated_within_its_column() {
    let mut stats = two_nodes();
    let long = "x".repeat(200);
    stats.io.tasks[0].comm = long;
    let mut app = app_with(stats);
    let lines = view(&mut app, View::Tasks);
    let row = line_with(&lines, "4242/4243");
    assert!(row.contains("xxxxxxxxxxxxxxx…"), "{row}");
    assert!(!row.contains(&"x".repeat(16)), "{row}");
    // The columns after it are still there.
    assert!(row.contains("30.0k") && row.contains("nvme0n1"), "{row}");
}

#[test]
fn missing_values_show_a_dash() {
    let mut stats = two_nodes();
    stats.nodes[0].busy_pct = Some(f64::NAN);
    stats.nodes[0].waits = Default::default();
    stats.control.clear();
    stats.io.nodes.clear();
    stats.io.devices[0].iops = None;
    stats.io.devices[0].mb_s = Some(f64::INFINITY);
    stats.io.devices[0].remote_share = None;
    stats.io.devices[0].latency.clear();
    stats.health = Default::default();
    let mut app = app_with(stats);
    let lines = view(&mut app, View::Nodes);
    let n0 = line_with(&lines, "2/2");
    assert!(!n0.contains('#') && !n0.contains("NaN"), "{n0}");
    let cells: Vec<&str> = n0.split_whitespace().collect();
    // node, cpus, busy, placed, spills, stolen, then wait, P_numa, P_cont,
    // local/remote all unknown.
    assert_eq!(
        &cells[..],
        ["0", "16", "-", "2/2", "0/11", "5", "-", "-", "-", "-"]
    );
    assert!(line_with(&lines, "dispatched").contains("watchdog margin -"));
    let lines = view(&mut app, View::Devices);
    let row = line_with(&lines, "nvme0n1 ");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &cells[..],
        ["nvme0n1", "0", "-", "-", "-", "-", "-", "-", "-", "-"]
    );
}

#[test]
fn observe_mode_shows_block_io_and_says_there_is_no_scheduler() {
    let mut app = App::new(Mode::Observe, Duration::from_secs(1));
    app.push(observe_only());
    let lines = view(&mut app, View::Nodes);
    let all = screen(&lines);
    assert!(
        all.contains("observe mode: no scx_esn running, block I/O only"),
        "{all}"
    );
    assert!(all.contains("no scheduler"), "{all}");
    // io.nodes rows: submitted IOPS, remote share and completions.
    let n1 = line_with(&lines, "13.2k");
    assert!(n1.trim_start().starts_with("1 "), "{n1}");
    assert!(n1.contains("38%"), "{n1}");
    assert!(!all.contains("threshold"), "{all}");
    assert!(!all.contains("dispatched"), "{all}");
    // The other views work from io alone.
    assert!(screen(&view(&mut app, View::Devices)).contains("nvme0n1"));
    assert!(screen(&view(&mut app, View::Tasks)).contains("fio"));

    // The energy meter runs without a scheduler too.
    let mut with_energy = observe_only();
    with_energy.energy = two_nodes().energy;
    app.push(with_energy);
    let lines = view(&mut app, View::Nodes);
    let title = line_with(&lines, "nodes (no scheduler)");
    assert!(
        title.contains("energy (estimated) 91.5 W, 1.72 mJ/IO, trade-off 2.400; n0 71.0, n1 20.5"),
        "{title}"
    );
}

#[test]
fn disconnected_keeps_the_last_data() {
    let mut app = app_with(two_nodes());
    app.set_disconnected("connection refused");
    let lines = view(&mut app, View::Nodes);
    let all = screen(&lines);
    assert!(
        all.contains("disconnected: connection refused — retrying"),
        "{all}"
    );
    assert!(all.contains("[#####     ] 48%"), "last data gone: {all}");

    // A long reason is cut, "retrying" is not.
    app.set_disconnected(format!("cannot connect: {}", "e".repeat(300)));
    let lines = render(&app, 80, 24);
    assert!(line_with(&lines, "disconnected: cannot connect").contains("— retrying"));

    app.push(two_nodes());
    assert!(!screen(&render(&app, 120, 40)).contains("disconnected"));
}

#[test]
fn paused_is_shown() {
    let mut app = app_with(two_nodes());
    assert!(!screen(&render(&app, 120, 40)).contains("PAUSED"));
    app.handle_key(ch('p'));
    assert!(line_with(&render(&app, 120, 40), "scx_esn top").contains("PAUSED"));
}

#[test]
fn help_overlay_lists_the_keys() {
    let mut app = app_with(two_nodes());
    app.handle_key(ch('?'));
    let all = screen(&render(&app, 120, 40));
    for want in [
        "keys",
        "next view",
        "cycle the task sort column",
        "pause / resume",
        "refresh faster / slower",
        "quit",
    ] {
        assert!(all.contains(want), "help lacks {want}: {all}");
    }
    app.handle_key(ch('?'));
    assert!(!screen(&render(&app, 120, 40)).contains("cycle the task sort column"));
}

#[test]
fn before_the_first_interval() {
    let app = App::new(Mode::Scheduler, Duration::from_secs(1));
    assert!(screen(&render(&app, 120, 40)).contains("waiting for the first interval"));
}
