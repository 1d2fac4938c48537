//! The HMF transmitter's generator/receiver test through rtloop streams (`rtloop verify`).
//! Each pair is two processes and one stream with a prime capacity (any capacity of 8 KiB
//! packets is kept exactly). Every packet's content is a function of its sequence number,
//! so the receiver checks every word (content) at the index it arrived at (order).

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::process::Child;
use std::time::{Duration, Instant};

use rtloop_metrics::Table;
use rtloop_stream::{DType, ReadError, ReaderMode, Stream, StreamConfig, WaitError};
use rtloop_sys as sys;
use serde::{Deserialize, Serialize};

use crate::{ensure, BenchError, Context, Progress};

/// What to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Packets each generator sends (HMF ran 10^9).
    pub packets: u64,
    /// Generator/receiver pairs running at once, each through its own stream.
    pub pairs: u64,
    /// Bytes per packet (a multiple of 8, at most 16 MiB).
    pub packet_bytes: u64,
    /// Packets the stream keeps (HMF used primes: 24989, 49999, 74959).
    pub capacity: u64,
    /// "lossless": the generator waits for the receiver, every packet must arrive;
    /// "latest": the generator never waits, packets the receiver misses count as lost.
    pub mode: String,
    /// Packets per commit.
    pub batch: u64,
    /// What the receiver checks: every word of every packet ("all"), or only the first
    /// word, HMF's default flag check ("first").
    pub check: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            packets: 1_000_000,
            pairs: 1,
            packet_bytes: 8192,
            capacity: 24989,
            mode: "lossless".into(),
            batch: 1,
            check: "all".into(),
        }
    }
}

impl Config {
    /// Refuse settings the pairs cannot run with.
    pub fn validate(&self) -> Result<(), BenchError> {
        use crate::check;
        for (name, v) in [
            ("packets", self.packets),
            ("pairs", self.pairs),
            ("capacity", self.capacity),
            ("batch", self.batch),
        ] {
            if v == 0 {
                return Err(BenchError::config(name, 0, "at least 1"));
            }
        }
        if self.packet_bytes < 8 || self.packet_bytes % 8 != 0 || self.packet_bytes > 1 << 24 {
            return Err(BenchError::config(
                "packet_bytes",
                self.packet_bytes,
                "a multiple of 8 from 8 to 16777216",
            ));
        }
        check::one_of("mode", &self.mode, &["lossless", "latest"])?;
        check::one_of("check", &self.check, &["all", "first"])?;
        Ok(())
    }
}

/// Word `k` of packet `seq`.
#[inline]
#[must_use]
pub fn word(seq: u64, k: usize) -> u64 {
    seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (k as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)
}

/// What a generator reports.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GenReport {
    /// CLOCK_MONOTONIC ns of its first reservation.
    pub start_ns: u64,
    /// CLOCK_MONOTONIC ns after its last commit.
    pub end_ns: u64,
    /// Packets committed.
    pub packets: u64,
}

/// What a receiver reports (at its end, after it said it was ready once registered).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RecvReport {
    /// Packets checked and intact.
    pub ok: u64,
    /// Packets with wrong content.
    pub errors: u64,
    /// Packets overwritten before they were read (latest mode).
    pub lost: u64,
    /// The first error, described.
    pub first_error: Option<String>,
    /// CLOCK_MONOTONIC ns after the last packet was checked.
    pub end_ns: u64,
}

fn line_json<T: Serialize>(v: &T) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", serde_json::to_string(v).expect("serialisable"));
    let _ = out.flush();
}

fn read_json<T: for<'de> Deserialize<'de>>(line: &str) -> Result<T, BenchError> {
    serde_json::from_str(line).with_context(|| format!("unexpected child output {line:?}"))
}

/// One pair's streams and processes.
struct Pair {
    name: String,
    recv: Child,
    recv_out: BufReader<std::process::ChildStdout>,
    gen: Option<Child>,
}

/// The generator process of a pair: commits packets `0..packets` in batches.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GenRole {
    /// The stream.
    pub stream: String,
    /// Packets to commit.
    pub packets: u64,
    /// Packets per commit.
    pub batch: u64,
    /// The CPU to pin to.
    pub cpu: Option<usize>,
    /// Copy a ready packet with its sequence word (else compute every word).
    pub copy: bool,
}

impl rtloop_launch::ChildRole for GenRole {
    const NAME: &'static str = "verify-gen";
}

/// The receiver process of a pair: checks every packet.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecvRole {
    /// The stream.
    pub stream: String,
    /// Packets expected.
    pub packets: u64,
    /// Reader mode: latest or lossless.
    pub mode: String,
    /// Words checked: first or all.
    pub check: String,
    /// The CPU to pin to.
    pub cpu: Option<usize>,
}

impl rtloop_launch::ChildRole for RecvRole {
    const NAME: &'static str = "verify-recv";
}

/// Results of one pair.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PairResult {
    /// Stream name.
    pub stream: String,
    /// Packets sent.
    pub sent: u64,
    /// Packets received intact.
    pub ok: u64,
    /// Packets with wrong content or order.
    pub errors: u64,
    /// Packets lost (latest mode).
    pub lost: u64,
    /// First error.
    pub first_error: Option<String>,
    /// Seconds from the first reservation to the last check.
    pub seconds: f64,
    /// Packets per second.
    pub packets_per_s: f64,
    /// GB/s (1e9 bytes) of packets delivered.
    pub gb_per_s: f64,
}

/// Run `pairs` generator/receiver pairs and collect their results.
pub fn run_pairs(a: &Config, progress: &mut dyn Progress) -> Result<Vec<PairResult>, BenchError> {
    // one CPU per process when there are enough (pair p: generator on 2p, receiver on
    // 2p + 1); otherwise the scheduler places the processes
    let pin = sys::online_cpus() as u64 >= 2 * a.pairs;
    let cpu = |k: u64| pin.then_some(k as usize);
    let mut pairs: Vec<Pair> = Vec::new();
    let result = (|| {
        for p in 0..a.pairs {
            let name = format!("verify-{}-{p}", sys::pid());
            let cfg = StreamConfig::new(DType::U64, (a.packet_bytes / 8) as usize, 0.0, a.capacity);
            let stream = Stream::create(&name, &cfg)?;
            if stream.info().capacity != a.capacity {
                progress.warn(&format!(
                    "note: capacity {} rounded up to {} so the ring is whole pages",
                    a.capacity,
                    stream.info().capacity
                ));
            }
            // ready once its reader is registered: the generator may start
            let (recv, recv_out) = rtloop_launch::spawn_ready(&RecvRole {
                stream: name.clone(),
                packets: a.packets,
                mode: a.mode.clone(),
                check: a.check.clone(),
                cpu: cpu(2 * p + 1),
            })?;
            pairs.push(Pair {
                name,
                recv,
                recv_out,
                gen: None,
            });
        }
        for (p, pair) in (0u64..).zip(&mut pairs) {
            // with only the first word checked, copy a ready packet (as HMF's generator and
            // the iceoryx2 peer do) instead of computing every word
            pair.gen = Some(rtloop_launch::spawn(&GenRole {
                stream: pair.name.clone(),
                packets: a.packets,
                batch: a.batch,
                cpu: cpu(2 * p),
                copy: a.check == "first",
            })?);
        }
        let total = a.packets * a.pairs;
        let streams: Vec<Stream> = pairs
            .iter()
            .map(|p| Stream::open(&p.name))
            .collect::<Result<_, _>>()?;
        loop {
            let done: u64 = streams.iter().map(Stream::written).sum();
            progress.step("packets", done, total);
            let all_exited = pairs.iter_mut().all(|p| {
                p.gen
                    .as_mut()
                    .is_some_and(|g| matches!(g.try_wait(), Ok(Some(_))))
            });
            if all_exited {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut results = Vec::new();
        for pair in &mut pairs {
            let gen = pair.gen.take().expect("spawned").wait_with_output()?;
            ensure!(
                gen.status.success(),
                format!("the generator of {}", pair.name),
                "failed ({})",
                gen.status
            );
            let g: GenReport = read_json(String::from_utf8_lossy(&gen.stdout).trim())?;
            let mut line = String::new();
            pair.recv_out.read_line(&mut line)?;
            let status = pair.recv.wait()?;
            ensure!(
                status.success(),
                format!("the receiver of {}", pair.name),
                "failed ({status})"
            );
            let r: RecvReport = read_json(line.trim())?;
            let seconds = r.end_ns.saturating_sub(g.start_ns) as f64 / 1e9;
            let delivered = r.ok + r.errors;
            results.push(PairResult {
                stream: pair.name.clone(),
                sent: g.packets,
                ok: r.ok,
                errors: r.errors,
                lost: r.lost,
                first_error: r.first_error,
                seconds,
                packets_per_s: delivered as f64 / seconds.max(1e-9),
                gb_per_s: delivered as f64 * a.packet_bytes as f64 / seconds.max(1e-9) / 1e9,
            });
        }
        Ok(results)
    })();
    for p in &mut pairs {
        if let Some(g) = &mut p.gen {
            let _ = g.kill();
            let _ = g.wait();
        }
        let _ = p.recv.kill();
        let _ = p.recv.wait();
        let _ = Stream::remove(&p.name);
    }
    result
}

/// What `rtloop verify` found.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VerifyReport {
    /// Packets each generator sent.
    pub packets_per_pair: u64,
    /// Pairs.
    pub pairs: u64,
    /// Bytes per packet.
    pub packet_bytes: u64,
    /// Packets each stream kept.
    pub capacity: u64,
    /// lossless or latest.
    pub mode: String,
    /// all or first.
    pub check: String,
    /// Packets per commit.
    pub batch: u64,
    /// Packets intact, all pairs.
    pub ok: u64,
    /// Packets with wrong content or order.
    pub errors: u64,
    /// Packets lost (latest mode).
    pub lost: u64,
    /// Packets neither delivered nor reported lost.
    pub missing: u64,
    /// Packets per second, all pairs.
    pub packets_per_s: f64,
    /// GB/s, all pairs.
    pub gb_per_s: f64,
    /// Each pair.
    pub results: Vec<PairResult>,
}

/// Run the verification: every pair, every packet checked. A report with errors, missing
/// packets or (lossless) lost ones is still a report; [`VerifyReport::check`] says so.
pub fn run(a: &Config, progress: &mut dyn Progress) -> Result<VerifyReport, BenchError> {
    a.validate()?;
    let results = run_pairs(a, progress)?;
    Ok(VerifyReport {
        packets_per_pair: a.packets,
        pairs: a.pairs,
        packet_bytes: a.packet_bytes,
        capacity: a.capacity,
        mode: a.mode.clone(),
        check: a.check.clone(),
        batch: a.batch,
        ok: results.iter().map(|r| r.ok).sum(),
        errors: results.iter().map(|r| r.errors).sum(),
        lost: results.iter().map(|r| r.lost).sum(),
        missing: results
            .iter()
            .map(|r| r.sent - r.ok - r.errors - r.lost)
            .sum(),
        packets_per_s: results.iter().map(|r| r.packets_per_s).sum(),
        gb_per_s: results.iter().map(|r| r.gb_per_s).sum(),
        results,
    })
}

impl VerifyReport {
    /// The report as `--json` prints it (object keys sorted).
    pub fn json(&self) -> Result<serde_json::Value, BenchError> {
        Ok(serde_json::to_value(self)?)
    }

    /// The line and table the command prints.
    #[must_use]
    pub fn table(&self) -> String {
        let mut t = Table::new(&[
            "pair",
            "sent",
            "ok",
            "errors",
            "lost",
            "seconds",
            "packets/s",
            "GB/s",
        ]);
        for (i, r) in self.results.iter().enumerate() {
            t.row(&[
                i.to_string(),
                r.sent.to_string(),
                r.ok.to_string(),
                r.errors.to_string(),
                r.lost.to_string(),
                format!("{:.3}", r.seconds),
                format!("{:.0}", r.packets_per_s),
                format!("{:.2}", r.gb_per_s),
            ]);
        }
        if self.results.len() > 1 {
            t.row(&[
                "all".into(),
                (self.packets_per_pair * self.pairs).to_string(),
                self.ok.to_string(),
                self.errors.to_string(),
                self.lost.to_string(),
                String::new(),
                format!("{:.0}", self.packets_per_s),
                format!("{:.2}", self.gb_per_s),
            ]);
        }
        let mut s = String::new();
        let _ = writeln!(
            s,
            "verify: {} pair(s) x {} packets of {} B, stream capacity {} (prime-sized rings catch index errors), {} mode, checking {} words",
            self.pairs, self.packets_per_pair, self.packet_bytes, self.capacity, self.mode, self.check
        );
        s += &t.render();
        let _ = writeln!(s, "errors: {}", self.errors);
        s
    }

    /// Whether every packet arrived intact (lossless) or intact or reported lost (latest).
    pub fn check(&self) -> Result<(), BenchError> {
        if let Some(first) = self.results.iter().find_map(|r| r.first_error.clone()) {
            return Err(BenchError::Corrupt {
                count: self.errors,
                first,
            });
        }
        if self.missing > 0 {
            return Err(BenchError::Lost {
                count: self.missing,
                how: "neither arrived nor were reported lost",
            });
        }
        if self.mode == "lossless" && self.lost > 0 {
            return Err(BenchError::Lost {
                count: self.lost,
                how: "lost in lossless mode",
            });
        }
        Ok(())
    }
}

rtloop_launch::register_role!(GenRole, gen_role);
rtloop_launch::register_role!(RecvRole, recv_role);

/// The generator: commit packets 0..packets in batches, every word computed (pattern) or a
/// ready packet copied with its sequence word.
pub fn gen_role(role: &GenRole) -> Result<(), BenchError> {
    let (name, packets, batch, copy) = (&role.stream, role.packets, role.batch, role.copy);
    crate::pin(role.cpu);
    let stream = Stream::open(name)?;
    let mut w = stream.writer()?;
    w.set_lossless_timeout(Duration::from_secs(60));
    w.set_spin(Duration::from_micros(50));
    let words = stream.info().n_channels;
    let hot: Vec<u64> = (0..words).map(|k| word(0, k)).collect();
    let start_ns = sys::monotonic_ns();
    let mut seq = 0u64;
    while seq < packets {
        let n = batch.min(packets - seq);
        let mut g = w.reserve(n as usize)?;
        let vals = g.as_mut_slice::<u64>()?;
        for (i, pkt) in vals.chunks_exact_mut(words).enumerate() {
            let s = seq + i as u64;
            if copy {
                pkt.copy_from_slice(&hot);
                pkt[0] = word(s, 0);
            } else {
                for (k, v) in pkt.iter_mut().enumerate() {
                    *v = word(s, k);
                }
            }
        }
        g.commit();
        seq += n;
    }
    line_json(&GenReport {
        start_ns,
        end_ns: sys::monotonic_ns(),
        packets,
    });
    Ok(())
}

/// The receiver: check every packet (validated copies).
pub fn recv_role(role: &RecvRole) -> Result<(), BenchError> {
    let (name, packets, mode) = (&role.stream, role.packets, &role.mode);
    let all = role.check == "all";
    crate::pin(role.cpu);
    let stream = Stream::open(name)?;
    let mode = if mode == "latest" {
        ReaderMode::Latest
    } else {
        ReaderMode::Lossless
    };
    let mut r = stream.reader(mode)?;
    r.set_spin(Duration::from_micros(200));
    let words = stream.info().n_channels;
    rtloop_launch::ready();
    let mut rep = RecvReport::default();
    let started = Instant::now();
    while r.cursor() < packets {
        match r.wait_available(1, Some(Duration::from_secs(2))) {
            Ok(_) => {}
            Err(WaitError::Timeout { .. }) => {
                if r.writer_liveness() == rtloop_stream::Liveness::Closed && r.available() == 0 {
                    break;
                }
                if started.elapsed() > Duration::from_secs(3600 * 24) {
                    return Err(BenchError::Overran(Duration::from_secs(3600 * 24)));
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        let first = r.cursor();
        let end = (first + r.available().min(256)).min(packets);
        let window = match r.window_as::<u64>(first, end) {
            Ok(w) => w,
            Err(ReadError::TooOld { oldest, .. }) => {
                rep.lost += oldest - first;
                r.seek(oldest)?;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let mut bad = 0u64;
        let mut first_bad = None;
        // a validated copy (this crate has no unsafe code; the zero-copy view is the
        // library's, behind its own contract)
        let values = match window.to_vec() {
            Ok(v) => v,
            Err(ReadError::Overrun { oldest, .. }) => {
                rep.lost += oldest.min(end) - first;
                r.seek(oldest.min(end).max(first))?;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        for (i, pkt) in values.chunks_exact(words).enumerate() {
            let s = first + i as u64;
            let ok = if all {
                pkt.iter().enumerate().all(|(k, &v)| v == word(s, k))
            } else {
                pkt[0] == word(s, 0)
            };
            if !ok {
                bad += 1;
                if first_bad.is_none() {
                    let k = pkt
                        .iter()
                        .enumerate()
                        .position(|(k, &v)| v != word(s, k))
                        .unwrap_or(0);
                    first_bad = Some(format!(
                        "packet {s} word {k}: got {:#x}, expected {:#x}",
                        pkt[k],
                        word(s, k)
                    ));
                }
            }
        }
        match window.check() {
            Ok(()) => {
                rep.ok += (end - first) - bad;
                rep.errors += bad;
                if rep.first_error.is_none() {
                    rep.first_error = first_bad;
                }
                r.seek(end)?;
            }
            Err(ReadError::Overrun { oldest, .. }) => {
                // the writer lapped this window while we checked it: what we saw may be torn
                // and does not count; the packets before `oldest` are lost
                rep.lost += oldest.min(end) - first;
                r.seek(oldest.min(end).max(first))?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    rep.end_ns = sys::monotonic_ns();
    line_json(&rep);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(mode: &str, ok: u64, lost: u64, first_error: Option<&str>) -> VerifyReport {
        let errors = u64::from(first_error.is_some());
        let pair = PairResult {
            stream: "s".into(),
            sent: 10,
            ok,
            errors,
            lost,
            first_error: first_error.map(str::to_owned),
            seconds: 1.0,
            packets_per_s: 10.0,
            gb_per_s: 0.0,
        };
        VerifyReport {
            packets_per_pair: 10,
            pairs: 1,
            packet_bytes: 8,
            capacity: 7,
            mode: mode.into(),
            check: "all".into(),
            batch: 1,
            ok,
            errors,
            lost,
            missing: 10 - ok - errors - lost,
            packets_per_s: 10.0,
            gb_per_s: 0.0,
            results: vec![pair],
        }
    }

    #[test]
    fn a_report_fails_on_corruption_missing_packets_and_losses_when_lossless() {
        assert!(report("lossless", 10, 0, None).check().is_ok());
        assert!(report("latest", 6, 4, None).check().is_ok());
        let e = report("lossless", 6, 4, None).check().unwrap_err();
        assert_eq!(e.to_string(), "4 packets lost in lossless mode");
        let e = report("latest", 6, 0, None).check().unwrap_err();
        assert_eq!(
            e.to_string(),
            "4 packets neither arrived nor were reported lost"
        );
        let e = report("lossless", 9, 0, Some("packet 3 word 0"))
            .check()
            .unwrap_err();
        assert!(e.to_string().ends_with("first: packet 3 word 0"), "{e}");
        let t = report("lossless", 10, 0, None).table();
        assert!(
            t.starts_with("verify: 1 pair(s) x 10 packets of 8 B"),
            "{t}"
        );
        assert!(t.ends_with("errors: 0\n"), "{t}");
    }

    #[test]
    fn settings_the_pairs_cannot_run_with_are_refused() {
        assert!(Config::default().validate().is_ok());
        for c in [
            Config {
                packet_bytes: 100,
                ..Config::default()
            },
            Config {
                pairs: 0,
                ..Config::default()
            },
            Config {
                mode: "fast".into(),
                ..Config::default()
            },
        ] {
            assert!(
                matches!(c.validate(), Err(BenchError::Config { .. })),
                "{c:?}"
            );
        }
    }
}
