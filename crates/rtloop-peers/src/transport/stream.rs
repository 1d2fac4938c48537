//! rtloop's stream: the writer commits each chunk into shared memory (one copy in); lossless
//! readers wait on the stream's futex and read the samples where they are (zero-copy), as
//! rtloop-transport's stream channel does.

use std::time::Duration;

use rtloop_stream::{DType, StreamConfig};
use rtloop_transport::stream::{StreamReceiver, StreamSender};
use rtloop_transport::ReceiverOptions;

use super::{batch_samples, history_bytes};
use crate::{PeerError, Trial, Wait};

/// Samples the ring holds: two seconds of history (see [`history_bytes`]).
fn capacity(t: &Trial) -> u64 {
    (history_bytes(t) / t.sample_bytes()) as u64
}

/// The writer: creates the stream `peers-TAG`, removed when dropped.
pub fn open_sender(t: &Trial) -> Result<StreamSender, PeerError> {
    let name = format!("peers-{}", t.tag);
    let cfg = StreamConfig::new(DType::I16, t.channels, t.rate, capacity(t));
    let mut tx = StreamSender::create(&name, &cfg)?;
    let writer = tx.writer_mut();
    // a reader preempted for a while must not end the run: the writer waits for it
    writer.set_lossless_timeout(Duration::from_secs(30));
    // a writer with a core of its own (readers spin) spins for room as well: sleeping on
    // the futex each time the ring is full costs a wake-up per reader release
    writer.set_spin(match t.wait {
        Wait::Spin => Duration::from_millis(10),
        Wait::Block => Duration::from_micros(t.stream_spin_us),
    });
    Ok(tx)
}

/// A lossless reader of the stream at its newest sample, reading in place; a wait spins
/// `--stream-spin-us` before it sleeps on the futex.
pub fn open_receiver(t: &Trial, endpoint: &str) -> Result<StreamReceiver, PeerError> {
    let opts = ReceiverOptions::new(t.sample_bytes(), batch_samples(t))
        .spin(Duration::from_micros(t.stream_spin_us));
    Ok(StreamReceiver::open(endpoint, opts)?)
}
