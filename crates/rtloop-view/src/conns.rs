//! The viewer's connections: a header timeout, and a cap on how many are open at once.
//!
//! hyper serves each connection (the HTTP/1 server axum would use) with a header-read
//! timeout: a connection gets `header_timeout` to send a request's whole header, counted
//! from when it connected or got its last answer. A connection that dribbles header bytes,
//! or sends nothing, or idles between requests, is closed when that time is up.
//!
//! At most `max_connections` are open at once (fewer when the open-file limit leaves less
//! room). When all are taken, a new client gets the place of the connection idle longest,
//! as the FieldTrip server does; only when every one is handling a request or carrying a
//! scope is the new one answered 503 and closed.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tower_service::Service as _;

/// Files kept free beside the connections, for the streams the scopes open and the rest of
/// the process.
const FD_RESERVE: u64 = 32;

/// One open connection as the accept loop sees it.
struct Slot {
    // Ordering: these are read and written on the server's one thread (a current-thread
    // runtime); atomics only make the slot Sync. Relaxed.
    /// Requests being handled now.
    busy: AtomicU32,
    /// Upgraded to a WebSocket (a scope): never evicted.
    upgraded: AtomicBool,
    /// When it last became idle (ns since the registry's epoch).
    idle_since: AtomicU64,
    /// Told to close (evicted).
    kill: tokio::sync::Notify,
    peer: SocketAddr,
}

/// Every open connection.
pub(crate) struct Registry {
    slots: Mutex<HashMap<u64, Arc<Slot>>>,
    next_id: AtomicU64,
    epoch: Instant,
    cap: usize,
    last_warn: Mutex<Option<Instant>>,
}

/// A connection's place in the registry; the place is given back when the connection's
/// task and its scope (if upgraded) have both let go of it.
pub(crate) struct Lease {
    id: u64,
    slot: Arc<Slot>,
    reg: Arc<Registry>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.reg.slots().remove(&self.id);
    }
}

/// The connection a request came on (a request extension), for the WebSocket upgrade to
/// mark it as a scope and hold its place for as long as the scope runs.
#[derive(Clone)]
pub(crate) struct ConnHandle(pub(crate) Arc<Lease>);

impl ConnHandle {
    /// Mark the connection as a scope's WebSocket: it is not idle, whatever it sends.
    pub(crate) fn mark_upgraded(&self) {
        self.0.slot.upgraded.store(true, Ordering::Relaxed);
    }
}

/// Marks a connection busy while one request is handled.
struct Busy(Arc<Lease>);

impl Busy {
    fn new(l: &Arc<Lease>) -> Busy {
        l.slot.busy.fetch_add(1, Ordering::Relaxed);
        Busy(l.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let now = self.0.reg.now_ns();
        self.0.slot.idle_since.store(now, Ordering::Relaxed);
        self.0.slot.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Registry {
    pub(crate) fn new(max_connections: usize) -> Arc<Registry> {
        Arc::new(Registry {
            slots: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            epoch: Instant::now(),
            cap: effective_cap(max_connections),
            last_warn: Mutex::new(None),
        })
    }

    /// The most connections served at once.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<u64, Arc<Slot>>> {
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Take a place for a new connection: a free one, or the place of the connection idle
    /// longest (it is told to close). None when every connection is busy.
    fn admit(self: &Arc<Self>, peer: SocketAddr) -> Option<Arc<Lease>> {
        let mut slots = self.slots();
        if slots.len() >= self.cap {
            let (id, victim) = oldest_idle(&slots)?;
            slots.remove(&id);
            victim.kill.notify_one();
            self.warn_full(&peer, &victim);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot {
            busy: AtomicU32::new(0),
            upgraded: AtomicBool::new(false),
            idle_since: AtomicU64::new(self.now_ns()),
            kill: tokio::sync::Notify::new(),
            peer,
        });
        slots.insert(id, slot.clone());
        drop(slots);
        Some(Arc::new(Lease {
            id,
            slot,
            reg: self.clone(),
        }))
    }

    /// Close the connection idle longest (when the process is out of files). False when
    /// none is idle.
    fn evict_one(&self) -> bool {
        let mut slots = self.slots();
        match oldest_idle(&slots) {
            Some((id, victim)) => {
                slots.remove(&id);
                victim.kill.notify_one();
                true
            }
            None => false,
        }
    }

    /// One line when the viewer is full, then at most one every 10 s (a flood of
    /// connections must not become a flood of log lines).
    fn warn_full(&self, peer: &SocketAddr, victim: &Slot) {
        let mut last = self
            .last_warn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.is_some_and(|t| t.elapsed() < Duration::from_secs(10)) {
            return;
        }
        *last = Some(Instant::now());
        let idle_s = self
            .now_ns()
            .saturating_sub(victim.idle_since.load(Ordering::Relaxed)) as f64
            * 1e-9;
        tracing::warn!(
            %peer, dropped = %victim.peer,
            "viewer: {} connections are open, the most allowed (--max-connections); closing the one idle longest ({idle_s:.1} s) to make room",
            self.cap
        );
    }
}

fn oldest_idle(slots: &HashMap<u64, Arc<Slot>>) -> Option<(u64, Arc<Slot>)> {
    slots
        .iter()
        .filter(|(_, s)| s.busy.load(Ordering::Relaxed) == 0 && !s.upgraded.load(Ordering::Relaxed))
        .min_by_key(|(_, s)| s.idle_since.load(Ordering::Relaxed))
        .map(|(id, s)| (*id, s.clone()))
}

/// `max_connections`, or fewer when the open-file limit leaves less room: a full viewer
/// must still have a file for the next client (and for the streams it opens).
fn effective_cap(max_connections: usize) -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    let open = std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count() as u64);
    let room = match limit {
        Some(l) => usize::try_from(l.saturating_sub(open + FD_RESERVE)).unwrap_or(usize::MAX),
        None => usize::MAX,
    };
    max_connections.min(room).max(1)
}

/// How connections are served.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) header_timeout: Duration,
}

/// Accept and serve until `stopped`; connections still open are dropped with the runtime.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    reg: Arc<Registry>,
    limits: Limits,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                match reg.admit(peer) {
                    Some(lease) => {
                        tokio::spawn(serve_one(stream, app.clone(), lease, limits));
                    }
                    None => refuse_full(&stream, reg.cap()),
                }
                // let a connection told to make room close (and give its file back) before
                // the next is taken
                tokio::task::yield_now().await;
            }
            Err(e) => {
                // out of files (EMFILE, ENFILE): make room by closing the connection idle
                // longest; anything else (a connection reset before it was taken) passes
                let out_of_files = matches!(e.raw_os_error(), Some(23 | 24));
                if out_of_files && !reg.evict_one() {
                    tracing::warn!("viewer: cannot accept a connection: {e}");
                }
                tokio::time::sleep(Duration::from_millis(if out_of_files { 20 } else { 1 })).await;
            }
        }
    }
}

/// Every connection is handling a request or carrying a scope: say so, and close.
fn refuse_full(stream: &TcpStream, cap: usize) {
    let body = format!(
        "the viewer has {cap} connections open, the most it serves at once \
         (--max-connections), all of them busy; try again\n"
    );
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    // a fresh socket's send buffer takes these few bytes at once; if not, the close says it
    let _ = stream.try_write(reply.as_bytes());
}

async fn serve_one(stream: TcpStream, app: Router, lease: Arc<Lease>, limits: Limits) {
    let _ = stream.set_nodelay(true);
    let conn_lease = lease.clone();
    let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let mut app = app.clone();
        let busy = Busy::new(&conn_lease);
        let mut req = req.map(Body::new);
        req.extensions_mut().insert(ConnHandle(conn_lease.clone()));
        async move {
            let res = app.call(req).await;
            drop(busy);
            res
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let conn = builder
        .serve_connection(TokioIo::new(stream), svc)
        .with_upgrades();
    tokio::select! {
        r = conn => {
            if let Err(e) = r {
                tracing::debug!(peer = %lease.slot.peer, "viewer: connection ended: {e}");
            }
        }
        // evicted: dropping the connection closes its socket
        () = lease.slot.kill.notified() => {}
    }
}
