//! `rtloop view`: a local web page of every stream on the machine, served by rtloop itself.
//!
//! * [`catalog`]: every stream, its writer (alive, closed, dead), readers, occupancy
//!   (PercentUsed) and lost samples, as the page lists them;
//! * [`scope`]: a stream's newest samples reduced to a minimum and maximum per screen
//!   column next to the ring, so the page gets kilobytes per frame at any rate;
//! * [`histogram`]: one channel's distribution (latencies on a log axis);
//! * [`server`]: the HTTP and WebSocket server and the page (every request asks for the
//!   access token; connections have a header timeout and a cap).
//!
//! The lab and the runtime publish what they measure as streams, so the page is a viewer of
//! streams and nothing else.

pub mod catalog;
mod conns;
pub mod histogram;
pub mod scope;
pub mod server;

pub use server::{ViewConfig, ViewError, Viewer, MAX_REQUEST_BYTES};
