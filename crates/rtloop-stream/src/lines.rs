//! Bare shared cache lines between processes: the reference a stream's hand-off latency is
//! judged against (a cache-line ping-pong between the same two cores, machine-limits §B2).
//! Deliberately no ring, no protocol: two `AtomicU64` on their own 128-byte lines in a
//! small shared mapping.

use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::ptr::NonNull;

use rustix::mm::{MapFlags, ProtFlags};

use crate::sync::AtomicU64;
use crate::sys;

/// Lines in a [`SharedLines`] mapping.
pub const LINES: usize = 8;
const LINE: usize = 128;
const BYTES: usize = 4096;

/// A few cache lines of shared memory, each holding one `AtomicU64`.
pub struct SharedLines {
    base: NonNull<u8>,
    path: PathBuf,
    owner: bool,
}

// SAFETY: the mapping is only accessed through atomics.
unsafe impl Send for SharedLines {}
// SAFETY: as above.
unsafe impl Sync for SharedLines {}

impl SharedLines {
    fn path(name: &str) -> PathBuf {
        sys::shm_dir().join(format!("rtloop-lines-{name}"))
    }

    /// Create the lines under `name` (removed again when this value drops).
    pub fn create(name: &str) -> std::io::Result<SharedLines> {
        crate::layout::validate_name(name).map_err(std::io::Error::other)?;
        let path = Self::path(name);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        f.set_len(BYTES as u64)?;
        Self::map(&f, path, true)
    }

    /// Open lines another process created.
    pub fn open(name: &str) -> std::io::Result<SharedLines> {
        crate::layout::validate_name(name).map_err(std::io::Error::other)?;
        let path = Self::path(name);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)?;
        if f.metadata()?.len() < BYTES as u64 {
            return Err(std::io::Error::other(format!(
                "{} is not a shared-lines file",
                path.display()
            )));
        }
        Self::map(&f, path, false)
    }

    fn map(f: &std::fs::File, path: PathBuf, owner: bool) -> std::io::Result<SharedLines> {
        // SAFETY: a fresh shared mapping of BYTES bytes of a file that is at least that long,
        // at an address the kernel picks; it aliases no Rust object.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                BYTES,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                f.as_fd(),
                0,
            )?
        };
        let base = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| std::io::Error::other("mmap returned null"))?;
        Ok(SharedLines { base, path, owner })
    }

    /// Line `i` (`< LINES`).
    #[must_use]
    pub fn line(&self, i: usize) -> &AtomicU64 {
        assert!(i < LINES, "line {i} of {LINES}");
        // SAFETY: offset i*128 < 4096 lies in the mapping, is 8-aligned (page-aligned base),
        // starts zeroed (a valid AtomicU64) and is only ever accessed atomically.
        unsafe { &*self.base.as_ptr().add(i * LINE).cast::<AtomicU64>() }
    }
}

impl Drop for SharedLines {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; the `&AtomicU64`s borrowed from it cannot
        // outlive `self`.
        unsafe {
            let _ = rustix::mm::munmap(self.base.as_ptr().cast(), BYTES);
        }
        if self.owner {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

// miri cannot run mmap of a file
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;
    use crate::sync::Ordering;

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
