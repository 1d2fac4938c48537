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
//! window.check()?;                                      // still intact after use?
//!
//! let mut out = vec![0u8; 2 * 8];
//! let pulled = reader.pull_into(&mut out, None, 2)?;    // copy and advance the cursor
//! assert_eq!((pulled.first, pulled.n), (0, 2));         // it registered before the write
//! # Stream::remove(&name)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Memory ordering is documented at every atomic (`SYNC:` comments) and summarised in the
//! ring module; the protocol is model-checked with loom (`scripts/loom.sh`).

#![deny(unsafe_op_in_unsafe_fn, missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

// Everything but the file mapping (shm) compiles under loom too: the loom models run the
// shipped writer and readers over heap storage (`Stream::in_heap`).
mod backing;
mod claims;
mod doorbell;
mod dtype;
mod error;
mod events;
mod layout;
#[cfg(not(loom))]
pub mod lifecycle;
mod reader;
mod ring;
#[cfg(not(loom))]
mod shm;
mod stats;
mod stream;
mod sync;
mod sys;
mod writer;

#[cfg(all(test, not(loom)))]
mod hand_off_tests;
#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod ring_threads_tests;

#[cfg(any(test, loom))]
pub use backing::HeapBacking;
pub use backing::{Backing, ZeroCopy};
pub use doorbell::Doorbell;
pub use dtype::{DType, Sample, UnknownDType, ALL_DTYPES, DTYPE_NAMES};
pub use error::{
    ClaimError, CreateError, Error, NameError, OpenError, ReadError, RemoveError, WaitError,
    WriteError,
};
pub use events::{Event, EventValue, CHAR_CODE};
pub use layout::{
    sanitize_name, validate_name, CH_NAME_MAX, CH_TYPE_MAX, CH_UNIT_MAX, CONTENT_TYPE_MAX,
    EVENT_PAYLOAD_MAX, LAYOUT_VERSION, MAX_CHANNELS, META_TEXT_MAX, NAME_MAX, SOURCE_ID_MAX,
};
#[cfg(not(loom))]
pub use lifecycle::{Reclaimed, StreamState, Surveyed};
pub use reader::{Liveness, Pulled, Reader, ReaderMode};
#[cfg(not(loom))]
pub use reader::{TypedWindow, Window};
#[cfg(not(loom))]
pub use shm::{stream_path, Replacement, SharedMemory};
pub use stats::{ReaderStats, StreamStats};
pub use stream::{DefaultBacking, Stream, StreamConfig, StreamInfo};
pub use sync::FutexWord;
pub use writer::{WriteGuard, Writer, DEFAULT_LOSSLESS_TIMEOUT, FENCE_HOLD};

/// Register this process for the light publication barrier (`membarrier`, see
/// docs/memory-ordering.md) and wait up to `wait` for it: the first writer claim or lossless
/// reader starts the registration anyway, on a thread of its own, and publishes with a fence
/// until it has finished (about 10 ms). A program that measures from its first commit calls
/// this first. Returns whether the process publishes light now (`false` if the kernel
/// refused, `RTLOOP_PUBLISH_FENCE=1` is set, or `wait` ran out).
pub fn prepare_light_publication(wait: std::time::Duration) -> bool {
    let start = std::time::Instant::now();
    loop {
        if sys::membarrier_registered() {
            return true;
        }
        if start.elapsed() >= wait {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_micros(500));
    }
}
