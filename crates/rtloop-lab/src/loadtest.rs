//! One load test as a library call: the emulated device in its own process, the host here,
//! a typed report back. The command line (`rtloop lab loadtest`) and the Python package
//! (`rtloop.lab.loadtest`) are both thin shells over [`loadtest`]; the tuner runs
//! [`run_step`] once per step.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout};
use std::time::{Duration, Instant};

use rtloop_launch::{ChildRole, LaunchError};
use rtloop_metrics::Summary;
use rtloop_sys as sys;
use serde::{Deserialize, Serialize};

use crate::device::{DeviceConfig, DeviceReport};
use crate::frame::{self, ConfigError, LoadTester};
use crate::host::{self, HostConfig, HostReport, Snapshot};
use crate::link::{self, HostSide, LinkSpec};
use crate::reference::{self, ReferenceError};
use crate::work::{BlockWork, Work};

/// Processing per block the lab can do itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkKind {
    /// Nothing: the loop's own latency.
    #[default]
    None,
    /// A 300-3000 Hz band-pass and a threshold detector over every channel of every frame.
    Bandpass,
}

/// The load and how it travels: what a load test and a tuning sweep share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabSettings {
    /// The load tester's settings.
    pub load: LoadTester,
    /// Device-to-host transport, one of [`link::TRANSPORTS`].
    pub transport: String,
    /// Loop back the hub clock of every Nth load-tester frame.
    pub every: u64,
    /// The device's hardware FIFO in bytes (a full FIFO ends the run, as on ONIX).
    pub fifo_bytes: u64,
    /// Memory monitor samples per second (1..=1000).
    pub monitor_hz: u64,
    /// Microseconds the host polls for data before it sleeps.
    pub spin_us: u64,
    /// Processing per block (a caller's own work replaces it).
    pub work: WorkKind,
    /// Publish the live figures as the streams `<prefix>.latency` and
    /// `<prefix>.percent_used` while a run goes on ([`crate::live`]); None: publish nothing.
    #[serde(default)]
    pub publish: Option<String>,
}

impl LabSettings {
    /// The settings of a preset load (`2xnp2`, `intan64`) with the command line's defaults.
    pub fn profile(name: &str) -> Result<LabSettings, LabError> {
        let p = frame::profile(name)?;
        Ok(LabSettings {
            load: p.load,
            transport: "stream".into(),
            every: 100,
            fifo_bytes: 256 << 20,
            monitor_hz: 100,
            spin_us: 200,
            work: WorkKind::None,
            publish: None,
        })
    }

    /// Check everything before any process starts.
    pub fn validate(&self) -> Result<(), LabError> {
        self.load.validate()?;
        if !link::TRANSPORTS.contains(&self.transport.as_str()) {
            return Err(LabError::Transport {
                given: self.transport.clone(),
                allowed: link::TRANSPORTS.join(", "),
            });
        }
        if self.every == 0 {
            return Err(ConfigError::EveryZero.into());
        }
        self.device(&self.load, 1.0, 0.0).validate()?;
        Ok(())
    }

    fn device(&self, lt: &LoadTester, max_seconds: f64, warmup_seconds: f64) -> DeviceConfig {
        DeviceConfig {
            warmup_seconds,
            fps: lt.fps,
            received_words: lt.received_words,
            transmitted_words: lt.transmitted_words,
            monitor_hz: self.monitor_hz,
            fifo_bytes: self.fifo_bytes,
            max_seconds,
        }
    }

    fn own_work(&self, lt: &LoadTester) -> Option<Work> {
        (self.work == WorkKind::Bandpass).then(|| {
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

/// One load test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadtestConfig {
    /// The load and transport.
    pub lab: LabSettings,
    /// Bytes per read (a multiple of 4, at least the largest frame: [`frame::read_size`]).
    pub read_size: u64,
    /// Seconds to measure, after `warmup`.
    pub seconds: f64,
    /// Seconds to run before measuring.
    pub warmup: f64,
    /// Stop once this many loopback results were collected.
    pub loopbacks: Option<u64>,
    /// Measure the bare cache-line ping-pong references: first (up to 5 s), and after the
    /// run sampled as its loopbacks were (`LoadtestReport::reference_paced`).
    pub reference: bool,
}

/// What one load test measured (the command line's `--json` is this, serialised).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LoadtestReport {
    /// The load.
    pub load: LoadTester,
    /// The transport.
    pub transport: String,
    /// Bytes per read.
    pub read_size: u64,
    /// The load's data rate as configured.
    pub bytes_per_s_configured: f64,
    /// The bare ping-pong reference of the same run, if measured.
    pub reference_pingpong: Option<Summary>,
    /// The same ping-pong sampled the way the run sampled its loopbacks (as many round trips
    /// as loopbacks measured, spread evenly over the measured seconds, both sides spinning),
    /// measured right after the run: the reference for the run's p99 and p99.9.
    pub reference_paced: Option<Summary>,
    /// vCPU time the hypervisor reports it took during the run (/proc/stat steal), ms, both
    /// CPUs together; not every stall is counted there.
    pub stolen_ms: Option<f64>,
    /// `stolen_ms` as a share of the run's CPU time.
    pub stolen_percent: Option<f64>,
    /// The host's figures (None if the run ended before any).
    pub host: Option<HostReport>,
    /// The device's report.
    pub device: Option<DeviceReport>,
    /// Why the run ended early (a FIFO overflow, the device process ending), if it did.
    pub error: Option<String>,
    /// The verdict `rtloop lab tune` gives a step: stable at 0 %, stable near 0 %, unstable,
    /// overloaded (the device did not keep its rate) or error, with the reason.
    pub verdict: crate::tune::Class,
    /// Why that verdict.
    pub verdict_notes: String,
}

/// Why a load test could not run at all (a run that starts and then ends early is a report
/// with `error` set instead).
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A setting is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An unknown profile.
    #[error(transparent)]
    Profile(#[from] frame::UnknownProfile),
    /// An unknown transport.
    #[error("unknown transport {given:?}; allowed: {allowed}")]
    Transport {
        /// What was given.
        given: String,
        /// What is allowed.
        allowed: String,
    },
    /// The transport could not be set up.
    #[error("cannot set up the {transport} link: {source}")]
    Link {
        /// The transport.
        transport: String,
        /// What failed.
        source: rtloop_transport::TransportError,
    },
    /// The device process did not start.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The reference could not be measured.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// The live streams could not be made.
    #[error(transparent)]
    Live(#[from] crate::live::LiveError),
    /// The device process failed.
    #[error("the device: {0}")]
    Device(String),
    /// A sweep's time per step that is not a number of seconds > 0.
    #[error("max seconds {0} per step: a number of seconds > 0")]
    MaxSeconds(f64),
    /// Interrupted (Ctrl-C) between the steps of a sweep.
    #[error("interrupted: the sweep stopped (steps so far are above)")]
    Interrupted,
    /// The results could not be written.
    #[error("cannot write the results into {dir}: {why}")]
    Output {
        /// The directory.
        dir: std::path::PathBuf,
        /// What failed.
        why: String,
    },
}

/// The emulated device's process: its settings, the link to the host, its CPU.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceRole {
    /// The device.
    pub cfg: DeviceConfig,
    /// How it reaches the host.
    pub link: LinkSpec,
    /// The CPU to pin to, if any.
    pub cpu: Option<usize>,
}

impl ChildRole for DeviceRole {
    const NAME: &'static str = "lab-device";
}

rtloop_launch::register_role!(DeviceRole, run_device);

/// In the device process: run [`DeviceRole`] and print its report as one JSON line.
pub fn run_device(role: &DeviceRole) -> Result<(), LabError> {
    if let Some(c) = role.cpu {
        let _ = sys::pin_to_cpu(c);
    }
    let mut link = link::connect_device(&role.link).map_err(|source| LabError::Link {
        transport: format!("{:?}", role.link),
        source,
    })?;
    rtloop_launch::ready();
    let report =
        crate::device::run(&role.cfg, &mut link).map_err(|e| LabError::Device(e.to_string()))?;
    println!(
        "{}",
        serde_json::to_string(&report).map_err(|e| LabError::Device(e.to_string()))?
    );
    Ok(())
}

struct DeviceProcess {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl DeviceProcess {
    /// The device's report once it has ended (waits at most `patience`).
    fn report(&mut self, patience: Duration) -> Option<DeviceReport> {
        let t = Instant::now();
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

/// One run's outcome: what the host and the device saw, and why it ended early if it did.
#[derive(Debug)]
pub struct RunResult {
    /// The host's figures (None if the run ended before any).
    pub host: Option<HostReport>,
    /// The device's report.
    pub device: Option<DeviceReport>,
    /// Why it ended early, if it did.
    pub error: Option<String>,
}

impl RunResult {
    /// The verdict the tuner gives this run: stable at 0 %, stable near 0 %, unstable,
    /// overloaded or error, with its reason.
    #[must_use]
    pub fn classify(&self, read_size: u64, lt: &LoadTester, fifo_bytes: u64) -> crate::tune::Step {
        crate::tune::classify(
            read_size,
            lt.fps,
            fifo_bytes,
            lt.bytes_per_s(),
            self.host.as_ref(),
            self.device.as_ref(),
            self.error.as_deref(),
        )
    }
}

/// One measured run of `lt` at `read_size`: the device process plus the host here. `work`
/// (a caller's function, e.g. Python's) replaces the settings' own work.
#[allow(clippy::too_many_arguments)] // one run's settings, each used once
pub fn run_step(
    lab: &LabSettings,
    lt: &LoadTester,
    read_size: u64,
    seconds: f64,
    warmup: f64,
    loopbacks: Option<u64>,
    progress: &mut (dyn FnMut(&Snapshot) + Send),
    work: Option<&mut dyn BlockWork>,
) -> Result<RunResult, LabError> {
    let id = format!("{}-{}", sys::pid(), read_size);
    let spin = Duration::from_micros(lab.spin_us);
    let link_err = |source| LabError::Link {
        transport: lab.transport.clone(),
        source,
    };
    let mut side = HostSide::prepare(&lab.transport, &id, spin).map_err(link_err)?;
    let two = sys::online_cpus() >= 2;
    let (child, out) = rtloop_launch::spawn_ready(&DeviceRole {
        cfg: lab.device(lt, warmup + seconds + 30.0, warmup),
        link: side.spec().clone(),
        cpu: two.then_some(1),
    })?;
    let mut dev = DeviceProcess { child, out };
    let mut link = side.connect().map_err(|source| LabError::Link {
        transport: lab.transport.clone(),
        source,
    })?;
    if two {
        let _ = sys::pin_to_cpu(0);
    }
    let hcfg = HostConfig {
        load: *lt,
        read_size,
        every: lab.every,
        seconds,
        loopbacks,
        warmup,
        fifo_words: lab.fifo_bytes / 4,
    };
    let mut live = match &lab.publish {
        Some(prefix) => Some(crate::live::LiveStreams::create(prefix, lab.monitor_hz)?),
        None => None,
    };
    let mut own = lab.own_work(lt);
    let result = {
        let dev_ref = &mut dev;
        let mut check = || match dev_ref.child.try_wait() {
            Ok(Some(_)) => Err("the device process ended".to_string()),
            _ => Ok(()),
        };
        let w: Option<&mut dyn BlockWork> = match work {
            Some(c) => Some(c),
            None => own.as_mut().map(|w| w as &mut dyn BlockWork),
        };
        host::run(&hcfg, &mut link, w, live.as_mut(), &mut check, progress)
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
                    lab.fifo_bytes
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

/// Time the hypervisor took from this machine's vCPUs so far, in ms (the `steal` column of
/// /proc/stat, summed over CPUs); `None` where it cannot be read.
fn steal_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let steal: f64 = line.split_whitespace().nth(8)?.parse().ok()?;
    // USER_HZ is 100 on Linux
    Some(steal * 10.0)
}

/// Run one load test: validate, measure the reference if asked, run, report. `progress` gets
/// a snapshot about every second; `work` (optional) is the caller's processing per block.
pub fn loadtest(
    cfg: &LoadtestConfig,
    progress: &mut (dyn FnMut(&Snapshot) + Send),
    work: Option<&mut dyn BlockWork>,
) -> Result<LoadtestReport, LabError> {
    cfg.lab.validate()?;
    let lt = cfg.lab.load;
    let read_size = frame::check_read_size(cfg.read_size, &lt)?;
    let reference_pingpong = if cfg.reference {
        let span = Duration::from_secs_f64(cfg.seconds.min(5.0));
        Some(reference::bare_pingpong(u64::MAX - 2000, Some(span))?.summary())
    } else {
        None
    };
    let steal0 = steal_ms();
    let t0 = Instant::now();
    let r = run_step(
        &cfg.lab,
        &lt,
        read_size,
        cfg.seconds,
        cfg.warmup,
        cfg.loopbacks,
        progress,
        work,
    )?;
    let stolen = steal_ms().zip(steal0).map(|(b, a)| b - a);
    let cpu_ms = t0.elapsed().as_secs_f64() * 1e3 * sys::online_cpus().min(2) as f64;
    let reference_paced = match (&r.host, cfg.reference) {
        (Some(h), true) if h.latency.count > 0 && h.seconds > 0.0 => Some(
            reference::bare_loop_paced(h.latency.count, Duration::from_secs_f64(h.seconds))?
                .summary(),
        ),
        _ => None,
    };
    let step = r.classify(read_size, &lt, cfg.lab.fifo_bytes);
    Ok(LoadtestReport {
        verdict: step.class,
        verdict_notes: step.notes,
        load: lt,
        transport: cfg.lab.transport.clone(),
        read_size,
        bytes_per_s_configured: lt.bytes_per_s(),
        reference_pingpong,
        reference_paced,
        stolen_ms: stolen,
        stolen_percent: stolen.map(|s| 100.0 * s / cpu_ms.max(1.0)),
        host: r.host,
        device: r.device,
        error: r.error,
    })
}

/// Write a report's `results.json`, `latency.png` (HubClockDelta histogram) and
/// `percent_used.png` (the device FIFO over time) into `dir`, creating it.
pub fn write_results(dir: &std::path::Path, report: &LoadtestReport) -> Result<(), LabError> {
    let fail = |why: String| LabError::Output {
        dir: dir.to_owned(),
        why,
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
    let json = serde_json::to_string_pretty(report).map_err(|e| fail(e.to_string()))?;
    std::fs::write(dir.join("results.json"), json).map_err(|e| fail(e.to_string()))?;
    if let Some(h) = &report.host {
        rtloop_metrics::charts::latency_histogram_png(
            &dir.join("latency.png"),
            &format!(
                "closed-loop latency (HubClockDelta), ReadSize {} B, {}",
                report.read_size, report.transport
            ),
            &h.hist,
        )
        .map_err(|e| fail(e.to_string()))?;
        rtloop_metrics::charts::time_series_png(
            &dir.join("percent_used.png"),
            "device FIFO PercentUsed",
            "seconds",
            "percent used",
            &[("PercentUsed", &h.percent_used)],
        )
        .map_err(|e| fail(e.to_string()))?;
    }
    Ok(())
}

/// A ReadSize (or rate) sweep's settings: what `rtloop lab tune` runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TuneConfig {
    /// Loopbacks measured per step (the step ends at this count or `max_seconds`).
    pub loopbacks: u64,
    /// Seconds a step runs at most.
    pub max_seconds: f64,
    /// The largest ReadSize, where the sweep starts halving (bytes).
    pub start: u64,
    /// Bisect between the last stable and the first unstable size, in steps of 4 bytes.
    pub bisect: bool,
    /// Stable sizes needed below the recommended one.
    pub margin: u32,
    /// Hold `read_size` and raise the rate instead (liboni's onix-loadtest).
    pub rate_sweep: bool,
    /// The ReadSize of a rate sweep (bytes, or `min`).
    pub read_size: String,
    /// Short steps (1000 loopbacks, 3 s at most) for smoke tests.
    pub quick: bool,
}

impl Default for TuneConfig {
    fn default() -> Self {
        TuneConfig {
            loopbacks: 10_000,
            max_seconds: 30.0,
            start: 16_384,
            bisect: false,
            margin: 1,
            rate_sweep: false,
            read_size: "2048".into(),
            quick: false,
        }
    }
}

/// Sweep `lab`'s load: ReadSize from `cfg.start` down by halves (or the rate, with
/// `cfg.rate_sweep`), a measured load test per step, and the recommendation. `progress` is
/// told each step before it runs (ReadSize, frames/s). [`interrupt`](crate::interrupt) stops
/// it between steps.
///
/// # Errors
/// A setting out of range, a step that could not run, or an interruption.
pub fn tune(
    lab: &LabSettings,
    cfg: &TuneConfig,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<crate::tune::Tuning, LabError> {
    lab.validate()?;
    if !(cfg.max_seconds.is_finite() && cfg.max_seconds > 0.0) {
        return Err(LabError::MaxSeconds(cfg.max_seconds));
    }
    let lt = lab.load;
    let (loopbacks, max_s) = if cfg.quick {
        (1000, 3.0)
    } else {
        (cfg.loopbacks, cfg.max_seconds)
    };
    let mut run_step = |read_size: u64, fps: Option<u64>| -> Result<crate::tune::Step, LabError> {
        if crate::interrupted() {
            return Err(LabError::Interrupted);
        }
        let mut lt2 = lt;
        if let Some(f) = fps {
            lt2.fps = f;
        }
        progress(read_size, lt2.fps);
        let r = run_step(
            lab,
            &lt2,
            read_size,
            max_s,
            0.5,
            Some(loopbacks),
            &mut |_| {},
            None,
        )?;
        let mut step = r.classify(read_size, &lt2, lab.fifo_bytes);
        // the tail's reference: the bare loop sampled as this step's loopbacks, right after
        // it (only a stable step can be recommended from, so only it needs one)
        let reference = match &r.host {
            Some(h) if step.class.stable() && h.latency.count > 0 && h.seconds > 0.0 => Some(
                reference::bare_loop_paced(h.latency.count, Duration::from_secs_f64(h.seconds))?
                    .summary()
                    .p99_ns,
            ),
            _ => None,
        };
        step.judge_tail(reference, lt2.bytes_per_s());
        Ok(step)
    };
    if cfg.rate_sweep {
        let read_size = frame::read_size(&cfg.read_size, &lt)?;
        crate::tune::rate_sweep(&lt, read_size, &mut |rs, fps| run_step(rs, Some(fps)))
    } else {
        crate::tune::read_size_sweep(&lt, cfg.start, cfg.bisect, cfg.margin, &mut |rs| {
            run_step(rs, None)
        })
    }
}

/// A sweep's results.json and tune.png in `dir`.
///
/// # Errors
/// The directory or a file cannot be written.
pub fn write_tuning(dir: &std::path::Path, t: &crate::tune::Tuning) -> Result<(), LabError> {
    let fail = |why: String| LabError::Output {
        dir: dir.to_owned(),
        why,
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
    let json = serde_json::to_string_pretty(t).map_err(|e| fail(e.to_string()))?;
    std::fs::write(dir.join("results.json"), json).map_err(|e| fail(e.to_string()))?;
    crate::tune::plot(&dir.join("tune.png"), t).map_err(|e| fail(e.to_string()))
}
