//! The pipeline benchmark (`rtloop bench pipeline`): where an acquisition pipeline's ceiling is, stage by stage (the
//! prudaq performance page's method): each stage alone, then all together, against the data
//! rate of a profile; the recorder is held against its own writes without it, same run.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtloop_lab::work::Work;
use rtloop_metrics::Table;
use rtloop_stream::{DType, ReaderMode, Stream, StreamConfig};
use rtloop_sys as sys;
use serde::{Deserialize, Serialize};

use crate::{BenchError, Context, Progress};

type Result<T, E = BenchError> = std::result::Result<T, E>;

/// What to run.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// neuropixels (384 ch x 30 kHz int16 per probe), intan64 (64 ch x 30 kHz int16), or
    /// custom (`channels`, `rate`, `dtype`).
    pub profile: String,
    /// Probes (neuropixels profile).
    pub probes: u64,
    /// Channels (custom profile).
    pub channels: Option<usize>,
    /// Sample rate, Hz (custom profile).
    pub rate: Option<f64>,
    /// Value type (custom profile).
    pub dtype: String,
    /// Readers of the stream (processing steps running side by side).
    pub readers: u64,
    /// Seconds per stage.
    pub seconds: f64,
    /// Short stages (smoke tests).
    pub quick: bool,
    /// Directory for the disk stages (default: the system temp dir); files are removed after.
    pub dir: Option<PathBuf>,
    /// Write results.json and pipeline.png into this directory.
    pub out: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            profile: "neuropixels".into(),
            probes: 1,
            channels: None,
            rate: None,
            dtype: "int16".into(),
            readers: 1,
            seconds: 2.0,
            quick: false,
            dir: None,
            out: None,
        }
    }
}

/// One stage alone.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StageRow {
    /// What the stage is.
    pub stage: String,
    /// MB/s it reaches alone.
    pub mb_per_s: f64,
    /// `mb_per_s` over the profile's rate.
    pub headroom: f64,
    /// Part of the pipeline (else a reference or the disk's limit).
    pub in_pipeline: bool,
}

/// What the pipeline benchmark measured.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PipelineReport {
    /// The profile.
    pub profile: String,
    /// Channels.
    pub channels: usize,
    /// Sample rate, Hz.
    pub rate: f64,
    /// Value type.
    pub dtype: String,
    /// The profile's data rate.
    pub required_mb_per_s: f64,
    /// Raw sequential writes of 4 MiB blocks with an fsync every second: the disk's limit.
    pub disk_raw_mb_per_s: f64,
    /// The recorder's own writes (files, block size, flush and fsync cadence) without the
    /// recorder, same directory, same run: the recorder's reference.
    pub disk_same_writes_mb_per_s: f64,
    /// The recorder's MB/s over that reference.
    pub recorder_over_disk: f64,
    /// The goal for `recorder_over_disk`.
    pub recorder_goal: f64,
    /// "met" only when `recorder_over_disk` reaches the goal.
    pub recorder_verdict: String,
    /// `rtloop replay` of a SpikeGLX file of this profile written to `--dir` and dropped
    /// from the page cache: MB/s into a stream, as fast as possible.
    pub replay_mb_per_s: f64,
    /// "met" only when `replay_mb_per_s` reaches `required_mb_per_s`.
    pub replay_needed_verdict: String,
    /// The same file read the same way without rtloop, same run (mapped, copied out in the
    /// replay's blocks, dropped from the page cache first): the replay's reference.
    pub replay_reference_mb_per_s: f64,
    /// The replay's MB/s over that reference.
    pub replay_over_reference: f64,
    /// The goal for `replay_over_reference`.
    pub replay_goal: f64,
    /// "met" only when `replay_over_reference` reaches the goal.
    pub replay_verdict: String,
    /// Each stage alone.
    pub stages: Vec<StageRow>,
    /// All stages together.
    pub together_mb_per_s: f64,
    /// `together_mb_per_s` over the profile's rate.
    pub together_headroom: f64,
    /// The slowest stage of the pipeline.
    pub limiting_stage: String,
    /// The sentence the command ends with.
    pub verdict: String,
}

struct Shape {
    channels: usize,
    rate: f64,
    dtype: DType,
}

impl Shape {
    fn sample_bytes(&self) -> usize {
        self.channels * self.dtype.itemsize()
    }
    /// About 1 ms of data per block.
    fn block(&self) -> Vec<u8> {
        let n = ((self.rate / 1000.0).ceil() as usize).max(1);
        (0..n * self.sample_bytes())
            .map(|i| (i * 7) as u8)
            .collect()
    }
}

/// A verdict: "met" only when the figure meets its target.
fn met(ok: bool) -> String {
    if ok { "met" } else { "not met" }.into()
}

fn mbps(bytes: u64, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64().max(1e-9) / 1e6
}

/// Samples in a benchmark stream's ring (and in the recorder reference's): a second of
/// data, at least 4096 samples, at most 256 MiB.
fn ring_capacity(sh: &Shape) -> u64 {
    ((sh.rate as u64).max(4096)).min((256 << 20) / sh.sample_bytes() as u64)
}

fn new_stream(sh: &Shape, tag: &str) -> Result<(Stream, String)> {
    let name = format!("pipe-{tag}-{}", sys::pid());
    let _ = Stream::remove(&name);
    let s = Stream::create(
        &name,
        &StreamConfig::new(sh.dtype, sh.channels, sh.rate, ring_capacity(sh)),
    )?;
    Ok((s, name))
}

fn generate(sh: &Shape, secs: Duration) -> f64 {
    let mut block = sh.block();
    let t = Instant::now();
    let mut bytes = 0u64;
    let mut k = 0u8;
    while t.elapsed() < secs {
        // a sawtooth per value: touches every byte as an acquisition driver's copy would
        for (i, b) in block.iter_mut().enumerate() {
            *b = (i as u8).wrapping_add(k);
        }
        std::hint::black_box(&block);
        k = k.wrapping_add(1);
        bytes += block.len() as u64;
    }
    mbps(bytes, t.elapsed())
}

fn disk_raw(dir: &Path, secs: Duration) -> Result<f64> {
    let path = dir.join(format!("rtloop-disk-{}.bin", sys::pid()));
    let block = vec![0x5au8; 4 << 20];
    let mut f =
        std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    let t = Instant::now();
    let mut bytes = 0u64;
    let mut last_sync = Instant::now();
    while t.elapsed() < secs {
        f.write_all(&block)?;
        bytes += block.len() as u64;
        if last_sync.elapsed() >= Duration::from_secs(1) {
            f.sync_data()?;
            last_sync = Instant::now();
        }
    }
    f.sync_data()?;
    let rate = mbps(bytes, t.elapsed());
    drop(f);
    let _ = std::fs::remove_file(&path);
    Ok(rate)
}

/// Turns the recorder and its reference take, each run's best kept.
const RECORDER_ROUNDS: u32 = 3;

/// The recorder's writes without the recorder: the reference its figure is divided by
/// (`rtloop_peers::ring_to_disk`: the same files, cadence and timing, and the same bytes
/// from the same place, a ring of the stream's footprint a producer thread fills as fast as
/// it can). MB/s of sample data, as the recorder reports.
fn disk_like_recorder(dir: &Path, sh: &Shape, secs: Duration) -> Result<f64> {
    let out = dir.join(format!("rtloop-disk-ref-{}", sys::pid()));
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let sb = sh.sample_bytes();
    // the recorder's window and cadence, as `spawn_recorder` runs it
    let rec = rtloop_record::RecordConfig::default();
    let result = rtloop_peers::ring_to_disk::run(
        &out,
        &rtloop_peers::ring_to_disk::RingToDisk {
            sample_bytes: sb,
            capacity: ring_capacity(sh) as usize,
            block: sh.block(),
            chunk_samples: (rtloop_record::MAX_WINDOW_BYTES / sb).max(1),
            flush_every: rec.flush_every,
            sync_every: rec.fsync_every,
            seconds: secs,
        },
    );
    let _ = std::fs::remove_dir_all(&out);
    let r = result.context("the recorder's reference")?;
    Ok(mbps(r.bytes, r.elapsed))
}

/// A writer as fast as it can for `secs` with `consumers` attached; returns bytes/time.
fn drive(
    sh: &Shape,
    stream: &Stream,
    secs: Duration,
    consumers: Vec<std::thread::JoinHandle<Result<()>>>,
) -> Result<f64> {
    let block = sh.block();
    let mut w = stream.writer()?;
    w.set_lossless_timeout(Duration::from_secs(30));
    let t = Instant::now();
    let mut bytes = 0u64;
    while t.elapsed() < secs {
        w.write_bytes(&block, None)?;
        bytes += block.len() as u64;
    }
    let rate = mbps(bytes, t.elapsed());
    drop(w);
    for c in consumers {
        c.join().map_err(|_| BenchError::Panicked("consumer"))??;
    }
    Ok(rate)
}

/// A lossless reader thread that runs `f` on every pull until the writer closes.
fn consumer(
    stream: &Stream,
    mut f: impl FnMut(&[u8]) -> Result<()> + Send + 'static,
) -> Result<std::thread::JoinHandle<Result<()>>> {
    let mut r = stream.reader(ReaderMode::Lossless)?;
    let sb = stream.info().sample_bytes;
    Ok(std::thread::spawn(move || {
        let mut buf = vec![0u8; sb * 8192];
        loop {
            let p = r.pull_into(&mut buf, None, 8192)?;
            if p.n > 0 {
                f(&buf[..p.n * sb])?;
                continue;
            }
            match r.writer_liveness() {
                rtloop_stream::Liveness::Closed | rtloop_stream::Liveness::Dead { .. } => {
                    return Ok(())
                }
                _ => {
                    let _ = r.wait_available(1, Some(Duration::from_millis(20)));
                }
            }
        }
    }))
}

/// The processing a reader does on every block: for int16 data, the spike path a lab runs
/// on each probe ([`SpikePath`]); for other dtypes a band-pass biquad and threshold per
/// channel over the samples' first two bytes (a stand-in of the same order of cost).
fn work_for(sh: &Shape) -> Processing {
    if sh.dtype == DType::I16 {
        Processing::Spikes(SpikePath::new(sh))
    } else {
        Processing::Plain(Work::bandpass(
            sh.sample_bytes() / 2,
            sh.rate,
            300.0,
            3000.0,
            -2000.0,
        ))
    }
}

enum Processing {
    Spikes(SpikePath),
    Plain(Work),
}

impl Processing {
    /// Process sample-major bytes; the events found.
    fn process(&mut self, bytes: &[u8]) -> u64 {
        match self {
            Processing::Spikes(s) => s.process(bytes),
            Processing::Plain(w) => w.process(bytes),
        }
    }
}

/// Channels of a Neuropixels probe: the spike path runs per probe.
const PROBE_CHANNELS: usize = 384;

/// The spike path of rtloop-dsp on every probe of int16 data: to float32, a Butterworth
/// band-pass 300-6000 Hz (order 2), a common average reference over the probe's channels,
/// threshold-crossing detection at 5 noise sigmas (negative, 0.5 ms refractory).
struct SpikePath {
    channels: usize,
    probes: Vec<ProbePath>,
    /// One probe's samples as float32, reused (grown to the largest block once).
    buf: Vec<f32>,
}

struct ProbePath {
    first: usize,
    channels: usize,
    filter: rtloop_dsp::SosFilter<f32>,
    reref: rtloop_dsp::Reref<f32>,
    detect: rtloop_dsp::SpikeDetector<f32>,
}

impl SpikePath {
    fn new(sh: &Shape) -> SpikePath {
        let sections = rtloop_dsp::design(
            rtloop_dsp::Band::Bandpass {
                low: 300.0,
                high: 6000.0_f64.min(sh.rate * 0.45),
            },
            2,
            sh.rate,
        )
        .expect("a band-pass inside Nyquist");
        let probes = (0..sh.channels)
            .step_by(PROBE_CHANNELS)
            .map(|first| {
                let channels = PROBE_CHANNELS.min(sh.channels - first);
                ProbePath {
                    first,
                    channels,
                    filter: rtloop_dsp::SosFilter::new(&sections, channels).expect("a filter"),
                    reref: rtloop_dsp::Reref::new(channels, None, rtloop_dsp::Reference::Average)
                        .expect("a reference"),
                    detect: rtloop_dsp::SpikeDetector::new(rtloop_dsp::SpikeConfig {
                        channels,
                        k: 5.0,
                        sign: rtloop_dsp::Sign::Negative,
                        refractory: (sh.rate / 2000.0) as usize,
                        peak_window: (sh.rate / 2000.0) as usize,
                        noise_window: sh.rate as usize,
                    })
                    .expect("a detector"),
                }
            })
            .collect();
        SpikePath {
            channels: sh.channels,
            probes,
            buf: Vec::new(),
        }
    }

    fn process(&mut self, bytes: &[u8]) -> u64 {
        let row = self.channels * 2;
        let samples = bytes.len() / row;
        let mut spikes = 0;
        for p in &mut self.probes {
            self.buf.resize(samples * p.channels, 0.0);
            for (s, out) in bytes
                .chunks_exact(row)
                .zip(self.buf.chunks_exact_mut(p.channels))
            {
                let v = &s[p.first * 2..(p.first + p.channels) * 2];
                for (o, b) in out.iter_mut().zip(v.chunks_exact(2)) {
                    *o = f32::from(i16::from_ne_bytes([b[0], b[1]]));
                }
            }
            let _ = p.filter.process(&mut self.buf);
            let _ = p.reref.process(&mut self.buf);
            let _ = p.detect.process(&self.buf, |_| spikes += 1);
        }
        spikes
    }
}

fn socket_sink(kind: &str) -> Result<(Box<dyn Write + Send>, std::thread::JoinHandle<()>)> {
    fn drain(mut r: impl Read) {
        let mut b = vec![0u8; 1 << 20];
        while matches!(r.read(&mut b), Ok(n) if n > 0) {}
    }
    Ok(match kind {
        "unix" => {
            let (a, b) = std::os::unix::net::UnixStream::pair()?;
            (Box::new(a), std::thread::spawn(move || drain(b)))
        }
        _ => {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            let a = std::net::TcpStream::connect(l.local_addr()?)?;
            a.set_nodelay(true)?;
            let (b, _) = l.accept()?;
            (Box::new(a), std::thread::spawn(move || drain(b)))
        }
    })
}

/// Drop `path` from the page cache (written, synced, then advised away), so the next read
/// comes from the disk.
fn evict(path: &Path) -> Result<()> {
    let f = std::fs::File::open(path)?;
    f.sync_all()?;
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).map_err(std::io::Error::from)?;
    Ok(())
}

/// A SpikeGLX recording of the profile (int16 only) in `dir`: `bytes` of samples in a `.bin`
/// and its `.meta` (an NP 2.0-style probe: one gain). Returns the `.bin`.
fn write_replay_file(dir: &Path, sh: &Shape, bytes: u64) -> Result<PathBuf> {
    let bin = dir.join(format!("rtloop-pipe-replay-{}.imec0.ap.bin", sys::pid()));
    let block = sh.block().repeat(64);
    let mut f = std::io::BufWriter::with_capacity(
        4 << 20,
        std::fs::File::create(&bin).with_context(|| format!("cannot write {}", bin.display()))?,
    );
    let mut written = 0u64;
    while written < bytes {
        f.write_all(&block)?;
        written += block.len() as u64;
    }
    f.flush()?;
    let chans: String = (0..sh.channels)
        .map(|c| format!("(AP{c};{c}:{c})"))
        .collect();
    std::fs::write(
        bin.with_extension("meta"),
        format!(
            "imAiRangeMax=0.62\nimMaxInt=8192\nimSampRate={}\nnSavedChans={}\ntypeThis=imec\n\
             fileSizeBytes={written}\n~snsChanMap=({},0,0){chans}\n",
            sh.rate, sh.channels, sh.channels
        ),
    )?;
    Ok(bin)
}

/// `rtloop replay --fast` of `bin` into a stream of `capacity` samples (from the disk: the
/// file is evicted first); MB/s.
fn replay_once(bin: &Path, capacity: u64) -> Result<f64> {
    evict(bin)?;
    let src = rtloop_record::formats::open(bin, None)?;
    let name = format!("pipe-replay-{}", sys::pid());
    let opts = rtloop_record::PlayOptions {
        capacity: Some(capacity),
        ..rtloop_record::PlayOptions::default()
    };
    let r = rtloop_record::play(
        &src,
        &name,
        &opts,
        &std::sync::atomic::AtomicBool::new(false),
    );
    let _ = Stream::remove(&name);
    let r = r?;
    Ok(mbps(r.bytes, Duration::from_secs_f64(r.seconds)))
}

/// The replay's reads without its stream: the same file, evicted first, mapped the same way
/// (sequential advice) and copied out in the replay's blocks (about 1 MiB of whole samples)
/// into a buffer the size of the stream's ring, round and round; MB/s.
fn replay_reference(bin: &Path, sh: &Shape, capacity: u64) -> Result<f64> {
    evict(bin)?;
    // the replay's own mapping (read-only, sequential advice), nothing else of it
    let map = rtloop_record::replay::map_file(bin)?;
    let sb = sh.sample_bytes();
    let block = rtloop_record::replay::FAST_BLOCK_BYTES / sb * sb;
    // faulted in before the clock starts, as the stream's ring is created before replay's
    let mut ring = vec![1u8; capacity as usize * sb];
    let t = Instant::now();
    let mut at = 0usize;
    for piece in map.chunks(block.max(sb)) {
        if at + piece.len() > ring.len() {
            at = 0;
        }
        ring[at..at + piece.len()].copy_from_slice(piece);
        at += piece.len();
    }
    std::hint::black_box(&ring);
    Ok(mbps(map.len() as u64, t.elapsed()))
}

impl Config {
    /// Refuse what the command line's options would refuse, saying what is allowed.
    pub fn validate(&self) -> Result<(), BenchError> {
        use crate::check;
        check::one_of(
            "profile",
            &self.profile,
            &["neuropixels", "intan64", "custom"],
        )?;
        check::range("probes", self.probes, 1, 64)?;
        check::range("readers", self.readers, 1, 8)?;
        check::positive("seconds", self.seconds)?;
        if let Some(c) = self.channels {
            check::range("channels", c, 1, rtloop_stream::MAX_CHANNELS as usize)?;
        }
        if let Some(r) = self.rate {
            check::positive("rate", r)?;
        }
        Ok(())
    }
}

/// Run the analyser.
pub fn run(a: &Config, p: &mut dyn Progress) -> Result<PipelineReport> {
    a.validate()?;
    let sh = shape_of(a)?;
    let required = sh.rate * sh.sample_bytes() as f64 / 1e6;
    let secs = Duration::from_secs_f64(if a.quick { 0.3 } else { a.seconds });
    let dir = a.dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut st = Stages {
        rows: Vec::new(),
        required,
        sh: &sh,
        dir: &dir,
        secs,
    };
    let disk_limit = st.machine_and_stream(a, p)?;
    let (rec_mb, disk) = st.recorder(p)?;
    let (replay_mb, replay_ref) = st.replay(p)?;
    st.network(p)?;
    st.say(p, "all stages together");
    let together = st.together(a)?;
    let stages = st.rows;
    let limiting = stages
        .iter()
        .filter(|s| s.in_pipeline)
        .min_by(|x, y| x.mb_per_s.total_cmp(&y.mb_per_s))
        .map(|s| s.stage.clone())
        .unwrap_or_default();
    let verdict = if together >= required {
        format!(
            "sustains {:.1}x the {:.1} MB/s this profile needs; the first ceiling is the {limiting}",
            together / required,
            required
        )
    } else {
        format!(
            "cannot sustain {:.1} MB/s: all together reach {together:.1} MB/s, limited by the {limiting}",
            required
        )
    };
    let report = PipelineReport {
        profile: a.profile.clone(),
        channels: sh.channels,
        rate: sh.rate,
        dtype: sh.dtype.name().into(),
        required_mb_per_s: required,
        disk_raw_mb_per_s: disk_limit,
        disk_same_writes_mb_per_s: disk,
        recorder_over_disk: rec_mb / disk,
        recorder_goal: 0.9,
        recorder_verdict: met(rec_mb / disk >= 0.9),
        replay_mb_per_s: replay_mb,
        replay_needed_verdict: met(replay_mb >= required),
        replay_reference_mb_per_s: replay_ref,
        replay_over_reference: replay_mb / replay_ref.max(1e-9),
        replay_goal: 0.9,
        replay_verdict: met(replay_mb / replay_ref.max(1e-9) >= 0.9),
        stages,
        together_mb_per_s: together,
        together_headroom: together / required,
        limiting_stage: limiting,
        verdict,
    };
    if let Some(o) = &a.out {
        crate::write_results(o, &report)?;
        let mut bars: Vec<(String, f64)> = report
            .stages
            .iter()
            .map(|s| {
                (
                    s.stage
                        .replace("network out, ", "net ")
                        .replace("stream ", ""),
                    s.mb_per_s,
                )
            })
            .collect();
        bars.push(("all together".into(), together));
        // stages differ a hundredfold: a log axis, with the rate the rig needs as a line
        rtloop_metrics::charts::bar_chart_png(
            &o.join("pipeline.png"),
            &format!(
                "pipeline stages, MB/s ({} ch x {} Hz {}), log scale",
                sh.channels, sh.rate, sh.dtype
            ),
            "MB/s",
            &bars,
            rtloop_metrics::charts::Axis::Log,
            Some((required, "needed")),
        )?;
    }
    Ok(report)
}

/// The stream a profile asks for.
fn shape_of(a: &Config) -> Result<Shape> {
    let sh = match a.profile.as_str() {
        "neuropixels" => Shape {
            channels: 384 * a.probes as usize,
            rate: 30_000.0,
            dtype: DType::I16,
        },
        "intan64" => Shape {
            channels: 64,
            rate: 30_000.0,
            dtype: DType::I16,
        },
        "custom" => {
            let (Some(channels), Some(rate)) = (a.channels, a.rate) else {
                return Err(BenchError::config(
                    "profile",
                    "\"custom\"",
                    "the custom profile needs channels and rate (--channels, --rate)",
                ));
            };
            if channels == 0 || !(rate > 0.0 && rate.is_finite()) {
                return Err(BenchError::config(
                    "channels, rate",
                    format!("{channels}, {rate}"),
                    "channels at least 1 and rate a positive number of Hz",
                ));
            }
            Shape {
                channels,
                rate,
                dtype: a.dtype.parse().map_err(BenchError::DType)?,
            }
        }
        other => {
            return Err(BenchError::config(
                "profile",
                format!("{other:?}"),
                "allowed neuropixels, intan64, custom",
            ))
        }
    };
    Ok(sh)
}

/// The stages measured so far, and what each measurement needs.
struct Stages<'a> {
    rows: Vec<StageRow>,
    /// MB/s the profile needs.
    required: f64,
    sh: &'a Shape,
    /// Where files go.
    dir: &'a Path,
    /// How long each stage runs.
    secs: Duration,
}

impl Stages<'_> {
    fn say(&self, p: &mut dyn Progress, s: &str) {
        p.note(&format!("{s} ..."));
    }

    fn add(&mut self, stage: &str, mb: f64, in_pipeline: bool) {
        self.rows.push(StageRow {
            stage: stage.into(),
            mb_per_s: mb,
            headroom: mb / self.required,
            in_pipeline,
        });
    }

    /// The disk's limit (returned), generation, the stream's write and reads, the
    /// processing step.
    fn machine_and_stream(&mut self, a: &Config, p: &mut dyn Progress) -> Result<f64> {
        let (sh, dir, secs) = (self.sh, self.dir, self.secs);
        self.say(
            p,
            "disk: raw sequential write (4 MiB blocks, fsync every second), the machine's limit",
        );
        let disk_limit = disk_raw(dir, secs)?;
        self.add("disk raw write, 4 MiB blocks (limit)", disk_limit, false);
        self.say(p, "synthetic generation");
        self.add("synthetic generation", generate(sh, secs), true);
        self.say(p, "stream write");
        {
            let (s, n) = new_stream(sh, "w")?;
            let r = drive(sh, &s, secs, Vec::new());
            let _ = Stream::remove(&n);
            self.add("stream write", r?, true);
        }
        for k in 1..=a.readers {
            self.say(p, &format!("stream read, {k} reader(s)"));
            let (s, n) = new_stream(sh, "r")?;
            let cs = (0..k)
                .map(|_| consumer(&s, |_| Ok(())))
                .collect::<Result<Vec<_>>>()?;
            let r = drive(sh, &s, secs, cs);
            let _ = Stream::remove(&n);
            self.add(&format!("stream read, {k} reader(s)"), r?, k == a.readers);
        }
        self.say(
            p,
            "processing (int16: band-pass, common average reference and spike detection per probe)",
        );
        {
            let mut w = work_for(sh);
            let block: Vec<u8> = sh.block().repeat(16);
            let t = Instant::now();
            let mut bytes = 0u64;
            while t.elapsed() < secs {
                std::hint::black_box(w.process(&block));
                bytes += block.len() as u64;
            }
            self.add("processing step", mbps(bytes, t.elapsed()), true);
        }
        Ok(disk_limit)
    }

    /// The recorder against the same writes without it: best of RECORDER_ROUNDS, in turn.
    /// Returns (recorder MB/s, reference MB/s).
    fn recorder(&mut self, p: &mut dyn Progress) -> Result<(f64, f64)> {
        let (sh, dir, secs) = (self.sh, self.dir, self.secs);
        let record_once = |sh: &Shape, secs: Duration| -> Result<(f64, u64)> {
            let (s, n) = new_stream(sh, "rec")?;
            let out = dir.join(format!("rtloop-pipe-rec-{}", sys::pid()));
            let rec = spawn_recorder(&n, &out);
            // the recorder registers its reader before the writer starts
            let t = Instant::now();
            while s.stats().readers.is_empty() && t.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(5));
            }
            drive(sh, &s, secs, Vec::new())?;
            let rep = rec.join().map_err(|_| BenchError::Panicked("recorder"))??;
            let _ = Stream::remove(&n);
            let _ = std::fs::remove_dir_all(&out);
            Ok((
                mbps(rep.bytes, Duration::from_secs_f64(rep.seconds)),
                rep.lost_samples,
            ))
        };
        // The recorder and its reference take turns, best of RECORDER_ROUNDS each: the page
        // cache's pages then come to both in the same state (on a VM, memory a guest touches for
        // the first time costs the host a fault per page: a first pass wrote 781 MB/s where the
        // same writes later reached 4.5 GB/s), and a moment of disk noise lands on neither alone.
        let (mut rec_mb, mut disk) = (0.0f64, 0.0f64);
        for k in 1..=RECORDER_ROUNDS {
            self.say(p, &format!(
                "disk: the recorder's writes without the recorder (reference), round {k} of {RECORDER_ROUNDS}"
            ));
            disk = disk.max(disk_like_recorder(dir, sh, secs)?);
            self.say(
                p,
                &format!("recorder to disk (fsync every second), round {k} of {RECORDER_ROUNDS}"),
            );
            rec_mb = rec_mb.max(record_once(sh, secs)?.0);
        }
        self.add("disk, the recorder's writes (reference)", disk, false);
        self.add("recorder to disk", rec_mb, true);
        Ok((rec_mb, disk))
    }

    /// Replaying a SpikeGLX file against its reads without the stream (int16 only; else 0).
    /// Returns (replay MB/s, reference MB/s).
    fn replay(&mut self, p: &mut dyn Progress) -> Result<(f64, f64)> {
        let (sh, dir, secs, required) = (self.sh, self.dir, self.secs, self.required);
        let (replay_mb, replay_ref) = if sh.dtype == DType::I16 {
            self.say(
                p,
                "replay of a SpikeGLX file from disk, as fast as possible (and its reference)",
            );
            let bin = write_replay_file(dir, sh, (required * 1e6 * secs.as_secs_f64()) as u64)?;
            let cap = ((sh.rate as u64).max(4096)).min((256 << 20) / sh.sample_bytes() as u64);
            // each twice, in turn, the best of each: neither gets the other's warm-up
            let mut best = (0.0f64, 0.0f64);
            let r = (0..2).try_for_each(|_| -> Result<()> {
                best.1 = best.1.max(replay_reference(&bin, sh, cap)?);
                best.0 = best.0.max(replay_once(&bin, cap)?);
                Ok(())
            });
            let _ = std::fs::remove_file(&bin);
            let _ = std::fs::remove_file(bin.with_extension("meta"));
            r?;
            best
        } else {
            (0.0, 0.0)
        };
        if replay_mb > 0.0 {
            self.add("replay from disk (SpikeGLX file)", replay_mb, false);
            self.add(
                "replay's reads without the stream (reference)",
                replay_ref,
                false,
            );
        }
        Ok((replay_mb, replay_ref))
    }

    /// Sending out: UNIX and TCP sockets, the FieldTrip server.
    fn network(&mut self, p: &mut dyn Progress) -> Result<()> {
        let (sh, secs) = (self.sh, self.secs);
        for kind in ["unix", "tcp"] {
            self.say(p, &format!("network out ({kind} socket)"));
            let (mut sink, h) = socket_sink(kind)?;
            let block = sh.block().repeat(16);
            let t = Instant::now();
            let mut bytes = 0u64;
            while t.elapsed() < secs {
                sink.write_all(&block)?;
                bytes += block.len() as u64;
            }
            let r = mbps(bytes, t.elapsed());
            drop(sink);
            let _ = h.join();
            self.add(&format!("network out, {kind}"), r, kind == "unix");
        }
        self.say(p, "network out (FieldTrip server, PUT_DAT over TCP)");
        {
            let name = format!("pipe-ft-{}", sys::pid());
            let mut bc = rtloop_fieldtrip::BufferConfig::new(&name);
            bc.remove_on_drop = true;
            let server = rtloop_fieldtrip::Server::start(
                Arc::new(rtloop_fieldtrip::Buffer::new(bc)),
                rtloop_fieldtrip::ServerConfig {
                    tcp: Some("127.0.0.1:0".into()),
                    ..rtloop_fieldtrip::ServerConfig::default()
                },
            )?;
            let mut c =
                rtloop_fieldtrip::Client::connect(&server.tcp_addr().expect("tcp").to_string())?;
            c.put_header(sh.channels as u32, sh.rate as f32, sh.dtype.code(), &[])?;
            let block = sh.block().repeat(16);
            let t = Instant::now();
            let mut bytes = 0u64;
            while t.elapsed() < secs {
                c.put_data_bytes(sh.channels as u32, sh.dtype.code(), &block, true)?;
                bytes += block.len() as u64;
            }
            self.add(
                "network out, FieldTrip server",
                mbps(bytes, t.elapsed()),
                false,
            );
            drop(c);
            server.buffer().close();
            server.shutdown();
        }
        Ok(())
    }

    /// Everything at once: generator -> stream -> the processing readers, the recorder, a
    /// reader sending to a UNIX socket and the viewer's scope. MB/s written.
    fn together(&self, a: &Config) -> Result<f64> {
        let (sh, dir, secs) = (self.sh, self.dir, self.secs);
        let together = {
            let (s, n) = new_stream(sh, "all")?;
            let mut cs = Vec::new();
            for _ in 0..a.readers {
                let mut w = work_for(sh);
                cs.push(consumer(&s, move |b| {
                    std::hint::black_box(w.process(b));
                    Ok(())
                })?);
            }
            let (mut sink, h) = socket_sink("unix")?;
            cs.push(consumer(&s, move |b| Ok(sink.write_all(b)?))?);
            // the viewer: its scope decimating the first probe's channels to a 1024-column
            // screen at 30 frames per second, as `rtloop view` does for an open page
            let driven = Arc::new(AtomicBool::new(false));
            let viewer = {
                let driven = driven.clone();
                let scope = rtloop_view::scope::Scope::new(
                    Stream::open(&n)?,
                    rtloop_view::scope::ScopeConfig {
                        window_s: 2.0,
                        columns: 1024,
                        first_channel: 0,
                        n_channels: sh.channels.min(PROBE_CHANNELS),
                    },
                )
                .map_err(|e| {
                    BenchError::config("viewer", "a 2 s, 1024-column page", e.to_string())
                })?;
                std::thread::spawn(move || {
                    let mut scope = scope;
                    let mut frames = 0u64;
                    loop {
                        std::hint::black_box(scope.frame());
                        frames += 1;
                        // Ordering: a flag with nothing published through it
                        if driven.load(Ordering::Relaxed)
                            || matches!(
                                scope.status(),
                                rtloop_view::scope::ScopeStatus::Closed
                                    | rtloop_view::scope::ScopeStatus::Dead { .. }
                            )
                        {
                            return frames;
                        }
                        std::thread::sleep(Duration::from_millis(33));
                    }
                })
            };
            let out = dir.join(format!("rtloop-pipe-all-{}", sys::pid()));
            let rec = spawn_recorder(&n, &out);
            let t = Instant::now();
            while s.stats().readers.len() < a.readers as usize + 2
                && t.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            let r = drive(sh, &s, secs, cs);
            driven.store(true, Ordering::Relaxed);
            let _ = rec.join();
            let _ = h.join();
            let _ = viewer.join();
            let _ = Stream::remove(&n);
            let _ = std::fs::remove_dir_all(&out);
            r?
        };
        Ok(together)
    }
}

impl PipelineReport {
    /// The tables the command prints.
    #[must_use]
    pub fn table(&self) -> String {
        let (report, required, together) = (self, self.required_mb_per_s, self.together_mb_per_s);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "profile {}: {} channels x {} Hz {} = {:.1} MB/s",
            report.profile, report.channels, report.rate, report.dtype, required
        );
        // a stage that runs on one thread keeps up with the profile using this share of a core
        let mut t = Table::new(&["stage", "MB/s", "x needed", "core at the needed rate"]);
        for s in &report.stages {
            t.row(&[
                s.stage.clone(),
                format!("{:.1}", s.mb_per_s),
                format!("{:.1}", s.headroom),
                format!("{:.1} %", 100.0 / s.headroom.max(1e-9)),
            ]);
        }
        t.row(&[
            "all together".to_string(),
            format!("{together:.1}"),
            format!("{:.1}", report.together_headroom),
            "-".to_string(),
        ]);
        out += &t.render();
        out.push('\n');
        let _ = writeln!(
 out,
        "recorder / the same writes without it (same run, same directory): {:.2} (goal >= {}: {})",
        report.recorder_over_disk, report.recorder_goal, report.recorder_verdict
    );
        if report.replay_mb_per_s > 0.0 {
            let mut t = Table::new(&["replay from disk", "MB/s", "target", "ratio", "verdict"]);
            t.row(&[
                "rtloop replay --fast (SpikeGLX file)".into(),
                format!("{:.1}", report.replay_mb_per_s),
                format!("{required:.1} MB/s needed"),
                format!("{:.2}", report.replay_mb_per_s / required),
                report.replay_needed_verdict.clone(),
            ]);
            t.row(&[
                "  over the same reads without the stream".into(),
                format!("{:.1}", report.replay_reference_mb_per_s),
                format!(">= {} x reference", report.replay_goal),
                format!("{:.2}", report.replay_over_reference),
                report.replay_verdict.clone(),
            ]);
            out += &t.render();
            out.push('\n');
        }
        let _ = writeln!(out, "{}", report.verdict);
        out
    }
}

/// A lossless recorder of stream `name` into `out`, on its own thread.
fn spawn_recorder(
    name: &str,
    out: &std::path::Path,
) -> std::thread::JoinHandle<Result<rtloop_record::RecordReport, rtloop_record::RecordError>> {
    let cfg = rtloop_record::RecordConfig {
        lossless: true,
        ..rtloop_record::RecordConfig::default()
    };
    let (name, out) = (name.to_owned(), out.to_owned());
    std::thread::spawn(move || {
        rtloop_record::record(&name, &out, &cfg, &rtloop_record::Control::default())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spike_path_finds_spikes_on_each_probe_of_int16_data() {
        let sh = Shape {
            channels: 2 * PROBE_CHANNELS,
            rate: 3_000.0,
            dtype: DType::I16,
        };
        let mut path = SpikePath::new(&sh);
        assert_eq!(path.probes.len(), 2);
        // noise for the detector to learn (one second), then one deep spike on each probe
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut sample = |s: usize, c: usize| -> i16 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let noise = ((x >> 56) as i16) - 128;
            let spike = match (s, c) {
                (4_000..=4_004, 10) | (5_000..=5_004, 400) => -3000,
                _ => 0,
            };
            noise / 8 + spike
        };
        let bytes: Vec<u8> = (0..6_000)
            .flat_map(|s| (0..sh.channels).map(move |c| (s, c)))
            .flat_map(|(s, c)| sample(s, c).to_ne_bytes())
            .collect();
        // (a slow rate keeps the test short: the detector learns its noise over a second)
        // spikes found in each stretch of 1,000 samples (a band-passed spike rings
        // for longer than the refractory period, so one spike may be found more than once)
        let stretch = sh.sample_bytes() * 1_000;
        let found: Vec<u64> = bytes
            .chunks(stretch)
            .map(|st| {
                st.chunks(sh.sample_bytes() * 30)
                    .map(|b| path.process(b))
                    .sum()
            })
            .collect();
        assert_eq!(found[..4], [0, 0, 0, 0], "noise alone: {found:?}");
        assert!(
            found[4] > 0 && found[5] > 0,
            "a spike on each probe: {found:?}"
        );
    }
}
