//! The end of a stream and writes that do not fit: a reader waiting without a timeout ends
//! with `WriterClosed` once it has everything a cleanly closed writer wrote, and a write
//! that went in pieces says how much of it is in the stream when a piece fails.

mod common;

use std::time::Duration;

use common::{create, payload_bytes, pull_checked};
use rtloop_stream::{ReaderMode, WaitError, WriteError};
use rtloop_testkit::{unique_name, StreamGuard};

#[test]
fn a_reader_waiting_forever_ends_with_writer_closed_after_the_last_sample() {
    for mode in [ReaderMode::Latest, ReaderMode::Lossless] {
        let name = unique_name("close");
        let stream = create(&name, 256);
        let _g = StreamGuard::new(&name);
        let mut r = stream.reader(mode).unwrap();
        let writer = {
            let stream = stream.clone();
            std::thread::spawn(move || {
                let mut w = stream.writer().unwrap();
                for k in 0..50 {
                    w.write_bytes(&payload_bytes(k * 2, 2), None).unwrap();
                }
                // dropped here: a clean close
            })
        };
        let mut got = 0u64;
        let end = loop {
            match r.wait_available(1, None) {
                Ok(_) => {
                    let (first, n) = pull_checked(&mut r, 16).unwrap();
                    assert_eq!(first, got);
                    got += n as u64;
                }
                Err(e) => break e,
            }
        };
        writer.join().unwrap();
        assert_eq!(end, WaitError::WriterClosed { written: 100 }, "{mode:?}");
        assert_eq!(got, 100, "{mode:?}: every sample before the end");
        assert!(end.to_string().contains("closed"), "{end}");
    }
}

#[test]
fn a_waiting_reader_is_woken_by_the_close_itself() {
    let name = unique_name("close-wake");
    let stream = create(&name, 64);
    let _g = StreamGuard::new(&name);
    let mut w = stream.writer().unwrap();
    w.write_bytes(&payload_bytes(0, 3), None).unwrap();
    let r = stream.reader(ReaderMode::Latest).unwrap();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions; it returns this thread's id.
        tid_tx.send(unsafe { libc::gettid() }).unwrap();
        r.wait_available(1, None)
    });
    // the waiter blocks (nothing new comes); the close alone must end its wait. Close once
    // it sleeps on the stream's futex (not after a sleep that a loaded machine may outlast,
    // when the close would come before the wait and never wake it)
    let wchan = format!("/proc/self/task/{}/wchan", tid_rx.recv().unwrap());
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&wchan).is_ok_and(|w| w.contains("futex")) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the reader never slept"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(w);
    assert_eq!(
        waiter.join().unwrap(),
        Err(WaitError::WriterClosed { written: 3 })
    );
}

#[test]
fn a_write_longer_than_the_ring_that_fails_midway_says_how_much_was_committed() {
    let name = unique_name("incomplete");
    let stream = create(&name, 64);
    let _g = StreamGuard::new(&name);
    let cap = stream.info().capacity;
    // a lossless reader that never reads: the second piece cannot get room
    let _stuck = stream.reader(ReaderMode::Lossless).unwrap();
    let mut w = stream.writer().unwrap();
    w.set_lossless_timeout(Duration::from_millis(50));
    let e = w
        .write_bytes(&payload_bytes(0, cap + 36), None)
        .unwrap_err();
    match &e {
        WriteError::Incomplete {
            committed,
            requested,
            source,
        } => {
            assert_eq!((*committed, *requested), (cap, cap + 36));
            assert!(matches!(**source, WriteError::Timeout { .. }), "{source}");
        }
        other => panic!("expected Incomplete, got {other:?}"),
    }
    assert!(
        e.to_string()
            .contains(&format!("wrote {cap} of {}", cap + 36)),
        "{e}"
    );
    assert_eq!(w.written(), cap, "what it says is what is in the stream");
    // nothing committed yet: the plain error, no Incomplete wrapper
    let e = w.write_bytes(&payload_bytes(cap, 1), None).unwrap_err();
    assert!(matches!(e, WriteError::Timeout { .. }), "{e:?}");
}
