//! A plain UNIX stream socket per reader: the writer `write`s every chunk to each reader in
//! turn (blocking while a reader's socket buffer is full), readers `read` what is there.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{batch_samples, Receiver, Sender};
use crate::{terr, PeerError, Transport, Trial};

/// The writer: listens on `$TMPDIR/rtloop-peers-TAG.sock`, removed when dropped.
pub struct UnixSender {
    listener: UnixListener,
    path: PathBuf,
    conns: Vec<UnixStream>,
}

impl UnixSender {
    /// Bind the socket.
    pub fn open(t: &Trial) -> Result<UnixSender, PeerError> {
        let path = std::env::temp_dir().join(format!("rtloop-peers-{}.sock", t.tag));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)
            .map_err(|e| terr(Transport::Unix, format!("bind {}: {e}", path.display())))?;
        Ok(UnixSender {
            listener,
            path,
            conns: Vec::new(),
        })
    }
}

impl Drop for UnixSender {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Sender for UnixSender {
    fn endpoint(&self) -> String {
        self.path.display().to_string()
    }

    fn prepare(&mut self, readers: usize, timeout: Duration) -> Result<(), PeerError> {
        let deadline = Instant::now() + timeout;
        self.listener
            .set_nonblocking(true)
            .map_err(|e| terr(Transport::Unix, e))?;
        while self.conns.len() < readers {
            match self.listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)
                        .map_err(|e| terr(Transport::Unix, e))?;
                    self.conns.push(s);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => {
                    return Err(terr(
                        Transport::Unix,
                        format!("{} of {readers} readers connected: {e}", self.conns.len()),
                    ))
                }
            }
        }
        Ok(())
    }

    fn send(&mut self, chunk: &[u8]) -> Result<(), PeerError> {
        for c in &mut self.conns {
            c.write_all(chunk).map_err(|e| terr(Transport::Unix, e))?;
        }
        Ok(())
    }
}

/// A reader: one connection, reading into its own buffer; a sample cut by a read's end is
/// completed by the next.
pub struct UnixReceiver {
    conn: UnixStream,
    buf: Vec<u8>,
    sample_bytes: usize,
    /// Bytes in `buf`; the first `handed` of them were returned by the last `recv`.
    have: usize,
    handed: usize,
    timeout: Option<Duration>,
}

impl UnixReceiver {
    /// Connect to the writer's socket.
    pub fn open(t: &Trial, endpoint: &str) -> Result<UnixReceiver, PeerError> {
        let conn = UnixStream::connect(endpoint)
            .map_err(|e| terr(Transport::Unix, format!("connect {endpoint}: {e}")))?;
        Ok(UnixReceiver {
            conn,
            buf: vec![0u8; batch_samples(t) * t.sample_bytes()],
            sample_bytes: t.sample_bytes(),
            have: 0,
            handed: 0,
            timeout: None,
        })
    }
}

impl Receiver for UnixReceiver {
    fn recv(&mut self, timeout: Duration) -> Result<&[u8], PeerError> {
        // keep the cut sample's bytes
        self.buf.copy_within(self.handed..self.have, 0);
        self.have -= self.handed;
        self.handed = 0;
        if self.timeout != Some(timeout) {
            // a zero timeout polls: a non-blocking read
            let r = if timeout.is_zero() {
                self.conn.set_nonblocking(true)
            } else {
                self.conn
                    .set_nonblocking(false)
                    .and_then(|()| self.conn.set_read_timeout(Some(timeout)))
            };
            r.map_err(|e| terr(Transport::Unix, e))?;
            self.timeout = Some(timeout);
        }
        match self.conn.read(&mut self.buf[self.have..]) {
            Ok(0) => return Err(terr(Transport::Unix, "the writer closed the connection")),
            Ok(n) => self.have += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(terr(Transport::Unix, e)),
        }
        self.handed = self.have / self.sample_bytes * self.sample_bytes;
        Ok(&self.buf[..self.handed])
    }
}
