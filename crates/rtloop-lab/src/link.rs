//! The device↔host transports. Device→host carries the frames (a byte stream the host reads
//! in ReadSize blocks); host→device carries posted reads and loopbacks as 32-bit words.
//!
//! | transport | device → host | host → device |
//! |---|---|---|
//! | `stream` | an rtloop stream of u32 words (lossless reader) | an rtloop stream |
//! | `unix` | a UNIX stream socket | the same socket |
//! | `tcp` | TCP on 127.0.0.1 (TCP_NODELAY) | the same socket |
//! | `fieldtrip` | PUT_DAT to a FieldTrip buffer server, read with WAIT_DAT + GET_DAT | an rtloop stream |

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtloop_fieldtrip::{Buffer, BufferConfig, Client, Server, ServerConfig};
use rtloop_stream::{DType, ReaderMode, Stream, StreamConfig};
use serde::{Deserialize, Serialize};

/// The transports, for `--transport`.
pub const TRANSPORTS: [&str; 4] = ["stream", "unix", "tcp", "fieldtrip"];

/// The device's end of a link.
pub trait DeviceLink {
    /// Send device→host bytes (a multiple of 4).
    fn send(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Append whatever host→device words have arrived; never blocks.
    fn poll(&mut self, out: &mut Vec<u32>) -> io::Result<()>;
    /// The run is over: flush and close.
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The host's end of a link.
pub trait HostLink {
    /// Fill `buf` exactly, blocking at most `slice` for more; `Ok(false)` if it is not full
    /// yet (call again with the rest; the caller checks on the device in between).
    fn read(&mut self, buf: &mut [u8], filled: &mut usize, slice: Duration) -> io::Result<()>;
    /// Send host→device words.
    fn send(&mut self, words: &[u32]) -> io::Result<()>;
}

/// What the device process needs to connect (passed to it as JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum LinkSpec {
    /// Two streams.
    Stream {
        /// Device→host stream.
        d2h: String,
        /// Host→device stream.
        h2d: String,
    },
    /// A UNIX socket path the host listens on.
    Unix(PathBuf),
    /// A TCP address the host listens on.
    Tcp(String),
    /// A FieldTrip server's address and the host→device stream.
    FieldTrip {
        /// `HOST:PORT`.
        addr: String,
        /// Host→device stream.
        h2d: String,
    },
}

fn stream_cfg(capacity: u64) -> StreamConfig {
    StreamConfig::new(DType::U32, 1, 0.0, capacity)
}

fn as_words(bytes: &[u8], out: &mut Vec<u32>) {
    out.extend(
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))),
    );
}

fn word_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The host side before the device connects: it owns the endpoints (streams, listeners, the
/// FieldTrip server) and removes them on drop.
pub struct HostSide {
    spec: LinkSpec,
    streams: Vec<String>,
    unix: Option<(UnixListener, PathBuf)>,
    tcp: Option<TcpListener>,
    server: Option<Server>,
    spin: Duration,
}

impl std::fmt::Debug for HostSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostSide")
            .field("spec", &self.spec)
            .finish()
    }
}

impl HostSide {
    /// Create the endpoints of `transport` for a run named `id`. `spin`: how long the host
    /// polls before sleeping while it waits for a block.
    pub fn prepare(transport: &str, id: &str, spin: Duration) -> io::Result<HostSide> {
        let mut side = HostSide {
            spec: LinkSpec::Tcp(String::new()),
            streams: Vec::new(),
            unix: None,
            tcp: None,
            server: None,
            spin,
        };
        let h2d = format!("lab-{id}-h2d");
        let mk = |name: &str, cap: u64| {
            let _ = Stream::remove(name);
            Stream::create(name, &stream_cfg(cap)).map_err(io::Error::other)
        };
        match transport {
            "stream" => {
                let d2h = format!("lab-{id}-d2h");
                mk(&d2h, 1 << 20)?;
                mk(&h2d, 1 << 16)?;
                side.streams = vec![d2h.clone(), h2d.clone()];
                side.spec = LinkSpec::Stream { d2h, h2d };
            }
            "unix" => {
                let path = std::env::temp_dir().join(format!("rtloop-lab-{id}.sock"));
                let _ = std::fs::remove_file(&path);
                side.unix = Some((UnixListener::bind(&path)?, path.clone()));
                side.spec = LinkSpec::Unix(path);
            }
            "tcp" => {
                let l = TcpListener::bind("127.0.0.1:0")?;
                side.spec = LinkSpec::Tcp(l.local_addr()?.to_string());
                side.tcp = Some(l);
            }
            "fieldtrip" => {
                mk(&h2d, 1 << 16)?;
                let data = format!("lab-{id}-ft");
                let mut cfg = BufferConfig::new(&data);
                cfg.remove_on_drop = true;
                // no polling on this path: the server's two connection threads come on top
                // of the device and the host, and four busy threads on two CPUs starve
                // each other (measured: 736 ms p50 at 8192 B with polling, 160 us without)
                side.spin = Duration::ZERO;
                let server = Server::start(
                    Arc::new(Buffer::new(cfg)),
                    ServerConfig {
                        tcp: Some("127.0.0.1:0".into()),
                        ..ServerConfig::default()
                    },
                )?;
                side.spec = LinkSpec::FieldTrip {
                    addr: server.tcp_addr().expect("tcp").to_string(),
                    h2d: h2d.clone(),
                };
                side.streams = vec![h2d];
                side.server = Some(server);
            }
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "unknown transport {other:?}; allowed: {}",
                        TRANSPORTS.join(", ")
                    ),
                ))
            }
        }
        Ok(side)
    }

    /// What the device process connects to.
    #[must_use]
    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }

    /// Complete the link once the device process is up (accepts its connection).
    pub fn connect(&mut self) -> io::Result<Box<dyn HostLink>> {
        let timeout = Duration::from_secs(10);
        Ok(match &self.spec {
            LinkSpec::Stream { d2h, h2d } => {
                let mut reader = Stream::open(d2h)
                    .map_err(io::Error::other)?
                    .reader(ReaderMode::Lossless)
                    .map_err(io::Error::other)?;
                reader.set_spin(self.spin);
                let writer = Stream::open(h2d)
                    .map_err(io::Error::other)?
                    .writer()
                    .map_err(io::Error::other)?;
                Box::new(StreamHost { reader, writer })
            }
            LinkSpec::Unix(_) => {
                let (l, _) = self.unix.as_ref().expect("listener");
                let (s, _) = accept_within(timeout, || l.accept())?;
                let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&s, 4 << 20);
                Box::new(SocketHost { s, spin: self.spin })
            }
            LinkSpec::Tcp(_) => {
                let l = self.tcp.as_ref().expect("listener");
                let (s, _) = accept_within(timeout, || l.accept())?;
                s.set_nodelay(true)?;
                Box::new(SocketHost { s, spin: self.spin })
            }
            LinkSpec::FieldTrip { addr, h2d } => {
                let mut client = Client::connect(addr).map_err(io::Error::other)?;
                client.set_spin(self.spin);
                // the device's PUT_HDR opens the buffer: wait for it
                let t = Instant::now();
                while client.get_header().is_err() {
                    if t.elapsed() > timeout {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the device never sent its FieldTrip header",
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                let writer = Stream::open(h2d)
                    .map_err(io::Error::other)?
                    .writer()
                    .map_err(io::Error::other)?;
                Box::new(FieldTripHost {
                    client,
                    writer,
                    have: 0,
                    block: Vec::new(),
                    at: 0,
                })
            }
        })
    }
}

impl Drop for HostSide {
    fn drop(&mut self) {
        for s in &self.streams {
            let _ = Stream::remove(s);
        }
        if let Some((_, p)) = &self.unix {
            let _ = std::fs::remove_file(p);
        }
        if let Some(s) = self.server.take() {
            s.buffer().close();
            s.shutdown();
        }
    }
}

/// Accept with a deadline (the device may have failed to start).
fn accept_within<S, A>(
    timeout: Duration,
    accept: impl Fn() -> io::Result<(S, A)>,
) -> io::Result<(S, A)> {
    // the listener is blocking; the device connects right after it starts, or the caller's
    // watchdog (the device's exit) ends the run
    let t = Instant::now();
    let r = accept();
    if r.is_err() && t.elapsed() > timeout {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the device did not connect",
        ));
    }
    r
}

struct StreamHost {
    reader: rtloop_stream::Reader,
    writer: rtloop_stream::Writer,
}

impl HostLink for StreamHost {
    fn read(&mut self, buf: &mut [u8], filled: &mut usize, slice: Duration) -> io::Result<()> {
        let want = ((buf.len() - *filled) / 4) as u64;
        match self.reader.wait_available(want, Some(slice)) {
            Ok(_) | Err(rtloop_stream::WaitError::Timeout { .. }) => {}
            Err(e) => return Err(io::Error::new(io::ErrorKind::BrokenPipe, e)),
        }
        let p = self
            .reader
            .pull_into(&mut buf[*filled..], None, want as usize)
            .map_err(io::Error::other)?;
        *filled += p.n * 4;
        Ok(())
    }

    fn send(&mut self, words: &[u32]) -> io::Result<()> {
        self.writer
            .write::<u32>(words)
            .map(|_| ())
            .map_err(io::Error::other)
    }
}

struct SocketHost<S> {
    s: S,
    spin: Duration,
}

trait Timeouts {
    fn set_timeout(&self, d: Duration) -> io::Result<()>;
}
impl Timeouts for TcpStream {
    fn set_timeout(&self, d: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(d))
    }
}
impl Timeouts for UnixStream {
    fn set_timeout(&self, d: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(d))
    }
}

impl<S: Read + Write + Timeouts + std::os::fd::AsFd> HostLink for SocketHost<S> {
    fn read(&mut self, buf: &mut [u8], filled: &mut usize, slice: Duration) -> io::Result<()> {
        self.s.set_timeout(slice)?;
        let mut r = rtloop_fieldtrip::framing::SpinRead::new(&mut self.s, self.spin);
        while *filled < buf.len() {
            match r.read(&mut buf[*filled..]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "the device closed the connection",
                    ))
                }
                Ok(n) => *filled += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(())
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn send(&mut self, words: &[u32]) -> io::Result<()> {
        self.s.write_all(&word_bytes(words))
    }
}

struct FieldTripHost {
    client: Client,
    writer: rtloop_stream::Writer,
    /// Words read from the buffer so far.
    have: u32,
    block: Vec<u8>,
    at: usize,
}

impl HostLink for FieldTripHost {
    fn read(&mut self, buf: &mut [u8], filled: &mut usize, slice: Duration) -> io::Result<()> {
        while *filled < buf.len() {
            if self.at == self.block.len() {
                let want = ((buf.len() - *filled) / 4) as u32;
                let ms = slice.as_millis().max(1) as u32;
                let (n, _) = self
                    .client
                    .wait(self.have + want - 1, u32::MAX - 1, ms)
                    .map_err(io::Error::other)?;
                if n <= self.have {
                    return Ok(());
                }
                let end = (n - 1).min(self.have + want - 1);
                self.client
                    .get_data_into(Some((self.have, end)), &mut self.block)
                    .map_err(io::Error::other)?;
                self.have = end + 1;
                self.at = 0;
            }
            let n = (self.block.len() - self.at).min(buf.len() - *filled);
            buf[*filled..*filled + n].copy_from_slice(&self.block[self.at..self.at + n]);
            self.at += n;
            *filled += n;
        }
        Ok(())
    }

    fn send(&mut self, words: &[u32]) -> io::Result<()> {
        self.writer
            .write::<u32>(words)
            .map(|_| ())
            .map_err(io::Error::other)
    }
}

/// Connect the device's end.
pub fn connect_device(spec: &LinkSpec) -> io::Result<Box<dyn DeviceLink>> {
    Ok(match spec {
        LinkSpec::Stream { d2h, h2d } => Box::new(StreamDevice {
            writer: Stream::open(d2h)
                .map_err(io::Error::other)?
                .writer()
                .map_err(io::Error::other)?,
            reader: h2d_reader(h2d)?,
            buf: vec![0; 64 * 1024],
        }),
        LinkSpec::Unix(p) => {
            let s = UnixStream::connect(p)?;
            let _ = rustix::net::sockopt::set_socket_send_buffer_size(&s, 4 << 20);
            Box::new(SocketDevice {
                s,
                buf: vec![0; 64 * 1024],
                partial: Vec::new(),
                closed: false,
            })
        }
        LinkSpec::Tcp(a) => {
            let s = TcpStream::connect(a)?;
            s.set_nodelay(true)?;
            Box::new(SocketDevice {
                s,
                buf: vec![0; 64 * 1024],
                partial: Vec::new(),
                closed: false,
            })
        }
        LinkSpec::FieldTrip { addr, h2d } => {
            let mut client = Client::connect(addr).map_err(io::Error::other)?;
            client
                .put_header(1, 0.0, DType::U32.code(), &[])
                .map_err(io::Error::other)?;
            Box::new(FieldTripDevice {
                client,
                reader: h2d_reader(h2d)?,
                buf: vec![0; 64 * 1024],
            })
        }
    })
}

fn h2d_reader(name: &str) -> io::Result<rtloop_stream::Reader> {
    let mut r = Stream::open(name)
        .map_err(io::Error::other)?
        .reader(ReaderMode::Lossless)
        .map_err(io::Error::other)?;
    r.seek(0).map_err(io::Error::other)?;
    Ok(r)
}

fn poll_stream(
    r: &mut rtloop_stream::Reader,
    buf: &mut [u8],
    out: &mut Vec<u32>,
) -> io::Result<()> {
    loop {
        let p = r
            .pull_into(buf, None, buf.len() / 4)
            .map_err(io::Error::other)?;
        if p.n == 0 {
            return Ok(());
        }
        as_words(&buf[..p.n * 4], out);
    }
}

struct StreamDevice {
    writer: rtloop_stream::Writer,
    reader: rtloop_stream::Reader,
    buf: Vec<u8>,
}

impl DeviceLink for StreamDevice {
    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer
            .write_bytes(bytes, None)
            .map(|_| ())
            .map_err(io::Error::other)
    }
    fn poll(&mut self, out: &mut Vec<u32>) -> io::Result<()> {
        poll_stream(&mut self.reader, &mut self.buf, out)
    }
}

struct SocketDevice<S> {
    s: S,
    buf: Vec<u8>,
    partial: Vec<u8>,
    closed: bool,
}

impl<S: Read + Write + std::os::fd::AsFd> DeviceLink for SocketDevice<S> {
    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.s.write_all(bytes)
    }
    fn poll(&mut self, out: &mut Vec<u32>) -> io::Result<()> {
        loop {
            if self.closed {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the host closed the connection",
                ));
            }
            match rustix::net::recv(&self.s, &mut self.buf[..], rustix::net::RecvFlags::DONTWAIT) {
                // the host's last words (its stop) may arrive with the close: hand them over
                // now, report the close on the next poll
                Ok((0, _)) => {
                    self.closed = true;
                    return Ok(());
                }
                Ok((n, _)) => {
                    self.partial.extend_from_slice(&self.buf[..n]);
                    let whole = self.partial.len() / 4 * 4;
                    as_words(&self.partial[..whole], out);
                    self.partial.drain(..whole);
                }
                Err(rustix::io::Errno::AGAIN) => return Ok(()),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    fn finish(&mut self) -> io::Result<()> {
        self.s.flush()
    }
}

struct FieldTripDevice {
    client: Client,
    reader: rtloop_stream::Reader,
    buf: Vec<u8>,
}

impl DeviceLink for FieldTripDevice {
    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        // fire and forget, as an acquisition tool streaming into a buffer would
        self.client
            .put_data_bytes(1, DType::U32.code(), bytes, false)
            .map_err(io::Error::other)
    }
    fn poll(&mut self, out: &mut Vec<u32>) -> io::Result<()> {
        poll_stream(&mut self.reader, &mut self.buf, out)
    }
}
