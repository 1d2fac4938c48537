//! The page's server: HTTP for the page and the stream list, one WebSocket per scope.
//!
//! It runs on one thread with a current-thread runtime: the work per frame is a copy of the
//! samples committed since the last frame and a min/max pass over them, so one core's slice
//! serves several pages, and nothing here touches a writer's path.
//!
//! Frames are asked for by the page, one at a time, when it has drawn the last one: a page
//! that draws slowly gets fewer frames, never a queue of stale ones.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rtloop_stream::Stream;

use crate::catalog::{channels, Catalog, ChannelInfo, StreamRow};
use crate::histogram::{histogram, Histogram};
use crate::scope::{Scope, ScopeConfig, ScopeFrame};

const INDEX_HTML: &str = include_str!("page/index.html");
const APP_JS: &str = include_str!("page/app.js");

/// Where and how the page is served.
#[derive(Debug, Clone)]
pub struct ViewConfig {
    /// Address to listen on; 127.0.0.1 unless the page is to be seen from another machine.
    pub bind: IpAddr,
    /// Port (0: any free one).
    pub port: u16,
    /// Access token asked of every request; without one, a random token is made when
    /// `bind` is not a loopback address (a loopback page needs none).
    pub token: Option<String>,
}

impl Default for ViewConfig {
    fn default() -> Self {
        ViewConfig {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 8765,
            token: None,
        }
    }
}

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
        let token = match (&cfg.token, cfg.bind.is_loopback()) {
            (Some(t), _) => Some(t.clone()),
            (None, true) => None,
            (None, false) => Some(new_token()?),
        };
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
        let url = match &token {
            Some(t) => format!("http://{shown}/?token={t}"),
            None => format!("http://{shown}/"),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ViewError::Runtime)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = router(token);
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
                    let server = axum::serve(listener, app).with_graceful_shutdown(async {
                        let _ = stopped.await;
                    });
                    if let Err(e) = server.await {
                        tracing::error!("viewer: {e}");
                    }
                });
            })
            .map_err(ViewError::Runtime)?;
        Ok(Viewer {
            url,
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The page's address (with the access token when one is needed).
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

struct AppState {
    token: Option<String>,
    catalog: Mutex<Catalog>,
}

type Shared = Arc<AppState>;

fn router(token: Option<String>) -> Router {
    let state = Arc::new(AppState {
        token,
        catalog: Mutex::new(Catalog::default()),
    });
    Router::new()
        .route("/", get(index))
        .route("/app.js", get(app_js))
        .route("/api/streams", get(list_streams))
        .route("/api/streams/{name}", get(stream_detail))
        .route("/api/streams/{name}/histogram", get(stream_histogram))
        .route("/ws/scope", get(scope_socket))
        .layer(middleware::from_fn_with_state(state.clone(), check_token))
        .with_state(state)
}

/// Every request carries the token when the viewer has one (`?token=` as Jupyter does); the
/// page passes it on to its own requests.
async fn check_token(
    State(st): State<Shared>,
    Query(q): Query<HashMap<String, String>>,
    req: Request,
    next: Next,
) -> Response {
    // the script holds no data; everything it asks for carries the token
    let public = req.uri().path() == "/app.js";
    match &st.token {
        Some(t) if !public && q.get("token") != Some(t) => (
            StatusCode::FORBIDDEN,
            "this viewer asks for the access token it printed when it started: open the URL it \
             printed, which ends in ?token=...\n",
        )
            .into_response(),
        _ => next.run(req).await,
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
    match histogram(s, q.channel, q.samples) {
        Ok(h) => Json::<Histogram>(h).into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

#[derive(serde::Deserialize)]
struct ScopeQuery {
    stream: String,
}

async fn scope_socket(ws: WebSocketUpgrade, Query(q): Query<ScopeQuery>) -> Response {
    ws.on_upgrade(move |socket| scope_session(socket, q.stream))
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

async fn scope_session(mut socket: WebSocket, name: String) {
    let mut scope: Option<Scope> = None;
    while let Some(Ok(msg)) = socket.recv().await {
        let Message::Text(text) = msg else { continue };
        let reply = match serde_json::from_str::<ScopeRequest>(text.as_str()) {
            Err(e) => vec![error_message(&format!("bad request {text:?}: {e}"))],
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
        };
        for m in reply {
            if socket.send(m).await.is_err() {
                return;
            }
        }
    }
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
    let f: ScopeFrame = scope.frame();
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
