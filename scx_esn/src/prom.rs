// SPDX-License-Identifier: GPL-2.0-only
//! `--prometheus ADDR:PORT`: the scheduler's cumulative readings as a
//! Prometheus scrape target (`GET /metrics`, OpenMetrics text).
//!
//! ```text
//!  scraper ──GET /metrics──► http thread ──(reply channel)──► run loop
//!                                 ▲                              │ owns the maps
//!                                 └──── Arc<Cumulative> ◄────────┘
//!  http thread: esn_reading::metrics::exposition_text(reading) ─► body
//! ```
//!
//! The http thread is hyper's HTTP/1 server on a one-thread tokio runtime:
//! every connection is a task of its own with a capped request head, a
//! deadline for the head and one for the whole exchange, so a client that
//! floods or drips holds up nobody but itself.
//!
//! What a scrape says is esn_reading::metrics'. The thread never touches
//! BPF: like the stats server it asks the run loop, which answers within one
//! sample period (100 ms).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use crossbeam::channel::{bounded, Receiver, Sender};
use esn_topology::devt::DeviceTable;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use log::{debug, info, warn};

use esn_reading::metrics::exposition_text;
use esn_reading::Cumulative;

/// The OpenMetrics text format's media type, which Prometheus asks for first.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Port of `--prometheus` when only an address is missing: loopback.
pub fn parse_listen(spec: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = spec.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    spec.parse::<SocketAddr>().map_err(|_| {
        format!(
            "{spec:?} is not ADDR:PORT or PORT (e.g. 127.0.0.1:9090, [::1]:9090, \
             0.0.0.0:9090 to accept scrapes from other hosts)"
        )
    })
}

/// What answers a scrape: asks for a reading and waits for it.
pub type ReadingSource = Arc<dyn Fn() -> Result<Arc<Cumulative>> + Send + Sync>;

/// A source that asks whoever holds the receiver (the run loop) for a
/// reading, and waits for it.
fn channel_source() -> (ReadingSource, Receiver<Sender<Arc<Cumulative>>>) {
    let (tx, requests) = bounded::<Sender<Arc<Cumulative>>>(4);
    let source: ReadingSource = Arc::new(move || {
        let (reply, answer) = bounded(1);
        tx.send(reply).context("the scheduler's loop is gone")?;
        answer
            .recv_timeout(Duration::from_secs(5))
            .context("no reading from the scheduler's loop within 5 s")
    });
    (source, requests)
}

/// The run loop's side: readings are asked for with a reply channel each.
pub struct Exporter {
    requests: Receiver<Sender<Arc<Cumulative>>>,
}

impl Exporter {
    /// Binds `addr` and serves until the process exits. Fails when the
    /// address cannot be bound (in use, not local, no permission).
    pub fn launch(addr: SocketAddr, devices: DeviceTable) -> Result<Exporter> {
        let (source, requests) = channel_source();
        let addr = serve(addr, devices, source)?;
        info!("Prometheus metrics on http://{addr}/metrics");
        Ok(Exporter::new(requests))
    }

    fn new(requests: Receiver<Sender<Arc<Cumulative>>>) -> Exporter {
        Exporter { requests }
    }

    /// Answers every scrape waiting for a reading (call from the run loop
    /// with the pass's one reading). A reading that fails is logged and
    /// those scrapes get a 503 (their reply channel closes): monitoring
    /// never stops the scheduler.
    pub fn answer(&self, mut read: impl FnMut() -> Result<Arc<Cumulative>>) {
        for reply in self.requests.try_iter() {
            match read() {
                // A scraper that gave up is gone; nothing to do about it here.
                Ok(r) => {
                    let _ = reply.send(r);
                }
                Err(err) => log::warn!("a /metrics scrape gets a 503: {err:#}"),
            }
        }
    }
}

/// Bytes of request head buffered per connection at most (hyper's smallest
/// read buffer): a scrape's head is a few hundred; a longer one gets a 431
/// and the connection closes, so no client grows our memory.
const MAX_REQUEST_HEAD: usize = 8 * 1024;

/// Time a client has, from connecting, to send its whole request head: a
/// client dripping a byte now and then is cut off after it.
const HEAD_DEADLINE: Duration = Duration::from_secs(5);

/// Time a connection may last in all, answer included (a reading takes up
/// to 5 s when the loop is busy): a client that stops reading is dropped.
const CONNECTION_DEADLINE: Duration = Duration::from_secs(15);

/// Connections served at once; further ones wait in the listen backlog.
/// Each is its own task, so a slow one holds only its own slot.
const MAX_CONNECTIONS: usize = 64;

/// Binds and starts the HTTP thread (a one-thread tokio runtime serving
/// every connection as its own task); returns the bound address (port 0
/// picks a free one, for tests).
pub fn serve(addr: SocketAddr, devices: DeviceTable, source: ReadingSource) -> Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr).with_context(|| {
        format!("--prometheus {addr}: cannot listen there (in use? not an address of this host?)")
    })?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        // Readings block (they wait for the run loop): a few threads for them.
        .max_blocking_threads(4)
        .thread_name("prometheus-read")
        .build()
        .context("starting the prometheus runtime")?;
    let devices = Arc::new(devices);
    std::thread::Builder::new()
        .name("prometheus".into())
        .spawn(move || runtime.block_on(accept_loop(listener, devices, source)))
        .context("starting the prometheus thread")?;
    Ok(bound)
}

async fn accept_loop(
    listener: std::net::TcpListener,
    devices: Arc<DeviceTable>,
    source: ReadingSource,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(err) => {
            warn!("prometheus: no /metrics: {err}");
            return;
        }
    };
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) => {
                // Out of file descriptors, say: try again a little later.
                debug!("prometheus: accept: {err}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (devices, source) = (devices.clone(), source.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let service =
                service_fn(move |request| respond(request, devices.clone(), source.clone()));
            // One request per connection: scrapers reconnect for each scrape
            // anyway, and no idle keep-alive connection holds a slot.
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_DEADLINE)
                .max_buf_size(MAX_REQUEST_HEAD)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            match tokio::time::timeout(CONNECTION_DEADLINE, connection).await {
                Ok(Ok(())) => {}
                // Clients' mistakes are theirs: not worth a warning each.
                Ok(Err(err)) => debug!("prometheus: a connection failed: {err}"),
                Err(_) => debug!("prometheus: a connection outlived {CONNECTION_DEADLINE:?}"),
            }
        });
    }
}

const TEXT: &str = "text/plain; charset=utf-8";

/// The answer to one request: /metrics from a fresh reading, a pointer to
/// it at /, 404 elsewhere, 405 for anything but GET and HEAD.
async fn respond(
    request: Request<Incoming>,
    devices: Arc<DeviceTable>,
    source: ReadingSource,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let readable = matches!(*request.method(), Method::GET | Method::HEAD);
    let (status, content_type, body) = match (readable, request.uri().path()) {
        (true, "/metrics") => {
            let text = tokio::task::spawn_blocking(move || {
                source().and_then(|r| exposition_text(r, &devices))
            })
            .await;
            match text {
                Ok(Ok(body)) => (StatusCode::OK, OPENMETRICS, body),
                Ok(Err(err)) => (StatusCode::SERVICE_UNAVAILABLE, TEXT, format!("{err:#}\n")),
                Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, TEXT, format!("{err}\n")),
            }
        }
        (true, "/") => (
            StatusCode::OK,
            TEXT,
            "scx_esn: metrics at /metrics\n".into(),
        ),
        (true, _) => (
            StatusCode::NOT_FOUND,
            TEXT,
            "not found: try /metrics\n".into(),
        ),
        (false, _) => (StatusCode::METHOD_NOT_ALLOWED, TEXT, "only GET\n".into()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    Ok(response)
}

/// `--prometheus` failing to bind is an error before the scheduler loads:
/// an operator who asked for metrics wants to know now, not find a gap in
/// the dashboards later.
pub fn launch_checked(spec: Option<SocketAddr>, devices: &DeviceTable) -> Result<Option<Exporter>> {
    match spec {
        None => Ok(None),
        Some(addr) if addr.port() == 0 => bail!("--prometheus {addr}: give a port other than 0"),
        Some(addr) => Exporter::launch(addr, devices.clone()).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    /// What a scrape shows is esn_reading's (tested there): here only that
    /// each scrape gets the loop's reading of the moment.
    fn reading() -> Cumulative {
        Cumulative::default()
    }

    /// A server on a free loopback port and the run loop's end of it.
    fn on_loopback() -> (SocketAddr, Exporter) {
        let (source, rx) = channel_source();
        let addr = serve(
            "127.0.0.1:0".parse().unwrap(),
            DeviceTable::default(),
            source,
        )
        .unwrap();
        (addr, Exporter::new(rx))
    }

    /// The value of the place_local event in a scrape's body.
    fn place_local(body: &str) -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix("scx_esn_events_total{event=\"place_local\"} "))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no place_local in\n{body}"))
    }

    fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n").unwrap();
        let mut all = String::new();
        s.read_to_string(&mut all).unwrap();
        let (head, body) = all.split_once("\r\n\r\n").unwrap();
        (head.to_string(), body.to_string())
    }

    #[test]
    fn scraped_over_http_on_loopback() {
        let (addr, exporter) = on_loopback();
        // Stands in for the run loop: answers scrapes with fresh readings.
        let mut served = 0;
        let loop_thread = std::thread::spawn(move || {
            for _ in 0..200 {
                exporter.answer(|| {
                    served += 1;
                    let mut r = reading();
                    r.counters[0] = served;
                    Ok(Arc::new(r))
                });
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let (head, body) = http_get(addr, "/metrics");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("application/openmetrics-text"), "{head}");
        let first = place_local(&body);
        let (_, body) = http_get(addr, "/metrics");
        let second = place_local(&body);
        assert!(second > first, "each scrape gets a new reading");
        assert!(http_get(addr, "/nope").0.starts_with("HTTP/1.1 404"));
        loop_thread.join().unwrap();
        // The loop is gone: a scrape now says why instead of hanging.
        let (head, body) = http_get(addr, "/metrics");
        assert!(head.starts_with("HTTP/1.1 503"), "{head}");
        assert!(body.contains("loop"), "{body}");
    }

    #[test]
    fn a_failed_reading_is_a_503_and_the_loop_goes_on() {
        let (addr, exporter) = on_loopback();
        let (stop_tx, stop) = bounded::<()>(1);
        // The run loop: its first reading fails (a map read error), the next
        // ones work. answer() has no error to return: the loop cannot stop.
        let loop_thread = std::thread::spawn(move || {
            let mut calls = 0;
            while stop.try_recv().is_err() {
                exporter.answer(|| {
                    calls += 1;
                    if calls == 1 {
                        anyhow::bail!("reading the stats map: injected failure")
                    }
                    Ok(Arc::new(reading()))
                });
                std::thread::sleep(Duration::from_millis(5));
            }
            calls
        });
        let (head, _) = http_get(addr, "/metrics");
        assert!(head.starts_with("HTTP/1.1 503"), "{head}");
        let (head, body) = http_get(addr, "/metrics");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(body.contains("scx_esn_events_total"), "{body}");
        stop_tx.send(()).unwrap();
        assert_eq!(loop_thread.join().unwrap(), 2);
    }

    /// A server on a free loopback port and a run loop answering its scrapes
    /// with fresh readings until `stop` is set.
    struct Served {
        addr: SocketAddr,
        stop: Arc<AtomicBool>,
        run_loop: std::thread::JoinHandle<()>,
    }

    impl Served {
        fn start() -> Served {
            let (addr, exporter) = on_loopback();
            let stop = Arc::new(AtomicBool::new(false));
            let loop_stop = stop.clone();
            let run_loop = std::thread::spawn(move || {
                while !loop_stop.load(Ordering::Relaxed) {
                    exporter.answer(|| Ok(Arc::new(reading())));
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
            Served {
                addr,
                stop,
                run_loop,
            }
        }

        fn finish(self) {
            self.stop.store(true, Ordering::Relaxed);
            self.run_loop.join().unwrap();
        }
    }

    /// Connects and sends `head` a byte every `pause` until the server
    /// closes the connection; returns how long that took.
    fn drip(addr: SocketAddr, head: &'static [u8], pause: Duration) -> Duration {
        let start = Instant::now();
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(pause)).unwrap();
        let mut buf = [0u8; 512];
        for byte in head.iter().cycle() {
            if s.write_all(std::slice::from_ref(byte)).is_err() {
                break;
            }
            match s.read(&mut buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                // An answer (408), the end of the stream or a reset: cut off.
                _ => break,
            }
            assert!(start.elapsed() < Duration::from_secs(60), "never cut off");
        }
        start.elapsed()
    }

    #[test]
    fn flooding_and_dripping_clients_hold_up_no_scrape() {
        let served = Served::start();
        let addr = served.addr;
        // A client sending a head without end, again and again.
        let flood_stop = served.stop.clone();
        let flooder = std::thread::spawn(move || {
            let mut cut_off = 0;
            while !flood_stop.load(Ordering::Relaxed) {
                let Ok(mut s) = TcpStream::connect(addr) else {
                    continue;
                };
                let chunk = [b'a'; 4096];
                while !flood_stop.load(Ordering::Relaxed) && s.write_all(&chunk).is_ok() {}
                cut_off += 1;
            }
            cut_off
        });
        let drippers: Vec<_> = (0..2)
            .map(|_| {
                std::thread::spawn(move || {
                    drip(
                        addr,
                        b"GET /metrics HTTP/1.1\r\nX: ",
                        Duration::from_millis(700),
                    )
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        for scrape in 0..5 {
            let asked = Instant::now();
            let (head, body) = http_get(addr, "/metrics");
            let took = asked.elapsed();
            assert!(head.starts_with("HTTP/1.1 200"), "scrape {scrape}: {head}");
            assert!(body.contains("scx_esn_events_total"), "scrape {scrape}");
            assert!(
                took < Duration::from_secs(3),
                "scrape {scrape} took {took:?}"
            );
        }
        for dripper in drippers {
            let held = dripper.join().unwrap();
            assert!(
                held < HEAD_DEADLINE + Duration::from_secs(3),
                "a dripper held {held:?}"
            );
        }
        served.stop.store(true, Ordering::Relaxed);
        assert!(flooder.join().unwrap() > 0, "the flood was never cut off");
        served.finish();
    }

    #[test]
    fn an_oversized_head_is_refused_not_buffered() {
        let (source, _rx) = channel_source();
        let addr = serve(
            "127.0.0.1:0".parse().unwrap(),
            DeviceTable::default(),
            source,
        )
        .unwrap();
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut head = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        head.resize(4 * MAX_REQUEST_HEAD, b'a');
        // The server may close before all of it is written.
        let _ = s.write_all(&head);
        let mut answer = Vec::new();
        match s.read_to_end(&mut answer) {
            Ok(_) => {
                let text = String::from_utf8_lossy(&answer);
                assert!(
                    text.is_empty() || text.starts_with("HTTP/1.1 431"),
                    "{text}"
                );
            }
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        }
    }

    #[test]
    fn only_get_and_head_are_answered() {
        let served = Served::start();
        let addr = served.addr;
        let mut s = TcpStream::connect(addr).unwrap();
        write!(
            s,
            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
        )
        .unwrap();
        let mut all = String::new();
        s.read_to_string(&mut all).unwrap();
        assert!(all.starts_with("HTTP/1.1 405"), "{all}");
        assert_eq!(
            http_get(addr, "/").0.lines().next(),
            Some("HTTP/1.1 200 OK")
        );
        served.finish();
    }
}
