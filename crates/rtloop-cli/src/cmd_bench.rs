//! `rtloop bench`: the options of each benchmark, turned into its config; the benchmark
//! itself is rtloop-bench's, and its report is printed as a table or, with `--json`, as JSON.

use std::path::PathBuf;

use rtloop_bench::peers::WaitChoice;
use rtloop_fieldtrip::polling::Polling;
use rtloop_peers::Transport;

use crate::progress::BenchProgress;
use crate::Global;

/// Benchmarks.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Stream throughput (8 KiB packets in two ring sizes, 1 KiB and 64 B messages, and 8 KiB
    /// copied out) against a bare single-producer single-consumer ring doing the same work,
    /// one-way latency spinning against a cache-line ping-pong and blocking against a futex
    /// ping-pong between the same two processes and cores, and the reader's spin-then-sleep
    /// sweep, all measured in this run.
    Stream(StreamBenchArgs),
    /// The FieldTrip FAQ buffer benchmark against `rtloop serve`: values/s written and read
    /// for chans x samples 32x16 ... 256x256, and the time per write over block sizes 1..1000,
    /// over TCP, the UNIX socket and in-process (the FAQ's "dma").
    Fieldtrip(FieldTripBenchArgs),
    /// Where an acquisition pipeline's ceiling is: each stage alone (generation, stream write,
    /// stream read with 1..R readers, processing, recorder to disk with fsync, network out over
    /// a UNIX socket, TCP and the FieldTrip server) and all together, against a profile's data
    /// rate; the recorder against its own writes without it (same files, blocks, flush and
    /// fsync cadence, same directory) measured in the same run.
    Pipeline(PipelineArgs),
    /// The tick runtime's targets against same-run references: tick-start jitter against a
    /// bare timer loop (same clock, policy, core), an empty Python module's cost per tick,
    /// the UDP echo model at 810 packets of 1472 bytes per 1 ms tick against plain loopback
    /// UDP, and the numerical load example inside a 1 ms tick.
    Runtime(RuntimeBenchArgs),
    /// rtloop's stream beside LSL, ZeroMQ (ipc, tcp), a plain UNIX socket and iceoryx2 in
    /// one run: int16 384 ch at 30 kHz in chunks of 1, 16 and 256 samples, one writer and 1
    /// and 4 readers, each its own process; one-way latency (p50/p99/p99.9/max) of chunks
    /// paced at the sample rate, then sustained throughput (the slowest reader) with the
    /// writer flat out. Throughput as a ratio to LSL's; the stream's p99 beside the lowest
    /// peer's. LSL and ZeroMQ are their C libraries as the pylsl and pyzmq wheels ship them.
    Peers(PeersArgs),
    /// Internal: run benchmark NAME (stream, fieldtrip, pipeline, runtime, peers, verify)
    /// with the library's config as JSON and print its report as JSON; progress goes to
    /// stderr as `info: ...` and `warn: ...` lines. This is how `rtloop.bench` runs the
    /// benchmarks from Python: the native module does not link them.
    #[command(hide = true, name = "from-json")]
    FromJson(FromJsonArgs),
}

/// Arguments of the hidden `rtloop bench from-json`.
#[derive(Debug, Clone, clap::Args)]
pub struct FromJsonArgs {
    /// The benchmark: stream, fieldtrip, pipeline, runtime, peers or verify.
    pub name: String,
    /// Its config as a JSON object (the library's `Config` fields; unknown ones are refused).
    pub config: String,
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

/// Options of `rtloop bench fieldtrip`.
#[derive(Debug, Clone, clap::Args)]
pub struct FieldTripBenchArgs {
    /// Short runs (smoke tests): 0.02 s per cell in short turns and 1 to 100 latency
    /// rounds per size, none unrecorded; every row is there, the figures are rough.
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
    /// How `rtloop serve` waits for requests (its `--poll`): adaptive (its default), off, or
    /// microseconds to poll after every reply. The benchmark's client never polls.
    #[arg(long, default_value = "adaptive", value_parser = crate::cmd_serve::parse_polling)]
    pub poll: Polling,
    /// Leave the reference server out (it is measured over TCP only).
    #[arg(long)]
    pub no_reference: bool,
    /// Also measure another FieldTrip server at HOST:PORT (FieldTrip's own `buffer`, say) in
    /// the same run, with the same client; HOST:PORT@PID also counts its CPU per request.
    #[arg(long, value_name = "HOST:PORT[@PID]")]
    pub other: Option<String>,
    /// Write results.json and PNG plots into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Options of `rtloop bench pipeline`.
#[derive(Debug, Clone, clap::Args)]
pub struct PipelineArgs {
    /// neuropixels (384 ch x 30 kHz int16 per probe), intan64 (64 ch x 30 kHz int16), or
    /// custom (--channels, --rate, --dtype).
    #[arg(long, default_value = "neuropixels")]
    pub profile: String,
    /// Probes (neuropixels profile).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub probes: u64,
    /// Channels (custom profile).
    #[arg(long)]
    pub channels: Option<usize>,
    /// Sample rate, Hz (custom profile).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Value type (custom profile).
    #[arg(long, default_value = "int16")]
    pub dtype: String,
    /// Readers of the stream (processing steps running side by side).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=8))]
    pub readers: u64,
    /// Seconds per stage.
    #[arg(long, default_value_t = 2.0, value_parser = crate::cmd_demo::positive_f64)]
    pub seconds: f64,
    /// Short stages (smoke tests).
    #[arg(long)]
    pub quick: bool,
    /// Directory for the disk stages (default: the system temp dir); files are removed after.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Write results.json and pipeline.png into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Options of `rtloop bench runtime`.
#[derive(Debug, Clone, clap::Args)]
pub struct RuntimeBenchArgs {
    /// Seconds of 1 ms ticks for the jitter comparison (bare loop, then the model).
    #[arg(long, default_value_t = 60.0)]
    pub seconds: f64,
    /// Seconds for each of the other parts (empty module, UDP echo, numerics).
    #[arg(long, default_value_t = 10.0)]
    pub part_seconds: f64,
    /// Short runs (smoke test): half a second per part (the closed loop 1 s), 0.3 s per
    /// offered UDP rate.
    #[arg(long)]
    pub quick: bool,
    /// UDP packets offered per 1 ms tick to the echo model.
    #[arg(long, default_value_t = 810)]
    pub packets: u32,
    /// Skip the parts that need Python (empty module, numerics).
    #[arg(long)]
    pub no_python: bool,
    /// Write results.json, the reports and PNG histograms here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Options of `rtloop bench peers`.
#[derive(Debug, Clone, clap::Args)]
pub struct PeersArgs {
    /// Transports to compare, comma-separated (stream, lsl, zmq-ipc, zmq-tcp, unix,
    /// iceoryx2). Default: all; those whose library is missing are listed as not measured.
    /// Named here, a missing one is an error.
    #[arg(long, value_delimiter = ',')]
    pub transports: Option<Vec<Transport>>,
    /// Samples per chunk (one send), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 16, 256])]
    pub chunks: Vec<usize>,
    /// Reader processes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 4])]
    pub readers: Vec<usize>,
    /// Channels per sample (int16).
    #[arg(long, default_value_t = 384)]
    pub channels: usize,
    /// Sample rate the latency phase is paced at, Hz.
    #[arg(long, default_value_t = 30_000.0)]
    pub rate: f64,
    /// How readers wait, comma-separated: auto (spin when each reader can have a CPU of its
    /// own, that is readers < CPUs; block otherwise), block, spin.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [WaitArg::Auto])]
    pub wait: Vec<WaitArg>,
    /// Rounds: every figure is measured this many times, the transports of a configuration
    /// taking turns, so a moment of machine noise does not land on one transport only.
    /// Latencies of all rounds are pooled; throughput is the median round.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub rounds: u32,
    /// Seconds of the paced latency phase per figure, over all rounds (longer if
    /// --min-chunks needs it).
    #[arg(long, default_value_t = 6.0)]
    pub seconds: f64,
    /// Chunks the latency phase sends at least, over all rounds (for p99.9 of large chunks).
    #[arg(long, default_value_t = 1000)]
    pub min_chunks: u64,
    /// Seconds of the flat-out throughput phase per round.
    #[arg(long, default_value_t = 0.5)]
    pub throughput_seconds: f64,
    /// When readers block: how long the stream's readers (and its writer waiting for room)
    /// spin before sleeping on the futex, µs. 0 by default: with more processes than cores
    /// (that is when readers block), a spinning process takes the core another one needs.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub stream_spin_us: u64,
    /// Short phases (0.3 s, at least 50 chunks): a smoke test, not a measurement.
    #[arg(long)]
    pub quick: bool,
    /// Write results.json, table.md and PNG plots (throughput and p99 against chunk size, a
    /// pair per reader count: throughput-N-readers-WAIT.png, latency-p99-N-readers-WAIT.png)
    /// into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// How readers wait, as asked on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WaitArg {
    /// Spin when every reader can have a core of its own (readers < CPUs), else block.
    Auto,
    /// Each transport's blocking wait.
    Block,
    /// Poll without blocking.
    Spin,
}

impl From<WaitArg> for WaitChoice {
    fn from(w: WaitArg) -> Self {
        match w {
            WaitArg::Auto => WaitChoice::Auto,
            WaitArg::Block => WaitChoice::Block,
            WaitArg::Spin => WaitChoice::Spin,
        }
    }
}

/// Run a benchmark.
pub fn run(c: BenchCommand, g: &Global) -> anyhow::Result<()> {
    match c {
        BenchCommand::Stream(a) => stream(&a, g),
        BenchCommand::Fieldtrip(a) => fieldtrip(&a, g),
        BenchCommand::Pipeline(a) => pipeline(&a, g),
        BenchCommand::Runtime(a) => runtime(&a, g),
        BenchCommand::Peers(a) => peers(&a, g),
        BenchCommand::FromJson(a) => from_json(&a),
    }
}

/// Progress as lines a program can read: `info: WHAT` and `warn: WHAT` on stderr.
struct LineProgress;

impl rtloop_bench::Progress for LineProgress {
    fn note(&mut self, what: &str) {
        eprintln!("info: {what}");
    }
    fn step(&mut self, what: &str, done: u64, total: u64) {
        eprintln!("info: {what}: {done}/{total}");
    }
    fn warn(&mut self, what: &str) {
        eprintln!("warn: {what}");
    }
}

/// A config `rtloop bench from-json` was given that the benchmark refuses: the command exits
/// with 2 (a usage error), so `rtloop.bench` raises ValueError rather than RuntimeError.
#[derive(Debug)]
pub struct Refused(pub rtloop_bench::BenchError);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Refused {}

/// `rtloop bench from-json NAME CONFIG`.
fn from_json(a: &FromJsonArgs) -> anyhow::Result<()> {
    use rtloop_bench as b;
    use rtloop_bench::BenchError;

    fn refused(e: BenchError) -> anyhow::Error {
        if e.is_refusal() {
            Refused(e).into()
        } else {
            e.into()
        }
    }
    fn config<C: serde::de::DeserializeOwned>(name: &str, json: &str) -> anyhow::Result<C> {
        serde_json::from_str(json).map_err(|e| {
            refused(BenchError::config(
                format!("rtloop.bench.{name}"),
                "this JSON",
                e.to_string(),
            ))
        })
    }
    fn report(r: Result<impl serde::Serialize, BenchError>) -> anyhow::Result<()> {
        println!("{}", serde_json::to_string(&r.map_err(refused)?)?);
        Ok(())
    }
    let p = &mut LineProgress;
    let (name, json) = (a.name.as_str(), a.config.as_str());
    match name {
        "stream" => report(b::stream::run(&config(name, json)?, p)),
        "fieldtrip" => report(b::fieldtrip::run(&config(name, json)?, p)),
        "pipeline" => report(b::pipeline::run(&config(name, json)?, p)),
        "runtime" => report(b::runtime::run(&config(name, json)?, p)),
        "peers" => report(b::peers::run(&config(name, json)?, p)),
        "verify" => report(b::verify::run(&config(name, json)?, p)),
        other => Err(refused(BenchError::config(
            "benchmark",
            format!("{other:?}"),
            "one of stream, fieldtrip, pipeline, runtime, peers, verify",
        ))),
    }
}

/// Print `json` (pretty or compact), or else `table`.
fn render(
    g: &Global,
    json: impl FnOnce() -> anyhow::Result<String>,
    table: &str,
) -> anyhow::Result<()> {
    if g.json {
        println!("{}", json()?);
    } else {
        print!("{table}");
    }
    Ok(())
}

fn stream(a: &StreamBenchArgs, g: &Global) -> anyhow::Result<()> {
    let c = rtloop_bench::stream::Config {
        quick: a.quick,
        repeats: a.repeats,
        pm_qos: a.pm_qos,
        out: a.out.clone(),
    };
    let r = rtloop_bench::stream::run(&c, &mut BenchProgress::notes(g.json))?;
    render(g, || Ok(r.json()?.to_string()), &r.table())
}

fn fieldtrip(a: &FieldTripBenchArgs, g: &Global) -> anyhow::Result<()> {
    let c = rtloop_bench::fieldtrip::Config {
        quick: a.quick,
        seconds: a.seconds,
        transports: a.transports.clone(),
        stateless: a.stateless,
        latency_channels: a.latency_channels,
        rounds: a.rounds,
        poll: a.poll.to_string(),
        no_reference: a.no_reference,
        other: a.other.clone(),
        out: a.out.clone(),
    };
    // progress on stderr, also with --json and when piped
    let mut p = BenchProgress::with_line("bench fieldtrip", g.json, |what, done, total, _| {
        format!("{done}/{total} {what}")
    });
    let r = rtloop_bench::fieldtrip::run(&c, &mut p)?;
    drop(p);
    render(g, || Ok(serde_json::to_string_pretty(&r)?), &r.table())
}

fn pipeline(a: &PipelineArgs, g: &Global) -> anyhow::Result<()> {
    let c = rtloop_bench::pipeline::Config {
        profile: a.profile.clone(),
        probes: a.probes,
        channels: a.channels,
        rate: a.rate,
        dtype: a.dtype.clone(),
        readers: a.readers,
        seconds: a.seconds,
        quick: a.quick,
        dir: a.dir.clone(),
        out: a.out.clone(),
    };
    let r = rtloop_bench::pipeline::run(&c, &mut BenchProgress::notes(g.json))?;
    render(g, || Ok(serde_json::to_string_pretty(&r)?), &r.table())
}

fn runtime(a: &RuntimeBenchArgs, g: &Global) -> anyhow::Result<()> {
    let c = rtloop_bench::runtime::Config {
        seconds: a.seconds,
        part_seconds: a.part_seconds,
        quick: a.quick,
        packets: a.packets,
        no_python: a.no_python,
        out: a.out.clone(),
        stop: std::sync::Arc::default(),
    };
    {
        let stop = c.stop.clone();
        // SYNC: Relaxed: a flag the models poll, no data published with it.
        let _ = ctrlc::set_handler(move || stop.store(true, std::sync::atomic::Ordering::Relaxed));
    }
    let r = rtloop_bench::runtime::run(&c, &mut BenchProgress::notes(g.json))?;
    render(g, || Ok(serde_json::to_string_pretty(&r)?), &r.table())
}

fn peers(a: &PeersArgs, g: &Global) -> anyhow::Result<()> {
    let c = rtloop_bench::peers::Config {
        transports: a.transports.clone(),
        chunks: a.chunks.clone(),
        readers: a.readers.clone(),
        channels: a.channels,
        rate: a.rate,
        wait: a.wait.iter().map(|&w| w.into()).collect(),
        rounds: a.rounds,
        seconds: a.seconds,
        min_chunks: a.min_chunks,
        throughput_seconds: a.throughput_seconds,
        stream_spin_us: a.stream_spin_us,
        quick: a.quick,
        out: a.out.clone(),
    };
    let r = rtloop_bench::peers::run(&c, &mut BenchProgress::notes(g.json))?;
    render(g, || Ok(serde_json::to_string(&r)?), &r.table())
}
