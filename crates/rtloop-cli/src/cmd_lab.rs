//! `rtloop lab`: the latency lab (ONIX's closed-loop tuning workflow in software).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rtloop_lab::device::{DeviceConfig, DeviceReport};
use rtloop_lab::frame::{self, LoadTester};
use rtloop_lab::host::{self, HostConfig, HostReport};
use rtloop_lab::link::{self, HostSide, LinkSpec};
use rtloop_lab::tune::{self, Step};
use rtloop_lab::work::{BlockWork, Work};
use rtloop_metrics::{fmt_ns, Summary, Table};
use rtloop_sys as sys;
use serde::Serialize;

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
    /// safety margin. --rate-sweep instead holds ReadSize and finds the last good rate
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
    /// Skip the bare cache-line ping-pong reference measured before the run.
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
    match c {
        LabCommand::Loadtest(a) => loadtest(&a, g),
        LabCommand::Tune(a) => tune_cmd(&a, g),
    }
}

impl LoadArgs {
    /// The load, validated (profile + overrides).
    fn load(&self) -> Result<LoadTester> {
        let p = frame::profile(&self.profile).map_err(anyhow::Error::msg)?;
        let lt = LoadTester {
            fps: self.fps.unwrap_or(p.load.fps),
            received_words: self.received_words.unwrap_or(p.load.received_words),
            transmitted_words: self.transmitted_words.unwrap_or(p.load.transmitted_words),
        };
        lt.validate()?;
        Ok(lt)
    }

    fn check(&self, lt: &LoadTester) -> Result<()> {
        if !link::TRANSPORTS.contains(&self.transport.as_str()) {
            bail!(
                "unknown transport {:?}; allowed: {}",
                self.transport,
                link::TRANSPORTS.join(", ")
            );
        }
        if self.every == 0 {
            return Err(frame::ConfigError::EveryZero.into());
        }
        self.device(lt, 1.0).validate()?;
        Ok(())
    }

    fn device(&self, lt: &LoadTester, max_seconds: f64) -> DeviceConfig {
        DeviceConfig {
            fps: lt.fps,
            received_words: lt.received_words,
            transmitted_words: lt.transmitted_words,
            monitor_hz: self.monitor_hz,
            fifo_bytes: self.fifo_bytes,
            max_seconds,
        }
    }

    fn work(&self, lt: &LoadTester) -> Option<Work> {
        (self.work == "bandpass").then(|| {
            Work::bandpass(
                lt.received_words as usize,
                lt.actual_fps(),
                300.0,
                3000.0,
                -2000.0,
            )
        })
    }
}

/// One run: device process + host here. Errors that end the run (overflow) come back as
/// `Ok` with the device's report saying so.
pub struct RunResult {
    /// The host's figures (None if the run ended before any).
    pub host: Option<HostReport>,
    /// The device's report.
    pub device: Option<DeviceReport>,
    /// Why it ended early, if it did.
    pub error: Option<String>,
}

struct DeviceProcess {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl DeviceProcess {
    fn start(cfg: &DeviceConfig, spec: &LinkSpec, cpu: Option<usize>) -> Result<DeviceProcess> {
        let mut child = crate::self_command()
            .args(["child", "lab-device"])
            .arg(serde_json::to_string(cfg)?)
            .arg(serde_json::to_string(spec)?)
            .arg(cpu.map_or("-".into(), |c| c.to_string()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start the device process")?;
        let mut out = BufReader::new(child.stdout.take().context("device stdout")?);
        let mut line = String::new();
        out.read_line(&mut line)?;
        if line.trim() != "ready" {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the device did not start: {line:?}");
        }
        Ok(DeviceProcess { child, out })
    }

    /// The device's report once it has ended (waits at most `patience`).
    fn report(&mut self, patience: Duration) -> Option<DeviceReport> {
        let t = std::time::Instant::now();
        while t.elapsed() < patience {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut line = String::new();
        let _ = self.out.read_line(&mut line);
        serde_json::from_str(line.trim()).ok()
    }
}

/// `lab-device CONFIG_JSON LINK_JSON CPU`: the device process.
pub fn device_role(args: &[String]) -> Result<()> {
    let [cfg, spec, cpu] = args else {
        bail!("usage: lab-device CONFIG_JSON LINK_JSON CPU|-")
    };
    let cfg: DeviceConfig = serde_json::from_str(cfg)?;
    let spec: LinkSpec = serde_json::from_str(spec)?;
    if let Ok(c) = cpu.parse::<usize>() {
        let _ = sys::pin_to_cpu(c);
    }
    let mut link = link::connect_device(&spec)?;
    println!("ready");
    let report = rtloop_lab::device::run(&cfg, link.as_mut())?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// One measured run at `read_size`; `custom` replaces `--work` (the Python API's function).
#[allow(clippy::too_many_arguments)] // one run's settings, each used once
fn one_run(
    load: &LoadArgs,
    lt: &LoadTester,
    read_size: u64,
    seconds: f64,
    warmup: f64,
    loopbacks: Option<u64>,
    progress: &mut dyn FnMut(&host::Snapshot),
    custom: Option<&mut dyn BlockWork>,
) -> Result<RunResult> {
    let id = format!("{}-{}", sys::pid(), read_size);
    let spin = Duration::from_micros(load.spin_us);
    let mut side = HostSide::prepare(&load.transport, &id, spin)?;
    let two = sys::online_cpus() >= 2;
    let dcfg = load.device(lt, warmup + seconds + 30.0);
    let mut dev = DeviceProcess::start(&dcfg, side.spec(), two.then_some(1))?;
    let mut link = side.connect()?;
    if two {
        let _ = sys::pin_to_cpu(0);
    }
    let hcfg = HostConfig {
        load: *lt,
        read_size,
        every: load.every,
        seconds,
        loopbacks,
        warmup,
        fifo_words: load.fifo_bytes / 4,
    };
    let mut work = load.work(lt);
    let exited = |dev: &mut DeviceProcess| matches!(dev.child.try_wait(), Ok(Some(_)));
    let result = {
        let dev_ref = &mut dev;
        let mut check = || {
            if exited(dev_ref) {
                Err("the device process ended".to_string())
            } else {
                Ok(())
            }
        };
        let w: Option<&mut dyn BlockWork> = match custom {
            Some(c) => Some(c),
            None => work.as_mut().map(|w| w as &mut dyn BlockWork),
        };
        host::run(&hcfg, link.as_mut(), w, &mut check, progress)
    };
    drop(link);
    let _ = sys::allow_all_cpus();
    let device = dev.report(Duration::from_secs(5));
    Ok(match result {
        Ok(h) => RunResult {
            host: Some(h),
            device,
            error: None,
        },
        Err(e) => {
            let why = match &device {
                Some(d) if d.ended == "overflow" => format!(
                    "the device's hardware FIFO overflowed ({} bytes): the host does not read fast enough at ReadSize {read_size}; acquisition stopped, as ONIX stops it",
                    load.fifo_bytes
                ),
                _ => e.to_string(),
            };
            RunResult {
                host: None,
                device,
                error: Some(why),
            }
        }
    })
}

#[derive(Debug, Serialize)]
struct LoadtestJson<'a> {
    load: LoadTester,
    transport: &'a str,
    read_size: u64,
    bytes_per_s_configured: f64,
    reference_pingpong: Option<Summary>,
    /// vCPU time the hypervisor reports it took during the run (/proc/stat steal), ms, both
    /// CPUs together, and as a share of the run's CPU time. Not every stall is counted there.
    stolen_ms: Option<f64>,
    stolen_percent: Option<f64>,
    host: Option<&'a HostReport>,
    device: Option<&'a DeviceReport>,
    error: Option<&'a str>,
}

/// Time the hypervisor took from this machine's vCPUs so far, in ms (the `steal` column of
/// /proc/stat, summed over CPUs); `None` where it cannot be read.
fn steal_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let steal: f64 = line.split_whitespace().nth(8)?.parse().ok()?;
    // USER_HZ is 100 on Linux
    Some(steal * 10.0)
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
    loadtest_with(a, g, None).map(|_| ())
}

/// `rtloop lab loadtest ARGS...` with a work step of the caller's (the Python API passes a
/// Python function); returns the results as JSON. Every setting is validated as on the
/// command line.
pub fn loadtest_json(args: &[String], work: &mut dyn BlockWork) -> Result<String> {
    use clap::Parser;
    #[derive(clap::Parser)]
    #[command(name = "loadtest")]
    struct P {
        #[command(flatten)]
        a: LoadtestArgs,
    }
    let p = P::try_parse_from(std::iter::once("loadtest".to_string()).chain(args.iter().cloned()))
        .map_err(|e| anyhow::anyhow!("{}", e.render()))?;
    let g = Global {
        json: true,
        verbose: 0,
        log_level: None,
    };
    loadtest_with(&p.a, &g, Some(work))
}

fn loadtest_with(
    a: &LoadtestArgs,
    g: &Global,
    custom: Option<&mut dyn BlockWork>,
) -> Result<String> {
    let lt = a.load.load()?;
    a.load.check(&lt)?;
    let read_size = frame::read_size(&a.read_size, &lt)?;
    let custom_is_api = custom.is_some();
    let reference = if a.no_reference {
        None
    } else {
        if !g.json {
            eprintln!(
                "reference: a bare cache-line ping-pong between the two CPUs for {:.0} s ...",
                a.seconds.min(5.0)
            );
        }
        let span = Duration::from_secs_f64(a.seconds.min(5.0));
        Some(crate::cmd_bench::bare_pingpong_until(u64::MAX - 2000, Some(span))?.summary())
    };
    if !g.json {
        eprintln!(
            "load tester: {} frames/s x {} words ({:.1} MB/s), loopback every {}; ReadSize {read_size} B over {}",
            lt.actual_fps().round(),
            lt.received_words,
            lt.bytes_per_s() / 1e6,
            a.load.every,
            a.load.transport
        );
    }
    let quiet = g.json;
    let mut progress = |s: &host::Snapshot| {
        if !quiet {
            eprintln!(
                "{:5.1} s  loopbacks {:>7}  p50 {:>9}  p99 {:>9}  p99.9 {:>9}  max {:>9}  PercentUsed {:.4} % (max {:.4} %)  host queue max {}",
                s.t,
                s.loopbacks,
                us(s.latency.p50_ns),
                us(s.latency.p99_ns),
                us(s.latency.p999_ns),
                us(s.latency.max_ns),
                s.percent_used,
                s.percent_used_max,
                s.queue_max
            );
            eprintln!("        {}", text_histogram(&s.histogram_us));
        }
    };
    let steal0 = steal_ms();
    let t0 = std::time::Instant::now();
    let r = one_run(
        &a.load,
        &lt,
        read_size,
        a.seconds,
        a.warmup,
        a.loopbacks,
        &mut progress,
        custom,
    )?;
    let stolen = steal_ms().zip(steal0).map(|(b, a)| b - a);
    let cpu_ms = t0.elapsed().as_secs_f64() * 1e3 * sys::online_cpus().min(2) as f64;
    let json = LoadtestJson {
        stolen_ms: stolen,
        stolen_percent: stolen.map(|s| 100.0 * s / cpu_ms.max(1.0)),
        load: lt,
        transport: &a.load.transport,
        read_size,
        bytes_per_s_configured: lt.bytes_per_s(),
        reference_pingpong: reference,
        host: r.host.as_ref(),
        device: r.device.as_ref(),
        error: r.error.as_deref(),
    };
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(
            dir.join("results.json"),
            serde_json::to_string_pretty(&json)?,
        )?;
        if let Some(h) = &r.host {
            plots(dir, h, read_size, &a.load.transport)?;
        }
    }
    let text = serde_json::to_string_pretty(&json)?;
    if custom_is_api {
        // the Python API gets the JSON back instead of printed
    } else if g.json {
        println!("{text}");
    } else {
        print_loadtest(&json);
    }
    if let Some(e) = &r.error {
        bail!("{e}");
    }
    Ok(text)
}

fn plots(dir: &Path, h: &HostReport, read_size: u64, transport: &str) -> Result<()> {
    rtloop_metrics::charts::latency_histogram_png(
        &dir.join("latency.png"),
        &format!("closed-loop latency (HubClockDelta), ReadSize {read_size} B, {transport}"),
        &h.hist,
        1000,
        1_000_000,
    )?;
    rtloop_metrics::charts::time_series_png(
        &dir.join("percent_used.png"),
        "device FIFO PercentUsed",
        "seconds",
        "percent used",
        &[("PercentUsed", &h.percent_used)],
    )?;
    Ok(())
}

fn print_loadtest(j: &LoadtestJson<'_>) {
    let mut t = Table::new(&["figure", "value"]);
    t.row(&["transport", j.transport]);
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
    if let Some(d) = j.device {
        t.row(&[
            "device rate achieved".to_string(),
            format!(
                "{:.0} frames/s (configured {:.1})",
                d.fps_achieved, d.fps_configured
            ),
        ]);
        t.row(&[
            "device lateness p99 / max (its own scheduling)".to_string(),
            format!("{} / {}", us(d.lateness.p99_ns), us(d.lateness.max_ns)),
        ]);
        t.row(&[
            "FIFO high water".to_string(),
            format!(
                "{} B = {:.6} %",
                d.fifo_high_water, d.fifo_high_water_percent
            ),
        ]);
    }
    if let Some(h) = j.host {
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
            "PercentUsed max".to_string(),
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
    if let (Some(ms), Some(pct)) = (j.stolen_ms, j.stolen_percent) {
        t.row(&[
            "vCPU time stolen by the hypervisor during the run".to_string(),
            format!("{ms:.0} ms ({pct:.2} % of both CPUs)"),
        ]);
    }
    if let Some(e) = j.error {
        t.row(&["error", e]);
    }
    println!("{}", t.render());
}

fn tune_cmd(a: &TuneArgs, g: &Global) -> Result<()> {
    let lt = a.load.load()?;
    a.load.check(&lt)?;
    let (loopbacks, max_s) = if a.quick {
        (1000, 3.0)
    } else {
        (a.loopbacks, a.max_seconds)
    };
    let quiet = g.json;
    let run_step = |read_size: u64, fps: Option<u64>| -> Result<Step> {
        let mut lt2 = lt;
        if let Some(f) = fps {
            lt2.fps = f;
        }
        if !quiet {
            eprintln!("ReadSize {read_size} B at {} frames/s ...", lt2.fps);
        }
        let r = one_run(
            &a.load,
            &lt2,
            read_size,
            max_s,
            0.5,
            Some(loopbacks),
            &mut |_| {},
            None,
        )?;
        Ok(tune::classify(
            read_size,
            lt2.fps,
            a.load.fifo_bytes,
            lt2.bytes_per_s(),
            r.host.as_ref(),
            r.device.as_ref(),
            r.error.as_deref(),
        ))
    };
    let result = if a.rate_sweep {
        let read_size = frame::read_size(&a.read_size, &lt)?;
        tune::rate_sweep(&lt, read_size, &mut |rs, fps| run_step(rs, Some(fps)))?
    } else {
        tune::read_size_sweep(&lt, a.start, a.bisect, a.margin, &mut |rs| {
            run_step(rs, None)
        })?
    };
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(
            dir.join("results.json"),
            serde_json::to_string_pretty(&result)?,
        )?;
        tune::plot(&dir.join("tune.png"), &result)?;
    }
    if g.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        println!("{}", tune::table(&result));
    }
    Ok(())
}
