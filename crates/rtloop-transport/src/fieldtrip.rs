//! A FieldTrip buffer server as a channel: the sender PUT_DATs each send (fire and forget,
//! as an acquisition tool streaming into a buffer would); the receiver waits with WAIT_DAT
//! (the server blocks it) and fetches with GET_DAT. The buffer holds one channel of u32: a
//! unit is a 4-byte word.

use std::time::{Duration, Instant};

use rtloop_fieldtrip::Client;
use rtloop_stream::DType;

use crate::{BlockReceiver, Receiver, ReceiverOptions, Sender, TransportError};

/// The transport's name.
pub const NAME: &str = "fieldtrip";

/// How long [`crate::Endpoint::receiver`] waits for the sender's header.
pub const HEADER_WAIT: Duration = Duration::from_secs(10);

/// Bytes of one unit.
const WORD: usize = 4;

/// Puts its sends into the buffer.
pub struct FieldTripSender {
    client: Client,
    addr: String,
}

impl FieldTripSender {
    /// Connect and (re)start the buffer with a one-channel u32 header.
    pub fn connect(addr: &str) -> Result<FieldTripSender, TransportError> {
        let mut client = Client::connect(addr)?;
        client.put_header(1, 0.0, DType::U32.code(), &[])?;
        Ok(FieldTripSender {
            client,
            addr: addr.to_owned(),
        })
    }
}

impl Sender for FieldTripSender {
    fn endpoint(&self) -> String {
        self.addr.clone()
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        self.client
            .put_data_bytes(1, DType::U32.code(), bytes, false)
            .map_err(TransportError::from)
    }
}

/// Reads the buffer from its first word on.
pub struct FieldTripReceiver {
    client: Client,
    /// Words fetched from the buffer so far.
    have: u32,
    /// The last GET_DAT; `block[at..]` not handed out yet.
    block: Vec<u8>,
    at: usize,
    batch: u32,
}

impl FieldTripReceiver {
    /// Connect, and wait at most `header_wait` for the sender's header (its PUT_HDR opens
    /// the buffer). WAIT_DAT itself blocks in the server: `opts.spin` only polls the socket
    /// for the server's answer.
    pub fn connect(
        addr: &str,
        opts: ReceiverOptions,
        header_wait: Duration,
    ) -> Result<FieldTripReceiver, TransportError> {
        let mut client = Client::connect(addr)?;
        client.set_spin(opts.spin);
        let t = Instant::now();
        while client.get_header().is_err() {
            if t.elapsed() > header_wait {
                return Err(TransportError::Timeout {
                    transport: NAME,
                    what: "the sender's header",
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(FieldTripReceiver {
            client,
            have: 0,
            block: Vec::new(),
            at: 0,
            batch: (opts.batch * opts.unit / WORD).max(1) as u32,
        })
    }

    /// GET_DAT up to `most` more words once `least` more arrived (or once any did, after
    /// `timeout`): whether any did.
    fn fetch(&mut self, least: u32, most: u32, timeout: Duration) -> Result<bool, TransportError> {
        // a zero timeout polls; any other waits at least the server's 1 ms
        let ms = if timeout.is_zero() {
            0
        } else {
            timeout.as_millis().clamp(1, u128::from(u32::MAX)) as u32
        };
        // WAIT_DAT returns once more than `nsamples` exist
        let (n, _) = self.client.wait(self.have + least - 1, u32::MAX - 1, ms)?;
        if n <= self.have {
            return Ok(false);
        }
        let end = (n - 1).min(self.have + most - 1);
        self.client
            .get_data_into(Some((self.have, end)), &mut self.block)?;
        self.have = end + 1;
        self.at = 0;
        Ok(true)
    }
}

impl Receiver for FieldTripReceiver {
    fn recv(&mut self, timeout: Duration) -> Result<&[u8], TransportError> {
        if self.at == self.block.len() && !self.fetch(1, self.batch, timeout)? {
            return Ok(&[]);
        }
        let from = std::mem::replace(&mut self.at, self.block.len());
        Ok(&self.block[from..])
    }
}

impl BlockReceiver for FieldTripReceiver {
    fn fill(
        &mut self,
        buf: &mut [u8],
        filled: &mut usize,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        while *filled < buf.len() {
            if self.at == self.block.len() {
                let want = ((buf.len() - *filled) / WORD) as u32;
                // the server holds the wait until the whole block is there
                if !self.fetch(want, want, timeout)? {
                    return Ok(());
                }
            }
            let n = (self.block.len() - self.at).min(buf.len() - *filled);
            buf[*filled..*filled + n].copy_from_slice(&self.block[self.at..self.at + n]);
            self.at += n;
            *filled += n;
        }
        Ok(())
    }
}
