//! UNIX stream sockets and TCP (127.0.0.1, `TCP_NODELAY`) as channels. A [`Listener`] accepts
//! connections; a connection ([`Conn`]) becomes a sender, a receiver, or both over one
//! socket ([`Conn::split`]: the lab's device and host each send one way and receive the
//! other). [`FanoutSender`] writes every send to each of several receivers in turn.
//!
//! A receiver never switches its socket to non-blocking mode (a sender may share it): a poll
//! is a `recv` with `MSG_DONTWAIT`, a wait is a blocking `recv` with `SO_RCVTIMEO`, set only
//! when the timeout changes, after an optional spin of non-blocking `recv`s.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rtloop_sys::SpinRead;

use crate::{BlockReceiver, Endpoint, Receiver, ReceiverOptions, Sender, TransportError};

/// The UNIX socket transport's name.
pub const UNIX: &str = "unix";
/// The TCP transport's name.
pub const TCP: &str = "tcp";

/// One connected socket.
#[derive(Debug)]
pub enum Conn {
    /// A UNIX stream socket.
    Unix(UnixStream),
    /// TCP, `TCP_NODELAY` set.
    Tcp(TcpStream),
}

/// Connect to a listening socket endpoint.
pub fn connect(endpoint: &Endpoint) -> Result<Conn, TransportError> {
    let failed = |transport, source| TransportError::Endpoint {
        transport,
        action: "connect to",
        endpoint: endpoint.to_string(),
        source,
    };
    match endpoint {
        Endpoint::Unix(path) => UnixStream::connect(path)
            .map(Conn::Unix)
            .map_err(|e| failed(UNIX, e)),
        Endpoint::Tcp(addr) => {
            let s = TcpStream::connect(addr).map_err(|e| failed(TCP, e))?;
            s.set_nodelay(true).map_err(|e| failed(TCP, e))?;
            Ok(Conn::Tcp(s))
        }
        other => Err(TransportError::Unknown {
            given: other.transport().to_owned(),
            allowed: format!("{UNIX}, {TCP}"),
        }),
    }
}

impl Conn {
    /// The transport's name.
    #[must_use]
    pub fn transport(&self) -> &'static str {
        match self {
            Conn::Unix(_) => UNIX,
            Conn::Tcp(_) => TCP,
        }
    }

    fn io(&self, action: &'static str) -> impl FnOnce(io::Error) -> TransportError {
        let transport = self.transport();
        move |source| TransportError::io(transport, action, source)
    }

    /// Ask the kernel for a send buffer of `bytes` (best effort: it may cap it).
    #[must_use]
    pub fn send_buffer(self, bytes: usize) -> Conn {
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&self, bytes);
        self
    }

    /// Ask the kernel for a receive buffer of `bytes` (best effort: it may cap it).
    #[must_use]
    pub fn recv_buffer(self, bytes: usize) -> Conn {
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&self, bytes);
        self
    }

    fn set_read_timeout(&self, d: Duration) -> io::Result<()> {
        match self {
            Conn::Unix(s) => s.set_read_timeout(Some(d)),
            Conn::Tcp(s) => s.set_read_timeout(Some(d)),
        }
    }

    fn peer(&self) -> String {
        match self {
            Conn::Unix(s) => s
                .peer_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
                .unwrap_or_default(),
            Conn::Tcp(s) => s.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
        }
    }

    /// This connection as a sender.
    #[must_use]
    pub fn sender(self) -> SocketSender {
        SocketSender { conn: self }
    }

    /// This connection as a receiver.
    #[must_use]
    pub fn receiver(self, opts: ReceiverOptions) -> SocketReceiver {
        SocketReceiver {
            buf: vec![0; opts.unit * opts.batch],
            unit: opts.unit,
            spin: opts.spin,
            have: 0,
            handed: 0,
            timeout: None,
            closed: false,
            conn: self,
        }
    }

    /// Both ways over this one socket: a sender and a receiver (on a duplicate of the
    /// descriptor).
    pub fn split(
        self,
        opts: ReceiverOptions,
    ) -> Result<(SocketSender, SocketReceiver), TransportError> {
        let other = match &self {
            Conn::Unix(s) => s.try_clone().map(Conn::Unix),
            Conn::Tcp(s) => s.try_clone().map(Conn::Tcp),
        }
        .map_err(self.io("duplicate the socket"))?;
        Ok((self.sender(), other.receiver(opts)))
    }
}

impl AsFd for Conn {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Conn::Unix(s) => s.as_fd(),
            Conn::Tcp(s) => s.as_fd(),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(buf),
            Conn::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Unix(s) => s.write(buf),
            Conn::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Unix(s) => s.flush(),
            Conn::Tcp(s) => s.flush(),
        }
    }
}

/// A listening socket. A UNIX socket's file is removed when the listener is dropped.
#[derive(Debug)]
pub enum Listener {
    /// On a path.
    Unix(UnixListener, PathBuf),
    /// On a TCP address.
    Tcp(TcpListener),
}

impl Listener {
    /// Listen at `endpoint` (a stale UNIX socket file is replaced; TCP port 0 picks a free
    /// port: see [`Listener::endpoint`]).
    pub fn bind(endpoint: &Endpoint) -> Result<Listener, TransportError> {
        let failed = |transport, source| TransportError::Endpoint {
            transport,
            action: "bind",
            endpoint: endpoint.to_string(),
            source,
        };
        match endpoint {
            Endpoint::Unix(path) => {
                let _ = std::fs::remove_file(path);
                let l = UnixListener::bind(path).map_err(|e| failed(UNIX, e))?;
                Ok(Listener::Unix(l, path.clone()))
            }
            Endpoint::Tcp(addr) => TcpListener::bind(addr)
                .map(Listener::Tcp)
                .map_err(|e| failed(TCP, e)),
            other => Err(TransportError::Unknown {
                given: other.transport().to_owned(),
                allowed: format!("{UNIX}, {TCP}"),
            }),
        }
    }

    fn transport(&self) -> &'static str {
        match self {
            Listener::Unix(..) => UNIX,
            Listener::Tcp(_) => TCP,
        }
    }

    /// Where senders and receivers connect.
    pub fn endpoint(&self) -> Result<Endpoint, TransportError> {
        Ok(match self {
            Listener::Unix(_, p) => Endpoint::Unix(p.clone()),
            Listener::Tcp(l) => Endpoint::Tcp(
                l.local_addr()
                    .map_err(|e| TransportError::io(TCP, "local address", e))?
                    .to_string(),
            ),
        })
    }

    /// The next connection, waiting at most `timeout` (checking every millisecond); `None`
    /// if nobody connected in time. The connection blocks; TCP's has `TCP_NODELAY`.
    pub fn accept(&self, timeout: Duration) -> Result<Option<Conn>, TransportError> {
        let transport = self.transport();
        let io = |action| move |e| TransportError::io(transport, action, e);
        match self {
            Listener::Unix(l, _) => l.set_nonblocking(true),
            Listener::Tcp(l) => l.set_nonblocking(true),
        }
        .map_err(io("set non-blocking"))?;
        let deadline = Instant::now() + timeout;
        loop {
            let r = match self {
                Listener::Unix(l, _) => l.accept().map(|(s, _)| Conn::Unix(s)),
                Listener::Tcp(l) => l.accept().map(|(s, _)| Conn::Tcp(s)),
            };
            match r {
                Ok(c) => {
                    match &c {
                        Conn::Unix(s) => s.set_nonblocking(false),
                        Conn::Tcp(s) => s.set_nonblocking(false).and_then(|()| s.set_nodelay(true)),
                    }
                    .map_err(io("set blocking"))?;
                    return Ok(Some(c));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(io("accept")(e)),
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = self {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The sending half of a connection.
#[derive(Debug)]
pub struct SocketSender {
    conn: Conn,
}

impl Sender for SocketSender {
    fn endpoint(&self) -> String {
        self.conn.peer()
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        let e = self.conn.io("send");
        self.conn.write_all(bytes).map_err(e)
    }

    fn finish(&mut self) -> Result<(), TransportError> {
        let e = self.conn.io("flush");
        self.conn.flush().map_err(e)
    }
}

/// The receiving half of a connection: `recv` reads into its own buffer and hands out whole
/// units (a unit cut by a read's end is completed by the next); `fill` reads straight into
/// the caller's block.
#[derive(Debug)]
pub struct SocketReceiver {
    conn: Conn,
    buf: Vec<u8>,
    unit: usize,
    spin: Duration,
    /// Bytes in `buf`; the first `handed` of them were returned by the last `recv`.
    have: usize,
    handed: usize,
    /// The socket's receive timeout, as last set.
    timeout: Option<Duration>,
    /// The sender closed the connection; reported by the next call.
    closed: bool,
}

impl SocketReceiver {
    fn set_timeout(&mut self, timeout: Duration) -> Result<(), TransportError> {
        if self.timeout != Some(timeout) {
            let e = self.conn.io("set the receive timeout");
            // a zero SO_RCVTIMEO would mean "forever"
            self.conn
                .set_read_timeout(timeout.max(Duration::from_micros(1)))
                .map_err(e)?;
            self.timeout = Some(timeout);
        }
        Ok(())
    }

    fn closed(&self) -> TransportError {
        TransportError::Closed {
            transport: self.conn.transport(),
        }
    }
}

impl Receiver for SocketReceiver {
    fn recv(&mut self, timeout: Duration) -> Result<&[u8], TransportError> {
        if self.closed {
            return Err(self.closed());
        }
        // keep the cut unit's bytes
        self.buf.copy_within(self.handed..self.have, 0);
        self.have -= self.handed;
        self.handed = 0;
        let r = if timeout.is_zero() {
            // a poll: this call only, the socket stays blocking for a sender sharing it
            rustix::net::recv(
                &self.conn,
                &mut self.buf[self.have..],
                rustix::net::RecvFlags::DONTWAIT,
            )
            .map(|(n, _)| n)
            .map_err(io::Error::from)
        } else {
            self.set_timeout(timeout)?;
            SpinRead::new(&mut self.conn, self.spin).read(&mut self.buf[self.have..])
        };
        match r {
            // what came before the close is handed out now, the close reported next time
            Ok(0) => self.closed = true,
            Ok(n) => self.have += n,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(self.conn.io("recv")(e)),
        }
        self.handed = self.have / self.unit * self.unit;
        Ok(&self.buf[..self.handed])
    }
}

impl BlockReceiver for SocketReceiver {
    fn fill(
        &mut self,
        buf: &mut [u8],
        filled: &mut usize,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        if self.have > self.handed {
            // bytes a `recv` read but did not hand out come first
            let n = (self.have - self.handed).min(buf.len() - *filled);
            buf[*filled..*filled + n].copy_from_slice(&self.buf[self.handed..self.handed + n]);
            self.handed += n;
            *filled += n;
        }
        if self.closed {
            return Err(self.closed());
        }
        self.set_timeout(timeout)?;
        let mut r = SpinRead::new(&mut self.conn, self.spin);
        while *filled < buf.len() {
            match r.read(&mut buf[*filled..]) {
                Ok(0) => {
                    self.closed = true;
                    return Err(self.closed());
                }
                Ok(n) => *filled += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(())
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.conn.io("recv")(e)),
            }
        }
        Ok(())
    }
}

/// A listener that writes every send to each connected receiver in turn (blocking while a
/// receiver's socket buffer is full): one sender, several receivers.
#[derive(Debug)]
pub struct FanoutSender {
    listener: Listener,
    conns: Vec<Conn>,
}

impl FanoutSender {
    /// Listen at `endpoint`.
    pub fn bind(endpoint: &Endpoint) -> Result<FanoutSender, TransportError> {
        Ok(FanoutSender {
            listener: Listener::bind(endpoint)?,
            conns: Vec::new(),
        })
    }
}

impl Sender for FanoutSender {
    fn endpoint(&self) -> String {
        match &self.listener {
            Listener::Unix(_, p) => p.display().to_string(),
            Listener::Tcp(l) => l.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        }
    }

    fn prepare(&mut self, receivers: usize, timeout: Duration) -> Result<(), TransportError> {
        let deadline = Instant::now() + timeout;
        while self.conns.len() < receivers {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.listener.accept(left)? {
                Some(c) => self.conns.push(c),
                None => {
                    return Err(TransportError::NotConnected {
                        transport: self.listener.transport(),
                        connected: self.conns.len(),
                        wanted: receivers,
                        timeout,
                    })
                }
            }
        }
        Ok(())
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        for c in &mut self.conns {
            let e = c.io("send");
            c.write_all(bytes).map_err(e)?;
        }
        Ok(())
    }
}
