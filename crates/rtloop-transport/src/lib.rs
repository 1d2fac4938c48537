//! # rtloop-transport
//!
//! rtloop's one transport abstraction: a one-directional byte channel, a [`Sender`] at one
//! end and a [`Receiver`] at the other. The latency lab builds its device↔host link from two
//! of them (device→host frames, host→device words); `rtloop bench peers` runs its writer and
//! readers through them (rtloop-peers adds LSL, ZeroMQ and iceoryx2 behind the same traits).
//!
//! | transport | sender | receiver waits on | [`Endpoint`] |
//! |---|---|---|---|
//! | [`stream`] | an rtloop stream's writer (one copy in) | the stream's futex (lossless reader, read in place) | `Stream(name)` |
//! | [`socket`] (UNIX) | `write` on a UNIX stream socket | `recv` with a timeout | `Unix(path)` |
//! | [`socket`] (TCP) | `write` on TCP to 127.0.0.1 (`TCP_NODELAY`) | `recv` with a timeout | `Tcp(addr)` |
//! | [`fieldtrip`] | PUT_DAT to a FieldTrip buffer server | WAIT_DAT + GET_DAT | `FieldTrip(addr)` |
//!
//! Every wait blocks (futex, a socket read with a timeout, the server's WAIT_DAT) after an
//! optional short spin ([`ReceiverOptions::spin`]); nothing busy-waits unbounded.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod fieldtrip;
pub mod socket;
pub mod stream;

/// Why a channel could not be set up or failed while moving data.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// A transport name nobody knows.
    #[error("unknown transport {given:?}; allowed: {allowed}")]
    Unknown {
        /// What was given.
        given: String,
        /// What is allowed, comma-separated.
        allowed: String,
    },
    /// An rtloop stream call failed.
    #[error("stream {name:?}: {source}")]
    Stream {
        /// The stream.
        name: String,
        /// What failed.
        #[source]
        source: Box<rtloop_stream::Error>,
    },
    /// A FieldTrip buffer call failed.
    #[error("{source}")]
    FieldTrip {
        /// What failed.
        #[source]
        source: Box<rtloop_fieldtrip::ClientError>,
    },
    /// Binding, listening on or connecting to an endpoint failed.
    #[error("{transport}: cannot {action} {endpoint}: {source}")]
    Endpoint {
        /// Transport name.
        transport: &'static str,
        /// `bind`, `connect`, `accept on`, ...
        action: &'static str,
        /// Where.
        endpoint: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A system call failed while moving data or setting a channel up.
    #[error("{transport}: {action}: {source}")]
    Io {
        /// Transport name.
        transport: &'static str,
        /// The call (`send`, `recv`, `set timeout`, ...).
        action: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The other end closed the channel.
    #[error("{transport}: the other end closed the connection")]
    Closed {
        /// Transport name.
        transport: &'static str,
    },
    /// Fewer receivers than expected connected in time.
    #[error("{transport}: {connected} of {wanted} receivers connected within {timeout:?}")]
    NotConnected {
        /// Transport name.
        transport: &'static str,
        /// Receivers that did.
        connected: usize,
        /// Receivers expected.
        wanted: usize,
        /// How long the sender waited.
        timeout: Duration,
    },
    /// The other end never did what it had to within the time given.
    #[error("{transport}: timed out waiting for {what}")]
    Timeout {
        /// Transport name.
        transport: &'static str,
        /// What did not happen.
        what: &'static str,
    },
    /// A transport's library failed (LSL, ZeroMQ, iceoryx2: implemented outside this crate).
    #[error("{transport}: {action}: {source}")]
    Library {
        /// Transport name.
        transport: &'static str,
        /// The call.
        action: &'static str,
        /// The library's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl TransportError {
    /// A stream error, with the stream's name.
    pub fn stream(name: &str, source: impl Into<rtloop_stream::Error>) -> TransportError {
        TransportError::Stream {
            name: name.to_owned(),
            source: Box::new(source.into()),
        }
    }

    /// A library's error from the call `action`, for `map_err`.
    pub fn library<E: std::error::Error + Send + Sync + 'static>(
        transport: &'static str,
        action: &'static str,
    ) -> impl FnOnce(E) -> TransportError {
        move |e| TransportError::Library {
            transport,
            action,
            source: Box::new(e),
        }
    }

    /// A system call's error.
    #[must_use]
    pub fn io(transport: &'static str, action: &'static str, source: std::io::Error) -> Self {
        TransportError::Io {
            transport,
            action,
            source,
        }
    }
}

impl From<rtloop_fieldtrip::ClientError> for TransportError {
    fn from(source: rtloop_fieldtrip::ClientError) -> Self {
        TransportError::FieldTrip {
            source: Box::new(source),
        }
    }
}

/// The sending end of a one-directional channel.
pub trait Sender {
    /// Where receivers connect (a stream name, a socket path, an address, a ZeroMQ endpoint,
    /// an LSL outlet name, ...).
    fn endpoint(&self) -> String;
    /// Wait until `receivers` receivers can receive (accepted, subscribed, connected) so
    /// nothing is sent into the void; `timeout` bounds the wait. Transports whose receivers
    /// are ready once they are open do nothing.
    fn prepare(&mut self, receivers: usize, timeout: Duration) -> Result<(), TransportError> {
        let _ = (receivers, timeout);
        Ok(())
    }
    /// Hand `bytes` (whole units: samples, words) to every receiver. Lossless: blocks while a
    /// receiver is full.
    fn send(&mut self, bytes: &[u8]) -> Result<(), TransportError>;
    /// Nothing more will be sent: flush what is buffered.
    fn finish(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
}

/// The receiving end of a one-directional channel.
pub trait Receiver {
    /// The next whole units that arrived (copied into the receiver's memory, or in place for
    /// the shared-memory transports), valid until the next call; empty after `timeout` with
    /// nothing received. A zero `timeout` never blocks (a poll).
    fn recv(&mut self, timeout: Duration) -> Result<&[u8], TransportError>;
}

/// A receiver that also fills a caller's block exactly, copying each byte once (straight
/// from the socket or the ring into `buf`): how the lab's host reads ReadSize blocks.
pub trait BlockReceiver: Receiver {
    /// Fill `buf[*filled..]`, advancing `filled`; returns when `buf` is full or when a wait
    /// for more found nothing within `timeout` (call again with the rest; the caller checks
    /// on the sender in between). `buf`'s length is a multiple of the unit.
    fn fill(
        &mut self,
        buf: &mut [u8],
        filled: &mut usize,
        timeout: Duration,
    ) -> Result<(), TransportError>;
}

/// How a receiver takes what arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverOptions {
    /// Bytes of one unit (a sample, a word): [`Receiver::recv`] hands out whole units only.
    pub unit: usize,
    /// The most units one [`Receiver::recv`] hands out (what a receiver that fell behind
    /// catches up with in one call; a socket receiver's buffer).
    pub batch: usize,
    /// How long a wait polls before it blocks (zero: it blocks at once).
    pub spin: Duration,
}

impl ReceiverOptions {
    /// Units of `unit` bytes, `batch` at most per `recv`, no spinning.
    #[must_use]
    pub fn new(unit: usize, batch: usize) -> ReceiverOptions {
        ReceiverOptions {
            unit: unit.max(1),
            batch: batch.max(1),
            spin: Duration::ZERO,
        }
    }

    /// The same, polling for `spin` before each blocking wait.
    #[must_use]
    pub fn spin(self, spin: Duration) -> ReceiverOptions {
        ReceiverOptions { spin, ..self }
    }
}

/// Where one channel's sender and receiver meet: what a process hands another (as JSON) so it
/// can connect its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Endpoint {
    /// An rtloop stream, by name (its creator removes it).
    Stream(String),
    /// A UNIX stream socket's path (its listener removes it).
    Unix(PathBuf),
    /// A TCP address, `HOST:PORT`.
    Tcp(String),
    /// A FieldTrip buffer server, `HOST:PORT`.
    FieldTrip(String),
}

impl Endpoint {
    /// The transport's name.
    #[must_use]
    pub fn transport(&self) -> &'static str {
        match self {
            Endpoint::Stream(_) => stream::NAME,
            Endpoint::Unix(_) => socket::UNIX,
            Endpoint::Tcp(_) => socket::TCP,
            Endpoint::FieldTrip(_) => fieldtrip::NAME,
        }
    }

    /// Connect a sender to this endpoint (the endpoint exists: a stream created, a socket
    /// listening, a server running).
    pub fn sender(&self) -> Result<Box<dyn Sender>, TransportError> {
        Ok(match self {
            Endpoint::Stream(name) => Box::new(stream::StreamSender::open(name)?),
            Endpoint::Unix(_) | Endpoint::Tcp(_) => Box::new(socket::connect(self)?.sender()),
            Endpoint::FieldTrip(addr) => Box::new(fieldtrip::FieldTripSender::connect(addr)?),
        })
    }

    /// Connect a receiver to this endpoint.
    pub fn receiver(
        &self,
        opts: ReceiverOptions,
    ) -> Result<Box<dyn BlockReceiver>, TransportError> {
        Ok(match self {
            Endpoint::Stream(name) => Box::new(stream::StreamReceiver::open(name, opts)?),
            Endpoint::Unix(_) | Endpoint::Tcp(_) => Box::new(socket::connect(self)?.receiver(opts)),
            Endpoint::FieldTrip(addr) => Box::new(fieldtrip::FieldTripReceiver::connect(
                addr,
                opts,
                fieldtrip::HEADER_WAIT,
            )?),
        })
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Stream(n) => write!(f, "stream {n}"),
            Endpoint::Unix(p) => write!(f, "unix {}", p.display()),
            Endpoint::Tcp(a) => write!(f, "tcp {a}"),
            Endpoint::FieldTrip(a) => write!(f, "fieldtrip {a}"),
        }
    }
}
