//! The FieldTrip realtime buffer protocol (version 1) on rtloop streams.
//!
//! * [`codec`]: an I/O-free parser and encoder of every message, every data type and the
//!   reference implementation's byte-order rule (a client's order is recognised from the
//!   version field; replies go back in that order).
//! * [`framing`]: reading one whole message from a socket with a size limit that is checked
//!   before anything is allocated.
//! * [`buffer`]: the FieldTrip buffer's semantics (header, samples, events, selections,
//!   flushes, waits) over one rtloop stream, so data PUT over the network lands in shared
//!   memory and a locally written stream is served to network clients.
//! * [`server`]: TCP and UNIX-domain listeners, one thread per connection.
//! * [`client`]: a blocking client over TCP, a UNIX socket or in-process (no socket).

pub mod buffer;
pub mod client;
pub mod codec;
pub mod config;
pub mod framing;
pub mod polling;
pub mod server;

pub use buffer::{Buffer, BufferConfig};
pub use client::{Address, ArgumentError, Client, ClientError, Header, Reason};
pub use codec::{ByteOrder, DataDef, HeaderDef, Selection, WaitDef, WireEvent};
pub use config::ConfigError;
pub use server::{Server, ServerConfig};
