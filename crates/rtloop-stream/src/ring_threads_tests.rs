//! The ring protocol of `ring.rs` with real threads over a heap [`Storage`] of atomic words:
//! the stress counterpart of the loom models, small enough for miri (`scripts/miri.sh`),
//! which checks it for data races and undefined behaviour under its weak-memory emulation.
//! Iteration counts shrink under miri (`cfg!(miri)`).

use std::sync::Arc;

use crate::ring::{
    copy_validated, min_lossless_cursor, slot_state, write_and_publish, CopyFault, ReaderCursor,
    RingSync, Storage, WindowCheck,
};
use crate::sync::{AtomicU64, Ordering};

const WORDS: usize = 2;
const SAMPLE_BYTES: usize = WORDS * 8;
const EMPTY: u64 = u64::MAX;

/// Samples the writer produces in one test.
fn total() -> u64 {
    if cfg!(miri) {
        150
    } else {
        200_000
    }
}

/// Each sample is two words that both hold its index.
struct Cells {
    words: Vec<AtomicU64>,
    capacity: u64,
}

impl Cells {
    fn new(capacity: u64) -> Cells {
        Cells {
            words: (0..capacity as usize * WORDS)
                .map(|_| AtomicU64::new(EMPTY))
                .collect(),
            capacity,
        }
    }
    fn word(&self, first: u64, k: usize) -> &AtomicU64 {
        let sample = first + (k / WORDS) as u64;
        &self.words[(sample % self.capacity) as usize * WORDS + k % WORDS]
    }
}

impl Storage for Cells {
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn sample_bytes(&self) -> usize {
        SAMPLE_BYTES
    }
    fn load(&self, first: u64, out: &mut [u8]) {
        for (k, chunk) in out.chunks_exact_mut(8).enumerate() {
            // SYNC: Relaxed: a word-wise atomic memcpy, ordered by validate_after_copy's fence.
            chunk.copy_from_slice(&self.word(first, k).load(Ordering::Relaxed).to_ne_bytes());
        }
    }
    fn store(&self, first: u64, src: &[u8]) {
        for (k, chunk) in src.chunks_exact(8).enumerate() {
            let v = u64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
            // SYNC: Relaxed: ordered by begin_overwrite's fence and publish's Release.
            self.word(first, k).store(v, Ordering::Relaxed);
        }
    }
}

fn samples(first: u64, n: u64) -> Vec<u8> {
    (first..first + n)
        .flat_map(|s| [s; WORDS])
        .flat_map(u64::to_ne_bytes)
        .collect()
}

fn assert_exact(first: u64, out: &[u8]) {
    for (k, w) in out.chunks_exact(8).enumerate() {
        let got = u64::from_ne_bytes(w.try_into().expect("8 bytes"));
        let want = first + (k / WORDS) as u64;
        assert_eq!(got, want, "accepted a torn, stale or uncommitted copy");
    }
}

struct Ring {
    sync: RingSync,
    cells: Cells,
    readers: [ReaderCursor; 1],
}

#[test]
fn latest_reader_accepts_only_exact_copies_while_the_writer_laps_it() {
    let ring = Arc::new(Ring {
        sync: RingSync::default(),
        cells: Cells::new(4),
        readers: [ReaderCursor::default()],
    });
    let n = total();
    let w = Arc::clone(&ring);
    let writer = std::thread::spawn(move || {
        let mut written = 0;
        while written < n {
            let chunk = 1 + written % 3;
            (written, _) = write_and_publish(&w.sync, &w.cells, written, &samples(written, chunk));
        }
        written
    });
    let mut accepted = 0u64;
    let mut out = [0u8; 4 * SAMPLE_BYTES];
    loop {
        let written = ring.sync.written();
        let first = written.saturating_sub(3);
        let buf = &mut out[..(written - first) as usize * SAMPLE_BYTES];
        match copy_validated(&ring.sync, &ring.cells, first, written, buf) {
            Ok(()) => {
                assert_exact(first, buf);
                accepted += 1;
            }
            Err(CopyFault::LappedDuringCopy { oldest })
            | Err(CopyFault::Window(WindowCheck::Overwritten { oldest })) => {
                assert!(oldest > first, "a lap moves `oldest` past {first}");
            }
            Err(other) => panic!("unexpected {other:?}"),
        }
        if written >= n {
            break;
        }
        std::thread::yield_now();
    }
    let end = writer.join().expect("writer");
    assert!(end >= n);
    assert!(
        accepted > 0,
        "the settled window at the end is always accepted"
    );
}

#[test]
fn lossless_reader_gets_every_sample_exactly_once_in_order() {
    let ring = Arc::new(Ring {
        sync: RingSync::default(),
        cells: Cells::new(4),
        readers: [ReaderCursor::default()],
    });
    // SYNC: Relaxed + Release as in `Reader::new`.
    ring.readers[0].cursor.store(0, Ordering::Relaxed);
    ring.readers[0].state.store(
        slot_state::word(1 << 63 | 42, slot_state::LOSSLESS),
        Ordering::Release,
    );
    let n = total();
    let w = Arc::clone(&ring);
    let writer = std::thread::spawn(move || {
        let cap = w.cells.capacity;
        let mut written = 0;
        while written < n {
            let chunk = (1 + written % 3).min(n - written);
            let need = (written + chunk).saturating_sub(cap);
            while min_lossless_cursor(&w.readers).is_some_and(|m| m < need) {
                std::thread::yield_now();
            }
            (written, _) = write_and_publish(&w.sync, &w.cells, written, &samples(written, chunk));
        }
    });
    let mut cursor = 0;
    let mut out = [0u8; 4 * SAMPLE_BYTES];
    while cursor < n {
        let written = ring.sync.written();
        if written == cursor {
            std::thread::yield_now();
            continue;
        }
        let end = written.min(cursor + 4);
        let buf = &mut out[..(end - cursor) as usize * SAMPLE_BYTES];
        copy_validated(&ring.sync, &ring.cells, cursor, end, buf)
            .expect("a lossless reader is never overrun");
        assert_exact(cursor, buf);
        cursor = end;
        let _ = ring.readers[0].release_to(cursor, &ring.sync, true);
    }
    writer.join().expect("writer");
    assert_eq!(ring.sync.written(), n);
}
