//! Draws an [`App`] into a frame; reads the app, never changes it.
//!
//! # The model
//!
//! ```text
//!  ┌ header: scx_esn top · mode · link · refresh · PAUSED ┐
//!  │ tabs: Nodes | Devices | Tasks        sort: iops ▼    │
//!  │ banners: disconnected / observe mode / waiting        │
//!  ├ body: the view's table, then its sparklines           ┤
//!  └ footer: key hints                                     ┘
//!    help: a popup over everything
//! ```
//!
//! Each view has a fixed table width and a smallest body, so the size it needs
//! is known before drawing: a terminal below it gets one "terminal too small"
//! message instead of tables whose numbers are cut to something that looks
//! like a different value. All layout arithmetic saturates, and every value
//! that may be missing or not finite is shown as "-".

use std::time::Instant;

use esn_controller::Decision;
use esn_reading::{IntervalStats, NodeLoad};
use esn_stats::{DeviceReport, EnergyStats, LatKind, Locality, NodeReport, Op};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Sparkline, Table, Wrap};
use ratatui::Frame;

use crate::app::{self, App, Link, Mode, Series, View};
use crate::fmt;

/// Lines above the body: title line and tabs.
const HEADER_LINES: u16 = 2;
const FOOTER_LINES: u16 = 1;
/// Table title, column header and one row.
const TABLE_MIN_LINES: u16 = 3;
/// Width of the label left of each sparkline.
const SPARK_LABEL: u16 = 24;
const COMM_MAX: usize = 16;
const NAME_MAX: usize = 12;

/// One table column: fixed width, so a view's width is known in advance.
struct Col {
    title: &'static str,
    width: u16,
    right: bool,
}

const fn col(title: &'static str, width: u16, right: bool) -> Col {
    Col {
        title,
        width,
        right,
    }
}

const NODE_COLS: [Col; 10] = [
    col("NODE", 4, true),
    col("CPU", 3, true),
    col("BUSY", 17, false),
    col("PL/TH", 6, true),
    col("SPILL I/O", 9, true),
    col("STOLEN", 6, true),
    col("IO WAIT", 7, true),
    col("P_NUMA", 6, true),
    col("P_CONT", 6, true),
    col("LOC/REM", 7, true),
];

const OBSERVE_NODE_COLS: [Col; 7] = [
    col("NODE", 4, true),
    col("IOPS", 6, true),
    col("MB/S", 7, true),
    col("REMOTE", 6, true),
    col("COMPLETIONS", 11, true),
    col("CROSS", 6, true),
    col("CROSS %", 7, true),
];

const DEVICE_COLS: [Col; 10] = [
    col("DEVICE", NAME_MAX as u16, false),
    col("NODE", 4, true),
    col("IOPS", 6, true),
    col("MB/S", 7, true),
    col("REMOTE", 6, true),
    col("OP", 5, false),
    col("L p50", 7, true),
    col("L p99", 7, true),
    col("R p50", 7, true),
    col("R p99", 7, true),
];

const TASK_COLS: [Col; 8] = [
    col("PID/TID", 15, true),
    col("COMM", COMM_MAX as u16, false),
    col("HOME", 4, true),
    col("NODE", 4, true),
    col("IOPS", 6, true),
    col("MB/S", 7, true),
    // One wider than its title: the sort arrow goes there too.
    col("REMOTE", 7, true),
    col("DEVICE", NAME_MAX as u16, false),
];

/// Column index of each task sort key in [`TASK_COLS`].
fn sort_col(sort: app::TaskSort) -> usize {
    match sort {
        app::TaskSort::Pid => 0,
        app::TaskSort::Comm => 1,
        app::TaskSort::Iops => 4,
        app::TaskSort::MbS => 5,
        app::TaskSort::Remote => 6,
    }
}

fn table_width(cols: &[Col]) -> u16 {
    let widths: u16 = cols.iter().map(|c| c.width).sum();
    widths.saturating_add(u16::try_from(cols.len().saturating_sub(1)).unwrap_or(u16::MAX))
}

/// The smallest terminal the app's current view can be drawn in.
pub fn min_size(app: &App) -> (u16, u16) {
    let header_width: u16 = 60;
    let (table_w, body_h) = match app.view() {
        // The table, plus the health line in scheduler mode.
        View::Nodes => match app.mode() {
            Mode::Scheduler => (table_width(&NODE_COLS), TABLE_MIN_LINES + 1),
            Mode::Observe => (table_width(&OBSERVE_NODE_COLS), TABLE_MIN_LINES),
        },
        View::Devices => (table_width(&DEVICE_COLS), TABLE_MIN_LINES),
        View::Tasks => (table_width(&TASK_COLS), TABLE_MIN_LINES),
    };
    let banners = u16::try_from(banners(app, u16::MAX).len()).unwrap_or(u16::MAX);
    (
        table_w.max(header_width),
        HEADER_LINES
            .saturating_add(banners)
            .saturating_add(FOOTER_LINES)
            .saturating_add(body_h),
    )
}

pub fn draw(frame: &mut Frame, app: &App) {
    let area = frame.area();
    if area.width == 0 || area.height == 0 {
        return;
    }
    let (need_w, need_h) = min_size(app);
    if area.width < need_w || area.height < need_h {
        let msg = format!("terminal too small (need {need_w}x{need_h})");
        frame.render_widget(Paragraph::new(msg).wrap(Wrap { trim: true }), area);
        return;
    }

    let banners = banners(app, area.width);
    let banner_h = u16::try_from(banners.len()).unwrap_or(u16::MAX);
    let mut rest = area;
    let header = take_top(&mut rest, HEADER_LINES);
    let banner_area = take_top(&mut rest, banner_h);
    let footer = take_bottom(&mut rest, FOOTER_LINES);
    let body = rest;

    draw_header(frame, app, header);
    frame.render_widget(Paragraph::new(banners), banner_area);
    match app.latest() {
        None => frame.render_widget(
            Paragraph::new("waiting for the first interval…")
                .style(Style::new().fg(Color::DarkGray)),
            body,
        ),
        Some(stats) => match app.view() {
            View::Nodes => draw_nodes(frame, app, stats, body),
            View::Devices => draw_devices(frame, app, stats, body),
            View::Tasks => draw_tasks(frame, app, stats, body),
        },
    }
    frame.render_widget(
        Paragraph::new(Line::from(
            "q quit  Tab/S-Tab view  s sort  p pause  +/- refresh  ? help",
        ))
        .style(Style::new().fg(Color::DarkGray)),
        footer,
    );

    if app.help_visible() {
        draw_help(frame, area);
    }
}

/// The top `h` lines of `area`, removed from it.
fn take_top(area: &mut Rect, h: u16) -> Rect {
    let h = h.min(area.height);
    let top = Rect { height: h, ..*area };
    area.y = area.y.saturating_add(h);
    area.height = area.height.saturating_sub(h);
    top
}

/// The bottom `h` lines of `area`, removed from it.
fn take_bottom(area: &mut Rect, h: u16) -> Rect {
    let h = h.min(area.height);
    area.height = area.height.saturating_sub(h);
    Rect {
        y: area.y.saturating_add(area.height),
        height: h,
        ..*area
    }
}

/// Lines that must not be missed, each one line of at most `width` under the
/// tabs.
fn banners(app: &App, width: u16) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if let Link::Disconnected { why, since } = app.link() {
        let secs = Instant::now().saturating_duration_since(*since).as_secs();
        let head = "disconnected: ";
        let tail = format!(" — retrying (down {secs}s)");
        // The reason is what gets cut on a narrow terminal: "retrying" says
        // the view will come back by itself, which matters more than the
        // end of an error message. It may hold newlines; clip makes them '?'.
        let room = usize::from(width)
            .saturating_sub(head.chars().count())
            .saturating_sub(tail.chars().count());
        let why = fmt::clip(why, room);
        out.push(Line::from(Span::styled(
            format!("{head}{why}{tail}"),
            Style::new()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD),
        )));
    }
    if app.mode() == Mode::Observe {
        out.push(Line::from(Span::styled(
            "observe mode: no scx_esn running, block I/O only",
            Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
        )));
    }
    out
}

fn draw_header(frame: &mut Frame, app: &App, area: Rect) {
    let sep = || Span::raw("  ");
    let mut title = vec![
        Span::styled("scx_esn top", Style::new().add_modifier(Modifier::BOLD)),
        sep(),
        Span::raw(match app.mode() {
            Mode::Scheduler => "scheduler",
            Mode::Observe => "observe",
        }),
        sep(),
        match app.link() {
            Link::Connected => Span::styled("connected", Style::new().fg(Color::Green)),
            Link::Disconnected { .. } => Span::styled(
                "disconnected",
                Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
            ),
        },
        sep(),
        Span::raw(format!("refresh {:.2}s", app.refresh().as_secs_f64())),
    ];
    if app.is_paused() {
        title.push(sep());
        title.push(Span::styled(
            "PAUSED",
            Style::new()
                .fg(Color::Black)
                .bg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
        ));
    }

    let mut tabs = Vec::new();
    for (i, v) in View::ALL.into_iter().enumerate() {
        if i > 0 {
            tabs.push(Span::raw(" │ "));
        }
        let style = if v == app.view() {
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        } else {
            Style::new()
        };
        tabs.push(Span::styled(format!(" {} ", v.title()), style));
    }
    if app.view() == View::Tasks {
        tabs.push(sep());
        tabs.push(Span::raw(format!(
            "sort: {} {}",
            app.sort().label(),
            arrow(app.sort().descending())
        )));
    }
    frame.render_widget(
        Paragraph::new(vec![Line::from(title), Line::from(tabs)]),
        area,
    );
}

fn arrow(descending: bool) -> &'static str {
    if descending {
        "▼"
    } else {
        "▲"
    }
}

/// A table of fixed-width columns; `mark` appends a sort arrow to one header.
fn table(
    title: String,
    cols: &[Col],
    rows: Vec<Vec<String>>,
    mark: Option<(usize, &str)>,
) -> Table<'static> {
    let header = Row::new(cols.iter().enumerate().map(|(i, c)| {
        let mut t = c.title.to_string();
        if let Some((at, m)) = mark {
            if at == i {
                t.push_str(m);
            }
        }
        aligned(t, c.right)
    }))
    .style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED));
    let rows = rows.into_iter().map(|r| {
        Row::new(
            r.into_iter()
                .zip(cols)
                .map(|(text, c)| aligned(text, c.right)),
        )
    });
    Table::new(rows, cols.iter().map(|c| c.width))
        .header(header)
        .column_spacing(1)
        .block(Block::new().borders(Borders::TOP).title(Span::styled(
            title,
            Style::new().add_modifier(Modifier::BOLD),
        )))
}

fn aligned(text: String, right: bool) -> Cell<'static> {
    let line = Line::from(text);
    Cell::from(if right { line.right_aligned() } else { line })
}

/// Lines a table of `rows` rows takes, within `avail`.
fn table_height(rows: usize, avail: u16) -> u16 {
    let want = u16::try_from(rows)
        .unwrap_or(u16::MAX)
        .saturating_add(TABLE_MIN_LINES - 1);
    want.max(TABLE_MIN_LINES).min(avail)
}

fn node_report(stats: &IntervalStats, node: u32) -> Option<&NodeReport> {
    stats.io.nodes.iter().find(|n| n.node == node)
}

fn decision(stats: &IntervalStats, node: u32) -> Option<&Decision> {
    stats.control.iter().find(|d| d.node == node)
}

fn draw_nodes(frame: &mut Frame, app: &App, stats: &IntervalStats, body: Rect) {
    let mut rest = body;
    match app.mode() {
        Mode::Scheduler => {
            let rows: Vec<Vec<String>> = stats.nodes.iter().map(|n| node_row(stats, n)).collect();
            let h = table_height(rows.len(), rest.height.saturating_sub(1));
            let area = take_top(&mut rest, h);
            let mut title = format!(" nodes ({}) ", stats.nodes.len());
            if let Some(e) = &stats.energy {
                title += &format!("· {}", energy_title(e));
            }
            frame.render_widget(table(title, &NODE_COLS, rows, None), area);
            let health = take_top(&mut rest, 1);
            frame.render_widget(Paragraph::new(health_line(stats)), health);
        }
        Mode::Observe => {
            let rows: Vec<Vec<String>> = stats
                .io
                .nodes
                .iter()
                .map(|n| observe_node_row(stats, n))
                .collect();
            let h = table_height(rows.len(), rest.height);
            let area = take_top(&mut rest, h);
            // The energy takes the room of the explanation (the columns say
            // it too).
            let title = match &stats.energy {
                Some(e) => format!(" nodes (no scheduler) · {}", energy_title(e)),
                None => " nodes: block I/O seen from each node's CPUs (no scheduler) ".to_string(),
            };
            frame.render_widget(table(title, &OBSERVE_NODE_COLS, rows, None), area);
        }
    }

    let mut lines: Vec<(String, &Series)> = Vec::new();
    for (node, h) in &app.history().nodes {
        if app.mode() == Mode::Scheduler {
            lines.push((
                format!("n{node} threshold {}", fmt::rate(h.threshold.last())),
                &h.threshold,
            ));
        }
        lines.push((
            format!("n{node} IOPS {}", fmt::rate(h.iops.last())),
            &h.iops,
        ));
    }
    draw_sparklines(frame, rest, &lines);
}

fn node_row(stats: &IntervalStats, n: &NodeLoad) -> Vec<String> {
    let d = decision(stats, n.node);
    let io = node_report(stats, n.node);
    // The share of the node's submitted requests that went to a device of
    // another node: what spilling costs this node's tasks.
    let loc_rem = match io.and_then(|r| r.remote_share).filter(|s| s.is_finite()) {
        Some(remote) => {
            let remote = (remote * 100.0).clamp(0.0, 100.0).round();
            format!("{:.0}/{:.0}", 100.0 - remote, remote)
        }
        None => fmt::NONE.to_string(),
    };
    vec![
        n.node.to_string(),
        n.cpus.to_string(),
        fmt::gauge(n.busy_pct),
        format!("{}/{}", n.placed, n.threshold),
        format!("{}/{}", fmt::count(n.spill_in), fmt::count(n.spill_out)),
        fmt::count(n.stolen_from),
        fmt::nanos(n.waits.io_mean_ns()),
        fmt::ratio(d.map(|d| d.p_numa)),
        fmt::ratio(d.and_then(|d| d.p_cont)),
        loc_rem,
    ]
}

fn observe_node_row(stats: &IntervalStats, n: &NodeReport) -> Vec<String> {
    let elapsed = stats.io.elapsed_s;
    let cross = (n.completions > 0).then(|| n.cross_completions as f64 / n.completions as f64);
    vec![
        n.node.to_string(),
        fmt::rate(app::rate(n.reqs, elapsed)),
        fmt::amount(app::rate(n.bytes, elapsed).map(|b| b / 1e6)),
        fmt::share(n.remote_share),
        fmt::count(n.completions),
        fmt::count(n.cross_completions),
        fmt::share(cross),
    ]
}

/// The nodes table's title (a column would widen the table past 80): the
/// energy's source comes first, so an estimate is never read as a
/// measurement; then the total, per I/O, the trade-off, and each node's
/// watts (cut first where the terminal is narrow).
fn energy_title(e: &EnergyStats) -> String {
    let nodes: Vec<String> = e
        .nodes
        .iter()
        .map(|n| format!("n{} {:.1}", n.node, n.watts))
        .collect();
    format!(
        "energy ({}) {:.1} W, {}/IO, trade-off {}; {} ",
        e.source.as_str(),
        e.watts,
        e.per_io_text(),
        e.tradeoff_text(),
        nodes.join(", ")
    )
}

fn health_line(stats: &IntervalStats) -> Line<'static> {
    let h = &stats.health;
    let margin = h.watchdog_margin_pct();
    // Below half of the watchdog's timeout left, a stall is getting close to
    // unloading the scheduler.
    let margin_style = match margin {
        Some(m) if m < 50.0 => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        _ => Style::new(),
    };
    let fallback_style = if h.fallbacks > 0 {
        Style::new().fg(Color::Yellow)
    } else {
        Style::new()
    };
    Line::from(vec![
        Span::raw(format!("dispatched {}  ", fmt::count(h.dispatched))),
        Span::styled(
            format!("fallbacks {}", fmt::count(h.fallbacks)),
            fallback_style,
        ),
        Span::raw(format!(
            "  longest wait {}  ",
            fmt::nanos(h.max_wait_ns.map(|ns| ns as f64))
        )),
        Span::styled(
            format!("watchdog margin {}", fmt::pct(margin)),
            margin_style,
        ),
    ])
}

/// One labelled sparkline per line, as many as fit, newest point at the
/// right end of the history.
fn draw_sparklines(frame: &mut Frame, area: Rect, lines: &[(String, &Series)]) {
    if lines.is_empty() || area.height < 2 {
        return;
    }
    let mut rest = area;
    let title = take_top(&mut rest, 1);
    let shown = usize::from(rest.height).min(lines.len());
    let more = lines.len().saturating_sub(shown);
    let mut heading = format!(" history, {} intervals ", app::HISTORY_LEN);
    if more > 0 {
        heading.push_str(&format!("({more} more lines do not fit) "));
    }
    frame.render_widget(
        Block::new().borders(Borders::TOP).title(Span::styled(
            heading,
            Style::new().add_modifier(Modifier::BOLD),
        )),
        title,
    );
    for (label, series) in lines.iter().take(shown) {
        let mut row = take_top(&mut rest, 1);
        let label_w = SPARK_LABEL.min(row.width);
        let label_area = Rect {
            width: label_w,
            ..row
        };
        row.x = row.x.saturating_add(label_w);
        row.width = row.width.saturating_sub(label_w);
        frame.render_widget(
            Paragraph::new(fmt::clip(label, usize::from(label_w))),
            label_area,
        );

        // Only the newest points that fit: Sparkline draws from the oldest.
        let width = usize::from(row.width);
        let points: Vec<Option<u64>> = series
            .points()
            .skip(series.len().saturating_sub(width))
            .map(|p| p.map(|v| v.max(0.0).round() as u64))
            .collect();
        frame.render_widget(
            Sparkline::default()
                .data(points)
                .style(Style::new().fg(Color::Cyan)),
            row,
        );
    }
}

/// The op a device's latency columns use: reads when it has any, since they
/// are what waits on the device, else whatever it does have.
fn latency_op(d: &DeviceReport) -> Option<Op> {
    let device_kind = || d.latency.iter().filter(|l| l.kind == LatKind::Device);
    if device_kind().any(|l| l.op == Op::Read) {
        Some(Op::Read)
    } else {
        device_kind().next().map(|l| l.op)
    }
}

fn latency(
    d: &DeviceReport,
    op: Option<Op>,
    locality: Locality,
) -> Option<&esn_stats::LatencyReport> {
    let op = op?;
    d.latency
        .iter()
        .find(|l| l.kind == LatKind::Device && l.op == op && l.locality == locality)
}

fn draw_devices(frame: &mut Frame, app: &App, stats: &IntervalStats, body: Rect) {
    let mut rest = body;
    let rows: Vec<Vec<String>> = stats
        .io
        .devices
        .iter()
        .map(|d| {
            let op = latency_op(d);
            let local = latency(d, op, Locality::Local);
            let remote = latency(d, op, Locality::Remote);
            vec![
                fmt::clip(&d.name, NAME_MAX),
                fmt::opt_u32(d.node),
                fmt::rate(d.iops),
                fmt::amount(d.mb_s),
                fmt::share(d.remote_share),
                op.map_or(fmt::NONE, Op::as_str).to_string(),
                fmt::micros(local.and_then(|l| l.p50_us)),
                fmt::micros(local.and_then(|l| l.p99_us)),
                fmt::micros(remote.and_then(|l| l.p50_us)),
                fmt::micros(remote.and_then(|l| l.p99_us)),
            ]
        })
        .collect();
    let title = if rows.is_empty() {
        " devices: none with I/O in this interval ".to_string()
    } else {
        format!(
            " devices ({}): device latency, L local / R remote ",
            rows.len()
        )
    };
    let h = table_height(rows.len(), rest.height);
    let area = take_top(&mut rest, h);
    frame.render_widget(table(title, &DEVICE_COLS, rows, None), area);

    let lines: Vec<(String, &Series)> = app
        .history()
        .devices
        .iter()
        .map(|(name, s)| {
            (
                format!("{} IOPS {}", fmt::clip(name, NAME_MAX), fmt::rate(s.last())),
                s,
            )
        })
        .collect();
    draw_sparklines(frame, rest, &lines);
}

fn draw_tasks(frame: &mut Frame, app: &App, stats: &IntervalStats, body: Rect) {
    let rows: Vec<Vec<String>> = app
        .sorted_tasks()
        .into_iter()
        .map(|t| {
            vec![
                format!("{}/{}", t.tgid, t.tid),
                fmt::clip(&t.comm, COMM_MAX),
                fmt::opt_u32(app::home_node(&stats.io, t)),
                fmt::opt_u32(t.last_node),
                fmt::rate(t.iops),
                fmt::amount(t.mb_s),
                fmt::share(app::task_remote_share(t)),
                t.dominant_dev
                    .as_deref()
                    .map_or_else(|| fmt::NONE.to_string(), |d| fmt::clip(d, NAME_MAX)),
            ]
        })
        .collect();
    let title = if rows.is_empty() {
        " tasks: none submitted I/O in this interval ".to_string()
    } else {
        format!(" top I/O tasks ({}) ", rows.len())
    };
    let h = table_height(rows.len(), body.height);
    let area = Rect { height: h, ..body };
    let sort = app.sort();
    frame.render_widget(
        table(
            title,
            &TASK_COLS,
            rows,
            Some((sort_col(sort), arrow(sort.descending()))),
        ),
        area,
    );
}

const HELP: [(&str, &str); 8] = [
    ("Tab", "next view"),
    ("Shift-Tab", "previous view"),
    ("s", "cycle the task sort column"),
    ("p", "pause / resume fetching"),
    ("+ / -", "refresh faster / slower"),
    ("?", "show / hide this help"),
    ("Esc", "close this help"),
    ("q / Ctrl-C", "quit"),
];

fn draw_help(frame: &mut Frame, area: Rect) {
    let lines: Vec<Line> = HELP
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(
                    format!(" {k:<11}"),
                    Style::new().add_modifier(Modifier::BOLD),
                ),
                Span::raw(*what),
            ])
        })
        .collect();
    let want_w: u16 = 42;
    let want_h = u16::try_from(lines.len())
        .unwrap_or(u16::MAX)
        .saturating_add(2);
    let w = want_w.min(area.width);
    let h = want_h.min(area.height);
    let popup = Rect {
        x: area.x.saturating_add(area.width.saturating_sub(w) / 2),
        y: area.y.saturating_add(area.height.saturating_sub(h) / 2),
        width: w,
        height: h,
    };
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines).block(Block::new().borders(Borders::ALL).title(Span::styled(
            " keys ",
            Style::new().add_modifier(Modifier::BOLD),
        ))),
        popup,
    );
}
