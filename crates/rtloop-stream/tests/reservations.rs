//! Abandoned and partly committed reservations: a sample index that was ever reserved is
//! never reported valid with older contents. The writer may have stored into every slot of
//! a reservation before cancelling it (or committing only part), so those slots no longer
//! hold the previous lap's samples; a read of the previous lap must say so (TooOld /
//! Overrun), never return the overwritten rows as if they were intact.
// std atomics here are test bookkeeping between two threads, not the protocol under test
#![allow(clippy::disallowed_types)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{check, create, create_kept, payload_bytes, value, CH};
use proptest::prelude::*;
use rtloop_stream::{ReadError, ReaderMode, Writer};
use rtloop_testkit::{unique_name, StreamGuard};

const SB: usize = 8 * CH;

/// Fill a reservation of `n` samples with garbage (what a writer that gave up left there).
fn reserve_and_scribble(w: &mut Writer, n: usize) -> rtloop_stream::WriteGuard<'_> {
    let mut g = w.reserve(n).unwrap();
    g.bytes_mut().fill(0xEE);
    g
}

/// Every sample of `[first, end)` the reader hands out as valid must be the one written at
/// that index. Returns how many rows came back valid but wrong.
fn stale_rows(reader: &rtloop_stream::Reader, first: u64, end: u64) -> usize {
    let mut out = vec![0u8; (end - first) as usize * SB];
    match reader.read_into(first, end, &mut out, None) {
        Ok(()) => (0..(end - first))
            .filter(|&k| {
                let row = &out[k as usize * SB..(k as usize + 1) * SB];
                check(first + k, row).is_err()
            })
            .count(),
        Err(ReadError::TooOld { .. } | ReadError::Overrun { .. }) => 0,
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// Write a lap, reserve 100 samples, scribble over them and cancel; then (with a new writer
/// if `next_writer`) commit one sample. Every row read back must be intact, and the newest
/// window offered must start after the scribbled slots.
fn cancel_then_commit_one(tag: &str, next_writer: bool) {
    let name = unique_name(tag);
    let stream = create_kept(&name, 128);
    let _g = StreamGuard::new(&name);
    let cap = stream.info().capacity;
    let reader = stream.reader(ReaderMode::Latest).unwrap();
    let mut w = stream.writer().unwrap();
    w.write_bytes(&payload_bytes(0, cap), None).unwrap();
    // reserve 100, scribble over the slots of samples [0, 100), then give up
    reserve_and_scribble(&mut w, 100).cancel();
    if next_writer {
        drop(w);
        w = stream.writer().unwrap();
    }
    w.write_bytes(&payload_bytes(cap, 1), None).unwrap();
    let end = cap + 1;
    assert_eq!(stale_rows(&reader, end - cap, end), 0);
    // the newest window the reader offers holds only intact samples
    let latest = reader.latest(cap).unwrap();
    assert_eq!(
        (latest.first(), latest.end()),
        (100, end),
        "only the intact samples"
    );
    let mut out = vec![0u8; latest.len_bytes()];
    latest.copy_to(&mut out).unwrap();
    check(latest.first(), &out).unwrap();
}

#[test]
fn cancelled_reservation_never_leaves_stale_rows_reported_valid() {
    cancel_then_commit_one("resv-cancel", false);
}

/// The writer keeps its own copy of `reserved` (loading the shared word on every
/// reservation waited for the line the polling readers hold): a writer that claims the
/// stream after one gave up a reservation must start from the shared word, not from its
/// `written`, or its shorter reservation would make the scribbled slots look valid again.
#[test]
fn the_next_writer_keeps_a_cancelled_reservation_reported_overwritten() {
    cancel_then_commit_one("resv-next-writer", true);
}

#[test]
fn partly_committed_reservation_never_leaves_stale_rows_reported_valid() {
    let name = unique_name("resv-partial");
    let stream = create(&name, 128);
    let _g = StreamGuard::new(&name);
    let cap = stream.info().capacity;
    let reader = stream.reader(ReaderMode::Latest).unwrap();
    let mut w = stream.writer().unwrap();
    w.write_bytes(&payload_bytes(0, cap), None).unwrap();
    let mut g = reserve_and_scribble(&mut w, 100);
    g.bytes_mut()[..10 * SB].copy_from_slice(&payload_bytes(cap, 10));
    g.commit_n(10).unwrap();
    w.write_bytes(&payload_bytes(cap + 10, 1), None).unwrap();
    let end = cap + 11;
    assert_eq!(stale_rows(&reader, end - cap, end), 0);
}

/// One step of the writer in the property test.
#[derive(Clone, Debug)]
enum Step {
    /// reserve n, fill correctly, commit all
    Commit(usize),
    /// reserve n, scribble, cancel
    Cancel(usize),
    /// reserve n, fill the first k correctly, scribble the rest, commit k
    Partial(usize, usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1usize..40).prop_map(Step::Commit),
        (1usize..40).prop_map(Step::Cancel),
        (1usize..40, 0usize..40).prop_map(|(n, k)| Step::Partial(n, k.min(n))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn interleaved_reserve_cancel_partial_commit_never_shows_a_stale_row(
        steps in proptest::collection::vec(step(), 1..60)
    ) {
        let name = unique_name("resv-prop");
        let stream = create(&name, 32);
        let _g = StreamGuard::new(&name);
        let cap = stream.info().capacity;
        let reader = stream.reader(ReaderMode::Latest).unwrap();
        let mut w = stream.writer().unwrap();
        for s in steps {
            let written = w.written();
            match s {
                Step::Commit(n) => {
                    let mut g = w.reserve(n).unwrap();
                    g.bytes_mut().copy_from_slice(&payload_bytes(written, n as u64));
                    g.commit();
                }
                Step::Cancel(n) => reserve_and_scribble(&mut w, n).cancel(),
                Step::Partial(n, k) => {
                    let mut g = reserve_and_scribble(&mut w, n);
                    g.bytes_mut()[..k * SB].copy_from_slice(&payload_bytes(written, k as u64));
                    g.commit_n(k).unwrap();
                }
            }
            // after every step, every window a reader may ask for is either refused or intact
            let end = w.written();
            for first in end.saturating_sub(cap)..end {
                prop_assert_eq!(stale_rows(&reader, first, end), 0, "window [{}, {})", first, end);
            }
        }
    }
}

/// A writer thread cancels and partly commits reservations while a reader thread reads the
/// newest windows and checks every value against its index.
#[test]
fn reader_thread_never_sees_stale_rows_while_writer_cancels_and_partly_commits() {
    let name = unique_name("resv-threads");
    let stream = create(&name, 64);
    let _g = StreamGuard::new(&name);
    let cap = stream.info().capacity;
    let reader = stream.reader(ReaderMode::Latest).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let (stale, reads) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let checker = {
        let (done, stale, reads) = (done.clone(), stale.clone(), reads.clone());
        std::thread::spawn(move || {
            let mut out = vec![0u8; cap as usize * SB];
            while !done.load(Ordering::Relaxed) {
                // the newest window the reader offers, copied out and validated after
                let Ok(win) = reader.latest(cap) else {
                    continue;
                };
                let (first, end) = (win.first(), win.end());
                let buf = &mut out[..(end - first) as usize * SB];
                if win.copy_to(buf).is_ok() {
                    reads.fetch_add(1, Ordering::Relaxed);
                    for k in 0..(end - first) {
                        let got = u64::from_ne_bytes(
                            buf[k as usize * SB..k as usize * SB + 8]
                                .try_into()
                                .unwrap(),
                        );
                        if got != value(first + k, 0) {
                            stale.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                    }
                }
            }
        })
    };
    let mut w = stream.writer().unwrap();
    let rounds: u64 = std::env::var("RTLOOP_RESV_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    for r in 0..rounds {
        let written = w.written();
        // xorshift: sizes that go up and down, so a later reservation is often shorter
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let n = 1 + (rng % 48) as usize;
        match r % 3 {
            0 => reserve_and_scribble(&mut w, n).cancel(),
            1 => {
                let k = n / 2;
                let mut g = reserve_and_scribble(&mut w, n);
                g.bytes_mut()[..k * SB].copy_from_slice(&payload_bytes(written, k as u64));
                g.commit_n(k).unwrap();
            }
            _ => {
                let mut g = w.reserve(n).unwrap();
                g.bytes_mut()
                    .copy_from_slice(&payload_bytes(written, n as u64));
                g.commit();
            }
        }
    }
    done.store(true, Ordering::Relaxed);
    checker.join().unwrap();
    let (stale, reads) = (stale.load(Ordering::Relaxed), reads.load(Ordering::Relaxed));
    eprintln!("{stale} stale windows in {reads} validated reads over {rounds} writer rounds");
    assert_eq!(
        stale, 0,
        "{stale} of {reads} validated reads held stale rows"
    );
}
