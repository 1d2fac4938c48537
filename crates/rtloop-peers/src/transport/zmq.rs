//! ZeroMQ publish/subscribe through libzmq, loaded at run time (`rtloop-native`) from, in
//! order: `$RTLOOP_LIBZMQ`, the pyzmq wheel of the Python that runs rtloop (`$RTLOOP_PYTHON`,
//! else `python3`; pyzmq bundles libzmq 4.3 in `pyzmq.libs/`), or the system's libzmq. The
//! writer is an XPUB socket with `ZMQ_XPUB_NODROP` (a full subscriber blocks the send instead
//! of losing the chunk, as every other transport here is run) and `ZMQ_XPUB_VERBOSE` (it sees
//! every subscription, so it knows when all readers are connected); each reader is a SUB
//! socket subscribed to everything. One chunk is one message.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{Receiver, Sender, TransportError, WrongSize};
use crate::{PeerError, Transport, Trial};

const XPUB: c_int = 9;
const SUB: c_int = 2;
const LINGER: c_int = 17;
const SUBSCRIBE: c_int = 6;
const RCVTIMEO: c_int = 27;
const LAST_ENDPOINT: c_int = 32;
const XPUB_VERBOSE: c_int = 40;
const XPUB_NODROP: c_int = 69;
const DONTWAIT: c_int = 1;
const EAGAIN: c_int = 11;
const EINTR: c_int = 4;

type Sock = *mut c_void;

// libzmq's C functions this transport calls (zmq.h, libzmq 4.x)
rtloop_native::native_api! { "libzmq", struct Api {
    zmq_version: fn(*mut c_int, *mut c_int, *mut c_int);
    zmq_ctx_new: fn() -> *mut c_void;
    zmq_ctx_term: fn(*mut c_void) -> c_int;
    zmq_socket: fn(*mut c_void, c_int) -> Sock;
    zmq_close: fn(Sock) -> c_int;
    zmq_setsockopt: fn(Sock, c_int, *const c_void, usize) -> c_int;
    zmq_getsockopt: fn(Sock, c_int, *mut c_void, *mut usize) -> c_int;
    zmq_bind: fn(Sock, *const c_char) -> c_int;
    zmq_connect: fn(Sock, *const c_char) -> c_int;
    zmq_send: fn(Sock, *const c_void, usize, c_int) -> c_int;
    zmq_recv: fn(Sock, *mut c_void, usize, c_int) -> c_int;
    zmq_errno: fn() -> c_int;
    zmq_strerror: fn(c_int) -> *const c_char;
} }

/// Where libzmq is found: `$RTLOOP_LIBZMQ`, the pyzmq wheel, the system's libzmq.
const LIBZMQ: rtloop_native::Library = rtloop_native::Library {
    name: "libzmq",
    env: "RTLOOP_LIBZMQ",
    wheel: "pyzmq",
    locate: "import glob, os, zmq; d = os.path.join(os.path.dirname(os.path.dirname(zmq.__file__)), 'pyzmq.libs'); print((sorted(glob.glob(os.path.join(d, 'libzmq*.so*'))) or [''])[0])",
    system: &["libzmq.so.5", "libzmq.so"],
    install: "pyzmq (`pip install pyzmq`, which bundles libzmq)",
};

/// A libzmq call that failed: libzmq's errno and its message for it.
#[derive(Debug, thiserror::Error)]
pub enum ZmqError {
    /// The call returned an error.
    #[error("{message} (errno {errno})")]
    Errno {
        /// `zmq_errno()`.
        errno: i32,
        /// `zmq_strerror(errno)`.
        message: String,
    },
    /// `zmq_ctx_new` returned null.
    #[error("no context")]
    NoContext,
    /// An endpoint with a NUL byte in it.
    #[error("endpoint {0:?} holds a NUL")]
    Nul(String),
}

/// libzmq, loaded.
pub struct Zmq {
    api: Api,
    /// Where it was loaded from.
    pub path: PathBuf,
}

impl Zmq {
    /// Find and load libzmq; the error lists what was tried and how to get it.
    pub fn load() -> Result<Zmq, PeerError> {
        // SAFETY: libzmq's initialisers only set up its own state, and `Api` is declared
        // from zmq.h.
        match unsafe { LIBZMQ.load(Api::load) } {
            Ok((api, path)) => Ok(Zmq { api, path }),
            Err(e) => Err(PeerError::Unavailable {
                transport: "zmq",
                reason: e.to_string(),
            }),
        }
    }

    /// libzmq's version, e.g. "4.3.5".
    #[must_use]
    pub fn version(&self) -> String {
        let (mut a, mut b, mut c) = (0, 0, 0);
        // SAFETY: three ints for libzmq to fill.
        unsafe { (self.api.zmq_version)(&mut a, &mut b, &mut c) };
        format!("{a}.{b}.{c}")
    }

    fn last_error(&self) -> (c_int, String) {
        // SAFETY: no arguments; errno of this thread's last libzmq call.
        let e = unsafe { (self.api.zmq_errno)() };
        // SAFETY: libzmq returns a static NUL-terminated string for any errno.
        let s = unsafe { CStr::from_ptr((self.api.zmq_strerror)(e)) };
        (e, s.to_string_lossy().into_owned())
    }
}

/// A context with one socket, closed (linger 0) and terminated when dropped.
struct Socket {
    z: Zmq,
    ctx: *mut c_void,
    sock: Sock,
    transport: Transport,
}

impl Socket {
    fn new(transport: Transport, kind: c_int) -> Result<Socket, PeerError> {
        let z = Zmq::load()?;
        // SAFETY: no arguments; a null context is checked below.
        let ctx = unsafe { (z.api.zmq_ctx_new)() };
        if ctx.is_null() {
            let e = TransportError::library(transport.name(), "zmq_ctx_new")(ZmqError::NoContext);
            return Err(e.into());
        }
        // SAFETY: a live context; a null socket is checked below.
        let sock = unsafe { (z.api.zmq_socket)(ctx, kind) };
        let s = Socket {
            z,
            ctx,
            sock,
            transport,
        };
        if sock.is_null() {
            return Err(s.err("zmq_socket").into());
        }
        s.set_int(LINGER, 0)?;
        Ok(s)
    }

    /// The error of the libzmq call `action` that just failed.
    fn err(&self, action: &'static str) -> TransportError {
        self.fail(action, {
            let (errno, message) = self.z.last_error();
            ZmqError::Errno { errno, message }
        })
    }

    fn fail(&self, action: &'static str, e: ZmqError) -> TransportError {
        TransportError::library(self.transport.name(), action)(e)
    }

    fn set_int(&self, opt: c_int, v: c_int) -> Result<(), TransportError> {
        self.set_bytes(opt, &v.to_ne_bytes())
    }

    fn set_bytes(&self, opt: c_int, v: &[u8]) -> Result<(), TransportError> {
        // SAFETY: a live socket; the option value is `v.len()` readable bytes.
        let rc = unsafe { (self.z.api.zmq_setsockopt)(self.sock, opt, v.as_ptr().cast(), v.len()) };
        if rc != 0 {
            return Err(self.err("zmq_setsockopt"));
        }
        Ok(())
    }

    fn endpoint_call(
        &self,
        f: unsafe extern "C" fn(Sock, *const c_char) -> c_int,
        what: &'static str,
        ep: &str,
    ) -> Result<(), TransportError> {
        let c = CString::new(ep).map_err(|_| self.fail(what, ZmqError::Nul(ep.to_owned())))?;
        // SAFETY: a live socket and a NUL-terminated endpoint that lives for the call.
        if unsafe { f(self.sock, c.as_ptr()) } != 0 {
            // the endpoint calls fail with the system's errno values (EADDRINUSE, ENOENT, ...)
            let (errno, _) = self.z.last_error();
            return Err(TransportError::Endpoint {
                transport: self.transport.name(),
                action: what,
                endpoint: ep.to_owned(),
                source: std::io::Error::from_raw_os_error(errno),
            });
        }
        Ok(())
    }

    fn last_endpoint(&self) -> Result<String, TransportError> {
        let mut buf = [0u8; 256];
        let mut len = buf.len();
        // SAFETY: a live socket; libzmq writes at most `len` bytes and updates `len`.
        let rc = unsafe {
            (self.z.api.zmq_getsockopt)(self.sock, LAST_ENDPOINT, buf.as_mut_ptr().cast(), &mut len)
        };
        if rc != 0 {
            return Err(self.err("zmq_getsockopt(ZMQ_LAST_ENDPOINT)"));
        }
        Ok(CStr::from_bytes_until_nul(&buf[..len.min(buf.len())])
            .map_or_else(|_| String::new(), |s| s.to_string_lossy().into_owned()))
    }

    /// Receive one message into `buf` (its full length is returned, even if cut);
    /// `None` when the receive timeout passed (at once with `dontwait`).
    fn recv(&self, buf: &mut [u8], dontwait: bool) -> Result<Option<usize>, TransportError> {
        let flags = if dontwait { DONTWAIT } else { 0 };
        loop {
            // SAFETY: a live socket; libzmq writes at most `buf.len()` bytes.
            let rc = unsafe {
                (self.z.api.zmq_recv)(self.sock, buf.as_mut_ptr().cast(), buf.len(), flags)
            };
            if rc >= 0 {
                return Ok(Some(rc as usize));
            }
            match self.z.last_error().0 {
                EAGAIN => return Ok(None),
                EINTR => {}
                _ => return Err(self.err("zmq_recv")),
            }
        }
    }

    fn set_timeout(&self, t: Duration) -> Result<(), TransportError> {
        self.set_int(RCVTIMEO, t.as_millis().clamp(1, i32::MAX as u128) as c_int)
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // SAFETY: the socket and context we created, each closed once, socket first (linger
        // 0, so terminating does not wait for unsent messages).
        unsafe {
            if !self.sock.is_null() {
                (self.z.api.zmq_close)(self.sock);
            }
            (self.z.api.zmq_ctx_term)(self.ctx);
        }
    }
}

/// The writer: an XPUB socket bound to `ipc://$TMPDIR/rtloop-peers-TAG.zmq` or
/// `tcp://127.0.0.1:*` (a free port).
pub struct ZmqSender {
    s: Socket,
    endpoint: String,
    ipc_path: Option<PathBuf>,
}

impl ZmqSender {
    /// Bind the XPUB socket.
    pub fn open(t: &Trial) -> Result<ZmqSender, PeerError> {
        let s = Socket::new(t.transport, XPUB)?;
        s.set_int(XPUB_NODROP, 1)?;
        s.set_int(XPUB_VERBOSE, 1)?;
        let (ep, ipc_path) = if t.transport == Transport::ZmqIpc {
            let p = std::env::temp_dir().join(format!("rtloop-peers-{}.zmq", t.tag));
            (format!("ipc://{}", p.display()), Some(p))
        } else {
            ("tcp://127.0.0.1:*".to_string(), None)
        };
        s.endpoint_call(s.z.api.zmq_bind, "zmq_bind", &ep)?;
        let endpoint = s.last_endpoint()?;
        Ok(ZmqSender {
            s,
            endpoint,
            ipc_path,
        })
    }
}

impl Drop for ZmqSender {
    fn drop(&mut self) {
        if let Some(p) = &self.ipc_path {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Sender for ZmqSender {
    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    fn prepare(&mut self, readers: usize, timeout: Duration) -> Result<(), TransportError> {
        // every SUB's subscription arrives as a message "\x01" + topic (XPUB_VERBOSE)
        let deadline = Instant::now() + timeout;
        let mut subscribed = 0;
        let mut msg = [0u8; 64];
        while subscribed < readers {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(TransportError::NotConnected {
                    transport: self.s.transport.name(),
                    connected: subscribed,
                    wanted: readers,
                    timeout,
                });
            }
            self.s.set_timeout(left)?;
            if let Some(n) = self.s.recv(&mut msg, false)? {
                if n >= 1 && msg[0] == 1 {
                    subscribed += 1;
                }
            }
        }
        Ok(())
    }

    fn send(&mut self, chunk: &[u8]) -> Result<(), TransportError> {
        loop {
            // SAFETY: a live socket; libzmq copies `chunk` into a message before returning.
            let rc = unsafe {
                (self.s.z.api.zmq_send)(self.s.sock, chunk.as_ptr().cast(), chunk.len(), 0)
            };
            if rc >= 0 {
                return Ok(());
            }
            if self.s.z.last_error().0 != EINTR {
                return Err(self.s.err("zmq_send"));
            }
        }
    }
}

/// A reader: a SUB socket subscribed to every message.
pub struct ZmqReceiver {
    s: Socket,
    buf: Vec<u8>,
    timeout: Option<Duration>,
}

impl ZmqReceiver {
    /// Connect and subscribe.
    pub fn open(t: &Trial, endpoint: &str) -> Result<ZmqReceiver, PeerError> {
        let s = Socket::new(t.transport, SUB)?;
        s.set_bytes(SUBSCRIBE, b"")?;
        s.endpoint_call(s.z.api.zmq_connect, "zmq_connect", endpoint)?;
        Ok(ZmqReceiver {
            s,
            buf: vec![0u8; t.chunk_bytes()],
            timeout: None,
        })
    }
}

impl Receiver for ZmqReceiver {
    fn recv(&mut self, timeout: Duration) -> Result<&[u8], TransportError> {
        let poll = timeout.is_zero();
        if !poll && self.timeout != Some(timeout) {
            self.s.set_timeout(timeout)?;
            self.timeout = Some(timeout);
        }
        match self.s.recv(&mut self.buf, poll)? {
            None => Ok(&[]),
            Some(n) if n == self.buf.len() => Ok(&self.buf),
            Some(n) => Err(WrongSize::error(self.s.transport, n, self.buf.len())),
        }
    }
}
