//! The peers benchmark (`rtloop bench peers`): rtloop's stream beside the transports labs use today — LSL, ZeroMQ
//! (ipc and tcp), a plain UNIX socket and iceoryx2 — measured in one run on this machine,
//! with the same data (int16, 384 channels, 30 kHz by default), the same chunk sizes and
//! reader counts, each writer and reader its own process (`rtloop child peer-writer` /
//! `peer-reader`). Per trial: one-way latency of chunks paced at the real rate, then
//! sustained throughput with the writer going flat out (the slowest reader's rate). The
//! peers are the references (docs/design.md §7): throughput is reported as a ratio to LSL's, and
//! the stream's p99 latency beside the lowest peer p99.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rtloop_launch::ChildRole as _;
use rtloop_metrics::{fmt_ns, LatencyHistogram, Summary, Table};
use rtloop_peers::run::{ReaderReport, ReaderRole, WriterReport, WriterRole};
use rtloop_peers::{Transport, Trial, Wait};
use serde::{Deserialize, Serialize};

use crate::{BenchError, Context, Progress};

type Result<T, E = BenchError> = std::result::Result<T, E>;

/// What to run.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Transports to compare (None: all; those whose library is missing are listed as not
    /// measured). Named here, a missing one is an error.
    pub transports: Option<Vec<Transport>>,
    /// Samples per chunk (one send).
    pub chunks: Vec<usize>,
    /// Reader processes.
    pub readers: Vec<usize>,
    /// Channels per sample (int16).
    pub channels: usize,
    /// Sample rate the latency phase is paced at, Hz.
    pub rate: f64,
    /// How readers wait.
    pub wait: Vec<WaitChoice>,
    /// Rounds: every figure is measured this many times, the transports of a configuration
    /// taking turns. Latencies of all rounds are pooled; throughput is the median round.
    pub rounds: u32,
    /// Seconds of the paced latency phase per figure, over all rounds.
    pub seconds: f64,
    /// Chunks the latency phase sends at least, over all rounds.
    pub min_chunks: u64,
    /// Seconds of the flat-out throughput phase per round.
    pub throughput_seconds: f64,
    /// When readers block: how long the stream's readers spin before sleeping, µs.
    pub stream_spin_us: u64,
    /// Short phases (0.3 s, at least 50 chunks): a smoke test, not a measurement.
    pub quick: bool,
    /// Write results.json, table.md and PNG plots into this directory.
    pub out: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            transports: None,
            chunks: vec![1, 16, 256],
            readers: vec![1, 4],
            channels: 384,
            rate: 30_000.0,
            wait: vec![WaitChoice::Auto],
            rounds: 3,
            seconds: 6.0,
            min_chunks: 1000,
            throughput_seconds: 0.5,
            stream_spin_us: 0,
            quick: false,
            out: None,
        }
    }
}

/// How readers wait, as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitChoice {
    /// Spin when every reader can have a core of its own (readers < CPUs), else block.
    Auto,
    /// Each transport's blocking wait.
    Block,
    /// Poll without blocking.
    Spin,
}

impl WaitChoice {
    fn resolve(self, readers: usize) -> Wait {
        match self {
            WaitChoice::Block => Wait::Block,
            WaitChoice::Spin => Wait::Spin,
            WaitChoice::Auto if readers < rtloop_sys::online_cpus() => Wait::Spin,
            WaitChoice::Auto => Wait::Block,
        }
    }
}

/// One transport at one chunk size, reader count and wait: every round together.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Row {
    /// The transport.
    pub transport: Transport,
    /// Samples per chunk.
    pub chunk: usize,
    /// Reader processes.
    pub readers: usize,
    /// How they waited.
    pub wait: Wait,
    /// The slowest reader's sustained rate, median over rounds.
    pub samples_per_s: f64,
    pub mb_per_s: f64,
    /// `samples_per_s` / the nominal rate.
    pub x_realtime: f64,
    /// This row's throughput over LSL's at the same chunk, readers and wait.
    pub x_lsl: Option<f64>,
    /// Each round's slowest-reader rate, MB/s.
    pub rounds_mb_per_s: Vec<f64>,
    /// Every reader's paced-chunk latencies, every round.
    pub latency: Summary,
    pub lost: u64,
    pub errors: u64,
    /// Readers that never saw the end chunk (gave up idle).
    pub unfinished: u64,
    /// The writer's worst lateness against the paced schedule.
    pub writer_late_max_ns: u64,
    pub latency_chunks: u64,
}

/// A row being filled round by round.
struct Cell {
    t: Trial,
    hist: LatencyHistogram,
    row: Row,
}

impl Cell {
    fn new(t: Trial) -> Cell {
        Cell {
            row: Row {
                transport: t.transport,
                chunk: t.chunk,
                readers: t.readers,
                wait: t.wait,
                samples_per_s: 0.0,
                mb_per_s: 0.0,
                x_realtime: 0.0,
                x_lsl: None,
                rounds_mb_per_s: Vec::new(),
                latency: LatencyHistogram::new().summary(),
                lost: 0,
                errors: 0,
                unfinished: 0,
                writer_late_max_ns: 0,
                latency_chunks: 0,
            },
            t,
            hist: LatencyHistogram::new(),
        }
    }

    /// Add one round's reports; returns this round's slowest-reader rate (samples/s).
    fn add(&mut self, w: &WriterReport, rs: &[ReaderReport]) -> f64 {
        let mut slowest = f64::INFINITY;
        for r in rs {
            self.hist.merge(&r.histogram());
            let secs = r.throughput_last_ns.saturating_sub(w.throughput_start_ns) as f64 / 1e9;
            slowest = slowest.min(if secs > 0.0 {
                r.throughput_samples as f64 / secs
            } else {
                0.0
            });
        }
        let row = &mut self.row;
        row.rounds_mb_per_s
            .push(slowest * self.t.sample_bytes() as f64 / 1e6);
        row.lost += rs.iter().map(|r| r.lost).sum::<u64>();
        row.errors += rs.iter().map(|r| r.errors).sum::<u64>();
        row.unfinished += rs.iter().filter(|r| !r.ended).count() as u64;
        row.writer_late_max_ns = row.writer_late_max_ns.max(w.late_max_ns);
        row.latency_chunks += w.latency_chunks;
        slowest
    }

    fn finish(mut self) -> Row {
        let mut v = self.row.rounds_mb_per_s.clone();
        v.sort_by(f64::total_cmp);
        let mb = v.get(v.len() / 2).copied().unwrap_or(0.0);
        let r = &mut self.row;
        r.mb_per_s = mb;
        r.samples_per_s = mb * 1e6 / self.t.sample_bytes() as f64;
        r.x_realtime = r.samples_per_s / self.t.rate;
        r.latency = self.hist.summary();
        self.row
    }
}

/// The stream's p99 beside the lowest peer p99 under one configuration.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LatencyCompare {
    /// Samples per chunk.
    pub chunk: usize,
    /// Reader processes.
    pub readers: usize,
    /// How they waited.
    pub wait: Wait,
    /// The stream's p99.
    pub stream_p99_ns: u64,
    /// The peer with the lowest p99.
    pub lowest_peer: Transport,
    /// Its p99.
    pub lowest_peer_p99_ns: u64,
    /// The stream's p99 is lower.
    pub stream_lower: bool,
}

/// The targets, met or not.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Verdict {
    /// min over chunk sizes, reader counts and waits of stream / LSL throughput
    pub min_throughput_x_lsl: Option<f64>,
    pub throughput_target_10x_lsl_met: Option<bool>,
    /// per chunk size, reader count and wait: the stream's p99 and the lowest peer p99
    pub latency_p99: Vec<LatencyCompare>,
    pub latency_target_lowest_p99_met: Option<bool>,
}

/// A transport and what it is here.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Peer {
    pub transport: Transport,
    /// Library, version and where it was loaded from.
    pub library: Option<String>,
    /// Why it was not measured.
    pub not_measured: Option<String>,
}

/// What the peers benchmark measured.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PeersReport {
    /// The machine (`sys-info`'s line).
    pub machine: String,
    /// Channels per sample.
    pub channels: usize,
    /// Sample rate, Hz.
    pub rate: f64,
    /// Bytes per sample.
    pub sample_bytes: usize,
    /// Rounds per figure.
    pub rounds: u32,
    /// what each transport is (library and version) or why it was not measured
    pub transports: Vec<Peer>,
    /// One row per transport and configuration.
    pub rows: Vec<Row>,
    /// The targets.
    pub verdict: Verdict,
    /// Where results.json, table.md and the plots were written.
    #[serde(skip)]
    pub out: Option<PathBuf>,
}

/// A child process of the trial with its piped input and output.
struct Proc {
    out: BufReader<ChildStdout>,
    input: Option<ChildStdin>,
    role: String,
}

impl Proc {
    fn line(&mut self) -> Result<String> {
        let mut l = String::new();
        self.out.read_line(&mut l)?;
        if l.is_empty() {
            return Err(BenchError::Child {
                child: self.role.to_string(),
                problem: "ended without a word (see its error above)".into(),
            });
        }
        Ok(l.trim().to_string())
    }
}

/// The trial's children, killed by a watchdog if the trial overruns its deadline.
struct Children {
    procs: Arc<Mutex<Vec<Child>>>,
    done: Arc<AtomicBool>,
    overran: Arc<AtomicBool>,
}

impl Children {
    fn new(deadline: Duration) -> Children {
        let procs: Arc<Mutex<Vec<Child>>> = Arc::default();
        let done = Arc::new(AtomicBool::new(false));
        let overran = Arc::new(AtomicBool::new(false));
        let (p, d, o) = (procs.clone(), done.clone(), overran.clone());
        std::thread::spawn(move || {
            let end = Instant::now() + deadline;
            // SYNC: Relaxed: flags between this thread and the trial, no data published.
            while !d.load(Ordering::Relaxed) {
                if Instant::now() >= end {
                    o.store(true, Ordering::Relaxed);
                    for c in p.lock().expect("not poisoned").iter_mut() {
                        let _ = c.kill();
                    }
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Children {
            procs,
            done,
            overran,
        }
    }

    fn spawn<R: rtloop_launch::ChildRole>(&self, role: &R) -> Result<Proc> {
        let mut c = rtloop_launch::command(role)?
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", R::NAME))?;
        let p = Proc {
            out: BufReader::new(c.stdout.take().context("child stdout")?),
            input: c.stdin.take(),
            role: R::NAME.to_string(),
        };
        self.procs.lock().expect("not poisoned").push(c);
        Ok(p)
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        // SYNC: Relaxed: tells the watchdog to stop; nothing is published with it.
        self.done.store(true, Ordering::Relaxed);
        for c in self.procs.lock().expect("not poisoned").iter_mut() {
            // a child still running 2 s after its trial failed or ended: stop it
            let end = Instant::now() + Duration::from_secs(2);
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Run one trial: the writer, its readers, their reports.
fn trial(t: &Trial) -> Result<(WriterReport, Vec<ReaderReport>)> {
    let deadline = Duration::from_secs_f64(t.latency_seconds + t.throughput_seconds + 90.0);
    let kids = Children::new(deadline);
    let mut w = kids.spawn(&rtloop_peers::run::WriterRole { trial: t.clone() })?;
    let endpoint: String = rtloop_launch::wait_ready(WriterRole::NAME, &mut w.out)?;
    let mut readers = Vec::new();
    for _ in 0..t.readers {
        let mut r = kids.spawn(&rtloop_peers::run::ReaderRole {
            trial: t.clone(),
            endpoint: endpoint.clone(),
        })?;
        rtloop_launch::wait_ready::<()>(ReaderRole::NAME, &mut r.out)?;
        readers.push(r);
    }
    let mut input = w.input.take().context("writer stdin")?;
    writeln!(input, "go")?;
    let wr: WriterReport = serde_json::from_str(&w.line()?).context("the writer's report")?;
    let mut rr = Vec::new();
    for r in &mut readers {
        rr.push(serde_json::from_str::<ReaderReport>(&r.line()?).context("a reader's report")?);
    }
    writeln!(input, "quit")?;
    drop(input);
    // SYNC: Relaxed: a flag; the children it killed are seen through their pipes, not it.
    if kids.overran.load(Ordering::Relaxed) {
        return Err(BenchError::Overran(deadline));
    }
    Ok((wr, rr))
}

/// Rows measured under the same conditions as `x` (chunk, readers, wait).
fn same_config(x: &Row, y: &Row) -> bool {
    x.chunk == y.chunk && x.readers == y.readers && x.wait == y.wait
}

fn verdict(rows: &mut [Row]) -> Verdict {
    let lsl: Vec<Row> = rows
        .iter()
        .filter(|x| x.transport == Transport::Lsl)
        .cloned()
        .collect();
    for x in rows.iter_mut() {
        x.x_lsl = lsl
            .iter()
            .find(|l| same_config(l, x) && l.samples_per_s > 0.0)
            .map(|l| x.samples_per_s / l.samples_per_s);
    }
    let stream: Vec<&Row> = rows
        .iter()
        .filter(|x| x.transport == Transport::Stream)
        .collect();
    let ratios: Vec<f64> = stream.iter().filter_map(|x| x.x_lsl).collect();
    let min_ratio = (!ratios.is_empty() && ratios.len() == stream.len())
        .then(|| ratios.iter().copied().fold(f64::INFINITY, f64::min));
    let mut lat = Vec::new();
    let mut lowest_everywhere = true;
    for s in &stream {
        let best = rows
            .iter()
            .filter(|x| x.transport != Transport::Stream && same_config(x, s))
            .min_by_key(|x| x.latency.p99_ns);
        if let Some(b) = best {
            let lower = s.latency.p99_ns < b.latency.p99_ns;
            lowest_everywhere &= lower;
            lat.push(LatencyCompare {
                chunk: s.chunk,
                readers: s.readers,
                wait: s.wait,
                stream_p99_ns: s.latency.p99_ns,
                lowest_peer: b.transport,
                lowest_peer_p99_ns: b.latency.p99_ns,
                stream_lower: lower,
            });
        }
    }
    Verdict {
        min_throughput_x_lsl: min_ratio,
        throughput_target_10x_lsl_met: min_ratio.map(|r| r >= 10.0),
        latency_target_lowest_p99_met: (!lat.is_empty()).then_some(lowest_everywhere),
        latency_p99: lat,
    }
}

/// The cells of a row, for the terminal table and the Markdown one.
fn row_cells(r: &Row) -> Vec<String> {
    vec![
        r.chunk.to_string(),
        r.readers.to_string(),
        r.wait.to_string(),
        r.transport.to_string(),
        format!("{:.1}", r.mb_per_s),
        format!("{:.1}", r.x_realtime),
        r.x_lsl.map_or_else(|| "-".into(), |x| format!("{x:.1}x")),
        fmt_ns(r.latency.p50_ns),
        fmt_ns(r.latency.p99_ns),
        fmt_ns(r.latency.p999_ns),
        fmt_ns(r.latency.max_ns),
        (r.lost + r.errors).to_string(),
    ]
}

const HEADER: [&str; 12] = [
    "chunk",
    "readers",
    "wait",
    "transport",
    "MB/s",
    "x real time",
    "x LSL",
    "p50",
    "p99",
    "p99.9",
    "max",
    "lost+errors",
];

fn markdown(rep: &PeersReport) -> String {
    let mut s = format!(
        "Machine: {}. Data: int16 x {} channels ({} B per sample) at {} Hz; {} round(s) per figure.\n\n| {} |\n|{}\n",
        rep.machine,
        rep.channels,
        rep.sample_bytes,
        rep.rate,
        rep.rounds,
        HEADER.join(" | "),
        "---|".repeat(HEADER.len())
    );
    for r in &rep.rows {
        s += &format!("| {} |\n", row_cells(r).join(" | "));
    }
    s
}

/// Two log-log plots per reader count and wait (a line per transport, the same colour in
/// each): `throughput-N-readers-WAIT.png` and `latency-p99-N-readers-WAIT.png`.
fn plots(dir: &std::path::Path, rep: &PeersReport) -> Result<()> {
    let mut groups: Vec<(usize, Wait)> = Vec::new();
    for r in &rep.rows {
        if !groups.contains(&(r.readers, r.wait)) {
            groups.push((r.readers, r.wait));
        }
    }
    for (readers, wait) in groups {
        let mut names = Vec::new();
        let mut tput = Vec::new();
        let mut p99 = Vec::new();
        for p in rep.transports.iter().filter(|p| p.library.is_some()) {
            let rows: Vec<&Row> = rep
                .rows
                .iter()
                .filter(|x| (x.transport, x.readers, x.wait) == (p.transport, readers, wait))
                .collect();
            names.push(p.transport.to_string());
            tput.push(
                rows.iter()
                    .map(|x| (x.chunk as f64, x.mb_per_s))
                    .collect::<Vec<_>>(),
            );
            p99.push(
                rows.iter()
                    .map(|x| (x.chunk as f64, x.latency.p99_ns as f64 / 1e3))
                    .collect::<Vec<_>>(),
            );
        }
        let who = format!(
            "{readers} reader{} ({wait})",
            if readers == 1 { "" } else { "s" }
        );
        for (file, title, y, v) in [
            (
                format!("throughput-{readers}-readers-{wait}.png"),
                format!("sustained throughput, slowest of {who}"),
                "MB/s",
                &tput,
            ),
            (
                format!("latency-p99-{readers}-readers-{wait}.png"),
                format!("one-way latency p99 at the sample rate, {who}"),
                "p99 (µs)",
                &p99,
            ),
        ] {
            let refs: Vec<(&str, &[(f64, f64)])> = names
                .iter()
                .zip(v.iter())
                .map(|(n, p)| (n.as_str(), p.as_slice()))
                .collect();
            rtloop_metrics::charts::loglog_png(
                &dir.join(&file),
                &title,
                "samples per chunk",
                y,
                &refs,
                &[],
            )
            .with_context(|| file.clone())?;
        }
    }
    Ok(())
}

impl Config {
    /// Refuse what the command line's options would refuse, saying what is allowed.
    pub fn validate(&self) -> Result<(), BenchError> {
        use crate::check;
        // chunk, reader, channel and rate ranges are the trials' own checks
        // (rtloop_peers::Trial::validate), which `run` makes before anything starts
        check::non_empty("chunks", self.chunks.len())?;
        check::non_empty("readers", self.readers.len())?;
        if self.wait.is_empty() {
            return Err(BenchError::config(
                "wait",
                "[]",
                "one or more of auto, block, spin",
            ));
        }
        check::range("rounds", self.rounds, 1, 20)?;
        check::positive("seconds", self.seconds)?;
        check::positive("throughput_seconds", self.throughput_seconds)?;
        check::range("stream_spin_us", self.stream_spin_us, 0, 10_000)?;
        if self.min_chunks > 1_000_000 {
            return Err(BenchError::config(
                "min_chunks",
                self.min_chunks,
                "allowed 0 to 1000000",
            ));
        }
        Ok(())
    }
}

/// Run the peers benchmark.
pub fn run(a: &Config, progress: &mut dyn Progress) -> Result<PeersReport> {
    a.validate()?;
    let (seconds, tput_seconds, min_chunks) = if a.quick {
        (0.3, 0.3, 50)
    } else {
        (a.seconds, a.throughput_seconds, a.min_chunks)
    };
    let explicit = a.transports.is_some();
    let mut wanted = a
        .transports
        .clone()
        .unwrap_or_else(|| Transport::ALL.to_vec());
    let mut seen = std::collections::HashSet::new();
    wanted.retain(|t| seen.insert(*t));
    // the configurations, in order; every setting is checked before anything starts
    let mut configs = Vec::new();
    for &chunk in &a.chunks {
        for &readers in &a.readers {
            let mut waits: Vec<Wait> = a.wait.iter().map(|w| w.resolve(readers)).collect();
            waits.dedup();
            for wait in waits {
                let t = Trial {
                    transport: Transport::Stream,
                    channels: a.channels,
                    rate: a.rate,
                    chunk,
                    readers,
                    wait,
                    // the latency phase holds at least --min-chunks chunks over all rounds
                    latency_seconds: (seconds.max(min_chunks as f64 * chunk as f64 / a.rate))
                        / f64::from(a.rounds),
                    throughput_seconds: tput_seconds,
                    tag: String::new(),
                    stream_spin_us: a.stream_spin_us,
                };
                // a setting out of range is the config's error, as `validate`'s are
                t.validate()?;
                configs.push(t);
            }
        }
    }
    let mut transports = Vec::new();
    for transport in wanted {
        let (library, not_measured) = match transport.check_available() {
            Ok(l) => (Some(l), None),
            Err(e) if explicit => return Err(e.into()),
            Err(e) => (None, Some(e.to_string())),
        };
        transports.push(Peer {
            transport,
            library,
            not_measured,
        });
    }
    for p in &transports {
        match (&p.library, &p.not_measured) {
            (Some(l), _) => progress.note(&format!("peers: {:<9} {l}", p.transport)),
            (_, e) => progress.note(&format!(
                "peers: {:<9} NOT MEASURED: {}",
                p.transport,
                e.as_deref().unwrap_or("?")
            )),
        }
    }
    let measured: Vec<Transport> = transports
        .iter()
        .filter(|p| p.library.is_some())
        .map(|p| p.transport)
        .collect();
    let mut cells: Vec<Cell> = configs
        .iter()
        .flat_map(|c| {
            measured.iter().map(|&transport| {
                Cell::new(Trial {
                    transport,
                    ..c.clone()
                })
            })
        })
        .collect();
    let total = cells.len() * a.rounds as usize;
    let mut k = 0;
    for round in 0..a.rounds as usize {
        // each round takes the transports of a configuration in another order, so none is
        // always measured right after the same neighbour
        for group in cells.chunks_mut(measured.len().max(1)) {
            let n = group.len();
            for i in 0..n {
                let cell = &mut group[(i + round) % n];
                k += 1;
                let t = Trial {
                    tag: format!("{}-{k}", std::process::id()),
                    ..cell.t.clone()
                };
                let (w, rs) = trial(&t).with_context(|| {
                    format!(
                        "{}, chunk {}, {} readers, {} (round {})",
                        t.transport,
                        t.chunk,
                        t.readers,
                        t.wait,
                        round + 1
                    )
                })?;
                let rate = cell.add(&w, &rs);
                let mut h = LatencyHistogram::new();
                rs.iter().for_each(|r| h.merge(&r.histogram()));
                let l = h.summary();
                let bad: u64 = rs.iter().map(|r| r.lost + r.errors).sum();
                progress.note(&format!(
                    "peers: [{k}/{total}] {:<9} chunk {:>4}, {} reader{} ({}): {:>8.1} MB/s ({:.1}x real time), latency p50 {} p99 {} p99.9 {}{}",
                    t.transport,
                    t.chunk,
                    t.readers,
                    if t.readers == 1 { " " } else { "s" },
                    t.wait,
                    rate * t.sample_bytes() as f64 / 1e6,
                    rate / t.rate,
                    fmt_ns(l.p50_ns),
                    fmt_ns(l.p99_ns),
                    fmt_ns(l.p999_ns),
                    if bad > 0 { format!(", {bad} LOST OR CORRUPTED") } else { String::new() }
                ));
            }
        }
    }
    let mut rows: Vec<Row> = cells.into_iter().map(Cell::finish).collect();
    let verdict = verdict(&mut rows);
    let rep = PeersReport {
        machine: crate::machine::machine_line(),
        channels: a.channels,
        rate: a.rate,
        sample_bytes: a.channels * rtloop_peers::ITEMSIZE,
        rounds: a.rounds,
        transports,
        rows,
        verdict,
        out: a.out.clone(),
    };
    if let Some(dir) = &a.out {
        crate::write_results(dir, &rep)?;
        std::fs::write(dir.join("table.md"), markdown(&rep))?;
        plots(dir, &rep)?;
    }
    Ok(rep)
}

impl PeersReport {
    /// The table and verdict lines the command prints.
    #[must_use]
    pub fn table(&self) -> String {
        let rep = self;
        let mut s = String::new();
        let _ = writeln!(s, "machine: {}", rep.machine);
        let mut t = Table::new(&HEADER);
        for r in &rep.rows {
            t.row(&row_cells(r));
        }
        s += &t.render();
        let v = &rep.verdict;
        let _ = match v.min_throughput_x_lsl {
            Some(r) => writeln!(
                s,
                "throughput: the stream is at least {r:.1}x LSL at every chunk size, reader count and wait (target 10x: {})",
                if r >= 10.0 { "met" } else { "NOT met" }
            ),
            None => writeln!(s, "throughput: no stream/LSL pair measured"),
        };
        for l in &v.latency_p99 {
            let _ = writeln!(
                s,
                "latency p99, chunk {}, {} readers ({}): stream {} vs lowest peer {} ({}){}",
                l.chunk,
                l.readers,
                l.wait,
                fmt_ns(l.stream_p99_ns),
                fmt_ns(l.lowest_peer_p99_ns),
                l.lowest_peer,
                if l.stream_lower {
                    ""
                } else {
                    "  <- stream NOT lowest"
                }
            );
        }
        if let Some(dir) = &self.out {
            let _ = writeln!(s, "wrote {}", dir.display());
        }
        s
    }
}

rtloop_launch::register_role!(rtloop_peers::run::WriterRole, writer_role);
rtloop_launch::register_role!(rtloop_peers::run::ReaderRole, reader_role);

/// The writer of a trial (rtloop_peers::run::writer_role) on this process's stdin and
/// stdout.
pub fn writer_role(role: &rtloop_peers::run::WriterRole) -> Result<()> {
    rtloop_peers::run::writer_role(
        &role.trial,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout(),
    )?;
    Ok(())
}

/// A reader of a trial.
pub fn reader_role(role: &rtloop_peers::run::ReaderRole) -> Result<()> {
    rtloop_peers::run::reader_role(&role.trial, &role.endpoint, &mut std::io::stdout())?;
    Ok(())
}
