//! Bare shared cache lines between processes: the reference a stream's hand-off latency is
//! judged against (a cache-line ping-pong between the same two cores).
//! Deliberately no ring, no protocol: two `AtomicU64` on their own 128-byte lines in a
//! small shared mapping.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64};

use rtloop_sys as sys;

/// Lines in a [`SharedLines`] mapping.
pub const LINES: usize = 8;
const LINE: usize = 128;
const BYTES: usize = 4096;
/// 64-bit slots after the lines (the paced loop's two small rings of stamps).
pub const SLOTS: usize = (BYTES - LINES * LINE) / 8;

/// A few cache lines of shared memory, each holding one `AtomicU64`.
pub struct SharedLines {
    file: sys::SharedFile,
}

impl SharedLines {
    fn path(name: &str) -> PathBuf {
        sys::shm_dir().join(format!(".rtloop-lines-{name}"))
    }

    /// Create the lines under `name` (removed again when this value drops).
    pub fn create(name: &str) -> std::io::Result<SharedLines> {
        rtloop_stream::validate_name(name).map_err(std::io::Error::other)?;
        let file = sys::SharedFile::create(&Self::path(name), BYTES, false)?;
        Ok(SharedLines { file })
    }

    /// Open lines another process created.
    pub fn open(name: &str) -> std::io::Result<SharedLines> {
        rtloop_stream::validate_name(name).map_err(std::io::Error::other)?;
        let file = sys::SharedFile::open(&Self::path(name), BYTES, false)?;
        Ok(SharedLines { file })
    }

    /// Line `i` (`< LINES`).
    #[must_use]
    pub fn line(&self, i: usize) -> &AtomicU64 {
        assert!(i < LINES, "line {i} of {LINES}");
        // SAFETY: offset i*128 < 4096 lies in the mapping, is 8-aligned (page-aligned base),
        // starts zeroed (a valid AtomicU64) and is only ever accessed atomically.
        unsafe { &*self.file.base().as_ptr().add(i * LINE).cast::<AtomicU64>() }
    }

    /// Slot `i` (`< SLOTS`): a 64-bit word after the lines, several to a cache line (ring
    /// slots, not flags).
    #[must_use]
    pub fn slot(&self, i: usize) -> &AtomicU64 {
        assert!(i < SLOTS, "slot {i} of {SLOTS}");
        // SAFETY: offset LINES*128 + i*8 < 4096 lies in the mapping, is 8-aligned, starts
        // zeroed and is only ever accessed atomically.
        unsafe {
            &*self
                .file
                .base()
                .as_ptr()
                .add(LINES * LINE + i * 8)
                .cast::<AtomicU64>()
        }
    }

    /// Line `i` (`< LINES`) as a 32-bit futex word. A line used as a word is never used as
    /// [`line`](Self::line) too: the futex ping-pong takes lines of its own.
    #[must_use]
    pub fn word(&self, i: usize) -> &AtomicU32 {
        assert!(i < LINES, "line {i} of {LINES}");
        // SAFETY: as `line`: in the mapping, 4-aligned, zeroed, only accessed atomically.
        unsafe { &*self.file.base().as_ptr().add(i * LINE).cast::<AtomicU32>() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn two_mappings_see_the_same_lines() {
        let name = format!("lines-test-{}", std::process::id());
        let a = SharedLines::create(&name).unwrap();
        let b = SharedLines::open(&name).unwrap();
        a.line(3).store(42, Ordering::Release);
        assert_eq!(b.line(3).load(Ordering::Acquire), 42);
        drop(b);
        drop(a);
        assert!(SharedLines::open(&name).is_err(), "removed by its creator");
    }
}
