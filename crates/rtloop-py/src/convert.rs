//! Conversions between rtloop's Rust values and Python / numpy ones: dtype dispatch, the
//! zero-copy numpy views over the stream mapping, events, statistics.

use numpy::ndarray::ArrayView2;
use numpy::{
    Element, PyArray1, PyArray2, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyInt, PyString, PyTuple};
use rtloop_stream::{DType, Event, EventValue, Liveness, StreamStats, Window};

/// Run `$body` with `$T` the Rust type of `$dtype`.
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            ::rtloop_stream::DType::U8 => {
                type $T = u8;
                $body
            }
            ::rtloop_stream::DType::U16 => {
                type $T = u16;
                $body
            }
            ::rtloop_stream::DType::U32 => {
                type $T = u32;
                $body
            }
            ::rtloop_stream::DType::U64 => {
                type $T = u64;
                $body
            }
            ::rtloop_stream::DType::I8 => {
                type $T = i8;
                $body
            }
            ::rtloop_stream::DType::I16 => {
                type $T = i16;
                $body
            }
            ::rtloop_stream::DType::I32 => {
                type $T = i32;
                $body
            }
            ::rtloop_stream::DType::I64 => {
                type $T = i64;
                $body
            }
            ::rtloop_stream::DType::F32 => {
                type $T = f32;
                $body
            }
            ::rtloop_stream::DType::F64 => {
                type $T = f64;
                $body
            }
        }
    };
}
pub(crate) use with_dtype;

/// Nanoseconds of CLOCK_MONOTONIC as float seconds (pylsl's `local_clock` unit).
#[allow(clippy::cast_precision_loss)]
pub(crate) fn ns_to_s(ns: u64) -> f64 {
    ns as f64 * 1e-9
}

/// The base object of a zero-copy read-only window: keeps the stream mapping alive and knows
/// which samples it shows, so validity can be checked after use.
#[pyclass(module = "rtloop._rtloop", name = "WindowBase", frozen)]
pub(crate) struct WindowBase {
    pub(crate) window: Window,
}

#[pymethods]
impl WindowBase {
    /// First sample index of the window.
    #[getter]
    fn first(&self) -> u64 {
        self.window.first()
    }

    /// One past the last sample index of the window.
    #[getter]
    fn end(&self) -> u64 {
        self.window.end()
    }

    /// Raise ``OverrunError`` if the writer may have overwritten part of the window.
    fn check(&self) -> PyResult<()> {
        self.window.check().map_err(crate::errors::py_err)
    }

    /// Whether the window was intact until now.
    fn valid(&self) -> bool {
        self.window.check().is_ok()
    }

    fn __repr__(&self) -> String {
        format!(
            "<rtloop window of samples [{}, {})>",
            self.window.first(),
            self.window.end()
        )
    }
}

/// A read-only `(n_samples, n_channels)` numpy view of `window`, whose base object keeps the
/// mapping alive.
pub(crate) fn window_view<'py>(
    py: Python<'py>,
    window: Window,
    n_channels: usize,
    dtype: DType,
) -> PyResult<Bound<'py, PyAny>> {
    let (rows, ptr) = (window.len(), window.as_ptr());
    let base = Bound::new(py, WindowBase { window })?.into_any();
    let arr = with_dtype!(dtype, T => {
        // SAFETY: `ptr` is the start of `rows` samples of `n_channels` values of T inside
        // the stream's doubled data mapping (one contiguous region even across the wrap),
        // aligned (page-aligned data region, sample size a multiple of T's size) and
        // non-null. The mapping is kept mapped by the `Window` inside `base`. The ndarray
        // view only carries the pointer, shape and strides to numpy and is dropped here.
        let view = unsafe { ArrayView2::<T>::from_shape_ptr((rows, n_channels), ptr.cast::<T>()) };
        // SAFETY: `base` becomes the numpy array's base object and owns an `Arc` of the
        // mapping, which is never remapped or moved while it lives, so the memory stays
        // valid for as long as the array (and any view of it) exists.
        unsafe { PyArray2::<T>::borrow_from_array(&view, base) }.into_any()
    });
    set_readonly(&arr)?;
    Ok(arr)
}

/// Mark a numpy array read-only.
pub(crate) fn set_readonly(arr: &Bound<'_, PyAny>) -> PyResult<()> {
    arr.getattr("flags")?.setattr("writeable", false)
}

/// A new zero-filled `(rows, n_channels)` array of `dtype`.
pub(crate) fn new_array<'py>(
    py: Python<'py>,
    dtype: DType,
    rows: usize,
    n_channels: usize,
) -> Bound<'py, PyAny> {
    with_dtype!(dtype, T => PyArray2::<T>::zeros(py, [rows, n_channels], false).into_any())
}

/// Run `f` on the bytes of a C-contiguous numpy array of element type `T` (read-only).
pub(crate) fn with_array_bytes<T: Element, R>(
    arr: &Bound<'_, PyAny>,
    f: impl FnOnce(&[u8]) -> PyResult<R>,
) -> PyResult<R> {
    let typed = arr.cast::<numpy::PyArrayDyn<T>>()?;
    let ro = typed.try_readonly()?;
    let values = ro
        .as_slice()
        .map_err(|_| PyValueError::new_err("the array must be C-contiguous"))?;
    // SAFETY: numpy's sample element types are plain old data without padding, so their
    // memory may be viewed as bytes; the slice borrows `ro`, which keeps the array borrowed.
    let bytes = unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    };
    f(bytes)
}

/// Run `f` on the bytes of a writable C-contiguous numpy array of element type `T`.
pub(crate) fn with_array_bytes_mut<T: Element, R>(
    arr: &Bound<'_, PyAny>,
    f: impl FnOnce(&mut [u8]) -> R,
) -> PyResult<R> {
    let typed = arr.cast::<numpy::PyArrayDyn<T>>()?;
    let mut rw = typed.try_readwrite()?;
    let values = rw
        .as_slice_mut()
        .map_err(|_| PyValueError::new_err("the array must be C-contiguous"))?;
    let len = std::mem::size_of_val(values);
    // SAFETY: as in `with_array_bytes`; any byte pattern is a valid value of these types,
    // so writing bytes cannot create an invalid value. The slice borrows `rw` exclusively.
    let bytes = unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<u8>(), len) };
    Ok(f(bytes))
}

/// The stream dtype of a numpy array, or a `TypeError` naming the allowed ones.
pub(crate) fn array_dtype(arr: &Bound<'_, PyUntypedArray>) -> PyResult<DType> {
    let d = arr.dtype();
    // the numeric types from the descriptor's fields: `dtype.name` is a property written in
    // Python, and Python code run from here lets a daemon thread be ended in the middle of
    // this call at interpreter exit (see `exit`); other types only to name them in the error
    let base = match d.kind() {
        b'f' => Some("float"),
        b'i' => Some("int"),
        b'u' => Some("uint"),
        _ => None,
    };
    let name: String = match base {
        Some(b) => format!("{b}{}", d.itemsize() * 8),
        None => d.getattr("name")?.extract()?,
    };
    name.parse::<DType>()
        .map_err(|e| PyTypeError::new_err(e.to_string()))
}

/// `DType` from a numpy-style name, or a `TypeError` naming the allowed ones.
pub(crate) fn parse_dtype(name: &str) -> PyResult<DType> {
    name.parse::<DType>()
        .map_err(|e| PyTypeError::new_err(e.to_string()))
}

/// An event's `type` or `value` from Python: `str`, `int` (int64), `float` (float64) or a
/// `(dtype_name, bytes)` pair for a numeric array.
pub(crate) fn event_value(v: &Bound<'_, PyAny>, what: &str) -> PyResult<EventValue> {
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(EventValue::Text(s.to_cow()?.into_owned()));
    }
    if v.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "Invalid type for the '{what}' parameter: bool is not an event value; use an int, a float, a str or a numeric numpy array."
        )));
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(EventValue::i64(v.extract::<i64>()?));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(EventValue::f64(v.extract::<f64>()?));
    }
    if let Ok(t) = v.cast::<PyTuple>() {
        if let Ok((name, bytes)) = t.extract::<(String, Vec<u8>)>() {
            let dtype = parse_dtype(&name)?;
            if bytes.len() % dtype.itemsize() != 0 {
                return Err(PyValueError::new_err(format!(
                    "{} bytes are not a whole number of {name} values",
                    bytes.len()
                )));
            }
            return Ok(EventValue::Array { dtype, bytes });
        }
    }
    Err(PyTypeError::new_err(format!(
        "Invalid type for the '{what}' parameter: expected a str, an int, a float or a (dtype name, bytes) pair, but got {} instead.",
        v.get_type().name()?
    )))
}

/// An event value for Python: text as `str`, a numeric array as `(dtype_name, bytes)`.
fn event_value_to_py<'py>(py: Python<'py>, v: &EventValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        EventValue::Text(s) => PyString::new(py, s).into_any(),
        EventValue::Array { dtype, bytes } => (dtype.name(), PyBytes::new(py, bytes))
            .into_pyobject(py)?
            .into_any(),
    })
}

/// An event as the tuple `(type, value, sample, offset, duration, timestamp)`.
pub(crate) fn event_to_py<'py>(py: Python<'py>, e: &Event) -> PyResult<Bound<'py, PyAny>> {
    Ok((
        event_value_to_py(py, &e.kind)?,
        event_value_to_py(py, &e.value)?,
        e.sample,
        e.offset,
        e.duration,
        ns_to_s(e.stamp_ns),
    )
        .into_pyobject(py)?
        .into_any())
}

/// The writer's state as a dict: `state` (`"none"`, `"active"`, `"closed"`, `"dead"`),
/// `pid`, and for an active writer `since_heartbeat` (seconds).
pub(crate) fn liveness_to_py<'py>(py: Python<'py>, l: Liveness) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    match l {
        Liveness::NoWriter => {
            d.set_item("state", "none")?;
            d.set_item("pid", py.None())?;
        }
        Liveness::Active {
            pid,
            since_heartbeat_ns,
        } => {
            d.set_item("state", "active")?;
            d.set_item("pid", pid)?;
            d.set_item("since_heartbeat", ns_to_s(since_heartbeat_ns))?;
        }
        Liveness::Closed => {
            d.set_item("state", "closed")?;
            d.set_item("pid", py.None())?;
        }
        Liveness::Dead { pid } => {
            d.set_item("state", "dead")?;
            d.set_item("pid", pid)?;
        }
    }
    Ok(d)
}

/// A stream's statistics as a dict (see `rtloop.Stream.stats`).
pub(crate) fn stats_to_py<'py>(py: Python<'py>, s: &StreamStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("written", s.written)?;
    d.set_item("capacity", s.capacity)?;
    d.set_item("occupancy", s.occupancy)?;
    d.set_item("percent_used", s.percent_used)?;
    d.set_item("high_water", s.high_water)?;
    d.set_item("overruns", s.overruns)?;
    d.set_item("lost_samples", s.lost_samples)?;
    d.set_item("events_written", s.events_written)?;
    d.set_item("commits", s.commits)?;
    d.set_item("writer", liveness_to_py(py, s.writer)?)?;
    let readers = s
        .readers
        .iter()
        .map(|r| {
            let rd = PyDict::new(py);
            rd.set_item("slot", r.slot)?;
            rd.set_item("pid", r.pid)?;
            rd.set_item(
                "mode",
                match r.mode {
                    rtloop_stream::ReaderMode::Latest => "latest",
                    rtloop_stream::ReaderMode::Lossless => "lossless",
                },
            )?;
            rd.set_item("cursor", r.cursor)?;
            rd.set_item("lag", r.lag)?;
            rd.set_item("lost", r.lost)?;
            rd.set_item("overruns", r.overruns)?;
            rd.set_item("alive", r.alive)?;
            Ok(rd)
        })
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("readers", readers)?;
    Ok(d)
}

/// float64 seconds from CLOCK_MONOTONIC ns stamps.
pub(crate) fn stamps_to_py<'py>(py: Python<'py>, stamps: &[u64]) -> Bound<'py, PyArray1<f64>> {
    PyArray1::from_iter(py, stamps.iter().map(|&ns| ns_to_s(ns)))
}
