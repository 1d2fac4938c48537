//! The shipped writer and readers on real threads over [`HeapBacking`] (the backing the loom
//! models use too): a latest reader lapped by a fast writer never accepts a wrong sample, a
//! lossless reader gets every sample in order, a clean close ends a waiting reader, and an
//! event wakes a reader waiting for events.

use std::time::Duration;

use crate::backing::HeapBacking;
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
