//! A plain UNIX stream socket per reader: the writer `write`s every chunk to each reader in
//! turn (blocking while a reader's socket buffer is full), readers `read` what is there; a
//! sample cut by a read's end is completed by the next (rtloop-transport's socket channel).

use rtloop_transport::socket::{self, FanoutSender, SocketReceiver};
use rtloop_transport::{Endpoint, ReceiverOptions};

use super::batch_samples;
use crate::{PeerError, Trial};

/// The writer: listens on `$TMPDIR/rtloop-peers-TAG.sock`, removed when dropped.
pub fn open_sender(t: &Trial) -> Result<FanoutSender, PeerError> {
    let path = std::env::temp_dir().join(format!("rtloop-peers-{}.sock", t.tag));
    Ok(FanoutSender::bind(&Endpoint::Unix(path))?)
}

/// A reader: one connection, reading into its own buffer.
pub fn open_receiver(t: &Trial, endpoint: &str) -> Result<SocketReceiver, PeerError> {
    let conn = socket::connect(&Endpoint::Unix(endpoint.into()))?;
    Ok(conn.receiver(ReceiverOptions::new(t.sample_bytes(), batch_samples(t))))
}
