//! An rtloop stream as a channel: the sender commits each send into shared memory (one copy
//! in); receivers are lossless readers that wait on the stream's futex (after their spin) and
//! either read what is waiting in place ([`Receiver::recv`], zero-copy windows) or copy it
//! straight into a block ([`BlockReceiver::fill`]). A unit is one sample of the stream.

use std::time::Duration;

use rtloop_stream::{ReaderMode, Stream, StreamConfig, WaitError, Window, Writer};

use crate::{BlockReceiver, Receiver, ReceiverOptions, Sender, TransportError};

/// The transport's name.
pub const NAME: &str = "stream";

/// A stream's writer. Made by [`StreamSender::create`], it removes the stream when dropped.
pub struct StreamSender {
    writer: Writer,
    name: String,
    owned: bool,
}

impl StreamSender {
    /// Create the stream `name` (replacing a stale one of that name) and take its writer;
    /// the stream is removed when the sender is dropped.
    pub fn create(name: &str, cfg: &StreamConfig) -> Result<StreamSender, TransportError> {
        let _ = Stream::remove(name);
        let stream = Stream::create(name, cfg).map_err(|e| TransportError::stream(name, e))?;
        let writer = stream
            .writer()
            .map_err(|e| TransportError::stream(name, e))?;
        Ok(StreamSender {
            writer,
            name: name.to_owned(),
            owned: true,
        })
    }

    /// Take the writer of the existing stream `name` (its creator removes it).
    pub fn open(name: &str) -> Result<StreamSender, TransportError> {
        let writer = Stream::open(name)
            .map_err(|e| TransportError::stream(name, e))?
            .writer()
            .map_err(|e| TransportError::stream(name, e))?;
        Ok(StreamSender {
            writer,
            name: name.to_owned(),
            owned: false,
        })
    }

    /// The writer, for its settings (lossless timeout, spin).
    pub fn writer_mut(&mut self) -> &mut Writer {
        &mut self.writer
    }
}

impl Drop for StreamSender {
    fn drop(&mut self) {
        if self.owned {
            let _ = Stream::remove(&self.name);
        }
    }
}

impl Sender for StreamSender {
    fn endpoint(&self) -> String {
        self.name.clone()
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        self.writer
            .write_bytes(bytes, None)
            .map(drop)
            .map_err(|e| TransportError::stream(&self.name, e))
    }
}

/// A lossless reader of a stream. `recv` hands out a zero-copy window of what is waiting (the
/// writer cannot overwrite it: lossless), released to the writer by the next call.
pub struct StreamReceiver {
    reader: rtloop_stream::Reader,
    name: String,
    window: Option<Window>,
    max: u64,
}

impl StreamReceiver {
    /// Open the stream `name` and register a lossless reader at its newest sample; a wait
    /// spins `opts.spin` before it sleeps on the futex, `recv` hands out `opts.batch` samples
    /// at most (`opts.unit` is the stream's sample size).
    pub fn open(name: &str, opts: ReceiverOptions) -> Result<StreamReceiver, TransportError> {
        let mut reader = Stream::open(name)
            .map_err(|e| TransportError::stream(name, e))?
            .reader(ReaderMode::Lossless)
            .map_err(|e| TransportError::stream(name, e))?;
        reader.set_spin(opts.spin);
        Ok(StreamReceiver {
            reader,
            name: name.to_owned(),
            window: None,
            max: opts.batch as u64,
        })
    }

    /// Read from the stream's first sample instead (what was sent before this receiver
    /// registered, while the stream still holds it).
    pub fn from_start(mut self) -> Result<StreamReceiver, TransportError> {
        self.reader
            .seek(0)
            .map_err(|e| TransportError::stream(&self.name, e))?;
        Ok(self)
    }

    /// Give the window handed out last back to the writer.
    fn release(&mut self) -> Result<(), TransportError> {
        if let Some(w) = self.window.take() {
            self.reader
                .seek(w.end())
                .map_err(|e| TransportError::stream(&self.name, e))?;
        }
        Ok(())
    }

    /// Wait until `n` samples are there, at most `timeout`: whether they are.
    fn wait(&self, n: u64, timeout: Duration) -> Result<Option<u64>, TransportError> {
        match self.reader.wait_available(n, Some(timeout)) {
            Ok(written) => Ok(Some(written)),
            Err(WaitError::Timeout { .. }) => Ok(None),
            Err(e) => Err(TransportError::stream(&self.name, e)),
        }
    }
}

impl Receiver for StreamReceiver {
    fn recv(&mut self, timeout: Duration) -> Result<&[u8], TransportError> {
        self.release()?;
        if timeout.is_zero() && self.reader.available() == 0 {
            return Ok(&[]);
        }
        let Some(written) = self.wait(1, timeout)? else {
            return Ok(&[]);
        };
        let first = self.reader.cursor();
        let w = self
            .reader
            .window(first, written.min(first + self.max))
            .map_err(|e| TransportError::stream(&self.name, e))?;
        // SAFETY: the reader is lossless (see `StreamReceiver::open`) and the window starts
        // at its cursor, which it moves past the window only on the next `recv` or `fill`
        // (`release`): the writer waits for that cursor and never stores to these samples
        // while the slice, borrowed from `self`, lives.
        Ok(unsafe { self.window.insert(w).bytes() })
    }
}

impl BlockReceiver for StreamReceiver {
    fn fill(
        &mut self,
        buf: &mut [u8],
        filled: &mut usize,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        self.release()?;
        let sb = self.reader.info().sample_bytes;
        let want = ((buf.len() - *filled) / sb) as u64;
        // timed out: take what is there
        self.wait(want, timeout)?;
        let p = self
            .reader
            .pull_into(&mut buf[*filled..], None, want as usize)
            .map_err(|e| TransportError::stream(&self.name, e))?;
        *filled += p.n * sb;
        Ok(())
    }
}
