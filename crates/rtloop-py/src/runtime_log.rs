//! `rtloop.load_log`: rtloop-runtime's reader of the `logger` sink's log, its values as
//! numpy arrays. The log's tables are rtloop-runtime's; no SQL is written here or in Python.

use numpy::{PyArray1, PyArrayMethods as _};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use rtloop_runtime::drivers::logger::read::{read_log as read, LoggedSignal, Values};

use crate::errors::py_err;

/// The values as a numpy array of their dtype, shaped `shape`.
fn array<'py>(py: Python<'py>, values: Values, shape: Vec<usize>) -> PyResult<Bound<'py, PyAny>> {
    macro_rules! shaped {
        ($v:expr) => {
            PyArray1::from_vec(py, $v).reshape(shape)?.into_any()
        };
    }
    Ok(match values {
        Values::U8(v) => shaped!(v),
        Values::U16(v) => shaped!(v),
        Values::U32(v) => shaped!(v),
        Values::U64(v) => shaped!(v),
        Values::I8(v) => shaped!(v),
        Values::I16(v) => shaped!(v),
        Values::I32(v) => shaped!(v),
        Values::I64(v) => shaped!(v),
        Values::F32(v) => shaped!(v),
        Values::F64(v) => shaped!(v),
    })
}

/// A signal as the tuple `rtloop.log.LoggedSignal` is made of.
fn signal<'py>(py: Python<'py>, s: LoggedSignal) -> PyResult<Bound<'py, PyTuple>> {
    let data_shape = s.data_shape();
    let fields: [Bound<'py, PyAny>; 9] = [
        s.name.into_pyobject(py)?.into_any(),
        s.dtype.name().into_pyobject(py)?.into_any(),
        PyTuple::new(py, &s.shape)?.into_any(),
        pyo3::types::PyBool::new(py, s.variable)
            .to_owned()
            .into_any(),
        PyArray1::from_vec(py, s.tick).into_any(),
        array(py, s.data, data_shape)?,
        PyArray1::from_vec(py, s.rows).into_any(),
        PyTuple::new(py, &s.channels)?.into_any(),
        PyTuple::new(py, &s.units)?.into_any(),
    ];
    PyTuple::new(py, fields)
}

/// Read the runtime log at `path`: `(ticks, signals)`, `ticks` a dict of int64 arrays (tick,
/// deadline_ns, start_ns, monotonic_ns, realtime_ns), `signals` a tuple per logged signal
/// in the model's order: `(name, dtype, shape, variable, tick, data, rows, channels,
/// units)`, `data` shaped `(ticks, *shape)` for a fixed signal and `(sum(rows), *shape[1:])`
/// for a variable one. The GIL is released while the file is read. FileNotFoundError if no
/// file is there, ValueError if it is not a runtime log.
#[pyfunction]
pub(crate) fn read_log<'py>(
    py: Python<'py>,
    path: std::path::PathBuf,
) -> PyResult<(Bound<'py, PyDict>, Vec<Bound<'py, PyTuple>>)> {
    let log = crate::exit::detach(py, || read(&path)).map_err(py_err)?;
    let ticks = PyDict::new(py);
    let t = log.ticks;
    for (name, column) in [
        ("tick", t.tick),
        ("deadline_ns", t.deadline_ns),
        ("start_ns", t.start_ns),
        ("monotonic_ns", t.monotonic_ns),
        ("realtime_ns", t.realtime_ns),
    ] {
        ticks.set_item(name, PyArray1::from_vec(py, column))?;
    }
    let signals = log
        .signals
        .into_iter()
        .map(|s| signal(py, s))
        .collect::<PyResult<Vec<_>>>()?;
    Ok((ticks, signals))
}
