//! Reading whole messages from a byte stream, with a size limit checked before anything is
//! allocated and memory that grows only as bytes actually arrive (a client that announces a
//! large message and sends nothing costs nothing).

use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::codec::{self, BadVersion, Prefix, PREFIX_BYTES};

/// Initial buffer: enough for every small request and several pipelined ones.
const INITIAL: usize = 64 * 1024;
/// Buffers grown past this are given back once the big message is handled.
const KEEP: usize = 4 * 1024 * 1024;

/// Why a message could not be read. Each ends the connection.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The version field is not 1 (in either byte order).
    #[error(transparent)]
    BadVersion(#[from] BadVersion),
    /// The payload is larger than the limit; nothing was allocated for it.
    #[error("{command} (0x{code:04x}) announces {bufsize} payload bytes, more than the server's limit of {limit} (--max-message)")]
    TooLarge {
        /// The prefix (its order and command give the error reply).
        prefix: Prefix,
        /// Command name.
        command: &'static str,
        /// Command code.
        code: u16,
        /// Announced bytes.
        bufsize: u32,
        /// The limit.
        limit: usize,
    },
    /// The peer closed the connection in the middle of a message.
    #[error("the client closed the connection mid-message: {got} of {need} bytes arrived")]
    Truncated {
        /// Bytes of this message received.
        got: usize,
        /// Bytes the message needs.
        need: usize,
    },
    /// A message did not arrive whole within the message deadline (a stalled or dripping
    /// client).
    #[error("the client sent {got} of {need} bytes of a message within the message deadline of {deadline_ms} ms")]
    Stalled {
        /// Bytes of this message received.
        got: usize,
        /// Bytes the message needs.
        need: usize,
        /// The deadline for a whole message.
        deadline_ms: u64,
    },
    /// Holding this message would take the server over its memory budget for partial
    /// messages; nothing was allocated for it.
    #[error("{command} (0x{code:04x}) announces {bufsize} payload bytes; partial messages of all clients already hold {held} of the server's {budget} byte budget (--memory-mb)")]
    OverBudget {
        /// The prefix (its order and command give the error reply).
        prefix: Prefix,
        /// Command name.
        command: &'static str,
        /// Command code.
        code: u16,
        /// Announced bytes.
        bufsize: u32,
        /// Bytes held by all connections' partial messages.
        held: usize,
        /// The budget.
        budget: usize,
    },
    /// Any other socket error.
    #[error("socket error: {0}")]
    Io(#[from] io::Error),
}

/// The server-wide budget for messages being received: every message larger than the
/// initial per-connection buffer reserves its whole size here before its payload is read,
/// and gives it back once handled (or when the connection ends).
#[derive(Debug)]
pub struct MemoryBudget {
    limit: usize,
    // Ordering: a counter no data is published through: Relaxed.
    held: AtomicUsize,
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    #[must_use]
    pub fn new(limit: usize) -> Self {
        MemoryBudget {
            limit,
            held: AtomicUsize::new(0),
        }
    }

    /// Bytes reserved now.
    #[must_use]
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// The limit.
    #[must_use]
    pub fn limit(&self) -> usize {
        self.limit
    }

    fn try_reserve(&self, n: usize) -> Result<(), usize> {
        let mut cur = self.held.load(Ordering::Relaxed);
        loop {
            if cur + n > self.limit {
                return Err(cur);
            }
            match self.held.compare_exchange_weak(
                cur,
                cur + n,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }

    fn release(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::Relaxed);
    }
}

/// What a connection is doing, for choosing whom to drop when the server is full.
#[derive(Debug, Default)]
pub struct ConnState {
    // Ordering: hints read by the accept loop, nothing published through them: Relaxed.
    phase: AtomicU8,
    since_ns: AtomicU64,
}

/// Phases of [`ConnState`].
pub mod phase {
    /// Waiting for the next message (idle).
    pub const IDLE: u8 = 0;
    /// In the middle of receiving a message.
    pub const RECEIVING: u8 = 1;
    /// Handling a request (including a blocking WAIT_DAT): never dropped for room.
    pub const HANDLING: u8 = 2;
}

impl ConnState {
    fn set(&self, p: u8, epoch: Instant) {
        self.since_ns
            .store(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.phase.store(p, Ordering::Relaxed);
    }

    /// The phase and when it began (ns since the server's epoch).
    #[must_use]
    pub fn get(&self) -> (u8, u64) {
        (
            self.phase.load(Ordering::Relaxed),
            self.since_ns.load(Ordering::Relaxed),
        )
    }
}

/// Reads messages from one connection into a reused buffer.
#[derive(Debug)]
pub struct MessageReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    limit: usize,
    current: usize,
    /// Payload bytes of the current message not consumed yet (after [`MessageReader::next_head`]).
    rest: usize,
    /// Bytes of the whole current message, prefix included.
    whole: usize,
    budget: Option<Arc<MemoryBudget>>,
    reserved: usize,
    deadline: Option<Duration>,
    message_started: Option<Instant>,
    state: Option<(Arc<ConnState>, Instant)>,
}

impl Drop for MessageReader {
    fn drop(&mut self) {
        self.give_back();
    }
}

impl MessageReader {
    /// A reader refusing payloads larger than `limit` bytes.
    #[must_use]
    pub fn new(limit: usize) -> Self {
        MessageReader {
            buf: vec![0; INITIAL],
            start: 0,
            end: 0,
            limit,
            current: 0,
            rest: 0,
            whole: 0,
            budget: None,
            reserved: 0,
            deadline: None,
            message_started: None,
            state: None,
        }
    }

    /// A server connection's reader: large messages reserve from `budget`, a message must
    /// arrive whole within `deadline` of its first byte, and `state` tells the server what
    /// the connection is doing (times measured from `epoch`).
    #[must_use]
    pub fn for_server(
        limit: usize,
        budget: Arc<MemoryBudget>,
        deadline: Duration,
        state: Arc<ConnState>,
        epoch: Instant,
    ) -> Self {
        let mut r = MessageReader::new(limit);
        r.budget = Some(budget);
        r.deadline = Some(deadline);
        r.state = Some((state, epoch));
        r
    }

    fn give_back(&mut self) {
        if let Some(b) = &self.budget {
            b.release(self.reserved);
        }
        self.reserved = 0;
    }

    fn set_phase(&self, p: u8) {
        if let Some((s, epoch)) = &self.state {
            s.set(p, *epoch);
        }
    }

    /// Bytes currently held (for memory accounting in tests).
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Read the next message. `Ok(None)` when the peer closed the connection between
    /// messages. The payload is [`MessageReader::payload`] until the next call.
    ///
    /// The source may time out (`WouldBlock`/`TimedOut`): between messages the reader just
    /// keeps waiting; in the middle of a message it gives up with [`FrameError::Stalled`]
    /// once the message deadline (or, without one, the first timeout) has passed.
    pub fn next<R: Read>(&mut self, r: &mut R) -> Result<Option<Prefix>, FrameError> {
        let Some(prefix) = self.next_prefix(r)? else {
            return Ok(None);
        };
        let need = PREFIX_BYTES + prefix.bufsize as usize;
        if let Some(b) = &self.budget {
            if need > INITIAL {
                b.try_reserve(need).map_err(|held| FrameError::OverBudget {
                    prefix,
                    command: codec::cmd::name(prefix.command),
                    code: prefix.command,
                    bufsize: prefix.bufsize,
                    held,
                    budget: b.limit(),
                })?;
                self.reserved = need;
            }
        }
        self.fill(r, need)?;
        self.current = need;
        self.set_phase(phase::HANDLING);
        Ok(Some(prefix))
    }

    /// Read the next message's prefix and the first `head` bytes of its payload (all of it if
    /// it is shorter): [`MessageReader::payload`] is that head. The rest stays unread for
    /// [`MessageReader::rest_into`], which reads it straight into the caller's memory, and
    /// whatever is left of it is skipped before the next message. For a client reading
    /// large replies: the rest is held against no budget and no deadline.
    pub fn next_head<R: Read>(
        &mut self,
        r: &mut R,
        head: usize,
    ) -> Result<Option<Prefix>, FrameError> {
        let Some(prefix) = self.next_prefix(r)? else {
            return Ok(None);
        };
        let bufsize = prefix.bufsize as usize;
        let need = PREFIX_BYTES + head.min(bufsize);
        self.fill(r, need)?;
        self.current = need;
        self.whole = PREFIX_BYTES + bufsize;
        self.rest = self.whole - need;
        self.set_phase(phase::HANDLING);
        Ok(Some(prefix))
    }

    /// Payload bytes of the current message after its head, not read yet.
    #[must_use]
    pub fn rest(&self) -> usize {
        self.rest
    }

    /// Read the next `dest.len()` bytes of the current message's rest into `dest`: what is
    /// buffered already is copied, the remainder is read from `r` straight into `dest`.
    ///
    /// # Panics
    /// If `dest` is longer than [`MessageReader::rest`].
    pub fn rest_into<R: Read>(&mut self, r: &mut R, dest: &mut [u8]) -> Result<(), FrameError> {
        assert!(dest.len() <= self.rest, "more than the rest of the message");
        let at = self.start + self.current;
        let k = (self.end - at).min(dest.len());
        dest[..k].copy_from_slice(&self.buf[at..at + k]);
        self.current += k;
        self.rest -= k;
        let mut got = k;
        while got < dest.len() {
            match r.read(&mut dest[got..]) {
                Ok(0) => {
                    return Err(FrameError::Truncated {
                        got: self.whole - self.rest,
                        need: self.whole,
                    })
                }
                Ok(n) => {
                    got += n;
                    self.rest -= n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Read and drop what is left of the current message's rest.
    pub fn skip_rest<R: Read>(&mut self, r: &mut R) -> Result<(), FrameError> {
        let mut scratch = [0u8; 8192];
        while self.rest > 0 {
            let n = self.rest.min(scratch.len());
            self.rest_into(r, &mut scratch[..n])?;
        }
        Ok(())
    }

    /// Skip what is left of the current message, then read the next prefix.
    fn next_prefix<R: Read>(&mut self, r: &mut R) -> Result<Option<Prefix>, FrameError> {
        self.skip_rest(r)?;
        self.start += self.current;
        self.current = 0;
        self.give_back();
        self.message_started = None;
        self.set_phase(phase::IDLE);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buf.len() > KEEP {
                self.buf = vec![0; INITIAL];
            }
        }
        if !self.fill(r, PREFIX_BYTES)? {
            return Ok(None);
        }
        let head: &[u8; PREFIX_BYTES] = self.buf[self.start..self.start + PREFIX_BYTES]
            .try_into()
            .expect("8 bytes");
        let prefix = codec::parse_prefix(head)?;
        let bufsize = prefix.bufsize as usize;
        if bufsize > self.limit {
            return Err(FrameError::TooLarge {
                prefix,
                command: codec::cmd::name(prefix.command),
                code: prefix.command,
                bufsize: prefix.bufsize,
                limit: self.limit,
            });
        }
        Ok(Some(prefix))
    }

    /// The payload of the message last returned by [`MessageReader::next`].
    #[must_use]
    pub fn payload(&self) -> &[u8] {
        &self.buf[self.start + PREFIX_BYTES..self.start + self.current]
    }

    /// Whether more bytes (a pipelined request) are already buffered.
    #[must_use]
    pub fn has_buffered(&self) -> bool {
        self.end > self.start + self.current
    }

    /// Make `need` bytes from `start` available. `Ok(false)`: clean EOF before any byte.
    fn fill<R: Read>(&mut self, r: &mut R, need: usize) -> Result<bool, FrameError> {
        if self.start + need > self.buf.len() {
            // move what we hold to the front; grow only once the buffer is full
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while self.end - self.start < need {
            if self.end == self.buf.len() {
                let grown = (self.buf.len() * 2).min(need.max(INITIAL));
                self.buf.resize(grown.max(self.buf.len()), 0);
            }
            let got = self.end - self.start;
            if got > 0 {
                if let (Some(d), Some(t)) = (self.deadline, self.message_started) {
                    if t.elapsed() > d {
                        return Err(self.stalled(got, need));
                    }
                }
            }
            match r.read(&mut self.buf[self.end..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => return Err(FrameError::Truncated { got, need }),
                Ok(n) => {
                    if got == 0 && self.message_started.is_none() {
                        self.message_started = Some(Instant::now());
                        self.set_phase(phase::RECEIVING);
                    }
                    self.end += n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    // between messages a connection may idle; in a message, only until
                    // the deadline (the check above), or the first timeout without one
                    if got > 0 && self.deadline.is_none() {
                        return Err(self.stalled(got, need));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset && got == 0 => {
                    return Ok(false)
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(true)
    }

    fn stalled(&self, got: usize, need: usize) -> FrameError {
        FrameError::Stalled {
            got,
            need,
            deadline_ms: self.deadline.map_or(0, |d| d.as_millis() as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{cmd, encode_request, ByteOrder, Request};

    #[test]
    fn pipelined_messages_come_out_one_by_one() {
        let mut bytes = Vec::new();
        encode_request(ByteOrder::Little, &Request::GetHdr, true, &mut bytes);
        encode_request(ByteOrder::Little, &Request::FlushDat, true, &mut bytes);
        let mut src = &bytes[..];
        let mut r = MessageReader::new(1024);
        assert_eq!(r.next(&mut src).unwrap().unwrap().command, cmd::GET_HDR);
        assert!(r.has_buffered());
        assert_eq!(r.next(&mut src).unwrap().unwrap().command, cmd::FLUSH_DAT);
        assert!(r.next(&mut src).unwrap().is_none());
    }

    #[test]
    fn oversized_is_refused_before_allocating() {
        let bytes = [1u8, 0, 2, 1, 0xff, 0xff, 0xff, 0x7f];
        let mut r = MessageReader::new(1 << 20);
        let e = r.next(&mut &bytes[..]).unwrap_err();
        assert!(matches!(e, FrameError::TooLarge { .. }), "{e}");
        assert_eq!(r.capacity(), INITIAL);
    }

    #[test]
    fn truncated_and_bad_version() {
        let bytes = [1u8, 0, 2, 1, 10, 0, 0, 0, 1, 2];
        let e = MessageReader::new(100).next(&mut &bytes[..]).unwrap_err();
        assert!(
            matches!(e, FrameError::Truncated { got: 10, need: 18 }),
            "{e}"
        );
        let bytes = [2u8, 0, 1, 2, 0, 0, 0, 0];
        let e = MessageReader::new(100).next(&mut &bytes[..]).unwrap_err();
        assert!(matches!(e, FrameError::BadVersion(_)), "{e}");
    }

    #[test]
    fn a_large_message_grows_then_gives_back() {
        let mut bytes = vec![1u8, 0, 2, 1];
        let n = 5 * 1024 * 1024u32;
        bytes.extend_from_slice(&n.to_le_bytes());
        bytes.resize(8 + n as usize, 7);
        encode_request(ByteOrder::Little, &Request::GetHdr, true, &mut bytes);
        let mut src = &bytes[..];
        let mut r = MessageReader::new(n as usize);
        assert_eq!(r.next(&mut src).unwrap().unwrap().bufsize, n);
        assert!(r.payload().iter().all(|b| *b == 7));
        assert_eq!(r.next(&mut src).unwrap().unwrap().command, cmd::GET_HDR);
        assert!(r.capacity() <= KEEP);
    }

    /// A reader that hands out at most `step` bytes a call (a socket's partial reads).
    struct Drip<'a>(&'a [u8], usize);

    impl Read for Drip<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.1).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_head_then_the_rest_straight_into_the_callers_memory() {
        let body: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let mut bytes = vec![1u8, 0, 4, 2];
        bytes.extend_from_slice(&(16 + body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&[7; 16]);
        bytes.extend_from_slice(&body);
        encode_request(ByteOrder::Little, &Request::GetHdr, true, &mut bytes);
        for step in [3, 1000, usize::MAX] {
            let mut src = Drip(&bytes, step);
            let mut r = MessageReader::new(1 << 20);
            let p = r.next_head(&mut src, 16).unwrap().unwrap();
            assert_eq!(
                (p.command, p.bufsize as usize),
                (cmd::GET_OK, 16 + body.len())
            );
            assert_eq!(r.payload(), [7; 16]);
            assert_eq!(r.rest(), body.len());
            let mut out = vec![0u8; 150_000];
            r.rest_into(&mut src, &mut out).unwrap();
            assert_eq!(out, body[..150_000], "step {step}");
            // the last 50000 bytes are skipped before the next message
            assert_eq!(r.next(&mut src).unwrap().unwrap().command, cmd::GET_HDR);
            assert!(r.next(&mut src).unwrap().is_none());
        }
        // a head longer than the payload is the whole payload; nothing is left
        let mut src = &bytes[bytes.len() - 8..];
        let mut r = MessageReader::new(100);
        assert_eq!(r.next_head(&mut src, 16).unwrap().unwrap().bufsize, 0);
        assert_eq!((r.payload().len(), r.rest()), (0, 0));
        // the peer closing in the rest
        let mut src = &bytes[..1000];
        let mut r = MessageReader::new(1 << 20);
        r.next_head(&mut src, 16).unwrap();
        let e = r.rest_into(&mut src, &mut [0; 5000]).unwrap_err();
        assert!(matches!(e, FrameError::Truncated { got: 1000, .. }), "{e}");
    }
}
