//! The stream benchmark (`rtloop bench stream`): stream throughput and hand-off latency, each
//! next to a reference measured in the same run — the bare single-producer single-consumer
//! ring and single-thread memcpy bandwidth for throughput, a bare cache-line ping-pong
//! between two processes for latency — and the ratio (docs/design.md §7).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rtloop_metrics::{fmt_ns, LatencyHistogram, Summary, Table};
use rtloop_peers::spsc::{run_pair, PairConfig, Ring};
use rtloop_stream::{DType, ReaderMode, Stream, StreamConfig};
use rtloop_sys as sys;
use serde::{Deserialize, Serialize};

use crate::{median, BenchError, Context, Progress};

/// What to run.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Short runs (for smoke tests): fewer packets, rounds and repeats.
    pub quick: bool,
    /// Runs per figure; the median is reported.
    pub repeats: u32,
    /// Hold /dev/cpu_dma_latency at 0 during the run.
    pub pm_qos: bool,
    /// Write results.json and PNG charts into this directory.
    pub out: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            quick: false,
            repeats: 5,
            pm_qos: false,
            out: None,
        }
    }
}

/// The machine the figures were measured on.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Machine {
    /// Online CPUs.
    pub cpus: usize,
    /// Whether /dev/cpu_dma_latency was held at 0.
    pub pm_qos: bool,
}

/// One throughput row: the stream and the bare ring moving the same packets the same way.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThroughputRow {
    /// Bytes per packet.
    pub payload_bytes: u64,
    /// Packets the ring holds.
    pub capacity: u64,
    /// Bytes of the ring's data.
    pub footprint_bytes: u64,
    /// The consumer copies every packet out (else it checks the first word in place).
    pub copy_out: bool,
    /// Packets per run.
    pub packets: u64,
    /// Messages per second through the stream.
    pub msgs_per_s: f64,
    /// GB/s through the stream.
    pub gb_per_s: f64,
    /// The bare single-producer single-consumer ring, same processes, CPUs, slots,
    /// footprint and check, same run.
    pub bare_gb_per_s: f64,
    /// `gb_per_s` over `bare_gb_per_s`.
    pub ratio_to_bare: f64,
    /// The bare ring that also stamps every packet from the writer's clock, same run: what
    /// stamping costs.
    pub stamped_gb_per_s: f64,
    /// `gb_per_s` over `stamped_gb_per_s`: what the stream costs beyond its stamps.
    pub ratio_to_stamped: f64,
    /// The bare ring that also keeps the stream's per-packet records (overwrite marker,
    /// stamp, heartbeat, commit count, sleepers checks), same run: what the records cost.
    pub records_gb_per_s: f64,
    /// `gb_per_s` over `records_gb_per_s`: what the stream costs beyond its records.
    pub ratio_to_records: f64,
    /// The target, where there is one, for the ratio to the reference `goal_against` names.
    pub goal: Option<f64>,
    /// Which reference the goal is judged against: `"bare"` (`ratio_to_bare`) or
    /// `"stamped"` (`ratio_to_stamped`: every commit is stamped, as the stream's contract
    /// says, so small messages are judged against the bare ring that stamps each one).
    pub goal_against: &'static str,
    /// "met" only when that ratio reaches `goal`.
    pub verdict: &'static str,
    /// memcpy of the same working set (copy-out rows).
    pub memcpy_gb_per_s: Option<f64>,
    /// `gb_per_s` over `memcpy_gb_per_s`.
    pub ratio_to_memcpy: Option<f64>,
    /// Packets lost or wrong.
    pub errors: u64,
    /// iceoryx2 publish/subscribe, same payload and count, same run (in-place rows).
    pub iceoryx2_gb_per_s: Option<f64>,
    /// iceoryx2's messages per second.
    pub iceoryx2_msgs_per_s: Option<f64>,
}

/// One latency row.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LatencyRow {
    /// The path measured.
    pub name: String,
    /// How.
    pub method: &'static str,
    /// One-way latency.
    pub summary: Summary,
    /// The reference this row is judged against: the cache-line ping-pong for the spinning
    /// rows, the futex ping-pong for the blocking row (each the same hand-off without a ring).
    pub reference: &'static str,
    /// The reference's p50.
    pub reference_p50_ns: u64,
    /// This row's p50 over the reference's.
    pub ratio_p50_to_reference: f64,
    /// The reference's p99.
    pub reference_p99_ns: u64,
    /// This row's p99 over the reference's.
    pub ratio_p99_to_reference: f64,
    /// The row's goal, in words (`-` for none).
    pub goal: String,
    /// "met" only when the row reaches its goal; "not met"; "-" for no goal.
    pub verdict: &'static str,
}

/// Spin hand-off goal: one-way p50 at most this times the cache-line ping-pong's.
const SPIN_GOAL_RATIO: f64 = 1.5;

/// Blocking hand-off goal (a reader asleep on the futex, without `--pm-qos`): one-way p99.
const BLOCKING_GOAL_P99_NS: u64 = 30_000;

/// A latency row's goal and verdict: the spin row's p50 against the ping-pong's, the
/// blocking row's p99 (only without `--pm-qos`, which the goal excludes), none for others.
fn latency_goal(name: &str, s: &Summary, ratio: f64, pm_qos: bool) -> (String, &'static str) {
    let met = |ok: bool| if ok { "met" } else { "not met" };
    match name {
        "stream, spin" => (
            format!("p50 <= {SPIN_GOAL_RATIO}x the ping-pong"),
            met(ratio <= SPIN_GOAL_RATIO),
        ),
        "stream, blocking" if !pm_qos => (
            format!("p99 <= {} us without --pm-qos", BLOCKING_GOAL_P99_NS / 1000),
            met(s.p99_ns <= BLOCKING_GOAL_P99_NS),
        ),
        _ => ("-".into(), "-"),
    }
}

/// What the stream benchmark measured.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StreamReport {
    /// The machine.
    pub machine: Machine,
    /// Runs per figure.
    pub repeats: u32,
    /// Throughput rows.
    pub throughput: Vec<ThroughputRow>,
    /// Latency rows, the reference first.
    pub latency: Vec<LatencyRow>,
    /// The spin-then-sleep trade-off: samples after random gaps, one row per spin budget.
    pub wake_sweep: Vec<WakeRow>,
    /// Where results.json and the charts were written.
    #[serde(skip)]
    pub out: Option<PathBuf>,
}

/// "met" only when the figure reaches its goal.
fn verdict(ratio: f64, goal: Option<f64>) -> &'static str {
    match goal {
        Some(g) if ratio >= g => "met",
        Some(_) => "not met",
        None => "-",
    }
}

/// Single-thread memcpy bandwidth, GB/s, between two buffers larger than the caches (like a
/// ring of 8 KiB packets that does not fit L3).
fn memcpy_gbps(bytes: usize, rounds: u32) -> f64 {
    let src = vec![0x5au8; bytes];
    let mut dst = vec![0u8; bytes];
    dst.copy_from_slice(&src); // fault every page in first
    let t = Instant::now();
    for _ in 0..rounds {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    bytes as f64 * f64::from(rounds) / t.elapsed().as_secs_f64() / 1e9
}

/// One-way = RTT/2 through two streams: we write `i` to A, the echo process waits for it
/// (spinning for `spin`, then on the futex) and writes it to B, we wait for it on B.
fn stream_pingpong(rounds: u64, spin: Duration) -> Result<LatencyHistogram, BenchError> {
    let run = EchoRun {
        rounds,
        echo_spin: spin,
        own_spin: spin,
        max_gap_ns: 0,
        report: false,
    };
    Ok(echo_run(&run)?.0)
}

/// One run through the echo process (the ping-pong and the wake-up sweep).
struct EchoRun {
    /// Measured rounds (a tenth more, at least 10, warm up first).
    rounds: u64,
    /// How long the echo's reader spins before it sleeps.
    echo_spin: Duration,
    /// How long this side's reader spins before it sleeps.
    own_spin: Duration,
    /// Before each sample, wait a random gap in [0, this) ns (0: none).
    max_gap_ns: u64,
    /// Have the echo report its own hop and CPU time.
    report: bool,
}

/// We write `i` to A (stamped with the moment it was made, which the measurement reads
/// anyway, so the commit reads no clock), the echo writes it to B, we wait for it on B.
/// Returns RTT/2 per measured round, and the echo's report if asked for.
fn echo_run(run: &EchoRun) -> Result<(LatencyHistogram, Option<EchoReport>), BenchError> {
    let (a, b) = (
        format!("bench-a-{}", sys::pid()),
        format!("bench-b-{}", sys::pid()),
    );
    let cfg = StreamConfig::new(DType::U64, 1, 0.0, 512);
    let sa = Stream::create(&a, &cfg)?;
    let sb = Stream::create(&b, &cfg);
    let result = (|| {
        let sb = sb?;
        let mut w = sa.writer()?;
        let mut r = sb.reader(ReaderMode::Latest)?;
        r.set_spin(run.own_spin);
        let warm = (run.rounds / 10).max(10);
        let (mut child, mut out) = rtloop_launch::spawn_ready(&StreamEchoRole {
            from: a.clone(),
            to: b.clone(),
            spin_us: run.echo_spin.as_micros() as u64,
            cpu: Some(1),
            report_after: run.report.then_some(warm),
        })?;
        let mut h = LatencyHistogram::new();
        let mut buf = [0u8; 8];
        let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ run.echo_spin.as_nanos() as u64;
        for i in 1..=run.rounds + warm {
            if run.max_gap_ns > 0 {
                // xorshift: a gap the echo cannot predict
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let due = sys::monotonic_ns() + x % run.max_gap_ns;
                while sys::monotonic_ns() < due {
                    std::hint::spin_loop();
                }
            }
            let t0 = sys::monotonic_ns();
            w.write_bytes(&i.to_ne_bytes(), Some(t0))?;
            r.wait_available(1, Some(Duration::from_secs(10)))?;
            r.pull_into(&mut buf, None, 1)?;
            let t1 = sys::monotonic_ns();
            if u64::from_ne_bytes(buf) != i {
                return Err(BenchError::mismatch("the echo", u64::from_ne_bytes(buf), i));
            }
            if i > warm {
                h.record((t1 - t0) / 2);
            }
        }
        w.write(&[u64::MAX])?;
        let report = if run.report {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut out, &mut line)?;
            Some(
                serde_json::from_str(line.trim()).map_err(|e| BenchError::Child {
                    child: "the echo".into(),
                    problem: format!("its report {line:?}: {e}"),
                })?,
            )
        } else {
            None
        };
        child.wait()?;
        Ok((h, report))
    })();
    let _ = Stream::remove(&a);
    let _ = Stream::remove(&b);
    result
}

/// The echo process of the stream ping-pong: samples of stream `from` back into `to`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamEchoRole {
    /// The stream read.
    pub from: String,
    /// The stream written.
    pub to: String,
    /// Microseconds the reader spins before sleeping.
    pub spin_us: u64,
    /// The CPU to pin to.
    pub cpu: Option<usize>,
    /// Report the hop from the sender's commit to this echo having the sample (its stamp to
    /// now) after this many warm-up samples, and this thread's CPU time, as one JSON line at
    /// the end (the wake-up sweep); `None`: report nothing.
    #[serde(default)]
    pub report_after: Option<u64>,
}

/// What a reporting echo measured (see [`StreamEchoRole::report_after`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct EchoReport {
    /// Sender's commit to this echo having the sample.
    hop: Summary,
    /// This thread's CPU time over the measured samples.
    cpu_ns: u64,
    /// Wall time over the measured samples.
    wall_ns: u64,
}

impl rtloop_launch::ChildRole for StreamEchoRole {
    const NAME: &'static str = "pp-stream-echo";
}

rtloop_launch::register_role!(StreamEchoRole, stream_echo_role);

/// Run [`StreamEchoRole`] until it reads `u64::MAX`.
pub fn stream_echo_role(role: &StreamEchoRole) -> Result<(), BenchError> {
    crate::pin(role.cpu);
    // the writer below publishes light from its first commit (see `run`)
    let _ = rtloop_stream::prepare_light_publication(Duration::from_secs(1));
    let mut r = Stream::open(&role.from)?.reader(ReaderMode::Latest)?;
    r.set_spin(Duration::from_micros(role.spin_us));
    let mut w = Stream::open(&role.to)?.writer()?;
    rtloop_launch::ready();
    let (mut buf, mut stamp) = ([0u8; 8], [0u64; 1]);
    let mut hop = LatencyHistogram::new();
    let (mut seen, mut cpu0, mut wall0) = (0u64, 0u64, 0u64);
    loop {
        r.wait_available(1, Some(Duration::from_secs(30)))?;
        r.pull_into(&mut buf, Some(&mut stamp), 1)?;
        let v = u64::from_ne_bytes(buf);
        if v == u64::MAX {
            if role.report_after.is_some() {
                let report = EchoReport {
                    hop: hop.summary(),
                    cpu_ns: sys::thread_cpu_ns().saturating_sub(cpu0),
                    wall_ns: sys::monotonic_ns().saturating_sub(wall0),
                };
                println!("{}", serde_json::to_string(&report)?);
            }
            return Ok(());
        }
        if let Some(after) = role.report_after {
            seen += 1;
            if seen == after {
                (cpu0, wall0) = (sys::thread_cpu_ns(), sys::monotonic_ns());
            } else if seen > after {
                hop.record(sys::monotonic_ns().saturating_sub(stamp[0]));
            }
        }
        // the echo keeps the sample's stamp (when it was made), as a processing stage keeps
        // acquisition time; no clock read on the hand-off
        w.write_bytes(&buf, Some(stamp[0]))?;
    }
}

/// Spin budgets of the wake-up sweep, µs (the library's default is 20).
const WAKE_SPINS_US: [u64; 5] = [0, 10, 20, 50, 100];

/// The sweep's gaps between samples: uniform over [0, this), ns.
const WAKE_GAP_NS: u64 = 100_000;

/// One spin budget of the wake-up sweep.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WakeRow {
    /// How long the reader spins before it sleeps on the futex.
    pub spin_us: u64,
    /// Share of the gaps shorter than the spin (the samples a spinning reader catches).
    pub caught_spinning_percent: f64,
    /// The hop from the writer's commit to the reader having the sample.
    pub summary: Summary,
    /// The reader's CPU time over its wall time, % of one core.
    pub reader_cpu_percent: f64,
}

/// The spin-then-sleep trade-off, measured: samples arrive after random gaps (uniform over
/// 0-100 µs) and the reader spins `spin_us` before it sleeps; one-way hop and the reader's CPU.
fn wake_sweep(rounds: u64, p: &mut dyn Progress) -> Result<Vec<WakeRow>, BenchError> {
    let mut rows = Vec::new();
    for spin_us in WAKE_SPINS_US {
        p.note(&format!(
            "latency: samples after random gaps of 0-100 us, the reader spinning {spin_us} us then sleeping ..."
        ));
        rows.push(wake_row(rounds, spin_us)?);
    }
    Ok(rows)
}

fn wake_row(rounds: u64, spin_us: u64) -> Result<WakeRow, BenchError> {
    // this side always spins: only the echo's wait is measured
    let run = EchoRun {
        rounds,
        echo_spin: Duration::from_micros(spin_us),
        own_spin: Duration::from_secs(5),
        max_gap_ns: WAKE_GAP_NS,
        report: true,
    };
    let rep = echo_run(&run)?
        .1
        .ok_or(BenchError::Missing("the echo's report".into()))?;
    Ok(WakeRow {
        spin_us,
        caught_spinning_percent: (100.0 * (spin_us * 1000) as f64 / WAKE_GAP_NS as f64).min(100.0),
        summary: rep.hop,
        reader_cpu_percent: 100.0 * rep.cpu_ns as f64 / rep.wall_ns.max(1) as f64,
    })
}

#[cfg(feature = "iceoryx2")]
fn peer_throughput(
    packets: u64,
    bytes: u64,
    repeats: u32,
    p: &mut dyn Progress,
) -> Option<(f64, f64)> {
    p.note(&format!("peer: iceoryx2 {bytes} B x {packets} ..."));
    let mut runs = Vec::new();
    for _ in 0..repeats {
        match crate::iceoryx2_peer::throughput(packets, bytes as usize) {
            Ok(r) => runs.push(r),
            Err(e) => {
                p.warn(&format!("warning: iceoryx2 peer run failed: {e}"));
                return None;
            }
        }
    }
    Some((
        median(runs.iter().map(|r| r.0).collect()),
        median(runs.iter().map(|r| r.1).collect()),
    ))
}

#[cfg(not(feature = "iceoryx2"))]
fn peer_throughput(_: u64, _: u64, _: u32, _: &mut dyn Progress) -> Option<(f64, f64)> {
    None
}

#[cfg(feature = "iceoryx2")]
fn peer_latency(rounds: u64, p: &mut dyn Progress) -> Option<LatencyHistogram> {
    p.note("peer: iceoryx2 ping-pong, spinning ...");
    crate::iceoryx2_peer::pingpong(rounds)
        .map_err(|e| p.warn(&format!("warning: iceoryx2 peer latency failed: {e}")))
        .ok()
}

#[cfg(not(feature = "iceoryx2"))]
fn peer_latency(_: u64, _: &mut dyn Progress) -> Option<LatencyHistogram> {
    None
}

/// A ring's data size, for the table (`195 MiB`, `1.0 MiB`, `256 KiB`).
fn ring_size(bytes: u64) -> String {
    if bytes >= 10 << 20 {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

/// `8K`, `1K`, `64B`: a payload size for chart labels.
fn payload_short(bytes: u64) -> String {
    if bytes >= 1024 && bytes % 1024 == 0 {
        format!("{}K", bytes / 1024)
    } else {
        format!("{bytes}B")
    }
}

/// One throughput row: the stream and the bare ring alternately, `repeats` times each.
fn throughput_row(
    c: &Config,
    repeats: u32,
    (bytes, capacity, packets, copy_out, goal, against): RowConfig,
    p: &mut dyn Progress,
) -> Result<ThroughputRow, BenchError> {
    let footprint = bytes * capacity;
    p.note(&format!(
        "throughput: {bytes} B x {packets}, ring {}{}: stream, bare ring, bare ring with stamps and with records, {repeats} runs each ...",
        ring_size(footprint),
        if copy_out { ", consumer copies every packet out" } else { "" }
    ));
    let mut gbs = Vec::new();
    let mut mps = Vec::new();
    let mut bare = Vec::new();
    let mut stamped = Vec::new();
    let mut records = Vec::new();
    let mut errors = 0;
    // alternately, so a machine that drifts (the 195 MiB rows swing by 1.6x from run to
    // run) moves every ring's median alike
    let rings = [
        Ring::Stream,
        Ring::Bare,
        Ring::BareStamped,
        Ring::BareRecords,
    ];
    for k in 0..repeats {
        for ring in rings {
            let r = run_pair(&PairConfig {
                ring,
                name: format!("bench-spsc-{}-{k}", sys::pid()),
                packet_bytes: bytes,
                capacity,
                packets,
                copy_out,
            })?;
            errors += r.errors + (packets - r.ok - r.errors);
            match ring {
                Ring::Stream => {
                    gbs.push(r.gb_per_s);
                    mps.push(r.packets_per_s);
                }
                Ring::Bare => bare.push(r.gb_per_s),
                Ring::BareStamped => stamped.push(r.gb_per_s),
                Ring::BareRecords => records.push(r.gb_per_s),
            }
        }
    }
    let (gb, bare_gb) = (median(gbs), median(bare));
    let (stamped_gb, records_gb) = (median(stamped), median(records));
    let memcpy = copy_out.then(|| {
        p.note(&format!(
            "reference: memcpy of the same {} working set ...",
            ring_size(footprint)
        ));
        median(
            (0..repeats.max(3))
                .map(|_| memcpy_gbps(footprint as usize, if c.quick { 2 } else { 4 }))
                .collect(),
        )
    });
    let peer = if copy_out {
        None
    } else {
        peer_throughput(packets, bytes, repeats, p)
    };
    let ratio = gb / bare_gb.max(1e-9);
    let ratio_to_stamped = gb / stamped_gb.max(1e-9);
    let judged = if against == "stamped" {
        ratio_to_stamped
    } else {
        ratio
    };
    Ok(ThroughputRow {
        payload_bytes: bytes,
        capacity,
        footprint_bytes: footprint,
        copy_out,
        packets,
        msgs_per_s: median(mps),
        gb_per_s: gb,
        bare_gb_per_s: bare_gb,
        ratio_to_bare: ratio,
        stamped_gb_per_s: stamped_gb,
        ratio_to_stamped,
        records_gb_per_s: records_gb,
        ratio_to_records: gb / records_gb.max(1e-9),
        goal,
        goal_against: against,
        verdict: verdict(judged, goal),
        memcpy_gb_per_s: memcpy,
        ratio_to_memcpy: memcpy.map(|m| gb / m),
        errors,
        iceoryx2_gb_per_s: peer.map(|p| p.1),
        iceoryx2_msgs_per_s: peer.map(|p| p.0),
    })
}

impl Config {
    /// Refuse what the command line's options would refuse, saying what is allowed.
    pub fn validate(&self) -> Result<(), BenchError> {
        use crate::check;
        check::range("repeats", self.repeats, 1, 50)?;
        Ok(())
    }
}

/// One throughput row: payload bytes, ring capacity in packets, packets, whether the consumer
/// copies out, the goal, and the reference the goal is judged against.
type RowConfig = (u64, u64, u64, bool, Option<f64>, &'static str);

/// Run the stream benchmark.
pub fn run(c: &Config, p: &mut dyn Progress) -> Result<StreamReport, BenchError> {
    c.validate()?;
    if c.repeats == 0 {
        return Err(BenchError::config("repeats", 0, "at least 1"));
    }
    let repeats = if c.quick { 1 } else { c.repeats };
    let scale = if c.quick { 20 } else { 1 };
    // every writer of this process (the latency rows) publishes light from its first commit,
    // not only once the registration for it has finished (about 10 ms after the first claim)
    let _ = rtloop_stream::prepare_light_publication(Duration::from_secs(1));
    let _pm = if c.pm_qos {
        Some(sys::hold_cpu_dma_latency().context("--pm-qos")?)
    } else {
        None
    };
    // throughput: HMF's 8 KiB packets in a 195 MiB ring (DRAM-bound), the same packets in
    // a 131-packet (1 MiB) ring (cache-resident, the iceoryx2 peer's footprint), and small
    // messages in small rings; then the 195 MiB ring with every packet copied out.
    // Every commit is stamped (part of the stream's contract), so small messages, where the
    // stamp is most of the cost, are judged against the bare ring that stamps each commit.
    let configs: [RowConfig; 5] = [
        (8192, 24989, 400_000, false, Some(0.9), "bare"),
        (8192, 131, 400_000, false, Some(0.9), "bare"),
        (1024, 1024, 2_000_000, false, None, "bare"),
        (64, 4096, 5_000_000, false, Some(0.9), "stamped"),
        (8192, 24989, 400_000, true, None, "bare"),
    ];
    let mut rows = Vec::new();
    for (bytes, capacity, packets, copy_out, goal, against) in configs {
        let row = (bytes, capacity, packets / scale, copy_out, goal, against);
        rows.push(throughput_row(c, repeats, row, p)?);
    }
    // latency: the parent pins itself to cpu0, echo processes run on cpu1
    let _ = sys::pin_to_cpu(0);
    p.note("reference: cache-line ping-pong between two processes ...");
    // the bare reference: one-way = RTT/2 of a cache-line ping-pong between two processes
    let bare = rtloop_lab::reference::bare_pingpong(if c.quick { 20_000 } else { 200_000 }, None)?;
    p.note("latency: stream ping-pong, spinning ...");
    let spin = stream_pingpong(
        if c.quick { 5_000 } else { 100_000 },
        Duration::from_secs(5),
    )?;
    p.note("reference: futex ping-pong between two processes, both asleep at once ...");
    let futex = rtloop_lab::reference::bare_futex_pingpong(if c.quick { 300 } else { 5_000 })?;
    p.note("latency: stream ping-pong, blocking (futex, no spin) ...");
    let block = stream_pingpong(if c.quick { 300 } else { 5_000 }, Duration::ZERO)?;
    let wake = wake_sweep(if c.quick { 300 } else { 3_000 }, p)?;
    let peer_lat = peer_latency(if c.quick { 5_000 } else { 100_000 }, p);
    let _ = sys::allow_all_cpus();
    let (spin_ref, sleep_ref) = (bare.summary(), futex.summary());
    let lat =
        |name: &str, h: &LatencyHistogram, method, (reference, r): (&'static str, &Summary)| {
            let s = h.summary();
            let ratio = s.p50_ns as f64 / r.p50_ns.max(1) as f64;
            let (goal, verdict) = latency_goal(name, &s, ratio, c.pm_qos);
            LatencyRow {
                name: name.into(),
                method,
                summary: s,
                reference,
                reference_p50_ns: r.p50_ns,
                ratio_p50_to_reference: ratio,
                reference_p99_ns: r.p99_ns,
                ratio_p99_to_reference: s.p99_ns as f64 / r.p99_ns.max(1) as f64,
                goal,
                verdict,
            }
        };
    let pingpong = ("cache-line ping-pong", &spin_ref);
    let futex_pingpong = ("futex ping-pong", &sleep_ref);
    let latency = vec![
        lat(
            "cache-line ping-pong (reference)",
            &bare,
            "two processes, two AtomicU64 on own lines; one-way = RTT/2",
            pingpong,
        ),
        lat(
            "stream, spin",
            &spin,
            "two streams A->B echo, reader spins, every sample stamped with the time it was made (the caller's stamp); one-way = RTT/2",
            pingpong,
        ),
        lat(
            "futex ping-pong (reference)",
            &futex,
            "the same two processes, two futex words on own lines, each side asleep at once until the other stores and wakes it; one-way = RTT/2",
            futex_pingpong,
        ),
        lat(
            "stream, blocking",
            &block,
            "two streams A->B echo, reader sleeps on the futex at once, caller-stamped; one-way = RTT/2",
            futex_pingpong,
        ),
    ]
    .into_iter()
    .chain(peer_lat.as_ref().map(|h| {
        lat(
            "iceoryx2, spin (peer)",
            h,
            "two services A->B echo, both sides poll receive(); one-way = RTT/2",
            pingpong,
        )
    }))
    .collect::<Vec<_>>();
    let report = StreamReport {
        machine: Machine {
            cpus: sys::online_cpus(),
            pm_qos: c.pm_qos,
        },
        repeats,
        throughput: rows,
        latency,
        wake_sweep: wake,
        out: c.out.clone(),
    };
    if let Some(dir) = &c.out {
        write_outputs(dir, &report, [&bare, &spin, &futex, &block])?;
    }
    Ok(report)
}

/// results.json (the report, keys sorted as `json()` prints them) and the charts.
fn write_outputs(
    dir: &std::path::Path,
    r: &StreamReport,
    [bare, spin, futex, block]: [&LatencyHistogram; 4],
) -> Result<(), BenchError> {
    crate::write_results(dir, &r.json()?)?;
    // short labels (the bars share the x axis): the row under the stream's bar, then its
    // references in the order the title names them
    let mut bars = Vec::new();
    for r in &r.throughput {
        // five rows of four bars share the axis: "8K 195M", "64B 256K", "8K copy"
        let ring = ring_size(r.footprint_bytes)
            .replace(".0 ", "")
            .replace(' ', "")
            .replace("iB", "");
        let label = if r.copy_out {
            format!("{} copy", payload_short(r.payload_bytes))
        } else {
            format!("{} {ring}", payload_short(r.payload_bytes))
        };
        bars.push((label, r.gb_per_s));
        bars.push(("bare".into(), r.bare_gb_per_s));
        bars.push(("+stamp".into(), r.stamped_gb_per_s));
        bars.push(("+rec".into(), r.records_gb_per_s));
        if let Some(m) = r.memcpy_gb_per_s {
            bars.push(("memcpy".into(), m));
        }
    }
    rtloop_metrics::charts::bar_chart_png(
        &dir.join("throughput.png"),
        "each row: stream, bare ring doing the same work, + stamps (+stamp), + records (+rec)",
        "GB/s",
        &bars,
        rtloop_metrics::charts::Axis::Linear,
        None,
    )?;
    for (file, title, h) in [
        (
            "latency-reference.png",
            "cache-line ping-pong one-way (reference)",
            bare,
        ),
        ("latency-spin.png", "stream one-way latency, spin", spin),
        (
            "latency-futex-reference.png",
            "futex ping-pong one-way (reference for blocking)",
            futex,
        ),
        (
            "latency-blocking.png",
            "stream one-way latency, blocking",
            block,
        ),
    ] {
        // x axis to twice the p99.9 in 200 bins, so the body of each histogram is visible
        rtloop_metrics::charts::latency_histogram_png(&dir.join(file), title, h)?;
    }
    Ok(())
}

impl StreamReport {
    /// The report as the JSON `--json` prints and results.json holds (object keys sorted).
    pub fn json(&self) -> Result<serde_json::Value, BenchError> {
        Ok(serde_json::to_value(self)?)
    }

    /// The tables the command prints.
    #[must_use]
    pub fn table(&self) -> String {
        let mut s = String::new();
        s += "\nthroughput: one producer and one consumer process on CPUs 0 and 1, lossless, one publication per packet, the consumer checks each packet's first word in place (or copies every packet out); reference: a bare single-producer single-consumer ring in shared memory doing the same (same processes, CPUs, slot size, footprint, copy and check), same run\n";
        s += "bare + stamps: the same bare ring also stamping every packet from the writer's clock (in brackets: its rate over the bare ring's, what stamping costs); stream / bare + stamps is what the stream costs beyond its stamps\n";
        s += "bare + records: the same bare ring also keeping the records a stream keeps per packet (overwrite marker, stamp from the writer's clock, heartbeat, commit count, sleepers checks); stream / bare + records is what the stream costs beyond them\n";
        s += "iceoryx2 peer: same payloads and counts, subscriber buffer of 128 samples (about 1 MiB at 8 KiB)\n";
        let mut t = Table::new(&[
            "payload",
            "ring",
            "consumer",
            "Mmsg/s",
            "GB/s",
            "bare ring GB/s",
            "stream / bare",
            "goal",
            "verdict",
            "bare + stamps GB/s",
            "stream / bare + stamps",
            "bare + records GB/s",
            "stream / bare + records",
            "memcpy same set",
            "iceoryx2 GB/s",
            "errors",
        ]);
        for r in &self.throughput {
            t.row(&[
                format!("{} B", r.payload_bytes),
                ring_size(r.footprint_bytes),
                if r.copy_out {
                    "copies out"
                } else {
                    "checks in place"
                }
                .to_owned(),
                format!("{:.2}", r.msgs_per_s / 1e6),
                format!("{:.2}", r.gb_per_s),
                format!("{:.2}", r.bare_gb_per_s),
                format!("{:.2}x", r.ratio_to_bare),
                r.goal.map_or_else(
                    || "-".into(),
                    |g| {
                        if r.goal_against == "stamped" {
                            format!(">= {g}x bare + stamps")
                        } else {
                            format!(">= {g}x")
                        }
                    },
                ),
                r.verdict.to_owned(),
                format!(
                    "{:.2} ({:.2}x)",
                    r.stamped_gb_per_s,
                    r.stamped_gb_per_s / r.bare_gb_per_s.max(1e-9)
                ),
                format!("{:.2}x", r.ratio_to_stamped),
                format!("{:.2}", r.records_gb_per_s),
                format!("{:.2}x", r.ratio_to_records),
                r.memcpy_gb_per_s.map_or_else(
                    || "-".into(),
                    |m| format!("{m:.2} ({:.2}x)", r.gb_per_s / m),
                ),
                r.iceoryx2_gb_per_s
                    .map_or_else(|| "-".into(), |p| format!("{p:.2}")),
                r.errors.to_string(),
            ]);
        }
        s += &t.render();
        let _ = writeln!(
            s,
            "\none-way latency (RTT/2); each row against the same hand-off without a ring: the cache-line ping-pong (spinning rows), the futex ping-pong (the blocking row)"
        );
        let mut t = Table::new(&[
            "path",
            "n",
            "p50",
            "p99",
            "p99.9",
            "max",
            "reference",
            "p50 / ref",
            "p99 / ref",
            "goal",
            "verdict",
        ]);
        for l in &self.latency {
            let m = l.summary;
            t.row(&[
                l.name.clone(),
                m.count.to_string(),
                fmt_ns(m.p50_ns),
                fmt_ns(m.p99_ns),
                fmt_ns(m.p999_ns),
                fmt_ns(m.max_ns),
                l.reference.to_owned(),
                format!("{:.2}x", l.ratio_p50_to_reference),
                format!("{:.2}x", l.ratio_p99_to_reference),
                l.goal.clone(),
                l.verdict.to_owned(),
            ]);
        }
        s += &t.render();
        let _ = writeln!(
            s,
            "\nspin, then sleep: samples after random gaps (uniform 0-100 us), the reader spinning S us before it sleeps on the futex; the hop from the writer's commit to the reader having the sample"
        );
        let mut t = Table::new(&[
            "spin S",
            "gaps < S",
            "n",
            "p50",
            "p99",
            "p99.9",
            "reader CPU, % of a core",
        ]);
        for w in &self.wake_sweep {
            let m = w.summary;
            t.row(&[
                format!("{} us", w.spin_us),
                format!("{:.0} %", w.caught_spinning_percent),
                m.count.to_string(),
                fmt_ns(m.p50_ns),
                fmt_ns(m.p99_ns),
                fmt_ns(m.p999_ns),
                format!("{:.1}", w.reader_cpu_percent),
            ]);
        }
        s += &t.render();
        if let Some(dir) = &self.out {
            let _ = writeln!(s, "results and charts: {}", dir.display());
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_met_only_at_its_goal_and_sizes_read_as_the_table_shows_them() {
        assert_eq!(verdict(0.95, Some(0.9)), "met");
        assert_eq!(verdict(0.85, Some(0.9)), "not met");
        assert_eq!(verdict(0.1, None), "-");
        let s = |p50_ns, p99_ns| Summary {
            p50_ns,
            p99_ns,
            ..LatencyHistogram::new().summary()
        };
        // spin: p50 at most 1.5x the ping-pong; blocking: p99 <= 30 us, judged only without
        // --pm-qos; other rows have no goal
        assert_eq!(
            latency_goal("stream, spin", &s(82, 90), 1.49, false).1,
            "met"
        );
        assert_eq!(
            latency_goal("stream, spin", &s(90, 90), 1.64, false).1,
            "not met"
        );
        assert_eq!(
            latency_goal("stream, blocking", &s(1, 30_000), 9.0, false).1,
            "met"
        );
        assert_eq!(
            latency_goal("stream, blocking", &s(1, 30_001), 9.0, false).1,
            "not met"
        );
        assert_eq!(
            latency_goal("stream, blocking", &s(1, 1), 9.0, true),
            ("-".into(), "-")
        );
        assert_eq!(
            latency_goal("iceoryx2, spin (peer)", &s(1, 1), 9.0, false).1,
            "-"
        );
        assert_eq!(ring_size(8192 * 24989), "195 MiB");
        assert_eq!(ring_size(8192 * 131), "1.0 MiB");
        assert_eq!(ring_size(64 * 4096), "256 KiB");
        assert_eq!(payload_short(8192), "8K");
        assert_eq!(payload_short(64), "64B");
    }
}
