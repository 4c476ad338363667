// SPDX-License-Identifier: GPL-2.0-only
//! The stats socket of a running scheduler (scx_stats, "top"): served from
//! the run loop's readings, read back by `--monitor` and `scx_esn top`;
//! and `--stats`' printing. The reading and its interval are esn_reading's.
//!
//! ```text
//!  run loop (owns the BPF maps) ── Arc<Cumulative>, one per pass
//!        ├─► --stats: interval(last, now) ─► print(): text or JSON
//!        └─► stats server thread (scx_stats, /var/run/scx/root/stats):
//!              each connection keeps its own previous Cumulative, so any number
//!              of `scx_esn --monitor` clients get their own intervals
//! ```

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use crossbeam::channel::{Receiver, Sender};
use esn_reading::schema;
use esn_topology::devt::DeviceTable;
use log::warn;
use scx_stats::prelude::{
    StatsData, StatsField, StatsFieldAttrs, StatsKind, StatsMeta, StatsOps, StatsServer,
    StatsServerData, StatsStructAttrs,
};

use esn_reading::IntervalStats;
use esn_reading::{interval, render, Cumulative, Reading};

/// Prints one interval as text or as one JSON line; a closed stdout is
/// `output::Closed`.
pub fn print(s: &IntervalStats, json: bool) -> Result<()> {
    if json {
        crate::output::write(&format!("{}\n", serde_json::to_string(s)?))
    } else {
        crate::output::write(&render(s))
    }
}

/// Binds the socket so that nobody but root can connect before its mode is
/// set: the umask covers the moment between bind and chmod. The directories
/// are made first under the usual umask, as other schedulers share them.
fn launch_restricted(
    server: StatsServer<(), Reading>,
    access: &SocketAccess,
) -> Result<StatsServer<(), Reading>> {
    let path = Path::new(SOCKET);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // SAFETY: umask cannot fail; it is put back right after the bind. Our
    // other threads (signals, /metrics) create no files meanwhile.
    let old = unsafe { libc::umask(0o077) };
    let launched = server.launch();
    unsafe { libc::umask(old) };
    let server = launched?;
    access.apply(path)?;
    Ok(server)
}

/// The server side: requests come in from the server's threads, readings go
/// back from the run loop.
pub struct Server {
    _server: StatsServer<(), Reading>,
    requests: Receiver<()>,
    replies: Sender<Reading>,
}

impl Server {
    /// Serves `target "top"` on the standard scx_stats socket. Each
    /// connection keeps its previous reading; `devices` names the disks.
    pub fn launch(devices: DeviceTable, access: &SocketAccess) -> Result<Server> {
        let open = move |_: (&Sender<()>, &Receiver<Reading>)| {
            let devices = devices.clone();
            let mut prev: Option<Arc<Cumulative>> = None;
            // The channels are the server's, shared by its connections: a
            // request is answered by the next reading the run loop sends.
            let read = move |_args: &BTreeMap<String, String>,
                             (req, res): (&Sender<()>, &Receiver<Reading>)|
                  -> Result<serde_json::Value> {
                req.send(()).context("the scheduler's loop is gone")?;
                let reading = res
                    .recv_timeout(Duration::from_secs(5))
                    .context("no reading from the scheduler's loop within 5 s")?;
                let before = prev.as_ref().unwrap_or(&reading.start);
                let stats = interval(before, &reading.now, &devices);
                prev = Some(reading.now);
                Ok(serde_json::to_value(stats)?)
            };
            Ok(Box::new(read) as Box<dyn scx_stats::prelude::StatsReader<(), Reading>>)
        };
        let data = with_meta(StatsServerData::<(), Reading>::new()).add_ops(
            "top",
            StatsOps {
                open: Box::new(open),
                close: None,
            },
        );
        let server = launch_restricted(StatsServer::new(data), access)
            .with_context(|| format!("starting the stats server on {SOCKET}"))?;
        let (replies, requests) = server.channels();
        Ok(Server {
            _server: server,
            requests,
            replies,
        })
    }

    /// How many readers wait for a reading (call from the run loop).
    pub fn wanted(&self) -> usize {
        self.requests.try_iter().count()
    }

    pub fn reply(&self, reading: Reading) {
        // A reader that timed out is gone; nothing to do about it here.
        let _ = self.replies.send(reading);
    }
}

/// The description of every served struct (`esn_reading::schema`), in the
/// scx_stats form: answered to `stats_meta`, printed by `--help-stats`.
fn meta() -> Vec<StatsMeta> {
    fn kind(k: schema::Kind) -> StatsKind {
        match k {
            // scx_stats has no boolean; JSON true/false read as numbers do 1/0.
            schema::Kind::U64 | schema::Kind::Bool => StatsKind::U64,
            schema::Kind::I64 => StatsKind::I64,
            schema::Kind::Float => StatsKind::Float,
            schema::Kind::String => StatsKind::String,
            schema::Kind::Struct(name) => StatsKind::Struct(name.to_string()),
        }
    }
    schema::structs()
        .iter()
        .map(|s| StatsMeta {
            name: s.name.to_string(),
            attrs: StatsStructAttrs {
                top: (s.name == schema::TOP).then(|| "true".to_string()),
                desc: Some(s.desc.to_string()),
                user: BTreeMap::new(),
            },
            fields: s
                .fields
                .iter()
                .map(|f| {
                    let data = match f.shape {
                        schema::Shape::Datum(k) => StatsData::Datum(kind(k)),
                        schema::Shape::Array(k) => StatsData::Array(kind(k)),
                        schema::Shape::Dict { key, datum } => StatsData::Dict {
                            key: kind(key),
                            datum: kind(datum),
                        },
                    };
                    let desc = if f.nullable {
                        format!("{} (may be null)", f.desc)
                    } else {
                        f.desc.to_string()
                    };
                    let attrs = StatsFieldAttrs {
                        desc: Some(desc),
                        user: BTreeMap::new(),
                    };
                    (f.name.to_string(), StatsField { data, attrs })
                })
                .collect(),
        })
        .collect()
}

fn with_meta<Req: Send + 'static, Res: Send + 'static>(
    mut data: StatsServerData<Req, Res>,
) -> StatsServerData<Req, Res> {
    for m in meta() {
        data = data.add_meta(m);
    }
    data
}

/// `scx_esn --help-stats`: every field of an interval and what it means,
/// struct by struct from the top. (scx_stats' own describe_meta follows
/// only arrays and dicts of structs, so it would leave out `health` and
/// `io`.)
pub fn describe(out: &mut impl std::io::Write) -> Result<()> {
    let metas = meta();
    let name_width = metas.iter().map(|m| m.name.len()).max().unwrap_or(0);
    let field_width = metas
        .iter()
        .flat_map(|m| m.fields.keys().map(|k| k.len()))
        .max()
        .unwrap_or(0);
    let data_width = metas
        .iter()
        .flat_map(|m| m.fields.values().map(|f| f.data.to_string().len() + 2))
        .max()
        .unwrap_or(0);
    for (i, m) in metas.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        let desc = m.attrs.desc.as_deref().unwrap_or("");
        writeln!(out, "[{:name_width$}] {desc}", m.name)?;
        for (name, field) in &m.fields {
            let data = format!("({})", field.data);
            let desc = field.attrs.desc.as_deref().unwrap_or("");
            writeln!(out, "  {name:field_width$} {data:data_width$} : {desc}")?;
        }
    }
    Ok(())
}

/// `scx_esn --monitor SECS`: print a running scheduler's intervals until
/// SIGINT/SIGTERM. Waits (and says so) while no scheduler serves stats.
pub fn monitor(every: Duration, json: bool, shutdown: Arc<AtomicBool>) -> Result<()> {
    check_socket_access(Path::new(SOCKET))?;
    scx_utils::monitor_stats::<IntervalStats>(
        &[],
        every,
        || shutdown.load(Ordering::Relaxed),
        |s| print(&s, json),
    )
    .map_err(|err| explain_denied(err, Path::new(SOCKET)))
}

/// Where scx_stats serves every sched_ext scheduler's statistics.
pub const SOCKET: &str = "/var/run/scx/root/stats";

/// Who may read the stats socket: root alone (mode 0600), or also the
/// members of one group (0660, `--stats-group`). What it serves names every
/// task doing I/O and its devices, which other users need not see.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketAccess {
    group: Option<libc::gid_t>,
}

impl SocketAccess {
    /// Root only, or also `group` (a name or a number), which must exist.
    pub fn for_group(group: Option<&str>) -> Result<SocketAccess> {
        let Some(name) = group else {
            return Ok(SocketAccess::default());
        };
        let gid = match name.parse::<libc::gid_t>() {
            Ok(gid) => gid,
            Err(_) => group_id(name)?.with_context(|| {
                format!("--stats-group {name}: no such group (see /etc/group, or give a number)")
            })?,
        };
        Ok(SocketAccess { group: Some(gid) })
    }

    pub fn mode(&self) -> u32 {
        if self.group.is_some() {
            0o660
        } else {
            0o600
        }
    }

    /// Gives the socket file just bound its owner group and mode.
    fn apply(&self, path: &Path) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        if let Some(gid) = self.group {
            std::os::unix::fs::chown(path, None, Some(gid))
                .with_context(|| format!("giving {} to group {gid}", path.display()))?;
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(self.mode()))
            .with_context(|| format!("setting the mode of {}", path.display()))
    }
}

/// The gid of a group name through the system's group database (NSS, not
/// only /etc/group).
fn group_id(name: &str) -> Result<Option<libc::gid_t>> {
    let cname = std::ffi::CString::new(name).context("a group name without NUL bytes")?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    loop {
        // SAFETY: every pointer is valid for the call: grp and result are
        // locals, buf is a live buffer of buf.len() bytes.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        let rc = unsafe {
            libc::getgrnam_r(
                cname.as_ptr(),
                &mut grp,
                buf.as_mut_ptr(),
                buf.len(),
                &mut result,
            )
        };
        match rc {
            0 if result.is_null() => return Ok(None),
            0 => return Ok(Some(grp.gr_gid)),
            libc::ERANGE if buf.len() < 1 << 20 => buf.resize(buf.len() * 4, 0),
            err => {
                return Err(std::io::Error::from_raw_os_error(err))
                    .with_context(|| format!("looking up group {name}"))
            }
        }
    }
}

/// A reader that may not connect is told why at once instead of waiting for
/// a scheduler forever. A missing socket is fine: one may start later.
pub fn check_socket_access(path: &Path) -> Result<()> {
    match std::os::unix::net::UnixStream::connect(path) {
        Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(explain_denied(err.into(), path))
        }
        _ => Ok(()),
    }
}

fn explain_denied(err: anyhow::Error, path: &Path) -> anyhow::Error {
    let denied = err
        .chain()
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .any(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
    if !denied {
        return err;
    }
    anyhow::anyhow!(
        "permission denied on {}: run as root (the stats socket is root's unless \
         scx_esn was started with --stats-group GROUP and you are in GROUP)",
        path.display()
    )
}

/// Launching the server may fail (no /var/run, a read-only root): the
/// scheduler runs on without it, and says so.
pub fn try_launch(devices: DeviceTable, access: &SocketAccess) -> Option<Server> {
    match Server::launch(devices, access) {
        Ok(s) => Some(s),
        Err(err) => {
            warn!("no stats server, `scx_esn --monitor` will not see this instance: {err:#}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_stats_describes_every_struct_from_the_top() {
        let mut out = Vec::new();
        describe(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        for s in schema::structs() {
            assert!(
                text.contains(&format!("[{}", s.name)),
                "{} missing:\n{text}",
                s.name
            );
        }
        assert!(text.starts_with("[IntervalStats"), "{text}");
        assert!(text.contains("exploring"), "{text}");
        assert!(text.contains("(may be null)"), "{text}");
        // The top is set, so a client asking stats_meta knows where to start.
        let top: Vec<_> = meta()
            .into_iter()
            .filter(|m| m.attrs.top.is_some())
            .collect();
        assert_eq!(top.len(), 1);
        assert_eq!(top[0].name, schema::TOP);
    }
}
