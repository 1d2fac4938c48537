//! Commit stamps: the writer reads CLOCK_MONOTONIC through the CPU's counter (re-anchored to
//! `clock_gettime` every millisecond), so every stamp must lie with the clock reads around
//! its commit and never go back, across anchors and the rate's re-measure.

mod common;

use common::{create, payload_bytes, CH};
use rtloop_stream::ReaderMode;
use rtloop_testkit::{unique_name, StreamGuard};

/// Far above the counter clock's error (about 20 ns), far below any latency figure's
/// resolution: a wrong rate or a missed anchor is off by more within the run.
const SLACK_NS: u64 = 2_000;

#[test]
fn commit_stamps_lie_with_clock_monotonic_and_never_go_back() {
    let name = unique_name("stamps");
    let stream = create(&name, 1024);
    let _g = StreamGuard::new(&name);
    let reader = stream.reader(ReaderMode::Latest).unwrap();
    let mut w = stream.writer().unwrap();
    let (mut out, mut stamp) = (vec![0u8; 8 * CH], [0u64; 1]);
    let mut last = 0;
    // 300 ms: the first rate (after 1 ms), many anchors and the 100 ms re-measures
    let end = rtloop_sys::monotonic_ns() + 300_000_000;
    let mut i = 0u64;
    while rtloop_sys::monotonic_ns() < end {
        let before = rtloop_sys::monotonic_ns();
        w.write_bytes(&payload_bytes(i, 1), None).unwrap();
        let after = rtloop_sys::monotonic_ns();
        reader
            .read_into(i, i + 1, &mut out, Some(&mut stamp))
            .unwrap();
        let s = stamp[0];
        assert!(
            s + SLACK_NS >= before && s <= after + SLACK_NS,
            "sample {i}: stamp {s} outside [{before}, {after}] by more than {SLACK_NS} ns"
        );
        assert!(s >= last, "sample {i}: stamp {s} went back from {last}");
        last = s;
        i += 1;
    }
    assert!(i > 1000, "only {i} commits in 300 ms");
}

/// Each sample's time in a regular stream: the commit's stamp for its last sample, one
/// period earlier for each sample before it, also when the copy ends inside the commit.
#[test]
fn sample_times_back_date_each_commit_from_its_stamp() {
    let name = unique_name("sample-times");
    let stream = create(&name, 1024); // 1000 Hz: 1 ms per sample
    let _g = StreamGuard::new(&name);
    let reader = stream.reader(ReaderMode::Latest).unwrap();
    let mut w = stream.writer().unwrap();
    w.write_bytes(&payload_bytes(0, 5), Some(1_000_000_000))
        .unwrap();
    w.write_bytes(&payload_bytes(5, 3), Some(2_000_000_000))
        .unwrap();
    let mut out = vec![0u8; 4 * 8 * CH];
    let mut st = [0u64; 4];
    reader.read_into(2, 6, &mut out, Some(&mut st)).unwrap();
    assert_eq!(st, [1e9 as u64, 1e9 as u64, 1e9 as u64, 2e9 as u64]);
    reader.sample_times(6, &mut st);
    assert_eq!(st, [998_000_000, 999_000_000, 1_000_000_000, 1_998_000_000]);
}
