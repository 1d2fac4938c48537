//! TCP and UNIX-domain listeners for a [`Buffer`], one thread per connection (as the
//! reference server does: a blocking WAIT_DAT holds only its own connection).
//!
//! Unlike the reference: TCP_NODELAY on every connection and each reply written in one
//! `write` (the reference's Nagle + split writes cost 40 ms per request), the kernel's
//! default socket buffers (the reference's 16 KiB ones stall large writes for 0.3–1 s), a
//! blocking `accept` (no 1 ms polling), and a loopback bind unless asked otherwise.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::buffer::{After, Buffer, RingSendError};
use crate::codec::{cmd, put_status};
use crate::framing::{phase, ConnState, FrameError, MemoryBudget, MessageReader};
use crate::polling::{PollShared, PolledSocket, Polling};

/// Where and how to listen.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// TCP address (`None`: no TCP listener). The default is `127.0.0.1:1972`.
    pub tcp: Option<String>,
    /// UNIX-domain socket path (`None`: none).
    pub unix: Option<PathBuf>,
    /// Largest request payload accepted, in bytes; larger ones are refused before anything
    /// is allocated for them.
    pub max_message: usize,
    /// Most connections served at once. When all are taken, a new client gets the place of
    /// the connection stalled longest in the middle of a message, or else idle longest; only
    /// when every connection is handling a request is it closed (with a log line).
    pub max_clients: usize,
    /// How long a whole message may take to arrive from its first byte; a client that is
    /// slower (stalled, or dripping bytes) is dropped.
    pub message_timeout: Duration,
    /// Bytes that messages being received may hold, over all connections together; a
    /// message that would go beyond is refused (error reply, connection closed) before
    /// anything is allocated for it.
    pub memory_budget: usize,
    /// How a connection waits for its next request (see [`crate::polling`]): by default
    /// it polls for clients in a request/response loop and holds PM QoS while one is.
    pub polling: Polling,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            tcp: Some("127.0.0.1:1972".into()),
            unix: None,
            max_message: 1 << 30,
            max_clients: 256,
            message_timeout: Duration::from_secs(10),
            memory_budget: 2 << 30,
            polling: Polling::default(),
        }
    }
}

/// Shared by the accept loops.
struct Shared {
    buffer: Arc<Buffer>,
    cfg: ServerConfig,
    // Ordering: a flag and a counter with no data published through them: Relaxed.
    stop: AtomicBool,
    clients: AtomicUsize,
    budget: Arc<MemoryBudget>,
    /// Open connections, for choosing one to drop when the server is full and for closing
    /// them all at shutdown.
    conns: Mutex<Vec<Arc<Conn>>>,
    /// Connection threads not yet ended (counted until their last step, log lines
    /// included), and the signal that one ended: shutdown waits for none to be left.
    threads: Mutex<usize>,
    ended: Condvar,
    epoch: Instant,
    poll: PollShared,
}

/// One open connection as the accept loop sees it.
struct Conn {
    state: Arc<ConnState>,
    /// A handle on the socket to shut it down from the accept loop.
    sock: OwnedFd,
    peer: String,
}

/// Longest [`Server::close`] waits for connection threads to end. Each ends within about
/// 100 ms of its socket being shut down (a WAIT_DAT notices within one wait slice); the bound
/// only keeps a stuck thread from hanging the caller.
const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// A running server. [`Server::close`] (also [`Server::shutdown`] and dropping it) stops
/// accepting, closes every connection and waits for their threads.
pub struct Server {
    shared: Arc<Shared>,
    tcp_addr: Option<SocketAddr>,
    unix_path: Option<PathBuf>,
    /// The accept threads (taken at close).
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("tcp", &self.tcp_addr)
            .field("unix", &self.unix_path)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Bind the listeners and start accepting. A config that fails [`ServerConfig::validate`] is refused (`InvalidInput`, its
    /// [`crate::ConfigError`] inside).
    pub fn start(buffer: Arc<Buffer>, cfg: ServerConfig) -> io::Result<Server> {
        cfg.validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let tcp = match &cfg.tcp {
            Some(addr) => {
                let addrs: Vec<SocketAddr> = addr
                    .to_socket_addrs()
                    .map_err(|e| {
                        io::Error::new(
                            e.kind(),
                            format!("TCP address {addr:?} (want HOST:PORT): {e}"),
                        )
                    })?
                    .collect();
                let l = TcpListener::bind(&addrs[..]).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot listen on TCP {addr}: {e} (is another buffer server using the port? choose another with --bind HOST:PORT)"),
                    )
                })?;
                Some(l)
            }
            None => None,
        };
        let unix = match &cfg.unix {
            Some(path) => Some(bind_unix(path)?),
            None => None,
        };
        let tcp_addr = tcp.as_ref().map(TcpListener::local_addr).transpose()?;
        let shared = Arc::new(Shared {
            buffer,
            cfg: cfg.clone(),
            stop: AtomicBool::new(false),
            clients: AtomicUsize::new(0),
            budget: Arc::new(MemoryBudget::new(cfg.memory_budget)),
            conns: Mutex::new(Vec::new()),
            threads: Mutex::new(0),
            ended: Condvar::new(),
            epoch: Instant::now(),
            poll: PollShared::new(cfg.polling),
        });
        let mut threads = Vec::new();
        if let Some(l) = tcp {
            let sh = shared.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("ft-accept-tcp".into())
                    .spawn(move || accept_tcp(&sh, &l))?,
            );
        }
        if let Some(l) = unix {
            let sh = shared.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("ft-accept-unix".into())
                    .spawn(move || accept_unix(&sh, &l))?,
            );
        }
        Ok(Server {
            shared,
            tcp_addr,
            unix_path: cfg.unix.clone(),
            threads: Mutex::new(threads),
        })
    }

    /// The TCP address actually bound (with the real port when 0 was asked for).
    #[must_use]
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_addr
    }

    /// The UNIX socket path.
    #[must_use]
    pub fn unix_path(&self) -> Option<&Path> {
        self.unix_path.as_deref()
    }

    /// The buffer served.
    #[must_use]
    pub fn buffer(&self) -> &Arc<Buffer> {
        &self.shared.buffer
    }

    /// Bytes that messages being received hold now, over all connections (never more than
    /// [`ServerConfig::memory_budget`]).
    #[must_use]
    pub fn partial_bytes(&self) -> usize {
        self.shared.budget.held()
    }

    /// Connections open now (0 once [`Server::close`] returned, unless a connection thread
    /// outlived its wait: then it counts until it ends).
    #[must_use]
    pub fn clients(&self) -> usize {
        self.shared.clients.load(Ordering::Relaxed)
    }

    /// Connections polled for now (clients in a request/response loop), and whether the
    /// server holds the PM QoS request for them.
    #[must_use]
    pub fn polling(&self) -> (usize, bool) {
        (self.shared.poll.looping(), self.shared.poll.holds_pm_qos())
    }

    /// [`Server::close`], taking the server.
    pub fn shutdown(self) {
        self.close();
    }

    /// Whether [`Server::close`] was called.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }

    /// Stop: stop accepting (the UNIX socket file is removed), end every WAIT_DAT, shut every
    /// connection down (its client sees it closed) and wait for the connection threads to
    /// end. A second call does nothing more.
    pub fn close(&self) {
        let accept =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(PoisonError::into_inner));
        if accept.is_empty() {
            return;
        }
        self.shared.stop.store(true, Ordering::Relaxed);
        // wake the blocking accepts
        if let Some(a) = self.tcp_addr {
            let _ = TcpStream::connect_timeout(&a, Duration::from_millis(200));
        }
        if let Some(p) = &self.unix_path {
            let _ = UnixStream::connect(p);
        }
        for t in accept {
            let _ = t.join();
        }
        if let Some(p) = &self.unix_path {
            let _ = std::fs::remove_file(p);
        }
        // no connection comes any more: end the waits and close the ones there are
        self.shared.buffer.end_waits();
        for c in self
            .shared
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            let _ = rustix::net::shutdown(&c.sock, rustix::net::Shutdown::Both);
        }
        let left = self
            .shared
            .threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (left, timeout) = self
            .shared
            .ended
            .wait_timeout_while(left, CLOSE_WAIT, |n| *n > 0)
            .unwrap_or_else(PoisonError::into_inner);
        if timeout.timed_out() {
            tracing::warn!(
                "{} connection threads have not ended {CLOSE_WAIT:?} after their sockets were shut down",
                *left
            );
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.close();
    }
}

/// Bind a UNIX socket only this user may use (0600 whatever the umask; other users'
/// connections are refused in [`accept_unix`]), replacing a stale socket file nobody
/// listens on.
fn bind_unix(path: &Path) -> io::Result<UnixListener> {
    match rtloop_sys::bind_private_unix(path) {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    e.kind(),
                    format!("another server is listening on {}", path.display()),
                ));
            }
            tracing::info!(path = %path.display(), "removing a stale socket file");
            std::fs::remove_file(path)?;
            rtloop_sys::bind_private_unix(path)
        }
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("cannot listen on UNIX socket {}: {e}", path.display()),
        )),
    }
}

/// Take a place for a new connection: a free one, or the place of the connection stalled
/// longest mid-message, or else idle longest (it is shut down). False when every connection
/// is busy handling a request.
fn admit(sh: &Shared, peer: &str) -> bool {
    let n = sh.clients.fetch_add(1, Ordering::Relaxed);
    if n < sh.cfg.max_clients {
        return true;
    }
    let victim = {
        let conns = sh
            .conns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let pick = |p: u8| {
            conns
                .iter()
                .filter(|c| c.state.get().0 == p)
                .min_by_key(|c| c.state.get().1)
                .cloned()
        };
        pick(phase::RECEIVING).or_else(|| pick(phase::IDLE))
    };
    match victim {
        Some(v) => {
            let (p, since) = v.state.get();
            let for_s = (sh.epoch.elapsed().as_nanos() as u64).saturating_sub(since) as f64 * 1e-9;
            tracing::warn!(%peer, dropped = %v.peer, "{n} clients are connected, the most allowed (--max-clients); dropping the one {} for {for_s:.1} s to make room", if p == phase::RECEIVING { "stalled mid-message" } else { "idle" });
            // its thread sees the socket closed and leaves (and gives its place back)
            let _ = rustix::net::shutdown(&v.sock, rustix::net::Shutdown::Both);
            true
        }
        None => {
            sh.clients.fetch_sub(1, Ordering::Relaxed);
            tracing::warn!(%peer, "{n} clients are connected, the most allowed (--max-clients), all handling requests; closing this one");
            false
        }
    }
}

/// How long a blocked read waits before the reader checks its message deadline again.
fn read_slice(cfg: &ServerConfig) -> Duration {
    (cfg.message_timeout / 4).clamp(Duration::from_millis(1), Duration::from_secs(1))
}

fn accept_tcp(sh: &Arc<Shared>, l: &TcpListener) {
    for conn in l.incoming() {
        if sh.stop.load(Ordering::Relaxed) {
            break;
        }
        let s = match conn {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept: {e}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let peer = s
            .peer_addr()
            .map_or_else(|_| "tcp:?".into(), |a| a.to_string());
        if !admit(sh, &peer) {
            continue;
        }
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(read_slice(&sh.cfg)));
        let Ok(handle) = s.as_fd().try_clone_to_owned() else {
            sh.clients.fetch_sub(1, Ordering::Relaxed);
            continue;
        };
        let sh2 = sh.clone();
        spawn_connection(sh, peer, handle, move |peer, state| {
            serve_connection(&sh2, QuickAck(s), peer, state)
        });
    }
}

fn accept_unix(sh: &Arc<Shared>, l: &UnixListener) {
    let mut n = 0u64;
    for conn in l.incoming() {
        if sh.stop.load(Ordering::Relaxed) {
            break;
        }
        let s = match conn {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept: {e}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        n += 1;
        let peer = format!("unix#{n}");
        // the buffer's data is this user's: as the stream files are 0600, so is the socket
        if let Err(uid) = rtloop_sys::peer_is_me(&s) {
            tracing::warn!(%peer, ?uid, "refused a connection from another user");
            continue;
        }
        if !admit(sh, &peer) {
            continue;
        }
        let _ = s.set_read_timeout(Some(read_slice(&sh.cfg)));
        unix_buffers(&s);
        let Ok(handle) = s.as_fd().try_clone_to_owned() else {
            sh.clients.fetch_sub(1, Ordering::Relaxed);
            continue;
        };
        let sh2 = sh.clone();
        spawn_connection(sh, peer, handle, move |peer, state| {
            serve_connection(&sh2, s, peer, state)
        });
    }
}

/// UNIX stream sockets charge a message to the sender's buffer (about 208 KiB by default),
/// so a 256 KiB block would take several wake-ups each way; 4 MiB holds any FAQ block.
pub(crate) fn unix_buffers(s: &UnixStream) {
    let _ = rustix::net::sockopt::set_socket_send_buffer_size(s, 4 << 20);
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size(s, 4 << 20);
}

fn spawn_connection(
    sh: &Arc<Shared>,
    peer: String,
    sock: OwnedFd,
    f: impl FnOnce(&str, Arc<ConnState>) + Send + 'static,
) {
    let state = Arc::new(ConnState::default());
    let conn = Arc::new(Conn {
        state: state.clone(),
        sock,
        peer: peer.clone(),
    });
    sh.conns
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(conn.clone());
    let sh2 = sh.clone();
    let leave = move |sh: &Shared| {
        sh.conns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|c| !Arc::ptr_eq(c, &conn));
        sh.clients.fetch_sub(1, Ordering::Relaxed);
    };
    let leave2 = leave.clone();
    *sh.threads.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    let r = std::thread::Builder::new()
        .name("ft-conn".into())
        .spawn(move || {
            // counted until the very end, so that nothing of it runs after `close` returns
            let _ended = ThreadEnded(&sh2);
            tracing::debug!(%peer, "connected");
            f(&peer, state);
            leave(&sh2);
            tracing::debug!(%peer, "disconnected");
        });
    if let Err(e) = r {
        leave2(sh);
        drop(ThreadEnded(sh));
        tracing::error!("cannot start a connection thread: {e}");
    }
}

/// Counts a connection thread out when dropped (at its end, or as a panic unwinds it).
struct ThreadEnded<'a>(&'a Shared);

impl Drop for ThreadEnded<'_> {
    fn drop(&mut self) {
        *self
            .0
            .threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner) -= 1;
        self.0.ended.notify_all();
    }
}

/// A TCP connection that acknowledges every segment at once (TCP_QUICKACK before each read).
///
/// FieldTrip's C client library (also inside the MATLAB mex) leaves Nagle on and sends a
/// request of more than 1460 bytes as two writes, prefix then payload: Nagle holds the payload
/// until the prefix is acknowledged, and a server that delays its ACK (Linux: up to 40 ms) stalls
/// every such request — the FAQ's "dramatic dip". Acknowledging at once removes the stall for
/// unchanged clients; the kernel clears the flag by itself, hence before every read.
pub struct QuickAck(pub TcpStream);

impl Read for QuickAck {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let _ = rustix::net::sockopt::set_tcp_quickack(&self.0, true);
        self.0.read(buf)
    }
}

impl Write for QuickAck {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.0.write_vectored(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl AsFd for QuickAck {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// Serve one connection until the client closes it or breaks the protocol.
fn serve_connection<S: Read + Write + AsFd>(
    sh: &Shared,
    sock: S,
    peer: &str,
    state: Arc<ConnState>,
) {
    let rd = MessageReader::for_server(
        sh.cfg.max_message,
        sh.budget.clone(),
        sh.cfg.message_timeout,
        state,
        sh.epoch,
    );
    let mut sock = PolledSocket::new(sock, &sh.poll, sh.cfg.polling);
    serve_with(&sh.buffer, &mut sock, peer, rd);
}

/// The request loop over any byte stream (a socket, or bytes in a test).
pub fn serve<S: Read + Write>(buffer: &Buffer, sock: &mut S, peer: &str, max_message: usize) {
    serve_with(buffer, sock, peer, MessageReader::new(max_message));
}

fn serve_with<S: Read + Write>(buffer: &Buffer, sock: &mut S, peer: &str, mut rd: MessageReader) {
    let mut out = Vec::with_capacity(64 * 1024);
    loop {
        out.clear();
        match rd.next(sock) {
            Ok(None) => return,
            Ok(Some(prefix)) => {
                let (after, ring) = buffer.handle_for_socket(&prefix, rd.payload(), &mut out, peer);
                if let Some(ring) = ring {
                    // a large GET_DAT: its values go from the ring straight to the socket
                    match buffer.send_ring_reply(&out, &ring, sock) {
                        Ok(()) => {}
                        Err(RingSendError::Io(e)) => {
                            tracing::info!(%peer, "reply not sent, closing: {e}");
                            return;
                        }
                        Err(e @ RingSendError::Lapped(_)) => {
                            tracing::warn!(%peer, "GET_DAT: {e}; closing the connection (a client this slow to read should ask for samples further from the writer, or the server should keep more: --capacity, --max-bytes)");
                            return;
                        }
                    }
                } else if !out.is_empty() {
                    if let Err(e) = sock.write_all(&out) {
                        tracing::info!(%peer, "reply not sent, closing: {e}");
                        return;
                    }
                }
                if out.capacity() > (16 << 20) {
                    out = Vec::with_capacity(64 * 1024);
                }
                if after == After::Close {
                    return;
                }
            }
            Err(FrameError::TooLarge {
                prefix,
                command,
                code,
                bufsize,
                limit,
            }) => {
                let reply = cmd::error_reply(code);
                tracing::warn!(%peer, "{command} announces {bufsize} payload bytes, more than the limit of {limit} (--max-message); answering {} and closing", reply.map_or("nothing", cmd::name));
                if let Some(r) = reply.filter(|_| code >> 8 != 0x05) {
                    put_status(prefix.order, r, &mut out);
                    let _ = sock.write_all(&out);
                }
                return;
            }
            Err(FrameError::OverBudget {
                prefix,
                command,
                code,
                bufsize,
                held,
                budget,
            }) => {
                let reply = cmd::error_reply(code);
                tracing::warn!(%peer, "{command} announces {bufsize} payload bytes, but partial messages already hold {held} of the server's {budget} byte budget (--memory-mb); answering {} and closing", reply.map_or("nothing", cmd::name));
                if let Some(r) = reply.filter(|_| code >> 8 != 0x05) {
                    put_status(prefix.order, r, &mut out);
                    let _ = sock.write_all(&out);
                }
                return;
            }
            Err(e @ FrameError::BadVersion(_)) => {
                tracing::warn!(%peer, "{e}");
                return;
            }
            Err(e) => {
                tracing::warn!(%peer, "{e}; closing the connection");
                return;
            }
        }
    }
}
