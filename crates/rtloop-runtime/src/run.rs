//! The supervisor (`rtloop run model.yaml`): validates the model, refuses a tick the machine
//! cannot schedule, compiles Rust modules, creates the signals' streams and the board,
//! starts one process per source, module and sink, drives the tick from its timer thread,
//! prints live summary lines, stops everything on a time limit, Ctrl-C, a crash or (if the
//! model says so) a deadline miss, and reports the timing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtloop_metrics::{fmt_ns, LatencyHistogram, Summary};
use rtloop_stream::{Stream, StreamConfig};

use crate::board::{Board, ProcState, RUNNING};
use crate::model::{Body, Kind, Model};
use crate::process::{self, ChildArgs, ProcessReport};
use crate::timer::{self, MinimumTick, Realtime};

/// Stop reasons (board codes).
pub mod reason {
    /// `num_ticks` or the time limit was reached.
    pub const LIMIT: u64 = 1;
    /// Ctrl-C / SIGTERM.
    pub const INTERRUPT: u64 = 2;
    /// A process failed or died.
    pub const FAILED: u64 = 3;
    /// A deadline was missed under `on_miss: stop`.
    pub const MISS: u64 = 4;
}

/// How to run a model.
#[derive(Clone)]
pub struct RunOptions {
    /// Stop after this long (besides `num_ticks`).
    pub seconds: Option<f64>,
    /// Run this many ticks (overrides `num_ticks`).
    pub ticks: Option<u64>,
    /// Keep the signals' streams after the run.
    pub keep: bool,
    /// Print live summary lines on stderr every this often (None = quiet).
    pub live_every: Option<Duration>,
    /// Set to stop the model (Ctrl-C).
    pub stop: Arc<AtomicBool>,
    /// The program a driver or Rust module process runs as (`PROGRAM child runtime-process
    /// JSON`): [`rtloop_launch::rtloop_command`], this program itself unless `RTLOOP_EXE`
    /// names another; whichever it is starts with [`rtloop_launch::play_if_child`].
    pub rtloop_command: fn() -> Command,
    /// Where the run writes: what sinks write (the logger's `path`, the recorder's `out`,
    /// relative paths). Created if missing. `None`: [`default_out_dir`], `out/<model name>`
    /// in the current directory, never the model file's directory.
    pub out_dir: Option<PathBuf>,
}

impl Default for RunOptions {
    /// The model's own limits, streams removed after the run, quiet, children started as
    /// this program (or `RTLOOP_EXE`), output in [`default_out_dir`].
    fn default() -> Self {
        RunOptions {
            seconds: None,
            ticks: None,
            keep: false,
            live_every: None,
            stop: Arc::default(),
            rtloop_command: rtloop_launch::rtloop_command,
            out_dir: None,
        }
    }
}

/// The output directory of a run of the model `name` when none is given: `out/<name>` in the
/// current directory.
#[must_use]
pub fn default_out_dir(name: &str) -> PathBuf {
    PathBuf::from("out").join(name)
}

/// Why a model did not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The model file has problems (every one listed).
    #[error("{0}")]
    Model(#[from] crate::model::ModelErrors),
    /// The tick is shorter than this machine can schedule.
    #[error("tick_us {tick_us} is below what this machine can schedule: measured minimum {min_us} µs (p90 timer wake-up {wake_us} µs + 3 hand-offs of p90 {handoff_us} µs); allowed: tick_us >= {min_us}")]
    TickTooShort {
        /// The model's tick in µs.
        tick_us: u64,
        /// Measured minimum in µs.
        min_us: u64,
        /// Its parts.
        wake_us: u64,
        /// Its parts.
        handoff_us: u64,
    },
    /// A Rust module did not compile.
    #[error("module {process:?}: {source}")]
    Compile {
        /// The module.
        process: String,
        /// Why (rustc's diagnostics for a compile error).
        source: crate::rust_module::ModuleError,
    },
    /// Streams, board or processes could not be set up.
    #[error("{0}")]
    Setup(String),
}

/// One process's part of the report.
#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProcessTiming {
    /// Name.
    pub name: String,
    /// Section.
    pub kind: Kind,
    /// What it runs (`driver synthetic`, `python filt.py`, `rust detect.rs`).
    pub runs: String,
    /// CPU it was pinned to.
    pub core: Option<usize>,
    /// Ticks it completed.
    pub ticks: u64,
    /// Execution time per tick.
    pub exec: Option<Summary>,
    /// Outputs committed this long after the tick started.
    pub done_after_start: Option<Summary>,
    /// Deadlines missed (not done with a tick when the next one started).
    pub misses: u64,
    /// Ticks whose inputs were overwritten before it read them.
    pub input_overruns: u64,
    /// Its summary line (drivers say what they counted).
    pub summary: String,
    /// Its error, or how it died.
    pub error: Option<String>,
    /// A block's delay: how long its output lags its input (none for other processes).
    pub delay: Option<crate::blocks::Delay>,
    #[serde(skip)]
    exec_hist: Option<LatencyHistogram>,
}

impl ProcessTiming {
    /// The execution-time histogram, if the process reported one.
    #[must_use]
    pub fn exec_histogram(&self) -> Option<&LatencyHistogram> {
        self.exec_hist.as_ref()
    }
}

/// The timing report of a run.
#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunReport {
    /// Model name.
    pub model: String,
    /// Tick period in ns.
    pub tick_ns: u64,
    /// Ticks the timer started.
    pub ticks: u64,
    /// Wall time of the run in s.
    pub seconds: f64,
    /// Realtime set-up in effect.
    pub realtime: Realtime,
    /// The machine's measured minimum tick.
    pub minimum_tick: MinimumTick,
    /// Tick-start lateness (actual start − deadline).
    pub tick_start: Summary,
    /// Per process.
    pub processes: Vec<ProcessTiming>,
    /// Why it stopped: `limit`, `interrupt`, `failed`, `miss`.
    pub stopped_by: String,
    /// The first problem, when it did not end by its limit or Ctrl-C.
    pub problem: Option<String>,
    /// Where the run wrote (sinks' files; the command line adds the report and plots).
    pub out_dir: PathBuf,
    #[serde(skip)]
    tick_hist: LatencyHistogram,
}

impl RunReport {
    /// Whether the run ended as asked (limit or Ctrl-C) with no process failing.
    #[must_use]
    pub fn ok(&self) -> bool {
        self.problem.is_none()
    }

    /// The tick-start lateness histogram.
    #[must_use]
    pub fn tick_histogram(&self) -> &LatencyHistogram {
        &self.tick_hist
    }

    /// The report as a table for people.
    #[must_use]
    pub fn table(&self) -> String {
        let s = &self.tick_start;
        let mut out = format!(
            "model {}: {} ticks of {} ({:.2} s); realtime: {}\n\
             tick start lateness: p50 {}  p99 {}  p99.9 {}  max {}  (minimum tick here: {})\n",
            self.model,
            self.ticks,
            fmt_ns(self.tick_ns),
            self.seconds,
            describe_rt(self.realtime),
            fmt_ns(s.p50_ns),
            fmt_ns(s.p99_ns),
            fmt_ns(s.p999_ns),
            fmt_ns(s.max_ns),
            fmt_ns(self.minimum_tick.min_ns),
        );
        let mut t = rtloop_metrics::Table::new(&[
            "process", "kind", "runs", "core", "ticks", "exec p50", "exec p99", "exec max",
            "done p99", "misses", "overruns", "note",
        ]);
        let q = |s: &Option<Summary>, f: fn(&Summary) -> u64| {
            s.as_ref().map_or_else(|| "-".to_string(), |s| fmt_ns(f(s)))
        };
        for p in &self.processes {
            t.row(&[
                p.name.clone(),
                format!("{:?}", p.kind).to_lowercase(),
                p.runs.clone(),
                p.core.map_or_else(|| "-".into(), |c| c.to_string()),
                p.ticks.to_string(),
                q(&p.exec, |s| s.p50_ns),
                q(&p.exec, |s| s.p99_ns),
                q(&p.exec, |s| s.max_ns),
                q(&p.done_after_start, |s| s.p99_ns),
                p.misses.to_string(),
                p.input_overruns.to_string(),
                p.error.clone().unwrap_or_else(|| p.summary.clone()),
            ]);
        }
        out.push_str(&t.render());
        out.push_str(&format!("stopped by: {}", self.stopped_by));
        if let Some(p) = &self.problem {
            out.push_str(&format!(" — {p}"));
        }
        out.push('\n');
        out
    }

    /// Write `report.json` and PNG histograms (tick start, each process's execution time)
    /// into `dir`. Returns the files written.
    pub fn write_dir(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let mut files = Vec::new();
        let json = dir.join("report.json");
        std::fs::write(&json, serde_json::to_vec_pretty(self)?)?;
        files.push(json);
        let plot = |name: &str, title: &str, h: &LatencyHistogram| -> Option<PathBuf> {
            if h.is_empty() {
                return None;
            }
            let path = dir.join(name);
            #[cfg(feature = "charts")]
            return rtloop_metrics::charts::latency_histogram_png(&path, title, h)
                .ok()
                .map(|()| path);
            // built without charts: report.json alone
            #[cfg(not(feature = "charts"))]
            {
                let _ = (path, title);
                None
            }
        };
        files.extend(plot(
            "tick_start.png",
            &format!("{}: tick start lateness", self.model),
            &self.tick_hist,
        ));
        for p in &self.processes {
            if let Some(h) = &p.exec_hist {
                files.extend(plot(
                    &format!("exec_{}.png", p.name),
                    &format!("{}: {} execution time per tick", self.model, p.name),
                    h,
                ));
            }
        }
        Ok(files)
    }
}

fn describe_rt(rt: Realtime) -> String {
    let mut v = Vec::new();
    if rt.fifo {
        v.push("SCHED_FIFO");
    }
    if rt.pin {
        v.push("pinned");
    }
    if rt.mlock {
        v.push("mlockall");
    }
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn describe_body(b: &Body) -> String {
    let file = |p: &Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |f| f.to_string_lossy().into_owned(),
        )
    };
    match b {
        Body::Driver { driver, .. } => format!("driver {driver}"),
        Body::Python { code, numba: true } => format!("python+numba {}", file(code)),
        Body::Python { code, .. } => format!("python {}", file(code)),
        Body::Rust { code } => format!("rust {}", file(code)),
        Body::Block { block, .. } => format!("block {block}"),
    }
}

/// Check, without running any of its code, that a Python module file defines a top-level
/// `step` that takes the arguments the model passes (its inputs, then its outputs, in
/// order) and, if the model gives it `options:`, an `init(ctx, ...)` that takes exactly
/// those (names not taken, parameters without default not given). The file is parsed
/// (Python's `ast`) by the model's interpreter.
pub fn check_python_step(model: &Model, process: &crate::model::Process) -> Result<(), String> {
    let crate::model::Body::Python { code, .. } = &process.body else {
        return Ok(());
    };
    const SCRIPT: &str = r#"
import ast, sys
import json
path, options, names = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
try:
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
except SyntaxError as e:
    print(f"{path}:{e.lineno}: syntax error: {e.msg}"); sys.exit(3)
steps = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "step"]
if not steps:
    print(f"{path} has no top-level `def step({', '.join(names)}): ...`"); sys.exit(3)
inits = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "init"]
a = steps[-1].args
params = [x.arg for x in a.posonlyargs + a.args]
required = len(params) - len(a.defaults)
n = len(names)
# with an init, step also takes the state init returns after its outputs: how many arrays
# that is shows only when init runs
if (len(params) < n and a.vararg is None) or (required > n and not inits) or a.kwonlyargs and len(a.kwonlyargs) > len([d for d in a.kw_defaults if d is not None]):
    print(f"{path}:{steps[-1].lineno}: step({', '.join(params)}) does not take the {n} arguments the model passes: {', '.join(names)} (its inputs, then its outputs{', then the state init returns' if inits else ''})"); sys.exit(3)
if options and not inits:
    print(f"{path} has no top-level `def init(ctx, {', '.join(options)}): ...` to receive the module's options: {', '.join(options)}"); sys.exit(3)
if inits:
    a = inits[-1].args
    pos = [x.arg for x in a.posonlyargs + a.args]
    if not pos and a.vararg is None:
        print(f"{path}:{inits[-1].lineno}: init() must take the module's context first: def init(ctx, ...)"); sys.exit(3)
    first = (a.posonlyargs + a.args)[:1]
    named = [x.arg for x in a.args if x not in first] + [x.arg for x in a.kwonlyargs]
    shown = "init(" + ", ".join(pos + (["*" + a.vararg.arg] if a.vararg else []) + [x.arg for x in a.kwonlyargs] + (["**" + a.kwarg.arg] if a.kwarg else [])) + ")"
    unknown = [k for k in options if k not in named]
    if unknown and a.kwarg is None:
        print(f"{path}:{inits[-1].lineno}: options {', '.join(unknown)} are not taken by {shown}; it takes: {', '.join(named) or 'no options'}"); sys.exit(3)
    required = [x.arg for x in (a.posonlyargs + a.args)[1:][: len(a.posonlyargs + a.args) - 1 - len(a.defaults)]]
    required += [x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
    missing = [r for r in required if r not in options]
    if missing:
        print(f"{path}:{inits[-1].lineno}: {shown} needs the options {', '.join(missing)}; add them under the module's options:"); sys.exit(3)
"#;
    let python = python_for(model);
    let mut args = vec![
        "-c".to_owned(),
        SCRIPT.to_owned(),
        code.display().to_string(),
        process.options.to_string(),
    ];
    args.extend(process.inputs.iter().cloned());
    args.extend(process.outputs.iter().cloned());
    let mut check = Command::new(&python);
    // the user's code is imported here and may hang: it must not outlive a killed supervisor
    rtloop_sys::end_with_parent(&mut check);
    let out = check
        .args(&args)
        .output()
        .map_err(|e| format!("cannot run {python} to check {}: {e}", code.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Err(if said.is_empty() {
            String::from_utf8_lossy(&out.stderr).trim().to_owned()
        } else {
            said
        })
    }
}

fn python_for(model: &Model) -> String {
    model
        .config
        .python
        .clone()
        .unwrap_or_else(|| rtloop_sys::python().to_string_lossy().into_owned())
}

struct Running {
    name: String,
    child: Option<Child>,
    exit: Option<String>,
}

/// Validate and run a model to its end; returns its timing report.
pub fn run(model_path: &Path, opts: &RunOptions) -> Result<RunReport, RunError> {
    let model = crate::model::load(model_path)?;
    let text = std::fs::read_to_string(model_path)
        .map_err(|e| RunError::Setup(format!("cannot read {}: {e}", model_path.display())))?;
    let cfg = &model.config;
    let timer_core = process::timer_core(&model);
    let (rt, warning) = if cfg.realtime {
        timer::probe_realtime(true, cfg.mlockall, timer_core.unwrap_or(0))
    } else {
        (Realtime::default(), None)
    };
    if let Some(w) = warning {
        eprintln!("{w}");
    }
    // PM QoS: keep idle CPUs out of deep sleep while the model runs (the file stays open);
    // taken before the minimum tick is measured, so that measures the conditions of the run
    let _pm_qos = (cfg.realtime && cfg.pm_qos)
        .then(rtloop_sys::hold_cpu_dma_latency)
        .and_then(Result::ok);
    let tick_ns = cfg.tick.as_nanos() as u64;
    let minimum = timer::settle_minimum_tick(tick_ns, || {
        timer::measure_minimum_tick(rt, timer_core, cfg.priority)
    });
    if tick_ns < minimum.min_ns {
        return Err(RunError::TickTooShort {
            tick_us: tick_ns / 1000,
            min_us: minimum.min_ns.div_ceil(1000),
            wake_us: minimum.wake_p90_ns.div_ceil(1000),
            handoff_us: minimum.handoff_p90_ns.div_ceil(1000),
        });
    }
    // compile Rust modules before anything starts
    let mut so_of = Vec::new();
    for p in &model.processes {
        so_of.push(match &p.body {
            Body::Rust { code } => Some(
                crate::rust_module::compile(code, &crate::rust_module::default_cache_dir())
                    .map_err(|source| RunError::Compile {
                        process: p.name.clone(),
                        source,
                    })?,
            ),
            _ => None,
        });
    }
    // the board first: it refuses a second run of a model that is running
    let flags = (u64::from(rt.fifo) * crate::board::FLAG_FIFO)
        | (u64::from(rt.mlock) * crate::board::FLAG_MLOCK)
        | (u64::from(rt.pin) * crate::board::FLAG_PIN);
    let board = Board::create(
        &model.name,
        model.processes.len(),
        model.signals.len(),
        tick_ns,
        process::model_hash(&text),
        flags,
    )
    .map_err(|e| RunError::Setup(e.to_string()))?;
    let out_dir = opts
        .out_dir
        .clone()
        .unwrap_or_else(|| default_out_dir(&model.name));
    let out_dir = std::path::absolute(&out_dir).unwrap_or(out_dir);
    std::fs::create_dir_all(&out_dir).map_err(|e| {
        RunError::Setup(format!(
            "cannot create the output directory {}: {e} (choose another with --out DIR)",
            out_dir.display()
        ))
    })?;
    let streams = create_streams(&model, opts.keep)?;
    let run_dir =
        std::env::temp_dir().join(format!("rtloop-run-{}-{}", model.name, std::process::id()));
    std::fs::create_dir_all(&run_dir)
        .map_err(|e| RunError::Setup(format!("cannot create {}: {e}", run_dir.display())))?;
    let result = supervise(
        &model, model_path, &board, &run_dir, &out_dir, &so_of, rt, minimum, opts,
    )
    .map(|mut r| {
        r.out_dir = out_dir.clone();
        r
    });
    if !opts.keep {
        for s in &streams {
            let _ = Stream::remove(s);
        }
    }
    let _ = std::fs::remove_dir_all(&run_dir);
    result
}

/// `keep`: the streams outlive their writers' clean close (`--keep`).
fn create_streams(model: &Model, keep: bool) -> Result<Vec<String>, RunError> {
    let mut names: Vec<String> = Vec::new();
    let tick_s = model.config.tick.as_secs_f64();
    for sig in &model.signals {
        let name = process::stream_name(&model.name, &sig.name);
        let mut cfg = StreamConfig::new(
            sig.dtype,
            sig.row_len(),
            if sig.variable {
                0.0
            } else {
                sig.rows_per_tick() as f64 / tick_s
            },
            process::stream_capacity(sig),
        );
        cfg.event_capacity = 64;
        cfg.keep = keep;
        // the model's names and units reach every reader: the viewer, recordings, bridges
        cfg.ch_names.clone_from(&sig.channels);
        cfg.ch_units.clone_from(&sig.units);
        // a stream left by a run that was killed (the board said no run is alive)
        if Stream::open(&name).is_ok() {
            let _ = Stream::remove(&name);
        }
        if let Err(e) = Stream::create(&name, &cfg) {
            for n in &names {
                let _ = Stream::remove(n);
            }
            return Err(RunError::Setup(format!(
                "signal {:?}: cannot create stream {name:?}: {e}",
                sig.name
            )));
        }
        names.push(name);
    }
    // what the timer measures, published per tick for `rtloop view` and any reader
    let name = timing_stream_name(&model.name);
    let mut cfg = StreamConfig::new(
        rtloop_stream::DType::F32,
        1 + model.processes.len(),
        1.0 / tick_s,
        ((30.0 / tick_s) as u64).clamp(4096, 1 << 20),
    );
    cfg.ch_names = std::iter::once("tick_start_late".to_owned())
        .chain(model.processes.iter().map(|p| format!("{}_exec", p.name)))
        .collect();
    cfg.ch_units = vec!["us".to_owned(); cfg.n_channels];
    cfg.content_type = "timing".to_owned();
    cfg.keep = keep;
    cfg.description = format!(
        "model {}: per tick, how late the tick started and each process's execution time of the \
         tick before (us)",
        model.name
    );
    if Stream::open(&name).is_ok() {
        let _ = Stream::remove(&name);
    }
    match Stream::create(&name, &cfg) {
        Ok(_) => names.push(name),
        Err(e) => {
            for n in &names {
                let _ = Stream::remove(n);
            }
            return Err(RunError::Setup(format!(
                "cannot create the timing stream {name:?}: {e}"
            )));
        }
    }
    Ok(names)
}

/// The stream a run publishes its per-tick timing in: `<model>.tick-timing` (a signal name
/// has no `-`, so no signal's stream takes it).
#[must_use]
pub fn timing_stream_name(model: &str) -> String {
    format!("{model}.tick-timing")
}

fn spawn(
    model: &Model,
    model_path: &Path,
    run_dir: &Path,
    out_dir: &Path,
    index: usize,
    so: Option<&PathBuf>,
    opts: &RunOptions,
) -> std::io::Result<Child> {
    let p = &model.processes[index];
    let role = ChildArgs {
        model: model_path.to_path_buf(),
        process: p.name.clone(),
        run_dir: run_dir.to_path_buf(),
        module_so: so.cloned(),
        out_dir: out_dir.to_path_buf(),
    };
    let mut cmd = match &p.body {
        Body::Python { .. } => {
            let mut c = Command::new(python_for(model));
            c.args(["-m", "rtloop.runtime"]);
            c.arg(role.to_json().map_err(std::io::Error::other)?);
            // one core per process: BLAS must not start a thread pool that competes with
            // the model's other processes (the user's environment wins if it says otherwise)
            for var in ["OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"] {
                if std::env::var_os(var).is_none() {
                    c.env(var, "1");
                }
            }
            c
        }
        _ => {
            // the role as rtloop-launch writes every child's arguments
            let mut c = (opts.rtloop_command)();
            c.args(rtloop_launch::child_args(&role).map_err(std::io::Error::other)?);
            c
        }
    };
    // what a module prints goes to rtloop's stderr: stdout carries only the report (--json)
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::io::stderr());
    // a process waits on the board for ticks that only this supervisor starts: if the
    // supervisor is killed (SIGKILL, OOM), it must end too, not wait forever. `supervise`
    // runs on the thread that stays until every child has ended, as the signal requires.
    rtloop_sys::end_with_parent(&mut cmd);
    cmd.spawn()
}

#[allow(clippy::too_many_arguments)]
fn supervise(
    model: &Model,
    model_path: &Path,
    board: &Board,
    run_dir: &Path,
    out_dir: &Path,
    so_of: &[Option<PathBuf>],
    rt: Realtime,
    minimum: MinimumTick,
    opts: &RunOptions,
) -> Result<RunReport, RunError> {
    let model_path = model_path
        .canonicalize()
        .unwrap_or_else(|_| model_path.to_path_buf());
    let n = model.processes.len();
    let cores = process::assign_cores(model);
    let mut procs: Vec<Running> = Vec::with_capacity(n);
    let mut problem: Option<String> = None;
    for (i, so) in so_of.iter().enumerate().take(n) {
        let name = model.processes[i].name.clone();
        match spawn(model, &model_path, run_dir, out_dir, i, so.as_ref(), opts) {
            Ok(c) => procs.push(Running {
                name,
                child: Some(c),
                exit: None,
            }),
            Err(e) => {
                let what = match &model.processes[i].body {
                    Body::Python { .. } => format!("python interpreter {:?}", python_for(model)),
                    _ => "the rtloop executable".into(),
                };
                problem = Some(format!("cannot start {name:?} ({what}): {e}"));
                procs.push(Running {
                    name,
                    child: None,
                    exit: Some(format!("not started: {e}")),
                });
                break;
            }
        }
    }
    // every process ready (Python with numba may take a while to import and compile), for
    // at most 120 s, or --seconds: a module whose init never returns must not hold the run
    // past the time it was given
    let ready_wait = opts
        .seconds
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .map_or(READY_WAIT, |s| READY_WAIT.min(s));
    let ready_deadline = Instant::now() + ready_wait;
    while problem.is_none() {
        if (0..n).all(|i| board.state(i) == ProcState::Ready) {
            break;
        }
        if let Some(p) = reap(board, &mut procs) {
            problem = Some(p);
            break;
        }
        if opts.stop.load(Ordering::Relaxed) {
            problem = Some("interrupted before the model started".into());
            break;
        }
        if Instant::now() > ready_deadline {
            let why = if ready_wait < READY_WAIT {
                format!("--seconds {}", ready_wait.as_secs_f64())
            } else {
                format!("{} s", READY_WAIT.as_secs())
            };
            let mut slow = Vec::new();
            for (i, r) in procs.iter_mut().enumerate() {
                if board.state(i) == ProcState::Ready {
                    continue;
                }
                slow.push(r.name.clone());
                // still in its import or init: it does not look at the board, so it cannot
                // be asked to stop
                if let Some(c) = &mut r.child {
                    let _ = c.kill();
                    let _ = c.wait();
                    r.child = None;
                    r.exit = Some(format!(
                        "did not finish starting (import, init) within {why}; killed"
                    ));
                    board.set_state(i, ProcState::Failed);
                }
            }
            problem = Some(format!(
                "not ready within {why}: {} (still starting: import or init)",
                slow.join(", ")
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let t_start = Instant::now();
    let mut tick_hist = LatencyHistogram::new();
    let stopped_by;
    if problem.is_some() {
        board.request_stop(0, reason::FAILED);
        stopped_by = reason::FAILED;
    } else {
        let limit = match (opts.ticks.or(model.config.num_ticks), opts.seconds) {
            (Some(t), Some(s)) => Some(t.min(seconds_to_ticks(s, board.tick_ns()))),
            (Some(t), None) => Some(t),
            (None, Some(s)) => Some(seconds_to_ticks(s, board.tick_ns())),
            (None, None) => None,
        };
        let (live_tx, live_rx) = mpsc::channel::<(u64, Summary)>();
        let timer_done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let timer = s.spawn(|| {
                let h = timer_thread(model, board, rt, limit, opts.live_every, &live_tx);
                timer_done.store(true, Ordering::Release);
                h
            });
            let mut next_live = Instant::now() + opts.live_every.unwrap_or(Duration::MAX / 4);
            loop {
                if timer_done.load(Ordering::Acquire) {
                    break;
                }
                if opts.stop.load(Ordering::Relaxed) && board.stop_at() == RUNNING {
                    board.request_stop(board.started(), reason::INTERRUPT);
                }
                if let Some(p) = reap(board, &mut procs) {
                    problem.get_or_insert(p);
                    board.request_stop(board.started(), reason::FAILED);
                }
                while let Ok((tick, sum)) = live_rx.try_recv() {
                    if opts.live_every.is_some() && Instant::now() >= next_live {
                        next_live = Instant::now() + opts.live_every.unwrap_or_default();
                        eprintln!("{}", live_line(model, board, t_start, tick, &sum));
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            tick_hist = timer.join().unwrap_or_default();
        });
        stopped_by = board.stop_reason();
        if stopped_by == reason::MISS {
            let late: Vec<String> = (0..n)
                .filter(|&i| board.misses(i) > 0)
                .map(|i| model.processes[i].name.clone())
                .collect();
            problem.get_or_insert(format!(
                "deadline missed by {} (on_miss: stop)",
                late.join(", ")
            ));
        }
    }
    // let every process finish its last ticks and exit; then make sure
    let end_deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(p) = reap(board, &mut procs) {
            problem.get_or_insert(p);
        }
        if procs.iter().all(|r| r.child.is_none()) {
            break;
        }
        if Instant::now() > end_deadline {
            for r in &mut procs {
                if let Some(c) = &mut r.child {
                    let _ = c.kill();
                    let _ = c.wait();
                    r.exit = Some("did not stop within 10 s; killed".into());
                    problem.get_or_insert(format!("{:?} did not stop within 10 s", r.name));
                    r.child = None;
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let seconds = t_start.elapsed().as_secs_f64();
    let mut processes = Vec::new();
    for (i, p) in model.processes.iter().enumerate() {
        let rep: Option<ProcessReport> = std::fs::read(run_dir.join(format!("{}.json", p.name)))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let hist = |pairs: &[(u64, u64)]| {
            let mut h = LatencyHistogram::new();
            for &(v, c) in pairs {
                h.record_n(v, c);
            }
            h
        };
        let (exec_hist, after) = rep.as_ref().map_or((None, None), |r| {
            (Some(hist(&r.exec)), Some(hist(&r.done_after_start)))
        });
        let error = rep
            .as_ref()
            .and_then(|r| r.error.clone())
            .or_else(|| procs[i].exit.clone());
        processes.push(ProcessTiming {
            name: p.name.clone(),
            kind: p.kind,
            runs: describe_body(&p.body),
            core: cores[i],
            ticks: rep.as_ref().map_or(0, |r| r.ticks),
            exec: exec_hist
                .as_ref()
                .filter(|h| !h.is_empty())
                .map(LatencyHistogram::summary),
            done_after_start: after
                .as_ref()
                .filter(|h| !h.is_empty())
                .map(LatencyHistogram::summary),
            misses: board.misses(i),
            input_overruns: rep.as_ref().map_or(0, |r| r.input_overruns),
            summary: rep.as_ref().map(|r| r.summary.clone()).unwrap_or_default(),
            error,
            delay: rep.as_ref().and_then(|r| r.delay),
            exec_hist,
        });
    }
    // name the process that failed and why (its own report), not only its exit status: the
    // supervisor may have seen the exit before the stop reason was set
    if stopped_by == reason::FAILED || problem.is_some() {
        if let Some(p) = processes.iter().find(|p| p.error.is_some()) {
            let kind = format!("{:?}", p.kind).to_lowercase();
            problem = Some(format!(
                "{kind} {:?} failed: {}",
                p.name,
                p.error.clone().unwrap_or_default()
            ));
        }
    }
    Ok(RunReport {
        model: model.name.clone(),
        tick_ns: board.tick_ns(),
        ticks: board.started(),
        seconds,
        realtime: rt,
        minimum_tick: minimum,
        tick_start: tick_hist.summary(),
        processes,
        stopped_by: match stopped_by {
            reason::INTERRUPT => "interrupt",
            reason::FAILED => "failed",
            reason::MISS => "miss",
            _ => "limit",
        }
        .into(),
        problem,
        out_dir: PathBuf::new(),
        tick_hist,
    })
}

/// How long the processes may take to start (import, compile, init) at most.
const READY_WAIT: Duration = Duration::from_secs(120);

fn seconds_to_ticks(s: f64, tick_ns: u64) -> u64 {
    ((s * 1e9) / tick_ns as f64).ceil().max(1.0) as u64
}

/// Collect exited children: a non-zero exit or a signal is a problem, named with the
/// process and its status; the board marks it Failed so its consumers stop waiting.
fn reap(board: &Board, procs: &mut [Running]) -> Option<String> {
    let mut problem = None;
    for (i, r) in procs.iter_mut().enumerate() {
        let Some(c) = &mut r.child else { continue };
        let Ok(Some(status)) = c.try_wait() else {
            continue;
        };
        let pid = c.id();
        r.child = None;
        if status.success() {
            continue;
        }
        use std::os::unix::process::ExitStatusExt;
        let how = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(sig)) => format!("was killed by signal {sig}"),
            _ => format!("ended: {status}"),
        };
        r.exit = Some(how.clone());
        if board.state(i) != ProcState::Failed {
            board.set_state(i, ProcState::Failed);
        }
        problem.get_or_insert(format!("{:?} (pid {pid}) {how}", r.name));
    }
    problem
}

fn live_line(model: &Model, board: &Board, t0: Instant, tick: u64, s: &Summary) -> String {
    let mut line = format!(
        "[{:7.1} s] tick {tick:>8} | start late p50 {} p99 {} max {}",
        t0.elapsed().as_secs_f64(),
        fmt_ns(s.p50_ns),
        fmt_ns(s.p99_ns),
        fmt_ns(s.max_ns)
    );
    let mut misses = 0;
    for (i, p) in model.processes.iter().enumerate() {
        let (max, sum, count) = board.take_exec(i);
        misses += board.misses(i);
        if let Some(mean) = sum.checked_div(count) {
            line.push_str(&format!(
                " | {} {} (max {})",
                p.name,
                fmt_ns(mean),
                fmt_ns(max)
            ));
        }
    }
    line.push_str(&format!(" | misses {misses}"));
    line
}

/// The tick: absolute deadlines, busy-wait tail, misses counted at every tick start.
fn timer_thread(
    model: &Model,
    board: &Board,
    rt: Realtime,
    limit: Option<u64>,
    live_every: Option<Duration>,
    live: &mpsc::Sender<(u64, Summary)>,
) -> LatencyHistogram {
    let cfg = &model.config;
    timer::apply_realtime(rt, process::timer_core(model), (cfg.priority + 1).min(99));
    let n = model.processes.len();
    let p = board.tick_ns();
    let mut h = LatencyHistogram::new();
    let mut interval = LatencyHistogram::new();
    let live_ticks = live_every.map_or(u64::MAX, |d| (d.as_nanos() as u64 / p).max(1));
    // per tick: lateness, then each process's execution time of the tick before (µs)
    let timing = Stream::open(&timing_stream_name(&model.name)).ok();
    let mut timing = timing.as_ref().and_then(|s| s.writer().ok());
    if let Some(w) = &mut timing {
        // a lossless reader that falls behind costs it timing rows, never the tick a wait
        w.set_lossless_timeout(Duration::ZERO);
    }
    let mut row = vec![0f32; 1 + n];
    let t0 = timer::first_deadline(p, cfg.phase.as_nanos() as u64);
    for k in 0u64.. {
        if limit.is_some_and(|l| k >= l) {
            board.request_stop(k, reason::LIMIT);
        }
        if board.stop_at() <= k {
            break;
        }
        let deadline = t0 + k * p;
        let now = timer::sleep_until(deadline, cfg.busy_wait);
        // a process not done with tick k-1 when tick k starts missed its deadline
        if k > 0 {
            for i in 0..n {
                if board.done(i) < k {
                    board.add_miss(i);
                    if cfg.on_miss == crate::model::MissPolicy::Stop {
                        board.request_stop(k, reason::MISS);
                    }
                }
            }
            if board.stop_at() <= k {
                break;
            }
        }
        board.start_tick(k, deadline, now);
        let late = now - deadline;
        if let Some(w) = &mut timing {
            row[0] = late as f32 / 1e3;
            for (i, x) in row[1..].iter_mut().enumerate() {
                *x = board.exec_last(i) as f32 / 1e3;
            }
            let _ = w.write(&row);
        }
        h.record(late);
        interval.record(late);
        if (k + 1) % live_ticks == 0 {
            let _ = live.send((k + 1, interval.summary()));
            interval.reset();
        }
    }
    h
}
