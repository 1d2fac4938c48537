//! `rtloop lab`: the latency lab (ONIX's closed-loop tuning workflow in software).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use rtloop_lab::frame::{self, LoadTester};
use rtloop_lab::host;
use rtloop_lab::loadtest::{LabSettings, LoadtestConfig, LoadtestReport, WorkKind};
use rtloop_lab::tune;
use rtloop_metrics::{fmt_ns, Table};

use crate::Global;

/// The latency lab.
#[derive(Debug, clap::Subcommand)]
pub enum LabCommand {
    /// Run the emulated device (load tester, memory monitor, heartbeat) in its own process and
    /// a host reading ReadSize blocks that loops back every Nth hub clock; show the closed-loop
    /// latency (HubClockDelta) live as a 0-1000 us histogram with p50/p99/p99.9/max, the
    /// device FIFO's PercentUsed and the host queue depth; at the end a table, --json, PNGs.
    Loadtest(LoadtestArgs),
    /// Find the smallest stable ReadSize: sweep 16384 down by halves to the minimum (restart
    /// per step, >= --loopbacks results each), classify each step, recommend one with a
    /// safety margin, only from steps whose device kept its rate and whose p99 is near the
    /// bare loop sampled the same way after the step. --rate-sweep instead holds ReadSize and finds the last good rate
    /// (liboni's onix-loadtest).
    Tune(TuneArgs),
}

/// The load and transport, shared by loadtest and tune.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// A preset load: 2xnp2 (60 kHz, 392 words, 100 back: 2 x Neuropixels 2.0) or intan64
    /// (30 kHz, 63 words, 100 back: a 64-channel Intan headstage).
    #[arg(long, default_value = "2xnp2")]
    pub profile: String,
    /// Load tester FramesPerSecond (overrides the profile; 1..=27777777).
    #[arg(long)]
    pub fps: Option<u64>,
    /// 16-bit words per device-to-host frame (overrides the profile; at most CLK_DIV - 9).
    #[arg(long)]
    pub received_words: Option<u64>,
    /// 32-bit words per loopback frame (overrides the profile; at most 65535).
    #[arg(long)]
    pub transmitted_words: Option<u64>,
    /// Loop back the hub clock of every Nth load-tester frame (the tutorial: 100).
    #[arg(long, default_value_t = 100)]
    pub every: u64,
    /// The device's hardware FIFO in bytes (ONIX has 2 GB; a full FIFO ends the run).
    #[arg(long, default_value_t = 256 << 20)]
    pub fifo_bytes: u64,
    /// Memory monitor SamplesPerSecond (1..=1000; the tutorial uses 100).
    #[arg(long, default_value_t = 100)]
    pub monitor_hz: u64,
    /// Device-to-host transport: stream (rtloop shared memory), unix, tcp, or fieldtrip (PUT_DAT
    /// to a FieldTrip buffer server, read with WAIT_DAT + GET_DAT).
    #[arg(long, default_value = "stream")]
    pub transport: String,
    /// Microseconds the host polls for data before sleeping (on this kind of VM a sleeping
    /// thread takes ~40 us to wake).
    #[arg(long, default_value_t = 200)]
    pub spin_us: u64,
    /// Work per block: none, or bandpass (a 300-3000 Hz band-pass and a threshold detector over
    /// every channel of every frame).
    #[arg(long, default_value = "none", value_parser = ["none", "bandpass"])]
    pub work: String,
    /// While a run goes on, publish every loopback's HubClockDelta (µs) and every PercentUsed
    /// reading as the streams PREFIX.latency and PREFIX.percent_used, for `rtloop view` or
    /// any reader (removed when the run ends). Default prefix: lab-<pid>.
    #[arg(long, value_name = "PREFIX")]
    pub publish: Option<String>,
    /// Publish nothing.
    #[arg(long, conflicts_with = "publish")]
    pub no_publish: bool,
}

/// Options of `rtloop lab loadtest`.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadtestArgs {
    /// The load and transport.
    #[command(flatten)]
    pub load: LoadArgs,
    /// Bytes per read (rounded up to a multiple of 4; at least the largest frame).
    #[arg(long, default_value = "2048")]
    pub read_size: String,
    /// Seconds to measure (after --warmup).
    #[arg(long, default_value_t = 10.0, value_parser = crate::cmd_demo::positive_f64)]
    pub seconds: f64,
    /// Seconds to run before measuring.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Stop once this many loopback results were collected.
    #[arg(long)]
    pub loopbacks: Option<u64>,
    /// Skip the bare references: the cache-line ping-pong measured before the run (up to 5 s),
    /// and after it a bare loop sampled as the run's loopbacks were (as many stamps, made on
    /// schedule over the measured seconds on the device's CPU and echoed on the host's).
    #[arg(long)]
    pub no_reference: bool,
    /// Write results.json, latency.png and percent_used.png into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Options of `rtloop lab tune`.
#[derive(Debug, Clone, clap::Args)]
pub struct TuneArgs {
    /// The load and transport.
    #[command(flatten)]
    pub load: LoadArgs,
    /// Loopback results per step (ONIX: tens of thousands quickly).
    #[arg(long, default_value_t = 10_000)]
    pub loopbacks: u64,
    /// Longest a step runs, seconds (an unstable step ends here or on overflow).
    #[arg(long, default_value_t = 30.0, value_parser = crate::cmd_demo::positive_f64)]
    pub max_seconds: f64,
    /// Largest ReadSize of the sweep.
    #[arg(long, default_value_t = 16384)]
    pub start: u64,
    /// After the halving sweep, bisect in steps of 4 bytes between the smallest stable and
    /// the first unstable ReadSize.
    #[arg(long)]
    pub bisect: bool,
    /// Safety margin: recommend the smallest ReadSize that has this many stable sizes measured
    /// below it (0 = the smallest stable one).
    #[arg(long, default_value_t = 1)]
    pub margin: u32,
    /// liboni's onix-loadtest: hold --read-size and raise the rate until the FIFO fills.
    #[arg(long)]
    pub rate_sweep: bool,
    /// ReadSize for --rate-sweep.
    #[arg(long, default_value = "2048")]
    pub read_size: String,
    /// Short steps (smoke tests): 1000 loopbacks, 3 s at most.
    #[arg(long)]
    pub quick: bool,
    /// Write results.json and tune.png into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Run a lab command.
pub fn run(c: LabCommand, g: &Global) -> Result<()> {
    // Ctrl-C or SIGTERM ends the run at its next block, so the device stops and the run's
    // streams are removed; the report shows what was measured
    let _ = ctrlc::set_handler(rtloop_lab::interrupt);
    match c {
        LabCommand::Loadtest(a) => loadtest(&a, g),
        LabCommand::Tune(a) => tune_cmd(&a, g),
    }
}

impl LoadArgs {
    /// The lab settings, validated (profile + overrides).
    fn settings(&self) -> Result<LabSettings> {
        let mut lab = LabSettings::profile(&self.profile)?;
        lab.load = LoadTester {
            fps: self.fps.unwrap_or(lab.load.fps),
            received_words: self.received_words.unwrap_or(lab.load.received_words),
            transmitted_words: self.transmitted_words.unwrap_or(lab.load.transmitted_words),
        };
        lab.transport.clone_from(&self.transport);
        lab.every = self.every;
        lab.fifo_bytes = self.fifo_bytes;
        lab.monitor_hz = self.monitor_hz;
        lab.spin_us = self.spin_us;
        lab.work = if self.work == "bandpass" {
            WorkKind::Bandpass
        } else {
            WorkKind::None
        };
        lab.publish = (!self.no_publish).then(|| {
            self.publish
                .clone()
                .unwrap_or_else(|| format!("lab-{}", std::process::id()))
        });
        if let Some(p) = &lab.publish {
            rtloop_stream::validate_name(&format!("{p}.percent_used"))
                .with_context(|| format!("--publish {p:?}"))?;
        }
        lab.validate()?;
        Ok(lab)
    }
}

/// The live 0–1000 µs histogram as one line: 50 columns of 20 µs, height by count (log
/// scale), then the count beyond 1 ms.
fn text_histogram(bins_us: &[u64]) -> String {
    const BARS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let (body, beyond) = bins_us.split_at(bins_us.len().saturating_sub(1));
    let cols: Vec<u64> = body.chunks(20).map(|c| c.iter().sum()).collect();
    let top = cols.iter().copied().max().unwrap_or(0).max(1) as f64;
    let line: String = cols
        .iter()
        .map(|&c| {
            if c == 0 {
                '·'
            } else {
                let h = ((c as f64).ln_1p() / top.ln_1p() * 8.0).ceil() as usize;
                BARS[h.clamp(1, 8)]
            }
        })
        .collect();
    format!(
        "0 µs |{line}| 1 ms   beyond: {}",
        beyond.first().copied().unwrap_or(0)
    )
}

fn us(ns: u64) -> String {
    fmt_ns(ns)
}

fn loadtest(a: &LoadtestArgs, g: &Global) -> Result<()> {
    let lab = a.load.settings()?;
    let cfg = LoadtestConfig {
        read_size: frame::read_size(&a.read_size, &lab.load)?,
        lab,
        seconds: a.seconds,
        warmup: a.warmup,
        loopbacks: a.loopbacks,
        reference: !a.no_reference,
    };
    let lt = cfg.lab.load;
    if cfg.reference {
        eprintln!(
            "reference: a bare cache-line ping-pong between the two CPUs for {:.0} s (and after the run, a bare loop sampled as the run's loopbacks for {:.0} s) ...",
            a.seconds.min(5.0),
            a.seconds
        );
    }
    eprintln!(
        "load tester: {} frames/s x {} words ({:.1} MB/s), loopback every {}; ReadSize {} B over {}",
        lt.actual_fps().round(),
        lt.received_words,
        lt.bytes_per_s() / 1e6,
        cfg.lab.every,
        cfg.read_size,
        cfg.lab.transport
    );
    if let Some(p) = &cfg.lab.publish {
        eprintln!(
            "live: streams {p}.latency and {p}.percent_used while it runs (rtloop view shows them)"
        );
    }
    // live lines on stderr (also with --json, which keeps stdout for the report)
    let mut progress = |s: &host::Snapshot| {
        // the max covers the measured window, as the report's does
        let max = if s.warming_up {
            "warming up".to_owned()
        } else {
            format!("max {:.4} %", s.percent_used_max)
        };
        let lines = format!(
            "{:5.1} s  loopbacks {:>7}  p50 {:>9}  p99 {:>9}  p99.9 {:>9}  max {:>9}  PercentUsed {:.4} % ({max})  host queue max {}\n        {}\n",
            s.t,
            s.loopbacks,
            us(s.latency.p50_ns),
            us(s.latency.p99_ns),
            us(s.latency.p999_ns),
            us(s.latency.max_ns),
            s.percent_used,
            s.queue_max,
            text_histogram(&s.histogram_us)
        );
        // one write (stderr is unbuffered: eprintln! writes each piece on its own)
        let _ = std::io::Write::write_all(&mut std::io::stderr(), lines.as_bytes());
    };
    let report = rtloop_lab::loadtest::loadtest(&cfg, &mut progress, None)?;
    if let Some(dir) = &a.out {
        rtloop_lab::loadtest::write_results(dir, &report)?;
    }
    if g.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_loadtest(&report);
    }
    if let Some(e) = &report.error {
        bail!("{e}");
    }
    Ok(())
}

fn print_loadtest(j: &LoadtestReport) {
    let mut t = Table::new(&["figure", "value"]);
    t.row(&["transport", j.transport.as_str()]);
    t.row(&["ReadSize".to_string(), format!("{} B", j.read_size)]);
    t.row(&[
        "load".to_string(),
        format!(
            "{} frames/s x {} words = {:.1} MB/s",
            j.load.fps,
            j.load.received_words,
            j.bytes_per_s_configured / 1e6
        ),
    ]);
    if let Some(d) = &j.device {
        t.row(&[
            "device rate made, measured window (overloaded below 98 %)".to_string(),
            format!(
                "{:.0} of {:.1} frames/s over {:.2} s ({:.0} over the whole run)",
                d.fps_measured, d.fps_configured, d.seconds_measured, d.fps_achieved
            ),
        ]);
        t.row(&[
            "device lateness p99 / max (its own scheduling)".to_string(),
            format!("{} / {}", us(d.lateness.p99_ns), us(d.lateness.max_ns)),
        ]);
        t.row(&[
            "most frames made in one step (after its own stall: twice the rate)".to_string(),
            format!(
                "{} (its catch-up window then: {})",
                d.burst_max_frames,
                us(d.burst_window_ns)
            ),
        ]);
        t.row(&[
            "FIFO high water, measured window (device, exact)".to_string(),
            format!(
                "{} B = {:.6} %",
                d.fifo_high_water, d.fifo_high_water_percent
            ),
        ]);
        t.row(&[
            "FIFO high water, whole run with warm-up (device, exact)".to_string(),
            format!("{} B", d.fifo_high_water_run),
        ]);
    }
    if let Some(h) = &j.host {
        let l = &h.latency;
        t.row(&["loopbacks measured".to_string(), l.count.to_string()]);
        t.row(&[
            "latency p50 / p99 / p99.9 / max".to_string(),
            format!(
                "{} / {} / {} / {}",
                us(l.p50_ns),
                us(l.p99_ns),
                us(l.p999_ns),
                us(l.max_ns)
            ),
        ]);
        t.row(&["beyond 1 ms".to_string(), h.beyond_1ms.to_string()]);
        t.row(&[
            "PercentUsed max, measured window (memory monitor samples)".to_string(),
            format!("{:.6} %", h.percent_used_max),
        ]);
        t.row(&[
            "host queue depth mean / max (frames per block)".to_string(),
            format!("{:.1} / {}", h.queue_mean, h.queue_max),
        ]);
        t.row(&[
            "data read".to_string(),
            format!("{:.1} MB/s", h.bytes_per_s / 1e6),
        ]);
        if let Some(w) = &h.work {
            t.row(&[
                "work per block p50 / p99".to_string(),
                format!(
                    "{} / {} ({} crossings)",
                    us(w.p50_ns),
                    us(w.p99_ns),
                    h.work_events
                ),
            ]);
        }
    }
    if let Some(r) = &j.reference_pingpong {
        t.row(&[
            "reference: bare cache-line ping-pong p50 / p99.9 / max".to_string(),
            format!("{} / {} / {}", us(r.p50_ns), us(r.p999_ns), us(r.max_ns)),
        ]);
    }
    let preempted = (
        j.host.as_ref().and_then(|h| h.preempted),
        j.device.as_ref().and_then(|d| d.preempted),
    );
    if let (Some(h), Some(d)) = preempted {
        t.row(&[
            "preemptions in the measured window, host / device".to_string(),
            format!("{h} / {d} (another task took their CPU; each stalls the loop)"),
        ]);
    }
    if let Some(r) = &j.reference_paced {
        t.row(&[
            "reference sampled as the loopbacks: p50 / p99 / p99.9 / max".to_string(),
            format!(
                "{} / {} / {} / {} ({} round trips over the measured seconds)",
                us(r.p50_ns),
                us(r.p99_ns),
                us(r.p999_ns),
                us(r.max_ns),
                r.count
            ),
        ]);
        if let Some(h) = &j.host {
            let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
            t.row(&[
                "latency p99 / p99.9 against that reference".to_string(),
                format!(
                    "{:.1}x / {:.1}x",
                    ratio(h.latency.p99_ns, r.p99_ns),
                    ratio(h.latency.p999_ns, r.p999_ns)
                ),
            ]);
        }
    }
    if let (Some(ms), Some(pct)) = (j.stolen_ms, j.stolen_percent) {
        t.row(&[
            "vCPU time stolen by the hypervisor during the run".to_string(),
            format!("{ms:.0} ms ({pct:.2} % of both CPUs)"),
        ]);
    }
    t.row(&[
        "verdict (as lab tune judges a step)".to_string(),
        format!("{}: {}", j.verdict.label(), j.verdict_notes),
    ]);
    if let Some(e) = &j.error {
        t.row(&["error", e.as_str()]);
    }
    println!("{}", t.render());
}

fn tune_cmd(a: &TuneArgs, g: &Global) -> Result<()> {
    let lab = a.load.settings()?;
    let cfg = rtloop_lab::loadtest::TuneConfig {
        loopbacks: a.loopbacks,
        max_seconds: a.max_seconds,
        start: a.start,
        bisect: a.bisect,
        margin: a.margin,
        rate_sweep: a.rate_sweep,
        read_size: a.read_size.clone(),
        quick: a.quick,
    };
    let quiet = g.json;
    let result = rtloop_lab::loadtest::tune(&lab, &cfg, &mut |read_size, fps| {
        if !quiet {
            eprintln!("ReadSize {read_size} B at {fps} frames/s ...");
        }
    })?;
    if let Some(dir) = &a.out {
        rtloop_lab::loadtest::write_tuning(dir, &result)?;
    }
    if g.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        println!("{}", tune::table(&result));
    }
    Ok(())
}
