//! `rtloop bench stream`: stream throughput and hand-off latency, each next to a reference
//! measured in the same run — single-thread memcpy bandwidth for throughput, a bare
//! cache-line ping-pong between two processes for latency — and the ratio (docs/design.md §7).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use rtloop_metrics::{fmt_ns, LatencyHistogram, Summary, Table};
use rtloop_stream::{DType, ReaderMode, Stream, StreamConfig};
use rtloop_sys as sys;
use serde::Serialize;

use crate::Global;

/// Benchmarks.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Stream throughput (8 KiB packets, 1 KiB and 64 B messages, 1..P pairs) against
    /// single-thread memcpy, and one-way latency (spin and blocking) against a cache-line
    /// ping-pong between the same two cores, all measured in this run.
    Stream(StreamBenchArgs),
    /// The FieldTrip FAQ buffer benchmark against `rtloop serve`: values/s written and read
    /// for chans x samples 32x16 ... 256x256, and the time per write over block sizes 1..1000,
    /// over TCP, the UNIX socket and in-process (the FAQ's "dma").
    Fieldtrip(crate::cmd_bench_fieldtrip::FieldTripBenchArgs),
    /// Where an acquisition pipeline's ceiling is: each stage alone (generation, stream write,
    /// stream read with 1..R readers, processing, recorder to disk with fsync, network out over
    /// a UNIX socket, TCP and the FieldTrip server) and all together, against a profile's data
    /// rate; the recorder against its own writes without it (same files, blocks, flush and
    /// fsync cadence, same directory) measured in the same run.
    Pipeline(crate::cmd_bench_pipeline::PipelineArgs),
    /// The tick runtime's targets against same-run references: tick-start jitter against a
    /// bare timer loop (same clock, policy, core), an empty Python module's cost per tick,
    /// the UDP echo model at 810 packets of 1472 bytes per 1 ms tick against plain loopback
    /// UDP, and the numerical load example inside a 1 ms tick.
    Runtime(crate::cmd_bench_runtime::RuntimeBenchArgs),
    /// rtloop's stream beside LSL, ZeroMQ (ipc, tcp), a plain UNIX socket and iceoryx2 in
    /// one run: int16 384 ch at 30 kHz in chunks of 1, 16 and 256 samples, one writer and 1
    /// and 4 readers, each its own process; one-way latency (p50/p99/p99.9/max) of chunks
    /// paced at the sample rate, then sustained throughput (the slowest reader) with the
    /// writer flat out. Throughput as a ratio to LSL's; the stream's p99 beside the lowest
    /// peer's. LSL and ZeroMQ are their C libraries as the pylsl and pyzmq wheels ship them.
    Peers(crate::cmd_bench_peers::PeersArgs),
}

/// Options of `rtloop bench stream`.
#[derive(Debug, Clone, clap::Args)]
pub struct StreamBenchArgs {
    /// Short runs (for smoke tests): fewer packets, rounds and repeats.
    #[arg(long)]
    pub quick: bool,
    /// Runs per figure; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub repeats: u32,
    /// Hold /dev/cpu_dma_latency at 0 during the run (keeps idle CPUs out of deep sleep).
    #[arg(long)]
    pub pm_qos: bool,
    /// Write results.json and PNG charts into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Run a benchmark.
pub fn run(c: BenchCommand, g: &Global) -> anyhow::Result<()> {
    match c {
        BenchCommand::Stream(a) => stream_bench(&a, g),
        BenchCommand::Fieldtrip(a) => crate::cmd_bench_fieldtrip::run(&a, g),
        BenchCommand::Pipeline(a) => crate::cmd_bench_pipeline::run(&a, g),
        BenchCommand::Runtime(a) => crate::cmd_bench_runtime::run(&a, g),
        BenchCommand::Peers(a) => crate::cmd_bench_peers::run(&a, g),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
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

/// One throughput row: the stream and the bare ring moving the same packets the same way.
#[derive(Debug, Clone, Serialize)]
struct ThroughputRow {
    payload_bytes: u64,
    capacity: u64,
    footprint_bytes: u64,
    /// The consumer copies every packet out (else it checks the first word in place).
    copy_out: bool,
    packets: u64,
    msgs_per_s: f64,
    gb_per_s: f64,
    /// The bare single-producer single-consumer ring, same processes, CPUs, slots,
    /// footprint and check, same run.
    bare_gb_per_s: f64,
    ratio_to_bare: f64,
    /// The target for `ratio_to_bare`, where there is one.
    goal: Option<f64>,
    /// "met" only when `ratio_to_bare` reaches `goal`.
    verdict: &'static str,
    /// memcpy of the same working set (copy-out rows).
    memcpy_gb_per_s: Option<f64>,
    ratio_to_memcpy: Option<f64>,
    errors: u64,
    /// iceoryx2 publish/subscribe, same payload and count, same run (in-place rows).
    iceoryx2_gb_per_s: Option<f64>,
    iceoryx2_msgs_per_s: Option<f64>,
}

/// "met" only when the figure reaches its goal.
fn verdict(ratio: f64, goal: Option<f64>) -> &'static str {
    match goal {
        Some(g) if ratio >= g => "met",
        Some(_) => "not met",
        None => "-",
    }
}

#[derive(Debug, Clone, Serialize)]
struct LatencyRow {
    name: String,
    method: &'static str,
    summary: Summary,
    reference_p50_ns: u64,
    ratio_p50_to_reference: f64,
}

/// One-way = RTT/2 through two streams: we write `i` to A, the echo process waits for it
/// (spinning for `spin`, then on the futex) and writes it to B, we wait for it on B.
fn stream_pingpong(rounds: u64, spin: Duration) -> anyhow::Result<LatencyHistogram> {
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
        r.set_spin(spin);
        let (mut child, _out) = rtloop_launch::spawn_ready(&StreamEchoRole {
            from: a.clone(),
            to: b.clone(),
            spin_us: spin.as_micros() as u64,
            cpu: Some(1),
        })?;
        let mut h = LatencyHistogram::new();
        let mut buf = [0u8; 8];
        let warm = (rounds / 10).max(10);
        for i in 1..=rounds + warm {
            let t0 = sys::monotonic_ns();
            w.write(&[i])?;
            r.wait_available(1, Some(Duration::from_secs(10)))?;
            r.pull_into(&mut buf, None, 1)?;
            let t1 = sys::monotonic_ns();
            anyhow::ensure!(
                u64::from_ne_bytes(buf) == i,
                "echo returned {} for {i}",
                u64::from_ne_bytes(buf)
            );
            if i > warm {
                h.record((t1 - t0) / 2);
            }
        }
        w.write(&[u64::MAX])?;
        child.wait()?;
        Ok(h)
    })();
    let _ = Stream::remove(&a);
    let _ = Stream::remove(&b);
    result
}

/// The echo process of the stream ping-pong: samples of stream `from` back into `to`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StreamEchoRole {
    /// The stream read.
    pub from: String,
    /// The stream written.
    pub to: String,
    /// Microseconds the reader spins before sleeping.
    pub spin_us: u64,
    /// The CPU to pin to.
    pub cpu: Option<usize>,
}

impl rtloop_launch::ChildRole for StreamEchoRole {
    const NAME: &'static str = "pp-stream-echo";
}

/// Run [`StreamEchoRole`] until it reads `u64::MAX`.
pub fn stream_echo_role(role: &StreamEchoRole) -> anyhow::Result<()> {
    if let Some(c) = role.cpu {
        let _ = sys::pin_to_cpu(c);
    }
    let (a, b) = (&role.from, &role.to);
    let spin = role.spin_us;
    let mut r = Stream::open(a)?.reader(ReaderMode::Latest)?;
    r.set_spin(Duration::from_micros(spin));
    let mut w = Stream::open(b)?.writer()?;
    rtloop_launch::ready();
    let mut buf = [0u8; 8];
    loop {
        r.wait_available(1, Some(Duration::from_secs(30)))?;
        r.pull_into(&mut buf, None, 1)?;
        let v = u64::from_ne_bytes(buf);
        if v == u64::MAX {
            return Ok(());
        }
        w.write(&[v])?;
    }
}

#[cfg(feature = "iceoryx2-peer")]
fn peer_throughput(
    packets: u64,
    bytes: u64,
    repeats: u32,
    say: &dyn Fn(&str),
) -> Option<(f64, f64)> {
    say(&format!("peer: iceoryx2 {bytes} B x {packets} ..."));
    let mut runs = Vec::new();
    for _ in 0..repeats {
        match crate::peer_iceoryx2::throughput(packets, bytes as usize) {
            Ok(r) => runs.push(r),
            Err(e) => {
                eprintln!("warning: iceoryx2 peer run failed: {e:#}");
                return None;
            }
        }
    }
    Some((
        median(runs.iter().map(|r| r.0).collect()),
        median(runs.iter().map(|r| r.1).collect()),
    ))
}

#[cfg(not(feature = "iceoryx2-peer"))]
fn peer_throughput(_: u64, _: u64, _: u32, _: &dyn Fn(&str)) -> Option<(f64, f64)> {
    None
}

#[cfg(feature = "iceoryx2-peer")]
fn peer_latency(rounds: u64, say: &dyn Fn(&str)) -> Option<LatencyHistogram> {
    say("peer: iceoryx2 ping-pong, spinning ...");
    crate::peer_iceoryx2::pingpong(rounds)
        .map_err(|e| eprintln!("warning: iceoryx2 peer latency failed: {e:#}"))
        .ok()
}

#[cfg(not(feature = "iceoryx2-peer"))]
fn peer_latency(_: u64, _: &dyn Fn(&str)) -> Option<LatencyHistogram> {
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

fn stream_bench(a: &StreamBenchArgs, g: &Global) -> anyhow::Result<()> {
    let repeats = if a.quick { 1 } else { a.repeats };
    let scale = if a.quick { 20 } else { 1 };
    let _pm = if a.pm_qos {
        Some(sys::hold_cpu_dma_latency().context("--pm-qos")?)
    } else {
        None
    };
    let say = |s: &str| {
        if !g.json {
            eprintln!("{s}");
        }
    };
    // throughput: HMF's 8 KiB packets in a 195 MiB ring (DRAM-bound), the same packets in
    // a 131-packet (1 MiB) ring (cache-resident, the iceoryx2 peer's footprint), and small
    // messages in small rings; then the 195 MiB ring with every packet copied out. Each row
    // runs the stream and the bare ring alternately, `repeats` times each.
    let configs: [(u64, u64, u64, bool, Option<f64>); 5] = [
        (8192, 24989, 400_000, false, Some(0.9)),
        (8192, 131, 400_000, false, Some(0.9)),
        (1024, 1024, 2_000_000, false, None),
        (64, 4096, 5_000_000, false, Some(0.7)),
        (8192, 24989, 400_000, true, None),
    ];
    let mut rows = Vec::new();
    for (bytes, capacity, packets, copy_out, goal) in configs {
        let packets = packets / scale;
        let footprint = bytes * capacity;
        say(&format!(
            "throughput: {bytes} B x {packets}, ring {}{}: stream and bare ring, {repeats} runs each ...",
            ring_size(footprint),
            if copy_out { ", consumer copies every packet out" } else { "" }
        ));
        let mut gbs = Vec::new();
        let mut mps = Vec::new();
        let mut bare = Vec::new();
        let mut errors = 0;
        for k in 0..repeats {
            for ring in [
                rtloop_peers::spsc::Ring::Stream,
                rtloop_peers::spsc::Ring::Bare,
            ] {
                let r = rtloop_peers::spsc::run_pair(&rtloop_peers::spsc::PairConfig {
                    ring,
                    name: format!("bench-spsc-{}-{k}", sys::pid()),
                    packet_bytes: bytes,
                    capacity,
                    packets,
                    copy_out,
                })?;
                errors += r.errors + (packets - r.ok - r.errors);
                if ring == rtloop_peers::spsc::Ring::Stream {
                    gbs.push(r.gb_per_s);
                    mps.push(r.packets_per_s);
                } else {
                    bare.push(r.gb_per_s);
                }
            }
        }
        let (gb, bare_gb) = (median(gbs), median(bare));
        let memcpy = copy_out.then(|| {
            say(&format!(
                "reference: memcpy of the same {} working set ...",
                ring_size(footprint)
            ));
            median(
                (0..repeats.max(3))
                    .map(|_| memcpy_gbps(footprint as usize, if a.quick { 2 } else { 4 }))
                    .collect(),
            )
        });
        let peer = if copy_out {
            None
        } else {
            peer_throughput(packets, bytes, repeats, &say)
        };
        let ratio = gb / bare_gb.max(1e-9);
        rows.push(ThroughputRow {
            payload_bytes: bytes,
            capacity,
            footprint_bytes: footprint,
            copy_out,
            packets,
            msgs_per_s: median(mps),
            gb_per_s: gb,
            bare_gb_per_s: bare_gb,
            ratio_to_bare: ratio,
            goal,
            verdict: verdict(ratio, goal),
            memcpy_gb_per_s: memcpy,
            ratio_to_memcpy: memcpy.map(|m| gb / m),
            errors,
            iceoryx2_gb_per_s: peer.map(|p| p.1),
            iceoryx2_msgs_per_s: peer.map(|p| p.0),
        });
    }
    // latency: the parent pins itself to cpu0, echo processes run on cpu1
    let _ = sys::pin_to_cpu(0);
    say("reference: cache-line ping-pong between two processes ...");
    // the bare reference: one-way = RTT/2 of a cache-line ping-pong between two processes
    let bare = rtloop_lab::reference::bare_pingpong(if a.quick { 20_000 } else { 200_000 }, None)?;
    say("latency: stream ping-pong, spinning ...");
    let spin = stream_pingpong(
        if a.quick { 5_000 } else { 100_000 },
        Duration::from_secs(5),
    )?;
    say("latency: stream ping-pong, blocking (futex, no spin) ...");
    let block = stream_pingpong(if a.quick { 300 } else { 5_000 }, Duration::ZERO)?;
    let peer_lat = peer_latency(if a.quick { 5_000 } else { 100_000 }, &say);
    let _ = sys::allow_all_cpus();
    let reference = bare.summary();
    let lat = |name: &str, h: &LatencyHistogram, method| {
        let s = h.summary();
        LatencyRow {
            name: name.into(),
            method,
            summary: s,
            reference_p50_ns: reference.p50_ns,
            ratio_p50_to_reference: s.p50_ns as f64 / reference.p50_ns.max(1) as f64,
        }
    };
    let latency = vec![
        lat(
            "cache-line ping-pong (reference)",
            &bare,
            "two processes, two AtomicU64 on own lines; one-way = RTT/2",
        ),
        lat(
            "stream, spin",
            &spin,
            "two streams A->B echo, reader spins; one-way = RTT/2",
        ),
        lat(
            "stream, blocking",
            &block,
            "two streams A->B echo, reader sleeps on the futex at once; one-way = RTT/2",
        ),
    ]
    .into_iter()
    .chain(peer_lat.as_ref().map(|h| {
        lat(
            "iceoryx2, spin (peer)",
            h,
            "two services A->B echo, both sides poll receive(); one-way = RTT/2",
        )
    }))
    .collect::<Vec<_>>();
    let results = serde_json::json!({
        "machine": { "cpus": sys::online_cpus(), "pm_qos": a.pm_qos },
        "repeats": repeats,
        "throughput": rows,
        "latency": latency,
    });
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(
            dir.join("results.json"),
            serde_json::to_string_pretty(&results)?,
        )?;
        // short labels: the bars share the x axis
        let mut bars = Vec::new();
        for r in &rows {
            let label = format!(
                "{} {}{}",
                payload_short(r.payload_bytes),
                ring_size(r.footprint_bytes),
                if r.copy_out { " copy" } else { "" }
            );
            bars.push((label.clone(), r.gb_per_s));
            bars.push((format!("{label} bare"), r.bare_gb_per_s));
            if let Some(m) = r.memcpy_gb_per_s {
                bars.push((format!("memcpy {}", ring_size(r.footprint_bytes)), m));
            }
        }
        rtloop_metrics::charts::bar_chart_png(
            &dir.join("throughput.png"),
            "stream beside the bare SPSC ring doing the same work (payload, ring size); same run",
            "GB/s",
            &bars,
            rtloop_metrics::charts::Axis::Linear,
            None,
        )?;
        for (file, title, h) in [
            (
                "latency-reference.png",
                "cache-line ping-pong one-way (reference)",
                &bare,
            ),
            ("latency-spin.png", "stream one-way latency, spin", &spin),
            (
                "latency-blocking.png",
                "stream one-way latency, blocking",
                &block,
            ),
        ] {
            // x axis to twice the p99.9 in 200 bins, so the body of each histogram is visible
            rtloop_metrics::charts::latency_histogram_png(&dir.join(file), title, h)?;
        }
    }
    if g.json {
        println!("{results}");
        return Ok(());
    }
    println!("\nthroughput: one producer and one consumer process on CPUs 0 and 1, lossless, one publication per packet, the consumer checks each packet's first word in place (or copies every packet out); reference: a bare single-producer single-consumer ring in shared memory doing the same (same processes, CPUs, slot size, footprint, copy and check), same run");
    println!("iceoryx2 peer: same payloads and counts, subscriber buffer of 128 samples (about 1 MiB at 8 KiB)");
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
        "memcpy same set",
        "iceoryx2 GB/s",
        "errors",
    ]);
    for r in &rows {
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
            r.goal.map_or_else(|| "-".into(), |g| format!(">= {g}x")),
            r.verdict.to_owned(),
            r.memcpy_gb_per_s.map_or_else(
                || "-".into(),
                |m| format!("{m:.2} ({:.2}x)", r.gb_per_s / m),
            ),
            r.iceoryx2_gb_per_s
                .map_or_else(|| "-".into(), |p| format!("{p:.2}")),
            r.errors.to_string(),
        ]);
    }
    print!("{}", t.render());
    println!(
        "\none-way latency (RTT/2), reference: cache-line ping-pong p50 {}",
        fmt_ns(reference.p50_ns)
    );
    let mut t = Table::new(&["path", "n", "p50", "p99", "p99.9", "max", "p50 / reference"]);
    for l in &latency {
        let s = l.summary;
        t.row(&[
            l.name.clone(),
            s.count.to_string(),
            fmt_ns(s.p50_ns),
            fmt_ns(s.p99_ns),
            fmt_ns(s.p999_ns),
            fmt_ns(s.max_ns),
            format!("{:.2}x", l.ratio_p50_to_reference),
        ]);
    }
    print!("{}", t.render());
    if let Some(dir) = &a.out {
        println!("results and charts: {}", dir.display());
    }
    Ok(())
}
