//! `_rtloop.Reader`: a registered reader. Pulls copy into new numpy arrays; windows are
//! zero-copy read-only views of the stream's memory.

use std::time::Duration;

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rtloop_stream::{DType, ReadError, Reader, ReaderMode, WaitError};

use crate::blocking::{sliced, timeout_from_py, Slice};
use crate::convert::{
    event_to_py, liveness_to_py, new_array, stamps_to_py, window_view, with_array_bytes_mut,
    with_dtype,
};
use crate::errors::{py_err, RtloopError};

/// A registered reader of a stream.
#[pyclass(module = "rtloop._rtloop", name = "Reader")]
pub(crate) struct PyReader {
    reader: Option<Reader>,
}

impl PyReader {
    pub(crate) fn new(reader: Reader) -> Self {
        PyReader {
            reader: Some(reader),
        }
    }

    fn reader(&self) -> PyResult<&Reader> {
        self.reader
            .as_ref()
            .ok_or_else(|| RtloopError::new_err("this reader is closed"))
    }

    fn reader_mut(&mut self) -> PyResult<&mut Reader> {
        self.reader
            .as_mut()
            .ok_or_else(|| RtloopError::new_err("this reader is closed"))
    }

    fn shape(&self) -> PyResult<(DType, usize, usize)> {
        let info = self.reader()?.info();
        Ok((info.dtype, info.n_channels, info.sample_bytes))
    }

    /// Wait until `until` samples were written (GIL released, interruptible).
    fn wait_sliced(
        &self,
        py: Python<'_>,
        until: u64,
        timeout: Option<Duration>,
    ) -> PyResult<Result<u64, WaitError>> {
        let reader = self.reader()?;
        sliced(py, timeout, |slice| match reader.wait(until, Some(slice)) {
            Err(e @ WaitError::Timeout { .. }) => Slice::Again(e),
            other => Slice::Done(other),
        })
    }
}

#[pymethods]
impl PyReader {
    /// Copy up to `max_samples` of the next samples and advance. Waits up to `timeout`
    /// seconds (None: forever) for at least one sample; returns `(data, timestamps)` with
    /// `data` of shape `(n_samples, n_channels)` and `timestamps` float64 seconds of
    /// CLOCK_MONOTONIC. Raises `OverrunError` when lapped (the next pull continues from the
    /// oldest kept sample) and `WriterDeadError` when nothing is left and the writer died.
    #[pyo3(signature = (max_samples, timeout))]
    fn pull<'py>(
        &mut self,
        py: Python<'py>,
        max_samples: usize,
        timeout: Option<f64>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyArray1<f64>>)> {
        let _call = crate::exit::call(py);
        let timeout = timeout_from_py(timeout)?;
        let (dtype, n_channels, sb) = self.shape()?;
        let (cursor, available) = {
            let r = self.reader()?;
            (r.cursor(), r.available())
        };
        if available == 0 && max_samples > 0 && timeout != Some(Duration::ZERO) {
            match self.wait_sliced(py, cursor + 1, timeout)? {
                Ok(_) | Err(WaitError::Timeout { .. }) => {}
                Err(e) => return Err(py_err(e)),
            }
        }
        let reader = self.reader_mut()?;
        let n = usize::try_from(reader.available())
            .unwrap_or(usize::MAX)
            .min(max_samples)
            .min(usize::try_from(reader.info().capacity).unwrap_or(usize::MAX));
        let data = new_array(py, dtype, n, n_channels);
        let mut stamps = vec![0u64; n];
        let pulled = with_dtype!(dtype, T => with_array_bytes_mut::<T, _>(&data, |bytes| {
            reader.pull_into(&mut bytes[..n * sb], Some(&mut stamps), n)
        }))?
        .map_err(py_err)?;
        reader.sample_times(pulled.first + pulled.n as u64, &mut stamps[..pulled.n]);
        if pulled.n == n {
            Ok((data, stamps_to_py(py, &stamps)))
        } else {
            let rows = data.get_item(pyo3::types::PySlice::new(py, 0, pulled.n as isize, 1))?;
            Ok((rows, stamps_to_py(py, &stamps[..pulled.n])))
        }
    }

    /// Copy samples `[first, end)` and their timestamps (validated; the cursor does not
    /// move). Returns `(data, timestamps)`, `data` of shape `(end - first, n_channels)`.
    fn read<'py>(
        &self,
        py: Python<'py>,
        first: u64,
        end: u64,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyArray1<f64>>)> {
        let _call = crate::exit::call(py);
        let (dtype, n_channels, _) = self.shape()?;
        let reader = self.reader()?;
        if first > end {
            return Err(py_err(ReadError::Reversed { first, end }));
        }
        // refuse impossible windows before allocating room for them
        let (written, capacity) = (reader.written(), reader.info().capacity);
        if end > written {
            return Err(py_err(ReadError::NotYetWritten {
                first,
                end,
                written,
            }));
        }
        if end - first > capacity {
            return Err(py_err(ReadError::TooOld {
                first,
                end,
                oldest: written.saturating_sub(capacity),
                capacity,
            }));
        }
        let rows = usize::try_from(end - first).unwrap_or(usize::MAX);
        let data = new_array(py, dtype, rows, n_channels);
        let mut stamps = vec![0u64; rows];
        with_dtype!(dtype, T => with_array_bytes_mut::<T, _>(&data, |bytes| {
            reader.read_into(first, end, bytes, Some(&mut stamps))
        }))?
        .map_err(py_err)?;
        reader.sample_times(end, &mut stamps);
        Ok((data, stamps_to_py(py, &stamps)))
    }

    /// The timestamps (seconds, CLOCK_MONOTONIC) of samples `[first, end)`, validated;
    /// the samples themselves are not copied.
    fn stamps<'py>(
        &self,
        py: Python<'py>,
        first: u64,
        end: u64,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let _call = crate::exit::call(py);
        let reader = self.reader()?;
        if first > end {
            return Err(py_err(ReadError::Reversed { first, end }));
        }
        let capacity = reader.info().capacity;
        if end - first > capacity {
            return Err(py_err(ReadError::TooOld {
                first,
                end,
                oldest: reader.written().saturating_sub(capacity),
                capacity,
            }));
        }
        let mut stamps = vec![0u64; (end - first) as usize];
        reader
            .read_stamps(first, end, &mut stamps)
            .map_err(py_err)?;
        reader.sample_times(end, &mut stamps);
        Ok(stamps_to_py(py, &stamps))
    }

    /// A zero-copy read-only `(end - first, n_channels)` view of samples `[first, end)`.
    fn window<'py>(&self, py: Python<'py>, first: u64, end: u64) -> PyResult<Bound<'py, PyAny>> {
        let _call = crate::exit::call(py);
        let (dtype, n_channels, _) = self.shape()?;
        let w = self.reader()?.window(first, end).map_err(py_err)?;
        window_view(py, w, n_channels, dtype)
    }

    /// A zero-copy read-only view of the newest `n` samples (fewer if fewer were written).
    fn latest<'py>(&self, py: Python<'py>, n: u64) -> PyResult<Bound<'py, PyAny>> {
        let _call = crate::exit::call(py);
        let (dtype, n_channels, _) = self.shape()?;
        let w = self.reader()?.latest(n).map_err(py_err)?;
        window_view(py, w, n_channels, dtype)
    }

    /// Block until at least `until` samples were written; returns `written`. `timeout` in
    /// seconds, None = forever. Raises `TimeoutError` or `WriterDeadError`.
    #[pyo3(signature = (until, timeout=None))]
    fn wait(&self, py: Python<'_>, until: u64, timeout: Option<f64>) -> PyResult<u64> {
        let timeout = timeout_from_py(timeout)?;
        self.wait_sliced(py, until, timeout)?.map_err(py_err)
    }

    /// Move the cursor to sample `sample`.
    fn seek(&mut self, sample: u64) -> PyResult<()> {
        self.reader_mut()?.seek(sample).map_err(py_err)?;
        Ok(())
    }

    /// Move the event cursor (`pull_events` goes on from event `event`).
    fn seek_events(&mut self, event: u64) -> PyResult<()> {
        self.reader_mut()?.seek_events(event).map_err(py_err)
    }

    /// The oldest sample the stream still keeps.
    #[getter]
    fn oldest(&self) -> PyResult<u64> {
        Ok(self.reader()?.oldest())
    }

    /// The oldest event the stream still keeps.
    #[getter]
    fn oldest_event(&self) -> PyResult<u64> {
        Ok(self.reader()?.oldest_event())
    }

    /// Next sample `pull` delivers.
    #[getter]
    fn cursor(&self) -> PyResult<u64> {
        Ok(self.reader()?.cursor())
    }

    /// Samples waiting to be pulled.
    #[getter]
    fn available(&self) -> PyResult<u64> {
        Ok(self.reader()?.available())
    }

    /// Samples committed so far.
    #[getter]
    fn written(&self) -> PyResult<u64> {
        Ok(self.reader()?.written())
    }

    /// `"latest"` or `"lossless"`.
    #[getter]
    fn mode(&self) -> PyResult<&'static str> {
        Ok(match self.reader()?.mode() {
            ReaderMode::Latest => "latest",
            ReaderMode::Lossless => "lossless",
        })
    }

    /// Events pushed so far.
    #[getter]
    fn events_written(&self) -> PyResult<u64> {
        Ok(self.reader()?.events_written())
    }

    /// The writer's state (see `Stream.writer_liveness`).
    fn writer_liveness<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let _call = crate::exit::call(py);
        liveness_to_py(py, self.reader()?.writer_liveness())
    }

    /// Events `[first, end)` as `(type, value, sample, offset, duration, timestamp)` tuples.
    fn read_events<'py>(
        &self,
        py: Python<'py>,
        first: u64,
        end: u64,
    ) -> PyResult<Bound<'py, PyList>> {
        let _call = crate::exit::call(py);
        let events = self.reader()?.read_events(first, end).map_err(py_err)?;
        let items = events
            .iter()
            .map(|e| event_to_py(py, e))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// Events pushed since the last call (or since this reader registered).
    fn pull_events<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let _call = crate::exit::call(py);
        let events = self.reader_mut()?.pull_events().map_err(py_err)?;
        let items = events
            .iter()
            .map(|e| event_to_py(py, e))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// How long a wait spins before it sleeps, in seconds (default 20 µs).
    fn set_spin(&mut self, seconds: f64) -> PyResult<()> {
        let spin = timeout_from_py(Some(seconds))?.unwrap_or(Duration::ZERO);
        self.reader_mut()?.set_spin(spin);
        Ok(())
    }

    /// Whether the reader is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.reader.is_none()
    }

    /// Unregister (a lossless reader then no longer holds the writer back).
    fn close(&mut self) {
        self.reader = None;
    }
}
