//! One writer side and one reader side per transport, behind rtloop-transport's
//! [`Sender`] and [`Receiver`] (the traits the latency lab's link is built from too): stream
//! and unix are rtloop-transport's own channels, set up for a trial here; LSL, ZeroMQ and
//! iceoryx2 implement the traits in this crate (their libraries stay out of the lab).
//!
//! A writer is opened first and says where readers connect ([`Sender::endpoint`]); readers
//! connect and say they are ready; then [`Sender::prepare`] waits until every reader can
//! receive (accepted, subscribed, connected) so no chunk is sent into the void.

pub use rtloop_transport::{Receiver, Sender, TransportError};

use crate::{PeerError, Transport, Trial};

#[cfg(feature = "iceoryx2")]
pub mod iceoryx2;
pub mod lsl;
pub mod stream;
pub mod unix;
pub mod zmq;

/// A message of another size than the trial's chunks (the message-based transports hand
/// out one chunk per message).
#[derive(Debug, thiserror::Error)]
#[error("a message of {got} bytes; chunks are {chunk}")]
pub struct WrongSize {
    /// Bytes received.
    pub got: usize,
    /// Bytes of a chunk.
    pub chunk: usize,
}

impl WrongSize {
    pub(crate) fn error(transport: Transport, got: usize, chunk: usize) -> TransportError {
        TransportError::library(transport.name(), "recv")(WrongSize { got, chunk })
    }
}

/// The most samples a reader takes at once where the transport lets it batch (stream, UNIX
/// socket, LSL): what a reader that fell behind catches up with in one call.
pub(crate) fn batch_samples(t: &Trial) -> usize {
    t.chunk.max(256)
}

/// Bytes of history the shared-memory transports (stream, iceoryx2) keep per reader: two
/// seconds of data at the nominal rate, as an rtloop stream is configured (history), at least
/// 4 chunks. Larger than the last-level cache on purpose: a ring that fits in it is bimodal on
/// this kind of VM (2 or 30 GB/s depending on where the host puts the vCPUs), one that does
/// not is steady (measured on these machines with a bare ring).
pub(crate) fn history_bytes(t: &Trial) -> usize {
    let two_seconds = (2.0 * t.rate) as usize * t.sample_bytes();
    two_seconds.max(4 * t.chunk_bytes())
}

/// Open the writer side of `t.transport`.
pub fn open_sender(t: &Trial) -> Result<Box<dyn Sender>, PeerError> {
    t.validate()?;
    Ok(match t.transport {
        Transport::Stream => Box::new(stream::open_sender(t)?),
        Transport::Unix => Box::new(unix::open_sender(t)?),
        Transport::ZmqIpc | Transport::ZmqTcp => Box::new(zmq::ZmqSender::open(t)?),
        Transport::Lsl => Box::new(lsl::LslSender::open(t)?),
        #[cfg(feature = "iceoryx2")]
        Transport::Iceoryx2 => Box::new(iceoryx2::Ix2Sender::open(t)?),
        #[cfg(not(feature = "iceoryx2"))]
        Transport::Iceoryx2 => return Err(Transport::Iceoryx2.check_available().unwrap_err()),
    })
}

/// Open a reader side of `t.transport` at the writer's `endpoint`.
pub fn open_receiver(t: &Trial, endpoint: &str) -> Result<Box<dyn Receiver>, PeerError> {
    t.validate()?;
    Ok(match t.transport {
        Transport::Stream => Box::new(stream::open_receiver(t, endpoint)?),
        Transport::Unix => Box::new(unix::open_receiver(t, endpoint)?),
        Transport::ZmqIpc | Transport::ZmqTcp => Box::new(zmq::ZmqReceiver::open(t, endpoint)?),
        Transport::Lsl => Box::new(lsl::LslReceiver::open(t, endpoint)?),
        #[cfg(feature = "iceoryx2")]
        Transport::Iceoryx2 => Box::new(iceoryx2::Ix2Receiver::open(t, endpoint)?),
        #[cfg(not(feature = "iceoryx2"))]
        Transport::Iceoryx2 => return Err(Transport::Iceoryx2.check_available().unwrap_err()),
    })
}
