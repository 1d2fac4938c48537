//! Reading whole messages from a byte stream, with a size limit checked before anything is
//! allocated and memory that grows only as bytes actually arrive (a client that announces a
//! large message and sends nothing costs nothing).

use std::io::{self, Read};

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
    /// The peer stopped sending in the middle of a message for longer than the timeout.
    #[error(
        "the client sent {got} of {need} bytes of a message, then nothing for the message timeout"
    )]
    Stalled {
        /// Bytes of this message received.
        got: usize,
        /// Bytes the message needs.
        need: usize,
    },
    /// Any other socket error.
    #[error("socket error: {0}")]
    Io(#[from] io::Error),
}

/// Reads messages from one connection into a reused buffer.
#[derive(Debug)]
pub struct MessageReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    limit: usize,
    current: usize,
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
    /// keeps waiting; in the middle of a message it gives up with [`FrameError::Stalled`].
    pub fn next<R: Read>(&mut self, r: &mut R) -> Result<Option<Prefix>, FrameError> {
        self.start += self.current;
        self.current = 0;
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
        let need = PREFIX_BYTES + bufsize;
        self.fill(r, need)?;
        self.current = need;
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
            match r.read(&mut self.buf[self.end..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => return Err(FrameError::Truncated { got, need }),
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if got > 0 {
                        return Err(FrameError::Stalled { got, need });
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
}

/// A socket read that first polls without blocking for up to `spin` before it sleeps.
///
/// On a virtual machine a blocked reader's wake-up costs about 40 µs (the vCPU halts), which
/// is most of a loopback round trip; polling for a few tens of µs keeps a ping-pong of
/// requests and replies on running CPUs. It costs a CPU while it polls, so it is off by
/// default (`rtloop serve --spin-us`).
#[derive(Debug)]
pub struct SpinRead<'a, S> {
    sock: &'a mut S,
    spin: std::time::Duration,
}

impl<'a, S> SpinRead<'a, S> {
    /// Wrap `sock`; a zero `spin` reads as the socket does.
    pub fn new(sock: &'a mut S, spin: std::time::Duration) -> Self {
        SpinRead { sock, spin }
    }

    /// The socket.
    pub fn inner(&mut self) -> &mut S {
        self.sock
    }
}

impl<S: Read + std::os::fd::AsFd> Read for SpinRead<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.spin.is_zero() && !buf.is_empty() {
            let started = std::time::Instant::now();
            'spin: loop {
                for _ in 0..32 {
                    match rustix::net::recv(
                        &*self.sock,
                        &mut *buf,
                        rustix::net::RecvFlags::DONTWAIT,
                    ) {
                        Ok((n, _)) => return Ok(n),
                        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {
                            core::hint::spin_loop();
                        }
                        // let the blocking read report it
                        Err(_) => break 'spin,
                    }
                }
                if started.elapsed() >= self.spin {
                    break;
                }
            }
        }
        self.sock.read(buf)
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
}
