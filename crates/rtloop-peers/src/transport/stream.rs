//! rtloop's stream: the writer commits each chunk into shared memory (one copy in); lossless
//! readers wait on the stream's futex and read the samples where they are (zero-copy).

use std::time::Duration;

use rtloop_stream::{DType, ReaderMode, Stream, StreamConfig, WaitError, Window, Writer};

use super::{batch_samples, history_bytes, Receiver, Sender};
use crate::{terr, PeerError, Transport, Trial, Wait};

/// Samples the ring holds: two seconds of history (see [`history_bytes`]).
fn capacity(t: &Trial) -> u64 {
    (history_bytes(t) / t.sample_bytes()) as u64
}

/// The writer: creates the stream `rtloop-peers-TAG`, removed when dropped.
pub struct StreamSender {
    writer: Writer,
    name: String,
}

impl StreamSender {
    /// Create the stream and take its writer.
    pub fn open(t: &Trial) -> Result<StreamSender, PeerError> {
        let name = format!("peers-{}", t.tag);
        let cfg = StreamConfig::new(DType::I16, t.channels, t.rate, capacity(t));
        let stream = Stream::create(&name, &cfg).map_err(|e| terr(Transport::Stream, e))?;
        let mut writer = stream.writer().map_err(|e| terr(Transport::Stream, e))?;
        // a reader preempted for a while must not end the run: the writer waits for it
        writer.set_lossless_timeout(Duration::from_secs(30));
        // a writer with a core of its own (readers spin) spins for room as well: sleeping on
        // the futex each time the ring is full costs a wake-up per reader release
        writer.set_spin(match t.wait {
            Wait::Spin => Duration::from_millis(10),
            Wait::Block => Duration::from_micros(t.stream_spin_us),
        });
        Ok(StreamSender { writer, name })
    }
}

impl Drop for StreamSender {
    fn drop(&mut self) {
        let _ = Stream::remove(&self.name);
    }
}

impl Sender for StreamSender {
    fn endpoint(&self) -> String {
        self.name.clone()
    }

    fn prepare(&mut self, _readers: usize, _timeout: Duration) -> Result<(), PeerError> {
        // readers registered (lossless) before they said they were ready
        Ok(())
    }

    fn send(&mut self, chunk: &[u8]) -> Result<(), PeerError> {
        self.writer
            .write_bytes(chunk, None)
            .map(drop)
            .map_err(|e| terr(Transport::Stream, e))
    }
}

/// A lossless reader of the stream, reading in place: each `recv` hands out a zero-copy
/// window of what is waiting (the writer cannot overwrite it: lossless), released to the
/// writer by the next `recv`.
pub struct StreamReceiver {
    reader: rtloop_stream::Reader,
    window: Option<Window>,
    max: u64,
}

impl StreamReceiver {
    /// Open the stream and register a lossless reader at its newest sample; `spin` is how
    /// long a wait spins before it sleeps on the futex.
    pub fn open(t: &Trial, endpoint: &str) -> Result<StreamReceiver, PeerError> {
        let stream = Stream::open(endpoint).map_err(|e| terr(Transport::Stream, e))?;
        let mut reader = stream
            .reader(ReaderMode::Lossless)
            .map_err(|e| terr(Transport::Stream, e))?;
        reader.set_spin(Duration::from_micros(t.stream_spin_us));
        Ok(StreamReceiver {
            reader,
            window: None,
            max: batch_samples(t) as u64,
        })
    }
}

impl Receiver for StreamReceiver {
    fn recv(&mut self, timeout: Duration) -> Result<&[u8], PeerError> {
        if let Some(w) = self.window.take() {
            self.reader
                .seek(w.end)
                .map_err(|e| terr(Transport::Stream, e))?;
        }
        if timeout.is_zero() && self.reader.available() == 0 {
            return Ok(&[]);
        }
        let written = match self.reader.wait_available(1, Some(timeout)) {
            Ok(w) => w,
            Err(WaitError::Timeout { .. }) => return Ok(&[]),
            Err(e) => return Err(terr(Transport::Stream, e)),
        };
        let first = self.reader.cursor();
        let w = self
            .reader
            .window(first, written.min(first + self.max))
            .map_err(|e| terr(Transport::Stream, e))?;
        // SAFETY: the reader is lossless (see `StreamReceiver::new`) and the window starts
        // at its cursor, which it moves past the window only on the next `recv`: the writer
        // waits for that cursor and never stores to these samples while the slice lives.
        Ok(unsafe { self.window.insert(w).bytes() })
    }
}
