//! The device↔host link: two one-directional channels of rtloop-transport. Device→host
//! carries the frames (a byte stream the host reads in ReadSize blocks, each byte copied once,
//! straight into the block); host→device carries posted reads and loopbacks as 32-bit words.
//!
//! | transport | device → host | host → device |
//! |---|---|---|
//! | `stream` | an rtloop stream of u32 words (lossless reader) | an rtloop stream |
//! | `unix` | a UNIX stream socket | the same socket |
//! | `tcp` | TCP on 127.0.0.1 (TCP_NODELAY) | the same socket |
//! | `fieldtrip` | PUT_DAT to a FieldTrip buffer server, read with WAIT_DAT + GET_DAT | an rtloop stream |

use std::sync::Arc;
use std::time::Duration;

use rtloop_fieldtrip::{Buffer, BufferConfig, Server, ServerConfig};
use rtloop_stream::{DType, Stream, StreamConfig};
use rtloop_transport::socket::{self, Listener};
use rtloop_transport::stream::StreamReceiver;
use rtloop_transport::{
    BlockReceiver, Endpoint, Receiver, ReceiverOptions, Sender, TransportError,
};
use serde::{Deserialize, Serialize};

/// The transports, for `--transport`.
pub const TRANSPORTS: [&str; 4] = ["stream", "unix", "tcp", "fieldtrip"];

/// Bytes of a host→device word, and the unit of both channels.
const WORD: usize = 4;
/// Words the device takes from its channel at once.
const DEVICE_BATCH: usize = 16 * 1024;
/// Socket buffers, each way: a ReadSize block or a burst of them fits.
const SOCKET_BUFFER: usize = 4 << 20;
/// How long the host waits for the device to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the device process needs to connect (passed to it as JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum LinkSpec {
    /// A channel each way.
    Pair {
        /// Device→host frames.
        d2h: Endpoint,
        /// Host→device words.
        h2d: Endpoint,
    },
    /// One socket the host listens on, carrying both ways.
    Socket(Endpoint),
}

/// The device's end of a link: frames out, the host's words in.
pub struct DeviceLink {
    frames: Box<dyn Sender>,
    words: Box<dyn Receiver>,
}

impl DeviceLink {
    /// Send device→host bytes (a multiple of 4).
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        self.frames.send(bytes)
    }

    /// Append whatever host→device words have arrived; never blocks. Words that came with
    /// the host's close are handed over; the close is reported by the next call.
    pub fn poll(&mut self, out: &mut Vec<u32>) -> Result<(), TransportError> {
        loop {
            let bytes = self.words.recv(Duration::ZERO)?;
            if bytes.is_empty() {
                return Ok(());
            }
            out.extend(
                bytes
                    .chunks_exact(WORD)
                    .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))),
            );
        }
    }

    /// The run is over: flush and close.
    pub fn finish(&mut self) -> Result<(), TransportError> {
        self.frames.finish()
    }
}

/// The host's end of a link: frames in, exactly a block at a time; words out.
pub struct HostLink {
    frames: Box<dyn BlockReceiver>,
    words: Box<dyn Sender>,
    /// The words of the last send, as bytes (reused).
    bytes: Vec<u8>,
}

impl HostLink {
    /// Fill `buf` exactly, blocking at most `slice` for more; returns with `buf` not full
    /// yet if that wait found nothing (call again with the rest; the caller checks on the
    /// device in between).
    pub fn read(
        &mut self,
        buf: &mut [u8],
        filled: &mut usize,
        slice: Duration,
    ) -> Result<(), TransportError> {
        self.frames.fill(buf, filled, slice)
    }

    /// Send host→device words.
    pub fn send(&mut self, words: &[u32]) -> Result<(), TransportError> {
        self.bytes.clear();
        self.bytes
            .extend(words.iter().flat_map(|w| w.to_le_bytes()));
        self.words.send(&self.bytes)
    }
}

/// The lab's transport streams are internal: listings and the viewer hide them unless asked.
fn stream_cfg(capacity: u64) -> StreamConfig {
    StreamConfig {
        internal: true,
        ..StreamConfig::new(DType::U32, 1, 0.0, capacity)
    }
}

/// The host side before the device connects: it owns the endpoints (streams, a listener,
/// the FieldTrip server) and removes them on drop.
pub struct HostSide {
    spec: LinkSpec,
    streams: Vec<String>,
    listener: Option<Listener>,
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
    pub fn prepare(transport: &str, id: &str, spin: Duration) -> Result<HostSide, TransportError> {
        let mut side = HostSide {
            spec: LinkSpec::Socket(Endpoint::Tcp(String::new())),
            streams: Vec::new(),
            listener: None,
            server: None,
            spin,
        };
        let h2d = format!("lab-{id}-h2d");
        let mut mk = |name: &str, cap: u64| {
            let _ = Stream::remove(name);
            Stream::create(name, &stream_cfg(cap)).map_err(|e| TransportError::stream(name, e))?;
            side.streams.push(name.to_owned());
            Ok::<_, TransportError>(Endpoint::Stream(name.to_owned()))
        };
        match transport {
            "stream" => {
                let d2h = mk(&format!("lab-{id}-d2h"), 1 << 20)?;
                let h2d = mk(&h2d, 1 << 16)?;
                side.spec = LinkSpec::Pair { d2h, h2d };
            }
            "unix" | "tcp" => {
                let at = if transport == "unix" {
                    Endpoint::Unix(std::env::temp_dir().join(format!("rtloop-lab-{id}.sock")))
                } else {
                    Endpoint::Tcp("127.0.0.1:0".into())
                };
                let l = Listener::bind(&at)?;
                side.spec = LinkSpec::Socket(l.endpoint()?);
                side.listener = Some(l);
            }
            "fieldtrip" => {
                let h2d = mk(&h2d, 1 << 16)?;
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
                )
                .map_err(|e| TransportError::Endpoint {
                    transport: rtloop_transport::fieldtrip::NAME,
                    action: "start a server on",
                    endpoint: "127.0.0.1:0".into(),
                    source: e,
                })?;
                let addr = server.tcp_addr().expect("tcp").to_string();
                side.spec = LinkSpec::Pair {
                    d2h: Endpoint::FieldTrip(addr),
                    h2d,
                };
                side.server = Some(server);
            }
            other => {
                return Err(TransportError::Unknown {
                    given: other.to_owned(),
                    allowed: TRANSPORTS.join(", "),
                })
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
    pub fn connect(&mut self) -> Result<HostLink, TransportError> {
        let opts = ReceiverOptions::new(WORD, 1024).spin(self.spin);
        let (frames, words): (Box<dyn BlockReceiver>, Box<dyn Sender>) = match &self.spec {
            LinkSpec::Pair { d2h, h2d } => {
                // a FieldTrip receiver waits for the device's header (its PUT_HDR opens
                // the buffer)
                (d2h.receiver(opts)?, h2d.sender()?)
            }
            LinkSpec::Socket(at) => {
                let l = self
                    .listener
                    .as_ref()
                    .expect("a listener for a socket link");
                let conn = l.accept(CONNECT_TIMEOUT)?.ok_or(TransportError::Timeout {
                    transport: at.transport(),
                    what: "the device to connect",
                })?;
                let conn = match conn {
                    c @ socket::Conn::Unix(_) => c.recv_buffer(SOCKET_BUFFER),
                    c => c,
                };
                let (tx, rx) = conn.split(opts)?;
                (Box::new(rx), Box::new(tx))
            }
        };
        Ok(HostLink {
            frames,
            words,
            bytes: Vec::new(),
        })
    }
}

impl Drop for HostSide {
    fn drop(&mut self) {
        for s in &self.streams {
            let _ = Stream::remove(s);
        }
        if let Some(s) = self.server.take() {
            s.buffer().close();
            s.shutdown();
        }
    }
}

/// Connect the device's end.
pub fn connect_device(spec: &LinkSpec) -> Result<DeviceLink, TransportError> {
    let opts = ReceiverOptions::new(WORD, DEVICE_BATCH);
    Ok(match spec {
        LinkSpec::Pair { d2h, h2d } => {
            let words: Box<dyn Receiver> = match h2d {
                // words the host sent before this reader registered are read too
                Endpoint::Stream(name) => Box::new(StreamReceiver::open(name, opts)?.from_start()?),
                other => other.receiver(opts)?,
            };
            DeviceLink {
                frames: d2h.sender()?,
                words,
            }
        }
        LinkSpec::Socket(at) => {
            let conn = match socket::connect(at)? {
                c @ socket::Conn::Unix(_) => c.send_buffer(SOCKET_BUFFER),
                c => c,
            };
            let (tx, rx) = conn.split(opts)?;
            DeviceLink {
                frames: Box::new(tx),
                words: Box::new(rx),
            }
        }
    })
}
