//! Shared by the integration tests: a payload every sample can be checked against.
#![allow(dead_code)] // each test crate uses a different part

use rtloop_stream::{DType, ReadError, Reader, Stream, StreamConfig};

/// Channels of the u64 test streams.
pub const CH: usize = 4;

/// The value of channel `c` of sample `i`: differs between samples and between channels,
/// so a torn, stale or misplaced sample never passes [`check`].
#[must_use]
pub fn value(i: u64, c: usize) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(7 * c as u32)
        ^ (c as u64) << 60
        ^ i
}

/// Samples `[first, first + n)` of the payload, sample-major.
#[must_use]
pub fn payload(first: u64, n: u64) -> Vec<u64> {
    (first..first + n)
        .flat_map(|i| (0..CH).map(move |c| value(i, c)))
        .collect()
}

/// The same as bytes.
#[must_use]
pub fn payload_bytes(first: u64, n: u64) -> Vec<u8> {
    payload(first, n)
        .into_iter()
        .flat_map(u64::to_ne_bytes)
        .collect()
}

/// Check that `bytes` hold exactly samples `[first, ..)` of the payload.
pub fn check(first: u64, bytes: &[u8]) -> Result<(), String> {
    let want = payload_bytes(first, (bytes.len() / (8 * CH)) as u64);
    if want == bytes {
        return Ok(());
    }
    let bad = (0..want.len()).find(|&k| want[k] != bytes[k]).unwrap_or(0) / (8 * CH);
    Err(format!(
        "sample {} differs from what was written",
        first + bad as u64
    ))
}

/// A u64 stream of [`CH`] channels.
pub fn create(name: &str, capacity: u64) -> Stream {
    Stream::create(name, &StreamConfig::new(DType::U64, CH, 1000.0, capacity))
        .unwrap_or_else(|e| panic!("create {name}: {e}"))
}

/// A u64 stream of [`CH`] channels whose name outlives a clean close, for tests that hand it
/// from one writer to the next.
pub fn create_kept(name: &str, capacity: u64) -> Stream {
    let cfg = StreamConfig {
        keep: true,
        ..StreamConfig::new(DType::U64, CH, 1000.0, capacity)
    };
    Stream::create(name, &cfg).unwrap_or_else(|e| panic!("create {name}: {e}"))
}

/// Pull up to `max` samples and check them; returns what was delivered, or the error.
pub fn pull_checked(reader: &mut Reader, max: usize) -> Result<(u64, usize), ReadError> {
    let mut buf = vec![0u8; max * 8 * CH];
    let p = reader.pull_into(&mut buf, None, max)?;
    check(p.first, &buf[..p.n * 8 * CH]).unwrap_or_else(|e| panic!("{e}"));
    Ok((p.first, p.n))
}

// std atomics here are racing test processes' bookkeeping in a shared file, not the
// protocol under test
#[allow(clippy::disallowed_types)]
mod coord {
    use std::fs::OpenOptions;
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The racers' meeting place: a page of shared memory.
    #[repr(C)]
    pub struct Coord {
        /// Barrier arrivals (monotonic).
        pub arrived: AtomicU64,
        /// Winners of the current round.
        pub owners: AtomicU64,
    }

    /// A shared mapping of the coordination file (removed by the parent at the end).
    pub struct CoordMap {
        ptr: *mut Coord,
    }

    impl CoordMap {
        pub fn open(path: &str) -> CoordMap {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .expect("coordination file");
            f.set_len(4096).expect("size the coordination file");
            // SAFETY: mapping 4096 bytes of a file we just sized to 4096 bytes, shared, with no
            // address hint; the result is checked below.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    f.as_raw_fd(),
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED, "mmap the coordination file");
            CoordMap { ptr: p.cast() }
        }

        pub fn get(&self) -> &Coord {
            // SAFETY: the mapping is page-aligned, 4096 bytes, zero-filled at creation (a valid
            // `Coord` of two zero atomics) and lives until the process exits.
            unsafe { &*self.ptr }
        }
    }

    /// Barrier number `k` (1, 2, ...) of two racers: arrive, then wait for the other.
    pub fn barrier(c: &Coord, k: u64) {
        c.arrived.fetch_add(1, Ordering::AcqRel);
        let mut spins = 0u32;
        while c.arrived.load(Ordering::Acquire) < 2 * k {
            spins += 1;
            if spins < 200 {
                std::hint::spin_loop();
            } else {
                // two racers on two cores: yield rather than starve the machine
                std::thread::yield_now();
            }
        }
    }
}

#[allow(unused_imports)] // each test crate uses a different part
pub use coord::{barrier, CoordMap};
