//! The ring on a real stream: windows across the wrap, overruns with the exact loss, events
//! by index across the event ring's wrap, statistics, listing and file mode.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{check, create, payload_bytes, pull_checked, CH};
use proptest::prelude::*;
use rtloop_stream::{
    stream_path, DType, Event, EventValue, ReadError, ReaderMode, Stream, StreamConfig,
};
use rtloop_testkit::{unique_name, StreamGuard};

#[test]
fn lapped_latest_reader_gets_overrun_with_exact_loss_and_continues_at_the_oldest() {
    let name = unique_name("overrun");
    let stream = create(&name, 1);
    let _g = StreamGuard::new(&name);
    let cap = stream.info().capacity;
    let mut sut = stream.reader(ReaderMode::Latest).unwrap();
    let mut w = stream.writer().unwrap();
    w.write_bytes(&payload_bytes(0, cap + 37), None).unwrap();

    assert_eq!(
        pull_checked(&mut sut, 16),
        Err(ReadError::Overrun {
            lost: 37,
            oldest: 37
        })
    );
    assert_eq!(sut.cursor(), 37);
    // it goes on at the oldest kept sample and gets every one of them intact
    let mut next = 37;
    while next < cap + 37 {
        let (first, n) = pull_checked(&mut sut, 50).unwrap();
        assert_eq!(first, next);
        next += n as u64;
    }
    let stats = stream.stats();
    assert_eq!((stats.overruns, stats.lost_samples), (1, 37));
    assert_eq!((stats.readers[0].lost, stats.readers[0].overruns), (37, 1));
}

#[test]
fn events_are_read_by_index_across_the_event_ring_wrap() {
    let name = unique_name("events");
    let mut cfg = StreamConfig::new(DType::U64, CH, 100.0, 8);
    cfg.event_capacity = 8;
    let stream = Stream::create(&name, &cfg).unwrap();
    let _g = StreamGuard::new(&name);
    let mut sut = stream.reader(ReaderMode::Latest).unwrap();
    let mut w = stream.writer().unwrap();
    let event = |i: u64| Event {
        offset: -(i as i64),
        duration: i * 2,
        ..Event::new(
            format!("ev{i}").as_str(),
            EventValue::f64(i as f64 / 2.0),
            100 + i,
        )
    };
    for i in 0..20 {
        assert_eq!(w.push_event(&event(i)).unwrap(), i);
    }
    let kept = sut.read_events(12, 20).unwrap();
    for (k, ev) in kept.iter().enumerate() {
        let want = event(12 + k as u64);
        assert_eq!((&ev.kind, &ev.value), (&want.kind, &want.value));
        assert_eq!(
            (ev.sample, ev.offset, ev.duration),
            (want.sample, want.offset, want.duration)
        );
    }
    assert!(matches!(
        sut.read_events(5, 13),
        Err(ReadError::TooOld { oldest: 12, .. })
    ));
    assert!(matches!(
        sut.read_events(19, 21),
        Err(ReadError::NotYetWritten { written: 20, .. })
    ));
    // pulling from registration time: 20 pushed into 8 slots loses the first 12
    assert_eq!(
        sut.pull_events(),
        Err(ReadError::Overrun {
            lost: 12,
            oldest: 12
        })
    );
    assert_eq!(sut.pull_events().unwrap().len(), 8);
    w.push_event(&event(20)).unwrap();
    assert_eq!(sut.pull_events().unwrap()[0].sample, 120);
}

#[test]
fn stats_report_occupancy_high_water_and_loss_as_they_happened() {
    let name = unique_name("stats");
    let stream = create(&name, 1);
    let _g = StreamGuard::new(&name);
    let cap = stream.info().capacity;
    assert!(cap >= 100);
    let mut slow = stream.reader(ReaderMode::Latest).unwrap();
    let mut w = stream.writer().unwrap();
    assert_eq!(stream.stats().occupancy, 0);

    w.write_bytes(&payload_bytes(0, 100), None).unwrap();
    let s = stream.stats();
    assert_eq!((s.written, s.occupancy, s.high_water), (100, 100, 0));
    assert!((s.percent_used - 100.0 * 100.0 / cap as f64).abs() < 1e-9);

    pull_checked(&mut slow, 60).unwrap();
    let s = stream.stats();
    assert_eq!((s.occupancy, s.high_water), (40, 100));
    assert_eq!(s.readers[0].lag, 40);

    // lap it by 25: occupancy is capped at the capacity, the loss is counted exactly
    w.write_bytes(&payload_bytes(100, cap - 40 + 25), None)
        .unwrap();
    assert_eq!(stream.stats().occupancy, cap);
    assert!(pull_checked(&mut slow, 1).is_err());
    let s = stream.stats();
    assert_eq!((s.overruns, s.lost_samples), (1, 25));
    assert_eq!(s.commits, 2);
    assert_eq!(s.readers[0].pid, std::process::id());
    assert!(s.readers[0].alive);
}

#[test]
fn created_streams_are_listed_and_owner_only() {
    let names = [unique_name("listed-a"), unique_name("listed-b")];
    let _g: Vec<_> = names
        .iter()
        .map(|n| {
            create(n, 8);
            StreamGuard::new(n)
        })
        .collect();
    let listed = Stream::list();
    for n in &names {
        assert!(listed.contains(n), "{n} not in {listed:?}");
        let mode = std::fs::metadata(stream_path(n))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{n}: mode {mode:o}");
    }
    Stream::remove(&names[0]).unwrap();
    assert!(!Stream::list().contains(&names[0]));
}

/// Bytes of sample `i` of a `u8` stream of `ch` channels (`ch >= 8`): the first 8 channels
/// hold `i` itself, so every sample differs from every other.
fn sample_u8(i: u64, ch: usize) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    v.extend((8..ch).map(|c| (i as u8).wrapping_mul(c as u8 | 1) ^ (c >> 3) as u8));
    v
}

fn samples_u8(first: u64, end: u64, ch: usize) -> Vec<u8> {
    (first..end).flat_map(|i| sample_u8(i, ch)).collect()
}

fn cases() -> u32 {
    let default = if cfg!(debug_assertions) { 32 } else { 128 };
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Write random chunks into a real stream of random shape; after every chunk, every
    /// kept window (zero-copy `window`, copying `read_into`) holds exactly what was written,
    /// windows outside the kept range are refused, and a pulling reader gets every sample or
    /// an overrun that names exactly what it lost.
    #[test]
    fn windows_across_the_wrap_on_a_real_stream_read_back_what_was_written(
        ch in prop::sample::select(vec![8usize, 520, 1024, 2048, 4096]),
        cap_req in 1u64..40,
        chunks in prop::collection::vec(0u64..90, 1..10),
        fracs in prop::collection::vec((0.0f64..=1.0, 0.0f64..=1.0), 10),
        pull_max in 1usize..64,
    ) {
        let name = unique_name("prop-wrap");
        let stream = Stream::create(&name, &StreamConfig::new(DType::U8, ch, 0.0, cap_req)).unwrap();
        let _g = StreamGuard::new(&name);
        let cap = stream.info().capacity;
        prop_assert!(cap >= cap_req);
        let mut w = stream.writer().unwrap();
        let mut puller = stream.reader(ReaderMode::Latest).unwrap();
        let viewer = stream.reader(ReaderMode::Latest).unwrap();
        let mut written = 0u64;
        for (k, &n) in chunks.iter().enumerate() {
            w.write(&samples_u8(written, written + n, ch)).unwrap();
            written += n;
            prop_assert_eq!(stream.written(), written);
            let oldest = written.saturating_sub(cap);

            // a random kept window, read both ways
            let (fa, fb) = fracs[k % fracs.len()];
            let span = written - oldest;
            let a = oldest + (span as f64 * fa.min(fb)) as u64;
            let b = oldest + (span as f64 * fa.max(fb)) as u64;
            let want = samples_u8(a, b, ch);
            let win = viewer.window(a, b).unwrap();
            // SAFETY: the writer is idle while the view is in use (one thread)
            prop_assert_eq!(unsafe { win.bytes() }, &want[..]);
            prop_assert!(win.check().is_ok());
            let mut buf = vec![0u8; want.len()];
            viewer.read_into(a, b, &mut buf, None).unwrap();
            prop_assert_eq!(&buf, &want);

            // just outside the kept range
            if oldest > 0 {
                let too_old = viewer.read_into(oldest - 1, b, &mut vec![0u8; (b - oldest + 1) as usize * ch], None);
                prop_assert_eq!(too_old, Err(ReadError::TooOld { first: oldest - 1, end: b, oldest, capacity: cap }));
            }
            let beyond = viewer.read_into(a, written + 1, &mut vec![0u8; (written + 1 - a) as usize * ch], None);
            prop_assert_eq!(beyond, Err(ReadError::NotYetWritten { first: a, end: written + 1, written }));

            // appended after what a reply already holds, into memory never zeroed; on an
            // error what was there stays as it was
            let mut reply = b"head".to_vec();
            stream.read_append(a, b, &mut reply).unwrap();
            prop_assert_eq!(&reply[..4], b"head");
            prop_assert_eq!(&reply[4..], &want[..]);
            let held = reply.clone();
            if oldest > 0 {
                prop_assert_eq!(
                    stream.read_append(oldest - 1, b, &mut reply),
                    Err(ReadError::TooOld { first: oldest - 1, end: b, oldest, capacity: cap })
                );
            }
            prop_assert_eq!(
                stream.read_append(a, written + 1, &mut reply),
                Err(ReadError::NotYetWritten { first: a, end: written + 1, written })
            );
            // a window of any size is refused before it sizes an allocation
            prop_assert_eq!(
                stream.read_append(oldest, u64::MAX, &mut reply),
                Err(ReadError::NotYetWritten { first: oldest, end: u64::MAX, written })
            );
            prop_assert_eq!(&reply, &held);

            // the pulling reader: every sample, or an exact overrun
            let mut out = vec![0u8; pull_max * ch];
            loop {
                let before = puller.cursor();
                match puller.pull_into(&mut out, None, pull_max) {
                    Ok(p) if p.n == 0 => break,
                    Ok(p) => {
                        prop_assert_eq!(p.first, before);
                        prop_assert_eq!(&out[..p.n * ch], &samples_u8(p.first, p.first + p.n as u64, ch)[..]);
                    }
                    Err(ReadError::Overrun { lost, oldest: o }) => {
                        prop_assert_eq!(o, oldest);
                        prop_assert_eq!(lost, oldest - before);
                    }
                    Err(e) => prop_assert!(false, "unexpected {}", e),
                }
            }
            prop_assert_eq!(puller.cursor(), written);
        }
    }
}

#[test]
fn typed_latest_window_of_the_newest_samples_matches_what_was_written() {
    let name = unique_name("latest-window");
    let stream = create(&name, 1);
    let _g = StreamGuard::new(&name);
    let cap = stream.info().capacity;
    let mut w = stream.writer().unwrap();
    let total = 3 * cap + 5;
    w.write_bytes(&payload_bytes(0, total), None).unwrap();
    let sut = stream.reader(ReaderMode::Latest).unwrap();
    let win = sut.latest(cap).unwrap();
    assert_eq!((win.first(), win.end()), (total - cap, total));
    // SAFETY: the writer is idle while the view is in use (one thread)
    check(win.first(), unsafe { win.bytes() }).unwrap();
    win.check().unwrap();
    let typed = sut.window_as::<u64>(total - 3, total).unwrap();
    assert_eq!(
        // SAFETY: the writer is idle while the view is in use (one thread)
        unsafe { typed.values() },
        &common::payload(total - 3, 3)[..],
        "typed view across the wrap"
    );
}
