//! One process of a running model: opens the board and its signals' streams, then once per
//! tick waits for its own inputs (or the tick, if it has none), runs its step over zero-copy
//! views, commits its outputs and says it is done. The same loop hosts drivers, Rust
//! modules and (through the Python package) Python modules.

use std::path::PathBuf;
use std::time::Duration;

use rtloop_metrics::LatencyHistogram;
use rtloop_stream::{ReaderMode, Stream, Window, Writer};

use crate::board::{Board, ProcState};
use crate::drivers::{InView, OutBuf, TickInfo};
use crate::model::{Body, Kind, Model, Signal};
use crate::timer;

/// What a step (a driver, a Rust or a Python module) reports when it fails, each kind of
/// step with its own error; the message is the step's own (a driver's error, a module's
/// panic or exception).
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// A driver failed.
    #[error(transparent)]
    Driver(#[from] crate::drivers::DriverError),
    /// A Rust module panicked or could not be called.
    #[error(transparent)]
    Module(#[from] crate::rust_module::ModuleError),
    /// A Python module raised: the exception as Python renders it (its traceback is
    /// printed under the module's name).
    #[error("{text}")]
    Python {
        /// The exception's text.
        text: String,
    },
    /// A block could not run its tick.
    #[error(transparent)]
    Block(#[from] crate::blocks::BlockTickError),
    /// A sink's input holds more rows in one tick than the signal has per tick.
    #[error("signal {signal:?} holds {rows} rows in tick {tick}, more than its {per_tick} rows per tick")]
    TooManyRows {
        /// The signal.
        signal: String,
        /// Rows it holds in the tick.
        rows: usize,
        /// The tick.
        tick: u64,
        /// Rows per tick the model gives it.
        per_tick: usize,
    },
}

/// Why a model's process could not start, or ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The role (its one argument) is missing or not valid JSON of a role.
    #[error("a model's process takes one argument, its role as JSON; got {0} arguments")]
    Arguments(usize),
    /// The role could not be read or written.
    #[error(transparent)]
    Role(#[from] rtloop_launch::LaunchError),
    /// The model file could not be read.
    #[error("cannot read {path}: {source}")]
    ReadModel {
        /// The model file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The model file has problems.
    #[error(transparent)]
    Model(#[from] crate::model::ModelErrors),
    /// The board of the running model could not be opened.
    #[error(transparent)]
    Board(#[from] crate::board::BoardError),
    /// The model file changed after the supervisor validated it.
    #[error("{} changed since `rtloop run` started it; restart the model", .0.display())]
    ModelChanged(PathBuf),
    /// The role names a process the model does not have.
    #[error("no process {0:?} in the model")]
    NoSuchProcess(String),
    /// A signal's stream could not be opened.
    #[error(transparent)]
    Open(#[from] rtloop_stream::OpenError),
    /// A signal's stream could not be claimed (writer or reader slot).
    #[error(transparent)]
    Claim(#[from] rtloop_stream::ClaimError),
    /// Writing a signal failed.
    #[error(transparent)]
    Write(#[from] rtloop_stream::WriteError),
    /// The step failed at a tick.
    #[error("tick {tick}: {source}")]
    Step {
        /// The tick.
        tick: u64,
        /// What the step said.
        source: StepError,
    },
    /// The step's `finish` failed.
    #[error(transparent)]
    Finish(StepError),
    /// A driver process could not open its driver.
    #[error("cannot open driver {driver:?}: {source}")]
    Driver {
        /// The driver's name.
        driver: String,
        /// Why.
        source: crate::drivers::DriverError,
    },
    /// A block process could not open its block.
    #[error("cannot open block {block:?}: {message}")]
    Block {
        /// The block's name.
        block: String,
        /// Why.
        message: String,
    },
    /// A driver role for a process that is a module.
    #[error("{0} is not a driver process")]
    NotADriver(String),
    /// A Rust module could not be loaded or started.
    #[error(transparent)]
    Module(#[from] crate::rust_module::ModuleError),
}

/// What a process runs each tick.
pub trait Step {
    /// Compute this tick. `inputs` hold each input's rows including history (oldest first);
    /// `outputs` this tick's writable rows.
    fn step(
        &mut self,
        t: &TickInfo,
        inputs: &[InView<'_>],
        outputs: &mut [OutBuf<'_>],
    ) -> Result<(), StepError>;

    /// The model is stopping: one summary line (or empty).
    fn finish(&mut self) -> Result<String, StepError> {
        Ok(String::new())
    }

    /// How long its output lags its input (a block's), for the report.
    fn delay(&self) -> Option<crate::blocks::Delay> {
        None
    }
}

/// A driver source as a [`Step`].
pub struct SourceStep(pub Box<dyn crate::drivers::Source>);
impl Step for SourceStep {
    fn step(
        &mut self,
        t: &TickInfo,
        _: &[InView<'_>],
        out: &mut [OutBuf<'_>],
    ) -> Result<(), StepError> {
        Ok(self.0.tick(t, out)?)
    }
    fn finish(&mut self) -> Result<String, StepError> {
        Ok(self.0.finish()?)
    }
}

/// A driver sink as a [`Step`].
pub struct SinkStep(pub Box<dyn crate::drivers::Sink>);
impl Step for SinkStep {
    fn step(
        &mut self,
        t: &TickInfo,
        inputs: &[InView<'_>],
        _: &mut [OutBuf<'_>],
    ) -> Result<(), StepError> {
        Ok(self.0.tick(t, inputs)?)
    }
    fn finish(&mut self) -> Result<String, StepError> {
        Ok(self.0.finish()?)
    }
}

/// The stream name of a signal.
#[must_use]
pub fn stream_name(model: &str, signal: &str) -> String {
    format!("{model}.{signal}")
}

/// Capacity (samples) of a signal's stream.
#[must_use]
pub fn stream_capacity(sig: &Signal) -> u64 {
    let per_tick = (sig.rows_per_tick() * sig.row_bytes()).max(1) as u64;
    let slack = ((64u64 << 20) / per_tick).clamp(8, 256);
    (sig.history + slack) * sig.rows_per_tick().max(1) as u64
}

/// The CPU each process is pinned to: its `core:`, else round-robin over the model's cores
/// (all online CPUs by default) other than the timer's, so the timer's core stays free for
/// it: on a kernel without full preemption, a process in a long system call on the timer's
/// core would delay the tick. With a single core everything shares it.
#[must_use]
pub fn assign_cores(model: &Model) -> Vec<Option<usize>> {
    let mut cores: Vec<usize> = model
        .config
        .cores
        .clone()
        .unwrap_or_else(|| (0..rtloop_sys::online_cpus()).collect());
    if let Some(t) = timer_core(model) {
        if cores.len() > 1 {
            cores.retain(|&c| c != t);
        }
    }
    let mut next = 0usize;
    model
        .processes
        .iter()
        .map(|p| {
            p.core.or_else(|| {
                let c = cores.get(next % cores.len().max(1)).copied();
                next += 1;
                c
            })
        })
        .collect()
}

/// The timer's CPU: `timer_core`, else the last of the model's cores.
#[must_use]
pub fn timer_core(model: &Model) -> Option<usize> {
    model.config.timer_core.or_else(|| {
        model
            .config
            .cores
            .as_ref()
            .and_then(|c| c.last().copied())
            .or_else(|| rtloop_sys::online_cpus().checked_sub(1))
    })
}

/// A stable hash of the model file's text (children check they read what the supervisor
/// validated).
#[must_use]
pub fn model_hash(text: &str) -> u64 {
    // FNV-1a: stable across processes and builds, unlike std's RandomState
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Everything a model's process needs to know: its typed child role. The supervisor starts
/// it as `rtloop child runtime-process JSON` (sources, sinks, Rust modules) or
/// `python -m rtloop.runtime JSON` (Python modules), the role as JSON either way.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ChildArgs {
    /// The model file.
    pub model: PathBuf,
    /// This process's name in it.
    pub process: String,
    /// Where to write its timing at the end.
    pub run_dir: PathBuf,
    /// A compiled Rust module (for `language: rust`).
    pub module_so: Option<PathBuf>,
    /// The run's output directory (sinks write relative to it).
    pub out_dir: PathBuf,
}

impl rtloop_launch::ChildRole for ChildArgs {
    const NAME: &'static str = "runtime-process";
}

/// A model's process that failed, named.
#[derive(Debug, thiserror::Error)]
#[error("process {process:?}: {error}")]
pub struct ProcessFailed {
    /// The process's name in the model.
    pub process: String,
    /// Why it failed.
    pub error: Box<ProcessError>,
}

/// A model's process, played in the child the supervisor started.
fn play_process(ca: &ChildArgs) -> Result<(), ProcessFailed> {
    // Ctrl-C in the terminal reaches the whole process group: the supervisor stops the
    // model through the board, so a process must not die on SIGINT itself. Only SIGINT:
    // `kill PID` (SIGTERM) must still end it.
    rtloop_sys::ignore_interrupt();
    run_process(ca).map_err(|error| ProcessFailed {
        process: ca.process.clone(),
        error: Box::new(error),
    })
}
rtloop_launch::register_role!(ChildArgs, play_process);

impl ChildArgs {
    /// The role as the one argument a process gets.
    pub fn to_json(&self) -> Result<String, ProcessError> {
        serde_json::to_string(self).map_err(|source| {
            rtloop_launch::LaunchError::Json {
                role: <Self as rtloop_launch::ChildRole>::NAME,
                source,
            }
            .into()
        })
    }

    /// Read the role from a process's arguments: exactly one, the role as JSON.
    pub fn parse(args: &[String]) -> Result<ChildArgs, ProcessError> {
        let [json] = args else {
            return Err(ProcessError::Arguments(args.len()));
        };
        Ok(rtloop_launch::role_from(json)?)
    }
}

struct Input {
    sig_index: usize,
    signal: Signal,
    reader: rtloop_stream::Reader,
    producer: usize,
}

struct Output {
    sig_index: usize,
    signal: Signal,
    writer: Writer,
}

/// A sink's copy of one input's rows of a tick: preallocated for the signal's rows per tick
/// and aligned for any dtype (a sink may hand the rows to C, e.g. liblsl, as values).
struct RowCopy {
    buf: Vec<u8>,
    /// Where the aligned bytes start in `buf`.
    start: usize,
    /// The most bytes it holds.
    len: usize,
}

impl RowCopy {
    /// Every dtype's alignment divides this.
    const ALIGN: usize = 16;

    fn new(len: usize) -> RowCopy {
        let buf = vec![0u8; len + Self::ALIGN];
        let start = (Self::ALIGN - buf.as_ptr() as usize % Self::ALIGN) % Self::ALIGN;
        RowCopy { buf, start, len }
    }

    /// Its first `n` bytes to copy into, or `None` if it holds fewer.
    fn get_mut(&mut self, n: usize) -> Option<&mut [u8]> {
        (n <= self.len).then(|| &mut self.buf[self.start..self.start + n])
    }

    /// Its first `n` bytes (`n` at most what [`RowCopy::get_mut`] gave).
    fn get(&self, n: usize) -> &[u8] {
        &self.buf[self.start..self.start + n]
    }
}

/// The timing a process reports at its end (written as JSON to the run directory).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ProcessReport {
    /// Process name.
    pub name: String,
    /// Ticks completed.
    pub ticks: u64,
    /// Execution time per tick (inputs ready → outputs committed): (value ns, count).
    pub exec: Vec<(u64, u64)>,
    /// Time from the tick's start to this process's outputs being committed.
    pub done_after_start: Vec<(u64, u64)>,
    /// Ticks whose inputs were overwritten before or while the step read them.
    pub input_overruns: u64,
    /// The step's summary line at the end.
    pub summary: String,
    /// The error that ended it, if any.
    pub error: Option<String>,
    /// A block's delay (none for other processes).
    #[serde(default)]
    pub delay: Option<crate::blocks::Delay>,
}

/// An opened process of a model, ready to run its step.
pub struct Process {
    model: Model,
    index: usize,
    board: Board,
    inputs: Vec<Input>,
    outputs: Vec<Output>,
    core: Option<usize>,
    args: ChildArgs,
}

impl Process {
    /// Load the model, check it is the one the supervisor runs, open the board and this
    /// process's streams, write the outputs' initial history (zeros).
    pub fn open(args: &ChildArgs) -> Result<Process, ProcessError> {
        let text =
            std::fs::read_to_string(&args.model).map_err(|source| ProcessError::ReadModel {
                path: args.model.clone(),
                source,
            })?;
        let model = crate::model::load(&args.model)?;
        let board = Board::open(&model.name)?;
        if board.model_hash() != model_hash(&text) {
            return Err(ProcessError::ModelChanged(args.model.clone()));
        }
        let index = model
            .processes
            .iter()
            .position(|p| p.name == args.process)
            .ok_or_else(|| ProcessError::NoSuchProcess(args.process.clone()))?;
        board.set_pid(index, rtloop_sys::pid());
        let sig_index = |n: &str| model.signals.iter().position(|s| s.name == n).unwrap_or(0);
        let writer_of = |n: &str| {
            model
                .processes
                .iter()
                .position(|p| p.outputs.iter().any(|o| o == n))
                .unwrap_or(0)
        };
        let me = &model.processes[index];
        let mut outputs = Vec::new();
        for name in &me.outputs {
            let si = sig_index(name);
            let signal = model.signals[si].clone();
            let stream = Stream::open(&stream_name(&model.name, name))?;
            let mut writer = stream.writer()?;
            if !signal.variable {
                let rows = signal.history as usize * signal.rows_per_tick();
                let mut g = writer.reserve(rows)?;
                g.bytes_mut().fill(0);
                g.commit();
            }
            outputs.push(Output {
                sig_index: si,
                signal,
                writer,
            });
        }
        let mut inputs = Vec::new();
        for name in &me.inputs {
            let si = sig_index(name);
            let stream = Stream::open(&stream_name(&model.name, name))?;
            let reader = stream.reader(ReaderMode::Latest)?;
            inputs.push(Input {
                sig_index: si,
                signal: model.signals[si].clone(),
                reader,
                producer: writer_of(name),
            });
        }
        let core = assign_cores(&model)[index];
        Ok(Process {
            model,
            index,
            board,
            inputs,
            outputs,
            core,
            args: args.clone(),
        })
    }

    /// The model.
    #[must_use]
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// This process's entry in the model.
    #[must_use]
    pub fn spec(&self) -> &crate::model::Process {
        &self.model.processes[self.index]
    }

    /// Apply realtime set-up, say ready, and run `step` once per tick until the model
    /// stops. Writes this process's timing to the run directory, and its state to the
    /// board (Failed with the error printed on stderr if the step failed).
    pub fn run(&mut self, step: &mut dyn Step) -> Result<(), ProcessError> {
        let flags = self.board.flags();
        let rt = timer::Realtime {
            fifo: flags & crate::board::FLAG_FIFO != 0,
            mlock: flags & crate::board::FLAG_MLOCK != 0,
            pin: flags & crate::board::FLAG_PIN != 0,
        };
        timer::apply_realtime(rt, self.core, self.model.config.priority);
        let spin = self.model.config.spin;
        let mut report = ProcessReport {
            name: self.spec().name.clone(),
            delay: step.delay(),
            ..ProcessReport::default()
        };
        let mut exec = LatencyHistogram::new();
        let mut after_start = LatencyHistogram::new();
        self.board.set_state(self.index, ProcState::Ready);
        let mut result = self.tick_loop(step, spin, &mut report, &mut exec, &mut after_start);
        match step.finish() {
            Ok(s) => report.summary = s,
            Err(e) if result.is_ok() => result = Err(ProcessError::Finish(e)),
            Err(_) => {}
        }
        // the report carries the error's text (the supervisor reads it from the run dir)
        if let Err(e) = &result {
            report.error = Some(e.to_string());
        }
        report.exec = exec.recorded();
        report.done_after_start = after_start.recorded();
        let path = self.args.run_dir.join(format!("{}.json", report.name));
        let _ = std::fs::write(&path, serde_json::to_vec(&report).unwrap_or_default());
        let state = if report.error.is_some() {
            ProcState::Failed
        } else {
            ProcState::Exited
        };
        self.board.set_state(self.index, state);
        result
    }

    fn tick_loop(
        &mut self,
        step: &mut dyn Step,
        spin: Duration,
        report: &mut ProcessReport,
        exec: &mut LatencyHistogram,
        after_start: &mut LatencyHistogram,
    ) -> Result<(), ProcessError> {
        let board = &self.board;
        let me = self.index;
        let kind = self.model.processes[me].kind;
        let mut windows: Vec<Option<Window>> = Vec::with_capacity(self.inputs.len());
        // A sink acts on its inputs (sends, pushes, writes) while it reads them, so it never
        // gets the ring itself: each tick its rows are copied into these buffers and
        // validated before the sink sees them (made once here: no allocation in a tick).
        let copy_inputs = kind == Kind::Sink;
        let mut copies: Vec<RowCopy> = if copy_inputs {
            self.inputs
                .iter()
                .map(|i| RowCopy::new(i.signal.rows_per_tick() * i.signal.row_bytes()))
                .collect()
        } else {
            Vec::new()
        };
        // where each copy's rows start in their stream, and how many there are
        let mut spans: Vec<(u64, usize)> = Vec::with_capacity(copies.len());
        let every = if kind == Kind::Module {
            self.model.processes[me].every.max(1)
        } else {
            1
        };
        // what a module running every N ticks last wrote, repeated on the ticks between
        let mut held: Vec<Vec<u8>> = if every > 1 {
            self.outputs
                .iter()
                .map(|o| vec![0u8; o.signal.rows_per_tick() * o.signal.row_bytes()])
                .collect()
        } else {
            Vec::new()
        };
        for k in 0u64.. {
            // wait for the tick (a process without inputs) or for each input's producer
            if (self.inputs.is_empty() || kind == Kind::Source) && !board.wait_tick(k, spin) {
                return Ok(());
            }
            for inp in &self.inputs {
                if !board.wait_done(inp.producer, k, spin) {
                    return Ok(());
                }
            }
            let ready = rtloop_sys::monotonic_ns();
            let (deadline_ns, start_ns) = board.tick_times(k);
            if every > 1 && k % every != 0 {
                // not this module's tick: its outputs repeat what it last wrote (a variable
                // signal carries no rows), so readers every tick see a held value
                for (o, h) in self.outputs.iter_mut().zip(&held) {
                    if o.signal.variable {
                        let g = o.writer.reserve(o.signal.rows_per_tick())?;
                        g.commit_n(0)?;
                    } else {
                        let mut g = o.writer.reserve(o.signal.rows_per_tick())?;
                        g.bytes_mut().copy_from_slice(h);
                        g.commit_stamped(Some(deadline_ns));
                    }
                    board.set_tick_end(o.sig_index, k, o.writer.written());
                }
                board.finish_tick(me, k);
                report.ticks = k + 1;
                if board.stop_at() <= k + 1 {
                    return Ok(());
                }
                continue;
            }
            let info = TickInfo {
                tick: k,
                deadline_ns,
                start_ns,
                realtime_ns: rtloop_sys::realtime_ns(),
                monotonic_ns: ready,
            };
            // the inputs, history for fixed signals and this tick's rows for variable ones:
            // zero-copy windows for a module, validated copies for a sink
            windows.clear();
            spans.clear();
            let mut lost = false;
            for (i, inp) in self.inputs.iter_mut().enumerate() {
                let end = board.tick_end(inp.sig_index, k);
                let first = if inp.signal.variable {
                    if k == 0 {
                        0
                    } else {
                        board.tick_end(inp.sig_index, k - 1)
                    }
                } else if kind == Kind::Module {
                    // a module sees the signal's history; a sink only this tick's rows
                    end - inp.signal.history * inp.signal.rows_per_tick() as u64
                } else {
                    end - inp.signal.rows_per_tick() as u64
                };
                if let Some(copy) = copies.get_mut(i) {
                    // a sink: a validated copy, or a lost tick (the sink does not run)
                    let rows = end.saturating_sub(first) as usize;
                    let buf = copy.get_mut(rows * inp.signal.row_bytes()).ok_or_else(|| {
                        ProcessError::Step {
                            tick: k,
                            source: StepError::TooManyRows {
                                signal: inp.signal.name.clone(),
                                rows,
                                tick: k,
                                per_tick: inp.signal.rows_per_tick(),
                            },
                        }
                    })?;
                    match inp.reader.read_into(first, end, buf, None) {
                        Ok(()) => {
                            spans.push((first, rows));
                            let _ = inp.reader.seek(end);
                        }
                        Err(_) => lost = true,
                    }
                    continue;
                }
                match inp.reader.window(first, end) {
                    Ok(w) => {
                        windows.push(Some(w));
                        // the reader has what it needs up to `end`: its cursor says so, so
                        // the stream's occupancy (PercentUsed) is its real lag, not the ring
                        let _ = inp.reader.seek(end);
                    }
                    Err(_) => {
                        lost = true;
                        windows.push(None);
                    }
                }
            }
            let mut guards = Vec::with_capacity(self.outputs.len());
            for o in &mut self.outputs {
                let n = o.signal.rows_per_tick();
                let g = o.writer.reserve(n)?;
                guards.push((&o.signal, g));
            }
            let mut step_result = Ok(());
            let mut rows_out: Vec<usize> = Vec::with_capacity(guards.len());
            if lost {
                report.input_overruns += 1;
                for (sig, g) in &mut guards {
                    g.bytes_mut().fill(0);
                    rows_out.push(if sig.variable { 0 } else { sig.rows_per_tick() });
                }
            } else {
                let views: Vec<InView<'_>> = if copy_inputs {
                    // a sink: the copies validated above, which no writer can touch
                    self.inputs
                        .iter()
                        .zip(&copies)
                        .zip(&spans)
                        .map(|((inp, c), &(first, rows))| InView {
                            signal: &inp.signal,
                            bytes: c.get(rows * inp.signal.row_bytes()),
                            rows,
                            first,
                        })
                        .collect()
                } else {
                    self.inputs
                        .iter()
                        .zip(&windows)
                        .map(|(inp, w)| {
                            let w = w.as_ref().expect("not lost");
                            InView {
                                signal: &inp.signal,
                                // SAFETY: a speculative read (seqlock pattern), given to
                                // sources and modules only (sinks get validated copies
                                // above). The writer may store to these bytes during the
                                // step once it laps the window: every window is `check`ed
                                // after the step, and if one was lapped the step's outputs
                                // are discarded (zeroed, counted as an input overrun), so
                                // no torn value reaches a signal. What the step does
                                // besides its outputs is not covered: a module's own state
                                // or side effects (a print, a file) may hold torn values
                                // from that tick.
                                bytes: unsafe { w.bytes() },
                                rows: w.len(),
                                first: w.first(),
                            }
                        })
                        .collect()
                };
                let mut outs: Vec<OutBuf<'_>> = guards
                    .iter_mut()
                    .map(|(sig, g)| {
                        let sig: &Signal = sig;
                        OutBuf {
                            signal: sig,
                            bytes: g.bytes_mut(),
                            rows: sig.rows_per_tick(),
                        }
                    })
                    .collect();
                step_result = step.step(&info, &views, &mut outs);
                rows_out.extend(outs.iter().map(|o| o.rows));
                drop(outs);
                if windows.iter().flatten().any(|w| w.check().is_err()) {
                    // an input was overwritten while the step read it: what the step made
                    // of it is not trusted, the tick's outputs go out as a lost tick's do
                    report.input_overruns += 1;
                    for (k, (sig, g)) in guards.iter_mut().enumerate() {
                        g.bytes_mut().fill(0);
                        rows_out[k] = if sig.variable { 0 } else { sig.rows_per_tick() };
                    }
                }
            }
            if every > 1 {
                for ((sig, g), h) in guards.iter_mut().zip(held.iter_mut()) {
                    if !sig.variable {
                        h.copy_from_slice(g.bytes_mut());
                    }
                }
            }
            for ((sig, g), rows) in guards.into_iter().zip(rows_out) {
                if sig.variable {
                    g.commit_n(rows.min(sig.rows_per_tick()))?;
                } else {
                    g.commit_stamped(Some(deadline_ns));
                }
            }
            step_result.map_err(|source| ProcessError::Step { tick: k, source })?;
            for o in &self.outputs {
                board.set_tick_end(o.sig_index, k, o.writer.written());
            }
            let done = rtloop_sys::monotonic_ns();
            board.finish_tick(me, k);
            exec.record(done - ready);
            after_start.record(done.saturating_sub(start_ns));
            board.record_exec(me, done - ready);
            report.ticks = k + 1;
            if board.stop_at() <= k + 1 {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// Run the process `args` names to its end: a Rust module (its compiled library is in the
/// role), a driver (source or sink) or a block. Python modules run in `python -m rtloop.runtime`.
pub fn run_process(args: &ChildArgs) -> Result<(), ProcessError> {
    match &args.module_so {
        Some(so) => run_rust_module(args, so),
        None => run_driver_process(args),
    }
}

/// Open a Rust module's process: load its compiled library, give it its options, run its
/// `init` outside the ticks, then its `step` every tick and its `finish` at the end.
fn run_rust_module(
    ca: &crate::process::ChildArgs,
    so: &std::path::Path,
) -> Result<(), ProcessError> {
    let mut p = crate::process::Process::open(ca)?;
    let spec = p.spec().clone();
    let signals = |names: &[String]| -> Vec<crate::model::Signal> {
        names
            .iter()
            .filter_map(|n| p.model().signals.iter().find(|s| &s.name == n).cloned())
            .collect()
    };
    let (ins, outs) = (signals(&spec.inputs), signals(&spec.outputs));
    // options first, then the module's init (outside the ticks), then the ticks
    match crate::rust_module::RustModule::load(so)
        .and_then(|mut m| m.set_options(&spec.options).map(|()| m))
        .and_then(|mut m| m.init(&ins, &outs).map(|()| m))
    {
        Ok(m) => p.run(&mut RustStep(m)),
        Err(e) => {
            p.fail(&e.to_string());
            Err(e.into())
        }
    }
}

/// A loaded Rust module as a [`Step`].
struct RustStep(crate::rust_module::RustModule);

impl crate::process::Step for RustStep {
    fn step(
        &mut self,
        t: &crate::drivers::TickInfo,
        inputs: &[crate::drivers::InView<'_>],
        outputs: &mut [crate::drivers::OutBuf<'_>],
    ) -> Result<(), StepError> {
        Ok(self.0.step(t.tick, inputs, outputs)?)
    }

    fn finish(&mut self) -> Result<String, StepError> {
        Ok(self.0.finish()?)
    }
}

/// Open and run a driver process (sources and sinks) or a block module to its end.
pub fn run_driver_process(args: &ChildArgs) -> Result<(), ProcessError> {
    let mut p = Process::open(args)?;
    let spec = p.spec().clone();
    let sigs = |names: &[String]| -> Vec<Signal> {
        names
            .iter()
            .filter_map(|n| p.model().signals.iter().find(|s| &s.name == n).cloned())
            .collect()
    };
    if let Body::Block { block, options } = &spec.body {
        let (ins, outs) = (sigs(&spec.inputs), sigs(&spec.outputs));
        let opened = match (ins.first(), outs.first()) {
            (Some(input), Some(output)) => crate::blocks::open(
                block,
                options,
                &crate::blocks::Ports {
                    input,
                    output,
                    tick: p.model().config.tick,
                },
            )
            .map_err(|e| {
                e.iter()
                    .map(|e| e.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            }),
            _ => Err("a block reads one signal and writes one".to_owned()),
        };
        return match opened {
            Ok(mut step) => p.run(step.as_mut()),
            Err(message) => {
                let e = ProcessError::Block {
                    block: block.clone(),
                    message,
                };
                p.fail(&e.to_string());
                Err(e)
            }
        };
    }
    let Body::Driver { driver, options } = &spec.body else {
        return Err(ProcessError::NotADriver(spec.name.clone()));
    };
    let ctx = crate::drivers::DriverCtx {
        model: p.model().name.clone(),
        tick: p.model().config.tick,
        out_dir: args.out_dir.clone(),
        process: spec.name.clone(),
    };
    let result = match spec.kind {
        Kind::Source => crate::drivers::open_source(driver, options, &sigs(&spec.outputs), &ctx)
            .map(|s| Box::new(SourceStep(s)) as Box<dyn Step>),
        _ => crate::drivers::open_sink(driver, options, &sigs(&spec.inputs), &ctx)
            .map(|s| Box::new(SinkStep(s)) as Box<dyn Step>),
    };
    match result {
        Ok(mut step) => p.run(step.as_mut()),
        Err(source) => {
            let e = ProcessError::Driver {
                driver: driver.clone(),
                source,
            };
            p.fail(&e.to_string());
            Err(e)
        }
    }
}

impl Process {
    /// Report a failure before the loop started (the board and the run directory say so).
    pub fn fail(&self, msg: &str) {
        let report = ProcessReport {
            name: self.spec().name.clone(),
            error: Some(msg.to_string()),
            ..ProcessReport::default()
        };
        let path = self.args.run_dir.join(format!("{}.json", report.name));
        let _ = std::fs::write(&path, serde_json::to_vec(&report).unwrap_or_default());
        self.board.set_state(self.index, ProcState::Failed);
    }
}
