//! `rtloop bench fieldtrip`: the FieldTrip FAQ's buffer benchmark ("How fast is the FieldTrip
//! buffer?") against `rtloop serve` — samples/s written and read for the FAQ's
//! channels x samples blocks, and the time per write over block sizes 1..1000 — over TCP,
//! over the UNIX socket and in-process (the FAQ's "dma": no socket).
//!
//! "Samples" are counted as the FAQ counts them: channel values (float32) per second.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rtloop_fieldtrip::{Buffer, BufferConfig, Client};
use rtloop_metrics::{fmt_ns, LatencyHistogram, Summary, Table};
use serde::Serialize;

use crate::Global;

/// The FAQ table's blocks (channels, samples).
pub const FAQ_BLOCKS: [(u32, u32); 6] = [
    (32, 16),
    (32, 64),
    (32, 256),
    (64, 256),
    (128, 256),
    (256, 256),
];
/// The FAQ's best in-process ("dma") figure: 8,894,464 values/s (PowerBook G4, 64x256).
pub const FAQ_BEST_DMA: f64 = 8_894_464.0;
const FLOAT32: u32 = 9;

/// Options of `rtloop bench fieldtrip`.
#[derive(Debug, Clone, clap::Args)]
pub struct FieldTripBenchArgs {
    /// Short runs (smoke tests): 0.1 s per cell and fewer latency rounds.
    #[arg(long)]
    pub quick: bool,
    /// Seconds per cell of the throughput table.
    #[arg(long, default_value_t = 1.0, value_parser = crate::cmd_demo::positive_f64)]
    pub seconds: f64,
    /// Transports to measure (comma-separated): tcp, unix, inproc.
    #[arg(long, default_value = "tcp,unix,inproc", value_delimiter = ',', value_parser = ["tcp", "unix", "inproc"])]
    pub transports: Vec<String>,
    /// Also measure writes with a new connection per request (old MATLAB clients; the FAQ's
    /// "tcp stateless").
    #[arg(long)]
    pub stateless: bool,
    /// Channels of the latency-per-write curve (the FAQ's plots use 64).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub latency_channels: u32,
    /// Writes timed per block size of the latency curve.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(10..=1_000_000))]
    pub rounds: u32,
    /// Server and clients poll this many microseconds before sleeping (`rtloop serve
    /// --spin-us`); 0 measures the default, sleeping at once.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub spin_us: u64,
    /// Write results.json and PNG plots into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One transport's way in: a client factory.
enum Target {
    Socket(String, Duration),
    InProcess(Arc<Buffer>),
}

impl Target {
    fn client(&self) -> Result<Client> {
        Ok(match self {
            Target::Socket(a, spin) => {
                let mut c = Client::connect(a)?;
                c.set_spin(*spin);
                c
            }
            Target::InProcess(b) => Client::in_process(b.clone()),
        })
    }
}

/// `rtloop serve` in its own process, stopped on drop.
struct ServerProcess {
    child: Child,
    tcp: String,
    unix: String,
    dir: PathBuf,
}

impl ServerProcess {
    fn start(stream: &str, spin_us: u64) -> Result<ServerProcess> {
        let dir = std::env::temp_dir().join(format!("rtloop-ftbench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let sock = dir.join("ft.sock");
        let mut child = crate::self_command()
            .args(["serve", "--bind", "127.0.0.1:0", "--unix"])
            .arg(&sock)
            .args(["--stream", stream, "--log-level", "error", "--spin-us"])
            .arg(spin_us.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start `rtloop serve`")?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().context("server stdout")?).read_line(&mut line)?;
        let field = |k: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .map(str::to_owned)
        };
        let (Some(tcp), Some(unix)) = (field("tcp="), field("unix=")) else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("`rtloop serve` did not start: {line:?}");
        };
        Ok(ServerProcess {
            child,
            tcp,
            unix: format!("unix:{unix}"),
            dir,
        })
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[derive(Debug, Clone, Serialize)]
struct FaqRow {
    transport: String,
    channels: u32,
    samples: u32,
    /// Values (channels x samples) per second written, one connection.
    write_values_per_s: f64,
    /// Values per second read (GET_DAT of blocks of the same size), one connection.
    read_values_per_s: f64,
    /// Values per second written with a new connection per request, if measured.
    stateless_write_values_per_s: Option<f64>,
    write_requests: u64,
    read_requests: u64,
}

#[derive(Debug, Clone, Serialize)]
struct LatencyPoint {
    transport: String,
    channels: u32,
    samples: u32,
    write: Summary,
}

#[derive(Debug, Serialize)]
struct Report {
    seconds_per_cell: f64,
    spin_us: u64,
    faq_best_dma_values_per_s: f64,
    faq: Vec<FaqRow>,
    latency: Vec<LatencyPoint>,
}

fn block(ch: u32, s: u32) -> Vec<u8> {
    (0..ch * s).flat_map(|i| (i as f32).to_ne_bytes()).collect()
}

/// Write blocks for `secs`; returns (requests, elapsed).
fn write_for(c: &mut Client, ch: u32, data: &[u8], secs: f64) -> Result<(u64, f64)> {
    let t = Instant::now();
    let mut n = 0u64;
    loop {
        for _ in 0..16 {
            c.put_data_bytes(ch, FLOAT32, data, true)?;
            n += 1;
        }
        let e = t.elapsed().as_secs_f64();
        if e >= secs {
            return Ok((n, e));
        }
    }
}

fn faq_cell(
    target: &Target,
    name: &str,
    ch: u32,
    s: u32,
    secs: f64,
    stateless: bool,
) -> Result<FaqRow> {
    let mut c = target.client()?;
    c.put_header(ch, 1000.0, FLOAT32, &[])?;
    let data = block(ch, s);
    let values = f64::from(ch * s);
    // warm-up, then writes
    write_for(&mut c, ch, &data, secs / 10.0)?;
    let (wn, we) = write_for(&mut c, ch, &data, secs)?;
    // reads: blocks of the same size, walking through what the buffer keeps
    let h = c.get_header()?;
    // the protocol never says how much the server keeps; rtloop serve keeps >= 500000
    // samples of up to 256 float32 channels by default
    let kept = u64::from(h.def.nsamples).min(500_000);
    let oldest = u64::from(h.def.nsamples) - kept;
    let span = kept.saturating_sub(u64::from(s)).max(1);
    let mut out = Vec::new();
    let t = Instant::now();
    let mut rn = 0u64;
    let re = loop {
        for _ in 0..16 {
            let b = oldest + (rn * u64::from(s)) % span;
            c.get_data_into(Some((b as u32, (b + u64::from(s) - 1) as u32)), &mut out)?;
            rn += 1;
        }
        let e = t.elapsed().as_secs_f64();
        if e >= secs {
            break e;
        }
    };
    let stateless_rate = if stateless {
        if let Target::Socket(..) = target {
            let t = Instant::now();
            let mut n = 0u64;
            while t.elapsed().as_secs_f64() < secs {
                let mut c = target.client()?;
                c.put_data_bytes(ch, FLOAT32, &data, true)?;
                n += 1;
            }
            Some(n as f64 * values / t.elapsed().as_secs_f64())
        } else {
            None
        }
    } else {
        None
    };
    Ok(FaqRow {
        transport: name.to_owned(),
        channels: ch,
        samples: s,
        write_values_per_s: wn as f64 * values / we,
        read_values_per_s: rn as f64 * values / re,
        stateless_write_values_per_s: stateless_rate,
        write_requests: wn,
        read_requests: rn,
    })
}

fn latency_curve(target: &Target, name: &str, ch: u32, rounds: u32) -> Result<Vec<LatencyPoint>> {
    let mut c = target.client()?;
    c.put_header(ch, 1000.0, FLOAT32, &[])?;
    let mut points = Vec::new();
    for s in [1u32, 2, 5, 10, 20, 50, 100, 200, 500, 1000] {
        let data = block(ch, s);
        let mut h = LatencyHistogram::new();
        for i in 0..rounds + rounds / 10 {
            let t = Instant::now();
            c.put_data_bytes(ch, FLOAT32, &data, true)?;
            if i >= rounds / 10 {
                h.record(t.elapsed().as_nanos() as u64);
            }
        }
        points.push(LatencyPoint {
            transport: name.to_owned(),
            channels: ch,
            samples: s,
            write: h.summary(),
        });
    }
    Ok(points)
}

fn msps(v: f64) -> String {
    format!("{:.2}", v / 1e6)
}

/// Run the benchmark.
pub fn run(a: &FieldTripBenchArgs, g: &Global) -> Result<()> {
    let secs = if a.quick { 0.1 } else { a.seconds };
    let rounds = if a.quick { 100 } else { a.rounds };
    let stream = format!("ftbench-{}", std::process::id());
    let wants = |t: &str| a.transports.iter().any(|x| x == t);
    let server = if wants("tcp") || wants("unix") {
        Some(ServerProcess::start(&stream, a.spin_us)?)
    } else {
        None
    };
    let spin = Duration::from_micros(a.spin_us);
    let mut targets: Vec<(&str, Target)> = Vec::new();
    if let Some(s) = &server {
        if wants("tcp") {
            targets.push(("tcp", Target::Socket(s.tcp.clone(), spin)));
        }
        if wants("unix") {
            targets.push(("unix", Target::Socket(s.unix.clone(), spin)));
        }
    }
    let inproc_stream = format!("ftbench-inproc-{}", std::process::id());
    if wants("inproc") {
        let mut cfg = BufferConfig::new(&inproc_stream);
        cfg.remove_on_drop = true;
        targets.push(("inproc", Target::InProcess(Arc::new(Buffer::new(cfg)))));
    }
    let cells = (targets.len() * (FAQ_BLOCKS.len() + 1)) as u64;
    // progress on stderr, also with --json and when piped
    let mut progress = crate::progress::Progress::new("bench fieldtrip");
    let mut done = 0u64;
    let mut faq = Vec::new();
    let mut latency = Vec::new();
    for (name, target) in &targets {
        for (ch, s) in FAQ_BLOCKS {
            progress.tick(|| format!("{done}/{cells} cells, now {name} {ch}x{s}"));
            faq.push(faq_cell(target, name, ch, s, secs, a.stateless)?);
            done += 1;
        }
        progress.tick(|| format!("{done}/{cells} cells, now {name} latency per write"));
        latency.extend(latency_curve(target, name, a.latency_channels, rounds)?);
        done += 1;
    }
    drop(progress);
    drop(targets);
    drop(server);
    let report = Report {
        seconds_per_cell: secs,
        spin_us: a.spin_us,
        faq_best_dma_values_per_s: FAQ_BEST_DMA,
        faq,
        latency,
    };
    if let Some(dir) = &a.out {
        write_outputs(dir, &report)?;
    }
    if g.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    print_tables(&report, a.stateless);
    if let Some(dir) = &a.out {
        println!(
            "\nwrote {}/results.json, faq_throughput.png, write_latency.png",
            dir.display()
        );
    }
    Ok(())
}

fn print_tables(r: &Report, stateless: bool) {
    println!("FieldTrip FAQ table: float32 values (channels x samples) per second, in millions");
    let mut head = vec![
        "transport",
        "chans x samples",
        "values/block",
        "write M/s",
        "read M/s",
    ];
    if stateless {
        head.push("write, new conn. each M/s");
    }
    head.push("write / FAQ best dma");
    let mut t = Table::new(&head);
    for row in &r.faq {
        let mut cells = vec![
            row.transport.clone(),
            format!("{}x{}", row.channels, row.samples),
            (row.channels * row.samples).to_string(),
            msps(row.write_values_per_s),
            msps(row.read_values_per_s),
        ];
        if stateless {
            cells.push(row.stateless_write_values_per_s.map_or("-".into(), msps));
        }
        cells.push(format!(
            "{:.1}x",
            row.write_values_per_s / r.faq_best_dma_values_per_s
        ));
        t.row(&cells);
    }
    println!("{}", t.render());
    println!(
        "(FAQ best in-process \"dma\": {:.2} M/s; the reference C server on this machine is compared by hand, see bench/README.md)\n",
        r.faq_best_dma_values_per_s / 1e6
    );
    if let Some(first) = r.latency.first() {
        println!(
            "Time per PUT_DAT (round trip, PUT_OK received), {} channels float32",
            first.channels
        );
    }
    let mut t = Table::new(&[
        "transport",
        "samples",
        "p50",
        "p99",
        "p99.9",
        "max",
        "values/s at p50",
    ]);
    for p in &r.latency {
        t.row(&[
            p.transport.clone(),
            p.samples.to_string(),
            fmt_ns(p.write.p50_ns),
            fmt_ns(p.write.p99_ns),
            fmt_ns(p.write.p999_ns),
            fmt_ns(p.write.max_ns),
            format!(
                "{:.3e}",
                f64::from(p.channels * p.samples) / (p.write.p50_ns.max(1) as f64 * 1e-9)
            ),
        ]);
    }
    println!("{}", t.render());
}

fn write_outputs(dir: &std::path::Path, r: &Report) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(dir.join("results.json"), serde_json::to_string_pretty(r)?)?;
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut transports: Vec<&str> = r.faq.iter().map(|x| x.transport.as_str()).collect();
    transports.dedup();
    for t in &transports {
        let rows: Vec<&FaqRow> = r.faq.iter().filter(|x| x.transport == *t).collect();
        series.push((
            format!("{t} write"),
            rows.iter()
                .map(|x| (f64::from(x.channels * x.samples), x.write_values_per_s))
                .collect(),
        ));
        series.push((
            format!("{t} read"),
            rows.iter()
                .map(|x| (f64::from(x.channels * x.samples), x.read_values_per_s))
                .collect(),
        ));
    }
    let refs: Vec<(&str, &[(f64, f64)])> = series
        .iter()
        .map(|(n, p)| (n.as_str(), p.as_slice()))
        .collect();
    rtloop_metrics::charts::loglog_png(
        &dir.join("faq_throughput.png"),
        "FieldTrip buffer throughput (FAQ blocks, float32)",
        "values per block (channels x samples)",
        "values per second",
        &refs,
    )?;
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for t in &transports {
        series.push((
            format!("{t} p50"),
            r.latency
                .iter()
                .filter(|p| p.transport == *t)
                .map(|p| (f64::from(p.samples), p.write.p50_ns as f64 / 1e3))
                .collect(),
        ));
    }
    let refs: Vec<(&str, &[(f64, f64)])> = series
        .iter()
        .map(|(n, p)| (n.as_str(), p.as_slice()))
        .collect();
    rtloop_metrics::charts::loglog_png(
        &dir.join("write_latency.png"),
        "Time per PUT_DAT",
        "samples per block",
        "microseconds (p50)",
        &refs,
    )?;
    Ok(())
}
