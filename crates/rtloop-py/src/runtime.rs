//! The host of a Python module of a running model (`python -m rtloop.runtime ...`): the tick
//! loop is the runtime's own (Rust); each tick it hands the module's `step` numpy views of
//! its inputs (with history, read-only) and of its outputs (writable, straight into the
//! output streams' reserved space), so nothing is copied between processes.

use numpy::ndarray::{ArrayViewD, ArrayViewMutD, IxDyn};
use numpy::{PyArrayDyn, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use rtloop_runtime::drivers::{InView, OutBuf, TickInfo};
use rtloop_runtime::model::{Body, Signal};
use rtloop_runtime::process::{ChildArgs, Process, Step, StepError};

use crate::convert::with_dtype;

/// The base object of every view handed to a module: the memory belongs to the process's
/// streams, which stay mapped until the tick loop (and the module's `finish`) ends.
#[pyclass(frozen, module = "rtloop._rtloop")]
pub(crate) struct TickMemory;

fn input_shape(sig: &Signal, rows: usize) -> Vec<usize> {
    if sig.variable {
        let mut s = vec![rows];
        s.extend_from_slice(&sig.shape[1..]);
        s
    } else if sig.history > 1 {
        let mut s = vec![sig.history as usize];
        s.extend_from_slice(&sig.shape);
        s
    } else {
        sig.shape.clone()
    }
}

fn output_shape(sig: &Signal) -> Vec<usize> {
    sig.shape.clone()
}

/// A read-only numpy view of `bytes` as `shape` of the signal's dtype.
fn view_in<'py>(
    base: &Bound<'py, PyAny>,
    sig: &Signal,
    bytes: &[u8],
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let arr = with_dtype!(sig.dtype, T => {
        debug_assert_eq!(bytes.len(), shape.iter().product::<usize>() * std::mem::size_of::<T>());
        // SAFETY: `bytes` is the input's window in the stream's doubled mapping: contiguous,
        // aligned for T (page-aligned region, row size a multiple of T) and exactly
        // shape.product() values long. The mapping outlives every step call (the module's
        // process unmaps it only after the tick loop and `finish` returned).
        let v = unsafe { ArrayViewD::<T>::from_shape_ptr(IxDyn(shape), bytes.as_ptr().cast::<T>()) };
        // SAFETY: `base` (a TickMemory) becomes the base object; see above for the memory.
        unsafe { PyArrayDyn::<T>::borrow_from_array(&v, base.clone()) }.into_any()
    });
    let untyped = arr.cast::<PyUntypedArray>()?;
    // SAFETY: clearing NPY_ARRAY_WRITEABLE on an array we just created and nobody else
    // holds yet (numpy's own PyArray_CLEARFLAGS does exactly this store).
    unsafe {
        (*untyped.as_array_ptr()).flags &= !numpy::npyffi::NPY_ARRAY_WRITEABLE;
    }
    Ok(arr)
}

/// A writable numpy view of an output's reserved rows.
fn view_out<'py>(
    base: &Bound<'py, PyAny>,
    sig: &Signal,
    bytes: &mut [u8],
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    Ok(with_dtype!(sig.dtype, T => {
        // SAFETY: as in `view_in`, for the writer's reservation, which only this process
        // stores to until it commits after the step.
        let v = unsafe {
            ArrayViewMutD::<T>::from_shape_ptr(IxDyn(shape), bytes.as_mut_ptr().cast::<T>())
        };
        // SAFETY: as in `view_in`.
        unsafe { PyArrayDyn::<T>::borrow_from_array(&v.view(), base.clone()) }.into_any()
    }))
}

struct PyStep<'py> {
    py: Python<'py>,
    name: String,
    step: Bound<'py, PyAny>,
    finish: Option<Bound<'py, PyAny>>,
    base: Bound<'py, PyAny>,
    args: Vec<Bound<'py, PyAny>>,
    /// What the module's `init` returned: arrays passed after the outputs every tick.
    state: Vec<Bound<'py, PyAny>>,
}

fn describe(a: &Bound<'_, PyAny>) -> String {
    let shape = a
        .getattr("shape")
        .map_or_else(|_| "?".into(), |s| s.to_string());
    let dtype = a
        .getattr("dtype")
        .map_or_else(|_| a.get_type().to_string(), |d| d.to_string());
    format!("shape {shape} {dtype}")
}

impl PyStep<'_> {
    fn report(&self, tick: u64, e: &PyErr) -> String {
        eprintln!("module {:?} raised at tick {tick}:", self.name);
        e.print(self.py);
        format!("raised {e} (traceback above)")
    }

    /// A returned value is the module's outputs: one array for one output, else a tuple
    /// with one per output, each of exactly the signal's shape and dtype.
    fn store_returned(
        &self,
        ret: &Bound<'_, PyAny>,
        outputs: &mut [OutBuf<'_>],
    ) -> Result<(), String> {
        let items: Vec<Bound<'_, PyAny>> = if outputs.len() == 1 {
            vec![ret.clone()]
        } else if let Ok(t) = ret.cast::<PyTuple>() {
            t.iter().collect()
        } else if let Ok(l) = ret.cast::<PyList>() {
            l.iter().collect()
        } else {
            return Err(format!(
                "step returned {} but the module has {} outputs: return None (write into the \
                 output arrays) or a tuple of {} arrays",
                describe(ret),
                outputs.len(),
                outputs.len()
            ));
        };
        if items.len() != outputs.len() {
            return Err(format!(
                "step returned {} values for {} outputs",
                items.len(),
                outputs.len()
            ));
        }
        for (item, out) in items.iter().zip(outputs.iter_mut()) {
            let sig = out.signal;
            let mut want = output_shape(sig);
            let ok = item.cast::<PyUntypedArray>().ok().and_then(|a| {
                // a variable signal's tick carries the rows returned, up to its shape[0]
                let same_shape = a.shape() == want.as_slice()
                    || (sig.variable
                        && a.ndim() == want.len()
                        && a.shape()[0] <= want[0]
                        && a.shape()[1..] == want[1..]);
                let same_dtype = a.dtype().to_string() == sig.dtype.name();
                (same_shape && same_dtype).then_some(a.clone())
            });
            let Some(arr) = ok else {
                return Err(format!(
                    "step returned {} for signal {:?}, which is shape {:?} {}{}",
                    describe(item),
                    sig.name,
                    want,
                    sig.dtype,
                    if sig.variable {
                        " (variable: up to that many rows)"
                    } else {
                        ""
                    }
                ));
            };
            if sig.variable {
                want[0] = arr.shape()[0];
                out.rows = want[0];
            }
            let bytes = want.iter().product::<usize>() * sig.dtype.itemsize();
            // copy into the reserved rows (numpy handles any strides)
            let dst = view_out(&self.base, sig, &mut out.bytes[..bytes], &want)
                .map_err(|e| e.to_string())?;
            dst.call_method1("__setitem__", (pyo3::types::PyEllipsis::get(self.py), arr))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

impl Step for PyStep<'_> {
    fn step(
        &mut self,
        t: &TickInfo,
        inputs: &[InView<'_>],
        outputs: &mut [OutBuf<'_>],
    ) -> Result<(), StepError> {
        self.call_step(t, inputs, outputs)
            .map_err(|text| StepError::Python { text })
    }

    fn finish(&mut self) -> Result<String, StepError> {
        self.call_finish()
            .map_err(|text| StepError::Python { text })
    }
}

impl PyStep<'_> {
    /// One tick: the module's `step` over views of the inputs and outputs; the error is
    /// the exception's text (its traceback printed under the module's name).
    fn call_step(
        &mut self,
        t: &TickInfo,
        inputs: &[InView<'_>],
        outputs: &mut [OutBuf<'_>],
    ) -> Result<(), String> {
        self.args.clear();
        for i in inputs {
            let shape = input_shape(i.signal, i.rows);
            let a = view_in(&self.base, i.signal, i.bytes, &shape).map_err(|e| e.to_string())?;
            self.args.push(a);
        }
        for o in outputs.iter_mut() {
            let a = view_out(&self.base, o.signal, o.bytes, &output_shape(o.signal))
                .map_err(|e| e.to_string())?;
            self.args.push(a);
        }
        self.args.extend(self.state.iter().cloned());
        let args = PyTuple::new(self.py, self.args.drain(..)).map_err(|e| e.to_string())?;
        match self.step.call1(args) {
            Ok(ret) if ret.is_none() => Ok(()),
            Ok(ret) => self.store_returned(&ret, outputs),
            Err(e) => Err(self.report(t.tick, &e)),
        }
    }

    /// The module's `finish` (if any), and a note if numba compiled during the run.
    fn call_finish(&mut self) -> Result<String, String> {
        let mut text = match &self.finish {
            None => String::new(),
            Some(f) => match f.call0() {
                Ok(r) if r.is_none() => String::new(),
                Ok(r) => r.str().map_or_else(|_| String::new(), |s| s.to_string()),
                Err(e) => return Err(self.report(u64::MAX, &e)),
            },
        };
        // a numba step compiled for one signature before tick 0; more means numba compiled
        // during ticks (hundreds of ms each): say so in the report
        if let Ok(n) = self.step.getattr("signatures").and_then(|s| s.len()) {
            if n > 1 {
                if !text.is_empty() {
                    text.push_str("; ");
                }
                text.push_str(&format!(
                    "numba compiled {} more signature(s) during the run (each takes hundreds of ms inside a tick)",
                    n - 1
                ));
            }
        }
        Ok(text)
    }
}

/// Run one Python module process of a running model: `args` are the child arguments the
/// supervisor passed (`--model M --process P --run-dir D`). Returns the exit status.
#[pyfunction]
pub(crate) fn runtime_module(py: Python<'_>, args: Vec<String>) -> PyResult<i32> {
    let ca = ChildArgs::parse(&args)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    let mut p = match Process::open(&ca) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rtloop: process {:?}: {e}", ca.process);
            return Ok(1);
        }
    };
    let spec = p.spec().clone();
    let Body::Python { code, numba } = &spec.body else {
        eprintln!("rtloop: process {:?} is not a Python module", spec.name);
        return Ok(1);
    };
    let sig = |n: &String| p.model().signals.iter().find(|s| &s.name == n).cloned();
    let ins: Vec<Signal> = spec.inputs.iter().filter_map(sig).collect();
    let outs: Vec<Signal> = spec.outputs.iter().filter_map(sig).collect();
    let specs = |v: &[Signal], input: bool| -> Vec<(Vec<usize>, String)> {
        v.iter()
            .map(|s| {
                let shape = if input {
                    input_shape(s, s.rows_per_tick())
                } else {
                    output_shape(s)
                };
                (shape, s.dtype.name().to_string())
            })
            .collect()
    };
    let describe_signals = |v: &[Signal], input: bool| -> Vec<serde_json::Value> {
        v.iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name,
                    "shape": s.shape,
                    "array_shape": if input { input_shape(s, s.rows_per_tick()) } else { output_shape(s) },
                    "dtype": s.dtype.name(),
                    "history": s.history,
                    "variable": s.variable,
                    "channels": s.channels,
                })
            })
            .collect()
    };
    let context = serde_json::json!({
        "name": spec.name,
        "model": p.model().name,
        "tick_s": p.model().config.tick.as_secs_f64(),
        "every": spec.every,
        "out_dir": ca.out_dir,
        "options": spec.options,
        "inputs": describe_signals(&ins, true),
        "outputs": describe_signals(&outs, false),
    })
    .to_string();
    let loader = py.import("rtloop.runtime")?.getattr("_load_module")?;
    let loaded = loader.call1((
        code.display().to_string(),
        *numba,
        spec.name.clone(),
        specs(&ins, true),
        specs(&outs, false),
        context,
    ));
    type Loaded<'a> = (
        Bound<'a, PyAny>,
        Option<Bound<'a, PyAny>>,
        Vec<Bound<'a, PyAny>>,
    );
    let (step, finish, state) = match loaded.and_then(|r| r.extract::<Loaded<'_>>()) {
        Ok(v) => v,
        Err(e) => {
            eprintln!(
                "rtloop: module {:?} could not be loaded from {}:",
                spec.name,
                code.display()
            );
            e.print(py);
            p.fail(&format!("could not be loaded: {e}"));
            return Ok(1);
        }
    };
    let base = Bound::new(py, TickMemory)?.into_any();
    let mut s = PyStep {
        py,
        name: spec.name.clone(),
        step,
        finish,
        base,
        args: Vec::with_capacity(ins.len() + outs.len() + state.len()),
        state,
    };
    match p.run(&mut s) {
        Ok(()) => Ok(0),
        Err(e) => {
            eprintln!("rtloop: module {:?}: {e}", spec.name);
            Ok(1)
        }
    }
}

/// Run a model to its end in this process's supervisor (the library's
/// `rtloop_runtime::run::run`, the same `rtloop run` calls): its processes start as
/// `python -m rtloop child ...`. Returns `(exit code, report, message)` as `rtloop --json
/// run` would end: 0 and the report (Python objects, a dict); 1 and the report of a run that
/// failed (its `problem` says why); 2, no report and the message of a refused model. The run releases the GIL; Ctrl-C stops
/// the model at a tick boundary, then raises KeyboardInterrupt.
#[pyfunction]
#[pyo3(signature = (model, seconds=None, ticks=None, keep=false, out=None))]
pub(crate) fn runtime_run(
    py: Python<'_>,
    model: std::path::PathBuf,
    seconds: Option<f64>,
    ticks: Option<u64>,
    keep: bool,
    out: Option<std::path::PathBuf>,
) -> PyResult<(i32, Option<Py<PyAny>>, String)> {
    use rtloop_runtime::run::{RunError, RunOptions};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let stop = Arc::new(AtomicBool::new(false));
    let opts = RunOptions {
        seconds,
        ticks,
        keep,
        live_every: None,
        stop: stop.clone(),
        rtloop_command: rtloop_launch::rtloop_command,
        out_dir: out,
    };
    let mut interrupted = None;
    let result = std::thread::scope(|s| {
        let run = s.spawn(|| rtloop_runtime::run::run(&model, &opts));
        while !run.is_finished() {
            crate::exit::detach(py, || {
                std::thread::sleep(std::time::Duration::from_millis(50))
            });
            if interrupted.is_none() {
                if let Err(e) = py.check_signals() {
                    // the model stops at a tick boundary and reports; then re-raise
                    stop.store(true, Ordering::Relaxed);
                    interrupted = Some(e);
                }
            }
        }
        run.join()
    })
    .map_err(|_| pyo3::exceptions::PyRuntimeError::new_err("the model's supervisor panicked"))?;
    let out = match result {
        Ok(report) => {
            report.write_dir(&report.out_dir).map_err(|e| {
                pyo3::exceptions::PyOSError::new_err(format!("{}: {e}", report.out_dir.display()))
            })?;
            let code = i32::from(report.problem.is_some());
            (
                code,
                Some(crate::report::to_py(py, &report)?),
                String::new(),
            )
        }
        Err(
            e @ (RunError::Model(_) | RunError::TickTooShort { .. } | RunError::Compile { .. }),
        ) => (2, None, e.to_string()),
        Err(e) => return Err(pyo3::exceptions::PyRuntimeError::new_err(e.to_string())),
    };
    if let Some(e) = interrupted {
        return Err(e);
    }
    Ok(out)
}

/// Streams being recorded by this process (`rtloop_record::Session`, what `rtloop record`
/// runs): one thread per stream, none of which needs the GIL, so Python code running beside
/// never slows them down. `rtloop.record` / `rtloop.Recorder` wrap it.
#[pyclass(module = "rtloop._rtloop")]
pub(crate) struct RecordSession {
    inner: Option<rtloop_record::Session>,
    control: Option<rtloop_record::control::ControlSocket>,
}

#[pymethods]
impl RecordSession {
    /// Start recording `streams` into `out/<stream>/`, for `seconds` if given (else until
    /// `stop()` or every writer is gone), with the control socket (`rtloop record
    /// --control`) at `control` if given. A missing stream or an unwritable `out` raises
    /// RuntimeError and starts nothing; a control socket that cannot be made raises OSError
    /// and stops the recorders.
    #[new]
    #[pyo3(signature = (streams, out, seconds=None, control=None))]
    fn new(
        py: Python<'_>,
        streams: Vec<String>,
        out: std::path::PathBuf,
        seconds: Option<f64>,
        control: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        let cfg = rtloop_record::RecordConfig {
            duration: seconds
                .map(|s| crate::blocking::seconds_from_py("seconds", s))
                .transpose()?,
            ..rtloop_record::RecordConfig::default()
        };
        let session = rtloop_record::Session::start(&streams, &out, &cfg, false)
            .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
        // recording once every reader is registered (the GIL released while it waits); a
        // recorder that ended first raises with its own error
        let started = crate::exit::detach(py, || {
            session.wait_started(std::time::Duration::from_secs(30))
        });
        if let Err(e) = started {
            session.stop();
            let (_, errors) = session.join();
            let why = errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                if why.is_empty() {
                    e.to_string()
                } else {
                    format!("rtloop record failed: {why}")
                },
            ));
        }
        let control = match control.map(|p| session.serve_control(&p)).transpose() {
            Ok(c) => c,
            Err(e) => {
                session.stop();
                let _ = session.join();
                return Err(pyo3::exceptions::PyOSError::new_err(e.to_string()));
            }
        };
        Ok(RecordSession {
            inner: Some(session),
            control,
        })
    }

    /// True while any stream is still being recorded.
    #[getter]
    fn running(&self) -> bool {
        self.inner.as_ref().is_some_and(|s| !s.is_finished())
    }

    /// Stop every recorder, wait for them (the GIL released) and return their reports (a
    /// list, one dict per stream); a recorder that failed raises RuntimeError with its
    /// error. A second call returns an empty list.
    fn stop(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let Some(session) = self.inner.take() else {
            return crate::report::to_py(py, &Vec::<rtloop_record::RecordReport>::new());
        };
        let control = self.control.take();
        session.stop();
        // the GIL released: the socket's threads and the recorders end without Python
        let (reports, errors) = crate::exit::detach(py, move || {
            if let Some(c) = control {
                c.close();
            }
            session.join()
        });
        if !errors.is_empty() {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
                "rtloop record failed: {}",
                errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            )));
        }
        crate::report::to_py(py, &reports)
    }
}

/// Write the recording in `dir` to the XDF file `out` (`rtloop_record::xdf::write_recording`,
/// the one XDF implementation; `rtloop replay` reads what it writes). Returns the samples
/// written. ValueError for a dtype XDF cannot hold or a directory that is no recording,
/// OSError for a file that cannot be read or written.
#[pyfunction]
#[pyo3(signature = (dir, out, chunk=4096))]
pub(crate) fn xdf_from_recording(
    py: Python<'_>,
    dir: std::path::PathBuf,
    out: std::path::PathBuf,
    chunk: usize,
) -> PyResult<u64> {
    use rtloop_record::xdf::XdfWriteError;
    crate::exit::detach(py, || {
        rtloop_record::xdf::write_recording(&dir, &out, chunk)
    })
    .map_err(|e| match e {
        XdfWriteError::Io { .. } => pyo3::exceptions::PyOSError::new_err(e.to_string()),
        _ => pyo3::exceptions::PyValueError::new_err(e.to_string()),
    })
}
