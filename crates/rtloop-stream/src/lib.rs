//! # rtloop-stream
//!
//! The core of rtloop: a **stream** is a named, typed, multichannel sample ring in shared
//! memory (`/dev/shm/rtloop-<name>`, mode 0600) with one writer and any number of readers in
//! any process. Samples carry absolute indices; reading `[a, b)` is valid while
//! `written - a <= capacity`, and a reader that was lapped is told exactly how many samples
//! it lost — never handed torn or stale data (readers validate after copying). The data
//! region is mapped twice back to back, so every window is one contiguous slice, even across
//! the wrap.
//!
//! ```
//! use rtloop_stream::{DType, ReaderMode, Stream, StreamConfig};
//! # let name = format!("doc-{}", std::process::id());
//! let stream = Stream::create(&name, &StreamConfig::new(DType::I16, 4, 30_000.0, 1024))?;
//! let mut writer = stream.writer()?;
//! let mut reader = Stream::open(&name)?.reader(ReaderMode::Latest)?;
//!
//! writer.write(&[1i16, 2, 3, 4, 5, 6, 7, 8])?;          // two samples of 4 channels
//! let window = reader.window_as::<i16>(0, 2)?;          // a window of samples 0 and 1
//! assert_eq!(window.to_vec()?, [1, 2, 3, 4, 5, 6, 7, 8]); // copied out and validated
//! // SAFETY: the writer is idle here (nothing can lap the window while we look at it)
//! assert_eq!(unsafe { window.values() }, &[1, 2, 3, 4, 5, 6, 7, 8]); // zero-copy view
//! window.window.check()?;                               // still intact after use?
//!
//! let mut out = vec![0u8; 2 * 8];
//! let pulled = reader.pull_into(&mut out, None, 2)?;    // copy and advance the cursor
//! assert_eq!((pulled.first, pulled.n), (0, 2));         // it registered before the write
//! # Stream::remove(&name)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Memory ordering is documented at every atomic (`SYNC:` comments) and summarised in the
//! [`ring`] module; the protocol is model-checked with loom (`scripts/loom.sh`).

#![deny(unsafe_op_in_unsafe_fn, missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(not(loom))]
mod claims;
mod dtype;
// error.rs names layout constants, so it is left out of the loom build like layout.rs
#[cfg(not(loom))]
mod error;
pub mod ring;
mod sync;

#[cfg(not(loom))]
mod events;
#[cfg(not(loom))]
pub mod layout;
#[cfg(not(loom))]
pub mod lines;
#[cfg(not(loom))]
mod reader;
#[cfg(not(loom))]
mod shm;
#[cfg(not(loom))]
mod stats;
#[cfg(not(loom))]
pub mod sys;
#[cfg(not(loom))]
mod writer;

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod ring_threads_tests;

pub use dtype::{DType, Sample, UnknownDType, ALL_DTYPES, DTYPE_NAMES};
#[cfg(not(loom))]
pub use error::{
    ClaimError, CreateError, NameError, OpenError, ReadError, RemoveError, WaitError, WriteError,
};
#[cfg(not(loom))]
pub use events::{Event, EventValue, CHAR_CODE};
#[cfg(not(loom))]
pub use layout::EVENT_PAYLOAD_MAX;
#[cfg(not(loom))]
pub use reader::{Liveness, Pulled, Reader, ReaderMode, TypedWindow, Window};
#[cfg(not(loom))]
pub use shm::{stream_path, Stream, StreamConfig, StreamInfo};
#[cfg(not(loom))]
pub use stats::{ReaderStats, StreamStats};
#[cfg(not(loom))]
pub use writer::{WriteGuard, Writer, DEFAULT_LOSSLESS_TIMEOUT};
