//! `_rtloop.Writer`: the stream's one writer. Writes copy a numpy array in, or reserve a
//! writable zero-copy view, fill it and commit.

use std::time::{Duration, Instant};

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use rtloop_stream::{Event, WriteError, Writer, DEFAULT_LOSSLESS_TIMEOUT};

use crate::blocking::{sliced, timeout_from_py, Slice, SLICE};
use crate::convert::{array_dtype, event_value, reservation_view, with_array_bytes, with_dtype};
use crate::errors::{py_err, IncompleteWriteError, RtloopError, ToPyErr};

/// The one writer of a stream.
#[pyclass(module = "rtloop._rtloop", name = "Writer")]
pub(crate) struct PyWriter {
    writer: Option<Writer>,
    /// Samples of an open reservation (made by `reserve`, not yet committed).
    pending: Option<usize>,
    /// How long a write waits for lossless readers before `WriteTimeoutError`.
    timeout: Duration,
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
        match self.pending {
            Some(n) => Err(RtloopError::new_err(format!(
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
        let info = self.writer()?.info().clone();
        let sb = info.sample_bytes;
        if bytes.len() % sb != 0 {
            return Err(WriteError::ChannelMismatch {
                name: info.name.clone(),
                n_channels: info.n_channels,
                values: bytes.len() / info.dtype.itemsize(),
            }
            .to_py_err());
        }
        let max_piece = usize::try_from(info.capacity).unwrap_or(usize::MAX) * sb;
        let start = self.writer()?.written();
        let requested = (bytes.len() / sb) as u64;
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

    /// Reserve `n` samples and return them as a writable `(n, n_channels)` numpy view of the
    /// stream's memory; fill it, then `commit()`. Waiting for lossless readers releases the
    /// GIL.
    fn reserve<'py>(&mut self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyAny>> {
        self.no_pending()?;
        self.wait_room(py, n)?;
        let writer = self.writer()?;
        let first = writer.written();
        let stream = writer.stream().clone();
        // the guard only borrows the writer and ends here; the reservation itself (announced
        // to readers by `reserve`) stays open until `commit` publishes it
        let ptr = writer.reserve(n).map_err(py_err)?.bytes_mut().as_mut_ptr();
        let view = reservation_view(py, stream, first, n, ptr)?;
        self.pending = Some(n);
        Ok(view)
    }

    /// Publish the first `n` samples of the open reservation (all of them by default).
    #[pyo3(signature = (n=None))]
    fn commit(&mut self, n: Option<usize>) -> PyResult<u64> {
        let Some(reserved) = self.pending else {
            return Err(RtloopError::new_err("nothing to commit: reserve(n) first"));
        };
        let k = n.unwrap_or(reserved);
        if k > reserved {
            return Err(WriteError::CommitTooLarge {
                requested: k as u64,
                reserved: reserved as u64,
            }
            .to_py_err());
        }
        let writer = self.writer()?;
        // the same reservation again: room for it was already made, so this returns at once
        let g = writer.reserve(reserved).map_err(py_err)?;
        g.commit_n(k).map_err(py_err)?;
        let written = writer.written();
        self.pending = None;
        Ok(written)
    }

    /// Drop the open reservation without publishing anything.
    fn cancel(&mut self) {
        self.pending = None;
    }

    /// Samples of the open reservation, if any.
    #[getter]
    fn pending(&self) -> Option<usize> {
        self.pending
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
    fn close(&mut self) {
        self.pending = None;
        self.writer = None;
    }
}
