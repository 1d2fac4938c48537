//! The shipped writer and readers on real threads over [`HeapBacking`] (the backing the loom
//! models use too): a latest reader lapped by a fast writer never accepts a wrong sample, a
//! lossless reader gets every sample in order, a clean close ends a waiting reader, and an
//! event wakes a reader waiting for events.

use std::time::Duration;

use crate::backing::{Backing, HeapBacking};
use crate::{
    DType, Event, EventValue, ReadError, ReaderMode, Stream, StreamConfig, WaitError, Writer,
};

const CH: usize = 2;
const SB: usize = 8 * CH;

fn heap(capacity: u64) -> Stream<HeapBacking> {
    let mut cfg = StreamConfig::new(DType::U64, CH, 1000.0, capacity);
    cfg.event_capacity = 4;
    Stream::in_heap(&cfg)
}

/// Sample `i`: every channel holds `i`, so a torn or stale copy shows.
fn samples(first: u64, n: u64) -> Vec<u8> {
    (first..first + n)
        .flat_map(|i| [i; CH])
        .flat_map(u64::to_ne_bytes)
        .collect()
}

fn check(first: u64, bytes: &[u8]) {
    for (k, w) in bytes.chunks_exact(8).enumerate() {
        let v = u64::from_ne_bytes(w.try_into().unwrap());
        assert_eq!(
            v,
            first + (k / CH) as u64,
            "sample {} is wrong",
            first + (k / CH) as u64
        );
    }
}

fn write_all(mut w: Writer<HeapBacking>, total: u64) {
    let mut k = 0u64;
    while w.written() < total {
        let n = (1 + k % 5).min(total - w.written());
        w.write_bytes(&samples(w.written(), n), None).unwrap();
        k += 1;
    }
}

const TOTAL: u64 = if cfg!(miri) { 200 } else { 20_000 };

#[test]
fn latest_reader_lapped_by_the_writer_never_accepts_a_wrong_sample() {
    let s = heap(8);
    let mut r = s.reader(ReaderMode::Latest).unwrap();
    let w = s.writer().unwrap();
    let writer = std::thread::spawn(move || write_all(w, TOTAL));
    let (mut got, mut lost) = (0u64, 0u64);
    let mut buf = vec![0u8; 4 * SB];
    loop {
        match r.pull_into(&mut buf, None, 4) {
            Ok(p) => {
                check(p.first, &buf[..p.n * SB]);
                got += p.n as u64;
            }
            Err(ReadError::Overrun { lost: l, .. }) => lost += l,
            Err(e) => panic!("{e}"),
        }
        if r.cursor() >= TOTAL {
            break;
        }
        match r.wait_available(1, Some(Duration::from_secs(30))) {
            Ok(_) => {}
            Err(WaitError::WriterClosed { written }) => assert_eq!(written, TOTAL),
            Err(e) => panic!("{e}"),
        }
    }
    writer.join().unwrap();
    assert_eq!(
        got + lost,
        TOTAL,
        "every sample delivered or counted as lost"
    );
}

#[test]
fn lossless_reader_gets_every_sample_in_order_and_ends_at_the_close() {
    let s = heap(8);
    let mut r = s.reader(ReaderMode::Lossless).unwrap();
    let w = s.writer().unwrap();
    let writer = std::thread::spawn(move || write_all(w, TOTAL));
    let mut got = 0u64;
    let mut buf = vec![0u8; 3 * SB];
    let end = loop {
        match r.wait_available(1, None) {
            Ok(_) => {
                let p = r.pull_into(&mut buf, None, 3).unwrap();
                assert_eq!(p.first, got, "in order, nothing skipped");
                check(p.first, &buf[..p.n * SB]);
                got += p.n as u64;
            }
            Err(e) => break e,
        }
    };
    writer.join().unwrap();
    assert_eq!(end, WaitError::WriterClosed { written: TOTAL });
    assert_eq!(got, TOTAL);
}

#[test]
fn an_event_wakes_a_reader_waiting_for_events() {
    let s = heap(8);
    let mut w = s.writer().unwrap();
    let waiter = {
        let s = s.clone();
        std::thread::spawn(move || s.wait_for(u64::MAX, 1, Duration::from_secs(30), &|| true))
    };
    w.push_event(&Event::new("stim", EventValue::f64(1.0), 0))
        .unwrap();
    let (_, events) = waiter.join().unwrap();
    assert_eq!(events, 1);
    assert_eq!(s.read_events(0, 1).unwrap()[0].kind.as_text(), Some("stim"));
}

/// A poll (a wait with a zero timeout) never sleeps, so it must never announce itself as a
/// sleeper: a reader polling in a loop would keep the waiter count non-zero and make the
/// writer pay a futex wake system call for commits nobody sleeps through. Counts the
/// moments another thread sees an announced sleeper while one reader only polls.
#[test]
fn a_polling_reader_never_announces_itself_as_a_sleeper() {
    use crate::sync::Ordering;
    let s = heap(64);
    let r = s.reader(ReaderMode::Latest).unwrap();
    let polls = if cfg!(miri) { 200 } else { 200_000 };
    let poller = std::thread::spawn(move || {
        for _ in 0..polls {
            match r.wait_available(1, Some(Duration::ZERO)) {
                Err(WaitError::Timeout { written: 0, .. }) => {}
                other => panic!("a poll of an empty stream gave {other:?}"),
            }
        }
    });
    let waiters = &s.map.control().samples.data_wake.waiters;
    let (mut looks, mut announced) = (0u64, 0u64);
    while !poller.is_finished() {
        looks += 1;
        // SYNC: Relaxed: a count of what this thread happens to see, nothing is published.
        if waiters.load(Ordering::Relaxed) != 0 {
            announced += 1;
        }
        if cfg!(miri) {
            // miri's scheduler without preemption runs this loop forever otherwise
            std::thread::yield_now();
        }
    }
    poller.join().unwrap();
    assert!(looks > 0);
    assert_eq!(
        announced, 0,
        "{announced} of {looks} looks saw a polling reader announced as a sleeper"
    );
}

/// The newest small sample reaches a reader from the publish line (one cache-line transfer
/// per hand-off), with its stamp; older samples and a reader behind come from the ring. The
/// ring slot is scribbled on here only to show which copy a read took.
#[test]
fn the_newest_small_sample_is_read_from_the_publish_line_and_older_ones_from_the_ring() {
    let s = heap(8);
    let mut w = s.writer().unwrap();
    let mut r = s.reader(ReaderMode::Lossless).unwrap();
    w.write_bytes(&samples(0, 2), Some(11)).unwrap();
    w.write_bytes(&samples(2, 1), Some(22)).unwrap();
    // scribble on the newest sample's ring slot (as no writer would)
    s.map.store_samples(2, &[0xEE; SB]);
    let (mut out, mut st) = (vec![0u8; SB], [0u64; 1]);
    s.read_into(2, 3, &mut out, Some(&mut st)).unwrap();
    check(2, &out);
    assert_eq!(st[0], 22);
    // an older sample comes from its slot
    s.read_into(1, 2, &mut out, Some(&mut st)).unwrap();
    check(1, &out);
    assert_eq!(st[0], 11);
    // a reader behind pulls from the ring, and at the newest from the publish line
    let mut two = vec![0u8; 2 * SB];
    assert_eq!(r.pull_into(&mut two, None, 2).unwrap().n, 2);
    check(0, &two);
    let p = r.pull_into(&mut out, Some(&mut st), 1).unwrap();
    assert_eq!((p.first, p.n, st[0]), (2, 1, 22));
    check(2, &out);
    // a stream of larger samples leaves the publish line's copy empty
    let big = Stream::in_heap(&StreamConfig::new(DType::U64, 5, 1000.0, 8));
    let mut bw = big.writer().unwrap();
    bw.write_bytes(&[1u8; 40], None).unwrap();
    // SYNC: Relaxed: nothing else runs.
    let held = big
        .map
        .control()
        .samples
        .publish
        .inline_end
        .load(crate::sync::Ordering::Relaxed);
    assert_eq!(
        held, 0,
        "40-byte samples are not carried in the publish line"
    );
}

/// Wait until this process is registered for `membarrier` (the first writer claim starts it
/// on a thread of its own; until then writers fence).
fn registered_for_membarrier() {
    assert!(
        crate::prepare_light_publication(Duration::from_secs(10)),
        "this kernel did not register the process for membarrier, so the light path cannot be tested here"
    );
}

/// What a stress run of [`sleeps_through_commits`] leaves out on purpose.
#[derive(Clone, Copy, PartialEq)]
enum Broken {
    /// Nothing: the shipped protocol.
    Nothing,
    /// The writer never looks at the announced sleepers.
    WriterIgnoresSleepers,
}

/// Sleeps through a commit (see `tests_knobs::SLEPT_THROUGH_A_COMMIT`) over `rounds`
/// hand-offs: the reader announces itself and sleeps at once (no spin); the writer commits
/// the sample it waits for after a delay that walks over the reader's way into the sleep.
/// Stops early once `stop_after` sleeps went through a commit (each costs a sleep slice).
fn sleeps_through_commits(
    broken: Broken,
    fence_hold_ns: Option<u64>,
    rounds: u64,
    stop_after: u64,
) -> (u64, u64) {
    use crate::sync::{tests_knobs, AtomicU64, Ordering};
    use std::sync::Arc;
    // 4 KiB samples the reader reads: the writer's store of `written` then waits behind
    // the stores into 64 lines the reader holds, which widens the window a lost wake-up
    // needs (its `waiters` load done while that store is not yet visible)
    const WIDE: usize = 512;
    let s = Stream::<HeapBacking>::in_heap(&StreamConfig::new(DType::U64, WIDE, 0.0, 64));
    let sample = vec![0x5Au8; WIDE * 8];
    let mut got = vec![0u8; WIDE * 8];
    registered_for_membarrier();
    let mut w = s.writer().unwrap();
    if let Some(ns) = fence_hold_ns {
        w.fence_hold_ns = ns;
    }
    assert_eq!(
        // SYNC: Relaxed: read after the claim, on this thread.
        s.map
            .control()
            .owner
            .publish_barrier
            .load(Ordering::Relaxed),
        crate::layout::publish_barrier::LIGHT,
        "this kernel refused membarrier registration, so the light path cannot be tested here"
    );
    let mut r = s.reader(ReaderMode::Latest).unwrap();
    r.set_spin(Duration::ZERO);
    let asked = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let (asked2, done2) = (asked.clone(), done.clone());
    let writer = std::thread::spawn(move || {
        tests_knobs::WRITER_IGNORES_SLEEPERS.set(broken == Broken::WriterIgnoresSleepers);
        let mut delay = 0u32;
        loop {
            // SYNC: Acquire/Relaxed: a hand-shake of this test only.
            let want = asked2.load(Ordering::Acquire);
            if done2.load(Ordering::Relaxed) != 0 {
                break;
            }
            if want == 0 || w.written() >= want {
                std::hint::spin_loop();
                continue;
            }
            // walk the commit over the reader's announce, check and FUTEX_WAIT
            delay = (delay + 37) % 4000;
            for _ in 0..delay {
                std::hint::spin_loop();
            }
            w.write_bytes(&sample, None).unwrap();
        }
    });
    let before = tests_knobs::SLEPT_THROUGH_A_COMMIT.get();
    let mut done_rounds = 0;
    for i in 1..=rounds {
        // SYNC: Release: the hand-shake above.
        asked.store(i, Ordering::Release);
        r.wait_available(1, Some(Duration::from_secs(10))).unwrap();
        r.read_into(i - 1, i, &mut got, None).unwrap();
        r.seek(i).unwrap();
        done_rounds = i;
        if tests_knobs::SLEPT_THROUGH_A_COMMIT.get() - before >= stop_after {
            break;
        }
    }
    // SYNC: Relaxed: the hand-shake above.
    done.store(1, Ordering::Relaxed);
    writer.join().unwrap();
    (
        tests_knobs::SLEPT_THROUGH_A_COMMIT.get() - before,
        done_rounds,
    )
}

/// A writer publishing with the light barrier (no fence per commit) never leaves a
/// sleeping reader asleep through a commit: the reader's membarrier before its last check
/// makes the pair a Dekker handshake, and the writer's switches between the light barrier
/// and the fence (made at every commit here: no hold) keep it whole. The count is shown to
/// see lost wake-ups: with a writer that ignores sleepers it is not 0.
#[test]
#[cfg_attr(miri, ignore = "miri cannot issue membarrier")]
fn a_sleeping_reader_never_sleeps_through_a_light_writers_commit() {
    let (slept, rounds) = sleeps_through_commits(Broken::WriterIgnoresSleepers, None, 1000, 3);
    assert!(
        slept > 0,
        "a writer that ignores sleepers went unnoticed for {rounds} hand-offs"
    );
    for hold in [Some(0), None] {
        let (slept, rounds) = sleeps_through_commits(Broken::Nothing, hold, 10_000, 1);
        assert_eq!(
            slept, 0,
            "{slept} sleeps went through a commit in {rounds} hand-offs (fence hold {hold:?} ns)"
        );
    }
}

/// The writer fences while readers sleep for samples (they then skip the `membarrier` a
/// light writer needs of them) and turns light again once none was found sleeping for the
/// hold; the owner line's word says which, for the sleepers to read.
#[test]
#[cfg_attr(miri, ignore = "miri cannot issue membarrier")]
fn the_writer_fences_while_readers_sleep_and_is_light_again_after_the_hold() {
    use crate::layout::publish_barrier::{FENCE, LIGHT};
    use crate::sync::Ordering;
    let s = heap(64);
    registered_for_membarrier();
    let mut w = s.writer().unwrap();
    // a hold that cannot end while the test looks: joining the sleeper may take longer than
    // the real 1 ms on a loaded machine; the end of the hold is set by hand below
    w.fence_hold_ns = u64::MAX;
    // SYNC: Relaxed: read on the writer's own thread, after its stores.
    let word = |s: &Stream<HeapBacking>| {
        s.map
            .control()
            .owner
            .publish_barrier
            .load(Ordering::Relaxed)
    };
    assert_eq!(word(&s), LIGHT);
    w.write_bytes(&samples(0, 1), None).unwrap();
    assert_eq!(word(&s), LIGHT, "no reader sleeps: still light");
    let mut r = s.reader(ReaderMode::Latest).unwrap();
    r.set_spin(Duration::ZERO);
    let sleeper = std::thread::spawn(move || r.wait(2, Some(Duration::from_secs(10))));
    let waiters = &s.map.control().samples.data_wake.waiters;
    // SYNC: Relaxed: waits for the reader's announcement, nothing else is read.
    while waiters.load(Ordering::Relaxed) == 0 {
        std::thread::yield_now();
    }
    w.write_bytes(&samples(1, 1), None).unwrap();
    assert_eq!(sleeper.join().unwrap(), Ok(2));
    assert_eq!(
        word(&s),
        FENCE,
        "a commit that woke a sleeper turns to the fence"
    );
    w.write_bytes(&samples(2, 1), None).unwrap();
    assert_eq!(word(&s), FENCE, "within the hold it stays");
    w.fence_hold_ns = 0;
    w.fence_until_ns = 0;
    w.write_bytes(&samples(3, 1), None).unwrap();
    assert_eq!(
        word(&s),
        LIGHT,
        "after the hold, with nobody asleep, light again"
    );
}
