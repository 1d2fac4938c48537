//! loom models of the shipped writer, readers and claims (run with `scripts/loom.sh`).
//!
//! Every model drives the product's own `Writer`, `Reader` and `Stream` over
//! [`HeapBacking`] (the same code that runs over the mapped file, with each slot an atomic
//! word loom can check). Each model thread plays a process (`sys::model::enter`); the futex
//! is loom's model of it (`FutexWord`), without timeouts, so a lost wake-up leaves a thread
//! asleep forever and loom reports a deadlock. Samples are one u64 holding their own index,
//! so a torn, stale or uncommitted copy shows as a wrong value (never-written slots hold 0,
//! and no model writes sample 0 where that could hide it: see [`value`]).
//!
//! Keep them small: capacity 2, a handful of samples, `LOOM_MAX_PREEMPTIONS=2`.

use std::time::Duration;

use loom::thread;

use crate::backing::{Backing, HeapBacking};
use crate::sys::{model, ProcessId};
use crate::{
    DType, Event, EventValue, ReadError, ReaderMode, Stream, StreamConfig, WaitError, Writer,
};

/// The value stored for sample `i` (never 0, the value of a never-written slot).
fn value(i: u64) -> u64 {
    i + 100
}

fn samples(first: u64, n: u64) -> Vec<u8> {
    (first..first + n)
        .flat_map(|i| value(i).to_ne_bytes())
        .collect()
}

fn assert_exact(first: u64, out: &[u8]) {
    for (k, w) in out.chunks_exact(8).enumerate() {
        let got = u64::from_ne_bytes(w.try_into().expect("8 bytes"));
        let want = value(first + k as u64);
        assert_eq!(
            got,
            want,
            "accepted a bad copy of sample {} (0 = uncommitted, another value = stale or scribbled)",
            first + k as u64
        );
    }
}

/// A heap stream of `capacity` one-channel u64 samples, two events.
fn heap(capacity: u64) -> Stream<HeapBacking> {
    let mut cfg = StreamConfig::new(DType::U64, 1, 1000.0, capacity);
    cfg.event_capacity = 2;
    Stream::in_heap(&cfg)
}

/// This model thread is live process `pid`.
fn as_process(pid: u32) {
    model::enter(ProcessId::model(pid, true));
}

fn writer(s: &Stream<HeapBacking>) -> Writer<HeapBacking> {
    let mut w = s.writer().expect("claim the writer");
    w.set_spin(Duration::ZERO);
    w
}

/// Write `n` samples, one commit each.
fn write(w: &mut Writer<HeapBacking>, n: u64) {
    for _ in 0..n {
        let i = w.written();
        w.write_bytes(&samples(i, 1), None).expect("write");
    }
}

/// (a) A reader copying the newest window while the writer commits and laps never accepts
/// an uncommitted, torn or stale sample.
#[test]
fn loom_reader_never_sees_uncommitted_or_torn_samples() {
    loom::model(|| {
        as_process(1);
        let s = heap(2);
        let mut w = writer(&s);
        let t = thread::spawn(move || {
            as_process(1);
            write(&mut w, 3);
        });
        for _ in 0..2 {
            let end = s.written();
            let first = end.saturating_sub(2);
            let mut out = vec![0u8; (end - first) as usize * 8];
            match s.read_into(first, end, &mut out, None) {
                Ok(()) => assert_exact(first, &out),
                Err(ReadError::Overrun { oldest, .. } | ReadError::TooOld { oldest, .. }) => {
                    assert!(oldest > first, "a lap must move `oldest` past {first}");
                }
                Err(e) => panic!("unexpected {e}"),
            }
        }
        t.join().expect("writer");
    });
}

/// (a2) The newest sample's copy in the publish line (`PublishLine::inline_*`): a reader
/// pulling one sample at a time, and one reading the newest sample with its stamp, while the
/// writer commits and laps, never accept a torn or stale copy or a stamp of another sample.
#[test]
fn loom_newest_sample_in_the_publish_line_is_never_torn() {
    fn stamp_of(i: u64) -> u64 {
        7 * i + 3
    }
    loom::model(|| {
        as_process(1);
        let s = heap(2);
        let mut r = s.reader(ReaderMode::Latest).expect("reader");
        let mut w = writer(&s);
        let t = thread::spawn(move || {
            as_process(1);
            for i in 0..3 {
                w.write_bytes(&samples(i, 1), Some(stamp_of(i)))
                    .expect("write");
            }
        });
        let (mut out, mut st) = ([0u8; 8], [0u64; 1]);
        for _ in 0..2 {
            match r.pull_into(&mut out, Some(&mut st), 1) {
                Ok(p) if p.n == 1 => {
                    assert_exact(p.first, &out);
                    assert_eq!(st[0], stamp_of(p.first), "the stamp of another sample");
                }
                Ok(_) | Err(ReadError::Overrun { .. }) => {}
                Err(e) => panic!("unexpected {e}"),
            }
        }
        let end = s.written();
        if end > 0 {
            match s.read_into(end - 1, end, &mut out, Some(&mut st)) {
                Ok(()) => {
                    assert_exact(end - 1, &out);
                    assert_eq!(st[0], stamp_of(end - 1), "the stamp of another sample");
                }
                Err(ReadError::Overrun { .. } | ReadError::TooOld { .. }) => {}
                Err(e) => panic!("unexpected {e}"),
            }
        }
        t.join().expect("writer");
    });
}

/// (b) A latest reader lapped mid-pull is told (Overrun with the exact loss) and never
/// accepts torn data; it goes on from the oldest kept sample.
#[test]
fn loom_lapped_latest_reader_gets_an_overrun_never_torn_data() {
    loom::model(|| {
        as_process(1);
        let s = heap(2);
        let mut r = s.reader(ReaderMode::Latest).expect("reader");
        let mut w = writer(&s);
        write(&mut w, 2);
        let t = thread::spawn(move || {
            as_process(1);
            write(&mut w, 2); // overwrites the slots of samples 0 and 1
        });
        let mut out = [0u8; 16];
        match r.pull_into(&mut out, None, 2) {
            Ok(p) => assert_exact(p.first, &out[..p.n * 8]),
            Err(ReadError::Overrun { lost, oldest }) => {
                assert_eq!(oldest, lost, "lost exactly the samples before `oldest`");
                assert_eq!(r.cursor(), oldest);
            }
            Err(e) => panic!("unexpected {e}"),
        }
        t.join().expect("writer");
    });
}

/// (c) Cancelled and partly committed reservations: the writer stores into both slots of a
/// reservation, then cancels it or commits only part; a later, shorter reservation must not
/// make the scribbled slots look like the previous lap's samples again.
#[test]
fn loom_cancelled_or_partly_committed_reservation_never_validates_stale_rows() {
    for partial in [false, true] {
        loom::model(move || {
            as_process(1);
            let s = heap(2);
            let mut w = writer(&s);
            write(&mut w, 2);
            let t = thread::spawn(move || {
                as_process(1);
                let mut g = w.reserve(2).expect("reserve");
                g.store(0, &[0xEE; 16]);
                if partial {
                    g.store(0, &samples(2, 1));
                    g.commit_n(1).expect("commit part");
                } else {
                    g.cancel();
                }
                write(&mut w, 1);
            });
            let end = s.written();
            let first = end.saturating_sub(2);
            let mut out = vec![0u8; (end - first) as usize * 8];
            if s.read_into(first, end, &mut out, None).is_ok() {
                assert_exact(first, &out);
            }
            t.join().expect("writer");
            let end = s.written();
            for first in end.saturating_sub(2)..end {
                let mut out = vec![0u8; (end - first) as usize * 8];
                if s.read_into(first, end, &mut out, None).is_ok() {
                    assert_exact(first, &out);
                }
            }
        });
    }
}

/// (d) A reader sleeping for data is always woken by the commit (Dekker between its
/// announcement and `publish`): a lost wake-up would be a deadlock.
#[test]
fn loom_waiting_reader_is_woken_by_a_commit() {
    loom::model(|| {
        as_process(1);
        let s = heap(2);
        let mut r = s.reader(ReaderMode::Latest).expect("reader");
        r.set_spin(Duration::ZERO);
        let mut w = writer(&s);
        let t = thread::spawn(move || {
            as_process(1);
            write(&mut w, 1);
            w // keep the writer open: only the commit may end the wait
        });
        assert_eq!(r.wait(1, None), Ok(1));
        drop(t.join().expect("writer"));
    });
}

/// (d') A writer that claims the stream while a reader is on its way to sleep still wakes
/// it with its first commit: the reader may have read the publish-barrier word from before
/// the claim (and so skipped its membarrier), and the claim's store of the word, its fence
/// and the reader's fence after announcing make the first commit see the sleeper.
#[test]
fn loom_writer_claiming_while_a_reader_falls_asleep_wakes_it() {
    loom::model(|| {
        as_process(1);
        let s = heap(2);
        let mut r = s.reader(ReaderMode::Latest).expect("reader");
        r.set_spin(Duration::ZERO);
        let s2 = s.clone();
        let t = thread::spawn(move || {
            as_process(1);
            let mut w = writer(&s2);
            write(&mut w, 1);
            w // keep the writer open: only the commit may end the wait
        });
        assert_eq!(r.wait(1, None), Ok(1));
        drop(t.join().expect("writer"));
    });
}

/// (d'') The asymmetric pair as it ships: the writer's light barrier orders nothing (a
/// Release store of `written`, then a Relaxed load of `waiters`), and the sleeper's
/// `membarrier` is modelled as the interrupt it is (`sync::ipi`): the writer's thread takes
/// it before or after its commit, between that store and that load, or idle afterwards,
/// and runs a full barrier then. The sleeper is always woken. Without the interrupt the
/// same model loses the wake-up
/// (`loom_light_writer_without_the_sleepers_membarrier_loses_the_wake_up`).
#[test]
fn loom_light_writer_wakes_a_sleeper_whose_membarrier_interrupts_it() {
    light_writer_and_a_sleeper(true);
}

/// (d''') The model above with the sleeper's `membarrier` left out: nothing orders the
/// light writer's `waiters` load after its `written` store, and loom finds the run where
/// the writer misses the announcement while the sleeper's re-check misses the sample (a
/// lost wake-up, a deadlock without timeouts). This is what the interrupt is for.
#[should_panic(expected = "deadlock")]
#[test]
fn loom_light_writer_without_the_sleepers_membarrier_loses_the_wake_up() {
    light_writer_and_a_sleeper(false);
}

/// A light writer commits one sample while a reader falls asleep for it; `membarrier`:
/// whether the sleeper's interrupt is delivered.
fn light_writer_and_a_sleeper(membarrier: bool) {
    use crate::layout::publish_barrier::LIGHT;
    use crate::sync::{ipi::Ipi, AtomicU64, Ordering};
    loom::model(move || {
        as_process(1);
        let s = heap(2);
        let mut r = s.reader(ReaderMode::Latest).expect("reader");
        r.set_spin(Duration::ZERO);
        let mut w = writer(&s);
        // SYNC: Relaxed: read after the claim, on this thread.
        let word = s
            .map
            .control()
            .owner
            .publish_barrier
            .load(Ordering::Relaxed);
        assert_eq!(
            word, LIGHT,
            "the model's writer publishes with the light barrier"
        );
        let ipi = Ipi::new(membarrier);
        let done = std::sync::Arc::new(AtomicU64::new(0));
        let t = {
            let (ipi, done) = (ipi.clone(), done.clone());
            thread::spawn(move || {
                as_process(1);
                ipi.install();
                ipi.serve();
                write(&mut w, 1);
                ipi.serve();
                // an idle CPU takes interrupts too (only a delivered line is ever asked)
                // SYNC: Acquire: the model's own hand-shake, it orders nothing of the stream.
                while ipi.delivered && done.load(Ordering::Acquire) == 0 {
                    ipi.serve();
                    thread::yield_now();
                }
                w // keep the writer open: only the commit may end the wait
            })
        };
        ipi.install();
        assert_eq!(r.wait(1, None), Ok(1));
        // SYNC: Release: the model's hand-shake above.
        done.store(1, Ordering::Release);
        drop(t.join().expect("writer"));
    });
}

/// (e) A clean close wakes a reader waiting for samples that will never come, and the wait
/// ends with `WriterClosed` (Dekker between the announcement and the close).
#[test]
fn loom_closing_writer_wakes_a_waiting_reader_with_writer_closed() {
    loom::model(|| {
        as_process(1);
        let s = heap(2);
        let mut w = writer(&s);
        write(&mut w, 1);
        let mut r = s.reader(ReaderMode::Latest).expect("reader");
        r.set_spin(Duration::ZERO);
        let t = thread::spawn(move || {
            as_process(1);
            drop(w);
        });
        assert_eq!(r.wait(2, None), Err(WaitError::WriterClosed { written: 1 }));
        t.join().expect("writer");
    });
}

/// (f) An event wakes a reader sleeping on the samples' line for samples or events.
#[test]
fn loom_event_wakes_a_reader_waiting_for_events() {
    loom::model(|| {
        as_process(1);
        let s = heap(2);
        let mut w = writer(&s);
        let t = thread::spawn(move || {
            as_process(1);
            w.push_event(&Event::new("e", EventValue::f64(1.0), 0))
                .expect("event");
            w
        });
        let (_, events) = s.wait_for(u64::MAX, 1, Duration::from_secs(86_400), &|| true);
        assert_eq!(events, 1);
        drop(t.join().expect("writer"));
    });
}

/// (g) A lossless reader gets every sample in order: the writer never overwrites a sample
/// it has not released, and the writer waiting for room is always woken by the release
/// (a lost wake-up would deadlock).
#[test]
fn loom_lossless_writer_never_overwrites_unread_samples_and_is_woken() {
    loom::model(|| {
        as_process(1);
        let s = heap(2);
        let mut r = s.reader(ReaderMode::Lossless).expect("reader");
        r.set_spin(Duration::ZERO);
        let mut w = writer(&s);
        let t = thread::spawn(move || {
            as_process(1);
            write(&mut w, 3); // the third needs the reader to release sample 0
        });
        let mut got = 0;
        let mut out = [0u8; 16];
        while got < 3 {
            r.wait(got + 1, None).expect("wait");
            let p = r
                .pull_into(&mut out, None, 2)
                .expect("lossless: never lapped");
            assert_eq!(p.first, got);
            assert_exact(p.first, &out[..p.n * 8]);
            got += p.n as u64;
        }
        t.join().expect("writer");
    });
}

/// (g2) The lossless writer waits for the slowest of two readers: one reader releasing the
/// ring is not room while the other still holds the oldest sample, and the slower one's
/// release wakes the writer again (a lost wake-up would deadlock).
#[test]
fn loom_lossless_writer_waits_for_the_slowest_of_two_readers() {
    loom::model(|| {
        as_process(1);
        let s = heap(2);
        let mut fast = s.reader(ReaderMode::Lossless).expect("fast reader");
        let mut slow = s.reader(ReaderMode::Lossless).expect("slow reader");
        fast.set_spin(Duration::ZERO);
        slow.set_spin(Duration::ZERO);
        let mut w = writer(&s);
        let t = thread::spawn(move || {
            as_process(1);
            write(&mut w, 3); // the third needs both readers to release sample 0
        });
        let mut out = [0u8; 16];
        // the fast reader takes both samples the ring holds and releases them ...
        fast.wait(2, None).expect("wait");
        let p = fast.pull_into(&mut out, None, 2).expect("never lapped");
        assert_eq!((p.first, p.n), (0, 2));
        assert_exact(0, &out);
        // ... which is not room while the slow one still holds sample 0
        assert_eq!(
            s.written(),
            2,
            "sample 2 overwrote the slow reader's sample 0"
        );
        let p = slow.pull_into(&mut out, None, 2).expect("never lapped");
        assert_eq!((p.first, p.n), (0, 2));
        assert_exact(0, &out);
        for r in [&mut fast, &mut slow] {
            r.wait(3, None)
                .expect("the slow reader's release wakes the writer");
            let p = r.pull_into(&mut out, None, 2).expect("never lapped");
            assert_eq!((p.first, p.n), (2, 1));
            assert_exact(2, &out[..8]);
        }
        t.join().expect("writer");
    });
}

/// (h) A lossless reader that registers while the writer is committing is never lapped
/// from its first sample on (registration vs the writer's room check).
#[test]
fn loom_lossless_registration_while_the_writer_runs_is_never_lapped() {
    loom::model(|| {
        as_process(1);
        let s = heap(2);
        let mut w = writer(&s);
        let t = thread::spawn(move || {
            as_process(1);
            write(&mut w, 3);
            w
        });
        let mut r = s.reader(ReaderMode::Lossless).expect("reader");
        r.set_spin(Duration::ZERO);
        let start = r.cursor();
        let mut out = [0u8; 16];
        // whatever the writer commits from the registration on arrives intact, in order
        let mut next = start;
        while next < 3 {
            r.wait(next + 1, None).expect("wait");
            let p = r.pull_into(&mut out, None, 2).expect("never lapped");
            assert_eq!(p.first, next);
            assert_exact(p.first, &out[..p.n * 8]);
            next += p.n as u64;
        }
        drop(t.join().expect("writer"));
    });
}

/// (i) Two processes claiming the writer at once, after a clean close and after the holder
/// died: exactly one wins, the other is told who holds it.
#[test]
fn loom_racing_writer_claims_make_exactly_one_writer() {
    for dead_holder in [false, true] {
        loom::model(move || {
            let s = heap(2);
            if dead_holder {
                model::enter(ProcessId::model(9, false));
                std::mem::forget(s.writer().expect("the holder that dies"));
            } else {
                as_process(9);
                drop(s.writer().expect("the holder that closes"));
            }
            let s2 = s.clone();
            let t = thread::spawn(move || {
                as_process(2);
                s2.writer() // kept open (returned) until both claims are judged
            });
            as_process(1);
            let mine = s.writer();
            let theirs = t.join().expect("claimer");
            let (won_here, won_there) = (mine.is_ok(), theirs.is_ok());
            assert!(
                won_here ^ won_there,
                "exactly one writer (here {won_here}, there {won_there})"
            );
        });
    }
}

/// (j) Reclaiming a dead reader's slot never frees a slot a live process took meanwhile,
/// and two registrations never share a slot.
#[test]
fn loom_reader_slots_are_never_shared_or_freed_from_under_a_live_reader() {
    loom::model(|| {
        let s = heap(2);
        model::enter(ProcessId::model(9, false));
        std::mem::forget(s.reader(ReaderMode::Lossless).expect("reader that dies"));
        let s2 = s.clone();
        let t = thread::spawn(move || {
            as_process(2);
            let r = s2.reader(ReaderMode::Latest);
            s2.reclaim_dead_readers();
            r.map(|r| r.cursor()).is_ok()
        });
        as_process(1);
        let r = s
            .reader(ReaderMode::Latest)
            .expect("a slot is free or reclaimable");
        s.reclaim_dead_readers();
        let other = t.join().expect("registrar");
        let live = s.stats().readers.len();
        // both live readers hold distinct slots; the dead one's slot was reclaimed at most once
        assert!(other, "the second reader got a slot too");
        assert_eq!(live, 1, "only the reader still open here is registered");
        drop(r);
        assert_eq!(s.stats().readers.len(), 0);
    });
}

/// (k) The doorbell the tick runtime's board is built from: a waiter sleeping for a
/// condition is always woken by the publisher's ring (and by `ring_all`), never lost.
#[test]
fn loom_doorbell_ring_is_never_lost() {
    for all in [false, true] {
        loom::model(move || {
            let bell = std::sync::Arc::new(crate::Doorbell::default());
            let flag = std::sync::Arc::new(crate::sync::AtomicU64::new(0));
            let (b2, f2) = (bell.clone(), flag.clone());
            let t = thread::spawn(move || {
                // SYNC: Release: the waiter's Acquire in its condition sees the tick.
                f2.store(1, crate::sync::Ordering::Release);
                if all {
                    b2.ring_all();
                } else {
                    b2.ring();
                }
            });
            // SYNC: Acquire pairs with the publisher's Release.
            let woke = bell.wait(Duration::ZERO, None, || {
                flag.load(crate::sync::Ordering::Acquire) == 1
            });
            assert!(woke);
            t.join().expect("publisher");
        });
    }
}
