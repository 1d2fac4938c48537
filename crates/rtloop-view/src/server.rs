//! The page's server: HTTP for the page and the stream list, one WebSocket per scope.
//!
//! It runs on one thread with a current-thread runtime: the work per frame is a copy of the
//! samples committed since the last frame and a min/max pass over them, so one core's slice
//! serves several pages, and nothing here touches a writer's path.
//!
//! Frames are asked for by the page, one at a time, when it has drawn the last one: a page
//! that draws slowly gets fewer frames, never a queue of stale ones.
//!
//! Every request must carry the access token, name this viewer in its `Host` and, when it
//! has an `Origin`, come from the page itself; connections have a header timeout and a cap.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use rtloop_stream::Stream;

use crate::catalog::{channels, Catalog, ChannelInfo, StreamRow};
use crate::conns::{self, ConnHandle, Limits, Registry};
use crate::histogram::{histogram, Histogram};
use crate::scope::{Scope, ScopeConfig, ScopeFrame, ScopeStatus};

const INDEX_HTML: &str = include_str!("page/index.html");
const APP_JS: &str = include_str!("page/app.js");

/// Where and how the page is served.
#[derive(Debug, Clone)]
pub struct ViewConfig {
    /// Address to listen on; 127.0.0.1 unless the page is to be seen from another machine.
    pub bind: IpAddr,
    /// Port (0: any free one).
    pub port: u16,
    /// Access token asked of every request (`None`: a random one, as Jupyter makes); the
    /// URL the viewer gives carries it.
    pub token: Option<String>,
    /// Host names the page may be reached by besides the bound address, `localhost`,
    /// `127.0.0.1` and `[::1]` (and, bound to every interface, any IP address and this
    /// machine's host name). Requests naming another host are refused: DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// Time a connection has to send a request's whole header, from when it connected or
    /// got its last answer; a connection that is slower, or idle, is closed.
    pub header_timeout: Duration,
    /// Most connections open at once (fewer if the open-file limit leaves less room);
    /// when all are taken, the one idle longest is closed for a new client.
    pub max_connections: usize,
}

impl Default for ViewConfig {
    fn default() -> Self {
        ViewConfig {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 8765,
            token: None,
            allowed_hosts: Vec::new(),
            header_timeout: Duration::from_secs(10),
            max_connections: 256,
        }
    }
}

/// Largest message the page may send on a scope's WebSocket, in bytes. Its requests are
/// JSON of under 200 bytes; anything longer is refused before it is read into memory.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// Why the viewer could not start.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source} (pick another --port, or 0 for any free one)")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server's thread or runtime could not start.
    #[error("cannot start the viewer's server: {0}")]
    Runtime(std::io::Error),
    /// No randomness for the access token.
    #[error("cannot make an access token: {0}")]
    Token(String),
    /// A setting outside what is allowed.
    #[error("{0}")]
    Config(String),
}

/// A running viewer; dropping it (or [`Viewer::stop`]) ends the server.
pub struct Viewer {
    url: String,
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Viewer {
    /// Bind and serve on a thread of its own.
    pub fn start(cfg: &ViewConfig) -> Result<Viewer, ViewError> {
        let token = match &cfg.token {
            Some(t) => {
                check_token_text(t)?;
                t.clone()
            }
            None => new_token()?,
        };
        if cfg.header_timeout.is_zero() || cfg.header_timeout > Duration::from_secs(3600) {
            return Err(ViewError::Config(format!(
                "header timeout {:?} is outside 1 ms to 1 hour",
                cfg.header_timeout
            )));
        }
        if cfg.max_connections == 0 {
            return Err(ViewError::Config(
                "max connections must be at least 1".into(),
            ));
        }
        let addr = SocketAddr::new(cfg.bind, cfg.port);
        let listener =
            std::net::TcpListener::bind(addr).map_err(|source| ViewError::Bind { addr, source })?;
        listener.set_nonblocking(true).map_err(ViewError::Runtime)?;
        let addr = listener.local_addr().map_err(ViewError::Runtime)?;
        let shown = if cfg.bind.is_unspecified() {
            SocketAddr::new(IpAddr::from([127, 0, 0, 1]), addr.port())
        } else {
            addr
        };
        let url = format!("http://{shown}/?token={token}");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ViewError::Runtime)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let hosts = Hosts::new(cfg.bind, addr.port(), &cfg.allowed_hosts);
        let app = router(token, hosts);
        let reg = Registry::new(cfg.max_connections);
        let limits = Limits {
            header_timeout: cfg.header_timeout,
        };
        let thread = std::thread::Builder::new()
            .name("rtloop-view".into())
            .spawn(move || {
                rt.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::error!("viewer: {e}");
                            return;
                        }
                    };
                    conns::serve(listener, app, reg, limits, stopped).await;
                });
                // dropping the runtime here closes every connection still open
            })
            .map_err(ViewError::Runtime)?;
        Ok(Viewer {
            url,
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The page's address, with the access token (`http://127.0.0.1:PORT/?token=...`).
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bound socket address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// End the server and wait for its thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn new_token() -> Result<String, ViewError> {
    let mut b = [0u8; 24];
    getrandom::fill(&mut b).map_err(|e| ViewError::Token(e.to_string()))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// A token goes in a URL and must not be guessable.
fn check_token_text(t: &str) -> Result<(), ViewError> {
    if t.len() < 16
        || !t
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(ViewError::Config(
            "the token must be at least 16 characters from A-Z a-z 0-9 - _ (it goes in a URL)"
                .into(),
        ));
    }
    Ok(())
}

/// The names a request's `Host` (and a WebSocket's `Origin`) may give: a page reached
/// through any other name is a DNS rebinding, or another site's page.
#[derive(Debug, Clone)]
struct Hosts {
    port: u16,
    /// Lower case; IPv6 addresses in brackets.
    names: Vec<String>,
    /// Bound to every interface: any IP address of this machine names it.
    any_ip: bool,
}

impl Hosts {
    fn new(bind: IpAddr, port: u16, extra: &[String]) -> Hosts {
        let mut names: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|s| (*s).to_string())
            .collect();
        let any_ip = bind.is_unspecified();
        if any_ip {
            if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
                names.push(h.trim().to_ascii_lowercase());
            }
        } else {
            names.push(match bind {
                IpAddr::V4(a) => a.to_string(),
                IpAddr::V6(a) => format!("[{a}]"),
            });
        }
        names.extend(extra.iter().map(|h| h.to_ascii_lowercase()));
        Hosts {
            port,
            names,
            any_ip,
        }
    }

    /// `authority` (`HOST` or `HOST:PORT`) names this viewer.
    fn allows(&self, authority: &str) -> bool {
        let (host, port) = match authority.rfind(':') {
            // a bracketed IPv6 address has colons of its own
            Some(i) if !authority[i..].contains(']') => (&authority[..i], &authority[i + 1..]),
            _ => (authority, ""),
        };
        let port = if port.is_empty() {
            Some(80)
        } else {
            port.parse::<u16>().ok()
        };
        if port != Some(self.port) || host.is_empty() {
            return false;
        }
        let host = host.to_ascii_lowercase();
        if self.names.contains(&host) {
            return true;
        }
        self.any_ip
            && match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
                Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
                None => host.parse::<std::net::Ipv4Addr>().is_ok(),
            }
    }
}

struct AppState {
    token: String,
    hosts: Hosts,
    catalog: Mutex<Catalog>,
}

type Shared = Arc<AppState>;

fn router(token: String, hosts: Hosts) -> Router {
    let state = Arc::new(AppState {
        token,
        hosts,
        catalog: Mutex::new(Catalog::default()),
    });
    Router::new()
        .route("/", get(index))
        .route("/app.js", get(app_js))
        .route("/api/streams", get(list_streams))
        .route("/api/streams/{name}", get(stream_detail))
        .route("/api/streams/{name}/histogram", get(stream_histogram))
        .route("/ws/scope", get(scope_socket))
        .layer(middleware::from_fn_with_state(state.clone(), check_access))
        .with_state(state)
}

/// Equal, in a time that does not depend on where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn refuse(status: StatusCode, text: &'static str) -> Response {
    (status, [(header::CACHE_CONTROL, "no-store")], text).into_response()
}

/// Every request: its `Host` names this viewer (no DNS rebinding), its `Origin`, when it has
/// one (a browser's WebSocket always has), is this viewer's own page, and it carries the
/// access token (`?token=`, as Jupyter does; the page passes it on to its own requests).
async fn check_access(State(st): State<Shared>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_owned()));
    let Some(host) = host.filter(|h| st.hosts.allows(h)) else {
        return refuse(
            StatusCode::FORBIDDEN,
            "this viewer answers to the address it printed (and localhost, 127.0.0.1 or [::1] \
             with its port, or a name given to --allow-host), not to the Host this request \
             names\n",
        );
    };
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let own = origin
            .to_str()
            .ok()
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|o| o.eq_ignore_ascii_case(&host));
        if !own {
            return refuse(
                StatusCode::FORBIDDEN,
                "this viewer takes requests (and WebSockets) only from its own page: the Origin \
                 must be http:// and the address the page was opened at\n",
            );
        }
    }
    // the script holds no data; everything it asks for carries the token
    if req.uri().path() == "/app.js" {
        return next.run(req).await;
    }
    let q = Query::<HashMap<String, String>>::try_from_uri(req.uri()).map(|q| q.0);
    match q.ok().as_ref().and_then(|q| q.get("token")) {
        None => refuse(
            StatusCode::UNAUTHORIZED,
            "this viewer asks every request for the access token it printed when it started: \
             open the URL it printed, which ends in ?token=...\n",
        ),
        Some(t) if !same_secret(t, &st.token) => refuse(
            StatusCode::FORBIDDEN,
            "wrong access token: open the URL the viewer printed when it started, which ends in \
             ?token=...\n",
        ),
        Some(_) => next.run(req).await,
    }
}

async fn index() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        INDEX_HTML,
    )
}

async fn app_js() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        APP_JS,
    )
}

async fn list_streams(State(st): State<Shared>) -> Json<Vec<StreamRow>> {
    Json(st.catalog.lock().unwrap_or_else(|p| p.into_inner()).list())
}

#[derive(serde::Serialize)]
struct Detail {
    #[serde(flatten)]
    row: StreamRow,
    channels: ChannelInfo,
}

fn not_found(name: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        format!("no stream named {name:?} (the list at /api/streams has every stream)\n"),
    )
        .into_response()
}

async fn stream_detail(State(st): State<Shared>, Path(name): Path<String>) -> Response {
    let mut cat = st.catalog.lock().unwrap_or_else(|p| p.into_inner());
    let Some(row) = cat.list().into_iter().find(|r| r.name == name) else {
        return not_found(&name);
    };
    let Some(s) = cat.get(&name) else {
        return not_found(&name);
    };
    Json(Detail {
        row,
        channels: channels(s),
    })
    .into_response()
}

#[derive(serde::Deserialize)]
struct HistogramQuery {
    #[serde(default)]
    channel: usize,
    #[serde(default = "default_hist_samples")]
    samples: u64,
}

fn default_hist_samples() -> u64 {
    100_000
}

async fn stream_histogram(
    State(st): State<Shared>,
    Path(name): Path<String>,
    Query(q): Query<HistogramQuery>,
) -> Response {
    let mut cat = st.catalog.lock().unwrap_or_else(|p| p.into_inner());
    let Some(s) = cat.get(&name) else {
        return not_found(&name);
    };
    if let Some(why) = s.damage() {
        let msg = format!("stream {name:?} is damaged, so no histogram is made of it: {why}\n");
        return (StatusCode::CONFLICT, msg).into_response();
    }
    match histogram(s, q.channel, q.samples) {
        Ok(h) => Json::<Histogram>(h).into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

#[derive(serde::Deserialize)]
struct ScopeQuery {
    stream: String,
}

async fn scope_socket(
    ws: WebSocketUpgrade,
    Query(q): Query<ScopeQuery>,
    conn: Option<Extension<ConnHandle>>,
) -> Response {
    // a scope's connection stays open as long as the page shows it: not idle, never evicted
    let conn = conn.map(|Extension(c)| {
        c.mark_upgraded();
        c
    });
    // a frame longer than any request is refused from its header, before it is read
    ws.max_message_size(MAX_REQUEST_BYTES)
        .max_frame_size(MAX_REQUEST_BYTES)
        .read_buffer_size(16 * 1024)
        .on_upgrade(move |socket| async move {
            scope_session(socket, q.stream).await;
            // the connection's place is given back when the scope ends
            drop(conn);
        })
}

/// What the page sends on a scope's socket.
#[derive(serde::Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum ScopeRequest {
    /// Start (again) with this window, width and channel page.
    Config(ScopeConfig),
    /// The page drew the last frame: send what is new.
    Frame,
}

/// What the page may send, for errors.
const REQUESTS: &str = "a request is {\"type\":\"frame\"} or {\"type\":\"config\",\
     \"window_s\":2,\"columns\":1600,\"first_channel\":0,\"n_channels\":16}";

async fn scope_session(mut socket: WebSocket, name: String) {
    let mut scope: Option<Scope> = None;
    loop {
        let msg = match socket.recv().await {
            None => break,
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                if let Some(reason) = refusal(e) {
                    let _ = socket
                        .send(Message::Close(Some(CloseFrame {
                            code: reason.0,
                            reason: reason.1.into(),
                        })))
                        .await;
                }
                break;
            }
        };
        let reply = match msg {
            Message::Text(text) => match serde_json::from_str::<ScopeRequest>(text.as_str()) {
                Err(e) => vec![error_message(&bad_request(&e))],
                Ok(ScopeRequest::Config(cfg)) => match open_scope(&name, cfg) {
                    Ok((s, reset)) => {
                        scope = Some(s);
                        vec![Message::Text(reset.into())]
                    }
                    Err(e) => {
                        scope = None;
                        vec![error_message(&e)]
                    }
                },
                Ok(ScopeRequest::Frame) => match &mut scope {
                    None => vec![error_message("send a config before asking for frames")],
                    Some(s) => frame_messages(s),
                },
            },
            Message::Binary(_) => vec![error_message(&format!(
                "a request is JSON text, not binary; {REQUESTS}"
            ))],
            Message::Ping(_) | Message::Pong(_) | Message::Close(_) => continue,
        };
        for m in reply {
            if socket.send(m).await.is_err() {
                return;
            }
        }
    }
    // the scope (and its stream) and the socket's buffers go here, with the session
}

/// The close frame for a message refused while it was read: 1009 for one that is too long
/// (said from its header, before the rest is read), 1002 for a broken frame; none when the
/// connection itself failed.
fn refusal(e: axum::Error) -> Option<(u16, String)> {
    use tungstenite::error::{CapacityError, Error as WsError};
    let e = e.into_inner().downcast::<WsError>().ok()?;
    match *e {
        WsError::Capacity(CapacityError::MessageTooLong { size, max_size }) => Some((
            1009,
            format!("a message of {size} bytes is more than this viewer takes ({max_size} bytes)"),
        )),
        WsError::Capacity(c) => Some((1009, format!("refused: {c}"))),
        WsError::Protocol(p) => Some((1002, format!("refused: {p}"))),
        WsError::Utf8(_) => Some((1007, "a text message must be UTF-8".into())),
        _ => None,
    }
}

/// Why a request could not be read, in a few words: never the request itself, which may be
/// as long as the largest message taken.
fn bad_request(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let what = match e.classify() {
        Category::Syntax | Category::Eof => "not JSON",
        Category::Data => "not a request",
        Category::Io => "unreadable",
    };
    // serde's own words quote part of the request; short ones are kept
    let detail = e.to_string();
    let detail = if detail.len() <= 100 {
        detail
    } else {
        format!("at line {} column {}", e.line(), e.column())
    };
    format!("bad request, {what} ({detail}); {REQUESTS}")
}

fn error_message(text: &str) -> Message {
    Message::Text(
        serde_json::json!({ "type": "error", "message": text })
            .to_string()
            .into(),
    )
}

fn open_scope(name: &str, cfg: ScopeConfig) -> Result<(Scope, String), String> {
    let stream = Stream::open(name).map_err(|e| e.to_string())?;
    let mut scope = Scope::new(stream, cfg).map_err(|e| e.to_string())?;
    let reset = reset_message(&mut scope);
    Ok((scope, reset))
}

/// What the page starts (again) from: the configuration, the stream's shape and labels,
/// which stream file it is (a writer that made the stream again makes a new one) and where
/// the stream is in its life.
fn reset_message(scope: &mut Scope) -> String {
    let (status, _) = scope.report_status();
    let cfg = scope.config();
    let ch = channels(scope.stream());
    let info = scope.stream().info();
    let range = cfg.first_channel..cfg.first_channel + cfg.n_channels;
    serde_json::json!({
        "type": "reset",
        "stream": info.name,
        "incarnation": scope.incarnation(),
        "status": status,
        "config": cfg,
        "samples_per_column": scope.samples_per_column(),
        "rate": info.nominal_rate,
        "capacity": info.capacity,
        "content_type": info.content_type,
        "description": info.description,
        "dtype": info.dtype.name(),
        "n_channels": info.n_channels,
        "names": ch.names[range.clone()],
        "units": ch.units[range],
    })
    .to_string()
}

/// A frame as the page reads it: events (text) when there are new ones, then the bins
/// (binary: eight little-endian f64 — written, first bin, bins, channels, the newest
/// commit and the send time in Unix ms, samples skipped, 0 — then the f32 minima and maxima).
/// A writer that made the stream again is followed (a new reset first), and a change in the
/// stream's life goes out as a status message before the frame.
fn frame_messages(scope: &mut Scope) -> Vec<Message> {
    let mut out = Vec::with_capacity(3);
    if scope.follow() {
        out.push(Message::Text(reset_message(scope).into()));
    }
    let (status, changed) = scope.report_status();
    if changed {
        out.push(Message::Text(
            serde_json::json!({ "type": "status", "status": status })
                .to_string()
                .into(),
        ));
    }
    let f: ScopeFrame = if matches!(status, ScopeStatus::Damaged { .. }) {
        // its counters cannot be right: nothing is read by them, and an empty frame keeps
        // the page asking (to follow a stream made again under the name)
        ScopeFrame {
            n_channels: scope.config().n_channels as u32,
            ..ScopeFrame::default()
        }
    } else {
        scope.frame()
    };
    if !f.events.is_empty() {
        out.push(Message::Text(
            serde_json::json!({ "type": "events", "events": f.events })
                .to_string()
                .into(),
        ));
    }
    let (mono, real) = (rtloop_sys::monotonic_ns(), rtloop_sys::realtime_ns());
    let to_unix_ms = |stamp: u64| (real as f64 - (mono as f64 - stamp as f64)) / 1e6;
    let head = [
        f.written as f64,
        f.first_bin as f64,
        f64::from(f.n_bins),
        f64::from(f.n_channels),
        f.newest_stamp_ns.map_or(f64::NAN, to_unix_ms),
        real as f64 / 1e6,
        f.skipped as f64,
        0.0,
    ];
    let mut bytes = Vec::with_capacity(64 + 4 * f.data.len());
    bytes.extend(head.iter().flat_map(|x| x.to_le_bytes()));
    bytes.extend(f.data.iter().flat_map(|x| x.to_le_bytes()));
    out.push(Message::Binary(bytes.into()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_viewer_answers_to_loopback_names_with_its_port_only() {
        let h = Hosts::new(IpAddr::from([127, 0, 0, 1]), 8765, &[]);
        for ok in [
            "127.0.0.1:8765",
            "localhost:8765",
            "LocalHost:8765",
            "[::1]:8765",
        ] {
            assert!(h.allows(ok), "{ok}");
        }
        for bad in [
            "evil.example:8765",
            "evil.example",
            "127.0.0.1",
            "127.0.0.1:8766",
            "127.0.0.1:8765:8765",
            "localhost.:8765",
            "10.0.0.5:8765",
            ":8765",
            "[::1]",
            "",
        ] {
            assert!(!h.allows(bad), "{bad}");
        }
        let h80 = Hosts::new(IpAddr::from([127, 0, 0, 1]), 80, &[]);
        assert!(h80.allows("localhost") && h80.allows("localhost:80"));
    }

    #[test]
    fn a_viewer_on_every_interface_answers_to_addresses_and_named_hosts() {
        let h = Hosts::new(IpAddr::from([0, 0, 0, 0]), 9000, &["labpc.example".into()]);
        for ok in [
            "10.0.0.5:9000",
            "[fe80::1]:9000",
            "labpc.example:9000",
            "localhost:9000",
        ] {
            assert!(h.allows(ok), "{ok}");
        }
        for bad in [
            "evil.example:9000",
            "10.0.0.5:9001",
            "[fe80::zz]:9000",
            "10.0.0:9000",
        ] {
            assert!(!h.allows(bad), "{bad}");
        }
    }

    #[test]
    fn a_bad_request_is_described_without_being_echoed() {
        let junk = "Q".repeat(60_000);
        for req in [
            format!("{{\"type\":\"config\",\"window_s\":\"{junk}\"}}"),
            format!("{{\"type\":\"{junk}\"}}"),
            format!("[{junk}"),
        ] {
            let e = serde_json::from_str::<ScopeRequest>(&req)
                .err()
                .expect("refused");
            let text = bad_request(&e);
            assert!(text.len() < 400 && !text.contains(&junk[..50]), "{text}");
            assert!(text.contains("{\"type\":\"frame\"}"), "{text}");
        }
        let e = serde_json::from_str::<ScopeRequest>("{\"type\":\"nope\"}")
            .err()
            .expect("refused");
        let text = bad_request(&e);
        assert!(
            text.starts_with(
                "bad request, not a request (unknown variant `nope`, expected `config` or `frame`"
            ),
            "{text}"
        );
    }

    #[test]
    fn tokens_are_compared_whole() {
        assert!(same_secret("abcdefabcdefabcd", "abcdefabcdefabcd"));
        assert!(!same_secret("abcdefabcdefabcd", "abcdefabcdefabce"));
        assert!(!same_secret("abcdefabcdefabcd", "abcdefabcdefabc"));
        assert!(!same_secret("", "abcdefabcdefabcd"));
        assert!(check_token_text("short").is_err());
        assert!(check_token_text("sixteen-chars-ok").is_ok());
        assert!(check_token_text("sixteen chars no").is_err());
    }
}
