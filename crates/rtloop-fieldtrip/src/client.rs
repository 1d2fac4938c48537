//! A blocking FieldTrip buffer client over TCP, a UNIX-domain socket, or in-process (the
//! FAQ's "dma": requests go straight to a [`Buffer`] in this process, no socket, no
//! encoding). Python's `rtloop.fieldtrip.Client` is this client, through the binding.
//!
//! A refused request comes back as [`ClientError::Refused`] with the client's best guess of
//! why ([`Reason`]): FieldTrip's error replies carry no reason, so after a refusal the client
//! asks the server for its state (one WAIT_DAT, for PUT_DAT also a GET_HDR). A socket error
//! or a reply that breaks the protocol closes the connection, since the byte stream is out
//! of step; later calls return [`ClientError::Closed`].

use std::borrow::Cow;
use std::fmt;
use std::io::{self, IoSlice, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rtloop_stream::{DType, Sample};

use crate::buffer::Buffer;
use crate::codec::{
    self, cmd, encode_request, parse_events, parse_header_payload, parse_samples_events,
    put_datadef, put_prefix, ByteOrder, DataDef, HeaderDef, Parsed, Request, Selection, WaitDef,
    WireEvent, DATADEF_BYTES, PREFIX_BYTES,
};
use crate::framing::{FrameError, MessageReader};
use rtloop_sys::SpinRead;

/// The port of a FieldTrip buffer when an address names none.
pub const DEFAULT_PORT: u16 = 1972;

/// The sample types, for error messages.
const SAMPLE_TYPES: &str = "1 uint8, 2 uint16, 3 uint32, 4 uint64, 5 int8, 6 int16, 7 int32, \
     8 int64, 9 float32, 10 float64";

/// Where a FieldTrip buffer listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// A TCP host (a name, an IPv4 or an IPv6 address) and port.
    Tcp {
        /// The host.
        host: String,
        /// The port.
        port: u16,
    },
    /// A UNIX-domain socket.
    Unix(PathBuf),
}

impl Address {
    /// Parse `HOST`, `HOST:PORT`, `tcp://HOST:PORT`, `buffer://HOST:PORT` (FieldTrip's
    /// spelling), `[V6]:PORT` or `unix:PATH`; `default_port` where no port is given and
    /// `localhost` where no host is.
    pub fn parse(addr: &str, default_port: u16) -> Result<Address, AddressError> {
        if let Some(path) = addr.strip_prefix("unix:") {
            return Ok(Address::Unix(
                path.strip_prefix("//").unwrap_or(path).into(),
            ));
        }
        let s = addr.strip_prefix("buffer://").unwrap_or(addr);
        let s = s.strip_prefix("tcp://").unwrap_or(s).trim_end_matches('/');
        let port = |p: &str| {
            p.parse::<u16>().map_err(|_| AddressError::Port {
                addr: addr.to_owned(),
                port: p.to_owned(),
            })
        };
        let (host, port) = if let Some(v6) = s.strip_prefix('[') {
            let (host, rest) = v6.split_once(']').ok_or_else(|| AddressError::Bracket {
                addr: addr.to_owned(),
            })?;
            match rest.strip_prefix(':') {
                Some(p) => (host, port(p)?),
                None => (host, default_port),
            }
        } else {
            match s.split_once(':') {
                Some((h, p)) if !p.contains(':') => {
                    (if h.is_empty() { "localhost" } else { h }, port(p)?)
                }
                _ => (if s.is_empty() { "localhost" } else { s }, default_port),
            }
        };
        Ok(Address::Tcp {
            host: host.to_owned(),
            port,
        })
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Tcp { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            Address::Tcp { host, port } => write!(f, "{host}:{port}"),
            Address::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// An address that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// `[` without `]`.
    #[error("bad address {addr:?}: missing ']'")]
    Bracket {
        /// The address.
        addr: String,
    },
    /// The port is not a number of 16 bits.
    #[error("bad address {addr:?}: the port {port:?} is not a number from 0 to 65535")]
    Port {
        /// The address.
        addr: String,
        /// What stands where the port goes.
        port: String,
    },
}

/// Samples or events, in a [`Reason`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Samples (GET_DAT).
    Samples,
    /// Events (GET_EVT).
    Events,
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unit::Samples => "samples",
            Unit::Events => "events",
        })
    }
}

/// Why the server probably refused a request, as far as the client can tell by asking it
/// for its state afterwards (FieldTrip's error replies carry no reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// GET_HDR: there is no header.
    NoHeaderYet,
    /// Another request: there is no header.
    NoHeader,
    /// A flush or WAIT_DAT refused although there is a header.
    NotFlushable,
    /// A selection that ends before it begins.
    Backwards {
        /// Samples or events.
        unit: Unit,
        /// First index asked for.
        begin: u32,
        /// Last index asked for.
        end: u32,
        /// How many the server counts.
        held: u32,
    },
    /// A selection reaching past the newest.
    NotYet {
        /// Samples or events.
        unit: Unit,
        /// How many the server counts.
        held: u32,
    },
    /// Nothing of the kind yet.
    NoneYet {
        /// Samples or events.
        unit: Unit,
    },
    /// Not, or no longer, kept (the server keeps only the newest).
    NotKept {
        /// Samples or events.
        unit: Unit,
        /// How many the server counts.
        held: u32,
    },
    /// PUT_DAT of data that do not match the server's header.
    DataMismatch {
        /// Channels of the data.
        nchans: u32,
        /// Data type code of the data.
        data_type: u32,
        /// Channels of the header.
        header_nchans: u32,
        /// Data type code of the header.
        header_type: u32,
    },
    /// PUT_DAT of data that match the header.
    DataRefused,
    /// PUT_EVT.
    EventsRefused,
    /// Nothing the client can tell.
    Unknown,
}

/// The name of a data type code (`float32`, ...).
fn type_name(code: u32) -> String {
    DType::from_code(code).map_or_else(|| format!("data type {code}"), |d| d.name().to_owned())
}

/// "it holds samples 0..9" / "it holds no samples".
fn holds(unit: Unit, n: u32) -> String {
    match n {
        0 => format!("it holds no {unit}"),
        n => format!("it holds {unit} 0..{}", n - 1),
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Reason::NoHeaderYet => f.write_str(
                "there is no header yet (nothing was PUT_HDR, or FLUSH_HDR deleted it)",
            ),
            Reason::NoHeader => f.write_str("there is no header yet (PUT_HDR first)"),
            Reason::NotFlushable => f.write_str(
                "the server refused it (a stream written by a local process cannot be flushed); see its log",
            ),
            Reason::Backwards {
                unit,
                begin,
                end,
                held,
            } => write!(
                f,
                "the selection is backwards (begin {begin} > end {end} + 1); {}",
                holds(unit, held)
            ),
            Reason::NotYet { unit, held } => {
                write!(f, "the {unit} are not in the buffer yet; {}", holds(unit, held))
            }
            Reason::NoneYet { unit } => write!(f, "there are no {unit} yet"),
            Reason::NotKept { unit, held } => write!(
                f,
                "the {unit} are not, or no longer, in the buffer; {}, of which it keeps only \
                 the newest (how many is not sent over the wire)",
                holds(unit, held)
            ),
            Reason::DataMismatch {
                nchans,
                data_type,
                header_nchans,
                header_type,
            } => write!(
                f,
                "the data are {nchans} channels of {}, the header says {header_nchans} channels of {}",
                type_name(data_type),
                type_name(header_type)
            ),
            Reason::DataRefused => f.write_str(
                "the data match the header, so the server refused them for another reason: \
                 more samples in one PUT_DAT than it keeps, or the stream has a local writer; \
                 see its log",
            ),
            Reason::EventsRefused => f.write_str(
                "the events are malformed, too large, or the stream has a local writer; see the server's log",
            ),
            Reason::Unknown => f.write_str("see the server's log"),
        }
    }
}

/// A bad argument, refused before anything was sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    /// Not a sample type code (1..=10).
    #[error("data type code {0} is not a FieldTrip sample type; allowed: {SAMPLE_TYPES}")]
    DataType(u32),
    /// A header of no channels.
    #[error("n_channels must be at least 1, got 0")]
    NoChannels,
    /// Labels not one per channel.
    #[error("{labels} labels for {nchans} channels; give one per channel")]
    Labels {
        /// Labels given.
        labels: usize,
        /// Channels.
        nchans: u32,
    },
    /// A label with a NUL character.
    #[error("a label contains a NUL character; labels are NUL-terminated on the wire")]
    LabelNul,
    /// Sample bytes that are not whole samples.
    #[error("{bytes} bytes are not a whole number of samples of {nchans} channels x {word} bytes")]
    NotWholeSamples {
        /// Bytes given.
        bytes: usize,
        /// Channels.
        nchans: u32,
        /// Bytes per value.
        word: usize,
    },
    /// Data of another channel count than the header this client last put or got.
    #[error("data have {nchans} channels, the header {header}: give an array of shape (samples, {header})")]
    Channels {
        /// Channels of the data.
        nchans: u32,
        /// Channels of the header.
        header: u32,
    },
    /// Data of another type than the header this client last put or got.
    #[error("data are {}, the header {}: convert them first", type_name(*data_type), type_name(*header))]
    Type {
        /// Data type code of the data.
        data_type: u32,
        /// Data type code of the header.
        header: u32,
    },
    /// Typed samples asked for of another type than the buffer holds.
    #[error("the buffer holds {}, asked for {}", type_name(*held), type_name(*asked))]
    HeldType {
        /// Data type code of the buffer.
        held: u32,
        /// Data type code asked for.
        asked: u32,
    },
    /// A message larger than its 32-bit size field.
    #[error(
        "{request} of {bytes} bytes: a message holds at most {} bytes",
        u32::MAX
    )]
    TooLarge {
        /// The request.
        request: &'static str,
        /// Its payload.
        bytes: usize,
    },
    /// A destination for samples of the wrong size.
    #[error("a destination of {got} bytes for {need} bytes of samples")]
    Destination {
        /// Bytes of the destination.
        got: usize,
        /// Bytes of the samples.
        need: usize,
    },
}

/// Errors of a client call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The address does not parse.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// Nobody answered at the address.
    #[error("cannot connect to the FieldTrip buffer at {addr}: {source}")]
    Connect {
        /// The server.
        addr: String,
        /// What failed.
        source: io::Error,
    },
    /// The connection broke during a request; the client closed it.
    #[error("the FieldTrip buffer at {addr} closed the connection during {request}: {source}")]
    Io {
        /// The server.
        addr: String,
        /// The request.
        request: &'static str,
        /// What failed.
        source: io::Error,
    },
    /// The reply broke the protocol; the client closed the connection.
    #[error("the FieldTrip buffer at {addr} answered {request} with {detail}; connection closed")]
    Protocol {
        /// The server.
        addr: String,
        /// The request.
        request: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// The server answered with an error reply. The connection stays usable.
    #[error("{request}{} refused by the server at {addr} ({reply}): {reason}", selection_text(request, *selection))]
    Refused {
        /// The server.
        addr: String,
        /// The request.
        request: &'static str,
        /// The reply (GET_ERR, PUT_ERR, ...).
        reply: &'static str,
        /// The selection of a GET_DAT or GET_EVT.
        selection: Option<Selection>,
        /// Why, as far as the client can tell.
        reason: Reason,
    },
    /// The check of [`Client::set_interrupt`] gave up waiting; the client closed the
    /// connection (the reply would come too late).
    #[error("waiting for the reply to {request} from the FieldTrip buffer at {addr} was interrupted; connection closed")]
    Interrupted {
        /// The server.
        addr: String,
        /// The request.
        request: &'static str,
    },
    /// The connection was closed ([`Client::close`], or after an error).
    #[error("not connected to the FieldTrip buffer at {addr} (the connection was closed)")]
    Closed {
        /// The server.
        addr: String,
    },
    /// A bad argument, refused before anything was sent.
    #[error(transparent)]
    Argument(#[from] ArgumentError),
}

/// " [begin, end]" of a refused selection (GET_DAT's open end as "newest").
fn selection_text(request: &str, selection: Option<Selection>) -> String {
    match selection {
        None => String::new(),
        Some(s) if s.end == u32::MAX && request == "GET_DAT" => format!(" [{}, newest]", s.begin),
        Some(s) => format!(" [{}, {}]", s.begin, s.end),
    }
}

/// A header as GET_HDR returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// The header fields (counts are current).
    pub def: HeaderDef,
    /// The chunks, native order.
    pub chunks: Vec<u8>,
}

impl Header {
    /// Channel names from the CHANNEL_NAMES chunk, if present.
    #[must_use]
    pub fn labels(&self) -> Option<Vec<String>> {
        codec::channel_names(&self.chunks, self.def.nchans as usize)
    }
}

/// The chunks of a header: a CHANNEL_NAMES chunk of `labels` (none for no labels), then
/// `chunks` in their order, less any CHANNEL_NAMES chunk among them when there are labels.
pub fn header_chunks<S: AsRef<str>>(
    nchans: u32,
    labels: &[S],
    chunks: &[(u32, &[u8])],
) -> Result<Vec<u8>, ArgumentError> {
    let mut out = Vec::new();
    if !labels.is_empty() {
        if labels.len() != nchans as usize {
            return Err(ArgumentError::Labels {
                labels: labels.len(),
                nchans,
            });
        }
        let mut names = Vec::new();
        for l in labels {
            if l.as_ref().contains('\0') {
                return Err(ArgumentError::LabelNul);
            }
            names.extend_from_slice(l.as_ref().as_bytes());
            names.push(0);
        }
        codec::push_chunk(&mut out, codec::chunk::CHANNEL_NAMES, &names);
    }
    for &(ty, data) in chunks {
        if labels.is_empty() || ty != codec::chunk::CHANNEL_NAMES {
            codec::push_chunk(&mut out, ty, data);
        }
    }
    Ok(out)
}

/// A check run while a reply is awaited (see [`Client::set_interrupt`]); `false` gives up.
pub type InterruptCheck = Box<dyn FnMut() -> bool + Send + Sync>;

enum Transport {
    Tcp(TcpStream),
    Unix(UnixStream),
    InProcess(Arc<Buffer>),
    Closed,
}

/// One connection to a FieldTrip buffer.
pub struct Client {
    t: Transport,
    addr: String,
    head: Vec<u8>,
    reply: Vec<u8>,
    rd: MessageReader,
    spin: Duration,
    /// The byte order of the last reply (the server's answer to ours, normally).
    order: ByteOrder,
    /// (channels, data type) of the header this client last put or got.
    known: Option<(u32, u32)>,
    interrupt: Option<InterruptCheck>,
    /// The interrupt check gave up during the last read.
    interrupted: bool,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("addr", &self.addr).finish()
    }
}

/// Largest reply held in memory (GET_DAT's samples are read straight into the caller's
/// memory and not held against it).
const MAX_REPLY: usize = 1 << 31;

impl Client {
    /// Connect to `addr` (see [`Address::parse`]; port [`DEFAULT_PORT`] if none is given).
    pub fn connect(addr: &str) -> Result<Client, ClientError> {
        Client::connect_to(&Address::parse(addr, DEFAULT_PORT)?)
    }

    /// Connect to `addr`; over TCP with TCP_NODELAY, so small requests go out at once.
    pub fn connect_to(addr: &Address) -> Result<Client, ClientError> {
        let io = |source| ClientError::Connect {
            addr: addr.to_string(),
            source,
        };
        let t = match addr {
            Address::Unix(path) => {
                let s = UnixStream::connect(path).map_err(io)?;
                crate::server::unix_buffers(&s);
                Transport::Unix(s)
            }
            Address::Tcp { host, port } => {
                let s = TcpStream::connect((host.as_str(), *port)).map_err(io)?;
                s.set_nodelay(true).map_err(io)?;
                Transport::Tcp(s)
            }
        };
        Ok(Client::with(t, addr.to_string()))
    }

    /// A client calling `buffer` directly in this process.
    #[must_use]
    pub fn in_process(buffer: Arc<Buffer>) -> Client {
        Client::with(Transport::InProcess(buffer), "in-process".into())
    }

    fn with(t: Transport, addr: String) -> Client {
        Client {
            t,
            addr,
            head: Vec::with_capacity(64),
            reply: Vec::new(),
            rd: MessageReader::new(MAX_REPLY),
            spin: Duration::ZERO,
            order: ByteOrder::native(),
            known: None,
            interrupt: None,
            interrupted: false,
        }
    }

    /// Poll for each reply this long before sleeping (lower latency on a VM, at the cost of
    /// a busy CPU while waiting; see [`rtloop_sys::SpinRead`]).
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// While a reply is awaited, run `check` every `every` (the socket's read timeout); when
    /// it returns false the call gives up with [`ClientError::Interrupted`] and closes the
    /// connection. For letting Python handle Ctrl-C during a long WAIT_DAT.
    pub fn set_interrupt(&mut self, every: Duration, check: InterruptCheck) -> io::Result<()> {
        let every = Some(every.max(Duration::from_millis(1)));
        match &self.t {
            Transport::Tcp(s) => s.set_read_timeout(every)?,
            Transport::Unix(s) => s.set_read_timeout(every)?,
            Transport::InProcess(_) | Transport::Closed => {}
        }
        self.interrupt = Some(check);
        Ok(())
    }

    /// The address this client talks to (`host:port`, `[v6]:port` or `unix:PATH`).
    #[must_use]
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Whether the connection is open (not closed by [`Client::close`] or an error).
    #[must_use]
    pub fn is_open(&self) -> bool {
        !matches!(self.t, Transport::Closed)
    }

    /// Close the connection (idempotent).
    pub fn close(&mut self) {
        self.t = Transport::Closed;
    }

    /// Close the connection and say it broke during `request`.
    fn lost(&mut self, request: &'static str, source: io::Error) -> ClientError {
        self.close();
        ClientError::Io {
            addr: self.addr.clone(),
            request,
            source,
        }
    }

    /// Close the connection and say the reply to `request` broke the protocol.
    fn broken(&mut self, request: &'static str, detail: String) -> ClientError {
        self.close();
        ClientError::Protocol {
            addr: self.addr.clone(),
            request,
            detail,
        }
    }

    fn frame_error(&mut self, request: &'static str, e: FrameError) -> ClientError {
        if std::mem::take(&mut self.interrupted) {
            self.close();
            return ClientError::Interrupted {
                addr: self.addr.clone(),
                request,
            };
        }
        match e {
            FrameError::Io(e) => self.lost(request, e),
            FrameError::Truncated { got, need } => self.lost(
                request,
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{got} of the reply's {need} bytes came"),
                ),
            ),
            FrameError::TooLarge { bufsize, limit, .. } => self.broken(
                request,
                format!("a reply of {bufsize} bytes, more than the client's limit of {limit}"),
            ),
            other => self.broken(request, other.to_string()),
        }
    }

    /// Send `req`: the samples of a PUT_DAT go out from the caller's memory after the prefix
    /// and datadef, in one writev. In-process, the reply is made here.
    fn send(&mut self, req: &Request<'_>, respond: bool) -> Result<(), ClientError> {
        let order = ByteOrder::native();
        match &self.t {
            Transport::Closed => {
                return Err(ClientError::Closed {
                    addr: self.addr.clone(),
                })
            }
            Transport::InProcess(b) => {
                self.reply.clear();
                let parsed = Parsed {
                    request: req.clone(),
                    respond,
                };
                b.handle_request(order, &parsed, &mut self.reply, "in-process");
                return Ok(());
            }
            Transport::Tcp(_) | Transport::Unix(_) => {}
        }
        self.head.clear();
        let data: &[u8] = match req {
            Request::PutDat { def, data } => {
                put_prefix(
                    order,
                    req.command(respond),
                    (DATADEF_BYTES + data.len()) as u32,
                    &mut self.head,
                );
                put_datadef(
                    order,
                    &DataDef {
                        bufsize: data.len() as u32,
                        ..*def
                    },
                    &mut self.head,
                );
                data
            }
            other => {
                encode_request(order, other, respond, &mut self.head);
                &[]
            }
        };
        let sent = match &mut self.t {
            Transport::Tcp(s) => write_all_vectored(s, &self.head, data),
            Transport::Unix(s) => write_all_vectored(s, &self.head, data),
            Transport::InProcess(_) | Transport::Closed => unreachable!("a socket"),
        };
        sent.map_err(|e| self.lost(cmd::name(req.command(respond)), e))
    }

    /// Run `f` on the reader and the socket (spinning and interruptible as set).
    fn read_with<T>(&mut self, f: impl FnOnce(&mut MessageReader, &mut dyn Read) -> T) -> T {
        let Client {
            t,
            rd,
            spin,
            interrupt,
            interrupted,
            ..
        } = self;
        let check = interrupt.as_mut();
        match t {
            Transport::Tcp(s) => f(
                rd,
                &mut Checked::new(SpinRead::new(s, *spin), check, interrupted),
            ),
            Transport::Unix(s) => f(
                rd,
                &mut Checked::new(SpinRead::new(s, *spin), check, interrupted),
            ),
            Transport::InProcess(_) | Transport::Closed => unreachable!("a socket"),
        }
    }

    /// Read the reply to `request`; returns its command. Its payload is
    /// [`Client::payload`], only the first `head` bytes of it with `Some(head)` (the rest is
    /// left for [`Client::rest_into`]).
    fn recv(&mut self, request: &'static str, head: Option<usize>) -> Result<u16, ClientError> {
        if let Transport::InProcess(_) = self.t {
            let prefix = self.reply[..PREFIX_BYTES].try_into().expect("a reply");
            let p = codec::parse_prefix(prefix).expect("our own reply");
            self.order = p.order;
            return Ok(p.command);
        }
        let got = self.read_with(|rd, mut r| match head {
            None => rd.next(&mut r),
            Some(h) => rd.next_head(&mut r, h),
        });
        match got {
            Ok(Some(p)) => {
                self.order = p.order;
                Ok(p.command)
            }
            Ok(None) => Err(self.lost(
                request,
                io::Error::new(io::ErrorKind::UnexpectedEof, "no reply came"),
            )),
            Err(e) => Err(self.frame_error(request, e)),
        }
    }

    /// The payload (or head) of the last reply.
    fn payload(&self) -> &[u8] {
        match self.t {
            Transport::InProcess(_) => &self.reply[PREFIX_BYTES..],
            _ => self.rd.payload(),
        }
    }

    /// Read the next `dest.len()` bytes of the last reply's rest into `dest`.
    fn rest_into(&mut self, request: &'static str, dest: &mut [u8]) -> Result<(), ClientError> {
        if dest.is_empty() {
            return Ok(()); // in-process, or all of it was in the head
        }
        self.read_with(|rd, mut r| rd.rest_into(&mut r, dest))
            .map_err(|e| self.frame_error(request, e))
    }

    /// Send `req` and read its reply: `Ok` for `ok`, [`ClientError::Refused`] for the
    /// family's error reply (with its reason when `explain`), a protocol error otherwise.
    fn exchange(
        &mut self,
        req: &Request<'_>,
        ok: u16,
        head: Option<usize>,
        explain: bool,
    ) -> Result<(), ClientError> {
        let command = req.command(true);
        let request = cmd::name(command);
        self.send(req, true)?;
        let code = self.recv(request, head)?;
        if code == ok {
            return Ok(());
        }
        if Some(code) != cmd::error_reply(command) {
            let detail = format!("reply 0x{code:04x} ({})", cmd::name(code));
            return Err(self.broken(request, detail));
        }
        let reason = if explain {
            self.reason(req)
        } else {
            Reason::Unknown
        };
        let selection = match req {
            Request::GetDat(sel) | Request::GetEvt(sel) => *sel,
            _ => None,
        };
        Err(ClientError::Refused {
            addr: self.addr.clone(),
            request,
            reply: cmd::name(code),
            selection,
            reason,
        })
    }

    /// Why the server probably refused `req`: asks it for its state.
    fn reason(&mut self, req: &Request<'_>) -> Reason {
        match req {
            Request::GetHdr => return Reason::NoHeaderYet,
            Request::PutHdr { .. } => return Reason::Unknown,
            _ => {}
        }
        let (samples, events) = match self.counts(WaitDef::default(), false) {
            Ok(c) => c,
            Err(ClientError::Refused { .. }) => return Reason::NoHeader,
            Err(_) => return Reason::Unknown,
        };
        match req {
            Request::FlushHdr | Request::FlushDat | Request::FlushEvt | Request::WaitDat(_) => {
                Reason::NotFlushable
            }
            Request::GetDat(sel) => selection_reason(Unit::Samples, samples, *sel),
            Request::GetEvt(sel) => selection_reason(Unit::Events, events, *sel),
            Request::PutDat { def, .. } => match self.header(false) {
                Ok(h) if (h.def.nchans, h.def.data_type) != (def.nchans, def.data_type) => {
                    Reason::DataMismatch {
                        nchans: def.nchans,
                        data_type: def.data_type,
                        header_nchans: h.def.nchans,
                        header_type: h.def.data_type,
                    }
                }
                Ok(_) => Reason::DataRefused,
                Err(_) => Reason::Unknown,
            },
            Request::PutEvt(_) => Reason::EventsRefused,
            Request::GetHdr | Request::PutHdr { .. } => Reason::Unknown,
        }
    }

    /// PUT_HDR: (re)start the buffer with this shape; `chunks` as built by
    /// [`header_chunks`] or [`codec::push_chunk`].
    pub fn put_header(
        &mut self,
        nchans: u32,
        fsample: f32,
        data_type: u32,
        chunks: &[u8],
    ) -> Result<(), ClientError> {
        if nchans == 0 {
            return Err(ArgumentError::NoChannels.into());
        }
        if data_type == codec::DATATYPE_CHAR || codec::wordsize(data_type).is_none() {
            return Err(ArgumentError::DataType(data_type).into());
        }
        let bufsize = too_large("PUT_HDR", codec::HEADERDEF_BYTES, chunks.len())?;
        let req = Request::PutHdr {
            def: HeaderDef {
                nchans,
                nsamples: 0,
                nevents: 0,
                fsample,
                data_type,
                bufsize,
            },
            chunks: Cow::Borrowed(chunks),
        };
        self.exchange(&req, cmd::PUT_OK, None, true)?;
        self.known = Some((nchans, data_type));
        Ok(())
    }

    /// GET_HDR.
    pub fn get_header(&mut self) -> Result<Header, ClientError> {
        self.header(true)
    }

    fn header(&mut self, explain: bool) -> Result<Header, ClientError> {
        self.exchange(&Request::GetHdr, cmd::GET_OK, None, explain)?;
        let parsed = parse_header_payload(self.order, self.payload(), "GET_HDR")
            .map(|(def, chunks)| Header {
                def,
                chunks: chunks.into_owned(),
            })
            .map_err(|e| e.to_string());
        let h = parsed.map_err(|detail| self.broken("GET_HDR", detail))?;
        self.known = Some((h.def.nchans, h.def.data_type));
        Ok(h)
    }

    /// PUT_DAT of raw sample-major bytes (`nsamples × nchans` values of `data_type`).
    /// `respond = false` sends PUT_DAT_NORESPONSE (fire and forget). Data of another shape
    /// than the header this client last put or got are refused before sending.
    pub fn put_data_bytes(
        &mut self,
        nchans: u32,
        data_type: u32,
        data: &[u8],
        respond: bool,
    ) -> Result<(), ClientError> {
        let word = codec::wordsize(data_type)
            .filter(|_| data_type != codec::DATATYPE_CHAR)
            .ok_or(ArgumentError::DataType(data_type))?;
        if let Some((header, header_type)) = self.known {
            if nchans != header {
                return Err(ArgumentError::Channels { nchans, header }.into());
            }
            if data_type != header_type {
                return Err(ArgumentError::Type {
                    data_type,
                    header: header_type,
                }
                .into());
            }
        }
        let per = nchans as usize * word;
        if per == 0 || data.len() % per != 0 {
            return Err(ArgumentError::NotWholeSamples {
                bytes: data.len(),
                nchans,
                word,
            }
            .into());
        }
        let bufsize = too_large("PUT_DAT", DATADEF_BYTES, data.len())?;
        let req = Request::PutDat {
            def: DataDef {
                nchans,
                nsamples: (data.len() / per) as u32,
                data_type,
                bufsize,
            },
            data: Cow::Borrowed(data),
        };
        if respond {
            self.exchange(&req, cmd::PUT_OK, None, true)
        } else {
            self.send(&req, false)
        }
    }

    /// PUT_DAT of typed values, sample-major.
    pub fn put_data<T: Sample>(&mut self, nchans: u32, data: &[T]) -> Result<(), ClientError> {
        self.put_data_bytes(nchans, T::DTYPE.code(), as_bytes(data), true)
    }

    /// GET_DAT of samples `begin..=end` (`None`: everything kept; `end = u32::MAX`: up to
    /// the newest) straight into the caller's memory: once the datadef has arrived,
    /// `dest(datadef, bytes)` gives exactly `bytes` bytes for the samples (native order),
    /// which are read from the socket into them. Returns the datadef.
    pub fn get_data_with<'b>(
        &mut self,
        sel: Option<(u32, u32)>,
        dest: impl FnOnce(&DataDef, usize) -> &'b mut [u8],
    ) -> Result<DataDef, ClientError> {
        let req = Request::GetDat(sel.map(|(begin, end)| Selection { begin, end }));
        self.exchange(&req, cmd::GET_OK, Some(DATADEF_BYTES), true)?;
        let (order, head) = (self.order, self.payload());
        // the payload after the datadef: in-process all of it is in `head`
        let left = head.len().saturating_sub(DATADEF_BYTES) + self.rd_rest();
        let checked = codec::parse_datadef_head(order, head, "GET_DAT").and_then(|def| {
            let need = codec::check_datadef(&def, left, "GET_DAT")?;
            if def.data_type == codec::DATATYPE_CHAR {
                return Err(codec::RequestError::Inconsistent {
                    command: "GET_DAT",
                    detail: "samples of data type 0 (char)".into(),
                });
            }
            Ok((def, need))
        });
        let (def, need) = checked.map_err(|e| self.broken("GET_DAT", e.to_string()))?;
        let out = dest(&def, need);
        if out.len() != need {
            return Err(ArgumentError::Destination {
                got: out.len(),
                need,
            }
            .into());
        }
        let head = self.payload();
        let held = head.len().saturating_sub(DATADEF_BYTES).min(need);
        out[..held].copy_from_slice(&head[DATADEF_BYTES..DATADEF_BYTES + held]);
        self.rest_into("GET_DAT", &mut out[held..])?;
        if order.is_foreign() {
            codec::swap_words(out, codec::wordsize(def.data_type).unwrap_or(1));
        }
        Ok(def)
    }

    /// Payload bytes of the last reply not read yet (none in-process).
    fn rd_rest(&self) -> usize {
        match self.t {
            Transport::InProcess(_) => 0,
            _ => self.rd.rest(),
        }
    }

    /// GET_DAT of samples `begin..=end` (`None`: everything kept) into `out` (replaced).
    /// Returns the datadef.
    pub fn get_data_into(
        &mut self,
        sel: Option<(u32, u32)>,
        out: &mut Vec<u8>,
    ) -> Result<DataDef, ClientError> {
        self.get_data_with(sel, |_, need| {
            out.resize(need, 0); // every byte is overwritten: only growth is zeroed
            out
        })
    }

    /// GET_DAT of samples `begin..=end` as typed values (sample-major).
    pub fn get_data<T: Sample>(&mut self, begin: u32, end: u32) -> Result<Vec<T>, ClientError> {
        let mut bytes = Vec::new();
        let def = self.get_data_into(Some((begin, end)), &mut bytes)?;
        if def.data_type != T::DTYPE.code() {
            return Err(ArgumentError::HeldType {
                held: def.data_type,
                asked: T::DTYPE.code(),
            }
            .into());
        }
        let n = bytes.len() / T::DTYPE.itemsize();
        let mut v: Vec<T> = Vec::with_capacity(n);
        // SAFETY: `v` has room for `n` values = `bytes.len()` bytes (parse_data_payload
        // returned exactly nchans x nsamples x itemsize bytes of T's dtype); every bit
        // pattern is a valid `Sample` value, so after the copy all `n` are initialised.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                v.as_mut_ptr().cast::<u8>(),
                n * T::DTYPE.itemsize(),
            );
            v.set_len(n);
        }
        Ok(v)
    }

    /// PUT_EVT of `events` in one request (none: nothing is sent).
    pub fn put_events(&mut self, events: &[WireEvent<'_>]) -> Result<(), ClientError> {
        self.put_evt(events, true)
    }

    /// PUT_EVT_NORESPONSE: `events` in one request, fire and forget.
    pub fn put_events_no_response(&mut self, events: &[WireEvent<'_>]) -> Result<(), ClientError> {
        self.put_evt(events, false)
    }

    fn put_evt(&mut self, events: &[WireEvent<'_>], respond: bool) -> Result<(), ClientError> {
        if events.is_empty() {
            return Ok(());
        }
        too_large("PUT_EVT", 0, events.iter().map(WireEvent::wire_bytes).sum())?;
        let req = Request::PutEvt(events.to_vec());
        if respond {
            self.exchange(&req, cmd::PUT_OK, None, true)
        } else {
            self.send(&req, false)
        }
    }

    /// GET_EVT of events `begin..=end` (`None`: every event kept).
    pub fn get_events(
        &mut self,
        sel: Option<(u32, u32)>,
    ) -> Result<Vec<WireEvent<'static>>, ClientError> {
        let req = Request::GetEvt(sel.map(|(begin, end)| Selection { begin, end }));
        self.exchange(&req, cmd::GET_OK, None, true)?;
        let parsed = parse_events(self.order, self.payload(), "GET_EVT")
            .map(|evs| evs.into_iter().map(WireEvent::into_owned).collect())
            .map_err(|e| e.to_string());
        parsed.map_err(|detail| self.broken("GET_EVT", detail))
    }

    /// GET_EVT of events `begin` to the newest (GET_EVT has no open end, unlike GET_DAT:
    /// one WAIT_DAT asks how many there are first).
    pub fn get_events_from(&mut self, begin: u32) -> Result<Vec<WireEvent<'static>>, ClientError> {
        let (_, events) = self.poll()?;
        self.get_events(Some((begin, events.max(1) - 1)))
    }

    /// WAIT_DAT: until more than `nsamples` samples or `nevents` events exist, or
    /// `timeout_ms` passes. Returns the current (samples, events).
    pub fn wait(
        &mut self,
        nsamples: u32,
        nevents: u32,
        timeout_ms: u32,
    ) -> Result<(u32, u32), ClientError> {
        let w = WaitDef {
            nsamples,
            nevents,
            timeout_ms,
        };
        self.counts(w, true)
    }

    fn counts(&mut self, w: WaitDef, explain: bool) -> Result<(u32, u32), ClientError> {
        self.exchange(&Request::WaitDat(w), cmd::WAIT_OK, None, explain)?;
        let parsed = parse_samples_events(self.order, self.payload()).map_err(|e| e.to_string());
        parsed.map_err(|detail| self.broken("WAIT_DAT", detail))
    }

    /// The current (samples, events) without waiting.
    pub fn poll(&mut self) -> Result<(u32, u32), ClientError> {
        self.wait(0, 0, 0)
    }

    /// FLUSH_HDR: delete header, samples and events.
    pub fn flush_header(&mut self) -> Result<(), ClientError> {
        self.exchange(&Request::FlushHdr, cmd::FLUSH_OK, None, true)?;
        self.known = None;
        Ok(())
    }

    /// FLUSH_DAT: delete the samples.
    pub fn flush_data(&mut self) -> Result<(), ClientError> {
        self.exchange(&Request::FlushDat, cmd::FLUSH_OK, None, true)
    }

    /// FLUSH_EVT: delete the events.
    pub fn flush_events(&mut self) -> Result<(), ClientError> {
        self.exchange(&Request::FlushEvt, cmd::FLUSH_OK, None, true)
    }
}

/// The reason a selection of `unit` was refused when the server counts `n` of them.
fn selection_reason(unit: Unit, n: u32, sel: Option<Selection>) -> Reason {
    match sel {
        Some(Selection { begin, end })
            if end != u32::MAX && u64::from(begin) > u64::from(end) + 1 =>
        {
            Reason::Backwards {
                unit,
                begin,
                end,
                held: n,
            }
        }
        Some(Selection { begin, end }) if begin >= n || (end != u32::MAX && end >= n) => {
            Reason::NotYet { unit, held: n }
        }
        None if n == 0 => Reason::NoneYet { unit },
        _ => Reason::NotKept { unit, held: n },
    }
}

/// `fixed + payload` as a message's 32-bit size field, or [`ArgumentError::TooLarge`].
fn too_large(request: &'static str, fixed: usize, payload: usize) -> Result<u32, ArgumentError> {
    u32::try_from(fixed + payload)
        .map(|_| payload as u32)
        .map_err(|_| ArgumentError::TooLarge {
            request,
            bytes: fixed + payload,
        })
}

/// A socket read that, each time the socket's read timeout passes, asks `check` whether to
/// go on waiting ([`Client::set_interrupt`]).
struct Checked<'a, R> {
    inner: R,
    check: Option<&'a mut InterruptCheck>,
    stopped: &'a mut bool,
}

impl<'a, R> Checked<'a, R> {
    fn new(inner: R, check: Option<&'a mut InterruptCheck>, stopped: &'a mut bool) -> Self {
        Checked {
            inner,
            check,
            stopped,
        }
    }
}

impl<R: Read> Read for Checked<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.inner.read(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    let Some(check) = self.check.as_mut() else {
                        return Err(e);
                    };
                    if !check() {
                        *self.stopped = true;
                        return Err(io::Error::other("interrupted"));
                    }
                }
                other => return other,
            }
        }
    }
}

fn as_bytes<T: Sample>(data: &[T]) -> &[u8] {
    // SAFETY: `Sample` types are plain numbers with no padding and no invalid bit
    // patterns; the slice covers exactly `size_of_val(data)` initialised bytes.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// Write `head` then `data` with as few syscalls as the kernel allows (writev).
fn write_all_vectored<W: Write>(w: &mut W, head: &[u8], data: &[u8]) -> io::Result<()> {
    let mut bufs = [IoSlice::new(head), IoSlice::new(data)];
    let mut bufs: &mut [IoSlice<'_>] = &mut bufs;
    if data.is_empty() {
        return w.write_all(head);
    }
    while !bufs.is_empty() {
        match w.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{put_status, ByteOrder};
    use crate::BufferConfig;
    use rtloop_testkit::{unique_name, StreamGuard};

    #[test]
    fn addresses_parse_and_print() {
        let tcp = |host: &str, port| Address::Tcp {
            host: host.into(),
            port,
        };
        let p = |s| Address::parse(s, 1972).unwrap();
        assert_eq!(p("localhost"), tcp("localhost", 1972));
        assert_eq!(p("buffer://example.org:1973"), tcp("example.org", 1973));
        assert_eq!(p("tcp://10.0.0.1:5"), tcp("10.0.0.1", 5));
        assert_eq!(p("buffer://host/"), tcp("host", 1972));
        assert_eq!(p(":7"), tcp("localhost", 7));
        assert_eq!(p(""), tcp("localhost", 1972));
        assert_eq!(p("[::1]:1974"), tcp("::1", 1974));
        assert_eq!(p("::1"), tcp("::1", 1972));
        assert_eq!(p("unix:/tmp/ft.sock"), Address::Unix("/tmp/ft.sock".into()));
        assert_eq!(
            p("unix:///tmp/ft.sock"),
            Address::Unix("/tmp/ft.sock".into())
        );
        for (s, shown) in [
            ("buffer://h:1", "h:1"),
            ("[::1]:2", "[::1]:2"),
            ("unix:/a b", "unix:/a b"),
        ] {
            assert_eq!(p(s).to_string(), shown);
        }
        let e = Address::parse("host:abc", 1972).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"bad address "host:abc": the port "abc" is not a number from 0 to 65535"#
        );
        assert!(matches!(
            Address::parse("[::1:5", 1972),
            Err(AddressError::Bracket { .. })
        ));
        assert!(matches!(
            Address::parse("h:70000", 1972),
            Err(AddressError::Port { .. })
        ));
    }

    #[test]
    fn header_chunks_put_the_labels_first_and_check_them() {
        let other: &[u8] = b"\x00k\xff";
        let got = header_chunks(2, &["Fz", "Cz"], &[(1, b"dropped"), (42, other), (0, b"")]);
        let mut want = Vec::new();
        codec::push_chunk(&mut want, codec::chunk::CHANNEL_NAMES, b"Fz\0Cz\0");
        codec::push_chunk(&mut want, 42, other);
        codec::push_chunk(&mut want, 0, b"");
        assert_eq!(got.unwrap(), want);
        // no labels: a CHANNEL_NAMES chunk among the chunks is kept as given
        let none: &[&str] = &[];
        let mut want = Vec::new();
        codec::push_chunk(&mut want, 1, b"x\0");
        assert_eq!(header_chunks(1, none, &[(1, b"x\0")]).unwrap(), want);
        assert_eq!(
            header_chunks(2, &["a"], &[]),
            Err(ArgumentError::Labels {
                labels: 1,
                nchans: 2
            })
        );
        assert_eq!(
            header_chunks(2, &["a", "b\0c"], &[]),
            Err(ArgumentError::LabelNul)
        );
    }

    fn buffer() -> (Arc<Buffer>, StreamGuard) {
        let name = unique_name("ftc");
        let mut cfg = BufferConfig::new(&name);
        cfg.capacity = 100;
        cfg.events = 8;
        cfg.remove_on_drop = true;
        (Arc::new(Buffer::new(cfg)), StreamGuard::new(&name))
    }

    #[test]
    fn refusals_say_why_and_bad_data_are_refused_before_sending() {
        let (b, _guard) = buffer();
        let mut c = Client::in_process(b.clone());
        let msg = |e: ClientError| e.to_string();
        assert_eq!(
            msg(c.get_header().unwrap_err()),
            "GET_HDR refused by the server at in-process (GET_ERR): there is no header yet \
             (nothing was PUT_HDR, or FLUSH_HDR deleted it)"
        );
        let e = c.put_data(1, &[1.0f32]).unwrap_err();
        assert!(
            matches!(
                e,
                ClientError::Refused {
                    reply: "PUT_ERR",
                    reason: Reason::NoHeader,
                    ..
                }
            ),
            "{e}"
        );
        assert!(matches!(
            c.put_header(0, 1.0, 9, &[]),
            Err(ClientError::Argument(ArgumentError::NoChannels))
        ));
        assert!(matches!(
            c.put_header(1, 1.0, 0, &[]),
            Err(ClientError::Argument(ArgumentError::DataType(0)))
        ));
        c.put_header(2, 100.0, 9, &[]).unwrap();
        c.put_data(2, &[0.5f32, 1.5, 2.5, 3.5]).unwrap();
        assert_eq!(
            msg(c.put_data(3, &[0.0f32; 3]).unwrap_err()),
            "data have 3 channels, the header 2: give an array of shape (samples, 2)"
        );
        assert_eq!(
            msg(c.put_data(2, &[0.0f64; 2]).unwrap_err()),
            "data are float64, the header float32: convert them first"
        );
        assert_eq!(
            msg(c.get_data::<f32>(5, 3).unwrap_err()),
            "GET_DAT [5, 3] refused by the server at in-process (GET_ERR): the selection is \
             backwards (begin 5 > end 3 + 1); it holds samples 0..1"
        );
        assert_eq!(
            msg(c
                .get_data_into(Some((1, u32::MAX - 1)), &mut Vec::new())
                .unwrap_err()),
            "GET_DAT [1, 4294967294] refused by the server at in-process (GET_ERR): the \
             samples are not in the buffer yet; it holds samples 0..1"
        );
        assert!(msg(c.get_data::<f32>(5, u32::MAX).unwrap_err()).starts_with("GET_DAT [5, newest]"));
        assert_eq!(c.get_data::<f32>(1, u32::MAX).unwrap(), [2.5, 3.5]);
        assert_eq!(
            msg(c.get_events(None).unwrap_err()),
            "GET_EVT refused by the server at in-process (GET_ERR): there are no events yet"
        );
        c.put_events(&[]).unwrap();
        c.put_events(&[WireEvent::text("a", "b", 0), WireEvent::text("c", "d", 1)])
            .unwrap();
        c.put_events_no_response(&[WireEvent::text("e", "f", 1)])
            .unwrap();
        assert_eq!(c.poll().unwrap(), (2, 3));
        let from: Vec<_> = c
            .get_events_from(1)
            .unwrap()
            .into_iter()
            .map(|e| e.sample)
            .collect();
        assert_eq!(from, [1, 1]);
        // another client changes the header: the refusal says how, and this one learns it
        Client::in_process(b).put_header(3, 1.0, 6, &[]).unwrap();
        assert_eq!(
            msg(c.put_data(2, &[0.0f32; 2]).unwrap_err()),
            "PUT_DAT refused by the server at in-process (PUT_ERR): the data are 2 channels of \
             float32, the header says 3 channels of int16"
        );
        c.put_data(3, &[1i16, 2, 3]).unwrap();
        c.flush_header().unwrap();
        assert!(matches!(
            c.flush_data(),
            Err(ClientError::Refused {
                reason: Reason::NoHeader,
                ..
            })
        ));
        // the header is forgotten with the flush: nothing is refused before sending
        assert!(matches!(
            c.put_data(1, &[1u8]),
            Err(ClientError::Refused { .. })
        ));
    }

    /// A client on one end of a socket pair, and a fake server on the other.
    fn pair() -> (Client, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        (Client::with(Transport::Unix(a), "unix:pair".into()), b)
    }

    /// Read one request from `s`.
    fn request(s: &mut UnixStream) -> u16 {
        let mut rd = MessageReader::new(1 << 20);
        rd.next(s).unwrap().unwrap().command
    }

    #[test]
    fn samples_are_read_straight_in_and_a_broken_reply_closes_the_connection() {
        let (mut c, mut s) = pair();
        let server = std::thread::spawn(move || {
            // a big-endian server: every field and sample swapped
            assert_eq!(request(&mut s), cmd::GET_DAT);
            let mut r = Vec::new();
            put_prefix(ByteOrder::Big, cmd::GET_OK, 16 + 3 * 20_000 * 2 + 5, &mut r);
            let def = DataDef {
                nchans: 3,
                nsamples: 20_000,
                data_type: 6,
                bufsize: 3 * 20_000 * 2 + 5,
            };
            put_datadef(ByteOrder::Big, &def, &mut r);
            for i in 0..60_000u32 {
                r.extend_from_slice(&(i as i16).to_be_bytes());
            }
            r.extend_from_slice(&[0xee; 5]); // slack after the samples
            s.write_all(&r).unwrap();
            assert_eq!(request(&mut s), cmd::WAIT_DAT);
            let mut r = Vec::new();
            put_status(ByteOrder::Little, cmd::WAIT_OK, &mut r);
            r[0] = 2; // protocol version 2
            s.write_all(&r).unwrap();
            s
        });
        let mut out = Vec::new();
        let def = c.get_data_into(None, &mut out).unwrap();
        assert_eq!((def.nchans, def.nsamples), (3, 20_000));
        let values: Vec<i16> = out
            .chunks_exact(2)
            .map(|b| i16::from_ne_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(values, (0..60_000u32).map(|i| i as i16).collect::<Vec<_>>());
        let e = c.poll().unwrap_err();
        assert!(
            matches!(
                e,
                ClientError::Protocol {
                    request: "WAIT_DAT",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("connection closed"), "{e}");
        assert!(!c.is_open());
        assert!(matches!(c.poll(), Err(ClientError::Closed { .. })));
        drop(server.join().unwrap());
    }

    #[test]
    fn a_lost_connection_names_the_request_and_closes() {
        let (mut c, s) = pair();
        drop(s);
        let e = c.get_header().unwrap_err();
        assert!(
            e.to_string().starts_with(
                "the FieldTrip buffer at unix:pair closed the connection during GET_HDR: "
            ),
            "{e}"
        );
        assert!(!c.is_open());
    }

    #[test]
    fn the_interrupt_check_gives_up_waiting() {
        let (mut c, mut s) = pair();
        let mut asked = 0;
        c.set_interrupt(
            Duration::from_millis(5),
            Box::new(move || {
                asked += 1;
                asked < 3
            }),
        )
        .unwrap();
        let server = std::thread::spawn(move || {
            assert_eq!(request(&mut s), cmd::WAIT_DAT);
            s // and never answers
        });
        let e = c.wait(0, 0, 60_000).unwrap_err();
        assert!(
            matches!(
                e,
                ClientError::Interrupted {
                    request: "WAIT_DAT",
                    ..
                }
            ),
            "{e}"
        );
        assert!(!c.is_open());
        drop(server.join().unwrap());
    }
}
