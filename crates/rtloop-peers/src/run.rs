//! The two ends of a trial, each in its own process, and how they talk to the parent over
//! their standard input and output:
//!
//! * writer: opens its side, says it is ready with its ENDPOINT (`rtloop_launch::write_ready`); on `go` waits until every reader can
//!   receive, runs the phases (warm-up, paced latency, flat-out throughput, end), prints its
//!   [`WriterReport`] as one JSON line, then keeps its side open until `quit` (or end of input)
//!   so readers drain what is in flight;
//! * reader: connects to ENDPOINT, says it is ready, receives until the end chunk (or until
//!   nothing came for [`IDLE_LIMIT`]), prints its [`ReaderReport`] as one JSON line.

use std::io::{BufRead, Write};
use std::time::Duration;

use rtloop_metrics::LatencyHistogram;
use rtloop_sys as sys;
use serde::{Deserialize, Serialize};

use crate::payload::{self, Phase};
use crate::transport::{open_receiver, open_sender, Sender};
use crate::{PeerError, Trial, Wait};

/// Paced chunks sent before the latency phase (connections and caches warm up).
pub const WARMUP_CHUNKS: u64 = 20;
/// A reader that received nothing for this long reports and ends.
pub const IDLE_LIMIT: Duration = Duration::from_secs(20);
/// How long the writer waits for its readers to connect.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// What the writer did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WriterReport {
    /// Samples sent in all phases.
    pub samples: u64,
    /// Chunks sent in the latency phase.
    pub latency_chunks: u64,
    /// Worst lateness of a paced send against its schedule (the writer's own wake-up, or a
    /// transport that blocked it), ns.
    pub late_max_ns: u64,
    /// CLOCK_MONOTONIC at the first throughput send.
    pub throughput_start_ns: u64,
    /// CLOCK_MONOTONIC after the last throughput send returned.
    pub throughput_end_ns: u64,
    /// Samples sent in the throughput phase.
    pub throughput_samples: u64,
}

/// What one reader received.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReaderReport {
    /// Samples received in all phases.
    pub samples: u64,
    /// Samples missing between ones received (by index).
    pub lost: u64,
    /// Samples that came out of order, twice, or with a header no writer sends.
    pub errors: u64,
    /// One-way latency of each paced chunk (production stamp to the reader having it),
    /// as `(ns, count)` pairs.
    pub latency: Vec<(u64, u64)>,
    /// Samples received in the throughput phase.
    pub throughput_samples: u64,
    /// CLOCK_MONOTONIC when the last throughput sample was received.
    pub throughput_last_ns: u64,
    /// Whether the end chunk arrived (false: the reader gave up after [`IDLE_LIMIT`]).
    pub ended: bool,
}

impl ReaderReport {
    /// The latency histogram.
    #[must_use]
    pub fn histogram(&self) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for &(v, c) in &self.latency {
            h.record_n(v, c);
        }
        h
    }
}

/// Run the phases of `t` through `tx` (every reader already connected).
pub fn write_phases(t: &Trial, tx: &mut dyn Sender) -> Result<WriterReport, PeerError> {
    // 30 kHz single samples are 33 µs apart: the default 50 µs slack would halve the rate
    let _ = sys::set_timer_slack(Duration::from_nanos(1));
    let sb = t.sample_bytes();
    let mut chunk = payload::pattern_chunk(t.chunk, sb);
    let mut r = WriterReport::default();
    let mut send = |r: &mut WriterReport, chunk: &mut [u8], phase: Phase| {
        let stamp = sys::monotonic_ns();
        payload::stamp_chunk(chunk, sb, r.samples, stamp, phase);
        tx.send(chunk)?;
        r.samples += t.chunk as u64;
        Ok::<u64, PeerError>(stamp)
    };
    let period = t.period_ns();
    let mut next = sys::monotonic_ns();
    let latency_ns = (t.latency_seconds * 1e9) as u64;
    let mut latency_end = u64::MAX;
    for k in 0.. {
        let now = sys::sleep_until(next, Duration::ZERO);
        let phase = if k < WARMUP_CHUNKS {
            Phase::Warmup
        } else {
            if k == WARMUP_CHUNKS {
                latency_end = now + latency_ns;
            }
            if now >= latency_end {
                break;
            }
            r.late_max_ns = r.late_max_ns.max(now - next);
            r.latency_chunks += 1;
            Phase::Latency
        };
        send(&mut r, &mut chunk, phase)?;
        next += period;
    }
    let first = r.samples;
    let start = sys::monotonic_ns();
    let end = start + (t.throughput_seconds * 1e9) as u64;
    r.throughput_start_ns = start;
    loop {
        send(&mut r, &mut chunk, Phase::Throughput)?;
        r.throughput_end_ns = sys::monotonic_ns();
        if r.throughput_end_ns >= end {
            break;
        }
    }
    r.throughput_samples = r.samples - first;
    send(&mut r, &mut chunk, Phase::End)?;
    Ok(r)
}

/// A report to the parent: one JSON line, flushed.
fn say(out: &mut impl Write, report: &impl Serialize) -> Result<(), PeerError> {
    writeln!(
        out,
        "{}",
        serde_json::to_string(report).expect("a report serialises")
    )?;
    Ok(out.flush()?)
}

fn line(input: &mut impl BufRead) -> Result<String, PeerError> {
    let mut l = String::new();
    input.read_line(&mut l)?;
    Ok(l.trim().to_string())
}

/// The writer process (see the module docs).
pub fn writer_role(
    t: &Trial,
    input: &mut impl BufRead,
    out: &mut impl Write,
) -> Result<(), PeerError> {
    let mut tx = open_sender(t)?;
    rtloop_launch::write_ready(out, &tx.endpoint())?;
    let go = line(input)?;
    if go != "go" {
        return Err(PeerError::Config(format!(
            "the writer expected `go` from its parent, got {go:?}"
        )));
    }
    tx.prepare(t.readers, CONNECT_TIMEOUT)?;
    say(out, &write_phases(t, &mut *tx)?)?;
    // `quit` or end of input
    let _ = line(input);
    Ok(())
}

/// Receive until the end chunk; every sample's index is checked against the one before.
pub fn read_phases(
    t: &Trial,
    rx: &mut dyn crate::transport::Receiver,
) -> Result<ReaderReport, PeerError> {
    let sb = t.sample_bytes();
    let chunk = t.chunk as u64;
    let mut r = ReaderReport::default();
    let mut h = LatencyHistogram::new();
    let body = payload::payload_sum(&payload::pattern_chunk(1, sb));
    let mut expected: Option<u64> = None;
    // a blocking reader wakes at least every half second to judge how long it was idle
    let step = match t.wait {
        Wait::Block => Duration::from_millis(500),
        Wait::Spin => Duration::ZERO,
    };
    let idle_limit = IDLE_LIMIT.as_nanos() as u64;
    let mut last_data = sys::monotonic_ns();
    'recv: loop {
        let data = rx.recv(step)?;
        let now = sys::monotonic_ns();
        if data.is_empty() {
            if now - last_data >= idle_limit {
                break;
            }
            std::hint::spin_loop();
            continue;
        }
        last_data = now;
        for s in data.chunks_exact(sb) {
            let (idx, stamp, phase) = payload::read(s);
            if payload::payload_sum(s) != body {
                r.errors += 1;
            }
            match expected {
                Some(e) if idx > e => r.lost += idx - e,
                Some(e) if idx < e => r.errors += 1,
                _ => {}
            }
            expected = Some(idx + 1);
            r.samples += 1;
            match phase {
                Phase::Latency if (idx + 1) % chunk == 0 => h.record(now.saturating_sub(stamp)),
                Phase::Throughput => {
                    r.throughput_samples += 1;
                    r.throughput_last_ns = now;
                }
                // the whole end chunk is read: a reader that left in the middle of it would
                // close its connection under a writer still sending it
                Phase::End if (idx + 1) % chunk == 0 => {
                    r.ended = true;
                    break 'recv;
                }
                Phase::Unknown => r.errors += 1,
                _ => {}
            }
        }
    }
    r.latency = h.recorded();
    Ok(r)
}

/// The reader process (see the module docs).
pub fn reader_role(t: &Trial, endpoint: &str, out: &mut impl Write) -> Result<(), PeerError> {
    let mut rx = open_receiver(t, endpoint)?;
    rtloop_launch::write_ready(out, &())?;
    say(out, &read_phases(t, &mut *rx)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Receiver;
    use crate::Transport;

    /// Hands out prepared chunks, as a transport would deliver them.
    struct Replay(Vec<Vec<u8>>, usize);

    impl Receiver for Replay {
        fn recv(&mut self, _timeout: Duration) -> Result<&[u8], crate::transport::TransportError> {
            self.1 += 1;
            Ok(self.0.get(self.1 - 1).map_or(&[][..], Vec::as_slice))
        }
    }

    fn trial(chunk: usize) -> Trial {
        Trial {
            transport: Transport::Stream,
            channels: 16,
            rate: 1000.0,
            chunk,
            readers: 1,
            wait: Wait::Block,
            latency_seconds: 0.0,
            throughput_seconds: 0.0,
            tag: "t".into(),
            stream_spin_us: 0,
        }
    }

    fn chunk(t: &Trial, first: u64, phase: Phase) -> Vec<u8> {
        let mut c = payload::pattern_chunk(t.chunk, t.sample_bytes());
        payload::stamp_chunk(&mut c, t.sample_bytes(), first, sys::monotonic_ns(), phase);
        c
    }

    #[test]
    fn a_reader_counts_gaps_reorders_and_corruption_and_times_each_chunk() {
        let t = trial(2);
        let mut corrupt = chunk(&t, 8, Phase::Throughput);
        corrupt[28] ^= 0xff; // a payload byte of the first sample (32-byte samples)
        let rx = &mut Replay(
            vec![
                chunk(&t, 0, Phase::Latency),
                chunk(&t, 2, Phase::Latency),
                chunk(&t, 6, Phase::Throughput), // 4 and 5 lost
                chunk(&t, 4, Phase::Throughput), // back in time: 1 out of order
                corrupt,
                chunk(&t, 10, Phase::End),
                chunk(&t, 12, Phase::Throughput), // after the end: not read
            ],
            0,
        );
        let r = read_phases(&t, rx).unwrap();
        assert!(r.ended);
        assert_eq!(
            r.samples, 12,
            "everything up to the end chunk's last sample"
        );
        assert_eq!(
            r.lost,
            2 + 2,
            "4..6 missing, then 6..8 again skipped by the jump back"
        );
        assert_eq!(r.errors, 2, "one sample out of order, one corrupted");
        assert_eq!(r.histogram().len(), 2, "one latency per paced chunk");
        assert_eq!(r.throughput_samples, 6);
        assert!(r.throughput_last_ns > 0);
    }
}

/// The writer process of a trial.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct WriterRole {
    /// The trial.
    pub trial: crate::Trial,
}

impl rtloop_launch::ChildRole for WriterRole {
    const NAME: &'static str = "peer-writer";
}

/// A reader process of a trial.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ReaderRole {
    /// The trial.
    pub trial: crate::Trial,
    /// Where the writer's transport is (a stream name, a socket path, an endpoint).
    pub endpoint: String,
}

impl rtloop_launch::ChildRole for ReaderRole {
    const NAME: &'static str = "peer-reader";
}
