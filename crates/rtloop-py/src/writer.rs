//! `_rtloop.Writer`: the stream's one writer. Writes copy a numpy array in, or reserve room,
//! fill a buffer and commit it.

use std::time::{Duration, Instant};

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use rtloop_stream::{Event, WriteError, Writer, DEFAULT_LOSSLESS_TIMEOUT};

use crate::blocking::{sliced, timeout_from_py, Slice, SLICE};
use crate::convert::{
    array_dtype, event_value, new_array, set_readonly, with_array_bytes, with_dtype,
};
use crate::errors::{py_err, IncompleteWriteError, RtloopError, ToPyErr};

/// The one writer of a stream.
#[pyclass(module = "rtloop._rtloop", name = "Writer")]
pub(crate) struct PyWriter {
    writer: Option<Writer>,
    /// The open reservation (made by `reserve`, not yet committed or cancelled).
    pending: Option<Pending>,
    /// How long a write waits for lossless readers before `WriteTimeoutError`.
    timeout: Duration,
}

/// An open reservation: its samples and the buffer handed to Python for them.
struct Pending {
    n: usize,
    /// A `(n, n_channels)` array of the stream's dtype that this module made. It is not the
    /// stream's memory: a view of it (or of a slice of it) that Python keeps after `commit`
    /// can change only this buffer, never samples readers were given. `commit` copies its
    /// rows into the reserved slots, then makes it read-only, as `cancel` does.
    buf: Py<PyAny>,
}

impl Pending {
    /// The reservation is over: writes through the buffer Python holds raise from now on.
    fn finish(self, py: Python<'_>) -> PyResult<()> {
        set_readonly(self.buf.bind(py))
    }
}

impl PyWriter {
    pub(crate) fn new(writer: Writer) -> Self {
        PyWriter {
            writer: Some(writer),
            pending: None,
            timeout: DEFAULT_LOSSLESS_TIMEOUT,
        }
    }

    fn writer(&mut self) -> PyResult<&mut Writer> {
        self.writer
            .as_mut()
            .ok_or_else(|| RtloopError::new_err("this writer is closed"))
    }

    fn no_pending(&self) -> PyResult<()> {
        match &self.pending {
            Some(Pending { n, .. }) => Err(RtloopError::new_err(format!(
                "a reservation of {n} samples is open: commit() or cancel() it first"
            ))),
            None => Ok(()),
        }
    }

    /// Wait (GIL released, interruptible) until `n` samples can be reserved: lossless readers
    /// may hold the writer back. Afterwards `reserve(n)` returns at once.
    fn wait_room(&mut self, py: Python<'_>, n: usize) -> PyResult<()> {
        let total = self.timeout;
        let started = Instant::now();
        let writer = self.writer()?;
        let r = sliced(py, Some(total), |slice| {
            writer.set_lossless_timeout(slice.max(Duration::from_millis(1)).min(SLICE));
            // waits without reserving: a reservation, even one dropped at once, would mark
            // its slots as overwritten for readers
            match writer.wait_room(n) {
                Ok(()) => Slice::Done(Ok(())),
                Err(e @ WriteError::Timeout { .. }) => Slice::Again(e),
                Err(e) => Slice::Done(Err(e)),
            }
        })?;
        writer.set_lossless_timeout(total);
        r.map_err(|e| match e {
            WriteError::Timeout {
                reader_pid,
                reader_cursor,
                needed_end,
                ..
            } => WriteError::Timeout {
                reader_pid,
                reader_cursor,
                needed_end,
                waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            }
            .to_py_err(),
            other => other.to_py_err(),
        })
    }

    /// Write `bytes` (whole samples of the stream's dtype), piece by piece if larger than
    /// the capacity; waiting for lossless readers releases the GIL.
    fn write_bytes(
        &mut self,
        py: Python<'_>,
        bytes: &[u8],
        stamp_ns: Option<u64>,
    ) -> PyResult<u64> {
        // the writer's own check: whole samples of the stream's channel count
        let requested = self.writer()?.whole_samples(bytes.len()).map_err(py_err)? as u64;
        let info = self.writer()?.info().clone();
        let sb = info.sample_bytes;
        let max_piece = usize::try_from(info.capacity).unwrap_or(usize::MAX) * sb;
        let start = self.writer()?.written();
        for piece in bytes.chunks(max_piece.max(sb)) {
            let n = piece.len() / sb;
            let committed = self.writer()?.written() - start;
            let got = self
                .wait_room(py, n)
                .and_then(|()| self.writer()?.reserve(n).map_err(py_err));
            let mut g = match got {
                Ok(g) => g,
                Err(e) if committed == 0 => return Err(e),
                // a later piece failed: say how much of this chunk is in the stream
                Err(cause) => {
                    let err = IncompleteWriteError::new_err(format!(
                        "wrote {committed} of {requested} samples, then: {cause}"
                    ));
                    Python::attach(|py| {
                        let v = err.value(py);
                        v.setattr("committed", committed)?;
                        v.setattr("requested", requested)?;
                        err.set_cause(py, Some(cause));
                        Ok::<(), PyErr>(())
                    })?;
                    return Err(err);
                }
            };
            g.bytes_mut().copy_from_slice(piece);
            g.commit_stamped(stamp_ns);
        }
        Ok(self.writer()?.written())
    }
}

#[pymethods]
impl PyWriter {
    /// Write a C-contiguous numpy array of the stream's dtype holding whole samples
    /// (sample-major). `stamp` is a CLOCK_MONOTONIC time in seconds for all of them (default:
    /// now). Returns the new `written`.
    #[pyo3(signature = (data, stamp=None))]
    fn write(
        &mut self,
        py: Python<'_>,
        data: &Bound<'_, PyUntypedArray>,
        stamp: Option<f64>,
    ) -> PyResult<u64> {
        let _call = crate::exit::call(py);
        self.no_pending()?;
        let expected = self.writer()?.info().dtype;
        let got = array_dtype(data)?;
        self.writer()?.check_dtype(got).map_err(py_err)?;
        if !data.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "the array must be C-contiguous (numpy.ascontiguousarray makes it so)",
            ));
        }
        let stamp_ns = match stamp {
            None => None,
            Some(s) if s.is_finite() && s >= 0.0 => Some((s * 1e9).round() as u64),
            Some(s) => {
                return Err(PyValueError::new_err(format!(
                    "Invalid value for the 'stamp' parameter. Allowed values are seconds of CLOCK_MONOTONIC >= 0, but got {s} instead."
                )))
            }
        };
        with_dtype!(expected, T => with_array_bytes::<T, u64>(data.as_any(), |bytes| {
            self.write_bytes(py, bytes, stamp_ns)
        }))
    }

    /// Reserve `n` samples and return a writable `(n, n_channels)` numpy buffer for them;
    /// fill it, then `commit()` copies it into the stream. After `commit` or `cancel` the
    /// buffer is read-only, and no view of it can reach the stream's memory. Waiting for
    /// lossless readers releases the GIL.
    fn reserve<'py>(&mut self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyAny>> {
        let _call = crate::exit::call(py);
        self.no_pending()?;
        self.wait_room(py, n)?;
        let writer = self.writer()?;
        let (dtype, n_channels) = (writer.info().dtype, writer.info().n_channels);
        // The reservation is announced to readers now, as in Rust (`reserved` covers its
        // slots until the writer passes them), and committed later; the guard only borrows
        // the writer and ends here. Python fills a buffer of its own, not the slots: a
        // numpy view of the stream's memory would outlive the reservation (views derived
        // from it stay writable whatever the flags of the first one say).
        writer.reserve(n).map_err(py_err)?;
        let buf = new_array(py, dtype, n, n_channels);
        self.pending = Some(Pending {
            n,
            buf: buf.clone().unbind(),
        });
        Ok(buf)
    }

    /// Publish the first `n` rows of the open reservation's buffer (all of them by default).
    #[pyo3(signature = (n=None))]
    fn commit(&mut self, py: Python<'_>, n: Option<usize>) -> PyResult<u64> {
        let _call = crate::exit::call(py);
        let Some(Pending { n: reserved, buf }) = &self.pending else {
            return Err(RtloopError::new_err("nothing to commit: reserve(n) first"));
        };
        let (reserved, buf) = (*reserved, buf.clone_ref(py));
        let k = n.unwrap_or(reserved);
        if k > reserved {
            return Err(WriteError::CommitTooLarge {
                requested: k as u64,
                reserved: reserved as u64,
            }
            .to_py_err());
        }
        let writer = self.writer()?;
        let dtype = writer.info().dtype;
        let sb = writer.info().sample_bytes;
        with_dtype!(dtype, T => with_array_bytes::<T, ()>(buf.bind(py), |bytes| {
            // the same reservation again: room for it was already made, so this returns at
            // once; the slots get the buffer's rows, then the first `k` are published
            let mut g = writer.reserve(reserved).map_err(py_err)?;
            g.bytes_mut()[..k * sb].copy_from_slice(&bytes[..k * sb]);
            g.commit_n(k).map_err(py_err)
        }))?;
        let written = writer.written();
        if let Some(p) = self.pending.take() {
            p.finish(py)?;
        }
        Ok(written)
    }

    /// Drop the open reservation without publishing anything.
    fn cancel(&mut self, py: Python<'_>) -> PyResult<()> {
        let _call = crate::exit::call(py);
        match self.pending.take() {
            Some(p) => p.finish(py),
            None => Ok(()),
        }
    }

    /// Samples of the open reservation, if any.
    #[getter]
    fn pending(&self) -> Option<usize> {
        self.pending.as_ref().map(|p| p.n)
    }

    /// Append an event; returns its index. `kind` and `value` are `str`, `int` (int64),
    /// `float` (float64) or a `(dtype_name, bytes)` pair for a numeric array.
    #[pyo3(signature = (kind, value, sample, offset=0, duration=0))]
    fn push_event(
        &mut self,
        kind: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sample: u64,
        offset: i64,
        duration: u64,
    ) -> PyResult<u64> {
        let ev = Event {
            kind: event_value(kind, "type")?,
            value: event_value(value, "value")?,
            sample,
            offset,
            duration,
            stamp_ns: 0,
        };
        self.writer()?.push_event(&ev).map_err(py_err)
    }

    /// Tell readers the writer is alive although it has nothing to commit.
    fn heartbeat(&mut self) -> PyResult<()> {
        self.writer()?.heartbeat();
        Ok(())
    }

    /// Samples committed so far.
    #[getter]
    fn written(&mut self) -> PyResult<u64> {
        Ok(self.writer()?.written())
    }

    /// Events pushed so far.
    #[getter]
    fn events_written(&mut self) -> PyResult<u64> {
        Ok(self.writer()?.events_written())
    }

    /// Seconds a write waits for lossless readers to make room (default 5).
    #[getter]
    fn get_timeout(&self) -> f64 {
        self.timeout.as_secs_f64()
    }

    #[setter]
    fn set_timeout(&mut self, timeout: Option<f64>) -> PyResult<()> {
        match timeout_from_py(timeout)? {
            Some(t) => self.timeout = t,
            None => {
                return Err(PyTypeError::new_err(
                    "Invalid value for the 'timeout' parameter. Allowed values are a finite number of seconds >= 0, but got None instead.",
                ))
            }
        }
        Ok(())
    }

    /// Whether the writer is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.writer.is_none()
    }

    /// Give the stream up (readers then see a cleanly closed writer).
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        self.writer = None;
        match self.pending.take() {
            Some(p) => p.finish(py),
            None => Ok(()),
        }
    }
}
