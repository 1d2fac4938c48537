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
