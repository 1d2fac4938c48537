//! loom models of the ring protocol in `ring.rs` (run with `scripts/loom.sh`).
//!
//! The models drive the exact protocol functions of `ring.rs` (`write_and_publish`,
//! `copy_validated`, the waiter announcements, `release_to`, `min_lossless_cursor`) over a
//! heap [`Storage`] of loom atomic cells. Each sample is two 64-bit words that both hold the
//! sample's index, so a torn copy shows as two different words and a stale or uncommitted
//! copy shows as the wrong index (never-written cells hold [`EMPTY`]).
//!
//! The futex is modelled by [`Futex`], a loom mutex + condvar with the kernel's semantics
//! (`wait` sleeps only while the word still holds the expected value, checked under the
//! lock that `wake` takes). A lost wake-up therefore leaves a thread asleep forever, which
//! loom reports as a deadlock: the models need no timeouts.
//!
//! Keep them small: capacity 2, a handful of samples, `LOOM_MAX_PREEMPTIONS=2`.

use loom::sync::atomic::AtomicU64 as LoomU64;
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

use crate::ring::{
    copy_validated, min_lossless_cursor, slot_state, write_and_publish, CopyFault, ReaderCursor,
    RingSync, Storage, WindowCheck,
};
use crate::sync::{AtomicU32, Ordering};

/// Value of a cell no sample was ever written to.
const EMPTY: u64 = u64::MAX;
/// Words per sample.
const WORDS: usize = 2;
/// Bytes per sample.
const SAMPLE_BYTES: usize = WORDS * 8;

/// Sample slots as atomic words (the model stand-in for the shared mapping).
struct Cells {
    words: Vec<LoomU64>,
    capacity: u64,
}

impl Cells {
    fn new(capacity: u64) -> Cells {
        Cells {
            words: (0..capacity as usize * WORDS)
                .map(|_| LoomU64::new(EMPTY))
                .collect(),
            capacity,
        }
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
            let sample = first + (k / WORDS) as u64;
            let word = (sample % self.capacity) as usize * WORDS + k % WORDS;
            // SYNC: Relaxed word loads are the byte-wise atomic memcpy of the real copy; the
            // caller's `validate_after_copy` fence orders them.
            chunk.copy_from_slice(&self.words[word].load(Ordering::Relaxed).to_ne_bytes());
        }
    }
    fn store(&self, first: u64, src: &[u8]) {
        for (k, chunk) in src.chunks_exact(8).enumerate() {
            let sample = first + (k / WORDS) as u64;
            let word = (sample % self.capacity) as usize * WORDS + k % WORDS;
            let v = u64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
            // SYNC: Relaxed: ordered after `reserved` by `begin_overwrite`'s Release fence
            // and before `written` by `publish`'s Release store.
            self.words[word].store(v, Ordering::Relaxed);
        }
    }
}

/// The bytes of samples `[first, end)` as the writer produces them.
fn samples(first: u64, end: u64) -> Vec<u8> {
    (first..end)
        .flat_map(|s| [s; WORDS])
        .flat_map(u64::to_ne_bytes)
        .collect()
}

/// Assert that a copy of `[first, first + n)` holds exactly those samples, untorn.
fn assert_exact(first: u64, out: &[u8]) {
    for (k, sample) in out.chunks_exact(SAMPLE_BYTES).enumerate() {
        let words: Vec<u64> = sample
            .chunks_exact(8)
            .map(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")))
            .collect();
        let want = first + k as u64;
        assert!(
            words.iter().all(|&w| w == want),
            "accepted a bad copy of sample {want}: words {words:?} (EMPTY = uncommitted, \
             differing words = torn, another index = stale)"
        );
    }
}

/// A futex with the kernel's semantics, built from loom primitives.
#[derive(Default)]
struct Futex {
    lock: Mutex<()>,
    cv: Condvar,
}

impl Futex {
    /// `FUTEX_WAIT` without a timeout: sleep while `word == expected`.
    fn wait(&self, word: &AtomicU32, expected: u32) {
        let guard = self.lock.lock().expect("futex lock");
        // SYNC: Relaxed: the kernel's read of the futex word; the lock orders it against
        // `wake`, which bumps the word before taking the lock.
        if word.load(Ordering::Relaxed) == expected {
            drop(self.cv.wait(guard).expect("futex wait"));
        }
    }

    /// `FUTEX_WAKE` of every sleeper.
    fn wake_all(&self) {
        let _guard = self.lock.lock().expect("futex lock");
        self.cv.notify_all();
    }
}

/// The shared state of one model.
struct Ring {
    sync: RingSync,
    cells: Cells,
    data_futex: Futex,
    space_futex: Futex,
    readers: Vec<ReaderCursor>,
}

impl Ring {
    fn new(capacity: u64) -> Arc<Ring> {
        Ring::with_readers(capacity, 1)
    }

    /// A ring with `lossless` registered lossless readers, all at cursor 0.
    fn with_readers(capacity: u64, lossless: usize) -> Arc<Ring> {
        let readers: Vec<ReaderCursor> = (0..lossless).map(|_| ReaderCursor::default()).collect();
        for r in &readers {
            // SYNC: Relaxed + Release as in `Reader::new`.
            r.cursor.store(0, Ordering::Relaxed);
            r.state.store(
                slot_state::word(1 << 63 | 42, slot_state::LOSSLESS),
                Ordering::Release,
            );
        }
        Arc::new(Ring {
            sync: RingSync::default(),
            cells: Cells::new(capacity),
            data_futex: Futex::default(),
            space_futex: Futex::default(),
            readers,
        })
    }

    /// The writer's commit path: write one chunk, publish, wake announced readers.
    fn write(&self, written: u64, n: u64) -> u64 {
        let (end, wake) = write_and_publish(
            &self.sync,
            &self.cells,
            written,
            &samples(written, written + n),
        );
        if wake {
            self.data_futex.wake_all();
        }
        end
    }

    /// `Reader::wait`'s protocol (without the spin phase): block until `written >= until`.
    fn wait_data(&self, until: u64) -> u64 {
        let w = self.sync.written();
        if w >= until {
            return w;
        }
        let mut seq = self.sync.announce_data_waiter();
        let w = loop {
            let w = self.sync.written();
            if w >= until {
                break w;
            }
            self.data_futex.wait(&self.sync.data_wake.seq, seq);
            seq = self.sync.data_seq();
        };
        self.sync.withdraw_data_waiter();
        w
    }

    /// `Writer::wait_for_room`'s protocol: block until every lossless reader has consumed
    /// the samples below `need`.
    fn wait_room(&self, need: u64) {
        let room = || min_lossless_cursor(&self.readers).is_none_or(|m| m >= need);
        // one loom-yielding spin, as the real writer spins before it sleeps
        if crate::ring::spin_until(1, room) {
            return;
        }
        loop {
            let seq = self.sync.announce_space_waiter();
            let ok = room();
            if !ok {
                self.space_futex.wait(&self.sync.space_wake.seq, seq);
            }
            self.sync.withdraw_space_waiter();
            if ok || room() {
                return;
            }
        }
    }

    /// `Reader::publish_cursor` of lossless reader `slot`.
    fn release(&self, slot: usize, cursor: u64) {
        if self.readers[slot].release_to(cursor, &self.sync, true) {
            self.space_futex.wake_all();
        }
    }
}

/// (a) One writer, one reader, across the wrap: every copy the protocol accepts holds exactly
/// the committed samples asked for; a window beyond `written` is refused before copying.
#[test]
fn loom_reader_never_sees_uncommitted_or_torn_samples() {
    loom::model(|| {
        let ring = Ring::new(2);
        let w = Arc::clone(&ring);
        let writer = thread::spawn(move || {
            let mut written = 0;
            for _ in 0..3 {
                written = w.write(written, 1);
            }
        });
        let mut accepted = 0;
        for _ in 0..2 {
            let written = ring.sync.written();
            let first = written.saturating_sub(2);
            let mut out = vec![0u8; (written - first) as usize * SAMPLE_BYTES];
            match copy_validated(&ring.sync, &ring.cells, first, written, &mut out) {
                Ok(()) => {
                    assert_exact(first, &out);
                    accepted += 1;
                }
                Err(CopyFault::LappedDuringCopy { oldest })
                | Err(CopyFault::Window(WindowCheck::Overwritten { oldest })) => {
                    assert!(oldest > first, "a lap must move `oldest` past {first}");
                }
                Err(other) => panic!("unexpected fault {other:?} for [{first}, {written})"),
            }
            let mut one = vec![0u8; SAMPLE_BYTES];
            let beyond = copy_validated(&ring.sync, &ring.cells, 5, 6, &mut one);
            assert!(
                matches!(
                    beyond,
                    Err(CopyFault::Window(WindowCheck::NotYetWritten { .. }))
                ),
                "an unwritten window must be refused, got {beyond:?}"
            );
        }
        writer.join().expect("writer");
        // after the writer is done the newest samples are intact
        let mut out = vec![0u8; 2 * SAMPLE_BYTES];
        copy_validated(&ring.sync, &ring.cells, 1, 3, &mut out).expect("settled window");
        assert_exact(1, &out);
        assert!(accepted <= 2);
    });
}

/// (b) A writer that laps a reader mid-copy: the reader is told (`LappedDuringCopy` or
/// `Overwritten`, with an `oldest` past what it wanted) and never accepts torn data.
#[test]
fn loom_writer_lapping_reader_is_reported_as_overrun() {
    loom::model(|| {
        let ring = Ring::new(2);
        let mut written = ring.write(0, 1);
        written = ring.write(written, 1);
        let w = Arc::clone(&ring);
        let writer = thread::spawn(move || {
            // both slots of samples 0 and 1 are overwritten by samples 2 and 3
            let written = w.write(written, 1);
            w.write(written, 1);
        });
        let mut out = vec![0u8; 2 * SAMPLE_BYTES];
        match copy_validated(&ring.sync, &ring.cells, 0, 2, &mut out) {
            Ok(()) => assert_exact(0, &out),
            Err(CopyFault::LappedDuringCopy { oldest })
            | Err(CopyFault::Window(WindowCheck::Overwritten { oldest })) => {
                assert!((1..=2).contains(&oldest), "oldest {oldest}");
            }
            Err(other) => panic!("unexpected fault {other:?}"),
        }
        writer.join().expect("writer");
        let after = copy_validated(&ring.sync, &ring.cells, 0, 2, &mut out);
        assert_eq!(
            after,
            Err(CopyFault::Window(WindowCheck::Overwritten { oldest: 2 }))
        );
    });
}

/// (b2) Cancelled and partly committed reservations: the writer reserves two samples,
/// scribbles over both slots (holding samples 0 and 1 of the previous lap) and then gives up
/// (cancel) or commits only the first; a later, shorter reservation must not make the
/// scribbled slot look like sample 1 again. The reader copies the newest window the ring
/// offers and never accepts a scribbled or stale row.
#[test]
fn loom_cancelled_or_partly_committed_reservation_never_validates_stale_rows() {
    for partial in [false, true] {
        loom::model(move || {
            let ring = Ring::new(2);
            let written = ring.write(0, 2);
            let w = Arc::clone(&ring);
            let writer = thread::spawn(move || {
                // reserve samples 2 and 3 (both slots), scribble over them
                w.sync.begin_overwrite(written + 2);
                w.cells.store(written, &[0xEE; 2 * SAMPLE_BYTES]);
                let written = if partial {
                    // commit the first of the two (sample 2), the second slot stays scribbled
                    w.cells.store(written, &samples(written, written + 1));
                    let _ = w.sync.publish(written + 1);
                    written + 1
                } else {
                    written // cancel: nothing published
                };
                // a later, shorter reservation of one sample
                w.write(written, 1);
            });
            let written = ring.sync.written();
            let first = written.saturating_sub(2);
            let mut out = vec![0u8; (written - first) as usize * SAMPLE_BYTES];
            match copy_validated(&ring.sync, &ring.cells, first, written, &mut out) {
                Ok(()) => assert_exact(first, &out),
                Err(CopyFault::LappedDuringCopy { oldest })
                | Err(CopyFault::Window(WindowCheck::Overwritten { oldest })) => {
                    assert!(oldest > first, "a lap must move `oldest` past {first}");
                }
                Err(other) => panic!("unexpected fault {other:?}"),
            }
            writer.join().expect("writer");
            // settled: every window the ring accepts holds exactly its samples
            let end = ring.sync.written();
            for first in end.saturating_sub(2)..end {
                let mut out = vec![0u8; (end - first) as usize * SAMPLE_BYTES];
                if copy_validated(&ring.sync, &ring.cells, first, end, &mut out).is_ok() {
                    assert_exact(first, &out);
                }
            }
        });
    }
}

/// (c) Waiter announcement (Dekker): a reader that announces itself and a writer that
/// publishes never both miss each other — the reader is always woken or sees the sample
/// (a lost wake-up would leave it asleep: loom reports a deadlock).
#[test]
fn loom_announced_waiter_is_never_left_asleep() {
    loom::model(|| {
        let ring = Ring::new(2);
        let w = Arc::clone(&ring);
        let writer = thread::spawn(move || {
            let written = w.write(0, 1);
            w.write(written, 1);
        });
        let got = ring.wait_data(2);
        assert!(got >= 2);
        let mut out = vec![0u8; 2 * SAMPLE_BYTES];
        copy_validated(&ring.sync, &ring.cells, 0, 2, &mut out).expect("committed, not lapped");
        assert_exact(0, &out);
        writer.join().expect("writer");
        // SYNC: Relaxed: single-threaded check after join.
        assert_eq!(ring.sync.data_wake.waiters.load(Ordering::Relaxed), 0);
    });
}

/// (c2) Waiting for samples *or* events on the samples' futex (`Stream::wait_for`): an event
/// published on the other ring still wakes the waiter, through `data_waiters_after_fence`
/// (a lost wake-up would leave it asleep: loom reports a deadlock).
#[test]
fn loom_event_wakes_a_waiter_on_the_sample_line() {
    loom::model(|| {
        let samples = Ring::new(2);
        let events = Arc::new(RingSync::default());
        let (s, e) = (Arc::clone(&samples), Arc::clone(&events));
        let event_writer = thread::spawn(move || {
            // `Writer::push_event`: publish the event count, then check the sample line
            if e.publish(1) {
                e.bump_data_seq();
            }
            if s.sync.data_waiters_after_fence() {
                s.sync.bump_data_seq();
                s.data_futex.wake_all();
            }
        });
        // `Stream::wait_for(samples >= 1 or events >= 1)`
        let mut seq = samples.sync.announce_data_waiter();
        loop {
            if samples.sync.written() >= 1 || events.written() >= 1 {
                break;
            }
            samples.data_futex.wait(&samples.sync.data_wake.seq, seq);
            seq = samples.sync.data_seq();
        }
        samples.sync.withdraw_data_waiter();
        assert_eq!(events.written(), 1);
        event_writer.join().expect("event writer");
    });
}

/// (d) Lossless back-pressure: the writer waits (spin, then announce + sleep) until the
/// lossless reader released the slots it is about to reuse, so the reader's every copy
/// validates and holds the exact samples; the space-waiter announcement cannot lose the
/// reader's wake-up (that would deadlock the writer, which loom reports).
#[test]
fn loom_lossless_writer_never_overwrites_unread_samples() {
    loom::model(|| {
        const TOTAL: u64 = 3;
        // the reader registered before the first sample
        let ring = Ring::with_readers(2, 1);
        let w = Arc::clone(&ring);
        let writer = thread::spawn(move || {
            let cap = w.cells.capacity;
            let mut written = 0;
            while written < TOTAL {
                w.wait_room((written + 1).saturating_sub(cap));
                written = w.write(written, 1);
            }
        });
        lossless_reader(&ring, 0, TOTAL);
        writer.join().expect("writer");
    });
}

/// A lossless reader in `slot` pulling `total` samples: wait, copy, check, release.
fn lossless_reader(ring: &Ring, slot: usize, total: u64) {
    let mut cursor = 0;
    while cursor < total {
        let end = ring.wait_data(cursor + 1);
        let mut out = vec![0u8; (end - cursor) as usize * SAMPLE_BYTES];
        copy_validated(&ring.sync, &ring.cells, cursor, end, &mut out)
            .expect("a lossless reader is never overrun");
        assert_exact(cursor, &out);
        cursor = end;
        ring.release(slot, cursor);
    }
}

/// Slow (run with `RTLOOP_SLOW_MODELS=1 scripts/loom.sh`): two lossless readers in two
/// threads and a writer of two-sample chunks into a ring of 2: the writer waits for the
/// slower of the two, and neither ever loses or misreads a sample.
#[cfg(not(skip_slow_models))]
#[test]
fn loom_lossless_writer_waits_for_the_slowest_of_two_readers() {
    loom::model(|| {
        const TOTAL: u64 = 4;
        let ring = Ring::with_readers(2, 2);
        let w = Arc::clone(&ring);
        let writer = thread::spawn(move || {
            let cap = w.cells.capacity;
            let mut written = 0;
            while written < TOTAL {
                w.wait_room((written + 2).saturating_sub(cap));
                written = w.write(written, 2);
            }
        });
        let r = Arc::clone(&ring);
        let second = thread::spawn(move || lossless_reader(&r, 1, TOTAL));
        lossless_reader(&ring, 0, TOTAL);
        second.join().expect("second reader");
        writer.join().expect("writer");
    });
}

/// (d') The space-waiter announcement alone, with the writer forced to sleep: the reader's
/// release either is seen by the writer's re-check or bumps `space_wake.seq` and wakes it.
#[test]
fn loom_space_waiter_is_woken_by_lossless_release() {
    loom::model(|| {
        let ring = Ring::with_readers(2, 1);
        let r = Arc::clone(&ring);
        let reader = thread::spawn(move || r.release(0, 1));
        ring.wait_room(1);
        assert!(min_lossless_cursor(&ring.readers).is_some_and(|m| m >= 1));
        reader.join().expect("reader");
    });
}
